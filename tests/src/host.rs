//! The host as a process: `wasmop run` built from the flags a test needs ([`HostCommand`]),
//! its output captured in a log file, and stopped when the test is done ([`HostProcess`],
//! killed on drop, and with the test process: it is spawned like the control plane's
//! components).
//!
//! ```no_run
//! # fn example(cp: &wasmop_e2e::ControlPlane, plugins: &std::path::Path) -> anyhow::Result<()> {
//! use wasmop_e2e::host::HostCommand;
//! // In the host's own tests the binary is `env!("CARGO_BIN_EXE_wasmop")`.
//! let host = HostCommand::new("target/debug/wasmop", cp.kubeconfig_path(), plugins)
//!     .args(["--deadline", "20s"])
//!     .spawn()?;
//! println!("{}", host.log_tail(20));
//! # Ok(()) }
//! ```

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// How to start one `wasmop run`: the binary, the kubeconfig and plugins directory it always
/// needs, and what a test adds. Metrics are off (`--metrics-addr none`) unless
/// [`metrics_addr`](Self::metrics_addr) says where; `RUST_LOG=info` unless
/// [`env`](Self::env) sets it; `POD_NAMESPACE` is never inherited from the test's environment.
#[derive(Debug, Clone)]
#[must_use]
pub struct HostCommand {
    binary: PathBuf,
    kubeconfig: PathBuf,
    plugins: PathBuf,
    policy: Option<PathBuf>,
    metrics_addr: String,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    log: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
}

impl HostCommand {
    /// `binary run --plugins plugins --kubeconfig kubeconfig` (in the host's tests, `binary` is
    /// `env!("CARGO_BIN_EXE_wasmop")`).
    pub fn new(binary: impl Into<PathBuf>, kubeconfig: impl Into<PathBuf>, plugins: impl Into<PathBuf>) -> Self {
        Self {
            binary: binary.into(),
            kubeconfig: kubeconfig.into(),
            plugins: plugins.into(),
            policy: None,
            metrics_addr: "none".into(),
            args: Vec::new(),
            env: vec![("RUST_LOG".into(), "info".into())],
            log: None,
            cache_dir: None,
        }
    }

    /// `--policy path`.
    pub fn policy(mut self, path: impl Into<PathBuf>) -> Self {
        self.policy = Some(path.into());
        self
    }

    /// `--metrics-addr addr` (default `none`).
    pub fn metrics_addr(mut self, addr: impl Into<String>) -> Self {
        self.metrics_addr = addr.into();
        self
    }

    /// `--metrics-addr 127.0.0.1:port`.
    pub fn metrics_port(self, port: u16) -> Self {
        self.metrics_addr(format!("127.0.0.1:{port}"))
    }

    /// More flags, after the ones above.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// One more flag.
    pub fn arg(self, arg: impl Into<OsString>) -> Self {
        self.args([arg])
    }

    /// An environment variable of the process (over the default `RUST_LOG=info`).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        let key = key.into();
        self.env.retain(|(k, _)| *k != key);
        self.env.push((key, value.into()));
        self
    }

    /// Where its standard output and error go (appended); default `host.log` in a temporary
    /// directory the [`HostProcess`] keeps.
    pub fn log(mut self, path: impl Into<PathBuf>) -> Self {
        self.log = Some(path.into());
        self
    }

    /// Its compiled-plugin cache (`WASMOP_CACHE_DIR`); default `cache` in the temporary
    /// directory the [`HostProcess`] keeps (each process compiles afresh).
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Start it.
    ///
    /// # Errors
    /// The temporary directory, the log file or the process cannot be made.
    pub fn spawn(self) -> Result<HostProcess> {
        let work = tempfile::tempdir().context("a directory for the host's log and cache")?;
        let log = self.log.unwrap_or_else(|| work.path().join("host.log"));
        let cache = self.cache_dir.unwrap_or_else(|| work.path().join("cache"));
        let mut cmd = Command::new(&self.binary);
        cmd.args(["run", "--metrics-addr", &self.metrics_addr, "--plugins"])
            .arg(&self.plugins)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig);
        if let Some(policy) = &self.policy {
            cmd.arg("--policy").arg(policy);
        }
        cmd.args(&self.args).env("WASMOP_CACHE_DIR", &cache).env_remove("POD_NAMESPACE");
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        let child = crate::spawn(&mut cmd, &log)?;
        Ok(HostProcess { child, log, _work: work })
    }
}

/// A running `wasmop run`; SIGKILLed and reaped when dropped.
#[derive(Debug)]
pub struct HostProcess {
    child: Child,
    log: PathBuf,
    _work: tempfile::TempDir,
}

impl HostProcess {
    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Its whole log so far (empty if unreadable).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        crate::tail(&self.log, lines)
    }

    /// Its exit status if it has exited (reaped then), `None` while it runs.
    ///
    /// # Errors
    /// Waiting for it fails.
    pub fn exited(&mut self) -> Result<Option<ExitStatus>> {
        Ok(self.child.try_wait()?)
    }

    /// SIGKILL it (no graceful exit: a crash) and reap it.
    ///
    /// # Errors
    /// The signal or the wait fails.
    pub fn kill(&mut self) -> Result<ExitStatus> {
        self.child.kill()?;
        Ok(self.child.wait()?)
    }

    /// SIGTERM it and wait for it to exit: its exit status and how long it took.
    ///
    /// # Errors
    /// It is still running `within` after the signal (it is then killed on drop), or waiting
    /// for it fails.
    pub async fn terminate(&mut self, within: Duration) -> Result<(ExitStatus, Duration)> {
        // SAFETY: kill(2) on our own, not yet reaped, child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let sent = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok((status, sent.elapsed()));
            }
            if sent.elapsed() > within {
                bail!("the host is still running {within:?} after SIGTERM; its log ends:\n{}", self.log_tail(30));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
