//! The host's plain HTTP endpoints: `/metrics`, `/healthz` (and `/livez`), `/readyz`, all on one
//! address as they always were, or the probes alone on their own address and `/metrics`
//! elsewhere (over TLS, [`super::secure`], or plain).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::metrics::Metrics;

/// Whether the host is ready (plugins loaded, watches synced).
pub type Readiness = Arc<dyn Fn() -> bool + Send + Sync>;

/// Serve `/metrics`, `/healthz` and `/readyz` on `addr` until the returned task is aborted.
/// Returns the bound address (useful with port 0).
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>, ready: Readiness) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    serve_plain(addr, Some(metrics), Some(ready)).await
}

/// Serve only `/metrics` on `addr` (plain metrics of a host whose probes have their own
/// address) until the returned task is aborted. Returns the bound address.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve_metrics(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    serve_plain(addr, Some(metrics), None).await
}

/// Serve only `/healthz` and `/readyz` on `addr` (the probe port of a host whose `/metrics` is
/// served over TLS) until the returned task is aborted. Returns the bound address.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve_probes(addr: SocketAddr, ready: Readiness) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    serve_plain(addr, None, Some(ready)).await
}

async fn serve_plain(
    addr: SocketAddr,
    metrics: Option<Arc<Metrics>>,
    ready: Option<Readiness>,
) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    match (&metrics, &ready) {
        (Some(_), Some(_)) => tracing::info!(addr = %bound, "serving /metrics, /healthz, /readyz"),
        (Some(_), None) => tracing::info!(addr = %bound, "serving /metrics over plain HTTP"),
        (None, _) => tracing::info!(addr = %bound, "serving the probes /healthz, /readyz"),
    }
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let (metrics, ready) = (metrics.clone(), ready.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let (metrics, ready) = (metrics.clone(), ready.clone());
                    async move { Ok::<_, Infallible>(route(&req, metrics.as_deref(), ready.as_ref())) }
                });
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    Ok((bound, task))
}

/// A plain-text response.
pub(super) fn text(status: StatusCode, body: String, content_type: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(content_type));
    r
}

/// The content type of the Prometheus text format.
pub(super) const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

fn route(req: &Request<Incoming>, metrics: Option<&Metrics>, ready: Option<&Readiness>) -> Response<Full<Bytes>> {
    match (req.uri().path(), metrics, ready) {
        ("/metrics", Some(metrics), _) => text(StatusCode::OK, metrics.render(), METRICS_CONTENT_TYPE),
        ("/healthz" | "/livez", _, Some(_)) => text(StatusCode::OK, "ok\n".into(), "text/plain"),
        ("/readyz", _, Some(ready)) if ready() => text(StatusCode::OK, "ok\n".into(), "text/plain"),
        ("/readyz", _, Some(_)) => {
            text(StatusCode::SERVICE_UNAVAILABLE, "not ready: plugins loading or watches syncing\n".into(), "text/plain")
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n".into(), "text/plain"),
    }
}
