//! What the host's operator allows each plugin: [`HostPolicy`] → per plugin a
//! [`PluginPolicy`] of [`Limits`] and [`Grants`].
//!
//! The policy comes from the command line (`--deadline`, `--memory`) and an optional YAML file
//! (`--policy`) the operator owns — never from the plugin. Per-plugin entries override the
//! defaults field by field; flags override the file's defaults.
//!
//! ```yaml
//! apiVersion: wasmop.dev/v1alpha1
//! kind: HostPolicy
//! defaults:
//!   deadline: 1s            # wall clock of one call, instantiation included
//!   memory: 64Mi            # all linear memories of one instance together
//!   fuel: 0                 # wasm instructions (roughly) per call; 0 or absent = unmetered
//!   maxResponseBytes: 16Mi  # JSON in one response
//!   maxActions: 10000       # children + deletes + conditions + events in one response
//!   cpuShare: 0.5           # call time per second across its workers, in cores (500m); absent = a fair share
//! plugins:
//!   memcached:
//!     memory: 128Mi
//!   vault-sync:
//!     grants:
//!       secrets: read              # none (default) | read | write
//!       namespaces: [shared-config] # extra namespaces lookups may read; ["*"] = all
//!   tenant-rbac:
//!     grants:
//!       # cluster-scoped child kinds a namespaced parent may write (default none: refused)
//!       clusterScopedChildren: [rbac.authorization.k8s.io/v1/ClusterRole]
//!   pod-policy:
//!     grants:
//!       # resources its webhooks may admit besides the kinds it declares ("*" = all); a plain
//!       # entry is validate (see and veto), mode mutate also lets mutating webhooks change it
//!       webhookResources: [deployments.apps, {resource: pods, mode: mutate}]
//!   namespace-setup:
//!     grants:
//!       # a cluster-scoped parent's plugin writes namespaced objects only in these ("*" = all
//!       # but kube-system, kube-public and kube-node-lease, which must be named)
//!       writeNamespaces: ["*"]
//!       # kinds that escalate (RBAC, admission, CRDs, Namespaces, ...), named one by one
//!       escalationKinds: [rbac.authorization.k8s.io/v1/RoleBinding]
//!       allowHostAccess: false   # Pods / workload templates with hostPath, hostNetwork, privileged, ...
//!       adoptUnowned: false      # whether the manifest's adoptUnowned takes effect
//!   status-heavy:
//!     breaker: {hotLoopWrites: 200, cooldown: 1m}  # see BreakerConfig
//!   db-operator:
//!     onRemove: releaseFinalizers  # keepFinalizing (default) | releaseFinalizers, see OnRemove
//!   busy:
//!     reconciledCondition: onFailure  # always (default) | onFailure, see ReconciledCondition
//!   web:
//!     config: {image: "nginx:1.27"}  # the plugin's configuration; or configMap: NAMESPACE/NAME
//!   pulled:
//!     # the file pulled from an OCI registry into the plugins directory as pulled.wasm
//!     source: oci://registry.example.com/plugins/pulled:1.0   # or @sha256:... (pinned)
//!     pullInterval: 5m          # resolve the tag again this often (default: once at start)
//!     insecure: false           # plain HTTP (a registry on loopback)
//!     credentials: {secret: wasmop/registry-pull}   # a kubernetes.io/dockerconfigjson Secret
//!     maxModuleBytes: 64Mi      # the largest file pulled (also allowed under defaults)
//! verification:                 # signatures of pulled plugins, see Verification
//!   requireSignature: true
//!   keys: [{name: release, file: /etc/wasmop/keys/release.pub}]
//! ```
//!
//! A plugin whose parent is namespaced writes only namespaced kinds, in its parent's namespace;
//! one whose parent is cluster-scoped writes namespaced kinds only in the namespaces
//! `writeNamespaces` grants. Declaring a cluster-scoped child kind (ClusterRole, Namespace, ...)
//! needs `clusterScopedChildren` whatever the parent's scope, naming each kind as
//! `group/version/Kind` (`v1/Namespace` for the core group); an escalation kind
//! ([`ESCALATION_KINDS`]) needs `escalationKinds` naming it too. Without them the plugin is not
//! started, and `wasmop rbac` leaves it out. All of it is one check, [`Grants::may_write`]
//! (docs/security.md). A cluster-scoped child of a namespaced parent gets no owner reference (Kubernetes forbids a namespaced owner for a cluster-scoped
//! object) but the label `wasmop.dev/parent-uid`; it is never garbage-collected nor pruned:
//! the plugin deletes it itself (see [`Grants::cluster_scoped_children`]).
//!
//! A plugin's admission webhooks admit only the kinds its manifest declares (a webhook on
//! Secrets also needs `secrets: read`); anything else, wildcards included, needs
//! `webhookResources` (see [`WebhookResources`]). Without it the plugin is not started, and
//! `wasmop rbac` and `wasmop webhooks` leave it out.

