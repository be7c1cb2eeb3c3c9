//! Fixtures the host's tests and the end-to-end tests share: the example plugins built from
//! source (see [`crate::plugins`]) and the objects they reconcile.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::objects;

pub use crate::plugins::{plugin, plugin_with_features, workspace};

/// The memcached example plugin as a wasm32-wasip2 component.
pub fn memcached() -> PathBuf {
    plugin("memcached", "wasm32-wasip2")
}

/// The hostile test plugin (`plugins/testbed`) in its default build.
pub fn testbed() -> PathBuf {
    plugin("testbed", "wasm32-wasip2")
}

/// A `Memcached` object as the cache holds it (a uid, generation 1).
pub fn memcached_cr(name: &str, size: i64) -> Value {
    objects::memcached(name).size(size).uid(&format!("uid-{name}")).generation(1).build()
}

/// A `Testbed` object in the given mode (`plugins/testbed/src/mode.rs`), with extra spec
/// fields, as the cache holds it (a uid).
pub fn testbed_cr(name: &str, mode: &str, extra: Value) -> Value {
    objects::testbed(name).mode(mode).spec_fields(extra).uid(&format!("uid-{name}")).build()
}

/// A Pod of a memcached CR, as kube-controller-manager would create it.
pub fn memcached_pod(cr: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "memcached", "memcached_cr": cr}},
    })
}
