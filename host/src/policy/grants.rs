//! [`Grants`]: capabilities beyond what a plugin's manifest alone may have.
//!
//! A manifest says what a plugin *wants*; grants say what the host's operator *allows* on top
//! of the safe baseline. Without grants a plugin reads and writes only the kinds it declares,
//! only in its parent's namespace (namespaced parents), never Secrets, and — when its parent
//! is namespaced — never cluster-scoped kinds; its admission webhooks admit only the kinds it
//! declares (see [`super::webhook_reach`]).

use std::collections::BTreeSet;

use serde::Deserialize;

use super::webhook_reach::{self, WebhookResources};
use crate::contract::{Kind, KindScopes, Manifest, Scope};

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
/// let grants = Grants {
///     namespaces: NamespaceGrant::from_list(vec!["shared".into()]),
///     secrets: SecretAccess::Read,
///     ..Grants::default()
/// };
/// assert!(grants.may_read_namespace("shared", Some("team-a")));
/// assert!(grants.may_read_kind(&Kind::new("", "v1", "Secret")));
/// assert!(!grants.may_write_kind(&Kind::new("", "v1", "Secret")));
/// let role = Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole");
/// assert!(!grants.may_write_cluster_scoped(&role));
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
    /// Cluster-scoped kinds a plugin with a namespaced parent may declare as children and
    /// write (`clusterScopedChildren` in the policy file), by exact group, version and kind.
    ///
    /// # Caveats
    /// Such a child cannot have an owner reference (Kubernetes does not let a cluster-scoped
    /// object be owned by a namespaced one): the host labels it with the parent's uid instead
    /// (see [`crate::actions::PARENT_UID_LABEL`]), and nothing garbage-collects it when the
    /// parent goes; the plugin deletes it (with `finalizer: true`, in its finalizing call).
    /// Objects of that kind are not among the plugin's observed children, so pruning does not
    /// reach them either. Plugins with a cluster-scoped parent need no grant: their children of
    /// every scope are owned as usual.
    pub cluster_scoped_children: BTreeSet<Kind>,
    /// Resources the plugin's admission webhooks may admit beyond the kinds its manifest
    /// declares (`webhookResources` in the policy file).
    ///
    /// # Caveats
    /// The API server sends a webhook every matching object in every namespace, before any
    /// other check: granting `pods` lets the plugin see every Pod created in the cluster.
    pub webhook_resources: WebhookResources,
}

