//! Scope checks: a response may only touch what the manifest declares, where it may.

use serde_json::Value;

use crate::contract::{Kind, KindScopes, Manifest, ObjectRef, Response, Scope};
use crate::objects::{name_of, namespace_of};
use crate::policy::{Grants, ParentScope, Refusal};

/// The label a cluster-scoped child of a namespaced parent carries instead of an owner
/// reference (which Kubernetes does not allow there): the parent's uid. Such a child belongs to
/// the parent whose uid this label names; it is not garbage-collected with it.
pub const PARENT_UID_LABEL: &str = "wasmop.dev/parent-uid";
/// The annotation naming that parent for people: `<apiVersion>/<Kind> <namespace>/<name>`.
pub const PARENT_ANNOTATION: &str = "wasmop.dev/parent";

/// Why a response was refused. Nothing of a refused response is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// A child or delete names a kind the manifest does not declare as a child.
    #[error("{object} is of kind {kind}, which the plugin does not declare as a child")]
    UndeclaredKind {
        /// The object.
        object: String,
        /// Its kind.
        kind: String,
    },
    /// The host's gate ([`Grants::may_write`], [`Grants::may_write_object`]) refuses a child
    /// or delete: a kind, a namespace or an object the host's policy does not grant.
    #[error("{object} {refusal}")]
    Refused {
        /// The object.
        object: String,
        /// Why.
        refusal: Refusal,
    },
    /// The scope of the kind is not known, so where the object would land cannot be checked.
    /// Online every declared kind is resolved before the plugin starts, so this means a bug or
    /// an offline run without the kind's CRD.
    #[error("{object} is of kind {kind}, whose scope (namespaced or cluster) is unknown")]
    UnknownScope {
        /// The object.
        object: String,
        /// Its kind.
        kind: String,
    },
}

impl ScopeError {
    /// The object refused.
    pub fn object(&self) -> &str {
        match self {
            Self::UndeclaredKind { object, .. } | Self::Refused { object, .. } | Self::UnknownScope { object, .. } => object,
        }
    }

    /// CamelCase reason for events and conditions.
    pub fn reason(&self) -> &'static str {
        "ActionRefused"
    }

    /// The gate's refusal, when it is one.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            Self::Refused { refusal, .. } => Some(refusal),
            _ => None,
        }
    }
}

/// Check every child and delete of `response` against `manifest`, `grants` and the kinds'
/// scopes (`scopes`: discovery online, [`crate::contract::KnownKinds`] offline). Then default
/// each namespaced child's namespace to the parent's (namespaced parents), and label each
/// granted cluster-scoped child of a namespaced parent with [`PARENT_UID_LABEL`] and
/// [`PARENT_ANNOTATION`] (it gets no owner reference).
///
/// Each is judged by the host's one gate: [`Grants::may_write`] (kind, namespace, parent's
/// scope) and [`Grants::may_write_object`] (the host's own objects, host access).
///
/// # Errors
/// The first [`ScopeError`]; the response must then be dropped whole.
pub fn check(
    manifest: &Manifest,
    grants: &Grants,
    scopes: &dyn KindScopes,
    parent: &Value,
    response: &mut Response,
) -> Result<(), ScopeError> {
    let parent_ns = match manifest.scope {
        Scope::Namespaced => namespace_of(parent).map(str::to_owned),
        Scope::Cluster => None,
    };
    let parent_ns = parent_ns.as_deref();
    for child in &mut response.children {
        let r = ObjectRef::of_object(child).expect("validated responses have identity");
        let ns = defaulted(manifest, scopes, &r.kind(), r.namespace.as_deref(), parent_ns);
        let scope = check_one(manifest, grants, scopes, parent_ns, &r.kind(), ns, &r.to_string())?;
        grants
            .may_write_object(&r.kind(), &r.name, Some(child))
            .map_err(|refusal| ScopeError::Refused { object: r.to_string(), refusal })?;
        match (scope, parent_ns) {
            (Scope::Namespaced, Some(ns)) if r.namespace.is_none() => child["metadata"]["namespace"] = ns.into(),
            (Scope::Cluster, Some(ns)) => label_with_parent(child, parent, ns),
            _ => {}
        }
    }
    for d in &mut response.delete {
        let ns = defaulted(manifest, scopes, &d.kind(), d.namespace.as_deref(), parent_ns).map(str::to_owned);
        let scope = check_one(manifest, grants, scopes, parent_ns, &d.kind(), ns.as_deref(), &d.to_string())?;
        grants
            .may_write_object(&d.kind(), &d.name, None)
            .map_err(|refusal| ScopeError::Refused { object: d.to_string(), refusal })?;
        if scope == Scope::Namespaced && d.namespace.is_none() {
            d.namespace = parent_ns.map(str::to_owned);
        }
    }
    Ok(())
}

