//! The per-plugin circuit breaker on a real control plane: a hot-looping plugin is throttled
//! (metrics, `WasmPlugin` status and `Throttled` condition, a Warning event) while other
//! plugins keep converging, and a fixed version closes it; a failing plugin recovers through
//! the half-open trial once its object is fixed.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use kube::api::{DynamicObject, ListParams};
use serde_json::{Value, json};
use wasmop::controller::{BreakerConfig, ControllerConfig, Manager};
use wasmop::reload::{ReloadConfig, Reloader};
use wasmop::runtime::Runtime;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{api_for, apply, apply_file, eventually, log_to_test_output};
use wasmop_e2e::plugins::{plugin, plugin_with_features, workspace};

const WAIT: Duration = Duration::from_secs(60);

struct Setup {
    _cp: ControlPlane,
    client: kube::Client,
    dir: tempfile::TempDir,
    manager: Arc<Manager>,
    _watch: tokio::task::JoinHandle<notify::Result<()>>,
}

/// A host following a plugins directory holding `plugins`, with `breaker` settings.
async fn setup(breaker: BreakerConfig, plugins: &[(&str, &Path)]) -> Result<Setup> {
    log_to_test_output();
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    for crd in ["memcached.yaml", "testbed.yaml", "wasmplugin.yaml"] {
        apply_file(&client, &workspace().join("crds").join(crd)).await?;
    }
    let dir = tempfile::tempdir()?;
    for (name, file) in plugins {
        std::fs::copy(file, dir.path().join(name))?;
    }
    let runtime = Runtime::builder().artifact_dir(Some(dir.path().join(".artifacts"))).build()?;
    let config = ControllerConfig { resync: None, breaker, ..ControllerConfig::default() };
    let manager = Arc::new(Manager::new(client.clone(), runtime, config));
    let reload = ReloadConfig { debounce: Duration::from_millis(100), rescan: Duration::from_secs(60) };
    let reloader = Reloader::new(Arc::clone(&manager), dir.path(), reload);
    let watch = tokio::spawn(Arc::clone(&reloader).run());
    for (name, _) in plugins {
        let plugin = name.trim_end_matches(".wasm");
        eventually(&format!("{plugin} started"), WAIT, || async { Ok(manager.controller(plugin).map(|_| ())) }).await?;
    }
    Ok(Setup { _cp: cp, client, dir, manager, _watch: watch })
}

fn testbed(name: &str, mode: &str) -> Value {
    json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"mode": mode}})
}

fn condition<'a>(object: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    object.data.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == type_)
}

/// The `WasmPlugin` of `plugin` once `accept` holds for it.
async fn wasm_plugin(
    client: &kube::Client,
    plugin: &str,
    what: &str,
    accept: impl Fn(&DynamicObject) -> bool,
) -> Result<DynamicObject> {
    let api = api_for(client, "wasmop.dev/v1alpha1", "WasmPlugin", None).await?;
    eventually(&format!("WasmPlugin {plugin}: {what}"), WAIT, || async { Ok(api.get_opt(plugin).await?.filter(|wp| accept(wp))) })
        .await
}

fn breaker_state(wp: &DynamicObject) -> Option<&str> {
    wp.data.pointer("/status/circuitBreaker/state").and_then(Value::as_str)
}

