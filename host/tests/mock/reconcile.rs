//! Whole reconciles against the mock API server: the [`Manager`] starts the testbed plugin
//! (discovery, watches), its worker reconciles the parent through the plugin, and the writes
//! that reach the server are checked.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use serde_json::{Value, json};
use wasmop::controller::{ControllerConfig, Manager, ObjectKey, PluginController, PluginError, StartError};
use wasmop::runtime::{Plugin, Runtime};
use wasmop::watch::InitialList;

use super::server::{ApiServer, Call, mock_client};

/// `Testbed` `ns/tb` in `mode`.
fn testbed(mode: &str) -> Value {
    json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
        "metadata": {"name": "tb", "namespace": "ns", "uid": "u-tb", "generation": 2, "resourceVersion": "5"},
        "spec": {"mode": mode}})
}

const PARENT_PATH: &str = "/apis/test.wasmop.dev/v1/namespaces/ns/testbeds/tb";

/// [`start_plugin`] with the testbed plugin.
async fn start(server: &mut ApiServer, client: kube::Client) -> (Manager, Arc<PluginController>, Call) {
    start_plugin(server, client, wasmop_e2e::fixtures::testbed()).await
}

/// A manager over the mock with one worker and no resync, the plugin at `path` started (the
/// server answers discovery, lists and watches meanwhile), and the first write of its worker.
async fn start_plugin(server: &mut ApiServer, client: kube::Client, path: PathBuf) -> (Manager, Arc<PluginController>, Call) {
    let (manager, plugin) = manager(client, path).await;
    let (started, first) = tokio::join!(manager.start(plugin), server.next());
    (manager, started.expect("the plugin starts"), first)
}

/// A manager over the mock with one worker, no resync and a 2 s sync timeout, and the plugin at
/// `path`, loaded.
async fn manager(client: kube::Client, path: PathBuf) -> (Manager, Plugin) {
    manager_with(client, path, Runtime::builder()).await
}

/// [`manager`] with a runtime built from `runtime`.
async fn manager_with(client: kube::Client, path: PathBuf, runtime: wasmop::runtime::RuntimeBuilder) -> (Manager, Plugin) {
    manager_configured(client, path, runtime, test_config()).await
}

/// One worker, no resync, a 2 s sync timeout, paged lists.
fn test_config() -> ControllerConfig {
    ControllerConfig {
        concurrency: 1,
        resync: None,
        sync_timeout: Duration::from_secs(2),
        discovery_patience: Duration::from_secs(1),
        shutdown_grace: Duration::from_secs(1),
        // The requests below are every one the host sends: one LIST per watch, no `/version`.
        initial_list: InitialList::Paged,
        ..Default::default()
    }
}

/// A manager over the mock with `config` and a runtime built from `runtime`, and the plugin at
/// `path`, loaded.
async fn manager_configured(
    client: kube::Client,
    path: PathBuf,
    runtime: wasmop::runtime::RuntimeBuilder,
    config: ControllerConfig,
) -> (Manager, Plugin) {
    // Compiled once, then loaded from the artifact cache: a test takes well under a second.
    let artifacts = std::env::temp_dir().join("wasmop-mock-test-artifacts");
    let runtime = runtime.artifact_dir(Some(artifacts)).build().expect("runtime");
    let plugin = runtime.load_file(path).await.expect("the plugin loads");
    (Manager::new(client, runtime, config), plugin)
}

/// The testbed parent `ok`, started with `fold_window` and reconciled: its child applied and
/// created, its status written, and both back through the watch. Returns the child as created.
async fn converged_with_fold_window(server: &mut ApiServer, client: kube::Client, fold_window: Duration) -> (Manager, Value) {
    server.add(testbed("ok"));
    let config = ControllerConfig { fold_window, ..test_config() };
    let (manager, plugin) = manager_configured(client, wasmop_e2e::fixtures::testbed(), Runtime::builder(), config).await;
    let (started, apply) = tokio::join!(manager.start(plugin), server.next());
    started.expect("the plugin starts");
    let mut child = apply.body.clone();
    apply.echo("6");
    let status = server.next().await;
    assert_eq!(status.path, format!("{PARENT_PATH}/status"), "{status}");
    let mut patched = testbed("ok");
    patched["metadata"]["resourceVersion"] = json!("7");
    patched["status"] = status.body["status"].clone();
    status.answer(patched.clone());
    server.event("MODIFIED", patched);
    child["metadata"]["resourceVersion"] = json!("6");
    server.event("ADDED", child.clone());
    assert!(server.next_within(Duration::from_millis(500)).await.is_none(), "nothing else is written: {:#?}", server.requests());
    (manager, child)
}

