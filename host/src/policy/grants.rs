//! [`Grants`]: capabilities beyond what a plugin's manifest alone may have.
//!
//! A manifest says what a plugin *wants*; grants say what the host's operator *allows* on top
//! of the safe baseline. Without grants a plugin reads and writes only the kinds it declares,
//! only in its parent's namespace (namespaced parents) — a plugin with a cluster-scoped parent
//! writes in no namespace at all —, never Secrets, never cluster-scoped kinds, never an
//! escalation kind ([`super::ESCALATION_KINDS`]), never a Pod (template) with host access,
//! never adopts an object nobody controls, and never touches the host's own objects (not even
//! when granted); its admission webhooks validate only the kinds it declares and mutate only
//! its parent and child kinds (see [`super::webhook_reach`]). The checks are in
//! [`super::gate`].

use std::collections::BTreeSet;

use serde::Deserialize;

use super::webhook_resources::WebhookResources;
use crate::contract::Kind;

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

/// Namespaces beyond the parent's: for reads, those a namespaced plugin may read from
/// ([`Grants::namespaces`]); for writes, those a plugin with a cluster-scoped parent may write
/// into ([`Grants::write_namespaces`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum NamespaceGrant {
    /// Only the parent's namespace (the default).
    #[default]
    ParentOnly,
    /// The parent's namespace and these.
    Also(BTreeSet<String>),
    /// Every namespace (`"*"` in the policy file). For writes, every namespace but the
    /// [`SYSTEM_NAMESPACES`], which a grant must name.
    All,
    /// `"*"` and these system namespaces, named (for writes, every namespace then).
    AllAnd(BTreeSet<String>),
}

/// The namespaces of Kubernetes itself: `"*"` in `writeNamespaces` does not reach them.
pub const SYSTEM_NAMESPACES: &[&str] = &["kube-system", "kube-public", "kube-node-lease"];

impl NamespaceGrant {
    /// The grant a policy file's list describes: `["*"]` is every namespace.
    pub fn from_list(names: Vec<String>) -> Self {
        if names.iter().any(|n| n == "*") {
            match names.iter().filter(|n| SYSTEM_NAMESPACES.contains(&n.as_str())).count() {
                0 => Self::All,
                // `"*"` plus named system namespaces: read grants see all the same; write
                // grants keep the system namespaces named.
                _ => Self::AllAnd(names.into_iter().filter(|n| n != "*").collect()),
            }
        } else if names.is_empty() {
            Self::ParentOnly
        } else {
            Self::Also(names.into_iter().collect())
        }
    }

    /// Whether, as a write grant, this covers namespace `ns`: named, or (but for the
    /// [`SYSTEM_NAMESPACES`]) every namespace. A list naming `"*"` and `kube-system` covers both.
    pub fn grants_write(&self, ns: &str) -> bool {
        match self {
            Self::ParentOnly => false,
            Self::Also(names) => names.contains(ns),
            Self::All => !SYSTEM_NAMESPACES.contains(&ns),
            Self::AllAnd(named) => !SYSTEM_NAMESPACES.contains(&ns) || named.contains(ns),
        }
    }

