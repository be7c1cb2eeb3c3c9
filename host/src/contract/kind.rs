//! Kinds and object references as the host sees them.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A Kubernetes kind: API group, version and kind name.
///
/// ```
/// use wasmop::contract::Kind;
/// let deploy = Kind::from_api_version("apps/v1", "Deployment");
/// assert_eq!(deploy.group, "apps");
/// assert_eq!(deploy.api_version(), "apps/v1");
/// assert_eq!(Kind::from_api_version("v1", "Pod").api_version(), "v1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Kind {
    /// API group; empty for the core group.
    pub group: String,
    /// API version within the group.
    pub version: String,
    /// Kind name, CamelCase.
    pub kind: String,
}

impl Kind {
    /// A kind from its three parts.
    pub fn new(group: impl Into<String>, version: impl Into<String>, kind: impl Into<String>) -> Self {
        Self { group: group.into(), version: version.into(), kind: kind.into() }
    }

    /// A kind from an object's `apiVersion` (`group/version` or `version`) and `kind`.
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        match api_version.split_once('/') {
            Some((group, version)) => Self::new(group, version, kind),
            None => Self::new("", api_version, kind),
        }
    }

    /// The kind of a JSON object, from its `apiVersion` and `kind` fields, if both are strings.
    pub fn of_object(object: &serde_json::Value) -> Option<Self> {
        let api_version = object.get("apiVersion")?.as_str()?;
        let kind = object.get("kind")?.as_str()?;
        Some(Self::from_api_version(api_version, kind))
    }

    /// `apiVersion` as written in objects.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// Whether this is a core-group `Secret`, which plugins never see unless granted.
    pub fn is_secret(&self) -> bool {
        self.group.is_empty() && self.kind == "Secret"
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.api_version(), self.kind)
    }
}

/// Whether objects of a kind are namespaced or cluster-scoped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Scope {
    /// The object lives in a namespace.
    Namespaced,
    /// The object is cluster-scoped.
    Cluster,
}

/// A reference to one object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// `group/version`, or `version` for the core group.
    pub api_version: String,
    /// Kind name.
    pub kind: String,
    /// Namespace, `None` for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Object name.
    pub name: String,
}

impl ObjectRef {
    /// The reference of a JSON object, if it has `apiVersion`, `kind` and `metadata.name`.
    pub fn of_object(object: &serde_json::Value) -> Option<Self> {
        let metadata = object.get("metadata")?;
        Some(Self {
            api_version: object.get("apiVersion")?.as_str()?.to_owned(),
            kind: object.get("kind")?.as_str()?.to_owned(),
            namespace: metadata.get("namespace").and_then(|n| n.as_str()).map(str::to_owned),
            name: metadata.get("name")?.as_str()?.to_owned(),
        })
    }

    /// The kind this reference points at.
    pub fn kind(&self) -> Kind {
        Kind::from_api_version(&self.api_version, &self.kind)
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.kind(), ns, self.name),
            None => write!(f, "{} {}", self.kind(), self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn core_group_kinds_have_bare_api_version() {
        let pod = Kind::new("", "v1", "Pod");
        assert_eq!(pod.api_version(), "v1");
        assert_eq!(Kind::from_api_version("v1", "Pod"), pod);
        assert_eq!(pod.to_string(), "v1/Pod");
    }

    #[test]
    fn object_ref_reads_metadata() {
        let obj = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a", "namespace": "ns"}});
        let r = ObjectRef::of_object(&obj).unwrap();
        assert_eq!(r.to_string(), "apps/v1/Deployment ns/a");
        assert_eq!(r.kind(), Kind::new("apps", "v1", "Deployment"));
        assert!(ObjectRef::of_object(&json!({"kind": "X"})).is_none());
    }

    #[test]
    fn only_core_secrets_are_secrets() {
        assert!(Kind::new("", "v1", "Secret").is_secret());
        assert!(!Kind::new("example.com", "v1", "Secret").is_secret());
    }
}
