//! The JSON Patch of a mutation: computed by the host from the object it was asked about and the
//! object the plugin answered (plugins never write patches), with the `json-patch` crate.
//!
//! A mutation may change what the object says, never which object it is: a mutated object with
//! another `apiVersion`, `kind`, `metadata.name` or `metadata.namespace` is refused, and the
//! request denied (fail closed).
//!
//! Nor may it change who owns the object or what the host keeps on it: a mutation that adds,
//! changes or removes `metadata.ownerReferences` (the garbage collector would delete the object
//! with a foreign owner), `metadata.finalizers` (it could hold the object forever), a label or
//! annotation of the host's (`wasmop.dev/...`, sharding's `drain.wasmop.dev/shard`, and
//! `app.kubernetes.io/managed-by` to or from `wasmop`: the host's ownership marks) is refused
//! the same way. Denying is the safe choice: dropping the patch would admit an object the plugin
//! meant to change, and dropping only the refused part would admit one nobody wrote.

use serde_json::Value;

use crate::contract::HOST_API_GROUP;
use crate::shard::DRAIN_LABEL;

/// Why a mutated object is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PatchError {
    /// The plugin answered a mutated object for a request without one (a DELETE).
    #[error("the plugin mutated a request that has no object")]
    NoObject,
    /// The mutated object is not a JSON object.
    #[error("the mutated object is not a JSON object")]
    NotAnObject,
    /// The mutation changes the object's identity.
    #[error("the mutation changes the object's {field} from {from} to {to}; a webhook may not change which object this is")]
    IdentityChanged {
        /// The field (`apiVersion`, `kind`, `metadata.name`, `metadata.namespace`).
        field: &'static str,
        /// Its value in the request (`null` when absent).
        from: String,
        /// Its value in the mutated object.
        to: String,
    },
    /// The mutation changes the object's owners, finalizers or the host's labels.
    #[error(
        "the mutation changes the object's {field}; a webhook may not change who owns an object or what the host keeps on it"
    )]
    OwnershipChanged {
        /// `metadata.ownerReferences`, `metadata.finalizers`, or the label or annotation
        /// (`metadata.labels["wasmop.dev/plugin"]`).
        field: String,
    },
}

/// The host's own label and annotation keys: `wasmop.dev/<name>`, and sharding's drain mark
/// ([`DRAIN_LABEL`]). Other subdomains of `wasmop.dev` are not the host's: plugins (the
/// SidecarSet example's `sidecarset.wasmop.dev/<name>-hash`) keep their own keys there.
pub fn is_reserved_key(key: &str) -> bool {
    let drain = DRAIN_LABEL.split_once('/').map_or(DRAIN_LABEL, |(prefix, _)| prefix);
    key.split_once('/').is_some_and(|(prefix, _)| prefix == HOST_API_GROUP || prefix == drain)
}

/// The first field of `metadata` naming who owns the object or what the host keeps on it that
/// differs between `original` and `mutated`.
fn ownership_change(original: &Value, mutated: &Value) -> Option<String> {
    for (pointer, field) in
        [("/metadata/ownerReferences", "metadata.ownerReferences"), ("/metadata/finalizers", "metadata.finalizers")]
    {
        if original.pointer(pointer) != mutated.pointer(pointer) {
            return Some(field.to_owned());
        }
    }
    for map in ["labels", "annotations"] {
        let entries = |v: &Value| v.pointer(&format!("/metadata/{map}")).and_then(Value::as_object).cloned().unwrap_or_default();
        let (before, after) = (entries(original), entries(mutated));
        let keys: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
        for key in keys {
            let (from, to) = (before.get(key), after.get(key));
            let host_mark = key == crate::actions::MANAGED_BY_LABEL
                && [from, to].iter().any(|v| v.and_then(Value::as_str) == Some(crate::actions::MANAGED_BY));
            if from != to && (is_reserved_key(key) || host_mark) {
                return Some(format!("metadata.{map}[{key:?}]"));
            }
        }
    }
    None
}

/// The fields that name an object, as JSON pointers and as users write them.
const IDENTITY: [(&str, &str); 4] = [
    ("/apiVersion", "apiVersion"),
    ("/kind", "kind"),
    ("/metadata/name", "metadata.name"),
    ("/metadata/namespace", "metadata.namespace"),
];

