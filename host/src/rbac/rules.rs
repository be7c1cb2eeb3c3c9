//! The rules a host needs for a set of plugins under a policy: what each plugin declares and
//! the policy grants, and what the host itself writes (events, Leases, `WasmPlugin` reports,
//! webhook configurations). Resource names come from [`KnownKinds`], never from kind names.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::cluster::InstallScope;
use crate::contract::{Kind, KindsError, KnownKinds, Manifest, Scope};
use crate::policy::{ConfigSource, HostPolicy, NamespaceGrant};

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete"];

/// The host's own kinds: events it publishes, its leader-election lease, its `WasmPlugin`s.
pub(super) fn host_kinds() -> [Kind; 3] {
    [
        Kind::new("events.k8s.io", "v1", "Event"),
        Kind::new("coordination.k8s.io", "v1", "Lease"),
        Kind::new("wasmop.dev", "v1alpha1", "WasmPlugin"),
    ]
}

/// Every kind `manifests` declare (parents, children, related) and the host's own.
pub fn kinds_of(manifests: &[Manifest]) -> BTreeSet<Kind> {
    let declared = manifests
        .iter()
        .flat_map(|m| std::iter::once(&m.parent).chain(&m.children).chain(m.related.iter().map(|r| &r.kind)).cloned());
    declared.chain(host_kinds()).collect()
}

/// The rules a host needs for `manifests` under `policy`: per plugin, read+watch+patch of its
/// parent kind and its status, full control of its child kinds, read of its related kinds; for
/// the host itself, events, leases (leader election) and its `WasmPlugin` status objects.
/// A plugin the policy does not grant what it declares (a Secret, a cluster-scoped child of a
/// namespaced parent) is left out whole: the host would not start it. Resource names are the
/// plurals `kinds` knows. Rules are merged per (group, resource). A plugin configured by a
/// ConfigMap adds read of that ConfigMap by name (`resourceNames`; the host lists and watches
/// it with a `metadata.name` field selector, which such a rule allows).
///
/// These are the cluster-wide rules. A plugin with a cluster-scoped parent whose policy grants
/// writes in named namespaces only (`writeNamespaces: [NS, ...]`) gets only the read of its
/// namespaced child kinds here (the host watches a kind once, cluster-wide); their writes are
/// in [`namespace_write_rules`], as the gate allows them.
///
/// # Errors
/// [`KindsError::Unknown`] for a kind `kinds` does not know.
pub fn rules(manifests: &[Manifest], policy: &HostPolicy, kinds: &KnownKinds) -> Result<Vec<Value>, KindsError> {
    Ok(cluster_install_rules(manifests, policy, kinds)?.into_json())
}

/// Per namespace, the write rules of the plugins whose writes the policy grants only there
/// (a cluster-scoped parent with `writeNamespaces` naming namespaces): what the gate
/// ([`crate::policy::Grants::may_write`]) lets them write, and no more. Empty when every
/// plugin writes wherever its parents are, or everywhere (`"*"`: the cluster-wide role has it).
/// A right the cluster-wide rules already give is not repeated.
///
/// # Errors
/// [`KindsError::Unknown`] for a kind `kinds` does not know.
pub fn namespace_write_rules(
    manifests: &[Manifest],
    policy: &HostPolicy,
    kinds: &KnownKinds,
) -> Result<BTreeMap<String, Vec<Value>>, KindsError> {
    let rules = cluster_install_rules(manifests, policy, kinds)?;
    let mut out = BTreeMap::new();
    for (ns, grants) in &rules.in_namespaces {
        let json: Vec<Value> = grants
            .iter()
            .filter_map(|((group, resource), verbs)| {
                let everywhere = rules.grants.get(&(group.clone(), resource.clone()));
                let verbs: Vec<&str> = verbs.iter().copied().filter(|v| !everywhere.is_some_and(|e| e.contains(v))).collect();
                (!verbs.is_empty()).then(|| json!({"apiGroups": [group], "resources": [resource], "verbs": verbs}))
            })
            .collect();
        if !json.is_empty() {
            out.insert(ns.clone(), json);
        }
    }
    Ok(out)
}

/// Everything a cluster-wide host needs (see [`rules`] and [`namespace_write_rules`]).
fn cluster_install_rules<'k>(
    manifests: &[Manifest],
    policy: &HostPolicy,
    kinds: &'k KnownKinds,
) -> Result<Rules<'k>, KindsError> {
    let mut rules = Rules::new(kinds);
    rules.plugins(manifests, policy, &InstallScope::Cluster)?;
    let [event, lease, _] = host_kinds();
    rules.grant(&event, None, EVENTS)?;
    rules.grant(&lease, None, LEASES)?;
    rules.reports()?;
    rules.webhook_configurations();
    Ok(rules)
}

