//! [`Manager`]: every plugin of a host, sharing one client, one discovery cache and one watch
//! per kind.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::ControllerConfig;
use super::discovery::Discovery;
use super::plugin_controller::{PluginController, Shared, StartError};
use super::watches::Watches;
use crate::runtime::{LoadError, Plugin, Runtime};
use crate::server::Metrics;

/// Why a plugin file was not started.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The file is not a loadable plugin.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The plugin could not be started against the cluster.
    #[error(transparent)]
    Start(#[from] StartError),
    /// Another file already provides a plugin of this name.
    #[error("a plugin named {0:?} is already running")]
    Duplicate(String),
}

/// The running plugins.
pub struct Manager {
    runtime: Runtime,
    shared: Shared,
    config: ControllerConfig,
    controllers: Mutex<BTreeMap<String, Arc<PluginController>>>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.controllers.lock().expect("controllers lock").keys().cloned().collect();
        f.debug_struct("Manager").field("plugins", &names).finish()
    }
}

impl Manager {
    /// A manager with no plugin yet.
    pub fn new(client: kube::Client, runtime: Runtime, config: ControllerConfig) -> Self {
        let shared = Shared {
            discovery: Arc::new(Discovery::new(client.clone())),
            watches: Watches::new(client.clone()),
            metrics: Arc::new(Metrics::new()),
            client,
        };
        Self { runtime, shared, config, controllers: Mutex::default() }
    }

    /// The client every plugin uses.
    pub fn client(&self) -> &kube::Client {
        &self.shared.client
    }

    /// The host's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.shared.metrics
    }

    /// Whether every watch has completed its first list.
    pub fn synced(&self) -> bool {
        self.shared.watches.all_synced()
    }

    /// The runtime plugins are loaded with.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Start a loaded plugin.
    ///
    /// # Errors
    /// [`PluginError::Duplicate`] or [`PluginError::Start`].
    pub async fn start(&self, plugin: Plugin) -> Result<Arc<PluginController>, PluginError> {
        let name = plugin.name().to_owned();
        if self.controllers.lock().expect("controllers lock").contains_key(&name) {
            return Err(PluginError::Duplicate(name));
        }
        let controller = PluginController::start(plugin, self.shared.clone(), &self.config).await?;
        self.controllers.lock().expect("controllers lock").insert(name, Arc::clone(&controller));
        Ok(controller)
    }

    /// Put a new version of a running plugin in service, or start it if it is not running.
    ///
    /// When the new manifest declares the same kinds, scope, finalizer and pruning, the
    /// version is swapped atomically: reconciles in flight finish on the old version, new ones
    /// use the new one, and every parent is queued again. Otherwise the old controller is
    /// stopped (its watches released if nobody else needs them) and a new one started.
    ///
    /// # Errors
    /// [`PluginError::Start`] when the new version cannot be started; the old one is then
    /// already stopped only if its kinds changed.
    pub async fn replace(&self, plugin: Plugin) -> Result<Arc<PluginController>, PluginError> {
        let name = plugin.name().to_owned();
        let Some(current) = self.controller(&name) else { return self.start(plugin).await };
        let (old, new) = (current.plugin(), plugin.manifest());
        let same_shape = {
            let o = old.manifest();
            o.parent == new.parent
                && o.scope == new.scope
                && o.children == new.children
                && o.related == new.related
                && o.finalizer == new.finalizer
                && o.prune == new.prune
        };
        if same_shape {
            current.swap(plugin);
            return Ok(current);
        }
        tracing::info!(plugin = %name, "new version declares other kinds; restarting its controller");
        self.stop(&name).await;
        self.start(plugin).await
    }

    /// The controller of a plugin by name.
    pub fn controller(&self, name: &str) -> Option<Arc<PluginController>> {
        self.controllers.lock().expect("controllers lock").get(name).cloned()
    }

    /// Names of the running plugins.
    pub fn plugins(&self) -> Vec<String> {
        self.controllers.lock().expect("controllers lock").keys().cloned().collect()
    }

    /// Stop one plugin: drain its queue within the grace period and release its watches.
    pub async fn stop(&self, name: &str) -> bool {
        let controller = self.controllers.lock().expect("controllers lock").remove(name);
        match controller {
            Some(c) => {
                c.stop(self.config.shutdown_grace).await;
                tracing::info!(plugin = name, "plugin stopped");
                true
            }
            None => false,
        }
    }

    /// Stop every plugin.
    pub async fn shutdown(&self) {
        for name in self.plugins() {
            self.stop(&name).await;
        }
    }
}
