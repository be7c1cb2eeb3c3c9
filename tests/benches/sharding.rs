//! Sharding across replicas on a real control plane: time to converge N parents and the
//! resident memory of each replica, with 1, 2 and 3 `wasmop run --sharding` replicas.
//!
//! `cargo bench -p wasmop-e2e --bench sharding` (a plain binary, `harness = false`). It runs the
//! release `wasmop` binary next to it (`target/release/wasmop`; build it first with
//! `cargo build --profile bench -p wasmop --bin wasmop`, as `scripts/bench.sh` does, or point
//! `WASMOP_BIN` at one).
//!
//! Environment:
//! - `N` (default 300): Memcached parents per run (`size: 0`; each gets a Deployment child);
//! - `REPLICAS` (default `1,2,3`): the replica counts, one run each; the first is the baseline;
//! - `SETTLE` (default 5): seconds between the replicas going quiet and their RSS being read.
//!
//! The scale workload is the same bench with `N=100000 REPLICAS=1,3` and kube-controller-manager's
//! Deployment controller off (`WASMOP_KCM_DISABLE=deployment-controller`: its ReplicaSets and
//! status updates for 100,000 Deployments would take hours on 2 cores), `sharding-scale` in
//! `scripts/bench.sh`: waits and polls grow with `N` (the convergence timeout is at least 15
//! minutes and 30 ms per parent; the convergence poll lists every parent, so it runs at most
//! every `N`/1000 seconds).
//!
//! A fresh control plane per run (Kubernetes 1.37 unless `WASMOP_K8S_VERSION` says otherwise;
//! kube-controller-manager's client rate and syncs `WASMOP_KCM_QPS` and `WASMOP_KCM_SYNCS`, which
//! the full `sharding` run raises so that the Deployments' ReplicaSets and status do not take
//! half an hour); its
//! replicas watch only the run's namespace (`--namespace`). A run:
//!
//! 1. starts k replicas (`--sharding`, shard names `r<k>-<i>`, concurrency 16, no resync, Lease
//!    4 s, retry period 500 ms) and waits until each is Ready and sees k members; reads each
//!    replica's RSS (its idle RSS, one plugin loaded, no object);
//! 2. creates N parents (32 at a time) and times until every parent is `Available=True` for its
//!    generation and has its Deployment: throughput = N / that time;
//! 3. waits until no replica has reconciled for 3 s, then reads each replica's RSS, its parents
//!    (`wasmop_shard_parents`), its cached Deployments (`wasmop_shard_cached_objects`) and
//!    whether it is the elected leader (`wasmop_leader`), whose sharder watches every parent
//!    and child of the run;
//! 4. stops the replicas with SIGTERM (each deletes its shard Lease on the way out), so the
//!    next run's members are only its own.
//!
//! Printed: a table per run and the figure lines of `scripts/bench.sh`, each against the first
//! run (1 replica): throughput (on 2 cores the replicas share the same CPUs as the API server,
//! so more replicas are not expected to be faster here), the largest replica's RSS, and the
//! object part of a replica's RSS (its RSS after converging minus its idle RSS), which falls
//! towards 1/k of the 1-replica run's when parents and children divide (target ≤ 0.4× with 3
//! replicas); and, with 2 or more replicas, the leader's extra memory per object its sharder
//! watches (target ≤ 1 KiB): the leader's object part minus what its own parents cost at the
//! other replicas' object part per parent, over the 2·N objects (parents and Deployments) its
//! sharder holds.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::apply_file;
use wasmop_e2e::plugins::{plugin, workspace};

use wasmop_e2e::figure;
#[path = "support/process.rs"]
mod process;

use figure::{Goal, figure};
use process::{env_usize, get, host_binary, memcached_resource, wait_converged};

const BENCH: &str = "sharding";
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(900);

/// How long convergence may take for `n` parents: [`CONVERGE_TIMEOUT`], or 30 ms per parent.
fn converge_timeout(n: usize) -> Duration {
    CONVERGE_TIMEOUT.max(Duration::from_millis(30) * u32::try_from(n).unwrap_or(u32::MAX))
}
const START_TIMEOUT: Duration = Duration::from_secs(600);