/// The namespace an object will be written in: its own, or for a namespaced kind of a
/// namespaced parent the parent's.
fn defaulted<'a>(
    manifest: &Manifest,
    scopes: &dyn KindScopes,
    kind: &Kind,
    ns: Option<&'a str>,
    parent_ns: Option<&'a str>,
) -> Option<&'a str> {
    let namespaced = manifest.may_write(kind) && scopes.scope_of(kind) == Some(Scope::Namespaced);
    ns.or(parent_ns.filter(|_| namespaced))
}

/// Whether one object of `kind` in `ns` may be written (applied or deleted) by the plugin;
/// its kind's scope when it may. `parent_ns` is `None` for a cluster-scoped parent.
fn check_one(
    manifest: &Manifest,
    grants: &Grants,
    scopes: &dyn KindScopes,
    parent_ns: Option<&str>,
    kind: &Kind,
    ns: Option<&str>,
    what: &str,
) -> Result<Scope, ScopeError> {
    let (object, kind_name) = (|| what.to_owned(), || kind.to_string());
    if !manifest.may_write(kind) {
        return Err(ScopeError::UndeclaredKind { object: object(), kind: kind_name() });
    }
    let scope = scopes.scope_of(kind).ok_or_else(|| ScopeError::UnknownScope { object: object(), kind: kind_name() })?;
    grants
        .may_write(kind, scope, ns, ParentScope::of(parent_ns))
        .map_err(|refusal| ScopeError::Refused { object: object(), refusal })?;
    Ok(scope)
}

