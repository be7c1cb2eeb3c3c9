//! From `wasmop push` of a new version to the change visible in the cluster, on a real control
//! plane and a real registry, next to the same change delivered as a local file.
//!
//! `cargo bench -p wasmop-e2e --bench pull` (a plain binary, `harness = false`).
//!
//! Environment:
//! - `PUSHES` (default 10): timed changes in each phase;
//! - `RUST_LOG` (default `warn`): the host's log on stderr.
//!
//! Setup: one `ControlPlane` (Kubernetes 1.37 unless `WASMOP_K8S_VERSION` says otherwise),
//! `crds/memcached.yaml` and `crds/wasmplugin.yaml`, a registry on loopback (Debian's
//! docker-registry, `wasmop_e2e::registry`), a `Manager` whose policy pulls memcached from the
//! tag `plugins/memcached:bench` every second (`pullInterval: 1s`, the shortest) with
//! signatures required and one trusted key, a `Reloader::run()` (the real directory watcher and
//! its debounce) on the plugins directory, ONE Memcached CR and its Deployment, watched.
//! Versions alternate v1 ⇄ v2 (v2 = `--features test-v2`: the Deployment label
//! `wasmop.dev/test-version: v2`); the precompiled artifacts of both are cached after an
//! untimed round, so neither phase compiles.
//!
//! Phases, each `PUSHES` changes, the clock stopped when the Deployment watch delivers the new
//! label state:
//! 1. file (the baseline): the other version written beside `memcached.wasm` and renamed over
//!    it — what a ConfigMap volume update or a copy does; the puller is stopped meanwhile;
//! 2. push: the puller started; the other version pushed to the tag and signed, as `wasmop
//!    push --key` does (the clock starts before the push), then pulled at the next interval,
//!    verified, installed and reloaded.
//!
//! Printed: p50 / p90 / max of each phase and of the push + sign alone, and the figure lines
//! (`push to change visible p50`, with the file phase's p50 as its baseline) that
//! `scripts/bench.sh` puts in BENCHMARKS.md. A push waits for the next pull (at most one
//! interval): the push phase's p50 is expected about half an interval above the file phase's.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use bytes::Bytes;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tokio::sync::mpsc;
use wasmop::controller::{ControllerConfig, Manager};
use wasmop::policy::{HostPolicy, OciReference};
use wasmop::registry::{PullCache, PullContext, PullMetrics, PullTarget, Puller, RegistryClient, SigningKey, push, sign};
use wasmop::reload::{ReloadConfig, Reloader};
use wasmop::runtime::Runtime;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{apply, apply_file};
use wasmop_e2e::plugins::{plugin, plugin_with_features, workspace};
use wasmop_e2e::registry::Registry;

use wasmop_e2e::figure::{Goal, figure};

const NAMESPACE: &str = "default";
const CR: &str = "pull-bench";
const V2_LABEL: &str = "wasmop.dev/test-version";
/// Longest wait for one change to be observed.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(60);
/// Pause after each change, so the next starts from a quiet host.
const SETTLE: Duration = Duration::from_millis(500);

fn main() -> Result<()> {
    let log_filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(log_filter).init();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(bench())
}

/// The Deployment's label states as the watch delivers them.
struct Labels(mpsc::UnboundedReceiver<(Instant, bool)>);

impl Labels {
    /// When the watch delivered the Deployment with the v2 label `present` (or absent).
    async fn wait(&mut self, present: bool) -> Result<Instant> {
        let deadline = tokio::time::Instant::now() + CHANGE_TIMEOUT;
        loop {
            match tokio::time::timeout_at(deadline, self.0.recv()).await {
                Ok(Some((at, state))) if state == present => return Ok(at),
                Ok(Some(_)) => {}
                Ok(None) => bail!("the Deployment watch ended"),
                Err(_) => {
                    bail!("the Deployment's v2 label not {} within {CHANGE_TIMEOUT:?}", if present { "set" } else { "gone" })
                }
            }
        }
    }

