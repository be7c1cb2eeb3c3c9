//! The `SidecarSet` (`apps.wasmop.dev/v1alpha1`, cluster-scoped) as the plugin reads it, and
//! its sidecar hash: the version of its containers that a Pod records when they are injected.

use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use wasmop_sdk::Kind;

use crate::selector::PodSelector;

/// The API group of `SidecarSet` (ours, so it never collides with an OpenKruise install).
pub const GROUP: &str = "apps.wasmop.dev";
/// The served version.
pub const VERSION: &str = "v1alpha1";
/// The annotation prefix of the hash annotations: `sidecarset.wasmop.dev/<name>-hash`.
pub const HASH_ANNOTATION_PREFIX: &str = "sidecarset.wasmop.dev/";
/// Longest SidecarSet name: the annotation key's name part (`<name>-hash`) has at most 63
/// characters.
pub const MAX_NAME: usize = 63 - "-hash".len();

/// The `SidecarSet` kind.
pub fn sidecarset_kind() -> Kind {
    Kind::new(GROUP, VERSION, "SidecarSet")
}

/// The `v1/Pod` kind.
pub fn pod_kind() -> Kind {
    Kind::new("", "v1", "Pod")
}

/// Why an object is not a readable `SidecarSet`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A field has the wrong JSON type (serde's message names it).
    #[error("the SidecarSet does not parse: {0}")]
    Malformed(String),
    /// `metadata.name` is missing.
    #[error("the SidecarSet has no metadata.name")]
    NoName,
}

/// A `SidecarSet`: its name and generation, and its spec.
#[derive(Debug, Clone, PartialEq)]
pub struct SidecarSet {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `spec`.
    pub spec: SidecarSetSpec,
}

/// `SidecarSet.spec`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetSpec {
    /// Which Pods get the sidecars. `None` (absent) selects no Pod.
    #[serde(default)]
    pub selector: Option<PodSelector>,
    /// The sidecar containers (`core/v1.Container` as JSON, kept as written).
    #[serde(default)]
    pub containers: Vec<Value>,
    /// When set, only Pods in this namespace.
    #[serde(default)]
    pub namespace: Option<String>,
}

#[derive(Deserialize)]
struct Object {
    #[serde(default)]
    metadata: Metadata,
    #[serde(default)]
    spec: SidecarSetSpec,
}

#[derive(Default, Deserialize)]
struct Metadata {
    name: Option<String>,
    generation: Option<i64>,
}

impl SidecarSet {
    /// Read a `SidecarSet` object.
    ///
    /// # Errors
    /// [`ParseError`] when a field has the wrong type or the name is missing.
    pub fn from_object(object: &Value) -> Result<Self, ParseError> {
        let parsed: Object = serde_json::from_value(object.clone()).map_err(|e| ParseError::Malformed(e.to_string()))?;
        let name = parsed.metadata.name.ok_or(ParseError::NoName)?;
        Ok(Self { name, generation: parsed.metadata.generation, spec: parsed.spec })
    }

    /// Whether this SidecarSet applies to a Pod in `namespace`: its namespace (if set) is the
    /// Pod's and its selector matches the Pod's labels.
    pub fn applies_to(&self, pod: &Value, namespace: &str) -> bool {
        self.spec.namespace.as_deref().is_none_or(|ns| ns == namespace)
            && self.spec.selector.as_ref().is_some_and(|s| s.matches_object(pod))
    }

    /// The annotation a Pod carries once this SidecarSet's containers are injected.
    pub fn hash_annotation(&self) -> String {
        format!("{HASH_ANNOTATION_PREFIX}{}-hash", self.name)
    }

    /// The hash of `spec.containers`: 16 hex digits of the SHA-256 of their canonical JSON
    /// (object keys sorted), so the same containers always give the same hash.
    pub fn hash(&self) -> String {
        let mut canonical = String::new();
        write_canonical(&Value::Array(self.spec.containers.clone()), &mut canonical);
        hex::encode(&Sha256::digest(canonical.as_bytes())[..8])
    }

    /// Whether `pod` carries this SidecarSet's current hash.
    pub fn is_current_on(&self, pod: &Value) -> bool {
        annotation(pod, &self.hash_annotation()) == Some(self.hash().as_str())
    }
}

/// An annotation of an object.
pub fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.pointer("/metadata/annotations")?.get(key)?.as_str()
}

/// JSON with object keys in sorted order, whatever order the map keeps them in.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(spec: Value) -> SidecarSet {
        SidecarSet::from_object(&json!({"metadata": {"name": "log", "generation": 3}, "spec": spec})).unwrap()
    }

    #[test]
    fn the_hash_depends_on_the_containers_and_not_on_key_order() {
        let a = set(json!({"containers": [{"name": "log", "image": "busybox:1"}]}));
        let b = set(json!({"containers": [{"image": "busybox:1", "name": "log"}]}));
        let c = set(json!({"containers": [{"name": "log", "image": "busybox:2"}]}));
        assert_eq!(a.hash(), b.hash());
        assert_ne!(a.hash(), c.hash());
        assert_eq!(a.hash().len(), 16);
    }

    #[test]
    fn a_sidecarset_applies_to_pods_its_selector_and_namespace_match() {
        let s = set(json!({"selector": {"matchLabels": {"app": "web"}}, "namespace": "team-a"}));
        let pod = json!({"metadata": {"labels": {"app": "web"}}});
        assert!(s.applies_to(&pod, "team-a"));
        assert!(!s.applies_to(&pod, "team-b"));
        assert!(!s.applies_to(&json!({"metadata": {"labels": {"app": "db"}}}), "team-a"));
        let everywhere = set(json!({"selector": {"matchLabels": {"app": "web"}}}));
        assert!(everywhere.applies_to(&pod, "team-b"));
        assert!(!set(json!({})).applies_to(&pod, "team-a"), "no selector selects no Pod");
    }

    #[test]
    fn a_pod_is_current_when_it_carries_the_hash_of_the_current_containers() {
        let s = set(json!({"containers": [{"name": "log", "image": "busybox:1"}]}));
        let pod = |hash: &str| json!({"metadata": {"annotations": {"sidecarset.wasmop.dev/log-hash": hash}}});
        assert!(s.is_current_on(&pod(&s.hash())));
        assert!(!s.is_current_on(&pod("0000000000000000")));
        assert!(!s.is_current_on(&json!({"metadata": {}})));
    }

    #[test]
    fn a_malformed_sidecarset_says_which_field() {
        let err = SidecarSet::from_object(&json!({"metadata": {"name": "x"}, "spec": {"containers": "log"}})).unwrap_err();
        assert!(err.to_string().contains("invalid type: string \"log\", expected a sequence"), "{err}");
        assert_eq!(SidecarSet::from_object(&json!({"spec": {}})), Err(ParseError::NoName));
    }
}
