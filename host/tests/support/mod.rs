//! Test support: plugins built from the workspace's sources, and fixture builders.
#![allow(dead_code)]

use std::path::PathBuf;

#[path = "../../../tests/src/plugins.rs"]
mod plugins;
#[allow(unused_imports)] // each test binary uses a part
pub use plugins::{plugin, plugin_with_features, workspace};
#[path = "../../../tests/src/polyglot.rs"]
pub mod polyglot;

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
