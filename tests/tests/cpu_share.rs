//! Each plugin's share of CPU on a real control plane: a plugin spinning to its deadline on half
//! of its objects, given a small `cpuShare`, is held to that share (its call time per second,
//! from the host's metrics) and shown throttled (metrics, `WasmPlugin` `status.cpu`), while
//! memcached beside it converges every parent, waits for nothing and is not throttled; none of
//! the spinner's keys is dropped, and its status clears once it stops spinning.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use kube::api::DynamicObject;
use serde_json::{Value, json};
use wasmop::controller::{BreakerConfig, ControllerConfig, Manager};
use wasmop::metrics::Metrics;
use wasmop::policy::HostPolicy;
use wasmop::queue::QueueConfig;
use wasmop::reload::{ReloadConfig, Reloader};
use wasmop::runtime::Runtime;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{api_for, apply, apply_file, eventually, log_to_test_output};
use wasmop_e2e::plugins::{plugin, workspace};

const WAIT: Duration = Duration::from_secs(90);
/// The spinner's share, in cores, and its deadline.
const SHARE: f64 = 0.25;
const DEADLINE: Duration = Duration::from_millis(200);
/// Workers per plugin.
const WORKERS: usize = 4;
/// How long the spinner's call rate is measured.
const WINDOW: Duration = Duration::from_secs(30);
/// Testbeds in mode `spin-half`: `x-0` … `x-19`, of which the ten whose name adds up to an odd
/// number spin (testbed's `spins_on`).
const TESTBEDS: usize = 20;
const MEMCACHEDS: usize = 20;

fn policy() -> String {
    format!("plugins: {{testbed: {{cpuShare: {SHARE}, deadline: {}ms}}}}", DEADLINE.as_millis())
}

fn testbed(name: &str, mode: &str) -> Value {
    json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"mode": mode}})
}

fn memcached(name: &str) -> Value {
    json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"size": 0}})
}

/// The value of the sample `name{plugin="plugin"}` in `metrics`, if present.
fn sample(metrics: &Metrics, name: &str, plugin: &str) -> Option<f64> {
    let prefix = format!("{name}{{plugin=\"{plugin}\"}} ");
    metrics.render().lines().find_map(|line| line.strip_prefix(&prefix)?.parse().ok())
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

fn cpu_status<'a>(wp: &'a DynamicObject, field: &str) -> Option<&'a Value> {
    wp.data.pointer(&format!("/status/cpu/{field}"))
}

/// Testbed's rule for mode `spin-half` (`testbed::spins_on`).
fn spins_on(name: &str) -> bool {
    name.bytes().map(u32::from).sum::<u32>() % 2 == 1
}

