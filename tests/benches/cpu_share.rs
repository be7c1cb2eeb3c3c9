//! What a plugin spinning to its deadline on half its objects costs memcached beside it, with a
//! CPU share holding it (and, for comparison, without one).
//!
//! `cargo bench -p wasmop-e2e --bench cpu_share` (a plain binary, `harness = false`).
//!
//! Environment:
//! - `N` (default 200): Memcached CRs (`size: 0`) created at once;
//! - `SPIN` (default 20): Testbeds in mode `spin-half` (half of them spin to the deadline on
//!   every call and are retried at least every 250 ms);
//! - `SHARE_MILLIS` (default 250): the spinner's `cpuShare`, in thousandths of a core;
//! - `WORKERS` (default 4): `--concurrency`;
//! - `WINDOW` (default 30): seconds over which the spinner's call time per second is measured
//!   (at least until every Memcached has converged);
//! - `RUNS` (default `ABC`): `A` memcached alone, `B` beside the spinner held to its share, `C`
//!   beside the spinner with no share to speak of (`cpuShare: 256`).
//!
//! Each run gets a fresh control plane and an in-process host (memcached, plus testbed in B and
//! C with a 200 ms deadline and the circuit breaker's failure trip off, so that only the share
//! holds the spinner). In B and C the spinner runs until it has spent 3 s of call time first.
//! The clock starts when the creates begin and stops when every Memcached shows
//! `Available=True`. Figures: B's convergence time against A's (target ≤ 1.2×), the spinner's
//! call time per second in B against its share (at most the share plus what the budget lets
//! through in the window: a second of the share and one deadline per worker), and C's, for
//! what the share buys.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use futures::StreamExt;
use serde_json::{Value, json};
use wasmop::controller::{BreakerConfig, ControllerConfig};
use wasmop::metrics::Metrics;
use wasmop::policy::HostPolicy;
use wasmop::queue::QueueConfig;
use wasmop::runtime::Runtime;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{Host, api_for, apply, apply_file};
use wasmop_e2e::figure;
use wasmop_e2e::plugins::{plugin, workspace};

#[path = "support/process.rs"]
mod process;

use figure::{Goal, figure};
use process::env_usize;

const DEADLINE: Duration = Duration::from_millis(200);

struct Knobs {
    n: usize,
    spin: usize,
    share: f64,
    workers: usize,
    window: Duration,
}

/// What one run measured.
struct Measured {
    converged: Duration,
    /// The spinner's call time per second over the window, if it ran.
    spinner_rate: Option<f64>,
    window: Duration,
}

fn sample(metrics: &Metrics, name: &str, plugin: &str) -> Option<f64> {
    let prefix = format!("{name}{{plugin=\"{plugin}\"}} ");
    metrics.render().lines().find_map(|line| line.strip_prefix(&prefix)?.parse().ok())
}

