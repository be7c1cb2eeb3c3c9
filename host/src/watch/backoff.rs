//! [`WatchBackoff`]: how long a watch waits before trying again after an error.
//!
//! kube-runtime's default (client-go's reflector: 0.8 s doubling to 30 s, reset only after
//! 120 s without errors) is kind to a struggling API server, but after a server that was just
//! away (restarted, upgraded, a network blip) it leaves the host blind for up to half a minute
//! after the server is back: 38 s were measured from a restart to the first reconcile of a new
//! object. The host's watches instead double from [`MIN_DELAY`] to at most [`MAX_DELAY`] (with
//! up to a quarter more of jitter, so that many watches do not come back in lockstep), and start
//! over at the first event received: a watch is back within about [`MAX_DELAY`] of its server.
//!
//! [`with_backoff`] applies it to a watcher's stream, but for one error: `410 Gone` (the
//! resource version the watch resumes from has expired, as it has after every API server
//! restart: its watch cache starts anew). That is no trouble of the server's but the signal to
//! list again, and the watcher does so at once: waiting a backoff step first cost 3–4 s per
//! watch after a restart (7 s measured from the server back to a new object reconciled). Only
//! the first `410` in a row is retried at once; another one right after waits as any error.

use std::time::{Duration, SystemTime};

use futures::{Stream, StreamExt};
use kube::runtime::utils::Backoff;
use kube::runtime::watcher;

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

/// Whether a watcher's error is `410 Gone`: its resource version expired, it lists again.
fn is_expired(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::WatchError(status) => status.code == 410,
        watcher::Error::WatchStartFailed(kube::Error::Api(status)) | watcher::Error::WatchFailed(kube::Error::Api(status)) => {
            status.code == 410
        }
        _ => false,
    }
}

/// `stream` (a watcher's), waiting a [`WatchBackoff`] step after each error before it is
/// polled again, and starting the steps over at every event — but going on at once after the
/// first `410 Gone` in a row (see the module's documentation).
pub fn with_backoff<T, S>(stream: S) -> impl Stream<Item = Result<T, watcher::Error>> + Send
where
    S: Stream<Item = Result<T, watcher::Error>> + Send,
    T: Send,
{
    let state = (Box::pin(stream), WatchBackoff::default(), None::<Duration>, false);
    futures::stream::unfold(state, |(mut stream, mut backoff, wait, expired_before)| async move {
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
        }
        let item = stream.next().await?;
        let (wait, expired) = match &item {
            Ok(_) => {
                backoff.reset();
                (None, false)
            }
            Err(e) if is_expired(e) && !expired_before => (None, true),
            Err(_) => (backoff.next(), false),
        };
        Some((item, (stream, backoff, wait, expired)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gone() -> watcher::Error {
        let mut status = kube::core::Status::failure("too old resource version", "Expired");
        status.code = 410;
        watcher::Error::WatchError(Box::new(status))
    }

    fn refused() -> watcher::Error {
        watcher::Error::NoResourceVersion
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_resource_version_is_listed_again_at_once_and_other_errors_back_off() {
        // Paused time: each sleep advances the clock by exactly its wait.
        let items: Vec<Result<u32, watcher::Error>> =
            vec![Err(gone()), Ok(1), Err(refused()), Ok(2), Err(gone()), Err(gone()), Ok(3)];
        let started = tokio::time::Instant::now();
        let mut stream = Box::pin(with_backoff(futures::stream::iter(items)));
        let mut at = Vec::new();
        while let Some(item) = stream.next().await {
            at.push((item.is_ok(), started.elapsed()));
        }
        let waited = |i: usize| at[i].1 - at[i - 1].1;
        assert_eq!(waited(1), Duration::ZERO, "after the first 410: at once");
        assert!(waited(3) >= MIN_DELAY, "after another error: a backoff step ({:?})", waited(3));
        assert_eq!(waited(5), Duration::ZERO, "a 410 after an event: at once again");
        assert!(waited(6) >= MIN_DELAY, "a second 410 in a row waits ({:?})", waited(6));
    }

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
