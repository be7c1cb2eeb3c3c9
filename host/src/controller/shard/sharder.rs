//! [`Sharder`]: on the elected leader only, assigns every parent of every loaded plugin to a
//! live replica and moves parents when the members change.
//!
//! Each pass (every retry period) reads the live members, lists the parents' metadata of each
//! plugin's parent kind, and for each parent [`decide`]s: label an unassigned parent (or one
//! of a dead replica) for its owner on the [`Ring`]; ask the live owner of a parent that
//! belongs elsewhere now to drain it ([`DRAIN_LABEL`]); or leave it. Writes are JSON merge
//! patches of the labels alone, with the listed `resourceVersion` as a precondition (a conflict
//! waits for the next pass) and their own field manager, so they never touch what the plugins
//! write (status, children, finalizers).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::membership::Membership;
use super::ring::Ring;
use super::{DRAIN_LABEL, SHARD_LABEL, SHARDER_MANAGER};
use crate::controller::manager::Manager;

/// What the sharder does with one parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Move {
    /// Label it for this member (it has no live owner).
    Assign(String),
    /// Ask its live owner to let it go (it belongs to another member now).
    Drain,
}

/// What to do with the parent `key` (`namespace/name`, or `name` when cluster-scoped) that
/// carries `labels`, given the live members on `ring`; `None` when it is where it belongs, or
/// its owner is draining it.
pub fn decide(key: &str, labels: &BTreeMap<String, String>, ring: &Ring) -> Option<Move> {
    let desired = ring.owner(key)?;
    let owner = labels.get(SHARD_LABEL).map(String::as_str).filter(|o| !o.is_empty());
    match owner {
        None => Some(Move::Assign(desired.to_owned())),
        Some(owner) if ring.members().iter().all(|m| m != owner) => Some(Move::Assign(desired.to_owned())),
        Some(owner) if owner == desired || labels.contains_key(DRAIN_LABEL) => None,
        Some(_) => Some(Move::Drain),
    }
}

/// The label patch of a move, with `resource_version` as its precondition.
fn patch(to: &Move, resource_version: Option<&str>) -> Value {
    let labels = match to {
        Move::Assign(member) => json!({ SHARD_LABEL: member, DRAIN_LABEL: null }),
        Move::Drain => json!({ DRAIN_LABEL: "true" }),
    };
    json!({"metadata": {"resourceVersion": resource_version, "labels": labels}})
}

/// Writes at once per pass.
const CONCURRENT_WRITES: usize = 16;

/// The leader's assigner of parents.
pub struct Sharder {
    manager: Arc<Manager>,
    membership: Arc<Membership>,
}

impl std::fmt::Debug for Sharder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sharder").field("membership", &self.membership).finish_non_exhaustive()
    }
}

impl Sharder {
    /// A sharder of the parents of `manager`'s plugins over the members `membership` reads.
    pub fn new(manager: Arc<Manager>, membership: Arc<Membership>) -> Self {
        Self { manager, membership }
    }

    /// Pass after pass, every retry period, until dropped (the caller runs it while leading).
    pub async fn run(&self) -> std::convert::Infallible {
        tracing::info!("sharder running: assigning parents to the live replicas");
        loop {
            if let Err(e) = self.pass().await {
                tracing::warn!(error = %e, "sharder pass failed; retrying");
            }
            if let Err(e) = self.membership.sweep().await {
                tracing::debug!(error = %e, "cannot sweep the stale shard leases");
            }
            tokio::time::sleep(self.membership.config().retry_period).await;
        }
    }