fn is_event(call: &Call) -> bool {
    call.path.starts_with("/apis/events.k8s.io/v1/namespaces/ns/events")
}

#[tokio::test]
async fn a_parent_is_reconciled_into_an_apply_of_its_child_and_a_status_patch() {
    let (client, mut server) = mock_client();
    server.add(testbed("ok"));
    let (_manager, _controller, apply) = start(&mut server, client).await;

    assert_eq!((&apply.method, apply.path.as_str()), (&Method::PATCH, "/api/v1/namespaces/ns/configmaps/tb-out"));
    assert_eq!((apply.query("fieldManager"), apply.query("force")), (Some("wasmop/testbed"), Some("true")));
    assert_eq!(apply.body["metadata"]["ownerReferences"][0]["uid"], "u-tb");
    assert_eq!(apply.body["data"], json!({"mode": "ok"}));
    apply.echo("6");

    let status = server.next().await;
    assert_eq!(status.path, format!("{PARENT_PATH}/status"));
    assert_eq!(status.body["status"]["phase"], "Ready");
    let conditions = status.body["status"]["conditions"].as_array().expect("conditions").clone();
    let types: Vec<(&str, &str, i64)> = conditions
        .iter()
        .map(|c| (c["type"].as_str().unwrap(), c["status"].as_str().unwrap(), c["observedGeneration"].as_i64().unwrap()))
        .collect();
    assert_eq!(types, [("Ready", "True", 2), ("Reconciled", "True", 2)]);
    let mut patched = testbed("ok");
    patched["metadata"]["resourceVersion"] = json!("7");
    status.answer(patched);

    assert!(server.next_within(Duration::from_millis(300)).await.is_none(), "nothing else is written");
    let lists: Vec<&String> = server.requests().iter().filter(|r| r.starts_with("GET") && !r.contains("watch=true")).collect();
    assert!(lists.iter().any(|r| r.starts_with("GET /apis/test.wasmop.dev/v1/testbeds?")), "{lists:?}");
    assert!(lists.iter().any(|r| r.starts_with("GET /api/v1/configmaps?")), "{lists:?}");
}

#[tokio::test]
async fn a_reconcile_before_the_watch_delivers_the_hosts_status_write_does_not_write_it_again() {
    let (client, mut server) = mock_client();
    server.add(testbed("ok"));
    let (_manager, _controller, apply) = start(&mut server, client).await;
    let mut child = apply.body.clone();
    apply.echo("6");
    let status = server.next().await;
    assert_eq!(status.path, format!("{PARENT_PATH}/status"));
    let mut patched = testbed("ok");
    patched["metadata"]["resourceVersion"] = json!("7");
    patched["status"] = status.body["status"].clone();
    status.answer(patched.clone());

    // The child's watch event queues the parent again while the cache still holds the parent at
    // resourceVersion 5: the host's status write has not come back through the watch yet.
    child["metadata"]["resourceVersion"] = json!("6");
    server.event("ADDED", child.clone());
    assert!(
        server.next_within(Duration::from_millis(500)).await.is_none(),
        "the same status is not patched again: {:#?}",
        server.requests()
    );

    // Once the watch has delivered the write and someone else changed the status, the cached
    // parent counts again: the next reconcile restores what the plugin reports.
    server.event("MODIFIED", patched.clone());
    let mut changed = patched;
    changed["metadata"]["resourceVersion"] = json!("8");
    changed["status"]["phase"] = json!("Overwritten");
    server.event("MODIFIED", changed);
    child["metadata"]["resourceVersion"] = json!("9");
    server.event("MODIFIED", child);
    let status = server.next().await;
    assert_eq!(status.path, format!("{PARENT_PATH}/status"), "{status}");
    assert_eq!(status.body["status"]["phase"], "Ready");
    status.echo("10");
}