fn main() -> Result<()> {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn,kube_client::client::builder=off".into());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    // Current-thread: every child process is forked from the main thread, which lives as long as
    // the bench, so PR_SET_PDEATHSIG kills the children only when the bench ends.
    tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(bench())
}

/// The VmRSS of process `pid` in MiB: the median of five readings 200 ms apart.
async fn rss_mib(pid: u32) -> Result<f64> {
    let mut readings = Vec::new();
    for _ in 0..5 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).with_context(|| format!("process {pid} is gone"))?;
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_default();
        readings.push(kib / 1024.0);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    readings.sort_by(f64::total_cmp);
    Ok(readings[2])
}

/// Sum of the samples of the lines of a Prometheus text page starting with `prefix` (a family
/// name followed by `{` or a space, or a full series up to its value).
fn metric_sum(page: &str, prefix: &str) -> f64 {
    page.lines().filter(|l| l.starts_with(prefix)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
}

/// One `wasmop run --sharding` replica, killed when dropped (and by the kernel if the bench
/// dies).
struct Replica {
    name: String,
    child: Child,
    port: u16,
}

impl Replica {
    fn spawn(bin: &Path, cp: &ControlPlane, plugins: &Path, namespace: &str, name: &str, group: &str) -> Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut command = Command::new(bin);
        command
            .args(["run", "--plugins"])
            .arg(plugins)
            .arg("--kubeconfig")
            .arg(cp.kubeconfig_path())
            .args(["--metrics-addr", &format!("127.0.0.1:{port}"), "--concurrency", "16", "--resync", "0s"])
            .args(["--namespace", namespace, "--sharding", "--shard-name", name, "--leader-elect-name", group])
            .args(["--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s"])
            .args(["--leader-elect-retry-period", "500ms"])
            .env("WASMOP_CACHE_DIR", plugins.join(".cache"))
            .env("RUST_LOG", std::env::var("HOST_LOG").unwrap_or_else(|_| "warn".into()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(Self { name: name.to_owned(), child: command.spawn()?, port })
    }

    fn page(&self) -> Result<String> {
        get(self.port, "/metrics").map(|(_, page)| page)
    }

    /// Ready, and counting `members` live shard members.
    fn ready(&mut self, members: usize) -> Result<bool> {
        if let Some(status) = self.child.try_wait()? {
            anyhow::bail!("replica {} exited: {status}", self.name);
        }
        let Ok(page) = self.page() else { return Ok(false) };
        let ready = matches!(get(self.port, "/readyz"), Ok((200, _)));
        Ok(ready && metric_sum(&page, "wasmop_shard_members ") == members as f64)
    }

    /// Stop it with SIGTERM (it leaves the shard: its Lease is deleted), SIGKILL after 30 s.
    async fn stop(mut self) -> Result<()> {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let started = Instant::now();
        while self.child.try_wait()?.is_none() {
            if started.elapsed() > Duration::from_secs(30) {
                eprintln!("[sharding] {} did not stop within 30 s of SIGTERM; killing it", self.name);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait until no replica has reconciled for 3 s and their queues are empty.
async fn quiet(replicas: &[Replica], timeout: Duration) -> Result<()> {
    let started = Instant::now();
    let (mut last, mut since) = (-1.0, Instant::now());
    loop {
        let (mut count, mut depth) = (0.0, 0.0);
        for r in replicas {
            let page = r.page()?;
            count += metric_sum(&page, "controller_runtime_reconcile_total{");
            depth += metric_sum(&page, "workqueue_depth{");
        }
        if count != last || depth > 0.0 {
            (last, since) = (count, Instant::now());
        } else if since.elapsed() >= Duration::from_secs(3) {
            return Ok(());
        }
        ensure!(started.elapsed() < timeout, "replicas still reconciling after {timeout:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// What one run measured.
struct Run {
    replicas: usize,
    seconds: f64,
    /// Per replica: name, idle RSS, RSS after converging, parents, cached Deployments.
    each: Vec<(String, f64, f64, f64, f64)>,
    /// The index in `each` of the elected leader, if one replica said so.
    leader: Option<usize>,
}

impl Run {
    fn throughput(&self, n: usize) -> f64 {
        n as f64 / self.seconds
    }

    fn max_rss(&self) -> f64 {
        self.each.iter().map(|e| e.2).fold(0.0, f64::max)
    }

    /// The mean over replicas of RSS after converging minus idle RSS.
    fn object_part(&self) -> f64 {
        self.each.iter().map(|e| e.2 - e.1).sum::<f64>() / self.each.len() as f64
    }

    /// The leader's extra memory in bytes per object its sharder watches (`objects`): its
    /// object part minus its parents times the other replicas' object part per parent; `None`
    /// with a single replica (nothing to compare with) or no leader found.
    fn leader_bytes_per_object(&self, objects: usize) -> Option<f64> {
        let leader = &self.each[self.leader?];
        let others: Vec<_> = self.each.iter().enumerate().filter(|(i, _)| Some(*i) != self.leader).map(|(_, e)| e).collect();
        let parents: f64 = others.iter().map(|e| e.3).sum();
        if others.is_empty() || parents == 0.0 {
            return None;
        }
        let per_parent = others.iter().map(|e| e.2 - e.1).sum::<f64>() / parents;
        let extra_mib = (leader.2 - leader.1) - leader.3 * per_parent;
        Some(extra_mib * 1024.0 * 1024.0 / objects as f64)
    }
}

async fn run(
    bin: &Path,
    cp: &ControlPlane,
    client: &kube::Client,
    plugins: &Path,
    n: usize,
    k: usize,
    settle: Duration,
) -> Result<Run> {
    let namespace = format!("shard-bench-{k}");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}}))?;
    namespaces.create(&PostParams::default(), &ns).await?;
    let group = format!("shard-bench-{k}");
    let mut replicas: Vec<Replica> =
        (0..k).map(|i| Replica::spawn(bin, cp, plugins, &namespace, &format!("r{k}-{i}"), &group)).collect::<Result<_>>()?;
    let started = Instant::now();
    loop {
        let mut all = true;
        for r in &mut replicas {
            all &= r.ready(k)?;
        }
        if all {
            break;
        }
        ensure!(started.elapsed() < START_TIMEOUT, "{k} replicas not Ready with {k} members after {START_TIMEOUT:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(settle).await;
    let mut idle = Vec::new();
    for r in &replicas {
        idle.push(rss_mib(r.child.id()).await?);
    }

    let ar = memcached_resource();
    let crs: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &ar);
    let started = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let crs = crs.clone();
            let cr = DynamicObject::new(&format!("mem-{i:05}"), &ar).within(&namespace).data(json!({"spec": {"size": 0}}));
            async move { crs.create(&PostParams::default(), &cr).await.map(drop) }
        })
        .buffer_unordered(32)
        .try_for_each(|()| async { Ok(()) })
        .await?;
    let poll = Duration::from_millis(500).max(Duration::from_millis(n as u64));
    wait_converged(client, &namespace, n, poll, converge_timeout(n)).await?;
    let seconds = started.elapsed().as_secs_f64();
    eprintln!("[sharding] {k} replicas converged {n} parents in {seconds:.1} s");
    quiet(&replicas, converge_timeout(n)).await?;
    tokio::time::sleep(settle).await;
    let (mut each, mut leader) = (Vec::new(), None);
    for (i, (r, idle)) in replicas.iter().zip(idle).enumerate() {
        let page = r.page()?;
        if metric_sum(&page, "wasmop_leader ") == 1.0 {
            leader = Some(i);
        }
        let parents = metric_sum(&page, "wasmop_shard_parents{");
        let deployments = metric_sum(&page, "wasmop_shard_cached_objects{kind=\"apps/v1/Deployment\"}");
        each.push((r.name.clone(), idle, rss_mib(r.child.id()).await?, parents, deployments));
    }
    for r in replicas {
        r.stop().await?;
    }
    Ok(Run { replicas: k, seconds, each, leader })
}

async fn bench() -> Result<()> {
    let n = env_usize("N", 300)?;
    let settle = Duration::from_secs(env_usize("SETTLE", 5)? as u64);
    let counts: Vec<usize> = std::env::var("REPLICAS")
        .unwrap_or_else(|_| "1,2,3".into())
        .split(',')
        .map(|c| c.trim().parse().with_context(|| format!("REPLICAS: {c:?} is not a number")))
        .collect::<Result<_>>()?;
    ensure!(!counts.is_empty() && counts.iter().all(|c| (1..=10).contains(c)), "REPLICAS: counts from 1 to 10");
    let bin = host_binary()?;
    eprintln!("[sharding] N={n} REPLICAS={counts:?}; host {}; building the memcached plugin…", bin.display());
    let wasm = tokio::task::spawn_blocking(|| plugin("memcached", "wasm32-wasip2")).await?;
    let root = tempfile::tempdir()?;
    std::fs::copy(wasm, root.path().join("memcached.wasm"))?;
    let mut runs = Vec::new();
    for &k in &counts {
        // A fresh control plane per run: at N = 100,000 the objects a run leaves (its parents,
        // Deployments and ReplicaSets) would hold gigabytes of the API server's memory and
        // slow every list of the next run's replicas.
        let cp = ControlPlane::start().await?;
        let client = cp.client().await?;
        apply_file(&client, &workspace().join("crds/memcached.yaml")).await?;
        runs.push(run(&bin, &cp, &client, root.path(), n, k, settle).await?);
    }

    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZeroUsize::get);
    println!("\nSharding: {n} parents per run, {cores} cores");
    println!(
        "{:<10} {:<8} {:>9} {:>9} {:>8} {:>12} {:>7}",
        "replicas", "replica", "idle MiB", "RSS MiB", "parents", "Deployments", "leader"
    );
    for run in &runs {
        for (i, (name, idle, rss, parents, deployments)) in run.each.iter().enumerate() {
            let leads = if run.leader == Some(i) { "yes" } else { "" };
            println!("{:<10} {name:<8} {idle:>9.1} {rss:>9.1} {parents:>8} {deployments:>12} {leads:>7}", run.replicas);
        }
        println!("{:<10} converged in {:.1} s: {:.1} parents/s", run.replicas, run.seconds, run.throughput(n));
        if let Some(bytes) = run.leader_bytes_per_object(2 * n) {
            println!("{:<10} the leader's extra memory: {bytes:.0} bytes per watched object", run.replicas);
        }
    }
    println!();
    let base = &runs[0];
    let vs = base.replicas;
    figure(
        BENCH,
        &format!("throughput to all Available, {vs} replica(s), N = {n}"),
        base.throughput(n),
        None,
        "parents/s",
        Goal::None,
    );
    figure(BENCH, &format!("largest replica RSS, {vs} replica(s), N = {n}"), base.max_rss(), None, "MiB", Goal::None);
    let leader_figure = |run: &Run| {
        if let Some(bytes) = run.leader_bytes_per_object(2 * n) {
            figure(
                BENCH,
                &format!("the sharding leader's extra memory per watched object, {} replicas, N = {n}", run.replicas),
                bytes,
                None,
                "bytes",
                Goal::AtMost(1024.0),
            );
        }
    };
    leader_figure(base);
    for run in &runs[1..] {
        let k = run.replicas;
        figure(
            BENCH,
            &format!("throughput to all Available, {k} vs {vs} replica(s), N = {n} (not expected ≥ 1 on 2 shared cores)"),
            run.throughput(n),
            Some(base.throughput(n)),
            "parents/s",
            Goal::None,
        );
        figure(
            BENCH,
            &format!("largest replica RSS, {k} vs {vs} replica(s), N = {n}"),
            run.max_rss(),
            Some(base.max_rss()),
            "MiB",
            Goal::None,
        );
        figure(
            BENCH,
            &format!("object part of a replica's RSS (after converging − idle), {k} vs {vs} replica(s), N = {n} (→ 1/{k})"),
            run.object_part(),
            Some(base.object_part()),
            "MiB",
            if k == 3 { Goal::RatioAtMost(0.4) } else { Goal::None },
        );
        leader_figure(run);
    }
    Ok(())
}
