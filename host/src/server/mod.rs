//! What the host serves to operators of the host: metrics and health probes.

mod http;

pub use crate::controller::{Metrics, ReconcileResult};
pub use http::{Readiness, serve};
