//! [`Leadership`]: whether this host may write to the cluster now.
//!
//! Every replica loads its plugins and syncs its caches whether it leads or not, so a standby is
//! warm and Ready; only what writes (the reconcile workers, the WasmPlugin status reports) waits
//! for leadership. A host without leader election leads from the start.

use std::sync::Arc;

use tokio::sync::watch;

use crate::metrics::Metrics;

/// The host's role, shared by everything that writes; cheap to clone.
#[derive(Debug, Clone)]
pub struct Leadership {
    leading: Arc<watch::Sender<bool>>,
    metrics: Arc<Metrics>,
}

impl Leadership {
    /// A role that starts as `leading`; every change is reported on the `wasmop_leader` gauge
    /// of `metrics`.
    pub fn new(leading: bool, metrics: Arc<Metrics>) -> Self {
        metrics.leader(leading);
        Self { leading: Arc::new(watch::channel(leading).0), metrics }
    }

    /// Whether this host may write now.
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// Become the leader (`true`) or a standby (`false`); waiters of
    /// [`Leadership::until_leader`] wake on `true`.
    pub fn set(&self, leading: bool) {
        self.metrics.leader(leading);
        if self.leading.send_replace(leading) != leading {
            tracing::info!(leading, "leadership changed");
        }
    }

    /// Resolves once this host leads (at once if it does).
    pub async fn until_leader(&self) {
        let mut rx = self.leading.subscribe();
        // The sender lives in `self`: the channel cannot close while this waits.
        let _ = rx.wait_for(|leading| *leading).await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_standby_waits_until_it_leads_and_the_gauge_follows() {
        let metrics = Arc::new(Metrics::new());
        let role = Leadership::new(false, Arc::clone(&metrics));
        assert!(!role.is_leader());
        assert!(metrics.render().contains("wasmop_leader 0"));
        let waiting = tokio::time::timeout(Duration::from_millis(50), role.until_leader()).await;
        assert!(waiting.is_err(), "a standby does not pass");
        let waiter = tokio::spawn({
            let role = role.clone();
            async move { role.until_leader().await }
        });
        role.set(true);
        tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("woken").expect("no panic");
        assert!(role.is_leader());
        assert!(metrics.render().contains("wasmop_leader 1"));
    }
}