/// Verbs on events: kube's recorder creates them and patches a repeated one.
pub(super) const EVENTS: &[&str] = &["create", "patch", "update"];
/// Verbs on Leases: the leader-election Lease (get, create, update), and with `--sharding`
/// each replica's own shard Lease (applied: create, patch; deleted on a clean exit) and the
/// others' (list, to know the live members).
pub(super) const LEASES: &[&str] = &["get", "list", "create", "update", "patch", "delete"];

/// Rules being gathered, merged per (group, resource).
pub(super) struct Rules<'k> {
    kinds: &'k KnownKinds,
    grants: BTreeMap<(String, String), BTreeSet<&'static str>>,
    /// Rules in one namespace only: the writes of plugins granted only named namespaces.
    in_namespaces: BTreeMap<String, BTreeMap<(String, String), BTreeSet<&'static str>>>,
    /// ConfigMaps the plugins are configured by, read by name.
    config_maps: BTreeSet<String>,
}

impl<'k> Rules<'k> {
    pub(super) fn new(kinds: &'k KnownKinds) -> Self {
        Self { kinds, grants: BTreeMap::new(), in_namespaces: BTreeMap::new(), config_maps: BTreeSet::new() }
    }

    /// `verbs` on `kind` (its subresource `sub`, when given).
    pub(super) fn grant(&mut self, kind: &Kind, sub: Option<&str>, verbs: &[&'static str]) -> Result<(), KindsError> {
        let plural = &self.kinds.resolve(kind)?.plural;
        let resource = match sub {
            Some(sub) => format!("{plural}/{sub}"),
            None => plural.clone(),
        };
        self.grants.entry((kind.group.clone(), resource)).or_default().extend(verbs);
        Ok(())
    }

    /// What the plugins a host with `policy` and `install` starts need (see [`left_out`]).
    pub(super) fn plugins(
        &mut self,
        manifests: &[Manifest],
        policy: &HostPolicy,
        install: &InstallScope,
    ) -> Result<(), KindsError> {
        for m in manifests.iter().filter(|m| left_out(m, policy, self.kinds, install).is_none()) {
            self.grant(&m.parent, None, &["get", "list", "watch", "patch", "update"])?;
            self.grant(&m.parent, Some("status"), &["get", "patch", "update"])?;
            // The gate lets a cluster-scoped parent's plugin write namespaced objects only in the
            // namespaces `writeNamespaces` names: its rights are there, not cluster-wide.
            let write_namespaces = policy.for_plugin(&m.name).grants.write_namespaces;
            let only_in = match (m.scope, &write_namespaces) {
                (Scope::Cluster, NamespaceGrant::Also(names)) => Some(names),
                _ => None,
            };
            for child in &m.children {
                match only_in {
                    Some(names) if self.kinds.resolve(child)?.scope == Scope::Namespaced => {
                        self.grant(child, None, READ)?;
                        let plural = self.kinds.resolve(child)?.plural.clone();
                        for ns in names {
                            let rules = self.in_namespaces.entry(ns.clone()).or_default();
                            rules.entry((child.group.clone(), plural.clone())).or_default().extend(WRITE);
                        }
                    }
                    _ => self.grant(child, None, WRITE)?,
                }
            }
            for related in &m.related {
                self.grant(&related.kind, None, READ)?;
            }
            if let ConfigSource::ConfigMap(at) = policy.for_plugin(&m.name).config {
                self.config_maps.insert(at.name);
            }
        }
        Ok(())
    }

    /// The host's `WasmPlugin` reports (cluster-scoped objects).
    pub(super) fn reports(&mut self) -> Result<(), KindsError> {
        let [.., wasm_plugin] = host_kinds();
        self.grant(&wasm_plugin, None, &["get", "list", "create", "patch", "update", "delete"])?;
        self.grant(&wasm_plugin, Some("status"), &["get", "patch", "update"])
    }

    /// The host's two admission webhook configurations (cluster-scoped objects); its
    /// certificate's Secret is in the Role of
    /// [`render`](super::render).
    pub(super) fn webhook_configurations(&mut self) {
        for resource in ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"] {
            self.grants.entry(("admissionregistration.k8s.io".into(), resource.into())).or_default().extend(WRITE);
        }
    }

