//! Ownership: which existing objects one parent's plugin may write, by controller-runtime's rule
//! with the plugin added.
//!
//! An object is *controlled* by the owner its `metadata.ownerReferences` entry with
//! `controller: true` names (Kubernetes allows at most one), and belongs to the plugin its
//! [`PLUGIN_LABEL`] names: a child belongs to (parent uid, plugin), so two plugins reconciling
//! one kind never write, delete or prune each other's children. A plugin may apply an object
//! that does not exist yet or that is its own child of this parent; it may delete (or have
//! pruned) only those. An object controlled by nobody may be taken over only when the manifest
//! opts in ([`Manifest::adopt_unowned`]) *and* the host's policy grants it
//! ([`Grants::adopt_unowned`]); one controlled by another owner, or another plugin's, never.
//!
//! The rule is checked against the host's watch cache, as controller-runtime's cached client
//! does: an object created in the instant between the cache's last update and the write is not
//! seen. Deletes carry a uid precondition, so what is deleted is exactly the object checked.

use std::fmt;

use serde_json::Value;

use super::scope::PARENT_UID_LABEL;
use crate::contract::Manifest;
use crate::objects::{PLUGIN_LABEL, plugin_of};
use crate::policy::Grants;

/// Who controls an existing object, as seen from one parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// Its controller ownerReference names the parent (same uid).
    ThisParent,
    /// It has no controller ownerReference: a user's own object, or an orphan.
    Nobody,
    /// Another owner controls it, described as `Kind name (uid …)`, or another plugin's
    /// child of the same parent, described as `plugin NAME (label wasmop.dev/plugin)`.
    Other(String),
}

impl Control {
    /// Who controls `object`, relative to the parent with uid `parent_uid` and its plugin
    /// named `plugin`.
    ///
    /// ```
    /// use serde_json::json;
    /// use wasmop::actions::Control;
    /// let owned = json!({"metadata": {"ownerReferences": [
    ///     {"kind": "Testbed", "name": "a", "uid": "u1", "controller": true}]}});
    /// assert_eq!(Control::of(&owned, "u1", "testbed"), Control::ThisParent);
    /// assert_eq!(Control::of(&owned, "u2", "testbed"), Control::Other("Testbed a (uid u1)".into()));
    /// assert_eq!(Control::of(&json!({"metadata": {}}), "u1", "testbed"), Control::Nobody);
    /// // A cluster-scoped child of a namespaced parent: named by label, not by reference.
    /// let labelled = json!({"metadata": {"labels": {"wasmop.dev/parent-uid": "u1"}}});
    /// assert_eq!(Control::of(&labelled, "u1", "testbed"), Control::ThisParent);
    /// assert!(matches!(Control::of(&labelled, "u2", "testbed"), Control::Other(_)));
    /// // The same parent's child, written by another plugin on the same kind.
    /// let theirs = json!({"metadata": {"labels": {"wasmop.dev/plugin": "other"}, "ownerReferences": [
    ///     {"kind": "Testbed", "name": "a", "uid": "u1", "controller": true}]}});
    /// assert_eq!(Control::of(&theirs, "u1", "testbed"), Control::Other("plugin other (label wasmop.dev/plugin)".into()));
    /// ```
    pub fn of(object: &Value, parent_uid: &str, plugin: &str) -> Self {
        match Self::by_parent(object, parent_uid) {
            Self::ThisParent => match plugin_of(object) {
                Some(other) if other != plugin => Self::Other(format!("plugin {other} (label {PLUGIN_LABEL})")),
                _ => Self::ThisParent,
            },
            control => control,
        }
    }

    /// Who controls `object` by its owner reference (or parent label) alone.
    fn by_parent(object: &Value, parent_uid: &str) -> Self {
        let controller = object
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .and_then(|refs| refs.iter().find(|r| r.get("controller").and_then(Value::as_bool) == Some(true)));
        let Some(controller) = controller else { return Self::by_label(object, parent_uid) };
        let field = |f: &str| controller.get(f).and_then(Value::as_str).unwrap_or_default();
        if field("uid") == parent_uid {
            Self::ThisParent
        } else {
            Self::Other(format!("{} {} (uid {})", field("kind"), field("name"), field("uid")))
        }
    }

