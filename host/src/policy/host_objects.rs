//! The objects the host runs on: no plugin may write, adopt, delete or prune them, whatever it
//! declares and is granted.
//!
//! They are named `wasmop` or `wasmop-…` — the names the host and `wasmop rbac` give them by
//! default: its leader Lease (`--leader-elect-name`, `wasmop`) and shard Leases
//! (`wasmop-shard-<replica>`, also labelled `wasmop.dev/shard-lease`), its admission Secret
//! (`wasmop-admission-tls`), its webhook configurations (`wasmop`), its ServiceAccount, and the
//! ClusterRole, Roles and bindings `wasmop rbac` prints (`wasmop`, `wasmop-admission`, …).
//! A RoleBinding or ClusterRoleBinding whose `roleRef` names such a role is refused too, so no
//! plugin can bind anyone to the host's rights; so is a Pod or workload template that runs as
//! the host's ServiceAccount (`serviceAccountName: wasmop…`), and a Secret of type
//! `kubernetes.io/service-account-token`, which Kubernetes fills with a token of the
//! ServiceAccount it names (credentials are minted only under the TokenRequest escalation grant,
//! and never for the host's ServiceAccount). An operator who renames these objects keeps
//! the `wasmop` prefix for them to stay reserved.

use serde_json::Value;

use crate::contract::Kind;

/// The name of the host's objects, and the prefix (with `-`) of the others.
pub const HOST_NAME: &str = "wasmop";
/// The label of the host's shard Leases.
pub const SHARD_LEASE_LABEL: &str = "wasmop.dev/shard-lease";