#[tokio::test]
async fn a_reconcile_that_creates_its_child_writes_the_status_the_created_child_gives() {
    let (client, mut server) = mock_client();
    let mut parent = wasmop_e2e::fixtures::memcached_cr("m", 0);
    parent["metadata"]["resourceVersion"] = json!("5");
    server.add(parent);
    server.serve_memcached();
    let (manager, _controller, create) = start_plugin(&mut server, client, wasmop_e2e::fixtures::memcached()).await;
    assert_eq!(create.path, "/apis/apps/v1/namespaces/default/deployments/m", "{create}");
    assert_eq!(create.body["metadata"]["resourceVersion"], "1", "a create-only apply: {create}");
    // As the API server stores a new Deployment: no status yet.
    let mut deployment = create.body.clone();
    create.echo("6");

    // The plugin is asked again with the Deployment it created before the status is written:
    // the first status already says what the watch's echo of the Deployment would have made
    // it say one reconcile later (0 of 0 replicas available), not "does not exist yet".
    let status = server.next().await;
    assert_eq!(status.path, "/apis/cache.example.com/v1alpha1/namespaces/default/memcacheds/m/status", "{status}");
    let available = status.body["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Available"))
        .cloned()
        .unwrap_or_else(|| panic!("an Available condition: {status}"));
    assert_eq!((&available["status"], &available["message"]), (&json!("True"), &json!("0/0 replicas available")), "{status}");
    status.echo("7");
    assert!(server.next_within(Duration::from_millis(300)).await.is_none(), "nothing else is written: {:#?}", server.requests());
    assert_eq!(reconciles(&manager), 1.0);

    // The watch delivers the Deployment at the version the plugin was shown: no reconcile.
    deployment["metadata"]["resourceVersion"] = json!("6");
    server.event("ADDED", deployment.clone());
    assert!(server.next_within(Duration::from_millis(300)).await.is_none(), "nothing is written: {:#?}", server.requests());
    assert_eq!(reconciles(&manager), 1.0, "the creation coming back is nothing new to the plugin");

    // Any later version of it is news: the parent is reconciled.
    deployment["metadata"]["resourceVersion"] = json!("8");
    deployment["status"] = json!({"observedGeneration": 1});
    server.event("MODIFIED", deployment);
    assert!(server.next_within(Duration::from_millis(300)).await.is_none(), "nothing changed to write: {:#?}", server.requests());
    assert_eq!(reconciles(&manager), 2.0, "the Deployment's status update reconciles its parent");
}

#[tokio::test]
async fn a_worker_asked_again_never_waits_for_its_own_reservation() {
    // A response budget of one unit: every answer reserves all of it. A worker that still held
    // its first answer's reservation while the plugin answered again would wait for itself.
    let (client, mut server) = mock_client();
    server.add(wasmop_e2e::fixtures::memcached_cr("m", 0));
    server.serve_memcached();
    let (manager, plugin) =
        manager_with(client, wasmop_e2e::fixtures::memcached(), Runtime::builder().response_budget(1 << 10)).await;
    let (started, create) = tokio::join!(manager.start(plugin), server.next());
    let _controller = started.expect("the plugin starts");
    assert_eq!(create.path, "/apis/apps/v1/namespaces/default/deployments/m", "{create}");
    create.echo("6");
    let status = server
        .next_within(Duration::from_secs(5))
        .await
        .expect("the status is written: the first reservation went back before the plugin was asked again");
    assert!(status.path.ends_with("/memcacheds/m/status"), "{status}");
    status.echo("7");
}

