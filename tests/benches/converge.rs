//! Convergence on a real control plane: the wasmop host (memcached plugin) against a native
//! kube-rs controller running the same logic.
//!
//! `cargo bench -p wasmop-e2e --bench converge` (a plain binary, `harness = false`).
//!
//! Environment:
//! - `N` (default 1000): Memcached CRs created at once in the bulk phase;
//! - `LAT` (default 50): CRs created one at a time afterwards, for latency (`0`: no latency
//!   phase and no waiting for kube-controller-manager to settle — a quick throughput run);
//! - `RUNS` (default `AB`): which runs, in order — `A` the wasmop host, `B` the native
//!   kube-rs controller, `C` the native controller with `predicates::generation` on its
//!   Memcached stream (like the host, it then ignores status-only changes), `D` run C writing
//!   the same status as the host (its `Reconciled` condition too), `E` the host with the policy
//!   `reconciledCondition: onFailure` (no `Reconciled` condition while reconciles succeed),
//!   `H` the host as users run it, a `wasmop run` process of its own (the release binary
//!   beside this bench, or `WASMOP_BIN`; concurrency 16 as in A): its CPU is the whole
//!   process's and its resident memory its own, comparable with the peers', where A's share
//!   the bench's process; and the peers users would pick instead, each its own process: `K` the controller-runtime
//!   operator of `tests/peers/controller-runtime` as Kubebuilder scaffolds it (its defaults: one
//!   worker, the priority queue, no client-side rate limit), `L` the same with as many workers
//!   as the host (16), `P` the kopf operator of `tests/peers/kopf` (kopf's defaults); the peers
//!   are built by `scripts/peers.sh`, whose output names them (`WASMOP_PEER_CONTROLLER_RUNTIME`,
//!   `WASMOP_PEER_KOPF`); `Z` the control plane's own ceiling: no controller, the bench itself
//!   makes exactly the writes each parent needs (the CR create, the Deployment apply, the
//!   status patch) with the same calls in flight; with Pods (`SIZE` > 0) the one status patch
//!   waits until the Deployment is available and names the Pods, read from a Deployment and a
//!   Pod watch (`support/limit.rs`): the pace of the Pod lifecycle itself; e.g. `RUNS=BA`;
//! - `INFLIGHT` (default 32): concurrent create calls in the bulk phase;
//! - `WARMUP` (default 1): how many times the first of `RUNS` runs first, unreported: the
//!   first run after the machine was idle read slower than the same run later in the same
//!   sequence (the control plane's CPU for the same requests up to 1.7×), which would always
//!   count against the run listed first;
//! - `QUIET` (default 10): seconds to wait after the controller starts, so
//!   kube-controller-manager's own start-up (garbage collector and quota discovery of the
//!   new CRD, which LISTs Memcacheds) is over before the clock starts;
//! - `GATHER_PROBE=1`: instead of the runs, time the host's `Request::gather` (per reconcile)
//!   and `parents_of_change` for a Pod event against in-memory caches of growing size;
//! - `ROLLOUT=S` (default unset: no rollout): the rollout workload — once the bulk has
//!   converged (and kube-controller-manager caught up), every bulk parent's `spec.size` is
//!   patched to `S` (`INFLIGHT` patches in flight) and the clock runs until every one is
//!   re-converged: `Available=True` for the new generation, `status.nodes` naming `S` Pods and
//!   the Deployment at `S` replicas. Reported: time, parents/s, the controller's CPU and writes
//!   per parent over the rollout, peak RSS; e.g. `SIZE=3 ROLLOUT=4` (one more Pod per parent);
//! - `IDLE=SECONDS` (default unset: no idle window): the idle workload — afterwards, the
//!   converged parents are left alone for that long; reported: the controller's CPU per minute
//!   and the API requests over the window, its RSS at the end. The host then runs with its
//!   default resync period (as users get it), the other runs as their frameworks default.
//!   A run with `ROLLOUT` or `IDLE` prints the figure lines of those workloads only; run Z
//!   (no controller) skips the idle window, and makes the rollout's writes itself with Pods
//!   (the Deployment at the new size, then one status once it is available; each
//!   controller's rollout throughput is also printed as a fraction of it), not without;
//! - `FOLD_WINDOW` (e.g. `0s`, `500ms`; default unset: the host's default): the host's fold
//!   window (`wasmop run --fold-window`) in runs A, E and H;
//! - `RUST_LOG` (default `warn`): e.g. `wasmop=debug` for the host's reconcile lines;
//!   `SPAN_TIMES=1` adds the busy/idle time of each closed span (the host's `reconcile`).
//!
//! Every run gets a fresh `ControlPlane` (Kubernetes 1.37 unless `WASMOP_K8S_VERSION` says
//! otherwise, with simulated Nodes, on loopback), installs `crds/memcached.yaml`, starts its controller on a dedicated
//! 2-worker tokio runtime (threads named `ctrl`, with its own client), then measures:
//!
//! 1. bulk: `N` CRs with `size: 0` (so kube-controller-manager starts no Pods: the comparison is
//!    about the controllers) created with `INFLIGHT` calls in flight; the clock starts when the
//!    creates begin and stops when every CR has a Deployment with `replicas: 0` and an
//!    `Available` condition whose `observedGeneration` equals the CR's generation (seen by a
//!    watch of the bench; the instant of the event completing the last CR is the stop time).
//!    Also reported: when every CR has `Available=True` — for the native runs and the peers
//!    the status of the second reconcile, the one that sees the Deployment (the first one runs
//!    before it exists); the host asks its plugin again once it has created the Deployment, so
//!    its first status is already `Available=True`;
//! 2. settle: until kube-controller-manager has processed every Deployment
//!    (`status.observedGeneration == metadata.generation`), so the next phase is idle;
//! 3. latency: `LAT` CRs, one at a time: create call returned → the bench's Deployment watch
//!    sees the Deployment, → converged, → `Available=True`.
//!
//! It also reports the API requests of each phase (deltas of kube-apiserver's
//! `apiserver_request_total`), the CPU time of each process / thread group, and the machine's
//! pace over the bulk and the rollout (`wasmop_e2e::pace`: how fast the VM ran them).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use wasmop::controller::ControllerConfig;
use wasmop::policy::HostPolicy;
use wasmop::runtime::EPOCH_THREAD;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{Host, apply_file};
use wasmop_e2e::machine::MachineTicks;
use wasmop_e2e::pace::{Pace, PaceProbe};
use wasmop_e2e::plugins::{plugin, workspace};

use wasmop_e2e::figure;
#[path = "support/limit.rs"]
mod limit;
#[path = "support/native.rs"]
mod native;
#[path = "support/process.rs"]
mod process;

use figure::{Goal, figure};
use native::{NativeCounts, NativeCtx, NativeOptions, start_native};
use process::{env_usize, get, host_binary, memcached_resource, until_host_ready};

const NAMESPACE: &str = "default";
/// How often the machine's pace is sampled (each sample costs about 2 ms of one core's time).
const PACE_PERIOD: Duration = Duration::from_millis(500);

/// The probe of the machine's pace through the whole bench (`wasmop_e2e::pace`): how fast the
/// VM ran each run's bulk and rollout, printed beside their figures.
fn pace_probe() -> &'static PaceProbe {
    static PROBE: std::sync::OnceLock<PaceProbe> = std::sync::OnceLock::new();
    PROBE.get_or_init(|| PaceProbe::start(PACE_PERIOD))
}

/// `spec.size` of every CR: env `SIZE`, default 0 (no Pods: kube-controller-manager only adds a
/// ReplicaSet). With `SIZE=3` every parent runs 3 Pods on the simulated Nodes, and its Pod
/// events fan back into reconciles, as in a real operator.
fn size() -> i32 {
    static SIZE: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *SIZE.get_or_init(|| env_usize("SIZE", 0).ok().and_then(|s| i32::try_from(s).ok()).unwrap_or(0))
}
/// The rollout workload's new `spec.size`: env `ROLLOUT` (unset: no rollout phase). After the
/// bulk has converged, every parent's size is patched to it and the bench times until every
/// parent is re-converged at the new generation (see [`Seen::check`]).
fn rollout_size() -> Option<i32> {
    static ROLLOUT: std::sync::OnceLock<Option<i32>> = std::sync::OnceLock::new();
    *ROLLOUT
        .get_or_init(|| std::env::var("ROLLOUT").ok().filter(|v| !v.trim().is_empty()).and_then(|v| v.trim().parse::<i32>().ok()))
}
/// The idle workload's window, seconds: env `IDLE` (unset or 0: no idle phase).
fn idle_window() -> Option<Duration> {
    static IDLE: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
    *IDLE.get_or_init(|| env_usize("IDLE", 0).ok().filter(|s| *s > 0).map(|s| Duration::from_secs(s as u64)))
}
/// `FOLD_WINDOW` as given (checked at start), `None` unset.
fn fold_window_arg() -> Option<String> {
    std::env::var("FOLD_WINDOW").ok().filter(|s| !s.is_empty())
}
/// The host's fold window: `FOLD_WINDOW`, else its default.
fn fold_window() -> Result<Duration> {
    match fold_window_arg() {
        Some(s) => wasmop::units::parse_duration(&s).map_err(|e| anyhow::anyhow!("FOLD_WINDOW: {e}")),
        None => Ok(ControllerConfig::default().fold_window),
    }
}
const BULK_TIMEOUT: Duration = Duration::from_secs(900);
/// How long the rollout may take before the run fails.
const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(900);
const SETTLE_TIMEOUT: Duration = Duration::from_secs(600);
const ONE_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause after each latency sample converges, so the trailing work (the controller's
/// second reconcile, kube-controller-manager's ReplicaSet) is done before the next create.
const LAT_GAP: Duration = Duration::from_millis(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    Host,
    Native,
    /// Run B plus `predicates::generation` on the Memcached stream (status-only changes, e.g.
    /// its own status patches, do not trigger a reconcile — as the host filters them).
    NativeGeneration,
    /// Run C writing the status the host writes: the plugin's `Available` condition plus the
    /// host's own `Reconciled` condition (every parent the host reconciles carries it).
    NativeSameStatus,
    /// Run A with the host policy's `reconciledCondition: onFailure`: the parents carry only
    /// the plugin's status while reconciles succeed, as in run C.
    HostOnFailure,
    /// Run A as users run it: `wasmop run` in a process of its own.
    HostProcess,
    /// The controller-runtime (Kubebuilder) operator with its scaffold's options.
    ControllerRuntime,
    /// The controller-runtime operator with the host's number of workers.
    ControllerRuntimeWorkers,
    /// The kopf operator.
    Kopf,
    /// No controller: the bench makes each parent's writes itself (the control plane's ceiling).
    Limit,
}

impl Which {
    fn label(self) -> &'static str {
        match self {
            Self::Host => "A wasmop host",
            Self::Native => "B native kube-rs",
            Self::NativeGeneration => "C native + generation predicate",
            Self::NativeSameStatus => "D native, C + the host's Reconciled condition",
            Self::HostOnFailure => "E wasmop host, policy reconciledCondition: onFailure",
            Self::HostProcess => "H wasmop host, its own process (wasmop run)",
            Self::ControllerRuntime => "K controller-runtime (Kubebuilder defaults: 1 worker)",
            Self::ControllerRuntimeWorkers => "L controller-runtime, 16 workers",
            Self::Kopf => "P kopf",
            Self::Limit => "Z the limit: the bench writes what each parent needs",
        }
    }

    /// The peer's command line, from the paths `scripts/peers.sh` prints; for run H, the host's
    /// (serving its metrics on `scratch.metrics_port`, its plugin and artifacts under
    /// `scratch.dir`).
    fn peer_command(self, kubeconfig: &std::path::Path, scratch: &Scratch) -> Result<std::process::Command> {
        let from_env = |name: &str| -> Result<PathBuf> {
            std::env::var_os(name).map(PathBuf::from).with_context(|| {
                format!("{name} is not set: run `eval \"$(bash scripts/peers.sh)\"` first (it builds the peers once)")
            })
        };
        let mut command = match self {
            Self::ControllerRuntime | Self::ControllerRuntimeWorkers => {
                let mut c = std::process::Command::new(from_env("WASMOP_PEER_CONTROLLER_RUNTIME")?);
                c.args(["--health-probe-bind-address=0", "--metrics-bind-address=0"]);
                if self == Self::ControllerRuntimeWorkers {
                    c.arg("--max-concurrent-reconciles=16");
                }
                c
            }
            Self::Kopf => {
                let mut c = std::process::Command::new(from_env("WASMOP_PEER_KOPF")?);
                c.args(["run", "--standalone", "--all-namespaces"])
                    .arg(workspace().join("tests/peers/kopf/memcached_operator.py"));
                c
            }
            Self::HostProcess => {
                let mut c = std::process::Command::new(host_binary()?);
                // The idle workload runs the host with its default resync, as in run A.
                let resync = if idle_window().is_some() { "10m" } else { "0s" };
                c.args(["run", "--plugins"])
                    .arg(scratch.dir.join("plugins"))
                    .args(["--metrics-addr", &format!("127.0.0.1:{}", scratch.metrics_port)])
                    .args(["--concurrency", "16", "--resync", resync])
                    .args(fold_window_arg().map(|window| ["--fold-window".to_owned(), window]).into_iter().flatten())
                    .env("WASMOP_CACHE_DIR", scratch.dir.join("cache"))
                    .env("RUST_LOG", std::env::var("HOST_LOG").unwrap_or_else(|_| "warn".into()));
                c
            }
            _ => bail!("{} is not a peer", self.label()),
        };
        command.env("KUBECONFIG", kubeconfig);
        Ok(command)
    }
}

