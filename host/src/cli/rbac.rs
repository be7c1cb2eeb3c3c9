//! `wasmop rbac`: the least-privilege RBAC for a host running a set of plugins.
//!
//! Resource names (and scopes) are never guessed from kind names: Kubernetes' own kinds come
//! from a built-in table ([`KnownKinds::builtin`]), custom kinds from the CRD files given with
//! `--crds`, and what neither knows from discovery on the cluster of `--kubeconfig` (or the
//! default kubeconfig). A kind found nowhere is an error naming it.
//!
//! For a host run with `--namespace` (see [`InstallScope`]), `wasmop rbac --namespace NS...`
//! prints a Role and RoleBinding per namespace instead of the ClusterRole, plus only the rights
//! such a host needs outside its namespaces, each with a comment saying why
//! ([`render_namespaced`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use super::RuntimeArgs;
use crate::admission::certs::ADMISSION_SECRET;
use crate::cluster::install_scope::namespace_name;
use crate::cluster::{Discovery, InstallScope};
use crate::contract::{Kind, KindInfo, KindsError, KnownKinds, Manifest, Scope};
use crate::policy::{ConfigSource, HostPolicy, NamespaceGrant};
use crate::reload::scan;

/// Arguments of `wasmop rbac`.
#[derive(Debug, clap::Args)]
pub struct RbacArgs {
    /// Directory of plugins (`*.wasm`) the host will run.
    #[arg(long)]
    pub plugins: PathBuf,
    /// Name of the ClusterRole and ClusterRoleBinding (of the Roles and RoleBindings with
    /// `--namespace`; the others' names start with it).
    #[arg(long, default_value = "wasmop")]
    pub name: String,
    /// A namespace the host watches (`wasmop run --namespace`; repeatable, comma-separated):
    /// a Role and RoleBinding in each instead of a ClusterRole [default: the whole cluster].
    #[arg(long = "namespace", value_name = "NS", value_delimiter = ',', value_parser = namespace_name)]
    pub namespaces: Vec<String>,
    /// Namespace of the host's ServiceAccount (and of its leader-election Lease).
    #[arg(long, default_value = "wasmop-system")]
    pub service_account_namespace: String,
    /// The host's ServiceAccount.
    #[arg(long, default_value = "wasmop")]
    pub service_account: String,
    /// CustomResourceDefinitions of the plugins' custom kinds: a YAML/JSON file, or a
    /// directory of them (repeatable). Their `spec.names.plural` and `spec.scope` are used.
    #[arg(long)]
    pub crds: Vec<PathBuf>,
    /// For a host run with `--metrics-secure`: also the ClusterRole `<name>-metrics-auth`
    /// (create TokenReviews and SubjectAccessReviews, to check each scrape) bound to the host,
    /// and the ClusterRole `<name>-metrics-reader` (get `/metrics`) to bind to the scrapers.
    #[arg(long)]
    pub metrics_secure: bool,
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
const EVENTS: &[&str] = &["create", "patch", "update"];
/// Verbs on Leases: the leader-election Lease (get, create, update), and with `--sharding`
/// each replica's own shard Lease (applied: create, patch; deleted on a clean exit) and the
/// others' (list, to know the live members).
const LEASES: &[&str] = &["get", "list", "create", "update", "patch", "delete"];

/// Rules being gathered, merged per (group, resource).
struct Rules<'k> {
    kinds: &'k KnownKinds,
    grants: BTreeMap<(String, String), BTreeSet<&'static str>>,
    /// Rules in one namespace only: the writes of plugins granted only named namespaces.
    in_namespaces: BTreeMap<String, BTreeMap<(String, String), BTreeSet<&'static str>>>,
    /// ConfigMaps the plugins are configured by, read by name.
    config_maps: BTreeSet<String>,
}

impl<'k> Rules<'k> {
    fn new(kinds: &'k KnownKinds) -> Self {
        Self { kinds, grants: BTreeMap::new(), in_namespaces: BTreeMap::new(), config_maps: BTreeSet::new() }
    }

