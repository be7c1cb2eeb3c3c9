//! [`Membership`]: this replica's own `coordination.k8s.io/v1` Lease, and the live members
//! read from everyone's.
//!
//! Each replica applies the Lease `wasmop-shard-<identity>` (label [`LEASE_LABEL`]`=true`) in
//! the host's namespace every retry period with a fresh `renewTime`. A Lease whose `renewTime`
//! plus `leaseDurationSeconds` is past is a dead member. A replica that cannot renew within
//! the renew deadline stops ([`Membership::hold`] returns): the sharder moves its parents once
//! the Lease expires, and it must not reconcile them any more by then.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, Preconditions};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::{LEASE_LABEL, ShardHost};
use crate::leader::LeaseConfig;
use crate::metrics::Metrics;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

/// Why this replica stopped being a member.
#[derive(Debug, thiserror::Error)]
pub enum MembershipError {
    /// The membership Lease was not renewed within the renew deadline: the sharder may move
    /// this replica's parents to others now.
    #[error("lost the shard lease {name}: not renewed within {deadline:?}")]
    Lost {
        /// The Lease.
        name: String,
        /// The renew deadline.
        deadline: std::time::Duration,
    },
}

/// The name of the membership Lease of replica `identity`.
pub fn lease_name(identity: &str) -> String {
    format!("wasmop-shard-{identity}")
}

/// The member a Lease stands for, if it is alive at `now`: its holder, renewed within its
/// duration.
pub fn live_member(lease: &Lease, now: Timestamp) -> Option<&str> {
    let spec = lease.spec.as_ref()?;
    let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty())?;
    let renewed = spec.renew_time.as_ref()?.0;
    let duration = SignedDuration::from_secs(i64::from(spec.lease_duration_seconds?));
    (renewed + duration >= now).then_some(holder)
}

/// How many Lease durations after its last renewal a dead member's Lease is deleted (a pod of
/// a Deployment killed without a clean exit never comes back under its name).
pub const STALE_AFTER_DURATIONS: i32 = 10;

/// Whether `lease` was last renewed more than [`STALE_AFTER_DURATIONS`] of its durations
/// before `now` (a Lease without renew time or duration is not judged).
pub fn stale(lease: &Lease, now: Timestamp) -> bool {
    let Some(spec) = lease.spec.as_ref() else { return false };
    let (Some(renewed), Some(secs)) = (spec.renew_time.as_ref(), spec.lease_duration_seconds) else { return false };
    renewed.0 + SignedDuration::from_secs(i64::from(secs) * i64::from(STALE_AFTER_DURATIONS)) < now
}

/// This replica's membership.
pub struct Membership {
    api: Api<Lease>,
    identity: String,
    config: LeaseConfig,
    members: Gauge,
    parents: Family<PluginLabels, Gauge>,
    cached: Family<KindLabels, Gauge>,
}

impl std::fmt::Debug for Membership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Membership").field("identity", &self.identity).finish_non_exhaustive()
    }
}

impl Membership {
    /// Replica `identity` (a [`shard_name`](super::shard_name)) with its Lease in `namespace`;
    /// registers the `wasmop_shard_members`, `wasmop_shard_parents` and
    /// `wasmop_shard_cached_objects` gauges in `metrics`.
    pub fn new(client: kube::Client, namespace: &str, identity: &str, config: LeaseConfig, metrics: &Metrics) -> Self {
        let members = Gauge::default();
        let parents = Family::<PluginLabels, Gauge>::default();
        metrics.register("wasmop_shard_members", "Live shard members (replicas with a renewed shard Lease)", members.clone());
        metrics.register(
            "wasmop_shard_parents",
            "Parents of each plugin this replica owns (labelled for its shard)",
            parents.clone(),
        );
        let cached = Family::<KindLabels, Gauge>::default();
        metrics.register(
            "wasmop_shard_cached_objects",
            "Objects of each watched kind this replica's cache holds (with its children and parents sharded: about its share)",
            cached.clone(),
        );
        Self { api: Api::namespaced(client, namespace), identity: identity.to_owned(), config, members, parents, cached }
    }

    /// This replica's identity: the value of its parents' shard label.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The Lease timings.
    pub fn config(&self) -> LeaseConfig {
        self.config
    }

