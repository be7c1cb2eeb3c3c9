//! [`PluginController`]: the queue, workers and watches of one plugin.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use serde_json::Value;
use tokio::task::JoinSet;

use super::ControllerConfig;
use super::breaker::BreakerOutcome;
use super::breaker_gate::{BreakerGate, Permit};
use super::cpu_share::{CpuGate, CpuShares};
use super::mapping::{ObjectKey, parents_of_change};
use super::shown::ShownChildren;
use crate::actions::{ADOPTION_FIELD_MANAGER, Audit, EventSink, WriteTarget, label_unlabelled_children, managed_selector};
use crate::cluster::{Discovery, DiscoveryError, InstallScope, Resolved};
use crate::contract::{Kind, Manifest, Object, Scope};
use crate::leader::Leadership;
use crate::metrics::{ControllerSample, Metrics, ReconcileResult, Reporter};
use crate::objects::ObjectCache;
use crate::plugin_config::ConfigError;
use crate::plugin_config::{ConfigReader, PluginConfig};
use crate::policy::ReconciledCondition;
use crate::queue::{Lease, WorkQueue};
use crate::runtime::Plugin;
use crate::shard::{self, Handover};
use crate::watch::{Subscriber, Subscription, SyncTimeout, Watches};

/// Why a plugin could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A declared kind is not served by the API server.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// The manifest declares kinds the host's policy does not grant this plugin (Secrets, or
    /// cluster-scoped children of a namespaced parent).
    #[error("plugin {plugin} is not started: it {} (see the host's --policy file)", missing.join(", "))]
    NotGranted {
        /// The plugin.
        plugin: String,
        /// What is declared but not granted.
        missing: Vec<String>,
    },
    /// A kind's first list did not complete within the sync timeout (the host may not list
    /// it): the plugin is not started rather than hanging; the reloader retries with backoff.
    #[error(transparent)]
    NotSynced(#[from] SyncTimeout),
    /// The host watches only some namespaces, and the plugin declares a cluster-scoped kind:
    /// watching it would need a cluster-wide right the namespaced install does not have.
    #[error(
        "plugin {plugin} is not started: it declares the cluster-scoped {}, and this host watches only {install} \
         (run a host for the whole cluster for it, without --namespace)",
        kinds.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    ClusterScopedKinds {
        /// The plugin.
        plugin: String,
        /// Its cluster-scoped kinds.
        kinds: Vec<Kind>,
        /// The host's namespaces.
        install: InstallScope,
    },
    /// The plugin's configuration is missing or not valid (at start, or for a new version:
    /// the version serving, if any, keeps serving with the configuration in use).
    #[error("plugin {plugin}: configuration from {from} not used: {error}")]
    Config {
        /// The plugin.
        plugin: String,
        /// Where the configuration comes from (`policy`, `ConfigMap ops/name`).
        from: String,
        /// What is wrong with it.
        error: ConfigError,
    },
    /// The manifest's scope for the parent differs from the server's.
    #[error("plugin declares {kind} as {declared:?}, but the API server serves it as {served:?}")]
    ScopeMismatch {
        /// The parent kind.
        kind: Kind,
        /// What the manifest says.
        declared: Scope,
        /// What discovery says.
        served: Scope,
    },
}

/// What the worker does with the key next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileOutcome {
    /// Success: reset backoff; requeue after the delay the plugin asked for, if any.
    Done {
        /// The plugin's requeue-after.
        requeue_after: Option<Duration>,
        /// Whether the reconcile wrote anything (a child, a delete, the status, a finalizer).
        wrote: bool,
    },
    /// A retryable failure: requeue with per-object exponential backoff.
    Retry,
    /// A terminal failure: wait for the object to change.
    GiveUp,
}

impl ReconcileOutcome {
    /// What the circuit breaker counts of this outcome.
    pub fn finished(&self) -> BreakerOutcome {
        match self {
            Self::Done { wrote, .. } => BreakerOutcome { failed: false, wrote: *wrote },
            Self::Retry | Self::GiveUp => BreakerOutcome::FAILED,
        }
    }
}

/// Which parents a plugin controller reconciles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serving {
    /// Every parent (a plugin whose file is present).
    All,
    /// Only parents being deleted that hold its finalizer: the file was removed and the policy
    /// keeps the last version for finalizing calls. New and updated parents are left alone
    /// (they get no finalizer).
    FinalizingOnly,
    /// None: the controller is stopped.
    Stopped,
}

