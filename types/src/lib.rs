//! The types wasmop's host and its Rust plugin SDK share, defined once so that both name kinds
//! and objects, parse label selectors and read conditions the same way.
//!
//! Small on purpose: it depends on serde, serde_json and thiserror only and builds for
//! `wasm32-wasip2`, so a plugin pulls in nothing of the host. Plugins use it through
//! `wasmop-sdk`, which re-exports everything here.
//!
//! - [`Kind`], [`Scope`], [`ObjectRef`]: naming kinds and objects (`apps/v1/Deployment ns/web`).
//! - [`Condition`], [`Event`]: what is recorded about a parent, in their Kubernetes JSON form.
//! - [`LabelSelector`]: kubectl selector syntax, equality- and set-based.
//! - [`Quantity`]: Kubernetes resource quantities (`1Gi`, `500m`), compared by value.
//! - [`Webhook`], [`AdmissionRequest`], [`Verdict`]: admission webhooks served by plugins.

#![warn(missing_docs)]

mod admission;
mod admission_build;
mod condition;
mod kind;
mod quantity;
mod selector;

pub use admission::{
    AdmissionRequest, FailurePolicy, GroupVersionResource, MatchCondition, Operation, Rule, RuleScope, SideEffects, UserInfo,
    Verdict, WEBHOOK_TIMEOUT_RANGE, Webhook, WebhookType,
};
pub use condition::{Condition, ConditionStatus, Event, EventType};
pub use kind::{Kind, KindError, ObjectRef, Scope};
pub use quantity::{Quantity, QuantityError};
pub use selector::{LabelSelector, SelectorError};
