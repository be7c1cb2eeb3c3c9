//! One watch per kind, shared by every plugin: the host's object cache and its change feed.
//!
//! A namespaced install ([`InstallScope::Namespaces`]) watches each namespaced kind once per
//! namespace (kube-rs watches one namespace or all) and merges them into the kind's one cache
//! and change feed.
//!
//! Each subscriber says which objects of the kind it needs by a label selector (`None`: all of
//! them). The kind's one watch lists and watches, server-side, the requirements every
//! subscriber's selector shares ([`common_selector`]): a child kind only the host's children
//! (`app.kubernetes.io/managed-by=wasmop`), a related kind the fixed part of its selector. A
//! subscriber whose selector shares nothing with the others' widens the watch to the whole
//! kind; the watch is restarted (a relist) whenever the common selector changes. Cached objects
//! are stripped of what no plugin reads ([`WatchedObject`], like [`strip`](crate::objects::strip))
//! and kept as [`Object`]s: JSON text and decoded metadata, not a decoded tree.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::discovery::ApiResource;
use kube::runtime::watcher;
use serde_json::Value;
use tokio::task::JoinHandle;

use super::backoff::with_backoff;
use super::initial_list::{InitialList, ListMode};
use super::label_index::{Key, LabelIndex, move_key};
use crate::cluster::InstallScope;
use crate::contract::{Kind, Object, Scope, selector_requirements};
use crate::objects::{ObjectCache, WatchedObject, controller_uid, label_value, name_of, namespace_of};

/// The first list of a kind did not complete in time (the host may not list it: RBAC, a CRD
/// not served any more, the API server unreachable).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the first list of {kind} did not complete within {after:?}: {}", last_error.as_deref().unwrap_or("no answer from the API server"))]
pub struct SyncTimeout {
    /// The kind.
    pub kind: Kind,
    /// How long the host waited.
    pub after: Duration,
    /// The watch's last error, when it had one (a 403 says who may not list what).
    pub last_error: Option<String>,
}

/// Told about every change of a watched kind, after the cache is updated.
///
/// Called on the watch task: implementations must not block (enqueue and return).
pub trait Subscriber: Send + Sync {
    /// `old` is the previous version (`None` for a new object), `new` the current one
    /// (`None` for a deletion).
    fn on_change(&self, kind: &Kind, old: Option<&Object>, new: Option<&Object>);
}

/// A subscriber and the label selector of the objects it needs (`None`: every object).
struct Subscribed {
    id: u64,
    selector: Option<String>,
    subscriber: Arc<dyn Subscriber>,
}

/// The watch of one kind: its objects, whether the first list completed, its subscribers.
struct KindWatch {
    /// The resource to list and watch.
    resource: ApiResource,
    /// Whether the kind is namespaced (watched per namespace by a namespaced install).
    scope: Scope,
    /// The label selector the running watch lists with (`None`: the whole kind).
    selector: Mutex<Option<String>>,
    objects: RwLock<BTreeMap<Key, Arc<Object>>>,
    /// Keys of the objects each controller (by uid) owns: a reconcile reads its parent's
    /// children without scanning the namespace.
    owned: RwLock<HashMap<String, BTreeSet<Key>>>,
    /// Keys of the objects by the value of each label a related selector names its parent by
    /// ([`Watches::index_label`]): a reconcile reads its related objects without scanning.
    labels: RwLock<LabelIndex>,
    synced: tokio::sync::watch::Sender<bool>,
    /// The watch's last error since it last listed successfully.
    last_error: Mutex<Option<String>>,
    subscribers: RwLock<Vec<Subscribed>>,
    task: Mutex<Option<JoinHandle<()>>>,
}

/// The shared watches. An [`ObjectCache`] over every watched kind.
pub struct Watches {
    client: kube::Client,
    install: InstallScope,
    list_mode: Arc<ListMode>,
    kinds: RwLock<HashMap<Kind, Arc<KindWatch>>>,
    next_id: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Watches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds: Vec<String> = self.kinds.read().expect("watches lock").keys().map(ToString::to_string).collect();
        f.debug_struct("Watches").field("kinds", &kinds).finish()
    }
}

