//! What Kubernetes itself refuses in the fields a response writes: [`FieldError`]. The host
//! checks a response against these rules before writing anything, so a refusal names the
//! field and nothing of the response is half applied.

use serde_json::Value;

use super::kind::{Kind, ObjectRef};
use super::names::{
    LABEL_VALUE_RULE, MAX_ANNOTATIONS, NAMESPACE_RULE, QUALIFIED_NAME_RULE, TYPE_RULE, is_label_value, is_namespace,
    is_object_name, is_qualified_name, is_type, object_name_rule, preview,
};

/// Longest condition message Kubernetes stores (`metav1.Condition`).
pub const MAX_CONDITION_MESSAGE: usize = 32 << 10;
/// Longest event note Kubernetes stores (`events.k8s.io/v1`).
pub const MAX_EVENT_NOTE: usize = 1024;

/// A field of a response that Kubernetes would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    /// A field is longer than Kubernetes stores: a condition message over
    /// [`MAX_CONDITION_MESSAGE`], an event note over [`MAX_EVENT_NOTE`], a child's annotations
    /// over 256 KiB in total.
    #[error("{field} has {bytes} bytes, more than Kubernetes' {limit}")]
    OverKubernetesLimit {
        /// The field, e.g. `condition Ready: message`.
        field: String,
        /// Its size.
        bytes: usize,
        /// What Kubernetes accepts.
        limit: usize,
    },
    /// A child's or a delete's type, name or namespace, or a child's label key, label value
    /// or annotation key, breaks Kubernetes' syntax for it (see [`super::names`]).
    #[error("{field} {value} is not {rule}")]
    InvalidName {
        /// The field, e.g. `child #0: metadata.name`.
        field: String,
        /// The value, quoted and cut to 64 bytes.
        value: String,
        /// What it must be.
        rule: &'static str,
    },
    /// A child's `metadata.namespace`, `metadata.labels` or `metadata.annotations` (or a value
    /// in them) has the wrong JSON type.
    #[error("{field} is not {expected}")]
    WrongType {
        /// The field, e.g. `child #0: metadata.labels`.
        field: String,
        /// What it must be, e.g. `an object of strings`.
        expected: &'static str,
    },
}

/// Check a parsed child (an object with string `apiVersion`, `kind` and `metadata.name`) as
/// Kubernetes would: its type, name, namespace, labels and annotations. `what` names the child.
///
/// # Errors
/// The first [`FieldError`] found.
pub fn check_child(what: &str, child: &Value) -> Result<(), FieldError> {
    let text = |field: &str| child[field].as_str().unwrap_or_default();
    check_type(what, text("apiVersion"), text("kind"))?;
    let group = Kind::from_api_version(text("apiVersion"), text("kind")).group;
    let metadata = &child["metadata"];
    let name = metadata["name"].as_str().unwrap_or_default();
    check(is_object_name(&group, name), || invalid(what, "metadata.name", name, object_name_rule(&group)))?;
    match metadata.get("namespace") {
        None => {}
        Some(Value::String(ns)) => check(is_namespace(ns), || invalid(what, "metadata.namespace", ns, NAMESPACE_RULE))?,
        Some(_) => return Err(wrong_type(what, "metadata.namespace", "a string")),
    }
    for (key, value) in strings_of(what, metadata, "labels")? {
        check(is_qualified_name(key), || invalid(what, "metadata.labels key", key, QUALIFIED_NAME_RULE))?;
        check(is_label_value(value), || invalid(what, &format!("metadata.labels.{key}"), value, LABEL_VALUE_RULE))?;
    }
    let mut annotations = 0_usize;
    for (key, value) in strings_of(what, metadata, "annotations")? {
        // Kubernetes lowercases annotation keys (not label keys) before checking them.
        let ok = is_qualified_name(&key.to_ascii_lowercase());
        check(ok, || invalid(what, "metadata.annotations key", key, QUALIFIED_NAME_RULE))?;
        annotations = annotations.saturating_add(key.len() + value.len());
    }
    check_size(|| format!("{what}: metadata.annotations"), annotations, MAX_ANNOTATIONS)
}

/// Check a reference to delete: its type, name (as a child's) and namespace.
///
/// # Errors
/// The first [`FieldError`] found.
pub fn check_delete(what: &str, d: &ObjectRef) -> Result<(), FieldError> {
    check_type(what, &d.api_version, &d.kind)?;
    let group = d.kind().group;
    check(is_object_name(&group, &d.name), || invalid(what, "name", &d.name, object_name_rule(&group)))?;
    match &d.namespace {
        Some(ns) => check(is_namespace(ns), || invalid(what, "namespace", ns, NAMESPACE_RULE)),
        None => Ok(()),
    }
}

/// Refuse a field of `bytes` bytes over `limit`; `field` names it.
///
/// # Errors
/// [`FieldError::OverKubernetesLimit`].
pub fn check_size(field: impl FnOnce() -> String, bytes: usize, limit: usize) -> Result<(), FieldError> {
    check(bytes <= limit, || FieldError::OverKubernetesLimit { field: field(), bytes, limit })
}

/// The entries of `metadata.<field>`, which must be absent, null or an object of strings.
fn strings_of<'a>(what: &str, metadata: &'a Value, field: &str) -> Result<Vec<(&'a str, &'a str)>, FieldError> {
    let wrong = || wrong_type(what, &format!("metadata.{field}"), "an object of strings");
    match metadata.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(map)) => map.iter().map(|(k, v)| v.as_str().map(|v| (k.as_str(), v)).ok_or_else(wrong)).collect(),
        Some(_) => Err(wrong()),
    }
}

