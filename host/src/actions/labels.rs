//! The labels the host stamps on every child it applies: they let the host watch its own
//! children through a label selector instead of caching every object of a child kind.
//!
//! A plugin may set labels of its own on a child, but not these: the host's values replace
//! whatever the plugin wrote under the same keys, so a plugin can neither hide a child from the
//! host's watch nor make it look like another plugin's.

use serde_json::{Map, Value};

/// The well-known label naming the tool that manages an object.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The value of [`MANAGED_BY_LABEL`] on every child the host applies.
pub const MANAGED_BY: &str = "wasmop";
pub use crate::objects::PLUGIN_LABEL;

/// The label selector of the host's child watches: every child any plugin applied.
///
/// ```
/// assert_eq!(wasmop::actions::managed_selector(), "app.kubernetes.io/managed-by=wasmop");
/// ```
pub fn managed_selector() -> String {
    format!("{MANAGED_BY_LABEL}={MANAGED_BY}")
}

/// The labels the host stamps on a child of `plugin`.
pub fn host_labels(plugin: &str) -> [(&'static str, &str); 2] {
    [(MANAGED_BY_LABEL, MANAGED_BY), (PLUGIN_LABEL, plugin)]
}

/// Stamp the host's labels on `child` (an object with a `metadata` map), over whatever the
/// plugin wrote under the same keys; its other labels are kept.
pub fn add_host_labels(child: &mut Value, plugin: &str) {
    let labels = &mut child["metadata"]["labels"];
    if !labels.is_object() {
        *labels = Value::Object(Map::new());
    }
    for (key, value) in host_labels(plugin) {
        labels[key] = Value::String(value.to_owned());
    }
}

/// Whether `object` carries [`MANAGED_BY_LABEL`]` = `[`MANAGED_BY`], so the host's child
/// watches see it.
pub fn has_host_labels(object: &Value) -> bool {
    object.pointer("/metadata/labels").and_then(|l| l.get(MANAGED_BY_LABEL)).and_then(Value::as_str) == Some(MANAGED_BY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stamping_adds_the_labels_and_keeps_the_plugins_others() {
        let mut child = json!({"metadata": {"name": "c", "labels": {"app": "x"}}});
        assert!(!has_host_labels(&child));
        add_host_labels(&mut child, "memcached");
        assert_eq!(
            child["metadata"]["labels"],
            json!({"app": "x", "app.kubernetes.io/managed-by": "wasmop", "wasmop.dev/plugin": "memcached"})
        );
        assert!(has_host_labels(&child));
    }

    #[test]
    fn the_hosts_labels_win_over_the_plugins_of_the_same_key() {
        let mut child = json!({"metadata": {"name": "c", "labels": {MANAGED_BY_LABEL: "helm", PLUGIN_LABEL: "other"}}});
        add_host_labels(&mut child, "memcached");
        assert_eq!(child["metadata"]["labels"][MANAGED_BY_LABEL], "wasmop");
        assert_eq!(child["metadata"]["labels"][PLUGIN_LABEL], "memcached");
    }

    #[test]
    fn a_child_without_labels_gets_a_label_map() {
        let mut child = json!({"metadata": {"name": "c", "labels": null}});
        add_host_labels(&mut child, "p");
        assert!(has_host_labels(&child));
    }
}