/// A subscription; dropping it unsubscribes (and stops the watch when nobody else needs it).
#[must_use = "dropping a subscription unsubscribes"]
#[derive(Debug)]
pub struct Subscription {
    watches: Arc<Watches>,
    kind: Kind,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.watches.unsubscribe(&self.kind, self.id);
    }
}

impl Watches {
    /// No watch yet; watches start on first subscription, in the namespaces of `install`,
    /// with a streaming initial list where the server serves it.
    pub fn new(client: kube::Client, install: InstallScope) -> Arc<Self> {
        Self::with_initial_list(client, install, InitialList::Auto)
    }

    /// Like [`Watches::new`], with the initial lists `initial_list` says.
    pub fn with_initial_list(client: kube::Client, install: InstallScope, initial_list: InitialList) -> Arc<Self> {
        let list_mode = Arc::new(ListMode::new(initial_list, client.clone()));
        Arc::new(Self { client, install, list_mode, kinds: RwLock::default(), next_id: Default::default() })
    }

    /// Where the watches look: the whole cluster or some namespaces.
    pub fn install(&self) -> &InstallScope {
        &self.install
    }

    /// Subscribe to changes of the objects of `kind` (served with `scope`) that `selector` (kubectl syntax, already
    /// validated) matches, or of every object of `kind` when it is `None`. Starts the kind's
    /// watch if this is the first subscriber, and restarts it with a wider selector when
    /// `selector` shares less with the other subscribers' than the running watch lists.
    ///
    /// A subscriber may be told about objects its selector does not match (those another
    /// subscriber needs); the cache of the kind holds the union.
    pub fn subscribe(
        self: &Arc<Self>,
        kind: &Kind,
        resource: &ApiResource,
        scope: Scope,
        selector: Option<&str>,
        subscriber: Arc<dyn Subscriber>,
    ) -> Subscription {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut kinds = self.kinds.write().expect("watches lock");
        let watch = kinds.entry(kind.clone()).or_insert_with(|| {
            Arc::new(KindWatch {
                resource: resource.clone(),
                scope,
                selector: Mutex::default(),
                objects: RwLock::default(),
                owned: RwLock::default(),
                labels: RwLock::default(),
                synced: tokio::sync::watch::channel(false).0,
                last_error: Mutex::default(),
                subscribers: RwLock::default(),
                task: Mutex::new(None),
            })
        });
        let selector = selector.map(str::to_owned);
        watch.subscribers.write().expect("subscribers lock").push(Subscribed { id, selector, subscriber });
        self.restart_if_needed(kind, watch);
        Subscription { watches: Arc::clone(self), kind: kind.clone(), id }
    }

    fn unsubscribe(&self, kind: &Kind, id: u64) {
        let mut kinds = self.kinds.write().expect("watches lock");
        let Some(watch) = kinds.get(kind) else { return };
        let mut subs = watch.subscribers.write().expect("subscribers lock");
        subs.retain(|s| s.id != id);
        if subs.is_empty() {
            drop(subs);
            if let Some(task) = watch.task.lock().expect("task lock").take() {
                task.abort();
            }
            kinds.remove(kind);
            tracing::info!(%kind, "watch stopped: no plugin needs it any more");
        } else if tokio::runtime::Handle::try_current().is_ok() {
            // Narrow the watch to what the remaining subscribers share (not while the runtime
            // shuts down: the watch task is gone with it).
            drop(subs);
            self.restart_if_needed(kind, watch);
        }
    }