/// The manager's `controller_runtime_reconcile_total`, all plugins and results.
fn reconciles(manager: &Manager) -> f64 {
    manager
        .metrics()
        .render()
        .lines()
        .filter(|l| l.starts_with("controller_runtime_reconcile_total{"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn child_changes_within_the_fold_window_are_one_reconcile() {
    let (client, mut server) = mock_client();
    let (manager, mut child) = converged_with_fold_window(&mut server, client, Duration::from_secs(3)).await;
    let before = reconciles(&manager);

    // Three changes of the child, 200 ms apart: reconciled at each change, they would be three.
    for version in ["8", "9", "10"] {
        child["metadata"]["resourceVersion"] = json!(version);
        server.event("MODIFIED", child.clone());
        assert!(server.next_within(Duration::from_millis(200)).await.is_none(), "{:#?}", server.requests());
    }
    let waited = tokio::time::Instant::now();
    while reconciles(&manager) == before {
        assert!(waited.elapsed() < Duration::from_secs(20), "the parent is reconciled once the window ends");
        assert!(server.next_within(Duration::from_millis(100)).await.is_none(), "{:#?}", server.requests());
    }
    assert!(server.next_within(Duration::from_secs(1)).await.is_none(), "the child as applied: nothing to write");
    assert_eq!(reconciles(&manager) - before, 1.0, "the three changes folded into one reconcile");
}

#[tokio::test]
async fn a_change_of_the_parent_is_reconciled_at_once_while_a_childs_change_waits() {
    let (client, mut server) = mock_client();
    let (_manager, mut child) = converged_with_fold_window(&mut server, client, Duration::from_secs(60)).await;
    child["metadata"]["resourceVersion"] = json!("8");
    server.event("MODIFIED", child);

    // A new generation of the parent: its reconcile writes `observedGeneration` 3 at once, not
    // after the child's minute.
    let mut changed = testbed("ok");
    changed["metadata"]["resourceVersion"] = json!("9");
    changed["metadata"]["generation"] = json!(3);
    changed["spec"]["note"] = json!("changed");
    server.event("MODIFIED", changed);
    let status =
        server.next_within(Duration::from_secs(20)).await.expect("the parent's change is reconciled within the child's window");
    assert_eq!(status.path, format!("{PARENT_PATH}/status"), "{status}");
    let generations: Vec<i64> = status.body["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .map(|c| c["observedGeneration"].as_i64().expect("observedGeneration"))
        .collect();
    assert!(generations.iter().all(|&g| g == 3), "{status}");
    status.echo("10");
}

#[tokio::test]
async fn a_second_answer_that_wants_other_children_is_not_written() {
    let (client, mut server) = mock_client();
    server.add(testbed("hot-loop"));
    let (_manager, _controller, create) = start(&mut server, client).await;
    assert_eq!(create.path, "/api/v1/namespaces/ns/configmaps/tb-out", "{create}");
    create.echo("6");
    // Asked again with its new ConfigMap, the plugin answers another tick: the first answer's
    // status is written and its child stands until the watch's echo reconciles the parent.
    let status = server.next().await;
    assert_eq!(status.path, format!("{PARENT_PATH}/status"), "the second answer's child is not applied: {status}");
    assert_eq!(status.body["status"]["phase"], "Ready");
    status.echo("7");
    assert!(server.next_within(Duration::from_millis(300)).await.is_none(), "nothing else is written: {:#?}", server.requests());
}

#[tokio::test]
async fn a_refused_response_writes_nothing_of_it_and_records_why_on_the_parent() {
    let (client, mut server) = mock_client();
    server.add(testbed("other-namespace"));
    let (_manager, controller, first) = start(&mut server, client).await;

    // Two reconciles (the refusal is retried with backoff), each with its Warning event; the
    // parent's status records the refusal once (the retry finds it shown already).
    let mut writes = Vec::new();
    let (mut refusals, mut statuses) = (0, 0);
    let mut next = Some(first);
    while refusals < 2 {
        let call = match next.take() {
            Some(call) => call,
            None => server.next().await,
        };
        writes.push(call.to_string());
        if is_event(&call) {
            // A repeated event is a PATCH of the first one (its series); the first is created.
            if call.method == Method::POST {
                assert_eq!((&call.body["type"], &call.body["reason"]), (&json!("Warning"), &json!("ActionRefused")), "{call}");
            }
            call.echo("1");
            refusals += 1;
        } else {
            assert_eq!(call.path, format!("{PARENT_PATH}/status"), "{call}");
            let reconciled = &call.body["status"]["conditions"][0];
            assert_eq!((&reconciled["type"], &reconciled["status"]), (&json!("Reconciled"), &json!("False")), "{call}");
            assert_eq!(reconciled["reason"], "ActionRefused");
            call.echo("6");
            statuses += 1;
        }
    }
    assert!(writes.iter().all(|w| !w.contains("configmaps") && !w.contains("kube-system")), "{writes:#?}");
    assert_eq!(statuses, 1, "{writes:#?}");
    let key = ObjectKey { namespace: Some("ns".into()), name: "tb".into() };
    assert!(controller.failures(&key) >= 1, "a refusal counts as a failure and is retried with backoff");
}

#[tokio::test]
async fn a_failed_apply_is_retried_with_backoff_until_it_succeeds() {
    let (client, mut server) = mock_client();
    server.add(testbed("ok"));
    let (_manager, controller, first) = start(&mut server, client).await;
    let key = ObjectKey { namespace: Some("ns".into()), name: "tb".into() };

    let mut next = Some(first);
    // (A 409 would not be a failure here: the first apply of a new child creates it only if
    // absent, and its conflict means the child exists, to be read and applied in the same
    // reconcile.)
    for (failures, (code, reason)) in [(422, "Invalid"), (403, "Forbidden"), (500, "InternalError")].into_iter().enumerate() {
        let apply = match next.take() {
            Some(call) => call,
            None => server.next().await,
        };
        assert_eq!(apply.path, "/api/v1/namespaces/ns/configmaps/tb-out", "attempt {}", failures + 1);
        assert_eq!(controller.failures(&key), failures as u32, "before attempt {}", failures + 1);
        apply.fail(code, reason);
    }
    let apply = server.next().await;
    assert_eq!(apply.path, "/api/v1/namespaces/ns/configmaps/tb-out");
    apply.echo("6");
    let status = server.next().await;
    assert!(status.path.ends_with("/testbeds/tb/status"), "{status}");
    status.echo("7");
    assert!(server.next_within(Duration::from_millis(100)).await.is_none());
    assert_eq!(controller.failures(&key), 0, "success resets the backoff");
}

#[tokio::test]
async fn the_finalizer_is_added_before_the_first_reconcile() {
    let (client, mut server) = mock_client();
    server.add(testbed("ok"));
    let plugin = wasmop_e2e::fixtures::plugin_with_features("testbed", "wasm32-wasip2", &["finalizer"]);
    let (_manager, _controller, add) = start_plugin(&mut server, client, plugin).await;
    assert_eq!((&add.method, add.path.as_str()), (&Method::PATCH, PARENT_PATH), "{add}");
    assert_eq!(add.content_type, "application/merge-patch+json");
    assert_eq!(add.query("fieldManager"), Some("wasmop/testbed"));
    assert_eq!(add.body, json!({"metadata": {"finalizers": ["wasmop.dev/testbed"], "resourceVersion": "5"}}));
    add.echo("6");
    assert!(server.next_within(Duration::from_millis(300)).await.is_none(), "the plugin is called once the update is seen");
    let mut held = testbed("ok");
    held["metadata"]["finalizers"] = json!(["wasmop.dev/testbed"]);
    held["metadata"]["resourceVersion"] = json!("6");
    server.event("MODIFIED", held);
    let apply = server.next().await;
    assert_eq!(apply.path, "/api/v1/namespaces/ns/configmaps/tb-out", "{apply}");
}

#[tokio::test]
async fn a_finalized_parent_loses_the_finalizer_at_the_resource_version_of_the_hosts_status_write() {
    let (client, mut server) = mock_client();
    let mut deleting = testbed("ok");
    deleting["metadata"]["finalizers"] = json!(["someone.else/keep", "wasmop.dev/testbed"]);
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    server.add(deleting);
    let plugin = wasmop_e2e::fixtures::plugin_with_features("testbed", "wasm32-wasip2", &["finalizer"]);
    let (_manager, _controller, status) = start_plugin(&mut server, client, plugin).await;
    assert_eq!(status.path, format!("{PARENT_PATH}/status"), "{status}");
    status.echo("8");
    let mut removal = None;
    while removal.is_none() {
        let call = server.next().await;
        if is_event(&call) {
            assert_eq!(call.body["reason"], "Finalized", "{call}");
            call.echo("1");
        } else {
            removal = Some(call);
        }
    }
    let removal = removal.expect("the finalizer's removal");
    assert_eq!(removal.path, PARENT_PATH, "{removal}");
    assert_eq!(removal.body, json!({"metadata": {"finalizers": ["someone.else/keep"], "resourceVersion": "8"}}));
    removal.echo("9");
}

#[tokio::test]
async fn a_declared_kind_the_server_does_not_serve_fails_the_start_before_any_watch() {
    let (client, mut server) = mock_client();
    let plugin = wasmop_e2e::fixtures::plugin_with_features("testbed", "wasm32-wasip2", &["declares-deployments"]);
    let (manager, plugin) = manager(client, plugin).await;
    let (started, write) = tokio::join!(manager.start(plugin), server.next_within(Duration::from_millis(500)));
    let err = started.expect_err("apps/v1 is not served");
    assert!(matches!(&err, PluginError::Start(StartError::Discovery(_))), "{err}");
    assert!(err.to_string().contains("Deployment"), "{err}");
    assert!(write.is_none());
    assert!(server.requests().iter().all(|r| !r.contains("watch=true") && !r.contains('?')), "{:?}", server.requests());
}

#[tokio::test]
async fn a_kind_the_host_may_not_list_fails_the_start_with_the_servers_answer() {
    let (client, mut server) = mock_client();
    server.forbid("configmaps");
    let (manager, plugin) = manager(client, wasmop_e2e::fixtures::testbed()).await;
    let (started, write) = tokio::join!(manager.start(plugin), server.next_within(Duration::from_millis(2500)));
    let err = started.expect_err("ConfigMaps cannot be listed");
    let PluginError::Start(StartError::NotSynced(timeout)) = &err else { panic!("{err}") };
    assert_eq!(timeout.kind.kind, "ConfigMap");
    assert!(timeout.last_error.as_deref().is_some_and(|e| e.contains("403") || e.contains("Forbidden")), "{err}");
    assert!(write.is_none(), "nothing is reconciled");
    assert!(manager.plugins().is_empty());
}

/// Answer the failure a reconcile records (a Warning event, `Reconciled=False`) and return
/// the condition's reason.
async fn failure_recorded(server: &mut ApiServer, first: Option<Call>) -> String {
    let mut next = first;
    loop {
        let call = match next.take() {
            Some(call) => call,
            None => server.next().await,
        };
        if is_event(&call) {
            call.echo("1");
            continue;
        }
        assert_eq!(call.path, format!("{PARENT_PATH}/status"), "{call}");
        let reconciled = call.body["status"]["conditions"][0].clone();
        assert_eq!((&reconciled["type"], &reconciled["status"]), (&json!("Reconciled"), &json!("False")), "{call}");
        call.echo("6");
        return reconciled["reason"].as_str().unwrap_or_default().to_owned();
    }
}

#[tokio::test]
async fn a_retryable_plugin_error_is_retried_and_a_terminal_one_waits_for_a_change() {
    let key = ObjectKey { namespace: Some("ns".into()), name: "tb".into() };
    let (client, mut server) = mock_client();
    server.add(testbed("retryable"));
    let (_manager, controller, first) = start(&mut server, client).await;
    assert_eq!(failure_recorded(&mut server, Some(first)).await, "ReconcileError");
    // Retried with backoff: the failure's Warning event again, and no second status write of
    // the failure the parent shows already.
    let retried = server.next().await;
    assert!(is_event(&retried), "{retried}");
    retried.echo("1");
    assert!(controller.failures(&key) >= 1);

    let (client, mut server) = mock_client();
    server.add(testbed("terminal"));
    let (_manager, controller, first) = start(&mut server, client).await;
    assert_eq!(failure_recorded(&mut server, Some(first)).await, "ReconcileFailed");
    assert!(server.next_within(Duration::from_millis(300)).await.is_none(), "a terminal error is not retried");
    assert_eq!(controller.failures(&key), 0, "nor backed off: the next change of the parent reconciles it");
}
