//! [`Request::gather`]: a plugin's request for one parent, read from an [`ObjectCache`] as
//! its manifest declares.

use std::sync::Arc;

use serde_json::Value;

use super::visibility::Visibility;
use super::{ObjectCache, SelectorError, controller_uid, is_of_plugin};
use crate::contract::{Object, Request};

impl Request {
    /// Gather a request for `parent` from `cache`, as the plugin may see it ([`visible_to`](super::visible_to),
    /// made for the same parent): children are the objects of the child kinds in the parent's
    /// namespace — only those the parent controls
    /// (controller ownerReference with its uid) and that are not another plugin's
    /// ([`is_of_plugin`]) when `controlled_only`, as the controller asks; all of them for
    /// offline fixtures. Related objects are those matching each related
    /// kind's selector for this parent.
    ///
    /// # Errors
    /// [`SelectorError`] if a related selector does not parse once the parent's name is
    /// substituted (a parent name that is not a valid label value).
    pub fn gather(
        parent: Arc<Object>,
        visible: &Visibility<'_>,
        cache: &dyn ObjectCache,
        controlled_only: bool,
    ) -> Result<Self, SelectorError> {
        let manifest = visible.manifest();
        let ns = visible.namespace();
        let uid = parent.head().pointer("/metadata/uid").and_then(Value::as_str);
        let children = manifest
            .children
            .iter()
            .filter(|kind| visible.sees_children_of(kind))
            .flat_map(|kind| match (controlled_only, uid) {
                (false, _) => cache.list(kind, ns),
                (true, Some(uid)) => {
                    cache.controlled_by(kind, ns, uid).into_iter().filter(|o| is_of_plugin(o.head(), &manifest.name)).collect()
                }
                (true, None) => Vec::new(),
            })
            .collect();
        let mut related = Vec::new();
        for r in manifest.related.iter().filter(|r| visible.sees_related(r)) {
            let selector = visible.selector(r)?;
            // Only objects whose label names this parent can match a `key=$(parent.name)`
            // selector: the cache finds them by that label, without a scan of the namespace.
            let candidates = match r.parent_name_label() {
                Some(label) => cache.labelled(&r.kind, ns, label, visible.parent_name()),
                None => cache.list(&r.kind, ns),
            };
            related.extend(candidates.into_iter().filter(|o| selector.matches_object(o.head())));
        }
        Ok(Self { parent, children, related, ..Self::new(Value::Null) })
    }

    /// Whether `child` names `parent` as its controller in `metadata.ownerReferences` (by uid).
    pub fn is_controlled_by(child: &Value, parent: &Value) -> bool {
        let uid = parent.pointer("/metadata/uid").and_then(Value::as_str);
        uid.is_some() && controller_uid(child) == uid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::contract::{Manifest, Scope};
    use crate::objects::{MemoryCache, name_of, visible_to};
    use crate::policy::Grants;
    use serde_json::json;

    fn manifest() -> Manifest {
        crate::contract::manifest::fixtures::memcached("app=m,cr=$(parent.name)")
    }

    fn obj(api: &str, kind: &str, ns: &str, name: &str, labels: Value, owner_uid: Option<&str>) -> Value {
        let owners = owner_uid.map(|u| json!([{"uid": u, "controller": true}])).unwrap_or(json!([]));
        json!({"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": ns, "labels": labels, "ownerReferences": owners}})
    }

