//! The command-line tools the deploy tests drive: `kubectl` of the control plane's own version
//! (built beside it by `scripts/control-plane.sh`), and `helm` 4 from `scripts/tools.sh` through
//! `WASMOP_TOOLS` (whose kubectl 1.35 is used too where it is within kubectl's ±1 minor
//! version skew of the server).
//!
//! A test that needs a tool `cargo` cannot build (helm) is `#[ignore = "needs ..."]`, so a plain
//! `cargo test` reports it as not run; the README's test command (`scripts/test.sh`) installs
//! every tool and runs those tests too (`--include-ignored`), where a missing tool is an error
//! saying how to install it ([`missing`]). Never a silent pass.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::ControlPlane;
use crate::plugins::workspace;

/// `name` on `PATH`, if any.
pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|dir| Path::new(dir).join(name)).find(|p| p.is_file())
}

/// `name` in `$WASMOP_TOOLS` (helm 4, kubectl 1.35), if set and present.
fn from_tools_dir(name: &str) -> Option<PathBuf> {
    let path = Path::new(&std::env::var_os("WASMOP_TOOLS")?).join(name);
    path.is_file().then_some(path)
}

/// The error of a test whose tool is missing: what is missing and the command that installs it.
/// Such tests are `#[ignore = "needs ..."]` (so a plain `cargo test` lists them as not run);
/// `scripts/test.sh` runs them with `--include-ignored`, where a missing tool fails the test.
pub fn missing(what: &str, install: &str) -> anyhow::Error {
    anyhow::anyhow!("{what} is missing: {install} (or run the whole tier: scripts/test.sh e2e)")
}

/// `helm` from `$WASMOP_TOOLS`, else from `PATH`.
///
/// # Errors
/// When neither has it ([`missing`]).
pub fn helm() -> Result<PathBuf> {
    from_tools_dir("helm").or_else(|| which("helm")).ok_or_else(|| {
        missing("helm (in $WASMOP_TOOLS or on PATH)", "eval \"$(bash scripts/setup.sh)\" installs it (scripts/tools.sh)")
    })
}

/// Every kubectl to test with: the one built with the control plane (same version as the
/// server), and the current one in `$WASMOP_TOOLS` or on `PATH` when its minor version is within
/// kubectl's supported skew (±1) of the server's.
///
/// # Errors
/// When there is no kubectl beside the control plane's binaries ([`missing`]).
pub fn kubectls() -> Result<Vec<Kubectl>> {
    let own = crate::control_plane_bin_dir().ok().map(|dir| dir.join("kubectl")).filter(|p| p.is_file());
    let own = own
        .map(Kubectl::new)
        .ok_or_else(|| missing("kubectl beside the control plane's binaries", "scripts/control-plane.sh install builds it"))?;
    let mut found = vec![own.clone()];
    for bin in [from_tools_dir("kubectl"), which("kubectl")].into_iter().flatten() {
        let k = Kubectl::new(bin);
        if own.minor.abs_diff(k.minor) <= 1 && !found.iter().any(|f| f.minor == k.minor) {
            found.push(k);
        }
    }
    Ok(found)
}

/// The newest kubectl available (for the parts that need only one).
///
/// # Errors
/// As [`kubectls`].
pub fn kubectl() -> Result<Kubectl> {
    kubectls()?.into_iter().max_by_key(|k| k.minor).context("no kubectl")
}

/// One kubectl binary and its client minor version.
#[derive(Debug, Clone)]
pub struct Kubectl {
    /// The binary.
    pub bin: PathBuf,
    /// `clientVersion.minor` (0 when it could not be read).
    pub minor: u32,
}

impl Kubectl {
    /// The kubectl at `bin`, asking it for its version.
    pub fn new(bin: PathBuf) -> Self {
        let minor = Command::new(&bin)
            .args(["version", "--client", "-o", "json"])
            .output()
            .ok()
            .and_then(|out| serde_json::from_slice::<Value>(&out.stdout).ok())
            .and_then(|v| v.pointer("/clientVersion/minor")?.as_str()?.trim_end_matches('+').parse::<u32>().ok())
            .unwrap_or_default();
        Self { bin, minor }
    }