mod allowance;
mod breaker;
mod config_source;
mod cpu_share;
mod escalation;
mod file;
mod gate;
mod grants;
pub mod host_access;
mod host_objects;
mod limits;
mod object_escalation;
mod reconciled;
mod removal;
mod source;
mod verification;
mod view;
mod webhook_reach;
mod webhook_resources;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

pub use allowance::{Allowance, Allowances};
pub use breaker::{BreakerConfig, BreakerOverrides};
pub use config_source::{CONFIG_MAP_KEYS, ConfigMapRef, ConfigSource};
pub use cpu_share::{CpuShare, MAX_CPU_SHARE_MILLIS, MIN_CPU_SHARE_MILLIS, parse_cpu_share};
pub use escalation::{ESCALATION_KINDS, EscalationKind, escalation_kind};
pub use gate::{ParentScope, Refusal};
pub use grants::{Grants, NamespaceGrant, SYSTEM_NAMESPACES, SecretAccess, parse_kind};
pub use host_objects::{HOST_NAME, SHARD_LEASE_LABEL, host_object, is_host_name};
pub use limits::{Limits, MAX_DEADLINE, MAX_MEMORY_BYTES, MIN_MEMORY_BYTES, parse_deadline, parse_memory};
pub use object_escalation::{ObjectEscalation, object_escalations};
pub use reconciled::ReconciledCondition;
pub use removal::OnRemove;
pub use source::{DEFAULT_MAX_MODULE_BYTES, MIN_PULL_INTERVAL, OciReference, PluginSource, SecretRef, is_sha256_digest};
pub use verification::{TrustedKey, Verification};
pub use view::{grants_json, limits_json};
pub use webhook_resources::{WebhookMode, WebhookResourceEntry, WebhookResources};

use crate::contract::Kind;
use crate::units::{self, parse_bytes, parse_duration};
use file::{PluginEntry, PolicyFile};

/// Why a policy file was rejected.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("cannot read policy file {path}: {error}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error: in the message only, so a `{:#}` chain does not print it twice.
        error: std::io::Error,
    },
    /// The YAML does not have the policy's shape (unknown keys included).
    #[error("invalid policy: {0}")]
    Syntax(String),
    /// A value is out of range or malformed.
    #[error("invalid policy: {at}: {message}")]
    Value {
        /// Where: `defaults.memory`, `plugins.x.deadline`, ...
        at: String,
        /// What is wrong.
        message: String,
    },
}

