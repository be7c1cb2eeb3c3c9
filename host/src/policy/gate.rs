//! The one gate: whether a plugin may write an object — apply, delete or prune it, or change
//! it through a mutating webhook — judged by its [`Grants`], whatever the path.
//!
//! [`Grants::may_write_kind_from`] judges a kind (start-up, `wasmop rbac`, webhook rules),
//! [`Grants::may_write`] adds where the object is, and [`Grants::may_write_object`] what it
//! is. The reconcile path (`actions::plan`, for `wasmop run` and `wasmop reconcile` alike),
//! [`Grants::ungranted`] and the webhook reach (`webhook_reach`) all call these.

use serde_json::Value;

use super::escalation::escalation_kind;
use super::grants::Grants;
use super::object_escalation::object_escalations;
use super::{host_access, host_objects, webhook_reach};
use crate::contract::{Kind, KindScopes, Manifest, Scope};

/// Where the parent of a write is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentScope<'a> {
    /// A namespaced parent, in this namespace.
    Namespaced(&'a str),
    /// A cluster-scoped parent.
    Cluster,
}

impl<'a> ParentScope<'a> {
    /// The scope of a parent in `namespace` (`None`: cluster-scoped).
    pub fn of(namespace: Option<&'a str>) -> Self {
        namespace.map_or(Self::Cluster, Self::Namespaced)
    }
}

/// Why the gate refuses a write. The messages complete a sentence that starts with the object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A Secret, without `secrets: write`.
    #[error("is of kind {kind}, which the host's policy does not grant to this plugin (grant secrets: write)")]
    Secrets {
        /// The kind.
        kind: String,
    },
    /// An escalation kind ([`super::ESCALATION_KINDS`]) the policy's `escalationKinds` does not name.
    #[error("is of kind {kind}, which {why}: the host's policy must name it (grant escalationKinds: [{kind}])")]
    Escalation {
        /// The kind.
        kind: String,
        /// What a writer of it can do.
        why: &'static str,
    },
    /// A cluster-scoped kind the policy's `clusterScopedChildren` does not name.
    #[error(
        "is of the cluster-scoped kind {kind}, which a plugin may write only when the host's policy grants it \
         (clusterScopedChildren)"
    )]
    ClusterScoped {
        /// The kind.
        kind: String,
    },
    /// A namespaced object in another namespace than the (namespaced) parent's.
    #[error("is in namespace {namespace:?}, outside the parent's namespace {parent_namespace:?}")]
    OtherNamespace {
        /// Its namespace.
        namespace: String,
        /// The parent's.
        parent_namespace: String,
    },
    /// A namespaced object of a cluster-scoped parent, in a namespace `writeNamespaces` does
    /// not grant (or without a namespace).
    #[error(
        "is in namespace {namespace:?}, which the host's policy does not grant a plugin with a cluster-scoped parent \
         (writeNamespaces)"
    )]
    NamespaceNotGranted {
        /// Its namespace (empty when it names none).
        namespace: String,
    },
    /// A cluster-scoped object that carries a namespace.
    #[error("carries namespace {namespace:?}, but {kind} is cluster-scoped")]
    NamespaceOnClusterScoped {
        /// The kind.
        kind: String,
        /// The namespace it carries.
        namespace: String,
    },
    /// One of the objects the host runs on (see [`super::host_object`]).
    #[error("is reserved for the host: {why}")]
    HostObject {
        /// Why.
        why: String,
    },
    /// An object whose content is an escalation ([`super::object_escalations`]: a
    /// service-account-token Secret, a Service with `externalIPs`) the policy's
    /// `escalationKinds` does not allow.
    #[error("is {what}, which {why}: the host's policy must allow it (grant escalationKinds: [{grant}])")]
    ObjectEscalation {
        /// What the object is.
        what: String,
        /// What its writer can do.
        why: &'static str,
        /// The kind `escalationKinds` must name.
        grant: String,
    },
    /// A Pod or workload template with host access, without `allowHostAccess: true`.
    #[error("asks for host access, which the host's policy does not grant (allowHostAccess): {}", .found.join("; "))]
    HostAccess {
        /// What it asks for ([`host_access::violations`]).
        found: Vec<String>,
    },
}

