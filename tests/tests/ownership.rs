//! Ownership and field managers on a real control plane: a plugin writes only objects that do
//! not exist yet or that its parent controls, deletes only its parent's children, cannot name
//! another owner itself, and leaves the fields it omits to other field managers.

use std::time::Duration;

use anyhow::Result;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use wasmop::controller::BreakerConfig;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{Host, api_for, apply, apply_file, eventually};
use wasmop_e2e::plugins::{plugin_with_features, workspace};

const WAIT: Duration = Duration::from_secs(30);

/// A control plane with the testbed CRD.
async fn control_plane() -> Result<(ControlPlane, kube::Client)> {
    wasmop_e2e::cluster::log_to_test_output();
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/testbed.yaml")).await?;
    Ok((cp, client))
}

/// A host running the testbed build that also writes Deployments. Its start waits for the
/// first list of every watched kind, so objects created before are in its cache.
///
/// The circuit breaker has its own test (`breaker.rs`); here it never trips: the refused
/// parents retry with backoff, and under load their failures alone filled its window and
/// stopped the plugin before the parents expected to succeed were reconciled.
async fn host(client: &kube::Client) -> Result<Host> {
    let testbed = plugin_with_features("testbed", "wasm32-wasip2", &["declares-deployments"]);
    let mut config = Host::test_config();
    config.breaker = BreakerConfig::default().window_calls(1_000_000);
    Host::start(client.clone(), &[&testbed], config).await
}

fn testbed(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed", "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

fn condition<'a>(object: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    object.data.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == type_)
}

/// The parent `name` once its `Reconciled` condition has `reason` for its current generation.
async fn reconciled(client: &kube::Client, name: &str, reason: &str) -> Result<DynamicObject> {
    let crs = api_for(client, "test.wasmop.dev/v1", "Testbed", Some("default")).await?;
    eventually(&format!("{name}: Reconciled reason {reason}"), WAIT, || async {
        let cr = crs.get(name).await?;
        let current = condition(&cr, "Reconciled")
            .filter(|c| c["reason"] == reason && c["observedGeneration"] == json!(cr.metadata.generation))
            .is_some();
        Ok(current.then_some(cr))
    })
    .await
}

fn controller_uid(object: &DynamicObject) -> Option<String> {
    object.metadata.owner_references.iter().flatten().find(|r| r.controller == Some(true)).map(|r| r.uid.clone())
}

fn managers(object: &DynamicObject) -> Vec<String> {
    object.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.clone()).collect()
}

#[tokio::test]
async fn fields_the_plugin_omits_stay_with_the_manager_that_set_them() -> Result<()> {
    let (_cp, client) = control_plane().await?;
    let _host = host(&client).await?;
    let deployments = api_for(&client, "apps/v1", "Deployment", Some("default")).await?;
    let cr = apply(&client, &testbed("web", json!({"mode": "deployment", "touch": "1"}))).await?;
    reconciled(&client, "web", "ReconcileSucceeded").await?;
    let d = deployments.get("web-web").await?;
    assert_eq!(controller_uid(&d), cr.metadata.uid);
    assert_eq!(d.data.pointer("/spec/replicas"), Some(&json!(1)), "defaulted by the API server");

    // An autoscaler sets replicas as its own field manager.
    let hpa = PatchParams { field_manager: Some("hpa-test".into()), ..PatchParams::default() };
    deployments.patch("web-web", &hpa, &Patch::Merge(json!({"spec": {"replicas": 3}}))).await?;

    // The plugin's content changes (the host must apply, not skip): replicas stays the HPA's.
    apply(&client, &testbed("web", json!({"mode": "deployment", "touch": "2"}))).await?;
    reconciled(&client, "web", "ReconcileSucceeded").await?;
    let d = eventually("the new annotation applied", WAIT, || async {
        let d = deployments.get("web-web").await?;
        Ok((d.metadata.annotations.as_ref().and_then(|a| a.get("testbed.wasmop.dev/touch")).map(String::as_str) == Some("2"))
            .then_some(d))
    })
    .await?;
    assert_eq!(d.data.pointer("/spec/replicas"), Some(&json!(3)), "the plugin's apply took replicas back");
    let mine = d.metadata.managed_fields.iter().flatten().find(|m| m.manager.as_deref() == Some("wasmop/testbed"));
    let owned = mine.and_then(|m| m.fields_v1.as_ref()).map(|f| f.0.to_string()).unwrap_or_default();
    assert!(owned.contains("testbed.wasmop.dev/touch") && !owned.contains("f:replicas"), "wasmop/testbed owns {owned}");

    // A change of the HPA's field alone re-reconciles the parent (it is a child event) and the
    // host leaves it alone too (its skip-unchanged check compares only the plugin's fields).
    deployments.patch("web-web", &hpa, &Patch::Merge(json!({"spec": {"replicas": 4}}))).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let d = deployments.get("web-web").await?;
    assert_eq!(d.data.pointer("/spec/replicas"), Some(&json!(4)));
    Ok(())
}

