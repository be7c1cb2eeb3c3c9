//! wasmop: a Kubernetes operator host whose reconcile logic lives in sandboxed WebAssembly
//! plugins.
//!
//! The modules, lowest layer first; each imports only from the ones above it in this list
//! (`tests/layers.rs` checks it). Kinds, scopes, object references, conditions, events and
//! label selectors come from the `wasmop-types` crate below them all.
//!
//! - [`allocator`]: the C allocator's settings for a long-running host and what it holds, and
//!   hash tables that shrink as they empty.
//! - [`units`]: durations and byte sizes as written in flags and files.
//! - [`yaml`]: YAML as the host reads and writes it (YAML 1.2 scalars, one-line errors).
//! - [`contract`]: the plugin contract (`wit/`) as typed, validated host values.
//! - [`objects`]: the object cache plugins read from, label selectors, and requests gathered
//!   from the cache.
//! - [`policy`]: what the host's operator allows each plugin, as plain data (limits, grants,
//!   circuit breaker settings, removal).
//! - [`runtime`]: the wasmtime engine, plugin loading and sandboxed calls under each plugin's
//!   limits and grants.
//! - [`cluster`]: what the host asks the cluster itself (API server version, discovery).
//! - [`actions`]: applying plugin responses (scope checks, SSA, prune, status, events).
//! - [`controller`]: watches, queues and reconciles against a cluster; the metrics registry
//!   controllers report into.
//! - [`reload`]: the directory reloader (hot reload of plugin files, `WasmPlugin` status).
//! - [`registry`]: plugins from OCI registries: the client, `wasmop push`, and the puller that
//!   fills the plugins directory from the host policy's sources.
//! - [`admission`]: admission webhooks served by plugins (HTTPS server, certificates, webhook
//!   configurations).
//! - [`server`]: metrics and health endpoints.
//! - [`cli`]: the `wasmop` command line.

#![warn(missing_docs)]

pub mod actions;
pub mod admission;
pub mod allocator;
pub mod cli;
pub mod cluster;
pub mod contract;
pub mod controller;
pub mod objects;
pub mod policy;
pub mod registry;
pub mod reload;
pub mod runtime;
pub mod server;
pub mod units;
pub mod yaml;
