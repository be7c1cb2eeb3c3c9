//! Each plugin's share of CPU, enforced by its workers: [`CpuShares`] (the host's plugins and
//! the default share they split) and [`CpuGate`] (one plugin's budget, where its workers wait).
//!
//! A plugin's reconcile calls draw on a budget of call time ([`CpuBudget`]) refilled at its
//! share: the policy's `cpuShare`, or by default `--concurrency` cores split evenly between the
//! running plugins ([`CpuShare::fair`], recomputed as plugins start and stop). A worker of a
//! plugin over its share waits before it takes its next key, so that plugin's keys wait in its
//! queue (none is dropped) while other plugins' workers go on. Admission calls are not charged:
//! the API server waits for them, and the webhook's `timeoutSeconds` bounds them.
//!
//! | metric | labels |
//! |---|---|
//! | `wasmop_plugin_cpu_seconds_total`: call time of its reconciles | `plugin` |
//! | `wasmop_plugin_cpu_share`: its share, in cores | `plugin` |
//! | `wasmop_plugin_throttled_seconds_total`: time over its share (no call could start) | `plugin` |

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use super::cpu_budget::{CpuBudget, THROTTLED_HOLD};
use crate::metrics::Metrics;
use crate::policy::CpuShare;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
}

/// The metrics of every plugin's share.
#[derive(Debug, Clone, Default)]
struct CpuMetrics {
    seconds: Family<PluginLabels, Counter<f64, AtomicU64>>,
    share: Family<PluginLabels, Gauge<f64, AtomicU64>>,
    throttled_seconds: Family<PluginLabels, Counter<f64, AtomicU64>>,
}

/// Where a plugin's share comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareSource {
    /// The host policy's `cpuShare` for it (or for every plugin).
    Policy,
    /// The fair default: `--concurrency` cores split between the running plugins.
    Default,
}

impl ShareSource {
    /// `Policy` or `Default`, as the `WasmPlugin` status shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Policy => "Policy",
            Self::Default => "Default",
        }
    }
}

/// A plugin's share as its `WasmPlugin` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuStatus {
    /// The share in force.
    pub share: CpuShare,
    /// Where it comes from.
    pub source: ShareSource,
    /// Whether the plugin went over its share within the last [`THROTTLED_HOLD`].
    pub throttled: bool,
    /// When `throttled` last changed (RFC 3339).
    pub since: String,
    /// One sentence: the share, and what happens while over it.
    pub message: String,
}

impl CpuStatus {
    fn new(share: CpuShare, source: ShareSource, throttled: bool, since: String) -> Self {
        let from = match source {
            ShareSource::Policy => "host policy cpuShare",
            ShareSource::Default => "the default: --concurrency split between the running plugins",
        };
        let message = if throttled {
            format!(
                "over its share of {share} CPU ({from}) within the last {} s: its workers wait before taking the next key",
                THROTTLED_HOLD.as_secs()
            )
        } else {
            format!("within its share of {share} CPU ({from})")
        };
        Self { share, source, throttled, since, message }
    }
}

/// The running plugins' shares: the default share is `concurrency` cores split between them.
/// One per host; cheap to share.
pub struct CpuShares {
    concurrency: usize,
    gates: Mutex<BTreeMap<u64, Weak<CpuGate>>>,
    next_id: AtomicU64,
    metrics: CpuMetrics,
}

impl std::fmt::Debug for CpuShares {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuShares").field("concurrency", &self.concurrency).finish_non_exhaustive()
    }
}

impl CpuShares {
    /// No plugin yet, for a host running `concurrency` workers per plugin; registers the share
    /// metrics in `metrics`.
    pub fn new(concurrency: usize, metrics: &Metrics) -> Arc<Self> {
        let cpu = CpuMetrics::default();
        metrics.register("wasmop_plugin_cpu_seconds", "Call time of a plugin's reconciles, in seconds", cpu.seconds.clone());
        metrics.register(
            "wasmop_plugin_cpu_share",
            "A plugin's share of CPU: call time per second across its workers, in cores",
            cpu.share.clone(),
        );
        metrics.register(
            "wasmop_plugin_throttled_seconds",
            "Time a plugin was over its CPU share, in which its workers could start no reconcile",
            cpu.throttled_seconds.clone(),
        );
        Arc::new(Self { concurrency, gates: Mutex::default(), next_id: AtomicU64::new(0), metrics: cpu })
    }

