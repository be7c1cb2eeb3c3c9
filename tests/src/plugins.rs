//! Plugins built from the workspace's sources, for tests (the host's and the end-to-end ones).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The workspace root.
pub fn workspace() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .find(|p| p.join("wit").is_dir() && p.join("Cargo.toml").is_file())
        .expect("workspace root above the crate")
        .to_owned()
}

/// Build a plugin crate of the workspace for a wasm target (release profile, size-optimized)
/// and return the artifact's path. Built once per test process; cargo skips it when it is up
/// to date.
///
/// Plugins build in their own target directory (`$CARGO_TARGET_DIR/test-plugins`): the `cargo test`
/// running us holds the lock on the main one. `WASMOP_TEST_PLUGINS_DIR` puts them elsewhere, so
/// two checkouts sharing one `CARGO_TARGET_DIR` never build over each other's plugins.
///
/// # Panics
/// When cargo fails: a test cannot run without its plugin.
pub fn plugin(package: &str, target: &str) -> PathBuf {
    plugin_with_features(package, target, &[])
}

/// [`plugin`] built with cargo features, in a target directory of its own per feature set so
/// builds of different feature sets do not invalidate each other.
///
/// # Panics
/// When cargo fails.
pub fn plugin_with_features(package: &str, target: &str, features: &[&str]) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<(String, String), PathBuf>>> = OnceLock::new();
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    let key = (package.to_owned(), format!("{target}+{}", features.join(",")));
    if let Some(path) = built.get(&key) {
        return path.clone();
    }
    let target_dir = std::env::var_os("WASMOP_TEST_PLUGINS_DIR")
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR"))
        .map_or_else(|| workspace().join("target"), PathBuf::from)
        .join(if features.is_empty() { "test-plugins".to_owned() } else { format!("test-plugins-{}", features.join("-")) });
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(workspace())
        .args(["build", "--quiet", "--release", "--target", target, "-p", package])
        .args(if features.is_empty() { vec![] } else { vec!["--features".to_owned(), features.join(",")] })
        .env("CARGO_TARGET_DIR", &target_dir)
        .status()
        .expect("running cargo to build a plugin");
    assert!(status.success(), "building plugin {package} for {target} failed");
    let path = target_dir.join(target).join("release").join(format!("{}.wasm", package.replace('-', "_")));
    assert!(path.exists(), "{} was not produced", path.display());
    built.insert(key, path.clone());
    path
}