    /// (Re)start the watch of `kind` when it is not running or lists with another selector
    /// than its subscribers now share. A restarted watch is not synced until its relist
    /// completes; its cache keeps the old objects until then.
    fn restart_if_needed(&self, kind: &Kind, watch: &Arc<KindWatch>) {
        let wanted = common_selector(watch.subscribers.read().expect("subscribers lock").iter().map(|s| s.selector.as_deref()));
        let mut running = watch.selector.lock().expect("selector lock");
        let mut task = watch.task.lock().expect("task lock");
        if task.is_some() && *running == wanted {
            return;
        }
        if let Some(old) = task.take() {
            old.abort();
            watch.synced.send_replace(false);
            tracing::info!(%kind, from = ?*running, to = ?wanted, "watch restarted with the selector its subscribers share");
        }
        *running = wanted.clone();
        let apis = self.apis(&watch.resource, watch.scope);
        *task = Some(tokio::spawn(run_watch(kind.clone(), apis, wanted, Arc::clone(watch), Arc::clone(&self.list_mode))));
    }

    /// Keep the cached objects of `kind` indexed by the value of `label`, so that
    /// [`ObjectCache::labelled`] finds them without a scan: the label a related selector names
    /// its parent by (`memcached_cr=$(parent.name)`). Nothing when `kind` is not watched; the
    /// index lasts as long as the kind's watch.
    pub fn index_label(&self, kind: &Kind, label: &str) {
        let Some(watch) = self.watch(kind) else { return };
        // The objects, then the index (the order of every path that holds both): an event
        // cached before this reads the objects is indexed here, one cached after it by its own
        // update, which takes the index lock once the object is cached.
        let objects = watch.objects.read().expect("objects lock");
        watch.labels.write().expect("labels lock").add_label(label, &objects);
    }

    /// Wait until the first list of `kind` has completed, at most `timeout`.
    ///
    /// # Errors
    /// [`SyncTimeout`] with the watch's last error when the list did not complete in time. The
    /// watch itself keeps retrying with backoff for as long as it has subscribers.
    pub async fn wait_synced(&self, kind: &Kind, timeout: Duration) -> Result<(), SyncTimeout> {
        let Some(watch) = self.watch(kind) else { return Ok(()) };
        let mut rx = watch.synced.subscribe();
        match tokio::time::timeout(timeout, rx.wait_for(|synced| *synced)).await {
            Ok(_) => Ok(()),
            Err(_) => Err(SyncTimeout {
                kind: kind.clone(),
                after: timeout,
                last_error: watch.last_error.lock().expect("last error lock").clone(),
            }),
        }
    }

    /// Whether the first list of every watched kind has completed.
    pub fn all_synced(&self) -> bool {
        self.kinds.read().expect("watches lock").values().all(|w| *w.synced.borrow())
    }

    /// How many objects are cached, per watched kind (its `Kind` as text).
    pub fn counts(&self) -> Vec<(String, usize)> {
        let kinds = self.kinds.read().expect("watches lock");
        kinds.iter().map(|(kind, w)| (kind.to_string(), w.objects.read().expect("objects lock").len())).collect()
    }

    fn watch(&self, kind: &Kind) -> Option<Arc<KindWatch>> {
        self.kinds.read().expect("watches lock").get(kind).cloned()
    }

    /// The APIs a kind is watched through: one per namespace of a namespaced install for a
    /// namespaced kind, else one for the whole cluster. Each is tagged with its namespace.
    fn apis(&self, resource: &ApiResource, scope: Scope) -> Vec<(Option<String>, Api<WatchedObject>)> {
        match (self.install.namespaces(), scope) {
            (Some(names), Scope::Namespaced) => {
                names.iter().map(|ns| (Some(ns.clone()), Api::namespaced_with(self.client.clone(), ns, resource))).collect()
            }
            _ => vec![(None, Api::all_with(self.client.clone(), resource))],
        }
    }
}

