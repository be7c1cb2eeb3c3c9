//! What no webhook the host registers may reach: the namespace the host runs in, `kube-system`
//! (unless the plugin's policy grants it), and the objects the host itself depends on — its
//! Leases, its admission Secret, its own webhook configurations and every `wasmop.dev` object
//! (`WasmPlugin`s). As Gatekeeper and Kyverno exempt their own namespace and the system
//! namespaces by default.
//!
//! Two mechanisms, both added to every registered webhook and combined with (never replacing)
//! what the plugin declares:
//!
//! - the `namespaceSelector` gains `kubernetes.io/metadata.name NotIn [<host namespace>,
//!   kube-system]` (the API server sets that label on every namespace); it excludes every
//!   namespaced object there, and the Namespace objects themselves;
//! - `matchConditions` (CEL on the admission request, GA since Kubernetes 1.30) exclude the
//!   objects a namespace selector cannot: a cluster-scoped object is never skipped by a namespace
//!   selector, so the host's webhook configurations are excluded by name; Leases in `kube-system`
//!   and in the host's Lease namespace are excluded even when the plugin may reach those
//!   namespaces, so that a `Fail` webhook can never block a leader election (the host's,
//!   kube-controller-manager's, kube-scheduler's).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::contract::HOST_API_GROUP;
use crate::policy::NamespaceGrant;

/// The label the API server puts on every namespace, holding its name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The namespace of the cluster's own components.
pub const KUBE_SYSTEM: &str = "kube-system";

/// The objects the host runs on, which every webhook it registers excludes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostObjects {
    /// The namespace the host runs in (`$POD_NAMESPACE`), excluded whole; `None` for a host
    /// outside the cluster (then only the objects below are excluded).
    pub namespace: Option<String>,
    /// The namespace of the host's Leases (its leader Lease and shard Leases): every Lease there
    /// is excluded.
    pub lease_namespace: String,
    /// The admission Secret holding the serving certificate, `(namespace, name)`; `None` when the
    /// certificate comes from files.
    pub secret: Option<(String, String)>,
}

impl HostObjects {
    /// A host outside any cluster whose Leases live in `lease_namespace` and that keeps no
    /// Secret.
    pub fn outside(lease_namespace: impl Into<String>) -> Self {
        Self { namespace: None, lease_namespace: lease_namespace.into(), secret: None }
    }

    /// The namespaces a webhook of a plugin granted `grant` never reaches: the host's own, and
    /// `kube-system` unless the grant names it (or is `"*"`).
    pub fn excluded_namespaces(&self, grant: &NamespaceGrant) -> BTreeSet<String> {
        let kube_system_granted = match grant {
            NamespaceGrant::All | NamespaceGrant::AllAnd(_) => true,
            NamespaceGrant::Also(names) => names.contains(KUBE_SYSTEM),
            NamespaceGrant::ParentOnly => false,
        };
        let mut excluded: BTreeSet<String> = self.namespace.iter().cloned().collect();
        if !kube_system_granted {
            excluded.insert(KUBE_SYSTEM.to_owned());
        }
        excluded
    }

    /// The `matchConditions` every webhook of configurations named `configuration` carries: all
    /// must hold for the API server to call the webhook.
    pub fn match_conditions(&self, configuration: &str) -> Vec<Value> {
        let lease_namespaces: BTreeSet<&str> = [KUBE_SYSTEM, self.lease_namespace.as_str()].into();
        let lease_namespaces: Vec<String> = lease_namespaces.iter().map(|ns| format!("request.namespace == '{ns}'")).collect();
        let mut conditions = vec![
            json!({
                "name": "wasmop-excludes-leader-leases",
                "expression": format!(
                    "!(request.resource.group == 'coordination.k8s.io' && request.resource.resource == 'leases' && ({}))",
                    lease_namespaces.join(" || ")
                ),
            }),
            json!({
                "name": "wasmop-excludes-host-kinds",
                "expression": format!("request.resource.group != '{HOST_API_GROUP}'"),
            }),
            json!({
                "name": "wasmop-excludes-host-webhook-configurations",
                "expression": format!(
                    "!(request.resource.group == 'admissionregistration.k8s.io' && \
                     (request.resource.resource == 'validatingwebhookconfigurations' || \
                     request.resource.resource == 'mutatingwebhookconfigurations') && request.name == '{configuration}')"
                ),
            }),
        ];
        if let Some((namespace, name)) = &self.secret {
            conditions.push(json!({
                "name": "wasmop-excludes-admission-secret",
                "expression": format!(
                    "!(request.resource.group == '' && request.resource.resource == 'secrets' && \
                     request.namespace == '{namespace}' && request.name == '{name}')"
                ),
            }));
        }
        conditions
    }
}

