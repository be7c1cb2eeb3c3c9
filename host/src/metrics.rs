//! [`Metrics`]: the registry the runtime, the controllers, the reloader and the admission server
//! report into, and the server renders. Prometheus metrics with controller-runtime's names (so
//! existing dashboards work), plus the plugin runtime's own.
//!
//! | metric | labels |
//! |---|---|
//! | `controller_runtime_reconcile_total` | `controller` (the plugin), `result` (`success`, `error`, `requeue_after`) |
//! | `controller_runtime_reconcile_errors_total` | `controller` |
//! | `controller_runtime_reconcile_time_seconds` (histogram) | `controller` |
//! | `workqueue_depth`, `workqueue_adds_total`, `workqueue_retries_total` | `name` (the plugin) |
//! | `wasmop_plugin_call_duration_seconds` (histogram) | `plugin` |
//! | `wasmop_plugin_call_failures_total` | `plugin`, `reason` (`PluginTimeout`, `PluginOutOfMemory`, `PluginTrapped`, ...) |
//! | `wasmop_plugin_memory_high_water_bytes` | `plugin` |
//! | `wasmop_refused_actions_total` | `plugin` |
//! | `wasmop_plugin_info` (1 per loaded plugin) | `plugin`, `version`, `digest` |
//! | `wasmop_plugin_loads_total`, `wasmop_plugin_rejections_total` | `file` |
//! | `wasmop_plugin_circuit_breaker_state` (0 closed, 1 open, 2 half-open) | `plugin` |
//! | `wasmop_plugin_circuit_breaker_trips_total` | `plugin`, `reason` (`Failing`, `HotLoop`) |

use std::sync::{Arc, Mutex, Weak};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    plugin: String,
    reason: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FileLabels {
    file: String,
}

/// How a reconcile ended, for `controller_runtime_reconcile_total{result}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileResult {
    /// Done, no requeue.
    Success,
    /// Done, with a requeue-after.
    RequeueAfter,
    /// Failed.
    Error,
}

/// The host's metrics registry.
pub struct Metrics {
    registry: Mutex<Registry>,
    reconcile_total: Family<ResultLabels, Counter>,
    reconcile_errors: Family<ControllerLabels, Counter>,
    reconcile_time: Family<ControllerLabels, Histogram>,
    call_duration: Family<PluginLabels, Histogram>,
    call_failures: Family<FailureLabels, Counter>,
    memory_high_water: Family<PluginLabels, Gauge>,
    refused: Family<PluginLabels, Counter>,
    loads: Family<FileLabels, Counter>,
    rejections: Family<FileLabels, Counter>,
    breaker_state: Family<PluginLabels, Gauge>,
    breaker_trips: Family<FailureLabels, Counter>,
    leader: Gauge,
    controllers: Arc<ControllerSet>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// One running controller's gauges, taken at scrape time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerSample {
    /// The plugin's name.
    pub plugin: String,
    /// The version serving.
    pub version: String,
    /// sha256 of the version serving, hex.
    pub digest: String,
    /// Parents waiting in the queue.
    pub queue_depth: u64,
    /// Keys ever added to the queue.
    pub queue_adds: u64,
    /// Rate-limited re-adds (retries) of the queue.
    pub queue_retries: u64,
}

/// A running controller as the registry reads it at scrape time ([`Metrics::track`]).
pub trait Reporter: Send + Sync {
    /// The controller's gauges now.
    fn sample(&self) -> ControllerSample;
}

/// The tracked controllers, read at scrape time for queue and plugin gauges; a controller
/// dropped is forgotten.
#[derive(Default)]
struct ControllerSet(Mutex<Vec<Weak<dyn Reporter>>>);

impl std::fmt::Debug for ControllerSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerSet").finish_non_exhaustive()
    }
}

