//! The JSON Patch of a mutation: computed by the host from the object it was asked about and the
//! object the plugin answered (plugins never write patches), with the `json-patch` crate.
//!
//! A mutation may change what the object says, never which object it is: a mutated object with
//! another `apiVersion`, `kind`, `metadata.name` or `metadata.namespace` is refused, and the
//! request denied (fail closed).

use serde_json::Value;

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
/// [`PatchError`]: no original object, a mutated value that is not an object, or a changed
/// `apiVersion`, `kind`, name or namespace.
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
}
