//! Compiling off the reload path, on a real control plane: while one plugin's new version
//! compiles (held deterministically by a gate in the compiler seam), another plugin's new
//! version is swapped in and reconciles, the first plugin's old version keeps answering, its
//! `WasmPlugin` shows `Compiling`, and a newer write abandons the compile (no stale swap).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};
use tokio::sync::watch;
use wasmop::controller::{ControllerConfig, Manager};
use wasmop::reload::{ReloadConfig, Reloader};
use wasmop::runtime::{CompileGate, Compiler, Runtime, digest};
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{api_for, apply, apply_file, eventually, log_to_test_output};
use wasmop_e2e::plugins::{plugin, plugin_with_features, workspace};

const WAIT: Duration = Duration::from_secs(60);
const V2_LABEL: &str = "wasmop.dev/test-version";

/// A compiler gate holding back one content until opened, and telling whether the held
/// compile was dropped (abandoned) before the gate opened.
struct Gate {
    open: watch::Sender<bool>,
    /// Becomes true when the held content's compile reaches the gate.
    reached: watch::Receiver<bool>,
    /// Becomes true when the held compile's future is dropped while still waiting.
    dropped: watch::Receiver<bool>,
}

/// Sets its flag when dropped, unless disarmed.
struct DropFlag(Option<Arc<watch::Sender<bool>>>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        if let Some(flag) = self.0.take() {
            let _ = flag.send(true);
        }
    }
}

fn gate(held: String) -> (CompileGate, Gate) {
    let (open, opened) = watch::channel(false);
    let (dropped_tx, dropped) = watch::channel(false);
    let (reached_tx, reached) = watch::channel(false);
    let (dropped_tx, reached_tx) = (Arc::new(dropped_tx), Arc::new(reached_tx));
    let gate = CompileGate(Arc::new(move |d: &str| {
        let (mut opened, dropped_tx, held) = (opened.clone(), Arc::clone(&dropped_tx), d == held);
        let reached_tx = Arc::clone(&reached_tx);
        Box::pin(async move {
            if held {
                let _ = reached_tx.send(true);
                let mut flag = DropFlag(Some(dropped_tx));
                let _ = opened.wait_for(|o| *o).await;
                flag.0 = None;
            }
        })
    }));
    (gate, Gate { open, reached, dropped })
}

struct Setup {
    _cp: ControlPlane,
    client: kube::Client,
    dir: tempfile::TempDir,
    manager: Arc<Manager>,
    _watch: tokio::task::JoinHandle<notify::Result<()>>,
}

async fn setup(held: &Path) -> Result<(Setup, Gate)> {
    log_to_test_output();
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    for crd in ["memcached", "testbed", "wasmplugin"] {
        apply_file(&client, &workspace().join(format!("crds/{crd}.yaml"))).await?;
    }
    let dir = tempfile::tempdir()?;
    let (compile_gate, gate) = gate(digest(&std::fs::read(held)?));
    let runtime = Runtime::builder()
        .artifact_dir(Some(dir.path().join(".artifacts")))
        .compiler(Compiler::Gated(compile_gate, Box::new(Compiler::InProcess)))
        .build()?;
    let manager = Arc::new(Manager::new(client.clone(), runtime, ControllerConfig { resync: None, ..Default::default() }));
    let config = ReloadConfig { debounce: Duration::from_millis(100), rescan: Duration::from_secs(60) };
    let reloader = Reloader::new(Arc::clone(&manager), dir.path(), config);
    let watch = tokio::spawn(Arc::clone(&reloader).run());
    Ok((Setup { _cp: cp, client, dir, manager, _watch: watch }, gate))
}

/// Copy by writing a temporary file and renaming it over the target (atomic).
fn write_then_rename(src: &Path, dst: &Path) -> Result<()> {
    let tmp = dst.with_extension("tmp");
    std::fs::copy(src, &tmp)?;
    std::fs::rename(&tmp, dst)?;
    Ok(())
}

fn memcached(name: &str) -> Value {
    json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"size": 1}})
}

fn version(s: &Setup, plugin: &str) -> Option<String> {
    s.manager.controller(plugin).map(|c| c.plugin().manifest().version.clone())
}

/// The Deployment `name` once it exists: whether it carries the v2 label.
async fn deployment_is_v2(deployments: &Api<DynamicObject>, name: &str) -> Result<bool> {
    let d =
        eventually(&format!("Deployment {name}"), WAIT, || async { deployments.get_opt(name).await.map_err(Into::into) }).await?;
    Ok(d.metadata.labels.as_ref().and_then(|l| l.get(V2_LABEL)).is_some())
}

/// The `Compiling` condition of a `WasmPlugin`, once it has one with `status`.
async fn compiling(wasmplugins: &Api<DynamicObject>, name: &str, status: &str) -> Result<DynamicObject> {
    eventually(&format!("WasmPlugin {name} Compiling={status}"), WAIT, || async {
        let wp = wasmplugins.get_opt(name).await?;
        Ok(wp.filter(|wp| {
            let conditions = wp.data.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
            conditions.iter().any(|c| c["type"] == "Compiling" && c["status"] == status)
        }))
    })
    .await
}

