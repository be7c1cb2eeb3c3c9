//! Test harness: a real Kubernetes control plane on loopback, for end-to-end tests.
//!
//! [`ControlPlane::start`] provisions (once per process, via `scripts/control-plane.sh install`,
//! which builds them from Go modules the first time) and starts etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler and kwok as child processes of the test, on free
//! loopback ports, with all state in a temporary directory. kwok plays the kubelet of
//! [`NODES`] simulated Nodes, so Pods are scheduled and become Running and Ready (no container
//! runs). The Kubernetes version is `WASMOP_K8S_VERSION` (`1.37`, the default, or `1.33`).
//! The children are killed when the [`ControlPlane`] is dropped, and the kernel kills them if
//! the test process dies (`PR_SET_PDEATHSIG`).
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let cp = wasmop_e2e::ControlPlane::start().await?;
//! let client = cp.client().await?;
//! // ... use `client`, or point a host process at `cp.kubeconfig_path()` ...
//! cp.stop_apiserver()?;
//! cp.start_apiserver().await?;
//! # Ok(()) }
//! ```
//!
//! Set `WASMOP_E2E_KEEP=1` to keep the state directory (logs, kubeconfig) after the test;
//! its path is printed on stderr at start-up. `WASMOP_KCM_QPS=Q` raises kube-controller-manager's
//! client rate from its default 20 requests per second to `Q` (burst `2·Q`): a bench with
//! tens of thousands of Deployments otherwise waits hours for their ReplicaSets and status;
//! `WASMOP_KCM_SYNCS=S` runs `S` Deployment and ReplicaSet syncs at once instead of 5 each;
//! `WASMOP_KCM_DISABLE=a,b` turns kube-controller-manager's controllers `a` and `b` off (e.g.
//! `deployment-controller`: Deployments then get no ReplicaSet and no status).

pub mod cluster;
pub mod figure;
pub mod fixtures;
pub mod host;
pub mod machine;
pub mod objects;
pub mod pace;
pub mod plans;
pub mod plugins;
pub mod polyglot;
pub mod registry;
pub mod tools;

use std::fs;
use std::io::{self, Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use kube::config::{KubeConfigOptions, Kubeconfig};

/// Token of the built-in admin user (`admin`, group `system:masters`) in `tokens.csv`.
pub const ADMIN_TOKEN: &str = "admin-token";

/// How long to wait for `/readyz` after (re)starting the API server.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How many simulated Nodes every control plane registers (named `node-0`, `node-1`, ...).
pub const NODES: usize = 2;

/// How long to wait for the simulated Nodes to become Ready.
const NODES_TIMEOUT: Duration = Duration::from_secs(60);

/// An extra static bearer token known to the API server (a line of its `--token-auth-file`),
/// e.g. for a non-admin user whose permissions a test grants through RBAC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticToken {
    /// The bearer token itself.
    pub token: String,
    /// User name the token authenticates as.
    pub user: String,
    /// Groups of that user (may be empty).
    pub groups: Vec<String>,
}

impl StaticToken {
    /// A token for `user` with the given `groups`.
    pub fn new(token: impl Into<String>, user: impl Into<String>, groups: &[&str]) -> Self {
        Self { token: token.into(), user: user.into(), groups: groups.iter().map(|g| (*g).to_owned()).collect() }
    }
}

/// A running etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok on loopback.
///
/// Everything is stopped (killed) on drop; the state directory is removed unless
/// `WASMOP_E2E_KEEP=1` is set.
#[derive(Debug)]
pub struct ControlPlane {
    dir: tempfile::TempDir,
    bin: PathBuf,
    api_port: u16,
    etcd_port: u16,
    etcd: Mutex<Option<Child>>,
    apiserver: Mutex<Option<Child>>,
    controller_manager: Mutex<Option<Child>>,
    scheduler: Mutex<Option<Child>>,
    kwok: Mutex<Option<Child>>,
}

impl ControlPlane {
    /// Provision the binaries if needed and start the control plane with only the admin
    /// token; returns once `/readyz` says `ok`, kube-controller-manager is running and the
    /// [`NODES`] simulated Nodes are Ready.
    ///
    /// # Errors
    /// When a binary cannot be built or a component does not start; the message carries the
    /// last lines of its log. A bin dir without kube-scheduler and kwok (a `KUBEBUILDER_ASSETS`
    /// of envtest's) is an error too: the tests count Ready Pods.
    pub async fn start() -> Result<ControlPlane> {
        Self::start_with_tokens(&[]).await
    }

