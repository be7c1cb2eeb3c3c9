//! What the host serves to operators of the host: metrics and health probes.
//!
//! By default one plain HTTP address serves `/metrics`, `/healthz` and `/readyz`
//! ([`serve`]). With [`MetricsConfig::secure`], `/metrics` is served over TLS and every scrape
//! is checked against the API server ([`secure`], [`auth`]), and the probes move to their own
//! plain address ([`serve_probes`]), as controller-runtime splits its metrics and health-probe
//! addresses.

pub mod auth;
mod http;
pub mod secure;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::metrics::Metrics;
pub use auth::{Decision, MetricsAuth};
pub use http::{Readiness, serve, serve_metrics, serve_probes};
pub use secure::{MetricsCerts, SecureError, SecureMetrics, serve_secure};
use tokio::task::JoinHandle;

/// The probe address of a host with secure metrics and no `--probe-addr`.
pub const DEFAULT_PROBE_ADDR: &str = "127.0.0.1:8081";

/// Where and how the host serves its metrics and probes (`wasmop run --metrics-addr`,
/// `--metrics-secure`, `--metrics-cert-dir`, `--probe-addr`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    /// Where `/metrics` is served (`None`: nowhere).
    pub metrics_addr: Option<SocketAddr>,
    /// Serve `/metrics` over TLS with this certificate, scrapes checked by the API server
    /// (`None`: plain HTTP, unchecked, as for local development).
    pub secure: Option<MetricsCerts>,
    /// Where `/healthz` and `/readyz` are served: `None` serves them with plain metrics on
    /// `metrics_addr`, or on [`DEFAULT_PROBE_ADDR`] when metrics are secure.
    pub probe_addr: Option<SocketAddr>,
    /// How long an answer about one scrape's token is reused.
    pub auth_ttl: Duration,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self { metrics_addr: Some(([127, 0, 0, 1], 8080).into()), secure: None, probe_addr: None, auth_ttl: auth::DEFAULT_TTL }
    }
}

/// Why the metrics or probe server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A plain address could not be bound.
    #[error("cannot serve {what} on {addr}: {error}")]
    Bind {
        /// What was to be served there.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The secure metrics server could not start.
    #[error("cannot serve /metrics over HTTPS: {0}")]
    Secure(#[from] SecureError),
}

/// The servers started by [`start`]: their bound addresses; they stop when this is dropped.
#[derive(Debug, Default)]
pub struct Serving {
    /// Where `/metrics` is served, if anywhere.
    pub metrics: Option<SocketAddr>,
    /// Where `/healthz` and `/readyz` are served, if anywhere (the same address as `metrics`
    /// when they are served together).
    pub probes: Option<SocketAddr>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// What the servers serve: the registry, readiness, and (for secure metrics) the client that
/// reviews scrapes.
#[derive(Clone)]
pub struct ServeContext {
    /// The metrics registry.
    pub metrics: Arc<Metrics>,
    /// Whether the host is ready.
    pub ready: Readiness,
    /// The host's client: TokenReviews and SubjectAccessReviews are made with it.
    pub client: kube::Client,
}

impl std::fmt::Debug for ServeContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeContext").finish_non_exhaustive()
    }
}

/// Start the metrics and probe servers `config` describes.
///
/// # Errors
/// [`ServeError`] when an address cannot be bound or the metrics certificate cannot be made
/// or read.
pub async fn start(config: &MetricsConfig, context: ServeContext) -> Result<Serving, ServeError> {
    let mut serving = Serving::default();
    let bind = |what: &'static str, addr: SocketAddr| move |error| ServeError::Bind { what, addr, error };
    match (&config.secure, config.metrics_addr, config.probe_addr) {
        (None, Some(addr), None) => {
            let (bound, task) =
                serve(addr, context.metrics, context.ready).await.map_err(bind("/metrics, /healthz and /readyz", addr))?;
            serving.tasks.push(task);
            (serving.metrics, serving.probes) = (Some(bound), Some(bound));
            return Ok(serving);
        }
        (None, Some(addr), Some(_)) => {
            let (bound, task) = serve_metrics(addr, Arc::clone(&context.metrics)).await.map_err(bind("/metrics", addr))?;
            serving.tasks.push(task);
            serving.metrics = Some(bound);
        }
        (Some(certs), Some(addr), _) => {
            let secure = SecureMetrics {
                metrics: Arc::clone(&context.metrics),
                auth: Arc::new(MetricsAuth::new(context.client.clone(), config.auth_ttl)),
                certs: certs.clone(),
            };
            let (bound, task) = serve_secure(addr, secure).await?;
            serving.tasks.push(task);
            serving.metrics = Some(bound);
        }
        (_, None, _) => {}
    }
    let probe_addr = match (config.probe_addr, &config.secure) {
        (Some(addr), _) => Some(addr),
        (None, Some(_)) => Some(DEFAULT_PROBE_ADDR.parse().expect("a socket address")),
        (None, None) => None,
    };
    if let Some(addr) = probe_addr {
        let (bound, task) = serve_probes(addr, context.ready).await.map_err(bind("/healthz and /readyz", addr))?;
        serving.tasks.push(task);
        serving.probes = Some(bound);
    }
    Ok(serving)
}
