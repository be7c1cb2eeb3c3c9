//! [`ShownChildren`]: children a reconcile created and showed its plugin before the watch
//! delivered them.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::mapping::ObjectKey;
use crate::allocator::ShrinkWhenSparse;
use crate::contract::{Kind, ObjectRef};

/// How long a shown child waits for its watch event before it is given up.
const PENDING_FOR: Duration = Duration::from_secs(30);

/// Past this many shown children, each new one first drops those older than [`PENDING_FOR`].
const PURGE_ABOVE: usize = 64;

/// The children a reconcile created and showed the plugin (asked again with them, its second
/// answer taken), by kind, namespace and name: the `resourceVersion` the API server answered
/// the creation with, and the parent that reconcile was for.
///
/// The watch event of such a child (its creation coming back) would queue the parent for a
/// reconcile that gives the plugin nothing new: the same child at the same version, and the
/// parent's status as the host just wrote it. [`ShownChildren::delivered`] names that parent,
/// so the event queues every other parent it concerns but not that one. Any other version of
/// the child queues the parent as usual.
///
/// Entries are short-lived: an entry goes with the first watch event of its child (whatever
/// its version), and at the latest [`PENDING_FOR`] after it was shown.
#[derive(Debug, Default)]
pub struct ShownChildren(Mutex<HashMap<ChildKey, Shown>>);

/// A child's kind, namespace and name.
type ChildKey = (Kind, Option<String>, String);

#[derive(Debug)]
struct Shown {
    resource_version: String,
    parent: ObjectKey,
    shown_at: Instant,
}

fn key_of(kind: &Kind, object: &Value) -> Option<ChildKey> {
    let r = ObjectRef::of_object(object)?;
    Some((kind.clone(), r.namespace, r.name))
}

fn resource_version_of(object: &Value) -> Option<&str> {
    object.pointer("/metadata/resourceVersion").and_then(Value::as_str)
}

impl ShownChildren {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ChildKey, Shown>> {
        // Every update is a single insert or remove: a poisoned map is still consistent.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Remember that the reconcile of `parent` showed its plugin `child` (as the API server
    /// answered its creation). A child without identity or `resourceVersion` is not
    /// remembered.
    pub fn record(&self, child: &Value, parent: &ObjectKey) {
        let Some(r) = ObjectRef::of_object(child) else { return };
        let Some(version) = resource_version_of(child) else { return };
        let shown = Shown { resource_version: version.to_owned(), parent: parent.clone(), shown_at: Instant::now() };
        let mut pending = self.lock();
        if pending.len() >= PURGE_ABOVE {
            pending.retain(|_, s| s.shown_at.elapsed() < PENDING_FOR);
        }
        pending.insert((r.kind(), r.namespace, r.name), shown);
    }

    /// The watch changed an object of `kind` from `old` to `new`: the parent whose plugin was
    /// already shown `new` at this very version, if any (that parent need not be reconciled
    /// for this event). The child's entry goes either way.
    pub fn delivered(&self, kind: &Kind, old: Option<&Value>, new: Option<&Value>) -> Option<ObjectKey> {
        let key = key_of(kind, new.or(old)?)?;
        let mut pending = self.lock();
        if pending.is_empty() {
            return None;
        }
        let shown = pending.remove(&key)?;
        pending.shrink_when_sparse();
        let fresh = shown.shown_at.elapsed() < PENDING_FOR;
        (fresh && new.and_then(resource_version_of) == Some(shown.resource_version.as_str())).then_some(shown.parent)
    }

    /// How many shown children wait for their watch event.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no shown child waits for its watch event.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment(version: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "m", "namespace": "ns", "resourceVersion": version}})
    }

    fn parent() -> ObjectKey {
        ObjectKey { namespace: Some("ns".into()), name: "m".into() }
    }

    fn kind() -> Kind {
        Kind::new("apps", "v1", "Deployment")
    }

    #[test]
    fn the_creation_coming_back_at_the_shown_version_names_the_parent_once() {
        let shown = ShownChildren::default();
        shown.record(&deployment("6"), &parent());
        assert_eq!(shown.len(), 1);
        assert_eq!(shown.delivered(&kind(), None, Some(&deployment("6"))), Some(parent()));
        assert!(shown.is_empty());
        // The next event of the child is news to the plugin.
        assert_eq!(shown.delivered(&kind(), Some(&deployment("6")), Some(&deployment("7"))), None);
    }

    #[test]
    fn another_version_or_a_deletion_names_no_parent_and_forgets_the_child() {
        let shown = ShownChildren::default();
        shown.record(&deployment("6"), &parent());
        assert_eq!(shown.delivered(&kind(), None, Some(&deployment("7"))), None);
        assert!(shown.is_empty());
        shown.record(&deployment("6"), &parent());
        assert_eq!(shown.delivered(&kind(), Some(&deployment("6")), None), None);
        assert!(shown.is_empty());
    }

    #[test]
    fn an_object_of_another_kind_or_name_is_not_the_shown_child() {
        let shown = ShownChildren::default();
        shown.record(&deployment("6"), &parent());
        let mut other = deployment("6");
        other["metadata"]["name"] = json!("n");
        assert_eq!(shown.delivered(&kind(), None, Some(&other)), None);
        assert_eq!(shown.delivered(&Kind::new("", "v1", "ConfigMap"), None, Some(&deployment("6"))), None);
        assert_eq!(shown.len(), 1);
    }

    #[test]
    fn a_child_without_a_version_is_not_remembered() {
        let shown = ShownChildren::default();
        let mut unversioned = deployment("6");
        unversioned["metadata"].as_object_mut().unwrap().remove("resourceVersion");
        shown.record(&unversioned, &parent());
        assert!(shown.is_empty());
    }
}
