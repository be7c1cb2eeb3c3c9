//! [`CpuBudget`]: the arithmetic of a plugin's CPU share — a token bucket of call-seconds,
//! refilled at the share (call-seconds per second) up to a burst of one second's worth, and
//! drawn down by each call's measured time once the call ends. Pure: every method is given the
//! time, so tests inject it.
//!
//! A call's cost is known only when it ends, so the bucket may go below zero; a plugin may start
//! a call while the bucket is not below zero, and otherwise waits until it has refilled to zero.
//! Over any time `T`, the call time charged is therefore at most `share · T + burst + W · D`
//! (`W` workers, each starting one call of at most `D`, the deadline, while the bucket was not
//! yet below zero): the long-run rate is the share.

use std::time::Duration;

use tokio::time::Instant;

use crate::policy::CpuShare;

/// How long a plugin still counts as throttled after it was last over its share: its status
/// changes at most this often.
pub const THROTTLED_HOLD: Duration = Duration::from_secs(10);

/// The token bucket of one plugin; see the module docs.
#[derive(Debug, Clone)]
pub struct CpuBudget {
    share: CpuShare,
    /// Call-seconds available (negative: owed).
    tokens: f64,
    /// When `tokens` was last brought up to date.
    at: Instant,
    /// The current or last time over the share: from, until (when the bucket is back at zero
    /// if nothing else is charged).
    over: Option<(Instant, Instant)>,
    /// Seconds over the share in the intervals before `over`.
    over_before: f64,
}

impl CpuBudget {
    /// A full bucket for `share` at `now`.
    pub fn new(share: CpuShare, now: Instant) -> Self {
        Self { share, tokens: share.cores(), at: now, over: None, over_before: 0.0 }
    }

    /// The share the bucket refills at.
    pub fn share(&self) -> CpuShare {
        self.share
    }

    /// The most call-seconds the bucket holds: one second's worth of the share.
    pub fn burst(&self) -> f64 {
        self.share.cores()
    }