impl Grants {
    /// Whether a plugin whose parent is `parent` may write objects of `kind` (of `scope`,
    /// `None` when not known): the kind-level part of the gate, for start-up checks and
    /// webhook rules. Given the manifest declares it.
    ///
    /// # Errors
    /// The [`Refusal`]: a Secret without `secrets: write`; an escalation kind not named in
    /// `escalationKinds`; a cluster-scoped kind not named in `clusterScopedChildren`; a
    /// namespaced kind of a cluster-scoped parent without any `writeNamespaces`.
    pub fn may_write_kind_from(&self, kind: &Kind, scope: Option<Scope>, parent: ParentScope<'_>) -> Result<(), Refusal> {
        match self.kind_refusals(kind, scope, parent).into_iter().next() {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        }
    }

    /// Every refusal of [`Grants::may_write_kind_from`] for `kind`, in the order it checks them
    /// (so that a start-up check names every grant missing at once).
    pub fn kind_refusals(&self, kind: &Kind, scope: Option<Scope>, parent: ParentScope<'_>) -> Vec<Refusal> {
        let mut refusals = Vec::new();
        if !self.may_write_kind(kind) {
            refusals.push(Refusal::Secrets { kind: kind.to_string() });
        }
        match (scope, parent) {
            (Some(Scope::Cluster), _) if !self.may_write_cluster_scoped(kind) => {
                refusals.push(Refusal::ClusterScoped { kind: kind.to_string() });
            }
            (Some(Scope::Namespaced), ParentScope::Cluster) if !self.write_namespaces.grants_any() => {
                refusals.push(Refusal::NamespaceNotGranted { namespace: String::new() });
            }
            _ => {}
        }
        if let Some(e) = escalation_kind(&kind.group, &kind.kind)
            && !self.escalation_kinds.contains(kind)
        {
            refusals.push(Refusal::Escalation { kind: kind.to_string(), why: e.why });
        }
        refusals
    }

    /// Whether a plugin whose parent is `parent` may write an object of `kind` (of `scope`)
    /// in `namespace` (`None`: none given; a namespaced object of a namespaced parent is
    /// defaulted to the parent's namespace before this is asked).
    ///
    /// # Errors
    /// See [`Grants::may_write_kind_from`]; and a cluster-scoped object with a namespace, a
    /// namespaced object outside its namespaced parent's namespace, or — for a cluster-scoped
    /// parent — outside the namespaces `writeNamespaces` grants.
    pub fn may_write(&self, kind: &Kind, scope: Scope, namespace: Option<&str>, parent: ParentScope<'_>) -> Result<(), Refusal> {
        if let (Scope::Cluster, Some(ns)) = (scope, namespace) {
            return Err(Refusal::NamespaceOnClusterScoped { kind: kind.to_string(), namespace: ns.to_owned() });
        }
        // The namespace is judged below, by name.
        let kind_level = self.kind_refusals(kind, Some(scope), parent).into_iter();
        if let Some(refusal) = kind_level.into_iter().find(|r| !matches!(r, Refusal::NamespaceNotGranted { .. })) {
            return Err(refusal);
        }
        match (scope, parent, namespace) {
            (Scope::Namespaced, ParentScope::Namespaced(parent_ns), Some(ns)) if ns != parent_ns => {
                Err(Refusal::OtherNamespace { namespace: ns.to_owned(), parent_namespace: parent_ns.to_owned() })
            }
            (Scope::Namespaced, ParentScope::Cluster, ns) if !ns.is_some_and(|ns| self.write_namespaces.grants_write(ns)) => {
                Err(Refusal::NamespaceNotGranted { namespace: ns.unwrap_or_default().to_owned() })
            }
            _ => Ok(()),
        }
    }

    /// Whether the plugin may write `object` (of `kind`, named `name`; its content when it is
    /// applied, `None` for a delete): not one of the host's own objects, no escalation in its
    /// content ([`super::object_escalations`]) unless `escalationKinds` allows it, and no host
    /// access unless `allowHostAccess` is granted.
    ///
    /// # Errors
    /// [`Refusal::HostObject`], [`Refusal::ObjectEscalation`] or [`Refusal::HostAccess`].
    pub fn may_write_object(&self, kind: &Kind, name: &str, object: Option<&Value>) -> Result<(), Refusal> {
        self.may_change_object(kind, name, None, object)
    }