    /// `verbs` on `kind` (its subresource `sub`, when given).
    fn grant(&mut self, kind: &Kind, sub: Option<&str>, verbs: &[&'static str]) -> Result<(), KindsError> {
        let plural = &self.kinds.resolve(kind)?.plural;
        let resource = match sub {
            Some(sub) => format!("{plural}/{sub}"),
            None => plural.clone(),
        };
        self.grants.entry((kind.group.clone(), resource)).or_default().extend(verbs);
        Ok(())
    }

    /// What the plugins a host with `policy` and `install` starts need (see [`left_out`]).
    fn plugins(&mut self, manifests: &[Manifest], policy: &HostPolicy, install: &InstallScope) -> Result<(), KindsError> {
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
    fn reports(&mut self) -> Result<(), KindsError> {
        let [.., wasm_plugin] = host_kinds();
        self.grant(&wasm_plugin, None, &["get", "list", "create", "patch", "update", "delete"])?;
        self.grant(&wasm_plugin, Some("status"), &["get", "patch", "update"])
    }

    /// The host's two admission webhook configurations (cluster-scoped objects); its
    /// certificate's Secret is in [`admission_secret_role`].
    fn webhook_configurations(&mut self) {
        for resource in ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"] {
            self.grants.entry(("admissionregistration.k8s.io".into(), resource.into())).or_default().extend(WRITE);
        }
    }

    fn into_json(self) -> Vec<Value> {
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
pub(super) fn left_out(m: &Manifest, policy: &HostPolicy, kinds: &KnownKinds, install: &InstallScope) -> Option<String> {
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

/// The ClusterRole and its ClusterRoleBinding to `namespace/service_account`, as YAML. A
/// comment names every plugin left out because the policy does not grant what it declares.
/// The writes a plugin is granted in named namespaces only ([`namespace_write_rules`]) follow
/// as a Role and RoleBinding `<name>-writes` in each of those namespaces.
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
    let left_out: String = manifests.iter().filter_map(|m| left_out(m, policy, kinds, &InstallScope::Cluster)).collect();
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
    let (secret_role, secret_binding) = admission_secret_role(name, namespace, service_account);
    let mut writes = String::new();
    for (ns, rules) in namespace_write_rules(manifests, policy, kinds)? {
        let writes_name = format!("{name}-writes");
        let role = json!({
            "apiVersion": RBAC_V1, "kind": "Role",
            "metadata": {"name": writes_name, "namespace": ns, "annotations": {"wasmop.dev/plugins": names.join(",")}},
            "rules": rules,
        });
        let binding = json!({
            "apiVersion": RBAC_V1, "kind": "RoleBinding",
            "metadata": {"name": writes_name, "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": writes_name},
            "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}],
        });
        writes.push_str(&format!(
            "---\n# In {ns} only: the writes of plugins with a cluster-scoped parent granted this namespace (writeNamespaces).\n{}---\n{}",
            serde_yaml::to_string(&role)?,
            serde_yaml::to_string(&binding)?
        ));
    }
    Ok(format!(
        "# Generated by `wasmop rbac` for plugins: {}\n{left_out}{}---\n{}---\n{}---\n{}{writes}{}",
        names.join(", "),
        serde_yaml::to_string(&role)?,
        serde_yaml::to_string(&binding)?,
        serde_yaml::to_string(&secret_role)?,
        serde_yaml::to_string(&secret_binding)?,
        pull_secret_documents(policy, name, namespace, service_account)?
    ))
}

/// Per namespace, the Secrets the policy names as registry credentials of plugin sources
/// (`plugins.NAME.credentials.secret`).
pub fn pull_secrets(policy: &HostPolicy) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (_, source) in policy.sources() {
        if let Some(secret) = source.credentials {
            out.entry(secret.namespace).or_default().insert(secret.name);
        }
    }
    out
}

/// Role and RoleBinding `<name>-pull-secrets` in each namespace of a Secret the policy names as
/// registry credentials: `get` on exactly those Secrets, by name. Empty without any.
///
/// # Errors
/// A YAML serialization failure.
fn pull_secret_documents(policy: &HostPolicy, name: &str, sa_namespace: &str, service_account: &str) -> anyhow::Result<String> {
    let mut text = String::new();
    for (ns, secrets) in pull_secrets(policy) {
        let role_name = format!("{name}-pull-secrets");
        let role = json!({
            "apiVersion": RBAC_V1, "kind": "Role",
            "metadata": {"name": role_name, "namespace": ns},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": secrets, "verbs": ["get"]}],
        });
        let binding = json!({
            "apiVersion": RBAC_V1, "kind": "RoleBinding",
            "metadata": {"name": role_name, "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name},
            "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": sa_namespace}],
        });
        text.push_str(&format!(
            "---\n# In {ns}: the registry credentials of plugins pulled from registries (host policy credentials.secret), read by name.\n{}---\n{}",
            serde_yaml::to_string(&role)?,
            serde_yaml::to_string(&binding)?
        ));
    }
    Ok(text)
}

/// Role and RoleBinding `<name>-admission` for the admission certificate's Secret, in the
/// host's namespace only: created once, then read and (rotated) updated by name (`wasmop run
/// --admission-cert-secret`).
fn admission_secret_role(name: &str, namespace: &str, service_account: &str) -> (Value, Value) {
    let admission = format!("{name}-admission");
    let role = json!({
        "apiVersion": RBAC_V1, "kind": "Role",
        "metadata": {"name": admission, "namespace": namespace},
        "rules": [
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [ADMISSION_SECRET], "verbs": ["get", "update"]},
        ],
    });
    let binding = json!({
        "apiVersion": RBAC_V1, "kind": "RoleBinding",
        "metadata": {"name": admission, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": admission},
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}],
    });
    (role, binding)
}