fn check_type(what: &str, api_version: &str, kind: &str) -> Result<(), FieldError> {
    check(is_type(api_version, kind), || FieldError::InvalidName {
        field: format!("{what}: apiVersion and kind"),
        value: format!("{} {}", preview(api_version), preview(kind)),
        rule: TYPE_RULE,
    })
}

fn check(ok: bool, error: impl FnOnce() -> FieldError) -> Result<(), FieldError> {
    if ok { Ok(()) } else { Err(error()) }
}

fn invalid(what: &str, field: &str, value: &str, rule: &'static str) -> FieldError {
    FieldError::InvalidName { field: format!("{what}: {field}"), value: preview(value), rule }
}

fn wrong_type(what: &str, field: &str, expected: &'static str) -> FieldError {
    FieldError::WrongType { field: format!("{what}: {field}"), expected }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config_map(metadata: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata})
    }

    fn refusal(metadata: Value) -> String {
        check_child("child #0", &config_map(metadata)).unwrap_err().to_string()
    }

    fn delete(namespace: Option<&str>, name: &str) -> ObjectRef {
        ObjectRef { api_version: "v1".into(), kind: "ConfigMap".into(), namespace: namespace.map(Into::into), name: name.into() }
    }

    fn delete_refusal(d: &ObjectRef) -> String {
        check_delete("delete #0", d).unwrap_err().to_string()
    }

    #[test]
    fn child_names_and_namespaces_follow_kubernetes() {
        let err = refusal(json!({"name": "Bad_Name"}));
        assert!(err.starts_with("child #0: metadata.name \"Bad_Name\" is not a DNS-1123 subdomain"), "{err}");
        let err = refusal(json!({"name": "n".repeat(5 << 20)}));
        assert!(err.contains("… (5242880 bytes) is not a DNS-1123 subdomain") && err.len() < 400, "{}", &err[..200]);
        let err = refusal(json!({"name": "a", "namespace": "kube.system"}));
        assert!(err.starts_with("child #0: metadata.namespace \"kube.system\" is not a DNS-1123 label"), "{err}");
        assert_eq!(refusal(json!({"name": "a", "namespace": 3})), "child #0: metadata.namespace is not a string");
        assert_eq!(check_child("c", &config_map(json!({"name": "a.b-c", "namespace": "ns-1"}))), Ok(()));
    }

    #[test]
    fn child_types_follow_kubernetes() {
        let child = json!({"apiVersion": "v1", "kind": "K".repeat(100), "metadata": {"name": "a"}});
        let err = check_child("child #0", &child).unwrap_err().to_string();
        assert!(err.starts_with("child #0: apiVersion and kind \"v1\" \"KKKK"), "{err}");
    }

    #[test]
    fn rbac_kinds_accept_path_segment_names() {
        let role = |name: &str| json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name}});
        assert_eq!(check_child("c", &role("system:controller:x")), Ok(()));
        let err = check_child("c", &role("a/b")).unwrap_err().to_string();
        assert!(err.contains("is not a path segment name"), "{err}");
        assert!(refusal(json!({"name": "system:x"})).contains("is not a DNS-1123 subdomain"));
    }

    #[test]
    fn delete_names_namespaces_and_kinds_follow_kubernetes() {
        let err = delete_refusal(&delete(None, &"d".repeat(254)));
        assert!(err.starts_with("delete #0: name \"dddd") && err.contains("is not a DNS-1123 subdomain"), "{err}");
        let err = delete_refusal(&delete(Some("No"), "a"));
        assert!(err.starts_with("delete #0: namespace \"No\" is not a DNS-1123 label"), "{err}");
        let mut bad_kind = delete(None, "a");
        bad_kind.kind = "Config Map".into();
        assert!(delete_refusal(&bad_kind).starts_with("delete #0: apiVersion and kind"));
        let mut role = delete(Some("ns"), "system:x");
        role.api_version = "rbac.authorization.k8s.io/v1".into();
        assert_eq!(check_delete("d", &role), Ok(()));
        assert_eq!(check_delete("d", &delete(Some("ns"), "a.b")), Ok(()));
    }

    #[test]
    fn labels_are_qualified_names_with_label_values() {
        let ok = config_map(json!({"name": "a", "labels": {"app.kubernetes.io/name": "web", "empty": ""}}));
        assert_eq!(check_child("c", &ok), Ok(()));
        let err = refusal(json!({"name": "a", "labels": {"app": "v".repeat(64)}}));
        assert!(err.starts_with("child #0: metadata.labels.app \"vvvv") && err.contains("is not a label value"), "{err}");
        let err = refusal(json!({"name": "a", "labels": {"bad key": "v"}}));
        assert!(err.starts_with("child #0: metadata.labels key \"bad key\" is not a qualified name"), "{err}");
        assert_eq!(refusal(json!({"name": "a", "labels": {"app": 1}})), "child #0: metadata.labels is not an object of strings");
    }

    #[test]
    fn annotations_are_capped_at_256_kib_in_total() {
        let half = "a".repeat(130 << 10);
        let err = refusal(json!({"name": "a", "annotations": {"one": half, "two": half}}));
        assert_eq!(
            err,
            format!("child #0: metadata.annotations has {} bytes, more than Kubernetes' 262144", 2 * (130 << 10) + 6)
        );
        assert_eq!(check_child("c", &config_map(json!({"name": "a", "annotations": {"one": half}}))), Ok(()));
        assert_eq!(check_child("c", &config_map(json!({"name": "a", "annotations": {"Example.com/Note": ""}}))), Ok(()));
        let err = refusal(json!({"name": "a", "annotations": {"a b": ""}}));
        assert!(err.starts_with("child #0: metadata.annotations key \"a b\" is not a qualified name"), "{err}");
    }
}
