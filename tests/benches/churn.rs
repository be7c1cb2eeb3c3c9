//! Churn: does the host's memory return close to where it started when parents come and go?
//!
//! `cargo bench -p wasmop-e2e --bench churn` (a plain binary, `harness = false`).
//!
//! Environment:
//! - `N` (default 2000): Testbed parents created per round (mode `ok`: each gets one ConfigMap
//!   child and a status);
//! - `ROUNDS` (default 3): create N, wait until every child is applied and cached, delete them
//!   all, wait until the host's cache is empty again (the garbage collector deletes the
//!   children, at its own pace) and up to 10 s more for the apply fingerprints to go;
//! - `INFLIGHT` (default 32): concurrent create calls;
//! - `CHURN_EXIT_NOW` (set to anything): exit right after the last row, without shutting the
//!   host down, so that a heap profiler's "leaked at exit" is what the host held then (run
//!   it under `heaptrack` with `ROUNDS=0` and again with `ROUNDS=1`, and compare the two with
//!   `heaptrack_print --diff`).
//!
//! A fresh `ControlPlane` (Kubernetes 1.37 unless `WASMOP_K8S_VERSION` says otherwise, whose garbage
//! collector deletes the children of deleted parents) runs the testbed plugin in a host inside
//! this process, with the `wasmop` binary's allocator settings ([`wasmop::allocator::tune`]) and
//! its return of freed memory ([`wasmop::allocator::give_back`], as `wasmop run` does). It
//! prints the process's resident set (VmRSS) when idle, when loaded and after each round's
//! deletes, both as the host leaves it (read when idle and after the deletes once the
//! give-back has had a turn) and after `malloc_trim(0)` (what the process still uses); what
//! `malloc` holds (its live blocks, and what it
//! took from the kernel); what wasmtime's instance pool keeps resident (the rest is code,
//! thread stacks and the allocator's free pages it cannot return); and the apply fingerprints
//! held.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use futures::{StreamExt, stream};
use kube::api::{DeleteParams, ListParams, Request};
use serde_json::json;
use wasmop::contract::Kind;
use wasmop::controller::{BreakerConfig, PluginController};
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{Host, apply, apply_file};
use wasmop_e2e::plugins::{plugin_with_features, workspace};

use wasmop_e2e::figure;
#[path = "support/smaps.rs"]
mod smaps;

use figure::{Goal, figure};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The resident set in MiB, read from `/proc/self/status`, without and with `malloc_trim(0)`.
fn rss() -> (f64, f64) {
    let read = || {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_default();
        kib / 1024.0
    };
    let raw = read();
    wasmop::allocator::trim();
    (raw, read())
}

/// What `malloc` holds, in MiB: its live blocks, and all it took from the kernel.
fn heap() -> (f64, f64) {
    let mib = |bytes: usize| bytes as f64 / f64::from(1 << 20);
    wasmop::allocator::heap().map_or((f64::NAN, f64::NAN), |h| (mib(h.in_use), mib(h.held)))
}

fn main() -> Result<()> {
    wasmop::allocator::tune();
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn,kube_client::client::builder=off".into());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?.block_on(churn())
}

