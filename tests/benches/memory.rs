//! Resident memory of the host process against the native kube-rs controller, on a real control
//! plane: idle, with 1, 10 and 50 plugins loaded, with N parents and their children, and with
//! foreign Deployments the host's label-filtered watch must not cache.
//!
//! `cargo bench -p wasmop-e2e --bench memory` (a plain binary, `harness = false`). It runs the
//! release `wasmop` binary next to it (`target/release/wasmop`; build it first with
//! `cargo build --profile bench -p wasmop --bin wasmop`, as `scripts/bench.sh` does, or point
//! `WASMOP_BIN` at one).
//!
//! Environment:
//! - `N` (default 1000): Memcached parents (`size: 0`; each gets a Deployment child);
//! - `PLUGINS` (default `1,10,50`): plugin counts measured without objects (distinct copies of
//!   the memcached component, below);
//! - `FOREIGN` (default 5000): Deployments without the wasmop label created last (`0`: skip);
//! - `SETTLE` (default 5): seconds between a process going quiet and its RSS being read;
//! - `WORST` (default 8): parents answered at once with the densest response the bounds allow
//!   (`0`: skip section 4).
//!
//! Every figure is the VmRSS of one process, read from `/proc/PID/status` (median of five
//! readings 200 ms apart): the host runs as `wasmop run` (concurrency 16, no resync, artifacts
//! cached in a directory of the bench, primed before measuring), the native controller (run D of
//! the convergence bench: the same logic with `predicates::generation`, one reflector per kind,
//! `managedFields` dropped, writing the host's `Reconciled` condition too, so both cache parents
//! of the same size) as this binary re-executed with `MEMORY_NATIVE_KUBECONFIG` set. One
//! control plane (Kubernetes 1.37 unless `WASMOP_K8S_VERSION` says otherwise) for the whole bench:
//!
//! 1. no objects: the host with 0 plugins, then with each count of `PLUGINS`; the native idle.
//!    Copy `i` of the memcached component has every `memcached` in its bytes replaced by
//!    `mcopy` + four letters (same length): a distinct module with its own plugin name, so it
//!    is compiled, loaded and run as a plugin of its own (its related-Pod selector, `app=<name>`,
//!    is its own too: one more watch per copy, as a distinct plugin would have);
//! 2. `N` parents created, then: the host (one plugin) started and left to converge them all
//!    (every Deployment applied, every parent `Available=True`), measured; the host restarted on
//!    the converged cluster (it only caches and checks), measured; restarted twice more, with
//!    `--initial-list paged` and `--initial-list streaming`, and its peak RSS at start (VmHWM)
//!    read each time; the native controller on the same cluster, measured;
//! 3. `FOREIGN` paused Deployments without the wasmop label added (kube-controller-manager
//!    creates no ReplicaSet for a paused Deployment); the host restarted, measured (its child
//!    watch selects `app.kubernetes.io/managed-by=wasmop` server-side); the native controller,
//!    whose Deployment watch is unfiltered, measured;
//! 4. the host on the testbed plugin with `maxResponseBytes: 16Mi`, measured idle, then `WORST`
//!    parents in mode `dense` created at once: each answer is the densest JSON the parsed-size
//!    bound admits (about 7 MB, estimated just under 4 × 16 MiB parsed); the host's peak RSS
//!    (VmHWM) once all are answered, against that idle reading.
//!
//! Printed: a table of every reading (VmRSS, RssAnon, RssFile in MiB), a second one of where
//! those pages are (`/proc/PID/smaps`: the executable, libraries, other files, the main heap,
//! the wasmtime pool, other anonymous memory; and the thread count), and the figure lines of
//! `scripts/bench.sh`.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::apply_file;
use wasmop_e2e::plugins::{plugin, workspace};

use wasmop_e2e::figure;
#[path = "support/native.rs"]
mod native;
#[path = "support/process.rs"]
mod process;
#[path = "support/smaps.rs"]
mod smaps;

use figure::{Goal, figure};
use process::{env_usize, get, host_binary, memcached_resource, metric_sum, until_host_ready, wait_converged};

const NAMESPACE: &str = "default";
/// Set in the environment of the re-executed bench binary: run only the native controller.
const NATIVE_CHILD: &str = "MEMORY_NATIVE_KUBECONFIG";
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(900);
const START_TIMEOUT: Duration = Duration::from_secs(600);

