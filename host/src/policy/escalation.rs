//! Escalation kinds: kinds whose objects give their writer (or, through a webhook, their
//! vetoer) power over the cluster beyond the objects themselves — RBAC, admission, API
//! extension, namespaces, credentials, host storage, nodes, leader election, where Services
//! send their traffic (Endpoints, EndpointSlices), scheduling priority and container runtimes.
//!
//! A plugin declares, writes, mutates or vetoes objects of these kinds only when the host's
//! policy names the kind in `escalationKinds` (see [`super::Grants::escalation_kinds`]);
//! declaring the kind in the manifest is not enough. The table matches a kind by group and
//! name, whatever its version, so a new API version of a kind is escalation as well.

/// One escalation kind: its group, kind name and resource (a subresource after `/`), and
/// why it is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EscalationKind {
    /// API group (`""` for the core group).
    pub group: &'static str,
    /// Kind name.
    pub kind: &'static str,
    /// Resource as in RBAC and webhook rules (`serviceaccounts/token` for a subresource).
    pub resource: &'static str,
    /// The API group of [`EscalationKind::resource`] (the core group for
    /// `serviceaccounts/token`, whose kind is in `authentication.k8s.io`).
    pub resource_group: &'static str,
    /// What a writer of it can do.
    pub why: &'static str,
}

const fn entry(group: &'static str, kind: &'static str, resource: &'static str, why: &'static str) -> EscalationKind {
    EscalationKind { group, kind, resource, resource_group: group, why }
}

const RBAC: &str = "rbac.authorization.k8s.io";
const ADMISSION: &str = "admissionregistration.k8s.io";

/// Every escalation kind.
pub const ESCALATION_KINDS: &[EscalationKind] = &[
    entry(RBAC, "Role", "roles", "grants rights"),
    entry(RBAC, "ClusterRole", "clusterroles", "grants rights"),
    entry(RBAC, "RoleBinding", "rolebindings", "grants rights"),
    entry(RBAC, "ClusterRoleBinding", "clusterrolebindings", "grants rights"),
    entry(ADMISSION, "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", "intercepts writes"),
    entry(ADMISSION, "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", "intercepts writes"),
    entry(ADMISSION, "ValidatingAdmissionPolicy", "validatingadmissionpolicies", "vetoes writes"),
    entry(ADMISSION, "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", "vetoes writes"),
    entry(ADMISSION, "MutatingAdmissionPolicy", "mutatingadmissionpolicies", "rewrites writes"),
    entry(ADMISSION, "MutatingAdmissionPolicyBinding", "mutatingadmissionpolicybindings", "rewrites writes"),
    entry("apiextensions.k8s.io", "CustomResourceDefinition", "customresourcedefinitions", "defines APIs"),
    entry("apiregistration.k8s.io", "APIService", "apiservices", "redirects API traffic"),
    entry("", "Namespace", "namespaces", "creates and deletes whole namespaces"),
    entry("", "Node", "nodes", "steers workloads onto nodes"),
    entry("", "PersistentVolume", "persistentvolumes", "mounts host paths"),
    entry("storage.k8s.io", "StorageClass", "storageclasses", "provisions host storage"),
    EscalationKind {
        group: "authentication.k8s.io",
        kind: "TokenRequest",
        resource: "serviceaccounts/token",
        resource_group: "",
        why: "mints credentials",
    },
    entry("certificates.k8s.io", "CertificateSigningRequest", "certificatesigningrequests", "mints credentials"),
    entry("coordination.k8s.io", "Lease", "leases", "holds or blocks leader election"),
    entry("", "Endpoints", "endpoints", "points a Service at any address, the API server's or a metadata endpoint's"),
    entry(
        "discovery.k8s.io",
        "EndpointSlice",
        "endpointslices",
        "points a Service at any address, the API server's or a metadata endpoint's",
    ),
    entry("scheduling.k8s.io", "PriorityClass", "priorityclasses", "preempts every workload of a lower priority"),
    entry("node.k8s.io", "RuntimeClass", "runtimeclasses", "picks the runtime handler Pods run under on the nodes"),
];