    /// The default share now: [`CpuShare::fair`] of the running plugins.
    pub fn fair_share(&self) -> CpuShare {
        CpuShare::fair(self.concurrency, self.lock().values().filter(|g| g.strong_count() > 0).count())
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, Weak<CpuGate>>> {
        self.gates.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The gate of a starting plugin with the share `policy` gives it (`None`: the default,
    /// which every other default share then follows). It counts among the running plugins
    /// until [`CpuGate::stop`] or until it is dropped. Starts the task that clears its
    /// throttled status; must run inside a Tokio runtime.
    pub fn join(self: &Arc<Self>, plugin: &str, policy: Option<CpuShare>) -> Arc<CpuGate> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let share = policy.unwrap_or_else(|| CpuShare::fair(self.concurrency, self.lock().len() + 1));
        let source = if policy.is_some() { ShareSource::Policy } else { ShareSource::Default };
        let labels = PluginLabels { plugin: plugin.to_owned() };
        self.metrics.share.get_or_create(&labels).set(share.cores());
        let gate = Arc::new(CpuGate {
            plugin: plugin.to_owned(),
            policy,
            id,
            shares: Arc::downgrade(self),
            state: Mutex::new(GateState {
                budget: CpuBudget::new(share, Instant::now()),
                stopped: false,
                reported_over: 0.0,
                throttled: false,
            }),
            notify: Notify::new(),
            status: watch::Sender::new(CpuStatus::new(share, source, false, crate::actions::timestamp_now())),
            metrics: self.metrics.clone(),
            labels,
        });
        self.lock().insert(id, Arc::downgrade(&gate));
        self.rebalance();
        tokio::spawn(clear_when_due(Arc::downgrade(&gate)));
        gate
    }

    fn leave(&self, id: u64) {
        if self.lock().remove(&id).is_some() {
            self.rebalance();
        }
    }

    /// Give every plugin on the default share the fair share of the plugins running now.
    fn rebalance(&self) {
        let held: Vec<Arc<CpuGate>>;
        {
            let mut gates = self.lock();
            gates.retain(|_, gate| gate.strong_count() > 0);
            held = gates.values().filter_map(Weak::upgrade).collect();
            let fair = CpuShare::fair(self.concurrency, gates.len());
            // Under the lock, so that concurrent starts and stops end on the count of the last.
            for gate in &held {
                gate.set_default(fair);
            }
        }
        // Outside the lock: dropping the last handle of a gate leaves (and locks) again.
        drop(held);
    }
}

struct GateState {
    budget: CpuBudget,
    stopped: bool,
    /// `budget.over_seconds` as last added to the throttled-seconds counter.
    reported_over: f64,
    throttled: bool,
}

/// One plugin's CPU budget: its workers wait here while it is over its share.
pub struct CpuGate {
    plugin: String,
    policy: Option<CpuShare>,
    id: u64,
    shares: Weak<CpuShares>,
    state: Mutex<GateState>,
    /// Wakes waiting workers when the share grows or the plugin stops.
    notify: Notify,
    status: watch::Sender<CpuStatus>,
    metrics: CpuMetrics,
    labels: PluginLabels,
}

impl std::fmt::Debug for CpuGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuGate").field("plugin", &self.plugin).field("status", &*self.status.borrow()).finish_non_exhaustive()
    }
}

