//! wasmop: a Kubernetes operator host whose reconcile logic lives in sandboxed WebAssembly
//! plugins.
//!
//! - [`contract`]: the plugin contract (`wit/`) as typed, validated host values.
//! - [`objects`]: the object cache plugins read from, and label selectors.
//! - [`runtime`]: the wasmtime engine, plugin loading and sandboxed calls.
//! - [`controller`]: watches, queues and reconciles against a cluster.
//! - [`plugins`]: following the plugins directory (hot reload).
//! - [`actions`]: applying plugin responses (scope checks, SSA, prune, status, events).
//! - [`policy`]: what the host's operator allows each plugin (limits, grants).
//! - [`server`]: metrics and health endpoints.
//! - [`units`]: durations and byte sizes as written in flags and files.
//! - [`cli`]: the `wasmop` command line.

pub mod actions;
pub mod cli;
pub mod cluster;
pub mod contract;
pub mod controller;
pub mod objects;
pub mod plugins;
pub mod policy;
pub mod runtime;
pub mod server;
pub mod units;
