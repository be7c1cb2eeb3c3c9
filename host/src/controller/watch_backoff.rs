//! [`WatchBackoff`]: how long a watch waits before trying again after an error.
//!
//! kube-runtime's default (client-go's reflector: 0.8 s doubling to 30 s, reset only after
//! 120 s without errors) is kind to a struggling API server, but after a server that was just
//! away (restarted, upgraded, a network blip) it leaves the host blind for up to half a minute
//! after the server is back: 38 s were measured from a restart to the first reconcile of a new
//! object. The host's watches instead double from [`MIN_DELAY`] to at most [`MAX_DELAY`] (with
//! up to a quarter more of jitter, so that many watches do not come back in lockstep), and start
//! over at the first event received: a watch is back within about [`MAX_DELAY`] of its server.

use std::time::{Duration, SystemTime};

use kube::runtime::utils::Backoff;

/// The first wait after an error.
pub const MIN_DELAY: Duration = Duration::from_millis(500);
/// The longest wait between attempts (before jitter).
pub const MAX_DELAY: Duration = Duration::from_secs(3);

/// Doubling waits from [`MIN_DELAY`] to [`MAX_DELAY`], plus jitter; reset by the watch on every
/// event.
#[derive(Debug, Clone)]
pub struct WatchBackoff {
    next: Duration,
}

impl Default for WatchBackoff {
    fn default() -> Self {
        Self { next: MIN_DELAY }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let base = self.next;
        self.next = (self.next * 2).min(MAX_DELAY);
        // Up to 25 % more, from the clock's nanoseconds: spread, not security.
        let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        Some(base + base.mul_f64(f64::from(nanos % 1000) / 4000.0))
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = MIN_DELAY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_cap_with_at_most_a_quarter_of_jitter_and_start_over_on_reset() {
        let mut backoff = WatchBackoff::default();
        let bases = [500, 1000, 2000, 3000, 3000, 3000, 3000, 3000];
        for base in bases {
            let wait = backoff.next().unwrap();
            let base = Duration::from_millis(base);
            assert!(wait >= base && wait <= base + base / 4, "{wait:?} for {base:?}");
        }
        let total: Duration = WatchBackoff::default().take(20).sum();
        assert!(total < Duration::from_secs(80), "never the default's 30 s steps: {total:?}");
        backoff.reset();
        assert!(backoff.next().unwrap() <= MIN_DELAY + MIN_DELAY / 4);
    }
}
