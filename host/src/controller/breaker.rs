//! [`Breaker`]: the per-plugin circuit breaker ("runaway protection").
//!
//! A plugin that keeps failing, or that keeps one object in a write loop (a child whose
//! content changes on every reconcile re-queues its parent through the owner watch, forever),
//! is throttled instead of burning CPU and API calls:
//!
//! - **Closed**: reconciles run. Every finished reconcile is recorded. The breaker trips when
//!   - *failing*: among the last [`BreakerConfig::window_calls`] reconciles, at least
//!     [`BreakerConfig::failure_ratio`] failed (plugin errors, traps, timeouts, memory
//!     exhaustion, refused responses, failed writes); the window must be full;
//!   - *hot loop*: one object had [`BreakerConfig::hot_loop_writes`] consecutive reconciles
//!     that each wrote something (a changed child, a delete, a status patch) within
//!     [`BreakerConfig::hot_loop_window`]. A reconcile writing nothing resets that object's
//!     count; a failed one leaves it as is.
//! - **Open**: no reconcile runs (queued keys stay queued) until the cooldown has passed.
//! - **HalfOpen**: exactly one trial reconcile runs. Success closes the breaker; failure opens
//!   it again with twice the cooldown (capped at [`BreakerConfig::max_cooldown`]).
//!
//! Cooldowns escalate across trips: a trip within one (current) cooldown of the breaker's
//! last closing doubles the cooldown too, since a trial reconcile of a hot-looping plugin
//! succeeds (it writes, and writing is not an error) and would otherwise reset it every time.
//! A breaker that stays closed longer than that starts again from [`BreakerConfig::cooldown`].
//! [`Breaker::reset`] (a new plugin version) closes it and forgets everything.
//!
//! This is the pure state machine: time comes in as [`Instant`]s, nothing waits and nothing is
//! logged. `breaker_gate` makes workers wait on it and reports its transitions.

use std::collections::{HashMap, VecDeque};
use std::fmt::Display;
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

use crate::allocator::ShrinkWhenSparse;

pub use crate::policy::BreakerConfig;

/// How a finished reconcile went, as far as the breaker counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerOutcome {
    /// The reconcile failed (a plugin error, trap, timeout, memory exhaustion, refused
    /// response or failed write): it counts toward the failure ratio.
    pub failed: bool,
    /// The reconcile wrote something (a child, a delete, the status, a finalizer): it counts
    /// toward the object's hot loop. Ignored when `failed`.
    pub wrote: bool,
}

impl BreakerOutcome {
    /// A reconcile that failed.
    pub const FAILED: Self = Self { failed: true, wrote: false };
    /// A successful reconcile that wrote nothing.
    pub const QUIET: Self = Self { failed: false, wrote: false };
    /// A successful reconcile that wrote something.
    pub const WROTE: Self = Self { failed: false, wrote: true };
}

/// The breaker's state without its timer, for status and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerPhase {
    /// Reconciles run.
    Closed,
    /// Reconciles are paused until the cooldown ends.
    Open,
    /// One trial reconcile runs.
    HalfOpen,
}

impl BreakerPhase {
    /// `Closed`, `Open` or `HalfOpen`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "Closed",
            Self::Open => "Open",
            Self::HalfOpen => "HalfOpen",
        }
    }

    /// The value of `wasmop_plugin_circuit_breaker_state`: 0 closed, 1 open, 2 half-open.
    pub fn metric_value(self) -> i64 {
        match self {
            Self::Closed => 0,
            Self::Open => 1,
            Self::HalfOpen => 2,
        }
    }
}

/// Why a breaker opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TripReason {
    /// Too many reconciles failed (or the trial reconcile failed).
    Failing,
    /// One object kept being written on every reconcile.
    HotLoop,
}

impl TripReason {
    /// `Failing` or `HotLoop` (metric label, condition reason).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Failing => "Failing",
            Self::HotLoop => "HotLoop",
        }
    }
}

