//! The shared watches against the mock API server: the list and watch requests of a kind, the
//! cache they fill, and the changes their subscribers are told about.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use wasmop::cluster::InstallScope;
use wasmop::contract::{Object, Scope};
use wasmop::objects::ObjectCache;
use wasmop::watch::{InitialList, Subscriber, Watches};

use super::server::mock_client;
use wasmop_e2e::plans::config_map_kind;

/// What a subscriber was told: `(old name, new data)` per change.
#[derive(Default)]
struct Changes(Mutex<Vec<(Option<String>, Option<Value>)>>);

impl Subscriber for Changes {
    fn on_change(&self, _: &wasmop::contract::Kind, old: Option<&Object>, new: Option<&Object>) {
        let name = old.and_then(|o| o.head()["metadata"]["name"].as_str()).map(str::to_owned);
        self.0.lock().unwrap().push((name, new.map(|n| n.to_value()["data"].clone())));
    }
}

fn config_map(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "resourceVersion": "1",
            "managedFields": [{"manager": "kubectl"}]},
        "data": {"k": value}})
}

/// Wait (briefly) until `done` holds.
async fn eventually(what: &str, done: impl Fn() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what} did not happen within 2 s");
}

#[tokio::test]
async fn a_kind_is_listed_and_watched_cluster_wide_without_selectors_and_cached_without_managed_fields() {
    let (client, mut server) = mock_client();
    server.add(config_map("a", "1"));
    let watches = Watches::with_initial_list(client, InstallScope::Cluster, InitialList::Paged);
    let changes = Arc::new(Changes::default());
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "ConfigMap"), "configmaps");
    let kind = config_map_kind();
    let _subscription = watches.subscribe(&kind, &resource, Scope::Namespaced, None, changes.clone());
    let (synced, none) =
        tokio::join!(watches.wait_synced(&kind, Duration::from_secs(5)), server.next_within(Duration::from_millis(200)));
    synced.expect("synced");
    assert!(none.is_none(), "a watch only reads");

    let requests = server.requests();
    assert_eq!(requests.len(), 2, "one list, one watch: {requests:?}");
    let query = |r: &str| r.split_once('?').map(|(_, q)| q.split('&').map(str::to_owned).collect::<Vec<_>>()).unwrap_or_default();
    let (list, watch) = (query(&requests[0]), query(&requests[1]));
    assert!(requests[0].starts_with("GET /api/v1/configmaps?"), "every namespace: {}", requests[0]);
    assert!(requests[1].starts_with("GET /api/v1/configmaps?"), "every namespace: {}", requests[1]);
    for q in list.iter().chain(&watch) {
        assert!(!q.starts_with("labelSelector") && !q.starts_with("fieldSelector"), "one watch serves every plugin: {q}");
    }
    assert!(!list.contains(&"watch=true".to_owned()), "{list:?}");
    assert!(watch.contains(&"watch=true".to_owned()), "{watch:?}");
    assert!(watch.contains(&"resourceVersion=1".to_owned()), "the watch resumes from the list: {watch:?}");

    let cached = watches.get(&config_map_kind(), Some("ns"), "a").expect("cached");
    assert_eq!(cached.to_value()["data"]["k"], "1");
    assert!(cached.head()["metadata"].get("managedFields").is_none(), "{cached}");
    assert_eq!(changes.0.lock().unwrap().as_slice(), [(None, Some(json!({"k": "1"})))]);
}

#[tokio::test]
async fn watch_events_update_the_cache_and_reach_the_subscribers() {
    let (client, mut server) = mock_client();
    let watches = Watches::with_initial_list(client, InstallScope::Cluster, InitialList::Paged);
    let changes = Arc::new(Changes::default());
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "ConfigMap"), "configmaps");
    let kind = config_map_kind();
    let _subscription = watches.subscribe(&kind, &resource, Scope::Namespaced, None, changes.clone());
    let (synced, _) =
        tokio::join!(watches.wait_synced(&kind, Duration::from_secs(5)), server.next_within(Duration::from_millis(200)));
    synced.expect("synced");
    let get = || watches.get(&config_map_kind(), Some("ns"), "b").map(|o| o.to_value()["data"]["k"].clone());

    server.event("ADDED", config_map("b", "1"));
    eventually("the ADDED object is cached", || get() == Some(json!("1"))).await;
    server.event("MODIFIED", config_map("b", "2"));
    eventually("the MODIFIED object is cached", || get() == Some(json!("2"))).await;
    server.event("DELETED", config_map("b", "2"));
    eventually("the DELETED object leaves the cache", || get().is_none()).await;
    let b = Some("b".to_owned());
    assert_eq!(
        changes.0.lock().unwrap().as_slice(),
        [(None, Some(json!({"k": "1"}))), (b.clone(), Some(json!({"k": "2"}))), (b, None)]
    );
}