#[tokio::test]
async fn a_plugin_spinning_on_half_its_objects_is_held_to_its_cpu_share_while_memcached_converges_beside_it() -> Result<()> {
    log_to_test_output();
    let (testbed_wasm, memcached_wasm) = (plugin("testbed", "wasm32-wasip2"), plugin("memcached", "wasm32-wasip2"));
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    for crd in ["memcached.yaml", "testbed.yaml", "wasmplugin.yaml"] {
        apply_file(&client, &workspace().join("crds").join(crd)).await?;
    }
    let dir = tempfile::tempdir()?;
    std::fs::copy(&testbed_wasm, dir.path().join("testbed.wasm"))?;
    std::fs::copy(&memcached_wasm, dir.path().join("memcached.wasm"))?;
    let policy = HostPolicy::from_yaml(&policy())?;
    let runtime = Runtime::builder().allowances(policy.allowances()).artifact_dir(Some(dir.path().join(".artifacts"))).build()?;
    let config = ControllerConfig {
        resync: None,
        concurrency: WORKERS,
        // A spinning object is retried at least every 250 ms, and the queue's global limit does
        // not space the retries out: without a share its demand would be every worker, always.
        queue: QueueConfig::default().max_delay(Duration::from_millis(250)).rate_per_second(1000.0),
        // The breaker would open on the spinner once its objects that answer are done (then only
        // failures finish): set aside, so that only the share holds the spinner.
        breaker: BreakerConfig::default().window_calls(0),
        policy,
        ..ControllerConfig::default()
    };
    let manager = Arc::new(Manager::new(client.clone(), runtime, config));
    let reload = ReloadConfig { debounce: Duration::from_millis(100), rescan: Duration::from_secs(60) };
    let reloader = Reloader::new(Arc::clone(&manager), dir.path(), reload);
    let _watch = tokio::spawn(Arc::clone(&reloader).run());
    for name in ["testbed", "memcached"] {
        eventually(&format!("{name} started"), WAIT, || async { Ok(manager.controller(name).map(|_| ())) }).await?;
    }
    let metrics = Arc::clone(manager.metrics());

    // Half the testbeds spin to the 200 ms deadline on every call, retried without end.
    for i in 0..TESTBEDS {
        apply(&client, &testbed(&format!("x-{i}"), "spin-half")).await?;
    }
    let spinner = manager.controller("testbed").context("testbed running")?;
    eventually("the spinner goes over its share (metrics)", WAIT, || async {
        Ok(sample(&metrics, "wasmop_plugin_throttled_seconds_total", "testbed").filter(|s| *s > 0.0))
    })
    .await?;
    let wp = wasm_plugin(&client, "testbed", "throttled", |wp| cpu_status(wp, "throttled") == Some(&json!(true))).await?;
    assert_eq!(cpu_status(&wp, "share"), Some(&json!("0.25")), "{}", wp.data["status"]);
    assert_eq!(cpu_status(&wp, "source"), Some(&json!("Policy")));
    assert_eq!(wp.data.pointer("/status/limits/cpuShare"), Some(&json!("0.25")));
    let message = cpu_status(&wp, "message").and_then(Value::as_str).unwrap_or_default();
    assert!(message.starts_with("over its share of 0.25 CPU (host policy cpuShare)"), "{message}");

    // The measured window: the spinner's call time per second, while memcached converges.
    let started = tokio::time::Instant::now();
    let charged_before = sample(&metrics, "wasmop_plugin_cpu_seconds_total", "testbed").context("spinner's call time")?;
    for i in 0..MEMCACHEDS {
        apply(&client, &memcached(&format!("m-{i}"))).await?;
    }
    let memcacheds = api_for(&client, "cache.example.com/v1alpha1", "Memcached", Some("default")).await?;
    eventually("every Memcached converges beside the spinner", WAIT, || async {
        let mut available = 0;
        for i in 0..MEMCACHEDS {
            let m = memcacheds.get(&format!("m-{i}")).await?;
            let conditions = m.data.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
            available += usize::from(conditions.iter().any(|c| c["type"] == "Available" && c["status"] == "True"));
        }
        Ok((available == MEMCACHEDS).then_some(()))
    })
    .await?;
    let mut spinner_waited_with_keys_queued = false;
    while started.elapsed() < WINDOW {
        spinner_waited_with_keys_queued |= spinner.queue_depth() > 0;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let charged = sample(&metrics, "wasmop_plugin_cpu_seconds_total", "testbed").context("spinner's call time")? - charged_before;
    let elapsed = started.elapsed().as_secs_f64();
    let rate = charged / elapsed;
    // Over any window the budget lets through at most share · T + burst (one second of the
    // share) + what the workers started before it ran out (each one call, here counted as two
    // deadlines for a call overrunning its deadline on a loaded machine).
    let bound = SHARE + (SHARE + WORKERS as f64 * 2.0 * DEADLINE.as_secs_f64()) / elapsed;
    eprintln!("spinner: {charged:.2} call-seconds in {elapsed:.1} s = {rate:.3} cores (share {SHARE}, bound {bound:.3})");
    assert!(rate <= bound, "the spinner used {rate:.3} cores of call time, over its share {SHARE} (bound {bound:.3})");
    assert!(charged > 0.0, "the spinner still ran: held to its share, not stopped");
    assert!(spinner_waited_with_keys_queued, "the spinner's keys waited in its queue");

    // Memcached: the default share (4 workers' cores between 2 plugins), never over it.
    assert_eq!(sample(&metrics, "wasmop_plugin_cpu_share", "memcached"), Some(2.0));
    assert_eq!(sample(&metrics, "wasmop_plugin_throttled_seconds_total", "memcached").unwrap_or(0.0), 0.0);
    let wp = wasm_plugin(&client, "memcached", "its share shown", |wp| cpu_status(wp, "share").is_some()).await?;
    assert_eq!(
        (cpu_status(&wp, "share"), cpu_status(&wp, "source"), cpu_status(&wp, "throttled")),
        (Some(&json!("2")), Some(&json!("Default")), Some(&json!(false))),
        "{}",
        wp.data["status"]
    );

    // No key of the spinner is dropped: every testbed that answers is reconciled.
    let cms = api_for(&client, "v1", "ConfigMap", Some("default")).await?;
    let answering: Vec<String> = (0..TESTBEDS).map(|i| format!("x-{i}")).filter(|n| !spins_on(n)).collect();
    assert_eq!(answering.len(), TESTBEDS / 2);
    for name in &answering {
        eventually(&format!("{name} reconciled by the throttled plugin"), WAIT, || async {
            Ok(cms.get_opt(&format!("{name}-out")).await?.map(|_| ()))
        })
        .await?;
    }

    // Once it stops spinning, it is within its share again and its status says so.
    for i in 0..TESTBEDS {
        apply(&client, &testbed(&format!("x-{i}"), "ok")).await?;
    }
    let wp =
        wasm_plugin(&client, "testbed", "back within its share", |wp| cpu_status(wp, "throttled") == Some(&json!(false))).await?;
    let message = cpu_status(&wp, "message").and_then(Value::as_str).unwrap_or_default();
    assert_eq!(message, "within its share of 0.25 CPU (host policy cpuShare)");
    Ok(())
}
