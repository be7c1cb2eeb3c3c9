//! Watch less, on a real control plane: the host's child watches see only the children it
//! labelled; children an older host wrote without the label are adopted (labelled, found,
//! pruned when stale, never duplicated); cached objects carry no `managedFields` nor the
//! last-applied annotation; a user's unlabelled object of a child's name is still refused.

use std::time::Duration;

use anyhow::Result;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use wasmop::contract::Kind;
use wasmop::controller::BreakerConfig;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{Host, api_for, apply, apply_file, eventually};
use wasmop_e2e::plugins::{plugin_with_features, workspace};

const WAIT: Duration = Duration::from_secs(30);

fn testbed(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed", "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

/// Deployment `name` as the testbed's `deployment` mode writes it, controlled by `owner` (a
/// Testbed) when given, with extra `labels` and `annotations`: what a host older than the
/// child labels applied, or a user's own.
fn deployment(name: &str, owner: Option<&DynamicObject>, labels: Value, annotations: Value) -> Value {
    let mut metadata = json!({"name": name, "namespace": "default", "labels": labels, "annotations": annotations});
    metadata["labels"]["app"] = json!(name);
    if let Some(owner) = owner {
        metadata["ownerReferences"] = json!([{"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
            "name": owner.metadata.name, "uid": owner.metadata.uid, "controller": true, "blockOwnerDeletion": true}]);
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": {
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "web", "image": "registry.invalid/web:1"}]}}}})
}

fn label<'a>(object: &'a DynamicObject, key: &str) -> Option<&'a str> {
    object.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

#[tokio::test]
async fn children_an_older_host_wrote_are_labelled_found_and_not_duplicated() -> Result<()> {
    wasmop_e2e::cluster::log_to_test_output();
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/testbed.yaml")).await?;
    let deployments = api_for(&client, "apps/v1", "Deployment", Some("default")).await?;

    // Before the host starts: a parent with the child the old host applied (its field manager,
    // its controller reference, no label), a stale child the parent no longer returns, and a
    // user's own Deployment.
    let parent = apply(&client, &testbed("old", json!({"mode": "deployment"}))).await?;
    let old_host = PatchParams::apply("wasmop/testbed").force();
    deployments.patch("old-web", &old_host, &Patch::Apply(deployment("old-web", Some(&parent), json!({}), json!({})))).await?;
    // `kubectl apply` (client-side) annotates it too.
    let kubectl = PatchParams { field_manager: Some("kubectl-client-side-apply".into()), ..PatchParams::default() };
    let last_applied = json!({"kubectl.kubernetes.io/last-applied-configuration": "{\"huge\": true}", "kept": "yes"});
    let web = deployments.patch("old-web", &kubectl, &Patch::Merge(json!({"metadata": {"annotations": last_applied}}))).await?;
    let stale = deployments
        .patch("old-stale", &old_host, &Patch::Apply(deployment("old-stale", Some(&parent), json!({}), json!({}))))
        .await?;
    let users = PatchParams::apply("user").force();
    deployments.patch("users", &users, &Patch::Apply(deployment("users", None, json!({}), json!({})))).await?;

    let plugin = plugin_with_features("testbed", "wasm32-wasip2", &["declares-deployments"]);
    let mut config = Host::test_config();
    config.breaker = BreakerConfig::default().window_calls(1_000_000);
    let host = Host::start(client.clone(), &[&plugin], config).await?;

    // The old child is labelled in place (same uid: not recreated), the stale one pruned.
    let labelled = eventually("old-web labelled and old-stale pruned", WAIT, || async {
        let web = deployments.get("old-web").await?;
        let pruned = deployments.get_opt("old-stale").await?.is_none_or(|d| d.metadata.uid != stale.metadata.uid);
        Ok((label(&web, "app.kubernetes.io/managed-by") == Some("wasmop") && pruned).then_some(web))
    })
    .await?;
    assert_eq!(labelled.metadata.uid, web.metadata.uid, "the old child was replaced instead of adopted");
    assert_eq!(label(&labelled, "wasmop.dev/plugin"), Some("testbed"));
    let parents_children: Vec<String> = deployments
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|d| d.metadata.owner_references.iter().flatten().any(|r| Some(&r.uid) == parent.metadata.uid.as_ref()))
        .filter_map(|d| d.metadata.name)
        .collect();
    assert_eq!(parents_children, ["old-web"], "one child, not a duplicate");

    // The cache holds the host's children, stripped, and not the user's Deployment.
    let controller = host.manager.controller("testbed").expect("testbed runs");
    let kind = Kind::new("apps", "v1", "Deployment");
    let cached = eventually("old-web cached with its label", WAIT, || async {
        Ok(controller
            .cache()
            .get(&kind, Some("default"), "old-web")
            .filter(|d| d.head()["metadata"]["labels"]["wasmop.dev/plugin"] == "testbed"))
    })
    .await?;
    assert!(cached.head().pointer("/metadata/managedFields").is_none(), "{cached}");
    let annotations = &cached.head()["metadata"]["annotations"];
    assert_eq!(annotations["kept"], "yes", "{annotations}");
    assert!(annotations.get("kubectl.kubernetes.io/last-applied-configuration").is_none(), "{annotations}");
    assert!(controller.cache().get(&kind, Some("default"), "users").is_none(), "a user's Deployment is not cached");
    let users = deployments.get("users").await?;
    assert_eq!(label(&users, "app.kubernetes.io/managed-by"), None, "a user's Deployment is not labelled");
    Ok(())
}

#[tokio::test]
async fn deleted_parents_and_children_leave_no_apply_fingerprints_behind() -> Result<()> {
    wasmop_e2e::cluster::log_to_test_output();
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/testbed.yaml")).await?;
    let plugin = plugin_with_features("testbed", "wasm32-wasip2", &[]);
    let host = Host::start(client.clone(), &[&plugin], Host::test_config()).await?;
    let controller = host.manager.controller("testbed").expect("testbed runs");
    let crs = api_for(&client, "test.wasmop.dev/v1", "Testbed", Some("default")).await?;
    let config_maps = api_for(&client, "v1", "ConfigMap", Some("default")).await?;

    for i in 0..5 {
        apply(&client, &testbed(&format!("t{i}"), json!({"mode": "ok"}))).await?;
    }
    eventually("five children applied", WAIT, || async { Ok((controller.applied_children() == 5).then_some(())) }).await?;

    // A child deleted by someone else goes; so do a deleted parent's (GC deletes the children).
    config_maps.delete("t0-out", &Default::default()).await?;
    for i in 1..5 {
        crs.delete(&format!("t{i}"), &Default::default()).await?;
    }
    eventually("only t0's re-applied child keeps a fingerprint", WAIT, || async {
        let t0_out = config_maps.get_opt("t0-out").await?;
        Ok((controller.applied_children() == 1 && t0_out.is_some()).then_some(()))
    })
    .await?;
    crs.delete("t0", &Default::default()).await?;
    eventually("no fingerprint left", WAIT, || async { Ok((controller.applied_children() == 0).then_some(())) }).await?;
    Ok(())
}