#[tokio::test]
async fn a_slow_compile_holds_up_neither_other_plugins_nor_its_own_old_version() -> Result<()> {
    let memcached_v2 = plugin_with_features("memcached", "wasm32-wasip2", &["test-v2"]);
    let (s, gate) = setup(&memcached_v2).await?;
    let (memcached_file, testbed_file) = (s.dir.path().join("memcached.wasm"), s.dir.path().join("testbed.wasm"));
    write_then_rename(&plugin("memcached", "wasm32-wasip2"), &memcached_file)?;
    write_then_rename(&plugin("testbed", "wasm32-wasip2"), &testbed_file)?;
    eventually("both plugins started", WAIT, || async {
        Ok((s.manager.controller("memcached").is_some() && s.manager.controller("testbed").is_some()).then_some(()))
    })
    .await?;
    let deployments = api_for(&s.client, "apps/v1", "Deployment", Some("default")).await?;
    apply(&s.client, &memcached("before")).await?;
    assert!(!deployment_is_v2(&deployments, "before").await?);

    // memcached 0.2.0 is written, its compile waits at the gate; then testbed 0.2.0 is written.
    write_then_rename(&memcached_v2, &memcached_file)?;
    let held = digest(&std::fs::read(&memcached_v2)?);
    eventually("memcached 0.2.0 at the gate", WAIT, || async { Ok(gate.reached.borrow().then_some(())) }).await?;
    write_then_rename(&plugin_with_features("testbed", "wasm32-wasip2", &["test-v2"]), &testbed_file)?;

    // testbed 0.2.0 is swapped in and reconciles (its `hot-loop` tick is fixed) meanwhile.
    eventually("testbed 0.2.0 swapped in", WAIT, || async { Ok(version(&s, "testbed").filter(|v| v == "0.2.0")) }).await?;
    apply(
        &s.client,
        &json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
            "metadata": {"name": "during", "namespace": "default"}, "spec": {"mode": "hot-loop"}}),
    )
    .await?;
    let cms = api_for(&s.client, "v1", "ConfigMap", Some("default")).await?;
    eventually("testbed 0.2.0 reconciled `during`", WAIT, || async {
        Ok(cms.get_opt("during-out").await?.filter(|cm| cm.data.pointer("/data/tick") == Some(&json!("fixed"))))
    })
    .await?;

    // memcached's WasmPlugin shows the compile, and the version serving.
    let wasmplugins = api_for(&s.client, "wasmop.dev/v1alpha1", "WasmPlugin", None).await?;
    let wp = compiling(&wasmplugins, "memcached", "True").await?;
    assert_eq!(wp.data.pointer("/status/compiling/digest"), Some(&json!(held)));
    assert_eq!(wp.data.pointer("/status/version"), Some(&json!("0.1.0")), "the serving version is still shown");

    // memcached's old version still answers while its new one is held.
    apply(&s.client, &memcached("during")).await?;
    assert!(!deployment_is_v2(&deployments, "during").await?, "reconciled by 0.1.0");
    assert_eq!(version(&s, "memcached").as_deref(), Some("0.1.0"));
    assert!(!*gate.dropped.borrow(), "the compile is still waiting, not abandoned");

    // Released: 0.2.0 is swapped in and takes over its parents; the WasmPlugin says it is compiled.
    gate.open.send(true)?;
    eventually("memcached 0.2.0 swapped in", WAIT, || async { Ok(version(&s, "memcached").filter(|v| v == "0.2.0")) }).await?;
    eventually("`during` re-reconciled by 0.2.0", WAIT, || async {
        Ok(deployments.get_opt("during").await?.filter(|d| d.metadata.labels.as_ref().is_some_and(|l| l.contains_key(V2_LABEL))))
    })
    .await?;
    let wp = compiling(&wasmplugins, "memcached", "False").await?;
    assert!(wp.data.pointer("/status/compiling").is_none(), "{:?}", wp.data.pointer("/status"));
    assert_eq!(
        wp.data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["type"] == "Compiling"))
            .map(|c| &c["reason"]),
        Some(&json!("Compiled"))
    );
    Ok(())
}

#[tokio::test]
async fn a_newer_write_abandons_a_compile_in_progress_and_nothing_stale_is_swapped_in() -> Result<()> {
    let v1 = plugin("memcached", "wasm32-wasip2");
    let v2 = plugin_with_features("memcached", "wasm32-wasip2", &["test-v2"]);
    let (s, gate) = setup(&v2).await?;
    let file = s.dir.path().join("memcached.wasm");
    write_then_rename(&v1, &file)?;
    eventually("memcached started", WAIT, || async { Ok(s.manager.controller("memcached").map(|_| ())) }).await?;
    write_then_rename(&v2, &file)?;
    let wasmplugins = api_for(&s.client, "wasmop.dev/v1alpha1", "WasmPlugin", None).await?;
    compiling(&wasmplugins, "memcached", "True").await?;

    // Back to 0.1.0 before 0.2.0 finished compiling: that compile is dropped at the gate.
    write_then_rename(&v1, &file)?;
    let mut dropped = gate.dropped.clone();
    tokio::time::timeout(WAIT, dropped.wait_for(|d| *d)).await??;
    let wp = compiling(&wasmplugins, "memcached", "False").await?;
    let reason = wp
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Compiling").map(|c| c["reason"].clone()));
    assert_eq!(reason, Some(json!("Abandoned")));
    // Opening the gate now releases nothing: the abandoned compile is gone for good.
    gate.open.send(true)?;
    let deployments = api_for(&s.client, "apps/v1", "Deployment", Some("default")).await?;
    apply(&s.client, &memcached("after")).await?;
    assert!(!deployment_is_v2(&deployments, "after").await?);
    assert_eq!(version(&s, "memcached").as_deref(), Some("0.1.0"));
    Ok(())
}