    /// One pass over every parent of every loaded plugin.
    ///
    /// # Errors
    /// The API server's, reading the members or listing parents (failed writes are logged and
    /// retried next pass).
    pub async fn pass(&self) -> kube::Result<()> {
        let ring = Ring::new(self.membership.live().await?);
        if ring.members().is_empty() {
            return Ok(());
        }
        let client = self.manager.client().clone();
        let namespaces: Vec<Option<String>> = match self.manager.install().namespaces() {
            Some(names) => names.iter().cloned().map(Some).collect(),
            None => vec![None],
        };
        for parent in self.manager.parent_kinds() {
            let places: Vec<Option<String>> =
                if parent.scope == crate::contract::Scope::Namespaced { namespaces.clone() } else { vec![None] };
            for place in places {
                let api: Api<DynamicObject> = match &place {
                    Some(ns) => Api::namespaced_with(client.clone(), ns, &parent.resource),
                    None => Api::all_with(client.clone(), &parent.resource),
                };
                let listed = api.list_metadata(&ListParams::default()).await?;
                let moves: Vec<(Option<String>, String, Move, Option<String>)> = listed
                    .items
                    .into_iter()
                    .filter_map(|p| {
                        let name = p.metadata.name?;
                        let key = match &p.metadata.namespace {
                            Some(ns) => format!("{ns}/{name}"),
                            None => name.clone(),
                        };
                        let to = decide(&key, &p.metadata.labels.unwrap_or_default(), &ring)?;
                        Some((p.metadata.namespace, name, to, p.metadata.resource_version))
                    })
                    .collect();
                if moves.is_empty() {
                    continue;
                }
                let assigned = moves.iter().filter(|(_, _, m, _)| matches!(m, Move::Assign(_))).count();
                tracing::info!(kind = %parent.resource.kind, assigned, draining = moves.len() - assigned, "sharder moves parents");
                let params = PatchParams { field_manager: Some(SHARDER_MANAGER.to_owned()), ..PatchParams::default() };
                let writes = moves.into_iter().map(|(ns, name, to, rv)| {
                    let api: Api<DynamicObject> = match &ns {
                        Some(ns) => Api::namespaced_with(client.clone(), ns, &parent.resource),
                        None => Api::all_with(client.clone(), &parent.resource),
                    };
                    let params = &params;
                    async move {
                        let body = patch(&to, rv.as_deref());
                        if let Err(e) = api.patch_metadata(&name, params, &Patch::Merge(body)).await {
                            tracing::debug!(%name, error = %e, "shard label not written; next pass");
                        }
                    }
                });
                futures::stream::iter(writes).buffer_unordered(CONCURRENT_WRITES).collect::<Vec<()>>().await;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    /// A key `ring` gives to `member`.
    fn key_of(ring: &Ring, member: &str) -> String {
        (0..).map(|i| format!("default/p-{i}")).find(|k| ring.owner(k) == Some(member)).expect("some key")
    }

    #[test]
    fn an_unassigned_parent_is_labelled_for_its_owner_on_the_ring() {
        let ring = Ring::new(["a", "b", "c"]);
        let key = key_of(&ring, "b");
        assert_eq!(decide(&key, &labels(&[]), &ring), Some(Move::Assign("b".into())));
        assert_eq!(decide(&key, &labels(&[(SHARD_LABEL, "")]), &ring), Some(Move::Assign("b".into())));
    }

    #[test]
    fn a_dead_replicas_parent_is_relabelled_at_once_even_while_draining() {
        let ring = Ring::new(["a", "b"]);
        let key = key_of(&ring, "a");
        assert_eq!(decide(&key, &labels(&[(SHARD_LABEL, "dead")]), &ring), Some(Move::Assign("a".into())));
        let draining = labels(&[(SHARD_LABEL, "dead"), (DRAIN_LABEL, "true")]);
        assert_eq!(decide(&key, &draining, &ring), Some(Move::Assign("a".into())));
    }

    #[test]
    fn a_live_owner_is_asked_to_drain_and_then_waited_for() {
        let ring = Ring::new(["a", "b"]);
        let key = key_of(&ring, "a");
        assert_eq!(decide(&key, &labels(&[(SHARD_LABEL, "b")]), &ring), Some(Move::Drain));
        assert_eq!(decide(&key, &labels(&[(SHARD_LABEL, "b"), (DRAIN_LABEL, "true")]), &ring), None);
    }

    #[test]
    fn a_parent_where_it_belongs_is_left_alone() {
        let ring = Ring::new(["a", "b"]);
        let key = key_of(&ring, "b");
        assert_eq!(decide(&key, &labels(&[(SHARD_LABEL, "b")]), &ring), None);
        assert_eq!(decide(&key, &labels(&[]), &Ring::new(Vec::<String>::new())), None);
    }

    #[test]
    fn the_patches_touch_only_the_labels_under_the_listed_version() {
        let assign = patch(&Move::Assign("b".into()), Some("42"));
        assert_eq!(assign, json!({"metadata": {"resourceVersion": "42", "labels": {SHARD_LABEL: "b", DRAIN_LABEL: null}}}));
        assert_eq!(patch(&Move::Drain, Some("7"))["metadata"]["labels"], json!({DRAIN_LABEL: "true"}));
    }
}
