//! [`BreakerGate`]: a plugin's [`Breaker`] as its workers meet it — they wait at the gate while
//! the breaker is open, hand every outcome back — and as operators see it: one log line and
//! the metrics on every transition, and a [`BreakerStatus`] snapshot to watch (the reloader
//! writes it to the plugin's `WasmPlugin` object).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use super::breaker::{
    Admission, Breaker, BreakerConfig, BreakerOutcome, BreakerPhase, BreakerState, Ticket, Transition, TripReason, human_duration,
};
use super::mapping::ObjectKey;
use crate::metrics::Metrics;

/// What the breaker of a plugin says, as of its last transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakerStatus {
    /// The state.
    pub phase: BreakerPhase,
    /// Why it last opened, while open or half-open.
    pub reason: Option<TripReason>,
    /// A sentence for humans: the evidence and what happens next.
    pub message: String,
    /// When it last opened (RFC 3339), while open or half-open.
    pub opened_at: Option<String>,
    /// When the trial reconcile may run (RFC 3339), while open.
    pub retry_at: Option<String>,
    /// When it last went from closed to throttled or back (RFC 3339).
    pub since: String,
    /// Times it opened since the plugin started.
    pub trips: u64,
}

impl BreakerStatus {
    fn closed(message: &str) -> Self {
        Self {
            phase: BreakerPhase::Closed,
            reason: None,
            message: message.into(),
            opened_at: None,
            retry_at: None,
            since: crate::actions::timestamp_now(),
            trips: 0,
        }
    }
}

/// Permission for one reconcile from [`BreakerGate::admit`]. Hand it back with
/// [`BreakerGate::record`]; dropped unrecorded (no work, a panic), it releases its slot.
#[derive(Debug)]
#[must_use = "a permit is handed back with the reconcile's outcome"]
pub struct Permit<'a> {
    gate: &'a BreakerGate,
    ticket: Ticket,
    recorded: bool,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if !self.recorded {
            self.gate.lock().breaker.abandon(self.ticket);
            self.gate.notify.notify_waiters();
        }
    }
}

struct GateState {
    breaker: Breaker<ObjectKey>,
    /// What tripped the breaker last.
    evidence: String,
    stopped: bool,
}

/// The circuit breaker of one running plugin; see the module docs.
pub struct BreakerGate {
    plugin: String,
    state: Mutex<GateState>,
    /// Wakes workers waiting at the gate on every change.
    notify: Notify,
    status: watch::Sender<BreakerStatus>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for BreakerGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BreakerGate")
            .field("plugin", &self.plugin)
            .field("state", &self.lock().breaker.state())
            .finish_non_exhaustive()
    }
}

impl BreakerGate {
    /// A closed breaker for `plugin`; sets its state metric.
    pub fn new(plugin: &str, config: BreakerConfig, metrics: Arc<Metrics>) -> Self {
        metrics.circuit_breaker(plugin, BreakerPhase::Closed.metric_value());
        let state = GateState { breaker: Breaker::new(config), evidence: String::new(), stopped: false };
        let (status, _) = watch::channel(BreakerStatus::closed("reconciles run normally"));
        Self { plugin: plugin.to_owned(), state: Mutex::new(state), notify: Notify::new(), status, metrics }
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        // No panic happens half-way through an update; a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current status.
    pub fn status(&self) -> BreakerStatus {
        self.status.borrow().clone()
    }

    /// Follow the status: the receiver sees every transition (possibly coalesced).
    pub fn subscribe(&self) -> watch::Receiver<BreakerStatus> {
        self.status.subscribe()
    }

    /// Wait until a reconcile may start: at once while closed; while open, until the cooldown
    /// ends and this worker gets the single trial (or a reset closes the breaker). `None` once
    /// [`BreakerGate::stop`] was called.
    ///
    /// # Caveats
    /// Cancel-safe. Must run inside a Tokio runtime with time enabled.
    pub async fn admit(&self) -> Option<Permit<'_>> {
        loop {
            let mut changed = std::pin::pin!(self.notify.notified());
            changed.as_mut().enable();
            let wait_until = {
                let mut state = self.lock();
                if state.stopped {
                    return None;
                }
                let (admission, transition) = state.breaker.admit(Instant::now());
                if let Some(t) = transition {
                    self.report(&mut state, t);
                }
                match admission {
                    Admission::Proceed(ticket) => return Some(Permit { gate: self, ticket, recorded: false }),
                    Admission::WaitUntil(at) => Some(at),
                    Admission::WaitForTrial => None,
                }
            };
            match wait_until {
                Some(at) => {
                    let _ = tokio::time::timeout_at(at, changed).await;
                }
                None => changed.await,
            }
        }
    }

