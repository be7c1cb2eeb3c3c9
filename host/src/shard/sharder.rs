//! [`Sharder`]: on the elected leader only, assigns every parent of every loaded plugin to a
//! live replica, moves parents when the members change, and keeps each parent's children
//! labelled for the parent's replica.
//!
//! The sharder watches instead of listing: metadata-only watches ([`ShardWatches`]) of each plugin's
//! parents and of its children (the host's label) feed stores, and a pass runs on every change
//! they see (a new parent, a parent drained by its owner), after every retry period (the members
//! are Leases that expire by time, and a pass reads them), and over freshly relisted watches every
//! [`RESYNC`] (the safety net). A pass [`decide`]s for each parent: label an unassigned parent (or
//! one of a dead replica) for its owner on the [`Ring`]; ask the live owner of a parent that
//! belongs elsewhere now to drain it ([`DRAIN_LABEL`]); or leave it.
//!
//! Children follow their parent ([`children_owner`]): before a parent is labelled for its new
//! owner, its children (by controller ownerReference, or
//! [`PARENT_UID_LABEL`](crate::actions::PARENT_UID_LABEL) for a
//! cluster-scoped child) are labelled for that owner, so the new owner's child watch holds them
//! before its first reconcile of the parent reads them; the old owner's cache lets them go. A
//! child whose label differs from its settled parent's owner (written before children were
//! labelled, adopted from an older host) is relabelled too.
//!
//! Writes are JSON merge patches of the labels alone, with the watched `resourceVersion` as a
//! precondition (a conflict waits for the next pass) and their own field manager, so they never
//! touch what the plugins write (status, spec, finalizers); the owner's next apply of a child
//! takes its label back under the plugin's field manager, with the same value.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use super::feeds::{ShardWatches, Slim};
use super::membership::Membership;
use super::ring::Ring;
use super::{DRAIN_LABEL, SHARD_LABEL, SHARDER_MANAGER, ShardHost};
use crate::actions::managed_selector;
use crate::cluster::Resolved;
use crate::contract::Scope;

/// One running plugin's kinds, as the sharder assigns them.
#[derive(Debug, Clone)]
pub struct PluginKinds {
    /// The plugin.
    pub plugin: String,
    /// Its parent kind.
    pub parent: Resolved,
    /// Its child kinds.
    pub children: Vec<Resolved>,
}

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
    assignment(key, labels.get(SHARD_LABEL).map(String::as_str), labels.contains_key(DRAIN_LABEL), ring)
}

/// [`decide`] on the two labels it reads: the [`SHARD_LABEL`] `owner` and whether the parent
/// is `draining`.
fn assignment(key: &str, owner: Option<&str>, draining: bool, ring: &Ring) -> Option<Move> {
    let desired = ring.owner(key)?;
    match owner.filter(|o| !o.is_empty()) {
        None => Some(Move::Assign(desired.to_owned())),
        Some(owner) if ring.members().iter().all(|m| m != owner) => Some(Move::Assign(desired.to_owned())),
        Some(owner) if owner == desired || draining => None,
        Some(_) => Some(Move::Drain),
    }
}

/// The replica the children of a parent carrying `labels` belong to, given the parent's move
/// `to`: its new owner on an assignment, its live owner when it stays; `None` while its owner
/// drains it (the children stay with the owner until the parent is assigned) or without one.
pub fn children_owner<'a>(labels: &'a BTreeMap<String, String>, to: Option<&'a Move>, ring: &Ring) -> Option<&'a str> {
    follower(labels.get(SHARD_LABEL).map(String::as_str), labels.contains_key(DRAIN_LABEL), to, ring)
}

