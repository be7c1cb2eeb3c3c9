//! Hot reload on a real control plane: plugin files added, replaced (rename, slow in-place
//! write, ConfigMap-style `..data` swap), broken and removed while the host runs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::{Value, json};
use wasmop::controller::{ControllerConfig, Manager};
use wasmop::reload::{ReloadConfig, Reloader};
use wasmop::runtime::Runtime;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{api_for, apply, apply_file, eventually, log_to_test_output};
use wasmop_e2e::plugins::{plugin, plugin_with_features, workspace};

const WAIT: Duration = Duration::from_secs(30);
const V2_LABEL: &str = "wasmop.dev/test-version";

struct Setup {
    _cp: ControlPlane,
    client: kube::Client,
    dir: tempfile::TempDir,
    manager: Arc<Manager>,
    reloader: Arc<Reloader>,
    _watch: tokio::task::JoinHandle<notify::Result<()>>,
}

async fn setup() -> Result<Setup> {
    log_to_test_output();
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/memcached.yaml")).await?;
    apply_file(&client, &workspace().join("crds/testbed.yaml")).await?;
    apply_file(&client, &workspace().join("crds/wasmplugin.yaml")).await?;
    let dir = tempfile::tempdir()?;
    let runtime = Runtime::builder().artifact_dir(Some(dir.path().join(".artifacts"))).build()?;
    let manager = Arc::new(Manager::new(client.clone(), runtime, ControllerConfig { resync: None, ..Default::default() }));
    let config = ReloadConfig { debounce: Duration::from_millis(100), rescan: Duration::from_secs(60) };
    let reloader = Reloader::new(Arc::clone(&manager), dir.path(), config);
    let watch = tokio::spawn(Arc::clone(&reloader).run());
    Ok(Setup { _cp: cp, client, dir, manager, reloader, _watch: watch })
}

fn memcached(name: &str) -> Value {
    json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"size": 1}})
}

/// Copy by writing a temporary file and renaming it over the target (atomic).
fn write_then_rename(src: &Path, dst: &Path) -> Result<()> {
    let tmp = dst.with_extension("tmp");
    std::fs::copy(src, &tmp)?;
    std::fs::rename(&tmp, dst)?;
    Ok(())
}

