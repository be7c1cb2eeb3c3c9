//! Which parents a change concerns: the event → queue-key mapping of one plugin.

use serde_json::{Map, Value};

use crate::contract::{Kind, Manifest, Object, Scope};
use crate::objects::{ObjectCache, label_value, name_of, namespace_of};

/// Identifies a parent in its plugin's queue.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// Namespace, `None` for cluster-scoped parents.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

impl ObjectKey {
    /// The key of an object.
    pub fn of(object: &Value) -> Option<Self> {
        Some(Self { namespace: namespace_of(object).map(str::to_owned), name: name_of(object)?.to_owned() })
    }
}

/// Whether an update changed only what a reconcile does not read as input: the status
/// (usually our own write) and bookkeeping metadata (`resourceVersion`, `managedFields`). Such
/// updates do not re-trigger the parent, which keeps a plugin's status write from looping.
///
/// Runs on the watch task for every update of a parent (each status write of the host comes
/// back as one), so it compares in place: nothing is copied.
pub fn only_status_changed(old: &Value, new: &Value) -> bool {
    /// Top-level fields and metadata fields an update may change without concerning the plugin.
    const IGNORED: &[&str] = &["status"];
    const IGNORED_META: &[&str] = &["resourceVersion", "managedFields"];
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else { return old == new };
    same_fields_except(old, new, IGNORED, |key, o, n| match (key, o.as_object(), n.as_object()) {
        ("metadata", Some(o), Some(n)) => same_fields_except(o, n, IGNORED_META, |_, o, n| o == n),
        _ => o == n,
    })
}

/// Whether `old` and `new` hold the same fields apart from `ignored` (present in either or
/// both, with any value), the values compared by `same(key, old, new)`.
fn same_fields_except(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    ignored: &[&str],
    same: impl Fn(&str, &Value, &Value) -> bool,
) -> bool {
    let kept = |(k, _): &(&String, &Value)| !ignored.contains(&k.as_str());
    old.iter().filter(kept).count() == new.iter().filter(kept).count()
        && old.iter().filter(kept).all(|(k, o)| new.get(k).is_some_and(|n| same(k, o, n)))
}

