//! Escalation in what an object says rather than in its kind: objects of ordinary kinds whose
//! content gives their writer power over the cluster beyond the object itself.
//!
//! | object | why | grant (`escalationKinds`) |
//! |---|---|---|
//! | a `Secret` of type `kubernetes.io/service-account-token` | the token controller fills it with a token of the ServiceAccount it names: a credential mint | `authentication.k8s.io/v1/TokenRequest` |
//! | a `Service` with `spec.externalIPs` | every node's proxy sends the traffic of every Pod and node to those addresses to the Service's endpoints, cluster-wide (CVE-2020-8554) | `v1/Service` |
//!
//! The grant is `escalationKinds` naming the kind of the power (TokenRequest: minting tokens)
//! or the object's own kind (a Service's escalating field): a plugin that writes plain
//! Services needs nothing. [`object_escalations`] is called by the gate
//! ([`super::Grants::may_write_object`]) for every object a plugin writes — a reconcile's apply
//! (`wasmop run` and `wasmop reconcile`) and a mutating webhook's answer alike.

use serde_json::Value;

use super::host_objects::is_token_secret;
use crate::contract::Kind;

/// The kinds (group, kind) `escalationKinds` may name for an object-level escalation although
/// they are not escalation kinds themselves.
const GRANT_KINDS: &[(&str, &str)] = &[("", "Service")];

/// Whether `kind` is one `escalationKinds` may name to allow an escalation in objects' content
/// (besides the escalation kinds, TokenRequest among them).
pub fn is_object_escalation_grant(kind: &Kind) -> bool {
    GRANT_KINDS.iter().any(|(group, name)| kind.group == *group && kind.kind == *name)
}

/// One escalation an object's content asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectEscalation {
    /// What the object is, completing "is …" (with the values that make it one).
    pub what: String,
    /// What its writer can do.
    pub why: &'static str,
    /// The kind `escalationKinds` must name to allow it.
    pub grant: Kind,
}

/// Every escalation `object` (of `kind`) asks for by its content; empty when none.
///
/// ```
/// use serde_json::json;
/// use wasmop::contract::Kind;
/// use wasmop::policy::object_escalations;
/// let service = json!({"spec": {"ports": [{"port": 80}], "externalIPs": ["10.0.0.1"]}});
/// let found = object_escalations(&Kind::new("", "v1", "Service"), &service);
/// assert_eq!(found[0].grant, Kind::new("", "v1", "Service"));
/// assert!(object_escalations(&Kind::new("", "v1", "Service"), &json!({"spec": {"ports": [{"port": 80}]}})).is_empty());
/// ```
pub fn object_escalations(kind: &Kind, object: &Value) -> Vec<ObjectEscalation> {
    let mut found = Vec::new();
    if is_token_secret(kind, object) {
        let account = object.pointer("/metadata/annotations/kubernetes.io~1service-account.name").and_then(Value::as_str);
        found.push(ObjectEscalation {
            what: format!(
                "a Secret of type kubernetes.io/service-account-token (for ServiceAccount {:?})",
                account.unwrap_or_default()
            ),
            why: "mints credentials",
            grant: Kind::new("authentication.k8s.io", "v1", "TokenRequest"),
        });
    }
    let external_ips: Vec<&str> = (kind.group.is_empty() && kind.kind == "Service")
        .then(|| object.pointer("/spec/externalIPs").and_then(Value::as_array))
        .flatten()
        .map(|ips| ips.iter().map(|ip| ip.as_str().unwrap_or("?")).collect())
        .unwrap_or_default();
    if !external_ips.is_empty() {
        found.push(ObjectEscalation {
            what: format!("a Service with spec.externalIPs {}", external_ips.join(", ")),
            why: "intercepts the traffic of every Pod and node to those addresses, cluster-wide",
            grant: Kind::new("", "v1", "Service"),
        });
    }
    found
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_service_account_token_secret_is_a_credential_mint_whatever_account_it_names() {
        let secret = Kind::new("", "v1", "Secret");
        let token = json!({"type": "kubernetes.io/service-account-token",
            "metadata": {"annotations": {"kubernetes.io/service-account.name": "builder"}}});
        let found = object_escalations(&secret, &token);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].what, "a Secret of type kubernetes.io/service-account-token (for ServiceAccount \"builder\")");
        assert_eq!(found[0].grant, Kind::new("authentication.k8s.io", "v1", "TokenRequest"));
        assert!(object_escalations(&secret, &json!({"type": "Opaque"})).is_empty());
        assert!(object_escalations(&Kind::new("", "v1", "ConfigMap"), &token).is_empty(), "only a Secret is filled");
    }

    #[test]
    fn a_policy_may_name_the_service_kind_in_escalation_kinds_but_not_any_kind() {
        let policy = super::super::HostPolicy::from_yaml("plugins: {p: {grants: {escalationKinds: [v1/Service]}}}").unwrap();
        assert!(policy.for_plugin("p").grants.escalation_kinds.contains(&Kind::new("", "v1", "Service")));
        let err = super::super::HostPolicy::from_yaml("plugins: {p: {grants: {escalationKinds: [v1/ConfigMap]}}}").unwrap_err();
        assert!(err.to_string().contains("v1/ConfigMap is not an escalation kind"), "{err}");
    }

    #[test]
    fn a_service_with_external_ips_intercepts_traffic_and_one_without_does_not() {
        let service = Kind::new("", "v1", "Service");
        let intercept = json!({"spec": {"ports": [{"port": 443}], "externalIPs": ["10.96.0.1", "169.254.169.254"]}});
        let found = object_escalations(&service, &intercept);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].what, "a Service with spec.externalIPs 10.96.0.1, 169.254.169.254");
        assert_eq!(found[0].grant, service);
        for plain in [json!({"spec": {"ports": [{"port": 443}]}}), json!({"spec": {"externalIPs": []}})] {
            assert!(object_escalations(&service, &plain).is_empty(), "{plain}");
        }
        let lookalike = Kind::new("example.com", "v1", "Service");
        assert!(object_escalations(&lookalike, &intercept).is_empty(), "only the core Service");
    }
}
