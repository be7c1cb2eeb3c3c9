//! Kubernetes kinds (group, version, kind), their scope, and references to single objects.

use std::fmt;

use serde_json::Value;

/// A Kubernetes kind: API group, version and kind name.
///
/// The empty group is the core group (`Pod`, `ConfigMap`, ...). Kinds are how a plugin declares
/// what it reconciles, creates and reads, and how it picks objects out of a [`Request`].
///
/// ```
/// use wasmop_sdk::Kind;
///
/// let deploy = Kind::new("apps", "v1", "Deployment");
/// assert_eq!(deploy.api_version(), "apps/v1");
/// assert_eq!(Kind::new("", "v1", "Pod").api_version(), "v1");
/// assert_eq!(deploy.to_string(), "apps/v1 Deployment");
/// ```
///
/// [`Request`]: crate::Request
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Kind {
    /// API group; empty for the core group.
    pub group: String,
    /// API version within the group, e.g. `v1` or `v1alpha1`.
    pub version: String,
    /// Kind name in CamelCase, e.g. `Deployment`.
    pub kind: String,
}

impl Kind {
    /// A kind from its group (empty for the core group), version and name.
    ///
    /// ```
    /// let memcached = wasmop_sdk::Kind::new("cache.example.com", "v1alpha1", "Memcached");
    /// assert_eq!(memcached.api_version(), "cache.example.com/v1alpha1");
    /// ```
    pub fn new(group: impl Into<String>, version: impl Into<String>, kind: impl Into<String>) -> Self {
        Self { group: group.into(), version: version.into(), kind: kind.into() }
    }

    /// The kind of a k8s-openapi resource type (cargo feature `k8s-openapi`, on by default).
    ///
    /// ```
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// use wasmop_sdk::Kind;
    ///
    /// assert_eq!(Kind::of::<Deployment>(), Kind::new("apps", "v1", "Deployment"));
    /// ```
    #[cfg(feature = "k8s-openapi")]
    pub fn of<K: k8s_openapi::Resource>() -> Self {
        Self::new(K::GROUP, K::VERSION, K::KIND)
    }

    /// Parse an object's `apiVersion` (`group/version`, or `version` for the core group) and
    /// kind name into a `Kind`.
    ///
    /// ```
    /// use wasmop_sdk::Kind;
    ///
    /// assert_eq!(Kind::from_api_version("apps/v1", "Deployment"), Kind::new("apps", "v1", "Deployment"));
    /// assert_eq!(Kind::from_api_version("v1", "Pod"), Kind::new("", "v1", "Pod"));
    /// ```
    pub fn from_api_version(api_version: &str, kind: impl Into<String>) -> Self {
        match api_version.split_once('/') {
            Some((group, version)) => Self::new(group, version, kind),
            None => Self::new("", api_version, kind),
        }
    }

    /// The kind of a JSON object, from its `apiVersion` and `kind` fields; `None` when either is
    /// missing or not a string.
    ///
    /// ```
    /// use serde_json::json;
    /// use wasmop_sdk::Kind;
    ///
    /// let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
    /// assert_eq!(Kind::of_object(&pod), Some(Kind::new("", "v1", "Pod")));
    /// assert_eq!(Kind::of_object(&json!({"kind": "Pod"})), None);
    /// ```
    pub fn of_object(object: &Value) -> Option<Self> {
        let api_version = object.get("apiVersion")?.as_str()?;
        let kind = object.get("kind")?.as_str()?;
        Some(Self::from_api_version(api_version, kind))
    }

    /// `apiVersion` as written in objects: `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// Whether a JSON object is of this kind (its `apiVersion` and `kind` match).
    ///
    /// ```
    /// use serde_json::json;
    /// use wasmop_sdk::Kind;
    ///
    /// let cm = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    /// assert!(Kind::new("", "v1", "ConfigMap").matches(&cm));
    /// assert!(!Kind::new("", "v1", "Secret").matches(&cm));
    /// ```
    pub fn matches(&self, object: &Value) -> bool {
        let api_version = object.get("apiVersion").and_then(Value::as_str);
        let kind = object.get("kind").and_then(Value::as_str);
        match (api_version, kind) {
            (Some(api_version), Some(kind)) if kind == self.kind => match api_version.split_once('/') {
                Some((group, version)) => group == self.group && version == self.version,
                None => self.group.is_empty() && api_version == self.version,
            },
            _ => false,
        }
    }
}

impl fmt::Display for Kind {
    /// `apiVersion Kind`, e.g. `apps/v1 Deployment`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.api_version(), self.kind)
    }
}

/// Whether objects of a kind live in a namespace or at cluster level.
///
/// ```
/// use wasmop_sdk::Scope;
/// assert_eq!(Scope::default(), Scope::Namespaced);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Scope {
    /// The object lives in a namespace.
    #[default]
    Namespaced,
    /// The object is cluster-scoped.
    Cluster,
}

