//! Plugin files rejected before a plugin name is known are visible in the cluster, on a real
//! control plane: each gets a `WasmPlugin` named after the file (a file report, labelled
//! `wasmop.dev/file-report`), `Ready=False` with a reason by kind of rejection, and the report
//! goes when the file goes, when the file becomes a plugin, and (at the next host start) when
//! the file went while no host ran.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};
use wasmop::controller::{ControllerConfig, Manager};
use wasmop::reload::{FILE_REPORT_LABEL, ReloadConfig, Reloader, report_name};
use wasmop::runtime::Runtime;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{api_for, apply_file, eventually, log_to_test_output};
use wasmop_e2e::plugins::{plugin, workspace};

const WAIT: Duration = Duration::from_secs(30);

/// A host following `dir`: its manager and the task running its reloader.
fn follow(client: &kube::Client, dir: &Path) -> Result<(Arc<Manager>, tokio::task::JoinHandle<notify::Result<()>>)> {
    let runtime = Runtime::builder().artifact_dir(None).build()?;
    let manager = Arc::new(Manager::new(client.clone(), runtime, ControllerConfig { resync: None, ..Default::default() }));
    let config = ReloadConfig { debounce: Duration::from_millis(100), rescan: Duration::from_secs(60) };
    let reloader = Reloader::new(Arc::clone(&manager), dir, config);
    Ok((manager, tokio::spawn(reloader.run())))
}

/// The `Ready` condition of the file report of `file` once it has this reason.
async fn report_with_reason(api: &Api<DynamicObject>, file: &Path, reason: &str) -> Result<(DynamicObject, Value)> {
    let name = report_name(file);
    eventually(&format!("file report {name} with reason {reason}"), WAIT, || async {
        let Some(wp) = api.get_opt(&name).await? else { return Ok(None) };
        let conditions = wp.data.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
        let ready = conditions.into_iter().find(|c| c["type"] == "Ready" && c["reason"] == reason);
        Ok(ready.map(|ready| (wp, ready)))
    })
    .await
}

async fn gone(api: &Api<DynamicObject>, name: &str) -> Result<()> {
    eventually(&format!("WasmPlugin {name} deleted"), WAIT, || async { Ok(api.get_opt(name).await?.is_none().then_some(())) })
        .await
}

#[tokio::test]
async fn rejected_files_get_a_wasmplugin_named_after_them_until_they_go_or_load() -> Result<()> {
    log_to_test_output();
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/memcached.yaml")).await?;
    apply_file(&client, &workspace().join("crds/wasmplugin.yaml")).await?;
    let wasmplugins = api_for(&client, "wasmop.dev/v1alpha1", "WasmPlugin", None).await?;
    let dir = tempfile::tempdir()?;
    let (junk, wrong, left) = (dir.path().join("junk.wasm"), dir.path().join("Wrong_World.wasm"), dir.path().join("left.wasm"));
    std::fs::write(&junk, b"this is not wasm")?;
    std::fs::copy(plugin("wrong-world", "wasm32-wasip2"), &wrong)?;
    std::fs::write(&left, b"\0asm\x02\0\0\0 a future version")?;
    let (manager, first_host) = follow(&client, dir.path())?;

    // Each rejected file: a report named after it, Ready=False with the kind of rejection.
    let (wp, ready) = report_with_reason(&wasmplugins, &junk, "NotWasm").await?;
    assert_eq!(wp.metadata.name.as_deref(), Some("junk.wasm"));
    assert_eq!(wp.metadata.labels.as_ref().and_then(|l| l.get(FILE_REPORT_LABEL)).map(String::as_str), Some("true"));
    assert_eq!(wp.data["spec"]["file"], json!(junk));
    assert_eq!(ready["status"], "False");
    let message = ready["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("no plugin runs from the file junk.wasm: not a WebAssembly file"), "{message}");
    assert_eq!(wp.data["status"]["lastError"].as_str().map(|e| message.ends_with(e)), Some(true));
    assert_eq!(wp.data["status"]["rejectedDigest"], json!(wasmop::runtime::digest(b"this is not wasm")));
    let (wp, _) = report_with_reason(&wasmplugins, &wrong, "WrongWorld").await?;
    assert!(wp.metadata.name.as_deref().is_some_and(|n| n.starts_with("wrong-world-") && n.ends_with(".wasm")), "{wp:?}");
    report_with_reason(&wasmplugins, &left, "InvalidWasm").await?;
    assert!(manager.plugins().is_empty());

    // The file goes: so does its report.
    std::fs::remove_file(&junk)?;
    gone(&wasmplugins, "junk.wasm").await?;

    // The file becomes a plugin: its report goes and the plugin's own WasmPlugin appears.
    let tmp = dir.path().join("swap.tmp");
    std::fs::copy(plugin("memcached", "wasm32-wasip2"), &tmp)?;
    std::fs::rename(&tmp, &wrong)?;
    gone(&wasmplugins, &report_name(&wrong)).await?;
    eventually("WasmPlugin memcached Ready", WAIT, || async {
        let wp = wasmplugins.get_opt("memcached").await?;
        Ok(wp.filter(|wp| wp.data.pointer("/status/conditions/0/status") == Some(&json!("True"))))
    })
    .await?;

    // A file removed while no host runs: the next host deletes its report and keeps the others.
    first_host.abort();
    let _ = first_host.await;
    std::fs::write(&junk, b"still not wasm")?;
    std::fs::remove_file(&left)?;
    let (_manager, _second_host) = follow(&client, dir.path())?;
    gone(&wasmplugins, "left.wasm").await?;
    report_with_reason(&wasmplugins, &junk, "NotWasm").await?;
    assert!(wasmplugins.get_opt("memcached").await?.is_some(), "a plugin's WasmPlugin is not a file report");
    Ok(())
}
