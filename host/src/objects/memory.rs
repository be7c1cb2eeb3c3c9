//! [`MemoryCache`]: an [`ObjectCache`] over objects held in memory.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::{ObjectCache, name_of, namespace_of};
use crate::contract::{Kind, Object};

type Key = (String, String); // (namespace, name); namespace "" for cluster-scoped

/// An [`ObjectCache`] filled by hand: fixtures for offline reconciles and tests.
///
/// ```
/// use wasmop::contract::Kind;
/// use wasmop::objects::{MemoryCache, ObjectCache};
/// let mut cache = MemoryCache::default();
/// cache.insert(serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}})).unwrap();
/// assert_eq!(cache.list(&Kind::new("", "v1", "Pod"), Some("ns")).len(), 1);
/// assert!(cache.get(&Kind::new("", "v1", "Pod"), Some("other"), "p").is_none());
/// ```
#[derive(Debug, Default, Clone)]
pub struct MemoryCache {
    objects: BTreeMap<Kind, BTreeMap<Key, Arc<Object>>>,
}

/// An object that cannot be cached because it lacks `apiVersion`, `kind` or `metadata.name`.
#[derive(Debug, thiserror::Error)]
#[error("object has no apiVersion, kind or metadata.name: {0}")]
pub struct NotAnObject(pub String);

impl MemoryCache {
    /// Add or replace an object.
    ///
    /// # Errors
    /// [`NotAnObject`] if the object has no `apiVersion`, `kind` or `metadata.name`.
    pub fn insert(&mut self, object: Value) -> Result<(), NotAnObject> {
        let (Some(kind), Some(name)) = (Kind::of_object(&object), name_of(&object)) else {
            let mut text = object.to_string();
            text.truncate(120);
            return Err(NotAnObject(text));
        };
        let key = (namespace_of(&object).unwrap_or_default().to_owned(), name.to_owned());
        self.objects.entry(kind).or_default().insert(key, Arc::new(Object::new(object)));
        Ok(())
    }

    /// Number of objects held.
    pub fn len(&self) -> usize {
        self.objects.values().map(BTreeMap::len).sum()
    }

    /// Whether no object is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl ObjectCache for MemoryCache {
    fn list(&self, kind: &Kind, namespace: Option<&str>) -> Vec<Arc<Object>> {
        let Some(objects) = self.objects.get(kind) else { return Vec::new() };
        objects.iter().filter(|((ns, _), _)| namespace.is_none_or(|want| want == ns)).map(|(_, o)| Arc::clone(o)).collect()
    }

    fn get(&self, kind: &Kind, namespace: Option<&str>, name: &str) -> Option<Arc<Object>> {
        let key = (namespace.unwrap_or_default().to_owned(), name.to_owned());
        self.objects.get(kind)?.get(&key).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(ns: &str, name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}})
    }

    #[test]
    fn list_is_ordered_by_namespace_then_name() {
        let mut c = MemoryCache::default();
        for (ns, n) in [("b", "x"), ("a", "z"), ("a", "y")] {
            c.insert(pod(ns, n)).unwrap();
        }
        let names: Vec<_> =
            c.list(&Kind::new("", "v1", "Pod"), None).iter().map(|o| name_of(o.head()).unwrap().to_owned()).collect();
        assert_eq!(names, ["y", "z", "x"]);
    }

    #[test]
    fn insert_replaces_same_object() {
        let mut c = MemoryCache::default();
        c.insert(pod("a", "x")).unwrap();
        c.insert(pod("a", "x")).unwrap();
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn a_replaced_object_is_given_with_its_new_text() {
        let mut c = MemoryCache::default();
        let kind = Kind::new("", "v1", "Pod");
        c.insert(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "a"}, "spec": 1})).unwrap();
        let old = c.get(&kind, Some("a"), "x").unwrap();
        assert!(old.json().contains(r#""spec":1"#));
        c.insert(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "a"}, "spec": 2})).unwrap();
        assert!(c.get(&kind, Some("a"), "x").unwrap().json().contains(r#""spec":2"#));
        assert!(old.json().contains(r#""spec":1"#), "a request already gathered keeps what it was given");
    }

    #[test]
    fn objects_without_identity_are_refused() {
        assert!(MemoryCache::default().insert(json!({"kind": "Pod"})).is_err());
    }
}