/// What becomes of a key a worker took and gives back without reconciling it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HandBack {
    /// Queued again at once (it is reconciled once this host may write again).
    Requeue,
    /// Queued again after the key's rate-limited delay.
    RequeueRateLimited,
    /// Dropped, with its backoff: nothing is to be done for it here.
    Forget,
}

/// The shared parts every plugin controller uses.
#[derive(Clone)]
pub struct HostServices {
    /// The client.
    pub client: kube::Client,
    /// Kind resolution.
    pub discovery: Arc<Discovery>,
    /// The shared watches and cache.
    pub watches: Arc<Watches>,
    /// The host's metrics.
    pub metrics: Arc<Metrics>,
    /// Whether this host may write: workers take keys only while it leads.
    pub leadership: Leadership,
    /// Every plugin's share of CPU.
    pub cpu: Arc<CpuShares>,
}

impl std::fmt::Debug for HostServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostServices").field("watches", &self.watches).finish_non_exhaustive()
    }
}

/// One running plugin: its current version, queue, workers and watch subscriptions.
pub struct PluginController {
    pub(super) plugin: ArcSwap<Plugin>,
    pub(super) shared: HostServices,
    pub(super) parent: Resolved,
    pub(super) queue: WorkQueue<ObjectKey>,
    pub(super) events: EventSink,
    /// Where its writes go, and what they remember (applied contents, create-only kinds).
    pub(super) writes: WriteTarget,
    /// Children its reconciles created and showed the plugin, until the watch delivers them.
    pub(super) shown: ShownChildren,
    /// The configuration every call is given.
    pub(super) config: PluginConfig,
    /// When its parents get the host's `Reconciled` condition (the host policy's).
    pub(super) reconciled_condition: ReconciledCondition,
    breaker: BreakerGate,
    /// Its share of CPU: workers wait here while it is over it.
    pub(super) cpu: Arc<CpuGate>,
    /// Whether every parent is reconciled, or only those being deleted (a removed plugin kept
    /// for its finalizer), or none (stopped).
    pub(super) serving: tokio::sync::watch::Sender<Serving>,
    /// Signalled on every change of a watched kind (a retiring plugin counts its parents then).
    pub(super) changed: tokio::sync::Notify,
    /// This replica's shard name when parents are sharded ([`ControllerConfig::shard`]).
    pub(super) shard: Option<String>,
    /// How long a child's or related object's change waits for others ([`ControllerConfig::fold_window`]).
    fold_window: Duration,
    subscriptions: Mutex<Vec<Subscription>>,
    workers: Mutex<JoinSet<()>>,
    resync: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for PluginController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginController").field("plugin", &self.plugin.load().name()).field("queue", &self.queue).finish()
    }
}

/// Forwards watch events to the controller without keeping it alive.
struct WatchForwarder(std::sync::Weak<PluginController>);

impl Reporter for PluginController {
    fn sample(&self) -> ControllerSample {
        let plugin = self.plugin();
        ControllerSample {
            plugin: plugin.name().to_owned(),
            version: plugin.manifest().version.clone(),
            digest: plugin.digest().to_owned(),
            queue_depth: self.queue_depth() as u64,
            queue_adds: self.queue_adds(),
            queue_retries: self.queue_retries(),
        }
    }
}

impl Subscriber for WatchForwarder {
    fn on_change(&self, kind: &Kind, old_object: Option<&Object>, new_object: Option<&Object>) {
        if let Some(controller) = self.0.upgrade() {
            let (old, new) = (old_object.map(Object::head), new_object.map(Object::head));
            controller.changed.notify_one();
            let plugin = controller.plugin.load();
            if let (Some(gone), None) = (old, new) {
                controller.forget_applied(plugin.manifest(), kind, gone);
            }
            let keys = parents_of_change(plugin.manifest(), &*controller.shared.watches, kind, old_object, new_object);
            if kind == &plugin.manifest().parent {
                controller.writes.statuses.observed(old, new);
                keys.into_iter().for_each(|key| controller.queue.add(key));
                return;
            }
            // A child's creation coming back, which its parent's reconcile already showed the
            // plugin, does not queue that parent again; any other change of a child or related
            // object waits for the others of the fold window.
            let shown = controller.shown.delivered(kind, old, new);
            for key in keys.into_iter().filter(|key| shown.as_ref() != Some(key)) {
                controller.queue.add_after(key, controller.fold_window);
            }
        }
    }
}