/// The patch turning `original` into `mutated`; `None` when they are equal.
///
/// # Errors
/// [`PatchError`]: no original object, a mutated value that is not an object, a changed
/// `apiVersion`, `kind`, name or namespace, or changed owners, finalizers or host labels.
pub fn mutation_patch(original: Option<&Value>, mutated: &Value) -> Result<Option<json_patch::Patch>, PatchError> {
    let original = original.ok_or(PatchError::NoObject)?;
    if !mutated.is_object() {
        return Err(PatchError::NotAnObject);
    }
    for (pointer, field) in IDENTITY {
        let (from, to) = (original.pointer(pointer), mutated.pointer(pointer));
        if from != to {
            let show = |v: Option<&Value>| v.map_or_else(|| "null".to_owned(), Value::to_string);
            return Err(PatchError::IdentityChanged { field, from: show(from), to: show(to) });
        }
    }
    if let Some(field) = ownership_change(original, mutated) {
        return Err(PatchError::OwnershipChanged { field });
    }
    let patch = json_patch::diff(original, mutated);
    Ok((!patch.0.is_empty()).then_some(patch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]}})
    }

    #[test]
    fn the_patch_applied_to_the_original_gives_the_mutated_object() {
        let mut mutated = pod();
        mutated["metadata"]["labels"] = json!({"injected": "yes"});
        mutated["spec"]["containers"].as_array_mut().unwrap().push(json!({"name": "proxy", "image": "envoy"}));
        let patch = mutation_patch(Some(&pod()), &mutated).unwrap().expect("a change");
        let mut patched = pod();
        json_patch::patch(&mut patched, &patch).unwrap();
        assert_eq!(patched, mutated);
    }

    #[test]
    fn an_unchanged_object_needs_no_patch() {
        assert_eq!(mutation_patch(Some(&pod()), &pod()), Ok(None));
    }

    #[test]
    fn a_mutation_may_not_change_which_object_it_is() {
        let mut renamed = pod();
        renamed["metadata"]["name"] = json!("other");
        assert_eq!(
            mutation_patch(Some(&pod()), &renamed).unwrap_err().to_string(),
            "the mutation changes the object's metadata.name from \"web\" to \"other\"; a webhook may not change which object this is"
        );
        let mut moved = pod();
        moved["metadata"].as_object_mut().unwrap().remove("namespace");
        assert!(matches!(
            mutation_patch(Some(&pod()), &moved),
            Err(PatchError::IdentityChanged { field: "metadata.namespace", .. })
        ));
        let mut rekinded = pod();
        rekinded["kind"] = json!("Service");
        assert!(matches!(mutation_patch(Some(&pod()), &rekinded), Err(PatchError::IdentityChanged { field: "kind", .. })));
        assert_eq!(mutation_patch(Some(&pod()), &json!([1])), Err(PatchError::NotAnObject));
        assert_eq!(mutation_patch(None, &pod()), Err(PatchError::NoObject));
    }

    #[test]
    fn a_mutation_may_not_add_change_or_remove_owners_or_finalizers() {
        let owner = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "victim", "uid": "u-1"}]);
        let mut owned = pod();
        owned["metadata"]["ownerReferences"] = owner.clone();
        assert_eq!(
            mutation_patch(Some(&pod()), &owned).unwrap_err().to_string(),
            "the mutation changes the object's metadata.ownerReferences; a webhook may not change who owns an object or what the host keeps on it"
        );
        assert!(mutation_patch(Some(&owned), &pod()).is_err(), "removing an owner");
        let mut changed = owned.clone();
        changed["metadata"]["ownerReferences"][0]["uid"] = json!("u-2");
        assert!(mutation_patch(Some(&owned), &changed).is_err(), "changing an owner");
        let mut kept = owned.clone();
        kept["spec"]["x"] = json!(1);
        assert!(mutation_patch(Some(&owned), &kept).unwrap().is_some(), "owners untouched: allowed");
        let mut held = pod();
        held["metadata"]["finalizers"] = json!(["example.com/hold"]);
        assert_eq!(
            mutation_patch(Some(&pod()), &held),
            Err(PatchError::OwnershipChanged { field: "metadata.finalizers".into() })
        );
    }

    #[test]
    fn a_mutation_may_not_touch_the_hosts_labels_and_annotations() {
        let with = |map: &str, key: &str, value: &str| {
            let mut p = pod();
            p["metadata"][map] = json!({key: value});
            p
        };
        for (map, key) in [
            ("labels", "wasmop.dev/plugin"),
            ("labels", "wasmop.dev/parent-uid"),
            ("annotations", "wasmop.dev/parent"),
            ("labels", "drain.wasmop.dev/shard"),
        ] {
            let err = mutation_patch(Some(&pod()), &with(map, key, "forged")).unwrap_err();
            assert_eq!(err, PatchError::OwnershipChanged { field: format!("metadata.{map}[{key:?}]") });
            assert!(mutation_patch(Some(&with(map, key, "v")), &pod()).is_err(), "removing {key}");
        }
        let managed = with("labels", "app.kubernetes.io/managed-by", "wasmop");
        assert!(mutation_patch(Some(&pod()), &managed).is_err(), "marking an object as the host's");
        assert!(mutation_patch(Some(&managed), &with("labels", "app.kubernetes.io/managed-by", "helm")).is_err());
        let other = with("labels", "app.kubernetes.io/managed-by", "helm");
        assert!(mutation_patch(Some(&pod()), &other).unwrap().is_some(), "another tool's mark is the plugin's business");
        assert!(mutation_patch(Some(&pod()), &with("labels", "notwasmop.dev/x", "y")).unwrap().is_some());
        assert!(mutation_patch(Some(&pod()), &with("annotations", "example.com/wasmop.dev", "y")).unwrap().is_some());
    }
}