    /// Whether, as a write grant, this covers any namespace.
    pub fn grants_any(&self) -> bool {
        *self != Self::ParentOnly
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
    /// Namespaces a plugin whose parent is cluster-scoped may write namespaced objects into
    /// (`writeNamespaces` in the policy file; `["*"]` is every namespace but the
    /// [`SYSTEM_NAMESPACES`], which must be named). Without it such a plugin writes no
    /// namespaced object at all, and one that declares a namespaced child kind is not started.
    ///
    /// # Caveats
    /// A namespaced parent's plugin writes only in its parent's namespace, whatever this says:
    /// Kubernetes does not allow an owner reference to cross namespaces.
    pub write_namespaces: NamespaceGrant,
    /// Access to Secrets.
    pub secrets: SecretAccess,
    /// Escalation kinds ([`super::ESCALATION_KINDS`]: RBAC, admission configurations and
    /// policies, CRDs, APIServices, Namespaces, Nodes, PersistentVolumes, StorageClasses,
    /// TokenRequests, CertificateSigningRequests, Leases, Endpoints, EndpointSlices,
    /// PriorityClasses, RuntimeClasses) the plugin may declare and write, and its webhooks
    /// mutate or validate (`escalationKinds` in the policy file), by exact group, version and
    /// kind. A cluster-scoped one needs `clusterScopedChildren` as well.
    ///
    /// It also allows the escalations in an object's content ([`super::object_escalations`]):
    /// `authentication.k8s.io/v1/TokenRequest` a Secret of type
    /// `kubernetes.io/service-account-token`, `v1/Service` a Service with `externalIPs`.
    ///
    /// # Caveats
    /// Even so, the host's own objects are never written, and no binding to the host's roles
    /// (see [`super::host_object`]).
    pub escalation_kinds: BTreeSet<Kind>,
    /// Whether the plugin may write Pods and workload templates with host access: what the
    /// Pod Security Standards' baseline profile forbids — host namespaces, `hostPath` volumes,
    /// host ports, privileged containers, capabilities beyond the default set, an unmasked
    /// `/proc`, seccomp or AppArmor unconfined, SELinux labels beyond the container types,
    /// unsafe sysctls, Windows host processes — and a `nodeName` (`allowHostAccess` in the
    /// policy file; see [`super::host_access`]).
    pub allow_host_access: bool,
    /// Whether the plugin's manifest's `adoptUnowned` takes effect (`adoptUnowned` in the
    /// policy file): without it the plugin never takes over an object nobody controls.
    ///
    /// # Caveats
    /// Adopted objects are pruned and deleted like any child. The host's own objects are never
    /// adopted.
    pub adopt_unowned: bool,
    /// Cluster-scoped kinds a plugin may declare as children and write, whatever its parent's
    /// scope (`clusterScopedChildren` in the policy file), by exact group, version and kind.
    ///
    /// # Caveats
    /// Such a child cannot have an owner reference (Kubernetes does not let a cluster-scoped
    /// object be owned by a namespaced one): the host labels it with the parent's uid instead
    /// (see [`crate::actions::PARENT_UID_LABEL`]), and nothing garbage-collects it when the
    /// parent goes; the plugin deletes it (with `finalizer: true`, in its finalizing call).
    /// Objects of that kind are not among the plugin's observed children, so pruning does not
    /// reach them either. Children of a cluster-scoped parent are owned as usual.
    pub cluster_scoped_children: BTreeSet<Kind>,
    /// Resources the plugin's admission webhooks may admit beyond the kinds its manifest
    /// declares (`webhookResources` in the policy file), each to validate (veto) or to mutate.
    ///
    /// # Caveats
    /// The API server sends a webhook every matching object in every namespace, before any
    /// other check: granting `pods` lets the plugin see (and veto) every Pod created in the
    /// cluster, and `{resource: pods, mode: mutate}` change every one of them.
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
            (None, _) | (_, NamespaceGrant::All | NamespaceGrant::AllAnd(_)) => true,
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

    /// Whether a plugin may write objects of the cluster-scoped `kind` (given the manifest
    /// declares it as a child).
    pub fn may_write_cluster_scoped(&self, kind: &Kind) -> bool {
        self.cluster_scoped_children.contains(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::manifest::fixtures;
    use crate::contract::{KnownKinds, Manifest, Scope};

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
            [
                "writes the cluster-scoped rbac.authorization.k8s.io/v1/ClusterRole from a namespaced parent \
                 (grant clusterScopedChildren: [rbac.authorization.k8s.io/v1/ClusterRole])",
                "writes rbac.authorization.k8s.io/v1/ClusterRole, which grants rights \
                 (grant escalationKinds: [rbac.authorization.k8s.io/v1/ClusterRole])",
            ]
        );
        let granted = Grants {
            cluster_scoped_children: [role.clone()].into(),
            escalation_kinds: [role.clone()].into(),
            ..Grants::default()
        };
        assert!(granted.ungranted(&m, &kinds).is_empty());
        let other_version = Grants {
            cluster_scoped_children: [Kind::new("rbac.authorization.k8s.io", "v1beta1", "ClusterRole")].into(),
            escalation_kinds: [role.clone()].into(),
            ..Grants::default()
        };
        assert_eq!(other_version.ungranted(&m, &kinds).len(), 1, "a grant names the exact kind");
        assert_eq!(Grants::default().ungranted(&m, &KnownKinds::default()).len(), 1, "an unknown scope is not judged here");
        m.scope = Scope::Cluster;
        assert_eq!(
            Grants::default().ungranted(&m, &kinds)[1],
            "writes the cluster-scoped rbac.authorization.k8s.io/v1/ClusterRole (grant clusterScopedChildren: \
             [rbac.authorization.k8s.io/v1/ClusterRole])",
            "cluster-scoped parents need the grant too"
        );
    }

    #[test]
    fn a_cluster_scoped_parent_declaring_namespaced_children_needs_write_namespaces() {
        let kinds = KnownKinds::builtin();
        let m = Manifest { scope: Scope::Cluster, ..fixtures::memcached("") };
        assert_eq!(
            Grants::default().ungranted(&m, &kinds),
            ["writes the namespaced apps/v1/Deployment from a cluster-scoped parent, in no namespace granted \
              (grant writeNamespaces: [NAMESPACE, ...])"]
        );
        let granted = Grants { write_namespaces: NamespaceGrant::from_list(vec!["tenant".into()]), ..Grants::default() };
        assert!(granted.ungranted(&m, &kinds).is_empty());
    }

    #[test]
    fn a_parent_of_an_escalation_kind_needs_it_named() {
        let kinds = KnownKinds::builtin();
        let namespace = Kind::new("", "v1", "Namespace");
        let m = Manifest { parent: namespace.clone(), scope: Scope::Cluster, children: vec![], ..fixtures::memcached("") };
        assert_eq!(
            Grants::default().ungranted(&m, &kinds),
            ["reconciles v1/Namespace, which creates and deletes whole namespaces (grant escalationKinds: [v1/Namespace])"]
        );
        assert!(Grants { escalation_kinds: [namespace].into(), ..Grants::default() }.ungranted(&m, &kinds).is_empty());
    }

    #[test]
    fn write_namespaces_star_leaves_the_system_namespaces_out_unless_named() {
        let all = NamespaceGrant::from_list(vec!["*".into()]);
        assert!(all.grants_write("tenant") && !all.grants_write("kube-system") && !all.grants_write("kube-node-lease"));
        let with_system = NamespaceGrant::from_list(vec!["*".into(), "kube-system".into()]);
        assert!(with_system.grants_write("tenant") && with_system.grants_write("kube-system"));
        assert!(!with_system.grants_write("kube-public"));
        assert!(Grants { namespaces: with_system, ..Grants::default() }.may_read_namespace("kube-public", Some("a")));
        assert!(!NamespaceGrant::ParentOnly.grants_any() && !NamespaceGrant::ParentOnly.grants_write("a"));
    }

    #[test]
    fn the_policy_file_grants_escalation_host_access_adoption_and_write_namespaces() {
        let policy = crate::policy::HostPolicy::from_yaml(
            "plugins: {ops: {grants: {escalationKinds: [rbac.authorization.k8s.io/v1/RoleBinding], allowHostAccess: true, \
             adoptUnowned: true, writeNamespaces: [tenant], webhookResources: [deployments.apps, {resource: pods, mode: mutate}]}}}",
        )
        .unwrap();
        let ops = policy.for_plugin("ops").grants;
        assert!(ops.escalation_kinds.contains(&Kind::new("rbac.authorization.k8s.io", "v1", "RoleBinding")));
        assert!(ops.allow_host_access && ops.adopt_unowned && ops.write_namespaces.grants_write("tenant"));
        use crate::policy::WebhookMode;
        assert!(ops.webhook_resources.covers("", "pods", WebhookMode::Mutate));
        assert!(ops.webhook_resources.covers("apps", "deployments", WebhookMode::Validate));
        assert!(!ops.webhook_resources.covers("apps", "deployments", WebhookMode::Mutate), "a plain entry is validate");
        let other = policy.for_plugin("other").grants;
        assert!(!other.allow_host_access && !other.adopt_unowned && other.escalation_kinds.is_empty());
        let err = crate::policy::HostPolicy::from_yaml("plugins: {a: {grants: {escalationKinds: [v1/ConfigMap]}}}").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid policy: plugins.a.grants.escalationKinds: v1/ConfigMap is not an escalation kind (see docs/security.md)"
        );
        let err =
            crate::policy::HostPolicy::from_yaml("plugins: {a: {grants: {webhookResources: [{resource: pods, mode: all}]}}}");
        assert!(err.is_err());
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
