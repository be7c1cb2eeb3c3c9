//! The controller loop against a real etcd + kube-apiserver + kube-controller-manager, with
//! the memcached example plugin and the hostile testbed plugin built from source.

use std::time::Duration;

use anyhow::{Result, bail};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use wasmop::controller::{ControllerConfig, ObjectKey};
use wasmop::policy::HostPolicy;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{GARBAGE_COLLECTION, Host, api_for, apply, apply_file, eventually};
use wasmop_e2e::plugins::{plugin, workspace};

const WAIT: Duration = Duration::from_secs(30);

async fn setup() -> Result<(ControlPlane, kube::Client, Host)> {
    setup_with(Host::test_config()).await
}

/// A control plane with the memcached and testbed CRDs, and a host running both plugins.
async fn setup_with(config: ControllerConfig) -> Result<(ControlPlane, kube::Client, Host)> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/memcached.yaml")).await?;
    apply_file(&client, &workspace().join("crds/testbed.yaml")).await?;
    let memcached = plugin("memcached", "wasm32-wasip2");
    let testbed = plugin("testbed", "wasm32-wasip2");
    let host = Host::start(client.clone(), &[&memcached, &testbed], config).await?;
    Ok((cp, client, host))
}

fn memcached(name: &str, size: i64) -> Value {
    json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"size": size}})
}

fn testbed(name: &str, mode: &str) -> Value {
    json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"mode": mode}})
}

async fn deployments(client: &kube::Client) -> Result<Api<DynamicObject>> {
    api_for(client, "apps/v1", "Deployment", Some("default")).await
}

/// The Deployment `name` once its replicas equal `replicas`.
async fn deployment_with_replicas(client: &kube::Client, name: &str, replicas: i64) -> Result<DynamicObject> {
    let api = deployments(client).await?;
    eventually(&format!("deployment {name} with {replicas} replicas"), WAIT, || async {
        let d = api.get_opt(name).await?;
        Ok(d.filter(|d| d.data.pointer("/spec/replicas").and_then(Value::as_i64) == Some(replicas)))
    })
    .await
}

fn condition<'a>(object: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    object.data.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == type_)
}

/// The Memcached `name`, its `status.nodes` and the names of its Pods, both sorted.
async fn nodes_and_pods(
    crs: &Api<DynamicObject>,
    pods: &Api<DynamicObject>,
    name: &str,
) -> Result<(DynamicObject, Vec<String>, Vec<String>)> {
    let selector = format!("app=memcached,memcached_cr={name}");
    let mut names: Vec<String> =
        pods.list(&ListParams::default().labels(&selector)).await?.items.into_iter().filter_map(|p| p.metadata.name).collect();
    let cr = crs.get(name).await?;
    let nodes = cr.data.pointer("/status/nodes").and_then(Value::as_array).into_iter().flatten();
    let mut nodes: Vec<String> = nodes.filter_map(|n| n.as_str().map(str::to_owned)).collect();
    nodes.sort();
    names.sort();
    Ok((cr, nodes, names))
}

