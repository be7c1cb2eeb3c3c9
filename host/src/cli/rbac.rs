//! `wasmop rbac`: the least-privilege RBAC for a host running a set of plugins.
//!
//! Resource names (and scopes) are never guessed from kind names: Kubernetes' own kinds come
//! from a built-in table ([`KnownKinds::builtin`]), custom kinds from the CRD files given with
//! `--crds`, and what neither knows from discovery on the cluster of `--kubeconfig` (or the
//! default kubeconfig). A kind found nowhere is an error naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use super::RuntimeArgs;
use crate::cluster::Discovery;
use crate::contract::{Kind, KindInfo, KindsError, KnownKinds, Manifest};
use crate::policy::{ConfigSource, HostPolicy};
use crate::reload::scan;

/// Arguments of `wasmop rbac`.
#[derive(Debug, clap::Args)]
pub struct RbacArgs {
    /// Directory of plugins (`*.wasm`) the host will run.
    #[arg(long)]
    pub plugins: PathBuf,
    /// Name of the ClusterRole and ClusterRoleBinding.
    #[arg(long, default_value = "wasmop")]
    pub name: String,
    /// Namespace of the host's ServiceAccount.
    #[arg(long, default_value = "wasmop-system")]
    pub namespace: String,
    /// The host's ServiceAccount.
    #[arg(long, default_value = "wasmop")]
    pub service_account: String,
    /// CustomResourceDefinitions of the plugins' custom kinds: a YAML/JSON file, or a
    /// directory of them (repeatable). Their `spec.names.plural` and `spec.scope` are used.
    #[arg(long)]
    pub crds: Vec<PathBuf>,
    /// Ask this cluster (by discovery) about kinds that are neither built in nor in `--crds`
    /// [default: the default kubeconfig, when there is one].
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete"];

/// The host's own kinds: events it publishes, its leader-election lease, its `WasmPlugin`s.
fn host_kinds() -> [Kind; 3] {
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
/// # Errors
/// [`KindsError::Unknown`] for a kind `kinds` does not know.
pub fn rules(manifests: &[Manifest], policy: &HostPolicy, kinds: &KnownKinds) -> Result<Vec<Value>, KindsError> {
    let mut grants: BTreeMap<(String, String), BTreeSet<&str>> = BTreeMap::new();
    let mut config_maps = BTreeSet::new();
    let mut grant = |kind: &Kind, sub: Option<&str>, verbs: &[&'static str]| -> Result<(), KindsError> {
        let plural = &kinds.resolve(kind)?.plural;
        let resource = match sub {
            Some(sub) => format!("{plural}/{sub}"),
            None => plural.clone(),
        };
        grants.entry((kind.group.clone(), resource)).or_default().extend(verbs);
        Ok(())
    };
    for m in manifests.iter().filter(|m| policy.for_plugin(&m.name).grants.ungranted(m, kinds).is_empty()) {
        grant(&m.parent, None, &["get", "list", "watch", "patch", "update"])?;
        grant(&m.parent, Some("status"), &["get", "patch", "update"])?;
        for child in &m.children {
            grant(child, None, WRITE)?;
        }
        for related in &m.related {
            grant(&related.kind, None, READ)?;
        }
        if let ConfigSource::ConfigMap(at) = policy.for_plugin(&m.name).config {
            config_maps.insert(at.name);
        }
    }
    let [event, lease, wasm_plugin] = host_kinds();
    grant(&event, None, &["create", "patch", "update"])?;
    grant(&lease, None, &["get", "create", "update"])?;
    grant(&wasm_plugin, None, &["get", "list", "create", "patch", "update", "delete"])?;
    grant(&wasm_plugin, Some("status"), &["get", "patch", "update"])?;
    let mut rules: Vec<Value> = grants
        .into_iter()
        .map(|((group, resource), verbs)| json!({"apiGroups": [group], "resources": [resource], "verbs": verbs}))
        .collect();
    if !config_maps.is_empty() {
        rules.push(json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": config_maps, "verbs": READ}));
    }
    Ok(rules)
}

/// The ClusterRole and its ClusterRoleBinding to `namespace/service_account`, as YAML. A
/// comment names every plugin left out because the policy does not grant what it declares.
///
/// # Errors
/// [`KindsError::Unknown`] for a kind `kinds` does not know; a YAML serialization failure.
pub fn render(
    manifests: &[Manifest],
    policy: &HostPolicy,
    kinds: &KnownKinds,
    name: &str,
    namespace: &str,
    service_account: &str,
) -> anyhow::Result<String> {
    let names: Vec<&str> = manifests.iter().map(|m| m.name.as_str()).collect();
    let left_out: String = manifests
        .iter()
        .filter_map(|m| {
            let missing = policy.for_plugin(&m.name).grants.ungranted(m, kinds);
            (!missing.is_empty())
                .then(|| format!("# LEFT OUT: plugin {} {} — not granted by the policy\n", m.name, missing.join(", ")))
        })
        .collect();
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name, "annotations": {"wasmop.dev/plugins": names.join(",")}},
        "rules": rules(manifests, policy, kinds)?,
    });
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}],
    });
    Ok(format!(
        "# Generated by `wasmop rbac` for plugins: {}\n{left_out}{}---\n{}",
        names.join(", "),
        serde_yaml::to_string(&role)?,
        serde_yaml::to_string(&binding)?
    ))
}

