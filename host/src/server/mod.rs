//! What the host serves to operators of the host: metrics and health probes.

mod http;
mod metrics;

pub use http::{Readiness, serve};
pub use metrics::{Metrics, ReconcileResult};