    #[test]
    fn gather_takes_owned_children_and_selected_related_in_parent_namespace() {
        let parent = Arc::new(Object::new(json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u1"}})));
        let mut cache = MemoryCache::default();
        cache.insert(obj("apps/v1", "Deployment", "ns", "a", json!({}), Some("u1"))).unwrap();
        cache.insert(obj("apps/v1", "Deployment", "ns", "b", json!({}), Some("u2"))).unwrap();
        cache.insert(obj("apps/v1", "Deployment", "other", "a", json!({}), Some("u1"))).unwrap();
        cache.insert(obj("v1", "Pod", "ns", "a-1", json!({"app": "m", "cr": "a"}), None)).unwrap();
        cache.insert(obj("v1", "Pod", "ns", "b-1", json!({"app": "m", "cr": "b"}), None)).unwrap();
        cache.insert(obj("v1", "Pod", "other", "a-2", json!({"app": "m", "cr": "a"}), None)).unwrap();
        // The label that names the parent finds the candidates; the rest of the selector still
        // holds: a Pod carrying `cr=a` without `app=m` is not the parent's.
        cache.insert(obj("v1", "Pod", "ns", "a-impostor", json!({"app": "x", "cr": "a"}), None)).unwrap();
        let req = Request::gather(Arc::clone(&parent), &visible_to(&manifest(), &Grants::default(), parent.head()), &cache, true)
            .unwrap();
        let names = |v: &[Arc<Object>]| v.iter().map(|o| name_of(o.head()).unwrap().to_owned()).collect::<Vec<_>>();
        assert_eq!(names(&req.children), ["a"]);
        assert_eq!(names(&req.related), ["a-1"]);
    }

    #[test]
    fn another_plugins_children_of_the_same_parent_are_not_observed() {
        let parent = Arc::new(Object::new(json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u1"}})));
        let mut cache = MemoryCache::default();
        let labelled = |plugin: &str| json!({super::super::PLUGIN_LABEL: plugin});
        cache.insert(obj("apps/v1", "Deployment", "ns", "mine", labelled("memcached"), Some("u1"))).unwrap();
        cache.insert(obj("apps/v1", "Deployment", "ns", "theirs", labelled("attacker"), Some("u1"))).unwrap();
        cache.insert(obj("apps/v1", "Deployment", "ns", "older", json!({}), Some("u1"))).unwrap();
        let req = Request::gather(Arc::clone(&parent), &visible_to(&manifest(), &Grants::default(), parent.head()), &cache, true)
            .unwrap();
        let names: Vec<_> = req.children.iter().map(|o| name_of(o.head()).unwrap().to_owned()).collect();
        assert_eq!(names, ["mine", "older"]);
    }

    #[test]
    fn controller_reference_needs_controller_flag() {
        let parent = json!({"metadata": {"uid": "u"}});
        assert!(Request::is_controlled_by(
            &json!({"metadata": {"ownerReferences": [{"uid": "u", "controller": true}]}}),
            &parent
        ));
        assert!(!Request::is_controlled_by(&json!({"metadata": {"ownerReferences": [{"uid": "u"}]}}), &parent));
    }

    #[test]
    fn a_cluster_scoped_parent_gathers_related_objects_of_every_namespace() {
        let mut m = crate::contract::manifest::fixtures::memcached("app=m");
        m.parent = crate::contract::Kind::new("apps.wasmop.dev", "v1alpha1", "SidecarSet");
        m.scope = Scope::Cluster;
        let parent = Arc::new(Object::new(
            json!({"apiVersion": "apps.wasmop.dev/v1alpha1", "kind": "SidecarSet", "metadata": {"name": "a", "uid": "u1"}}),
        ));
        let mut cache = MemoryCache::default();
        cache.insert(obj("v1", "Pod", "team-a", "p-1", json!({"app": "m"}), None)).unwrap();
        cache.insert(obj("v1", "Pod", "team-b", "p-2", json!({"app": "m"}), None)).unwrap();
        cache.insert(obj("v1", "Pod", "team-b", "other", json!({"app": "x"}), None)).unwrap();
        let req = Request::gather(Arc::clone(&parent), &visible_to(&m, &Grants::default(), parent.head()), &cache, true).unwrap();
        let names: Vec<_> = req.related.iter().map(|o| name_of(o.head()).unwrap().to_owned()).collect();
        assert_eq!(names, ["p-1", "p-2"]);
    }
}