    /// [`Grants::may_write_object`] for a write that changes `before` (of a mutating webhook:
    /// the object as admitted) into `after`: the content checks refuse only what the change
    /// adds or changes — an object admitted on UPDATE carries what it already had (an already
    /// scheduled Pod its `nodeName`), which is not the plugin's doing. `before: None` judges all
    /// of `after`. The host's own objects are refused whatever changed.
    ///
    /// # Errors
    /// As [`Grants::may_write_object`].
    pub fn may_change_object(
        &self,
        kind: &Kind,
        name: &str,
        before: Option<&Value>,
        after: Option<&Value>,
    ) -> Result<(), Refusal> {
        if let Some(why) = host_objects::host_object(kind, name, after) {
            return Err(Refusal::HostObject { why });
        }
        let Some(after) = after else { return Ok(()) };
        let had = before.map(|b| object_escalations(kind, b)).unwrap_or_default();
        let escalation =
            object_escalations(kind, after).into_iter().find(|e| !had.contains(e) && !self.escalation_kinds.contains(&e.grant));
        if let Some(e) = escalation {
            return Err(Refusal::ObjectEscalation { what: e.what, why: e.why, grant: e.grant.to_string() });
        }
        let found = host_access::added_violations(kind, before, after);
        if !found.is_empty() && !self.allow_host_access {
            return Err(Refusal::HostAccess { found });
        }
        Ok(())
    }

    /// What `manifest` declares that these grants do not cover, one line per item; empty when
    /// the plugin may run. A plugin with ungranted declarations is not started: its watches
    /// would need RBAC the host does not (and should not) have.
    ///
    /// Each child kind is judged by the gate ([`Grants::may_write_kind_from`]); the parent
    /// kind, whose status and finalizers the plugin writes, too, but for its scope. Every
    /// resource its webhooks' rules match must be declared or granted (see
    /// [`super::webhook_reach`]).
    ///
    /// Kinds are scoped by `scopes`; a child kind whose scope `scopes` does not know is judged
    /// without it (the host resolves every kind by discovery before calling this; offline
    /// callers say which kinds they could not tell).
    pub fn ungranted(&self, manifest: &Manifest, scopes: &dyn KindScopes) -> Vec<String> {
        let mut missing = Vec::new();
        let parent = match manifest.scope {
            Scope::Namespaced => ParentScope::Namespaced(""),
            Scope::Cluster => ParentScope::Cluster,
        };
        for child in &manifest.children {
            for refusal in self.kind_refusals(child, scopes.scope_of(child), parent) {
                missing.push(format!("writes {}", writes_hint(child, &refusal, manifest.scope)));
            }
        }
        let read_only = manifest.related.iter().map(|r| &r.kind).filter(|k| !manifest.children.contains(k));
        for kind in read_only.filter(|k| !self.may_read_kind(k)) {
            missing.push(format!("reads {kind} (grant secrets: read)"));
        }
        if !self.may_read_kind(&manifest.parent) {
            missing.push(format!("reconciles {} (grant secrets: write)", manifest.parent));
        } else if let Err(Refusal::Escalation { why, .. }) = self.may_write_kind_from(&manifest.parent, None, parent) {
            let kind = &manifest.parent;
            missing.push(format!("reconciles {kind}, which {why} (grant escalationKinds: [{kind}])"));
        }
        missing.extend(webhook_reach::uncovered(self, manifest, scopes));
        missing
    }
}