    /// The strictest `--validate` kubectl knows: `strict` (unknown and duplicate fields are
    /// errors, checked by the server).
    pub fn validate_flag(&self) -> &'static str {
        "--validate=strict"
    }

    /// Run `kubectl args...` against `cp` as admin, with `stdin` piped in; stdout on success.
    ///
    /// # Errors
    /// kubectl's exit status and stderr (the version-skew warning left out).
    pub fn run(&self, cp: &ControlPlane, args: &[&str], stdin: Option<&str>) -> Result<String> {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args)
            .env("KUBECONFIG", cp.kubeconfig_path())
            .current_dir(workspace())
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().with_context(|| format!("running {}", self.bin.display()))?;
        if let Some(input) = stdin {
            child.stdin.take().expect("piped").write_all(input.as_bytes())?;
        }
        let out = child.wait_with_output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        // A kubectl one minor version off the server's may warn about the skew: not an error.
        let stderr: Vec<&str> = stderr.lines().filter(|l| !l.contains("version difference")).collect();
        if !out.status.success() {
            bail!("kubectl 1.{} {} failed ({}):\n{}", self.minor, args.join(" "), out.status, stderr.join("\n"));
        }
        Ok(String::from_utf8(out.stdout)?)
    }

    /// Server-side dry-run `yaml` with the strictest validation; the names kubectl reports.
    ///
    /// # Errors
    /// What the server refused.
    pub fn server_dry_run(&self, cp: &ControlPlane, yaml: &str) -> Result<BTreeSet<String>> {
        let args = [
            "apply",
            "--server-side",
            "--dry-run=server",
            self.validate_flag(),
            "--field-manager=wasmop-e2e",
            "-o",
            "name",
            "-f",
            "-",
        ];
        Ok(self.run(cp, &args, Some(yaml))?.lines().map(str::to_owned).collect())
    }
}

/// Every document of a multi-document YAML string (empty documents dropped).
///
/// # Errors
/// A document that is not YAML.
pub fn docs(yaml: &str) -> Result<Vec<Value>> {
    // Empty and null documents are skipped by the parser.
    Ok(wasmop::yaml::documents(yaml).into_iter().collect::<Result<_, _>>()?)
}

/// `objects` as one multi-document YAML stream.
///
/// # Errors
/// An object that does not serialize.
pub fn to_yaml_stream(objects: &[Value]) -> Result<String> {
    let mut s = String::new();
    for o in objects {
        s.push_str("---\n");
        s.push_str(&wasmop::yaml::to_string(o)?);
    }
    Ok(s)
}

/// `kind.group/name` as `kubectl ... -o name` prints it.
pub fn kubectl_name(obj: &Value) -> String {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let kind = obj["kind"].as_str().unwrap_or_default().to_lowercase();
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    if group.is_empty() { format!("{kind}/{name}") } else { format!("{kind}.{group}/{name}") }
}

/// The objects of the kustomize base (`deploy/kustomize/base`), read from the files its
/// kustomization lists (it has no transformers, so they are what `kubectl kustomize` emits).
///
/// # Errors
/// A file that cannot be read or parsed.
pub fn kustomize_base_objects() -> Result<Vec<Value>> {
    let base = workspace().join("deploy/kustomize/base");
    let kustomization: Value = wasmop::yaml::from_str(&std::fs::read_to_string(base.join("kustomization.yaml"))?)?;
    let mut all = Vec::new();
    for file in kustomization["resources"].as_array().context("resources")? {
        let path = base.join(file.as_str().context("resource path")?);
        all.extend(docs(&std::fs::read_to_string(&path).with_context(|| path.display().to_string())?)?);
    }
    Ok(all)
}