impl ObjectCache for Watches {
    fn list(&self, kind: &Kind, namespace: Option<&str>) -> Vec<Arc<Object>> {
        let Some(watch) = self.watch(kind) else { return Vec::new() };
        let objects = watch.objects.read().expect("objects lock");
        match namespace {
            Some(ns) => objects
                .range((ns.to_owned(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, o)| Arc::clone(o))
                .collect(),
            None => objects.values().cloned().collect(),
        }
    }

    fn get(&self, kind: &Kind, namespace: Option<&str>, name: &str) -> Option<Arc<Object>> {
        let watch = self.watch(kind)?;
        let key = (namespace.unwrap_or_default().to_owned(), name.to_owned());
        watch.objects.read().expect("objects lock").get(&key).cloned()
    }

    fn controlled_by(&self, kind: &Kind, namespace: Option<&str>, owner_uid: &str) -> Vec<Arc<Object>> {
        let Some(watch) = self.watch(kind) else { return Vec::new() };
        let keys: Vec<Key> = match watch.owned.read().expect("owned lock").get(owner_uid) {
            Some(keys) => keys.iter().filter(|(ns, _)| namespace.is_none_or(|want| want == ns)).cloned().collect(),
            None => return Vec::new(),
        };
        let objects = watch.objects.read().expect("objects lock");
        keys.iter().filter_map(|k| objects.get(k).cloned()).collect()
    }

    fn indexes_label(&self, kind: &Kind, label: &str) -> bool {
        self.watch(kind).is_some_and(|watch| watch.labels.read().expect("labels lock").indexes(label))
    }

    fn labelled(&self, kind: &Kind, namespace: Option<&str>, label: &str, value: &str) -> Vec<Arc<Object>> {
        let Some(watch) = self.watch(kind) else { return Vec::new() };
        let keys: Option<Vec<Key>> = watch
            .labels
            .read()
            .expect("labels lock")
            .keys(label, value)
            .map(|keys| keys.filter(|(ns, _)| namespace.is_none_or(|want| want == ns)).cloned().collect());
        let Some(keys) = keys else {
            // Not indexed: as the default does.
            return self.list(kind, namespace).into_iter().filter(|o| label_value(o.head(), label) == Some(value)).collect();
        };
        let objects = watch.objects.read().expect("objects lock");
        keys.iter().filter_map(|k| objects.get(k).cloned()).collect()
    }
}

impl KindWatch {
    /// Move `key` in the owner and label indexes from `before`'s controller and labels to
    /// `after`'s.
    fn index(&self, key: &Key, before: Option<&Value>, after: Option<&Value>) {
        self.labels.write().expect("labels lock").update(key, before, after);
        let (old, new) = (before.and_then(controller_uid), after.and_then(controller_uid));
        if old != new {
            move_key(&mut self.owned.write().expect("owned lock"), key, old, new);
        }
    }

    /// Put `fresh`, a relist of `namespace` (of every namespace for `None`), in place of the
    /// objects cached for it, and rebuild the owner index; returns the objects it replaced.
    fn replace(&self, namespace: Option<&str>, fresh: BTreeMap<Key, Arc<Object>>) -> BTreeMap<Key, Arc<Object>> {
        let mut objects = self.objects.write().expect("objects lock");
        let old = match namespace {
            None => std::mem::replace(&mut *objects, fresh),
            Some(ns) => {
                let keys: Vec<Key> = objects
                    .range((ns.to_owned(), String::new())..)
                    .take_while(|((n, _), _)| n == ns)
                    .map(|(k, _)| k.clone())
                    .collect();
                let old = keys.iter().filter_map(|k| objects.remove_entry(k)).collect();
                objects.extend(fresh);
                old
            }
        };
        self.reindex(&objects);
        old
    }