/// Limits, grants and circuit breaker settings of one plugin.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PluginPolicy {
    /// Per-call limits.
    pub limits: Limits,
    /// Capabilities beyond the manifest.
    pub grants: Grants,
    /// Circuit breaker settings that differ from the host's.
    pub breaker: BreakerOverrides,
    /// What happens to the plugin's finalizers when its file is removed.
    pub on_remove: OnRemove,
    /// When the host writes its `Reconciled` condition on the plugin's parents.
    pub reconciled_condition: ReconciledCondition,
    /// Where its configuration comes from.
    pub config: ConfigSource,
    /// `maxModuleBytes`: the largest file pulled for it from a registry (`None`:
    /// [`DEFAULT_MAX_MODULE_BYTES`]); see [`PluginPolicy::max_module_bytes`].
    pub max_module_bytes: Option<u64>,
    /// The registry its file is pulled from (`source`), if any.
    pub source: Option<PluginSource>,
}

impl PluginPolicy {
    /// The largest plugin file pulled for it from a registry.
    pub fn max_module_bytes(&self) -> u64 {
        self.max_module_bytes.unwrap_or(DEFAULT_MAX_MODULE_BYTES)
    }
}

/// The policy of a host: defaults and per-plugin overrides.
///
/// ```
/// use std::time::Duration;
/// use wasmop::policy::HostPolicy;
/// let policy = HostPolicy::from_yaml("defaults: {deadline: 200ms}\nplugins: {big: {memory: 256Mi}}").unwrap();
/// assert_eq!(policy.for_plugin("big").limits.memory_bytes, 256 << 20);
/// assert_eq!(policy.for_plugin("big").limits.deadline, Duration::from_millis(200));
/// assert_eq!(policy.for_plugin("other").limits.memory_bytes, 64 << 20);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostPolicy {
    /// Built-in defaults, then the file's `defaults`, then flags.
    defaults: PluginPolicy,
    /// Per-plugin entries (validated), applied over `defaults` on demand.
    plugins: BTreeMap<String, PluginEntry>,
    /// The signatures plugins pulled from registries need.
    verification: Verification,
}

impl HostPolicy {
    /// Every plugin under `limits`, no grants.
    pub fn uniform(limits: Limits) -> Self {
        Self { defaults: PluginPolicy { limits, ..PluginPolicy::default() }, ..Self::default() }
    }

    /// Parse a policy document.
    ///
    /// # Errors
    /// [`PolicyError::Syntax`] for YAML or unknown keys, [`PolicyError::Value`] for a bad value
    /// (a zero deadline, an unparsable size, ...).
    pub fn from_yaml(text: &str) -> Result<Self, PolicyError> {
        let file: PolicyFile = if text.trim().is_empty() {
            PolicyFile::default()
        } else {
            crate::yaml::from_str(text).map_err(|e| PolicyError::Syntax(e.to_string()))?
        };
        if let Some(kind) = file.kind.as_deref().filter(|k| *k != "HostPolicy") {
            return Err(PolicyError::Value { at: "kind".into(), message: format!("expected HostPolicy, found {kind}") });
        }
        let _ = file.api_version;
        if file.defaults.config.is_some() || file.defaults.config_map.is_some() {
            let field = if file.defaults.config.is_some() { "config" } else { "configMap" };
            return Err(PolicyError::Value {
                at: format!("defaults.{field}"),
                message: "a configuration belongs to one plugin: set it under plugins.NAME".into(),
            });
        }
        let d = &file.defaults;
        let pulled = [
            ("source", d.source.is_some()),
            ("pullInterval", d.pull_interval.is_some()),
            ("insecure", d.insecure.is_some()),
            ("credentials", d.credentials.is_some()),
        ];
        if let Some((field, _)) = pulled.iter().find(|(_, set)| *set) {
            return Err(PolicyError::Value {
                at: format!("defaults.{field}"),
                message: "a source belongs to one plugin: set it under plugins.NAME".into(),
            });
        }
        let defaults = apply(&PluginPolicy::default(), &file.defaults, "defaults")?;
        for (name, entry) in &file.plugins {
            apply(&defaults, entry, &format!("plugins.{name}"))?;
        }
        let verification = file.verification.check().map_err(|(at, message)| PolicyError::Value { at, message })?;
        Ok(Self { defaults, plugins: file.plugins, verification })
    }