/// The RBAC of a host run with `--namespace` for each of `namespaces`, as YAML, bound to
/// `sa_namespace/service_account`. Each object comes with a comment saying why it is needed:
///
/// - in each of `namespaces`, Role and RoleBinding `name`: the plugins' kinds, and events
///   about their parents;
/// - in `sa_namespace`, Role and RoleBinding `name-leader-election`: the leader Lease;
/// - ClusterRole and ClusterRoleBinding `name-reports`: the `WasmPlugin` reports, a
///   cluster-scoped kind;
/// - in `default`, Role and RoleBinding `name-events`: events about `WasmPlugin`s.
///
/// Discovery and `/version` need no rule (every authenticated identity may read them). A
/// comment names every plugin left out: not granted by the policy, or declaring a
/// cluster-scoped kind, which a namespaced host does not start.
///
/// # Errors
/// [`KindsError::Unknown`] for a kind `kinds` does not know; a YAML serialization failure.
pub fn render_namespaced(
    manifests: &[Manifest],
    policy: &HostPolicy,
    kinds: &KnownKinds,
    name: &str,
    namespaces: &BTreeSet<String>,
    sa_namespace: &str,
    service_account: &str,
) -> anyhow::Result<String> {
    let install = InstallScope::Namespaces(namespaces.clone());
    let names: Vec<&str> = manifests.iter().map(|m| m.name.as_str()).collect();
    let flags: Vec<String> = namespaces.iter().map(|ns| format!("--namespace {ns}")).collect();
    let left_out: String = manifests.iter().filter_map(|m| left_out(m, policy, kinds, &install)).collect();
    let subject = json!({"kind": "ServiceAccount", "name": service_account, "namespace": sa_namespace});
    let [event, lease, _] = host_kinds();
    let mut documents: Vec<(String, Value)> = Vec::new();
    let mut bound = |why: String, namespace: Option<&str>, name: String, rules: Vec<Value>| {
        let (role, binding) = if namespace.is_some() { ("Role", "RoleBinding") } else { ("ClusterRole", "ClusterRoleBinding") };
        let metadata = match namespace {
            Some(ns) => json!({"name": name, "namespace": ns}),
            None => json!({"name": name}),
        };
        let mut role_metadata = metadata.clone();
        role_metadata["annotations"] = json!({"wasmop.dev/plugins": names.join(",")});
        documents.push((why, json!({"apiVersion": RBAC_V1, "kind": role, "metadata": role_metadata, "rules": rules})));
        documents.push((
            String::new(),
            json!({"apiVersion": RBAC_V1, "kind": binding, "metadata": metadata,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role, "name": name}, "subjects": [subject]}),
        ));
    };
    let mut plugins = Rules::new(kinds);
    plugins.plugins(manifests, policy, &install)?;
    plugins.grant(&event, None, EVENTS)?;
    let plugins = plugins.into_json();
    for ns in namespaces {
        bound(
            format!("# In {ns}: the plugins' kinds, and events about their parents.\n"),
            Some(ns),
            name.to_owned(),
            plugins.clone(),
        );
    }
    let mut leases = Rules::new(kinds);
    leases.grant(&lease, None, LEASES)?;
    bound(
        format!("# In {sa_namespace}, the host's own namespace: its leader-election Lease (--leader-elect).\n"),
        Some(sa_namespace),
        format!("{name}-leader-election"),
        leases.into_json(),
    );
    let mut reports = Rules::new(kinds);
    reports.reports()?;
    reports.webhook_configurations();
    bound(
        "# Cluster-wide, because WasmPlugin is a cluster-scoped kind: the host reports each plugin it runs (or why it\n\
         # does not) on one, for `kubectl get wasmplugins`. Without it the host logs that it cannot write them and runs on.\n\
         # Also cluster-scoped: the two admission webhook configurations the host keeps for the plugins' webhooks.\n"
            .into(),
        None,
        format!("{name}-reports"),
        reports.into_json(),
    );
    let mut default = Rules::new(kinds);
    default.grant(&event, None, &["create"])?;
    bound(
        "# In default: the CircuitBreakerOpened event is about a WasmPlugin, a cluster-scoped object, and the API server\n\
         # accepts events about cluster-scoped objects only in default or kube-system.\n"
            .into(),
        Some("default"),
        format!("{name}-events"),
        default.into_json(),
    );
    let mut text = format!(
        "# Generated by `wasmop rbac {}` for plugins: {}\n\
         # For a host run with the same --namespace flags (or WASMOP_NAMESPACES={}): it watches and writes only there.\n\
         # No rule for API discovery (/api, /apis) and /version: every authenticated identity may read these non-resource\n\
         # URLs (the default ClusterRoles system:discovery and system:public-info-viewer).\n\
         # The admission certificate's Secret needs the Role `{name}-admission` in the host's namespace, the same as for a\n\
         # host of the whole cluster: `wasmop rbac` without --namespace prints it; the kustomize base and the chart have it.\n{left_out}",
        flags.join(" "),
        names.join(", "),
        namespaces.iter().map(String::as_str).collect::<Vec<_>>().join(","),
    );
    for (i, (why, object)) in documents.iter().enumerate() {
        if i > 0 {
            text.push_str("---\n");
        }
        text.push_str(why);
        text.push_str(&serde_yaml::to_string(object)?);
    }
    text.push_str(&pull_secret_documents(policy, name, sa_namespace, service_account)?);
    Ok(text)
}