    /// For a call that cannot wait (an admission request): a permit now, or — while the breaker
    /// is open, or half-open with its trial running, or stopped — the sentence saying why not.
    /// The outcome is recorded as a reconcile's is, so admission failures count too.
    ///
    /// # Errors
    /// The breaker's status message when no call may start now.
    pub fn try_admit(&self) -> Result<Permit<'_>, String> {
        let mut state = self.lock();
        if state.stopped {
            return Err("the plugin is stopping".into());
        }
        let (admission, transition) = state.breaker.admit(Instant::now());
        if let Some(t) = transition {
            self.report(&mut state, t);
        }
        match admission {
            Admission::Proceed(ticket) => Ok(Permit { gate: self, ticket, recorded: false }),
            Admission::WaitUntil(_) | Admission::WaitForTrial => Err(self.status.borrow().message.clone()),
        }
    }

    /// Whether `permit`, taken before the worker waited for a key, still allows a reconcile:
    /// the breaker may have opened meanwhile (then put the key back and ask again).
    pub fn still_admits(&self, permit: &mut Permit<'_>) -> bool {
        self.lock().breaker.still_admits(&mut permit.ticket)
    }

    /// Record the outcome of the reconcile of `key` that `permit` allowed.
    pub fn record(&self, mut permit: Permit<'_>, key: &ObjectKey, outcome: BreakerOutcome) {
        permit.recorded = true;
        let mut state = self.lock();
        if let Some(t) = state.breaker.record(permit.ticket, key, outcome, Instant::now()) {
            self.report(&mut state, t);
            drop(state);
            self.notify.notify_waiters();
        }
    }

    /// Close the breaker and forget its history: `why` (a new version) says why.
    pub fn reset(&self, why: &str) {
        let mut state = self.lock();
        if let Some(t) = state.breaker.reset() {
            tracing::info!(plugin = %self.plugin, "circuit breaker closed: {why}");
            self.metrics.circuit_breaker(&self.plugin, BreakerPhase::Closed.metric_value());
            self.publish(|s| *s = BreakerStatus { trips: s.trips, ..BreakerStatus::closed(&format!("closed: {why}")) });
            drop(state);
            debug_assert_eq!(t, Transition::Reset);
            self.notify.notify_waiters();
        }
    }

    /// Release every waiting worker with `None`, for good (the plugin is stopping), and drop
    /// the state metric.
    pub fn stop(&self) {
        self.lock().stopped = true;
        self.metrics.forget_circuit_breaker(&self.plugin);
        self.notify.notify_waiters();
    }

    /// Log, count and publish a transition (called with the state locked, so reports are in order).
    fn report(&self, state: &mut GateState, transition: Transition) {
        let plugin = &self.plugin;
        match transition {
            Transition::Opened { reason, evidence, cooldown } => {
                let until = wall_clock_in(cooldown);
                tracing::warn!(%plugin, reason = reason.as_str(), cooldown = ?cooldown,
                    "circuit breaker opened: {evidence}; no reconciles for {}, then one trial reconcile", human_duration(cooldown));
                self.metrics.circuit_breaker(plugin, BreakerPhase::Open.metric_value());
                self.metrics.circuit_breaker_tripped(plugin, reason.as_str());
                let message = format!("{evidence}; reconciles paused for {}, then one trial reconcile", human_duration(cooldown));
                state.evidence = evidence;
                self.publish(|s| {
                    let since = if s.phase == BreakerPhase::Closed { crate::actions::timestamp_now() } else { s.since.clone() };
                    *s = BreakerStatus {
                        phase: BreakerPhase::Open,
                        reason: Some(reason),
                        message,
                        opened_at: Some(crate::actions::timestamp_now()),
                        retry_at: Some(until),
                        since,
                        trips: s.trips + 1,
                    };
                });
            }
            Transition::HalfOpened => {
                let reason = match state.breaker.state() {
                    BreakerState::HalfOpen { reason } | BreakerState::Open { reason, .. } => reason,
                    BreakerState::Closed => TripReason::Failing,
                };
                tracing::info!(%plugin, reason = reason.as_str(), "circuit breaker half-open: the cooldown is over; one trial reconcile");
                self.metrics.circuit_breaker(plugin, BreakerPhase::HalfOpen.metric_value());
                self.publish(|s| {
                    s.phase = BreakerPhase::HalfOpen;
                    s.retry_at = None;
                    s.message = format!("{}; cooldown over, one trial reconcile runs", state.evidence);
                });
            }
            Transition::Closed => {
                tracing::info!(%plugin, "circuit breaker closed: the trial reconcile succeeded");
                self.metrics.circuit_breaker(plugin, BreakerPhase::Closed.metric_value());
                self.publish(|s| {
                    *s = BreakerStatus { trips: s.trips, ..BreakerStatus::closed("closed: the trial reconcile succeeded") }
                });
            }
            Transition::Reset => {}
        }
    }

    fn publish(&self, change: impl FnOnce(&mut BreakerStatus)) {
        self.status.send_modify(change);
    }
}

