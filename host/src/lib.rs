//! wasmop: a Kubernetes operator host whose reconcile logic lives in sandboxed WebAssembly
//! plugins.
//!
//! - [`contract`]: the plugin contract (`wit/`) as typed, validated host values.
//! - [`objects`]: the object cache plugins read from, and label selectors.
//! - [`runtime`]: the wasmtime engine, plugin loading and sandboxed calls.
//! - [`cli`]: the `wasmop` command line.

pub mod cli;
pub mod contract;
pub mod objects;
pub mod runtime;