fn main() -> Result<()> {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn,kube_client::client::builder=off".into());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    if let Some(kubeconfig) = std::env::var_os(NATIVE_CHILD) {
        // Two workers, as the convergence bench gives each controller.
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        return rt.block_on(native_child(PathBuf::from(kubeconfig)));
    }
    // Current-thread: every child process is forked from the main thread, which lives as long as
    // the bench, so PR_SET_PDEATHSIG kills the children only when the bench ends.
    tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(bench())
}

// ---------------------------------------------------------------------------------------------
// The measured processes
// ---------------------------------------------------------------------------------------------

/// VmRSS, RssAnon and RssFile of a process, in MiB, and where its resident pages are.
#[derive(Debug, Clone, Copy, Default)]
struct Rss {
    total: f64,
    anon: f64,
    file: f64,
    map: Breakdown,
}

/// The resident set of a process by mapping (`/proc/PID/smaps`), in MiB, and its threads.
#[derive(Debug, Clone, Copy, Default)]
struct Breakdown {
    /// Mappings of the process's own executable (text, read-only data, relocated data).
    binary: f64,
    /// Mappings of shared libraries (`*.so*`).
    libraries: f64,
    /// Mappings of any other file (the host's plugin artifacts).
    other_files: f64,
    /// The main `malloc` arena (`[heap]`).
    heap: f64,
    /// wasmtime's pooling allocator: its slots' resident pages, the copy-on-write images of the
    /// plugins' memories mapped in them, its tables and fiber stacks ([`smaps::Mapping::pool`]).
    pool: f64,
    /// Every other anonymous mapping: glibc's per-thread arenas, large `malloc`s, thread stacks.
    other_anon: f64,
    /// `Threads:` of `/proc/PID/status`.
    threads: usize,
}

impl Breakdown {
    fn read(pid: u32, threads: usize) -> Result<Self> {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).with_context(|| format!("process {pid} is gone"))?;
        let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).with_context(|| format!("process {pid} is gone"))?;
        let mut map = Self { threads, ..Self::default() };
        for mapping in smaps::mappings(&smaps) {
            let slot = match mapping.name.as_str() {
                _ if mapping.pool => &mut map.pool,
                "" => &mut map.other_anon,
                "[heap]" => &mut map.heap,
                n if Path::new(n) == exe => &mut map.binary,
                n if n.contains(".so") => &mut map.libraries,
                n if n.starts_with('[') => &mut map.other_anon,
                _ => &mut map.other_files,
            };
            *slot += mapping.rss;
        }
        Ok(map)
    }
}

impl Rss {
    fn read(pid: u32) -> Result<Self> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).with_context(|| format!("process {pid} is gone"))?;
        let field = |name: &str| -> f64 {
            let kib: f64 = status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or_default();
            kib / 1024.0
        };
        let threads = status.lines().find_map(|l| l.strip_prefix("Threads:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
        Ok(Self { total: field("VmRSS:"), anon: field("RssAnon:"), file: field("RssFile:"), map: Breakdown::read(pid, threads)? })
    }

    /// The median (by VmRSS) of five readings 200 ms apart.
    async fn settled(pid: u32) -> Result<Self> {
        let mut readings = Vec::new();
        for _ in 0..5 {
            readings.push(Self::read(pid)?);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        readings.sort_by(|a, b| a.total.total_cmp(&b.total));
        Ok(readings[2])
    }
}

/// A child process, killed when dropped; the kernel kills it too if the bench dies.
struct Proc {
    child: Child,
    /// The last line the child printed on stdout.
    last_line: Arc<Mutex<String>>,
}

impl Proc {
    fn spawn(command: &mut Command) -> Result<Self> {
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn()?;
        let last_line = Arc::new(Mutex::new(String::new()));
        let stdout = child.stdout.take().context("child stdout")?;
        let sink = Arc::clone(&last_line);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                *sink.lock().expect("line lock") = line;
            }
        });
        Ok(Self { child, last_line })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn last_line(&self) -> String {
        self.last_line.lock().expect("line lock").clone()
    }

    fn check_running(&mut self, what: &str) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("{what} exited: {status}");
        }
        Ok(())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sum of the samples of a metric family in a Prometheus text page.
