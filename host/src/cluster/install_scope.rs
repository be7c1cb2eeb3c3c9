//! Where a host works: the whole cluster, or only the namespaces it is given
//! (`wasmop run --namespace NS`, repeatable, or `WASMOP_NAMESPACES=a,b`).
//!
//! A namespaced host watches and writes only in its namespaces, so it runs with Roles in them
//! (`wasmop rbac --namespace NS`) rather than a ClusterRole. It therefore cannot serve a plugin
//! that declares a cluster-scoped kind (parent, child or related): watching one needs a
//! cluster-wide right, so such a plugin is not started, with the reason
//! ([`InstallScope::cluster_scoped_kinds`]).

use std::collections::BTreeSet;

use crate::contract::{Kind, KindScopes, Manifest, Scope};

/// A namespace name that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NamespaceError {
    /// Not an RFC 1123 label, as Kubernetes requires of namespace names.
    #[error(
        "{0:?} is not a namespace name: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit"
    )]
    Invalid(String),
}

/// The namespaces a host watches and writes in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum InstallScope {
    /// Every namespace, and cluster-scoped kinds (a ClusterRole).
    #[default]
    Cluster,
    /// Only these namespaces (never empty), and no cluster-scoped kind of a plugin.
    Namespaces(BTreeSet<String>),
}

/// Check one namespace name (what clap calls for each `--namespace` value).
///
/// # Errors
/// [`NamespaceError::Invalid`] naming the value.
pub fn namespace_name(name: &str) -> Result<String, NamespaceError> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if valid { Ok(name.to_owned()) } else { Err(NamespaceError::Invalid(name.to_owned())) }
}

impl InstallScope {
    /// [`InstallScope::Cluster`] for no names, else those namespaces (duplicates merged).
    ///
    /// # Errors
    /// [`NamespaceError::Invalid`] for the first name that is not a namespace name.
    pub fn from_names<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> Result<Self, NamespaceError> {
        let names = names.into_iter().map(|n| namespace_name(n.as_ref())).collect::<Result<BTreeSet<_>, _>>()?;
        Ok(if names.is_empty() { Self::Cluster } else { Self::Namespaces(names) })
    }

    /// The namespaces of a namespaced install; `None` for the whole cluster.
    pub fn namespaces(&self) -> Option<&BTreeSet<String>> {
        match self {
            Self::Cluster => None,
            Self::Namespaces(names) => Some(names),
        }
    }

    /// Whether the host works in `namespace`.
    pub fn contains(&self, namespace: &str) -> bool {
        self.namespaces().is_none_or(|names| names.contains(namespace))
    }

    /// This scope as one string, for an annotation: `*` for the whole cluster, else the
    /// namespaces joined by commas.
    pub fn as_value(&self) -> String {
        match self {
            Self::Cluster => "*".into(),
            Self::Namespaces(names) => names.iter().map(String::as_str).collect::<Vec<_>>().join(","),
        }
    }

    /// The kinds `manifest` declares (parent, children, related) that are cluster-scoped, in
    /// that order, when this is a namespaced install (none for the whole cluster): a namespaced
    /// host cannot watch them. A kind whose scope `scopes` does not know is not listed.
    pub fn cluster_scoped_kinds<'m>(&self, manifest: &'m Manifest, scopes: &dyn KindScopes) -> Vec<&'m Kind> {
        if *self == Self::Cluster {
            return Vec::new();
        }
        let declared =
            std::iter::once(&manifest.parent).chain(&manifest.children).chain(manifest.related.iter().map(|r| &r.kind));
        let mut found: Vec<&Kind> = declared.filter(|k| scopes.scope_of(k) == Some(Scope::Cluster)).collect();
        found.dedup();
        found
    }
}

impl std::fmt::Display for InstallScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Cluster => f.write_str("the whole cluster"),
            Self::Namespaces(names) => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                write!(f, "namespace{} {}", if names.len() == 1 { "" } else { "s" }, names.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::KnownKinds;
    use crate::contract::manifest::fixtures;

    #[test]
    fn no_names_is_the_whole_cluster_and_names_are_merged() {
        assert_eq!(InstallScope::from_names(Vec::<String>::new()), Ok(InstallScope::Cluster));
        let scope = InstallScope::from_names(["b", "a", "b"]).unwrap();
        assert_eq!(scope.namespaces().unwrap().iter().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(scope.to_string(), "namespaces a, b");
        assert!(scope.contains("a") && !scope.contains("c"));
        assert!(InstallScope::Cluster.contains("c"));
        assert_eq!((scope.as_value(), InstallScope::Cluster.as_value()), ("a,b".into(), "*".into()));
    }

    #[test]
    fn a_name_that_is_not_a_namespace_is_refused_by_name() {
        for bad in ["", "Team-A", "-a", "a-", "a_b", "a.b", &"x".repeat(64)] {
            let err = InstallScope::from_names(["ok", bad]).unwrap_err();
            assert_eq!(err, NamespaceError::Invalid(bad.to_owned()));
            assert!(err.to_string().starts_with(&format!("{bad:?} is not a namespace name")), "{err}");
        }
        assert_eq!(namespace_name("team-a1"), Ok("team-a1".to_owned()));
    }

    #[test]
    fn a_namespaced_install_lists_the_cluster_scoped_kinds_a_plugin_declares() {
        let kinds = KnownKinds::builtin();
        let mut m = fixtures::memcached("");
        m.parent = Kind::new("", "v1", "ConfigMap");
        m.children.push(Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole"));
        let scope = InstallScope::from_names(["a"]).unwrap();
        assert_eq!(scope.cluster_scoped_kinds(&m, &kinds), [&Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole")]);
        assert!(InstallScope::Cluster.cluster_scoped_kinds(&m, &kinds).is_empty());
        m.children.pop();
        assert!(scope.cluster_scoped_kinds(&m, &kinds).is_empty());
    }
}