    /// Like [`ControlPlane::start`], with `extra` static tokens besides [`ADMIN_TOKEN`].
    pub async fn start_with_tokens(extra: &[StaticToken]) -> Result<ControlPlane> {
        let bin = control_plane_bin_dir()?;
        // Ports are chosen by binding port 0 and releasing them, so another process may grab
        // one before etcd/apiserver binds it: retry with fresh ports in that (rare) case.
        let mut attempt = 1;
        loop {
            match Self::try_start(&bin, extra).await {
                Ok(cp) => return Ok(cp),
                Err(e) if attempt < 3 && e.is::<EarlyExit>() => {
                    eprintln!("[wasmop-e2e] control plane start attempt {attempt} failed: {e:#}");
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn try_start(bin: &Path, extra: &[StaticToken]) -> Result<ControlPlane> {
        let keep = std::env::var_os("WASMOP_E2E_KEEP").is_some_and(|v| v != "0" && !v.is_empty());
        let dir = tempfile::Builder::new()
            .prefix("wasmop-e2e-")
            .disable_cleanup(keep)
            .tempdir()
            .context("creating control-plane state dir")?;
        let d = dir.path().to_owned();
        let d = d.as_path();
        for sub in ["certs", "etcd", "logs"] {
            fs::create_dir_all(d.join(sub))?;
        }
        // etcd refuses a data dir that others can read.
        fs::set_permissions(d.join("etcd"), std::os::unix::fs::PermissionsExt::from_mode(0o700))?;

        let mut tokens = format!("{ADMIN_TOKEN},admin,admin,system:masters\n");
        for t in extra {
            tokens.push_str(&format!("{},{},{},{}\n", t.token, t.user, t.user, csv_groups(&t.groups)));
        }
        fs::write(d.join("tokens.csv"), tokens)?;

        // Service-account signing key (apiserver signs/verifies, controller-manager signs).
        let status = Command::new("openssl")
            .args(["genrsa", "-out"])
            .arg(d.join("sa.key"))
            .arg("2048")
            .stderr(Stdio::null())
            .status()
            .context("running openssl genrsa (is openssl installed?)")?;
        if !status.success() {
            bail!("openssl genrsa failed: {status}");
        }

        let [etcd_port, peer_port, api_port] = free_ports::<3>()?;
        eprintln!(
            "[wasmop-e2e] control plane in {} (etcd 127.0.0.1:{etcd_port}, apiserver https://127.0.0.1:{api_port})",
            d.display()
        );

        let cp = ControlPlane {
            bin: bin.to_owned(),
            api_port,
            etcd_port,
            etcd: Mutex::new(None),
            apiserver: Mutex::new(None),
            controller_manager: Mutex::new(None),
            scheduler: Mutex::new(None),
            kwok: Mutex::new(None),
            dir,
        };
        // From here on, `cp`'s Drop cleans up whatever was started.

        let etcd = spawn(
            Command::new(cp.bin.join("etcd"))
                .args(["--name", "wasmop", "--data-dir"])
                .arg(d.join("etcd"))
                .args(["--listen-client-urls", &format!("http://127.0.0.1:{etcd_port}")])
                .args(["--advertise-client-urls", &format!("http://127.0.0.1:{etcd_port}")])
                .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer_port}")])
                .args(["--initial-advertise-peer-urls", &format!("http://127.0.0.1:{peer_port}")])
                .args(["--initial-cluster", &format!("wasmop=http://127.0.0.1:{peer_port}")])
                // 8 GiB instead of 2: a scale bench's objects and their history must not stop
                // the store ("database space exceeded") before the API server compacts it.
                .args(["--quota-backend-bytes", "8589934592"]),
            &d.join("logs/etcd.log"),
        )?;
        *lock(&cp.etcd) = Some(etcd);

        cp.start_apiserver().await?;
        cp.write_kubeconfig(&cp.kubeconfig_path(), ADMIN_TOKEN)?;

        let mut kcm = Command::new(cp.bin.join("kube-controller-manager"));
        kcm.arg("--kubeconfig")
            .arg(cp.kubeconfig_path())
            .args(["--leader-elect=false", "--secure-port", "0"])
            .arg("--service-account-private-key-file")
            .arg(d.join("sa.key"))
            .arg("--root-ca-file")
            .arg(cp.ca_path());
        if let Some(qps) = positive_env("WASMOP_KCM_QPS")? {
            kcm.args(["--kube-api-qps", &qps.to_string(), "--kube-api-burst", &(2 * qps).to_string()]);
        }
        if let Some(off) = std::env::var("WASMOP_KCM_DISABLE").ok().filter(|v| !v.trim().is_empty()) {
            let off: Vec<String> = off.split(',').map(|c| format!("-{}", c.trim())).collect();
            kcm.arg(format!("--controllers=*,{}", off.join(",")));
        }
        if let Some(syncs) = positive_env("WASMOP_KCM_SYNCS")? {
            kcm.args(["--concurrent-deployment-syncs", &syncs.to_string(), "--concurrent-replicaset-syncs", &syncs.to_string()]);
        }
        let kcm = spawn(&mut kcm, &d.join("logs/kube-controller-manager.log"))?;
        *lock(&cp.controller_manager) = Some(kcm);
        cp.start_nodes().await?;
        Ok(cp)
    }

    /// Start kube-scheduler and kwok, register [`NODES`] Nodes for kwok, and wait until they
    /// are Ready.
    async fn start_nodes(&self) -> Result<()> {
        let d = self.dir.path();
        for needed in ["kube-scheduler", "kwok", "kwok-stages.yaml"] {
            if !self.bin.join(needed).exists() {
                bail!(
                    "{} has no {needed}: the tests need Nodes that run Pods (run scripts/control-plane.sh install, \
                     or point KUBEBUILDER_ASSETS at a directory it built)",
                    self.bin.display()
                );
            }
        }
        let scheduler = spawn(
            Command::new(self.bin.join("kube-scheduler")).arg("--kubeconfig").arg(self.kubeconfig_path()).args([
                "--leader-elect=false",
                "--secure-port",
                "0",
            ]),
            &d.join("logs/kube-scheduler.log"),
        )?;
        *lock(&self.scheduler) = Some(scheduler);
        let kwok = spawn(
            Command::new(self.bin.join("kwok"))
                .arg("--kubeconfig")
                .arg(self.kubeconfig_path())
                .arg("--config")
                .arg(self.bin.join("kwok-stages.yaml"))
                .args(["--manage-all-nodes=false", "--manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node=fake"])
                .args(["--cidr", "10.244.0.0/16", "--node-ip", "127.0.0.1"])
                // Heartbeats through Leases in kube-node-lease, renewed every 10 s: without them
                // kube-controller-manager marks the Nodes NotReady after its grace period, and
                // their Pods unready, until kwok's next status heartbeat (minutes later).
                .args(["--node-lease-duration-seconds", "40"]),
            &d.join("logs/kwok.log"),
        )?;
        *lock(&self.kwok) = Some(kwok);

        let client = self.client().await?;
        let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
        for i in 0..NODES {
            let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(node_json(&format!("node-{i}")))?;
            nodes.create(&kube::api::PostParams::default(), &node).await.context("registering a simulated Node")?;
        }
        let deadline = Instant::now() + NODES_TIMEOUT;
        loop {
            for (name, slot) in
                [("kube-controller-manager", &self.controller_manager), ("kube-scheduler", &self.scheduler), ("kwok", &self.kwok)]
            {
                if let Some(status) = lock(slot).as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                    return Err(EarlyExit(format!("{name} exited ({status}):\n{}", self.log_tail(name, 30))).into());
                }
            }
            let list = nodes.list(&Default::default()).await?;
            let ready = list.items.iter().filter(|n| node_ready(n)).count();
            if ready == NODES {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "{ready} of {NODES} simulated Nodes Ready after {NODES_TIMEOUT:?}; kwok's log:\n{}",
                    self.log_tail("kwok", 30)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Start kube-apiserver (again) on the same port against the same etcd, and wait until
    /// `/readyz` says `ok`. Errors if it is already running.
    pub async fn start_apiserver(&self) -> Result<()> {
        let d = self.dir.path();
        {
            let mut slot = lock(&self.apiserver);
            if let Some(child) = slot.as_mut()
                && child.try_wait()?.is_none()
            {
                bail!("kube-apiserver is already running");
            }
            let child = spawn(
                Command::new(self.bin.join("kube-apiserver"))
                    .args(["--etcd-servers", &format!("http://127.0.0.1:{}", self.etcd_port)])
                    .args(["--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1"])
                    // A loopback advertise address cannot back the `kubernetes` Service's
                    // endpoints; nothing here runs in a Pod that would use them.
                    .args(["--endpoint-reconciler-type", "none"])
                    .args(["--secure-port", &self.api_port.to_string()])
                    .arg("--cert-dir")
                    .arg(d.join("certs"))
                    .arg("--token-auth-file")
                    .arg(d.join("tokens.csv"))
                    .args(["--authorization-mode", "RBAC"])
                    .args(["--service-account-issuer", "https://kubernetes.default.svc"])
                    .arg("--service-account-key-file")
                    .arg(d.join("sa.key"))
                    .arg("--service-account-signing-key-file")
                    .arg(d.join("sa.key"))
                    .args(["--service-cluster-ip-range", "10.0.0.0/24"])
                    .args(["--disable-admission-plugins", "ServiceAccount"]),
                &d.join("logs/kube-apiserver.log"),
            )?;
            *slot = Some(child);
        }
        self.wait_ready().await
    }

    /// Stop kube-apiserver gracefully-ish and wait until it has exited; etcd and
    /// kube-controller-manager keep running. [`ControlPlane::start_apiserver`] brings it back
    /// on the same port.
    ///
    /// Sends SIGTERM (the listener closes at once, in-flight requests get a moment to
    /// finish), then SIGKILL after 2 s: an apiserver otherwise waits out its shutdown timeout
    /// for the watches the other components keep open.
    pub fn stop_apiserver(&self) -> Result<()> {
        let child = lock(&self.apiserver).take();
        match child {
            Some(mut c) => terminate(&mut c, Duration::from_secs(2)),
            None => bail!("kube-apiserver is not running"),
        }
    }

    /// Kill kube-apiserver with SIGKILL (a crash: no graceful shutdown at all) and reap it.
    /// [`ControlPlane::start_apiserver`] brings it back on the same port.
    pub fn kill_apiserver(&self) -> Result<()> {
        let child = lock(&self.apiserver).take();
        match child {
            Some(mut c) => {
                c.kill()?;
                c.wait()?;
                Ok(())
            }
            None => bail!("kube-apiserver is not running"),
        }
    }

    /// Path of a kubeconfig for the admin user (bearer token [`ADMIN_TOKEN`], CA verified).
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// A [`kube::Client`] for the admin user.
    pub async fn client(&self) -> Result<kube::Client> {
        self.client_with_token(ADMIN_TOKEN).await
    }

    /// A [`kube::Client`] that authenticates with `token` (e.g. a [`StaticToken`] passed to
    /// [`ControlPlane::start_with_tokens`], or a ServiceAccount token from the TokenRequest API).
    pub async fn client_with_token(&self, token: &str) -> Result<kube::Client> {
        let kubeconfig = self.kubeconfig_yaml(token);
        let kc = Kubeconfig::from_yaml(&kubeconfig).context("parsing generated kubeconfig")?;
        let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .context("loading generated kubeconfig")?;
        kube::Client::try_from(config).context("building kube client")
    }

    /// Write a kubeconfig for `token` to `path` (same server and CA as
    /// [`ControlPlane::kubeconfig_path`]), e.g. to run a host process as a non-admin user.
    pub fn write_kubeconfig(&self, path: &Path, token: &str) -> Result<()> {
        fs::write(path, self.kubeconfig_yaml(token)).with_context(|| format!("writing {}", path.display()))
    }

    /// The admin bearer token ([`ADMIN_TOKEN`]).
    pub fn admin_token(&self) -> &str {
        ADMIN_TOKEN
    }

    /// The API server URL, `https://127.0.0.1:PORT`.
    pub fn server_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.api_port)
    }

    /// The API server's port (stable across [`ControlPlane::stop_apiserver`] /
    /// [`ControlPlane::start_apiserver`]).
    pub fn api_port(&self) -> u16 {
        self.api_port
    }

    /// The API server's self-signed serving certificate followed by its CA
    /// (`certs/apiserver.crt`); valid as a CA bundle for `127.0.0.1`.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.path().join("certs/apiserver.crt")
    }

    /// The state directory (certs, `sa.key`, `tokens.csv`, `etcd/`, `logs/NAME.log`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The directory holding `etcd`, `kube-apiserver`, `kube-controller-manager`,
    /// `kube-scheduler`, `kwok` and the `kubectl` of the same version.
    pub fn bin_dir(&self) -> &Path {
        &self.bin
    }

    /// The last `lines` lines of a component's log (`etcd`, `kube-apiserver`,
    /// `kube-controller-manager`, `kube-scheduler`, `kwok`), for failure messages.
    pub fn log_tail(&self, component: &str, lines: usize) -> String {
        tail(&self.dir.path().join(format!("logs/{component}.log")), lines)
    }

    fn kubeconfig_yaml(&self, token: &str) -> String {
        // The apiserver's generated cert lists 127.0.0.1 (its advertise address) among its
        // SANs and is signed by the CA that follows it in apiserver.crt, so it verifies.
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: wasmop\n  cluster:\n    server: {server}\n    \
             certificate-authority: {ca}\nusers:\n- name: user\n  user:\n    token: {token}\n\
             contexts:\n- name: wasmop\n  context:\n    cluster: wasmop\n    user: user\n\
             current-context: wasmop\n",
            server = self.server_url(),
            ca = self.ca_path().display(),
        )
    }

    async fn wait_ready(&self) -> Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let log = self.dir.path().join("logs/kube-apiserver.log");
        // The CA file appears only once the apiserver has generated its certs, so probe
        // with a client that skips verification; the real clients verify.
        let mut probe: Option<kube::Client> = None;
        loop {
            for (name, slot) in [("kube-apiserver", &self.apiserver), ("etcd", &self.etcd)] {
                if let Some(status) = lock(slot).as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                    return Err(EarlyExit(format!(
                        "{name} exited ({status}) before the API server became ready:\n{}",
                        self.log_tail(name, 30)
                    ))
                    .into());
                }
            }
            if probe.is_none() {
                probe = self.insecure_client().await.ok();
            }
            if let Some(client) = &probe {
                let req = http::Request::get("/readyz").body(Vec::new())?;
                if let Ok(Ok(body)) = tokio::time::timeout(Duration::from_secs(3), client.request_text(req)).await
                    && body.trim() == "ok"
                {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                bail!(
                    "kube-apiserver not ready at {}/readyz after {:?}; last lines of its log:\n{}",
                    self.server_url(),
                    READY_TIMEOUT,
                    tail(&log, 40)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn insecure_client(&self) -> Result<kube::Client> {
        let mut config = kube::Config::new(self.server_url().parse()?);
        config.accept_invalid_certs = true;
        config.auth_info.token = Some(ADMIN_TOKEN.to_owned().into());
        Ok(kube::Client::try_from(config)?)
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // Reverse start order. SIGKILL is fine: the state directory is thrown away.
        for slot in [&self.kwok, &self.scheduler, &self.controller_manager, &self.apiserver, &self.etcd] {
            if let Some(mut child) = lock(slot).take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// A component exited during start-up (e.g. its port was taken meanwhile): worth a retry
/// with fresh ports, unlike a readiness timeout.
#[derive(Debug)]
struct EarlyExit(String);

impl std::fmt::Display for EarlyExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EarlyExit {}

/// A Node that kwok manages (its annotation), with room for many Pods (the convergence bench
/// runs 1,000 parents of 3 Pods on two of them).
fn node_json(name: &str) -> serde_json::Value {
    let room = serde_json::json!({"cpu": "64", "memory": "256Gi", "pods": "5000"});
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok"},
        },
        "status": {"allocatable": room, "capacity": room},
    })
}

fn node_ready(node: &k8s_openapi::api::core::v1::Node) -> bool {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn csv_groups(groups: &[String]) -> String {
    match groups.len() {
        0 => String::new(),
        1 => groups[0].clone(),
        _ => format!("\"{}\"", groups.join(",")),
    }
}

/// The directory of the control plane's binaries (and the kubectl of the same version):
/// `scripts/control-plane.sh install` runs once per process, and this is the last line of its
/// stdout.
///
/// # Errors
/// When the script fails (its output is on stderr).
pub fn control_plane_bin_dir() -> Result<PathBuf> {
    static BIN: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let script = root.join("scripts/control-plane.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg("install")
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("running {}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!("{} install failed: {}", script.display(), out.status));
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let bin = stdout.lines().last().map(str::trim).unwrap_or_default();
        if bin.is_empty() {
            return Err(format!("{} install printed no bin dir", script.display()));
        }
        Ok(PathBuf::from(bin))
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

/// `N` distinct free loopback ports. They are handed out at most once per process, so
/// control planes started by parallel tests in one binary never share a port.
fn free_ports<const N: usize>() -> Result<[u16; N]> {
    static USED: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut used = lock(&USED);
    let mut held = Vec::new();
    let mut ports = [0u16; N];
    let mut i = 0;
    while i < N {
        let l = TcpListener::bind("127.0.0.1:0").context("binding a free port")?;
        let port = l.local_addr()?.port();
        held.push(l); // keep bound until all N are chosen, so they are distinct
        if used.contains(&port) {
            continue;
        }
        used.push(port);
        ports[i] = port;
        i += 1;
    }
    Ok(ports)
}

type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawn `cmd` with stdout+stderr appended to `log`, set up to be SIGKILLed when the test
/// process dies.
///
/// `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, not the process,
/// and libtest runs each test on its own thread; so all children are forked from one
/// process-lifetime spawner thread.
/// The whole number environment variable `name` holds, if it is set.
fn positive_env(name: &str) -> Result<Option<u32>> {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => {
            let n: u32 = v.trim().parse().with_context(|| format!("{name}={v:?} is not a whole number"))?;
            ensure!(n > 0, "{name} must be at least 1");
            Ok(Some(n))
        }
        _ => Ok(None),
    }
}

fn spawn(cmd: &mut Command, log: &Path) -> Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let program = cmd.get_program().to_owned();
    let out = fs::OpenOptions::new().create(true).append(true).open(log).with_context(|| format!("opening {}", log.display()))?;
    cmd.stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out);
    let parent = std::process::id();
    // SAFETY: the closure only calls async-signal-safe functions (prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl.
            if libc::getppid() as u32 != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let tx = SPAWNER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<SpawnRequest>();
            std::thread::Builder::new()
                .name("wasmop-e2e-spawner".into())
                .spawn(move || {
                    for (mut cmd, reply) in rx {
                        let _ = reply.send(cmd.spawn());
                    }
                })
                .expect("spawning the spawner thread");
            Mutex::new(tx)
        })
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let (reply_tx, reply_rx) = mpsc::channel();
    // Hand over the configured command; the caller's `&mut Command` is left as a blank one.
    let owned = std::mem::replace(cmd, Command::new(&program));
    tx.send((owned, reply_tx)).map_err(|_| anyhow!("spawner thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| anyhow!("spawner thread is gone"))?
        .with_context(|| format!("spawning {}", Path::new(&program).display()))
}

/// SIGTERM `child`, wait up to `grace`, then SIGKILL; reaps it.
fn terminate(child: &mut Child, grace: Duration) -> Result<()> {
    if child.try_wait()?.is_some() {
        return Ok(());
    }
    // SAFETY: plain kill(2) on our own, not yet reaped, child.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if child.try_wait()?.is_some() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill()?;
    child.wait()?;
    Ok(())
}

/// The last `lines` lines of a file (reads at most its last 64 KiB).
fn tail(path: &Path, lines: usize) -> String {
    let read = || -> io::Result<String> {
        let mut f = fs::File::open(path)?;
        let len = f.metadata()?.len();
        f.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf)?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let all: Vec<&str> = text.lines().collect();
        Ok(all[all.len().saturating_sub(lines)..].join("\n"))
    };
    read().unwrap_or_else(|e| format!("<cannot read {}: {e}>", path.display()))
}

/// `ControlPlane` can be shared between tasks (e.g. behind an `Arc`).
#[allow(dead_code)]
fn assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<ControlPlane>();
}
