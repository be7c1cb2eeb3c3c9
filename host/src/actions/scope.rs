//! Scope checks: a response may only touch what the manifest declares, where it may.

use serde_json::Value;

use crate::contract::{Kind, KindScopes, Manifest, ObjectRef, Response, Scope};
use crate::objects::{name_of, namespace_of};
use crate::policy::Grants;

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
    /// A child or delete is of a kind the host's policy does not grant (Secrets).
    #[error("{object} is of kind {kind}, which the host's policy does not grant to this plugin")]
    NotGranted {
        /// The object.
        object: String,
        /// Its kind.
        kind: String,
    },
    /// A child or delete is in another namespace than the parent's. Namespace grants do not
    /// change this: Kubernetes forbids owner references across namespaces.
    #[error("{object} is in namespace {namespace:?}, outside the parent's namespace {parent_namespace:?}")]
    OtherNamespace {
        /// The object.
        object: String,
        /// Its namespace.
        namespace: String,
        /// The parent's.
        parent_namespace: String,
    },
    /// A child or delete of a cluster-scoped kind, from a plugin whose parent is namespaced,
    /// without the policy's `clusterScopedChildren` grant for that kind.
    #[error(
        "{object} is of the cluster-scoped kind {kind}, which a plugin with a namespaced parent may write only when the \
         host's policy grants it (clusterScopedChildren)"
    )]
    ClusterScopedNotGranted {
        /// The object.
        object: String,
        /// Its kind.
        kind: String,
    },
    /// A child or delete of a cluster-scoped kind that carries a namespace.
    #[error("{object} carries namespace {namespace:?}, but {kind} is cluster-scoped")]
    NamespaceOnClusterScoped {
        /// The object.
        object: String,
        /// Its kind.
        kind: String,
        /// The namespace it carries.
        namespace: String,
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
    /// CamelCase reason for events and conditions.
    pub fn reason(&self) -> &'static str {
        "ActionRefused"
    }
}

