//! The host's own surface and bounds against hostile plugins: what a plugin's webhooks may never
//! reach, what a mutation may never change, what the host pays for what a plugin hands it, and
//! how the host comes back after the API server was away.
//!
//! The hostile plugins are builds of the testbed (`plugins/testbed/src/hostile_surface.rs`).
//! The schema tests need no cluster; the others run on a real etcd + kube-apiserver +
//! kube-controller-manager.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use wasmop::admission::{Admission, AdmissionConfig, CertSource, HostObjects};
use wasmop::controller::{BreakerConfig, Manager};
use wasmop::leader::{LeaderElector, LeaseConfig};
use wasmop::policy::{HostPolicy, Limits};
use wasmop::reload::{ReloadConfig, Reloader};
use wasmop::runtime::Runtime;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{Host, api_for, apply, apply_file, eventually, log_to_test_output};
use wasmop_e2e::plugins::{plugin, plugin_with_features, workspace};

const WAIT: Duration = Duration::from_secs(30);
/// The namespace the host runs in, in these tests.
const HOST_NAMESPACE: &str = "wasmop-host";
const CONFIGURATION: &str = "wasmop-e2e-surface";
const SECRET: &str = "wasmop-admission-tls";

fn hostile_admission() -> std::path::PathBuf {
    plugin_with_features("testbed", "wasm32-wasip2", &["vetoes-leases", "mutates-ownership"])
}

/// The largest of this process's heap in use while `f` runs, above what it was when `f`
/// started, sampled every millisecond (wasm linear memory is not heap: only the host's own
/// allocations count).
async fn heap_peak_during<T>(f: impl Future<Output = T>) -> (T, usize) {
    let base = wasmop::allocator::heap().expect("glibc").in_use;
    let (peak, done) = (Arc::new(AtomicUsize::new(base)), Arc::new(AtomicBool::new(false)));
    let sampler = {
        let (peak, done) = (Arc::clone(&peak), Arc::clone(&done));
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(wasmop::allocator::heap().expect("glibc").in_use, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let out = f.await;
    done.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler");
    (out, peak.load(Ordering::Relaxed).saturating_sub(base))
}

/// This process's peak resident memory so far (`VmHWM`) and resident memory now (`VmRSS`).
fn rss() -> Result<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let field = |name: &str| -> Result<u64> {
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .with_context(|| format!("{name} in /proc/self/status"))?;
        Ok(kib << 10)
    };
    Ok((field("VmHWM:")?, field("VmRSS:")?))
}

/// A runtime whose calls (the manifest's included) may use 1 GiB: the size of what a plugin
/// hands the host is then bounded by the host's own checks, not by the plugin's memory.
fn roomy_runtime() -> Result<Runtime> {
    Ok(Runtime::builder().limits(Limits::default().memory_bytes(1 << 30)).artifact_dir(None).build()?)
}

#[tokio::test]
async fn a_20_mib_config_schema_is_refused_on_its_bytes_before_the_host_parses_it() -> Result<()> {
    let runtime = roomy_runtime()?;
    let file = plugin_with_features("testbed", "wasm32-wasip2", &["schema-huge"]);
    let (loaded, peak) = heap_peak_during(runtime.load_file(&file)).await;
    let err = loaded.expect_err("refused").to_string();
    println!("20 MiB schema: refused with {err:?}; host heap peak during the load +{} MiB", peak >> 20);
    assert!(err.contains("configSchema has 20971") && err.ends_with("bytes, more than the limit of 65536"), "{err}");
    // The process's peak counts the text in the guest's memory and once lifted into the host
    // (2 × 20 MiB), and whatever a test running beside this one allocates meanwhile; parsing it
    // before measuring it took the host +374 MB.
    assert!(peak < 80 << 20, "the host's heap grew by {} MiB", peak >> 20);
    Ok(())
}

#[tokio::test]
async fn a_3_kb_schema_with_2_pow_60_ref_paths_is_refused_at_load_instead_of_hanging_it() -> Result<()> {
    let runtime = roomy_runtime()?;
    let file = plugin_with_features("testbed", "wasm32-wasip2", &["schema-doubling"]);
    let started = Instant::now();
    let loaded = tokio::time::timeout(Duration::from_secs(60), runtime.load_file(&file)).await.context("the load hung")?;
    let err = loaded.expect_err("refused").to_string();
    println!("2^60-path schema: refused in {:?} with {err:?}", started.elapsed());
    assert!(err.contains("configSchema refused: with every $ref followed it has more than 100000 subschemas"), "{err}");
    Ok(())
}

#[tokio::test]
async fn a_schema_of_1500_unicode_regexes_is_refused_at_load_without_compiling_them() -> Result<()> {
    let runtime = roomy_runtime()?;
    let file = plugin_with_features("testbed", "wasm32-wasip2", &["schema-regexes"]);
    let before = rss()?;
    let loaded = tokio::time::timeout(Duration::from_secs(60), runtime.load_file(&file)).await.context("the load hung")?;
    let err = loaded.expect_err("refused").to_string();
    let after = rss()?;
    println!(
        "regex schema: refused with {err:?}; peak RSS {} -> {} MiB, RSS {} -> {} MiB",
        before.0 >> 20,
        after.0 >> 20,
        before.1 >> 20,
        after.1 >> 20
    );
    assert!(err.contains("configSchema refused: it has 1500 regular expressions, more than the limit of 64"), "{err}");
    Ok(())
}

/// A host whose namespace is [`HOST_NAMESPACE`] (its Leases and admission Secret there),
/// following `dir` and serving its plugins' webhooks.
///
/// The host's operator grants the plugin Leases (an escalation kind: a veto on them stalls
/// controllers): even so, the host's exclusions keep its own and kube-system's out of reach.
async fn admission_host(client: &kube::Client, dir: &Path) -> Result<(Arc<Manager>, Arc<Reloader>, Admission)> {
    let policy = HostPolicy::from_yaml("plugins: {testbed: {grants: {escalationKinds: [coordination.k8s.io/v1/Lease]}}}")?;
    let runtime = Runtime::builder().allowances(policy.allowances()).artifact_dir(None).build()?;
    let config = wasmop::controller::ControllerConfig { policy, ..Host::test_config() };
    let manager = Arc::new(Manager::new(client.clone(), runtime, config));
    let reloader = Reloader::new(Arc::clone(&manager), dir, ReloadConfig::default());
    let certs = CertSource::Secret { namespace: HOST_NAMESPACE.into(), name: SECRET.into(), names: vec!["127.0.0.1".into()] };
    let config = AdmissionConfig {
        configuration_name: CONFIGURATION.into(),
        host: HostObjects {
            namespace: Some(HOST_NAMESPACE.into()),
            lease_namespace: HOST_NAMESPACE.into(),
            secret: Some((HOST_NAMESPACE.into(), SECRET.into())),
        },
        ..AdmissionConfig::new(certs)
    };
    let admission = Admission::start(config, Arc::clone(&manager)).await?;
    reloader.observe(admission.observer());
    reloader.sync().await;
    Ok((manager, reloader, admission))
}

async fn cluster_with_host_namespace() -> Result<(ControlPlane, kube::Client)> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/testbed.yaml")).await?;
    apply_file(&client, &workspace().join("crds/wasmplugin.yaml")).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": HOST_NAMESPACE}}))?).await?;
    Ok((cp, client))
}

