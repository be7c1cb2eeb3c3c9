//! Plugin configuration on a real control plane: the memcached image set by a ConfigMap the
//! host policy names, changed (every Deployment follows), made invalid (shown on the
//! `WasmPlugin`, nothing changes, the last valid configuration stays in use), and missing or
//! invalid at start (the plugin does not start until it is valid); and a host granted only
//! what `wasmop rbac` prints reads and watches its ConfigMap.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::{Value, json};
use wasmop::contract::KnownKinds;
use wasmop::controller::{ControllerConfig, Manager};
use wasmop::policy::HostPolicy;
use wasmop::reload::{ReloadConfig, Reloader};
use wasmop::runtime::Runtime;
use wasmop_e2e::cluster::{api_for, apply, apply_file, eventually, log_to_test_output};
use wasmop_e2e::plugins::{plugin, workspace};
use wasmop_e2e::{ControlPlane, StaticToken};

const WAIT: Duration = Duration::from_secs(30);
const POLICY: &str = "plugins: {memcached: {configMap: default/memcached-config}}";

struct Setup {
    _cp: ControlPlane,
    /// The admin's client (the host's is the same unless `setup_as` gave it a token).
    client: kube::Client,
    _dir: tempfile::TempDir,
    manager: Arc<Manager>,
    _watch: tokio::task::JoinHandle<notify::Result<()>>,
}

/// A control plane with the CRDs, and a host whose policy configures memcached by the
/// ConfigMap `default/memcached-config` (`config_map`, created first when given).
async fn setup(config_map: Option<&str>) -> Result<Setup> {
    setup_as(config_map, None).await
}

/// [`setup`], the host authenticating with `token` (granted nothing unless the test grants it).
async fn setup_as(config_map: Option<&str>, token: Option<&StaticToken>) -> Result<Setup> {
    log_to_test_output();
    let cp = ControlPlane::start_with_tokens(token.map(std::slice::from_ref).unwrap_or_default()).await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/memcached.yaml")).await?;
    apply_file(&client, &workspace().join("crds/wasmplugin.yaml")).await?;
    if let Some(text) = config_map {
        set_config(&client, text).await?;
    }
    let dir = tempfile::tempdir()?;
    std::fs::copy(plugin("memcached", "wasm32-wasip2"), dir.path().join("memcached.wasm"))?;
    let runtime = Runtime::builder().artifact_dir(Some(dir.path().join(".artifacts"))).build()?;
    let policy = HostPolicy::from_yaml(POLICY)?;
    let config = ControllerConfig { resync: None, policy, ..Default::default() };
    let host = match token {
        Some(token) => {
            grant_what_rbac_prints(&client, &token.user).await?;
            cp.client_with_token(&token.token).await?
        }
        None => client.clone(),
    };
    let manager = Arc::new(Manager::new(host, runtime, config));
    let reload = ReloadConfig { debounce: Duration::from_millis(100), rescan: Duration::from_secs(4) };
    let reloader = Reloader::new(Arc::clone(&manager), dir.path(), reload);
    let watch = tokio::spawn(Arc::clone(&reloader).run());
    Ok(Setup { _cp: cp, client, _dir: dir, manager, _watch: watch })
}

/// Bind `user` to the ClusterRole `wasmop rbac` prints for memcached under [`POLICY`].
async fn grant_what_rbac_prints(admin: &kube::Client, user: &str) -> Result<()> {
    let manifest = Runtime::builder().artifact_dir(None).build()?.load_file(plugin("memcached", "wasm32-wasip2")).await?;
    let mut kinds = KnownKinds::builtin();
    kinds.add_crds(&workspace().join("crds"))?;
    let rules = wasmop::rbac::rules(&[(**manifest.manifest()).clone()], &HostPolicy::from_yaml(POLICY)?, &kinds)?;
    apply(
        admin,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "wasmop-host"}, "rules": rules}),
    )
    .await?;
    apply(
        admin,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "wasmop-host"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "wasmop-host"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}),
    )
    .await?;
    Ok(())
}

/// Create or replace the ConfigMap's `config.yaml`.
async fn set_config(client: &kube::Client, text: &str) -> Result<()> {
    let map = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "memcached-config", "namespace": "default"}, "data": {"config.yaml": text}});
    apply(client, &map).await?;
    Ok(())
}

fn memcached(name: &str) -> Value {
    json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"size": 1}})
}

fn image_of(deployment: &DynamicObject) -> Option<&str> {
    deployment.data.pointer("/spec/template/spec/containers/0/image").and_then(Value::as_str)
}

/// Wait until the Deployments of the `cfg-*` Memcacheds are `n` and all run `image`.
async fn all_deployments_run(client: &kube::Client, n: usize, image: &str) -> Result<()> {
    let api = api_for(client, "apps/v1", "Deployment", Some("default")).await?;
    eventually(&format!("{n} deployments running {image}"), WAIT, || async {
        let list = api.list(&ListParams::default()).await?;
        let ours: Vec<&DynamicObject> =
            list.items.iter().filter(|d| d.metadata.name.as_deref().is_some_and(|n| n.starts_with("cfg-"))).collect();
        Ok((ours.len() == n && ours.iter().all(|d| image_of(d) == Some(image))).then_some(()))
    })
    .await
}

