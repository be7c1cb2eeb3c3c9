//! Kubernetes kinds (group, version, kind), their scope, and references to single objects.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A Kubernetes kind: API group, version and kind name.
///
/// The empty group is the core group (`Pod`, `ConfigMap`, ...). Kinds are how a plugin declares
/// what it reconciles, creates and reads, and how the host names them in plans, errors and its
/// policy file. A kind displays as `group/version/Kind` (`v1/Kind` for the core group), and
/// [`Kind::parse`] reads that form back.
///
/// ```
/// use wasmop_types::Kind;
///
/// let deploy = Kind::new("apps", "v1", "Deployment");
/// assert_eq!(deploy.api_version(), "apps/v1");
/// assert_eq!(deploy.to_string(), "apps/v1/Deployment");
/// assert_eq!(Kind::new("", "v1", "Pod").to_string(), "v1/Pod");
/// assert_eq!("apps/v1/Deployment".parse::<Kind>()?, deploy);
/// # Ok::<(), wasmop_types::KindError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Kind {
    /// API group; empty for the core group.
    pub group: String,
    /// API version within the group, e.g. `v1` or `v1alpha1`.
    pub version: String,
    /// Kind name in CamelCase, e.g. `Deployment`.
    pub kind: String,
}

/// Why a text is not a kind in the `group/version/Kind` form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KindError {
    /// The text is not `group/version/Kind` (or `v1/Kind` for the core group) with a lowercase
    /// DNS group, an alphanumeric version and a CamelCase kind. Carries the text.
    #[error("{0:?} is not a kind: write group/version/Kind (apps/v1/Deployment), or v1/Kind for the core group")]
    Malformed(String),
}

impl Kind {
    /// A kind from its group (empty for the core group), version and name.
    pub fn new(group: impl Into<String>, version: impl Into<String>, kind: impl Into<String>) -> Self {
        Self { group: group.into(), version: version.into(), kind: kind.into() }
    }

    /// Parse `group/version/Kind`, or `version/Kind` for the core group: the form a kind
    /// displays in.
    ///
    /// ```
    /// use wasmop_types::Kind;
    /// assert_eq!(Kind::parse("v1/ConfigMap")?, Kind::new("", "v1", "ConfigMap"));
    /// assert!(Kind::parse("Deployment").is_err());
    /// # Ok::<(), wasmop_types::KindError>(())
    /// ```
    ///
    /// # Errors
    /// [`KindError::Malformed`] showing the expected form.
    pub fn parse(text: &str) -> Result<Self, KindError> {
        let bad = || KindError::Malformed(text.to_owned());
        let (api_version, kind) = text.rsplit_once('/').ok_or_else(bad)?;
        let kind = Self::from_api_version(api_version, kind);
        let ok_group = kind.group.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-');
        let ok_version = !kind.version.is_empty() && kind.version.chars().all(|c| c.is_ascii_alphanumeric());
        let ok_kind =
            kind.kind.starts_with(|c: char| c.is_ascii_uppercase()) && kind.kind.chars().all(|c| c.is_ascii_alphanumeric());
        if ok_group && ok_version && ok_kind && kind.to_string() == text { Ok(kind) } else { Err(bad()) }
    }

    /// The kind of a k8s-openapi resource type (cargo feature `k8s-openapi`).
    ///
    /// ```
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// use wasmop_types::Kind;
    ///
    /// assert_eq!(Kind::of::<Deployment>(), Kind::new("apps", "v1", "Deployment"));
    /// ```
    #[cfg(feature = "k8s-openapi")]
    pub fn of<K: k8s_openapi::Resource>() -> Self {
        Self::new(K::GROUP, K::VERSION, K::KIND)
    }

    /// A kind from an object's `apiVersion` (`group/version`, or `version` for the core group)
    /// and kind name.
    ///
    /// ```
    /// use wasmop_types::Kind;
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
    /// use wasmop_types::Kind;
    ///
    /// let cm = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    /// assert!(Kind::new("", "v1", "ConfigMap").matches(&cm));
    /// assert!(!Kind::new("", "v1", "Secret").matches(&cm));
    /// ```
    pub fn matches(&self, object: &Value) -> bool {
        Self::of_object(object).is_some_and(|k| &k == self)
    }

    /// Whether this is the core-group `Secret`, which plugins never see unless granted.
    pub fn is_secret(&self) -> bool {
        self.group.is_empty() && self.kind == "Secret"
    }
}

impl fmt::Display for Kind {
    /// `group/version/Kind`, or `version/Kind` for the core group.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.api_version(), self.kind)
    }
}

impl FromStr for Kind {
    type Err = KindError;

    /// [`Kind::parse`].
    fn from_str(text: &str) -> Result<Self, KindError> {
        Self::parse(text)
    }
}

/// Whether objects of a kind live in a namespace or at cluster level.
///
/// ```
/// use wasmop_types::Scope;
/// assert_eq!(Scope::default(), Scope::Namespaced);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Scope {
    /// The object lives in a namespace.
    #[default]
    Namespaced,
    /// The object is cluster-scoped.
    Cluster,
}