    /// Call-seconds available at `now` (negative: owed).
    pub fn tokens(&mut self, now: Instant) -> f64 {
        self.refill(now);
        self.tokens
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.share.cores()).min(self.burst());
        self.at = self.at.max(now);
    }

    /// Whether a call may start at `now`: `None` if so, else the time the bucket is back at zero.
    pub fn wait(&mut self, now: Instant) -> Option<Instant> {
        self.refill(now);
        (self.tokens < 0.0).then(|| now + self.until_zero())
    }

    /// Time until the owed call-seconds are refilled.
    fn until_zero(&self) -> Duration {
        Duration::from_secs_f64((-self.tokens).max(0.0) / self.share.cores())
    }

    /// Charge a call of `seconds` ended at `now`. Returns whether this put the plugin over its
    /// share (it was not before).
    pub fn charge(&mut self, seconds: f64, now: Instant) -> bool {
        self.refill(now);
        self.tokens -= seconds.max(0.0);
        if self.tokens >= 0.0 {
            return false;
        }
        let until = now + self.until_zero();
        match self.over {
            Some((from, end)) if end > now => {
                self.over = Some((from, until));
                false
            }
            previous => {
                if let Some((from, end)) = previous {
                    self.over_before += end.saturating_duration_since(from).as_secs_f64();
                }
                self.over = Some((now, until));
                true
            }
        }
    }

    /// Refill at `share` from `now` on; the burst becomes the new share's, and an owed amount is
    /// paid back at the new rate.
    pub fn set_share(&mut self, share: CpuShare, now: Instant) {
        self.refill(now);
        self.share = share;
        self.tokens = self.tokens.min(self.burst());
        if let Some((from, end)) = self.over
            && end > now
        {
            self.over = Some((from, now + self.until_zero()));
        }
    }

    /// Seconds the plugin was over its share up to `now`: time in which it could start no call.
    /// Never decreases as `now` advances.
    pub fn over_seconds(&self, now: Instant) -> f64 {
        let current = self.over.map_or(0.0, |(from, end)| end.min(now).saturating_duration_since(from).as_secs_f64());
        self.over_before + current
    }

    /// Whether the plugin was over its share at any time in the [`THROTTLED_HOLD`] before `now`;
    /// if so, also when that stops being true (if nothing else is charged).
    pub fn throttled(&self, now: Instant) -> Option<Instant> {
        let (_, end) = self.over?;
        let clear = end + THROTTLED_HOLD;
        (now < clear).then_some(clear)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::parse_cpu_share;

    fn share(text: &str) -> CpuShare {
        parse_cpu_share(text).unwrap()
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn a_full_bucket_holds_one_second_of_the_share_and_refills_no_higher() {
        let t0 = Instant::now();
        let mut budget = CpuBudget::new(share("0.5"), t0);
        assert_eq!(budget.tokens(t0), 0.5);
        assert_eq!(budget.tokens(t0 + secs(100.0)), 0.5, "idle time does not bank more than the burst");
        assert_eq!(budget.wait(t0 + secs(100.0)), None);
    }

    #[test]
    fn a_call_past_the_bucket_makes_the_next_wait_until_its_cost_is_refilled_at_the_share() {
        let t0 = Instant::now();
        let mut budget = CpuBudget::new(share("0.25"), t0);
        // A 1.25 s call (spinning to its deadline) ending at t0: 0.25 - 1.25 = 1 call-second owed.
        assert!(budget.charge(1.25, t0), "the plugin goes over its share");
        assert_eq!(budget.wait(t0), Some(t0 + secs(4.0)), "1 call-second at 0.25 per second");
        assert_eq!(budget.wait(t0 + secs(3.0)), Some(t0 + secs(4.0)), "waiting does not move the time");
        assert_eq!(budget.wait(t0 + secs(4.0)), None);
        assert_eq!(budget.over_seconds(t0 + secs(2.0)), 2.0);
        assert_eq!(budget.over_seconds(t0 + secs(60.0)), 4.0);
    }

    #[test]
    fn calls_within_the_share_never_wait() {
        let t0 = Instant::now();
        let mut budget = CpuBudget::new(share("0.5"), t0);
        // 0.1 s of calls every 0.25 s is 0.4 call-seconds per second: under 0.5.
        for i in 1..=400 {
            let now = t0 + secs(0.25 * f64::from(i));
            assert_eq!(budget.wait(now), None, "call {i}");
            assert!(!budget.charge(0.1, now));
        }
        assert_eq!(budget.over_seconds(t0 + secs(100.0)), 0.0);
        assert_eq!(budget.throttled(t0 + secs(100.0)), None);
    }

    #[test]
    fn a_saturating_plugin_is_held_to_its_share_over_any_long_window() {
        // Four workers each run a 0.2 s call whenever the bucket allows: the charged rate over
        // 1000 s is the share, plus at most (burst + 4 · 0.2 s) / 1000 s.
        let t0 = Instant::now();
        let mut budget = CpuBudget::new(share("0.3"), t0);
        let mut workers = [t0; 4]; // when each worker is free again
        let mut charged = 0.0;
        let end = t0 + secs(1000.0);
        loop {
            let (worker, &free) = workers.iter().enumerate().min_by_key(|(_, at)| **at).expect("four workers");
            let start = budget.wait(free).unwrap_or(free);
            if start >= end {
                break;
            }
            // The call ends 0.2 s later and is charged then; the worker is free again at that time.
            budget.charge(0.2, start + secs(0.2));
            charged += 0.2;
            workers[worker] = start + secs(0.2);
        }
        let rate = charged / 1000.0;
        assert!(rate <= 0.3 + (0.3 + 4.0 * 0.2) / 1000.0, "{rate}");
        assert!(rate >= 0.3 - 0.2 * 4.0 / 1000.0, "the share is used, not starved: {rate}");
        assert!(budget.over_seconds(end) > 900.0, "over its share most of the time: {}", budget.over_seconds(end));
    }

    #[test]
    fn throttled_holds_for_ten_seconds_after_the_bucket_is_back_at_zero() {
        let t0 = Instant::now();
        let mut budget = CpuBudget::new(share("1"), t0);
        assert_eq!(budget.throttled(t0), None);
        assert!(budget.charge(3.0, t0)); // 2 owed: over until t0 + 2 s
        assert_eq!(budget.throttled(t0 + secs(1.0)), Some(t0 + secs(12.0)));
        assert!(!budget.charge(0.5, t0 + secs(1.0)), "still over: the same interval, extended");
        assert_eq!(budget.throttled(t0 + secs(1.0)), Some(t0 + secs(12.5)));
        assert_eq!(budget.throttled(t0 + secs(12.5)), None);
        assert!(budget.charge(2.0, t0 + secs(20.0)), "a new interval");
        assert_eq!(budget.over_seconds(t0 + secs(30.0)), 2.5 + 1.0);
    }

    #[test]
    fn a_new_share_changes_the_refill_rate_and_the_burst_at_once() {
        let t0 = Instant::now();
        let mut budget = CpuBudget::new(share("4"), t0);
        budget.charge(6.0, t0); // 2 owed: 0.5 s at 4 per second
        assert_eq!(budget.wait(t0), Some(t0 + secs(0.5)));
        budget.set_share(share("1"), t0);
        assert_eq!(budget.wait(t0), Some(t0 + secs(2.0)), "2 owed at 1 per second");
        assert_eq!(budget.over_seconds(t0 + secs(5.0)), 2.0);
        assert_eq!(budget.tokens(t0 + secs(60.0)), 1.0, "the burst is the new share's");
        budget.set_share(share("0.5"), t0 + secs(60.0));
        assert_eq!(budget.tokens(t0 + secs(60.0)), 0.5);
    }
}