fn main() -> Result<()> {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn,kube_client::client::builder=off".into());
    // SPAN_TIMES=1: a line per closed span with its busy/idle time (e.g. the host's
    // `reconcile` span with RUST_LOG=wasmop=debug).
    let spans = if std::env::var_os("SPAN_TIMES").is_some() {
        tracing_subscriber::fmt::format::FmtSpan::CLOSE
    } else {
        tracing_subscriber::fmt::format::FmtSpan::NONE
    };
    tracing_subscriber::fmt().with_env_filter(filter).with_span_events(spans).with_writer(std::io::stderr).init();
    // The bench's own work (creates, watches) runs on this runtime; each controller under test
    // gets its own (threads `ctrl`), so their CPU time can be told apart.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).thread_name("bench").enable_all().build()?;
    // A FOLD_WINDOW that does not parse fails before any run.
    fold_window()?;
    if std::env::var_os("GATHER_PROBE").is_some() {
        return gather_probe();
    }
    rt.block_on(bench())
}

/// `GATHER_PROBE=1`: time what the host does before every plugin call — `Request::gather`,
/// the request built from the watch cache — with a cache holding K Memcacheds, each with its
/// Deployment, in one namespace, for several K. No cluster involved.
fn gather_probe() -> Result<()> {
    use wasmop::contract::{Kind, Manifest, Object, RelatedKind, Request, Scope};
    use wasmop::objects::MemoryCache;
    let manifest = Manifest {
        name: "memcached".into(),
        version: "0.1.0".into(),
        description: String::new(),
        parent: Kind::new("cache.example.com", "v1alpha1", "Memcached"),
        scope: Scope::Namespaced,
        children: vec![Kind::new("apps", "v1", "Deployment")],
        related: vec![RelatedKind {
            kind: Kind::new("", "v1", "Pod"),
            label_selector: "app=memcached,memcached_cr=$(parent.name)".into(),
        }],
        finalizer: false,
        prune: true,
        adopt_unowned: false,
        config_schema: None,
        webhooks: Vec::new(),
    };
    println!("K Memcacheds and their K Deployments in one namespace, in a MemoryCache:");
    for k in [10usize, 100, 1000, 3000] {
        let mut cache = MemoryCache::default();
        let mut parents = Vec::new();
        for i in 0..k {
            let name = format!("bulk-{i:05}");
            let uid = format!("{i:08x}-0000-4000-8000-{i:012x}");
            let parent = json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
                "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid, "generation": 1, "resourceVersion": "1"},
                "spec": {"size": 0}});
            let mut d = serde_json::to_value(memcached::deployment(&name, Some(NAMESPACE), 0))?;
            d["metadata"]["uid"] = json!(format!("d{i:07x}-0000-4000-8000-{i:012x}"));
            d["metadata"]["ownerReferences"] = json!([{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
                "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true}]);
            d["status"] = json!({"observedGeneration": 1});
            cache.insert(parent.clone()).map_err(|e| anyhow::anyhow!("{e:?}"))?;
            cache.insert(d).map_err(|e| anyhow::anyhow!("{e:?}"))?;
            parents.push(Arc::new(Object::new(parent)));
        }
        let iters = (200_000 / k).clamp(50, 5_000);
        let grants = wasmop::policy::Grants::default();
        let started = Instant::now();
        for i in 0..iters {
            let parent = &parents[i % k];
            // A `MemoryCache` has no owner index: this measures the scan the default
            // `ObjectCache::controlled_by` does (the host's watch cache now indexes by owner).
            let request = Request::gather(
                Arc::clone(parent),
                &wasmop::objects::visible_to(&manifest, &grants, parent.head()),
                &cache,
                true,
            )?;
            assert_eq!(request.children.len(), 1);
        }
        let per_call = started.elapsed().as_secs_f64() * 1e6 / iters as f64;
        // What the watch task does for each Pod event: map it to the parents whose related
        // selector matches (every parent of the namespace is tried).
        let pod_kind = Kind::new("", "v1", "Pod");
        let pod = Object::new(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bulk-00000-abcde",
            "namespace": NAMESPACE, "labels": {"app": "memcached", "memcached_cr": "bulk-00000"}}}));
        let started = Instant::now();
        for _ in 0..iters {
            let keys = wasmop::controller::parents_of_change(&manifest, &cache, &pod_kind, None, Some(&pod));
            assert_eq!(keys.len(), 1);
        }
        let per_event = started.elapsed().as_secs_f64() * 1e6 / iters as f64;
        println!("  K = {k:>5}: gather {per_call:>9.1} µs per reconcile; parents_of_change {per_event:>9.1} µs per Pod event");
    }
    Ok(())
}

async fn bench() -> Result<()> {
    let n = env_usize("N", 1000)?;
    let lat = env_usize("LAT", 50)?;
    let inflight = env_usize("INFLIGHT", 32)?.max(1);
    let runs: Vec<Which> = std::env::var("RUNS")
        .unwrap_or_else(|_| "AB".into())
        .chars()
        .filter_map(|c| match c.to_ascii_uppercase() {
            'A' => Some(Which::Host),
            'B' => Some(Which::Native),
            'C' => Some(Which::NativeGeneration),
            'D' => Some(Which::NativeSameStatus),
            'E' => Some(Which::HostOnFailure),
            'H' => Some(Which::HostProcess),
            'K' => Some(Which::ControllerRuntime),
            'L' => Some(Which::ControllerRuntimeWorkers),
            'P' => Some(Which::Kopf),
            'Z' => Some(Which::Limit),
            _ => None,
        })
        .collect();
    if runs.is_empty() {
        bail!("RUNS must name A, B, C, D, E, H, K, L, P and/or Z");
    }
    if let Ok(v) = std::env::var("ROLLOUT")
        && !v.trim().is_empty()
    {
        match rollout_size() {
            None => bail!("ROLLOUT={v:?} is not a size (the new spec.size of every parent)"),
            Some(to) if to < 0 => bail!("ROLLOUT={to}: a size is not negative"),
            Some(to) if to == size() => bail!("ROLLOUT={to} is the size the parents already have (SIZE={})", size()),
            Some(_) => {}
        }
    }
    env_usize("IDLE", 0)?;
    eprintln!(
        "[converge] N={n} LAT={lat} INFLIGHT={inflight} RUNS={runs:?} SIZE={} ROLLOUT={:?} IDLE={:?}; building the memcached plugin…",
        size(),
        rollout_size(),
        idle_window()
    );
    let wasm = tokio::task::spawn_blocking(|| plugin("memcached", "wasm32-wasip2")).await?;

    for round in 0..env_usize("WARMUP", 1)? {
        eprintln!("\n[converge] ===== warm-up {} (not reported): run {} =====", round + 1, runs[0].label());
        run(runs[0], &wasm, n, lat, inflight).await.with_context(|| format!("warm-up run {}", runs[0].label()))?;
    }
    let mut results = Vec::new();
    for which in runs {
        eprintln!("\n[converge] ===== run {} =====", which.label());
        let r = run(which, &wasm, n, lat, inflight).await.with_context(|| format!("run {}", which.label()))?;
        r.print();
        results.push(r);
    }
    print_summary(&results, n, lat, inflight);
    if rollout_size().is_none() && idle_window().is_none() {
        print_figures(&results, n);
        print_peer_figures(&results, n);
    } else {
        // The bulk of such a run is the one `converge-pods` / `converge-10k` measure: only the
        // figure lines of the workloads asked for, so the summary has no duplicate rows.
        print_workload_summary(&results);
        print_workload_figures(&results, n);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// One run
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
struct RunResult {
    which: Which,
    n: usize,
    /// Creates began → last CR converged.
    converge: Duration,
    /// Creates began → last create call returned.
    creates: Duration,
    /// Converged → kube-controller-manager done with every Deployment.
    settle: Duration,
    /// Per latency sample: create call duration, returned → Deployment seen, returned → converged.
    create_call: Vec<Duration>,
    to_deployment: Vec<Duration>,
    to_converged: Vec<Duration>,
    /// Per latency sample: returned → Available=True.
    to_settled: Vec<Duration>,
    /// Creates began → last CR with Available=True.
    settled: Duration,
    requests_bulk: BTreeMap<String, f64>,
    requests_settle: BTreeMap<String, f64>,
    requests_lat: BTreeMap<String, f64>,
    cpu_bulk: BTreeMap<String, f64>,
    /// The machine's pace during the bulk phase.
    pace_bulk: Option<Pace>,
    /// What the controller itself counted during the bulk phase ([`controller_work`]).
    work_bulk: BTreeMap<String, f64>,
    native: Option<NativeCounts>,
    /// A process's (run H's or a peer's) peak resident memory from the bulk's start to the end
    /// of the run and its resident memory at the end, MiB (in-process controllers share the
    /// bench's process: not measured here).
    rss: Option<(f64, f64)>,
    /// The rollout workload (`ROLLOUT`), when it ran.
    rollout: Option<RolloutResult>,
    /// The idle workload (`IDLE`), when it ran.
    idle: Option<IdleResult>,
}

/// The rollout workload of one run: every parent's size changed at once, until every parent is
/// re-converged ([`Seen::rolled_at`]).
#[derive(Debug)]
struct RolloutResult {
    /// The parents' size before and after.
    from: i32,
    to: i32,
    /// Parents changed (the bulk's).
    n: usize,
    /// First size patch sent → last parent re-converged.
    time: Duration,
    /// First size patch sent → last patch call returned.
    patches: Duration,
    requests: BTreeMap<String, f64>,
    cpu: BTreeMap<String, f64>,
    work: BTreeMap<String, f64>,
    /// The machine's pace during the rollout.
    pace: Option<Pace>,
    /// Peak resident memory during the rollout, MiB: the peer's process, or the bench's own
    /// process for an in-process controller (the controller plus the bench's watches: an upper
    /// bound of the controller's).
    peak_rss: Option<f64>,
}

/// The idle workload of one run: the converged parents left alone for a window.
#[derive(Debug)]
struct IdleResult {
    window: Duration,
    requests: BTreeMap<String, f64>,
    cpu: BTreeMap<String, f64>,
    work: BTreeMap<String, f64>,
    /// Resident memory at the end of the window, MiB (the same processes as
    /// [`RolloutResult::peak_rss`]).
    rss_end: Option<f64>,
}

/// (VmHWM, VmRSS) of process `pid` (`None`: this process), MiB.
fn process_rss(pid: Option<u32>) -> Option<(f64, f64)> {
    let path = pid.map_or_else(|| "/proc/self/status".to_owned(), |p| format!("/proc/{p}/status"));
    let status = std::fs::read_to_string(path).ok()?;
    let field = |name: &str| -> Option<f64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        Some(line.split_whitespace().nth(1)?.parse::<f64>().ok()? / 1024.0)
    };
    Some((field("VmHWM:")?, field("VmRSS:")?))
}

/// Reset the peak resident memory (VmHWM) of process `pid` (`None`: this process) to its
/// current resident memory, so a later VmHWM is the peak of what follows (Linux's
/// `clear_refs` 5). False when the kernel refuses.
fn reset_peak_rss(pid: Option<u32>) -> bool {
    let path = pid.map_or_else(|| "/proc/self/clear_refs".to_owned(), |p| format!("/proc/{p}/clear_refs"));
    std::fs::write(path, "5").is_ok()
}

enum Running {
    Host(Host),
    Native(tokio::task::JoinHandle<()>, Arc<NativeCtx>),
    Peer(Peer),
    /// The limit run: no controller; with Pods, the bench's one status write per parent
    /// once its Deployment is available.
    Limit(Option<Arc<limit::StatusWriter>>),
}

/// A peer's process (or run H's host); killed when dropped, its scratch directory removed.
struct Peer {
    which: Which,
    child: std::process::Child,
    log: PathBuf,
    scratch: Scratch,
}

/// What a peer's process gets of its own: a directory (run H's plugins directory with the
/// memcached component, and its artifact cache) and a free port for its metrics.
struct Scratch {
    dir: PathBuf,
    metrics_port: u16,
}

/// How long run H's host may take to load its plugin and sync its caches.
const HOST_READY_TIMEOUT: Duration = Duration::from_secs(60);

impl Peer {
    fn start(which: Which, kubeconfig: &std::path::Path, wasm: &std::path::Path) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!("wasmop-converge-peer-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("plugins"))?;
        if which == Which::HostProcess {
            std::fs::copy(wasm, dir.join("plugins/memcached.wasm")).context("copying the memcached plugin")?;
        }
        let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let scratch = Scratch { dir, metrics_port };
        let log = scratch.dir.join("log");
        let file = std::fs::File::create(&log)?;
        let child = which
            .peer_command(kubeconfig, &scratch)?
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .with_context(|| format!("starting {}", which.label()))?;
        eprintln!("[converge] {} is process {}, its log {}", which.label(), child.id(), log.display());
        Ok(Self { which, child, log, scratch })
    }

    /// Run H: wait until the host is Ready (its plugin loaded, its caches synced). The other
    /// peers are given the `QUIET` pause, as they have no such probe here.
    ///
    /// # Errors
    /// The process exits, or is not Ready within [`HOST_READY_TIMEOUT`].
    async fn wait_ready(&mut self) -> Result<()> {
        if self.which != Which::HostProcess {
            return Ok(());
        }
        let port = self.scratch.metrics_port;
        until_host_ready(port, 1, HOST_READY_TIMEOUT, Duration::from_millis(100), || self.check())
            .await
            .with_context(|| format!("{} (its log: {})", self.which.label(), self.log.display()))
    }

    /// Run H's `/metrics` page; `None` for the other peers or when it cannot be read.
    fn metrics(&self) -> Option<String> {
        (self.which == Which::HostProcess)
            .then(|| get(self.scratch.metrics_port, "/metrics").ok())
            .flatten()
            .map(|(_, page)| page)
    }

    /// Fails if the process has exited, with the end of its log.
    fn check(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            bail!("the peer exited ({status}); its log ends:\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
        }
        Ok(())
    }

    /// (VmHWM, VmRSS) of the process, MiB.
    fn rss(&self) -> Option<(f64, f64)> {
        process_rss(Some(self.child.id()))
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.scratch.dir);
    }
}

