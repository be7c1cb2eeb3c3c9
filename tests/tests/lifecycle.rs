//! Plugin lifecycle on a real control plane: finalizers end to end, a plugin with a finalizer
//! removed from the plugins directory (both `onRemove` policies), a parent kind the host cannot
//! list, stale `WasmPlugin` objects at start, and pruning.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use wasmop::controller::{ControllerConfig, Manager};
use wasmop::policy::HostPolicy;
use wasmop::reload::{ReloadConfig, Reloader};
use wasmop::runtime::Runtime;
use wasmop_e2e::cluster::{GARBAGE_COLLECTION, api_for, apply, apply_file, eventually, log_to_test_output};
use wasmop_e2e::plugins::{plugin, plugin_with_features, workspace};
use wasmop_e2e::{ControlPlane, StaticToken};

const WAIT: Duration = Duration::from_secs(30);
const FINALIZER: &str = "wasmop.dev/testbed";

struct Host {
    manager: Arc<Manager>,
    reloader: Arc<Reloader>,
    _watch: tokio::task::JoinHandle<notify::Result<()>>,
}

/// A host following `dir` with `policy`, in this process.
fn host(client: &kube::Client, dir: &Path, policy: &str, config: ControllerConfig) -> Result<Host> {
    // No artifact cache: writing it into the watched directory would trigger extra passes.
    let policy = HostPolicy::from_yaml(policy)?;
    let runtime = Runtime::builder().allowances(policy.allowances()).artifact_dir(None).build()?;
    let manager = Arc::new(Manager::new(client.clone(), runtime, ControllerConfig { policy, ..config }));
    let reload = ReloadConfig { debounce: Duration::from_millis(100), rescan: Duration::from_secs(60) };
    let reloader = Reloader::new(Arc::clone(&manager), dir, reload);
    let watch = tokio::spawn(Arc::clone(&reloader).run());
    Ok(Host { manager, reloader, _watch: watch })
}

fn test_config() -> ControllerConfig {
    ControllerConfig { resync: None, ..ControllerConfig::default() }
}

async fn cluster() -> Result<(ControlPlane, kube::Client)> {
    cluster_with_tokens(&[]).await
}

async fn cluster_with_tokens(tokens: &[StaticToken]) -> Result<(ControlPlane, kube::Client)> {
    log_to_test_output();
    let cp = ControlPlane::start_with_tokens(tokens).await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/testbed.yaml")).await?;
    apply_file(&client, &workspace().join("crds/wasmplugin.yaml")).await?;
    Ok((cp, client))
}

fn testbed(name: &str, mode: &str) -> Value {
    json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"mode": mode}})
}

fn finalizer_build() -> PathBuf {
    plugin_with_features("testbed", "wasm32-wasip2", &["finalizer"])
}

async fn testbeds(client: &kube::Client) -> Result<Api<DynamicObject>> {
    api_for(client, "test.wasmop.dev/v1", "Testbed", Some("default")).await
}

async fn config_maps(client: &kube::Client) -> Result<Api<DynamicObject>> {
    api_for(client, "v1", "ConfigMap", Some("default")).await
}

async fn wasm_plugins(client: &kube::Client) -> Result<Api<DynamicObject>> {
    api_for(client, "wasmop.dev/v1alpha1", "WasmPlugin", None).await
}

fn finalizers(object: &DynamicObject) -> Vec<String> {
    object.metadata.finalizers.clone().unwrap_or_default()
}

/// The `Ready` condition of a `WasmPlugin`: (status, reason, message).
fn ready(object: &DynamicObject) -> Option<(String, String, String)> {
    let conditions = object.data.pointer("/status/conditions")?.as_array()?;
    let c = conditions.iter().find(|c| c["type"] == "Ready")?;
    let s = |f: &str| c[f].as_str().unwrap_or_default().to_owned();
    Some((s("status"), s("reason"), s("message")))
}

/// Wait until the `WasmPlugin` `name` has a `Ready` condition with `reason`; its message.
async fn wasm_plugin_reason(client: &kube::Client, name: &str, reason: &str) -> Result<String> {
    let api = wasm_plugins(client).await?;
    eventually(&format!("WasmPlugin {name} Ready reason {reason}"), WAIT, || async {
        Ok(api.get_opt(name).await?.as_ref().and_then(ready).filter(|(_, r, _)| r == reason).map(|(_, _, m)| m))
    })
    .await
}

/// Events with `reason` about the Testbed `name`.
async fn events(client: &kube::Client, name: &str, reason: &str) -> Result<Vec<Event>> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    let list = api.list(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect())
}

