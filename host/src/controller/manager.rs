//! [`Manager`]: every plugin of a host, sharing one client, one discovery cache and one watch
//! per kind.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::ControllerConfig;
use super::cpu_share::CpuShares;
use super::plugin_controller::Serving;
use super::plugin_controller::{HostServices, PluginController, StartError};
use crate::cluster::{Discovery, Resolved};
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::objects::ObjectCache;
use crate::policy::{HostPolicy, OnRemove};
use crate::runtime::{LoadError, Plugin, Runtime};
use crate::shard::{PluginKinds, ShardHost};
use crate::watch::Watches;

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

/// What [`Manager::remove`] did with a plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// No such plugin was running.
    NotRunning,
    /// Stopped: it has no finalizer, or no parent holds it.
    Stopped,
    /// Kept running for finalizing calls only ([`OnRemove::KeepFinalizing`]): `holders`
    /// parents hold its finalizer. [`Manager::stop_retired`] stops it once none does.
    Finalizing {
        /// The version kept.
        version: String,
        /// Parents holding the finalizer when it was retired.
        holders: usize,
    },
    /// Stopped, and its finalizer removed from `released` parents without a finalizing call
    /// ([`OnRemove::ReleaseFinalizers`]).
    Released {
        /// Parents whose finalizer was removed.
        released: usize,
    },
}