async fn run(knobs: &Knobs, spinner_share: Option<f64>) -> Result<Measured> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    for crd in ["memcached.yaml", "testbed.yaml"] {
        apply_file(&client, &workspace().join("crds").join(crd)).await?;
    }
    let memcached = plugin("memcached", "wasm32-wasip2");
    let testbed = plugin("testbed", "wasm32-wasip2");
    let policy = match spinner_share {
        Some(share) => format!("plugins: {{testbed: {{cpuShare: {share}, deadline: {}ms}}}}", DEADLINE.as_millis()),
        None => String::new(),
    };
    let policy = HostPolicy::from_yaml(&policy)?;
    let runtime = Runtime::builder().allowances(policy.allowances()).artifact_dir(None).build()?;
    let config = ControllerConfig {
        resync: None,
        concurrency: knobs.workers,
        queue: QueueConfig::default().max_delay(Duration::from_millis(250)).rate_per_second(1000.0),
        breaker: BreakerConfig::default().window_calls(0),
        policy,
        ..ControllerConfig::default()
    };
    let plugins: Vec<&std::path::Path> =
        if spinner_share.is_some() { vec![memcached.as_path(), testbed.as_path()] } else { vec![memcached.as_path()] };
    let host = Host::start_with(client.clone(), &plugins, config, runtime).await?;
    let metrics = Arc::clone(host.manager.metrics());
    if spinner_share.is_some() {
        for i in 0..knobs.spin {
            let testbed = json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
                "metadata": {"name": format!("x-{i}"), "namespace": "default"}, "spec": {"mode": "spin-half"}});
            apply(&client, &testbed).await?;
        }
        let warm = Instant::now();
        while sample(&metrics, "wasmop_plugin_cpu_seconds_total", "testbed").unwrap_or(0.0) < 3.0 {
            if warm.elapsed() > Duration::from_secs(120) {
                bail!("the spinner did not spend 3 s of call time in 2 minutes");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let charged_before = sample(&metrics, "wasmop_plugin_cpu_seconds_total", "testbed");
    let started = Instant::now();
    let memcacheds = api_for(&client, "cache.example.com/v1alpha1", "Memcached", Some("default")).await?;
    let creates = (0..knobs.n).map(|i| {
        let client = client.clone();
        async move {
            let object = json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
                "metadata": {"name": format!("m-{i}"), "namespace": "default"}, "spec": {"size": 0}});
            apply(&client, &object).await
        }
    });
    let created: Vec<_> = futures::stream::iter(creates).buffer_unordered(32).collect().await;
    created.into_iter().collect::<Result<Vec<_>>>()?;
    let converged = loop {
        let available = memcacheds
            .list(&Default::default())
            .await?
            .items
            .iter()
            .filter(|m| {
                let conditions = m.data.pointer("/status/conditions").and_then(Value::as_array);
                conditions.is_some_and(|c| c.iter().any(|c| c["type"] == "Available" && c["status"] == "True"))
            })
            .count();
        if available == knobs.n {
            break started.elapsed();
        }
        if started.elapsed() > Duration::from_secs(600) {
            bail!("{available} of {} Memcacheds converged in 10 minutes", knobs.n);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    while started.elapsed() < knobs.window {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let window = started.elapsed();
    let spinner_rate = match charged_before {
        Some(before) => {
            let after = sample(&metrics, "wasmop_plugin_cpu_seconds_total", "testbed").context("the spinner's call time")?;
            Some((after - before) / window.as_secs_f64())
        }
        None => None,
    };
    host.manager.shutdown().await;
    drop(cp);
    Ok(Measured { converged, spinner_rate, window })
}

async fn bench() -> Result<()> {
    let knobs = Knobs {
        n: env_usize("N", 200)?,
        spin: env_usize("SPIN", 20)?,
        share: env_usize("SHARE_MILLIS", 250)? as f64 / 1000.0,
        workers: env_usize("WORKERS", 4)?,
        window: Duration::from_secs(env_usize("WINDOW", 30)? as u64),
    };
    let runs = std::env::var("RUNS").unwrap_or_else(|_| "ABC".into());
    let (mut alone, mut held) = (None, None);
    for run_name in runs.chars() {
        let share = match run_name {
            'A' => None,
            'B' => Some(knobs.share),
            'C' => Some(256.0),
            other => bail!("unknown run {other:?} in RUNS (A, B or C)"),
        };
        let m = run(&knobs, share).await?;
        let rate = m.spinner_rate.map_or_else(|| "-".into(), |r| format!("{r:.3} cores"));
        println!(
            "run {run_name}: {} Memcacheds converged in {:.2} s; spinner call time over {:.0} s: {rate}",
            knobs.n,
            m.converged.as_secs_f64(),
            m.window.as_secs_f64()
        );
        match run_name {
            'A' => alone = Some(m.converged.as_secs_f64()),
            'B' => {
                held = Some(m.converged.as_secs_f64());
                let rate = m.spinner_rate.context("the spinner ran")?;
                let bound = knobs.share + (knobs.share + knobs.workers as f64 * DEADLINE.as_secs_f64()) / m.window.as_secs_f64();
                figure(
                    "cpu_share",
                    "spinner call time per second, held to its share",
                    rate,
                    Some(knobs.share),
                    "cores",
                    Goal::AtMost(bound),
                );
            }
            _ => {
                figure(
                    "cpu_share",
                    "memcached convergence beside the spinner without a share",
                    m.converged.as_secs_f64(),
                    alone,
                    "s",
                    Goal::None,
                );
                let rate = m.spinner_rate.context("the spinner ran")?;
                figure("cpu_share", "spinner call time per second without a share", rate, None, "cores", Goal::None);
            }
        }
    }
    if let Some(held) = held {
        figure(
            "cpu_share",
            "memcached convergence beside the spinner held to its share",
            held,
            alone,
            "s",
            Goal::RatioAtMost(1.2),
        );
    }
    Ok(())
}

fn main() -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    let _ = tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(filter).try_init();
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?.block_on(bench())
}