/// [`children_owner`] on the two labels it reads: the parent's [`SHARD_LABEL`] `owner` and
/// whether it is `draining`.
fn follower<'a>(owner: Option<&'a str>, draining: bool, to: Option<&'a Move>, ring: &Ring) -> Option<&'a str> {
    match to {
        Some(Move::Assign(member)) => Some(member),
        Some(Move::Drain) => None,
        None if draining => None,
        None => owner.filter(|o| ring.members().iter().any(|m| m == o)),
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

/// The patch labelling a child for `member`, with `resource_version` as its precondition.
fn follow(member: &str, resource_version: Option<&str>) -> Value {
    json!({"metadata": {"resourceVersion": resource_version, "labels": { SHARD_LABEL: member }}})
}

/// Label writes in flight at once: a pass prepares each write only when one of these slots
/// frees, so its memory stays bounded however many parents it relabels.
const CONCURRENT_WRITES: usize = 16;
/// How long a pass waits after a change, so a burst of changes makes one pass.
const DEBOUNCE: Duration = Duration::from_millis(100);
/// How often the watches are relisted from scratch.
pub const RESYNC: Duration = Duration::from_secs(300);
/// The least time between two returns of the allocator's free memory to the kernel.
const TRIM_INTERVAL: Duration = Duration::from_secs(1);

/// The labels one write sets.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Label {
    /// A child follows its parent to this member.
    Follow(Arc<str>),
    /// A parent moves.
    Move(Move),
}

/// One label write, as a pass decides it: what it names is shared with the watch's table and
/// with the other writes of the pass; its body is built when it is sent.
struct Write {
    resource: Arc<ApiResource>,
    object: Arc<Slim>,
    label: Label,
}

impl Write {
    /// The merge patch of the labels, under the watched `resourceVersion` as a precondition.
    fn body(&self) -> Value {
        let version = Some(&*self.object.resource_version).filter(|v| !v.is_empty());
        match &self.label {
            Label::Follow(member) => follow(member, version),
            Label::Move(to) => patch(to, version),
        }
    }
}

/// The writes of one parent: its children's first, then its own.
struct Job {
    children: Vec<Write>,
    parent: Option<Write>,
}

/// Run `task` on each of `items`, at most `bound` at once, taking the next item only when a
/// task finishes; the outputs in completion order.
async fn bounded<I, F, Fut>(items: I, bound: usize, task: F) -> Vec<Fut::Output>
where
    I: IntoIterator,
    F: FnMut(I::Item) -> Fut,
    Fut: std::future::Future,
{
    futures::stream::iter(items).map(task).buffer_unordered(bound.max(1)).collect().await
}

/// The leader's assigner of parents.
pub struct Sharder {
    manager: Arc<dyn ShardHost>,
    membership: Arc<Membership>,
    feeds: ShardWatches,
    /// The `resourceVersion` each object (by uid) had when this sharder last wrote its labels:
    /// a watch that has not caught up with the write yet does not make it write again.
    written: Mutex<HashMap<Box<str>, Box<str>>>,
    /// When the allocator's free memory was last given back, and whether a pass has written
    /// since (see [`Sharder::give_back`]).
    trim: Mutex<(Option<tokio::time::Instant>, bool)>,
}

impl std::fmt::Debug for Sharder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sharder").field("membership", &self.membership).field("feeds", &self.feeds).finish_non_exhaustive()
    }
}

impl Sharder {
    /// A sharder of the parents of `manager`'s plugins over the members `membership` reads.
    pub fn new(manager: Arc<dyn ShardHost>, membership: Arc<Membership>) -> Self {
        let feeds = ShardWatches::new(manager.client().clone());
        Self { manager, membership, feeds, written: Mutex::default(), trim: Mutex::default() }
    }

    /// Pass after pass until dropped (the caller runs it while leading): after every change
    /// the watches see, and at least every retry period.
    pub async fn run(&self) -> std::convert::Infallible {
        tracing::info!("sharder running: assigning parents to the live replicas");
        let mut resynced = tokio::time::Instant::now();
        loop {
            if let Err(e) = self.pass().await {
                tracing::warn!(error = %e, "sharder pass failed; retrying");
            }
            if resynced.elapsed() >= RESYNC {
                self.feeds.clear();
                resynced = tokio::time::Instant::now();
            }
            tokio::select! {
                () = self.feeds.changed().notified() => tokio::time::sleep(DEBOUNCE).await,
                () = tokio::time::sleep(self.membership.config().retry_period) => {
                    if let Err(e) = self.membership.sweep().await {
                        tracing::debug!(error = %e, "cannot sweep the stale shard leases");
                    }
                }
            }
        }
    }

    /// One pass over every parent of every loaded plugin, as the watches have them (a kind
    /// whose watch has not listed yet waits for a later pass).
    ///
    /// # Errors
    /// The API server's, reading the members (failed writes are logged and retried next pass).
    pub async fn pass(&self) -> kube::Result<()> {
        let ring = Ring::new(self.membership.live().await?);
        let families = self.manager.families().await;
        if ring.members().is_empty() {
            return Ok(());
        }
        let namespaces: Vec<Option<String>> = match self.manager.install().namespaces() {
            Some(names) => names.iter().cloned().map(Some).collect(),
            None => vec![None],
        };
        let mut written = std::mem::take(&mut *self.written.lock().expect("written lock"));
        let mut kept = HashMap::new();
        let mut jobs = Vec::new();
        for family in &families {
            let places = if family.parent.scope == Scope::Namespaced { namespaces.clone() } else { vec![None] };
            for place in places {
                jobs.extend(self.jobs(family, place.as_deref(), &ring, &mut written, &mut kept));
            }
        }
        drop(written);
        self.feeds.retain_used();
        *self.written.lock().expect("written lock") = kept;
        if !jobs.is_empty() {
            let parents = jobs.iter().filter(|j| j.parent.is_some()).count();
            let children: usize = jobs.iter().map(|j| j.children.len()).sum();
            tracing::info!(parents, children, "sharder relabels");
            let client = self.manager.client().clone();
            let done = bounded(jobs, CONCURRENT_WRITES, |job| run_job(&client, job)).await;
            let mut written = self.written.lock().expect("written lock");
            written.extend(done.into_iter().flatten().map(|o| (o.uid.clone(), o.resource_version.clone())));
            self.trim.lock().expect("trim lock").1 = true;
        }
        if self.feeds.take_listed() {
            self.trim.lock().expect("trim lock").1 = true;
        }
        self.give_back();
        Ok(())
    }