/// A reference to one object: its kind, namespace and name.
///
/// Used to delete a child explicitly with [`Response::delete`](crate::Response::delete).
///
/// ```
/// use serde_json::json;
/// use wasmop_sdk::{Kind, ObjectRef};
///
/// let cm = ObjectRef::namespaced(&Kind::new("", "v1", "ConfigMap"), "default", "old-config");
/// assert_eq!(cm.api_version, "v1");
/// assert_eq!(cm.namespace.as_deref(), Some("default"));
///
/// let observed = json!({"apiVersion": "apps/v1", "kind": "Deployment",
///                       "metadata": {"name": "web", "namespace": "prod"}});
/// let r = ObjectRef::from_object(&observed).unwrap();
/// assert_eq!(r, ObjectRef::namespaced(&Kind::new("apps", "v1", "Deployment"), "prod", "web"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    /// `apiVersion` as written in objects: `group/version`, or `version` for the core group.
    pub api_version: String,
    /// Kind name.
    pub kind: String,
    /// Namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Object name.
    pub name: String,
}

impl ObjectRef {
    /// A reference to a namespaced object.
    pub fn namespaced(kind: &Kind, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self { api_version: kind.api_version(), kind: kind.kind.clone(), namespace: Some(namespace.into()), name: name.into() }
    }

    /// A reference to a cluster-scoped object.
    ///
    /// ```
    /// let ns = wasmop_sdk::ObjectRef::cluster(&wasmop_sdk::Kind::new("", "v1", "Namespace"), "team-a");
    /// assert_eq!(ns.namespace, None);
    /// ```
    pub fn cluster(kind: &Kind, name: impl Into<String>) -> Self {
        Self { api_version: kind.api_version(), kind: kind.kind.clone(), namespace: None, name: name.into() }
    }

    /// A reference to a JSON object, from its `apiVersion`, `kind`, `metadata.namespace` and
    /// `metadata.name`; `None` when one of the required fields is missing.
    pub fn from_object(object: &Value) -> Option<Self> {
        let metadata = object.get("metadata")?;
        Some(Self {
            api_version: object.get("apiVersion")?.as_str()?.to_owned(),
            kind: object.get("kind")?.as_str()?.to_owned(),
            namespace: metadata.get("namespace").and_then(Value::as_str).map(str::to_owned),
            name: metadata.get("name")?.as_str()?.to_owned(),
        })
    }

    /// The referenced object's kind.
    pub fn kind(&self) -> Kind {
        Kind::from_api_version(&self.api_version, self.kind.clone())
    }
}

impl fmt::Display for ObjectRef {
    /// `apiVersion Kind namespace/name`, or `apiVersion Kind name` when cluster-scoped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {} {ns}/{}", self.api_version, self.kind, self.name),
            None => write!(f, "{} {} {}", self.api_version, self.kind, self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn core_group_api_version_has_no_slash() {
        assert_eq!(Kind::new("", "v1", "ConfigMap").api_version(), "v1");
        assert_eq!(Kind::new("cache.example.com", "v1alpha1", "Memcached").api_version(), "cache.example.com/v1alpha1");
    }

    #[test]
    fn from_api_version_round_trips() {
        for kind in [Kind::new("", "v1", "Pod"), Kind::new("apps", "v1", "Deployment")] {
            assert_eq!(Kind::from_api_version(&kind.api_version(), kind.kind.clone()), kind);
        }
    }

    #[test]
    fn matches_requires_same_group_version_and_kind() {
        let deploy = Kind::new("apps", "v1", "Deployment");
        assert!(deploy.matches(&json!({"apiVersion": "apps/v1", "kind": "Deployment"})));
        assert!(!deploy.matches(&json!({"apiVersion": "apps/v1beta1", "kind": "Deployment"})));
        assert!(!deploy.matches(&json!({"apiVersion": "extensions/v1", "kind": "Deployment"})));
        assert!(!deploy.matches(&json!({"apiVersion": "apps/v1", "kind": "StatefulSet"})));
        assert!(!deploy.matches(&json!({"kind": "Deployment"})));
        assert!(!deploy.matches(&json!("not an object")));
    }

    #[test]
    fn core_kind_does_not_match_grouped_object() {
        assert!(!Kind::new("", "v1", "Pod").matches(&json!({"apiVersion": "x/v1", "kind": "Pod"})));
    }

    #[cfg(feature = "k8s-openapi")]
    #[test]
    fn of_reads_resource_constants() {
        use k8s_openapi::api::core::v1::ConfigMap;
        assert_eq!(Kind::of::<ConfigMap>(), Kind::new("", "v1", "ConfigMap"));
    }

    #[test]
    fn object_ref_needs_name_and_kind() {
        assert_eq!(ObjectRef::from_object(&json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}})), None);
        let r = ObjectRef::from_object(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}})).unwrap();
        assert_eq!(r.namespace, None);
        assert_eq!(r.to_string(), "v1 Namespace a");
        assert_eq!(r.kind(), Kind::new("", "v1", "Namespace"));
    }
}
