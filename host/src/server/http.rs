//! The host's HTTP endpoint: `/metrics`, `/healthz`, `/readyz`.

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

use crate::controller::Metrics;

/// Whether the host is ready (plugins loaded, watches synced).
pub type Readiness = Arc<dyn Fn() -> bool + Send + Sync>;

/// Serve the endpoints on `addr` until the returned task is aborted. Returns the bound
/// address (useful with port 0).
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>, ready: Readiness) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tracing::info!(addr = %bound, "serving /metrics, /healthz, /readyz");
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let (metrics, ready) = (Arc::clone(&metrics), Arc::clone(&ready));
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let (metrics, ready) = (Arc::clone(&metrics), Arc::clone(&ready));
                    async move { Ok::<_, Infallible>(route(&req, &metrics, &ready)) }
                });
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    Ok((bound, task))
}

fn route(req: &Request<Incoming>, metrics: &Metrics, ready: &Readiness) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: String, content_type: &'static str| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(content_type));
        r
    };
    match req.uri().path() {
        "/metrics" => text(StatusCode::OK, metrics.render(), "text/plain; version=0.0.4; charset=utf-8"),
        "/healthz" | "/livez" => text(StatusCode::OK, "ok\n".into(), "text/plain"),
        "/readyz" if ready() => text(StatusCode::OK, "ok\n".into(), "text/plain"),
        "/readyz" => {
            text(StatusCode::SERVICE_UNAVAILABLE, "not ready: plugins loading or watches syncing\n".into(), "text/plain")
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n".into(), "text/plain"),
    }
}
