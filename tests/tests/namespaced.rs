//! A namespaced install on a real control plane: a host run as a ServiceAccount bound only to
//! what `wasmop rbac --namespace team-a --namespace team-b` prints reconciles in those two
//! namespaces, leaves a third alone, reports its plugins on `WasmPlugin`s (and deletes only
//! stale ones its own scope wrote), holds its leader Lease, says why it does not start a plugin
//! declaring a cluster-scoped kind, and never gets a 403 (its whole log is searched). The
//! negative control: the same identity running a host for the whole cluster cannot even list
//! the parents.

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use wasmop::cluster::InstallScope;
use wasmop::controller::{ControllerConfig, Manager, PluginError, StartError};
use wasmop::leader::{LeaderElector, LeaseConfig};
use wasmop::reload::{ReloadConfig, Reloader, SCOPE_ANNOTATION};
use wasmop::runtime::Runtime;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{Host, api_for, apply, apply_file, eventually};
use wasmop_e2e::plugins::{plugin, plugin_with_features, workspace};

const WAIT: Duration = Duration::from_secs(30);
const HOST_NAMESPACE: &str = "wasmop-system";
const WATCHED: [&str; 2] = ["team-a", "team-b"];
const OTHER: &str = "team-c";

/// Everything the host logs in this test binary, at `info` and above.
fn captured_log() -> Arc<Mutex<Vec<u8>>> {
    static LOG: std::sync::OnceLock<Arc<Mutex<Vec<u8>>>> = std::sync::OnceLock::new();
    Arc::clone(LOG.get_or_init(|| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&log);
        let _ = tracing_subscriber::fmt()
            .with_env_filter("info")
            .with_ansi(false)
            .with_writer(move || Capture(Arc::clone(&sink)))
            .try_init();
        log
    }))
}

/// Appends to the captured log, and echoes it to the test's output.
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log lock").extend_from_slice(buf);
        print!("{}", String::from_utf8_lossy(buf));
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn memcached(namespace: &str) -> Value {
    json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "cache", "namespace": namespace}, "spec": {"size": 2}})
}

fn reconciled(cr: &Value) -> bool {
    let conditions = cr.pointer("/status/conditions").and_then(Value::as_array);
    conditions.is_some_and(|c| c.iter().any(|c| c["type"] == "Reconciled" && c["status"] == "True"))
}

/// A client authenticated as ServiceAccount `wasmop-system/wasmop`.
async fn service_account_client(cp: &ControlPlane, admin: &kube::Client) -> Result<kube::Client> {
    apply(
        admin,
        &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "wasmop", "namespace": HOST_NAMESPACE}}),
    )
    .await?;
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), HOST_NAMESPACE);
    let request = TokenRequest {
        spec: TokenRequestSpec { audiences: vec![], expiration_seconds: Some(3600), ..Default::default() },
        ..Default::default()
    };
    let token = sas.create_token_request("wasmop", &PostParams::default(), &request).await?;
    cp.client_with_token(&token.status.context("token issued")?.token).await
}

