//! Hot-reload swap latency on a real control plane: how long after a new plugin file is in
//! place the new version serves, and the first reconcile on it is visible in the cluster.
//!
//! `cargo bench -p wasmop-e2e --bench reload` (a plain binary, `harness = false`).
//!
//! Environment:
//! - `RELOADS` (default 20): timed reloads in each of the warm and cold phases;
//! - `RUN_RELOADS` (default 10): reloads in the final phase driven by `Reloader::run()`;
//! - `RUST_LOG` (default `warn`): the host's log on stderr.
//!
//! Setup: one `ControlPlane` (Kubernetes 1.37 unless `WASMOP_K8S_VERSION` says otherwise, on
//! loopback), `crds/memcached.yaml` and `crds/wasmplugin.yaml` installed (as a host normally
//! has them: `sync()` then also writes the `WasmPlugin` object), a `Manager` (no resync) whose
//! runtime keeps precompiled artifacts in a directory of the bench, a `Reloader` (default
//! `ReloadConfig`) on a temporary plugins directory, the memcached plugin v1 in place, ONE
//! Memcached CR (`size: 0`) and its Deployment.
//!
//! Each reload writes the other version (v1 ⇄ v2; v2 = `--features test-v2`: version 0.2.0 and
//! the Deployment label `wasmop.dev/test-version: v2`) to `memcached.tmp` and renames it over
//! `memcached.wasm`; the clock starts right after the rename. Phases:
//!
//! 1. warm (`RELOADS`): the artifact directory already holds both versions' precompiled
//!    artifacts (an untimed v1 → v2 → v1 round first); the bench calls `reloader.sync()` itself,
//!    so the debounce window is excluded;
//! 2. cold (`RELOADS`): the artifact directory is emptied before each reload, so every reload
//!    compiles with Cranelift (and stores the artifact, as a host with its cache on does);
//!    `sync()` called by the bench;
//! 3. run (`RUN_RELOADS`, warm): `reloader.run()` spawned, the real directory watcher and its
//!    debounce decide when to sync: the whole picture a user sees.
//!
//! Points measured from the rename, per reload:
//! - swapped: the host logs `plugin version swapped` (read + digest + load/compile +
//!   type-check + manifest call + atomic swap; the parents are queued right after), taken by a
//!   `tracing` layer of the bench;
//! - sync() returned: the above plus the `WasmPlugin` status write (phases 1-2 only);
//! - reconcile started / done: the first `reconcile` span of the host opened after the swap
//!   (a worker picked the parent up on the new version), and when it closed (plugin call,
//!   server-side apply of the Deployment, status patch of the CR);
//! - label observed: a `watcher` on the Deployment, started before the first reload, delivers
//!   it with the new label state (v2 label present / absent): includes the reconcile, the apply
//!   round trip and the watch delivery.
//!
//! Also timed alone, without a swap (`RELOADS` each): reading + hashing the file as `sync()`
//! does, and `Runtime::load` with the artifact cached and with an empty artifact directory.
//!
//! Between reloads the bench waits until the host is idle (no reconcile running, queue empty,
//! 300 ms without a reconcile), so each reload starts from a quiet host.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tokio::sync::mpsc;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, filter::LevelFilter, filter::Targets};
use wasmop::controller::{ControllerConfig, Manager};
use wasmop::reload::{ReloadConfig, Reloader};
use wasmop::runtime::Runtime;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{apply, apply_file};
use wasmop_e2e::plugins::{plugin, plugin_with_features, workspace};

use wasmop_e2e::figure;

use figure::{Goal, figure};

const NAMESPACE: &str = "default";
const CR: &str = "reload-bench";
const PLUGIN: &str = "memcached";
const V2_LABEL: &str = "wasmop.dev/test-version";
/// Longest wait for one reload to be observed.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(60);
/// The host counts as idle after this long without a reconcile starting or ending.
const QUIET: Duration = Duration::from_millis(300);
const WARM_GOAL: Duration = Duration::from_millis(10);
const COLD_GOAL: Duration = Duration::from_secs(1);