    /// Read and parse a policy file.
    ///
    /// # Errors
    /// See [`HostPolicy::from_yaml`]; [`PolicyError::Read`] when the file cannot be read.
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let text =
            std::fs::read_to_string(path).map_err(|error| PolicyError::Read { path: path.display().to_string(), error })?;
        Self::from_yaml(&text)
    }

    /// Override the default deadline and memory cap (command-line flags) for every plugin
    /// whose own entry does not set them.
    #[must_use]
    pub fn with_default_limits(mut self, deadline: Option<std::time::Duration>, memory: Option<u64>) -> Self {
        if let Some(d) = deadline {
            self.defaults.limits.deadline = d;
        }
        if let Some(m) = memory {
            self.defaults.limits.memory_bytes = m;
        }
        self
    }

    /// The policy of the plugin named `name`.
    pub fn for_plugin(&self, name: &str) -> PluginPolicy {
        match self.plugins.get(name) {
            Some(entry) => apply(&self.defaults, entry, name).expect("entries are validated when parsed"),
            None => self.defaults.clone(),
        }
    }

    /// The plugins pulled from a registry, by name (`plugins.NAME.source`).
    pub fn sources(&self) -> Vec<(String, PluginSource)> {
        self.plugins.keys().filter_map(|name| Some((name.clone(), self.for_plugin(name).source?))).collect()
    }

    /// The signatures plugins pulled from registries need (`verification:`).
    pub fn verification(&self) -> &Verification {
        &self.verification
    }

    /// The plugins with an entry of their own.
    pub fn plugin_names(&self) -> Vec<&str> {
        self.plugins.keys().map(String::as_str).collect()
    }

    /// The defaults.
    pub fn defaults(&self) -> &PluginPolicy {
        &self.defaults
    }

    /// What the runtime enforces on each plugin: its limits and grants.
    pub fn allowances(&self) -> Allowances {
        let allowance = |p: PluginPolicy| Allowance { limits: p.limits, grants: p.grants };
        let plugins = self.plugins.keys().map(|name| (name.clone(), allowance(self.for_plugin(name)))).collect();
        Allowances::new(allowance(self.defaults.clone()), plugins)
    }
}

