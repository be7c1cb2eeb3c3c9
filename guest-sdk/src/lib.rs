//! Write [wasmop](https://github.com/wasmop/wasmop) operator plugins in Rust.
//!
//! A plugin is a WebAssembly component (WIT `wasmop:plugin@0.2.0`) that reconciles one kind of
//! Kubernetes custom resource and may serve admission webhooks: the host watches, caches,
//! queues, applies, prunes, records and answers the API server; the plugin only decides.
//! Implement [`Plugin`], export it with [`export_plugin!`], and build with
//! `cargo build --target wasm32-wasip2 --release` (`crate-type = ["cdylib"]`).
//!
//! ```
//! use wasmop_sdk::prelude::*;
//!
//! struct Hello;
//!
//! impl Plugin for Hello {
//!     fn manifest() -> Manifest {
//!         Manifest::new("hello", "0.1.0")
//!             .parent(Kind::new("example.com", "v1", "Hello"), Scope::Namespaced)
//!             .child(Kind::new("", "v1", "ConfigMap"))
//!     }
//!
//!     fn reconcile(req: Request, _ctx: &Context) -> Result<Response, Error> {
//!         let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
//!                                     "metadata": {"name": req.name()}, "data": {"hello": "world"}});
//!         Ok(Response::new().apply(cm).condition(Condition::true_("Ready", "Applied", "")))
//!     }
//! }
//!
//! wasmop_sdk::export_plugin!(Hello);
//! # fn main() {}
//! ```
//!
//! Natively (`cargo test`) the SDK is plain Rust: build a [`Request`] and a
//! [`Context::fixture`], call `reconcile`, and assert on the [`Response`].
//!
//! Contents:
//! - [`Kind`], [`Scope`], [`ObjectRef`]: naming kinds and objects.
//! - [`Quantity`]: Kubernetes quantities (`1Gi`, `500m`), parsed and compared by value.
//! - [`LabelSelector`]: kubectl selector syntax, as the host parses it.
//! - [`Manifest`]: what the plugin reconciles and may touch.
//! - [`Request`]: the parent, observed children (and their status, typed) and related objects,
//!   config.
//! - [`Response`]: children to apply, deletions, status, conditions, events, requeue.
//! - [`Condition`], [`Event`]: what is recorded about the parent.
//! - [`Error`]: retryable or terminal.
//! - [`Context`]: read-only lookups in the host's cache.
//! - [`log`]: logging into the host's log.
//! - [`Webhook`], [`Rule`]: admission webhooks the manifest declares.
//! - [`AdmissionRequest`], [`Verdict`]: what [`Plugin::admit`] is asked and answers
//!   (allow, deny, mutate, warnings); unit-test it with [`AdmissionRequest::new`] and
//!   [`Context::fixture_for_admission`].
//! - [`Plugin`], [`export_plugin!`]: the trait and the export.
//!
//! On `wasm32` the SDK also sets the plugin's global allocator: a bump allocator (an instance
//! lives for one call, so freeing memory hardly matters and allocating is a cursor move).
//! Cargo feature `bump-alloc`, on by default; see the crate README.

#![warn(missing_docs)]

// The allocator is compiled where it is used: in plugins (wasm32, feature on) and in its tests.
#[cfg(any(test, all(target_arch = "wasm32", feature = "bump-alloc")))]
mod bump;
mod context;
mod error;
mod export;
pub mod log;
mod manifest;
mod plugin;
pub mod prelude;
mod request;
mod response;

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod bindings;

pub use context::Context;
pub use error::{Error, Failure, LookupError};
#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub use export::__private;
pub use manifest::{Manifest, RelatedKind};
pub use plugin::Plugin;
pub use request::Request;
pub use response::Response;
/// The types shared with the host (defined once, in `wasmop-types`).
pub use wasmop_types::{
    AdmissionRequest, Condition, ConditionStatus, Event, EventType, FailurePolicy, GroupVersionResource, Kind, KindError,
    LabelSelector, MatchCondition, ObjectRef, Operation, Quantity, QuantityError, Rule, RuleScope, Scope, SelectorError,
    SideEffects, UserInfo, Verdict, Webhook, WebhookType,
};

/// The README's example compiles and runs as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
