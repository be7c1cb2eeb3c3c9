//! Compiling large plugins: time and memory (BENCHMARKS.md), a benchmark binary:
//!
//! ```sh
//! eval "$(bash scripts/setup.sh)"; export KUBEBUILDER_ASSETS WASMOP_TOOLS WASMOP_POLYGLOT
//! cargo bench -p wasmop --bench compile
//! ```
//!
//! For the Rust, Python and JavaScript memcached plugins, each compiled in the host's process
//! (the baseline) and in a `wasmop compile` child process, every case in a fresh process of its
//! own (this binary run again with `COMPILE_BENCH_CASE`) so that no case inherits another's
//! heap: compile time, artifact size, the child's peak RSS, the host's RSS before, during
//! (peak), after loading and after unloading, the per-call cost of a reconcile, and the time to
//! load the cached artifact again. Without `WASMOP_POLYGLOT` only the Rust plugin is measured.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasmop::contract::Request;
use wasmop::objects::MemoryCache;
use wasmop::runtime::{Compiler, Runtime, Subprocess};

const CASE: &str = "COMPILE_BENCH_CASE";

/// A line of `/proc/self/status`, in MiB.
fn status_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// Peak RSS of the waited-for children of this process, in MiB.
fn children_peak_mib() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` fills the struct it is given.
    let ok = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()) } == 0;
    // SAFETY: filled on success, all-zero otherwise.
    let usage = unsafe { usage.assume_init() };
    if ok { usage.ru_maxrss as f64 / 1024.0 } else { 0.0 }
}

fn plugin_path(name: &str) -> PathBuf {
    match name {
        "rust" => wasmop_e2e::fixtures::memcached(),
        "python" => wasmop_e2e::polyglot::memcached_py(),
        "javascript" => wasmop_e2e::polyglot::memcached_js(),
        other => panic!("unknown plugin {other}"),
    }
}

fn compiler(mode: &str) -> Compiler {
    match mode {
        "in-process" => Compiler::InProcess,
        "subprocess" => Compiler::Subprocess(Subprocess::new(env!("CARGO_BIN_EXE_wasmop"))),
        other => panic!("unknown mode {other}"),
    }
}

/// One case, in this process: a JSON object of measurements.
async fn measure(plugin: &str, mode: &str) -> Value {
    let bytes = std::fs::read(plugin_path(plugin)).unwrap();
    let wasm_mib = bytes.len() as f64 / (1 << 20) as f64;
    let artifacts = tempfile::tempdir().unwrap();
    let runtime =
        || Runtime::builder().artifact_dir(Some(artifacts.path().into())).compiler(compiler(mode)).build().expect("runtime");
    let first = runtime();
    let before = status_mib("VmRSS");
    let peak = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (Arc::clone(&peak), Arc::clone(&done));
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max((status_mib("VmRSS") * 1024.0) as u64, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let started = Instant::now();
    let loaded = first.load(bytes.clone()).await.expect("loads");
    let compile = started.elapsed();
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let after_load = status_mib("VmRSS");
    let anon_after_load = status_mib("RssAnon");
    let artifact_mib = std::fs::read_dir(artifacts.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        .map(|e| e.metadata().unwrap().len() as f64 / (1 << 20) as f64)
        .sum::<f64>();

    let calls = if plugin == "rust" { 200 } else { 30 };
    let request = Request::new(wasmop_e2e::fixtures::memcached_cr("bench", 3));
    loaded.reconcile(&request, Arc::new(MemoryCache::default())).await.expect("first call");
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        let at = Instant::now();
        loaded.reconcile(&request, Arc::new(MemoryCache::default())).await.expect("reconciles");
        times.push(at.elapsed());
    }
    times.sort();
    let after_calls = status_mib("VmRSS");
    drop(loaded);
    drop(first);
    let after_unload = status_mib("VmRSS");
    let anon_after_unload = status_mib("RssAnon");

    let second = runtime();
    let at = Instant::now();
    let again = second.load(bytes).await.expect("loads from the cache");
    let cached = at.elapsed();
    drop(again);
    json!({
        "plugin": plugin, "mode": mode, "wasm_mib": wasm_mib, "artifact_mib": artifact_mib,
        "compile_s": compile.as_secs_f64(), "cached_load_s": cached.as_secs_f64(),
        "child_peak_mib": if mode == "subprocess" { children_peak_mib() } else { 0.0 },
        "rss_before": before, "rss_peak": peak.load(Ordering::Relaxed) as f64 / 1024.0, "rss_after_load": after_load,
        "anon_after_load": anon_after_load, "rss_after_calls": after_calls, "rss_after_unload": after_unload,
        "anon_after_unload": anon_after_unload,
        "call_p50_ms": times[calls / 2].as_secs_f64() * 1e3, "call_mean_ms": times.iter().sum::<Duration>().as_secs_f64() * 1e3 / calls as f64,
    })
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    if let Ok(case) = std::env::var(CASE) {
        let (plugin, mode) = case.split_once(':').expect("plugin:mode");
        println!("RESULT {}", measure(plugin, mode).await);
        return;
    }
    let mut plugins = vec!["rust"];
    if std::env::var_os("WASMOP_POLYGLOT").is_some() {
        plugins.extend(["python", "javascript"]);
        // Built here once (cached by digest), so no case's time includes a build.
        let _ = (wasmop_e2e::polyglot::memcached_py(), wasmop_e2e::polyglot::memcached_js());
    } else {
        eprintln!("WASMOP_POLYGLOT is not set: measuring the Rust plugin only");
    }
    let _ = wasmop_e2e::fixtures::memcached();
    let mut rows = Vec::new();
    for plugin in &plugins {
        for mode in ["in-process", "subprocess"] {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .env(CASE, format!("{plugin}:{mode}"))
                .env("RUST_LOG", "error")
                .output()
                .expect("running a case");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let line = stdout
                .lines()
                .find_map(|l| Some(l.split_once("RESULT ")?.1))
                .unwrap_or_else(|| panic!("case {plugin}:{mode} failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
            rows.push(serde_json::from_str::<Value>(line).unwrap());
        }
    }
    println!(
        "\n| plugin | compiler | wasm | artifact | compile | cached load | child peak RSS | host RSS before | during (peak) | after load (anon) | after calls | after unload (anon) | per call p50 / mean |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        let f = |k: &str| r[k].as_f64().unwrap_or_default();
        let child = if r["mode"] == "subprocess" { format!("{:.0} MiB", f("child_peak_mib")) } else { "–".into() };
        println!(
            "| {} | {} | {:.1} MiB | {:.1} MiB | {:.2} s | {:.3} s | {child} | {:.0} MiB | {:.0} MiB | {:.0} MiB ({:.0}) | {:.0} MiB | {:.0} MiB ({:.0}) | {:.3} / {:.3} ms |",
            r["plugin"].as_str().unwrap_or_default(),
            r["mode"].as_str().unwrap_or_default(),
            f("wasm_mib"),
            f("artifact_mib"),
            f("compile_s"),
            f("cached_load_s"),
            f("rss_before"),
            f("rss_peak"),
            f("rss_after_load"),
            f("anon_after_load"),
            f("rss_after_calls"),
            f("rss_after_unload"),
            f("anon_after_unload"),
            f("call_p50_ms"),
            f("call_mean_ms"),
        );
    }
}