/// The escalation kind `group`/`kind` is, whatever the version.
///
/// ```
/// use wasmop::policy::escalation_kind;
/// assert_eq!(escalation_kind("rbac.authorization.k8s.io", "ClusterRoleBinding").unwrap().why, "grants rights");
/// assert!(escalation_kind("", "ConfigMap").is_none());
/// ```
pub fn escalation_kind(group: &str, kind: &str) -> Option<&'static EscalationKind> {
    ESCALATION_KINDS.iter().find(|e| e.group == group && e.kind == kind)
}

/// The escalation kinds a webhook rule entry (`group`, `resource` with an optional
/// `/subresource`; either may be `*`) matches, as the API server matches rules: `*` matches
/// every resource but no subresource, `*/*` every resource and subresource, `pods/*` every
/// subresource of pods.
pub fn matched_by_rule(group: &str, resource: &str) -> impl Iterator<Item = &'static EscalationKind> {
    let (rule_resource, rule_sub) = split(resource);
    let (group, rule_resource, rule_sub) = (group.to_owned(), rule_resource.to_owned(), rule_sub.map(str::to_owned));
    ESCALATION_KINDS.iter().filter(move |e| {
        let (resource, sub) = split(e.resource);
        let group_matches = group == "*" || group == e.resource_group;
        let resource_matches = rule_resource == "*" || rule_resource == resource;
        let sub_matches = match (rule_sub.as_deref(), sub) {
            (None, None) => true,
            (Some("*"), _) => true,
            (Some(rule), Some(sub)) => rule == sub,
            _ => false,
        };
        group_matches && resource_matches && sub_matches
    })
}

fn split(resource: &str) -> (&str, Option<&str>) {
    match resource.split_once('/') {
        Some((resource, sub)) => (resource, Some(sub)),
        None => (resource, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(group: &str, resource: &str) -> Vec<&'static str> {
        matched_by_rule(group, resource).map(|e| e.kind).collect()
    }

    #[test]
    fn every_version_of_an_escalation_kind_is_one() {
        assert!(escalation_kind("rbac.authorization.k8s.io", "ClusterRole").is_some());
        assert!(escalation_kind("", "Namespace").is_some());
        assert!(escalation_kind("example.com", "ClusterRole").is_none(), "only the real group");
        assert!(escalation_kind("apps", "Deployment").is_none());
    }

    #[test]
    fn endpoints_priority_and_runtime_classes_are_escalation_kinds_with_their_reason() {
        let why = |group, kind| escalation_kind(group, kind).map(|e| e.why);
        assert_eq!(why("", "Endpoints"), Some("points a Service at any address, the API server's or a metadata endpoint's"));
        assert_eq!(why("discovery.k8s.io", "EndpointSlice"), why("", "Endpoints"));
        assert_eq!(why("scheduling.k8s.io", "PriorityClass"), Some("preempts every workload of a lower priority"));
        assert_eq!(why("node.k8s.io", "RuntimeClass"), Some("picks the runtime handler Pods run under on the nodes"));
        assert_eq!(kinds("", "endpoints"), ["Endpoints"]);
        assert_eq!(kinds("discovery.k8s.io", "*"), ["EndpointSlice"]);
        assert!(kinds("", "services").is_empty(), "a Service itself is not escalation (its externalIPs are)");
    }

    #[test]
    fn webhook_rules_match_escalation_resources_as_the_api_server_does() {
        assert_eq!(kinds("coordination.k8s.io", "leases"), ["Lease"]);
        assert_eq!(kinds("rbac.authorization.k8s.io", "*"), ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"]);
        assert!(kinds("", "serviceaccounts").is_empty(), "a ServiceAccount itself is not escalation");
        assert_eq!(kinds("", "serviceaccounts/token"), ["TokenRequest"]);
        assert_eq!(kinds("*", "serviceaccounts/*"), ["TokenRequest"]);
        assert_eq!(kinds("*", "*").len(), ESCALATION_KINDS.len() - 1, "`*` matches no subresource");
        assert_eq!(kinds("*", "*/*").len(), ESCALATION_KINDS.len());
        assert!(kinds("apps", "*").is_empty());
    }
}