/// A reference to one object: its kind, namespace and name.
///
/// ```
/// use serde_json::json;
/// use wasmop_types::{Kind, ObjectRef};
///
/// let observed = json!({"apiVersion": "apps/v1", "kind": "Deployment",
///                       "metadata": {"name": "web", "namespace": "prod"}});
/// let r = ObjectRef::of_object(&observed).unwrap();
/// assert_eq!(r, ObjectRef::namespaced(&Kind::new("apps", "v1", "Deployment"), "prod", "web"));
/// assert_eq!(r.to_string(), "apps/v1/Deployment prod/web");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// `apiVersion` as written in objects: `group/version`, or `version` for the core group.
    pub api_version: String,
    /// Kind name.
    pub kind: String,
    /// Namespace; `None` for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
    pub fn cluster(kind: &Kind, name: impl Into<String>) -> Self {
        Self { api_version: kind.api_version(), kind: kind.kind.clone(), namespace: None, name: name.into() }
    }

    /// The reference of a JSON object, from its `apiVersion`, `kind`, `metadata.namespace` and
    /// `metadata.name`; `None` when one of the required fields is missing.
    pub fn of_object(object: &Value) -> Option<Self> {
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
    /// `group/version/Kind namespace/name`, or `group/version/Kind name` when cluster-scoped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind(), self.name),
            None => write!(f, "{} {}", self.kind(), self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn core_group_kinds_have_a_bare_api_version() {
        let pod = Kind::new("", "v1", "Pod");
        assert_eq!(pod.api_version(), "v1");
        assert_eq!(Kind::from_api_version("v1", "Pod"), pod);
        assert_eq!(Kind::new("cache.example.com", "v1alpha1", "Memcached").api_version(), "cache.example.com/v1alpha1");
    }

    #[test]
    fn display_is_group_version_kind_and_parses_back() {
        for (kind, text) in [
            (Kind::new("", "v1", "Pod"), "v1/Pod"),
            (Kind::new("apps", "v1", "Deployment"), "apps/v1/Deployment"),
            (Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole"), "rbac.authorization.k8s.io/v1/ClusterRole"),
        ] {
            assert_eq!(kind.to_string(), text);
            assert_eq!(Kind::parse(text).unwrap(), kind);
        }
    }

    #[test]
    fn malformed_kinds_name_the_expected_form() {
        for bad in ["ClusterRole", "rbac.authorization.k8s.io/ClusterRole/v1", "v1/namespace", "/v1/Namespace", "v1/", "a/b/c/D"]
        {
            let err = Kind::parse(bad).unwrap_err().to_string();
            assert!(err.starts_with(&format!("{bad:?} is not a kind: write group/version/Kind")), "{bad}: {err}");
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
        assert!(!Kind::new("", "v1", "Pod").matches(&json!({"apiVersion": "x/v1", "kind": "Pod"})));
    }

    #[test]
    fn only_core_secrets_are_secrets() {
        assert!(Kind::new("", "v1", "Secret").is_secret());
        assert!(!Kind::new("example.com", "v1", "Secret").is_secret());
    }

    #[cfg(feature = "k8s-openapi")]
    #[test]
    fn of_reads_resource_constants() {
        use k8s_openapi::api::core::v1::ConfigMap;
        assert_eq!(Kind::of::<ConfigMap>(), Kind::new("", "v1", "ConfigMap"));
    }

    #[test]
    fn object_refs_read_metadata_and_display_with_the_kind() {
        let obj = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a", "namespace": "ns"}});
        let r = ObjectRef::of_object(&obj).unwrap();
        assert_eq!(r.to_string(), "apps/v1/Deployment ns/a");
        assert_eq!(r.kind(), Kind::new("apps", "v1", "Deployment"));
        let ns = ObjectRef::of_object(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}})).unwrap();
        assert_eq!(ns, ObjectRef::cluster(&Kind::new("", "v1", "Namespace"), "a"));
        assert_eq!(ns.to_string(), "v1/Namespace a");
        assert_eq!(ObjectRef::of_object(&json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}})), None);
        assert_eq!(ObjectRef::of_object(&json!({"kind": "X"})), None);
    }

    #[test]
    fn serde_forms_are_stable() {
        let r = ObjectRef::namespaced(&Kind::new("", "v1", "ConfigMap"), "ns", "c");
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "namespace": "ns", "name": "c"})
        );
        let cluster = ObjectRef::cluster(&Kind::new("", "v1", "Namespace"), "n");
        assert_eq!(serde_json::to_value(&cluster).unwrap(), json!({"apiVersion": "v1", "kind": "Namespace", "name": "n"}));
        assert_eq!(serde_json::to_value(Scope::Cluster).unwrap(), json!("Cluster"));
        let kind = Kind::new("apps", "v1", "Deployment");
        assert_eq!(serde_json::to_value(&kind).unwrap(), json!({"group": "apps", "version": "v1", "kind": "Deployment"}));
    }
}