const RBAC_V1: &str = "rbac.authorization.k8s.io/v1";

/// The RBAC of secure metrics (`wasmop run --metrics-secure`), as YAML documents each with a
/// comment saying why, to follow [`render`] or [`render_namespaced`]:
///
/// - ClusterRole and ClusterRoleBinding `<name>-metrics-auth` to
///   `namespace/service_account`: `create` on `tokenreviews` and `subjectaccessreviews`
///   (cluster-scoped kinds), which the host makes for each scrape;
/// - ClusterRole `<name>-metrics-reader`: `get` on the non-resource URL `/metrics`, for the
///   scrapers (bind it to Prometheus' ServiceAccount); not bound here.
///
/// # Errors
/// A YAML serialization failure.
pub fn render_metrics(name: &str, namespace: &str, service_account: &str) -> anyhow::Result<String> {
    let auth = format!("{name}-metrics-auth");
    let role = json!({
        "apiVersion": RBAC_V1, "kind": "ClusterRole",
        "metadata": {"name": auth},
        "rules": [
            {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
        ],
    });
    let binding = json!({
        "apiVersion": RBAC_V1, "kind": "ClusterRoleBinding",
        "metadata": {"name": auth},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": auth},
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}],
    });
    let reader = json!({
        "apiVersion": RBAC_V1, "kind": "ClusterRole",
        "metadata": {"name": format!("{name}-metrics-reader")},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    });
    Ok(format!(
        "---\n# Secure metrics (--metrics-secure): the host reviews each scrape's token and access to /metrics.\n{}---\n{}---\n\
         # Secure metrics: bind this to whoever scrapes /metrics (e.g. Prometheus' ServiceAccount).\n{}",
        serde_yaml::to_string(&role)?,
        serde_yaml::to_string(&binding)?,
        serde_yaml::to_string(&reader)?
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
    let (sa_namespace, sa) = (&args.service_account_namespace, &args.service_account);
    let mut yaml = match InstallScope::from_names(&args.namespaces)? {
        InstallScope::Cluster => render(&manifests, &policy, &kinds, &args.name, sa_namespace, sa)?,
        InstallScope::Namespaces(namespaces) => {
            render_namespaced(&manifests, &policy, &kinds, &args.name, &namespaces, sa_namespace, sa)?
        }
    };
    if args.metrics_secure {
        yaml.push_str(&render_metrics(&args.name, sa_namespace, sa)?);
    }
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

    /// A plugin with a cluster-scoped parent (Namespace) writing ConfigMaps and ClusterRoles.
    fn tenant_plugin() -> Manifest {
        let mut m = fixtures::memcached("");
        m.name = "tenants".into();
        m.parent = Kind::new("", "v1", "Namespace");
        m.scope = Scope::Cluster;
        m.related.clear();
        m.children = vec![Kind::new("", "v1", "ConfigMap"), Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole")];
        m
    }

    /// [`WRITE`] as rules list it (sorted).
    const WRITES: &[&str] = &["create", "delete", "get", "list", "patch", "update", "watch"];

    const TENANT_GRANTS: &str = "plugins: {tenants: {grants: {escalationKinds: [v1/Namespace, \
        rbac.authorization.k8s.io/v1/ClusterRole], clusterScopedChildren: [rbac.authorization.k8s.io/v1/ClusterRole], \
        writeNamespaces: WRITE}}}";

    #[test]
    fn writes_granted_in_named_namespaces_are_a_role_in_each_and_only_reads_are_cluster_wide() {
        let policy = HostPolicy::from_yaml(&TENANT_GRANTS.replace("WRITE", "[team-a, team-b]")).unwrap();
        let m = tenant_plugin();
        let cluster = rules(std::slice::from_ref(&m), &policy, &kinds()).unwrap();
        let find = |res: &str| cluster.iter().find(|r| r["resources"][0] == res).cloned();
        assert_eq!(find("configmaps").unwrap()["verbs"], json!(["get", "list", "watch"]), "the watch is cluster-wide");
        assert_eq!(find("clusterroles").unwrap()["verbs"], json!(WRITES), "a cluster-scoped kind has no namespace");
        let per_namespace = namespace_write_rules(std::slice::from_ref(&m), &policy, &kinds()).unwrap();
        assert_eq!(per_namespace.keys().collect::<Vec<_>>(), ["team-a", "team-b"]);
        for rules in per_namespace.values() {
            let writes =
                json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "delete", "patch", "update"]});
            assert_eq!(rules, &[writes], "the reads are cluster-wide already");
        }
        let text = render(std::slice::from_ref(&m), &policy, &kinds(), "w", "ops", "sa").unwrap();
        let documents = documents(&text);
        let roles: Vec<(&str, &str)> = documents
            .iter()
            .filter(|d| d["kind"] == "Role" && d["metadata"]["name"] == "w-writes")
            .map(|d| (d["metadata"]["namespace"].as_str().unwrap(), d["rules"][0]["resources"][0].as_str().unwrap()))
            .collect();
        assert_eq!(roles, [("team-a", "configmaps"), ("team-b", "configmaps")]);
        let bindings = documents.iter().filter(|d| d["kind"] == "RoleBinding" && d["metadata"]["name"] == "w-writes");
        for binding in bindings {
            assert_eq!(binding["subjects"][0], json!({"kind": "ServiceAccount", "name": "sa", "namespace": "ops"}));
        }
    }

    #[test]
    fn writes_granted_everywhere_or_by_namespaced_parents_stay_cluster_wide() {
        let policy = HostPolicy::from_yaml(&TENANT_GRANTS.replace("WRITE", "[\"*\"]")).unwrap();
        let m = tenant_plugin();
        let cluster = rules(std::slice::from_ref(&m), &policy, &kinds()).unwrap();
        let config_maps = cluster.iter().find(|r| r["resources"][0] == "configmaps").unwrap();
        assert_eq!(config_maps["verbs"], json!(WRITES));
        assert!(namespace_write_rules(&[m], &policy, &kinds()).unwrap().is_empty());
        // Another plugin writing ConfigMaps wherever its parents are: the cluster-wide right
        // covers the named namespaces, nothing is repeated.
        let limited = HostPolicy::from_yaml(&TENANT_GRANTS.replace("WRITE", "[team-a]")).unwrap();
        let mut memcached = fixtures::memcached("");
        memcached.children.push(Kind::new("", "v1", "ConfigMap"));
        let both = [tenant_plugin(), memcached];
        assert!(namespace_write_rules(&both, &limited, &kinds()).unwrap().is_empty());
        let text = render(&both, &limited, &kinds(), "w", "ops", "sa").unwrap();
        assert!(!text.contains("w-writes"), "{text}");
    }

    #[test]
    fn secrets_are_in_the_role_only_when_the_policy_grants_them() {
        let mut m = fixtures::memcached("");
        m.children.push(Kind::new("", "v1", "Secret"));
        let text = render(std::slice::from_ref(&m), &HostPolicy::default(), &kinds(), "w", "ns", "sa").unwrap();
        // The ClusterRole (the admission Role grants its own Secret, in the host's namespace).
        let cluster_role = text.split("\n---\n").next().unwrap();
        assert!(!cluster_role.contains("- secrets") && !text.contains("- deployments"), "the whole plugin is left out:\n{text}");
        assert!(text.contains("# LEFT OUT: plugin memcached writes v1/Secret (grant secrets: write)"), "{text}");
        let policy = HostPolicy::from_yaml("plugins: {memcached: {grants: {secrets: write}}}").unwrap();
        let rules = rules(&[m], &policy, &kinds()).unwrap();
        let secrets = rules.iter().find(|r| r["resources"][0] == "secrets").expect("granted");
        assert_eq!(secrets["verbs"], json!(["create", "delete", "get", "list", "patch", "update", "watch"]));
    }

    #[test]
    fn registry_credentials_are_readable_by_name_in_their_namespace_only() {
        let policy = HostPolicy::from_yaml(
            "plugins:\n  memcached: {source: \"oci://r.example.com/memcached:1\", credentials: {secret: pulls/registry}}\n  other: {source: \"oci://r.example.com/other:1\"}\n",
        )
        .unwrap();
        for text in [
            render(&[fixtures::memcached("")], &policy, &kinds(), "w", "ns", "sa").unwrap(),
            render_namespaced(&[fixtures::memcached("")], &policy, &kinds(), "w", &["team".to_owned()].into(), "ns", "sa")
                .unwrap(),
        ] {
            let docs: Vec<Value> = text.split("\n---\n").map(|d| serde_yaml::from_str(d).unwrap()).collect();
            let pulls: Vec<&Value> = docs.iter().filter(|d| d["metadata"]["name"] == "w-pull-secrets").collect();
            assert_eq!(pulls.len(), 2, "{text}");
            assert_eq!(pulls[0]["metadata"]["namespace"], "pulls");
            assert_eq!(
                pulls[0]["rules"],
                json!([{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["registry"], "verbs": ["get"]}])
            );
            assert_eq!(pulls[1]["subjects"][0], json!({"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}));
        }
        let text = render(&[fixtures::memcached("")], &HostPolicy::default(), &kinds(), "w", "ns", "sa").unwrap();
        assert!(!text.contains("pull-secrets"));
    }

    #[test]
    fn the_admission_secret_is_granted_in_the_host_namespace_only() {
        let text = render(&[fixtures::memcached("")], &HostPolicy::default(), &kinds(), "w", "ns", "sa").unwrap();
        let docs: Vec<Value> = text.split("\n---\n").map(|d| serde_yaml::from_str(d).unwrap()).collect();
        let role = docs.iter().find(|d| d["kind"] == "Role").expect("a Role");
        assert_eq!((&role["metadata"]["name"], &role["metadata"]["namespace"]), (&json!("w-admission"), &json!("ns")));
        assert_eq!(
            role["rules"][1],
            json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["wasmop-admission-tls"], "verbs": ["get", "update"]})
        );
        let binding = docs.iter().find(|d| d["kind"] == "RoleBinding").expect("a RoleBinding");
        assert_eq!(binding["subjects"][0], json!({"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}));
        let cluster_role = docs.iter().find(|d| d["kind"] == "ClusterRole").unwrap();
        assert!(!cluster_role["rules"].as_array().unwrap().iter().any(|r| r["resources"][0] == "secrets"));
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
        let scope_only = "plugins: {memcached: {grants: {clusterScopedChildren: [rbac.authorization.k8s.io/v1/ClusterRole]}}}";
        let rules_of = |grant: &str| rules(std::slice::from_ref(&m), &HostPolicy::from_yaml(grant).unwrap(), &kinds()).unwrap();
        assert!(
            !rules_of(scope_only).iter().any(|r| r["resources"][0] == "clusterroles"),
            "an escalation kind needs its grant too"
        );
        let grant = "plugins: {memcached: {grants: {clusterScopedChildren: [rbac.authorization.k8s.io/v1/ClusterRole], \
                     escalationKinds: [rbac.authorization.k8s.io/v1/ClusterRole]}}}";
        let rules = rules_of(grant);
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

    /// The documents of a YAML stream.
    fn documents(text: &str) -> Vec<Value> {
        serde_yaml::Deserializer::from_str(text).map(|d| serde::Deserialize::deserialize(d).unwrap()).collect()
    }

    fn resources(object: &Value) -> Vec<&str> {
        object["rules"].as_array().unwrap().iter().map(|r| r["resources"][0].as_str().unwrap()).collect()
    }

    #[test]
    fn a_namespaced_install_gets_a_role_per_namespace_and_only_the_reports_cluster_wide() {
        let namespaces: BTreeSet<String> = ["team-a".into(), "team-b".into()].into();
        let m = fixtures::memcached("");
        let text = render_namespaced(&[m], &HostPolicy::default(), &kinds(), "w", &namespaces, "ops", "sa").unwrap();
        assert!(text.starts_with("# Generated by `wasmop rbac --namespace team-a --namespace team-b` for plugins: memcached\n"));
        let docs = documents(&text);
        let at = |kind: &str, ns: Option<&str>, name: &str| {
            docs.iter()
                .find(|d| d["kind"] == kind && d["metadata"]["name"] == name && d["metadata"]["namespace"].as_str() == ns)
                .unwrap_or_else(|| panic!("no {kind} {ns:?}/{name} in\n{text}"))
        };
        for ns in ["team-a", "team-b"] {
            let role = at("Role", Some(ns), "w");
            assert_eq!(resources(role), ["pods", "deployments", "memcacheds", "memcacheds/status", "events"]);
            let binding = at("RoleBinding", Some(ns), "w");
            assert_eq!(binding["roleRef"]["kind"], "Role");
            assert_eq!(binding["subjects"], json!([{"kind": "ServiceAccount", "name": "sa", "namespace": "ops"}]));
        }
        assert_eq!(resources(at("Role", Some("ops"), "w-leader-election")), ["leases"]);
        assert_eq!(resources(at("Role", Some("default"), "w-events")), ["events"]);
        let cluster_roles: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "ClusterRole").collect();
        assert_eq!(cluster_roles.len(), 1, "{text}");
        assert_eq!(cluster_roles[0]["metadata"]["name"], "w-reports");
        assert_eq!(
            resources(cluster_roles[0]),
            ["mutatingwebhookconfigurations", "validatingwebhookconfigurations", "wasmplugins", "wasmplugins/status"],
            "the cluster-scoped kinds the host writes: its reports and its webhook configurations"
        );
        assert_eq!(at("ClusterRoleBinding", None, "w-reports")["subjects"][0]["namespace"], "ops");
        // Every right outside the watched namespaces says why it is there.
        for why in [
            "# In ops, the host's own namespace",
            "# Cluster-wide, because WasmPlugin is a cluster-scoped kind",
            "# In default: the CircuitBreakerOpened event",
        ] {
            assert!(text.contains(why), "{why:?} missing from\n{text}");
        }
        assert!(text.contains("No rule for API discovery"), "{text}");
    }

    #[test]
    fn a_plugin_declaring_a_cluster_scoped_kind_is_left_out_of_a_namespaced_install() {
        let mut m = fixtures::memcached("");
        m.children.push(Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole"));
        let grant = "plugins: {memcached: {grants: {clusterScopedChildren: [rbac.authorization.k8s.io/v1/ClusterRole]}}}";
        let policy = HostPolicy::from_yaml(grant).unwrap();
        let namespaces: BTreeSet<String> = ["team-a".into()].into();
        let text = render_namespaced(&[m], &policy, &kinds(), "w", &namespaces, "ops", "sa").unwrap();
        assert!(
            text.contains(
                "# LEFT OUT: plugin memcached declares the cluster-scoped rbac.authorization.k8s.io/v1/ClusterRole — a host \
                 run with --namespace does not start it"
            ),
            "{text}"
        );
        assert!(!text.contains("- clusterroles") && !text.contains("- deployments"), "the whole plugin is left out:\n{text}");
    }

    #[test]
    fn secure_metrics_add_the_reviews_for_the_host_and_a_reader_role_for_scrapers() {
        let text = render(&[fixtures::memcached("")], &HostPolicy::default(), &kinds(), "w", "ns", "sa").unwrap();
        assert!(!text.contains("tokenreviews") && !text.contains("nonResourceURLs"), "only with secure metrics:\n{text}");
        let text = format!("{text}{}", render_metrics("w", "ns", "sa").unwrap());
        let docs = documents(&text);
        let auth = docs.iter().find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == "w-metrics-auth").unwrap();
        assert_eq!(
            auth["rules"],
            json!([
                {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
            ])
        );
        let binding =
            docs.iter().find(|d| d["kind"] == "ClusterRoleBinding" && d["metadata"]["name"] == "w-metrics-auth").unwrap();
        assert_eq!(binding["subjects"], json!([{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]));
        let reader = docs.iter().find(|d| d["metadata"]["name"] == "w-metrics-reader").unwrap();
        assert_eq!(reader["kind"], "ClusterRole");
        assert_eq!(reader["rules"], json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]));
        assert!(!docs.iter().any(|d| d["roleRef"]["name"] == "w-metrics-reader"), "the scrapers' binding is the operator's");
    }

    #[test]
    fn rbac_namespace_is_repeatable_and_the_service_account_namespace_is_its_own_flag() {
        use clap::Parser;
        let args =
            ["wasmop", "rbac", "--plugins", "p", "--namespace", "a,b", "--namespace", "c", "--service-account-namespace", "ops"];
        let crate::cli::Command::Rbac(args) = crate::cli::Cli::try_parse_from(args).unwrap().command else { panic!("not rbac") };
        assert_eq!(args.namespaces, ["a", "b", "c"]);
        assert_eq!(args.service_account_namespace, "ops");
        let bad = crate::cli::Cli::try_parse_from(["wasmop", "rbac", "--plugins", "p", "--namespace", "A"]).unwrap_err();
        assert!(bad.to_string().contains("\"A\" is not a namespace name"), "{bad}");
    }
}