    /// Apply this replica's Lease with a fresh `renewTime` (creating it if absent).
    ///
    /// # Errors
    /// The API server's.
    pub async fn renew(&self) -> kube::Result<()> {
        let name = lease_name(&self.identity);
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(BTreeMap::from([(LEASE_LABEL.to_owned(), "true".to_owned())])),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(self.config.lease_duration.as_secs().max(1) as i32),
                renew_time: Some(MicroTime(Timestamp::now())),
                ..LeaseSpec::default()
            }),
        };
        let mut value = serde_json::to_value(&lease).expect("a Lease serializes");
        value["apiVersion"] = "coordination.k8s.io/v1".into();
        value["kind"] = "Lease".into();
        self.api.patch(&name, &PatchParams::apply("wasmop-shard").force(), &Patch::Apply(value)).await.map(drop)
    }

    /// Renew every retry period, and count the parents `manager`'s plugins own then (the
    /// `wasmop_shard_parents` gauge), the cached objects per kind and the live members; returns when no renewal has
    /// succeeded within the renew deadline (the caller stops reconciling).
    pub async fn hold(&self, manager: &dyn ShardHost) -> MembershipError {
        let mut renewed = tokio::time::Instant::now();
        loop {
            match self.renew().await {
                Ok(()) => renewed = tokio::time::Instant::now(),
                Err(e) => tracing::warn!(identity = %self.identity, error = %e, "cannot renew the shard lease"),
            }
            for (plugin, count) in manager.cached_parents() {
                self.parents.get_or_create(&PluginLabels { plugin }).set(count as i64);
            }
            for (kind, count) in manager.cached_objects() {
                self.cached.get_or_create(&KindLabels { kind }).set(count as i64);
            }
            if let Err(e) = self.live().await {
                tracing::debug!(error = %e, "cannot list the shard members");
            }
            if renewed.elapsed() > self.config.renew_deadline {
                return MembershipError::Lost { name: lease_name(&self.identity), deadline: self.config.renew_deadline };
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    /// The live members, sorted; also sets the `wasmop_shard_members` gauge.
    ///
    /// # Errors
    /// The API server's (listing the Leases).
    pub async fn live(&self) -> kube::Result<Vec<String>> {
        let leases = self.api.list(&ListParams::default().labels(&format!("{LEASE_LABEL}=true"))).await?;
        let now = Timestamp::now();
        let mut live: Vec<String> = leases.items.iter().filter_map(|l| live_member(l, now)).map(str::to_owned).collect();
        live.sort();
        live.dedup();
        self.members.set(live.len() as i64);
        Ok(live)
    }

    /// Delete the Leases of members dead for long ([`stale`]); each delete is conditional on
    /// the version read, so a member that came back under the same name meanwhile keeps its
    /// Lease. Run by the sharder.
    ///
    /// # Errors
    /// The API server's (listing the Leases; failed deletes are logged).
    pub async fn sweep(&self) -> kube::Result<()> {
        let leases = self.api.list(&ListParams::default().labels(&format!("{LEASE_LABEL}=true"))).await?;
        let now = Timestamp::now();
        for lease in leases.items.iter().filter(|l| stale(l, now)) {
            let name = lease.metadata.name.clone().unwrap_or_default();
            let params = DeleteParams {
                preconditions: Some(Preconditions { resource_version: lease.metadata.resource_version.clone(), uid: None }),
                ..DeleteParams::default()
            };
            match self.api.delete(&name, &params).await {
                Ok(_) => tracing::info!(lease = %name, "deleted the lease of a shard member dead for long"),
                Err(e) => tracing::debug!(lease = %name, error = %e, "stale shard lease not deleted"),
            }
        }
        Ok(())
    }

    /// Leave (on graceful shutdown, after the last reconcile ended): delete the Lease, so the
    /// sharder moves this replica's parents at once instead of after the Lease expires.
    pub async fn leave(&self) {
        let name = lease_name(&self.identity);
        match self.api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => tracing::info!(lease = %name, "left the shard: lease deleted"),
            Err(e) => tracing::warn!(lease = %name, error = %e, "cannot delete the shard lease"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: Option<&str>, renewed_secs_ago: i64, duration: i32) -> Lease {
        Lease {
            metadata: ObjectMeta::default(),
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                renew_time: Some(MicroTime(Timestamp::now() - SignedDuration::from_secs(renewed_secs_ago))),
                lease_duration_seconds: Some(duration),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn a_lease_renewed_within_its_duration_is_a_live_member() {
        let l = lease(Some("host-a"), 3, 15);
        assert_eq!(live_member(&l, Timestamp::now()), Some("host-a"));
    }

    #[test]
    fn a_lease_not_renewed_within_its_duration_is_a_dead_member() {
        assert_eq!(live_member(&lease(Some("host-a"), 16, 15), Timestamp::now()), None);
    }

    #[test]
    fn a_lease_without_holder_or_times_is_no_member() {
        assert_eq!(live_member(&lease(None, 0, 15), Timestamp::now()), None);
        assert_eq!(live_member(&lease(Some(""), 0, 15), Timestamp::now()), None);
        let mut no_time = lease(Some("host-a"), 0, 15);
        no_time.spec.as_mut().unwrap().renew_time = None;
        assert_eq!(live_member(&no_time, Timestamp::now()), None);
    }

    #[test]
    fn a_lease_dead_for_ten_durations_is_stale_and_a_merely_expired_one_is_not() {
        let now = Timestamp::now();
        assert!(stale(&lease(Some("gone"), 151, 15), now));
        assert!(!stale(&lease(Some("late"), 20, 15), now), "expired (not live) but not stale yet");
        assert!(!stale(&lease(Some("host-a"), 1, 15), now));
    }

    #[test]
    fn the_lease_is_named_for_the_replica() {
        assert_eq!(lease_name("host-a"), "wasmop-shard-host-a");
    }
}
