//! [`ShardWatches`]: the sharder's metadata-only watches of the parents and children it
//! assigns, each feeding a compact table the sharder's passes read instead of listing the API
//! server; a change that matters to an assignment wakes the sharder ([`ShardWatches::changed`]).
//!
//! The leader watches every parent and child of every plugin, so what it keeps per object is
//! what it costs per object: a [`Slim`] holds only what the ring, the handover and the label
//! writes read (name, namespace, uid, `resourceVersion`, the shard and drain labels, the
//! plugin label and the parent's uid), with the few distinct values (namespaces, replica and
//! plugin names) interned, instead of a reflector store of whole `ObjectMeta`s (the sharding
//! bench measured the leader's extra memory at about 3.1 KiB per object with those, under 1 KiB
//! with these). The watches ask the API server
//! for `PartialObjectMetadata`, so neither specs nor statuses cross the wire.
//!
//! A feed is started the first time a pass asks for it and stopped when a pass no longer does
//! (its plugin was removed). A relist (the watch's first list, and every restart after an
//! error) fills a fresh table that replaces the served one only when complete, as a reflector
//! does. [`ShardWatches::clear`] drops every feed, so the next passes relist from scratch: the
//! sharder's periodic safety net against a watch that missed something.

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::discovery::ApiResource;
use kube::runtime::watcher;
use tokio::sync::Notify;

use super::{DRAIN_LABEL, SHARD_LABEL};
use crate::actions::{PARENT_UID_LABEL, PLUGIN_LABEL};

/// The metadata of one watched object, as the API server sends it.
pub type Meta = PartialObjectMeta<DynamicObject>;

/// What the sharder keeps of one watched object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slim {
    /// Its namespace (interned); `None` when cluster-scoped.
    pub namespace: Option<Arc<str>>,
    /// Its name.
    pub name: Box<str>,
    /// Its uid.
    pub uid: Box<str>,
    /// Its `resourceVersion`: the precondition of a label write.
    pub resource_version: Box<str>,
    /// Its [`SHARD_LABEL`] (interned), as written (possibly empty).
    pub shard: Option<Arc<str>>,
    /// Whether it carries [`DRAIN_LABEL`] (any value).
    pub draining: bool,
    /// Its [`PLUGIN_LABEL`] (interned): the plugin a child belongs to.
    pub plugin: Option<Arc<str>>,
    /// The uid of the parent controlling it: its controller ownerReference, else the
    /// [`PARENT_UID_LABEL`] of a cluster-scoped child of a namespaced parent.
    pub parent_uid: Option<Box<str>>,
}

/// Distinct short strings shared by every object that carries them.
#[derive(Debug, Default)]
struct Interner(Mutex<HashSet<Arc<str>>>);

impl Interner {
    fn get(&self, text: &str) -> Arc<str> {
        let mut set = self.0.lock().expect("interner lock");
        if let Some(known) = set.get(text) {
            return Arc::clone(known);
        }
        let new: Arc<str> = Arc::from(text);
        set.insert(Arc::clone(&new));
        new
    }
}

impl Slim {
    /// What the sharder keeps of `meta`, its repeated values taken from `interner`.
    fn new(meta: &Meta, interner: &Interner) -> Self {
        let meta = &meta.metadata;
        let label = |name: &str| meta.labels.as_ref().and_then(|l| l.get(name));
        let by_reference = meta.owner_references.iter().flatten().find(|r| r.controller == Some(true)).map(|r| r.uid.as_str());
        let parent_uid = by_reference.or_else(|| label(PARENT_UID_LABEL).map(String::as_str));
        Self {
            namespace: meta.namespace.as_deref().map(|ns| interner.get(ns)),
            name: meta.name.as_deref().unwrap_or_default().into(),
            uid: meta.uid.as_deref().unwrap_or_default().into(),
            resource_version: meta.resource_version.as_deref().unwrap_or_default().into(),
            shard: label(SHARD_LABEL).map(|s| interner.get(s)),
            draining: label(DRAIN_LABEL).is_some(),
            plugin: label(PLUGIN_LABEL).map(|p| interner.get(p)),
            parent_uid: parent_uid.map(Into::into),
        }
    }