/// A kind as written in a policy file: `group/version/Kind`, or `version/Kind` for the core
/// group (as [`Kind`] displays).
///
/// # Errors
/// A message showing the expected form.
pub fn parse_kind(text: &str) -> Result<Kind, String> {
    Kind::parse(text).map_err(|e| e.to_string())
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
        !kind.is_secret() || self.secrets >= SecretAccess::Read
    }

    /// Whether objects of `kind` may be written (given the manifest declares it as a child).
    pub fn may_write_kind(&self, kind: &Kind) -> bool {
        !kind.is_secret() || self.secrets >= SecretAccess::Write
    }

    /// Whether a plugin with a namespaced parent may write objects of the cluster-scoped
    /// `kind` (given the manifest declares it as a child).
    pub fn may_write_cluster_scoped(&self, kind: &Kind) -> bool {
        self.cluster_scoped_children.contains(kind)
    }

    /// What `manifest` declares that these grants do not cover, one line per item; empty when
    /// the plugin may run. A plugin with ungranted declarations is not started: its watches
    /// would need RBAC the host does not (and should not) have.
    ///
    /// Every resource its webhooks' rules match must be declared or granted (see
    /// [`super::webhook_reach`]).
    ///
    /// Cluster-scoped child kinds of a namespaced parent are judged by `scopes`; a child kind
    /// whose scope `scopes` does not know is not listed (the host resolves every kind by
    /// discovery before calling this; offline callers say which kinds they could not tell).
    pub fn ungranted(&self, manifest: &Manifest, scopes: &dyn KindScopes) -> Vec<String> {
        let mut missing = Vec::new();
        for child in manifest.children.iter().filter(|k| !self.may_write_kind(k)) {
            missing.push(format!("writes {child} (grant secrets: write)"));
        }
        if manifest.scope == Scope::Namespaced {
            let cluster_scoped = manifest.children.iter().filter(|k| scopes.scope_of(k) == Some(Scope::Cluster));
            for child in cluster_scoped.filter(|k| !self.may_write_cluster_scoped(k)) {
                missing.push(format!(
                    "writes the cluster-scoped {child} from a namespaced parent (grant clusterScopedChildren: [{child}])"
                ));
            }
        }
        let read_only = manifest.related.iter().map(|r| &r.kind).filter(|k| !manifest.children.contains(k));
        for kind in read_only.filter(|k| !self.may_read_kind(k)) {
            missing.push(format!("reads {kind} (grant secrets: read)"));
        }
        if !self.may_read_kind(&manifest.parent) {
            missing.push(format!("reconciles {} (grant secrets: write)", manifest.parent));
        }
        let secrets_readable = self.secrets >= SecretAccess::Read;
        missing.extend(webhook_reach::uncovered(&self.webhook_resources, secrets_readable, manifest, scopes));
        missing
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::KnownKinds;
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
        let kinds = KnownKinds::builtin();
        let mut m = fixtures::memcached("");
        assert!(Grants::default().ungranted(&m, &kinds).is_empty());
        m.children.push(secret());
        let missing = Grants::default().ungranted(&m, &kinds);
        assert_eq!(missing, vec!["writes v1/Secret (grant secrets: write)".to_owned()]);
        let read = Grants { secrets: SecretAccess::Read, ..Grants::default() };
        assert_eq!(read.ungranted(&m, &kinds).len(), 1, "a child Secret needs write");
        let write = Grants { secrets: SecretAccess::Write, ..Grants::default() };
        assert!(write.ungranted(&m, &kinds).is_empty());
    }

    #[test]
    fn a_namespaced_parent_needs_a_grant_for_each_cluster_scoped_child_kind() {
        let kinds = KnownKinds::builtin();
        let role = Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole");
        let mut m = fixtures::memcached("");
        m.children.push(role.clone());
        assert_eq!(
            Grants::default().ungranted(&m, &kinds),
            ["writes the cluster-scoped rbac.authorization.k8s.io/v1/ClusterRole from a namespaced parent \
              (grant clusterScopedChildren: [rbac.authorization.k8s.io/v1/ClusterRole])"]
        );
        let granted = Grants { cluster_scoped_children: [role.clone()].into(), ..Grants::default() };
        assert!(granted.ungranted(&m, &kinds).is_empty());
        let other_version = Grants {
            cluster_scoped_children: [Kind::new("rbac.authorization.k8s.io", "v1beta1", "ClusterRole")].into(),
            ..Grants::default()
        };
        assert_eq!(other_version.ungranted(&m, &kinds).len(), 1, "a grant names the exact kind");
        assert!(Grants::default().ungranted(&m, &KnownKinds::default()).is_empty(), "an unknown scope is not judged here");
        m.scope = Scope::Cluster;
        assert!(Grants::default().ungranted(&m, &kinds).is_empty(), "cluster-scoped parents own cluster-scoped children");
    }

    #[test]
    fn policy_kinds_parse_as_kinds_display() {
        let role = parse_kind("rbac.authorization.k8s.io/v1/ClusterRole").unwrap();
        assert_eq!(role, Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole"));
        assert_eq!(parse_kind("v1/Namespace").unwrap(), Kind::new("", "v1", "Namespace"));
        for bad in ["ClusterRole", "rbac.authorization.k8s.io/ClusterRole/v1", "v1/namespace", "/v1/Namespace", "v1/"] {
            let err = parse_kind(bad).unwrap_err();
            assert!(err.starts_with(&format!("{bad:?} is not a kind: write group/version/Kind")), "{bad}: {err}");
        }
    }

    #[test]
    fn the_policy_file_grants_cluster_scoped_children_per_plugin() {
        let policy = crate::policy::HostPolicy::from_yaml(
            "plugins: {tenants: {grants: {clusterScopedChildren: [rbac.authorization.k8s.io/v1/ClusterRole, v1/Namespace]}}}",
        )
        .unwrap();
        let tenants = policy.for_plugin("tenants").grants;
        assert!(tenants.may_write_cluster_scoped(&Kind::new("", "v1", "Namespace")));
        assert!(tenants.may_write_cluster_scoped(&Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole")));
        assert!(policy.for_plugin("other").grants.cluster_scoped_children.is_empty());
        let err =
            crate::policy::HostPolicy::from_yaml("plugins: {a: {grants: {clusterScopedChildren: [ClusterRole]}}}").unwrap_err();
        assert!(
            err.to_string().starts_with("invalid policy: plugins.a.grants.clusterScopedChildren: \"ClusterRole\" is not a kind"),
            "{err}"
        );
    }
}