/// Name the namespaced `parent` (in `parent_ns`) on a cluster-scoped child: its uid as a label,
/// kind and name as an annotation. Replaces whatever the plugin wrote under those keys.
fn label_with_parent(child: &mut Value, parent: &Value, parent_ns: &str) {
    let uid = parent.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
    let kind = Kind::of_object(parent).map(|k| k.to_string()).unwrap_or_default();
    let described = format!("{kind} {parent_ns}/{}", name_of(parent).unwrap_or_default());
    for (field, key, value) in [("labels", PARENT_UID_LABEL, uid.to_owned()), ("annotations", PARENT_ANNOTATION, described)] {
        let map = &mut child["metadata"][field];
        if !map.is_object() {
            *map = Value::Object(serde_json::Map::new());
        }
        map[key] = Value::String(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::KnownKinds;
    use serde_json::json;

    fn manifest() -> Manifest {
        Manifest {
            name: "t".into(),
            version: "0.1.0".into(),
            description: String::new(),
            parent: Kind::new("x.io", "v1", "P"),
            scope: Scope::Namespaced,
            children: vec![Kind::new("", "v1", "ConfigMap")],
            related: vec![],
            finalizer: false,
            prune: false,
            adopt_unowned: false,
            config_schema: None,
            webhooks: Vec::new(),
        }
    }

    fn parent() -> Value {
        json!({"apiVersion": "x.io/v1", "kind": "P", "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"}})
    }

    fn kinds() -> KnownKinds {
        KnownKinds::builtin()
    }

    fn cluster_role() -> Kind {
        Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole")
    }

    fn role_granted() -> Grants {
        Grants {
            cluster_scoped_children: [cluster_role()].into(),
            escalation_kinds: [cluster_role()].into(),
            ..Grants::default()
        }
    }

    fn with_cluster_role(mut m: Manifest) -> Manifest {
        m.children.push(cluster_role());
        m
    }

    fn role_child(metadata: Value) -> Response {
        response(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": metadata}))
    }

    fn role_delete() -> Response {
        let r = ObjectRef {
            api_version: "rbac.authorization.k8s.io/v1".into(),
            kind: "ClusterRole".into(),
            namespace: None,
            name: "admin".into(),
        };
        Response { delete: vec![r], ..Default::default() }
    }

    fn response(child: Value) -> Response {
        Response { children: vec![child], ..Default::default() }
    }

    #[test]
    fn children_default_to_the_parent_namespace() {
        let mut r = response(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}));
        check(&manifest(), &Grants::default(), &kinds(), &parent(), &mut r).unwrap();
        assert_eq!(r.children[0]["metadata"]["namespace"], "ns");
    }

    #[test]
    fn another_namespace_is_refused() {
        let mut r =
            response(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "kube-system"}}));
        let err = check(&manifest(), &Grants::default(), &kinds(), &parent(), &mut r).unwrap_err();
        assert!(matches!(err.refusal(), Some(Refusal::OtherNamespace { .. })));
        assert_eq!(
            err.to_string(),
            "v1/ConfigMap kube-system/c is in namespace \"kube-system\", outside the parent's namespace \"ns\""
        );
    }

    #[test]
    fn undeclared_kinds_are_refused() {
        let mut r = response(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c"}}));
        assert!(matches!(
            check(&manifest(), &Grants::default(), &kinds(), &parent(), &mut r),
            Err(ScopeError::UndeclaredKind { .. })
        ));
        let mut r = Response {
            delete: vec![ObjectRef { api_version: "v1".into(), kind: "Secret".into(), namespace: None, name: "s".into() }],
            ..Default::default()
        };
        assert!(matches!(
            check(&manifest(), &Grants::default(), &kinds(), &parent(), &mut r),
            Err(ScopeError::UndeclaredKind { .. })
        ));
    }

    #[test]
    fn declared_secrets_need_a_write_grant() {
        let mut m = manifest();
        m.children.push(Kind::new("", "v1", "Secret"));
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
        let err = check(&m, &Grants::default(), &kinds(), &parent(), &mut response(secret.clone())).unwrap_err();
        assert!(matches!(err.refusal(), Some(Refusal::Secrets { .. })), "{err}");
        let write = Grants { secrets: crate::policy::SecretAccess::Write, ..Grants::default() };
        check(&m, &write, &kinds(), &parent(), &mut response(secret)).unwrap();
    }

    #[test]
    fn namespace_grants_do_not_extend_writes() {
        let all = Grants { namespaces: crate::policy::NamespaceGrant::All, ..Grants::default() };
        let mut r = response(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "other"}}));
        let err = check(&manifest(), &all, &kinds(), &parent(), &mut r).unwrap_err();
        assert!(matches!(err.refusal(), Some(Refusal::OtherNamespace { .. })), "{err}");
    }

    #[test]
    fn a_namespaced_parent_may_not_write_or_delete_a_cluster_scoped_kind_without_a_grant() {
        let m = with_cluster_role(manifest());
        let mut r = role_child(json!({"name": "escalate"}));
        let err = check(&m, &Grants::default(), &kinds(), &parent(), &mut r).unwrap_err();
        assert_eq!(
            err.to_string(),
            "rbac.authorization.k8s.io/v1/ClusterRole escalate is of the cluster-scoped kind \
             rbac.authorization.k8s.io/v1/ClusterRole, which a plugin may write only when the host's policy grants it \
             (clusterScopedChildren)"
        );
        let err = check(&m, &Grants::default(), &kinds(), &parent(), &mut role_delete()).unwrap_err();
        assert!(matches!(err.refusal(), Some(Refusal::ClusterScoped { .. })), "{err}");
        let mut ns = response(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}));
        let mut m = manifest();
        m.children.push(Kind::new("", "v1", "Namespace"));
        let scoped = Grants { escalation_kinds: [Kind::new("", "v1", "Namespace")].into(), ..Grants::default() };
        let err = check(&m, &scoped, &kinds(), &parent(), &mut ns).unwrap_err();
        assert!(matches!(err.refusal(), Some(Refusal::ClusterScoped { .. })), "{err}");
    }

    #[test]
    fn a_granted_cluster_scoped_child_gets_no_namespace_and_names_its_parent() {
        let m = with_cluster_role(manifest());
        let granted = role_granted();
        let mut r = role_child(json!({"name": "reader", "labels": {PARENT_UID_LABEL: "forged", "app": "x"}}));
        check(&m, &granted, &kinds(), &parent(), &mut r).unwrap();
        let meta = &r.children[0]["metadata"];
        assert!(meta.get("namespace").is_none(), "{meta}");
        assert_eq!(meta["labels"], json!({PARENT_UID_LABEL: "u-1", "app": "x"}));
        assert_eq!(meta["annotations"][PARENT_ANNOTATION], "x.io/v1/P ns/p");
        let mut d = role_delete();
        check(&m, &granted, &kinds(), &parent(), &mut d).unwrap();
        assert_eq!(d.delete[0].namespace, None, "no namespace defaulted onto a cluster-scoped delete");
    }

    #[test]
    fn a_cluster_scoped_kind_never_carries_a_namespace() {
        let granted = role_granted();
        let mut r = role_child(json!({"name": "r", "namespace": "ns"}));
        let err = check(&with_cluster_role(manifest()), &granted, &kinds(), &parent(), &mut r).unwrap_err();
        assert_eq!(
            err.to_string(),
            "rbac.authorization.k8s.io/v1/ClusterRole ns/r carries namespace \"ns\", but rbac.authorization.k8s.io/v1/ClusterRole is cluster-scoped"
        );
        let mut cluster_parent = with_cluster_role(manifest());
        cluster_parent.scope = Scope::Cluster;
        let mut r = role_child(json!({"name": "r", "namespace": "ns"}));
        let err = check(&cluster_parent, &Grants::default(), &kinds(), &parent(), &mut r).unwrap_err();
        assert!(matches!(err.refusal(), Some(Refusal::NamespaceOnClusterScoped { .. })), "{err}");
    }

    fn cluster_parent() -> Value {
        json!({"apiVersion": "x.io/v1", "kind": "P", "metadata": {"name": "p", "uid": "u"}})
    }

    #[test]
    fn a_cluster_scoped_parent_needs_the_grants_for_cluster_scoped_children_too() {
        let mut m = with_cluster_role(manifest());
        m.scope = Scope::Cluster;
        let err = check(&m, &Grants::default(), &kinds(), &cluster_parent(), &mut role_child(json!({"name": "r"}))).unwrap_err();
        assert!(matches!(err.refusal(), Some(Refusal::ClusterScoped { .. })), "{err}");
        let scoped_only = Grants { cluster_scoped_children: [cluster_role()].into(), ..Grants::default() };
        let err = check(&m, &scoped_only, &kinds(), &cluster_parent(), &mut role_child(json!({"name": "r"}))).unwrap_err();
        assert!(matches!(err.refusal(), Some(Refusal::Escalation { .. })), "{err}");
        let mut r = role_child(json!({"name": "r"}));
        check(&m, &role_granted(), &kinds(), &cluster_parent(), &mut r).unwrap();
        assert!(r.children[0]["metadata"].get("labels").is_none(), "cluster-scoped parents own their children by reference");
    }

    #[test]
    fn a_cluster_scoped_parent_writes_into_no_namespace_it_is_not_granted() {
        let mut m = manifest();
        m.scope = Scope::Cluster;
        let into = |ns: Option<&str>| {
            let mut meta = json!({"name": "c"});
            if let Some(ns) = ns {
                meta["namespace"] = ns.into();
            }
            response(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}))
        };
        let err = check(&m, &Grants::default(), &kinds(), &cluster_parent(), &mut into(Some("kube-system"))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "v1/ConfigMap kube-system/c is in namespace \"kube-system\", which the host's policy does not grant a plugin with \
             a cluster-scoped parent (writeNamespaces)"
        );
        let all = Grants { write_namespaces: crate::policy::NamespaceGrant::All, ..Grants::default() };
        check(&m, &all, &kinds(), &cluster_parent(), &mut into(Some("tenant"))).unwrap();
        assert!(check(&m, &all, &kinds(), &cluster_parent(), &mut into(Some("kube-system"))).is_err());
        assert!(check(&m, &all, &kinds(), &cluster_parent(), &mut into(None)).is_err(), "no namespace, nowhere");
        let delete = ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("kube-system".into()),
            name: "c".into(),
        };
        let mut d = Response { delete: vec![delete], ..Default::default() };
        assert!(check(&m, &all, &kinds(), &cluster_parent(), &mut d).is_err(), "deletes pass the same gate");
    }

    #[test]
    fn the_gate_judges_what_a_child_is_as_well_as_where() {
        let mut m = manifest();
        m.children.push(Kind::new("apps", "v1", "Deployment"));
        let hostile = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"hostPID": true, "containers": [{"name": "c", "image": "x"}]}}}});
        let err = check(&m, &Grants::default(), &kinds(), &parent(), &mut response(hostile.clone())).unwrap_err();
        assert!(matches!(err.refusal(), Some(Refusal::HostAccess { .. })), "{err}");
        let allowed = Grants { allow_host_access: true, ..Grants::default() };
        check(&m, &allowed, &kinds(), &parent(), &mut response(hostile)).unwrap();
        let mut m = manifest();
        m.children.push(Kind::new("coordination.k8s.io", "v1", "Lease"));
        let leases = Grants { escalation_kinds: [Kind::new("coordination.k8s.io", "v1", "Lease")].into(), ..Grants::default() };
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "wasmop"}});
        let err = check(&m, &leases, &kinds(), &parent(), &mut response(lease)).unwrap_err();
        assert!(matches!(err.refusal(), Some(Refusal::HostObject { .. })), "{err}");
        let delete = ObjectRef {
            api_version: "coordination.k8s.io/v1".into(),
            kind: "Lease".into(),
            namespace: None,
            name: "wasmop".into(),
        };
        let err =
            check(&m, &leases, &kinds(), &parent(), &mut Response { delete: vec![delete], ..Default::default() }).unwrap_err();
        assert!(matches!(err.refusal(), Some(Refusal::HostObject { .. })), "{err}");
    }

    #[test]
    fn a_kind_of_unknown_scope_is_refused() {
        let mut r = response(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}));
        let err = check(&manifest(), &Grants::default(), &KnownKinds::default(), &parent(), &mut r).unwrap_err();
        assert_eq!(err.to_string(), "v1/ConfigMap c is of kind v1/ConfigMap, whose scope (namespaced or cluster) is unknown");
    }
}
