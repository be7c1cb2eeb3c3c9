//! Test support: plugins built from the workspace's sources, and fixture builders.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("host/ has a parent").to_owned()
}

/// Build a plugin crate of the workspace for a wasm target (release, size-optimized) and
/// return the artifact. Built once per test process; cargo skips it when up to date.
///
/// Plugins build in their own target directory (`target/test-plugins`): the `cargo test`
/// that runs us holds the lock on the main one.
pub fn plugin(package: &str, target: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<(String, String), PathBuf>>> = OnceLock::new();
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    let key = (package.to_owned(), target.to_owned());
    if let Some(path) = built.get(&key) {
        return path.clone();
    }
    let target_dir = workspace().join("target").join("test-plugins");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(workspace())
        .args(["build", "--quiet", "--release", "--target", target, "-p", package])
        .env("CARGO_TARGET_DIR", &target_dir)
        .status()
        .expect("running cargo to build a plugin");
    assert!(status.success(), "building plugin {package} for {target} failed");
    let path = target_dir.join(target).join("release").join(format!("{}.wasm", package.replace('-', "_")));
    assert!(path.exists(), "{} was not produced", path.display());
    built.insert(key, path.clone());
    path
}

/// The memcached example plugin as a wasm32-wasip2 component.
pub fn memcached() -> PathBuf {
    plugin("memcached", "wasm32-wasip2")
}

/// The hostile test plugin.
pub fn testbed() -> PathBuf {
    plugin("testbed", "wasm32-wasip2")
}

/// A `Memcached` object.
pub fn memcached_cr(name: &str, size: i64) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "generation": 1},
        "spec": {"size": size},
    })
}

/// A `Testbed` object in the given mode, with extra spec fields.
pub fn testbed_cr(name: &str, mode: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut spec = serde_json::json!({"mode": mode});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    serde_json::json!({
        "apiVersion": "test.wasmop.dev/v1",
        "kind": "Testbed",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": spec,
    })
}

/// A Pod of a memcached CR, as kube-controller-manager would create it.
pub fn memcached_pod(cr: &str, name: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "memcached", "memcached_cr": cr}},
    })
}
