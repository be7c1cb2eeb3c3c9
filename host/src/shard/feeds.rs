//! [`ShardWatches`]: the sharder's metadata-only watches (kube's watcher of `PartialObjectMeta`) of the parents
//! and children it assigns, each feeding a store the sharder's passes read instead of listing
//! the API server; every change wakes the sharder ([`ShardWatches::changed`]).
//!
//! A feed is started the first time a pass asks for it and stopped when a pass no longer does
//! (its plugin was removed). Cached metadata is stripped of `managedFields`. [`ShardWatches::clear`]
//! drops every feed, so the next passes relist from scratch: the sharder's periodic safety net
//! against a watch that missed something.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::{FutureExt, StreamExt};
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::discovery::ApiResource;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;

/// The metadata of one watched object.
pub type Meta = PartialObjectMeta<DynamicObject>;

/// What a feed watches: a resource, where, and through which label selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FeedKey {
    /// `apiVersion/plural`.
    resource: String,
    namespace: Option<String>,
    selector: Option<String>,
}

/// One running watch and its store.
struct Feed {
    store: Store<Meta>,
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
        Self { client, changed: Arc::default(), feeds: Mutex::default() }
    }

    /// Notified on every change any feed sees (and when a feed completes its first list).
    pub fn changed(&self) -> &Notify {
        &self.changed
    }

    /// The metadata of the objects of `resource` (in `namespace`, else in the whole cluster)
    /// that `selector` matches, starting their watch when it is new; `None` until its first
    /// list has completed.
    pub fn objects(&self, resource: &ApiResource, namespace: Option<&str>, selector: Option<&str>) -> Option<Vec<Arc<Meta>>> {
        let key = FeedKey {
            resource: format!("{}/{}", resource.api_version, resource.plural),
            namespace: namespace.map(str::to_owned),
            selector: selector.map(str::to_owned),
        };
        let mut feeds = self.feeds.lock().expect("feeds lock");
        let feed = feeds.entry(key).or_insert_with(|| self.start(resource, namespace, selector));
        feed.used = true;
        feed.store.wait_until_ready().now_or_never()?.ok()?;
        Some(feed.store.state())
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
        let writer = Writer::new(resource.clone());
        let store = writer.as_reader();
        let changed = Arc::clone(&self.changed);
        let kind = resource.kind.clone();
        let events =
            crate::watch::backoff::with_backoff(watcher(api, config).modify(|m: &mut Meta| m.metadata.managed_fields = None));
        let task = tokio::spawn(async move {
            reflector::reflector(writer, events)
                .for_each(|event| {
                    match event {
                        Ok(_) => changed.notify_one(),
                        Err(e) => tracing::debug!(%kind, error = %e, "sharder watch failed; retrying with backoff"),
                    }
                    futures::future::ready(())
                })
                .await;
        });
        Feed { store, task, used: true }
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
