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
//! - [`metrics`]: the Prometheus registry every layer records into (controller-runtime's names).
//! - [`yaml`]: YAML as the host reads and writes it (YAML 1.2 scalars, one-line errors).
//! - [`contract`]: the plugin contract (`wit/`) as typed, validated host values.
//! - [`policy`]: what the host's operator allows each plugin, as plain data (limits, grants,
//!   circuit breaker settings, removal).
//! - [`objects`]: the object cache plugins read from, label selectors, which objects a plugin
//!   may see around a parent (`visible_to`), and requests gathered from the cache.
//! - [`runtime`]: the wasmtime engine, plugin loading and sandboxed calls under each plugin's
//!   limits and grants; it records every call in the metrics.
//! - [`cluster`]: what the host asks the cluster itself (API server version, discovery).
//! - [`watch`]: one watch per kind shared by every plugin (the object cache and change feed),
//!   its initial list and its backoff.
//! - [`queue`]: the work queue (dedup, delayed adds, rate-limited retries).
//! - [`leader`]: leader election on a Lease, and the host's role everything that writes waits
//!   for.
//! - [`plugin_config`]: a plugin's configuration checked against its schema, and followed from
//!   its source (`wasmop run` and `wasmop reconcile` alike).
//! - [`actions`]: applying plugin responses (scope checks, SSA, prune, status, events).
//! - [`shard`]: sharding across replicas: membership Leases, the hash ring, the leader's
//!   sharder and the owner's handover (it reads the running plugins through [`shard::ShardHost`]).
//! - [`controller`]: the plugin controllers: manager, workers, one reconcile, mapping a change to
//!   its parents, circuit breaker, retirement.
//! - [`reload`]: the directory reloader (hot reload of plugin files, `WasmPlugin` status).
//! - [`registry`]: plugins from OCI registries: the client, `wasmop push`, and the puller that
//!   fills the plugins directory from the host policy's sources.
//! - [`admission`]: admission webhooks served by plugins (HTTPS server, certificates, webhook
//!   configurations).
//! - [`rbac`]: the least-privilege RBAC a host needs for its plugins (`wasmop rbac`).
//! - [`server`]: metrics and health endpoints.
//! - [`cli`]: the `wasmop` command line: arguments and wiring.

#![warn(missing_docs)]

pub mod actions;
pub mod admission;
pub mod allocator;
pub mod cli;
pub mod cluster;
pub mod contract;
pub mod controller;
pub mod leader;
pub mod metrics;
pub mod objects;
pub mod plugin_config;
pub mod policy;
pub mod queue;
pub mod rbac;
pub mod registry;
pub mod reload;
pub mod runtime;
pub mod server;
pub mod shard;
pub mod units;
pub mod watch;
pub mod yaml;