/// The built-in kinds, the CRDs in `crds`, and — for any of `needed` still unknown — what the
/// cluster's discovery says (`kubeconfig`, else the default kubeconfig). No cluster is
/// contacted when every needed kind is known offline.
///
/// # Errors
/// A CRD file that cannot be read; a kind still unknown (with the cluster's answer, if one
/// was asked).
pub async fn known_kinds(
    needed: &BTreeSet<Kind>,
    crds: &[PathBuf],
    kubeconfig: Option<&std::path::Path>,
) -> anyhow::Result<KnownKinds> {
    let mut kinds = KnownKinds::builtin();
    for path in crds {
        kinds.add_crds(path)?;
    }
    let unknown: Vec<&Kind> = needed.iter().filter(|k| kinds.get(k).is_none()).collect();
    let Some(first) = unknown.first() else { return Ok(kinds) };
    let client = super::run::client(kubeconfig)
        .await
        .map_err(|e| anyhow::anyhow!("{} (and no cluster to ask: {e:#})", KindsError::Unknown { kind: (*first).clone() }))?;
    let discovery = Discovery::new(client);
    for kind in unknown {
        let resolved = discovery
            .resolve(kind, Duration::from_secs(5))
            .await
            .with_context(|| format!("{} (and the cluster does not serve it)", KindsError::Unknown { kind: kind.clone() }))?;
        kinds.insert(kind, KindInfo { plural: resolved.resource.plural, scope: resolved.scope });
    }
    Ok(kinds)
}

pub(super) async fn run(args: RbacArgs, runtime: &RuntimeArgs) -> anyhow::Result<()> {
    let policy = runtime.host_policy()?;
    let runtime = runtime.runtime()?;
    let mut manifests = Vec::new();
    for file in scan(&args.plugins)? {
        let plugin = runtime.load_file(&file).await.map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        manifests.push(plugin.manifest().as_ref().clone());
    }
    let kinds = known_kinds(&kinds_of(&manifests), &args.crds, args.kubeconfig.as_deref()).await?;
    let yaml = render(&manifests, &policy, &kinds, &args.name, &args.namespace, &args.service_account)?;
    print!("{yaml}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::manifest::fixtures;

    /// The built-in kinds and the repository's CRDs (Memcached).
    fn kinds() -> KnownKinds {
        let mut kinds = KnownKinds::builtin();
        kinds.add_crds(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds")).unwrap();
        kinds
    }

    fn octopus_crd(dir: &std::path::Path) -> PathBuf {
        let file = dir.join("octopus.yaml");
        let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: octopodes.sea.example.com}\n\
                   spec: {group: sea.example.com, scope: Namespaced, names: {kind: Octopus, plural: octopodes}, versions: []}\n";
        std::fs::write(&file, crd).unwrap();
        file
    }

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
    fn secrets_are_in_the_role_only_when_the_policy_grants_them() {
        let mut m = fixtures::memcached("");
        m.children.push(Kind::new("", "v1", "Secret"));
        let text = render(std::slice::from_ref(&m), &HostPolicy::default(), &kinds(), "w", "ns", "sa").unwrap();
        assert!(!text.contains("- secrets") && !text.contains("- deployments"), "the whole plugin is left out:\n{text}");
        assert!(text.contains("# LEFT OUT: plugin memcached writes v1/Secret (grant secrets: write)"), "{text}");
        let policy = HostPolicy::from_yaml("plugins: {memcached: {grants: {secrets: write}}}").unwrap();
        let rules = rules(&[m], &policy, &kinds()).unwrap();
        let secrets = rules.iter().find(|r| r["resources"][0] == "secrets").expect("granted");
        assert_eq!(secrets["verbs"], json!(["create", "delete", "get", "list", "patch", "update", "watch"]));
    }

    #[test]
    fn a_cluster_scoped_child_is_in_the_role_only_when_the_policy_grants_it() {
        let mut m = fixtures::memcached("");
        m.children.push(Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole"));
        let text = render(std::slice::from_ref(&m), &HostPolicy::default(), &kinds(), "w", "ns", "sa").unwrap();
        assert!(!text.contains("- clusterroles") && !text.contains("- deployments"), "the whole plugin is left out:\n{text}");
        assert!(
            text.contains(
                "# LEFT OUT: plugin memcached writes the cluster-scoped rbac.authorization.k8s.io/v1/ClusterRole from a \
                 namespaced parent (grant clusterScopedChildren: [rbac.authorization.k8s.io/v1/ClusterRole])"
            ),
            "{text}"
        );
        let grant = "plugins: {memcached: {grants: {clusterScopedChildren: [rbac.authorization.k8s.io/v1/ClusterRole]}}}";
        let rules = rules(&[m], &HostPolicy::from_yaml(grant).unwrap(), &kinds()).unwrap();
        let roles = rules.iter().find(|r| r["resources"][0] == "clusterroles").expect("granted");
        assert_eq!(roles["verbs"], json!(["create", "delete", "get", "list", "patch", "update", "watch"]));
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

    #[tokio::test]
    async fn known_kinds_asks_no_cluster_when_the_files_know_every_kind() {
        let dir = tempfile::tempdir().unwrap();
        let crd = octopus_crd(dir.path());
        let needed: BTreeSet<Kind> = [Kind::new("sea.example.com", "v1", "Octopus"), Kind::new("", "v1", "Pod")].into();
        let absent = dir.path().join("no-kubeconfig");
        let kinds = known_kinds(&needed, &[crd], Some(&absent)).await.unwrap();
        assert_eq!(kinds.resolve(&Kind::new("sea.example.com", "v1", "Octopus")).unwrap().plural, "octopodes");
        let err = known_kinds(&needed, &[], Some(&absent)).await.unwrap_err();
        let err = format!("{err:#}");
        assert!(err.starts_with("kind sea.example.com/v1/Octopus is unknown") && err.contains("and no cluster to ask"), "{err}");
    }
}