#[tokio::test]
async fn objects_the_parent_does_not_control_are_neither_taken_nor_deleted() -> Result<()> {
    let (_cp, client) = control_plane().await?;
    let config_maps = api_for(&client, "v1", "ConfigMap", Some("default")).await?;
    let deployments = api_for(&client, "apps/v1", "Deployment", Some("default")).await?;

    // A user's own ConfigMap and Deployment with the names the plugin's children would have,
    // there before the host starts (the ownership check reads the host's watch cache).
    let users_cm = apply(
        &client,
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "u-out", "namespace": "default"}, "data": {"mine": "yes"}}),
    )
    .await?;
    let users_deployment = apply(&client, &json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d-web", "namespace": "default", "labels": {"owner": "user"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "users"}},
            "template": {"metadata": {"labels": {"app": "users"}}, "spec": {"containers": [{"name": "c", "image": "registry.invalid/users:1"}]}}}}))
    .await?;
    let _host = host(&client).await?;
    apply(&client, &testbed("u", json!({"mode": "ok"}))).await?;
    apply(&client, &testbed("d", json!({"mode": "deployment"}))).await?;

    // Another parent's child.
    let a = apply(&client, &testbed("a", json!({"mode": "ok"}))).await?;
    reconciled(&client, "a", "ReconcileSucceeded").await?;
    let a_out = config_maps.get("a-out").await?;
    assert_eq!(controller_uid(&a_out), a.metadata.uid);
    // The watch event of a-out reaches the host's cache within milliseconds; give it a second.
    tokio::time::sleep(Duration::from_secs(1)).await;
    apply(&client, &testbed("thief", json!({"mode": "take", "target": "a-out"}))).await?;
    apply(&client, &testbed("killer", json!({"mode": "delete", "target": "a-out"}))).await?;

    // A plugin naming another owner in its child's ownerReferences.
    let forged =
        json!([{"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed", "name": "a", "uid": a.metadata.uid, "controller": true}]);
    let forger = apply(&client, &testbed("forger", json!({"mode": "take", "ownerReferences": forged}))).await?;

    for (parent, reason) in [("u", "AlreadyOwned"), ("d", "AlreadyOwned"), ("thief", "AlreadyOwned"), ("killer", "NotControlled")]
    {
        let cr = reconciled(&client, parent, reason).await?;
        let message = condition(&cr, "Reconciled").unwrap()["message"].as_str().unwrap_or_default().to_owned();
        assert!(message.starts_with("response refused, nothing written:"), "{parent}: {message}");
    }
    let events = api_for(&client, "events.k8s.io/v1", "Event", Some("default")).await?;
    eventually("a Warning event AlreadyOwned about u", WAIT, || async {
        let found = events.list(&ListParams::default()).await?.items.into_iter().any(|e| {
            e.data["type"] == "Warning"
                && e.data["reason"] == "AlreadyOwned"
                && e.data.pointer("/regarding/name") == Some(&json!("u"))
        });
        Ok(found.then_some(()))
    })
    .await?;

    let untouched = |object: &DynamicObject| {
        assert!(object.metadata.owner_references.as_ref().is_none_or(Vec::is_empty), "{:?}", object.metadata);
        assert!(!managers(object).iter().any(|m| m.starts_with("wasmop/")), "{:?}", managers(object));
    };
    let cm = config_maps.get("u-out").await?;
    untouched(&cm);
    assert_eq!(cm.metadata.resource_version, users_cm.metadata.resource_version, "the user's ConfigMap was written");
    let d = deployments.get("d-web").await?;
    untouched(&d);
    assert_eq!(d.metadata.labels, users_deployment.metadata.labels);
    assert_eq!(d.data["spec"]["template"], users_deployment.data["spec"]["template"]);
    let a_out_now = config_maps.get("a-out").await?;
    assert_eq!(a_out_now.metadata.resource_version, a_out.metadata.resource_version, "a-out taken over");
    assert_eq!(a_out_now.data["data"], json!({"mode": "ok"}));

    reconciled(&client, "forger", "ReconcileSucceeded").await?;
    let forged_out = config_maps.get("forger-out").await?;
    let refs = forged_out.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(refs.len(), 1, "{refs:?}");
    assert_eq!((refs[0].name.as_str(), Some(&refs[0].uid)), ("forger", forger.metadata.uid.as_ref()));
    Ok(())
}