impl Collector for ControllerSet {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let controllers: Vec<ControllerSample> = {
            let mut list = self.0.lock().expect("controllers lock");
            list.retain(|w| w.strong_count() > 0);
            list.iter().filter_map(Weak::upgrade).map(|c| c.sample()).collect()
        };
        let queue =
            |name: &str, help: &str, value: &dyn Fn(&ControllerSample) -> u64, counter: bool, enc: &mut DescriptorEncoder| {
                let mut family = if counter {
                    enc.encode_descriptor(name, help, None, ConstCounter::new(0u64).metric_type())?
                } else {
                    enc.encode_descriptor(name, help, None, ConstGauge::new(0i64).metric_type())?
                };
                for c in &controllers {
                    let labels = [("name", c.plugin.clone())];
                    let metric = family.encode_family(&labels)?;
                    if counter {
                        ConstCounter::new(value(c)).encode(metric)?;
                    } else {
                        ConstGauge::new(value(c) as i64).encode(metric)?;
                    }
                }
                Ok::<(), std::fmt::Error>(())
            };
        queue("workqueue_depth", "Current depth of the work queue", &|c| c.queue_depth, false, &mut encoder)?;
        queue("workqueue_adds", "Total number of adds handled by the work queue", &|c| c.queue_adds, true, &mut encoder)?;
        queue(
            "workqueue_retries",
            "Total number of retries handled by the work queue",
            &|c| c.queue_retries,
            true,
            &mut encoder,
        )?;
        let mut info = encoder.encode_descriptor(
            "wasmop_plugin_info",
            "Loaded plugin versions",
            None,
            ConstGauge::new(0i64).metric_type(),
        )?;
        for c in &controllers {
            let labels = [("plugin", c.plugin.clone()), ("version", c.version.clone()), ("digest", c.digest.clone())];
            ConstGauge::new(1i64).encode(info.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric registered and no sample yet.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let reconcile_total = Family::<ResultLabels, Counter>::default();
        let reconcile_errors = Family::<ControllerLabels, Counter>::default();
        let reconcile_time =
            Family::<ControllerLabels, Histogram>::new_with_constructor(|| Histogram::new(exponential_buckets(0.001, 2.0, 16)));
        let call_duration =
            Family::<PluginLabels, Histogram>::new_with_constructor(|| Histogram::new(exponential_buckets(0.000_01, 2.0, 20)));
        let call_failures = Family::<FailureLabels, Counter>::default();
        let memory_high_water = Family::<PluginLabels, Gauge>::default();
        let refused = Family::<PluginLabels, Counter>::default();
        let loads = Family::<FileLabels, Counter>::default();
        let rejections = Family::<FileLabels, Counter>::default();
        let breaker_state = Family::<PluginLabels, Gauge>::default();
        let breaker_trips = Family::<FailureLabels, Counter>::default();
        let controllers = Arc::new(ControllerSet::default());
        // A host without leader election leads alone: 1 until told otherwise.
        let leader = Gauge::default();
        leader.set(1);
        registry.register(
            "wasmop_leader",
            "1 while this host may write to the cluster (it holds the leader Lease, or runs without election), 0 on standby",
            leader.clone(),
        );
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            reconcile_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            reconcile_errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            reconcile_time.clone(),
        );
        registry.register(
            "wasmop_plugin_call_duration_seconds",
            "Time of one plugin call, instantiation included",
            call_duration.clone(),
        );
        registry.register("wasmop_plugin_call_failures", "Plugin calls that failed, by reason", call_failures.clone());
        registry.register(
            "wasmop_plugin_memory_high_water_bytes",
            "Largest linear memory a plugin call reached",
            memory_high_water.clone(),
        );
        registry.register("wasmop_refused_actions", "Responses refused by the scope checks (nothing written)", refused.clone());
        registry.register("wasmop_plugin_loads", "Successful loads of a plugin file", loads.clone());
        registry.register(
            "wasmop_plugin_rejections",
            "Rejected contents of a plugin file (the previous version kept serving)",
            rejections.clone(),
        );
        registry.register(
            "wasmop_plugin_circuit_breaker_state",
            "Circuit breaker of a plugin: 0 closed, 1 open, 2 half-open",
            breaker_state.clone(),
        );
        registry.register(
            "wasmop_plugin_circuit_breaker_trips",
            "Times a plugin's circuit breaker opened, by reason",
            breaker_trips.clone(),
        );
        registry.register_collector(Box::new(Arc::clone(&controllers)));
        Self {
            registry: Mutex::new(registry),
            reconcile_total,
            reconcile_errors,
            reconcile_time,
            call_duration,
            call_failures,
            memory_high_water,
            refused,
            loads,
            rejections,
            breaker_state,
            breaker_trips,
            leader,
            controllers,
        }
    }

    /// Report queue depth, adds, retries and the loaded version of this controller at every
    /// scrape, for as long as it lives.
    pub fn track(&self, controller: Weak<dyn Reporter>) {
        self.controllers.0.lock().expect("controllers lock").push(controller);
    }

    /// Register a metric of another module (the admission server's) in this registry, under
    /// `name` with `help`.
    pub fn register(&self, name: &str, help: &str, metric: impl prometheus_client::registry::Metric) {
        self.registry.lock().expect("registry lock").register(name, help, metric);
    }

