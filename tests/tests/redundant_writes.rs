//! What the host does NOT do, counted by the real API server (`apiserver_request_total`) and by
//! the host's own reconcile counter: a reconcile that would write what the cluster already
//! holds sends nothing, and a change of a parent's status alone (the host's own status write
//! coming back as a watch event, or anyone else's) does not reconcile it again.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context as _, Result};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{Host, api_for, apply, apply_file, eventually};
use wasmop_e2e::plugins::{plugin, workspace};

const WAIT: Duration = Duration::from_secs(30);
/// Long enough for a watch event and the reconcile it would trigger (milliseconds on loopback).
const QUIET: Duration = Duration::from_secs(2);

/// `apiserver_request_total` summed by `VERB resource[/subresource]`.
async fn requests(client: &kube::Client) -> Result<HashMap<String, f64>> {
    let text = client.request_text(http::Request::get("/metrics").body(Vec::new())?).await?;
    let mut out = HashMap::new();
    for line in text.lines() {
        let Some((labels, value)) = line.strip_prefix("apiserver_request_total{").and_then(|rest| rest.rsplit_once("} ")) else {
            continue;
        };
        let label = |name: &str| {
            let start = labels.find(&format!("{name}=\""))? + name.len() + 2;
            labels[start..].split('"').next()
        };
        let (verb, resource, sub) =
            (label("verb").unwrap_or(""), label("resource").unwrap_or(""), label("subresource").unwrap_or(""));
        let key = if sub.is_empty() { format!("{verb} {resource}") } else { format!("{verb} {resource}/{sub}") };
        *out.entry(key).or_insert(0.0) += value.trim().parse::<f64>().unwrap_or(0.0);
    }
    Ok(out)
}

/// How many more `key` requests `after` counts than `before`.
fn delta(before: &HashMap<String, f64>, after: &HashMap<String, f64>, key: &str) -> f64 {
    after.get(key).copied().unwrap_or(0.0) - before.get(key).copied().unwrap_or(0.0)
}

/// The host's `controller_runtime_reconcile_total` for `plugin`, all results.
fn reconciles(host: &Host, plugin: &str) -> f64 {
    let wanted = format!("controller=\"{plugin}\"");
    host.manager
        .metrics()
        .render()
        .lines()
        .filter(|l| l.starts_with("controller_runtime_reconcile_total{") && l.contains(&wanted))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// A converged parent, and the API server's request counts from before it was created.
struct Converged {
    _cp: ControlPlane,
    client: kube::Client,
    host: Host,
    crs: Api<DynamicObject>,
    before_create: HashMap<String, f64>,
    /// The counts once `Available=True` was seen (before the test read the Deployment).
    at_available: HashMap<String, f64>,
}

/// A host serving the memcached plugin, and one Memcached (size 0) it has converged:
/// `Available=True`, and kube-controller-manager done with its Deployment.
async fn converged_memcached(name: &str) -> Result<Converged> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/memcached.yaml")).await?;
    let host = Host::start(client.clone(), &[&plugin("memcached", "wasm32-wasip2")], Host::test_config()).await?;
    let before_create = requests(&client).await?;
    apply(
        &client,
        &json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"size": 0}}),
    )
    .await?;
    let crs = api_for(&client, "cache.example.com/v1alpha1", "Memcached", Some("default")).await?;
    eventually("Available=True", WAIT, || async {
        let cr = crs.get(name).await?;
        let conditions = cr.data.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
        Ok(conditions.iter().any(|c| c["type"] == "Available" && c["status"] == "True").then_some(()))
    })
    .await?;
    let at_available = requests(&client).await?;
    let deployments = api_for(&client, "apps/v1", "Deployment", Some("default")).await?;
    eventually("kube-controller-manager done with the Deployment", WAIT, || async {
        let d = deployments.get(name).await?;
        let observed = d.data.pointer("/status/observedGeneration").and_then(Value::as_i64);
        Ok((observed.is_some() && observed == d.metadata.generation).then_some(()))
    })
    .await?;
    tokio::time::sleep(QUIET).await; // the reconciles kube-controller-manager's writes trigger
    Ok(Converged { _cp: cp, client, host, crs, before_create, at_available })
}

