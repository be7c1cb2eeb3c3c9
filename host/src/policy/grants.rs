//! [`Grants`]: capabilities beyond what a plugin's manifest alone may have.
//!
//! A manifest says what a plugin *wants*; grants say what the host's operator *allows* on top
//! of the safe baseline. Without grants a plugin reads and writes only the kinds it declares,
//! only in its parent's namespace (namespaced parents), and never Secrets.

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::contract::{Kind, Manifest};

/// Access to `v1/Secret` objects. Secrets are never available to a plugin unless granted,
/// even when its manifest declares them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SecretAccess {
    /// No access (the default).
    #[default]
    None,
    /// Secrets declared as related kinds may be read.
    Read,
    /// Secrets declared as children may also be written.
    Write,
}

/// Namespaces other than the parent's that a namespaced plugin may read from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum NamespaceGrant {
    /// Only the parent's namespace (the default).
    #[default]
    ParentOnly,
    /// The parent's namespace and these.
    Also(BTreeSet<String>),
    /// Every namespace (`"*"` in the policy file).
    All,
}

impl NamespaceGrant {
    /// The grant a policy file's list describes: `["*"]` is every namespace.
    pub fn from_list(names: Vec<String>) -> Self {
        if names.iter().any(|n| n == "*") {
            Self::All
        } else if names.is_empty() {
            Self::ParentOnly
        } else {
            Self::Also(names.into_iter().collect())
        }
    }
}

/// What the host's operator grants one plugin beyond its manifest.
///
/// ```
/// use wasmop::contract::Kind;
/// use wasmop::policy::{Grants, NamespaceGrant, SecretAccess};
/// let grants = Grants::default();
/// assert!(!grants.may_read_namespace("shared", Some("team-a")));
/// let grants = Grants { namespaces: NamespaceGrant::from_list(vec!["shared".into()]), secrets: SecretAccess::Read };
/// assert!(grants.may_read_namespace("shared", Some("team-a")));
/// assert!(grants.may_read_kind(&Kind::new("", "v1", "Secret")));
/// assert!(!grants.may_write_kind(&Kind::new("", "v1", "Secret")));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// Extra namespaces readable through cache lookups.
    ///
    /// # Caveats
    /// Writes always stay in the parent's namespace: Kubernetes does not allow an owner
    /// reference to cross namespaces (the garbage collector deletes such children).
    pub namespaces: NamespaceGrant,
    /// Access to Secrets.
    pub secrets: SecretAccess,
}

/// Whether `kind` is the core `Secret`.
pub fn is_secret(kind: &Kind) -> bool {
    kind.group.is_empty() && kind.kind == "Secret"
}

impl Grants {
    /// Whether a lookup may read namespace `ns` for a parent in `parent_ns` (`None`: the
    /// parent is cluster-scoped, every namespace is readable).
    pub fn may_read_namespace(&self, ns: &str, parent_ns: Option<&str>) -> bool {
        match (parent_ns, &self.namespaces) {
            (None, _) | (_, NamespaceGrant::All) => true,
            (Some(parent), NamespaceGrant::ParentOnly) => ns == parent,
            (Some(parent), NamespaceGrant::Also(extra)) => ns == parent || extra.contains(ns),
        }
    }

    /// Whether objects of `kind` may be read (given the manifest declares it).
    pub fn may_read_kind(&self, kind: &Kind) -> bool {
        !is_secret(kind) || self.secrets >= SecretAccess::Read
    }

    /// Whether objects of `kind` may be written (given the manifest declares it as a child).
    pub fn may_write_kind(&self, kind: &Kind) -> bool {
        !is_secret(kind) || self.secrets >= SecretAccess::Write
    }

    /// What `manifest` declares that these grants do not cover, one line per item; empty when
    /// the plugin may run. A plugin with ungranted declarations is not started: its watches
    /// would need RBAC the host does not (and should not) have.
    pub fn ungranted(&self, manifest: &Manifest) -> Vec<String> {
        let mut missing = Vec::new();
        for child in manifest.children.iter().filter(|k| !self.may_write_kind(k)) {
            missing.push(format!("writes {child} (grant secrets: write)"));
        }
        let read_only = manifest.related.iter().map(|r| &r.kind).filter(|k| !manifest.children.contains(k));
        for kind in read_only.filter(|k| !self.may_read_kind(k)) {
            missing.push(format!("reads {kind} (grant secrets: read)"));
        }
        if !self.may_read_kind(&manifest.parent) {
            missing.push(format!("reconciles {} (grant secrets: write)", manifest.parent));
        }
        missing
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::manifest::fixtures;

    fn secret() -> Kind {
        Kind::new("", "v1", "Secret")
    }

    #[test]
    fn secrets_need_a_grant_and_write_implies_read() {
        let none = Grants::default();
        assert!(!none.may_read_kind(&secret()) && !none.may_write_kind(&secret()));
        let read = Grants { secrets: SecretAccess::Read, ..Grants::default() };
        assert!(read.may_read_kind(&secret()) && !read.may_write_kind(&secret()));
        let write = Grants { secrets: SecretAccess::Write, ..Grants::default() };
        assert!(write.may_read_kind(&secret()) && write.may_write_kind(&secret()));
        assert!(none.may_write_kind(&Kind::new("", "v1", "ConfigMap")));
        assert!(none.may_write_kind(&Kind::new("example.com", "v1", "Secret")), "only the core Secret is special");
    }

    #[test]
    fn namespaces_default_to_the_parents_only() {
        let g = Grants::default();
        assert!(g.may_read_namespace("a", Some("a")));
        assert!(!g.may_read_namespace("kube-system", Some("a")));
        assert!(g.may_read_namespace("kube-system", None), "cluster-scoped parents read everywhere");
        let g = Grants { namespaces: NamespaceGrant::from_list(vec!["shared".into()]), ..Grants::default() };
        assert!(g.may_read_namespace("shared", Some("a")) && !g.may_read_namespace("kube-system", Some("a")));
        let g = Grants { namespaces: NamespaceGrant::from_list(vec!["*".into()]), ..Grants::default() };
        assert!(g.may_read_namespace("kube-system", Some("a")));
    }

    #[test]
    fn declared_secrets_without_a_grant_are_listed() {
        let mut m = fixtures::memcached("");
        assert!(Grants::default().ungranted(&m).is_empty());
        m.children.push(secret());
        let missing = Grants::default().ungranted(&m);
        assert_eq!(missing, vec!["writes v1/Secret (grant secrets: write)".to_owned()]);
        let read = Grants { secrets: SecretAccess::Read, ..Grants::default() };
        assert_eq!(read.ungranted(&m).len(), 1, "a child Secret needs write");
        let write = Grants { secrets: SecretAccess::Write, ..Grants::default() };
        assert!(write.ungranted(&m).is_empty());
    }
}
