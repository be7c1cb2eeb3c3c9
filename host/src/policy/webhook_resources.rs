//! The `webhookResources` grant: resources a plugin's webhooks may admit beyond the kinds its
//! manifest declares, each to validate or to mutate. What they let a webhook do is judged in
//! [`super::webhook_reach`].

use std::collections::BTreeMap;

use serde::Deserialize;

/// What a `webhookResources` entry lets webhooks do with a resource.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WebhookMode {
    /// Validating webhooks may admit (see and veto) it — the meaning of a plain entry.
    #[default]
    Validate,
    /// Mutating webhooks may change it, and validating webhooks admit it.
    Mutate,
}

/// One `webhookResources` entry as written: a plain resource (to validate), or a resource and
/// a mode.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum WebhookResourceEntry {
    /// `deployments.apps`: validate.
    Plain(String),
    /// `{resource: pods, mode: mutate}`.
    WithMode {
        /// The resource.
        resource: String,
        /// The mode.
        #[serde(default)]
        mode: WebhookMode,
    },
}

/// The resources a plugin's admission webhooks may admit beyond the kinds its manifest
/// declares (`webhookResources` in the policy file), each with a [`WebhookMode`].
///
/// Each entry is `RESOURCE.GROUP` as `kubectl` writes it (`deployments.apps`), a bare
/// `RESOURCE` for the core group (`pods`), or `*` for every resource of every group; written
/// plain it grants validating webhooks only, and as `{resource: pods, mode: mutate}` mutating
/// webhooks too.
///
/// ```
/// use wasmop::policy::{WebhookMode, WebhookResourceEntry, WebhookResources};
/// let granted = WebhookResources::parse(&["deployments.apps".into(), "pods".into()]).unwrap();
/// assert!(granted.covers("apps", "deployments", WebhookMode::Validate) && granted.covers("", "pods", WebhookMode::Validate));
/// assert!(!granted.covers("", "pods", WebhookMode::Mutate), "a plain entry is validate only");
/// assert!(!granted.covers("", "secrets", WebhookMode::Validate) && !granted.covers("*", "pods", WebhookMode::Validate));
/// let mutate = WebhookResourceEntry::WithMode { resource: "pods".into(), mode: WebhookMode::Mutate };
/// assert!(WebhookResources::from_entries(&[mutate]).unwrap().covers("", "pods", WebhookMode::Mutate));
/// assert!(WebhookResources::parse(&["*".into()]).unwrap().covers("*", "*", WebhookMode::Validate));
/// assert!(WebhookResources::parse(&["pods in".into()]).is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebhookResources(BTreeMap<String, WebhookMode>);

impl WebhookResources {
    /// The grant a policy file's list of plain entries describes (all to validate).
    ///
    /// # Errors
    /// See [`WebhookResources::from_entries`].
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        Self::from_entries(&entries.iter().cloned().map(WebhookResourceEntry::Plain).collect::<Vec<_>>())
    }

    /// The grant a policy file's list describes; an entry listed twice gets the wider mode.
    ///
    /// # Errors
    /// The first entry that is empty, has whitespace or a `*` other than the whole entry.
    pub fn from_entries(entries: &[WebhookResourceEntry]) -> Result<Self, String> {
        let mut granted = BTreeMap::new();
        for entry in entries {
            let (resource, mode) = match entry {
                WebhookResourceEntry::Plain(r) => (r, WebhookMode::Validate),
                WebhookResourceEntry::WithMode { resource, mode } => (resource, *mode),
            };
            let wildcard_inside = resource.contains('*') && resource != "*";
            if resource.is_empty() || resource.len() > 253 || resource.chars().any(char::is_whitespace) || wildcard_inside {
                return Err(format!(
                    "{resource:?} is not a resource: write RESOURCE.GROUP (deployments.apps), RESOURCE for the core group \
                     (pods), or \"*\" for all"
                ));
            }
            let widest: &mut WebhookMode = granted.entry(resource.clone()).or_default();
            *widest = (*widest).max(mode);
        }
        Ok(Self(granted))
    }

    /// Whether webhooks of `mode` may admit `resource` of API group `group` (either may be `*`).
    pub fn covers(&self, group: &str, resource: &str, mode: WebhookMode) -> bool {
        let granted = |key: &str| self.0.get(key).is_some_and(|m| *m >= mode);
        granted("*") || (group != "*" && resource != "*" && granted(&key(group, resource)))
    }

    /// The entries, sorted: `RESOURCE` (validate) or `RESOURCE (mutate)`, as `WasmPlugin`
    /// status shows them.
    pub fn to_json(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|(resource, mode)| match mode {
                WebhookMode::Validate => resource.clone(),
                WebhookMode::Mutate => format!("{resource} (mutate)"),
            })
            .collect()
    }
}

/// `resource.group`, or `resource` for the core group: how `kubectl` and the policy name it.
pub(super) fn key(group: &str, resource: &str) -> String {
    if group.is_empty() { resource.to_owned() } else { format!("{resource}.{group}") }
}
