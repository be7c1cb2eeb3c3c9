//! The native kube-rs controller the host is measured against: the memcached plugin's logic
//! (`plugins/memcached`, natively) in a kube-rs 5 `Controller`, with the host's write avoidance.
//!
//! Shared by the benches of this crate (`#[path = "support/native.rs"] mod native;`): the
//! convergence bench runs it in-process (runs B and C), the memory bench in a process of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::ApiResource;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{PredicateConfig, WatchStreamExt, predicates, watcher};
use serde::Deserialize;
use serde_json::{Value, json};

/// Field manager of the native controller.
pub const NATIVE_MANAGER: &str = "native/memcached";

/// What the native controller did, counted.
#[derive(Debug, Clone, Copy, Default)]
pub struct NativeCounts {
    /// Reconciles run.
    pub reconciles: u64,
    /// Server-side applies of a Deployment.
    pub applies: u64,
    /// Merge patches of a Memcached's status.
    pub status_patches: u64,
    /// Reconciles that failed.
    pub errors: u64,
}

/// What the native reconciler reads and counts.
pub struct NativeCtx {
    client: kube::Client,
    memcached: ApiResource,
    deployments: Store<Deployment>,
    pods: Store<Pod>,
    reconciles: AtomicU64,
    applies: AtomicU64,
    status_patches: AtomicU64,
    errors: AtomicU64,
    reconciled_condition: bool,
}

/// How the native controller is configured.
#[derive(Debug, Clone, Copy, Default)]
pub struct NativeOptions {
    /// `predicates::generation` on the Memcached stream (status-only changes do not trigger).
    pub generation_predicate: bool,
    /// Write the host's `Reconciled` condition next to `Available`, so the parents' status is
    /// the same as the host's (same size of every write and watch event).
    pub reconciled_condition: bool,
}