/// The breaker's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Reconciles run.
    Closed,
    /// No reconcile runs until `until`.
    Open {
        /// End of the cooldown.
        until: Instant,
        /// Why it opened.
        reason: TripReason,
    },
    /// One trial reconcile runs; its result closes or re-opens the breaker.
    HalfOpen {
        /// Why it opened.
        reason: TripReason,
    },
}

/// A state change, for the caller to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// The breaker opened (from closed, or again after a failed trial).
    Opened {
        /// Why.
        reason: TripReason,
        /// What was seen, e.g. `17 of the last 20 reconciles failed`.
        evidence: String,
        /// How long it stays open.
        cooldown: Duration,
    },
    /// The cooldown is over; one trial reconcile may run.
    HalfOpened,
    /// The trial reconcile succeeded.
    Closed,
    /// [`Breaker::reset`] closed an open or half-open breaker.
    Reset,
}

/// What a worker about to take a key is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Go ahead; hand the ticket back to [`Breaker::record`] with the outcome.
    Proceed(Ticket),
    /// Open: ask again at this instant (or when the breaker is reset).
    WaitUntil(Instant),
    /// Half-open and the trial reconcile is running: ask again when it is recorded.
    WaitForTrial,
}

/// Permission for one reconcile. Outcomes of tickets issued before a state change (a trip, a
/// close, a reset) are ignored: they describe reconciles the breaker has already judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    epoch: u64,
    trial: bool,
}

impl Ticket {
    /// Whether this is the single trial reconcile of a half-open breaker.
    pub fn is_trial(&self) -> bool {
        self.trial
    }
}

/// The circuit breaker of one plugin, over parent keys `K`. See the module docs.
#[derive(Debug)]
pub struct Breaker<K> {
    config: BreakerConfig,
    state: BreakerState,
    /// Bumped on every trip, close and reset; tickets of older epochs are stale.
    epoch: u64,
    trial_running: bool,
    /// The last `window_calls` outcomes, `true` = failed.
    window: VecDeque<bool>,
    failed_in_window: usize,
    /// Per object: times of its consecutive writing reconciles within `hot_loop_window`.
    writes: HashMap<K, VecDeque<Instant>>,
    last_sweep: Option<Instant>,
    /// Cooldown escalations (the exponent of the doubling).
    level: u32,
    closed_at: Option<Instant>,
}

impl<K: Clone + Eq + Hash + Display> Breaker<K> {
    /// A closed breaker.
    pub fn new(config: BreakerConfig) -> Self {
        Self {
            config,
            state: BreakerState::Closed,
            epoch: 0,
            trial_running: false,
            window: VecDeque::new(),
            failed_in_window: 0,
            writes: HashMap::new(),
            last_sweep: None,
            level: 0,
            closed_at: None,
        }
    }

    /// The current state (an open breaker whose cooldown is over turns half-open at the next
    /// [`Breaker::admit`]).
    pub fn state(&self) -> BreakerState {
        self.state
    }

    /// The settings.
    pub fn config(&self) -> &BreakerConfig {
        &self.config
    }

    /// May a reconcile start at `now`? Turns an open breaker whose cooldown is over half-open
    /// (returned as the transition) and hands its single trial ticket out.
    pub fn admit(&mut self, now: Instant) -> (Admission, Option<Transition>) {
        let mut transition = None;
        if let BreakerState::Open { until, reason } = self.state {
            if now < until {
                return (Admission::WaitUntil(until), None);
            }
            self.state = BreakerState::HalfOpen { reason };
            transition = Some(Transition::HalfOpened);
        }
        let admission = match self.state {
            BreakerState::Closed => Admission::Proceed(Ticket { epoch: self.epoch, trial: false }),
            BreakerState::HalfOpen { .. } if !self.trial_running => {
                self.trial_running = true;
                Admission::Proceed(Ticket { epoch: self.epoch, trial: true })
            }
            _ => Admission::WaitForTrial,
        };
        (admission, transition)
    }

