//! Leader election on a `coordination.k8s.io/v1` Lease, with controller-runtime's defaults:
//! only the holder of the Lease writes (reconciles, `WasmPlugin` reports; see
//! [`Leadership`](super::Leadership)); a follower is warm (plugins loaded, caches synced, Ready)
//! and takes over once the holder releases the Lease or has not renewed it for the lease
//! duration. A leader that cannot renew within the renew deadline stops writing and the host
//! exits with an error, to come back as a follower.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ObjectMeta, PostParams};

/// Lease timings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseConfig {
    /// How long a Lease stays valid without renewal (15 s).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before giving up leadership (10 s).
    pub renew_deadline: Duration,
    /// Pause between attempts to acquire or renew (2 s).
    pub retry_period: Duration,
}

impl Default for LeaseConfig {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Why leadership ended.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The Lease could not be renewed within the renew deadline; another host may lead now.
    #[error("lost the leader lease {name}: not renewed within {deadline:?}")]
    Lost {
        /// The Lease.
        name: String,
        /// The renew deadline.
        deadline: Duration,
    },
}

/// A candidate for one Lease.
pub struct LeaderElector {
    api: Api<Lease>,
    name: String,
    identity: String,
    config: LeaseConfig,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector").field("lease", &self.name).field("identity", &self.identity).finish()
    }
}

fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

impl LeaderElector {
    /// A candidate named `identity` for the Lease `namespace/name`.
    pub fn new(client: kube::Client, namespace: &str, name: &str, identity: impl Into<String>, config: LeaseConfig) -> Self {
        Self { api: Api::namespaced(client, namespace), name: name.to_owned(), identity: identity.into(), config }
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// One attempt to acquire or renew: `Ok(true)` when this candidate holds the Lease after it.
    ///
    /// # Errors
    /// API errors other than a lost race (a conflict is `Ok(false)`).
    pub async fn try_acquire_or_renew(&self) -> kube::Result<bool> {
        let spec = |transitions: i32, acquired: Option<MicroTime>| LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.config.lease_duration.as_secs() as i32),
            acquire_time: acquired.or_else(|| Some(now())),
            renew_time: Some(now()),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        };
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(self.name.clone()), ..ObjectMeta::default() },
                spec: Some(spec(0, None)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let current = lease.spec.clone().unwrap_or_default();
        let held_by_me = current.holder_identity.as_deref() == Some(self.identity.as_str());
        if !held_by_me {
            let expired = match (&current.renew_time, current.lease_duration_seconds) {
                (Some(renewed), Some(secs)) => renewed.0 + SignedDuration::from_secs(i64::from(secs)) < Timestamp::now(),
                _ => true,
            };
            let released = current.holder_identity.as_deref().is_none_or(str::is_empty);
            if !expired && !released {
                return Ok(false);
            }
        }
        let transitions = current.lease_transitions.unwrap_or(0) + i32::from(!held_by_me);
        let acquired = if held_by_me { current.acquire_time } else { None };
        lease.spec = Some(spec(transitions, acquired));
        // `replace` carries the resourceVersion read above: a concurrent change is a conflict.
        match self.api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Wait until this candidate holds the Lease.
    pub async fn acquire(&self) {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    tracing::info!(lease = %self.name, identity = %self.identity, "became leader");
                    return;
                }
                Ok(false) => tracing::debug!(lease = %self.name, "another host leads; waiting"),
                Err(e) => tracing::warn!(lease = %self.name, error = %e, "cannot read or write the leader lease"),
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    /// Keep renewing; returns when a renewal has not succeeded within the renew deadline.
    pub async fn hold(&self) -> LeaderError {
        let mut last_renewed = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => last_renewed = tokio::time::Instant::now(),
                Ok(false) => return LeaderError::Lost { name: self.name.clone(), deadline: self.config.renew_deadline },
                Err(e) => tracing::warn!(lease = %self.name, error = %e, "cannot renew the leader lease"),
            }
            if last_renewed.elapsed() > self.config.renew_deadline {
                return LeaderError::Lost { name: self.name.clone(), deadline: self.config.renew_deadline };
            }
        }
    }

    /// Give the Lease up (on graceful shutdown) so a follower takes over at once.
    pub async fn release(&self) {
        if let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await
            && lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some(self.identity.as_str())
        {
            if let Some(spec) = lease.spec.as_mut() {
                spec.holder_identity = None;
                spec.lease_duration_seconds = Some(1);
            }
            match self.api.replace(&self.name, &PostParams::default(), &lease).await {
                Ok(_) => tracing::info!(lease = %self.name, "released the leader lease"),
                Err(e) => tracing::warn!(lease = %self.name, error = %e, "cannot release the leader lease"),
            }
        }
    }
}