/// `entry` over `base`; `at` names the entry in errors.
fn apply(base: &PluginPolicy, entry: &PluginEntry, at: &str) -> Result<PluginPolicy, PolicyError> {
    let bad = |field: &str, message: String| PolicyError::Value { at: format!("{at}.{field}"), message };
    let mut policy = base.clone();
    let limits = &mut policy.limits;
    if let Some(d) = &entry.deadline {
        limits.deadline = parse_deadline(d).map_err(|e| bad("deadline", e))?;
    }
    if let Some(m) = &entry.memory {
        limits.memory_bytes = parse_memory(m).map_err(|e| bad("memory", e))?;
    }
    if let Some(fuel) = entry.fuel {
        limits.fuel = (fuel > 0).then_some(fuel);
    }
    if let Some(b) = &entry.max_response_bytes {
        let bytes = parse_bytes(b).map_err(|e| bad("maxResponseBytes", e))?;
        limits.output.max_bytes = usize::try_from(bytes).map_err(|_| bad("maxResponseBytes", "too large".into()))?;
    }
    if let Some(n) = entry.max_actions {
        limits.output.max_actions = n;
    }
    if let Some(share) = &entry.cpu_share {
        limits.cpu_share = Some(share.parse().map_err(|e| bad("cpuShare", e))?);
    }
    if let Some(ns) = &entry.grants.namespaces {
        policy.grants.namespaces = NamespaceGrant::from_list(ns.clone());
    }
    if let Some(ns) = &entry.grants.write_namespaces {
        policy.grants.write_namespaces = NamespaceGrant::from_list(ns.clone());
    }
    if let Some(kinds) = &entry.grants.escalation_kinds {
        let parsed: Result<BTreeSet<Kind>, String> = kinds.iter().map(|k| parse_kind(k)).collect();
        let parsed = parsed.map_err(|e| bad("grants.escalationKinds", e))?;
        let known = |k: &Kind| escalation_kind(&k.group, &k.kind).is_some() || object_escalation::is_object_escalation_grant(k);
        if let Some(k) = parsed.iter().find(|k| !known(k)) {
            return Err(bad("grants.escalationKinds", format!("{k} is not an escalation kind (see docs/security.md)")));
        }
        policy.grants.escalation_kinds = parsed;
    }
    if let Some(allow) = entry.grants.allow_host_access {
        policy.grants.allow_host_access = allow;
    }
    if let Some(adopt) = entry.grants.adopt_unowned {
        policy.grants.adopt_unowned = adopt;
    }
    if let Some(s) = entry.grants.secrets {
        policy.grants.secrets = s;
    }
    if let Some(kinds) = &entry.grants.cluster_scoped_children {
        let parsed: Result<_, _> = kinds.iter().map(|k| parse_kind(k)).collect();
        policy.grants.cluster_scoped_children = parsed.map_err(|e| bad("grants.clusterScopedChildren", e))?;
    }
    if let Some(resources) = &entry.grants.webhook_resources {
        policy.grants.webhook_resources =
            WebhookResources::from_entries(resources).map_err(|e| bad("grants.webhookResources", e))?;
    }
    let (b, o) = (&entry.breaker, &mut policy.breaker);
    let duration = |field: &str, value: &Option<String>| -> Result<Option<Duration>, PolicyError> {
        value.as_deref().map(parse_duration).transpose().map_err(|e| bad(&format!("breaker.{field}"), e))
    };
    if let Some(r) = b.failure_ratio {
        if !(r > 0.0 && r <= 1.0) {
            return Err(bad("breaker.failureRatio", format!("{r} is not in (0, 1]")));
        }
        o.failure_ratio = Some(r);
    }
    o.window_calls = b.window_calls.or(o.window_calls);
    o.hot_loop_writes = b.hot_loop_writes.or(o.hot_loop_writes);
    o.hot_loop_window = duration("hotLoopWindow", &b.hot_loop_window)?.or(o.hot_loop_window);
    o.cooldown = duration("cooldown", &b.cooldown)?.or(o.cooldown);
    o.max_cooldown = duration("maxCooldown", &b.max_cooldown)?.or(o.max_cooldown);
    policy.on_remove = entry.on_remove.unwrap_or(policy.on_remove);
    policy.reconciled_condition = entry.reconciled_condition.unwrap_or(policy.reconciled_condition);
    policy.config =
        ConfigSource::from_entry(entry.config.as_ref(), entry.config_map.as_deref()).map_err(|(field, e)| bad(field, e))?;
    if let Some(b) = &entry.max_module_bytes {
        policy.max_module_bytes = Some(units::bytes_in(b, 1024, 1 << 32).map_err(|e| bad("maxModuleBytes", e))?);
    }
    policy.source = source(entry, at)?;
    Ok(policy)
}

