//! What a call costs in each plugin language: `cargo bench -p wasmop -p wasmop-e2e --bench languages`.
//!
//! The same memcached logic written in Rust (`plugins/memcached`), Python
//! (`plugins/memcached-py`), JavaScript (`plugins/memcached-js`) and Go (`plugins/memcached-go`),
//! each built from source into a component against WIT 0.3.0, is loaded into one runtime (default
//! limits, pooling allocator on, artifact cache off) and called on the same input: the
//! `crds/samples/memcached.yaml` parent, its rolled-out Deployment and three running Pods. Every
//! call is what the host does per reconcile: a fresh store and a fresh instance, the request
//! copied in, the guest's answer copied out and validated.
//!
//! Before measuring, the four answers are checked to be the same plan (children, status and
//! conditions). Then each language is warmed up and measured `N` times (default 300), interleaved
//! in rounds so that other work on the machine spreads over all of them; percentiles are
//! nearest-rank. Printed per language: the component's size, its compile time (artifact cache
//! off), the first call, p50 and p99 per call, the instance's linear memory high water, and the
//! p50 as a ratio of the Rust plugin's in the same run.
//!
//! Where the time goes, per language (p50 of each part over the same calls, so the parts need
//! not add up to the p50 of the whole): `instantiate` (a fresh store and instance: memories
//! and tables set up from the component's data, and the guest's own start-up code — Go's
//! `_initialize` where it runs per instance), `guest` (the export: the request copied in, the
//! guest's work, its answer copied out) and `host` (the answer parsed and checked).
//!
//! Every guest here starts from a snapshot taken at build time: componentize-py and
//! componentize-js pre-initialize their interpreter and the plugin's module with wizer, and
//! `sdk-go/build/component.sh` runs Go's `_initialize` under wizer. The row `go, init per call`
//! is the same Go plugin built without that snapshot (`WASMOP_GO_PREINIT=0`), the runtime
//! started in every instance: the cost the snapshot removes, measured in the same run.
//!
//! Targets (printed as PASS or MISS, never failing the bench): Go and JavaScript ≤ 1 ms p50,
//! Python ≤ 2 ms p50.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use serde_json::json;
use wasmop::contract::{Object, Request};
use wasmop::objects::MemoryCache;
use wasmop::runtime::{Limits, Plugin, Runtime};
use wasmop_e2e::figure::{Goal, figure};
use wasmop_e2e::plugins::plugin;
use wasmop_e2e::polyglot::{memcached_go, memcached_go_started_per_instance, memcached_js, memcached_py};

/// Rounds the measured calls are interleaved in.
const ROUNDS: usize = 10;

struct Language {
    name: &'static str,
    /// p50 target in ms, if any.
    target_ms: Option<f64>,
    path: PathBuf,
    size: usize,
    compile: Duration,
    first_call: Duration,
    memory: u64,
    plugin: Plugin,
    samples: Vec<Duration>,
    /// Per call: to a ready instance, in the export, and the host's work on the answer.
    parts: [Vec<Duration>; 3],
}

