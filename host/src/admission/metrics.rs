//! The admission server's metrics, in the host's registry ([`Metrics`]): controller-runtime's
//! webhook metrics (so its dashboards work) and wasmop's per-plugin outcomes.
//!
//! | metric | labels |
//! |---|---|
//! | `controller_runtime_webhook_requests_total` | `webhook` (the path), `code` (HTTP status) |
//! | `controller_runtime_webhook_latency_seconds` (histogram) | `webhook` |
//! | `controller_runtime_webhook_requests_in_flight` | `webhook` |
//! | `wasmop_admission_outcomes_total` | `plugin`, `webhook`, `outcome` (`allowed`, `denied`, `error`), `reason` |
//! | `wasmop_admission_certificate_expiry_timestamp_seconds` | `certificate` (`serving`, `ca`: the CA that signs renewals) |
//! | `wasmop_admission_certificate_rotations_total` | `step` (`renew`, `add-ca`, `switch`, `drop-ca`) |

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use crate::metrics::Metrics;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookLabels {
    webhook: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    webhook: String,
    code: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    plugin: String,
    webhook: String,
    outcome: String,
    reason: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CertificateLabels {
    certificate: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabels {
    step: String,
}

/// How one admission call ended, for `wasmop_admission_outcomes_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmissionOutcome {
    /// The plugin allowed the request (`reason`: `Allowed` or `Mutated`).
    Allowed,
    /// The plugin denied the request (`reason`: `Denied`).
    Denied,
    /// The call failed and the host denied the request (fail closed); `reason` says why
    /// (`PluginTimeout`, `PluginTrapped`, `CircuitBreakerOpen`, `InvalidMutation`, ...).
    Error,
}

impl AdmissionOutcome {
    fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Denied => "denied",
            Self::Error => "error",
        }
    }
}

/// The admission metrics; cheap to clone (every clone counts into the same families).
#[derive(Debug, Clone)]
pub struct AdmissionMetrics {
    requests: Family<CodeLabels, Counter>,
    latency: Family<WebhookLabels, Histogram>,
    in_flight: Family<WebhookLabels, Gauge>,
    outcomes: Family<OutcomeLabels, Counter>,
    expiry: Family<CertificateLabels, Gauge>,
    rotations: Family<StepLabels, Counter>,
}

impl AdmissionMetrics {
    /// Register the admission metrics in `registry`.
    pub fn new(registry: &Metrics) -> Self {
        let this = Self {
            requests: Family::default(),
            latency: Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.000_25, 2.0, 16))),
            in_flight: Family::default(),
            outcomes: Family::default(),
            expiry: Family::default(),
            rotations: Family::default(),
        };
        registry.register(
            "controller_runtime_webhook_requests",
            "Total number of admission requests by HTTP status code",
            this.requests.clone(),
        );
        registry.register(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission requests",
            this.latency.clone(),
        );
        registry.register(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served",
            this.in_flight.clone(),
        );
        registry.register(
            "wasmop_admission_outcomes",
            "Admission calls by plugin and webhook: allowed, denied, or error (denied by the host, fail closed), by reason",
            this.outcomes.clone(),
        );
        registry.register(
            "wasmop_admission_certificate_expiry_timestamp_seconds",
            "When the admission serving certificate and the CA signing it expire (Unix time)",
            this.expiry.clone(),
        );
        registry.register(
            "wasmop_admission_certificate_rotations",
            "Steps of admission certificate rotation taken by this host: renew, add-ca, switch, drop-ca",
            this.rotations.clone(),
        );
        this
    }

    /// The certificate `certificate` (`serving` or `ca`) expires at `unix` seconds.
    pub fn certificate_expires(&self, certificate: &str, unix: i64) {
        self.expiry.get_or_create(&CertificateLabels { certificate: certificate.into() }).set(unix);
    }

    /// A rotation step (`renew`, `add-ca`, `switch`, `drop-ca`) was written.
    pub fn rotated(&self, step: &str) {
        self.rotations.get_or_create(&StepLabels { step: step.into() }).inc();
    }

    /// A request to `webhook` (the path) started: counted in flight until the guard drops.
    pub fn start(&self, webhook: &str) -> InFlight {
        let gauge = self.in_flight.get_or_create(&WebhookLabels { webhook: webhook.into() }).clone();
        gauge.inc();
        InFlight(gauge)
    }

    /// A request to `webhook` (the path) answered with HTTP `code` after `seconds`.
    pub fn answered(&self, webhook: &str, code: u16, seconds: f64) {
        self.requests.get_or_create(&CodeLabels { webhook: webhook.into(), code: code.to_string() }).inc();
        self.latency.get_or_create(&WebhookLabels { webhook: webhook.into() }).observe(seconds);
    }

    /// A call to `plugin`'s `webhook` ended with `outcome` for `reason`.
    pub fn outcome(&self, plugin: &str, webhook: &str, outcome: AdmissionOutcome, reason: &str) {
        let labels = OutcomeLabels {
            plugin: plugin.into(),
            webhook: webhook.into(),
            outcome: outcome.as_str().into(),
            reason: reason.into(),
        };
        self.outcomes.get_or_create(&labels).inc();
    }
}

/// Counts one request in flight while it lives.
#[derive(Debug)]
pub struct InFlight(Gauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_runtime_webhook_names_are_rendered_in_the_host_registry() {
        let registry = Metrics::new();
        let metrics = AdmissionMetrics::new(&registry);
        let guard = metrics.start("/admission/p/w");
        assert!(registry.render().contains(r#"controller_runtime_webhook_requests_in_flight{webhook="/admission/p/w"} 1"#));
        drop(guard);
        metrics.answered("/admission/p/w", 200, 0.001);
        metrics.outcome("p", "w", AdmissionOutcome::Error, "PluginTimeout");
        metrics.certificate_expires("serving", 1_900_000_000);
        metrics.rotated("add-ca");
        let text = registry.render();
        assert!(text.contains(r#"controller_runtime_webhook_requests_in_flight{webhook="/admission/p/w"} 0"#), "{text}");
        assert!(text.contains(r#"controller_runtime_webhook_requests_total{webhook="/admission/p/w",code="200"} 1"#), "{text}");
        assert!(text.contains(r#"controller_runtime_webhook_latency_seconds_count{webhook="/admission/p/w"} 1"#), "{text}");
        assert!(
            text.contains(r#"wasmop_admission_outcomes_total{plugin="p",webhook="w",outcome="error",reason="PluginTimeout"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"wasmop_admission_certificate_expiry_timestamp_seconds{certificate="serving"} 1900000000"#),
            "{text}"
        );
        assert!(text.contains(r#"wasmop_admission_certificate_rotations_total{step="add-ca"} 1"#), "{text}");
    }
}