#[tokio::test]
async fn a_new_child_is_created_by_one_apply_without_being_read_first() -> Result<()> {
    let Converged { client, before_create, at_available: after, _cp, .. } = converged_memcached("new").await?;
    assert_eq!(delta(&before_create, &after, "APPLY deployments"), 1.0);
    assert_eq!(delta(&before_create, &after, "GET deployments"), 0.0, "the new Deployment is not read before it is created");
    // The plugin is asked again with the Deployment as created before the status is written,
    // so the first status write already says Available=True (size 0): no second one.
    assert_eq!(delta(&before_create, &after, "PATCH memcacheds/status"), 1.0, "one status write for a new parent");

    // Created by an apply like any other: its fields are the plugin's field manager's.
    let d = api_for(&client, "apps/v1", "Deployment", Some("default")).await?.get("new").await?;
    let managers: Vec<(String, String)> = d
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| (m.manager.clone().unwrap_or_default(), m.operation.clone().unwrap_or_default()))
        .collect();
    assert!(managers.contains(&("wasmop/memcached".to_owned(), "Apply".to_owned())), "{managers:?}");
    Ok(())
}

#[tokio::test]
async fn reconciling_a_converged_parent_again_sends_no_apply_and_no_status_write() -> Result<()> {
    let Converged { client, host, crs, _cp, .. } = converged_memcached("again").await?;
    let before = requests(&client).await?;
    let reconciled = reconciles(&host, "memcached");

    // A label is an input of the reconcile (not status): each change reconciles the parent,
    // whose Deployment and status are already what the plugin answers.
    for i in 0..3 {
        let patch = json!({"metadata": {"labels": {"touched": i.to_string()}}});
        crs.patch("again", &PatchParams::default(), &Patch::Merge(&patch)).await?;
        let want = reconciled + f64::from(i + 1);
        eventually("a reconcile per label change", WAIT, || async { Ok((reconciles(&host, "memcached") >= want).then_some(())) })
            .await?;
    }
    tokio::time::sleep(QUIET).await;
    let after = requests(&client).await?;
    assert_eq!(delta(&before, &after, "APPLY deployments"), 0.0, "an unchanged Deployment is not applied again");
    assert_eq!(delta(&before, &after, "PATCH memcacheds/status"), 0.0, "a status write that changes nothing is not sent");
    assert_eq!(delta(&before, &after, "GET deployments"), 0.0, "a cached child is not read from the API server");
    Ok(())
}

#[tokio::test]
async fn a_change_of_the_parent_status_alone_does_not_reconcile_it() -> Result<()> {
    let Converged { client, host, crs, _cp, .. } = converged_memcached("status-only").await?;
    let before = requests(&client).await?;
    let reconciled = reconciles(&host, "memcached");

    // Someone else writes the status (here a wrong node list): the watch event is a
    // status-only update, like the host's own status writes coming back. No reconcile, so the
    // wrong list stays.
    let patch = json!({"status": {"nodes": ["written-by-someone-else"]}});
    crs.patch_status("status-only", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    tokio::time::sleep(QUIET).await;
    assert_eq!(reconciles(&host, "memcached"), reconciled, "a status-only update reconciles nothing");
    let cr = crs.get("status-only").await.context("reading the parent")?;
    assert_eq!(cr.data.pointer("/status/nodes"), Some(&json!(["written-by-someone-else"])));

    // A label changes: a reconcile, which writes the status the plugin answers again.
    crs.patch("status-only", &PatchParams::default(), &Patch::Merge(&json!({"metadata": {"labels": {"x": "y"}}}))).await?;
    eventually("the node list corrected", WAIT, || async {
        let cr = crs.get("status-only").await?;
        Ok((cr.data.pointer("/status/nodes") == Some(&json!([]))).then_some(()))
    })
    .await?;
    tokio::time::sleep(QUIET).await;
    let after = requests(&client).await?;
    assert_eq!(delta(&before, &after, "PATCH memcacheds/status"), 2.0, "the test's status write and the host's correction");
    assert_eq!(reconciles(&host, "memcached"), reconciled + 1.0, "one reconcile, for the label; none for its own status write");
    Ok(())
}