/// Rewrite a file in place, slowly: truncate, then 32 KiB every 20 ms.
async fn slow_write(src: &Path, dst: &Path) -> Result<()> {
    let bytes = std::fs::read(src)?;
    let mut f = std::fs::OpenOptions::new().write(true).truncate(true).open(dst)?;
    for chunk in bytes.chunks(32 << 10) {
        f.write_all(chunk)?;
        f.flush()?;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

async fn deployments(client: &kube::Client) -> Result<Api<DynamicObject>> {
    api_for(client, "apps/v1", "Deployment", Some("default")).await
}

/// Wait until the `n` deployments `rl-*` all have (or all lack) the v2 label.
async fn all_deployments_at(client: &kube::Client, n: usize, v2: bool) -> Result<()> {
    let api = deployments(client).await?;
    eventually(&format!("{n} deployments with v2 label = {v2}"), WAIT, || async {
        let list = api.list(&ListParams::default()).await?;
        let matching = list
            .items
            .iter()
            .filter(|d| d.metadata.name.as_deref().is_some_and(|n| n.starts_with("rl-")))
            .filter(|d| d.metadata.labels.as_ref().and_then(|l| l.get(V2_LABEL)).is_some() == v2)
            .count();
        Ok((matching == n).then_some(()))
    })
    .await
}

/// No CR has a failed `Reconciled` condition.
async fn no_failed_reconciles(client: &kube::Client) -> Result<()> {
    let crs = api_for(client, "cache.example.com/v1alpha1", "Memcached", Some("default")).await?;
    for cr in crs.list(&ListParams::default()).await?.items {
        let conditions = cr.data.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
        for c in conditions {
            assert!(!(c["type"] == "Reconciled" && c["status"] == "False"), "{:?}: {c}", cr.metadata.name);
        }
    }
    Ok(())
}

#[tokio::test]
async fn memcached_versions_swap_while_serving_and_bad_files_change_nothing() -> Result<()> {
    let s = setup().await?;
    let v1 = plugin("memcached", "wasm32-wasip2");
    let v2 = plugin_with_features("memcached", "wasm32-wasip2", &["test-v2"]);
    let target = s.dir.path().join("memcached.wasm");
    write_then_rename(&v1, &target)?;
    eventually("memcached started", WAIT, || async { Ok(s.manager.controller("memcached").map(|_| ())) }).await?;
    let n = 20;
    for i in 0..n {
        apply(&s.client, &memcached(&format!("rl-{i}"))).await?;
    }
    all_deployments_at(&s.client, n, false).await?;

    // v2 by write-then-rename: every Deployment is re-reconciled by the new version.
    write_then_rename(&v2, &target)?;
    all_deployments_at(&s.client, n, true).await?;
    assert_eq!(s.manager.controller("memcached").unwrap().plugin().manifest().version, "0.2.0");

    // v1 again by a slow in-place write (the watcher sees partial files first).
    slow_write(&v1, &target).await?;
    all_deployments_at(&s.client, n, false).await?;
    no_failed_reconciles(&s.client).await?;

    // Broken replacements are rejected; v1 keeps serving and new CRs still converge.
    let good = std::fs::read(&v1)?;
    let wrong_world = plugin("wrong-world", "wasm32-wasip2");
    for (what, bytes) in [
        ("garbage", b"this is not wasm".to_vec()),
        ("truncated", good[..good.len() / 3].to_vec()),
        ("wrong world", std::fs::read(&wrong_world)?),
    ] {
        let tmp = s.dir.path().join("memcached.tmp");
        std::fs::write(&tmp, &bytes)?;
        std::fs::rename(&tmp, &target)?;
        let status = eventually(&format!("{what} rejected"), WAIT, || async {
            let statuses = s.reloader.statuses();
            let st = statuses.iter().find(|st| st.file == target).cloned();
            Ok(st.filter(|st| st.last_error.is_some() && st.digest == wasmop::runtime::digest(&bytes)))
        })
        .await?;
        assert_eq!(status.plugin.as_deref(), Some("memcached"), "{what}");
        assert_eq!(status.version.as_deref(), Some("0.1.0"), "{what}: the previous version keeps serving");
        let name = format!("after-{}", what.replace(' ', "-"));
        apply(&s.client, &memcached(&name)).await?;
        let api = deployments(&s.client).await?;
        eventually(&format!("{name} converges while a {what} file sits in the directory"), WAIT, || async {
            Ok(api.get_opt(&name).await?.map(|_| ()))
        })
        .await?;
    }
    // The rejection is visible in the cluster: `kubectl get wasmplugin memcached`.
    let wasmplugins = api_for(&s.client, "wasmop.dev/v1alpha1", "WasmPlugin", None).await?;
    let wp = eventually("WasmPlugin memcached reports the rejection", WAIT, || async {
        let wp = wasmplugins.get_opt("memcached").await?;
        Ok(wp.filter(|wp| wp.data.pointer("/status/lastError").is_some_and(Value::is_string)))
    })
    .await?;
    assert_eq!(wp.data.pointer("/status/version"), Some(&json!("0.1.0")));
    assert_eq!(wp.data.pointer("/status/parent"), Some(&json!("cache.example.com/v1alpha1/Memcached")));
    assert_eq!(wp.data.pointer("/status/conditions/0/status"), Some(&json!("False")));

    // A garbage file of its own starts nothing and stops nothing.
    std::fs::write(s.dir.path().join("junk.wasm"), b"\0asm garbage")?;
    eventually("junk.wasm rejected", WAIT, || async {
        Ok(s.reloader.statuses().iter().find(|st| st.file.ends_with("junk.wasm") && st.last_error.is_some()).map(|_| ()))
    })
    .await?;
    assert_eq!(s.manager.plugins(), ["memcached"]);
    Ok(())
}

#[tokio::test]
async fn plugins_added_at_runtime_start_and_removed_ones_stop() -> Result<()> {
    let s = setup().await?;
    let testbed_file = s.dir.path().join("testbed.wasm");
    write_then_rename(&plugin("testbed", "wasm32-wasip2"), &testbed_file)?;
    let cms = api_for(&s.client, "v1", "ConfigMap", Some("default")).await?;
    apply(
        &s.client,
        &json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
        "metadata": {"name": "one", "namespace": "default"}, "spec": {"mode": "ok"}}),
    )
    .await?;
    eventually("testbed reconciles its kind", WAIT, || async { Ok(cms.get_opt("one-out").await?.map(|_| ())) }).await?;

    let wasmplugins = api_for(&s.client, "wasmop.dev/v1alpha1", "WasmPlugin", None).await?;
    let wp = eventually("WasmPlugin testbed with a status", WAIT, || async {
        Ok(wasmplugins.get_opt("testbed").await?.filter(|wp| wp.data.pointer("/status/conditions/0").is_some()))
    })
    .await?;
    assert_eq!(wp.data.pointer("/status/conditions/0/status"), Some(&json!("True")));
    assert_eq!(wp.data.pointer("/status/conditions/0/reason"), Some(&json!("Loaded")));
    // The policy it runs under is visible too (the defaults here).
    assert_eq!(
        wp.data.pointer("/status/limits"),
        Some(&json!({"deadline": "1000ms", "memory": "64Mi", "maxResponseBytes": "16Mi", "maxActions": 10000}))
    );
    assert_eq!(
        wp.data.pointer("/status/grants"),
        Some(&json!({"secrets": "none", "namespaces": [], "writeNamespaces": [], "clusterScopedChildren": [],
            "escalationKinds": [], "allowHostAccess": false, "adoptUnowned": false, "webhookResources": []}))
    );

    std::fs::remove_file(&testbed_file)?;
    eventually("testbed stopped", WAIT, || async { Ok(s.manager.controller("testbed").is_none().then_some(())) }).await?;
    eventually("WasmPlugin testbed deleted", WAIT, || async {
        Ok(wasmplugins.get_opt("testbed").await?.is_none().then_some(()))
    })
    .await?;
    apply(
        &s.client,
        &json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
        "metadata": {"name": "two", "namespace": "default"}, "spec": {"mode": "ok"}}),
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(cms.get_opt("two-out").await?.is_none(), "a removed plugin reconciles nothing");
    Ok(())
}