/// The `source` of a plugin's entry and its settings; `at` is `plugins.NAME`.
fn source(entry: &PluginEntry, at: &str) -> Result<Option<PluginSource>, PolicyError> {
    let bad = |field: &str, message: String| PolicyError::Value { at: format!("{at}.{field}"), message };
    let Some(text) = &entry.source else {
        let without = [
            ("pullInterval", entry.pull_interval.is_some()),
            ("insecure", entry.insecure.is_some()),
            ("credentials", entry.credentials.is_some()),
        ];
        return match without.iter().find(|(_, set)| *set) {
            Some((field, _)) => Err(bad(field, "needs a source (oci://...) in the same entry".into())),
            None => Ok(None),
        };
    };
    let name = at.strip_prefix("plugins.").unwrap_or(at);
    if !crate::contract::names::is_dns1123_subdomain(name) {
        return Err(bad(
            "source",
            format!("the plugin name {name:?} is the file name NAME.wasm: it must be {}", crate::contract::names::SUBDOMAIN_RULE),
        ));
    }
    let reference = OciReference::parse(text).map_err(|e| bad("source", e))?;
    let pull_interval = entry
        .pull_interval
        .as_deref()
        .map(|i| units::duration_in(i, MIN_PULL_INTERVAL, Duration::from_secs(7 * 24 * 3600)))
        .transpose()
        .map_err(|e| bad("pullInterval", e))?;
    let credentials =
        entry.credentials.as_ref().map(|c| SecretRef::parse(&c.secret)).transpose().map_err(|e| bad("credentials.secret", e))?;
    Ok(Some(PluginSource { reference, pull_interval, insecure: entry.insecure.unwrap_or(false), credentials }))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn an_empty_policy_is_the_documented_defaults() {
        let p = HostPolicy::from_yaml("").unwrap();
        assert_eq!(p.for_plugin("any"), PluginPolicy::default());
        assert_eq!(p.for_plugin("any").limits.deadline, Duration::from_secs(1));
        assert_eq!(p.for_plugin("any").grants.secrets, SecretAccess::None);
        assert!(!p.allowances().uses_fuel());
    }

    #[test]
    fn plugin_entries_override_defaults_field_by_field() {
        let p = HostPolicy::from_yaml(
            "kind: HostPolicy\ndefaults: {deadline: 2s, maxActions: 50}\nplugins:\n  a: {memory: 8Mi, fuel: 1000000, grants: {secrets: read, namespaces: [shared]}}\n",
        )
        .unwrap();
        let a = p.for_plugin("a");
        assert_eq!(a.limits.deadline, Duration::from_secs(2));
        assert_eq!(a.limits.output.max_actions, 50);
        assert_eq!((a.limits.memory_bytes, a.limits.fuel), (8 << 20, Some(1_000_000)));
        assert_eq!(a.grants.secrets, SecretAccess::Read);
        assert!(a.grants.may_read_namespace("shared", Some("x")));
        let b = p.for_plugin("b");
        assert_eq!((b.limits.memory_bytes, b.limits.fuel, b.grants.secrets), (64 << 20, None, SecretAccess::None));
        assert!(p.allowances().uses_fuel());
    }

    #[test]
    fn typos_and_bad_values_are_errors_naming_the_place() {
        let err = HostPolicy::from_yaml("defaults: {deadlin: 1s}").unwrap_err();
        assert!(err.to_string().contains("unknown field `deadlin`"), "{err}");
        let err = HostPolicy::from_yaml("plugins: {a: {memory: lots}}").unwrap_err();
        assert!(err.to_string().starts_with("invalid policy: plugins.a.memory: invalid size \"lots\""), "{err}");
        let err = HostPolicy::from_yaml("defaults: {deadline: 0s}").unwrap_err();
        assert_eq!(err.to_string(), "invalid policy: defaults.deadline: must be more than 0");
        let err = HostPolicy::from_yaml("plugins: {a: {grants: {secrets: all}}}").unwrap_err();
        assert!(matches!(err, PolicyError::Syntax(_)), "{err}");
        assert!(HostPolicy::from_yaml("kind: Pod").is_err());
    }

    #[test]
    fn breaker_settings_override_the_hosts_per_plugin() {
        let p = HostPolicy::from_yaml(
            "defaults: {breaker: {cooldown: 1m}}\nplugins: {busy: {breaker: {hotLoopWrites: 100, failureRatio: 0.5}}}",
        )
        .unwrap();
        let host = BreakerConfig::default();
        let busy = p.for_plugin("busy").breaker.apply(host.clone());
        assert_eq!((busy.hot_loop_writes, busy.failure_ratio, busy.cooldown), (100, 0.5, Duration::from_secs(60)));
        assert_eq!(busy.window_calls, host.window_calls);
        let other = p.for_plugin("other").breaker.apply(host.clone());
        assert_eq!((other.hot_loop_writes, other.cooldown), (host.hot_loop_writes, Duration::from_secs(60)));
        let err = HostPolicy::from_yaml("plugins: {a: {breaker: {failureRatio: 2}}}").unwrap_err();
        assert_eq!(err.to_string(), "invalid policy: plugins.a.breaker.failureRatio: 2 is not in (0, 1]");
    }

    #[test]
    fn a_plugins_config_comes_from_its_own_entry_only() {
        let p = HostPolicy::from_yaml("plugins: {a: {config: {image: x}}, b: {configMap: ops/b-config}}").unwrap();
        assert_eq!(p.for_plugin("a").config, ConfigSource::Inline(serde_json::json!({"image": "x"})));
        assert_eq!(p.for_plugin("b").config.to_string(), "ConfigMap ops/b-config");
        assert_eq!(p.for_plugin("c").config, ConfigSource::None);
        let err = HostPolicy::from_yaml("defaults: {config: {image: x}}").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid policy: defaults.config: a configuration belongs to one plugin: set it under plugins.NAME"
        );
        let err = HostPolicy::from_yaml("plugins: {a: {config: {}, configMap: ops/a}}").unwrap_err();
        assert!(err.to_string().starts_with("invalid policy: plugins.a.configMap: config and configMap are exclusive"), "{err}");
        let err = HostPolicy::from_yaml("plugins: {a: {config: 3}}").unwrap_err();
        assert_eq!(err.to_string(), "invalid policy: plugins.a.config: must be a mapping (a JSON object)");
    }

    #[test]
    fn a_source_is_parsed_with_its_settings_and_belongs_to_one_plugin() {
        let p = HostPolicy::from_yaml(
            "defaults: {maxModuleBytes: 32Mi}\nplugins:\n  memcached: {source: \"oci://127.0.0.1:5000/plugins/memcached:1.0\", pullInterval: 10s, insecure: true, credentials: {secret: ops/pull}}\n  other: {memory: 8Mi}\n",
        )
        .unwrap();
        let m = p.for_plugin("memcached");
        let source = m.source.clone().unwrap();
        assert_eq!(source.reference.to_string(), "oci://127.0.0.1:5000/plugins/memcached:1.0");
        assert_eq!((source.pull_interval, source.insecure), (Some(Duration::from_secs(10)), true));
        assert_eq!(source.credentials.unwrap().to_string(), "ops/pull");
        assert_eq!(m.max_module_bytes(), 32 << 20);
        assert_eq!(p.for_plugin("x").max_module_bytes(), 32 << 20);
        assert_eq!(HostPolicy::default().for_plugin("x").max_module_bytes(), DEFAULT_MAX_MODULE_BYTES);
        assert_eq!(p.sources().into_iter().map(|(n, _)| n).collect::<Vec<_>>(), ["memcached"]);
        let err = HostPolicy::from_yaml("defaults: {source: \"oci://r/x:1\"}").unwrap_err();
        assert_eq!(err.to_string(), "invalid policy: defaults.source: a source belongs to one plugin: set it under plugins.NAME");
        let err = HostPolicy::from_yaml("plugins: {a: {pullInterval: 1m}}").unwrap_err();
        assert_eq!(err.to_string(), "invalid policy: plugins.a.pullInterval: needs a source (oci://...) in the same entry");
        let err = HostPolicy::from_yaml("plugins: {a: {source: \"r/x:1\"}}").unwrap_err();
        assert_eq!(err.to_string(), "invalid policy: plugins.a.source: \"r/x:1\" does not start with oci://");
        let err = HostPolicy::from_yaml("plugins: {a: {source: \"oci://r/x\"}}").unwrap_err();
        assert!(err.to_string().contains("names neither a tag"), "{err}");
        let err = HostPolicy::from_yaml("plugins: {a: {source: \"oci://r/x@sha256:12\"}}").unwrap_err();
        assert!(err.to_string().contains("is not sha256: and 64 lowercase hex digits"), "{err}");
        let err = HostPolicy::from_yaml("plugins: {a: {source: \"oci://r/X:1\"}}").unwrap_err();
        assert!(err.to_string().starts_with("invalid policy: plugins.a.source: repository \"X\""), "{err}");
        let err = HostPolicy::from_yaml("plugins: {a: {source: \"oci://r/x:1\", credentials: {secret: pull}}}").unwrap_err();
        assert!(
            err.to_string().starts_with("invalid policy: plugins.a.credentials.secret: \"pull\" is not NAMESPACE/NAME"),
            "{err}"
        );
        let err = HostPolicy::from_yaml("plugins: {a: {source: \"oci://r/x:1\", pullInterval: 10ms}}").unwrap_err();
        assert!(err.to_string().starts_with("invalid policy: plugins.a.pullInterval:"), "{err}");
    }

    #[test]
    fn a_reference_names_its_registry_repository_tag_and_digest() {
        let d = format!("sha256:{}", "ab".repeat(32));
        let r = OciReference::parse(&format!("oci://localhost:5000/a/b-c/d_e@{d}")).unwrap();
        assert_eq!((r.registry.as_str(), r.repository.as_str(), r.tag.as_deref()), ("localhost:5000", "a/b-c/d_e", None));
        assert_eq!(r.manifest_reference(), d);
        let r = OciReference::parse(&format!("oci://ghcr.io/org/x:v1.0@{d}")).unwrap();
        assert_eq!((r.tag.as_deref(), r.manifest_reference()), (Some("v1.0"), d.as_str()));
        assert_eq!(r.to_string(), format!("oci://ghcr.io/org/x:v1.0@{d}"));
        assert!(OciReference::parse("oci://ghcr.io/x:-bad").is_err());
        assert!(OciReference::parse("oci://ghcr.io/:1").is_err());
        assert!(OciReference::parse("oci:///x:1").is_err());
    }

    #[test]
    fn a_cpu_share_is_read_in_cores_per_plugin_and_a_bad_one_names_its_place() {
        let p =
            HostPolicy::from_yaml("defaults: {cpuShare: 2}\nplugins: {spin: {cpuShare: 0.25}, quiet: {cpuShare: 500m}}").unwrap();
        let share = |name: &str| p.for_plugin(name).limits.cpu_share.map(|s| s.to_string());
        assert_eq!([share("spin"), share("quiet"), share("other")], [Some("0.25".into()), Some("0.5".into()), Some("2".into())]);
        assert_eq!(HostPolicy::default().for_plugin("x").limits.cpu_share, None, "absent: the fair default");
        let err = HostPolicy::from_yaml("plugins: {a: {cpuShare: 0}}").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid policy: plugins.a.cpuShare: 0 is less than the smallest share, 1m (0.001 of a core)"
        );
        let err = HostPolicy::from_yaml("plugins: {a: {cpuShare: lots}}").unwrap_err();
        assert!(err.to_string().starts_with("invalid policy: plugins.a.cpuShare: \"lots\" is not a quantity"), "{err}");
    }

    #[test]
    fn flags_override_the_file_defaults_but_not_plugin_entries() {
        let p = HostPolicy::from_yaml("defaults: {deadline: 2s}\nplugins: {a: {deadline: 5s}, b: {memory: 8Mi}}").unwrap();
        let p = p.with_default_limits(Some(Duration::from_millis(300)), Some(32 << 20));
        assert_eq!(p.for_plugin("a").limits.deadline, Duration::from_secs(5));
        assert_eq!(p.for_plugin("b").limits.deadline, Duration::from_millis(300));
        assert_eq!(p.for_plugin("b").limits.memory_bytes, 8 << 20);
        assert_eq!(p.for_plugin("c").limits.memory_bytes, 32 << 20);
    }
}
