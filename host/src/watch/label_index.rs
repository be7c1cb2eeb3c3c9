//! [`LabelIndex`]: the cached objects of a kind by the value of a label that names a parent.
//!
//! A related kind's selector such as `app=memcached,memcached_cr=$(parent.name)` selects, for
//! each parent, the objects whose `memcached_cr` label is the parent's name. Matching the
//! selector against every cached object of the kind made each reconcile cost as much as the
//! number of Pods in the namespace; the index gives the few candidates at once, and the whole
//! selector is then checked on them only.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::Value;

use crate::allocator::ShrinkWhenSparse;
use crate::contract::Object;
use crate::objects::label_value;

/// `(namespace, name)` of a cached object; namespace `""` for a cluster-scoped one.
pub(super) type Key = (String, String);

/// Move `key` from the set of `old` to the set of `new` in `sets` (an index of keys by some
/// value of their objects: a label's, a controller's uid); an emptied set is removed.
pub(super) fn move_key(sets: &mut HashMap<String, BTreeSet<Key>>, key: &Key, old: Option<&str>, new: Option<&str>) {
    if old == new {
        return;
    }
    if let Some(old) = old
        && let Some(keys) = sets.get_mut(old)
    {
        keys.remove(key);
        if keys.is_empty() {
            sets.remove(old);
            sets.shrink_when_sparse();
        }
    }
    if let Some(new) = new {
        sets.entry(new.to_owned()).or_default().insert(key.clone());
    }
}

/// Keys of cached objects by the value of each indexed label.
#[derive(Debug, Default)]
pub(super) struct LabelIndex {
    /// label → value → keys of the objects whose label has that value.
    by_label: HashMap<String, HashMap<String, BTreeSet<Key>>>,
}

impl LabelIndex {
    /// Whether `label` is indexed.
    pub(super) fn indexes(&self, label: &str) -> bool {
        self.by_label.contains_key(label)
    }

    /// Index `label` too (nothing if it already is), over `objects`, the kind's cache.
    pub(super) fn add_label(&mut self, label: &str, objects: &BTreeMap<Key, Arc<Object>>) {
        if self.indexes(label) {
            return;
        }
        let mut values: HashMap<String, BTreeSet<Key>> = HashMap::new();
        for (key, object) in objects {
            if let Some(value) = label_value(object.head(), label) {
                values.entry(value.to_owned()).or_default().insert(key.clone());
            }
        }
        self.by_label.insert(label.to_owned(), values);
    }

    /// Move `key` from the values `before` had to those `after` has (`None`: not cached).
    pub(super) fn update(&mut self, key: &Key, before: Option<&Value>, after: Option<&Value>) {
        for (label, values) in &mut self.by_label {
            let (old, new) = (before.and_then(|o| label_value(o, label)), after.and_then(|o| label_value(o, label)));
            move_key(values, key, old, new);
        }
    }

    /// Index every indexed label again over `objects` (after a relist).
    pub(super) fn rebuild(&mut self, objects: &BTreeMap<Key, Arc<Object>>) {
        let labels: Vec<String> = self.by_label.keys().cloned().collect();
        self.by_label.clear();
        for label in labels {
            self.add_label(&label, objects);
        }
    }

    /// Keys of the objects whose `label` is `value`, in (namespace, name) order; `None` when
    /// `label` is not indexed.
    pub(super) fn keys(&self, label: &str, value: &str) -> Option<impl Iterator<Item = &Key>> {
        let values = self.by_label.get(label)?;
        Some(values.get(value).into_iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(ns: &str, name: &str, cr: Option<&str>) -> (Key, Arc<Object>) {
        let labels = cr.map_or_else(|| json!({}), |cr| json!({"cr": cr}));
        let object = json!({"metadata": {"namespace": ns, "name": name, "labels": labels}});
        ((ns.to_owned(), name.to_owned()), Arc::new(Object::new(object)))
    }

    fn found(index: &LabelIndex, label: &str, value: &str) -> Option<Vec<String>> {
        Some(index.keys(label, value)?.map(|(ns, name)| format!("{ns}/{name}")).collect())
    }

    #[test]
    fn a_label_added_later_indexes_what_is_already_cached() {
        let objects: BTreeMap<Key, Arc<Object>> =
            [pod("a", "1", Some("x")), pod("b", "2", Some("x")), pod("a", "3", None)].into();
        let mut index = LabelIndex::default();
        assert_eq!(found(&index, "cr", "x"), None, "a label not indexed says so");
        index.add_label("cr", &objects);
        assert_eq!(found(&index, "cr", "x").unwrap(), ["a/1", "b/2"]);
        assert_eq!(found(&index, "cr", "y").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn a_changed_label_moves_the_object_and_a_deletion_removes_it() {
        let mut index = LabelIndex::default();
        index.add_label("cr", &BTreeMap::new());
        let (key, v1) = pod("a", "1", Some("x"));
        index.update(&key, None, Some(v1.head()));
        assert_eq!(found(&index, "cr", "x").unwrap(), ["a/1"]);
        let (_, v2) = pod("a", "1", Some("y"));
        index.update(&key, Some(v1.head()), Some(v2.head()));
        assert_eq!(found(&index, "cr", "x").unwrap(), Vec::<String>::new());
        assert_eq!(found(&index, "cr", "y").unwrap(), ["a/1"]);
        index.update(&key, Some(v2.head()), None);
        assert_eq!(found(&index, "cr", "y").unwrap(), Vec::<String>::new());
        assert!(index.by_label["cr"].is_empty(), "no empty value is kept");
    }

    #[test]
    fn a_rebuild_keeps_the_labels_and_forgets_objects_gone() {
        let mut index = LabelIndex::default();
        index.add_label("cr", &[pod("a", "1", Some("x"))].into());
        index.rebuild(&[pod("a", "2", Some("x"))].into());
        assert_eq!(found(&index, "cr", "x").unwrap(), ["a/2"]);
    }
}
