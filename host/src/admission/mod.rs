//! Admission webhooks served by plugins: an HTTPS server on its own port, one path per plugin and
//! webhook (`/admission/<plugin>/<webhook>`), and the webhook configurations that make the API
//! server call it.
//!
//! - [`review`]: `AdmissionReview` `admission.k8s.io/v1` in and out, with its size bound.
//! - [`patch`]: the JSON Patch of a mutation, computed by the host; identity, owner, finalizer
//!   and host-label changes refused.
//! - [`mutated_content`]: the content checks of a mutated object (the hook of the policy's).
//! - [`admitter`]: the seam from "plugin + webhook" to the plugin version serving now.
//! - [`exclusions`]: what no registered webhook reaches (the host's namespace, `kube-system`,
//!   the host's own objects).
//! - [`handler`]: one request to one answer; every failure is a denial with the reason.
//! - [`offline`]: the request the API server would send for an object from a file, answered
//!   by the handler without a cluster (`wasmop admit`).
//! - [`server`]: HTTPS (rustls, `ring`) and HTTP/1.1.
//! - [`certs`]: the serving certificate, generated and shared in a Secret, or read from a
//!   directory and reloaded; [`rotation`]: the one in a Secret renewed, its CA rolled over.
//! - [`registration`]: the `ValidatingWebhookConfiguration` and
//!   `MutatingWebhookConfiguration`, kept equal to what the loaded plugins declare.
//! - [`metrics`]: controller-runtime's webhook metrics and per-plugin outcomes.
//! - [`setup`]: all of it started together for `wasmop run`.

pub mod admitter;
pub mod certs;
pub mod exclusions;
pub mod handler;
pub mod metrics;
pub mod mutated_content;
pub mod offline;
pub mod patch;
pub mod registration;
pub mod review;
pub mod rotation;
pub mod server;
pub mod setup;

pub use admitter::{Admitter, CallFailure, NotServed};
pub use certs::{CertResolver, Lifetimes, ServingCert};
pub use exclusions::HostObjects;
pub use handler::{Handler, webhook_path};
pub use metrics::AdmissionMetrics;
pub use offline::OfflineAdmitter;
pub use registration::{Endpoint, Registrar};
pub use setup::{Admission, AdmissionConfig, CertSource};