impl CpuGate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        // No panic happens half-way through an update; a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current status.
    pub fn status(&self) -> CpuStatus {
        self.status.borrow().clone()
    }

    /// Follow the status: the receiver sees every change (possibly coalesced).
    pub fn subscribe(&self) -> watch::Receiver<CpuStatus> {
        self.status.subscribe()
    }

    /// Wait until the plugin may start a reconcile: at once while within its share, else until
    /// its budget has refilled the call time it owes. `false` once [`CpuGate::stop`] was called.
    ///
    /// # Caveats
    /// Cancel-safe. Must run inside a Tokio runtime with time enabled.
    pub async fn admit(&self) -> bool {
        loop {
            let mut changed = std::pin::pin!(self.notify.notified());
            changed.as_mut().enable();
            let until = {
                let mut state = self.lock();
                if state.stopped {
                    return false;
                }
                let now = Instant::now();
                let wait = state.budget.wait(now);
                self.sync(&mut state, now);
                match wait {
                    None => return true,
                    Some(at) => at,
                }
            };
            let _ = tokio::time::timeout_at(until, changed).await;
        }
    }

    /// Charge a reconcile call that took `elapsed` (the plugin call alone: instantiation and
    /// the guest's run, not the host's writes).
    pub fn charge(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        self.metrics.seconds.get_or_create(&self.labels).inc_by(seconds);
        let mut state = self.lock();
        let now = Instant::now();
        state.budget.charge(seconds, now);
        self.sync(&mut state, now);
    }

    /// Stop the plugin's share: waiting workers are released with `false`, its share no longer
    /// counts in the default, and its share metric goes (the counters stay).
    pub fn stop(&self) {
        self.lock().stopped = true;
        self.notify.notify_waiters();
        self.metrics.share.remove(&self.labels);
        if let Some(shares) = self.shares.upgrade() {
            shares.leave(self.id);
        }
    }

    /// The fair default changed: follow it unless the policy sets the share.
    fn set_default(&self, fair: CpuShare) {
        if self.policy.is_some() {
            return;
        }
        let mut state = self.lock();
        if state.stopped || state.budget.share() == fair {
            return;
        }
        state.budget.set_share(fair, Instant::now());
        self.metrics.share.get_or_create(&self.labels).set(fair.cores());
        tracing::info!(plugin = %self.plugin, share = %fair, "CPU share (default) follows the number of running plugins");
        let throttled = state.throttled;
        self.status.send_modify(|s| *s = CpuStatus::new(fair, ShareSource::Default, throttled, s.since.clone()));
        drop(state);
        self.notify.notify_waiters();
    }

    /// Bring the throttled-seconds counter and the throttled status up to `now`.
    fn sync(&self, state: &mut GateState, now: Instant) {
        let over = state.budget.over_seconds(now);
        if over > state.reported_over {
            self.metrics.throttled_seconds.get_or_create(&self.labels).inc_by(over - state.reported_over);
            state.reported_over = over;
        }
        let throttled = state.budget.throttled(now).is_some();
        if throttled == state.throttled {
            return;
        }
        state.throttled = throttled;
        let share = state.budget.share();
        if throttled {
            tracing::info!(plugin = %self.plugin, %share, "plugin over its CPU share: its workers wait before taking the next key");
        } else {
            tracing::info!(plugin = %self.plugin, %share, "plugin back within its CPU share");
        }
        let since = crate::actions::timestamp_now();
        self.status.send_modify(|s| *s = CpuStatus::new(share, s.source, throttled, since));
    }

    /// When the throttled status clears if nothing else is charged (`None`: not throttled).
    fn clears_at(&self) -> Option<Instant> {
        let mut state = self.lock();
        if state.stopped {
            return None;
        }
        let now = Instant::now();
        self.sync(&mut state, now);
        state.budget.throttled(now)
    }
}

impl Drop for CpuGate {
    /// A gate dropped without [`CpuGate::stop`] (its plugin failed to start) leaves too.
    fn drop(&mut self) {
        if !self.lock().stopped {
            self.metrics.share.remove(&self.labels);
        }
        if let Some(shares) = self.shares.upgrade() {
            shares.leave(self.id);
        }
    }
}