#[tokio::test]
async fn a_host_bound_to_roles_in_two_namespaces_reconciles_there_ignores_a_third_and_is_never_forbidden() -> Result<()> {
    let log = captured_log();
    let cp = ControlPlane::start().await?;
    let admin = cp.client().await?;
    for crd in ["crds/memcached.yaml", "crds/testbed.yaml", "crds/wasmplugin.yaml"] {
        apply_file(&admin, &workspace().join(crd)).await?;
    }
    for ns in WATCHED.iter().chain(&[OTHER, HOST_NAMESPACE]) {
        apply(&admin, &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})).await?;
    }

    // The plugins: memcached, and a testbed build declaring ClusterRoles (cluster-scoped).
    let dir = tempfile::tempdir()?;
    let memcached_file = plugin("memcached", "wasm32-wasip2");
    let testbed_file = plugin_with_features("testbed", "wasm32-wasip2", &["declares-cluster-role"]);
    std::fs::copy(&memcached_file, dir.path().join("memcached.wasm"))?;
    std::fs::copy(&testbed_file, dir.path().join("testbed.wasm"))?;

    // Exactly what `wasmop rbac --namespace team-a --namespace team-b` prints for them.
    let runtime = Runtime::builder().artifact_dir(None).build()?;
    let mut manifests = Vec::new();
    for file in [&memcached_file, &testbed_file] {
        manifests.push(runtime.load_file(file).await?.manifest().as_ref().clone());
    }
    let mut kinds = wasmop::contract::KnownKinds::builtin();
    kinds.add_crds(&workspace().join("crds"))?;
    let namespaces: BTreeSet<String> = WATCHED.iter().map(|s| (*s).to_owned()).collect();
    let policy = wasmop::policy::HostPolicy::default();
    let yaml = wasmop::rbac::render_namespaced(&manifests, &policy, &kinds, "wasmop", &namespaces, HOST_NAMESPACE, "wasmop")?;
    ensure!(yaml.contains("# LEFT OUT: plugin testbed declares the cluster-scoped"), "{yaml}");
    let rbac = tempfile::tempdir()?;
    std::fs::write(rbac.path().join("rbac.yaml"), &yaml)?;
    apply_file(&admin, &rbac.path().join("rbac.yaml")).await?;
    let client = service_account_client(&cp, &admin).await?;
    let secrets = api_for(&client, "v1", "Secret", Some("team-a")).await?;
    ensure!(secrets.list(&Default::default()).await.is_err(), "the host identity must not read Secrets");

    // The host, as in `wasmop run --namespace team-a --namespace team-b --leader-elect`.
    let install = InstallScope::from_names(WATCHED)?;
    let config = ControllerConfig { install: install.clone(), ..Host::test_config() };
    let manager = Arc::new(Manager::new(client.clone(), runtime.clone(), config));
    let elector = LeaderElector::new(client.clone(), HOST_NAMESPACE, "wasmop", "namespaced-test", LeaseConfig::default());
    ensure!(elector.try_acquire_or_renew().await?, "the host takes its Lease in its own namespace");
    // WasmPlugins of files in the same directory path: one written by a host of another scope
    // (left alone), one by a host of this scope whose file is gone (deleted at start).
    for (name, scope) in [("theirs", "team-c"), ("gone", "team-a,team-b")] {
        let file = dir.path().join(format!("{name}.wasm"));
        apply(
            &admin,
            &json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin",
            "metadata": {"name": name, "annotations": {SCOPE_ANNOTATION: scope}}, "spec": {"file": file}}),
        )
        .await?;
    }
    let reload = ReloadConfig { debounce: Duration::from_millis(100), rescan: Duration::from_secs(60) };
    let reloader = Reloader::new(Arc::clone(&manager), dir.path(), reload);
    reloader.sync().await;
    let _watch = tokio::spawn(Arc::clone(&reloader).run());
    ensure!(manager.plugins() == ["memcached"], "running: {:?}", manager.plugins());

    for ns in WATCHED.iter().chain(&[OTHER]) {
        apply(&admin, &memcached(ns)).await?;
    }
    for ns in WATCHED {
        let crs = api_for(&admin, "cache.example.com/v1alpha1", "Memcached", Some(ns)).await?;
        let deployments = api_for(&admin, "apps/v1", "Deployment", Some(ns)).await?;
        eventually(&format!("the Deployment in {ns}"), WAIT, || async {
            Ok(deployments.get_opt("cache").await?.filter(|d| d.data.pointer("/spec/replicas") == Some(&json!(2))).map(|_| ()))
        })
        .await?;
        eventually(&format!("the status in {ns}"), WAIT, || async {
            Ok(reconciled(&serde_json::to_value(crs.get("cache").await?)?).then_some(()))
        })
        .await?;
    }

    // The plugins' reports: memcached serving; testbed not started, saying why.
    let wasmplugins = api_for(&admin, "wasmop.dev/v1alpha1", "WasmPlugin", None).await?;
    let reason = |wp: &kube::api::DynamicObject| wp.data.pointer("/status/conditions/0/reason").cloned();
    eventually("WasmPlugin memcached Ready", WAIT, || async {
        Ok(wasmplugins.get_opt("memcached").await?.filter(|wp| reason(wp) == Some(json!("Loaded"))).map(|_| ()))
    })
    .await?;
    eventually("the stale WasmPlugin of this host's scope deleted", WAIT, || async {
        Ok(wasmplugins.get_opt("gone").await?.is_none().then_some(()))
    })
    .await?;
    ensure!(wasmplugins.get_opt("theirs").await?.is_some(), "another scope's WasmPlugin was deleted");
    let annotation =
        |wp: &kube::api::DynamicObject| wp.metadata.annotations.as_ref().and_then(|a| a.get(SCOPE_ANNOTATION)).cloned();
    ensure!(annotation(&wasmplugins.get("memcached").await?).as_deref() == Some("team-a,team-b"), "memcached's scope annotation");
    let testbed = eventually("WasmPlugin testbed NotStarted", WAIT, || async {
        Ok(wasmplugins.get_opt("testbed").await?.filter(|wp| reason(wp) == Some(json!("NotStarted"))))
    })
    .await?;
    let message = testbed.data.pointer("/status/conditions/0/message").and_then(Value::as_str).unwrap_or_default();
    ensure!(
        message.contains("declares the cluster-scoped rbac.authorization.k8s.io/v1/ClusterRole, and this host watches only namespaces team-a, team-b"),
        "{message}"
    );

    // The third namespace: still no Deployment and no status once the others are done (and a
    // round of resyncs later: every parent in the cache was queued at start).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let other = api_for(&admin, "apps/v1", "Deployment", Some(OTHER)).await?;
    ensure!(other.get_opt("cache").await?.is_none(), "a Deployment appeared in {OTHER}");
    let other_cr = api_for(&admin, "cache.example.com/v1alpha1", "Memcached", Some(OTHER)).await?.get("cache").await?;
    ensure!(other_cr.data.get("status").is_none(), "{OTHER}'s parent got a status: {:?}", other_cr.data);
    let metrics = manager.metrics().render();
    ensure!(!metrics.contains(r#"result="error""#), "reconcile errors:\n{metrics}");

    // Never a 403: nothing in the host's whole log says forbidden.
    let text = String::from_utf8(log.lock().expect("log lock").clone())?;
    let forbidden: Vec<&str> =
        text.lines().filter(|l| l.to_lowercase().contains("forbidden") || l.contains("code: 403")).collect();
    ensure!(forbidden.is_empty(), "the namespaced host was refused:\n{}", forbidden.join("\n"));
    ensure!(text.contains("watch synced"), "the capture saw the host's log:\n{text}");

    // The negative control: the same identity, watching the whole cluster, cannot list.
    let whole = Arc::new(Manager::new(
        client.clone(),
        runtime.clone(),
        ControllerConfig { sync_timeout: Duration::from_secs(3), ..Host::test_config() },
    ));
    let err = whole.start(runtime.load_file(&memcached_file).await?).await.expect_err("a cluster-wide host must not sync");
    ensure!(matches!(&err, PluginError::Start(StartError::NotSynced(_))), "{err}");
    ensure!(err.to_string().to_lowercase().contains("forbidden"), "{err}");
    Ok(())
}
