//! [`StatusWrites`]: the parent as the host's own status write left it, until the watch
//! delivers that write.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::allocator::ShrinkWhenSparse;
use crate::contract::Object;

/// How long a recorded write waits for the watch before it is given up.
const PENDING_FOR: Duration = Duration::from_secs(30);

/// Past this many recorded writes, each new one first drops those older than [`PENDING_FOR`].
const PURGE_ABOVE: usize = 64;

/// The parents whose status the host patched and whose watch has not delivered the patch yet:
/// for each (by uid), the `resourceVersion` the patch superseded and the parent as the patch
/// left it.
///
/// A reconcile queued while the host writes (by the event of a child it just applied, say)
/// runs as soon as the write is done, often before the watch delivers the parent's new
/// status. Compared with the cached status, the plugin's unchanged answer looks changed, and
/// the same status would be patched again: one more request for nothing. Reading the parent
/// through [`StatusWrites::freshest`] gives that reconcile what the write left instead.
///
/// Entries are short-lived: an entry goes when the watch delivers any other version of its
/// parent ([`StatusWrites::observed`]), when its parent is deleted, when a reconcile finds the
/// cache past the superseded version, and at the latest [`PENDING_FOR`] after its write.
#[derive(Debug, Default)]
pub struct StatusWrites(Mutex<HashMap<String, Pending>>);

#[derive(Debug)]
struct Pending {
    /// The `resourceVersion` of the cached parent the patch was computed against.
    superseded: String,
    /// That parent with the patch merged in and the patch's `resourceVersion`.
    parent: Arc<Object>,
    written_at: Instant,
}

fn uid_of(object: &Value) -> Option<&str> {
    object.pointer("/metadata/uid").and_then(Value::as_str)
}

fn resource_version_of(object: &Value) -> Option<&str> {
    object.pointer("/metadata/resourceVersion").and_then(Value::as_str)
}

impl StatusWrites {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        // Every update is a single insert or remove: a poisoned map is still consistent.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `cached`, or the parent as the host's own status write left it when `cached` is still
    /// the version that write superseded. A cache already past it forgets the write.
    pub fn freshest(&self, cached: Arc<Object>) -> Arc<Object> {
        let Some(uid) = uid_of(cached.head()) else { return cached };
        let mut pending = self.lock();
        let Some(entry) = pending.get(uid) else { return cached };
        if entry.written_at.elapsed() < PENDING_FOR && resource_version_of(cached.head()) == Some(entry.superseded.as_str()) {
            return Arc::clone(&entry.parent);
        }
        pending.remove(uid);
        pending.shrink_when_sparse();
        cached
    }

    /// Remember that the merge patch `patch` of the status turned `parent` (as cached, at its
    /// `resourceVersion`) into `resource_version`. A parent without uid or `resourceVersion`
    /// is not remembered.
    pub fn record(&self, parent: &Value, patch: &Value, resource_version: &str) {
        let (Some(uid), Some(superseded)) = (uid_of(parent), resource_version_of(parent)) else { return };
        let mut written = parent.clone();
        json_patch::merge(&mut written, patch);
        written["metadata"]["resourceVersion"] = resource_version.into();
        let entry =
            Pending { superseded: superseded.to_owned(), parent: Arc::new(Object::new(written)), written_at: Instant::now() };
        let mut pending = self.lock();
        if pending.len() >= PURGE_ABOVE {
            pending.retain(|_, p| p.written_at.elapsed() < PENDING_FOR);
        }
        pending.insert(uid.to_owned(), entry);
    }

    /// The watch changed a parent from `old` to `new` (`None`: absent, so a deletion when
    /// `new` is): its entry goes unless `new` is the very version the write superseded.
    pub fn observed(&self, old: Option<&Value>, new: Option<&Value>) {
        let Some(uid) = new.or(old).and_then(uid_of) else { return };
        let mut pending = self.lock();
        let superseded_again =
            new.is_some_and(|new| pending.get(uid).is_some_and(|p| resource_version_of(new) == Some(p.superseded.as_str())));
        if !superseded_again && pending.remove(uid).is_some() {
            pending.shrink_when_sparse();
        }
    }

    /// How many writes wait for their watch event.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no write waits for its watch event.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parent(version: &str, status: Value) -> Arc<Object> {
        Arc::new(Object::new(json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": "m", "namespace": "ns", "uid": "u1", "resourceVersion": version},
            "spec": {"size": 4}, "status": status})))
    }

    fn written_over(cached: &Arc<Object>) -> StatusWrites {
        let writes = StatusWrites::default();
        writes.record(&cached.to_value(), &json!({"status": {"nodes": ["a", "b"], "old": null}}), "11");
        writes
    }

    #[test]
    fn a_cache_still_at_the_superseded_version_reads_as_the_write_left_it() {
        let cached = parent("10", json!({"nodes": ["a"], "old": 1, "kept": true}));
        let writes = written_over(&cached);
        let fresh = writes.freshest(Arc::clone(&cached));
        assert_eq!(fresh.to_value()["status"], json!({"nodes": ["a", "b"], "kept": true}));
        assert_eq!(fresh.to_value()["metadata"]["resourceVersion"], "11");
        assert_eq!(fresh.to_value()["spec"], cached.to_value()["spec"]);
        assert_eq!(writes.len(), 1, "kept until the watch delivers the write");
    }

    #[test]
    fn a_cache_past_the_superseded_version_is_read_as_cached_and_the_write_forgotten() {
        let writes = written_over(&parent("10", json!({})));
        let newer = parent("12", json!({"nodes": ["x"]}));
        assert!(Arc::ptr_eq(&writes.freshest(Arc::clone(&newer)), &newer));
        assert!(writes.is_empty());
    }

    #[test]
    fn the_watch_delivering_another_version_or_the_deletion_forgets_the_write() {
        let cached = parent("10", json!({}));
        let writes = written_over(&cached);
        writes.observed(None, Some(cached.head()));
        assert_eq!(writes.len(), 1, "the superseded version itself, delivered late, changes nothing");
        writes.observed(Some(cached.head()), Some(parent("11", json!({})).head()));
        assert!(writes.is_empty());

        let writes = written_over(&cached);
        writes.observed(Some(cached.head()), None);
        assert!(writes.is_empty());
    }

    #[test]
    fn other_parents_and_parents_without_identity_are_untouched() {
        let writes = written_over(&parent("10", json!({})));
        let other = Arc::new(Object::new(json!({"metadata": {"name": "o", "uid": "u2", "resourceVersion": "10"}})));
        assert!(Arc::ptr_eq(&writes.freshest(Arc::clone(&other)), &other));
        writes.record(&json!({"metadata": {"name": "no-uid", "resourceVersion": "3"}}), &json!({"status": {}}), "4");
        writes.observed(None, Some(other.head()));
        assert_eq!(writes.len(), 1);
    }
}