impl NativeCtx {
    /// What it did so far.
    pub fn counts(&self) -> NativeCounts {
        NativeCounts {
            reconciles: self.reconciles.load(Ordering::Relaxed),
            applies: self.applies.load(Ordering::Relaxed),
            status_patches: self.status_patches.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }
}

#[derive(Debug)]
pub struct NativeError(String);

impl std::fmt::Display for NativeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NativeError {}

impl From<kube::Error> for NativeError {
    fn from(e: kube::Error) -> Self {
        Self(e.to_string())
    }
}

/// Start the native controller: one watch (reflector) per kind like the host — Memcacheds
/// (the controller's own), Deployments (owned: triggers + observed state) and Pods (related:
/// triggers by label + `status.nodes`) — concurrency 16.
pub async fn start_native(
    client: kube::Client,
    ar: ApiResource,
    options: NativeOptions,
) -> Result<(tokio::task::JoinHandle<()>, Arc<NativeCtx>)> {
    let NativeOptions { generation_predicate, reconciled_condition } = options;
    let (deployments, d_writer) = reflector::store::<Deployment>();
    let d_stream = watcher(Api::<Deployment>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .modify(|d| d.managed_fields_mut().clear())
        .reflect(d_writer)
        .touched_objects();
    let (pods, p_writer) = reflector::store::<Pod>();
    let p_stream = watcher(Api::<Pod>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .modify(|p| p.managed_fields_mut().clear())
        .reflect(p_writer)
        .touched_objects();
    let ctx = Arc::new(NativeCtx {
        client: client.clone(),
        memcached: ar.clone(),
        deployments: deployments.clone(),
        pods: pods.clone(),
        reconciles: AtomicU64::new(0),
        applies: AtomicU64::new(0),
        status_patches: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        reconciled_condition,
    });
    let pod_owner_ar = ar.clone();
    let parent_api = Api::<DynamicObject>::all_with(client, &ar);
    let controller = if generation_predicate {
        let writer = reflector::store::Writer::<DynamicObject>::new(ar.clone());
        let reader = writer.as_reader();
        let trigger = watcher(parent_api, watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .applied_objects()
            .predicate_filter(predicates::generation, PredicateConfig::default());
        Controller::for_stream_with(trigger, reader, ar)
    } else {
        Controller::new_with(parent_api, watcher::Config::default(), ar)
    };
    let controller = controller
        .owns_stream(d_stream)
        .watches_stream(p_stream, move |pod: Pod| {
            let labels = pod.labels();
            let ns = pod.namespace()?;
            (labels.get("app").map(String::as_str) == Some("memcached"))
                .then(|| labels.get("memcached_cr"))
                .flatten()
                .map(|cr| ObjectRef::new_with(cr, pod_owner_ar.clone()).within(&ns))
        })
        .with_config(controller::Config::default().concurrency(16));
    let parents = controller.store();
    let task = tokio::spawn(
        controller
            .run(
                native_reconcile,
                |_obj, _err: &NativeError, ctx: Arc<NativeCtx>| {
                    ctx.errors.fetch_add(1, Ordering::Relaxed);
                    Action::requeue(Duration::from_secs(1))
                },
                Arc::clone(&ctx),
            )
            .for_each(|r| {
                if let Err(e) = r {
                    tracing::debug!(target: "converge", error = %e, "native controller");
                }
                std::future::ready(())
            }),
    );
    // `Store::wait_until_ready` alone was seen to miss its wake-up here (it returned only when
    // an outer timeout re-polled it), so re-poll it every 10 ms.
    for (what, store) in [
        ("memcacheds", StoreRef::Parents(&parents)),
        ("deployments", StoreRef::Deployments(&deployments)),
        ("pods", StoreRef::Pods(&pods)),
    ] {
        let t = Instant::now();
        loop {
            let ready = match store {
                StoreRef::Parents(s) => tokio::time::timeout(Duration::from_millis(10), s.wait_until_ready()).await,
                StoreRef::Deployments(s) => tokio::time::timeout(Duration::from_millis(10), s.wait_until_ready()).await,
                StoreRef::Pods(s) => tokio::time::timeout(Duration::from_millis(10), s.wait_until_ready()).await,
            };
            match ready {
                Ok(r) => {
                    r.with_context(|| format!("native controller: {what} store"))?;
                    break;
                }
                Err(_) if t.elapsed() < Duration::from_secs(30) => {}
                Err(_) => bail!("native controller: {what} store not ready after 30 s"),
            }
        }
        tracing::info!("native controller: {what} store ready after {:.2?}", t.elapsed());
    }
    Ok((task, ctx))
}

#[derive(Clone, Copy)]
enum StoreRef<'a> {
    Parents(&'a Store<DynamicObject>),
    Deployments(&'a Store<Deployment>),
    Pods(&'a Store<Pod>),
}

/// The memcached plugin's logic (the same functions of `plugins/memcached`, natively), with the
/// host's write avoidance: the Deployment is server-side applied unless the observed one (from
/// the reflector) already has every desired field, and the status is merge-patched unless it
/// already holds the same fields and conditions (`lastTransitionTime` kept while the status of
/// a condition does not change, `observedGeneration` set).
async fn native_reconcile(cr: Arc<DynamicObject>, ctx: Arc<NativeCtx>) -> Result<Action, NativeError> {
    ctx.reconciles.fetch_add(1, Ordering::Relaxed);
    if cr.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let name = cr.name_any();
    let ns = cr.namespace().unwrap_or_default();
    let spec = memcached::Memcached::deserialize(&cr.data).map_err(|e| NativeError(format!("{name}: {e}")))?;
    let size = memcached::desired_size(&spec).map_err(|e| NativeError(format!("{name}: {e}")))?;

    let mut desired = memcached::deployment(&name, Some(&ns), size);
    desired.metadata.owner_references = Some(vec![OwnerReference {
        api_version: ctx.memcached.api_version.clone(),
        kind: ctx.memcached.kind.clone(),
        name: name.clone(),
        uid: cr.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    let desired = serde_json::to_value(&desired).map_err(|e| NativeError(e.to_string()))?;
    let observed = ctx
        .deployments
        .get(&ObjectRef::new(&name).within(&ns))
        .map(|d| serde_json::to_value(&*d))
        .transpose()
        .map_err(|e| NativeError(e.to_string()))?;
    if !observed.as_ref().is_some_and(|o| contains(o, &desired)) {
        Api::<Deployment>::namespaced(ctx.client.clone(), &ns)
            .patch(&name, &PatchParams::apply(NATIVE_MANAGER).force(), &Patch::Apply(&desired))
            .await?;
        ctx.applies.fetch_add(1, Ordering::Relaxed);
    }

    let mut nodes: Vec<String> = ctx
        .pods
        .state_filter(|p| {
            let l = p.labels();
            p.namespace().as_deref() == Some(ns.as_str())
                && l.get("app").map(String::as_str) == Some("memcached")
                && l.get("memcached_cr") == Some(&name)
        })
        .iter()
        .map(|p| p.name_any())
        .collect();
    nodes.sort_unstable();
    let available = memcached::available(observed.as_ref(), size);

    let existing = cr.data.get("status").cloned().unwrap_or_else(|| json!({}));
    let old_conditions = existing.get("conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let status_str = available.status.as_str();
    let transition = old_conditions
        .iter()
        .find(|c| c["type"] == available.type_.as_str() && c["status"] == status_str)
        .and_then(|c| c["lastTransitionTime"].as_str().map(str::to_owned))
        .unwrap_or_else(now);
    let mut condition = json!({
        "type": available.type_, "status": status_str, "reason": available.reason,
        "message": available.message, "lastTransitionTime": transition,
    });
    if let Some(g) = cr.metadata.generation {
        condition["observedGeneration"] = json!(g);
    }
    let mut conditions: Vec<Value> = old_conditions.into_iter().filter(|c| c["type"] != available.type_.as_str()).collect();
    conditions.push(condition);
    if ctx.reconciled_condition {
        // The host's own condition, as `actions::status` writes it (first, as the plugin's
        // conditions are merged after it on the first reconcile).
        let old = conditions.iter().position(|c| c["type"] == "Reconciled");
        let transition = old.and_then(|i| conditions[i]["lastTransitionTime"].as_str().map(str::to_owned)).unwrap_or_else(now);
        let mut reconciled = json!({"type": "Reconciled", "status": "True", "reason": "ReconcileSucceeded",
            "message": "reconciled by memcached 0.1.0", "lastTransitionTime": transition});
        if let Some(g) = cr.metadata.generation {
            reconciled["observedGeneration"] = json!(g);
        }
        match old {
            Some(i) => conditions[i] = reconciled,
            None => conditions.insert(0, reconciled),
        }
    }
    let status = json!({"nodes": nodes, "conditions": conditions});
    if !contains(&existing, &status) {
        Api::<DynamicObject>::namespaced_with(ctx.client.clone(), &ns, &ctx.memcached)
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({ "status": status })))
            .await?;
        ctx.status_patches.fetch_add(1, Ordering::Relaxed);
    }
    Ok(Action::await_change())
}

/// Every field of `desired` is in `observed` with the same value (arrays: same length,
/// elementwise) — the host's `actions::contains`, restated so the native side is self-contained.
fn contains(observed: &Value, desired: &Value) -> bool {
    match (observed, desired) {
        (Value::Object(o), Value::Object(d)) => d.iter().all(|(k, dv)| o.get(k).is_some_and(|ov| contains(ov, dv))),
        (Value::Array(o), Value::Array(d)) => o.len() == d.len() && o.iter().zip(d).all(|(ov, dv)| contains(ov, dv)),
        (Value::Number(o), Value::Number(d)) => o.as_f64() == d.as_f64(),
        (o, d) => o == d,
    }
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}
