//! A real OCI registry on loopback for tests: Debian's `docker-registry` (CNCF distribution
//! 2.8) started as a child process on a free port with its storage in a temporary directory,
//! optionally behind basic auth (an htpasswd file with a bcrypt hash, `htpasswd -Bbn`), and
//! `oras` as a second client. `scripts/registry.sh` installs them (once per process, like the
//! control plane's `install`); a missing tool is an error naming the script, never a skip.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

/// How long the registry may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The directory holding `oras`: `scripts/registry.sh` runs once per process (installing
/// docker-registry, htpasswd and oras when missing), and this is the last line of its stdout.
///
/// # Errors
/// When the script fails (its output is on stderr).
pub fn registry_tools() -> Result<PathBuf> {
    static DIR: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| tools_dir_of("scripts/registry.sh")).clone().map_err(|e| anyhow!(e))
}

/// Run a setup script (`bash SCRIPT`, from the workspace root) whose last line on stdout is the
/// directory of what it installed, and that directory.
fn tools_dir_of(script: &str) -> std::result::Result<PathBuf, String> {
    let script = crate::plugins::workspace().join(script);
    let out = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!("{} failed: {}", script.display(), out.status));
    }
    let dir = String::from_utf8_lossy(&out.stdout).lines().last().map(str::trim).unwrap_or_default().to_owned();
    if dir.is_empty() {
        return Err(format!("{} printed no directory", script.display()));
    }
    Ok(PathBuf::from(dir))
}

/// The `oras` binary.
///
/// # Errors
/// When `scripts/registry.sh` fails or did not produce it.
pub fn oras() -> Result<PathBuf> {
    let bin = registry_tools()?.join("oras");
    if !bin.is_file() {
        bail!("{} is missing: scripts/registry.sh builds it", bin.display());
    }
    Ok(bin)
}

/// The `cosign` binary: `scripts/cosign.sh` runs once per process (building it when missing;
/// `scripts/registry.sh` runs it too), and the last line of its stdout is its directory.
///
/// # Errors
/// When the script fails or did not produce it.
pub fn cosign() -> Result<PathBuf> {
    static DIR: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    let dir = DIR.get_or_init(|| tools_dir_of("scripts/cosign.sh")).clone().map_err(|e| anyhow!(e))?;
    let bin = dir.join("cosign");
    if !bin.is_file() {
        bail!("{} is missing: scripts/cosign.sh builds it", bin.display());
    }
    Ok(bin)
}

/// Run `cosign ARGS...` in `cwd` with `env` (offline: no Sigstore service is asked); its
/// output, whether it succeeded or not.
///
/// # Errors
/// cosign missing or not starting.
pub fn run_cosign(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Result<std::process::Output> {
    Command::new(cosign()?)
        .args(args)
        .current_dir(cwd)
        .env("HOME", cwd)
        .env("TUF_ROOT", cwd.join(".sigstore"))
        .env("COSIGN_EXPERIMENTAL", "0")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .context("running cosign")
}

/// A running `docker-registry serve` on `127.0.0.1:PORT`; killed on drop.
#[derive(Debug)]
pub struct Registry {
    dir: tempfile::TempDir,
    port: u16,
    child: Mutex<Option<Child>>,
}

impl Registry {
    /// Start a registry anyone may push to and pull from.
    ///
    /// # Errors
    /// When the tools cannot be installed or the registry does not listen in time (its log
    /// in the message).
    pub fn start() -> Result<Self> {
        Self::start_inner(None)
    }

    /// Start a registry that asks for basic auth, knowing only `user` with `password`.
    ///
    /// # Errors
    /// See [`Registry::start`]; `htpasswd` failing.
    pub fn start_with_auth(user: &str, password: &str) -> Result<Self> {
        Self::start_inner(Some((user, password)))
    }

    fn start_inner(auth: Option<(&str, &str)>) -> Result<Self> {
        registry_tools()?;
        let dir = tempfile::Builder::new().prefix("wasmop-registry-").tempdir()?;
        let [port] = crate::free_ports::<1>()?;
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
             http:\n  addr: 127.0.0.1:{port}\n",
            dir.path().join("storage").display()
        );
        if let Some((user, password)) = auth {
            let out = Command::new("htpasswd")
                .args(["-Bbn", user, password])
                .output()
                .context("running htpasswd (apache2-utils; scripts/registry.sh installs it)")?;
            if !out.status.success() {
                bail!("htpasswd failed: {}", String::from_utf8_lossy(&out.stderr));
            }
            std::fs::write(dir.path().join("htpasswd"), &out.stdout)?;
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: wasmop-test\n    path: {}\n",
                dir.path().join("htpasswd").display()
            ));
        }
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config)?;
        let log = dir.path().join("registry.log");
        let child = crate::spawn(Command::new("docker-registry").arg("serve").arg(&config_path), &log)
            .context("starting docker-registry (scripts/registry.sh installs it)")?;
        let registry = Self { dir, port, child: Mutex::new(Some(child)) };
        let deadline = Instant::now() + START_TIMEOUT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) =
                registry.child.lock().unwrap_or_else(|e| e.into_inner()).as_mut().and_then(|c| c.try_wait().ok().flatten())
            {
                bail!("docker-registry exited ({status}):\n{}", crate::tail(&log, 30));
            }
            if Instant::now() > deadline {
                bail!("docker-registry not listening on 127.0.0.1:{port} after {START_TIMEOUT:?}:\n{}", crate::tail(&log, 30));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("[wasmop-e2e] registry on 127.0.0.1:{port} (storage {})", registry.dir.path().display());
        Ok(registry)
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `oci://127.0.0.1:PORT/REPOSITORY_AND_TAG`.
    pub fn reference(&self, repository_and_tag: &str) -> String {
        format!("oci://{}/{repository_and_tag}", self.host())
    }

    /// The file the registry stores the blob `sha256:HEX` in (to tamper with it).
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        self.dir.path().join(format!("storage/docker/registry/v2/blobs/sha256/{}/{hex}/data", &hex[..2]))
    }

    /// The last `lines` lines of the registry's log.
    pub fn log_tail(&self, lines: usize) -> String {
        crate::tail(&self.dir.path().join("registry.log"), lines)
    }

    /// Its state directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Run `oras ARGS...`; its stdout on success.
///
/// # Errors
/// oras missing, or its exit status and stderr.
pub fn run_oras(args: &[&str], cwd: &Path) -> Result<String> {
    let out = Command::new(oras()?).args(args).current_dir(cwd).stdin(Stdio::null()).output().context("running oras")?;
    if !out.status.success() {
        bail!("oras {} failed ({}):\n{}", args.join(" "), out.status, String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
