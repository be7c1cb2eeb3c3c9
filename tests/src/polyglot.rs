//! Plugins written in Python and JavaScript, built from the workspace's sources for tests with
//! the toolchains `scripts/polyglot.sh` installs (`$WASMOP_POLYGLOT`).
//!
//! A build takes 15–60 s on two cores, so the component is kept in the test plugins directory
//! under the digest of its sources, the WIT and the tool, and rebuilt only when one changes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use super::plugins::workspace;

/// A plugin language other than Rust.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    /// Python, built with componentize-py.
    Python,
    /// JavaScript, built with componentize-js (StarlingMonkey).
    JavaScript,
}

impl Language {
    fn tool(self) -> &'static str {
        match self {
            Self::Python => "componentize-py",
            Self::JavaScript => "componentize-js",
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

/// Build the plugin whose sources are in `source_dir`, written in `language`, against
/// `wit/<wit>` (world `world`), and return the component's path. `entry` is the Python module
/// name or the JavaScript file name inside the directory.
///
/// # Panics
/// When the build fails: a test cannot run without its plugin.
pub fn build(language: Language, source_dir: &Path, entry: &str, wit: &str, world: &str) -> PathBuf {
    static BUILDING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let root = workspace();
    let dir = source_dir.file_name().and_then(|n| n.to_str()).unwrap_or("plugin");
    let wit_dir = root.join("wit").join(wit);
    let tool = toolchain().join(language.tool());
    let mut digest = Sha256::new();
    digest.update(format!("{language:?} {entry} {world} {}", std::fs::canonicalize(&tool).unwrap_or(tool.clone()).display()));
    for (base, path) in
        files(source_dir).into_iter().map(|p| (source_dir, p)).chain(files(&wit_dir).into_iter().map(|p| (&*wit_dir, p)))
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
    let mut command = Command::new(&tool);
    match language {
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

/// The Python memcached example (`plugins/memcached-py`), WIT 0.1.0.
pub fn memcached_py() -> PathBuf {
    build(Language::Python, &workspace().join("plugins/memcached-py"), "app", "v0.1.0", "operator")
}

/// The JavaScript memcached example (`plugins/memcached-js`), WIT 0.1.0, in the default
/// StarlingMonkey build (which imports `wasi:http`).
pub fn memcached_js() -> PathBuf {
    build(Language::JavaScript, &workspace().join("plugins/memcached-js"), "memcached.js", "v0.1.0", "operator")
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
