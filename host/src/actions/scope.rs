//! Scope checks: a response may only touch what the manifest declares, where it may.

use serde_json::Value;

use crate::contract::{Kind, Manifest, ObjectRef, Response, Scope};
use crate::objects::namespace_of;
use crate::policy::Grants;

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
}

impl ScopeError {
    /// CamelCase reason for events and conditions.
    pub fn reason(&self) -> &'static str {
        "ActionRefused"
    }
}

/// Check every child and delete of `response` against `manifest` and `grants`, and default
/// each child's namespace to the parent's (namespaced parents).
///
/// # Errors
/// The first [`ScopeError`]; the response must then be dropped whole.
pub fn check(manifest: &Manifest, grants: &Grants, parent: &Value, response: &mut Response) -> Result<(), ScopeError> {
    let parent_ns = match manifest.scope {
        Scope::Namespaced => namespace_of(parent).map(str::to_owned),
        Scope::Cluster => None,
    };
    for child in &mut response.children {
        let r = ObjectRef::of_object(child).expect("validated responses have identity");
        check_one(manifest, grants, parent_ns.as_deref(), &r.kind(), r.namespace.as_deref(), &r.to_string())?;
        if let (Some(ns), None) = (&parent_ns, &r.namespace) {
            child["metadata"]["namespace"] = Value::String(ns.clone());
        }
    }
    for d in &mut response.delete {
        check_one(manifest, grants, parent_ns.as_deref(), &d.kind(), d.namespace.as_deref(), &d.to_string())?;
        if d.namespace.is_none() {
            d.namespace.clone_from(&parent_ns);
        }
    }
    Ok(())
}

fn check_one(
    manifest: &Manifest,
    grants: &Grants,
    parent_ns: Option<&str>,
    kind: &Kind,
    ns: Option<&str>,
    what: &str,
) -> Result<(), ScopeError> {
    if !manifest.may_write(kind) {
        return Err(ScopeError::UndeclaredKind { object: what.to_owned(), kind: kind.to_string() });
    }
    if !grants.may_write_kind(kind) {
        return Err(ScopeError::NotGranted { object: what.to_owned(), kind: kind.to_string() });
    }
    if let (Some(parent_ns), Some(ns)) = (parent_ns, ns)
        && ns != parent_ns
    {
        return Err(ScopeError::OtherNamespace {
            object: what.to_owned(),
            namespace: ns.to_owned(),
            parent_namespace: parent_ns.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
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
        }
    }

    fn parent() -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns"}})
    }

    fn response(child: Value) -> Response {
        Response { children: vec![child], ..Default::default() }
    }

    #[test]
    fn children_default_to_the_parent_namespace() {
        let mut r = response(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}));
        check(&manifest(), &Grants::default(), &parent(), &mut r).unwrap();
        assert_eq!(r.children[0]["metadata"]["namespace"], "ns");
    }

    #[test]
    fn another_namespace_is_refused() {
        let mut r =
            response(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "kube-system"}}));
        let err = check(&manifest(), &Grants::default(), &parent(), &mut r).unwrap_err();
        assert!(matches!(err, ScopeError::OtherNamespace { .. }));
        assert_eq!(
            err.to_string(),
            "v1/ConfigMap kube-system/c is in namespace \"kube-system\", outside the parent's namespace \"ns\""
        );
    }

    #[test]
    fn undeclared_kinds_are_refused() {
        let mut r = response(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c"}}));
        assert!(matches!(check(&manifest(), &Grants::default(), &parent(), &mut r), Err(ScopeError::UndeclaredKind { .. })));
        let mut r = Response {
            delete: vec![ObjectRef { api_version: "v1".into(), kind: "Secret".into(), namespace: None, name: "s".into() }],
            ..Default::default()
        };
        assert!(matches!(check(&manifest(), &Grants::default(), &parent(), &mut r), Err(ScopeError::UndeclaredKind { .. })));
    }

    #[test]
    fn declared_secrets_need_a_write_grant() {
        let mut m = manifest();
        m.children.push(Kind::new("", "v1", "Secret"));
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
        let err = check(&m, &Grants::default(), &parent(), &mut response(secret.clone())).unwrap_err();
        assert!(matches!(err, ScopeError::NotGranted { .. }), "{err}");
        let write = Grants { secrets: crate::policy::SecretAccess::Write, ..Grants::default() };
        check(&m, &write, &parent(), &mut response(secret)).unwrap();
    }

    #[test]
    fn namespace_grants_do_not_extend_writes() {
        let all = Grants { namespaces: crate::policy::NamespaceGrant::All, ..Grants::default() };
        let mut r = response(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "other"}}));
        assert!(matches!(check(&manifest(), &all, &parent(), &mut r), Err(ScopeError::OtherNamespace { .. })));
    }
}