async fn wait_finalizer(client: &kube::Client, name: &str) -> Result<()> {
    let api = testbeds(client).await?;
    eventually(&format!("{name} holds the finalizer"), WAIT, || async {
        Ok(api.get_opt(name).await?.filter(|o| finalizers(o).iter().any(|f| f == FINALIZER)).map(|_| ()))
    })
    .await
}

async fn wait_gone(api: &Api<DynamicObject>, name: &str) -> Result<()> {
    eventually(&format!("{name} deleted"), WAIT, || async { Ok(api.get_opt(name).await?.is_none().then_some(())) }).await
}

#[tokio::test]
async fn a_finalizer_is_added_called_on_deletion_and_removed_so_deletion_completes() -> Result<()> {
    let (_cp, client) = cluster().await?;
    let dir = tempfile::tempdir()?;
    std::fs::copy(finalizer_build(), dir.path().join("testbed.wasm"))?;
    let h = host(&client, dir.path(), "", test_config())?;
    eventually("testbed started", WAIT, || async { Ok(h.manager.controller("testbed").map(|_| ())) }).await?;

    apply(&client, &testbed("tb", "ok")).await?;
    wait_finalizer(&client, "tb").await?;
    let cms = config_maps(&client).await?;
    eventually("child tb-out", WAIT, || async { Ok(cms.get_opt("tb-out").await?.map(|_| ())) }).await?;
    assert!(events(&client, "tb", "Finalized").await?.is_empty(), "no finalizing call before deletion");

    let tbs = testbeds(&client).await?;
    tbs.delete("tb", &DeleteParams::default()).await?;
    wait_gone(&tbs, "tb").await?;
    // At least once, as finalizers go: the finalizing reconcile's own status write re-queues
    // the parent, and the cache may still show it (with the finalizer) when that runs.
    assert!(!events(&client, "tb", "Finalized").await?.is_empty(), "the finalizing call happened");
    // The child goes with its owner (kube-controller-manager's garbage collector).
    eventually("tb-out garbage-collected", GARBAGE_COLLECTION, || async {
        Ok(cms.get_opt("tb-out").await?.is_none().then_some(()))
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn a_removed_plugin_keeps_finalizing_its_parents_then_stops() -> Result<()> {
    let (_cp, client) = cluster().await?;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("testbed.wasm");
    std::fs::copy(finalizer_build(), &file)?;
    let h = host(&client, dir.path(), "", test_config())?;
    eventually("testbed started", WAIT, || async { Ok(h.manager.controller("testbed").map(|_| ())) }).await?;
    apply(&client, &testbed("held", "ok")).await?;
    wait_finalizer(&client, "held").await?;

    std::fs::remove_file(&file)?;
    let message = wasm_plugin_reason(&client, "testbed", "Finalizing").await?;
    assert!(message.contains("finalizing calls only") && message.contains(FINALIZER), "{message}");
    assert!(h.manager.controller("testbed").is_some(), "the last version keeps running");

    // A new parent is not reconciled: no finalizer, no child.
    apply(&client, &testbed("late", "ok")).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (tbs, cms) = (testbeds(&client).await?, config_maps(&client).await?);
    assert!(finalizers(&tbs.get("late").await?).is_empty(), "a retired plugin adds no finalizer");
    assert!(cms.get_opt("late-out").await?.is_none(), "a retired plugin reconciles no new parent");

    // The parent holding the finalizer gets its finalizing call and goes.
    tbs.delete("held", &DeleteParams::default()).await?;
    wait_gone(&tbs, "held").await?;
    assert!(!events(&client, "held", "Finalized").await?.is_empty(), "the retired plugin made the finalizing call");
    eventually("the plugin stopped", WAIT, || async { Ok(h.manager.controller("testbed").is_none().then_some(())) }).await?;
    wait_gone(&wasm_plugins(&client).await?, "testbed").await?;
    tbs.delete("late", &DeleteParams::default()).await?;
    wait_gone(&tbs, "late").await?;
    Ok(())
}

#[tokio::test]
async fn a_removed_plugin_whose_policy_releases_finalizers_strips_them_with_a_warning() -> Result<()> {
    let (_cp, client) = cluster().await?;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("testbed.wasm");
    std::fs::copy(finalizer_build(), &file)?;
    let h = host(&client, dir.path(), "plugins: {testbed: {onRemove: releaseFinalizers}}", test_config())?;
    eventually("testbed started", WAIT, || async { Ok(h.manager.controller("testbed").map(|_| ())) }).await?;
    for name in ["a", "b"] {
        apply(&client, &testbed(name, "ok")).await?;
        wait_finalizer(&client, name).await?;
    }

    std::fs::remove_file(&file)?;
    let tbs = testbeds(&client).await?;
    for name in ["a", "b"] {
        eventually(&format!("{name} released"), WAIT, || async {
            Ok(tbs.get_opt(name).await?.filter(|o| finalizers(o).is_empty()).map(|_| ()))
        })
        .await?;
        let warnings = eventually(&format!("{name}'s FinalizerReleased event"), WAIT, || async {
            Ok(Some(events(&client, name, "FinalizerReleased").await?).filter(|w| !w.is_empty()))
        })
        .await?;
        assert_eq!(warnings.len(), 1, "{name}");
        assert_eq!(warnings[0].type_.as_deref(), Some("Warning"));
        assert!(warnings[0].note.as_deref().unwrap_or_default().contains("releaseFinalizers"));
    }
    assert!(h.manager.controller("testbed").is_none());
    wait_gone(&wasm_plugins(&client).await?, "testbed").await?;
    tbs.delete("a", &DeleteParams::default()).await?;
    wait_gone(&tbs, "a").await?;
    assert!(events(&client, "a", "Finalized").await?.is_empty(), "no finalizing call: the plugin is gone");
    Ok(())
}

#[tokio::test]
async fn a_parent_kind_the_host_cannot_list_is_not_started_with_the_reason_then_retried() -> Result<()> {
    let token = StaticToken::new("host-token", "wasmop-host", &[]);
    let (cp, admin) = cluster_with_tokens(std::slice::from_ref(&token)).await?;
    let rules = |testbed_verbs: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "wasmop-host"},
        "rules": [
            {"apiGroups": [""], "resources": ["configmaps", "events"], "verbs": ["*"]},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["*"]},
            {"apiGroups": ["wasmop.dev"], "resources": ["wasmplugins", "wasmplugins/status"], "verbs": ["*"]},
            {"apiGroups": ["test.wasmop.dev"], "resources": ["testbeds", "testbeds/status"], "verbs": testbed_verbs},
        ]})
    };
    apply(&admin, &rules(json!(["get"]))).await?;
    apply(
        &admin,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "wasmop-host"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "wasmop-host"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "wasmop-host"}]}),
    )
    .await?;
    apply(&admin, &testbed("waiting", "ok")).await?;
    let client = cp.client_with_token(&token.token).await?;
    let dir = tempfile::tempdir()?;
    std::fs::copy(plugin("testbed", "wasm32-wasip2"), dir.path().join("testbed.wasm"))?;
    let runtime = Runtime::builder().artifact_dir(None).build()?;
    let config = ControllerConfig { sync_timeout: Duration::from_secs(2), ..test_config() };
    let manager = Arc::new(Manager::new(client.clone(), runtime, config));
    let reload = ReloadConfig { debounce: Duration::from_millis(100), rescan: Duration::from_secs(60) };
    let reloader = Reloader::new(Arc::clone(&manager), dir.path(), reload);

    // The first pass ends (it used to wait forever for a list the host may not make).
    let started = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(20), reloader.sync()).await.expect("the first pass completes");
    assert!(started.elapsed() >= Duration::from_secs(2), "{:?}", started.elapsed());
    assert!(manager.controller("testbed").is_none());
    let message = wasm_plugin_reason(&admin, "testbed", "NotStarted").await?;
    assert!(message.contains("did not complete within 2s") && message.contains("forbidden"), "{message}");
    let status = reloader.statuses().into_iter().next().expect("a file status");
    assert_eq!(status.not_started.as_deref(), Some("testbed"));

    // Allowed to list: a retry (with backoff, no file change) starts it.
    let _watch = tokio::spawn(Arc::clone(&reloader).run());
    apply(&admin, &rules(json!(["*"]))).await?;
    eventually("testbed started after the grant", WAIT, || async { Ok(manager.controller("testbed").map(|_| ())) }).await?;
    wasm_plugin_reason(&admin, "testbed", "Loaded").await?;
    let cms = config_maps(&admin).await?;
    eventually("the waiting parent reconciled", WAIT, || async { Ok(cms.get_opt("waiting-out").await?.map(|_| ())) }).await?;
    Ok(())
}

