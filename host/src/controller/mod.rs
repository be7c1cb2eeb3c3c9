//! The controller loop: shared watches, a queue per plugin, reconciles through the runtime,
//! responses applied by [`crate::actions`].
//!
//! Data flows one way: watch → queue → request (from the cache) → plugin call → actions →
//! API server.

pub mod breaker;
mod breaker_gate;
mod cpu_budget;
mod cpu_share;
mod handover;
mod manager;
mod mapping;
mod plugin_controller;
mod reconcile;
mod retirement;
mod shown;

use std::time::Duration;

use crate::cluster::InstallScope;
use crate::policy::HostPolicy;
use crate::queue::QueueConfig;
use crate::watch::InitialList;

pub use breaker::{BreakerConfig, BreakerOutcome, BreakerPhase, TripReason};
pub use breaker_gate::{BreakerGate, BreakerStatus, Permit};
pub use cpu_budget::{CpuBudget, THROTTLED_HOLD};
pub use cpu_share::{CpuGate, CpuShares, CpuStatus, ShareSource};
pub use manager::{Manager, PluginError, Removal};
pub use mapping::{ObjectKey, only_status_changed, parents_of_change};
pub use plugin_controller::{HostServices, PluginController, ReconcileOutcome, Serving, StartError};

/// The default [`ControllerConfig::fold_window`].
pub const DEFAULT_FOLD_WINDOW: Duration = Duration::from_millis(100);

/// How every plugin controller runs.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Reconciles of one plugin running at once (workers). Default 8.
    pub concurrency: usize,
    /// Re-queue every parent this often; `None` disables. Default 10 minutes.
    pub resync: Option<Duration>,
    /// How long a change of a child or related object waits before the reconcile of the parent
    /// it concerns, so that the changes arriving meanwhile are folded into that one reconcile
    /// (a scaled Deployment's new Pods starting and its status catching up: one reconcile and
    /// one status write instead of one per step). The window opens at the first such change and
    /// is not extended by later ones, so a parent whose children change without pause is still
    /// reconciled once per window. A change of the parent itself is reconciled at once, and
    /// brings a waiting parent forward. Zero reconciles at every change, as controller-runtime
    /// does. Default [`DEFAULT_FOLD_WINDOW`].
    pub fold_window: Duration,
    /// Backoff and rate limits.
    pub queue: QueueConfig,
    /// How long to keep retrying discovery when the API server is unreachable at start.
    pub discovery_patience: Duration,
    /// How long a stopping plugin may finish the reconciles in flight.
    pub shutdown_grace: Duration,
    /// How long a starting plugin waits for the first list of each of its kinds. A kind the
    /// host cannot list (RBAC, a CRD not served) then fails the start (`NotStarted`, retried
    /// with backoff) instead of hanging it. Default 30 s.
    pub sync_timeout: Duration,
    /// When a plugin's circuit breaker opens and for how long.
    pub breaker: BreakerConfig,
    /// The host's policy: each plugin's breaker settings over [`ControllerConfig::breaker`],
    /// what removing its file does ([`OnRemove`](crate::policy::OnRemove)) and when its parents
    /// get the `Reconciled` condition ([`ReconciledCondition`](crate::policy::ReconciledCondition)).
    /// Its limits and grants are the runtime's ([`HostPolicy::allowances`]).
    pub policy: HostPolicy,
    /// Where the host watches and writes: the whole cluster (default), or some namespaces
    /// (plugins declaring a cluster-scoped kind are then not started).
    pub install: InstallScope,
    /// This replica's shard name when parents are sharded across replicas (`wasmop run
    /// --sharding`, see [`shard`]): the parent watch selects only the parents labelled for it,
    /// and every replica's workers run (a standby's included). `None` (default): every parent
    /// is watched, and only the leader reconciles.
    pub shard: Option<String>,
    /// How watches make their initial list (default [`InitialList::Auto`]: streaming where the
    /// server serves it).
    pub initial_list: InitialList,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            concurrency: 8,
            resync: Some(Duration::from_secs(600)),
            fold_window: DEFAULT_FOLD_WINDOW,
            queue: QueueConfig::default(),
            discovery_patience: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(10),
            sync_timeout: Duration::from_secs(30),
            breaker: BreakerConfig::default(),
            policy: HostPolicy::default(),
            install: InstallScope::Cluster,
            shard: None,
            initial_list: InitialList::default(),
        }
    }
}