/// The host under test: `wasmop run` on `plugins`, and the port of its `/metrics`.
struct HostProc {
    proc: Proc,
    port: u16,
}

impl HostProc {
    /// Start it and wait until it is ready (`/readyz`) with `plugins` plugins running and its
    /// reconcile counter unchanged for 3 s with an empty queue.
    async fn start(bin: &Path, cp: &ControlPlane, dir: &Path, artifacts: &Path, plugins: usize) -> Result<Self> {
        Self::start_with(bin, cp, dir, artifacts, plugins, &[]).await
    }

    /// [`HostProc::start`] with more arguments to `wasmop run`.
    async fn start_with(
        bin: &Path,
        cp: &ControlPlane,
        dir: &Path,
        artifacts: &Path,
        plugins: usize,
        extra: &[&str],
    ) -> Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut proc = Proc::spawn(
            Command::new(bin)
                .args(["run", "--plugins"])
                .arg(dir)
                .arg("--kubeconfig")
                .arg(cp.kubeconfig_path())
                .args(["--metrics-addr", &format!("127.0.0.1:{port}"), "--concurrency", "16", "--resync", "0s"])
                .args(extra)
                .env("WASMOP_CACHE_DIR", artifacts)
                .env("RUST_LOG", std::env::var("HOST_LOG").unwrap_or_else(|_| "warn".into())),
        )?;
        until_host_ready(port, plugins, START_TIMEOUT, Duration::from_millis(200), || proc.check_running("wasmop run")).await?;
        let host = Self { proc, port };
        host.quiet().await?;
        Ok(host)
    }

    /// Wait until no reconcile has run for 3 s and the queues are empty.
    async fn quiet(&self) -> Result<()> {
        let started = Instant::now();
        let (mut last, mut since) = (-1.0, Instant::now());
        loop {
            let (_, page) = get(self.port, "/metrics")?;
            let (count, depth) = (metric_sum(&page, "controller_runtime_reconcile_total"), metric_sum(&page, "workqueue_depth"));
            if count != last || depth > 0.0 {
                (last, since) = (count, Instant::now());
            } else if since.elapsed() >= Duration::from_secs(3) {
                return Ok(());
            }
            ensure!(started.elapsed() < CONVERGE_TIMEOUT, "host still reconciling after {CONVERGE_TIMEOUT:?}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// The native controller in a process of its own (this binary, re-executed), once its stores
/// are synced and its reconcile count has not moved for 3 s.
async fn start_native_process(cp: &ControlPlane) -> Result<Proc> {
    let mut proc = Proc::spawn(Command::new(std::env::current_exe()?).env(NATIVE_CHILD, cp.kubeconfig_path()))?;
    let started = Instant::now();
    let (mut last, mut since) = (String::new(), Instant::now());
    loop {
        proc.check_running("native controller")?;
        let line = proc.last_line();
        if !line.starts_with("counts ") || line != last {
            (last, since) = (line, Instant::now());
        } else if since.elapsed() >= Duration::from_secs(3) {
            eprintln!("[memory] native controller quiet: {last}");
            return Ok(proc);
        }
        ensure!(started.elapsed() < CONVERGE_TIMEOUT, "native controller not quiet after {CONVERGE_TIMEOUT:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `MEMORY_NATIVE_KUBECONFIG` set: run the native controller (with the generation predicate)
/// and print its counts every 500 ms once its stores are ready, until killed.
async fn native_child(kubeconfig: PathBuf) -> Result<()> {
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?;
    let (_task, ctx) = native::start_native(
        kube::Client::try_from(config)?,
        memcached_resource(),
        native::NativeOptions { generation_predicate: true, reconciled_condition: true },
    )
    .await?;
    loop {
        let c = ctx.counts();
        println!(
            "counts reconciles={} applies={} status_patches={} errors={}",
            c.reconciles, c.applies, c.status_patches, c.errors
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Plugin copies
// ---------------------------------------------------------------------------------------------

/// Copy `index` (≥ 1) of a component: every `memcached` in its bytes replaced by `mcopy` and
/// four letters (same length, so every length prefix and offset stays valid); copy 0 is the
/// component itself.
///
/// # Errors
/// The component has no `memcached` to replace.
fn plugin_copy(wasm: &[u8], index: usize) -> Result<Vec<u8>> {
    const NAME: &[u8] = b"memcached";
    if index == 0 {
        return Ok(wasm.to_vec());
    }
    let mut name = b"mcopy".to_vec();
    let mut i = index;
    for _ in 0..4 {
        name.push(b'a' + (i % 26) as u8);
        i /= 26;
    }
    let mut out = wasm.to_vec();
    let mut replaced = 0;
    let mut at = 0;
    while let Some(pos) = out[at..].windows(NAME.len()).position(|w| w == NAME) {
        out[at + pos..at + pos + NAME.len()].copy_from_slice(&name);
        at += pos + NAME.len();
        replaced += 1;
    }
    ensure!(replaced > 0, "the component has no \"memcached\" to rename");
    Ok(out)
}

/// A plugins directory holding copies 0..`count`.
fn plugins_dir(root: &Path, wasm: &[u8], count: usize) -> Result<PathBuf> {
    let dir = root.join(format!("plugins-{count}"));
    std::fs::create_dir_all(&dir)?;
    for i in 0..count {
        std::fs::write(dir.join(format!("copy-{i:02}.wasm")), plugin_copy(wasm, i)?)?;
    }
    Ok(dir)
}

// ---------------------------------------------------------------------------------------------
// The bench
// ---------------------------------------------------------------------------------------------

/// One reading, for the table.
struct Reading {
    what: String,
    rss: Rss,
}

async fn bench() -> Result<()> {
    let n = env_usize("N", 1000)?;
    let foreign = env_usize("FOREIGN", 5000)?;
    let settle = Duration::from_secs(env_usize("SETTLE", 5)? as u64);
    let counts: Vec<usize> = std::env::var("PLUGINS")
        .unwrap_or_else(|_| "1,10,50".into())
        .split(',')
        .map(|c| c.trim().parse().with_context(|| format!("PLUGINS: {c:?} is not a number")))
        .collect::<Result<_>>()?;
    ensure!(counts.iter().all(|c| (1..=500).contains(c)), "PLUGINS: counts from 1 to 500");
    let bin = host_binary()?;
    eprintln!("[memory] N={n} PLUGINS={counts:?} FOREIGN={foreign}; host {}; building the memcached plugin…", bin.display());
    let wasm = std::fs::read(tokio::task::spawn_blocking(|| plugin("memcached", "wasm32-wasip2")).await?)?;
    let root = tempfile::tempdir()?;
    let artifacts = root.path().join("artifacts");
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/memcached.yaml")).await?;
    apply_file(&client, &workspace().join("crds/wasmplugin.yaml")).await?;
    let mut readings: Vec<Reading> = Vec::new();
    let mut measure = |what: String, rss: Rss| {
        eprintln!("[memory] {what}: {:.1} MiB", rss.total);
        readings.push(Reading { what, rss });
        rss.total
    };

    // ---- 1. no objects ----
    let most = counts.iter().copied().max().unwrap_or(1);
    let all = plugins_dir(root.path(), &wasm, most)?;
    eprintln!("[memory] priming the artifact cache with {most} copies…");
    drop(HostProc::start(&bin, &cp, &all, &artifacts, most).await?);
    let empty = plugins_dir(root.path(), &wasm, 0)?;
    let host = HostProc::start(&bin, &cp, &empty, &artifacts, 0).await?;
    tokio::time::sleep(settle).await;
    let idle = measure("host, no plugin, no object".into(), Rss::settled(host.proc.pid()).await?);
    drop(host);
    let mut with_plugins = Vec::new();
    for &k in &counts {
        let dir = if k == most { all.clone() } else { plugins_dir(root.path(), &wasm, k)? };
        let host = HostProc::start(&bin, &cp, &dir, &artifacts, k).await?;
        tokio::time::sleep(settle).await;
        with_plugins.push((k, measure(format!("host, {k} plugins, no object"), Rss::settled(host.proc.pid()).await?)));
    }
    let native = start_native_process(&cp).await?;
    tokio::time::sleep(settle).await;
    let native_idle = measure("native, no object".into(), Rss::settled(native.pid()).await?);
    drop(native);

    // ---- 2. N parents and their children ----
    let ar = memcached_resource();
    let crs: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &ar);
    create_all(n, |i| {
        let crs = crs.clone();
        let cr = DynamicObject::new(&format!("mem-{i:05}"), &ar).within(NAMESPACE).data(json!({"spec": {"size": 0}}));
        async move { crs.create(&PostParams::default(), &cr).await.map(drop) }
    })
    .await?;
    let one = plugins_dir(root.path(), &wasm, 1)?;
    let host = HostProc::start(&bin, &cp, &one, &artifacts, 1).await?;
    let started = Instant::now();
    wait_converged(&client, NAMESPACE, n, Duration::from_secs(1), CONVERGE_TIMEOUT).await?;
    host.quiet().await?;
    eprintln!(
        "[memory] host converged {n} parents in {:.1} s, {:.2} CPU-s since its start (user + system)",
        started.elapsed().as_secs_f64(),
        cpu_seconds(host.proc.pid())?
    );
    tokio::time::sleep(settle).await;
    let host_converged =
        measure(format!("host, {n} parents + children, after converging them"), Rss::settled(host.proc.pid()).await?);
    drop(host);
    let host = HostProc::start(&bin, &cp, &one, &artifacts, 1).await?;
    tokio::time::sleep(settle).await;
    let host_n = measure(format!("host, {n} parents + children, restarted"), Rss::settled(host.proc.pid()).await?);
    drop(host);
    // The peak at start (VmHWM once started and quiet), with each kind of initial list: one LIST
    // response per watch, or a streaming list where the server serves it (1.34+).
    let streaming_served = wasmop::watch::InitialList::served_by(&client.apiserver_version().await?);
    let modes: &[&str] = if streaming_served { &["paged", "streaming"] } else { &["paged"] };
    let mut peaks = Vec::new();
    for mode in modes {
        let host = HostProc::start_with(&bin, &cp, &one, &artifacts, 1, &["--initial-list", mode]).await?;
        let peak = peak_rss(host.proc.pid())?;
        eprintln!("[memory] host restarted with --initial-list {mode}: peak RSS {peak:.1} MiB");
        peaks.push(peak);
        drop(host);
    }
    let native = start_native_process(&cp).await?;
    tokio::time::sleep(settle).await;
    let native_n = measure(format!("native, {n} parents + children"), Rss::settled(native.pid()).await?);
    eprintln!("[memory] native: {}", native.last_line());
    drop(native);

    // ---- 3. foreign Deployments ----
    let foreign_rss = if foreign > 0 {
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
        create_all(foreign, |i| {
            let deployments = deployments.clone();
            let d: Deployment = serde_json::from_value(foreign_deployment(i)).expect("a valid Deployment");
            async move { deployments.create(&PostParams::default(), &d).await.map(drop) }
        })
        .await?;
        let host = HostProc::start(&bin, &cp, &one, &artifacts, 1).await?;
        tokio::time::sleep(settle).await;
        let host_f = measure(format!("host, {n} parents + {foreign} foreign Deployments"), Rss::settled(host.proc.pid()).await?);
        drop(host);
        let native = start_native_process(&cp).await?;
        tokio::time::sleep(settle).await;
        let native_f = measure(format!("native, {n} parents + {foreign} foreign Deployments"), Rss::settled(native.pid()).await?);
        drop(native);
        Some((host_f, native_f))
    } else {
        None
    };

    // ---- 4. the worst responses the bounds allow ----
    let worst = if env_usize("WORST", 8)? > 0 {
        Some(worst_allowed_responses(&bin, &cp, &client, root.path(), &artifacts, settle).await?)
    } else {
        None
    };
    if let Some((idle, peak)) = worst {
        measure("host, testbed idle (maxResponseBytes 16 MiB)".into(), idle);
        eprintln!("[memory] host peak RSS answering the densest allowed responses: {peak:.1} MiB");
    }

    println!("\nResident memory (MiB), one process each; {} cores, load average {}", num_cpus(), loadavg());
    println!("{:<58} {:>8} {:>8} {:>8}", "process and state", "VmRSS", "RssAnon", "RssFile");
    for r in &readings {
        println!("{:<58} {:>8.1} {:>8.1} {:>8.1}", r.what, r.rss.total, r.rss.anon, r.rss.file);
    }
    println!("\nWhere it is (MiB, /proc/PID/smaps): binary = the executable's own mappings, pool = wasmtime's slots,");
    println!("other anon = glibc's thread arenas, large allocations, thread stacks");
    println!(
        "{:<58} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}",
        "process and state", "binary", "libs", "files", "heap", "pool", "o.anon", "threads"
    );
    for r in &readings {
        let m = r.rss.map;
        println!(
            "{:<58} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>7}",
            r.what, m.binary, m.libraries, m.other_files, m.heap, m.pool, m.other_anon, m.threads
        );
    }
    println!();
    figure("memory", "host RSS, idle (no plugin, no object)", idle, Some(native_idle), "MiB", Goal::None);
    let one_plugin = with_plugins.iter().find(|(k, _)| *k == 1).map(|(_, r)| *r);
    if let Some(base) = one_plugin {
        for &(k, rss) in with_plugins.iter().filter(|(k, _)| *k > 1) {
            let per = (rss - base) / (k - 1) as f64;
            figure("memory", &format!("RSS per extra plugin, 1 → {k} plugins, no object"), per, None, "MiB", Goal::AtMost(2.0));
        }
    }
    if let [paged, streaming] = peaks[..] {
        figure(
            "memory",
            &format!("peak RSS at start with {n} parents + children, streaming lists vs one LIST"),
            streaming,
            Some(paged),
            "MiB",
            Goal::None,
        );
    } else {
        eprintln!("[memory] this server does not serve streaming lists by default: only the LIST start was measured");
    }
    let per_k = n as f64 / 1000.0;
    figure(
        "memory",
        &format!("RSS with {n} parents + children (restarted host vs native, same objects)"),
        host_n,
        Some(native_n),
        "MiB",
        Goal::RatioAtMost(1.2),
    );
    figure(
        "memory",
        &format!("RSS with {n} parents + children (host after converging them vs native)"),
        host_converged,
        Some(native_n),
        "MiB",
        Goal::RatioAtMost(1.2),
    );
    if let Some(base) = one_plugin {
        figure(
            "memory",
            "RSS added per 1,000 parents + children (host over its 1-plugin idle vs native over its idle)",
            (host_n - base) / per_k,
            Some((native_n - native_idle) / per_k),
            "MiB",
            Goal::None,
        );
    }
    if let Some((host_f, native_f)) = foreign_rss {
        figure(
            "memory",
            &format!("host RSS with {foreign} foreign Deployments vs without (filtered watch)"),
            host_f,
            Some(host_n),
            "MiB",
            Goal::RatioAtMost(1.1),
        );
        figure(
            "memory",
            &format!("native RSS with {foreign} foreign Deployments vs without (unfiltered watch)"),
            native_f,
            Some(native_n),
            "MiB",
            Goal::None,
        );
    }
    if let Some((idle, peak)) = worst {
        let parents = env_usize("WORST", 8)?;
        figure(
            "memory",
            &format!(
                "peak RSS, {parents} parents answered at once with the densest response the bounds allow \
                 (maxResponseBytes 16 MiB, {} MB of JSON each), vs the same host idle",
                WORST_DENSE_BYTES / 1_000_000
            ),
            peak,
            Some(idle.total),
            "MiB",
            Goal::None,
        );
    }
    drop(cp);
    Ok(())
}

/// Bytes of the densest response the bounds allow with `maxResponseBytes: 16Mi`: testbed mode
/// `dense` (members `"k<i>":""`, two values each) of this size is estimated at just under
/// `PARSED_SIZE_FACTOR` × 16 MiB parsed, so the host parses it instead of refusing it.
const WORST_DENSE_BYTES: u64 = 7_000_000;

/// Section 4: the host on the testbed plugin (`maxResponseBytes: 16Mi`), idle, then `WORST`
/// parents (default 8) created at once in mode `dense`, each answered with
/// [`WORST_DENSE_BYTES`] of the densest JSON the parsed-size bound admits (the child is too
/// large for the API server, so every apply fails after the host has parsed it). Returns the
/// idle reading and the host's peak RSS (VmHWM) once every parent has been answered once.
async fn worst_allowed_responses(
    bin: &Path,
    cp: &ControlPlane,
    client: &kube::Client,
    root: &Path,
    artifacts: &Path,
    settle: Duration,
) -> Result<(Rss, f64)> {
    let parents = env_usize("WORST", 8)?;
    let estimate = wasmop::contract::parsed_size::parsed_size(&dense_text(WORST_DENSE_BYTES));
    ensure!(
        estimate < wasmop::contract::parsed_size::PARSED_SIZE_FACTOR * (16 << 20),
        "the dense response ({estimate} bytes parsed, estimated) is not one the bounds allow"
    );
    apply_file(client, &workspace().join("crds/testbed.yaml")).await?;
    let dir = root.join("plugins-testbed");
    std::fs::create_dir_all(&dir)?;
    let testbed = tokio::task::spawn_blocking(|| plugin("testbed", "wasm32-wasip2")).await?;
    std::fs::copy(&testbed, dir.join("testbed.wasm"))?;
    let policy = root.join("worst-policy.yaml");
    std::fs::write(&policy, "plugins:\n  testbed: {deadline: 10s, memory: 256Mi, maxResponseBytes: 16Mi}\n")?;
    let policy_arg = policy.to_string_lossy().into_owned();
    let mut host = HostProc::start_with(bin, cp, &dir, artifacts, 1, &["--policy", &policy_arg]).await?;
    tokio::time::sleep(settle).await;
    let idle = Rss::settled(host.proc.pid()).await?;
    let ar = kube::discovery::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("test.wasmop.dev", "v1", "Testbed"),
        "testbeds",
    );
    let testbeds: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &ar);
    create_all(parents, |i| {
        let testbeds = testbeds.clone();
        let parent = DynamicObject::new(&format!("worst-{i}"), &ar)
            .within(NAMESPACE)
            .data(json!({"spec": {"mode": "dense", "bytes": WORST_DENSE_BYTES}}));
        async move { testbeds.create(&PostParams::default(), &parent).await.map(drop) }
    })
    .await?;
    // Every parent answered once (an apply that fails counts: its response was parsed).
    let started = Instant::now();
    loop {
        host.proc.check_running("wasmop run")?;
        let (_, page) = get(host.port, "/metrics")?;
        let answered = metric_sum(&page, "controller_runtime_reconcile_total");
        if answered >= parents as f64 {
            break;
        }
        ensure!(
            started.elapsed() < CONVERGE_TIMEOUT,
            "{answered} of {parents} dense parents answered after {CONVERGE_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let peak = peak_rss(host.proc.pid())?;
    Ok((idle, peak))
}

/// The JSON text of testbed mode `dense` at `bytes` (the same shape, for the estimate).
fn dense_text(bytes: u64) -> String {
    let mut text = String::from(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x-dense"},"data":{"#);
    let mut i = 0_u64;
    while (text.len() as u64) < bytes {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&format!(r#""k{i}":"""#));
        i += 1;
    }
    text.push_str("}}");
    text
}

/// Run `create(i)` for i in 0..count, 32 at a time.
async fn create_all<F, Fut>(count: usize, create: F) -> Result<()>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = kube::Result<()>>,
{
    let started = Instant::now();
    futures::stream::iter(0..count).map(create).buffer_unordered(32).try_for_each(|()| async { Ok(()) }).await?;
    eprintln!("[memory] created {count} objects in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// A paused Deployment of no replicas, not labelled for wasmop: kube-controller-manager only
/// writes its status.
fn foreign_deployment(i: usize) -> serde_json::Value {
    let name = format!("foreign-{i:05}");
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": name}},
        "spec": {"replicas": 0, "paused": true, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "registry.invalid/foreign:1"}]}}}})
}

/// VmHWM of `pid` (its peak resident set since it started), in MiB.
fn peak_rss(pid: u32) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .context("VmHWM in /proc/PID/status")?;
    Ok(kib / 1024.0)
}

/// User plus system CPU time of a process so far, in seconds (`/proc/PID/stat`, fields 14 and
/// 15, in clock ticks of 1/100 s on Linux).
fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).with_context(|| format!("process {pid} is gone"))?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: Vec<f64> = after.split_whitespace().skip(11).take(2).filter_map(|f| f.parse().ok()).collect();
    Ok(ticks.iter().sum::<f64>() / 100.0)
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(0, std::num::NonZeroUsize::get)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