impl PluginController {
    /// Read and check the plugin's configuration, resolve the plugin's kinds, check the policy
    /// grants what they need, subscribe to their
    /// watches, wait for the caches to sync (at most `config.sync_timeout` in all), queue every
    /// existing parent, and start `config.concurrency` workers.
    ///
    /// # Errors
    /// [`StartError`] when the configuration is missing or invalid, a kind is not served, the
    /// parent's scope is wrong, the policy does
    /// not grant a declared kind (a Secret, a cluster-scoped child of a namespaced parent), or a
    /// kind's first list does not complete in time (its watch is released again unless another
    /// plugin needs it).
    pub async fn start(plugin: Plugin, shared: HostServices, config: &ControllerConfig) -> Result<Arc<Self>, StartError> {
        let manifest = Arc::clone(plugin.manifest());
        let policy = config.policy.for_plugin(plugin.name());
        let source = policy.config;
        let plugin_config = PluginConfig::load(source.clone(), &manifest, &shared.client)
            .await
            .map_err(|error| StartError::Config { plugin: manifest.name.clone(), from: source.to_string(), error })?;
        let patience = config.discovery_patience;
        // Every declared kind, as `wasmop inspect --kubeconfig` checks them; the first failure.
        let declared = shared.discovery.resolve_declared(&manifest, patience).await.map_err(|mut e| e.remove(0))?;
        let parent = declared.parent;
        if parent.scope != manifest.scope {
            return Err(StartError::ScopeMismatch {
                kind: manifest.parent.clone(),
                declared: manifest.scope,
                served: parent.scope,
            });
        }
        let started = tokio::time::Instant::now();
        // What each kind is watched for: the parent whole (or this replica's shard of it),
        // children through the host's label (and this replica's shard label), related kinds
        // through the fixed part of their selector.
        let mut kinds = vec![(manifest.parent.clone(), parent.clone(), config.shard.as_deref().map(shard::shard_selector))];
        let children = config.shard.as_deref().map_or_else(managed_selector, shard::child_selector);
        for (kind, resolved) in declared.children {
            kinds.push((kind, resolved, Some(children.clone())));
        }
        for (related, (kind, resolved)) in manifest.related.iter().zip(declared.related) {
            kinds.push((kind, resolved, related.fixed_selector()));
        }
        // After discovery: whether a kind is cluster-scoped is the server's answer.
        let install = shared.watches.install();
        let cluster_scoped = install.cluster_scoped_kinds(&manifest, &*shared.discovery);
        if !cluster_scoped.is_empty() {
            return Err(StartError::ClusterScopedKinds {
                plugin: manifest.name.clone(),
                kinds: cluster_scoped.into_iter().cloned().collect(),
                install: install.clone(),
            });
        }
        let missing = plugin.grants().ungranted(&manifest, &*shared.discovery);
        if !missing.is_empty() {
            return Err(StartError::NotGranted { plugin: manifest.name.clone(), missing });
        }
        let writes = WriteTarget::new(shared.client.clone(), Arc::clone(&shared.discovery), parent.resource.clone());
        let controller = Arc::new(Self {
            events: EventSink::new(shared.client.clone(), plugin.name(), config.shard.as_deref()),
            breaker: BreakerGate::new(plugin.name(), policy.breaker.apply(config.breaker.clone()), Arc::clone(&shared.metrics)),
            cpu: shared.cpu.join(plugin.name(), plugin.limits().cpu_share),
            plugin: ArcSwap::from_pointee(plugin),
            parent,
            queue: WorkQueue::new(config.queue),
            writes,
            shown: ShownChildren::default(),
            config: plugin_config,
            reconciled_condition: policy.reconciled_condition,
            serving: tokio::sync::watch::channel(Serving::All).0,
            changed: tokio::sync::Notify::new(),
            shard: config.shard.clone(),
            fold_window: config.fold_window,
            subscriptions: Mutex::default(),
            workers: Mutex::default(),
            resync: Mutex::default(),
            shared,
        });
        let forward: Arc<dyn Subscriber> = Arc::new(WatchForwarder(Arc::downgrade(&controller)));
        for (kind, resolved, selector) in &kinds {
            let sub = controller.shared.watches.subscribe(
                kind,
                &resolved.resource,
                resolved.scope,
                selector.as_deref(),
                Arc::clone(&forward),
            );
            controller.subscriptions.lock().expect("subscriptions lock").push(sub);
        }
        for related in &manifest.related {
            if let Some(label) = related.parent_name_label() {
                controller.shared.watches.index_label(&related.kind, label);
            }
        }
        for (kind, ..) in &kinds {
            let left = config.sync_timeout.saturating_sub(started.elapsed());
            controller
                .shared
                .watches
                .wait_synced(kind, left)
                .await
                .map_err(|e| SyncTimeout { after: config.sync_timeout, ..e })?;
        }
        let reader: Weak<dyn ConfigReader> = Arc::downgrade(&controller) as Weak<dyn ConfigReader>;
        controller.config.follow(reader, controller.shared.client.clone());
        controller.enqueue_all();
        let children: Vec<Resolved> =
            kinds.into_iter().filter(|(kind, ..)| manifest.children.contains(kind)).map(|(_, resolved, _)| resolved).collect();
        let weak = Arc::downgrade(&controller);
        let reporter: Weak<dyn Reporter> = weak;
        controller.shared.metrics.track(reporter);
        let mut workers = controller.workers.lock().expect("workers lock");
        for _ in 0..config.concurrency.max(1) {
            workers.spawn(Arc::clone(&controller).work());
        }
        workers.spawn(Arc::clone(&controller).adopt(children));
        drop(workers);
        if let Some(period) = config.resync {
            *controller.resync.lock().expect("resync lock") = Some(tokio::spawn(Arc::clone(&controller).resync(period)));
        }
        tracing::info!(plugin = %manifest.name, version = %manifest.version, parent = %manifest.parent, "plugin started");
        Ok(controller)
    }

