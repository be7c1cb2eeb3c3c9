//! wasmop: a Kubernetes operator host whose reconcile logic lives in sandboxed WebAssembly
//! plugins.
//!
//! - [`contract`]: the plugin contract (`wit/`) as typed, validated host values.
//! - [`objects`]: the object cache plugins read from, and label selectors.
//! - [`runtime`]: the wasmtime engine, plugin loading and sandboxed calls.
//! - [`controller`]: watches, queues and reconciles against a cluster.
//! - [`plugins`]: following the plugins directory (hot reload).
//! - [`actions`]: applying plugin responses (scope checks, SSA, prune, status, events).
//! - [`server`]: metrics and health endpoints.
//! - [`cli`]: the `wasmop` command line.

pub mod actions;
pub mod cli;
pub mod controller;
pub mod contract;
pub mod objects;
pub mod plugins;
pub mod runtime;
pub mod server;