    /// Control of an object without a controller reference: a cluster-scoped child of a
    /// namespaced parent names its parent by the [`PARENT_UID_LABEL`] label instead.
    fn by_label(object: &Value, parent_uid: &str) -> Self {
        match object.pointer("/metadata/labels").and_then(|l| l.get(PARENT_UID_LABEL)).and_then(Value::as_str) {
            None => Self::Nobody,
            Some(uid) if uid == parent_uid => Self::ThisParent,
            Some(uid) => Self::Other(format!("the parent with uid {uid} (label {PARENT_UID_LABEL})")),
        }
    }

    /// Whether the plugin of `manifest`, under `grants`, may apply to an existing object
    /// controlled so: adoption of an object nobody controls needs both the manifest's
    /// `adoptUnowned` and the policy's.
    pub fn may_apply(&self, manifest: &Manifest, grants: &Grants) -> bool {
        match self {
            Self::ThisParent => true,
            Self::Nobody => manifest.adopt_unowned && grants.adopt_unowned,
            Self::Other(_) => false,
        }
    }
}

impl fmt::Display for Control {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ThisParent => f.write_str("controlled by this parent"),
            Self::Nobody => f.write_str("controlled by nobody"),
            Self::Other(owner) => write!(f, "controlled by {owner}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifest(adopt_unowned: bool) -> Manifest {
        Manifest { adopt_unowned, ..crate::contract::manifest::fixtures::memcached("a=b") }
    }

    #[test]
    fn a_non_controller_owner_reference_does_not_control() {
        let object = json!({"metadata": {"ownerReferences": [{"kind": "X", "name": "x", "uid": "u1"}]}});
        assert_eq!(Control::of(&object, "u1", "memcached"), Control::Nobody);
    }

    fn adopting() -> Grants {
        Grants { adopt_unowned: true, ..Grants::default() }
    }

    #[test]
    fn unowned_objects_are_applied_only_when_the_manifest_adopts_and_the_policy_grants_it() {
        assert!(!Control::Nobody.may_apply(&manifest(false), &adopting()));
        assert!(!Control::Nobody.may_apply(&manifest(true), &Grants::default()), "the plugin's opt-in alone is not enough");
        assert!(Control::Nobody.may_apply(&manifest(true), &adopting()));
    }

    #[test]
    fn objects_of_another_owner_are_never_applied() {
        let other = Control::Other("Testbed b (uid u2)".into());
        assert!(!other.may_apply(&manifest(false), &adopting()));
        assert!(!other.may_apply(&manifest(true), &adopting()));
        assert!(Control::ThisParent.may_apply(&manifest(false), &Grants::default()));
    }

    #[test]
    fn another_plugins_child_of_the_same_parent_is_not_this_plugins() {
        let child = |labels: Value| json!({"metadata": {"labels": labels, "ownerReferences": [{"kind": "M", "name": "m", "uid": "u1", "controller": true}]}});
        assert_eq!(Control::of(&child(json!({PLUGIN_LABEL: "memcached"})), "u1", "memcached"), Control::ThisParent);
        let theirs = Control::of(&child(json!({PLUGIN_LABEL: "attacker"})), "u1", "memcached");
        assert!(matches!(theirs, Control::Other(_)) && !theirs.may_apply(&manifest(true), &adopting()), "{theirs}");
        assert_eq!(Control::of(&child(json!({})), "u1", "memcached"), Control::ThisParent, "written before the label");
        let by_label = json!({"metadata": {"labels": {PARENT_UID_LABEL: "u1", PLUGIN_LABEL: "attacker"}}});
        assert!(matches!(Control::of(&by_label, "u1", "memcached"), Control::Other(_)));
    }
}