    pub(super) fn into_json(self) -> Vec<Value> {
        let mut rules: Vec<Value> = self
            .grants
            .into_iter()
            .map(|((group, resource), verbs)| json!({"apiGroups": [group], "resources": [resource], "verbs": verbs}))
            .collect();
        if !self.config_maps.is_empty() {
            rules.push(json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": self.config_maps, "verbs": READ}));
        }
        rules
    }
}

/// Why a host with `policy` and `install` does not start the plugin of `m`, as a comment line;
/// `None` when it does (what it declares is granted, and a namespaced host can watch it).
pub fn left_out(m: &Manifest, policy: &HostPolicy, kinds: &KnownKinds, install: &InstallScope) -> Option<String> {
    // As the host checks: a namespaced host refuses cluster-scoped kinds whatever the policy grants.
    let cluster_scoped = install.cluster_scoped_kinds(m, kinds);
    if !cluster_scoped.is_empty() {
        let kinds: Vec<String> = cluster_scoped.iter().map(ToString::to_string).collect();
        return Some(format!(
            "# LEFT OUT: plugin {} declares the cluster-scoped {} — a host run with --namespace does not start it\n",
            m.name,
            kinds.join(", ")
        ));
    }
    let missing = policy.for_plugin(&m.name).grants.ungranted(m, kinds);
    (!missing.is_empty()).then(|| format!("# LEFT OUT: plugin {} {} — not granted by the policy\n", m.name, missing.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::manifest::fixtures;
    use crate::rbac::fixtures::{kinds, octopus_crd};

    #[test]
    fn memcached_gets_exactly_what_it_declares() {
        let m = fixtures::memcached("");
        let rules = rules(&[m], &HostPolicy::default(), &kinds()).unwrap();
        let find = |res: &str| rules.iter().find(|r| r["resources"][0] == res).cloned();
        assert_eq!(find("memcacheds").unwrap()["verbs"], json!(["get", "list", "patch", "update", "watch"]));
        assert_eq!(find("memcacheds/status").unwrap()["verbs"], json!(["get", "patch", "update"]));
        assert_eq!(find("deployments").unwrap()["apiGroups"], json!(["apps"]));
        assert_eq!(find("pods").unwrap()["verbs"], json!(["get", "list", "watch"]));
        assert!(find("secrets").is_none());
        assert!(find("leases").is_some() && find("events").is_some());
        let webhooks = find("mutatingwebhookconfigurations").expect("admission");
        assert_eq!(webhooks["apiGroups"], json!(["admissionregistration.k8s.io"]));
        assert_eq!(webhooks["verbs"], json!(["create", "delete", "get", "list", "patch", "update", "watch"]));
        assert!(find("validatingwebhookconfigurations").is_some());
    }

    #[test]
    fn a_config_map_source_is_readable_by_name_only() {
        let policy = HostPolicy::from_yaml("plugins: {memcached: {configMap: ops/memcached-config}}").unwrap();
        let rules = rules(&[fixtures::memcached("")], &policy, &kinds()).unwrap();
        let config_maps: Vec<&Value> = rules.iter().filter(|r| r["resources"][0] == "configmaps").collect();
        let want = json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["memcached-config"],
                          "verbs": ["get", "list", "watch"]});
        assert_eq!(config_maps, [&want]);
        let none = super::rules(&[fixtures::memcached("")], &HostPolicy::default(), &kinds()).unwrap();
        assert!(none.iter().all(|r| r["resources"][0] != "configmaps"));
    }

    #[test]
    fn resource_names_come_from_the_crd_not_from_the_kind_name() {
        let mut m = fixtures::memcached("");
        m.parent = Kind::new("sea.example.com", "v1", "Octopus");
        let dir = tempfile::tempdir().unwrap();
        let mut kinds = kinds();
        kinds.add_crds(&octopus_crd(dir.path())).unwrap();
        let rules = rules(&[m], &HostPolicy::default(), &kinds).unwrap();
        let resources: Vec<&Value> =
            rules.iter().filter(|r| r["apiGroups"][0] == "sea.example.com").map(|r| &r["resources"][0]).collect();
        assert_eq!(resources, [&json!("octopodes"), &json!("octopodes/status")]);
    }

    #[test]
    fn an_unknown_kind_is_an_error_naming_it_and_how_to_supply_it() {
        let mut m = fixtures::memcached("");
        m.parent = Kind::new("sea.example.com", "v1", "Octopus");
        let err = rules(&[m], &HostPolicy::default(), &kinds()).unwrap_err();
        assert!(err.to_string().starts_with("kind sea.example.com/v1/Octopus is unknown"), "{err}");
        assert!(err.to_string().contains("--crds") && err.to_string().contains("--kubeconfig"), "{err}");
    }
}