    /// Record one reconcile.
    pub fn reconciled(&self, plugin: &str, result: ReconcileResult, seconds: f64) {
        let result_label = match result {
            ReconcileResult::Success => "success",
            ReconcileResult::RequeueAfter => "requeue_after",
            ReconcileResult::Error => "error",
        };
        self.reconcile_total.get_or_create(&ResultLabels { controller: plugin.into(), result: result_label.into() }).inc();
        if result == ReconcileResult::Error {
            self.reconcile_errors.get_or_create(&ControllerLabels { controller: plugin.into() }).inc();
        }
        self.reconcile_time.get_or_create(&ControllerLabels { controller: plugin.into() }).observe(seconds);
    }

    /// Record one plugin call: its duration and memory, and its failure reason if it failed.
    pub fn called(&self, plugin: &str, seconds: f64, memory_high_water: u64, failure: Option<&str>) {
        let labels = PluginLabels { plugin: plugin.into() };
        self.call_duration.get_or_create(&labels).observe(seconds);
        let gauge = self.memory_high_water.get_or_create(&labels);
        let high = i64::try_from(memory_high_water).unwrap_or(i64::MAX);
        if gauge.get() < high {
            gauge.set(high);
        }
        if let Some(reason) = failure {
            self.call_failures.get_or_create(&FailureLabels { plugin: plugin.into(), reason: reason.into() }).inc();
        }
    }

    /// Record a response refused by the scope checks.
    pub fn refused(&self, plugin: &str) {
        self.refused.get_or_create(&PluginLabels { plugin: plugin.into() }).inc();
    }

    /// Record a load (`ok`) or a rejection of a plugin file.
    pub fn file_loaded(&self, file: &str, ok: bool) {
        let family = if ok { &self.loads } else { &self.rejections };
        family.get_or_create(&FileLabels { file: file.into() }).inc();
    }

    /// Record the state of a plugin's circuit breaker: 0 closed, 1 open, 2 half-open.
    pub fn circuit_breaker(&self, plugin: &str, state: i64) {
        self.breaker_state.get_or_create(&PluginLabels { plugin: plugin.into() }).set(state);
    }

    /// Drop the circuit breaker state of a stopped plugin (its trips stay counted).
    pub fn forget_circuit_breaker(&self, plugin: &str) {
        self.breaker_state.remove(&PluginLabels { plugin: plugin.into() });
    }

    /// Record that a plugin's circuit breaker opened, for `reason` (`Failing`, `HotLoop`).
    pub fn circuit_breaker_tripped(&self, plugin: &str, reason: &str) {
        self.breaker_trips.get_or_create(&FailureLabels { plugin: plugin.into(), reason: reason.into() }).inc();
    }

    /// Record this host's role: `true` while it may write (see [`Leadership`](crate::leader::Leadership)).
    pub fn leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let registry = self.registry.lock().expect("registry lock");
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_runtime_names_are_rendered() {
        let m = Metrics::new();
        m.reconciled("memcached", ReconcileResult::Success, 0.002);
        m.reconciled("memcached", ReconcileResult::Error, 0.003);
        m.called("memcached", 0.00002, 1 << 20, Some("PluginTimeout"));
        m.circuit_breaker("memcached", 2);
        m.circuit_breaker_tripped("memcached", "HotLoop");
        let text = m.render();
        assert!(text.contains("wasmop_leader 1"), "{text}");
        m.leader(false);
        assert!(m.render().contains("wasmop_leader 0"), "{}", m.render());
        assert!(text.contains(r#"controller_runtime_reconcile_total{controller="memcached",result="success"} 1"#), "{text}");
        assert!(text.contains(r#"controller_runtime_reconcile_errors_total{controller="memcached"} 1"#), "{text}");
        assert!(text.contains("controller_runtime_reconcile_time_seconds_bucket"), "{text}");
        assert!(text.contains(r#"wasmop_plugin_call_failures_total{plugin="memcached",reason="PluginTimeout"} 1"#), "{text}");
        assert!(text.contains(r#"wasmop_plugin_memory_high_water_bytes{plugin="memcached"} 1048576"#), "{text}");
        assert!(text.contains(r#"wasmop_plugin_circuit_breaker_state{plugin="memcached"} 2"#), "{text}");
        assert!(text.contains(r#"wasmop_plugin_circuit_breaker_trips_total{plugin="memcached",reason="HotLoop"} 1"#), "{text}");
    }
}