    /// Whether `self` and `other` differ in anything but their `resourceVersion`: whether a
    /// pass could decide differently (a write of the spec or status alone changes nothing for
    /// the sharder).
    fn differs_from(&self, other: &Self) -> bool {
        (&self.namespace, &self.name, &self.uid, &self.shard, self.draining, &self.plugin, &self.parent_uid)
            != (&other.namespace, &other.name, &other.uid, &other.shard, other.draining, &other.plugin, &other.parent_uid)
    }
}

/// A [`Slim`] in a table keyed by its uid.
#[derive(Debug, Clone)]
struct ByUid(Arc<Slim>);

impl PartialEq for ByUid {
    fn eq(&self, other: &Self) -> bool {
        self.0.uid == other.0.uid
    }
}

impl Eq for ByUid {}

impl Hash for ByUid {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.uid.hash(state);
    }
}

impl Borrow<str> for ByUid {
    fn borrow(&self) -> &str {
        &self.0.uid
    }
}

/// The objects of one feed.
#[derive(Debug, Default)]
struct Table {
    /// What passes read; `None` until the first list completes.
    served: Option<HashSet<ByUid>>,
    /// A relist in progress.
    filling: Option<HashSet<ByUid>>,
}

impl Table {
    /// Apply one watch event; returns whether it may change what a pass decides.
    fn apply(&mut self, event: watcher::Event<Meta>, interner: &Interner) -> bool {
        match event {
            watcher::Event::Init => {
                self.filling = Some(HashSet::new());
                false
            }
            watcher::Event::InitApply(meta) => {
                let slim = ByUid(Arc::new(Slim::new(&meta, interner)));
                self.filling.get_or_insert_with(HashSet::new).replace(slim);
                false
            }
            watcher::Event::InitDone => {
                self.served = Some(self.filling.take().unwrap_or_default());
                true
            }
            watcher::Event::Apply(meta) => {
                let slim = ByUid(Arc::new(Slim::new(&meta, interner)));
                let served = self.served.get_or_insert_with(HashSet::new);
                let changed = served.get(&*slim.0.uid).is_none_or(|old| old.0.differs_from(&slim.0));
                served.replace(slim);
                changed
            }
            watcher::Event::Delete(meta) => {
                let uid = meta.metadata.uid.as_deref().unwrap_or_default();
                self.served.as_mut().and_then(|served| served.take(uid)).is_some()
            }
        }
    }
}

/// What a feed watches: a resource, where, and through which label selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FeedKey {
    /// `apiVersion/plural`.
    resource: String,
    namespace: Option<String>,
    selector: Option<String>,
}

/// One running watch and its table.
struct Feed {
    table: Arc<Mutex<Table>>,
    task: tokio::task::JoinHandle<()>,
    /// Asked for since the last [`ShardWatches::retain_used`].
    used: bool,
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The sharder's watches.
pub struct ShardWatches {
    client: kube::Client,
    changed: Arc<Notify>,
    /// Whether a feed has completed a list since [`ShardWatches::take_listed`] last said.
    listed: Arc<AtomicBool>,
    interner: Arc<Interner>,
    feeds: Mutex<HashMap<FeedKey, Feed>>,
}

impl std::fmt::Debug for ShardWatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardWatches").field("feeds", &self.feeds.lock().expect("feeds lock").len()).finish()
    }
}

impl ShardWatches {
    /// No feed yet.
    pub fn new(client: kube::Client) -> Self {
        Self { client, changed: Arc::default(), listed: Arc::default(), interner: Arc::default(), feeds: Mutex::default() }
    }

    /// Notified on every change any feed sees that may change an assignment (an object added,
    /// deleted, relabelled; not a write of its spec or status alone), and when a feed completes
    /// a list.
    pub fn changed(&self) -> &Notify {
        &self.changed
    }

