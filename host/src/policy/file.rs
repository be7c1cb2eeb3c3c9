//! The policy file as written by the host's operator (YAML, camelCase keys), before defaults
//! are applied. Every field is optional; unknown keys are errors so a typo never silently
//! loosens or tightens a limit.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::cpu_share::CpuShareEntry;
use super::grants::SecretAccess;
use super::reconciled::ReconciledCondition;
use super::removal::OnRemove;
use super::verification::VerificationEntry;
use super::webhook_resources::WebhookResourceEntry;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct PolicyFile {
    /// Optional `wasmop.dev/v1alpha1`, for readers.
    #[serde(default)]
    pub api_version: Option<String>,
    /// Optional `HostPolicy`, for readers.
    #[serde(default)]
    pub kind: Option<String>,
    /// Applied to every plugin.
    #[serde(default)]
    pub defaults: PluginEntry,
    /// Per plugin name, over the defaults.
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginEntry>,
    /// The signatures pulled plugins need.
    #[serde(default)]
    pub verification: VerificationEntry,
}

/// Limits and grants of one plugin (or the defaults). Sizes and durations are strings as in
/// the command line (`64Mi`, `500ms`).
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct PluginEntry {
    pub deadline: Option<String>,
    pub memory: Option<String>,
    pub fuel: Option<u64>,
    pub max_response_bytes: Option<String>,
    pub max_actions: Option<usize>,
    /// Call time per second across the plugin's workers, in cores (`0.5`, `500m`).
    pub cpu_share: Option<CpuShareEntry>,
    #[serde(default)]
    pub grants: GrantsEntry,
    #[serde(default)]
    pub breaker: BreakerEntry,
    pub on_remove: Option<OnRemove>,
    pub reconciled_condition: Option<ReconciledCondition>,
    /// The plugin's configuration, inline (a mapping); see [`super::ConfigSource`].
    pub config: Option<serde_json::Value>,
    /// `NAMESPACE/NAME` of the ConfigMap holding the plugin's configuration.
    pub config_map: Option<String>,
    /// The largest plugin file pulled from a registry (`64Mi`).
    pub max_module_bytes: Option<String>,
    /// `oci://REGISTRY/REPOSITORY:TAG` or `@sha256:...`: the registry the file is pulled from.
    pub source: Option<String>,
    /// How often a tag is resolved again (`5m`).
    pub pull_interval: Option<String>,
    /// Plain HTTP to the registry.
    pub insecure: Option<bool>,
    /// The registry's credentials.
    pub credentials: Option<CredentialsEntry>,
}

/// The `credentials` block of a plugin pulled from a registry.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct CredentialsEntry {
    /// `NAMESPACE/NAME` of a `kubernetes.io/dockerconfigjson` Secret.
    pub secret: String,
}

/// The `breaker` block: the plugin's circuit breaker, over the host's defaults.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct BreakerEntry {
    pub window_calls: Option<usize>,
    pub failure_ratio: Option<f64>,
    pub hot_loop_writes: Option<usize>,
    pub hot_loop_window: Option<String>,
    pub cooldown: Option<String>,
    pub max_cooldown: Option<String>,
}

/// The `grants` block.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct GrantsEntry {
    pub namespaces: Option<Vec<String>>,
    /// Namespaces a cluster-scoped parent's plugin may write into (`*`: all but kube-*).
    pub write_namespaces: Option<Vec<String>>,
    pub secrets: Option<SecretAccess>,
    /// `group/version/Kind` of each cluster-scoped child kind granted.
    pub cluster_scoped_children: Option<Vec<String>>,
    /// `group/version/Kind` of each escalation kind granted.
    pub escalation_kinds: Option<Vec<String>>,
    pub allow_host_access: Option<bool>,
    pub adopt_unowned: Option<bool>,
    /// `resource.group` (or `*`) of each resource the plugin's webhooks may admit undeclared,
    /// plain (validate) or `{resource, mode}`.
    pub webhook_resources: Option<Vec<WebhookResourceEntry>>,
}