    /// After a pass that wrote, or that follows a completed list of a watch, give the
    /// allocator's free memory back to the kernel (at most every [`TRIM_INTERVAL`]; a pass
    /// skipped for that leaves it to a later one): a burst of relabels, the watch events it
    /// causes and a list of every object's metadata free far more than the leader keeps, and
    /// the allocator would otherwise hold that peak for good.
    fn give_back(&self) {
        let mut trim = self.trim.lock().expect("trim lock");
        let (last, due) = &mut *trim;
        if *due && last.is_none_or(|at| at.elapsed() >= TRIM_INTERVAL) {
            crate::allocator::trim();
            (*last, *due) = (Some(tokio::time::Instant::now()), false);
        }
    }

    /// The writes for `family`'s parents in `place`; `written` holds what earlier passes
    /// wrote, and the entries still current move to `kept`.
    fn jobs(
        &self,
        family: &PluginKinds,
        place: Option<&str>,
        ring: &Ring,
        written: &mut HashMap<Box<str>, Box<str>>,
        kept: &mut HashMap<Box<str>, Box<str>>,
    ) -> Vec<Job> {
        // Every feed is asked for (and so kept running) even when another has not listed yet.
        let parents = self.feeds.objects(&family.parent.resource, place, None);
        let selector = managed_selector();
        let listed: Vec<_> = family
            .children
            .iter()
            .map(|child| {
                let child_place = if child.scope == Scope::Namespaced { place } else { None };
                (Arc::new(child.resource.clone()), self.feeds.objects(&child.resource, child_place, Some(&selector)))
            })
            .collect();
        let Some(parents) = parents else { return Vec::new() };
        let Some(listed) = listed.into_iter().map(|(r, objects)| Some((r, objects?))).collect::<Option<Vec<_>>>() else {
            return Vec::new();
        };
        let mut children: HashMap<&str, Vec<_>> = HashMap::new();
        for (resource, objects) in &listed {
            let mine = objects.iter().filter(|o| o.plugin.as_deref() == Some(family.plugin.as_str()));
            for object in mine {
                if let Some(uid) = object.parent_uid.as_deref() {
                    children.entry(uid).or_default().push((resource, object));
                }
            }
        }
        // Whether `object` is where this sharder's last write left it (the watch lags).
        let mut pending = |object: &Slim| match written.remove_entry(&*object.uid) {
            Some((uid, version)) if *version == *object.resource_version => {
                kept.insert(uid, version);
                true
            }
            _ => false,
        };
        let parent_resource = Arc::new(family.parent.resource.clone());
        let mut key = String::new();
        let mut jobs = Vec::new();
        for parent in &parents {
            if parent.name.is_empty() {
                continue;
            }
            key.clear();
            if let Some(ns) = &parent.namespace {
                key.push_str(ns);
                key.push('/');
            }
            key.push_str(&parent.name);
            let to = assignment(&key, parent.shard.as_deref(), parent.draining, ring);
            let relabel: Vec<Write> = match follower(parent.shard.as_deref(), parent.draining, to.as_ref(), ring) {
                Some(owner) => {
                    // Made once per parent, and only when one of its children moves.
                    let mut label = None;
                    children
                        .get(&*parent.uid)
                        .into_iter()
                        .flatten()
                        .filter(|(_, c)| c.shard.as_deref() != Some(owner))
                        .filter(|(_, c)| !pending(c))
                        .map(|(resource, c)| Write {
                            resource: Arc::clone(*resource),
                            object: Arc::clone(*c),
                            label: label.get_or_insert_with(|| Label::Follow(Arc::from(owner))).clone(),
                        })
                        .collect()
                }
                None => Vec::new(),
            };
            let own = to.filter(|_| !pending(parent)).map(|to| Write {
                resource: Arc::clone(&parent_resource),
                object: Arc::clone(parent),
                label: Label::Move(to),
            });
            if own.is_some() || !relabel.is_empty() {
                jobs.push(Job { children: relabel, parent: own });
            }
        }
        jobs
    }
}