fn lease(name: &str, holder: &str) -> Result<Lease> {
    Ok(serde_json::from_value(
        json!({"metadata": {"name": name}, "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}}),
    )?)
}

/// Create Lease `name` in `api`'s namespace (if absent), then update its holder: the update's
/// error, if any.
async fn update_lease(api: &Api<Lease>, name: &str) -> Result<Option<String>> {
    if api.get_opt(name).await?.is_none() {
        api.create(&PostParams::default(), &lease(name, "first")?).await?;
    }
    let mut current = api.get(name).await?;
    let next = format!("holder-{}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos());
    current.spec.get_or_insert_default().holder_identity = Some(next);
    Ok(api.replace(name, &PostParams::default(), &current).await.err().map(|e| e.to_string()))
}

#[tokio::test]
async fn a_fail_webhook_vetoing_every_lease_update_blocks_neither_the_hosts_lease_nor_kube_system() -> Result<()> {
    log_to_test_output();
    let (_cp, client) = cluster_with_host_namespace().await?;
    let dir = tempfile::tempdir()?;
    std::fs::copy(hostile_admission(), dir.path().join("testbed.wasm"))?;
    let (manager, _reloader, _admission) = admission_host(&client, dir.path()).await?;
    assert!(manager.controller("testbed").is_some(), "the hostile build runs");

    // The veto is live where the host does not exclude it.
    let elsewhere: Api<Lease> = Api::namespaced(client.clone(), "default");
    let denied =
        eventually("a Lease update in default vetoed", WAIT, || async { update_lease(&elsewhere, "probe").await }).await?;
    assert!(denied.contains("testbed vetoes lease probe"), "{denied}");

    // kube-system's Leases (kube-controller-manager's, kube-scheduler's) and the host's own are
    // out of its reach.
    let kube_system: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    assert_eq!(update_lease(&kube_system, "kube-scheduler").await?, None, "a kube-system Lease updates");
    let own: Api<Lease> = Api::namespaced(client.clone(), HOST_NAMESPACE);
    assert_eq!(update_lease(&own, "wasmop-shard-a").await?, None, "a Lease of the host's updates");

    // The host's leader election keeps its Lease through several renew deadlines.
    let timings = LeaseConfig {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(300),
    };
    let elector = LeaderElector::new(client.clone(), HOST_NAMESPACE, "wasmop", "surface-host", timings);
    tokio::time::timeout(WAIT, elector.acquire()).await.context("leadership acquired")?;
    let renewed = |l: Lease| l.spec.and_then(|s| s.renew_time).map(|t| t.0);
    let first = renewed(own.get("wasmop").await?);
    let held = tokio::time::timeout(Duration::from_secs(8), elector.hold()).await;
    assert!(held.is_err(), "leadership lost under the veto: {held:?}");
    let later = renewed(own.get("wasmop").await?);
    assert!(later > first, "renewed: {first:?} -> {later:?}");
    Ok(())
}

#[tokio::test]
async fn a_mutation_adding_owners_finalizers_or_the_hosts_label_is_denied_and_nothing_is_stored() -> Result<()> {
    log_to_test_output();
    let (_cp, client) = cluster_with_host_namespace().await?;
    let dir = tempfile::tempdir()?;
    std::fs::copy(hostile_admission(), dir.path().join("testbed.wasm"))?;
    let (_manager, _reloader, _admission) = admission_host(&client, dir.path()).await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for (mode, field) in [
        ("own", "metadata.ownerReferences"),
        ("hold", "metadata.finalizers"),
        ("forge", "metadata.labels[\"wasmop.dev/plugin\"]"),
    ] {
        let object: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": format!("victim-{mode}"), "labels": {"testbed-admission": mode}}, "data": {"k": "v"}}))?;
        // Until the API server calls the webhook, a create is stored: take it back and retry.
        let denied = eventually(&format!("the {mode} mutation denied"), WAIT, || async {
            Ok(match config_maps.create(&PostParams::default(), &object).await {
                Ok(stored) => {
                    config_maps.delete(&format!("victim-{mode}"), &Default::default()).await?;
                    anyhow::bail!("stored with {:?}", stored.metadata)
                }
                Err(e) => Some(e.to_string()),
            })
        })
        .await?;
        assert!(denied.contains(&format!("the mutation changes the object's {field}")), "{denied}");
        assert!(config_maps.get_opt(&format!("victim-{mode}")).await?.is_none());
    }
    Ok(())
}

#[tokio::test]
async fn a_directory_and_a_symlink_loop_named_wasm_get_one_rejection_and_a_file_report_each() -> Result<()> {
    log_to_test_output();
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/testbed.yaml")).await?;
    apply_file(&client, &workspace().join("crds/wasmplugin.yaml")).await?;
    let dir = tempfile::tempdir()?;
    std::fs::create_dir(dir.path().join("folder.wasm"))?;
    std::os::unix::fs::symlink("loop-b.wasm", dir.path().join("loop-a.wasm"))?;
    std::os::unix::fs::symlink("loop-a.wasm", dir.path().join("loop-b.wasm"))?;
    std::fs::copy(plugin("testbed", "wasm32-wasip2"), dir.path().join("testbed.wasm"))?;
    let runtime = Runtime::builder().artifact_dir(None).build()?;
    let manager = Arc::new(Manager::new(client.clone(), runtime, Host::test_config()));
    let reloader = Reloader::new(Arc::clone(&manager), dir.path(), ReloadConfig::default());
    let started = Instant::now();
    tokio::time::timeout(WAIT, reloader.sync()).await.context("the pass hung")?;
    assert!(manager.controller("testbed").is_some(), "the good file still loads");
    let wasmplugins = api_for(&client, "wasmop.dev/v1alpha1", "WasmPlugin", None).await?;
    for (file, message) in [
        ("folder.wasm", "not a regular file: a directory"),
        ("loop-a.wasm", "Too many levels of symbolic links"),
        ("loop-b.wasm", "Too many levels of symbolic links"),
    ] {
        let report =
            eventually(&format!("the file report of {file}"), WAIT, || async { Ok(wasmplugins.get_opt(file).await?) }).await?;
        let condition = report.data.pointer("/status/conditions/0").cloned().unwrap_or(Value::Null);
        assert_eq!(condition["reason"], "Unreadable", "{file}: {condition}");
        assert!(condition["message"].as_str().unwrap_or_default().contains(message), "{file}: {condition}");
    }
    // More passes (events, rescans) reject nothing again.
    for _ in 0..3 {
        reloader.sync().await;
    }
    let metrics = manager.metrics().render();
    for file in ["folder.wasm", "loop-a.wasm", "loop-b.wasm"] {
        let line = format!("wasmop_plugin_rejections_total{{file=\"{}\"}} 1", dir.path().join(file).display());
        assert!(metrics.contains(&line), "once: {line}\n{metrics}");
    }
    println!("three bad entries reported in {:?}", started.elapsed());
    Ok(())
}

#[tokio::test]
async fn after_an_api_server_restart_a_new_object_is_reconciled_within_seconds() -> Result<()> {
    log_to_test_output();
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/testbed.yaml")).await?;
    let testbed = plugin("testbed", "wasm32-wasip2");
    let _host = Host::start(client.clone(), &[&testbed], Host::test_config()).await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let parent = |name: &str| {
        json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed", "metadata": {"name": name, "namespace": "default"},
            "spec": {"mode": "ok"}})
    };
    apply(&client, &parent("before")).await?;
    eventually("the first object reconciled", WAIT, || async { Ok(config_maps.get_opt("before-out").await?) }).await?;

    // Away long enough for kube-runtime's default backoff to reach its long steps.
    cp.stop_apiserver()?;
    tokio::time::sleep(Duration::from_secs(20)).await;
    cp.start_apiserver().await?;
    let back = Instant::now();
    let client = cp.client().await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    apply(&client, &parent("after")).await?;
    eventually("the new object reconciled", Duration::from_secs(60), || async { Ok(config_maps.get_opt("after-out").await?) })
        .await?;
    let took = back.elapsed();
    println!("API server back -> new object reconciled: {took:?}");
    assert!(took < Duration::from_secs(15), "took {took:?}");
    Ok(())
}

#[tokio::test]
async fn a_dense_15_mb_child_for_8_parents_is_refused_before_the_host_parses_it() -> Result<()> {
    log_to_test_output();
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/testbed.yaml")).await?;
    let policy = HostPolicy::from_yaml("plugins:\n  testbed: {deadline: 5s, memory: 128Mi, maxResponseBytes: 16Mi}\n")?;
    let runtime = Runtime::builder().allowances(policy.allowances()).artifact_dir(None).build()?;
    let mut config = Host::test_config();
    config.breaker = BreakerConfig::default().window_calls(1_000_000);
    let testbed = plugin("testbed", "wasm32-wasip2");
    let _host = Host::start_with(client.clone(), &[&testbed], config, runtime).await?;
    let testbeds = api_for(&client, "test.wasmop.dev/v1", "Testbed", Some("default")).await?;
    let reconciled = |o: &kube::api::DynamicObject| {
        let conditions = o.data.pointer("/status/conditions")?.as_array()?;
        conditions.iter().find(|c| c["type"] == "Reconciled").cloned()
    };
    let parent = |name: &str, mode: &str| {
        json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed", "metadata": {"name": name, "namespace": "default"},
            "spec": {"mode": mode, "bytes": CHILD}})
    };
    const CHILD: u64 = 15_000_000;
    apply(&client, &parent("warm", "ok")).await?;
    eventually("warm-up reconciled", WAIT, || async { Ok(testbeds.get_opt("warm").await?.and_then(|o| reconciled(&o))) }).await?;
    wasmop::allocator::trim();
    let (peak_before, idle) = rss()?;
    let (outcome, heap_peak) = heap_peak_during(async {
        for i in 0..8 {
            apply(&client, &parent(&format!("dense-{i}"), "dense")).await?;
        }
        let mut messages = Vec::new();
        for i in 0..8 {
            let name = format!("dense-{i}");
            let condition = eventually(&format!("{name} refused"), Duration::from_secs(120), || async {
                Ok(testbeds.get_opt(&name).await?.and_then(|o| reconciled(&o)).filter(|c| c["reason"] == "MalformedOutput"))
            })
            .await?;
            messages.push(condition["message"].as_str().unwrap_or_default().to_owned());
        }
        anyhow::Ok(messages)
    })
    .await;
    let messages = outcome?;
    let (peak_after, _) = rss()?;
    println!(
        "8 parents x dense 15 MB child (maxResponseBytes 16 MiB): idle RSS {} MiB, peak RSS {} -> {} MiB, \
         host heap peak +{} MiB",
        idle >> 20,
        peak_before >> 20,
        peak_after >> 20,
        heap_peak >> 20
    );
    assert!(messages.iter().all(|m| m.contains("its JSON is dense")), "{messages:?}");
    // Each call's text crosses the boundary (15 MB); no tree of it is ever built (it would
    // take ~8 times that).
    assert!(heap_peak < 16 * CHILD as usize, "host heap peak +{} MiB", heap_peak >> 20);
    Ok(())
}
