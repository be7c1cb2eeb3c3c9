//! The controller loop: shared watches, a queue per plugin, reconciles through the runtime,
//! responses applied by [`crate::actions`].
//!
//! Data flows one way: watch → queue → request (from the cache) → plugin call → actions →
//! API server.

pub mod breaker;
mod breaker_gate;
pub mod discovery;
pub mod leader;
mod manager;
mod mapping;
mod plugin_controller;
pub mod queue;
mod rate_limit;
mod reconcile;
pub mod server_version;
pub mod watches;

use std::time::Duration;

pub use breaker::{BreakerConfig, TripReason};
pub use breaker_gate::{BreakerGate, BreakerPhase, BreakerStatus, Permit};
pub use manager::{Manager, PluginError};
pub use mapping::{ObjectKey, only_status_changed, parents_of_change};
pub use plugin_controller::{PluginController, Shared, StartError};
pub use queue::QueueConfig;
pub use reconcile::Outcome;

/// How every plugin controller runs.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Reconciles of one plugin running at once (workers). Default 8.
    pub concurrency: usize,
    /// Re-queue every parent this often; `None` disables. Default 10 minutes.
    pub resync: Option<Duration>,
    /// Backoff and rate limits.
    pub queue: QueueConfig,
    /// How long to keep retrying discovery when the API server is unreachable at start.
    pub discovery_patience: Duration,
    /// How long a stopping plugin may finish the reconciles in flight.
    pub shutdown_grace: Duration,
    /// When a plugin's circuit breaker opens and for how long.
    pub breaker: BreakerConfig,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            concurrency: 8,
            resync: Some(Duration::from_secs(600)),
            queue: QueueConfig::default(),
            discovery_patience: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(10),
            breaker: BreakerConfig::default(),
        }
    }
}