/// The running plugins.
pub struct Manager {
    runtime: Runtime,
    shared: HostServices,
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
    /// A manager with no plugin yet, reporting into the runtime's metrics registry.
    pub fn new(client: kube::Client, runtime: Runtime, config: ControllerConfig) -> Self {
        let metrics = Arc::clone(runtime.metrics());
        let shared = HostServices {
            discovery: Arc::new(Discovery::new(client.clone())),
            watches: Watches::with_initial_list(client.clone(), config.install.clone(), config.initial_list),
            leadership: Leadership::new(true, Arc::clone(&metrics)),
            cpu: CpuShares::new(config.concurrency.max(1), &metrics),
            metrics,
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

    /// This host's role. A manager leads from the start; a host with leader election sets it
    /// to standby before starting any plugin, and to leader while it holds the Lease.
    pub fn leadership(&self) -> &Leadership {
        &self.shared.leadership
    }

    /// Every running plugin's parent and child kinds (what the sharder assigns; the child
    /// kinds as discovery resolved them when the plugin started).
    pub async fn families(&self) -> Vec<PluginKinds> {
        let plugins: Vec<(String, Resolved, Vec<crate::contract::Kind>)> = {
            let controllers = self.controllers.lock().expect("controllers lock");
            controllers.iter().map(|(name, c)| (name.clone(), c.parent.clone(), c.plugin().manifest().children.clone())).collect()
        };
        let mut families = Vec::new();
        for (plugin, parent, kinds) in plugins {
            let mut children = Vec::new();
            for kind in &kinds {
                if let Ok(resolved) = self.shared.discovery.resolve(kind, std::time::Duration::ZERO).await {
                    children.push(resolved);
                }
            }
            families.push(PluginKinds { plugin, parent, children });
        }
        families
    }

    /// How many objects the host's cache holds, per watched kind.
    pub fn cached_objects(&self) -> Vec<(String, usize)> {
        self.shared.watches.counts()
    }

    /// Per running plugin, how many of its parents this host's cache holds (with sharding:
    /// the parents this replica owns).
    pub fn cached_parents(&self) -> Vec<(String, usize)> {
        let controllers = self.controllers.lock().expect("controllers lock");
        controllers
            .iter()
            .map(|(name, c)| (name.clone(), self.shared.watches.list(&c.plugin().manifest().parent, None).len()))
            .collect()
    }

    /// Whether every watch has completed its first list.
    pub fn synced(&self) -> bool {
        self.shared.watches.all_synced()
    }

    /// Where the host watches and writes.
    pub fn install(&self) -> &crate::cluster::InstallScope {
        &self.config.install
    }

    /// The host's policy (breaker settings and removal per plugin).
    pub fn policy(&self) -> &HostPolicy {
        &self.config.policy
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
    /// use the new one, and every parent is queued again (a plugin kept for finalizing calls
    /// after its file was removed serves every parent again). Otherwise the old controller is
    /// stopped (its watches released if nobody else needs them) and a new one started.
    ///
    /// # Errors
    /// [`PluginError::Start`] when the new version cannot be started; the old one is then
    /// already stopped only if its kinds changed. A new version whose schema refuses the
    /// configuration in use is not put in service (the old one keeps serving).
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
            current.swap(plugin)?;
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

    /// The plugin's file was removed: stop it, unless parents hold its finalizer; then
    /// `on_remove` decides. [`OnRemove::KeepFinalizing`] keeps it serving finalizing calls only
    /// (see [`Manager::stop_retired`]); [`OnRemove::ReleaseFinalizers`] stops it and removes its
    /// finalizer from every parent, with a Warning event on each (on a standby, which writes
    /// nothing, it only stops it: `Released { released: 0 }`).
    pub async fn remove(&self, name: &str, on_remove: OnRemove) -> Removal {
        let Some(controller) = self.controller(name) else { return Removal::NotRunning };
        let plugin = controller.plugin();
        if !plugin.manifest().finalizer {
            self.stop(name).await;
            return Removal::Stopped;
        }
        match on_remove {
            OnRemove::KeepFinalizing => {
                let holders = controller.finalizer_holders();
                if holders == 0 {
                    self.stop(name).await;
                    return Removal::Stopped;
                }
                controller.retire();
                tracing::info!(
                    plugin = name,
                    holders,
                    "plugin file removed; its last version serves finalizing calls only until no parent holds its finalizer"
                );
                Removal::Finalizing { version: plugin.manifest().version.clone(), holders }
            }
            OnRemove::ReleaseFinalizers => {
                self.stop(name).await;
                if !self.shared.leadership.is_leader() {
                    // Removing finalizers is a write: the leader, which sees the same file
                    // removed, does it.
                    tracing::info!(plugin = name, "plugin file removed on a standby: the leader releases its finalizers");
                    return Removal::Released { released: 0 };
                }
                match controller.release_finalizers().await {
                    Ok(released) => Removal::Released { released },
                    Err(e) => {
                        tracing::error!(plugin = name, error = %e, "cannot list the parents to release the finalizer of a removed plugin");
                        Removal::Released { released: 0 }
                    }
                }
            }
        }
    }

    /// Stop a plugin kept for finalizing calls if no parent holds its finalizer any more
    /// (wait for that with [`PluginController::until_released`]). Returns `false`, and keeps
    /// it, when it serves every parent again (its file came back), parents still hold the
    /// finalizer, or it is not running. Callers serialize it with [`Manager::replace`].
    pub async fn stop_retired(&self, name: &str) -> bool {
        let removed = {
            let mut controllers = self.controllers.lock().expect("controllers lock");
            let retired =
                controllers.get(name).is_some_and(|c| c.serving() == Serving::FinalizingOnly && c.finalizer_holders() == 0);
            if retired { controllers.remove(name) } else { None }
        };
        match removed {
            Some(c) => {
                c.stop(self.config.shutdown_grace).await;
                tracing::info!(plugin = name, "no parent holds the removed plugin's finalizer any more; plugin stopped");
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

impl ShardHost for Manager {
    fn client(&self) -> &kube::Client {
        Manager::client(self)
    }

    fn install(&self) -> &crate::cluster::InstallScope {
        Manager::install(self)
    }

    fn families(&self) -> futures::future::BoxFuture<'_, Vec<PluginKinds>> {
        Box::pin(Manager::families(self))
    }

    fn cached_parents(&self) -> Vec<(String, usize)> {
        Manager::cached_parents(self)
    }

    fn cached_objects(&self) -> Vec<(String, usize)> {
        Manager::cached_objects(self)
    }
}