    /// Drop the apply fingerprints that went with an object of `kind` that is gone: a
    /// child's own, or every child's of a parent.
    fn forget_applied(&self, manifest: &Manifest, kind: &Kind, gone: &Value) {
        if kind == &manifest.parent
            && let Some(uid) = gone.pointer("/metadata/uid").and_then(Value::as_str)
        {
            self.writes.applied.forget_parent(uid);
        }
        if manifest.children.contains(kind) {
            self.writes.applied.forget_child(gone);
        }
    }

    /// How many children have an apply fingerprint: only children that exist, of parents that
    /// exist ([`AppliedChildren`](crate::actions::AppliedChildren)).
    pub fn applied_children(&self) -> usize {
        self.writes.applied.len()
    }

    /// The plugin version currently serving.
    pub fn plugin(&self) -> Arc<Plugin> {
        self.plugin.load_full()
    }

    /// The watch cache its plugin's lookups read (for admission calls as for reconciles).
    pub fn cache(&self) -> Arc<dyn ObjectCache> {
        self.shared.watches.clone()
    }

    /// The plugin's configuration.
    pub fn config(&self) -> &PluginConfig {
        &self.config
    }

    /// The plugin's circuit breaker.
    pub fn breaker(&self) -> &BreakerGate {
        &self.breaker
    }

    /// The plugin's share of CPU.
    pub fn cpu(&self) -> &CpuGate {
        &self.cpu
    }

    /// Serve `plugin` from now on: calls in flight finish on the version they started with;
    /// the circuit breaker closes; every parent is queued again so it is reconciled by the new
    /// version.
    ///
    /// # Errors
    /// [`StartError::Config`] when the new version's schema refuses the configuration in use:
    /// the old version keeps serving.
    pub fn swap(&self, plugin: Plugin) -> Result<(), StartError> {
        self.config.accepts(plugin.manifest()).map_err(|error| StartError::Config {
            plugin: plugin.name().to_owned(),
            from: self.config.status().source,
            error,
        })?;
        let old = self.plugin.swap(Arc::new(plugin));
        let new = self.plugin.load();
        tracing::info!(plugin = %new.name(), from = %old.manifest().version, to = %new.manifest().version,
            digest = %new.digest(), "plugin version swapped");
        self.breaker.reset(&format!("version {} loaded", new.manifest().version));
        if self.config.reoffer(new.manifest()) {
            tracing::info!(plugin = %new.name(), "the new version accepts the latest configuration read; using it");
        }
        if self.serving.send_replace(Serving::All) == Serving::FinalizingOnly {
            tracing::info!(plugin = %new.name(), "plugin file is back: reconciling every parent again");
        }
        self.enqueue_all();
        Ok(())
    }