fn env_usize(name: &str, default: usize) -> Result<usize> {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().with_context(|| format!("{name}={v:?} is not a number")),
        Err(_) => Ok(default),
    }
}

// ---------------------------------------------------------------------------------------------
// A tracing layer recording when the host swaps a version and when its reconciles run.

#[derive(Debug, Default)]
struct Probe {
    /// `plugin version swapped` events: when, and the version swapped to.
    swaps: Mutex<Vec<(Instant, String)>>,
    /// `reconcile` spans in creation order: (opened, closed).
    reconciles: Mutex<Vec<(Instant, Option<Instant>)>>,
    /// Reconcile spans open now.
    open: AtomicUsize,
    /// Last time a reconcile span opened or closed.
    last_activity: Mutex<Option<Instant>>,
}

impl Probe {
    fn touch(&self, at: Instant) {
        *self.last_activity.lock().expect("probe lock") = Some(at);
    }
}

/// Index of a reconcile span in [`Probe::reconciles`] (a span extension).
struct ReconcileIndex(usize);

#[derive(Default)]
struct Fields {
    message: String,
    to: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_owned(),
            "to" => self.to = Some(value.to_owned()),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "to" => self.to = Some(format!("{value:?}")),
            _ => {}
        }
    }
}

struct ProbeLayer(Arc<Probe>);

impl<S> Layer<S> for ProbeLayer
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != "reconcile" {
            return;
        }
        let now = Instant::now();
        let index = {
            let mut r = self.0.reconciles.lock().expect("probe lock");
            r.push((now, None));
            r.len() - 1
        };
        self.0.open.fetch_add(1, Ordering::SeqCst);
        self.0.touch(now);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(ReconcileIndex(index));
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(index) = span.extensions().get::<ReconcileIndex>().map(|i| i.0) else { return };
        let now = Instant::now();
        if let Some(entry) = self.0.reconciles.lock().expect("probe lock").get_mut(index) {
            entry.1 = Some(now);
        }
        self.0.open.fetch_sub(1, Ordering::SeqCst);
        self.0.touch(now);
    }

    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let now = Instant::now();
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields.message == "plugin version swapped" {
            self.0.swaps.lock().expect("probe lock").push((now, fields.to.unwrap_or_default()));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The bench.

fn main() -> Result<()> {
    let probe = Arc::new(Probe::default());
    let log_filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(log_filter))
        .with(ProbeLayer(Arc::clone(&probe)).with_filter(Targets::new().with_target("wasmop", LevelFilter::INFO)))
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(bench(probe))
}

/// How a reload is picked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drive {
    /// The bench calls `reloader.sync()` right after the rename.
    Sync,
    /// `reloader.run()` is running: its directory watcher and debounce trigger the sync.
    Run,
}

/// Times of one reload, from the rename.
#[derive(Debug, Clone, Copy)]
struct Sample {
    swapped: Duration,
    synced: Option<Duration>,
    reconcile_started: Duration,
    reconcile_done: Duration,
    label: Duration,
}

struct Bench {
    client: kube::Client,
    manager: Arc<Manager>,
    reloader: Arc<Reloader>,
    probe: Arc<Probe>,
    target: PathBuf,
    artifacts: PathBuf,
    labels: mpsc::UnboundedReceiver<(Instant, bool)>,
}

