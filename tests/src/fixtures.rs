//! Fixtures the host's tests and the end-to-end tests share: the example plugins built from
//! source (see [`crate::plugins`]) and the objects they reconcile.

use std::path::PathBuf;

use serde_json::{Value, json};

pub use crate::plugins::{plugin, plugin_with_features, workspace};

/// The memcached example plugin as a wasm32-wasip2 component.
pub fn memcached() -> PathBuf {
    plugin("memcached", "wasm32-wasip2")
}

/// The hostile test plugin (`plugins/testbed`) in its default build.
pub fn testbed() -> PathBuf {
    plugin("testbed", "wasm32-wasip2")
}

/// A `Memcached` object.
pub fn memcached_cr(name: &str, size: i64) -> Value {
    json!({
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "generation": 1},
        "spec": {"size": size},
    })
}

/// A `Testbed` object in the given mode (`plugins/testbed/src/mode.rs`), with extra spec fields.
pub fn testbed_cr(name: &str, mode: &str, extra: Value) -> Value {
    let mut spec = json!({"mode": mode});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({
        "apiVersion": "test.wasmop.dev/v1",
        "kind": "Testbed",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": spec,
    })
}

/// A Pod of a memcached CR, as kube-controller-manager would create it.
pub fn memcached_pod(cr: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "memcached", "memcached_cr": cr}},
    })
}
