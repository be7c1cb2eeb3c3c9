//! The host's container image (`deploy/Dockerfile`, built offline by `scripts/image.sh`):
//! what it holds, how it is configured, and that its entrypoint works as the Deployment runs
//! it — as uid 65532 on a read-only root filesystem.
//!
//! `scripts/test.sh` builds the image and passes the OCI archive in `WASMOP_IMAGE`; a plain
//! `cargo test` cannot build it, so the test is `#[ignore]`d there, and run by `scripts/test.sh`
//! (`--include-ignored`), where a missing `WASMOP_IMAGE` fails it. The image is unpacked with
//! umoci and run from its root filesystem (chroot as the image's user, the root bind-mounted
//! read-only in a private mount namespace): container engines need cgroup and rlimit rights a sandboxed CI machine may not
//! give (podman here: "cgroups in hybrid mode not supported").

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, ensure};
use serde_json::Value;
use wasmop_e2e::plugins::{plugin, workspace};
use wasmop_e2e::tools::missing;

/// The image's tag inside the archive (scripts/image.sh).
const TAG: &str = "localhost/wasmop:dev";

fn run(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    ensure!(out.status.success(), "{cmd:?} failed ({}):\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8(out.stdout)?)
}

/// Unpack `archive` (an OCI archive) into `dir`; the runtime bundle's path.
fn unpack(archive: &Path, dir: &Path) -> Result<PathBuf> {
    let layout = dir.join("layout");
    std::fs::create_dir_all(&layout)?;
    run(Command::new("tar").arg("-xf").arg(archive).arg("-C").arg(&layout))?;
    let bundle = dir.join("bundle");
    run(Command::new("umoci").arg("unpack").arg("--image").arg(format!("{}:{TAG}", layout.display())).arg(&bundle))?;
    Ok(bundle)
}

/// Run `/wasmop args...` from the bundle's root filesystem as uid/gid 65532 with that root
/// read-only and `inputs` mounted read-only at `/in`; also report whether a write to the root
/// failed as read-only.
fn run_in_rootfs(bundle: &Path, inputs: &Path, args: &str) -> Result<String> {
    let rootfs = bundle.join("rootfs");
    std::fs::create_dir_all(rootfs.join("in"))?; // the volume's mount point, as a runtime makes it
    let script = format!(
        "set -e; r={root}; mount --bind $r $r; mount --bind -o ro {inputs} $r/in; mount -o remount,bind,ro $r; \
         if touch $r/written 2>/dev/null; then echo ROOT-WRITABLE; fi; \
         chroot --userspec=65532:65532 $r /wasmop {args}",
        root = rootfs.display(),
        inputs = inputs.display(),
    );
    run(Command::new("unshare").args(["--mount", "sh", "-c", &script]).env_remove("HOME"))
}

#[test]
#[ignore = "needs the image scripts/image.sh builds (WASMOP_IMAGE): scripts/test.sh e2e runs it"]
fn the_image_is_one_static_binary_run_as_non_root_on_a_read_only_root() -> Result<()> {
    let archive = std::env::var_os("WASMOP_IMAGE").map(PathBuf::from).ok_or_else(|| {
        missing("the host's image (WASMOP_IMAGE)", "export WASMOP_IMAGE=$(bash scripts/image.sh | tail -n 1) builds it")
    })?;
    let dir = tempfile::tempdir()?;
    let bundle = unpack(&archive, dir.path())?;

    // Configuration: the Deployment's expectations (user, entrypoint + default command).
    let config: Value = serde_json::from_str(&std::fs::read_to_string(bundle.join("config.json"))?)?;
    assert_eq!(config["process"]["user"]["uid"], 65532, "runs as the non-root user");
    assert_eq!(config["process"]["user"]["gid"], 65532);
    let args: Vec<&str> = config["process"]["args"].as_array().context("args")?.iter().filter_map(Value::as_str).collect();
    assert_eq!(args, ["/wasmop", "run", "--plugins", "/plugins", "--metrics-addr", "0.0.0.0:8080"]);

    // Contents: the binary alone, statically linked (no interpreter, no libraries to ship).
    let entries: Vec<String> = std::fs::read_dir(bundle.join("rootfs"))?
        .map(|e| Ok(e?.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_>>()?;
    assert_eq!(entries, ["wasmop"], "the image holds only the host binary");
    let headers = run(Command::new("readelf").arg("--program-headers").arg(bundle.join("rootfs/wasmop")))?;
    assert!(!headers.contains("INTERP"), "the binary needs no dynamic loader:\n{headers}");

    // The entrypoint runs as the Deployment runs it.
    let inputs = dir.path().join("inputs");
    std::fs::create_dir_all(&inputs)?;
    std::fs::copy(plugin("memcached", "wasm32-wasip2"), inputs.join("memcached.wasm"))?;
    std::fs::copy(workspace().join("crds/samples/memcached.yaml"), inputs.join("memcached.yaml"))?;
    let version = run_in_rootfs(&bundle, &inputs, "--version")?;
    assert_eq!(
        version.trim(),
        format!("wasmop {}", env!("CARGO_PKG_VERSION")),
        "the root filesystem was writable or --version failed"
    );
    let plan = run_in_rootfs(
        &bundle,
        &inputs,
        "reconcile --plugin /in/memcached.wasm --object /in/memcached.yaml --now 2024-01-01T00:00:00Z --output json",
    )?;
    let plan: Value = serde_json::from_str(&plan).with_context(|| format!("not a plan: {plan}"))?;
    assert_eq!(plan["apply"][0]["kind"], "Deployment", "offline reconcile from the image: {plan}");
    assert_eq!(plan["apply"][0]["spec"]["replicas"], 3);
    Ok(())
}
