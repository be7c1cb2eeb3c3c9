//! The validating webhook's logic: whether a `SidecarSet` may be created or updated, and if
//! not, the one reason the user sees in `kubectl`.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::selector::SelectorError;
use crate::sidecarset::{MAX_NAME, ParseError, SidecarSet};

/// Why a `SidecarSet` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// The object does not parse (a field of the wrong type, no name).
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// The name is too long for the hash annotation key.
    #[error(
        "metadata.name {name:?} is longer than {MAX_NAME} characters (the Pod annotation sidecarset.wasmop.dev/<name>-hash must fit)"
    )]
    NameTooLong {
        /// The name.
        name: String,
    },
    /// `spec.selector` is missing.
    #[error("spec.selector is required (an empty selector {{}} selects every Pod)")]
    NoSelector,
    /// `spec.selector` is invalid.
    #[error(transparent)]
    Selector(#[from] SelectorError),
    /// `spec.namespace` is not a DNS-1123 label.
    #[error("spec.namespace {0:?} is not a valid namespace name")]
    BadNamespace(String),
    /// `spec.containers` is empty.
    #[error("spec.containers must list at least one container")]
    NoContainers,
    /// A container is not a JSON object.
    #[error("spec.containers[{0}] is not an object")]
    NotAnObject(usize),
    /// A container has no (or an empty) `name`.
    #[error("spec.containers[{0}].name is required")]
    NoName(usize),
    /// A container has no (or an empty) `image`.
    #[error("spec.containers[{index}].image is required (container {name:?})")]
    NoImage {
        /// Position in `spec.containers`.
        index: usize,
        /// The container's name.
        name: String,
    },
    /// Two containers share a name.
    #[error("spec.containers[{index}].name {name:?} is used by more than one container")]
    DuplicateName {
        /// Position of the second one.
        index: usize,
        /// The name.
        name: String,
    },
}

/// Check a `SidecarSet` object.
///
/// # Errors
/// The first [`Invalid`] found, in field order. A SidecarSet created with `generateName` (no
/// name yet) is not checked for its name's length.
pub fn validate(object: &Value) -> Result<(), Invalid> {
    let with_name = if object.pointer("/metadata/name").is_none() {
        let mut named = object.clone();
        named["metadata"]["name"] = Value::from("unnamed");
        named
    } else {
        object.clone()
    };
    let set = SidecarSet::from_object(&with_name)?;
    if set.name.len() > MAX_NAME {
        return Err(Invalid::NameTooLong { name: set.name });
    }
    set.spec.selector.as_ref().ok_or(Invalid::NoSelector)?.validate("spec.selector")?;
    if let Some(ns) = &set.spec.namespace
        && !is_dns1123_label(ns)
    {
        return Err(Invalid::BadNamespace(ns.clone()));
    }
    if set.spec.containers.is_empty() {
        return Err(Invalid::NoContainers);
    }
    let mut names = BTreeSet::new();
    for (index, container) in set.spec.containers.iter().enumerate() {
        let field = |key: &str| container.get(key).and_then(Value::as_str).filter(|s| !s.is_empty());
        if !container.is_object() {
            return Err(Invalid::NotAnObject(index));
        }
        let name = field("name").ok_or(Invalid::NoName(index))?;
        if field("image").is_none() {
            return Err(Invalid::NoImage { index, name: name.to_owned() });
        }
        if !names.insert(name) {
            return Err(Invalid::DuplicateName { index, name: name.to_owned() });
        }
    }
    Ok(())
}

fn is_dns1123_label(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    (1..=63).contains(&s.len())
        && s.chars().all(|c| alnum(c) || c == '-')
        && s.chars().next().is_some_and(alnum)
        && s.chars().last().is_some_and(alnum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sidecarset(spec: Value) -> Value {
        json!({"apiVersion": "apps.wasmop.dev/v1alpha1", "kind": "SidecarSet", "metadata": {"name": "log"}, "spec": spec})
    }

    fn reason(spec: Value) -> String {
        validate(&sidecarset(spec)).unwrap_err().to_string()
    }

    #[test]
    fn a_complete_sidecarset_is_valid() {
        let spec = json!({"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
            "namespace": "team-a", "containers": [{"name": "log", "image": "busybox"}, {"name": "proxy", "image": "envoy"}]});
        assert_eq!(validate(&sidecarset(spec)), Ok(()));
    }

    #[test]
    fn an_invalid_selector_is_refused_with_its_field() {
        assert_eq!(
            reason(
                json!({"selector": {"matchExpressions": [{"key": "app", "operator": "In"}]}, "containers": [{"name": "a", "image": "b"}]})
            ),
            "spec.selector.matchExpressions[0]: operator In needs at least one value"
        );
        assert_eq!(
            reason(
                json!({"selector": {"matchExpressions": [{"key": "app", "operator": "Like", "values": ["x"]}]}, "containers": [{"name": "a", "image": "b"}]})
            ),
            "spec.selector.matchExpressions[0]: operator \"Like\" is not one of In, NotIn, Exists, DoesNotExist"
        );
        assert_eq!(reason(json!({"containers": [{"name": "a", "image": "b"}]})), Invalid::NoSelector.to_string());
    }

    #[test]
    fn containers_need_a_name_an_image_and_distinct_names() {
        let sel = json!({"matchLabels": {"app": "web"}});
        assert_eq!(reason(json!({"selector": sel, "containers": []})), "spec.containers must list at least one container");
        assert_eq!(reason(json!({"selector": sel, "containers": [{"image": "busybox"}]})), "spec.containers[0].name is required");
        assert_eq!(
            reason(json!({"selector": sel, "containers": [{"name": "a", "image": "x"}, {"name": "log", "image": ""}]})),
            "spec.containers[1].image is required (container \"log\")"
        );
        assert_eq!(
            reason(json!({"selector": sel, "containers": [{"name": "a", "image": "x"}, {"name": "a", "image": "y"}]})),
            "spec.containers[1].name \"a\" is used by more than one container"
        );
        assert_eq!(reason(json!({"selector": sel, "containers": ["log"]})), "spec.containers[0] is not an object");
    }

    #[test]
    fn a_bad_namespace_or_a_long_name_is_refused() {
        let ok = json!({"selector": {}, "containers": [{"name": "a", "image": "x"}]});
        let mut bad_ns = ok.clone();
        bad_ns["namespace"] = json!("Team_A");
        assert_eq!(reason(bad_ns), "spec.namespace \"Team_A\" is not a valid namespace name");
        let mut long = sidecarset(ok.clone());
        long["metadata"]["name"] = json!("x".repeat(59));
        assert!(matches!(validate(&long), Err(Invalid::NameTooLong { .. })));
        let mut generated = sidecarset(ok);
        generated["metadata"] = json!({"generateName": "log-"});
        assert_eq!(validate(&generated), Ok(()));
    }

    #[test]
    fn a_field_of_the_wrong_type_is_refused() {
        assert!(reason(json!({"selector": {}, "containers": {"name": "a"}})).starts_with("the SidecarSet does not parse"));
    }
}