    /// Whether a ticket taken earlier still allows a reconcile now (the worker may have waited
    /// for work meanwhile). While closed, any ticket is renewed as a plain one (a trial ticket
    /// outlived by a reset included).
    pub fn still_admits(&self, ticket: &mut Ticket) -> bool {
        match self.state {
            BreakerState::HalfOpen { .. } => ticket.trial && ticket.epoch == self.epoch,
            BreakerState::Closed => {
                *ticket = Ticket { epoch: self.epoch, trial: false };
                true
            }
            BreakerState::Open { .. } => false,
        }
    }

    /// A ticket given up without a reconcile: if it was the trial, another may run.
    pub fn abandon(&mut self, ticket: Ticket) {
        if ticket.trial && ticket.epoch == self.epoch {
            self.trial_running = false;
        }
    }

    /// Record how the reconcile of `key` admitted by `ticket` ended, at `now`; returns the
    /// transition it caused.
    pub fn record(&mut self, ticket: Ticket, key: &K, outcome: BreakerOutcome, now: Instant) -> Option<Transition> {
        if ticket.epoch != self.epoch {
            return None;
        }
        let failed = outcome.failed;
        match self.state {
            BreakerState::HalfOpen { .. } if ticket.trial => {
                self.trial_running = false;
                if failed {
                    let evidence = format!("the trial reconcile of {key} after the cooldown failed");
                    Some(self.open(TripReason::Failing, evidence, now, true))
                } else {
                    self.forget_history();
                    self.state = BreakerState::Closed;
                    self.closed_at = Some(now);
                    Some(Transition::Closed)
                }
            }
            BreakerState::Closed => {
                if let Some(evidence) = self.count_outcome(failed) {
                    return Some(self.open(TripReason::Failing, evidence, now, false));
                }
                if let Some(evidence) = self.count_writes(key, outcome, now) {
                    return Some(self.open(TripReason::HotLoop, evidence, now, false));
                }
                None
            }
            _ => None,
        }
    }

    /// Close the breaker and forget every count and escalation (a new plugin version).
    /// Returns [`Transition::Reset`] if it was not closed.
    pub fn reset(&mut self) -> Option<Transition> {
        let was_closed = self.state == BreakerState::Closed;
        self.forget_history();
        self.state = BreakerState::Closed;
        self.level = 0;
        self.closed_at = None;
        (!was_closed).then_some(Transition::Reset)
    }

    fn forget_history(&mut self) {
        self.epoch += 1;
        self.trial_running = false;
        self.window.clear();
        self.failed_in_window = 0;
        self.writes.clear();
    }

    fn open(&mut self, reason: TripReason, evidence: String, now: Instant, after_trial: bool) -> Transition {
        let retrip = after_trial
            || self.closed_at.is_some_and(|closed| now.saturating_duration_since(closed) < self.config.cooldown_at(self.level));
        self.level = if retrip { self.level.saturating_add(1) } else { 0 };
        let cooldown = self.config.cooldown_at(self.level);
        self.forget_history();
        // A cooldown beyond any real uptime (a huge configuration) is clamped, not overflowed.
        let until = now.checked_add(cooldown).unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 86_400));
        self.state = BreakerState::Open { until, reason };
        Transition::Opened { reason, evidence, cooldown }
    }

    /// Adds an outcome to the window; the evidence if it trips.
    fn count_outcome(&mut self, failed: bool) -> Option<String> {
        let size = self.config.window_calls;
        if size == 0 {
            return None;
        }
        self.window.push_back(failed);
        self.failed_in_window += usize::from(failed);
        if self.window.len() > size && self.window.pop_front() == Some(true) {
            self.failed_in_window -= 1;
        }
        let threshold = self.config.failure_ratio * size as f64 - 1e-9;
        (self.window.len() == size && self.failed_in_window as f64 >= threshold)
            .then(|| format!("{} of the last {size} reconciles failed", self.failed_in_window))
    }

    /// Updates `key`'s run of writing reconciles; the evidence if it trips.
    fn count_writes(&mut self, key: &K, outcome: BreakerOutcome, now: Instant) -> Option<String> {
        let (limit, window) = (self.config.hot_loop_writes, self.config.hot_loop_window);
        if limit == 0 {
            return None;
        }
        self.sweep(now);
        match outcome {
            BreakerOutcome { failed: true, .. } => None,
            BreakerOutcome { wrote: false, .. } => {
                self.writes.remove(key);
                self.writes.shrink_when_sparse();
                None
            }
            BreakerOutcome { wrote: true, .. } => {
                let run = self.writes.entry(key.clone()).or_default();
                run.push_back(now);
                while run.len() > limit || run.front().is_some_and(|t| now.saturating_duration_since(*t) > window) {
                    run.pop_front();
                }
                let first = *run.front().expect("just pushed");
                (run.len() >= limit).then(|| {
                    let took = human_duration(now.saturating_duration_since(first));
                    format!("{key} wrote on {limit} consecutive reconciles in {took}")
                })
            }
        }
    }

    /// Drops the runs of objects that have not written within the window (once per window).
    fn sweep(&mut self, now: Instant) {
        let window = self.config.hot_loop_window;
        let last = *self.last_sweep.get_or_insert(now);
        if now.saturating_duration_since(last) < window {
            return;
        }
        self.last_sweep = Some(now);
        self.writes.retain(|_, run| run.back().is_some_and(|t| now.saturating_duration_since(*t) <= window));
        self.writes.shrink_when_sparse();
    }
}

