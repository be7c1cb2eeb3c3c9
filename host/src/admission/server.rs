//! The admission server: HTTPS (rustls with the `ring` provider, HTTP/1.1) on its own port,
//! answering `POST /admission/<plugin>/<webhook>` through a [`Handler`].
//!
//! The certificate comes from a [`CertResolver`], so a renewed certificate is served to new
//! connections without a restart. A client gets 10 seconds for the TLS handshake and for the
//! request headers; bodies over [`MAX_REVIEW_BYTES`] are refused before they are read whole.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use super::certs::CertResolver;
use super::handler::{Handler, Reply};
use super::review::{MAX_REVIEW_BYTES, ReviewError};

/// How long a client has for the TLS handshake, and for sending its request headers.
pub const CLIENT_PATIENCE: Duration = Duration::from_secs(10);

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        error: std::io::Error,
    },
    /// rustls refused the configuration.
    #[error("cannot configure TLS: {0}")]
    Tls(#[from] rustls::Error),
}

/// The TLS configuration: TLS 1.2 and 1.3 with the `ring` provider, no client certificates,
/// HTTP/1.1, the certificate of `resolver`.
///
/// # Errors
/// When rustls refuses the protocol versions (it does not with its own defaults).
pub fn tls_config(resolver: Arc<CertResolver>) -> Result<rustls::ServerConfig, rustls::Error> {
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Serve `handler` over HTTPS on `addr` until the returned task is aborted. Returns the bound
/// address (useful with port 0).
///
/// # Errors
/// [`ServeError`] when the address cannot be bound or TLS cannot be configured.
pub async fn serve(
    addr: SocketAddr,
    handler: Handler,
    resolver: Arc<CertResolver>,
) -> Result<(SocketAddr, JoinHandle<()>), ServeError> {
    let acceptor = TlsAcceptor::from(Arc::new(tls_config(resolver)?));
    let listener = TcpListener::bind(addr).await.map_err(|error| ServeError::Bind { addr, error })?;
    let bound = listener.local_addr().map_err(|error| ServeError::Bind { addr, error })?;
    tracing::info!(addr = %bound, "serving admission webhooks over HTTPS at /admission/<plugin>/<webhook>");
    let task = tokio::spawn(async move {
        // Owned by this task: aborting it (the host stops serving) closes every connection,
        // keep-alive ones included, so the API server sees the host gone at once.
        let mut connections = tokio::task::JoinSet::new();
        loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors and the like: wait rather than spin.
                        tracing::warn!(error = %e, "admission server cannot accept a connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                Some(_) = connections.join_next() => continue,
            };
            let (acceptor, handler) = (acceptor.clone(), handler.clone());
            connections.spawn(async move {
                let tls = match tokio::time::timeout(CLIENT_PATIENCE, acceptor.accept(stream)).await {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(e)) => return tracing::debug!(%peer, error = %e, "admission TLS handshake failed"),
                    Err(_) => return tracing::debug!(%peer, "admission TLS handshake timed out"),
                };
                let service = service_fn(move |req| {
                    let handler = handler.clone();
                    async move { Ok::<_, Infallible>(answer(&handler, req).await) }
                });
                let _ = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(CLIENT_PATIENCE)
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Ok((bound, task))
}

async fn answer(handler: &Handler, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let announced = parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    let body = match announced {
        Some(size) if size > MAX_REVIEW_BYTES => Err(ReviewError::TooLarge { size }),
        _ => match Limited::new(body, MAX_REVIEW_BYTES).collect().await {
            Ok(collected) => Ok(collected.to_bytes()),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(ReviewError::TooLarge { size: MAX_REVIEW_BYTES + 1 }),
            Err(e) => Err(ReviewError::Malformed(format!("cannot read the body: {e}"))),
        },
    };
    let reply = match &body {
        Ok(bytes) => handler.handle(&parts.method, parts.uri.path(), Ok(bytes)).await,
        Err(e) => handler.handle(&parts.method, parts.uri.path(), Err(e.clone())).await,
    };
    let status = reply.status();
    let (bytes, content_type) = match reply {
        Reply::Review(review) => (serde_json::to_vec(&review).expect("JSON serializes"), "application/json"),
        Reply::Error(_, message) => (format!("{message}\n").into_bytes(), "text/plain; charset=utf-8"),
    };
    let mut response = Response::new(Full::new(Bytes::from(bytes)));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static(content_type));
    if status == hyper::StatusCode::METHOD_NOT_ALLOWED {
        response.headers_mut().insert(header::ALLOW, header::HeaderValue::from_static("POST"));
    }
    response
}

#[cfg(test)]
mod tests {
    use futures::future::BoxFuture;
    use rustls::pki_types::pem::PemObject;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use wasmop_types::{AdmissionRequest, Verdict, Webhook};

    use super::*;
    use crate::admission::admitter::{Admitter, CallFailure, NotServed};
    use crate::admission::certs::ServingCert;
    use crate::admission::metrics::AdmissionMetrics;

    /// Plugin `p` with webhook `w`, never called (every request here is refused before).
    struct One;

    impl Admitter for One {
        fn find(&self, plugin: &str, _: &str) -> Result<Webhook, NotServed> {
            match plugin {
                "p" => Ok(serde_json::from_value(
                    serde_json::json!({"name": "w", "type": "Validating", "rules": [], "timeoutSeconds": 1}),
                )
                .unwrap()),
                _ => Err(NotServed::NoPlugin(plugin.into())),
            }
        }
        fn call(&self, _: &str, _: &str, _: AdmissionRequest, _: Duration) -> BoxFuture<'static, Result<Verdict, CallFailure>> {
            unreachable!("no request gets this far")
        }
        fn webhooks(&self) -> Vec<(String, Vec<Webhook>)> {
            Vec::new()
        }
    }

    /// Send `request` over TLS (trusting `ca`) to `addr`; the response as text.
    async fn send(addr: SocketAddr, ca: &str, request: &str) -> std::io::Result<String> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(rustls::pki_types::CertificateDer::from_pem_slice(ca.as_bytes()).unwrap()).unwrap();
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        let mut tls = connector.connect(rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap(), tcp).await?;
        tls.write_all(request.as_bytes()).await?;
        let mut response = String::new();
        tls.read_to_string(&mut response).await?;
        Ok(response)
    }

    #[tokio::test]
    async fn it_answers_over_tls_and_refuses_an_oversized_body_unread() {
        let cert = ServingCert::generate(&["127.0.0.1".into()]).unwrap();
        let handler = Handler::new(Arc::new(One), AdmissionMetrics::new(&crate::metrics::Metrics::new()), 4);
        let (addr, task) = serve("127.0.0.1:0".parse().unwrap(), handler, CertResolver::new(&cert).unwrap()).await.unwrap();
        let not_found =
            send(addr, &cert.ca_pem, "POST /admission/x/y HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .await
                .unwrap();
        assert!(not_found.starts_with("HTTP/1.1 404"), "{not_found}");
        assert!(not_found.ends_with("no plugin named \"x\" is loaded\n"), "{not_found}");
        let huge = format!("POST /admission/p/w HTTP/1.1\r\nHost: h\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", 1 << 30);
        let too_large = send(addr, &cert.ca_pem, &huge).await.unwrap();
        assert!(too_large.starts_with("HTTP/1.1 413"), "{too_large}");
        task.abort();
        let _ = task.await;
        assert!(send(addr, &cert.ca_pem, "GET / HTTP/1.1\r\n\r\n").await.is_err(), "stopped: nobody answers");
    }
}
