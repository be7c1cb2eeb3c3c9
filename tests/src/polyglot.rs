//! Plugins written in Python, JavaScript and Go, built from the workspace's sources for tests
//! with the toolchains `scripts/polyglot.sh` installs (`$WASMOP_POLYGLOT`) and
//! `scripts/go-toolchain.sh` installs beside the machine's Go (`$WASMOP_GO_TOOLCHAIN`).
//!
//! A build takes 15–60 s on two cores, so the component is kept in the test plugins directory
//! under the digest of its sources, the WIT and the tool, and rebuilt only when one changes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use crate::plugins::workspace;

/// A plugin language other than Rust.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    /// Python, built with componentize-py.
    Python,
    /// JavaScript, built with componentize-js (StarlingMonkey).
    JavaScript,
    /// Go (mainline, `GOOS=wasip1`), built by `sdk-go/build/component.sh`.
    Go,
}

impl Language {
    fn tool(self) -> &'static str {
        match self {
            Self::Python => "componentize-py",
            Self::JavaScript => "componentize-js",
            Self::Go => "wit-bindgen",
        }
    }

    fn toolchain(self) -> PathBuf {
        match self {
            Self::Python | Self::JavaScript => toolchain(),
            Self::Go => go_toolchain(),
        }
    }
}

/// The directory holding `componentize-py` and `componentize-js`.
///
/// # Panics
/// When `$WASMOP_POLYGLOT` is unset: the README's test command sets it (`scripts/setup.sh`).
pub fn toolchain() -> PathBuf {
    let dir = std::env::var_os("WASMOP_POLYGLOT").map(PathBuf::from).expect(
        "WASMOP_POLYGLOT is not set: run `eval \"$(bash scripts/setup.sh)\"` (scripts/polyglot.sh installs the toolchains)",
    );
    assert!(dir.join("componentize-py").exists(), "{} has no componentize-py", dir.display());
    dir
}

/// The directory holding `wit-bindgen`, `wasm-tools`, the reactor adapter and the bindings'
/// Go runtime, with `go` on `PATH`.
///
/// # Panics
/// When `$WASMOP_GO_TOOLCHAIN` is unset or `go` is missing: the README's test command sets it
/// (`scripts/setup.sh` runs `scripts/go-toolchain.sh`), and Go 1.24 or newer must be installed.
pub fn go_toolchain() -> PathBuf {
    let dir = std::env::var_os("WASMOP_GO_TOOLCHAIN").map(PathBuf::from).expect(
        "WASMOP_GO_TOOLCHAIN is not set: run `eval \"$(bash scripts/setup.sh)\"` (scripts/go-toolchain.sh installs \
         wit-bindgen, wasm-tools and the reactor adapter for Go plugins)",
    );
    assert!(dir.join("wit-bindgen").exists(), "{} has no wit-bindgen: run scripts/go-toolchain.sh", dir.display());
    let go = Command::new("go").arg("version").output();
    assert!(
        go.as_ref().is_ok_and(|o| o.status.success()),
        "`go version` failed ({go:?}): Go plugins need Go 1.24 or newer on PATH"
    );
    dir
}

/// Build the plugin whose sources are in `source_dir`, written in `language`, against
/// `wit/<wit>` (world `world`), and return the component's path. `entry` is the Python module
/// name or the JavaScript file name inside the directory (unused for Go: the module's root
/// package is the plugin).
///
/// # Panics
/// When the build fails: a test cannot run without its plugin.
pub fn build(language: Language, source_dir: &Path, entry: &str, wit: &str, world: &str) -> PathBuf {
    build_with(language, source_dir, entry, wit, world, Startup::Snapshot)
}

/// How a Go plugin's runtime starts (`sdk-go/build/component.sh`); Python and JavaScript
/// components are snapshots whichever is asked (their tools always pre-initialize).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Startup {
    /// Initialized once at build time (wizer): an instance starts from a copy of that memory.
    Snapshot,
    /// `_initialize` runs in every instance (`WASMOP_GO_PREINIT=0`), for comparison.
    PerInstance,
}