/// Clears the throttled status of `gate` when it is due (nothing else would: no call may be
/// charged meanwhile), until the gate is gone.
async fn clear_when_due(gate: Weak<CpuGate>) {
    let Some(mut changes) = gate.upgrade().map(|g| g.subscribe()) else { return };
    loop {
        let Some(clears_at) = gate.upgrade().map(|g| g.clears_at()) else { return };
        let changed = match clears_at {
            Some(at) => tokio::select! {
                () = tokio::time::sleep_until(at) => Ok(()),
                changed = changes.changed() => changed,
            },
            None => changes.changed().await,
        };
        if changed.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::parse_cpu_share;

    fn share(text: &str) -> CpuShare {
        parse_cpu_share(text).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_plugin_over_its_share_waits_and_the_others_do_not() {
        let metrics = Metrics::new();
        let shares = CpuShares::new(4, &metrics);
        let spinner = shares.join("spinner", Some(share("0.5")));
        let quiet = shares.join("quiet", None);
        assert!(spinner.admit().await);
        spinner.charge(Duration::from_millis(2500)); // 0.5 - 2.5: 2 call-seconds owed, 4 s at 0.5
        let start = Instant::now();
        assert!(quiet.admit().await, "another plugin passes at once");
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert!(spinner.admit().await);
        assert_eq!(start.elapsed(), Duration::from_secs(4), "the paused clock jumps to the refill");
        let status = spinner.status();
        assert!(status.throttled && status.source == ShareSource::Policy, "{status:?}");
        assert!(status.message.starts_with("over its share of 0.5 CPU (host policy cpuShare)"), "{}", status.message);
        assert!(!quiet.status().throttled);
        let text = metrics.render();
        assert!(text.contains(r#"wasmop_plugin_cpu_seconds_total{plugin="spinner"} 2.5"#), "{text}");
        assert!(text.contains(r#"wasmop_plugin_cpu_share{plugin="spinner"} 0.5"#), "{text}");
        assert!(text.contains(r#"wasmop_plugin_cpu_share{plugin="quiet"} 2.0"#), "4 cores between 2 plugins: {text}");
        assert!(text.contains(r#"wasmop_plugin_throttled_seconds_total{plugin="spinner"} 4.0"#), "{text}");
        assert!(!text.contains(r#"wasmop_plugin_throttled_seconds_total{plugin="quiet"}"#), "{text}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_throttled_status_clears_ten_seconds_after_the_plugin_is_back_within_its_share() {
        let shares = CpuShares::new(4, &Metrics::new());
        let gate = shares.join("p", Some(share("1")));
        let mut changes = gate.subscribe();
        gate.charge(Duration::from_secs(3)); // 2 owed: over for 2 s
        assert!(gate.status().throttled);
        let start = Instant::now();
        changes.borrow_and_update();
        changes.changed().await.expect("the status changes again");
        assert_eq!(start.elapsed(), Duration::from_secs(12));
        let status = gate.status();
        assert!(!status.throttled, "{status:?}");
        assert_eq!(status.message, "within its share of 1 CPU (host policy cpuShare)");
    }

    #[tokio::test(start_paused = true)]
    async fn default_shares_follow_the_number_of_running_plugins() {
        let metrics = Metrics::new();
        let shares = CpuShares::new(8, &metrics);
        let a = shares.join("a", None);
        assert_eq!(a.status().share.to_string(), "8");
        let b = shares.join("b", None);
        let pinned = shares.join("pinned", Some(share("0.1")));
        assert_eq!((a.status().share.to_string(), b.status().share.to_string()), ("2.666".into(), "2.666".into()));
        assert_eq!((pinned.status().share.to_string(), pinned.status().source), ("0.1".into(), ShareSource::Policy));
        b.stop();
        assert_eq!(a.status().share.to_string(), "4", "a stopped plugin no longer counts");
        drop(pinned);
        assert_eq!(a.status().share.to_string(), "8", "nor does a dropped one");
        assert_eq!(shares.fair_share().to_string(), "8");
        assert!(!metrics.render().contains(r#"wasmop_plugin_cpu_share{plugin="b"}"#));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_releases_a_waiting_worker_and_a_larger_default_wakes_it_early() {
        let shares = CpuShares::new(2, &Metrics::new());
        let gate = shares.join("p", None); // 2 cores, alone
        let other = shares.join("q", None); // now 1 core each
        gate.charge(Duration::from_secs(5)); // 1 - 5: 4 owed, 4 s at 1 core
        let waiting = tokio::spawn({
            let gate = Arc::clone(&gate);
            async move {
                let start = Instant::now();
                gate.admit().await.then(|| start.elapsed())
            }
        });
        tokio::time::sleep(Duration::from_secs(1)).await; // 3 owed
        other.stop(); // 2 cores again: 1.5 s more
        assert_eq!(waiting.await.unwrap(), Some(Duration::from_millis(2500)));
        gate.charge(Duration::from_secs(10));
        let waiting = tokio::spawn({
            let gate = Arc::clone(&gate);
            async move { gate.admit().await }
        });
        tokio::task::yield_now().await;
        gate.stop();
        assert!(!waiting.await.unwrap(), "released by the stop");
    }
}