    /// Rebuild the owner and label indexes from scratch (after a relist).
    fn reindex(&self, objects: &BTreeMap<Key, Arc<Object>>) {
        self.labels.write().expect("labels lock").rebuild(objects);
        let mut owned: HashMap<String, BTreeSet<Key>> = HashMap::new();
        for (key, object) in objects {
            if let Some(uid) = controller_uid(object.head()) {
                owned.entry(uid.to_owned()).or_default().insert(key.clone());
            }
        }
        *self.owned.write().expect("owned lock") = owned;
    }
}

/// Run the watch of one kind until aborted: list, then watch, through each of `apis` (merged),
/// the objects `selector` matches (`None`: all); on errors retry with [`WatchBackoff`](super::backoff::WatchBackoff) (the API
/// server going away is survived here, and its return noticed within seconds) and relist. The
/// kind is synced once every one of them has listed. Objects arrive stripped ([`WatchedObject`]).
async fn run_watch(
    kind: Kind,
    apis: Vec<(Option<String>, Api<WatchedObject>)>,
    selector: Option<String>,
    watch: Arc<KindWatch>,
    list_mode: Arc<ListMode>,
) {
    let resource = &watch.resource;
    let config = match &selector {
        Some(selector) => watcher::Config::default().labels(selector),
        None => watcher::Config::default(),
    };
    let config = list_mode.apply(config).await;
    let mut unsynced: BTreeSet<Option<String>> = apis.iter().map(|(ns, _)| ns.clone()).collect();
    let streams = apis
        .into_iter()
        .map(|(ns, api)| with_backoff(watcher(api, config.clone())).map(move |event| (ns.clone(), event)).boxed());
    let mut stream = futures::stream::select_all(streams);
    // Relists in progress, per namespace (`None`: the whole cluster).
    let mut relists: HashMap<Option<String>, BTreeMap<Key, Arc<Object>>> = HashMap::new();
    tracing::info!(%kind, namespaces = ?unsynced.iter().flatten().collect::<Vec<_>>(), selector = selector.as_deref().unwrap_or(""), "watch started");
    while let Some((namespace, event)) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => {
                relists.insert(namespace, BTreeMap::new());
            }
            Ok(watcher::Event::InitApply(obj)) => {
                if let (Some(buffer), Some((key, value))) = (relists.get_mut(&namespace), to_value(obj, resource)) {
                    buffer.insert(key, value);
                }
            }
            Ok(watcher::Event::InitDone) => {
                let fresh = relists.remove(&namespace).unwrap_or_default();
                let old = watch.replace(namespace.as_deref(), fresh.clone());
                for (key, before) in &old {
                    if !fresh.contains_key(key) {
                        notify(&watch, &kind, Some(before), None);
                    }
                }
                for (key, after) in &fresh {
                    let before = old.get(key);
                    if before.is_none_or(|b| b != after) {
                        notify(&watch, &kind, before, Some(after));
                    }
                }
                unsynced.remove(&namespace);
                if !unsynced.is_empty() {
                    continue;
                }
                if !*watch.synced.borrow() {
                    tracing::info!(%kind, objects = watch.objects.read().expect("objects lock").len(), "watch synced");
                }
                *watch.last_error.lock().expect("last error lock") = None;
                watch.synced.send_replace(true);
            }
            Ok(watcher::Event::Apply(obj)) => {
                if let Some((key, value)) = to_value(obj, resource) {
                    let before = watch.objects.write().expect("objects lock").insert(key.clone(), Arc::clone(&value));
                    watch.index(&key, before.as_deref().map(Object::head), Some(value.head()));
                    notify(&watch, &kind, before.as_ref(), Some(&value));
                }
            }
            Ok(watcher::Event::Delete(obj)) => {
                if let Some((key, _)) = to_value(obj, resource) {
                    let before = watch.objects.write().expect("objects lock").remove(&key);
                    watch.index(&key, before.as_deref().map(Object::head), None);
                    if let Some(before) = before {
                        notify(&watch, &kind, Some(&before), None);
                    }
                }
            }
            Err(e) => {
                tracing::warn!(%kind, namespace = namespace.as_deref().unwrap_or("*"), error = %e, "watch error; retrying with backoff");
                *watch.last_error.lock().expect("last error lock") = Some(e.to_string());
            }
        }
    }
}