    fn drain(&mut self) {
        while self.0.try_recv().is_ok() {}
    }
}

async fn bench() -> Result<()> {
    let pushes = match std::env::var("PUSHES") {
        Ok(v) => v.trim().parse::<usize>().with_context(|| format!("PUSHES={v:?} is not a number"))?.max(1),
        Err(_) => 10,
    };
    eprintln!("[pull] PUSHES={pushes}; building memcached v1 and v2…");
    let (v1, v2) = tokio::task::spawn_blocking(|| {
        (plugin("memcached", "wasm32-wasip2"), plugin_with_features("memcached", "wasm32-wasip2", &["test-v2"]))
    })
    .await?;
    let (v1_bytes, v2_bytes) = (std::fs::read(&v1)?, std::fs::read(&v2)?);

    let registry = Registry::start()?;
    let (key, _) = SigningKey::generate();
    let source = registry.reference("plugins/memcached:bench");
    let reference = OciReference::parse(&source).map_err(anyhow::Error::msg)?;
    let registry_client = RegistryClient::new(&registry.host(), true, None);
    let push_signed = |wasm: Vec<u8>| {
        let (client, reference, key) = (&registry_client, &reference, &key);
        async move {
            let pushed = push(client, reference, Bytes::from(wasm), "memcached.wasm").await?;
            sign(client, &reference.repository, &pushed.manifest_digest, key).await?;
            anyhow::Ok(pushed)
        }
    };
    push_signed(v1_bytes.clone()).await.context("pushing v1")?;

    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/memcached.yaml")).await?;
    apply_file(&client, &workspace().join("crds/wasmplugin.yaml")).await?;

    let pem: String = key.public_key("bench").to_pem().lines().map(|l| format!("        {l}\n")).collect();
    let policy = HostPolicy::from_yaml(&format!(
        "plugins:\n  memcached: {{source: \"{source}\", pullInterval: 1s, insecure: true}}\n\
         verification:\n  requireSignature: true\n  keys:\n    - name: bench\n      publicKey: |\n{pem}"
    ))?;
    let work = tempfile::tempdir()?;
    let plugins_dir = work.path().join("plugins");
    std::fs::create_dir_all(&plugins_dir)?;
    let runtime = Runtime::builder().artifact_dir(Some(work.path().join("artifacts"))).build()?;
    let targets: Vec<PullTarget> = policy
        .sources()
        .into_iter()
        .map(|(name, source)| PullTarget { max_bytes: policy.for_plugin(&name).max_module_bytes(), name, source })
        .collect();
    let verification = policy.verification().clone();
    let manager =
        Arc::new(Manager::new(client.clone(), runtime, ControllerConfig { resync: None, policy, ..Default::default() }));
    let reloader = Reloader::new(Arc::clone(&manager), &plugins_dir, ReloadConfig::default());
    let _run = tokio::spawn(Arc::clone(&reloader).run());
    let pull_context = PullContext {
        plugins_dir: plugins_dir.clone(),
        cache: PullCache::new(work.path().join("pull-cache")),
        client: Some(client.clone()),
        reloader: Some(Arc::clone(&reloader)),
        metrics: PullMetrics::registered(manager.metrics()),
        verification,
    };

    // The Deployment watch, started before anything is reconciled.
    let (tx, rx) = mpsc::unbounded_channel();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let watch_config = watcher::Config::default().fields(&format!("metadata.name={CR}"));
    let _watch = tokio::spawn(async move {
        let mut stream = watcher(deployments, watch_config).default_backoff().boxed();
        while let Some(event) = stream.next().await {
            let at = Instant::now();
            if let Ok(watcher::Event::Apply(d) | watcher::Event::InitApply(d)) = event {
                let _ = tx.send((at, d.labels().contains_key(V2_LABEL)));
            }
        }
    });
    let mut labels = Labels(rx);

    // v1 pulled once (the first pull), one CR, its Deployment.
    let puller = Puller::start(pull_context.clone(), targets.clone());
    let started = Instant::now();
    while manager.controller("memcached").is_none() {
        if started.elapsed() > CHANGE_TIMEOUT {
            bail!("memcached did not start from the registry: {:?}", reloader.statuses());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(puller);
    apply(
        &client,
        &json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": CR, "namespace": NAMESPACE}, "spec": {"size": 0}}),
    )
    .await?;
    labels.wait(false).await.context("the Deployment of the CR")?;
    let target = plugins_dir.join("memcached.wasm");

    // Untimed round: both versions compiled and cached.
    for (src, to_v2) in [(&v2, true), (&v1, false)] {
        write_then_rename(src, &target)?;
        labels.wait(to_v2).await.context("warm-up")?;
        tokio::time::sleep(SETTLE).await;
    }

    eprintln!("[pull] phase file: {pushes} changes, a file renamed into the plugins directory");
    let mut file = Vec::new();
    for i in 0..pushes {
        let (src, to_v2) = if i % 2 == 0 { (&v2, true) } else { (&v1, false) };
        labels.drain();
        let t = Instant::now();
        write_then_rename(src, &target)?;
        let seen = labels.wait(to_v2).await.with_context(|| format!("file change {i}"))?;
        file.push(seen - t);
        tokio::time::sleep(SETTLE).await;
    }
    // Back to v1 (what the tag holds) before the puller starts again.
    if pushes % 2 == 1 {
        write_then_rename(&v1, &target)?;
        labels.wait(false).await.context("back to v1")?;
        tokio::time::sleep(SETTLE).await;
    }

    eprintln!("[pull] phase push: {pushes} changes, pushed and signed to {source}, pulled every second");
    let _puller = Puller::start(pull_context, targets);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut visible = Vec::new();
    let mut pushing = Vec::new();
    for i in 0..pushes {
        let (bytes, to_v2) = if i % 2 == 0 { (&v2_bytes, true) } else { (&v1_bytes, false) };
        labels.drain();
        let t = Instant::now();
        push_signed(bytes.clone()).await.with_context(|| format!("push {i}"))?;
        pushing.push(t.elapsed());
        let seen = labels.wait(to_v2).await.with_context(|| format!("pushed change {i}"))?;
        visible.push(seen - t);
        tokio::time::sleep(SETTLE).await;
    }

    for v in [&mut file, &mut visible, &mut pushing] {
        v.sort();
    }
    let row = |name: &str, v: &[Duration]| {
        println!("{name:<44} {:>9} {:>9} {:>9}", ms(pct(v, 50.0)), ms(pct(v, 90.0)), ms(v[v.len() - 1]));
    };
    println!("{:<44} {:>9} {:>9} {:>9}", format!("n = {pushes} each"), "p50 ms", "p90 ms", "max ms");
    row("file renamed in -> change visible (baseline)", &file);
    row("wasmop push + sign (registry on loopback)", &pushing);
    row("push -> change visible (pullInterval 1s)", &visible);
    let (p50, base) = (pct(&visible, 50.0).as_secs_f64() * 1e3, pct(&file, 50.0).as_secs_f64() * 1e3);
    figure(
        "pull",
        "push (signed) to change visible in the cluster p50, vs a local file (pullInterval 1s)",
        p50,
        Some(base),
        "ms",
        Goal::None,
    );
    figure(
        "pull",
        "wasmop push + sign p50 (registry on loopback)",
        pct(&pushing, 50.0).as_secs_f64() * 1e3,
        None,
        "ms",
        Goal::None,
    );
    Ok(())
}

fn write_then_rename(src: &Path, dst: &Path) -> Result<()> {
    let tmp = dst.with_extension("tmp");
    std::fs::copy(src, &tmp)?;
    std::fs::rename(&tmp, dst)?;
    Ok(())
}

/// Nearest-rank percentile of sorted values.
fn pct(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}