/// Lay out `dir` as kubelet lays out a ConfigMap volume: `name -> ..data/name`,
/// `..data -> ..<version>/`; updating swaps `..data` with an atomic rename.
fn configmap_volume_update(dir: &Path, version: &str, files: &[(&str, &PathBuf)]) -> Result<()> {
    let ts = dir.join(format!("..{version}"));
    std::fs::create_dir_all(&ts)?;
    for (name, src) in files {
        std::fs::copy(src, ts.join(name))?;
    }
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(format!("..{version}"), &tmp)?;
    std::fs::rename(&tmp, dir.join("..data"))?;
    for (name, _) in files {
        let visible = dir.join(name);
        if std::fs::symlink_metadata(&visible).is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), &visible)?;
        }
    }
    Ok(())
}

#[tokio::test]
async fn configmap_volume_symlink_swap_reloads() -> Result<()> {
    let s = setup().await?;
    let v1 = plugin("memcached", "wasm32-wasip2");
    let v2 = plugin_with_features("memcached", "wasm32-wasip2", &["test-v2"]);
    configmap_volume_update(s.dir.path(), "2026_11_29_1", &[("memcached.wasm", &v1)])?;
    eventually("memcached started from the volume", WAIT, || async { Ok(s.manager.controller("memcached").map(|_| ())) }).await?;
    apply(&s.client, &memcached("rl-cm")).await?;
    all_deployments_at(&s.client, 1, false).await?;
    configmap_volume_update(s.dir.path(), "2026_11_29_2", &[("memcached.wasm", &v2)])?;
    all_deployments_at(&s.client, 1, true).await?;
    Ok(())
}

#[tokio::test]
async fn a_file_that_switches_plugins_stops_one_and_starts_the_other() -> Result<()> {
    let s = setup().await?;
    let file = s.dir.path().join("plugin.wasm");
    write_then_rename(&plugin("memcached", "wasm32-wasip2"), &file)?;
    eventually("memcached started", WAIT, || async { Ok(s.manager.controller("memcached").map(|_| ())) }).await?;
    write_then_rename(&plugin("testbed", "wasm32-wasip2"), &file)?;
    eventually("testbed replaced memcached", WAIT, || async { Ok((s.manager.plugins() == ["testbed"]).then_some(())) }).await?;
    // The Memcached watch was released with its last plugin; Testbed objects reconcile.
    let cms = api_for(&s.client, "v1", "ConfigMap", Some("default")).await?;
    apply(
        &s.client,
        &json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
        "metadata": {"name": "switched", "namespace": "default"}, "spec": {"mode": "ok"}}),
    )
    .await?;
    eventually("testbed reconciles", WAIT, || async { Ok(cms.get_opt("switched-out").await?.map(|_| ())) }).await?;
    apply(&s.client, &memcached("orphan")).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(deployments(&s.client).await?.get_opt("orphan").await?.is_none(), "memcached no longer runs");
    Ok(())
}

#[tokio::test]
async fn a_plugin_that_cannot_start_says_why_on_its_wasmplugin_until_its_file_goes() -> Result<()> {
    let s = setup().await?;
    // This testbed build declares Secrets; the host's policy (the default) grants none.
    let file = s.dir.path().join("secretive.wasm");
    write_then_rename(&plugin_with_features("testbed", "wasm32-wasip2", &["declares-secrets"]), &file)?;
    let wasmplugins = api_for(&s.client, "wasmop.dev/v1alpha1", "WasmPlugin", None).await?;
    let wp = eventually("WasmPlugin testbed: Ready=False NotStarted", WAIT, || async {
        let wp = wasmplugins.get_opt("testbed").await?;
        Ok(wp.filter(|wp| wp.data.pointer("/status/conditions/0/reason") == Some(&json!("NotStarted"))))
    })
    .await?;
    let message = wp.data.pointer("/status/conditions/0/message").and_then(Value::as_str).unwrap_or_default();
    assert!(message.contains("it reads v1/Secret (grant secrets: read)"), "{message}");
    assert!(s.manager.controller("testbed").is_none(), "not running");
    std::fs::remove_file(&file)?;
    eventually("WasmPlugin testbed deleted with its file", WAIT, || async {
        Ok(wasmplugins.get_opt("testbed").await?.is_none().then_some(()))
    })
    .await?;
    Ok(())
}