fn notify(watch: &KindWatch, kind: &Kind, old: Option<&Arc<Object>>, new: Option<&Arc<Object>>) {
    let subscribers: Vec<Arc<dyn Subscriber>> =
        watch.subscribers.read().expect("subscribers lock").iter().map(|s| Arc::clone(&s.subscriber)).collect();
    for s in subscribers {
        s.on_change(kind, old.map(|v| &**v), new.map(|v| &**v));
    }
}

/// The cached form of an object (already stripped), with `apiVersion` and `kind` set: its
/// text, serialized once here, and its head (the metadata, moved, not copied). Runs for every
/// watch event; the decoded fields beyond the head are dropped once serialized.
fn to_value(obj: WatchedObject, resource: &ApiResource) -> Option<(Key, Arc<Object>)> {
    let mut map = obj.into_fields();
    map.insert("apiVersion".into(), Value::String(resource.api_version.clone()));
    map.insert("kind".into(), Value::String(resource.kind.clone()));
    let value = Value::Object(map);
    let key = (namespace_of(&value).unwrap_or_default().to_owned(), name_of(&value)?.to_owned());
    Some((key, Arc::new(Object::new(value))))
}

/// The label selector that matches every object any of `wanted` matches: the requirements all
/// of them share, `None` (every object) when one wants every object or they share none.
///
/// Requirements are compared as written (split at top-level commas, trimmed): `a=b` and
/// `a = b` count as different, which only makes the watch wider than it could be.
pub fn common_selector<'a>(wanted: impl IntoIterator<Item = Option<&'a str>>) -> Option<String> {
    let mut common: Option<Vec<&str>> = None;
    for selector in wanted {
        let requirements: Vec<&str> = requirements(selector?).collect();
        common = Some(match common {
            None => requirements,
            Some(common) => common.into_iter().filter(|r| requirements.contains(r)).collect(),
        });
    }
    common.filter(|c| !c.is_empty()).map(|c| c.join(","))
}