/// Write `job`'s children, then (when they all succeeded) its parent, each body built as it is
/// sent; returns the written objects (with the versions they were written over).
async fn run_job(client: &kube::Client, job: Job) -> Vec<Arc<Slim>> {
    let params = PatchParams { field_manager: Some(SHARDER_MANAGER.to_owned()), ..PatchParams::default() };
    let mut done = Vec::new();
    for w in job.children.into_iter().chain(job.parent) {
        let api: Api<DynamicObject> = match &w.object.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &*w.resource),
            None => Api::all_with(client.clone(), &*w.resource),
        };
        if let Err(e) = api.patch_metadata(&w.object.name, &params, &Patch::Merge(&w.body())).await {
            tracing::debug!(kind = %w.resource.kind, name = %w.object.name, error = %e, "shard label not written; next pass");
            // A parent is labelled for its new owner only once its children are.
            return done;
        }
        done.push(w.object);
    }
    done
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
    fn children_follow_the_new_owner_on_assignment_and_stay_while_draining() {
        let ring = Ring::new(["a", "b"]);
        let assign = Move::Assign("a".into());
        assert_eq!(children_owner(&labels(&[]), Some(&assign), &ring), Some("a"));
        assert_eq!(children_owner(&labels(&[(SHARD_LABEL, "b")]), Some(&Move::Drain), &ring), None);
        let draining = labels(&[(SHARD_LABEL, "b"), (DRAIN_LABEL, "true")]);
        assert_eq!(children_owner(&draining, None, &ring), None);
    }

    #[test]
    fn children_of_a_settled_parent_belong_to_its_live_owner_only() {
        let ring = Ring::new(["a", "b"]);
        assert_eq!(children_owner(&labels(&[(SHARD_LABEL, "b")]), None, &ring), Some("b"));
        assert_eq!(children_owner(&labels(&[(SHARD_LABEL, "dead")]), None, &ring), None);
        assert_eq!(children_owner(&labels(&[]), None, &ring), None);
    }

    #[tokio::test]
    async fn the_writes_in_flight_never_exceed_the_bound_and_each_is_made_only_when_sent() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let (made, finished, most) = (AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0));
        let mut done = bounded(0..1000_usize, CONCURRENT_WRITES, |i| {
            // Made (its body with it) only now: count what is made and not yet finished.
            let outstanding = made.fetch_add(1, Ordering::SeqCst) + 1 - finished.load(Ordering::SeqCst);
            most.fetch_max(outstanding, Ordering::SeqCst);
            let finished = &finished;
            async move {
                // Finish out of order, after other writes have had their turn.
                for _ in 0..(i % 7) {
                    tokio::task::yield_now().await;
                }
                finished.fetch_add(1, Ordering::SeqCst);
                i
            }
        })
        .await;
        done.sort_unstable();
        assert_eq!(done, (0..1000).collect::<Vec<_>>(), "every write ran once");
        assert_eq!(most.load(Ordering::SeqCst), CONCURRENT_WRITES, "writes made and not finished at once");
    }

    #[test]
    fn a_write_body_is_the_labels_under_the_version_the_watch_saw() {
        let resource = Arc::new(ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()));
        let slim: Slim = Slim {
            namespace: Some(Arc::from("default")),
            name: "d".into(),
            uid: "u1".into(),
            resource_version: "17".into(),
            shard: None,
            draining: false,
            plugin: None,
            parent_uid: None,
        };
        let object = Arc::new(slim);
        let child = Write { resource: Arc::clone(&resource), object: Arc::clone(&object), label: Label::Follow(Arc::from("b")) };
        assert_eq!(child.body(), follow("b", Some("17")));
        let parent = Write { resource, object, label: Label::Move(Move::Drain) };
        assert_eq!(parent.body(), patch(&Move::Drain, Some("17")));
    }

    #[test]
    fn the_patches_touch_only_the_labels_under_the_listed_version() {
        assert_eq!(follow("b", Some("9")), json!({"metadata": {"resourceVersion": "9", "labels": {SHARD_LABEL: "b"}}}));
        let assign = patch(&Move::Assign("b".into()), Some("42"));
        assert_eq!(assign, json!({"metadata": {"resourceVersion": "42", "labels": {SHARD_LABEL: "b", DRAIN_LABEL: null}}}));
        assert_eq!(patch(&Move::Drain, Some("7"))["metadata"]["labels"], json!({DRAIN_LABEL: "true"}));
    }
}