async fn bench(probe: Arc<Probe>) -> Result<()> {
    let reloads = env_usize("RELOADS", 20)?.max(1);
    let run_reloads = env_usize("RUN_RELOADS", 10)?;
    eprintln!("[reload] RELOADS={reloads} RUN_RELOADS={run_reloads}; building memcached v1 and v2…");
    let (v1, v2) = tokio::task::spawn_blocking(|| {
        (plugin(PLUGIN, "wasm32-wasip2"), plugin_with_features(PLUGIN, "wasm32-wasip2", &["test-v2"]))
    })
    .await?;
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or_default();
    eprintln!("[reload] v1 {} ({} bytes), v2 {} ({} bytes)", v1.display(), size(&v1), v2.display(), size(&v2));
    let load_before = loadavg();

    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/memcached.yaml")).await?;
    apply_file(&client, &workspace().join("crds/wasmplugin.yaml")).await?;

    let work = tempfile::tempdir()?;
    let plugins_dir = work.path().join("plugins");
    let artifacts = work.path().join("artifacts");
    std::fs::create_dir_all(&plugins_dir)?;
    let runtime = Runtime::builder().artifact_dir(Some(artifacts.clone())).build()?;
    let manager = Arc::new(Manager::new(client.clone(), runtime, ControllerConfig { resync: None, ..Default::default() }));
    let reload_config = ReloadConfig::default();
    let reloader = Reloader::new(Arc::clone(&manager), &plugins_dir, reload_config);

    // The Deployment watch, started before anything is reconciled.
    let (tx, labels) = mpsc::unbounded_channel();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let watch_config = watcher::Config::default().fields(&format!("metadata.name={CR}"));
    let watch_task = tokio::spawn(async move {
        let mut stream = watcher(deployments, watch_config).default_backoff().boxed();
        while let Some(event) = stream.next().await {
            let at = Instant::now();
            match event {
                Ok(watcher::Event::Apply(d) | watcher::Event::InitApply(d)) => {
                    let _ = tx.send((at, d.labels().contains_key(V2_LABEL)));
                }
                Ok(_) => {}
                Err(e) => eprintln!("[reload] deployment watch error: {e}"),
            }
        }
    });

    let mut b = Bench { client, manager, reloader, probe, target: plugins_dir.join("memcached.wasm"), artifacts, labels };

    // v1 in place, one CR, its Deployment.
    write_then_rename(&v1, &b.target)?;
    b.reloader.sync().await;
    let Some(controller) = b.manager.controller(PLUGIN) else {
        bail!("memcached did not start: {:?}", b.reloader.statuses());
    };
    eprintln!("[reload] memcached {} running", controller.plugin().manifest().version);
    apply(
        &b.client,
        &json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": CR, "namespace": NAMESPACE}, "spec": {"size": 0}}),
    )
    .await?;
    b.wait_label(false).await.context("the Deployment of the CR")?;
    b.settle().await?;

    // Warm the artifact cache: v1 → v2 → v1, untimed.
    b.reload(&v2, true, Drive::Sync).await.context("warm-up to v2")?;
    b.reload(&v1, false, Drive::Sync).await.context("warm-up to v1")?;
    eprintln!("[reload] artifact cache warm: {} artifacts", artifact_count(&b.artifacts));

    eprintln!("[reload] phase warm: {reloads} reloads, sync() by the bench");
    let mut warm = Vec::new();
    for i in 0..reloads {
        let (src, to_v2) = if i % 2 == 0 { (&v2, true) } else { (&v1, false) };
        let cached = artifact_count(&b.artifacts);
        if cached < 2 {
            bail!("warm reload {i}: only {cached} artifacts in the cache");
        }
        warm.push(b.reload(src, to_v2, Drive::Sync).await.with_context(|| format!("warm reload {i}"))?);
    }

    // The parts of a warm swap, timed alone (no swap): reading + hashing the file as `sync()`
    // does, and `Runtime::load` with the artifact cached.
    let mut read_digest = Vec::new();
    let mut load_warm = Vec::new();
    for i in 0..reloads {
        let src = if i % 2 == 0 { &v2 } else { &v1 };
        let t = Instant::now();
        let bytes = tokio::fs::read(src).await?;
        let _ = wasmop::runtime::digest(&bytes);
        read_digest.push(t.elapsed());
        let t = Instant::now();
        let loaded = b.manager.runtime().load(bytes).await?;
        load_warm.push(t.elapsed());
        drop(loaded);
    }
    let artifact_bytes: Vec<u64> =
        std::fs::read_dir(&b.artifacts)?.filter_map(Result::ok).filter_map(|e| e.metadata().ok().map(|m| m.len())).collect();

    eprintln!("[reload] phase cold: {reloads} reloads, artifact directory emptied before each");
    let mut cold = Vec::new();
    // Continue the alternation from where the warm phase left off.
    let offset = reloads % 2;
    for i in 0..reloads {
        let (src, to_v2) = if (i + offset) % 2 == 0 { (&v2, true) } else { (&v1, false) };
        empty_dir(&b.artifacts)?;
        cold.push(b.reload(src, to_v2, Drive::Sync).await.with_context(|| format!("cold reload {i}"))?);
    }

    // `Runtime::load` alone with an empty artifact directory (compile + store), no swap.
    let mut load_cold = Vec::new();
    for i in 0..reloads {
        let src = if i % 2 == 0 { &v2 } else { &v1 };
        let bytes = std::fs::read(src)?;
        empty_dir(&b.artifacts)?;
        let t = Instant::now();
        let loaded = b.manager.runtime().load(bytes).await?;
        load_cold.push(t.elapsed());
        drop(loaded);
    }

    let mut run = Vec::new();
    if run_reloads > 0 {
        // Warm again (the cold phase left only the last version's artifact) and end on v1,
        // untimed.
        if !b.on_v2() {
            b.reload(&v2, true, Drive::Sync).await.context("re-warm v2")?;
        }
        b.reload(&v1, false, Drive::Sync).await.context("re-warm v1")?;
        eprintln!(
            "[reload] phase run: {run_reloads} reloads through Reloader::run() (debounce {:?}), {} artifacts cached",
            reload_config.debounce,
            artifact_count(&b.artifacts)
        );
        let run_task = tokio::spawn(Arc::clone(&b.reloader).run());
        // Let it set up its watch and do its initial (no-op) sync.
        tokio::time::sleep(Duration::from_secs(1)).await;
        for i in 0..run_reloads {
            let (src, to_v2) = if i % 2 == 0 { (&v2, true) } else { (&v1, false) };
            run.push(b.reload(src, to_v2, Drive::Run).await.with_context(|| format!("run reload {i}"))?);
        }
        run_task.abort();
    }
    watch_task.abort();
    b.manager.shutdown().await;
    let load_after = loadavg();

    // Report.
    let statuses = b.reloader.statuses();
    let loads = statuses.iter().map(|s| s.loads).sum::<u64>();
    let errors: Vec<_> = statuses.iter().filter_map(|s| s.last_error.clone()).collect();
    println!();
    println!("Hot-reload swap latency, memcached v1 ⇄ v2, one Memcached CR; times from the rename (ms)");
    println!(
        "host: {} CPUs, loadavg before {load_before}, after {load_after}; plugin v1 {} bytes, v2 {} bytes",
        std::thread::available_parallelism().map_or(0, std::num::NonZeroUsize::get),
        size(&v1),
        size(&v2)
    );
    println!("loads: {loads}, last errors: {errors:?}; precompiled artifacts {artifact_bytes:?} bytes");
    println!();
    println!("{:<6} {:<28} {:>9} {:>9} {:>9} {:>9}  n", "phase", "point", "p50", "p90", "min", "max");
    for (phase, samples) in [("warm", &warm), ("cold", &cold), ("run()", &run)] {
        if samples.is_empty() {
            continue;
        }
        let rows: [(&str, Vec<Duration>); 5] = [
            ("swapped (in service)", samples.iter().map(|s| s.swapped).collect()),
            ("sync() returned", samples.iter().filter_map(|s| s.synced).collect()),
            ("first reconcile started", samples.iter().map(|s| s.reconcile_started).collect()),
            ("first reconcile done", samples.iter().map(|s| s.reconcile_done).collect()),
            ("label observed (watch)", samples.iter().map(|s| s.label).collect()),
        ];
        for (point, mut values) in rows {
            if values.is_empty() {
                continue;
            }
            values.sort();
            println!(
                "{phase:<6} {point:<28} {:>9} {:>9} {:>9} {:>9}  {}",
                ms(pct(&values, 50.0)),
                ms(pct(&values, 90.0)),
                ms(values[0]),
                ms(values[values.len() - 1]),
                values.len()
            );
        }
    }

    println!();
    println!("parts, timed alone without a swap (ms)  p50       p90       min       max  n");
    for (part, mut values) in [
        ("read + sha256 of the file", read_digest),
        ("Runtime::load, artifact cached", load_warm),
        ("Runtime::load, no artifact (compile)", load_cold),
    ] {
        values.sort();
        println!(
            "{part:<37} {:>9} {:>9} {:>9} {:>9}  {}",
            ms(pct(&values, 50.0)),
            ms(pct(&values, 90.0)),
            ms(values[0]),
            ms(values[values.len() - 1]),
            values.len()
        );
    }

    let p = |samples: &[Sample], f: fn(&Sample) -> Option<Duration>, q: f64| {
        let mut v: Vec<Duration> = samples.iter().filter_map(f).collect();
        v.sort();
        (!v.is_empty()).then(|| pct(&v, q))
    };
    let synced = |s: &Sample| s.synced;
    let label = |s: &Sample| Some(s.label);
    let started = |s: &Sample| Some(s.reconcile_started);
    let show = |d: Option<Duration>| d.map_or_else(|| "-".to_owned(), ms);
    println!();
    println!("summary (ms)           sync() returned      label observed");
    println!("                        p50       p90        p50       p90");
    for (phase, samples) in [("warm", &warm), ("cold", &cold)] {
        println!(
            "{phase:<18} {:>9} {:>9}  {:>9} {:>9}",
            show(p(samples, synced, 50.0)),
            show(p(samples, synced, 90.0)),
            show(p(samples, label, 50.0)),
            show(p(samples, label, 90.0))
        );
    }
    println!("default debounce (ReloadConfig::default().debounce): {}", ms(reload_config.debounce));
    if !run.is_empty() {
        println!(
            "run() end to end (rename → label observed): p50 {}  p90 {}  (n={})",
            show(p(&run, label, 50.0)),
            show(p(&run, label, 90.0)),
            run.len()
        );
    }
    println!();
    for (phase, samples, goal) in [("warm", &warm, WARM_GOAL), ("cold", &cold, COLD_GOAL)] {
        for (point, f) in [
            ("sync() returned", synced as fn(&Sample) -> Option<Duration>),
            ("first reconcile started", started),
            ("label observed", label),
        ] {
            if let Some(v) = p(samples, f, 50.0) {
                let verdict = if v <= goal { "PASS" } else { "MISS" };
                println!("goal {phase} ≤ {}: {point:<24} p50 {:>9}  {verdict}", ms(goal), ms(v));
            }
        }
    }
    for (phase, samples, goal) in [("warm", &warm, WARM_GOAL), ("cold", &cold, COLD_GOAL)] {
        if let Some(v) = p(samples, label, 50.0) {
            let metric = format!("{phase} reload, rename → Deployment label observed, p50 (n = {})", samples.len());
            figure("reload", &metric, v.as_secs_f64() * 1e3, None, "ms", Goal::AtMost(goal.as_secs_f64() * 1e3));
        }
    }
    Ok(())
}

