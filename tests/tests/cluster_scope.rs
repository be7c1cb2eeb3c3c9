//! Cluster-scoped child kinds on a real control plane: a plugin whose parent is namespaced and
//! whose manifest declares ClusterRoles is not started without the host policy's
//! `clusterScopedChildren` grant (and says why on its `WasmPlugin`); with it, the ClusterRoles
//! it writes name their parent by label instead of an owner reference and are not
//! garbage-collected with it, and a ClusterRole carrying a namespace is still refused.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use kube::api::DeleteParams;
use serde_json::{Value, json};
use wasmop::actions::{PARENT_ANNOTATION, PARENT_UID_LABEL};
use wasmop::controller::Manager;
use wasmop::policy::HostPolicy;
use wasmop::reload::{ReloadConfig, Reloader};
use wasmop::runtime::Runtime;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{GARBAGE_COLLECTION, Host, api_for, apply, apply_file, eventually, log_to_test_output};
use wasmop_e2e::plugins::{plugin_with_features, workspace};

const WAIT: Duration = Duration::from_secs(30);
const GRANT: &str = "plugins: {testbed: {grants: {clusterScopedChildren: [rbac.authorization.k8s.io/v1/ClusterRole], \
    escalationKinds: [rbac.authorization.k8s.io/v1/ClusterRole]}}}";

fn testbed(name: &str, mode: &str) -> Value {
    json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"mode": mode}})
}

fn runtime(policy: &str) -> Result<Runtime> {
    Ok(Runtime::builder().allowances(HostPolicy::from_yaml(policy)?.allowances()).artifact_dir(None).build()?)
}

async fn control_plane() -> Result<(ControlPlane, kube::Client)> {
    log_to_test_output();
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/testbed.yaml")).await?;
    apply_file(&client, &workspace().join("crds/wasmplugin.yaml")).await?;
    Ok((cp, client))
}

#[tokio::test]
async fn a_cluster_scoped_child_kind_without_a_grant_is_not_started_and_its_wasmplugin_says_why() -> Result<()> {
    let (_cp, client) = control_plane().await?;
    let dir = tempfile::tempdir()?;
    let manager = Arc::new(Manager::new(client.clone(), runtime("")?, Host::test_config()));
    let config = ReloadConfig { debounce: Duration::from_millis(100), rescan: Duration::from_secs(60) };
    let reloader = Reloader::new(Arc::clone(&manager), dir.path(), config);
    let _watch = tokio::spawn(Arc::clone(&reloader).run());
    let testbed_file = plugin_with_features("testbed", "wasm32-wasip2", &["declares-cluster-role"]);
    std::fs::copy(&testbed_file, dir.path().join("testbed.wasm"))?;

    let wasmplugins = api_for(&client, "wasmop.dev/v1alpha1", "WasmPlugin", None).await?;
    let wp = eventually("WasmPlugin testbed: Ready=False NotStarted", WAIT, || async {
        let wp = wasmplugins.get_opt("testbed").await?;
        Ok(wp.filter(|wp| wp.data.pointer("/status/conditions/0/reason") == Some(&json!("NotStarted"))))
    })
    .await?;
    let message = wp.data.pointer("/status/conditions/0/message").and_then(Value::as_str).unwrap_or_default();
    assert!(
        message.contains(
            "it writes the cluster-scoped rbac.authorization.k8s.io/v1/ClusterRole from a namespaced parent \
             (grant clusterScopedChildren: [rbac.authorization.k8s.io/v1/ClusterRole])"
        ),
        "{message}"
    );
    assert!(manager.controller("testbed").is_none(), "not running");

    // Nothing is written for its parents.
    apply(&client, &testbed("refused", "cluster-role")).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let roles = api_for(&client, "rbac.authorization.k8s.io/v1", "ClusterRole", None).await?;
    assert!(roles.get_opt("testbed-default-refused").await?.is_none(), "no ClusterRole without the grant");
    let cms = api_for(&client, "v1", "ConfigMap", Some("default")).await?;
    assert!(cms.get_opt("refused-out").await?.is_none(), "no child at all: the plugin does not run");
    Ok(())
}

#[tokio::test]
async fn with_the_grant_a_cluster_scoped_child_names_its_parent_by_label_and_outlives_it() -> Result<()> {
    let (_cp, client) = control_plane().await?;
    let testbed_file = plugin_with_features("testbed", "wasm32-wasip2", &["declares-cluster-role"]);
    let _host = Host::start_with(client.clone(), &[&testbed_file], Host::test_config(), runtime(GRANT)?).await?;
    let roles = api_for(&client, "rbac.authorization.k8s.io/v1", "ClusterRole", None).await?;
    let cms = api_for(&client, "v1", "ConfigMap", Some("default")).await?;
    let crs = api_for(&client, "test.wasmop.dev/v1", "Testbed", Some("default")).await?;

    let parent = apply(&client, &testbed("tenant", "cluster-role")).await?;
    let uid = parent.metadata.uid.clone().context("the API server sets a uid")?;
    let role = eventually("ClusterRole testbed-default-tenant applied", WAIT, || async {
        Ok(roles.get_opt("testbed-default-tenant").await?)
    })
    .await?;
    assert_eq!(role.metadata.labels.as_ref().and_then(|l| l.get(PARENT_UID_LABEL)), Some(&uid));
    let described = role.metadata.annotations.as_ref().and_then(|a| a.get(PARENT_ANNOTATION)).cloned();
    assert_eq!(described.as_deref(), Some("test.wasmop.dev/v1/Testbed default/tenant"));
    assert!(
        role.metadata.owner_references.as_ref().is_none_or(Vec::is_empty),
        "a cluster-scoped object cannot be owned by a namespaced one: {:?}",
        role.metadata.owner_references
    );
    let cm = eventually("ConfigMap tenant-out applied", WAIT, || async { Ok(cms.get_opt("tenant-out").await?) }).await?;
    let owners = cm.metadata.owner_references.unwrap_or_default();
    assert!(owners.iter().any(|o| o.uid == uid && o.controller == Some(true)), "namespaced children are owned as ever");

    // Defense in depth at reconcile time: a ClusterRole carrying a namespace is refused whole.
    apply(&client, &testbed("sneaky", "cluster-role-in-namespace")).await?;
    let refused = eventually("the sneaky Testbed is refused", WAIT, || async {
        let cr = crs.get("sneaky").await?;
        let condition = cr
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["type"] == "Reconciled" && c["reason"] == "ActionRefused").cloned());
        Ok(condition)
    })
    .await?;
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("carries namespace \"default\", but rbac.authorization.k8s.io/v1/ClusterRole is cluster-scoped"),
        "{message}"
    );
    assert!(roles.get_opt("testbed-default-sneaky").await?.is_none());

    // The parent goes: the garbage collector removes its ConfigMap, not its ClusterRole (as
    // documented: nothing collects a cluster-scoped child of a namespaced parent).
    crs.delete("tenant", &DeleteParams::foreground()).await?;
    eventually("Testbed tenant and its ConfigMap are gone", GARBAGE_COLLECTION, || async {
        let gone = crs.get_opt("tenant").await?.is_none() && cms.get_opt("tenant-out").await?.is_none();
        Ok(gone.then_some(()))
    })
    .await?;
    assert!(roles.get_opt("testbed-default-tenant").await?.is_some(), "the ClusterRole outlives its parent");
    Ok(())
}