#[tokio::test]
async fn a_hot_looping_plugin_is_throttled_and_a_fixed_version_closes_its_breaker() -> Result<()> {
    let (testbed_v1, memcached) = (plugin("testbed", "wasm32-wasip2"), plugin("memcached", "wasm32-wasip2"));
    // A long cooldown: the breaker stays open for the whole test unless the new version closes it.
    let breaker = BreakerConfig::default().hot_loop_writes(10).cooldown(Duration::from_secs(600));
    let s = setup(breaker, &[("testbed.wasm", &testbed_v1), ("memcached.wasm", &memcached)]).await?;
    let metrics = Arc::clone(s.manager.metrics());
    wasm_plugin(&s.client, "testbed", "breaker Closed", |wp| breaker_state(wp) == Some("Closed")).await?;

    // Every reconcile rewrites `looper-out` (a new tick), whose update re-queues `looper`.
    apply(&s.client, &testbed("looper", "hot-loop")).await?;
    eventually("the breaker opens (metrics)", WAIT, || async {
        let text = metrics.render();
        let open = text.contains(r#"wasmop_plugin_circuit_breaker_state{plugin="testbed"} 1"#)
            && text.contains(r#"wasmop_plugin_circuit_breaker_trips_total{plugin="testbed",reason="HotLoop"} 1"#);
        Ok(open.then_some(()))
    })
    .await?;
    let wp = wasm_plugin(&s.client, "testbed", "breaker Open", |wp| breaker_state(wp) == Some("Open")).await?;
    let status = &wp.data["status"];
    assert_eq!(status["circuitBreaker"]["reason"], "HotLoop", "{status}");
    let message = status["circuitBreaker"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("default/looper wrote on 10 consecutive reconciles in "), "{message}");
    assert!(message.contains("reconciles paused for 10 min"), "{message}");
    assert!(status["circuitBreaker"]["openedAt"].is_string() && status["circuitBreaker"]["retryAt"].is_string(), "{status}");
    let throttled = condition(&wp, "Throttled").expect("Throttled condition");
    assert_eq!((&throttled["status"], &throttled["reason"]), (&json!("True"), &json!("HotLoop")));
    let ready = condition(&wp, "Ready").expect("the file's Ready condition is kept");
    assert_eq!(ready["status"], "True");
    let events = api_for(&s.client, "events.k8s.io/v1", "Event", None).await?;
    eventually("a Warning event about WasmPlugin testbed in default", WAIT, || async {
        let found = events.list(&ListParams::default()).await?.items.into_iter().any(|e| {
            e.data["reason"] == "CircuitBreakerOpened"
                && e.metadata.namespace.as_deref() == Some("default")
                && e.data["type"] == "Warning"
                && e.data.pointer("/regarding/kind") == Some(&json!("WasmPlugin"))
                && e.data.pointer("/regarding/name") == Some(&json!("testbed"))
        });
        Ok(found.then_some(()))
    })
    .await?;

    // While open, a new Testbed waits in the queue; other plugins are not affected.
    let controller = s.manager.controller("testbed").expect("testbed running");
    let trips_before = controller.breaker().status().trips;
    apply(&s.client, &testbed("waiting", "ok")).await?;
    // Two keys wait: `looper` (re-queued by its last write) and `waiting`.
    eventually("the new Testbed queued", WAIT, || async { Ok((controller.queue_depth() >= 2).then_some(())) }).await?;
    let cms = api_for(&s.client, "v1", "ConfigMap", Some("default")).await?;
    assert!(cms.get_opt("waiting-out").await?.is_none(), "reconciled while the breaker was open");
    let still = controller.breaker().status();
    assert_eq!((still.phase.as_str(), still.trips), ("Open", trips_before), "the breaker stayed open meanwhile");
    apply(
        &s.client,
        &json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "unaffected", "namespace": "default"}, "spec": {"size": 1}}),
    )
    .await?;
    let deployments = api_for(&s.client, "apps/v1", "Deployment", Some("default")).await?;
    eventually("memcached converges while testbed is throttled", WAIT, || async {
        Ok(deployments.get_opt("unaffected").await?.map(|_| ()))
    })
    .await?;

    // A fixed version (0.2.0: the tick no longer changes) closes the breaker at once.
    let v2 = plugin_with_features("testbed", "wasm32-wasip2", &["test-v2"]);
    let tmp = s.dir.path().join("testbed.tmp");
    std::fs::copy(&v2, &tmp)?;
    std::fs::rename(&tmp, s.dir.path().join("testbed.wasm"))?;
    let wp = wasm_plugin(&s.client, "testbed", "version 0.2.0 with the breaker Closed", |wp| {
        wp.data.pointer("/status/version") == Some(&json!("0.2.0")) && breaker_state(wp) == Some("Closed")
    })
    .await?;
    assert_eq!(wp.data.pointer("/status/circuitBreaker/message"), Some(&json!("closed: version 0.2.0 loaded")));
    let throttled = condition(&wp, "Throttled").expect("Throttled condition");
    assert_eq!((&throttled["status"], &throttled["reason"]), (&json!("False"), &json!("Closed")));
    assert!(wp.data.pointer("/status/circuitBreaker/retryAt").is_none(), "{}", wp.data["status"]);
    assert!(metrics.render().contains(r#"wasmop_plugin_circuit_breaker_state{plugin="testbed"} 0"#));
    // Nothing queued while open was lost, and the fixed version converges the looper.
    eventually("the queued Testbed reconciled", WAIT, || async { Ok(cms.get_opt("waiting-out").await?.map(|_| ())) }).await?;
    eventually("looper-out settles at the fixed tick", WAIT, || async {
        let cm = cms.get_opt("looper-out").await?;
        Ok(cm.filter(|cm| cm.data.pointer("/data/tick") == Some(&json!("fixed"))).map(|_| ()))
    })
    .await?;
    assert_eq!(controller.breaker().status().phase.as_str(), "Closed");
    Ok(())
}

#[tokio::test]
async fn a_failing_plugin_recovers_through_the_trial_reconcile_once_its_object_is_fixed() -> Result<()> {
    let testbed_v1 = plugin("testbed", "wasm32-wasip2");
    // 4 of the last 5 failed trips it (one object with 5 ms · 2ⁿ backoff gets there in ~0.2 s);
    // a 1 s cooldown, then trials until one succeeds.
    let breaker = BreakerConfig::default().window_calls(5).cooldown(Duration::from_secs(1)).max_cooldown(Duration::from_secs(2));
    let s = setup(breaker, &[("testbed.wasm", &testbed_v1)]).await?;
    let metrics = Arc::clone(s.manager.metrics());
    apply(&s.client, &testbed("broken", "retryable")).await?;
    eventually("the breaker opens for failures", WAIT, || async {
        Ok(metrics
            .render()
            .contains(r#"wasmop_plugin_circuit_breaker_trips_total{plugin="testbed",reason="Failing"}"#)
            .then_some(()))
    })
    .await?;
    let wp = wasm_plugin(&s.client, "testbed", "throttled for failures", |wp| {
        condition(wp, "Throttled").is_some_and(|c| c["status"] == "True" && c["reason"] == "Failing")
    })
    .await?;
    let message = wp.data.pointer("/status/circuitBreaker/message").and_then(Value::as_str).unwrap_or_default().to_owned();
    assert!(message.contains("of the last 5 reconciles failed") || message.contains("trial reconcile"), "{message}");
    // Every trial fails until the object is fixed; then the next trial closes the breaker.
    assert_ne!(s.manager.controller("testbed").expect("running").breaker().status().phase.as_str(), "Closed");
    apply(&s.client, &testbed("broken", "ok")).await?;
    let wp = wasm_plugin(&s.client, "testbed", "closed by a successful trial", |wp| breaker_state(wp) == Some("Closed")).await?;
    assert_eq!(wp.data.pointer("/status/circuitBreaker/message"), Some(&json!("closed: the trial reconcile succeeded")));
    assert_eq!(condition(&wp, "Throttled").map(|c| c["status"].clone()), Some(json!("False")));
    let cms = api_for(&s.client, "v1", "ConfigMap", Some("default")).await?;
    eventually("the fixed object converges", WAIT, || async { Ok(cms.get_opt("broken-out").await?.map(|_| ())) }).await?;
    Ok(())
}
