//! Objects the host has observed: the cache plugins read from, label selectors, and which of
//! them a plugin may see around a parent ([`visible_to`]).
//!
//! Plugins never trigger API calls: everything they are given or look up comes from an
//! [`ObjectCache`]. The controller backs it with its watches; the offline `reconcile` command
//! backs it with a [`MemoryCache`] filled from fixture files.

mod gather;
mod memory;
pub mod selector;
mod strip;
mod visibility;
mod watched;

use std::sync::Arc;

use serde_json::Value;

pub use memory::MemoryCache;
pub use selector::{LabelSelector, SelectorError};
pub use strip::{LAST_APPLIED_ANNOTATION, strip};
pub use visibility::{Hidden, Sight, Visibility, visible_around, visible_to};
pub use watched::WatchedObject;

use crate::contract::{Kind, Object};

/// Read access to observed objects, by kind.
///
/// Implementations return objects in a stable order (namespace, then name) so that plugin
/// input is deterministic.
pub trait ObjectCache: Send + Sync {
    /// Objects of `kind`, restricted to `namespace` when given.
    fn list(&self, kind: &Kind, namespace: Option<&str>) -> Vec<Arc<Object>>;

    /// One object of `kind` by namespace (`None` for cluster-scoped) and name.
    fn get(&self, kind: &Kind, namespace: Option<&str>, name: &str) -> Option<Arc<Object>>;

    /// Objects of `kind` in `namespace` whose controller ownerReference has uid `owner_uid`.
    /// The default filters [`ObjectCache::list`]; caches with an owner index override it.
    fn controlled_by(&self, kind: &Kind, namespace: Option<&str>, owner_uid: &str) -> Vec<Arc<Object>> {
        self.list(kind, namespace).into_iter().filter(|o| controller_uid(o.head()) == Some(owner_uid)).collect()
    }

    /// Objects of `kind` in `namespace` (every namespace for `None`) whose label `label` has
    /// the value `value`, in the order of [`ObjectCache::list`]. The default filters
    /// [`ObjectCache::list`]; caches with a label index override it.
    fn labelled(&self, kind: &Kind, namespace: Option<&str>, label: &str, value: &str) -> Vec<Arc<Object>> {
        self.list(kind, namespace).into_iter().filter(|o| label_value(o.head(), label) == Some(value)).collect()
    }

    /// Whether [`ObjectCache::labelled`] answers `label` of `kind` from an index rather than by
    /// filtering [`ObjectCache::list`]. The default has no index.
    fn indexes_label(&self, _kind: &Kind, _label: &str) -> bool {
        false
    }
}

/// The value of an object's label `label`.
pub fn label_value<'v>(object: &'v Value, label: &str) -> Option<&'v str> {
    object.get("metadata")?.get("labels")?.get(label)?.as_str()
}

/// The uid of an object's controller (the ownerReference with `controller: true`).
pub fn controller_uid(object: &Value) -> Option<&str> {
    object
        .get("metadata")?
        .get("ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?
        .get("uid")?
        .as_str()
}

/// The label naming the plugin whose response produced a child; the host stamps it on every
/// child it applies (see `actions::stamp`). A child belongs to its parent *and* its plugin.
pub const PLUGIN_LABEL: &str = "wasmop.dev/plugin";

/// The plugin an object's [`PLUGIN_LABEL`] names.
pub fn plugin_of(object: &Value) -> Option<&str> {
    object.get("metadata")?.get("labels")?.get(PLUGIN_LABEL)?.as_str()
}

/// Whether `object` may be a child of `plugin`: its [`PLUGIN_LABEL`] names `plugin`, or it has
/// none (a child an older host wrote, before the label). Another plugin's child — of the same
/// parent, when two plugins reconcile one kind — is not.
///
/// ```
/// use serde_json::json;
/// use wasmop::objects::is_of_plugin;
/// assert!(is_of_plugin(&json!({"metadata": {"labels": {"wasmop.dev/plugin": "a"}}}), "a"));
/// assert!(!is_of_plugin(&json!({"metadata": {"labels": {"wasmop.dev/plugin": "b"}}}), "a"));
/// assert!(is_of_plugin(&json!({"metadata": {}}), "a"));
/// ```
pub fn is_of_plugin(object: &Value, plugin: &str) -> bool {
    plugin_of(object).is_none_or(|p| p == plugin)
}

/// The `metadata.namespace` of a JSON object.
pub fn namespace_of(object: &Value) -> Option<&str> {
    // `get` rather than `Value::pointer`, which allocates two strings per path segment: these
    // run several times per reconcile.
    object.get("metadata")?.get("namespace")?.as_str()
}

/// The `metadata.name` of a JSON object.
pub fn name_of(object: &Value) -> Option<&str> {
    object.get("metadata")?.get("name")?.as_str()
}