/// What the start-up check says of a child kind the gate refuses: the kind and the grant.
fn writes_hint(child: &Kind, refusal: &Refusal, parent: Scope) -> String {
    match (refusal, parent) {
        (Refusal::Secrets { .. }, _) => format!("{child} (grant secrets: write)"),
        (Refusal::ClusterScoped { .. }, Scope::Namespaced) => {
            format!("the cluster-scoped {child} from a namespaced parent (grant clusterScopedChildren: [{child}])")
        }
        (Refusal::ClusterScoped { .. }, Scope::Cluster) => {
            format!("the cluster-scoped {child} (grant clusterScopedChildren: [{child}])")
        }
        (Refusal::NamespaceNotGranted { .. }, _) => {
            format!(
                "the namespaced {child} from a cluster-scoped parent, in no namespace granted (grant writeNamespaces: [NAMESPACE, ...])"
            )
        }
        (Refusal::Escalation { why, .. }, _) => format!("{child}, which {why} (grant escalationKinds: [{child}])"),
        (refusal, _) => format!("{child}, which {refusal}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::policy::{NamespaceGrant, SecretAccess};

    fn config_map() -> Kind {
        Kind::new("", "v1", "ConfigMap")
    }

    fn binding() -> Kind {
        Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding")
    }

    fn write_into(names: &[&str]) -> Grants {
        Grants {
            write_namespaces: NamespaceGrant::from_list(names.iter().map(|n| (*n).to_owned()).collect()),
            ..Grants::default()
        }
    }

    #[test]
    fn a_cluster_scoped_parent_writes_namespaced_objects_only_where_granted() {
        let none = Grants::default();
        let err = none.may_write(&config_map(), Scope::Namespaced, Some("kube-system"), ParentScope::Cluster).unwrap_err();
        assert_eq!(
            err.to_string(),
            "is in namespace \"kube-system\", which the host's policy does not grant a plugin with a cluster-scoped parent \
             (writeNamespaces)"
        );
        let tenants = write_into(&["tenant-a"]);
        tenants.may_write(&config_map(), Scope::Namespaced, Some("tenant-a"), ParentScope::Cluster).unwrap();
        assert!(tenants.may_write(&config_map(), Scope::Namespaced, Some("kube-system"), ParentScope::Cluster).is_err());
        assert!(tenants.may_write(&config_map(), Scope::Namespaced, None, ParentScope::Cluster).is_err());
        let all = write_into(&["*"]);
        all.may_write(&config_map(), Scope::Namespaced, Some("tenant-b"), ParentScope::Cluster).unwrap();
        for system in ["kube-system", "kube-public", "kube-node-lease"] {
            assert!(
                all.may_write(&config_map(), Scope::Namespaced, Some(system), ParentScope::Cluster).is_err(),
                "\"*\" does not reach {system}"
            );
        }
        write_into(&["*", "kube-system"])
            .may_write(&config_map(), Scope::Namespaced, Some("kube-system"), ParentScope::Cluster)
            .unwrap();
    }

    #[test]
    fn a_cluster_scoped_parent_needs_the_grant_for_cluster_scoped_kinds_too() {
        let ns_kind = Kind::new("example.com", "v1", "Tenant");
        let err = Grants::default().may_write(&ns_kind, Scope::Cluster, None, ParentScope::Cluster).unwrap_err();
        assert!(matches!(err, Refusal::ClusterScoped { .. }), "{err}");
        let granted = Grants { cluster_scoped_children: [ns_kind.clone()].into(), ..Grants::default() };
        granted.may_write(&ns_kind, Scope::Cluster, None, ParentScope::Cluster).unwrap();
    }

    #[test]
    fn escalation_kinds_need_a_grant_naming_them_besides_the_scope_grant() {
        let scoped = Grants { cluster_scoped_children: [binding()].into(), ..Grants::default() };
        let err = scoped.may_write(&binding(), Scope::Cluster, None, ParentScope::Cluster).unwrap_err();
        assert_eq!(
            err.to_string(),
            "is of kind rbac.authorization.k8s.io/v1/ClusterRoleBinding, which grants rights: the host's policy must name it \
             (grant escalationKinds: [rbac.authorization.k8s.io/v1/ClusterRoleBinding])"
        );
        let named = Grants { escalation_kinds: [binding()].into(), ..scoped };
        named.may_write(&binding(), Scope::Cluster, None, ParentScope::Cluster).unwrap();
        let role_binding = Kind::new("rbac.authorization.k8s.io", "v1", "RoleBinding");
        assert!(matches!(
            Grants::default().may_write(&role_binding, Scope::Namespaced, Some("ns"), ParentScope::Namespaced("ns")),
            Err(Refusal::Escalation { .. })
        ));
    }

    #[test]
    fn the_hosts_own_role_is_never_bound_even_when_bindings_are_granted() {
        let granted =
            Grants { escalation_kinds: [binding()].into(), cluster_scoped_children: [binding()].into(), ..Grants::default() };
        let to_host = json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "wasmop"},
            "subjects": [{"kind": "Group", "name": "system:authenticated"}]});
        let err = granted.may_write_object(&binding(), "everyone", Some(&to_host)).unwrap_err();
        assert_eq!(err.to_string(), "is reserved for the host: it binds the host's own role \"wasmop\"");
        let to_view = json!({"roleRef": {"kind": "ClusterRole", "name": "view"}});
        granted.may_write_object(&binding(), "viewers", Some(&to_view)).unwrap();
        assert!(granted.may_write_object(&binding(), "wasmop", None).is_err(), "nor deleted or rewritten by name");
    }

    #[test]
    fn a_service_account_token_secret_needs_the_token_request_grant() {
        let secret = Kind::new("", "v1", "Secret");
        let token = json!({"type": "kubernetes.io/service-account-token",
            "metadata": {"annotations": {"kubernetes.io/service-account.name": "builder"}}});
        let write = Grants { secrets: SecretAccess::Write, ..Grants::default() };
        let err = write.may_write_object(&secret, "t", Some(&token)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "is a Secret of type kubernetes.io/service-account-token (for ServiceAccount \"builder\"), which mints \
             credentials: the host's policy must allow it (grant escalationKinds: [authentication.k8s.io/v1/TokenRequest])"
        );
        let tokens = Grants { escalation_kinds: [Kind::new("authentication.k8s.io", "v1", "TokenRequest")].into(), ..write };
        tokens.may_write_object(&secret, "t", Some(&token)).unwrap();
    }

    #[test]
    fn a_service_with_external_ips_needs_the_service_named_in_escalation_kinds() {
        let service = Kind::new("", "v1", "Service");
        let intercept = json!({"spec": {"ports": [{"port": 443}], "externalIPs": ["10.96.0.1"]}});
        let err = Grants::default().may_write_object(&service, "s", Some(&intercept)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "is a Service with spec.externalIPs 10.96.0.1, which intercepts the traffic of every Pod and node to those \
             addresses, cluster-wide: the host's policy must allow it (grant escalationKinds: [v1/Service])"
        );
        let plain = json!({"spec": {"ports": [{"port": 443}]}});
        Grants::default().may_write_object(&service, "s", Some(&plain)).unwrap();
        Grants::default().may_write_object(&service, "s", None).unwrap();
        let granted = Grants { escalation_kinds: [service.clone()].into(), ..Grants::default() };
        granted.may_write_object(&service, "s", Some(&intercept)).unwrap();
    }

    #[test]
    fn a_change_is_refused_only_for_the_escalation_and_host_access_it_adds() {
        let service = Kind::new("", "v1", "Service");
        let intercept = json!({"spec": {"externalIPs": ["10.96.0.1"]}});
        let relabelled = json!({"metadata": {"labels": {"a": "b"}}, "spec": {"externalIPs": ["10.96.0.1"]}});
        let none = Grants::default();
        none.may_change_object(&service, "s", Some(&intercept), Some(&relabelled)).unwrap();
        let moved = json!({"spec": {"externalIPs": ["10.96.0.1", "169.254.169.254"]}});
        assert!(matches!(
            none.may_change_object(&service, "s", Some(&intercept), Some(&moved)),
            Err(Refusal::ObjectEscalation { .. })
        ));
        let pod = Kind::new("", "v1", "Pod");
        let scheduled = json!({"spec": {"nodeName": "node-1", "containers": [{"name": "c"}]}});
        let sidecar = json!({"spec": {"nodeName": "node-1", "containers": [{"name": "c"}, {"name": "log"}]}});
        none.may_change_object(&pod, "p", Some(&scheduled), Some(&sidecar)).unwrap();
        let err = none.may_change_object(&pod, "p", None, Some(&scheduled)).unwrap_err();
        assert!(err.to_string().contains("spec.nodeName \"node-1\" binds it to a node"), "{err}");
        let wasmop = Kind::new("coordination.k8s.io", "v1", "Lease");
        assert!(none.may_change_object(&wasmop, "wasmop", Some(&json!({})), Some(&json!({}))).is_err());
    }

    #[test]
    fn host_access_needs_allow_host_access() {
        let deployment = Kind::new("apps", "v1", "Deployment");
        let root = json!({"spec": {"template": {"spec": {"volumes": [{"name": "root", "hostPath": {"path": "/"}}],
            "containers": [{"name": "c"}]}}}});
        let err = Grants::default().may_write_object(&deployment, "d", Some(&root)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "asks for host access, which the host's policy does not grant (allowHostAccess): \
             spec.template.spec.volumes[0] (root) mounts the host path \"/\""
        );
        Grants { allow_host_access: true, ..Grants::default() }.may_write_object(&deployment, "d", Some(&root)).unwrap();
    }

    #[test]
    fn secrets_cluster_scoped_namespaces_and_other_namespaces_keep_their_rules() {
        let secret = Kind::new("", "v1", "Secret");
        let ns = ParentScope::Namespaced("ns");
        assert!(matches!(Grants::default().may_write(&secret, Scope::Namespaced, Some("ns"), ns), Err(Refusal::Secrets { .. })));
        let write = Grants { secrets: SecretAccess::Write, ..Grants::default() };
        write.may_write(&secret, Scope::Namespaced, Some("ns"), ns).unwrap();
        let all = Grants { namespaces: NamespaceGrant::All, write_namespaces: NamespaceGrant::All, ..Grants::default() };
        assert!(matches!(
            all.may_write(&config_map(), Scope::Namespaced, Some("other"), ns),
            Err(Refusal::OtherNamespace { .. })
        ));
        let role = Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole");
        let granted = Grants { cluster_scoped_children: [role.clone()].into(), ..Grants::default() };
        assert!(matches!(
            granted.may_write(&role, Scope::Cluster, Some("ns"), ns),
            Err(Refusal::NamespaceOnClusterScoped { .. })
        ));
    }
}