/// A duration as people write it: `45 ms`, `4.1 s`, `90 s`, `5 min`.
pub(crate) fn human_duration(d: Duration) -> String {
    match d.as_secs() {
        0 => format!("{} ms", d.as_millis()),
        s if s >= 120 && s % 60 == 0 => format!("{} min", s / 60),
        _ => format!("{} s", (d.as_secs_f64() * 10.0).round() / 10.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);
    const MS: Duration = Duration::from_millis(1);
    const DONE: BreakerOutcome = BreakerOutcome::QUIET;
    const WROTE: BreakerOutcome = BreakerOutcome::WROTE;

    /// The thresholds these tests were written for (20 writes in 60 s), whatever the defaults.
    fn breaker() -> Breaker<&'static str> {
        Breaker::new(BreakerConfig::default().hot_loop_writes(20).hot_loop_window(60 * S))
    }

    fn ticket(b: &mut Breaker<&'static str>, now: Instant) -> Ticket {
        match b.admit(now).0 {
            Admission::Proceed(t) => t,
            other => panic!("not admitted at {now:?}: {other:?}"),
        }
    }

    /// Admit and record one reconcile of `key` at `now`.
    fn run(b: &mut Breaker<&'static str>, key: &'static str, outcome: BreakerOutcome, now: Instant) -> Option<Transition> {
        let t = ticket(b, now);
        b.record(t, &key, outcome, now)
    }

    /// Trip `b` with a full window of failures ending at `now`.
    fn trip(b: &mut Breaker<&'static str>, now: Instant) -> Duration {
        for _ in 1..b.config().window_calls {
            assert_eq!(run(b, "k", BreakerOutcome::FAILED, now), None);
        }
        match run(b, "k", BreakerOutcome::FAILED, now) {
            Some(Transition::Opened { cooldown, .. }) => cooldown,
            other => panic!("expected a trip, got {other:?}"),
        }
    }

    #[test]
    fn failing_trips_only_once_the_window_is_full() {
        let (mut b, t0) = (breaker(), Instant::now());
        for i in 0..19 {
            assert_eq!(run(&mut b, "k", BreakerOutcome::FAILED, t0 + i * MS), None, "call {i}");
        }
        let transition = run(&mut b, "k", BreakerOutcome::FAILED, t0 + 20 * MS);
        let evidence = "20 of the last 20 reconciles failed".to_owned();
        assert_eq!(transition, Some(Transition::Opened { reason: TripReason::Failing, evidence, cooldown: 30 * S }));
        assert_eq!(b.state(), BreakerState::Open { until: t0 + 20 * MS + 30 * S, reason: TripReason::Failing });
    }

    #[test]
    fn sixteen_failures_of_twenty_trip_and_fifteen_do_not() {
        let (mut b, t0) = (breaker(), Instant::now());
        // 5 successes then 15 failures: 15/20 < 0.8.
        for _ in 0..5 {
            assert_eq!(run(&mut b, "k", DONE, t0), None);
        }
        for _ in 0..15 {
            assert_eq!(run(&mut b, "k", BreakerOutcome::FAILED, t0), None);
        }
        // One more failure pushes a success out of the window: 16/20.
        match run(&mut b, "k", BreakerOutcome::FAILED, t0) {
            Some(Transition::Opened { evidence, .. }) => assert_eq!(evidence, "16 of the last 20 reconciles failed"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_hot_loop_trips_after_n_consecutive_writes_of_one_object() {
        let (mut b, t0) = (breaker(), Instant::now());
        for i in 0..19 {
            assert_eq!(run(&mut b, "default/x", WROTE, t0 + i * 100 * MS), None, "write {i}");
        }
        let transition = run(&mut b, "default/x", WROTE, t0 + 1900 * MS + 200 * MS);
        let evidence = "default/x wrote on 20 consecutive reconciles in 2.1 s".to_owned();
        assert_eq!(transition, Some(Transition::Opened { reason: TripReason::HotLoop, evidence, cooldown: 30 * S }));
    }

    #[test]
    fn at_the_defaults_a_rollout_pace_never_trips_and_a_hot_loop_pace_trips_within_half_a_second() {
        let (mut rollout, mut looping, t0) =
            (Breaker::new(BreakerConfig::default()), Breaker::new(BreakerConfig::default()), Instant::now());
        // Two writes a second for five minutes: a status following each Pod of a big rollout.
        for i in 0..600 {
            assert_eq!(run(&mut rollout, "default/big", WROTE, t0 + i * 500 * MS), None, "write {i}");
        }
        // A hundred writes a second (a hot loop measured 10 writes in 32–72 ms).
        let tripped_at = (0..100_u32).find(|i| run(&mut looping, "default/x", WROTE, t0 + i * 10 * MS).is_some());
        assert!(tripped_at.is_some_and(|i| i * 10 < 500), "tripped at write {tripped_at:?}");
    }

    #[test]
    fn a_reconcile_that_writes_nothing_resets_the_objects_count() {
        let (mut b, t0) = (breaker(), Instant::now());
        for _ in 0..19 {
            run(&mut b, "x", WROTE, t0);
        }
        assert_eq!(run(&mut b, "x", DONE, t0), None);
        for _ in 0..19 {
            assert_eq!(run(&mut b, "x", WROTE, t0), None);
        }
    }

    #[test]
    fn failures_neither_count_as_writes_nor_reset_the_count() {
        let (mut b, t0) = (breaker(), Instant::now());
        for _ in 0..10 {
            run(&mut b, "x", WROTE, t0);
        }
        run(&mut b, "x", BreakerOutcome::FAILED, t0);
        for _ in 0..9 {
            assert_eq!(run(&mut b, "x", WROTE, t0), None);
        }
        assert!(matches!(run(&mut b, "x", WROTE, t0), Some(Transition::Opened { reason: TripReason::HotLoop, .. })));
    }

    #[test]
    fn writes_spread_over_more_than_the_window_do_not_trip() {
        let (mut b, t0) = (breaker(), Instant::now());
        // One write every 4 s: 20 writes span 76 s > 60 s.
        for i in 0..40 {
            assert_eq!(run(&mut b, "x", WROTE, t0 + i * 4 * S), None, "write {i}");
        }
    }

    #[test]
    fn writes_of_different_objects_do_not_add_up() {
        let (mut b, t0) = (breaker(), Instant::now());
        for i in 0..30 {
            assert_eq!(run(&mut b, if i % 2 == 0 { "a" } else { "b" }, WROTE, t0), None);
        }
    }

    #[test]
    fn runs_of_objects_that_stopped_writing_are_swept() {
        let (mut b, t0) = (breaker(), Instant::now());
        for key in ["a", "b", "c"] {
            run(&mut b, key, WROTE, t0);
        }
        run(&mut b, "d", WROTE, t0 + 61 * S);
        assert_eq!(b.writes.keys().copied().collect::<Vec<_>>(), ["d"]);
    }

    #[test]
    fn zero_thresholds_disable_their_trip() {
        let config = BreakerConfig::default().window_calls(0).hot_loop_writes(0);
        let (mut b, t0) = (Breaker::new(config), Instant::now());
        for _ in 0..100 {
            assert_eq!(run(&mut b, "x", BreakerOutcome::FAILED, t0), None);
            assert_eq!(run(&mut b, "x", WROTE, t0), None);
        }
    }

    #[test]
    fn an_open_breaker_admits_nothing_until_the_cooldown_then_exactly_one_trial() {
        let (mut b, t0) = (breaker(), Instant::now());
        trip(&mut b, t0);
        assert_eq!(b.admit(t0 + 29 * S), (Admission::WaitUntil(t0 + 30 * S), None));
        let (admission, transition) = b.admit(t0 + 30 * S);
        assert_eq!(transition, Some(Transition::HalfOpened));
        assert!(matches!(admission, Admission::Proceed(t) if t.is_trial()));
        assert_eq!(b.admit(t0 + 31 * S), (Admission::WaitForTrial, None));
        assert_eq!(b.state(), BreakerState::HalfOpen { reason: TripReason::Failing });
    }

    #[test]
    fn a_successful_trial_closes_the_breaker() {
        let (mut b, t0) = (breaker(), Instant::now());
        trip(&mut b, t0);
        let trial = ticket(&mut b, t0 + 30 * S);
        assert_eq!(b.record(trial, &"k", WROTE, t0 + 30 * S), Some(Transition::Closed));
        assert_eq!(b.state(), BreakerState::Closed);
        assert!(!ticket(&mut b, t0 + 30 * S).is_trial());
        // The window starts empty again: 19 failures do not trip.
        for _ in 0..19 {
            assert_eq!(run(&mut b, "k", BreakerOutcome::FAILED, t0 + 400 * S), None);
        }
    }

    #[test]
    fn a_failed_trial_reopens_with_a_doubled_cooldown_up_to_the_cap() {
        let (mut b, mut now) = (breaker(), Instant::now());
        assert_eq!(trip(&mut b, now), 30 * S);
        for expected in [60, 120, 240, 300, 300] {
            now += 300 * S;
            let trial = ticket(&mut b, now);
            match b.record(trial, &"default/x", BreakerOutcome::FAILED, now) {
                Some(Transition::Opened { reason, evidence, cooldown }) => {
                    assert_eq!((reason, cooldown), (TripReason::Failing, expected * S));
                    assert_eq!(evidence, "the trial reconcile of default/x after the cooldown failed");
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_trip_soon_after_closing_escalates_and_a_late_one_starts_over() {
        let (mut b, t0) = (breaker(), Instant::now());
        trip(&mut b, t0);
        let closed_at = t0 + 30 * S;
        let trial = ticket(&mut b, closed_at);
        assert_eq!(b.record(trial, &"x", WROTE, closed_at), Some(Transition::Closed));
        // Hot loop again within one cooldown of closing: 60 s.
        let mut last = None;
        for _ in 0..20 {
            last = run(&mut b, "x", WROTE, closed_at + 10 * S);
        }
        assert!(matches!(last, Some(Transition::Opened { reason: TripReason::HotLoop, cooldown, .. }) if cooldown == 60 * S));
        let closed_again = closed_at + 70 * S;
        let trial = ticket(&mut b, closed_again);
        b.record(trial, &"x", DONE, closed_again);
        // Closed for longer than the 60 s it last served: back to 30 s.
        assert_eq!(trip(&mut b, closed_again + 61 * S), 30 * S);
    }

    #[test]
    fn outcomes_of_reconciles_admitted_before_a_trip_are_ignored() {
        let (mut b, t0) = (breaker(), Instant::now());
        let early = ticket(&mut b, t0);
        trip(&mut b, t0);
        assert_eq!(b.record(early, &"k", BreakerOutcome::FAILED, t0), None);
        let trial = ticket(&mut b, t0 + 30 * S);
        // A pre-trip success does not close the half-open breaker either.
        assert_eq!(b.record(early, &"k", DONE, t0 + 30 * S), None);
        assert_eq!(b.state(), BreakerState::HalfOpen { reason: TripReason::Failing });
        assert_eq!(b.record(trial, &"k", DONE, t0 + 30 * S), Some(Transition::Closed));
    }

    #[test]
    fn tickets_taken_before_a_trip_no_longer_admit_and_are_renewed_once_closed() {
        let (mut b, t0) = (breaker(), Instant::now());
        let mut waiting = ticket(&mut b, t0);
        trip(&mut b, t0);
        assert!(!b.still_admits(&mut waiting));
        let mut trial = ticket(&mut b, t0 + 30 * S);
        assert!(b.still_admits(&mut trial));
        assert!(!b.still_admits(&mut waiting), "only the trial runs while half-open");
        b.record(trial, &"k", DONE, t0 + 30 * S);
        assert!(b.still_admits(&mut waiting));
        for _ in 0..20 {
            b.record(waiting, &"k", BreakerOutcome::FAILED, t0 + 31 * S);
        }
        assert!(matches!(b.state(), BreakerState::Open { .. }), "a renewed ticket's outcomes count");
    }

    #[test]
    fn a_trial_ticket_outlived_by_a_reset_runs_as_a_plain_reconcile() {
        let (mut b, t0) = (breaker(), Instant::now());
        trip(&mut b, t0);
        let mut trial = ticket(&mut b, t0 + 30 * S);
        b.reset();
        assert!(b.still_admits(&mut trial));
        assert!(!trial.is_trial());
        assert_eq!(b.record(trial, &"k", BreakerOutcome::FAILED, t0 + 30 * S), None, "counted in the new window");
        assert_eq!(b.window.len(), 1);
    }

    #[test]
    fn an_abandoned_trial_lets_another_run() {
        let (mut b, t0) = (breaker(), Instant::now());
        trip(&mut b, t0);
        let trial = ticket(&mut b, t0 + 30 * S);
        assert_eq!(b.admit(t0 + 30 * S).0, Admission::WaitForTrial);
        b.abandon(trial);
        assert!(ticket(&mut b, t0 + 30 * S).is_trial());
    }

    #[test]
    fn reset_closes_and_forgets_the_escalation() {
        let (mut b, mut now) = (breaker(), Instant::now());
        trip(&mut b, now);
        now += 30 * S;
        let trial = ticket(&mut b, now);
        b.record(trial, &"k", BreakerOutcome::FAILED, now);
        assert!(matches!(b.state(), BreakerState::Open { .. }));
        assert_eq!(b.reset(), Some(Transition::Reset));
        assert_eq!(b.state(), BreakerState::Closed);
        assert_eq!(b.reset(), None, "resetting a closed breaker is no transition");
        assert_eq!(trip(&mut b, now), 30 * S);
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(45 * MS), "45 ms");
        assert_eq!(human_duration(4100 * MS), "4.1 s");
        assert_eq!(human_duration(30 * S), "30 s");
        assert_eq!(human_duration(300 * S), "5 min");
    }

    #[test]
    fn the_cooldown_saturates_instead_of_overflowing() {
        let config = BreakerConfig::default().cooldown(Duration::from_secs(u64::MAX / 2)).max_cooldown(Duration::MAX);
        assert_eq!(config.cooldown_at(200), Duration::MAX);
        assert_eq!(BreakerConfig::default().cooldown_at(40), 300 * S);
        let short_cap = BreakerConfig::default().max_cooldown(S);
        assert_eq!(short_cap.cooldown_at(0), 30 * S, "a cap below the cooldown does not shorten it");
    }
}