    /// Whether a feed has completed a list (its first, or a relist) since the last call: a list
    /// decodes every object's whole metadata, page by page, and frees it again.
    pub fn take_listed(&self) -> bool {
        self.listed.swap(false, Ordering::Relaxed)
    }

    /// What is kept of the objects of `resource` (in `namespace`, else in the whole cluster)
    /// that `selector` matches, starting their watch when it is new; `None` until its first
    /// list has completed.
    pub fn objects(&self, resource: &ApiResource, namespace: Option<&str>, selector: Option<&str>) -> Option<Vec<Arc<Slim>>> {
        let key = FeedKey {
            resource: format!("{}/{}", resource.api_version, resource.plural),
            namespace: namespace.map(str::to_owned),
            selector: selector.map(str::to_owned),
        };
        let mut feeds = self.feeds.lock().expect("feeds lock");
        let feed = feeds.entry(key).or_insert_with(|| self.start(resource, namespace, selector));
        feed.used = true;
        let table = feed.table.lock().expect("table lock");
        Some(table.served.as_ref()?.iter().map(|o| Arc::clone(&o.0)).collect())
    }

    fn start(&self, resource: &ApiResource, namespace: Option<&str>, selector: Option<&str>) -> Feed {
        // An `Api` of `PartialObjectMeta` lists and watches metadata only.
        let api: Api<Meta> = match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, resource),
            None => Api::all_with(self.client.clone(), resource),
        };
        let config = match selector {
            Some(selector) => watcher::Config::default().labels(selector),
            None => watcher::Config::default(),
        };
        let table = Arc::new(Mutex::new(Table::default()));
        let (changed, interner, kind) = (Arc::clone(&self.changed), Arc::clone(&self.interner), resource.kind.clone());
        let listed = Arc::clone(&self.listed);
        let events = crate::watch::backoff::with_backoff(watcher(api, config));
        let fed = Arc::clone(&table);
        let task = tokio::spawn(async move {
            events
                .for_each(|event| {
                    match event {
                        Ok(event) => {
                            if matches!(event, watcher::Event::InitDone) {
                                listed.store(true, Ordering::Relaxed);
                            }
                            if fed.lock().expect("table lock").apply(event, &interner) {
                                changed.notify_one();
                            }
                        }
                        Err(e) => tracing::debug!(%kind, error = %e, "sharder watch failed; retrying with backoff"),
                    }
                    futures::future::ready(())
                })
                .await;
        });
        Feed { table, task, used: true }
    }

    /// Stop the feeds not asked for since the last call.
    pub fn retain_used(&self) {
        let mut feeds = self.feeds.lock().expect("feeds lock");
        feeds.retain(|_, feed| std::mem::take(&mut feed.used));
    }

    /// Stop every feed: the next passes relist what they need.
    pub fn clear(&self) {
        self.feeds.lock().expect("feeds lock").clear();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn meta(value: serde_json::Value) -> Meta {
        serde_json::from_value(value).expect("metadata")
    }

    fn parent(name: &str, uid: &str, version: &str, labels: serde_json::Value) -> Meta {
        meta(json!({"apiVersion": "v1", "kind": "P",
            "metadata": {"name": name, "namespace": "default", "uid": uid, "resourceVersion": version, "labels": labels}}))
    }

    fn served(table: &Table) -> Vec<(String, String)> {
        let mut all: Vec<_> =
            table.served.iter().flatten().map(|o| (o.0.name.to_string(), o.0.resource_version.to_string())).collect();
        all.sort();
        all
    }

    #[test]
    fn a_child_names_its_parent_by_controller_reference_or_by_the_uid_label() {
        let interner = Interner::default();
        let owned = meta(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "ownerReferences": [
                {"apiVersion": "v1", "kind": "X", "name": "x", "uid": "other"},
                {"apiVersion": "v1", "kind": "P", "name": "p", "uid": "u1", "controller": true}]}}));
        assert_eq!(Slim::new(&owned, &interner).parent_uid.as_deref(), Some("u1"));
        let labelled = meta(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "r", "labels": {PARENT_UID_LABEL: "u2"}}}));
        assert_eq!(Slim::new(&labelled, &interner).parent_uid.as_deref(), Some("u2"));
        let orphan = meta(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}));
        assert_eq!(Slim::new(&orphan, &interner).parent_uid, None);
    }

    #[test]
    fn what_is_kept_is_the_labels_the_sharder_reads_with_repeated_values_shared() {
        let interner = Interner::default();
        let labels = json!({SHARD_LABEL: "host-a", DRAIN_LABEL: "true", PLUGIN_LABEL: "memcached", "app": "x"});
        let one = Slim::new(&parent("a", "u1", "5", labels.clone()), &interner);
        let other = Slim::new(&parent("b", "u2", "6", labels), &interner);
        assert_eq!((one.shard.as_deref(), one.draining, one.plugin.as_deref()), (Some("host-a"), true, Some("memcached")));
        assert_eq!((&*one.name, &*one.uid, &*one.resource_version, one.namespace.as_deref()), ("a", "u1", "5", Some("default")));
        assert!(Arc::ptr_eq(one.shard.as_ref().unwrap(), other.shard.as_ref().unwrap()), "the replica name is shared");
        assert!(Arc::ptr_eq(one.namespace.as_ref().unwrap(), other.namespace.as_ref().unwrap()), "the namespace is shared");
        let bare = Slim::new(&parent("c", "u3", "7", json!({})), &interner);
        assert_eq!((bare.shard, bare.draining, bare.plugin), (None, false, None));
    }

    #[test]
    fn an_entry_stays_a_small_fixed_size_with_its_strings_beside_it() {
        // The leader holds one per parent and child: 100,000 parents are 200,000 of them.
        let size = std::mem::size_of::<Slim>();
        assert!(size <= 128, "a Slim is {size} bytes");
    }

    #[test]
    fn nothing_is_served_until_the_first_list_completes_and_a_relist_replaces_it_whole() {
        let interner = Interner::default();
        let mut table = Table::default();
        assert!(!table.apply(watcher::Event::Init, &interner));
        assert!(!table.apply(watcher::Event::InitApply(parent("a", "u1", "1", json!({}))), &interner));
        assert!(table.served.is_none(), "a partial list is not served");
        assert!(table.apply(watcher::Event::InitDone, &interner));
        assert_eq!(served(&table), [("a".to_owned(), "1".to_owned())]);
        // A relist without `a` (deleted while the watch was down) drops it once complete.
        table.apply(watcher::Event::Init, &interner);
        table.apply(watcher::Event::InitApply(parent("b", "u2", "2", json!({}))), &interner);
        assert_eq!(served(&table), [("a".to_owned(), "1".to_owned())], "the old list is served meanwhile");
        table.apply(watcher::Event::InitDone, &interner);
        assert_eq!(served(&table), [("b".to_owned(), "2".to_owned())]);
    }

    #[test]
    fn only_changes_that_can_move_a_parent_wake_the_sharder_but_every_version_is_kept() {
        let interner = Interner::default();
        let mut table = Table::default();
        table.apply(watcher::Event::Init, &interner);
        table.apply(watcher::Event::InitDone, &interner);
        assert!(table.apply(watcher::Event::Apply(parent("a", "u1", "1", json!({}))), &interner), "a new object");
        assert!(!table.apply(watcher::Event::Apply(parent("a", "u1", "2", json!({}))), &interner), "a status write");
        assert_eq!(served(&table), [("a".to_owned(), "2".to_owned())], "the newest version is the precondition");
        let labelled = parent("a", "u1", "3", json!({SHARD_LABEL: "host-a"}));
        assert!(table.apply(watcher::Event::Apply(labelled.clone()), &interner), "a relabel");
        assert!(table.apply(watcher::Event::Delete(labelled.clone()), &interner), "a deletion");
        assert!(served(&table).is_empty());
        assert!(!table.apply(watcher::Event::Delete(labelled), &interner), "a deletion of what is not there");
    }
}
