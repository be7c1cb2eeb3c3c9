//! Plugins written in Python, JavaScript and Go on the real control plane: the memcached example
//! in each language (`plugins/memcached-py`, `plugins/memcached-js`, `plugins/memcached-go`,
//! built from source by `wasmop_e2e::polyglot`) runs in the host like the Rust one — a
//! `Memcached` gets its Deployment, applied by `wasmop/memcached` and controlled by the CR, and
//! a resize follows.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use kube::api::DynamicObject;
use serde_json::{Value, json};
use wasmop::runtime::Runtime;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{Host, api_for, apply, apply_file, eventually};
use wasmop_e2e::plugins::workspace;
use wasmop_e2e::polyglot::{memcached_go, memcached_js, memcached_py};

/// Long enough for a debug host to compile a 12–18 MB component on a busy machine.
const WAIT: Duration = Duration::from_secs(120);

fn memcached(name: &str, size: i64) -> Value {
    json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"size": size}})
}

/// The Deployment `name` once its replicas equal `replicas`.
async fn deployment(client: &kube::Client, name: &str, replicas: i64) -> Result<DynamicObject> {
    let api = api_for(client, "apps/v1", "Deployment", Some("default")).await?;
    eventually(&format!("Deployment {name} with {replicas} replicas"), WAIT, || async {
        let d = api.get_opt(name).await?;
        Ok(d.filter(|d| d.data.pointer("/spec/replicas").and_then(Value::as_i64) == Some(replicas)))
    })
    .await
}

async fn reconciles_memcached(plugin: &Path) -> Result<()> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/memcached.yaml")).await?;
    // The artifact cache keeps the compiled component between runs (it takes seconds to build).
    let runtime = Runtime::builder().artifact_dir(Some(std::env::temp_dir().join("wasmop-polyglot-e2e-artifacts"))).build()?;
    let _host = Host::start_with(client.clone(), &[plugin], Host::test_config(), runtime).await?;
    let cr = apply(&client, &memcached("sample", 2)).await?;

    let d = deployment(&client, "sample", 2).await?;
    let owner = &d.metadata.owner_references.as_ref().expect("owner references")[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("Memcached", Some(true)));
    assert_eq!(Some(&owner.uid), cr.metadata.uid.as_ref());
    let managers: Vec<_> = d.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.clone()).collect();
    assert!(managers.iter().any(|m| m == "wasmop/memcached"), "{managers:?}");

    apply(&client, &memcached("sample", 4)).await?;
    deployment(&client, "sample", 4).await?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs componentize-py and componentize-js from scripts/setup.sh (WASMOP_POLYGLOT): scripts/test.sh e2e runs it"]
async fn the_python_memcached_plugin_reconciles_on_the_control_plane() -> Result<()> {
    reconciles_memcached(&memcached_py()).await
}

#[tokio::test]
#[ignore = "needs componentize-py and componentize-js from scripts/setup.sh (WASMOP_POLYGLOT): scripts/test.sh e2e runs it"]
async fn the_javascript_memcached_plugin_reconciles_on_the_control_plane() -> Result<()> {
    reconciles_memcached(&memcached_js()).await
}

#[tokio::test]
#[ignore = "needs Go and the Go plugin toolchain from scripts/setup.sh (WASMOP_GO_TOOLCHAIN): scripts/test.sh e2e runs it"]
async fn the_go_memcached_plugin_reconciles_on_the_control_plane() -> Result<()> {
    reconciles_memcached(&memcached_go()).await
}