#[tokio::test]
async fn memcached_lifecycle_create_scale_revert_delete() -> Result<()> {
    let (_cp, client, _host) = setup().await?;
    let crs = api_for(&client, "cache.example.com/v1alpha1", "Memcached", Some("default")).await?;
    let cr = apply(&client, &memcached("sample", 3)).await?;

    // size 3 → a Deployment with 3 replicas, controlled by the CR, applied by wasmop/memcached.
    let d = deployment_with_replicas(&client, "sample", 3).await?;
    let owner = &d.metadata.owner_references.as_ref().expect("owner references")[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.controller), ("Memcached", "sample", Some(true)));
    assert_eq!(Some(&owner.uid), cr.metadata.uid.as_ref());
    let managers: Vec<_> = d.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.clone()).collect();
    assert!(managers.iter().any(|m| m == "wasmop/memcached"), "{managers:?}");
    assert_eq!(d.data.pointer("/spec/template/spec/containers/0/image"), Some(&json!("memcached:1.6.17-alpine")));

    // kube-controller-manager creates the Pods; status.nodes lists them; Available has
    // observedGeneration.
    let pods = api_for(&client, "v1", "Pod", Some("default")).await?;
    let cr = eventually("status.nodes listing the 3 pods", WAIT, || async {
        let (cr, nodes, names) = nodes_and_pods(&crs, &pods, "sample").await?;
        Ok((names.len() == 3 && nodes == names).then_some(cr))
    })
    .await?;
    let available = condition(&cr, "Available").expect("Available condition");
    assert_eq!(available["observedGeneration"], json!(cr.metadata.generation.unwrap()));
    assert!(available["lastTransitionTime"].is_string());
    // The Pods run on the simulated Nodes: the Deployment becomes available, and so does the CR.
    let available = eventually("Available=True with 3/3 replicas", WAIT, || async {
        let cr = crs.get("sample").await?;
        Ok(condition(&cr, "Available").filter(|c| c["status"] == "True").cloned())
    })
    .await?;
    assert_eq!(
        (&available["reason"], &available["message"]),
        (&json!("MinimumReplicasAvailable"), &json!("3/3 replicas available"))
    );

    // size 5 → the Deployment follows, and the plugin sees its observed child (the request's
    // children come from the watch cache's owner index).
    apply(&client, &memcached("sample", 5)).await?;
    deployment_with_replicas(&client, "sample", 5).await?;
    eventually("Available reports the observed Deployment", WAIT, || async {
        let cr = crs.get("sample").await?;
        let c = condition(&cr, "Available").cloned();
        Ok(c.filter(|c| c["status"] == "True" && c["message"] == "5/5 replicas available"))
    })
    .await?;

    // size 2 → status.nodes names the 2 Pods left (the related Pods come from the watch
    // cache's index of the `memcached_cr` label, which follows their deletion).
    apply(&client, &memcached("sample", 2)).await?;
    eventually("status.nodes naming the 2 pods left", WAIT, || async {
        let (_, nodes, names) = nodes_and_pods(&crs, &pods, "sample").await?;
        Ok((names.len() == 2 && nodes == names).then_some(()))
    })
    .await?;
    apply(&client, &memcached("sample", 5)).await?;

    // A manual edit of the Deployment is reverted.
    deployments(&client).await?.patch("sample", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 1}}))).await?;
    deployment_with_replicas(&client, "sample", 5).await?;

    // Deleting the CR removes its children (ownerReference garbage collection).
    crs.delete("sample", &DeleteParams::default()).await?;
    let api = deployments(&client).await?;
    eventually("deployment garbage-collected", GARBAGE_COLLECTION, || async {
        Ok(api.get_opt("sample").await?.is_none().then_some(()))
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn plugin_errors_become_warning_events_and_conditions_with_backoff() -> Result<()> {
    let (_cp, client, host) = setup().await?;
    let crs = api_for(&client, "test.wasmop.dev/v1", "Testbed", Some("default")).await?;
    apply(&client, &testbed("failing", "retryable")).await?;
    let cr = eventually("Reconciled=False condition", WAIT, || async {
        let cr = crs.get("failing").await?;
        Ok(condition(&cr, "Reconciled").filter(|c| c["status"] == "False").is_some().then_some(cr))
    })
    .await?;
    assert_eq!(condition(&cr, "Reconciled").unwrap()["reason"], "ReconcileError");
    let events = api_for(&client, "events.k8s.io/v1", "Event", Some("default")).await?;
    eventually("a Warning event about the CR", WAIT, || async {
        let found = events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .any(|e| e.data["type"] == "Warning" && e.data.pointer("/regarding/name") == Some(&json!("failing")));
        Ok(found.then_some(()))
    })
    .await?;
    // Backoff: after 3 s of failing, an exponential 5 ms·2ⁿ schedule allows ~10 attempts;
    // retrying without backoff would have made hundreds.
    let controller = host.manager.controller("testbed").expect("testbed running");
    let key = ObjectKey { namespace: Some("default".into()), name: "failing".into() };
    tokio::time::sleep(Duration::from_secs(3)).await;
    let failures = controller.failures(&key);
    assert!((3..=14).contains(&failures), "failures after 3 s: {failures}");
    // Fixing the object resets the condition.
    apply(&client, &testbed("failing", "ok")).await?;
    eventually("Reconciled=True after the fix", WAIT, || async {
        let cr = crs.get("failing").await?;
        Ok(condition(&cr, "Reconciled").filter(|c| c["status"] == "True").map(|_| ()))
    })
    .await?;
    Ok(())
}

/// A terminal failure of a WIT 0.3.0 plugin shows its status and conditions on the parent (as a
/// response's would, `observedGeneration` filled in) beside the host's `Reconciled=False` and a
/// Warning event; the host then waits for a change, and the fixed object reconciles.
#[tokio::test]
async fn a_terminal_failure_shows_its_status_and_conditions_with_the_warning_event() -> Result<()> {
    let (_cp, client, host) = setup().await?;
    let crs = api_for(&client, "test.wasmop.dev/v1", "Testbed", Some("default")).await?;
    let created = apply(&client, &testbed("invalid", "invalid")).await?;
    let generation = created.metadata.generation.expect("a generation");
    let cr = eventually("phase Invalid, Ready=False InvalidSpec and Reconciled=False", WAIT, || async {
        let cr = crs.get("invalid").await?;
        let shown = cr.data.pointer("/status/phase") == Some(&json!("Invalid"))
            && condition(&cr, "Ready").is_some_and(|c| c["reason"] == "InvalidSpec")
            && condition(&cr, "Reconciled").is_some_and(|c| c["status"] == "False");
        Ok(shown.then_some(cr))
    })
    .await?;
    let ready = condition(&cr, "Ready").unwrap();
    assert_eq!((&ready["status"], &ready["message"]), (&json!("False"), &json!("spec.size is required")));
    assert_eq!(ready["observedGeneration"], generation, "filled in as for a response's condition");
    let reconciled = condition(&cr, "Reconciled").unwrap();
    assert_eq!(reconciled["reason"], "ReconcileFailed");
    assert_eq!(reconciled["message"], "plugin error (terminal): spec.size is required");
    let events = api_for(&client, "events.k8s.io/v1", "Event", Some("default")).await?;
    eventually("a Warning event ReconcileFailed about the CR", WAIT, || async {
        let found = events.list(&ListParams::default()).await?.items.into_iter().any(|e| {
            e.data["type"] == "Warning"
                && e.data["reason"] == "ReconcileFailed"
                && e.data.pointer("/regarding/name") == Some(&json!("invalid"))
        });
        Ok(found.then_some(()))
    })
    .await?;
    // Terminal: no retry until the object changes, and no child was written.
    let controller = host.manager.controller("testbed").expect("testbed running");
    let key = ObjectKey { namespace: Some("default".into()), name: "invalid".into() };
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(controller.failures(&key) <= 1, "a terminal failure is not retried: {}", controller.failures(&key));
    let config_maps = api_for(&client, "v1", "ConfigMap", Some("default")).await?;
    assert!(config_maps.get_opt("invalid-out").await?.is_none(), "nothing else of a response comes with a failure");
    // Fixed: the plugin's response replaces what the failure showed.
    apply(&client, &testbed("invalid", "ok")).await?;
    eventually("phase Ready and Ready=True after the fix", WAIT, || async {
        let cr = crs.get("invalid").await?;
        let fixed = cr.data.pointer("/status/phase") == Some(&json!("Ready"))
            && condition(&cr, "Ready").is_some_and(|c| c["status"] == "True")
            && condition(&cr, "Reconciled").is_some_and(|c| c["status"] == "True");
        Ok(fixed.then_some(()))
    })
    .await?;

    // The memcached example: a Memcached without spec.size shows Available=False InvalidSpec.
    let memcacheds = api_for(&client, "cache.example.com/v1alpha1", "Memcached", Some("default")).await?;
    let mut sizeless = memcached("sizeless", 1);
    sizeless["spec"] = json!({});
    apply(&client, &sizeless).await?;
    eventually("Available=False InvalidSpec on the Memcached", WAIT, || async {
        let cr = memcacheds.get("sizeless").await?;
        Ok(condition(&cr, "Available")
            .filter(|c| c["status"] == "False" && c["reason"] == "InvalidSpec" && c["message"] == "spec.size is required")
            .map(|_| ()))
    })
    .await?;
    Ok(())
}

/// `reconciledCondition: onFailure`: a healthy parent carries only its plugin's conditions, a
/// failing one `Reconciled=False` with the reason, removed again by the next good reconcile.
#[tokio::test]
async fn on_failure_policy_shows_reconciled_only_while_a_parent_fails() -> Result<()> {
    let policy = HostPolicy::from_yaml("defaults: {reconciledCondition: onFailure}")?;
    let (_cp, client, _host) = setup_with(ControllerConfig { policy, ..Host::test_config() }).await?;

    let memcacheds = api_for(&client, "cache.example.com/v1alpha1", "Memcached", Some("default")).await?;
    apply(&client, &memcached("healthy", 1)).await?;
    let cr = eventually("Available with the Deployment seen", WAIT, || async {
        let cr = memcacheds.get("healthy").await?;
        Ok(condition(&cr, "Available").filter(|c| c["reason"] != "DeploymentMissing").is_some().then_some(cr))
    })
    .await?;
    assert!(condition(&cr, "Reconciled").is_none(), "a healthy parent has no Reconciled condition: {:?}", cr.data["status"]);

    let testbeds = api_for(&client, "test.wasmop.dev/v1", "Testbed", Some("default")).await?;
    apply(&client, &testbed("failing", "retryable")).await?;
    let cr = eventually("Reconciled=False while it fails", WAIT, || async {
        let cr = testbeds.get("failing").await?;
        Ok(condition(&cr, "Reconciled").filter(|c| c["status"] == "False").is_some().then_some(cr))
    })
    .await?;
    assert_eq!(condition(&cr, "Reconciled").unwrap()["reason"], "ReconcileError");
    apply(&client, &testbed("failing", "ok")).await?;
    eventually("Reconciled gone after the fix", WAIT, || async {
        let cr = testbeds.get("failing").await?;
        let ready = condition(&cr, "Ready").is_some_and(|c| c["status"] == "True" && c["observedGeneration"] == 2);
        Ok((ready && condition(&cr, "Reconciled").is_none()).then_some(()))
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn writes_outside_the_parent_namespace_or_declared_kinds_are_refused() -> Result<()> {
    let (_cp, client, _host) = setup().await?;
    let crs = api_for(&client, "test.wasmop.dev/v1", "Testbed", Some("default")).await?;
    for (name, mode) in [("escape", "other-namespace"), ("secret", "undeclared")] {
        apply(&client, &testbed(name, mode)).await?;
        let cr = eventually(&format!("{name}: ActionRefused condition"), WAIT, || async {
            let cr = crs.get(name).await?;
            Ok(condition(&cr, "Reconciled").filter(|c| c["reason"] == "ActionRefused").map(|_| cr.clone()))
        })
        .await?;
        let message = condition(&cr, "Reconciled").unwrap()["message"].as_str().unwrap_or_default().to_owned();
        assert!(message.contains("nothing written"), "{message}");
    }
    let cms = api_for(&client, "v1", "ConfigMap", Some("kube-system")).await?;
    assert!(cms.get_opt("escape-escaped").await?.is_none(), "nothing written into kube-system");
    let secrets = api_for(&client, "v1", "Secret", Some("default")).await?;
    assert!(secrets.get_opt("secret-secret").await?.is_none(), "no Secret written");
    Ok(())
}

#[tokio::test]
async fn host_survives_an_api_server_restart_and_converges() -> Result<()> {
    let (cp, client, _host) = setup().await?;
    apply(&client, &memcached("before", 1)).await?;
    deployment_with_replicas(&client, "before", 1).await?;
    cp.stop_apiserver()?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    cp.start_apiserver().await?;
    let client = cp.client().await?;
    apply(&client, &memcached("before", 2)).await?;
    for i in 0..5 {
        apply(&client, &memcached(&format!("after-{i}"), 2)).await?;
    }
    deployment_with_replicas(&client, "before", 2).await?;
    for i in 0..5 {
        deployment_with_replicas(&client, &format!("after-{i}"), 2).await?;
    }
    Ok(())
}

#[tokio::test]
async fn two_hundred_crs_created_at_once_all_converge() -> Result<()> {
    let (_cp, client, _host) = setup().await?;
    let n = 200;
    let creates = (0..n).map(|i| {
        let client = client.clone();
        async move { apply(&client, &memcached(&format!("bulk-{i}"), i % 4)).await }
    });
    for result in futures::future::join_all(creates).await {
        result?;
    }
    let api = deployments(&client).await?;
    eventually("200 deployments with the right replicas", Duration::from_secs(120), || async {
        let list = api.list(&ListParams::default()).await?;
        let converged = list
            .items
            .iter()
            .filter(|d| {
                let name = d.metadata.name.as_deref().unwrap_or_default();
                let i: i64 = name.strip_prefix("bulk-").and_then(|s| s.parse().ok()).unwrap_or(-1);
                i >= 0 && d.data.pointer("/spec/replicas").and_then(Value::as_i64) == Some(i % 4)
            })
            .count();
        if converged > n as usize {
            bail!("more deployments than CRs");
        }
        Ok((converged == n as usize).then_some(()))
    })
    .await?;
    Ok(())
}
