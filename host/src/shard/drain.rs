//! The owner's side of a handover: a replica lets go of a parent the sharder marked with
//! [`DRAIN_LABEL`], and never reconciles a parent that is not labelled for it.
//!
//! A worker checks [`hand_over`] (through its plugin controller) after it took a key and
//! before it reconciles. The queue hands a key to one worker at a time, so a reconcile of the parent
//! that was running when the drain label arrived has finished by then; the worker then removes
//! both labels (the parent leaves this replica's watch, which drops it from the cache and its
//! children's apply fingerprints with it) instead of reconciling. The removal carries the
//! cached `resourceVersion`: a stale cache (the parent already moved on) gets a conflict, not a
//! write over the new owner's label.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::{DRAIN_LABEL, SHARD_LABEL};

/// The field manager of a replica's own label removals.
const OWNER_MANAGER: &str = "wasmop-shard";

/// What a sharded worker does with a key instead of, or before, reconciling it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handover {
    /// The parent is this replica's and stays: reconcile it.
    Reconcile,
    /// The parent is not (or no longer) labelled for this replica: nothing to do, nothing
    /// counted.
    NotMine,
    /// The parent was draining: its labels are removed, the sharder gives it to its new owner.
    Released,
    /// The labels could not be removed (a conflict, the API server): try again with backoff.
    Retry,
}

/// The label of `parent` naming its replica.
fn label<'a>(parent: &'a Value, name: &str) -> Option<&'a str> {
    parent.pointer("/metadata/labels")?.get(name)?.as_str()
}

/// Where `parent` (`None`: not in the cache) stands for replica `me`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    /// Labelled for `me`, not draining.
    Mine,
    /// Labelled for `me` and draining.
    Draining,
    /// Not labelled for `me`.
    NotMine,
}

fn standing(parent: Option<&Value>, me: &str) -> Standing {
    match parent {
        Some(p) if label(p, SHARD_LABEL) == Some(me) && label(p, DRAIN_LABEL).is_some() => Standing::Draining,
        Some(p) if label(p, SHARD_LABEL) == Some(me) => Standing::Mine,
        _ => Standing::NotMine,
    }
}

/// A parent a sharded worker took from the queue, as the host sees it.
#[derive(Debug)]
pub struct HeldParent<'a> {
    /// The plugin reconciling it (for the logs).
    pub plugin: &'a str,
    /// The API of its kind (in its namespace, for a namespaced kind).
    pub api: Api<DynamicObject>,
    /// Its namespace (`None`: cluster-scoped), for the logs.
    pub namespace: Option<&'a str>,
    /// Its name.
    pub name: &'a str,
    /// The parent as the host's cache holds it (`None`: not cached).
    pub cached: Option<&'a Value>,
}

/// Replica `me`'s handover of `parent`: [`Handover::Reconcile`] when it is its own and not
/// draining; otherwise what was done instead (see the module).
pub async fn hand_over(parent: HeldParent<'_>, me: &str) -> Handover {
    let HeldParent { plugin, api, namespace, name, cached } = parent;
    let cached = match (standing(cached, me), cached) {
        (Standing::Draining, Some(cached)) => cached,
        (Standing::Mine, _) => return Handover::Reconcile,
        _ => return Handover::NotMine,
    };
    let shown = match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    };
    let version = cached.pointer("/metadata/resourceVersion").cloned().unwrap_or(Value::Null);
    let body = json!({"metadata": {"resourceVersion": version, "labels": {SHARD_LABEL: null, DRAIN_LABEL: null}}});
    let params = PatchParams { field_manager: Some(OWNER_MANAGER.to_owned()), ..PatchParams::default() };
    match api.patch_metadata(name, &params, &Patch::Merge(body)).await {
        Ok(_) => {
            tracing::info!(plugin = %plugin, parent = %shown, "drained: parent handed back to the sharder");
            Handover::Released
        }
        Err(e) => {
            tracing::warn!(plugin = %plugin, parent = %shown, error = %e, "cannot hand the parent back; retrying");
            Handover::Retry
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "default", "labels": labels}})
    }

    #[test]
    fn a_replica_reconciles_only_parents_labelled_for_it() {
        assert_eq!(standing(Some(&parent(json!({SHARD_LABEL: "me"}))), "me"), Standing::Mine);
        assert_eq!(standing(Some(&parent(json!({SHARD_LABEL: "other"}))), "me"), Standing::NotMine);
        assert_eq!(standing(Some(&parent(json!({}))), "me"), Standing::NotMine);
        assert_eq!(standing(None, "me"), Standing::NotMine);
    }

    #[test]
    fn a_draining_parent_is_released_not_reconciled() {
        let draining = parent(json!({SHARD_LABEL: "me", DRAIN_LABEL: "true"}));
        assert_eq!(standing(Some(&draining), "me"), Standing::Draining);
        let others = parent(json!({SHARD_LABEL: "other", DRAIN_LABEL: "true"}));
        assert_eq!(standing(Some(&others), "me"), Standing::NotMine);
    }
}