/// The `WasmPlugin` of memcached once its `ConfigValid` condition has `status` and a message
/// containing `says`.
async fn config_condition(client: &kube::Client, status: &str, says: &str) -> Result<DynamicObject> {
    let api: Api<DynamicObject> = api_for(client, "wasmop.dev/v1alpha1", "WasmPlugin", None).await?;
    eventually(&format!("ConfigValid={status} saying {says:?}"), WAIT, || async {
        let Some(object) = api.get_opt("memcached").await? else { return Ok(None) };
        let conditions = object.data.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
        let found = conditions.iter().any(|c| {
            c["type"] == "ConfigValid" && c["status"] == status && c["message"].as_str().is_some_and(|m| m.contains(says))
        });
        Ok(found.then_some(object))
    })
    .await
}

#[tokio::test]
async fn every_deployment_follows_the_config_map_and_an_invalid_config_changes_nothing() -> Result<()> {
    let s = setup(Some("image: memcached:1.6.20-alpine\n")).await?;
    eventually("memcached started", WAIT, || async { Ok(s.manager.controller("memcached").map(|_| ())) }).await?;
    let n = 4;
    for i in 0..n {
        apply(&s.client, &memcached(&format!("cfg-{i}"))).await?;
    }
    all_deployments_run(&s.client, n, "memcached:1.6.20-alpine").await?;
    let object = config_condition(&s.client, "True", "ConfigMap default/memcached-config").await?;
    assert_eq!(object.data.pointer("/status/config/inUse"), Some(&json!({"image": "memcached:1.6.20-alpine"})));

    // A new image: every Deployment follows, with no change to any Memcached.
    let changed = std::time::Instant::now();
    set_config(&s.client, "image: memcached:1.6.21-alpine\n").await?;
    all_deployments_run(&s.client, n, "memcached:1.6.21-alpine").await?;
    eprintln!("config change to {n} Deployments updated: {:?}", changed.elapsed());
    config_condition(&s.client, "True", "in use").await?;

    // Invalid: shown on the WasmPlugin with the validator's path; nothing changes, and a new
    // Memcached gets the last valid configuration.
    set_config(&s.client, "image: memcached:9-alpine\nport: high\n").await?;
    let object = config_condition(&s.client, "False", "invalid config at /port").await?;
    assert_eq!(object.data.pointer("/status/config/valid"), Some(&json!(false)));
    assert_eq!(object.data.pointer("/status/config/inUse"), Some(&json!({"image": "memcached:1.6.21-alpine"})));
    apply(&s.client, &memcached(&format!("cfg-{n}"))).await?;
    all_deployments_run(&s.client, n + 1, "memcached:1.6.21-alpine").await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    all_deployments_run(&s.client, n + 1, "memcached:1.6.21-alpine").await?;
    let in_use = s.manager.controller("memcached").expect("running").config().current();
    assert_eq!(*in_use, json!({"image": "memcached:1.6.21-alpine"}));

    // Valid again: used, and the condition clears.
    set_config(&s.client, "image: memcached:1.6.22-alpine\nport: 11311\n").await?;
    all_deployments_run(&s.client, n + 1, "memcached:1.6.22-alpine").await?;
    config_condition(&s.client, "True", "in use").await?;
    Ok(())
}

#[tokio::test]
async fn a_plugin_without_a_valid_config_does_not_start_until_it_has_one() -> Result<()> {
    let s = setup(None).await?;
    apply(&s.client, &memcached("cfg-0")).await?;
    config_condition(&s.client, "False", "ConfigMap default/memcached-config: not found").await?;
    assert!(s.manager.controller("memcached").is_none());

    set_config(&s.client, "imag: memcached:1.6.20-alpine\n").await?;
    let object = config_condition(&s.client, "False", "invalid config at /").await?;
    let ready = object.data.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    assert!(ready.iter().any(|c| c["type"] == "Ready" && c["status"] == "False"), "{ready:?}");
    assert!(s.manager.controller("memcached").is_none());

    set_config(&s.client, "image: memcached:1.6.20-alpine\n").await?;
    all_deployments_run(&s.client, 1, "memcached:1.6.20-alpine").await?;
    config_condition(&s.client, "True", "in use").await?;
    Ok(())
}

#[tokio::test]
async fn a_host_granted_what_wasmop_rbac_prints_reads_and_watches_its_config_map() -> Result<()> {
    let token = StaticToken::new("host-token", "wasmop-host", &[]);
    let s = setup_as(Some("image: memcached:1.6.20-alpine\n"), Some(&token)).await?;
    apply(&s.client, &memcached("cfg-0")).await?;
    all_deployments_run(&s.client, 1, "memcached:1.6.20-alpine").await?;
    set_config(&s.client, "image: memcached:1.6.21-alpine\n").await?;
    all_deployments_run(&s.client, 1, "memcached:1.6.21-alpine").await?;
    config_condition(&s.client, "True", "in use").await?;
    Ok(())
}
