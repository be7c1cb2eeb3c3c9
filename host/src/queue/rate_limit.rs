//! Retry delays for failed keys: controller-runtime's default controller rate limiter.
//!
//! The delay is the max (client-go's `MaxOfRateLimiter`) of a per-key exponential backoff
//! (`ItemExponentialFailureRateLimiter`, 5 ms → 1000 s) and a global token bucket
//! (`BucketRateLimiter`, 10/s, burst 100).

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

use crate::allocator::ShrinkWhenSparse;

/// Rate-limiting settings of a [`WorkQueue`](super::WorkQueue). `Default` is controller-runtime's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueConfig {
    /// Backoff after a key's first failure; it doubles with each further one. Default 5 ms.
    pub base_delay: Duration,
    /// Cap of the per-key backoff. Default 1000 s.
    pub max_delay: Duration,
    /// Refill rate of the global token bucket. Default 10. A value that is not finite and
    /// positive (`0.0`, `f64::INFINITY`, NaN) disables the global limit.
    pub rate_per_second: f64,
    /// Size of the global token bucket (rate-limited adds allowed at once). Default 100;
    /// `0` is treated as `1`.
    pub burst: u32,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self { base_delay: Duration::from_millis(5), max_delay: Duration::from_secs(1000), rate_per_second: 10.0, burst: 100 }
    }
}

impl QueueConfig {
    /// Sets [`QueueConfig::base_delay`].
    #[must_use]
    pub fn base_delay(mut self, delay: Duration) -> Self {
        self.base_delay = delay;
        self
    }
    /// Sets [`QueueConfig::max_delay`].
    #[must_use]
    pub fn max_delay(mut self, delay: Duration) -> Self {
        self.max_delay = delay;
        self
    }
    /// Sets [`QueueConfig::rate_per_second`].
    #[must_use]
    pub fn rate_per_second(mut self, rate: f64) -> Self {
        self.rate_per_second = rate;
        self
    }
    /// Sets [`QueueConfig::burst`].
    #[must_use]
    pub fn burst(mut self, burst: u32) -> Self {
        self.burst = burst;
        self
    }
}

/// Per-key exponential backoff combined with a global token bucket; not synchronised (the
/// [`WorkQueue`](super::WorkQueue) keeps it under its lock).
#[derive(Debug)]
pub struct RateLimiter<K> {
    config: QueueConfig,
    failures: HashMap<K, u32>,
    /// Tokens in the bucket at `tokens_at`; negative when reservations are queued.
    tokens: f64,
    tokens_at: Instant,
}

impl<K: Clone + Eq + Hash + Debug> RateLimiter<K> {
    /// A limiter with no failures and a full bucket at `now`.
    #[must_use]
    pub fn new(config: QueueConfig, now: Instant) -> Self {
        Self { config, failures: HashMap::new(), tokens: f64::from(config.burst.max(1)), tokens_at: now }
    }

    /// The delay before retrying `key` at `now`: `base_delay * 2^failures` capped at
    /// `max_delay`, or the wait for a bucket token if longer. Counts a failure of `key` and
    /// reserves a token (as `golang.org/x/time/rate`'s `Reserve`, so the bucket can go into
    /// debt and later callers wait longer).
    pub fn when(&mut self, key: &K, now: Instant) -> Duration {
        let failures = self.failures.entry(key.clone()).or_insert(0);
        let exponent = *failures;
        *failures = failures.saturating_add(1);
        let QueueConfig { base_delay, max_delay, rate_per_second: rate, burst } = self.config;
        let backoff = 1u32
            .checked_shl(exponent)
            .and_then(|factor| base_delay.checked_mul(factor))
            .map_or(max_delay, |delay| delay.min(max_delay));
        if !(rate.is_finite() && rate > 0.0) {
            return backoff;
        }
        let refill = now.saturating_duration_since(self.tokens_at).as_secs_f64() * rate;
        self.tokens = (self.tokens + refill).min(f64::from(burst.max(1))) - 1.0;
        self.tokens_at = self.tokens_at.max(now);
        let bucket = if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::try_from_secs_f64(-self.tokens / rate).unwrap_or(Duration::MAX)
        };
        backoff.max(bucket)
    }

    /// Forgets `key`'s failures (its next backoff is `base_delay` again).
    pub fn forget(&mut self, key: &K) {
        self.failures.remove(key);
        self.failures.shrink_when_sparse();
    }

    /// Failures of `key` counted by [`RateLimiter::when`] since it was last forgotten.
    pub fn failures(&self, key: &K) -> u32 {
        self.failures.get(key).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn delays(limiter: &mut RateLimiter<&'static str>, key: &'static str, now: Instant, n: usize) -> Vec<Duration> {
        (0..n).map(|_| limiter.when(&key, now)).collect()
    }

    #[test]
    fn backoff_doubles_per_failure_and_is_capped() {
        let now = Instant::now();
        let mut limiter = RateLimiter::new(QueueConfig::default().rate_per_second(0.0).max_delay(40 * MS), now);
        assert_eq!(delays(&mut limiter, "a", now, 6), [5, 10, 20, 40, 40, 40].map(|ms| ms * MS));
        assert_eq!((limiter.failures(&"a"), limiter.failures(&"b")), (6, 0));
        limiter.failures.insert("a", u32::MAX);
        assert_eq!(limiter.when(&"a", now), 40 * MS, "no overflow at huge failure counts");
    }

    #[test]
    fn forget_resets_the_failure_count() {
        let now = Instant::now();
        let mut limiter = RateLimiter::new(QueueConfig::default(), now);
        delays(&mut limiter, "a", now, 3);
        limiter.forget(&"a");
        assert_eq!((limiter.failures(&"a"), limiter.when(&"a", now)), (0, 5 * MS));
    }

    #[test]
    fn the_global_bucket_delays_bursts_beyond_burst_and_refills() {
        let start = Instant::now();
        let config = QueueConfig::default().rate_per_second(10.0).burst(3);
        let mut limiter = RateLimiter::new(config, start);
        let burst: Vec<_> = ["k0", "k1", "k2", "k3", "k4", "k5"].iter().map(|key| limiter.when(key, start)).collect();
        assert_eq!(burst, [5, 5, 5, 100, 200, 300].map(|ms| ms * MS), "the max of backoff and bucket");
        // Six tokens taken from three: a debt of three, paid after 300 ms, full again after 600 ms.
        assert_eq!(limiter.when(&"k6", start + 250 * MS), 150 * MS);
        assert_eq!(delays(&mut limiter, "k7", start + 1000 * MS, 3), [5, 10, 20].map(|ms| ms * MS));
        assert_eq!(limiter.when(&"k8", start + 1000 * MS), 100 * MS);
    }

    #[test]
    fn a_rate_that_is_not_finite_and_positive_disables_the_bucket() {
        let now = Instant::now();
        for rate in [0.0, -1.0, f64::INFINITY, f64::NAN] {
            let mut limiter = RateLimiter::new(QueueConfig::default().rate_per_second(rate).burst(1), now);
            assert_eq!(delays(&mut limiter, "a", now, 3), [5, 10, 20].map(|ms| ms * MS), "rate {rate}");
        }
    }
}