impl Bench {
    /// Whether the Deployment currently carries the v2 label, as the controller's version says.
    fn on_v2(&self) -> bool {
        self.manager.controller(PLUGIN).is_some_and(|c| c.plugin().manifest().version == "0.2.0")
    }

    /// Put `src` in place by write-then-rename and time it until the Deployment shows the new
    /// label state; then wait for the host to be idle.
    async fn reload(&mut self, src: &Path, to_v2: bool, drive: Drive) -> Result<Sample> {
        let want_version = if to_v2 { "0.2.0" } else { "0.1.0" };
        while self.labels.try_recv().is_ok() {}
        let swaps_mark = self.probe.swaps.lock().expect("probe lock").len();
        let tmp = self.target.with_extension("tmp");
        std::fs::copy(src, &tmp)?;
        std::fs::rename(&tmp, &self.target)?;
        let t0 = Instant::now();
        let synced = if drive == Drive::Sync {
            self.reloader.sync().await;
            Some(t0.elapsed())
        } else {
            None
        };
        let label_at = self.wait_label(to_v2).await?;
        self.settle().await?;

        let serving = self.manager.controller(PLUGIN).map(|c| c.plugin().manifest().version.clone());
        if serving.as_deref() != Some(want_version) {
            bail!("expected version {want_version} serving, found {serving:?}; statuses {:?}", self.reloader.statuses());
        }
        let swaps = self.probe.swaps.lock().expect("probe lock")[swaps_mark..].to_vec();
        let [(swap_at, swapped_to)] = swaps.as_slice() else {
            bail!("expected one version swap, saw {swaps:?} (the controller restarted instead?)");
        };
        if swapped_to != want_version {
            bail!("swapped to {swapped_to}, expected {want_version}");
        }
        let (started, done) = self
            .probe
            .reconciles
            .lock()
            .expect("probe lock")
            .iter()
            .find(|(start, _)| start >= swap_at)
            .copied()
            .context("no reconcile after the swap")?;
        let done = done.context("the first reconcile after the swap has not finished")?;
        Ok(Sample {
            swapped: *swap_at - t0,
            synced,
            reconcile_started: started - t0,
            reconcile_done: done - t0,
            label: label_at - t0,
        })
    }