    /// Queue every parent in the cache.
    pub fn enqueue_all(&self) {
        let plugin = self.plugin.load();
        for parent in self.shared.watches.list(&plugin.manifest().parent, None) {
            if let Some(key) = ObjectKey::of(parent.head()) {
                self.queue.add(key);
            }
        }
    }

    /// Parents waiting in the queue.
    pub fn queue_depth(&self) -> usize {
        self.queue.len()
    }

    /// Keys ever added to the queue.
    pub fn queue_adds(&self) -> u64 {
        self.queue.adds_total()
    }

    /// Rate-limited re-adds (retries) of the queue.
    pub fn queue_retries(&self) -> u64 {
        self.queue.retries_total()
    }

    /// Consecutive failed reconciles of a parent (the exponent of its backoff).
    pub fn failures(&self, key: &ObjectKey) -> u32 {
        self.queue.failures(key)
    }

    /// Stop taking work, wait up to `grace` for reconciles in flight, drop the watches.
    pub async fn stop(&self, grace: Duration) {
        self.serving.send_replace(Serving::Stopped);
        self.queue.shutdown();
        self.breaker.stop();
        self.cpu.stop();
        self.config.stop();
        if let Some(resync) = self.resync.lock().expect("resync lock").take() {
            resync.abort();
        }
        let mut workers = std::mem::take(&mut *self.workers.lock().expect("workers lock"));
        let drained = tokio::time::timeout(grace, async { while workers.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!(plugin = %self.plugin.load().name(), "reconciles still running after the grace period; aborting them");
            workers.abort_all();
        }
        self.subscriptions.lock().expect("subscriptions lock").clear();
    }

    /// Resolves once this replica may reconcile: at once when parents are sharded (each
    /// replica works on its own shard), else once it leads.
    async fn until_writing(&self) {
        if self.shard.is_none() {
            self.shared.leadership.until_leader().await;
        }
    }

    /// Whether this replica may reconcile now ([`PluginController::until_writing`]).
    fn writing(&self) -> bool {
        self.shard.is_some() || self.shared.leadership.is_leader()
    }

    /// One worker: past leadership (a standby's workers wait, so its queue fills from the warm
    /// cache and is worked through once it leads; with sharding every replica works), past the
    /// plugin's CPU share and its circuit breaker (each waits, before a key is taken, so queued
    /// keys stay queued: while the plugin is over its share, or the breaker is open), then the
    /// next key, its handover when sharded, its reconcile, its outcome.
    async fn work(self: Arc<Self>) {
        let mut serving = self.serving.subscribe();
        loop {
            tokio::select! {
                () = self.until_writing() => {}
                _ = serving.wait_for(|s| *s == Serving::Stopped) => return,
            }
            if !self.cpu.admit().await {
                return;
            }
            let Some(mut permit) = self.breaker.admit().await else { return };
            let Some(lease) = self.queue.next().await else { return };
            let key = lease.key().clone();
            if !self.writing() {
                // Leadership ended while this worker waited for work: nothing is written.
                self.hand_back(permit, lease, HandBack::Requeue);
                continue;
            }
            if !self.breaker.still_admits(&mut permit) {
                // The breaker opened while this worker waited for work: put the key back.
                self.hand_back(permit, lease, HandBack::Requeue);
                continue;
            }
            if self.skips(&key) {
                // A removed plugin kept for its finalizer reconciles only parents being deleted.
                self.hand_back(permit, lease, HandBack::Forget);
                continue;
            }
            if let Some(me) = &self.shard {
                // A parent not (or no longer) labelled for this replica is not reconciled, and
                // one the sharder moves away is handed back instead ([`shard`]).
                let handover = self.hand_over(&key, me).await;
                if handover != Handover::Reconcile {
                    let then = if handover == Handover::Retry { HandBack::RequeueRateLimited } else { HandBack::Forget };
                    self.hand_back(permit, lease, then);
                    continue;
                }
            }
            let started = std::time::Instant::now();
            let outcome = self.reconcile(&key).await;
            self.breaker.record(permit, &key, outcome.finished());
            let result = match outcome {
                ReconcileOutcome::Done { requeue_after: None, .. } => ReconcileResult::Success,
                ReconcileOutcome::Done { requeue_after: Some(_), .. } => ReconcileResult::RequeueAfter,
                ReconcileOutcome::Retry | ReconcileOutcome::GiveUp => ReconcileResult::Error,
            };
            self.shared.metrics.reconciled(self.plugin.load().name(), result, started.elapsed().as_secs_f64());
            match outcome {
                ReconcileOutcome::Done { requeue_after, .. } => {
                    self.queue.forget(&key);
                    if let Some(delay) = requeue_after {
                        self.queue.add_after(key, delay);
                    }
                }
                ReconcileOutcome::Retry => self.queue.add_rate_limited(key),
                ReconcileOutcome::GiveUp => self.queue.forget(&key),
            }
            lease.done();
        }
    }

    /// Give back a key this worker took and does not reconcile: the breaker's permit unused,
    /// the key as `then` says, the queue's lease on it released.
    fn hand_back(&self, permit: Permit<'_>, lease: Lease<ObjectKey>, then: HandBack) {
        drop(permit);
        let key = lease.key().clone();
        match then {
            HandBack::Requeue => self.queue.add(key),
            HandBack::RequeueRateLimited => self.queue.add_rate_limited(key),
            HandBack::Forget => self.queue.forget(&key),
        }
        lease.done();
    }

    /// Adoption on upgrade, once per start and only when it may write (leading, or any replica
    /// of a sharded host, for the parents of its shard cached then): label the
    /// children of this plugin's parents that an older host wrote without the host's label, so
    /// the label-filtered child watches see them ([`label_unlabelled_children`]). A failure is
    /// logged and not retried: such a child is still read from the API server before it is
    /// applied, only its prune waits for the next start.
    async fn adopt(self: Arc<Self>, children: Vec<Resolved>) {
        let mut serving = self.serving.subscribe();
        tokio::select! {
            () = self.until_writing() => {}
            _ = serving.wait_for(|s| *s == Serving::Stopped) => return,
        }
        let plugin = self.plugin();
        let parents: HashSet<String> = self
            .shared
            .watches
            .list(&plugin.manifest().parent, None)
            .iter()
            .filter_map(|p| p.head().pointer("/metadata/uid").and_then(Value::as_str).map(str::to_owned))
            .collect();
        if parents.is_empty() {
            return;
        }
        // A namespaced install lists each of its namespaces (it may not list the cluster).
        let namespaces: Vec<Option<String>> = match self.shared.watches.install().namespaces() {
            Some(names) => names.iter().cloned().map(Some).collect(),
            None => vec![None],
        };
        let places = children.iter().flat_map(|child| {
            let each = if child.scope == Scope::Namespaced { namespaces.clone() } else { vec![None] };
            each.into_iter().map(move |ns| (child, ns))
        });
        let manifest = plugin.manifest();
        let audit = Audit {
            plugin: plugin.name(),
            version: &manifest.version,
            digest: plugin.digest(),
            parent: "",
            field_manager: ADOPTION_FIELD_MANAGER,
        };
        for (child, namespace) in places {
            let labelled =
                label_unlabelled_children(&self.shared.client, &child.resource, namespace.as_deref(), audit, &parents).await;
            match labelled {
                Ok(0) => {}
                Ok(labelled) => {
                    tracing::info!(plugin = %plugin.name(), kind = %child.resource.kind, labelled, "adopted children an older host wrote: labelled them")
                }
                Err(e) => tracing::warn!(plugin = %plugin.name(), error = %e, "cannot label the children an older host wrote"),
            }
        }
    }

    async fn resync(self: Arc<Self>, period: Duration) {
        let mut tick = tokio::time::interval(period);
        tick.tick().await;
        loop {
            tick.tick().await;
            if self.queue.is_shutting_down() {
                return;
            }
            self.enqueue_all();
        }
    }
}
impl ConfigReader for PluginController {
    /// When the configuration read is valid and new, every parent is reconciled with it.
    fn config_read(&self, read: Result<serde_json::Value, ConfigError>) {
        let plugin = self.plugin();
        if self.config.offer(read, plugin.manifest()) {
            tracing::info!(plugin = %plugin.name(), source = %self.config.source(), "configuration changed; reconciling every parent");
            self.enqueue_all();
        }
    }
}