fn main() -> anyhow::Result<()> {
    let n: usize = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let warmup = (n / 10).max(10);
    let builds = [
        ("rust", None, plugin("memcached", "wasm32-wasip2")),
        ("python", Some(2.0), memcached_py()),
        ("javascript", Some(1.0), memcached_js()),
        ("go", Some(1.0), memcached_go()),
        ("go, init per call", None, memcached_go_started_per_instance()),
    ];
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let host = Runtime::builder().limits(Limits::default()).artifact_dir(None).pooling(true).build()?;
        let request = request();
        let cache = Arc::new(MemoryCache::default());
        let mut languages = Vec::new();
        for (name, target_ms, path) in builds {
            let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            let size = bytes.len();
            let started = Instant::now();
            let plugin = host.load(bytes).await.with_context(|| format!("loading the {name} plugin"))?;
            let compile = started.elapsed();
            let started = Instant::now();
            let (_, stats) = plugin.reconcile(&request, cache.clone()).await.with_context(|| format!("{name}: first call"))?;
            let first_call = started.elapsed();
            languages.push(Language {
                name,
                target_ms,
                path,
                size,
                compile,
                first_call,
                memory: stats.memory_high_water,
                plugin,
                samples: Vec::with_capacity(n),
                parts: Default::default(),
            });
        }

        // The same plan from every language, or the figures would compare different work.
        let mut plans = Vec::new();
        for l in &languages {
            let (response, _) = l.plugin.reconcile(&request, cache.clone()).await?;
            let children = &response.children;
            plans.push((
                l.name,
                json!({"children": children, "status": response.status, "conditions": format!("{:?}", response.conditions)}),
            ));
        }
        for (name, plan) in &plans[1..] {
            ensure!(
                *plan == plans[0].1,
                "the {name} plugin plans differently from the Rust one:\n{plan:#}\nvs\n{:#}",
                plans[0].1
            );
        }

        for l in &mut languages {
            for _ in 0..warmup {
                l.plugin.reconcile(&request, cache.clone()).await?;
            }
        }
        let load_before = load_average();
        for round in 0..ROUNDS {
            let count = len_of_round(n, round);
            for i in 0..languages.len() {
                let count_of = languages.len();
                let l = &mut languages[(i + round) % count_of];
                for _ in 0..count {
                    let started = Instant::now();
                    let out = l.plugin.reconcile(&request, cache.clone()).await?;
                    let whole = started.elapsed();
                    let stats = out.1;
                    drop(out);
                    l.samples.push(whole);
                    l.parts[0].push(stats.instantiate);
                    l.parts[1].push(stats.elapsed.saturating_sub(stats.instantiate));
                    l.parts[2].push(whole.saturating_sub(stats.elapsed));
                }
            }
        }
        let load_after = load_average();

        let rust_p50 = percentile(&languages[0].samples, 0.5);
        println!("call cost per language: memcached logic, fresh store and instance per call, {n} calls each");
        println!(
            "{:<18} {:>10} {:>11} {:>11} {:>10} {:>10} {:>9} {:>8}  target",
            "language", "component", "compile", "first call", "p50", "p99", "memory", "÷ rust"
        );
        for l in &languages {
            let (p50, p99) = (percentile(&l.samples, 0.5), percentile(&l.samples, 0.99));
            let target = l
                .target_ms
                .map_or_else(|| "-".to_owned(), |ms| format!("p50 ≤ {ms} ms: {}", if p50 <= ms * 1e3 { "PASS" } else { "MISS" }));
            println!(
                "{:<18} {:>8.0}KB {:>9.0}ms {:>9.2}ms {:>8.1}µs {:>8.1}µs {:>7.1}MB {:>7.1}×  {target}",
                l.name,
                l.size as f64 / 1e3,
                l.compile.as_secs_f64() * 1e3,
                l.first_call.as_secs_f64() * 1e3,
                p50,
                p99,
                l.memory as f64 / 1e6,
                p50 / rust_p50,
            );
            let goal = l.target_ms.map_or(Goal::None, |ms| Goal::AtMost(ms * 1e3));
            figure("languages", &format!("{} p50 per call", l.name), p50, Some(rust_p50), "µs", goal);
        }
        println!("where the time goes (p50 of each part, µs):");
        println!("{:<18} {:>12} {:>10} {:>10}", "language", "instantiate", "guest", "host");
        for l in &languages {
            let [instantiate, guest, host] = [0, 1, 2].map(|i| percentile(&l.parts[i], 0.5));
            println!("{:<18} {instantiate:>12.1} {guest:>10.1} {host:>10.1}", l.name);
        }
        for l in &languages {
            eprintln!("{}: {}", l.name, l.path.display());
        }
        println!("load average (1 min) before / after measuring: {load_before} / {load_after}");
        Ok(())
    })
}

/// Calls of `round` out of `n` spread over [`ROUNDS`].
fn len_of_round(n: usize, round: usize) -> usize {
    n / ROUNDS + usize::from(round < n % ROUNDS)
}

/// The memcached sample, its rolled-out Deployment and three running Pods, as the host passes them.
fn request() -> Request {
    let labels = json!({"app": "memcached", "memcached_cr": "memcached-sample"});
    let parent = json!({
        "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "memcached-sample", "namespace": "default", "generation": 1,
            "uid": "6b1f5a0e-2c4d-4e55-9a51-3d2f1c0b7a10"},
        "spec": {"size": 3}
    });
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "memcached-sample", "namespace": "default", "labels": labels, "generation": 1},
        "spec": {"replicas": 3, "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels},
            "spec": {"containers": [{"name": "memcached", "image": "memcached:1.6.17-alpine"}]}}},
        "status": {"observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "availableReplicas": 3}
    });
    let pod = |suffix: &str| {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("memcached-sample-6d8f7c9b5-{suffix}"), "namespace": "default",
                "labels": {"app": "memcached", "memcached_cr": "memcached-sample", "pod-template-hash": "6d8f7c9b5"}},
            "spec": {"containers": [{"name": "memcached", "image": "memcached:1.6.17-alpine"}], "nodeName": "node-1"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        })
    };
    let mut request = Request::new(parent);
    request.children = vec![Arc::new(Object::new(deployment))];
    request.related = ["x7k2p", "m4q9z", "c8v3n"].into_iter().map(|s| Arc::new(Object::new(pod(s)))).collect();
    request
}

/// Nearest-rank percentile, in µs.
fn percentile(samples: &[Duration], q: f64) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1e6
}

/// The 1-minute load average (Linux), to tell a quiet machine from a busy one.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(|_| "?".into(), |s| s.split(' ').next().unwrap_or("?").to_owned())
}