/// The parents of `manifest` that a change of an object of `kind` concerns.
///
/// - the parent kind: the object itself (unless only its status changed);
/// - a child kind: the parent named by its controller ownerReference;
/// - a related kind: every parent whose related selector matches it (before or after the
///   change) — in the object's namespace for a namespaced parent, among all parents for a
///   cluster-scoped one (whose related objects may live in any namespace).
///
/// A cluster-scoped parent's key has no namespace, whatever the namespace of the changed
/// object.
pub fn parents_of_change(
    manifest: &Manifest,
    cache: &dyn ObjectCache,
    kind: &Kind,
    old: Option<&Object>,
    new: Option<&Object>,
) -> Vec<ObjectKey> {
    let mut keys = Vec::new();
    // What the mapping reads of each version: its metadata.
    let versions = || old.map(Object::head).into_iter().chain(new.map(Object::head));
    if kind == &manifest.parent {
        if let (Some(o), Some(n)) = (old, new)
            && only_status_changed(&o.to_value(), &n.to_value())
        {
            return keys;
        }
        keys.extend(versions().filter_map(ObjectKey::of));
    }
    // The namespace the parents of a changed object live in.
    let parent_namespace = |object: &Value| match manifest.scope {
        Scope::Namespaced => namespace_of(object).map(str::to_owned),
        Scope::Cluster => None,
    };
    if manifest.children.contains(kind) {
        for object in versions() {
            if let Some(owner) = controller_owner(object, manifest) {
                keys.push(ObjectKey { namespace: parent_namespace(object), name: owner });
            }
        }
    }
    for related in manifest.related.iter().filter(|r| &r.kind == kind) {
        let ns = match manifest.scope {
            Scope::Namespaced => match versions().find_map(namespace_of) {
                Some(ns) => Some(ns),
                None => continue,
            },
            Scope::Cluster => None,
        };
        let candidates = match related.parent_name_label() {
            // The object's label names the only parent it can match: one lookup, no scan.
            Some(label) => versions()
                .filter_map(|o| label_value(o, label))
                .filter_map(|name| cache.get(&manifest.parent, ns, name))
                .collect(),
            None => cache.list(&manifest.parent, ns),
        };
        for parent in candidates {
            let Some(parent_name) = name_of(parent.head()) else { continue };
            let Ok(selector) = related.selector_for(parent_name) else { continue };
            if versions().any(|o| selector.matches_object(o)) {
                keys.extend(ObjectKey::of(parent.head()));
            }
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

/// The name of the object's controller owner when that owner is of the plugin's parent kind.
fn controller_owner(object: &Value, manifest: &Manifest) -> Option<String> {
    let api_version = manifest.parent.api_version();
    object.pointer("/metadata/ownerReferences")?.as_array()?.iter().find_map(|r| {
        (r["controller"].as_bool() == Some(true)
            && r["kind"].as_str() == Some(manifest.parent.kind.as_str())
            && r["apiVersion"].as_str() == Some(api_version.as_str()))
        .then(|| r["name"].as_str().map(str::to_owned))
        .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::objects::MemoryCache;
    use serde_json::json;

    fn manifest() -> Manifest {
        crate::contract::manifest::fixtures::memcached("cr=$(parent.name)")
    }

    /// A cache holding Memcached parents of these names in namespace `ns`.
    fn cache_with_parents(names: &[&str]) -> MemoryCache {
        let mut cache = MemoryCache::default();
        for name in names {
            cache
                .insert(json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "metadata": {"name": name, "namespace": "ns"}}))
                .unwrap();
        }
        cache
    }

    /// [`parents_of_change`] of a change from `old` to `new`.
    fn parents(m: &Manifest, cache: &dyn ObjectCache, kind: &Kind, old: Option<&Value>, new: Option<&Value>) -> Vec<ObjectKey> {
        let (old, new) = (old.cloned().map(Object::new), new.cloned().map(Object::new));
        parents_of_change(m, cache, kind, old.as_ref(), new.as_ref())
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey { namespace: Some("ns".into()), name: name.into() }
    }

    #[test]
    fn parent_changes_map_to_themselves_unless_only_status_changed() {
        let m = manifest();
        let old = json!({"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "1"}, "spec": {"size": 1}});
        let status_only = json!({"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "2"}, "spec": {"size": 1}, "status": {"x": 1}});
        let spec = json!({"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "3"}, "spec": {"size": 2}});
        let cache = MemoryCache::default();
        assert!(parents(&m, &cache, &m.parent, Some(&old), Some(&status_only)).is_empty());
        assert_eq!(parents(&m, &cache, &m.parent, Some(&old), Some(&spec)), [key("a")]);
        assert_eq!(parents(&m, &cache, &m.parent, Some(&old), None), [key("a")]);
    }

    #[test]
    fn only_status_and_bookkeeping_metadata_changes_are_status_only() {
        let old = json!({"metadata": {"name": "a", "resourceVersion": "1", "labels": {"x": "1"}}, "spec": {"size": 1}});
        let same = |new: Value| only_status_changed(&old, &new);
        assert!(same(json!({"metadata": {"name": "a", "resourceVersion": "2", "labels": {"x": "1"}, "managedFields": []},
            "spec": {"size": 1}, "status": {"nodes": []}})));
        assert!(!same(json!({"metadata": {"name": "a", "resourceVersion": "2", "labels": {"x": "2"}}, "spec": {"size": 1}})));
        assert!(!same(json!({"metadata": {"name": "a", "resourceVersion": "2", "labels": {"x": "1"}, "generation": 2},
            "spec": {"size": 1}})));
        assert!(!same(json!({"metadata": {"name": "a", "resourceVersion": "2", "labels": {"x": "1"}}, "spec": {"size": 1},
            "extra": true})));
        assert!(!same(json!({"metadata": {"name": "a", "resourceVersion": "2", "labels": {"x": "1"}}})));
        assert!(!same(json!({"metadata": "not an object", "spec": {"size": 1}})));
    }

    #[test]
    fn children_map_to_their_controller_owner_of_the_parent_kind() {
        let m = manifest();
        let child = json!({"metadata": {"name": "d", "namespace": "ns", "ownerReferences": [
            {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "name": "a", "uid": "u", "controller": true},
            {"apiVersion": "v1", "kind": "Other", "name": "b", "uid": "v", "controller": false}]}});
        let cache = MemoryCache::default();
        assert_eq!(parents(&m, &cache, &Kind::new("apps", "v1", "Deployment"), None, Some(&child)), [key("a")]);
    }

    #[test]
    fn related_objects_map_to_parents_whose_selector_matches() {
        let m = manifest();
        let cache = cache_with_parents(&["a", "b"]);
        let pod = json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"cr": "b"}}});
        assert_eq!(parents(&m, &cache, &Kind::new("", "v1", "Pod"), None, Some(&pod)), [key("b")]);
    }

    #[test]
    fn related_objects_map_to_parents_through_a_selector_without_the_parent_name_too() {
        let m = crate::contract::manifest::fixtures::memcached("app=memcached");
        let cache = cache_with_parents(&["a", "b"]);
        let pod = json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "memcached"}}});
        assert_eq!(parents(&m, &cache, &Kind::new("", "v1", "Pod"), None, Some(&pod)), [key("a"), key("b")]);
        let moved = json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "other"}}});
        assert_eq!(parents(&m, &cache, &Kind::new("", "v1", "Pod"), Some(&pod), Some(&moved)).len(), 2);
    }

    #[test]
    fn a_relabelled_object_maps_to_its_old_and_new_parent() {
        let m = manifest();
        let cache = cache_with_parents(&["a", "b"]);
        let old = json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"cr": "a"}}});
        let new = json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"cr": "b"}}});
        let pods = Kind::new("", "v1", "Pod");
        assert_eq!(parents(&m, &cache, &pods, Some(&old), Some(&new)), [key("a"), key("b")]);
        let orphan = json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"cr": "gone"}}});
        assert!(parents(&m, &cache, &pods, None, Some(&orphan)).is_empty());
    }

    /// A cluster-scoped SidecarSet-like parent reading Pods (namespaced) through `related`,
    /// and owning ConfigMaps, with SidecarSets `names` in the cache.
    fn cluster_parent(related: &str, names: &[&str]) -> (Manifest, MemoryCache) {
        let mut m = crate::contract::manifest::fixtures::memcached(related);
        m.parent = Kind::new("apps.wasmop.dev", "v1alpha1", "SidecarSet");
        m.scope = Scope::Cluster;
        m.children = vec![Kind::new("", "v1", "ConfigMap")];
        let mut cache = MemoryCache::default();
        for name in names {
            cache
                .insert(json!({"apiVersion": "apps.wasmop.dev/v1alpha1", "kind": "SidecarSet", "metadata": {"name": name}}))
                .unwrap();
        }
        (m, cache)
    }

    fn cluster_key(name: &str) -> ObjectKey {
        ObjectKey { namespace: None, name: name.into() }
    }

    #[test]
    fn a_related_object_in_any_namespace_maps_to_the_cluster_scoped_parents_that_select_it() {
        let (m, cache) = cluster_parent("", &["log", "mesh"]);
        let pods = Kind::new("", "v1", "Pod");
        for ns in ["team-a", "team-b"] {
            let pod = json!({"metadata": {"name": "p", "namespace": ns, "labels": {"app": "web"}}});
            assert_eq!(parents(&m, &cache, &pods, None, Some(&pod)), [cluster_key("log"), cluster_key("mesh")], "{ns}");
        }
    }

    #[test]
    fn a_related_object_naming_its_cluster_scoped_parent_by_label_maps_to_it_alone() {
        let (m, cache) = cluster_parent("set=$(parent.name)", &["log", "mesh"]);
        let pod = json!({"metadata": {"name": "p", "namespace": "team-a", "labels": {"set": "mesh"}}});
        assert_eq!(parents(&m, &cache, &Kind::new("", "v1", "Pod"), None, Some(&pod)), [cluster_key("mesh")]);
    }

    #[test]
    fn a_namespaced_child_maps_to_its_cluster_scoped_owner_without_a_namespace() {
        let (m, cache) = cluster_parent("", &[]);
        let child = json!({"metadata": {"name": "c", "namespace": "team-a", "ownerReferences": [
            {"apiVersion": "apps.wasmop.dev/v1alpha1", "kind": "SidecarSet", "name": "log", "uid": "u", "controller": true}]}});
        assert_eq!(parents(&m, &cache, &Kind::new("", "v1", "ConfigMap"), None, Some(&child)), [cluster_key("log")]);
    }
}