/// The wall-clock time `d` from now, RFC 3339.
fn wall_clock_in(d: Duration) -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    let later = now.checked_add(d).unwrap_or(k8s_openapi::jiff::Timestamp::MAX);
    later.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey { namespace: Some("default".into()), name: name.into() }
    }

    const FAILED: BreakerOutcome = BreakerOutcome::FAILED;

    fn gate(metrics: &Arc<Metrics>) -> Arc<BreakerGate> {
        let config = BreakerConfig::default().window_calls(2).failure_ratio(1.0).cooldown(Duration::from_secs(10));
        Arc::new(BreakerGate::new("p", config, Arc::clone(metrics)))
    }

    async fn fail_twice(gate: &BreakerGate) {
        for _ in 0..2 {
            let permit = gate.admit().await.expect("admitted");
            gate.record(permit, &key("x"), FAILED);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn workers_wait_while_open_and_one_trial_runs_after_the_cooldown() {
        let metrics = Arc::new(Metrics::new());
        let gate = gate(&metrics);
        fail_twice(&gate).await;
        assert_eq!(gate.status().phase, BreakerPhase::Open);
        assert_eq!(gate.status().reason, Some(TripReason::Failing));
        assert!(
            gate.status().message.starts_with("2 of the last 2 reconciles failed; reconciles paused for 10 s"),
            "{}",
            gate.status().message
        );
        let opened = Instant::now();
        let trial = gate.admit().await.expect("trial");
        assert_eq!(opened.elapsed(), Duration::from_secs(10), "the paused clock jumps exactly to the end of the cooldown");
        assert_eq!(gate.status().phase, BreakerPhase::HalfOpen);
        let second = tokio::time::timeout(Duration::from_secs(3600), gate.admit()).await;
        assert!(second.is_err(), "nobody else passes while the trial runs");
        gate.record(trial, &key("x"), BreakerOutcome::WROTE);
        assert_eq!(gate.status().phase, BreakerPhase::Closed);
        assert_eq!(gate.status().trips, 1);
        let text = metrics.render();
        assert!(text.contains(r#"wasmop_plugin_circuit_breaker_state{plugin="p"} 0"#), "{text}");
        assert!(text.contains(r#"wasmop_plugin_circuit_breaker_trips_total{plugin="p",reason="Failing"} 1"#), "{text}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_reset_or_a_stop_releases_waiting_workers() {
        let gate = gate(&Arc::new(Metrics::new()));
        fail_twice(&gate).await;
        let waiting = tokio::spawn({
            let gate = Arc::clone(&gate);
            async move { gate.admit().await.map(|p| p.ticket.is_trial()) }
        });
        tokio::task::yield_now().await;
        gate.reset("version 2 loaded");
        assert_eq!(waiting.await.unwrap(), Some(false), "admitted as a plain reconcile, at once");
        assert_eq!(gate.status().message, "closed: version 2 loaded");
        fail_twice(&gate).await;
        let waiting = tokio::spawn({
            let gate = Arc::clone(&gate);
            async move { gate.admit().await.is_none() }
        });
        tokio::task::yield_now().await;
        gate.stop();
        assert!(waiting.await.unwrap());
        assert!(!gate.metrics.render().contains("wasmop_plugin_circuit_breaker_state{"), "a stopped plugin has no state");
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_trial_permit_lets_another_worker_run_the_trial() {
        let gate = gate(&Arc::new(Metrics::new()));
        fail_twice(&gate).await;
        let trial = gate.admit().await.expect("trial");
        let other = tokio::spawn({
            let gate = Arc::clone(&gate);
            async move { gate.admit().await.map(|p| p.ticket.is_trial()) }
        });
        tokio::task::yield_now().await;
        drop(trial);
        assert_eq!(other.await.unwrap(), Some(true));
    }

    #[tokio::test(start_paused = true)]
    async fn a_permit_taken_before_the_trip_no_longer_admits() {
        let gate = gate(&Arc::new(Metrics::new()));
        let mut early = gate.admit().await.expect("admitted");
        fail_twice(&gate).await;
        assert!(!gate.still_admits(&mut early));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_cannot_wait_is_told_why_while_the_breaker_is_open() {
        let gate = gate(&Arc::new(Metrics::new()));
        let permit = gate.try_admit().expect("closed: admitted");
        gate.record(permit, &key("x"), BreakerOutcome::QUIET);
        fail_twice(&gate).await;
        let refused = gate.try_admit().map(|_| ()).unwrap_err();
        assert!(refused.starts_with("2 of the last 2 reconciles failed; reconciles paused for 10 s"), "{refused}");
        tokio::time::advance(Duration::from_secs(10)).await;
        let trial = gate.try_admit().expect("the trial after the cooldown");
        assert!(gate.try_admit().is_err(), "nobody else while the trial runs");
        gate.record(trial, &key("x"), BreakerOutcome::QUIET);
        assert!(gate.try_admit().is_ok());
    }
}
