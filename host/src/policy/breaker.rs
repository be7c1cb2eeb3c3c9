//! Circuit breaker settings: the host's [`BreakerConfig`] and a plugin's [`BreakerOverrides`]
//! of it. Plain data; `controller::breaker` is the breaker that runs on them.

use std::time::Duration;

/// When a plugin's circuit breaker trips and how long it stays open. `Default` documents the
/// defaults; setting [`BreakerConfig::window_calls`] or [`BreakerConfig::hot_loop_writes`] to
/// `0` disables that trip.
#[derive(Debug, Clone, PartialEq)]
pub struct BreakerConfig {
    /// Finished reconciles the failure ratio is computed over. Default 20.
    pub window_calls: usize,
    /// Share of failed reconciles in a full window that trips the breaker. Default 0.8.
    pub failure_ratio: f64,
    /// Consecutive writing reconciles of one object that trip the breaker. Default 50.
    ///
    /// With [`BreakerConfig::hot_loop_window`] this is a rate: a real hot loop writes
    /// hundreds of times a second (10 writes in 32–72 ms were measured on a real control
    /// plane), while an object converging through a rollout (a `readyReplicas` that follows
    /// each Pod) writes a few times a second at most.
    pub hot_loop_writes: usize,
    /// Those writes count only when they all happened within this time. Default 10 s.
    pub hot_loop_window: Duration,
    /// How long the breaker stays open after a first trip. Default 30 s.
    pub cooldown: Duration,
    /// Cap of the doubling cooldown. Default 5 minutes.
    pub max_cooldown: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            window_calls: 20,
            failure_ratio: 0.8,
            hot_loop_writes: 50,
            hot_loop_window: Duration::from_secs(10),
            cooldown: Duration::from_secs(30),
            max_cooldown: Duration::from_secs(300),
        }
    }
}

impl BreakerConfig {
    /// Sets [`BreakerConfig::window_calls`].
    #[must_use]
    pub fn window_calls(mut self, calls: usize) -> Self {
        self.window_calls = calls;
        self
    }
    /// Sets [`BreakerConfig::failure_ratio`].
    #[must_use]
    pub fn failure_ratio(mut self, ratio: f64) -> Self {
        self.failure_ratio = ratio;
        self
    }
    /// Sets [`BreakerConfig::hot_loop_writes`].
    #[must_use]
    pub fn hot_loop_writes(mut self, writes: usize) -> Self {
        self.hot_loop_writes = writes;
        self
    }
    /// Sets [`BreakerConfig::hot_loop_window`].
    #[must_use]
    pub fn hot_loop_window(mut self, window: Duration) -> Self {
        self.hot_loop_window = window;
        self
    }
    /// Sets [`BreakerConfig::cooldown`].
    #[must_use]
    pub fn cooldown(mut self, cooldown: Duration) -> Self {
        self.cooldown = cooldown;
        self
    }
    /// Sets [`BreakerConfig::max_cooldown`].
    #[must_use]
    pub fn max_cooldown(mut self, cooldown: Duration) -> Self {
        self.max_cooldown = cooldown;
        self
    }

    /// The cooldown after `level` escalations: `cooldown · 2^level`, capped.
    pub fn cooldown_at(&self, level: u32) -> Duration {
        let factor = 1u32.checked_shl(level).unwrap_or(u32::MAX);
        self.cooldown.saturating_mul(factor).min(self.max_cooldown.max(self.cooldown))
    }
}

/// Circuit breaker settings of one plugin over the host's [`BreakerConfig`]; `None` keeps the
/// host's value. Field meanings are [`BreakerConfig`]'s.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BreakerOverrides {
    /// [`BreakerConfig::window_calls`] (policy `breaker.windowCalls`).
    pub window_calls: Option<usize>,
    /// [`BreakerConfig::failure_ratio`] (policy `breaker.failureRatio`).
    pub failure_ratio: Option<f64>,
    /// [`BreakerConfig::hot_loop_writes`] (policy `breaker.hotLoopWrites`).
    pub hot_loop_writes: Option<usize>,
    /// [`BreakerConfig::hot_loop_window`] (policy `breaker.hotLoopWindow`).
    pub hot_loop_window: Option<Duration>,
    /// [`BreakerConfig::cooldown`] (policy `breaker.cooldown`).
    pub cooldown: Option<Duration>,
    /// [`BreakerConfig::max_cooldown`] (policy `breaker.maxCooldown`).
    pub max_cooldown: Option<Duration>,
}

impl BreakerOverrides {
    /// `base` with these overrides.
    #[must_use]
    pub fn apply(&self, mut base: BreakerConfig) -> BreakerConfig {
        let o = self.clone();
        base.window_calls = o.window_calls.unwrap_or(base.window_calls);
        base.failure_ratio = o.failure_ratio.unwrap_or(base.failure_ratio);
        base.hot_loop_writes = o.hot_loop_writes.unwrap_or(base.hot_loop_writes);
        base.hot_loop_window = o.hot_loop_window.unwrap_or(base.hot_loop_window);
        base.cooldown = o.cooldown.unwrap_or(base.cooldown);
        base.max_cooldown = o.max_cooldown.unwrap_or(base.max_cooldown);
        base
    }
}