    /// The instant the Deployment watch delivered the Deployment with (or without) the v2 label.
    async fn wait_label(&mut self, v2: bool) -> Result<Instant> {
        let deadline = tokio::time::Instant::now() + RELOAD_TIMEOUT;
        loop {
            match tokio::time::timeout_at(deadline, self.labels.recv()).await {
                Ok(Some((at, has))) if has == v2 => return Ok(at),
                Ok(Some(_)) => {}
                Ok(None) => bail!("the Deployment watch ended"),
                Err(_) => bail!(
                    "no Deployment {CR} with v2 label = {v2} within {RELOAD_TIMEOUT:?}; statuses {:?}",
                    self.reloader.statuses()
                ),
            }
        }
    }

    /// Wait until no reconcile runs, the queue is empty, and nothing happened for [`QUIET`].
    async fn settle(&self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let depth = self.manager.controller(PLUGIN).map_or(0, |c| c.queue_depth());
            let open = self.probe.open.load(Ordering::SeqCst);
            let last = *self.probe.last_activity.lock().expect("probe lock");
            if depth == 0 && open == 0 && last.is_none_or(|l| l.elapsed() >= QUIET) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!("the host is still busy after 30 s (queue {depth}, reconciles running {open})");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Copy `src` next to `dst` and rename it over `dst` (atomic), as an editor or a deploy does.
fn write_then_rename(src: &Path, dst: &Path) -> Result<()> {
    let tmp = dst.with_extension("tmp");
    std::fs::copy(src, &tmp)?;
    std::fs::rename(&tmp, dst)?;
    Ok(())
}

fn artifact_count(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map_or(0, |d| d.filter_map(Result::ok).filter(|e| e.path().extension().is_some_and(|x| x == "cwasm")).count())
}

fn empty_dir(dir: &Path) -> Result<()> {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries {
            std::fs::remove_file(entry?.path())?;
        }
    }
    Ok(())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Nearest-rank percentile of sorted values.
fn pct(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}
