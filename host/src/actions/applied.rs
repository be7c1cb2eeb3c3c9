//! [`AppliedChildren`]: what the host last applied to each child, so an unchanged child is not
//! applied again. Entries live exactly as long as their child and parent do.

use std::collections::HashMap;
use std::hash::Hasher;
use std::sync::Mutex;

use serde_json::Value;

use super::scope::PARENT_UID_LABEL;
use crate::allocator::ShrinkWhenSparse;
use crate::contract::ObjectRef;
use crate::objects::controller_uid;

/// Fingerprints of the last content applied per child, kept per plugin and grouped by the
/// parent's uid.
///
/// Skipping an apply because the observed object contains the desired fields is not enough:
/// a field the plugin stopped returning must be removed, which only a new apply does.
///
/// The map holds only children that exist: an entry goes with its child (deleted by the host
/// or by anyone else, as the watch reports it: [`AppliedChildren::forget_child`]) and with its
/// parent ([`AppliedChildren::forget_parent`]), so a host whose parents come and go does not
/// grow.
#[derive(Debug, Default)]
pub struct AppliedChildren(Mutex<HashMap<String, HashMap<ObjectRef, u64>>>);

impl AppliedChildren {
    /// A hash of `object`'s JSON text, streamed into the hasher without building the text.
    fn fingerprint(object: &Value) -> u64 {
        struct HashWriter(std::hash::DefaultHasher);
        impl std::io::Write for HashWriter {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.write(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut writer = HashWriter(std::hash::DefaultHasher::new());
        serde_json::to_writer(&mut writer, object).expect("a Value always serializes and the writer never fails");
        writer.0.finish()
    }

    /// Whether `desired` is what was last applied to `r` for the parent with uid `parent`.
    pub(super) fn unchanged(&self, parent: &str, r: &ObjectRef, desired: &Value) -> bool {
        let fingerprint = Self::fingerprint(desired);
        let map = self.0.lock().expect("applied lock");
        map.get(parent).and_then(|children| children.get(r)) == Some(&fingerprint)
    }

    /// Remember that `desired` was applied to `r` for the parent with uid `parent`.
    pub(super) fn record(&self, parent: &str, r: ObjectRef, desired: &Value) {
        let fingerprint = Self::fingerprint(desired);
        let mut map = self.0.lock().expect("applied lock");
        map.entry(parent.to_owned()).or_default().insert(r, fingerprint);
    }

    /// Forget the child `r` of the parent with uid `parent`.
    pub(super) fn forget(&self, parent: &str, r: &ObjectRef) {
        let mut map = self.0.lock().expect("applied lock");
        if let Some(children) = map.get_mut(parent) {
            children.remove(r);
            if children.is_empty() {
                map.remove(parent);
                map.shrink_when_sparse();
            }
        }
    }

    /// Forget a child that is gone (`child` is its last observed version): the parent it
    /// belonged to is named by its controller ownerReference, or by [`PARENT_UID_LABEL`] for a
    /// cluster-scoped child of a namespaced parent.
    pub fn forget_child(&self, child: &Value) {
        let parent = controller_uid(child).or_else(|| child.pointer("/metadata/labels")?.get(PARENT_UID_LABEL)?.as_str());
        if let (Some(parent), Some(r)) = (parent, ObjectRef::of_object(child)) {
            self.forget(parent, &r);
        }
    }

    /// Forget every child of a parent that is gone (by its uid).
    pub fn forget_parent(&self, parent: &str) {
        let mut map = self.0.lock().expect("applied lock");
        map.remove(parent);
        map.shrink_when_sparse();
    }

    /// How many children have a fingerprint.
    pub fn len(&self) -> usize {
        self.0.lock().expect("applied lock").values().map(HashMap::len).sum()
    }

    /// Whether no child has a fingerprint.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn child(name: &str, parent: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns",
            "ownerReferences": [{"uid": parent, "controller": true}]}, "data": {"k": name}})
    }

    fn applied(children: &[(&str, &str)]) -> AppliedChildren {
        let applied = AppliedChildren::default();
        for (name, parent) in children {
            let c = child(name, parent);
            applied.record(parent, ObjectRef::of_object(&c).unwrap(), &c);
        }
        applied
    }

    #[test]
    fn forgetting_every_parent_gives_the_table_back() {
        let names: Vec<(String, String)> = (0..2_000).map(|i| (format!("c{i}"), format!("u{i}"))).collect();
        let pairs: Vec<(&str, &str)> = names.iter().map(|(c, u)| (c.as_str(), u.as_str())).collect();
        let applied = applied(&pairs);
        let grown = applied.0.lock().unwrap().capacity();
        for (c, u) in &pairs[..1_000] {
            applied.forget_child(&child(c, u));
        }
        for (_, u) in &pairs[1_000..] {
            applied.forget_parent(u);
        }
        assert!(applied.is_empty());
        let left = applied.0.lock().unwrap().capacity();
        assert!(left < grown / 8, "{left} of {grown} kept");
    }

    #[test]
    fn an_applied_child_is_unchanged_until_its_content_changes() {
        let applied = applied(&[("a", "u1")]);
        let c = child("a", "u1");
        let r = ObjectRef::of_object(&c).unwrap();
        assert!(applied.unchanged("u1", &r, &c));
        assert!(!applied.unchanged("u1", &r, &child("other-content", "u1")));
        assert!(!applied.unchanged("u2", &r, &c), "another parent's fingerprint is not this one's");
    }

    #[test]
    fn a_deleted_child_is_forgotten() {
        let applied = applied(&[("a", "u1"), ("b", "u1")]);
        applied.forget_child(&child("a", "u1"));
        assert_eq!(applied.len(), 1);
        applied.forget_child(&child("b", "u1"));
        assert!(applied.is_empty());
        assert!(applied.0.lock().unwrap().is_empty(), "no empty map is left behind for the parent");
    }

    #[test]
    fn a_deleted_cluster_scoped_child_is_forgotten_through_its_parent_label() {
        let applied = AppliedChildren::default();
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "r", "labels": {PARENT_UID_LABEL: "u1"}}});
        applied.record("u1", ObjectRef::of_object(&role).unwrap(), &role);
        applied.forget_child(&role);
        assert!(applied.is_empty());
    }

    #[test]
    fn a_deleted_parent_takes_its_fingerprints_with_it() {
        let applied = applied(&[("a", "u1"), ("b", "u1"), ("c", "u2")]);
        applied.forget_parent("u1");
        assert_eq!(applied.len(), 1);
        let c = child("c", "u2");
        assert!(applied.unchanged("u2", &ObjectRef::of_object(&c).unwrap(), &c), "other parents are kept");
    }
}