/// [`build`], the Go runtime started as `startup` says.
///
/// # Panics
/// As [`build`].
pub fn build_with(language: Language, source_dir: &Path, entry: &str, wit: &str, world: &str, startup: Startup) -> PathBuf {
    static BUILDING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let root = workspace();
    let dir = source_dir.file_name().and_then(|n| n.to_str()).unwrap_or("plugin");
    let wit_dir = root.join("wit").join(wit);
    let tool = language.toolchain().join(language.tool());
    let mut digest = Sha256::new();
    let startup = if language == Language::Go { startup } else { Startup::Snapshot };
    digest.update(format!(
        "{language:?} {entry} {world} {startup:?} {}",
        std::fs::canonicalize(&tool).unwrap_or(tool.clone()).display()
    ));
    // A Go plugin is built with this checkout's SDK, which is part of what it is built from.
    let sdk_dir = root.join("sdk-go");
    let sdk = if language == Language::Go { files(&sdk_dir) } else { Vec::new() };
    for (base, path) in files(source_dir)
        .into_iter()
        .map(|p| (source_dir, p))
        .chain(files(&wit_dir).into_iter().map(|p| (&*wit_dir, p)))
        .chain(sdk.into_iter().map(|p| (&*sdk_dir, p)))
    {
        digest.update(path.strip_prefix(base).unwrap_or(&path).to_string_lossy().as_bytes());
        digest.update(std::fs::read(&path).expect("readable source"));
    }
    let out_dir = std::env::var_os("WASMOP_TEST_PLUGINS_DIR")
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR"))
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join("polyglot");
    std::fs::create_dir_all(&out_dir).expect("plugins directory");
    let out = out_dir.join(format!("{dir}-{}.wasm", &hex::encode(digest.finalize())[..16]));
    if out.exists() {
        return out;
    }
    let partial = out.with_extension("wasm.partial");
    // componentize-py and componentize-js read the sources through a sandboxed view of their
    // directory, in which a link out of it (to an SDK module) resolves to nothing: build from a
    // copy with the links followed.
    let staged = tempfile::tempdir().expect("a directory for the sources");
    let source_dir = if language == Language::Go { source_dir.to_owned() } else { stage(source_dir, staged.path()) };
    let source_dir = source_dir.as_path();
    let mut command = Command::new(if language == Language::Go { Path::new("bash") } else { &tool });
    match language {
        Language::Go => command
            .arg(sdk_dir.join("build/component.sh"))
            .args([path(source_dir), path(&partial), path(&wit_dir), world])
            .env("WASMOP_GO_TOOLCHAIN", language.toolchain())
            .env("WASMOP_GO_PREINIT", if startup == Startup::Snapshot { "1" } else { "0" })
            .envs(go_caches()),
        Language::Python => {
            command.args(["-d", path(&wit_dir), "-w", world, "componentize", entry, "-p", path(source_dir), "-o", path(&partial)])
        }
        Language::JavaScript => {
            command.args(["--wit", path(&wit_dir), "--world-name", world, "-o", path(&partial)]).arg(source_dir.join(entry))
        }
    };
    let output = command.output().unwrap_or_else(|e| panic!("running {}: {e}", tool.display()));
    assert!(
        output.status.success() && partial.exists(),
        "building {} with {} failed:\n{}{}",
        source_dir.display(),
        language.tool(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::rename(&partial, &out).expect("moving the built plugin into place");
    out
}

/// A copy of the files of `dir` (links followed; subdirectories but `__pycache__` and
/// `node_modules`) in `into`, returned as `into/<dir's name>`.
pub fn stage(dir: &Path, into: &Path) -> PathBuf {
    let target = into.join(dir.file_name().unwrap_or_default());
    for file in files(dir) {
        let copy = target.join(file.strip_prefix(dir).expect("a file under the directory"));
        std::fs::create_dir_all(copy.parent().expect("a parent")).expect("a directory for the copy");
        std::fs::copy(&file, &copy).unwrap_or_else(|e| panic!("copying {}: {e}", file.display()));
    }
    target
}

/// The Python memcached example (`plugins/memcached-py`), WIT 0.3.0 (world `controller`).
pub fn memcached_py() -> PathBuf {
    build(Language::Python, &workspace().join("plugins/memcached-py"), "app", "v0.3.0", "controller")
}

/// The Go memcached example (`plugins/memcached-go`), against `wit/<wit>` (world `controller`).
pub fn memcached_go_for(wit: &str) -> PathBuf {
    build(Language::Go, &workspace().join("plugins/memcached-go"), "", wit, "controller")
}

/// The Go memcached example (`plugins/memcached-go`), WIT 0.3.0 (world `controller`).
pub fn memcached_go() -> PathBuf {
    memcached_go_for("v0.3.0")
}

/// The Go memcached example, WIT 0.3.0, its runtime started in every instance instead of
/// restored from the build's snapshot: what [`memcached_go`] was before the snapshot, to
/// measure the two in one run.
pub fn memcached_go_started_per_instance() -> PathBuf {
    build_with(Language::Go, &workspace().join("plugins/memcached-go"), "", "v0.3.0", "controller", Startup::PerInstance)
}

/// Go's module and build caches: the caller's, else the ones `scripts/control-plane.sh` uses
/// (under `$WASMOP_CACHE`, default `/var/cache/wasmop`), never inside the checkout.
pub fn go_caches() -> Vec<(&'static str, PathBuf)> {
    let root = std::env::var_os("WASMOP_CACHE").map_or_else(|| PathBuf::from("/var/cache/wasmop"), PathBuf::from);
    [("GOMODCACHE", "go/mod"), ("GOCACHE", "go/build")]
        .into_iter()
        .filter(|(var, _)| std::env::var_os(var).is_none())
        .map(|(var, dir)| (var, root.join(dir)))
        .collect()
}

/// The JavaScript memcached example (`plugins/memcached-js`), WIT 0.3.0 (world `controller`),
/// in the default StarlingMonkey build (which imports `wasi:http`).
pub fn memcached_js() -> PathBuf {
    build(Language::JavaScript, &workspace().join("plugins/memcached-js"), "memcached.js", "v0.3.0", "controller")
}

fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// Every file under `dir`, sorted (build caches of the tools excluded).
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("reading {}: {e}", d.display())) {
            let p = entry.expect("directory entry").path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "__pycache__" && n != "node_modules") {
                    stack.push(p);
                }
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