/// The kinds (group, kind) of which the host's objects are named [`HOST_NAME`]`[-…]`.
const HOST_OBJECT_KINDS: &[(&str, &str)] = &[
    ("coordination.k8s.io", "Lease"),
    ("", "Secret"),
    ("", "ServiceAccount"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
];

/// Whether `name` is one the host gives its own objects.
///
/// ```
/// use wasmop::policy::is_host_name;
/// assert!(is_host_name("wasmop") && is_host_name("wasmop-admission-tls"));
/// assert!(!is_host_name("wasmoppy") && !is_host_name("my-wasmop"));
/// ```
pub fn is_host_name(name: &str) -> bool {
    name == HOST_NAME || name.strip_prefix(HOST_NAME).is_some_and(|rest| rest.starts_with('-'))
}

/// Why `object` (of `kind`, named `name`; its content when known) is one the host runs on, or
/// binds someone to the host's roles; `None` when it is neither.
pub fn host_object(kind: &Kind, name: &str, object: Option<&Value>) -> Option<String> {
    if crate::contract::is_host_kind(kind) {
        return Some(format!("{} objects are the host's own", kind.kind));
    }
    let listed = HOST_OBJECT_KINDS.iter().any(|(g, k)| kind.group == *g && kind.kind == *k);
    if listed && is_host_name(name) {
        return Some(format!("the name {name:?} is reserved for the host's own {}s", kind.kind));
    }
    let labels = object.and_then(|o| o.pointer("/metadata/labels"));
    if kind.group == "coordination.k8s.io" && labels.and_then(|l| l.get(SHARD_LEASE_LABEL)).is_some() {
        return Some(format!("it carries the label {SHARD_LEASE_LABEL} of the host's shard Leases"));
    }
    let binding = kind.group == "rbac.authorization.k8s.io" && matches!(kind.kind.as_str(), "RoleBinding" | "ClusterRoleBinding");
    let role = object.and_then(|o| o.pointer("/roleRef/name")).and_then(Value::as_str);
    if let Some(role) = role.filter(|r| binding && is_host_name(r)) {
        return Some(format!("it binds the host's own role {role:?}"));
    }
    let object = object?;
    for (spec, path) in super::host_access::pod_specs(kind, object) {
        if let Some(account) = spec.get("serviceAccountName").and_then(Value::as_str).filter(|a| is_host_name(a)) {
            return Some(format!("{path}.serviceAccountName {account:?} runs it as the host's own ServiceAccount"));
        }
    }
    let account = object.pointer("/metadata/annotations/kubernetes.io~1service-account.name").and_then(Value::as_str);
    match account {
        Some(account) if is_token_secret(kind, object) && is_host_name(account) => {
            Some(format!("it asks for a token of the host's own ServiceAccount {account:?}"))
        }
        _ => None,
    }
}

/// Whether `object` is a Secret Kubernetes fills with a ServiceAccount's token.
pub fn is_token_secret(kind: &Kind, object: &Value) -> bool {
    kind.is_secret() && object.get("type").and_then(Value::as_str) == Some("kubernetes.io/service-account-token")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rbac(kind: &str) -> Kind {
        Kind::new("rbac.authorization.k8s.io", "v1", kind)
    }

    #[test]
    fn the_hosts_leases_secret_webhook_configurations_and_roles_are_reserved() {
        let lease = Kind::new("coordination.k8s.io", "v1", "Lease");
        assert!(host_object(&lease, "wasmop", None).is_some());
        assert!(host_object(&lease, "wasmop-shard-host-a", None).is_some());
        assert!(host_object(&Kind::new("", "v1", "Secret"), "wasmop-admission-tls", None).is_some());
        let webhooks = Kind::new("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration");
        assert!(host_object(&webhooks, "wasmop", None).is_some());
        assert!(host_object(&rbac("ClusterRole"), "wasmop", None).is_some());
        assert!(host_object(&Kind::new("wasmop.dev", "v1alpha1", "WasmPlugin"), "memcached", None).is_some());
        let renamed_shard = json!({"metadata": {"name": "other", "labels": {SHARD_LEASE_LABEL: "true"}}});
        assert!(host_object(&lease, "other", Some(&renamed_shard)).is_some());
        assert!(host_object(&lease, "my-app", None).is_none());
        assert!(host_object(&Kind::new("", "v1", "ConfigMap"), "wasmop", None).is_none(), "only the kinds the host uses");
    }

    #[test]
    fn a_binding_to_the_hosts_role_is_refused_whatever_its_name() {
        let binding = json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "wasmop"},
            "subjects": [{"kind": "Group", "name": "system:authenticated"}]});
        assert_eq!(
            host_object(&rbac("ClusterRoleBinding"), "innocent", Some(&binding)).as_deref(),
            Some("it binds the host's own role \"wasmop\"")
        );
        assert!(host_object(&rbac("RoleBinding"), "innocent", Some(&binding)).is_some());
        let admission = json!({"roleRef": {"kind": "Role", "name": "wasmop-admission"}});
        assert!(host_object(&rbac("RoleBinding"), "x", Some(&admission)).is_some());
        let view = json!({"roleRef": {"kind": "ClusterRole", "name": "view"}});
        assert!(host_object(&rbac("ClusterRoleBinding"), "x", Some(&view)).is_none());
        assert!(host_object(&rbac("ClusterRole"), "x", Some(&binding)).is_none(), "a role has no roleRef");
    }

    #[test]
    fn nothing_runs_as_or_mints_tokens_for_the_hosts_service_account() {
        let deployment = json!({"spec": {"template": {"spec": {"serviceAccountName": "wasmop", "containers": []}}}});
        assert_eq!(
            host_object(&Kind::new("apps", "v1", "Deployment"), "d", Some(&deployment)).as_deref(),
            Some("spec.template.spec.serviceAccountName \"wasmop\" runs it as the host's own ServiceAccount")
        );
        let pod = json!({"spec": {"serviceAccountName": "default"}});
        assert!(host_object(&Kind::new("", "v1", "Pod"), "p", Some(&pod)).is_none());
        let token = json!({"type": "kubernetes.io/service-account-token",
            "metadata": {"annotations": {"kubernetes.io/service-account.name": "wasmop"}}});
        assert!(host_object(&Kind::new("", "v1", "Secret"), "innocent", Some(&token)).is_some());
        assert!(is_token_secret(&Kind::new("", "v1", "Secret"), &token));
    }
}
