//! [`Admitter`]: from "plugin name + webhook" to the plugin version serving now, its object cache
//! and its circuit breaker.
//!
//! The host's implementation is the [`Manager`] the reloader keeps in step with the plugins
//! directory: a replaced plugin file serves its new version from the next request on, and a
//! removed one (or one kept only for finalizing calls) is not found.

use std::time::Duration;

use futures::future::BoxFuture;
use wasmop_types::{AdmissionRequest, Verdict, Webhook};

use crate::controller::{BreakerOutcome, Manager, ObjectKey, Serving};
use crate::policy::Grants;
use crate::runtime::CallError;

/// Why a webhook is not served.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum NotServed {
    /// No plugin of that name is loaded (never was, or its file was removed).
    #[error("no plugin named {0:?} is loaded")]
    NoPlugin(String),
    /// The plugin is loaded but its manifest declares no such webhook.
    #[error("plugin {plugin:?} declares no webhook named {webhook:?}")]
    NoWebhook {
        /// The plugin.
        plugin: String,
        /// The webhook asked for.
        webhook: String,
    },
}

/// Why a call gave no verdict. A plugin that failed gets the request denied (fail closed); a
/// call the host did not make ([`CallFailure::is_unavailable`]) leaves the decision to the
/// webhook's `failurePolicy`.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{message}")]
pub struct CallFailure {
    /// CamelCase reason for metrics (`PluginTimeout`, `PluginTrapped`, `CircuitBreakerOpen`, ...).
    pub reason: &'static str,
    /// What the user sees in the denial.
    pub message: String,
}

/// The reasons of calls the host did not make: the webhook is unavailable, not wrong.
const UNAVAILABLE: [&str; 3] = ["CircuitBreakerOpen", "TooManyRequests", "PluginNotLoaded"];

impl CallFailure {
    /// Whether the plugin was not called at all (its circuit breaker is open, too many requests
    /// are in flight, it was unloaded meanwhile): the API server should treat the webhook as
    /// unreachable and apply its `failurePolicy`, as when the host is down.
    pub fn is_unavailable(&self) -> bool {
        UNAVAILABLE.contains(&self.reason)
    }

    /// The failure of a call of `plugin` that failed with `error`.
    pub fn from_call(plugin: &str, error: &CallError) -> Self {
        Self { reason: error.reason(), message: format!("plugin {plugin}: {error}") }
    }
}

/// The plugins that serve admission webhooks, by name.
pub trait Admitter: Send + Sync + 'static {
    /// The webhook `webhook` of plugin `plugin`, as the version loaded now declares it.
    ///
    /// # Errors
    /// [`NotServed`] when no such plugin is loaded or it declares no such webhook.
    fn find(&self, plugin: &str, webhook: &str) -> Result<Webhook, NotServed>;

    /// Call `plugin`'s `webhook` on `request`, through its circuit breaker, interrupted after
    /// `deadline` at the latest. The outcome counts in the breaker like a reconcile's.
    ///
    /// # Errors
    /// [`CallFailure`]: the breaker is open, the plugin is gone, or the call failed (timeout,
    /// trap, memory, malformed answer...).
    fn call(
        &self,
        plugin: &str,
        webhook: &str,
        request: AdmissionRequest,
        deadline: Duration,
    ) -> BoxFuture<'static, Result<Verdict, CallFailure>>;

    /// Every loaded plugin's declared webhooks, by plugin name (for the registration).
    fn webhooks(&self) -> Vec<(String, Vec<Webhook>)>;

    /// What `plugin`'s policy grants it: its webhooks reach `kube-system` only when
    /// `grants.namespaces` names it, and a mutated object is judged under these grants.
    /// Without a policy: nothing beyond the manifest.
    fn grants(&self, plugin: &str) -> Grants {
        let _ = plugin;
        Grants::default()
    }
}

impl Admitter for Manager {
    fn find(&self, plugin: &str, webhook: &str) -> Result<Webhook, NotServed> {
        let controller = self.controller(plugin).filter(|c| c.serving() == Serving::All);
        let controller = controller.ok_or_else(|| NotServed::NoPlugin(plugin.into()))?;
        let found = controller.plugin().manifest().webhooks.iter().find(|w| w.name == webhook).cloned();
        found.ok_or_else(|| NotServed::NoWebhook { plugin: plugin.into(), webhook: webhook.into() })
    }

    fn call(
        &self,
        plugin: &str,
        webhook: &str,
        request: AdmissionRequest,
        deadline: Duration,
    ) -> BoxFuture<'static, Result<Verdict, CallFailure>> {
        let controller = self.controller(plugin).filter(|c| c.serving() == Serving::All);
        let (plugin, webhook) = (plugin.to_owned(), webhook.to_owned());
        Box::pin(async move {
            let gone = || CallFailure { reason: "PluginNotLoaded", message: format!("plugin {plugin} is not loaded") };
            let controller = controller.ok_or_else(gone)?;
            let permit = controller.breaker().try_admit().map_err(|status| CallFailure {
                reason: "CircuitBreakerOpen",
                message: format!("plugin {plugin}'s circuit breaker is open: {status}"),
            })?;
            let version = controller.plugin();
            let key = ObjectKey {
                namespace: request.namespace.clone(),
                name: request.name.clone().unwrap_or_else(|| "(generated name)".into()),
            };
            let called = version.admit_within(&webhook, &request, controller.cache(), deadline).await;
            let result = called.map(|(verdict, _)| verdict).map_err(|error| CallFailure::from_call(&plugin, &error));
            let finished = if result.is_ok() { BreakerOutcome::QUIET } else { BreakerOutcome::FAILED };
            controller.breaker().record(permit, &key, finished);
            result
        })
    }

    fn webhooks(&self) -> Vec<(String, Vec<Webhook>)> {
        self.plugins()
            .into_iter()
            .filter_map(|name| self.controller(&name))
            .filter(|c| c.serving() == Serving::All)
            .map(|c| {
                let plugin = c.plugin();
                (plugin.name().to_owned(), plugin.manifest().webhooks.clone())
            })
            .collect()
    }

    fn grants(&self, plugin: &str) -> Grants {
        self.controller(plugin).map(|c| c.plugin().grants().clone()).unwrap_or_default()
    }
}