#[tokio::test]
async fn wasm_plugins_of_files_gone_while_the_host_was_down_are_deleted_or_marked_at_start() -> Result<()> {
    let (_cp, client) = cluster().await?;
    let dir = tempfile::tempdir()?;
    std::fs::copy(plugin("testbed", "wasm32-wasip2"), dir.path().join("testbed.wasm"))?;
    std::fs::write(dir.path().join("broken.wasm"), "not wasm any more")?;
    // What a previous host left: objects it wrote for files now gone or broken, and one of
    // another host's directory.
    let api = wasm_plugins(&client).await?;
    let left = [
        ("gone", dir.path().join("gone.wasm"), "Loaded"),
        ("broken", dir.path().join("broken.wasm"), "Loaded"),
        ("theirs", "/elsewhere/theirs.wasm".into(), "Loaded"),
        ("finalizing", dir.path().join("finalizing.wasm"), "Finalizing"),
    ];
    for (name, file, reason) in &left {
        let object = json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin", "metadata": {"name": name}, "spec": {"file": file}});
        api.patch(name, &PatchParams::apply("wasmop").force(), &Patch::Apply(&object)).await?;
        let status = json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin", "metadata": {"name": name},
            "status": {"version": "0.1.0", "conditions": [{"type": "Ready", "status": "True", "reason": reason,
                "message": "version 0.1.0 serving", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
        api.patch_status(name, &PatchParams::apply("wasmop").force(), &Patch::Apply(&status)).await?;
    }

    let h = host(&client, dir.path(), "", test_config())?;
    eventually("testbed started", WAIT, || async { Ok(h.manager.controller("testbed").map(|_| ())) }).await?;
    wait_gone(&api, "gone").await?;
    let message = wasm_plugin_reason(&client, "broken", "NotStarted").await?;
    assert!(message.contains("not a WebAssembly file"), "{message}");
    assert_eq!(wasm_plugin_reason(&client, "testbed", "Loaded").await?, "version 0.1.0 serving");
    // A plugin that was finalizing when the host stopped: its parents may hold the finalizer.
    let message = wasm_plugin_reason(&client, "finalizing", "FileMissing").await?;
    assert!(message.contains("wasmop.dev/finalizing"), "{message}");
    let theirs = api.get("theirs").await?;
    assert_eq!(ready(&theirs).map(|r| r.1), Some("Loaded".into()), "another directory's object is left alone");
    assert!(h.reloader.statuses().iter().any(|s| s.file.ends_with("broken.wasm") && s.last_error.is_some()));
    Ok(())
}

#[tokio::test]
async fn prune_deletes_children_no_longer_returned_and_only_those_the_parent_controls() -> Result<()> {
    let (_cp, client) = cluster().await?;
    let dir = tempfile::tempdir()?;
    std::fs::copy(plugin("testbed", "wasm32-wasip2"), dir.path().join("testbed.wasm"))?;
    let h = host(&client, dir.path(), "", test_config())?;
    eventually("testbed started", WAIT, || async { Ok(h.manager.controller("testbed").map(|_| ())) }).await?;
    let cms = config_maps(&client).await?;
    for name in ["tb", "other"] {
        apply(&client, &testbed(name, "ok")).await?;
        let child = format!("{name}-out");
        eventually(&child, WAIT, || async { Ok(cms.get_opt(&child).await?.map(|_| ())) }).await?;
    }
    // A ConfigMap of the user's, labelled as the plugin's related objects but controlled by nobody.
    apply(
        &client,
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "tb-users", "namespace": "default", "labels": {"testbed": "tb"}}, "data": {"mine": "yes"}}),
    )
    .await?;

    apply(&client, &testbed("tb", "rename-out")).await?;
    eventually("tb-renamed", WAIT, || async { Ok(cms.get_opt("tb-renamed").await?.map(|_| ())) }).await?;
    wait_gone(&cms, "tb-out").await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(cms.get_opt("other-out").await?.is_some(), "another parent's child is not pruned");
    assert!(cms.get_opt("tb-users").await?.is_some(), "an object the parent does not control is not pruned");
    Ok(())
}

#[tokio::test]
async fn a_plugin_whose_crd_is_missing_starts_by_itself_once_the_crd_is_installed() -> Result<()> {
    log_to_test_output();
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/wasmplugin.yaml")).await?;
    let dir = tempfile::tempdir()?;
    std::fs::copy(plugin("testbed", "wasm32-wasip2"), dir.path().join("testbed.wasm"))?;
    // Rescans every 60 s: only the start retries (1 s, doubling) can start it within the wait.
    let h = host(&client, dir.path(), "", test_config())?;
    let message = wasm_plugin_reason(&client, "testbed", "NotStarted").await?;
    assert!(message.contains("does not serve test.wasmop.dev/v1"), "{message}");

    apply_file(&client, &workspace().join("crds/testbed.yaml")).await?;
    eventually("testbed started once its CRD is served", WAIT, || async { Ok(h.manager.controller("testbed").map(|_| ())) })
        .await?;
    wasm_plugin_reason(&client, "testbed", "Loaded").await?;
    Ok(())
}