impl Running {
    /// The process id whose CPU is the controller's, for a peer.
    fn peer_pid(&self) -> Option<u32> {
        match self {
            Running::Peer(p) => Some(p.child.id()),
            _ => None,
        }
    }
}

async fn run(which: Which, wasm: &std::path::Path, n: usize, lat: usize, inflight: usize) -> Result<RunResult> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/memcached.yaml")).await?;
    if which == Which::HostProcess {
        // The host reports on its plugins in WasmPlugin objects, as where users run it.
        apply_file(&client, &workspace().join("crds/wasmplugin.yaml")).await?;
    }
    let ar = memcached_resource();

    // The controller under test, on its own runtime with its own client.
    let ctrl_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).thread_name("ctrl").enable_all().build()?;
    let started = Instant::now();
    let mut running = {
        let kubeconfig = cp.kubeconfig_path();
        let wasm: PathBuf = wasm.to_owned();
        let ar = ar.clone();
        ctrl_rt
            .spawn(async move {
                // Built on the controller's runtime: the client's buffer task runs there.
                let ctrl_client = client_from(&kubeconfig).await?;
                match which {
                    Which::Host | Which::HostOnFailure => {
                        let policy = if which == Which::HostOnFailure {
                            HostPolicy::from_yaml("defaults: {reconciledCondition: onFailure}")?
                        } else {
                            HostPolicy::default()
                        };
                        // The idle workload measures what a controller does on its own while nothing
                        // changes: the host then resyncs as users get it (its default period).
                        let resync = if idle_window().is_some() { ControllerConfig::default().resync } else { None };
                        let fold_window = fold_window()?;
                        let config =
                            ControllerConfig { concurrency: 16, resync, policy, fold_window, ..ControllerConfig::default() };
                        Ok::<_, anyhow::Error>(Running::Host(Host::start(ctrl_client, &[&wasm], config).await?))
                    }
                    Which::Native | Which::NativeGeneration | Which::NativeSameStatus => {
                        let options = NativeOptions {
                            generation_predicate: which != Which::Native,
                            reconciled_condition: which == Which::NativeSameStatus,
                        };
                        let (task, ctx) = start_native(ctrl_client, ar, options).await?;
                        Ok(Running::Native(task, ctx))
                    }
                    Which::Limit if size() == 0 => Ok(Running::Limit(None)),
                    Which::Limit => {
                        let crs = Api::namespaced_with(ctrl_client.clone(), NAMESPACE, &ar);
                        let writer = limit::StatusWriter::start(&ctrl_client, crs, NAMESPACE, inflight);
                        Ok(Running::Limit(Some(Arc::new(writer))))
                    }
                    peer => Ok(Running::Peer(Peer::start(peer, &kubeconfig, &wasm)?)),
                }
            })
            .await??
    };
    if let Running::Peer(peer) = &mut running {
        peer.wait_ready().await?;
    }
    eprintln!("[converge] controller started in {:.2?}", started.elapsed());

    let tracker = Tracker::start(client.clone(), ar.clone()).await?;
    let crs: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &ar);
    // kube-controller-manager starts its controllers (garbage collector, quota) in the first
    // seconds and discovers the new CRD: let that pass, so both runs start from a quiet plane.
    tokio::time::sleep(Duration::from_secs(env_usize("QUIET", 10)? as u64)).await;

    // ---- bulk ----
    let names: Vec<String> = (0..n).map(|i| format!("bulk-{i:05}")).collect();
    let metrics0 = request_counts(&client).await?;
    let work0 = controller_work(&running);
    let cpu0 = cpu_snapshot(running.peer_pid());
    let pace0 = pace_probe().mark();
    // A process's peak is the bulk's and what follows, not its start-up's (run H compiles its
    // plugin when it starts, which a restart with the artifact cache does not).
    if let Some(pid) = running.peer_pid()
        && !reset_peak_rss(Some(pid))
    {
        eprintln!("[converge]   (the kernel refused to reset the peak RSS: the bulk's peak includes the start-up)");
    }
    let limit_writer = match &running {
        Running::Limit(writer) => writer.clone(),
        _ => None,
    };
    let t0 = Instant::now();
    let creates = futures::stream::iter(names.iter().cloned())
        .map(|name| {
            let crs = crs.clone();
            let ar = ar.clone();
            let client = client.clone();
            let limit_writer = limit_writer.clone();
            async move {
                let cr = crs
                    .create(&PostParams::default(), &memcached_cr(&name, &ar))
                    .await
                    .with_context(|| format!("creating {name}"))?;
                if which == Which::Limit {
                    write_what_a_controller_writes(&client, &crs, &cr, limit_writer.as_deref())
                        .await
                        .with_context(|| format!("writing for {name}"))?;
                }
                Ok::<_, anyhow::Error>(())
            }
        })
        .buffer_unordered(inflight)
        .try_for_each(|_| async { Ok(()) });
    let mut progress = tokio::time::interval(Duration::from_secs(5));
    progress.tick().await;
    tokio::pin!(creates);
    let mut creates_done: Option<Duration> = None;
    loop {
        tokio::select! {
            r = &mut creates, if creates_done.is_none() => { r?; creates_done = Some(t0.elapsed()); }
            _ = progress.tick() => {
                if let Running::Peer(p) = &mut running {
                    p.check()?;
                }
                eprintln!("[converge]   {:>5.1} s: {} / {n} converged, {} Available=True", t0.elapsed().as_secs_f64(),
                    tracker.converged_count(&names), tracker.settled_count(&names));
            }
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
        if creates_done.is_some() && tracker.converged_count(&names) == n && tracker.settled_count(&names) == n {
            break;
        }
        if t0.elapsed() > BULK_TIMEOUT {
            bail!("not converged after {BULK_TIMEOUT:?}: {} / {n}", tracker.converged_count(&names));
        }
    }
    let last = tracker.last_converged(&names).expect("all converged");
    let converge = last.saturating_duration_since(t0);
    let settled = tracker.last_settled(&names).expect("all settled").saturating_duration_since(t0);
    let cpu1 = cpu_snapshot(running.peer_pid());
    let pace_bulk = pace_probe().since(pace0);
    let work1 = controller_work(&running);
    let metrics1 = request_counts(&client).await?;
    eprintln!(
        "[converge]   all {n} converged in {:.3} s, Available=True in {:.3} s",
        converge.as_secs_f64(),
        settled.as_secs_f64()
    );
    verify_by_listing(&client, &ar, &names).await?;
    print_sample_objects(&client, &ar, &names[0]).await;

    // ---- settle: kube-controller-manager catches up (ReplicaSets, Deployment status) ----
    // (Skipped without a latency phase: a bulk-only run needs no idle system afterwards.)
    let s0 = Instant::now();
    let workloads = rollout_size().is_some() || idle_window().is_some();
    while (lat > 0 || workloads) && tracker.deployments_observed(&names) < n {
        if s0.elapsed() > SETTLE_TIMEOUT {
            bail!("kube-controller-manager did not catch up within {SETTLE_TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let settle = s0.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await; // trailing reconciles of the controller
    let metrics2 = request_counts(&client).await?;
    eprintln!("[converge]   kube-controller-manager caught up {:.1} s after convergence", settle.as_secs_f64());

    // ---- latency, one at a time on the idle system ----
    let mut create_call = Vec::new();
    let mut to_deployment = Vec::new();
    let mut to_converged = Vec::new();
    let mut to_settled = Vec::new();
    for i in 0..lat {
        let name = format!("lat-{i:03}");
        let before = Instant::now();
        let cr = crs.create(&PostParams::default(), &memcached_cr(&name, &ar)).await?;
        let returned = Instant::now();
        if which == Which::Limit {
            write_what_a_controller_writes(&client, &crs, &cr, limit_writer.as_deref()).await?;
        }
        let converged_at = tracker.wait_converged(&name, ONE_TIMEOUT).await?;
        let seen = tracker.deployment_seen(&name).expect("a converged CR has a Deployment");
        let deadline = Instant::now() + ONE_TIMEOUT;
        let settled_at = loop {
            if let Some(at) = tracker.settled(&name) {
                break at;
            }
            if Instant::now() > deadline {
                bail!("{name}: no Available=True within {ONE_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        to_settled.push(settled_at.saturating_duration_since(returned));
        create_call.push(returned - before);
        to_deployment.push(seen.saturating_duration_since(returned));
        to_converged.push(converged_at.saturating_duration_since(returned));
        tokio::time::sleep(LAT_GAP).await;
    }
    let metrics3 = request_counts(&client).await?;

    // ---- the rollout and idle workloads, on the converged parents ----
    // The run's peak before the rollout resets it (the rollout reports its own peak).
    let peak_before = running.peer_pid().and_then(|pid| process_rss(Some(pid))).map(|(peak, _)| peak);
    let phase = PhaseCtx {
        which,
        client: &client,
        crs: &crs,
        tracker: &tracker,
        names: &names,
        inflight,
        limit: limit_writer.as_deref(),
    };
    let rollout = match rollout_size() {
        Some(to) if which != Which::Limit || phase.limit.is_some() => Some(rollout_phase(&phase, &mut running, to).await?),
        _ => None,
    };
    let idle = match idle_window() {
        Some(window) if which != Which::Limit => Some(idle_phase(&phase, &mut running, window).await?),
        _ => None,
    };
    if which == Which::Limit && idle_window().is_some() {
        eprintln!("[converge]   run Z runs no controller: no idle workload (skipped)");
    }
    if which == Which::Limit && phase.limit.is_none() && rollout_size().is_some() {
        eprintln!("[converge]   run Z without Pods writes no status after a resize: no rollout (skipped)");
    }

    let mut rss = None;
    let native = match running {
        Running::Host(host) => {
            let _ = ctrl_rt.spawn(async move { host.manager.shutdown().await }).await;
            None
        }
        Running::Native(task, ctx) => {
            task.abort();
            Some(ctx.counts())
        }
        Running::Peer(peer) => {
            rss = peer.rss().map(|(peak, end)| (peak.max(peak_before.unwrap_or(0.0)), end));
            drop(peer);
            None
        }
        Running::Limit(_) => None,
    };
    tracker.stop();
    ctrl_rt.shutdown_background();
    drop(cp);

    Ok(RunResult {
        which,
        n,
        converge,
        creates: creates_done.unwrap_or_default(),
        settle,
        create_call,
        to_deployment,
        to_converged,
        to_settled,
        settled,
        requests_bulk: diff(&metrics0, &metrics1),
        requests_settle: diff(&metrics1, &metrics2),
        requests_lat: diff(&metrics2, &metrics3),
        cpu_bulk: diff(&cpu0, &cpu1),
        pace_bulk,
        work_bulk: diff(&work0, &work1),
        native,
        rss,
        rollout,
        idle,
    })
}

/// What the rollout and idle workloads of a run work on.
struct PhaseCtx<'a> {
    which: Which,
    client: &'a kube::Client,
    crs: &'a Api<DynamicObject>,
    tracker: &'a Tracker,
    /// The bulk's parents, all converged.
    names: &'a [String],
    inflight: usize,
    /// The limit run's status writer (run Z with Pods): the rollout makes the limit's writes.
    limit: Option<&'a limit::StatusWriter>,
}

/// The rollout workload: patch every parent's `spec.size` to `to` (`inflight` patches in
/// flight) and wait until every one is re-converged ([`Seen::rolled_at`]).
///
/// # Errors
/// A patch fails, the peer exits, the rollout takes longer than [`ROLLOUT_TIMEOUT`], or a list
/// afterwards disagrees with the watch.
async fn rollout_phase(ctx: &PhaseCtx<'_>, running: &mut Running, to: i32) -> Result<RolloutResult> {
    let n = ctx.names.len();
    eprintln!("[converge]   rollout: every parent's size {} → {to}", size());
    let pid = running.peer_pid();
    let rss_reset = reset_peak_rss(pid);
    if !rss_reset {
        eprintln!("[converge]   (the kernel refused to reset the peak RSS: the rollout's peak is the run's)");
    }
    let metrics0 = request_counts(ctx.client).await?;
    let work0 = controller_work(running);
    let cpu0 = cpu_snapshot(pid);
    let pace0 = pace_probe().mark();
    ctx.tracker.start_rollout(to);
    let t0 = Instant::now();
    let patch = json!({"spec": {"size": to}});
    let patches = futures::stream::iter(ctx.names.iter().cloned())
        .map(|name| {
            let (crs, patch) = (ctx.crs.clone(), &patch);
            async move {
                let cr = crs
                    .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .with_context(|| format!("resizing {name}"))?;
                // The limit makes the writes a resize needs: the Deployment at the new size, and
                // (its writer, once the Pods are available) the status.
                if let Some(writer) = ctx.limit {
                    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), NAMESPACE);
                    let deployment = limit_deployment(&cr, to)?;
                    deployments.patch(&name, &PatchParams::apply("limit").force(), &Patch::Apply(&deployment)).await?;
                    let generation = cr.metadata.generation.context("a parent has a generation")?;
                    writer.expect(&name, generation, usize::try_from(to).unwrap_or(0));
                }
                Ok::<_, anyhow::Error>(())
            }
        })
        .buffer_unordered(ctx.inflight)
        .try_for_each(|_| async { Ok(()) });
    let mut progress = tokio::time::interval(Duration::from_secs(5));
    progress.tick().await;
    tokio::pin!(patches);
    let mut patches_done: Option<Duration> = None;
    loop {
        tokio::select! {
            r = &mut patches, if patches_done.is_none() => { r?; patches_done = Some(t0.elapsed()); }
            _ = progress.tick() => {
                if let Running::Peer(p) = running {
                    p.check()?;
                }
                eprintln!("[converge]   {:>5.1} s: {} / {n} re-converged at size {to}", t0.elapsed().as_secs_f64(),
                    ctx.tracker.rolled_count(ctx.names));
            }
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
        if patches_done.is_some() && ctx.tracker.rolled_count(ctx.names) == n {
            break;
        }
        if t0.elapsed() > ROLLOUT_TIMEOUT {
            bail!("not re-converged after {ROLLOUT_TIMEOUT:?}: {} / {n}", ctx.tracker.rolled_count(ctx.names));
        }
    }
    let time = ctx.tracker.last_rolled(ctx.names).expect("all re-converged").saturating_duration_since(t0);
    let cpu1 = cpu_snapshot(pid);
    let pace = pace_probe().since(pace0);
    let work1 = controller_work(running);
    let metrics1 = request_counts(ctx.client).await?;
    let peak_rss = if rss_reset { process_rss(pid).map(|(peak, _)| peak) } else { None };
    eprintln!("[converge]   all {n} re-converged at size {to} in {:.3} s ({})", time.as_secs_f64(), ctx.which.label());
    verify_rollout_by_listing(ctx, to).await?;
    // The trailing work of the rollout (kube-controller-manager's ReplicaSet status, the
    // controller's last reconciles) is over before anything else is measured.
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(RolloutResult {
        from: size(),
        to,
        n,
        time,
        patches: patches_done.unwrap_or_default(),
        requests: diff(&metrics0, &metrics1),
        cpu: diff(&cpu0, &cpu1),
        work: diff(&work0, &work1),
        pace,
        peak_rss,
    })
}

/// Check the watch's verdict on the rollout with plain lists: every parent at the new size,
/// `Available=True` for its generation, `status.nodes` naming `to` Pods, its Deployment with
/// `to` replicas.
///
/// # Errors
/// A list fails or finds a parent that is not re-converged.
async fn verify_rollout_by_listing(ctx: &PhaseCtx<'_>, to: i32) -> Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    let crs: HashMap<String, DynamicObject> =
        ctx.crs.list(&ListParams::default()).await?.items.into_iter().map(|o| (o.name_any(), o)).collect();
    let deployments: HashMap<String, Deployment> =
        deployments.list(&ListParams::default()).await?.items.into_iter().map(|o| (o.name_any(), o)).collect();
    let bad = ctx
        .names
        .iter()
        .filter(|name| {
            let cr_ok = crs.get(*name).is_some_and(|cr| {
                available_observed_generation(cr) == cr.metadata.generation
                    && available_condition(cr).is_some_and(|c| c["status"] == "True")
                    && cr.data.pointer("/spec/size").and_then(Value::as_i64) == Some(i64::from(to))
                    && cr.data.pointer("/status/nodes").and_then(Value::as_array).map_or(0, Vec::len)
                        == usize::try_from(to).unwrap_or(0)
            });
            let d_ok = deployments.get(*name).is_some_and(|d| d.spec.as_ref().and_then(|s| s.replicas) == Some(to));
            !(cr_ok && d_ok)
        })
        .count();
    if bad > 0 {
        bail!("the watch said re-converged, but listing finds {bad} parents not re-converged at size {to}");
    }
    Ok(())
}

/// The idle workload: leave the converged parents alone for `window` and measure what the
/// controller does meanwhile (resyncs, heartbeats, leases): its CPU, the API requests, its
/// resident memory at the end.
///
/// # Errors
/// The peer exits during the window, or the API server's metrics cannot be read.
async fn idle_phase(ctx: &PhaseCtx<'_>, running: &mut Running, window: Duration) -> Result<IdleResult> {
    eprintln!("[converge]   idle: {} converged parents left alone for {:.0} s", ctx.names.len(), window.as_secs_f64());
    let pid = running.peer_pid();
    let metrics0 = request_counts(ctx.client).await?;
    let work0 = controller_work(running);
    let cpu0 = cpu_snapshot(pid);
    let t0 = Instant::now();
    while t0.elapsed() < window {
        tokio::time::sleep((window - t0.elapsed()).min(Duration::from_secs(5))).await;
        if let Running::Peer(p) = running {
            p.check()?;
        }
    }
    let cpu1 = cpu_snapshot(pid);
    let work1 = controller_work(running);
    let metrics1 = request_counts(ctx.client).await?;
    let window = t0.elapsed();
    Ok(IdleResult {
        window,
        requests: diff(&metrics0, &metrics1),
        cpu: diff(&cpu0, &cpu1),
        work: diff(&work0, &work1),
        rss_end: process_rss(pid).map(|(_, rss)| rss),
    })
}

async fn client_from(kubeconfig: &std::path::Path) -> Result<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

/// The limit run's writes for the just-created `cr`: its Deployment (server-side apply, owned
/// by it) and its status with `Available=True` for its generation — what a controller that
/// needed no read and no second reconcile would write. With Pods (`writer`), the status is
/// the writer's, once the Deployment is available.
async fn write_what_a_controller_writes(
    client: &kube::Client,
    crs: &Api<DynamicObject>,
    cr: &DynamicObject,
    writer: Option<&limit::StatusWriter>,
) -> Result<()> {
    let name = cr.name_any();
    let deployment = limit_deployment(cr, size())?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    deployments.patch(&name, &PatchParams::apply("limit").force(), &Patch::Apply(&deployment)).await?;
    if let Some(writer) = writer {
        let generation = cr.metadata.generation.context("a created parent has a generation")?;
        writer.expect(&name, generation, usize::try_from(size()).unwrap_or(0));
        return Ok(());
    }
    let status = json!({"status": {"nodes": [], "conditions": [{"type": "Available", "status": "True",
        "reason": "MinimumReplicasAvailable", "message": format!("0/{} replicas available", size()),
        "observedGeneration": cr.metadata.generation, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    crs.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await?;
    Ok(())
}

/// The Deployment of `size` replicas the limit run applies for `cr`, owned by it.
fn limit_deployment(cr: &DynamicObject, size: i32) -> Result<Value> {
    let name = cr.name_any();
    let mut deployment = serde_json::to_value(memcached::deployment(&name, Some(NAMESPACE), size))?;
    deployment["apiVersion"] = json!("apps/v1");
    deployment["kind"] = json!("Deployment");
    deployment["metadata"]["ownerReferences"] = json!([{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "name": name, "uid": cr.metadata.uid, "controller": true, "blockOwnerDeletion": true}]);
    Ok(deployment)
}

fn memcached_cr(name: &str, ar: &ApiResource) -> DynamicObject {
    DynamicObject::new(name, ar).within(NAMESPACE).data(json!({"spec": {"size": size()}}))
}

/// Check the watch's verdict with plain lists: every CR converged, every Deployment right.
async fn verify_by_listing(client: &kube::Client, ar: &ApiResource, names: &[String]) -> Result<()> {
    let crs: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, ar);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let crs: HashMap<String, DynamicObject> =
        crs.list(&ListParams::default()).await?.items.into_iter().map(|o| (o.name_any(), o)).collect();
    let deployments: HashMap<String, Deployment> =
        deployments.list(&ListParams::default()).await?.items.into_iter().map(|o| (o.name_any(), o)).collect();
    let mut bad = 0;
    for name in names {
        let cr_ok = crs.get(name).is_some_and(|cr| available_observed_generation(cr) == cr.metadata.generation);
        let d_ok = deployments.get(name).is_some_and(|d| d.spec.as_ref().and_then(|s| s.replicas) == Some(size()));
        if !(cr_ok && d_ok) {
            bad += 1;
        }
    }
    if bad > 0 {
        bail!("the watch said converged, but listing finds {bad} CRs not converged");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The bench's view of the cluster: a watch of Memcacheds and one of Deployments
// ---------------------------------------------------------------------------------------------

/// (spec.replicas, metadata.generation, status.observedGeneration) of a Deployment.
type DeploymentSeen = (Option<i32>, Option<i64>, Option<i64>);

/// What the bench's watch last saw of a Memcached.
#[derive(Debug, Default, Clone, Copy)]
struct CrSeen {
    generation: Option<i64>,
    /// The `Available` condition's `observedGeneration`.
    observed: Option<i64>,
    /// `Available.status == "True"`.
    available: bool,
    /// `spec.size`.
    size: Option<i64>,
    /// How many Pods `status.nodes` names.
    nodes: usize,
}

#[derive(Debug, Default)]
struct Seen {
    crs: HashMap<String, CrSeen>,
    /// name → (spec.replicas, generation, status.observedGeneration)
    deployments: HashMap<String, DeploymentSeen>,
    deployment_seen: HashMap<String, Instant>,
    /// When the CR first met the convergence criterion (Deployment with the right replicas,
    /// an `Available` condition of the current generation, whatever its status).
    converged_at: HashMap<String, Instant>,
    /// When the CR first had, in addition, `Available=True`: the status reflects the
    /// Deployment (the controller's second reconcile, triggered by the Deployment's creation).
    settled_at: HashMap<String, Instant>,
    /// The rollout's new size, once the rollout phase has begun.
    rollout: Option<i32>,
    /// When the CR was first re-converged at the rollout's size: `spec.size` is the new size
    /// (so its generation is the rollout's), the `Available` condition is `True` for that
    /// generation, `status.nodes` names that many Pods and the Deployment has that many replicas.
    rolled_at: HashMap<String, Instant>,
}

impl Seen {
    fn check(&mut self, name: &str, now: Instant) {
        let cr = self.crs.get(name).filter(|c| c.generation.is_some() && c.generation == c.observed).copied();
        let replicas = self.deployments.get(name).and_then(|(r, _, _)| *r);
        if let Some(cr) = cr
            && replicas == Some(size())
        {
            self.converged_at.entry(name.to_owned()).or_insert(now);
            if cr.available {
                self.settled_at.entry(name.to_owned()).or_insert(now);
            }
        }
        if let (Some(to), Some(cr)) = (self.rollout, cr)
            && replicas == Some(to)
            && cr.size == Some(i64::from(to))
            && cr.available
            && cr.nodes == usize::try_from(to).unwrap_or(0)
        {
            self.rolled_at.entry(name.to_owned()).or_insert(now);
        }
    }
}

struct Tracker {
    seen: Arc<Mutex<Seen>>,
    version: tokio::sync::watch::Receiver<u64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

fn available_observed_generation(cr: &DynamicObject) -> Option<i64> {
    available_condition(cr)?.get("observedGeneration")?.as_i64()
}

fn available_condition(cr: &DynamicObject) -> Option<&Value> {
    cr.data.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == "Available")
}

/// Watch `api` in a task: `on_object(object, when seen)` for every applied object, one message
/// on `ready` once the initial list is in; errors are printed and the watch goes on.
fn spawn_watch<K>(
    api: Api<K>,
    what: &'static str,
    ready: tokio::sync::mpsc::Sender<()>,
    mut on_object: impl FnMut(K, Instant) + Send + 'static,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default()).default_backoff().boxed();
        while let Some(event) = stream.next().await {
            let now = Instant::now();
            match event {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => on_object(o, now),
                Ok(watcher::Event::InitDone) => {
                    let _ = ready.send(()).await;
                }
                Ok(_) => {}
                Err(e) => eprintln!("[converge] {what} watch: {e}"),
            }
        }
    })
}

impl Tracker {
    async fn start(client: kube::Client, ar: ApiResource) -> Result<Self> {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (tx, version) = tokio::sync::watch::channel(0u64);
        let tx = Arc::new(tx);
        let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(2);

        let crs: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &ar);
        let cr_task = {
            let (seen, tx) = (Arc::clone(&seen), Arc::clone(&tx));
            spawn_watch(crs, "memcached", ready_tx.clone(), move |obj, now| {
                let name = obj.name_any();
                let mut s = seen.lock().expect("seen lock");
                let cr_seen = CrSeen {
                    generation: obj.metadata.generation,
                    observed: available_observed_generation(&obj),
                    available: available_condition(&obj).is_some_and(|c| c["status"] == "True"),
                    size: obj.data.pointer("/spec/size").and_then(Value::as_i64),
                    nodes: obj.data.pointer("/status/nodes").and_then(Value::as_array).map_or(0, Vec::len),
                };
                s.crs.insert(name.clone(), cr_seen);
                s.check(&name, now);
                drop(s);
                tx.send_modify(|v| *v += 1);
            })
        };
        let deployments: Api<Deployment> = Api::namespaced(client, NAMESPACE);
        let d_task = {
            let (seen, tx) = (Arc::clone(&seen), Arc::clone(&tx));
            spawn_watch(deployments, "deployment", ready_tx, move |d, now| {
                let name = d.name_any();
                let replicas = d.spec.as_ref().and_then(|s| s.replicas);
                let observed = d.status.as_ref().and_then(|s| s.observed_generation);
                let mut s = seen.lock().expect("seen lock");
                s.deployment_seen.entry(name.clone()).or_insert(now);
                s.deployments.insert(name.clone(), (replicas, d.metadata.generation, observed));
                s.check(&name, now);
                drop(s);
                tx.send_modify(|v| *v += 1);
            })
        };
        for _ in 0..2 {
            tokio::time::timeout(Duration::from_secs(30), ready_rx.recv()).await.context("the bench's watches did not sync")?;
        }
        Ok(Self { seen, version, tasks: vec![cr_task, d_task] })
    }

    fn converged_count(&self, names: &[String]) -> usize {
        let s = self.seen.lock().expect("seen lock");
        names.iter().filter(|n| s.converged_at.contains_key(*n)).count()
    }

    fn settled_count(&self, names: &[String]) -> usize {
        let s = self.seen.lock().expect("seen lock");
        names.iter().filter(|n| s.settled_at.contains_key(*n)).count()
    }

    fn last_converged(&self, names: &[String]) -> Option<Instant> {
        let s = self.seen.lock().expect("seen lock");
        names.iter().map(|n| s.converged_at.get(n).copied()).collect::<Option<Vec<_>>>()?.into_iter().max()
    }

    fn last_settled(&self, names: &[String]) -> Option<Instant> {
        let s = self.seen.lock().expect("seen lock");
        names.iter().map(|n| s.settled_at.get(n).copied()).collect::<Option<Vec<_>>>()?.into_iter().max()
    }

    /// From now on, also watch for every parent re-converged at size `to` ([`Seen::rolled_at`]).
    fn start_rollout(&self, to: i32) {
        self.seen.lock().expect("seen lock").rollout = Some(to);
    }

    fn rolled_count(&self, names: &[String]) -> usize {
        let s = self.seen.lock().expect("seen lock");
        names.iter().filter(|n| s.rolled_at.contains_key(*n)).count()
    }

    fn last_rolled(&self, names: &[String]) -> Option<Instant> {
        let s = self.seen.lock().expect("seen lock");
        names.iter().map(|n| s.rolled_at.get(n).copied()).collect::<Option<Vec<_>>>()?.into_iter().max()
    }

    fn settled(&self, name: &str) -> Option<Instant> {
        self.seen.lock().expect("seen lock").settled_at.get(name).copied()
    }

    fn deployments_observed(&self, names: &[String]) -> usize {
        let s = self.seen.lock().expect("seen lock");
        names.iter().filter(|n| s.deployments.get(*n).is_some_and(|(_, g, o)| g.is_some() && g == o)).count()
    }

    fn deployment_seen(&self, name: &str) -> Option<Instant> {
        self.seen.lock().expect("seen lock").deployment_seen.get(name).copied()
    }

    async fn wait_converged(&self, name: &str, timeout: Duration) -> Result<Instant> {
        let mut rx = self.version.clone();
        let wait = async {
            loop {
                if let Some(at) = self.seen.lock().expect("seen lock").converged_at.get(name).copied() {
                    return Ok::<_, anyhow::Error>(at);
                }
                rx.changed().await?;
            }
        };
        tokio::time::timeout(timeout, wait).await.with_context(|| format!("{name} not converged within {timeout:?}"))?
    }

    fn stop(self) {
        for t in self.tasks {
            t.abort();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Measurements: API requests (apiserver metrics) and CPU time (/proc)
// ---------------------------------------------------------------------------------------------

/// The size of one converged parent and of its Deployment as the server stores them (JSON bytes,
/// `managedFields` apart): what every write and every watch event of them costs the server.
async fn print_sample_objects(client: &kube::Client, ar: &ApiResource, name: &str) {
    let crs: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, ar);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let sizes = |mut value: serde_json::Value| {
        let managed = value.pointer_mut("/metadata").and_then(|m| m.as_object_mut()).and_then(|m| m.remove("managedFields"));
        let size = |v: &serde_json::Value| serde_json::to_vec(v).map_or(0, |b| b.len());
        (size(&value), managed.as_ref().map_or(0, size))
    };
    // Both controllers name the Deployment like its parent.
    if let (Ok(cr), Ok(d)) = (crs.get(name).await, deployments.get(name).await) {
        let (cr_bytes, cr_managed) = sizes(serde_json::to_value(&cr).unwrap_or_default());
        let (d_bytes, d_managed) = sizes(serde_json::to_value(&d).unwrap_or_default());
        eprintln!(
            "[converge]   a parent is {cr_bytes} bytes (+ {cr_managed} of managedFields), a Deployment {d_bytes} (+ {d_managed})"
        );
    }
}

/// `apiserver_request_total` summed by `VERB resource[/subresource]`, every kind but Leases.
async fn request_counts(client: &kube::Client) -> Result<BTreeMap<String, f64>> {
    let text = client.request_text(http::Request::get("/metrics").body(Vec::new())?).await?;
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("apiserver_watch_events_total{")
            && let Some((labels, value)) = rest.rsplit_once("} ")
        {
            // Watch events the server sent, to every watcher of the kind (the controller's,
            // the bench's own two watches, kube-controller-manager's).
            let kind = parse_labels(labels).remove("kind").unwrap_or_default();
            if ["Memcached", "Deployment", "Pod"].contains(&kind.as_str()) {
                *out.entry(format!("watch events sent: {kind}")).or_insert(0.0) += value.trim().parse::<f64>().unwrap_or(0.0);
            }
            continue;
        }
        // The server's time per kind of request (summed latency, milliseconds): where a
        // difference in kube-apiserver CPU between two controllers doing the same requests comes from.
        let (rest, prefix) = if let Some(rest) = line.strip_prefix("apiserver_request_total{") {
            (rest, "")
        } else if let Some(rest) = line.strip_prefix("apiserver_request_duration_seconds_sum{") {
            (rest, "server ms: ")
        } else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let value = value.trim().parse::<f64>().unwrap_or(0.0);
        let value = if prefix.is_empty() { value } else { (value * 1000.0).round() };
        let labels = parse_labels(labels);
        let resource = labels.get("resource").map(String::as_str).unwrap_or_default();
        if resource.is_empty() || resource == "leases" {
            continue; // discovery and health; kube-controller-manager's lease renewals
        }
        let sub = labels.get("subresource").map(String::as_str).unwrap_or_default();
        let verb = labels.get("verb").map(String::as_str).unwrap_or_default();
        if !prefix.is_empty() && verb == "WATCH" {
            continue; // a watch's duration is how long it stayed open
        }
        let mut key =
            if sub.is_empty() { format!("{prefix}{verb} {resource}") } else { format!("{prefix}{verb} {resource}/{sub}") };
        if verb == "LIST" || verb == "WATCH" {
            key.push_str(&format!(" ({})", labels.get("scope").map(String::as_str).unwrap_or_default()));
        }
        *out.entry(key).or_insert(0.0) += value;
    }
    Ok(out)
}

/// What the controller under test counts itself, so far: the host's reconciles, plugin calls
/// and queue adds (its Prometheus metrics), or the native controller's reconciles, applies and
/// status patches.
fn controller_work(running: &Running) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    // The host's counts, from the text of its metrics (in this process or run H's page).
    let mut from_host_metrics = |text: &str| {
        for line in text.lines() {
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            let key = match name {
                "controller_runtime_reconcile_total" => "reconciles",
                "wasmop_plugin_call_duration_seconds_count" => "plugin calls",
                "workqueue_adds_total" => "queue adds",
                _ => continue,
            };
            let value = line.rsplit_once(' ').and_then(|(_, v)| v.trim().parse::<f64>().ok()).unwrap_or(0.0);
            *out.entry(key.to_owned()).or_insert(0.0) += value;
        }
    };
    match running {
        Running::Host(host) => from_host_metrics(&host.manager.metrics().render()),
        Running::Peer(peer) => {
            if let Some(page) = peer.metrics() {
                from_host_metrics(&page);
            }
        }
        Running::Limit(_) => {}
        Running::Native(_, ctx) => {
            let c = ctx.counts();
            out.insert("reconciles".to_owned(), c.reconciles as f64);
            out.insert("applies".to_owned(), c.applies as f64);
            out.insert("status patches".to_owned(), c.status_patches as f64);
            out.insert("errors".to_owned(), c.errors as f64);
        }
    }
    out
}

fn parse_labels(s: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut chars = s.chars().peekable();
    loop {
        let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
        if key.is_empty() || chars.next() != Some('"') {
            break;
        }
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => value.extend(chars.next()),
                '"' => break,
                c => value.push(c),
            }
        }
        out.insert(key.trim_start_matches(',').to_owned(), value);
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
    out
}

/// Key of the controller under test in [`cpu_snapshot`].
const CONTROLLER: &str = "controller under test";

/// CPU seconds (user + system) so far: the controller under test (this process's `ctrl`
/// threads and the host's epoch thread, [`EPOCH_THREAD`]: the host's work though not one
/// of the `ctrl` runtime's threads; or the peer process `peer`), this process's other threads
/// (the bench: creates and watches), and each control-plane child.
fn cpu_snapshot(peer: Option<u32>) -> BTreeMap<String, f64> {
    // SAFETY: sysconf has no preconditions.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let tick = if tick > 0.0 { tick } else { 100.0 };
    let mut out = BTreeMap::new();
    let parse = |stat: &str| -> Option<(String, i64, f64)> {
        let open = stat.find('(')?;
        let close = stat.rfind(')')?;
        let comm = stat[open + 1..close].to_owned();
        let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
        let ppid = fields.get(1)?.parse().ok()?;
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        Some((comm, ppid, (utime + stime) / tick))
    };
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for t in tasks.flatten() {
            if let Some((comm, _, cpu)) = std::fs::read_to_string(t.path().join("stat")).ok().as_deref().and_then(parse) {
                let host = comm.starts_with("ctrl") || comm == EPOCH_THREAD;
                let group = if host { CONTROLLER } else { "bench (creates, watches)" };
                *out.entry(group.to_owned()).or_insert(0.0) += cpu;
            }
        }
    }
    // The whole machine's busy time: what is left after this process and its children is
    // other people's work (a shared machine), reported as noise.
    if let Some(machine) = MachineTicks::now() {
        out.insert(MACHINE.to_owned(), machine.busy() as f64 / tick);
    }
    let me = i64::from(std::process::id() as i32);
    if let Ok(procs) = std::fs::read_dir("/proc") {
        for p in procs.flatten() {
            if !p.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let pid = p.file_name().to_string_lossy().parse::<u32>().ok();
            if let Some((comm, ppid, cpu)) = std::fs::read_to_string(p.path().join("stat")).ok().as_deref().and_then(parse)
                && ppid == me
            {
                let key = if pid.is_some() && pid == peer { CONTROLLER.to_owned() } else { comm };
                *out.entry(key).or_insert(0.0) += cpu;
            }
        }
    }
    out
}

/// Key of the machine-wide busy CPU time in [`cpu_snapshot`].
const MACHINE: &str = "(machine, all processes)";

fn diff(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after.iter().map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0))).filter(|(_, v)| v.abs() > 1e-9).collect()
}

// ---------------------------------------------------------------------------------------------
// Reporting
// ---------------------------------------------------------------------------------------------

fn percentile(samples: &[Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut v = samples.to_vec();
    v.sort_unstable();
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

impl RunResult {
    /// Busy CPU time of the machine during the bulk phase not spent by this bench or its
    /// control plane: other users of the shared machine.
    fn foreign_cpu(&self) -> f64 {
        let ours: f64 = self.cpu_bulk.iter().filter(|(k, _)| k.as_str() != MACHINE).map(|(_, v)| v).sum();
        (self.cpu_bulk.get(MACHINE).copied().unwrap_or(0.0) - ours).max(0.0)
    }

    /// The controller's writes of the bulk phase per CR: Deployment applies, Memcached patches
    /// (status and metadata). kube-controller-manager writes neither.
    fn writes_per_parent(&self) -> f64 {
        controller_writes(&self.requests_bulk) / self.n as f64
    }
}

/// The controller's writes among `requests` (by `VERB resource`): Deployment applies, creates
/// and patches, Memcached patches and updates (status and metadata). kube-controller-manager
/// writes none of them.
fn controller_writes(requests: &BTreeMap<String, f64>) -> f64 {
    // The peers' writes too: controller-runtime creates and updates, kopf patches.
    // (`PUT deployments` is left out: kube-controller-manager writes the revision annotation.)
    [
        "APPLY deployments",
        "POST deployments",
        "PATCH deployments",
        "PATCH memcacheds/status",
        "PUT memcacheds/status",
        "PATCH memcacheds",
        "PUT memcacheds",
    ]
    .iter()
    .filter_map(|k| requests.get(*k))
    .sum()
}

impl RolloutResult {
    fn throughput(&self) -> f64 {
        self.n as f64 / self.time.as_secs_f64()
    }

    fn controller_cpu(&self) -> f64 {
        self.cpu.get(CONTROLLER).copied().unwrap_or(0.0)
    }

    /// The controller's writes per parent; the bench's own size patches (`PATCH memcacheds`,
    /// one per parent) are taken out. `PUT deployments` counts here: a resize is how
    /// controller-runtime's operator changes its Deployment (`Update`); whatever
    /// kube-controller-manager puts is the same in every run (run A shows it: the host only applies).
    fn writes_per_parent(&self) -> f64 {
        let puts = self.requests.get("PUT deployments").copied().unwrap_or(0.0);
        (controller_writes(&self.requests) + puts - self.n as f64).max(0.0) / self.n as f64
    }
}

/// `requests`, `work` and `cpu` of a workload, one line each.
fn print_phase(requests: &BTreeMap<String, f64>, work: &BTreeMap<String, f64>, cpu: &BTreeMap<String, f64>, n: usize) {
    println!("  API requests:");
    for (k, v) in requests.iter().filter(|(k, _)| !k.starts_with("server ms: ")) {
        println!("    {k:<28} {v:>7}");
    }
    println!("  the controller's own counts (per parent):");
    for (k, v) in work {
        println!("    {k:<28} {v:>7} ({:.2})", v / n as f64);
    }
    println!("  CPU seconds:");
    for (k, v) in cpu {
        println!("    {k:<28} {v:>7.2}");
    }
}

impl RolloutResult {
    fn print(&self) {
        println!(
            "rollout, size {} → {} of {} parents: re-converged in {:.3} s ({:.1} parents/s); patches returned after {:.3} s; {:.2} controller writes per parent; controller CPU {:.2} s{}",
            self.from,
            self.to,
            self.n,
            self.time.as_secs_f64(),
            self.throughput(),
            self.patches.as_secs_f64(),
            self.writes_per_parent(),
            self.controller_cpu(),
            self.peak_rss.map_or_else(String::new, |m| format!("; peak RSS {m:.1} MiB"))
        );
        print_phase(&self.requests, &self.work, &self.cpu, self.n);
        print_pace(self.pace);
    }
}

/// The machine's pace over a phase, under its CPU seconds.
fn print_pace(pace: Option<Pace>) {
    if let Some(p) = pace {
        println!(
            "  machine pace: the fixed work took {:.0} µs of CPU (median of {} samples; larger is slower)",
            p.micros(),
            p.samples
        );
    }
}

impl IdleResult {
    fn print(&self) {
        println!(
            "idle for {:.0} s: controller CPU {:.3} s per minute{}",
            self.window.as_secs_f64(),
            self.cpu_per_minute(),
            self.rss_end.map_or_else(String::new, |m| format!("; RSS at the end {m:.1} MiB"))
        );
        print_phase(&self.requests, &self.work, &self.cpu, 1);
    }

    /// The controller's CPU seconds per minute of the window.
    fn cpu_per_minute(&self) -> f64 {
        self.cpu.get(CONTROLLER).copied().unwrap_or(0.0) * 60.0 / self.window.as_secs_f64()
    }
}

impl RunResult {
    fn throughput(&self) -> f64 {
        self.n as f64 / self.converge.as_secs_f64()
    }

    fn print(&self) {
        println!("\n## run {} (N = {})", self.which.label(), self.n);
        println!(
            "converged in {:.3} s ({:.1} CR/s); all Available=True after {:.3} s; creates returned after {:.3} s; kube-controller-manager caught up {:.1} s later",
            self.converge.as_secs_f64(),
            self.throughput(),
            self.settled.as_secs_f64(),
            self.creates.as_secs_f64(),
            self.settle.as_secs_f64()
        );
        if let Some((peak, end)) = self.rss {
            println!("own process: peak RSS {peak:.1} MiB from the bulk on, {end:.1} MiB at the end of the run");
        }
        if let Some(c) = self.native {
            println!(
                "native controller: {} reconciles, {} applies, {} status patches, {} errors",
                c.reconciles, c.applies, c.status_patches, c.errors
            );
        }
        println!("API requests (bulk phase | settle | latency phase):");
        let keys: std::collections::BTreeSet<&String> =
            self.requests_bulk.keys().chain(self.requests_settle.keys()).chain(self.requests_lat.keys()).collect();
        for k in keys {
            let g = |m: &BTreeMap<String, f64>| m.get(k).copied().unwrap_or(0.0);
            println!("  {k:<28} {:>7} | {:>6} | {:>5}", g(&self.requests_bulk), g(&self.requests_settle), g(&self.requests_lat));
        }
        println!("the controller's own counts during the bulk phase (per parent):");
        for (k, v) in &self.work_bulk {
            println!("  {k:<28} {v:>7} ({:.2})", v / self.n as f64);
        }
        println!("CPU seconds during the bulk phase ({:.2} s wall, 2 cores):", self.converge.as_secs_f64());
        for (k, v) in &self.cpu_bulk {
            println!("  {k:<28} {v:>7.2}");
        }
        println!("  {:<28} {:>7.2}", "(others: not this bench)", self.foreign_cpu());
        print_pace(self.pace_bulk);
        if let Some(r) = &self.rollout {
            r.print();
        }
        if let Some(i) = &self.idle {
            i.print();
        }
        if !self.to_deployment.is_empty() {
            println!(
                "latency over {} creates: create call p50 {}; returned → Deployment seen p50 {} p90 {} max {}; → converged p50 {} p90 {}; → Available=True p50 {} p90 {}",
                self.to_deployment.len(),
                ms(percentile(&self.create_call, 50.0)),
                ms(percentile(&self.to_deployment, 50.0)),
                ms(percentile(&self.to_deployment, 90.0)),
                ms(percentile(&self.to_deployment, 100.0)),
                ms(percentile(&self.to_converged, 50.0)),
                ms(percentile(&self.to_converged, 90.0)),
                ms(percentile(&self.to_settled, 50.0)),
                ms(percentile(&self.to_settled, 90.0))
            );
        }
    }
}

fn print_summary(results: &[RunResult], n: usize, lat: usize, inflight: usize) {
    println!(
        "\n## Summary: N = {n} CRs (size {}), {inflight} creates in flight; latency over {lat} sequential creates\n",
        size()
    );
    let header: Vec<&str> = results.iter().map(|r| r.which.label()).collect();
    println!("| | {} |", header.join(" | "));
    println!("|---|{}", "---:|".repeat(results.len()));
    let row = |name: &str, f: &dyn Fn(&RunResult) -> String| {
        println!("| {name} | {} |", results.iter().map(f).collect::<Vec<_>>().join(" | "));
    };
    row("time to converge", &|r| format!("{:.2} s", r.converge.as_secs_f64()));
    row("throughput", &|r| format!("{:.1} CR/s", r.throughput()));
    row("all Available=True after", &|r| format!("{:.2} s", r.settled.as_secs_f64()));
    row("creates returned after", &|r| format!("{:.2} s", r.creates.as_secs_f64()));
    row("server-side applies, bulk", &|r| format!("{}", r.requests_bulk.get("APPLY deployments").copied().unwrap_or(0.0)));
    row("status patches, bulk", &|r| format!("{}", r.requests_bulk.get("PATCH memcacheds/status").copied().unwrap_or(0.0)));
    row("reconciles per parent, bulk", &|r| format!("{:.2}", r.work_bulk.get("reconciles").copied().unwrap_or(0.0) / r.n as f64));
    row("controller writes per parent, bulk", &|r| format!("{:.2}", r.writes_per_parent()));
    row("controller CPU, bulk", &|r| format!("{:.2} s", r.cpu_bulk.get(CONTROLLER).copied().unwrap_or(0.0)));
    row("peak RSS (H and the peers: own process)", &|r| {
        r.rss.map_or_else(|| "—".to_owned(), |(peak, _)| format!("{peak:.1} MiB"))
    });
    row("kube-apiserver CPU, bulk", &|r| format!("{:.2} s", r.cpu_bulk.get("kube-apiserver").copied().unwrap_or(0.0)));
    row("etcd CPU, bulk", &|r| format!("{:.2} s", r.cpu_bulk.get("etcd").copied().unwrap_or(0.0)));
    row("other processes' CPU, bulk", &|r| format!("{:.2} s", r.foreign_cpu()));
    row("machine pace, bulk (µs of CPU for the fixed work)", &|r| pace_cell(r.pace_bulk));
    row("create → Deployment seen, p50", &|r| ms(percentile(&r.to_deployment, 50.0)));
    row("create → Deployment seen, p90", &|r| ms(percentile(&r.to_deployment, 90.0)));
    row("create → converged, p50", &|r| ms(percentile(&r.to_converged, 50.0)));
    row("create → converged, p90", &|r| ms(percentile(&r.to_converged, 90.0)));
    row("create → Available=True, p50", &|r| ms(percentile(&r.to_settled, 50.0)));
    row("create → Available=True, p90", &|r| ms(percentile(&r.to_settled, 90.0)));
    let a = results.iter().find(|r| r.which == Which::Host);
    if let Some(a) = a {
        println!();
        for b in results.iter().filter(|r| r.which != Which::Host) {
            let ratio = b.converge.as_secs_f64() / a.converge.as_secs_f64();
            let goal = if b.which == Which::Native {
                format!(" (goal ≥ 0.9: {})", if ratio >= 0.9 { "met" } else { "NOT met" })
            } else {
                String::new()
            };
            let letter = &b.which.label()[..1];
            println!("throughput(A) / throughput({letter}) = time({letter}) / time(A) = {ratio:.3}{goal}");
            println!("  same, to all Available=True: {:.3}", b.settled.as_secs_f64() / a.settled.as_secs_f64());
        }
        let p50 = percentile(&a.to_deployment, 50.0);
        if !a.to_deployment.is_empty() {
            println!(
                "A: create → Deployment seen p50 = {} (goal ≤ 10 ms: {})",
                ms(p50),
                if p50 <= Duration::from_millis(10) { "met" } else { "NOT met" }
            );
        }
    }
}

/// A table cell of a phase's machine pace.
fn pace_cell(pace: Option<Pace>) -> String {
    pace.map_or_else(|| "—".to_owned(), |p| format!("{:.0} µs", p.micros()))
}

/// Median of `f` over the runs of `which`, `None` without such a run.
fn median_of(results: &[RunResult], which: Which, f: impl Fn(&RunResult) -> f64) -> Option<f64> {
    median_of_values(results.iter().filter(|r| r.which == which).map(f).collect())
}

/// The figure lines for `scripts/bench.sh`: the host (A) against the stronger native baseline
/// (C, else B), medians over the runs of each: throughput to all Available=True (target ≥ 1.0×),
/// to first convergence (information) and controller CPU in the bulk phase (target ≤ 1.2×).
fn print_figures(results: &[RunResult], n: usize) {
    let sz = size_label();
    let Some(baseline) = [Which::NativeGeneration, Which::Native].into_iter().find(|w| results.iter().any(|r| r.which == *w))
    else {
        return;
    };
    let letter = &baseline.label()[..1];
    let runs = |w: Which| results.iter().filter(|r| r.which == w).count();
    let a_runs = runs(Which::Host);
    // (A's median, `against`'s median) of a figure of each run.
    let pair =
        |against: Which, f: &dyn Fn(&RunResult) -> f64| (median_of(results, Which::Host, f), median_of(results, against, f));
    let settled_throughput = |r: &RunResult| r.n as f64 / r.settled.as_secs_f64();
    let controller_cpu = |r: &RunResult| r.cpu_bulk.get(CONTROLLER).copied().unwrap_or(0.0);
    let what = format!("N = {n}{sz}, median of {a_runs} A / {} {letter} runs, baseline {letter}", runs(baseline));
    if let (Some(a), Some(b)) = pair(baseline, &settled_throughput) {
        figure("converge", &format!("throughput to all Available=True ({what})"), a, Some(b), "CR/s", Goal::RatioAtLeast(1.0));
    }
    if let (Some(a), Some(b)) = pair(baseline, &|r| r.throughput()) {
        figure("converge", &format!("throughput to first convergence ({what})"), a, Some(b), "CR/s", Goal::None);
    }
    if let (Some(a), Some(b)) = pair(baseline, &controller_cpu) {
        figure("converge", &format!("controller CPU, bulk ({what})"), a, Some(b), "CPU-s", Goal::RatioAtMost(1.2));
    }
    if let (Some(a), Some(b)) = pair(baseline, &|r| r.foreign_cpu()) {
        figure("converge", "other processes' CPU during the bulk (noise; A vs baseline)", a, Some(b), "CPU-s", Goal::None);
    }
    // Against a native controller writing the same status as the host: what is left of the
    // difference when both make the API server do the same work (information, no target).
    let same = Which::NativeSameStatus;
    let what = format!("N = {n}{sz}, median of {a_runs} A / {} D runs, baseline D = C writing the host's status", runs(same));
    if let (Some(a), Some(b)) = pair(same, &settled_throughput) {
        figure("converge", &format!("throughput to all Available=True ({what})"), a, Some(b), "CR/s", Goal::None);
    }
    if let (Some(a), Some(b)) = pair(same, &controller_cpu) {
        figure("converge", &format!("controller CPU, bulk ({what})"), a, Some(b), "CPU-s", Goal::None);
    }
    // The host with the policy that leaves its `Reconciled` condition out while reconciles
    // succeed, against the same baseline and targets as A: what the operator's opt-in buys.
    let e = Which::HostOnFailure;
    let e_runs = runs(e);
    let what = format!(
        "host policy reconciledCondition: onFailure, N = {n}{sz}, median of {e_runs} E / {} {letter} runs, baseline {letter}",
        runs(baseline)
    );
    let pair_e = |f: &dyn Fn(&RunResult) -> f64| (median_of(results, e, f), median_of(results, baseline, f));
    if let (Some(a), Some(b)) = pair_e(&settled_throughput) {
        figure("converge", &format!("throughput to all Available=True ({what})"), a, Some(b), "CR/s", Goal::RatioAtLeast(1.0));
    }
    if let (Some(a), Some(b)) = pair_e(&controller_cpu) {
        figure("converge", &format!("controller CPU, bulk ({what})"), a, Some(b), "CPU-s", Goal::RatioAtMost(1.2));
    }
}

/// The figure lines of the host (A, as users get it) against each peer that ran: throughput to
/// all Available=True (target ≥ 1.0×) and the controller's CPU in the bulk phase (target ≤
/// 1.0×), medians over the runs of each. The peers write no `Reconciled` condition: E (the host
/// without it) is shown against them too, for information.
fn print_peer_figures(results: &[RunResult], n: usize) {
    let sz = size_label();
    let settled_throughput = |r: &RunResult| r.n as f64 / r.settled.as_secs_f64();
    let controller_cpu = |r: &RunResult| r.cpu_bulk.get(CONTROLLER).copied().unwrap_or(0.0);
    let runs = |w: Which| results.iter().filter(|r| r.which == w).count();
    // How close each controller came to the control plane's own ceiling (the limit run Z).
    if runs(Which::Limit) > 0 {
        for which in [
            Which::Host,
            Which::HostOnFailure,
            Which::HostProcess,
            Which::ControllerRuntime,
            Which::ControllerRuntimeWorkers,
            Which::Kopf,
        ] {
            if runs(which) == 0 {
                continue;
            }
            let what = format!("{}, N = {n}{sz}, fraction of the limit Z (medians)", which.label());
            let pair = (median_of(results, which, settled_throughput), median_of(results, Which::Limit, settled_throughput));
            if let (Some(a), Some(b)) = pair {
                // The target is the bulk's (no Pods); with Pods the fraction says how much of
                // the time to all Available=True is the control plane's own pace.
                let target = if which == Which::Host && size() == 0 { Goal::RatioAtLeast(0.8) } else { Goal::None };
                figure("converge", &format!("throughput to all Available=True ({what})"), a, Some(b), "CR/s", target);
            }
        }
    }
    for peer in [Which::ControllerRuntime, Which::ControllerRuntimeWorkers, Which::Kopf] {
        if runs(peer) == 0 {
            continue;
        }
        let letter = &peer.label()[..1];
        for (host, goal) in [(Which::Host, true), (Which::HostOnFailure, false)] {
            if runs(host) == 0 {
                continue;
            }
            let h = &host.label()[..1];
            let what =
                format!("N = {n}{sz}, median of {} {h} / {} {letter} runs, baseline {}", runs(host), runs(peer), peer.label());
            let pair = |f: &dyn Fn(&RunResult) -> f64| (median_of(results, host, f), median_of(results, peer, f));
            if let (Some(a), Some(b)) = pair(&settled_throughput) {
                let target = if goal { Goal::RatioAtLeast(1.0) } else { Goal::None };
                figure("converge", &format!("throughput to all Available=True ({what})"), a, Some(b), "CR/s", target);
            }
            if let (Some(a), Some(b)) = pair(&controller_cpu) {
                let target = if goal { Goal::RatioAtMost(1.0) } else { Goal::None };
                figure("converge", &format!("controller CPU, bulk ({what})"), a, Some(b), "CPU-s", target);
            }
        }
        // The host in its own process (H) against the peer: the resident memory of each
        // process (target ≤ 1.0×), and H's throughput and whole-process CPU (information: A
        // carries the targets of those).
        if runs(Which::HostProcess) > 0 {
            let what = format!(
                "N = {n}{sz}, median of {} H / {} {letter} runs, baseline {}",
                runs(Which::HostProcess),
                runs(peer),
                peer.label()
            );
            let pair = |f: &dyn Fn(&RunResult) -> Option<f64>| {
                (median_present(results, Which::HostProcess, f), median_present(results, peer, f))
            };
            if let (Some(a), Some(b)) = pair(&|r| r.rss.map(|(peak, _)| peak)) {
                figure(
                    "converge",
                    &format!("peak RSS from the bulk on, own process ({what})"),
                    a,
                    Some(b),
                    "MiB",
                    Goal::RatioAtMost(1.0),
                );
            }
            if let (Some(a), Some(b)) = pair(&|r| Some(settled_throughput(r))) {
                figure("converge", &format!("throughput to all Available=True ({what})"), a, Some(b), "CR/s", Goal::None);
            }
            if let (Some(a), Some(b)) = pair(&|r| Some(controller_cpu(r))) {
                figure("converge", &format!("controller CPU, bulk, whole process ({what})"), a, Some(b), "CPU-s", Goal::None);
            }
        }
    }
}

/// Median of `f` over the runs of `which` that have the figure, `None` when none has.
fn median_present(results: &[RunResult], which: Which, f: &dyn Fn(&RunResult) -> Option<f64>) -> Option<f64> {
    median_of_values(results.iter().filter(|r| r.which == which).filter_map(f).collect())
}

/// The rollout and idle workloads of every run side by side. RSS: a peer's own process; for an
/// in-process controller (A–E) the bench's process, which also holds the bench's watches.
fn print_workload_summary(results: &[RunResult]) {
    let header: Vec<&str> = results.iter().map(|r| r.which.label()).collect();
    if let Some(r) = results.iter().find_map(|r| r.rollout.as_ref()) {
        println!("\n## Rollout: size {} → {} of {} converged parents\n", r.from, r.to, r.n);
        println!("| | {} |", header.join(" | "));
        println!("|---|{}", "---:|".repeat(results.len()));
        let row = |name: &str, f: &dyn Fn(&RolloutResult) -> String| {
            let cells: Vec<String> =
                results.iter().map(|r| r.rollout.as_ref().map_or_else(|| "— (no controller)".to_owned(), f)).collect();
            println!("| {name} | {} |", cells.join(" | "));
        };
        row("time to re-converged", &|r| format!("{:.2} s", r.time.as_secs_f64()));
        row("throughput", &|r| format!("{:.1} parents/s", r.throughput()));
        row("controller CPU", &|r| format!("{:.2} s", r.controller_cpu()));
        row("controller writes per parent", &|r| format!("{:.2}", r.writes_per_parent()));
        row("peak RSS (H and the peers: own process; A–E: the bench's)", &|r| {
            r.peak_rss.map_or_else(|| "—".to_owned(), |m| format!("{m:.1} MiB"))
        });
        row("kube-apiserver CPU", &|r| format!("{:.2} s", r.cpu.get("kube-apiserver").copied().unwrap_or(0.0)));
        row("machine pace (µs of CPU for the fixed work)", &|r| pace_cell(r.pace));
    }
    if let Some(i) = results.iter().find_map(|r| r.idle.as_ref()) {
        println!("\n## Idle: the converged parents left alone for {:.0} s\n", i.window.as_secs_f64());
        println!("| | {} |", header.join(" | "));
        println!("|---|{}", "---:|".repeat(results.len()));
        let row = |name: &str, f: &dyn Fn(&IdleResult) -> String| {
            let cells: Vec<String> =
                results.iter().map(|r| r.idle.as_ref().map_or_else(|| "— (no controller)".to_owned(), f)).collect();
            println!("| {name} | {} |", cells.join(" | "));
        };
        row("controller CPU per minute", &|i| format!("{:.3} s", i.cpu_per_minute()));
        row("API requests (leases apart)", &|i| {
            // Requests are whole numbers; `fold` from 0.0 (an empty `sum` of floats is -0.0).
            let n = i
                .requests
                .iter()
                .filter(|(k, _)| !k.starts_with("server ms: ") && !k.starts_with("watch events"))
                .fold(0.0, |sum, (_, v)| sum + v);
            format!("{n:.0}")
        });
        row("RSS at the end (H and the peers: own process; A–E: the bench's)", &|i| {
            i.rss_end.map_or_else(|| "—".to_owned(), |m| format!("{m:.1} MiB"))
        });
    }
}

/// The figure lines of the rollout and idle workloads: the host (A, as users get it) against
/// each peer that ran, medians over the runs of each — rollout throughput (target ≥ 1.0×) and
/// controller CPU (≤ 1.0×), writes per parent (information); idle controller CPU per minute
/// (≤ 1.0×). Memory is the host's own process (run H) against the peer's (≤ 1.0×): run A
/// shares the bench's process, whose resident memory also holds the bench's watches. H's
/// whole-process CPU beside the peer's is information.
fn print_workload_figures(results: &[RunResult], n: usize) {
    let sz = size_label();
    let runs = |w: Which| results.iter().filter(|r| r.which == w).count();
    fn rollout(r: &RunResult) -> Option<&RolloutResult> {
        r.rollout.as_ref()
    }
    fn idle(r: &RunResult) -> Option<&IdleResult> {
        r.idle.as_ref()
    }
    if runs(Which::Limit) > 0 {
        println!("(run Z runs no controller: it has no idle figures, and a rollout only with Pods)");
    }
    // How close each controller's rollout came to the limit's (run Z with Pods).
    let limit_rollout = median_present(results, Which::Limit, &|r: &RunResult| rollout(r).map(RolloutResult::throughput));
    if let (Some(z), Some(r)) = (limit_rollout, results.iter().find_map(rollout)) {
        for which in [Which::Host, Which::HostProcess, Which::ControllerRuntime, Which::ControllerRuntimeWorkers, Which::Kopf] {
            if let Some(a) = median_present(results, which, &|r: &RunResult| rollout(r).map(RolloutResult::throughput)) {
                let what = format!(
                    "{}, rollout size {} → {} of N = {n}, fraction of the limit Z (medians)",
                    which.label(),
                    r.from,
                    r.to
                );
                figure("converge", &format!("throughput to re-converged ({what})"), a, Some(z), "parents/s", Goal::None);
            }
        }
    }
    for peer in [Which::ControllerRuntime, Which::ControllerRuntimeWorkers, Which::Kopf] {
        if runs(peer) == 0 {
            continue;
        }
        // One figure of `host` against `peer`, when both have it.
        let line = |host: Which, workload: &str, name: &str, f: &dyn Fn(&RunResult) -> Option<f64>, unit: &str, goal: Goal| {
            let (Some(a), Some(b)) = (median_present(results, host, f), median_present(results, peer, f)) else {
                return;
            };
            let what = format!(
                "{workload}, median of {} {} / {} {} runs, baseline {}",
                runs(host),
                &host.label()[..1],
                runs(peer),
                &peer.label()[..1],
                peer.label()
            );
            figure("converge", &format!("{name} ({what})"), a, Some(b), unit, goal);
        };
        if let Some(r) = results.iter().find_map(rollout) {
            let workload = format!("rollout size {} → {} of N = {n}", r.from, r.to);
            let throughput = |r: &RunResult| rollout(r).map(RolloutResult::throughput);
            let cpu = |r: &RunResult| rollout(r).map(RolloutResult::controller_cpu);
            let writes = |r: &RunResult| rollout(r).map(RolloutResult::writes_per_parent);
            let peak = |r: &RunResult| rollout(r).and_then(|r| r.peak_rss);
            line(Which::Host, &workload, "throughput to re-converged", &throughput, "parents/s", Goal::RatioAtLeast(1.0));
            line(Which::Host, &workload, "controller CPU, rollout", &cpu, "CPU-s", Goal::RatioAtMost(1.0));
            line(Which::Host, &workload, "controller writes per parent, rollout", &writes, "writes", Goal::None);
            line(Which::HostProcess, &workload, "peak RSS, rollout, own process", &peak, "MiB", Goal::RatioAtMost(1.0));
            line(Which::HostProcess, &workload, "controller CPU, rollout, whole process", &cpu, "CPU-s", Goal::None);
        }
        if let Some(i) = results.iter().find_map(idle) {
            let workload = format!("idle {:.0} s, N = {n}{sz}", i.window.as_secs_f64());
            let cpu = |r: &RunResult| idle(r).map(IdleResult::cpu_per_minute);
            let end = |r: &RunResult| idle(r).and_then(|i| i.rss_end);
            line(Which::Host, &workload, "controller CPU per minute, idle", &cpu, "CPU-s/min", Goal::RatioAtMost(1.0));
            line(Which::HostProcess, &workload, "RSS at the end, idle, own process", &end, "MiB", Goal::RatioAtMost(1.0));
            line(Which::HostProcess, &workload, "controller CPU per minute, idle, whole process", &cpu, "CPU-s/min", Goal::None);
        }
    }
}

/// The median of `v`, `None` when empty.
fn median_of_values(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    (!v.is_empty()).then(|| if v.len() % 2 == 1 { v[v.len() / 2] } else { (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0 })
}

/// ", size S" in a figure's name when the parents run Pods (`SIZE` > 0), else nothing.
fn size_label() -> String {
    if size() > 0 { format!(", size {}", size()) } else { String::new() }
}