/// The requirements of a selector, none empty.
fn requirements(selector: &str) -> impl Iterator<Item = &str> {
    selector_requirements(selector).filter(|r| !r.is_empty())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn kind_watch() -> KindWatch {
        KindWatch {
            resource: ApiResource::from_gvk_with_plural(&kube::api::GroupVersionKind::gvk("", "v1", "Pod"), "pods"),
            scope: Scope::Namespaced,
            selector: Mutex::default(),
            objects: RwLock::default(),
            owned: RwLock::default(),
            labels: RwLock::default(),
            synced: tokio::sync::watch::channel(false).0,
            last_error: Mutex::default(),
            subscribers: RwLock::default(),
            task: Mutex::new(None),
        }
    }

    /// `(key, object)` of a Pod controlled by `owner`.
    fn pod(namespace: &str, name: &str, owner: &str) -> (Key, Arc<Object>) {
        let object = json!({"metadata": {"namespace": namespace, "name": name,
            "ownerReferences": [{"uid": owner, "controller": true}]}});
        ((namespace.to_owned(), name.to_owned()), Arc::new(Object::new(object)))
    }

    fn names(watch: &KindWatch) -> Vec<String> {
        watch.objects.read().unwrap().keys().map(|(ns, name)| format!("{ns}/{name}")).collect()
    }

    #[test]
    fn a_relist_of_one_namespace_replaces_only_its_objects() {
        let watch = kind_watch();
        watch.replace(Some("a"), [pod("a", "1", "p"), pod("a", "2", "p")].into());
        watch.replace(Some("b"), [pod("b", "1", "q")].into());
        assert_eq!(names(&watch), ["a/1", "a/2", "b/1"]);

        // Namespace a relists without a/2 and with a/3: b is untouched.
        let old = watch.replace(Some("a"), [pod("a", "1", "p"), pod("a", "3", "p")].into());
        assert_eq!(old.keys().map(|(ns, n)| format!("{ns}/{n}")).collect::<Vec<_>>(), ["a/1", "a/2"]);
        assert_eq!(names(&watch), ["a/1", "a/3", "b/1"]);
        let owned = watch.owned.read().unwrap();
        assert_eq!(owned["p"].len(), 2);
        assert_eq!(owned["q"].iter().collect::<Vec<_>>(), [&("b".to_owned(), "1".to_owned())]);
    }

    #[test]
    fn the_label_index_follows_events_and_relists() {
        let watch = kind_watch();
        let labelled = |name: &str, cr: &str| {
            let object = json!({"metadata": {"namespace": "a", "name": name, "labels": {"cr": cr}}});
            (("a".to_owned(), name.to_owned()), Arc::new(Object::new(object)))
        };
        let found = |watch: &KindWatch, cr: &str| -> Vec<String> {
            watch.labels.read().unwrap().keys("cr", cr).unwrap().map(|(_, name)| name.clone()).collect()
        };
        let (k1, x1) = labelled("1", "x");
        watch.replace(None, [(k1.clone(), Arc::clone(&x1))].into());
        watch.labels.write().unwrap().add_label("cr", &watch.objects.read().unwrap());
        assert_eq!(found(&watch, "x"), ["1"]);
        // An event that relabels the object moves it; one that adds another adds it.
        let (_, y1) = labelled("1", "y");
        watch.index(&k1, Some(x1.head()), Some(y1.head()));
        let (k2, x2) = labelled("2", "x");
        watch.index(&k2, None, Some(x2.head()));
        assert_eq!((found(&watch, "x"), found(&watch, "y")), (vec!["2".to_owned()], vec!["1".to_owned()]));
        // A relist without them keeps the label indexed and forgets them.
        watch.replace(None, [labelled("3", "x")].into());
        assert_eq!((found(&watch, "x"), found(&watch, "y")), (vec!["3".to_owned()], vec![]));
    }

    #[test]
    fn a_relist_of_the_whole_cluster_replaces_everything() {
        let watch = kind_watch();
        watch.replace(None, [pod("a", "1", "p"), pod("b", "1", "q")].into());
        let old = watch.replace(None, [pod("c", "1", "p")].into());
        assert_eq!(old.len(), 2);
        assert_eq!(names(&watch), ["c/1"]);
        assert!(!watch.owned.read().unwrap().contains_key("q"));
    }

    #[test]
    fn a_watched_object_is_cached_as_its_json_with_api_version_and_kind() {
        let json = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "a", "labels": {"app": "web"}, "resourceVersion": "7"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}, "status": {"phase": "Running"}});
        let object: WatchedObject = serde_json::from_value(json.clone()).unwrap();
        let (key, cached) = to_value(object, &kind_watch().resource).unwrap();
        assert_eq!(key, ("a".to_owned(), "p".to_owned()));
        assert_eq!(cached.to_value(), json);

        let nameless: WatchedObject = serde_json::from_value(json!({"metadata": {"namespace": "a"}})).unwrap();
        assert!(to_value(nameless, &kind_watch().resource).is_none(), "an object without a name is not cached");
    }

    #[test]
    fn subscribers_that_agree_share_their_selector() {
        let child = "app.kubernetes.io/managed-by=wasmop";
        assert_eq!(common_selector([Some(child), Some(child)]).as_deref(), Some(child));
    }

    #[test]
    fn the_common_selector_keeps_only_the_requirements_all_share() {
        let wanted = [Some("app=memcached, tier in (a,b)"), Some("tier in (a,b),app=memcached,extra")];
        assert_eq!(common_selector(wanted).as_deref(), Some("app=memcached,tier in (a,b)"));
    }

    #[test]
    fn one_subscriber_of_the_whole_kind_widens_the_watch() {
        assert_eq!(common_selector([Some("app=memcached"), None]), None);
        assert_eq!(common_selector([None, Some("app=memcached")]), None);
    }

    #[test]
    fn selectors_that_share_nothing_watch_the_whole_kind() {
        assert_eq!(common_selector([Some("app=a"), Some("app=b")]), None);
        assert_eq!(common_selector(std::iter::empty()), None);
    }
}