/// `selector` (a Kubernetes `LabelSelector` as JSON) with `excluded` namespaces added as one
/// more requirement: a namespace must satisfy the plugin's requirements and not be excluded.
pub fn exclude_namespaces(selector: Value, excluded: &BTreeSet<String>) -> Value {
    if excluded.is_empty() {
        return selector;
    }
    let mut selector = if selector.is_object() { selector } else { json!({}) };
    let requirement = json!({"key": NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": excluded});
    match selector["matchExpressions"].as_array_mut() {
        Some(expressions) => expressions.push(requirement),
        None => selector["matchExpressions"] = json!([requirement]),
    }
    selector
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> HostObjects {
        HostObjects {
            namespace: Some("wasmop-system".into()),
            lease_namespace: "wasmop-system".into(),
            secret: Some(("wasmop-system".into(), "wasmop-admission-tls".into())),
        }
    }

    /// Plugins may declare [`crate::contract::MAX_MATCH_CONDITIONS`] of their own: the host's
    /// must fit in the rest of Kubernetes' 64, under names no plugin may take.
    #[test]
    fn the_hosts_match_conditions_fit_the_room_left_to_them_under_a_reserved_prefix() {
        for host in [host(), HostObjects::outside("default")] {
            let conditions = host.match_conditions("wasmop");
            assert!(conditions.len() <= crate::contract::HOST_MATCH_CONDITIONS, "{conditions:?}");
            for c in &conditions {
                assert!(c["name"].as_str().unwrap().starts_with(crate::contract::HOST_MATCH_CONDITION_PREFIX), "{c}");
            }
        }
        assert_eq!(host().match_conditions("wasmop").len(), crate::contract::HOST_MATCH_CONDITIONS, "the most it adds");
    }

    #[test]
    fn the_hosts_namespace_and_kube_system_are_excluded_unless_kube_system_is_granted() {
        let names = |g: &NamespaceGrant| host().excluded_namespaces(g).into_iter().collect::<Vec<_>>();
        assert_eq!(names(&NamespaceGrant::ParentOnly), ["kube-system", "wasmop-system"]);
        assert_eq!(names(&NamespaceGrant::from_list(vec!["shared".into()])), ["kube-system", "wasmop-system"]);
        assert_eq!(names(&NamespaceGrant::from_list(vec!["kube-system".into()])), ["wasmop-system"]);
        assert_eq!(names(&NamespaceGrant::All), ["wasmop-system"]);
        let outside = HostObjects::outside("default");
        assert_eq!(outside.excluded_namespaces(&NamespaceGrant::All), BTreeSet::new(), "no namespace of its own");
        assert_eq!(outside.excluded_namespaces(&NamespaceGrant::ParentOnly), BTreeSet::from(["kube-system".to_owned()]));
    }

    #[test]
    fn the_plugins_namespace_selector_is_kept_and_the_exclusion_added() {
        let excluded = BTreeSet::from(["kube-system".to_owned()]);
        let plugins = json!({"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]});
        assert_eq!(
            exclude_namespaces(plugins, &excluded),
            json!({"matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod"]},
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]})
        );
        assert_eq!(
            exclude_namespaces(json!({}), &excluded),
            json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]})
        );
        assert_eq!(exclude_namespaces(json!({}), &BTreeSet::new()), json!({}));
    }

    #[test]
    fn match_conditions_exclude_leases_host_kinds_configurations_and_the_secret() {
        let conditions = host().match_conditions("wasmop");
        let expressions: Vec<&str> = conditions.iter().map(|c| c["expression"].as_str().unwrap()).collect();
        assert_eq!(
            expressions[0],
            "!(request.resource.group == 'coordination.k8s.io' && request.resource.resource == 'leases' && \
             (request.namespace == 'kube-system' || request.namespace == 'wasmop-system'))"
        );
        assert_eq!(expressions[1], "request.resource.group != 'wasmop.dev'");
        assert!(expressions[2].contains("request.name == 'wasmop'"), "{}", expressions[2]);
        assert!(expressions[3].contains("request.name == 'wasmop-admission-tls'"), "{}", expressions[3]);
        let names: BTreeSet<&str> = conditions.iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names.len(), conditions.len(), "names are unique");
        assert_eq!(HostObjects::outside("kube-system").match_conditions("w").len(), 3, "no Secret, one lease namespace");
        assert!(
            HostObjects::outside("kube-system").match_conditions("w")[0]["expression"]
                .as_str()
                .unwrap()
                .ends_with("(request.namespace == 'kube-system'))")
        );
    }
}