/// Poll `done` every 200 ms, at most `limit`.
async fn wait(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> Result<Duration> {
    let started = Instant::now();
    while !done() {
        if started.elapsed() > limit {
            bail!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(started.elapsed())
}

fn cached(controller: &PluginController) -> (usize, usize) {
    let parents = controller.cache().list(&Kind::new("test.wasmop.dev", "v1", "Testbed"), None).len();
    let config_maps = controller.cache().list(&Kind::new("", "v1", "ConfigMap"), Some("default"));
    let children = config_maps
        .iter()
        .filter(|c| c.head().pointer("/metadata/ownerReferences").and_then(|r| r.as_array()).is_some_and(|r| !r.is_empty()));
    (parents, children.count())
}

async fn churn() -> Result<()> {
    let (n, rounds, inflight) = (env("N", 2000), env("ROUNDS", 3), env("INFLIGHT", 32));
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/testbed.yaml")).await?;
    let plugin = plugin_with_features("testbed", "wasm32-wasip2", &[]);
    let mut config = Host::test_config();
    config.breaker = BreakerConfig::default().window_calls(1_000_000);
    let _give_back = tokio::spawn(wasmop::allocator::give_back());
    let host = Host::start(client.clone(), &[&plugin], config).await?;
    let controller = host.manager.controller("testbed").expect("testbed runs");
    // Rows taken when the host has gone quiet wait for the give-back's next turn.
    let settle = || tokio::time::sleep(wasmop::allocator::GIVE_BACK_EVERY + Duration::from_secs(2));
    settle().await;

    let row = |phase: &str, controller: &PluginController| {
        let (raw, trimmed) = rss();
        let (live, held) = heap();
        let pool = smaps::own_pool();
        let (parents, children) = cached(controller);
        println!(
            "{phase:<22} {raw:>9.1} {trimmed:>12.1} {live:>10.1} {held:>10.1} {pool:>10.1} {parents:>8} {children:>9} {:>13}",
            controller.applied_children()
        );
        (raw, trimmed)
    };
    println!("N = {n} parents per round, {rounds} rounds, testbed plugin (one ConfigMap child each)");
    println!(
        "{:<22} {:>9} {:>12} {:>10} {:>10} {:>10} {:>8} {:>9} {:>13}",
        "phase", "RSS MiB", "trimmed MiB", "live MiB", "held MiB", "pool MiB", "parents", "children", "fingerprints"
    );
    let idle = row("idle", &controller);
    let (mut loaded, mut deleted) = (idle, idle);
    for round in 1..=rounds {
        let started = Instant::now();
        // The creates and the delete go through clients of their own, dropped before the
        // rows: a pool of up to INFLIGHT connections (TLS and read buffers) is the load
        // generator's memory, not the host's, and would otherwise be counted with it.
        let load = cp.client().await?;
        stream::iter(0..n)
            .map(|i| {
                let client = load.clone();
                async move {
                    let cr = json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
                        "metadata": {"name": format!("churn-{round}-{i:05}"), "namespace": "default"}, "spec": {"mode": "ok"}});
                    apply(&client, &cr).await
                }
            })
            .buffer_unordered(inflight)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<Vec<_>>>()?;
        drop(load);
        wait("every child applied", Duration::from_secs(900), || {
            cached(&controller) == (n, n) && controller.applied_children() >= n
        })
        .await?;
        loaded = row(&format!("round {round} loaded"), &controller);
        // The answer to a collection delete lists every deleted parent: read as one text and
        // dropped, never decoded, so that the load generator leaves none of it in the heap.
        let load = cp.client().await?;
        let request = Request::new("/apis/test.wasmop.dev/v1/namespaces/default/testbeds")
            .delete_collection(&DeleteParams::default(), &ListParams::default())?;
        drop(load.request_text(request).await?);
        drop(load);
        wait("every parent and child gone from the cache", Duration::from_secs(900), || cached(&controller) == (0, 0)).await?;
        // The fingerprints go with the delete events; whatever is left after that leaks.
        let _ = wait("no fingerprint left", Duration::from_secs(10), || controller.applied_children() == 0).await;
        settle().await;
        deleted = row(&format!("round {round} deleted"), &controller);
        eprintln!("round {round}: {:.1} s", started.elapsed().as_secs_f64());
    }
    if std::env::var_os("CHURN_EXIT_NOW").is_some() {
        std::process::exit(0);
    }
    host.manager.shutdown().await;
    let fingerprints = controller.applied_children();
    figure(
        "churn",
        &format!("RSS after {rounds} rounds of {n} parents created and deleted, vs idle (trimmed)"),
        deleted.1,
        Some(idle.1),
        "MiB",
        Goal::RatioAtMost(1.2),
    );
    figure(
        "churn",
        &format!("RSS with {n} parents and children loaded, vs idle (trimmed; in-process host)"),
        loaded.1,
        Some(idle.1),
        "MiB",
        Goal::None,
    );
    figure(
        "churn",
        &format!(
            "RSS after {rounds} rounds of {n} parents created and deleted, vs idle (as the host leaves it: its own give-back, no trim by the bench)"
        ),
        deleted.0,
        Some(idle.0),
        "MiB",
        Goal::RatioAtMost(1.2),
    );
    figure("churn", "apply fingerprints left after the last delete", fingerprints as f64, None, "", Goal::AtMost(0.0));
    Ok(())
}