/// Check every child and delete of `response` against `manifest`, `grants` and the kinds'
/// scopes (`scopes`: discovery online, [`crate::contract::KnownKinds`] offline). Then default
/// each namespaced child's namespace to the parent's (namespaced parents), and label each
/// granted cluster-scoped child of a namespaced parent with [`PARENT_UID_LABEL`] and
/// [`PARENT_ANNOTATION`] (it gets no owner reference).
///
/// A namespaced parent's plugin may write only namespaced kinds in the parent's namespace,
/// and cluster-scoped kinds only with the `clusterScopedChildren` grant; no plugin may give a
/// cluster-scoped object a namespace.
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
        let scope = check_one(manifest, grants, scopes, parent_ns, &r.kind(), r.namespace.as_deref(), &r.to_string())?;
        match (scope, parent_ns) {
            (Scope::Namespaced, Some(ns)) if r.namespace.is_none() => child["metadata"]["namespace"] = ns.into(),
            (Scope::Cluster, Some(ns)) => label_with_parent(child, parent, ns),
            _ => {}
        }
    }
    for d in &mut response.delete {
        let scope = check_one(manifest, grants, scopes, parent_ns, &d.kind(), d.namespace.as_deref(), &d.to_string())?;
        if scope == Scope::Namespaced && d.namespace.is_none() {
            d.namespace = parent_ns.map(str::to_owned);
        }
    }
    Ok(())
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
    if !grants.may_write_kind(kind) {
        return Err(ScopeError::NotGranted { object: object(), kind: kind_name() });
    }
    let scope = scopes.scope_of(kind).ok_or_else(|| ScopeError::UnknownScope { object: object(), kind: kind_name() })?;
    match (scope, parent_ns, ns) {
        (Scope::Cluster, _, Some(ns)) => {
            Err(ScopeError::NamespaceOnClusterScoped { object: object(), kind: kind_name(), namespace: ns.to_owned() })
        }
        (Scope::Cluster, Some(_), None) if !grants.may_write_cluster_scoped(kind) => {
            Err(ScopeError::ClusterScopedNotGranted { object: object(), kind: kind_name() })
        }
        (Scope::Namespaced, Some(parent_ns), Some(ns)) if ns != parent_ns => {
            Err(ScopeError::OtherNamespace { object: object(), namespace: ns.to_owned(), parent_namespace: parent_ns.to_owned() })
        }
        _ => Ok(scope),
    }
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
        assert!(matches!(err, ScopeError::OtherNamespace { .. }));
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
        assert!(matches!(err, ScopeError::NotGranted { .. }), "{err}");
        let write = Grants { secrets: crate::policy::SecretAccess::Write, ..Grants::default() };
        check(&m, &write, &kinds(), &parent(), &mut response(secret)).unwrap();
    }

    #[test]
    fn namespace_grants_do_not_extend_writes() {
        let all = Grants { namespaces: crate::policy::NamespaceGrant::All, ..Grants::default() };
        let mut r = response(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "other"}}));
        assert!(matches!(check(&manifest(), &all, &kinds(), &parent(), &mut r), Err(ScopeError::OtherNamespace { .. })));
    }

    #[test]
    fn a_namespaced_parent_may_not_write_or_delete_a_cluster_scoped_kind_without_a_grant() {
        let m = with_cluster_role(manifest());
        let mut r = role_child(json!({"name": "escalate"}));
        let err = check(&m, &Grants::default(), &kinds(), &parent(), &mut r).unwrap_err();
        assert_eq!(
            err.to_string(),
            "rbac.authorization.k8s.io/v1/ClusterRole escalate is of the cluster-scoped kind \
             rbac.authorization.k8s.io/v1/ClusterRole, which a plugin with a namespaced parent may write only when the host's \
             policy grants it (clusterScopedChildren)"
        );
        let err = check(&m, &Grants::default(), &kinds(), &parent(), &mut role_delete()).unwrap_err();
        assert!(matches!(err, ScopeError::ClusterScopedNotGranted { .. }), "{err}");
        let mut ns = response(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}));
        let mut m = manifest();
        m.children.push(Kind::new("", "v1", "Namespace"));
        assert!(matches!(
            check(&m, &Grants::default(), &kinds(), &parent(), &mut ns),
            Err(ScopeError::ClusterScopedNotGranted { .. })
        ));
    }

    #[test]
    fn a_granted_cluster_scoped_child_gets_no_namespace_and_names_its_parent() {
        let m = with_cluster_role(manifest());
        let granted = Grants { cluster_scoped_children: [cluster_role()].into(), ..Grants::default() };
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
        let granted = Grants { cluster_scoped_children: [cluster_role()].into(), ..Grants::default() };
        let mut r = role_child(json!({"name": "r", "namespace": "ns"}));
        let err = check(&with_cluster_role(manifest()), &granted, &kinds(), &parent(), &mut r).unwrap_err();
        assert_eq!(
            err.to_string(),
            "rbac.authorization.k8s.io/v1/ClusterRole ns/r carries namespace \"ns\", but rbac.authorization.k8s.io/v1/ClusterRole is cluster-scoped"
        );
        let mut cluster_parent = with_cluster_role(manifest());
        cluster_parent.scope = Scope::Cluster;
        let mut r = role_child(json!({"name": "r", "namespace": "ns"}));
        assert!(matches!(
            check(&cluster_parent, &Grants::default(), &kinds(), &parent(), &mut r),
            Err(ScopeError::NamespaceOnClusterScoped { .. })
        ));
    }

    #[test]
    fn a_cluster_scoped_parent_needs_no_grant_for_cluster_scoped_children() {
        let mut m = with_cluster_role(manifest());
        m.scope = Scope::Cluster;
        let mut r = role_child(json!({"name": "r"}));
        check(&m, &Grants::default(), &kinds(), &json!({"metadata": {"name": "p", "uid": "u"}}), &mut r).unwrap();
        assert!(r.children[0]["metadata"].get("labels").is_none(), "cluster-scoped parents own their children by reference");
    }

    #[test]
    fn a_kind_of_unknown_scope_is_refused() {
        let mut r = response(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}));
        let err = check(&manifest(), &Grants::default(), &KnownKinds::default(), &parent(), &mut r).unwrap_err();
        assert_eq!(err.to_string(), "v1/ConfigMap c is of kind v1/ConfigMap, whose scope (namespaced or cluster) is unknown");
    }
}
