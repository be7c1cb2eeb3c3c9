//! `/metrics` over TLS behind the API server's authentication and authorization
//! (`wasmop run --metrics-secure`): every scrape carries a bearer token, reviewed by
//! [`MetricsAuth`]; no token or one the API server does not know gets 401, a user without
//! `get` on the non-resource URL `/metrics` gets 403, a review the API server does not answer
//! gets 503. Only `GET /metrics` is served here: the probes have their own plain port.
//!
//! The certificate is generated at start (self-signed, for `localhost`, `127.0.0.1` and the
//! host's name: scrapers skip verification or pin it) or read from a directory (`tls.crt`,
//! `tls.key`, e.g. a mounted cert-manager Secret), re-read every [`RELOAD_PERIOD`] and served
//! to new connections without a restart; a broken change keeps the previous one serving.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use super::auth::{Decision, METRICS_PATH, MetricsAuth};
use super::http::{METRICS_CONTENT_TYPE, text};
use crate::admission::certs::{CertError, CertResolver, ServingCert};
use crate::admission::server::{CLIENT_PATIENCE, tls_config};
use crate::metrics::Metrics;

/// How often a certificate directory is re-read.
pub const RELOAD_PERIOD: Duration = Duration::from_secs(10);

/// Where the metrics server's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricsCerts {
    /// A self-signed certificate generated at start for these names.
    Generated(Vec<String>),
    /// `tls.crt` and `tls.key` of this directory, reloaded when they change.
    Dir(PathBuf),
}

impl MetricsCerts {
    /// The names a generated certificate is for: `localhost`, `127.0.0.1`, and `$HOSTNAME`
    /// (a Pod's name) when set.
    pub fn generated() -> Self {
        let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
        if let Ok(host) = std::env::var("HOSTNAME")
            && !host.is_empty()
            && !names.contains(&host)
        {
            names.push(host);
        }
        Self::Generated(names)
    }

    /// The certificate to serve first.
    ///
    /// # Errors
    /// [`CertError`] when it cannot be generated, or the directory's files are missing or
    /// invalid.
    pub fn load(&self) -> Result<ServingCert, CertError> {
        match self {
            Self::Generated(names) => ServingCert::generate(names),
            Self::Dir(dir) => ServingCert::from_dir(dir),
        }
    }
}

/// Why the secure metrics server could not start.
#[derive(Debug, thiserror::Error)]
pub enum SecureError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The certificate could not be made or read.
    #[error("metrics certificate: {0}")]
    Cert(#[from] CertError),
    /// rustls refused the configuration.
    #[error("cannot configure TLS: {0}")]
    Tls(#[from] rustls::Error),
}

/// What the secure metrics server serves and checks.
#[derive(Debug)]
pub struct SecureMetrics {
    /// The registry rendered at `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Who may read it.
    pub auth: Arc<MetricsAuth>,
    /// Where the certificate comes from.
    pub certs: MetricsCerts,
}

/// Serve `GET /metrics` over TLS on `addr`, each request checked by `secure.auth`, until the
/// returned task is aborted (a certificate directory is followed by the same task). Returns
/// the bound address (useful with port 0).
///
/// # Errors
/// [`SecureError`] when the certificate cannot be made or read, or the address bound.
pub async fn serve_secure(addr: SocketAddr, secure: SecureMetrics) -> Result<(SocketAddr, JoinHandle<()>), SecureError> {
    serve_every(addr, secure, RELOAD_PERIOD).await
}

/// [`serve_secure`], re-reading a certificate directory every `reload`.
async fn serve_every(
    addr: SocketAddr,
    secure: SecureMetrics,
    reload: Duration,
) -> Result<(SocketAddr, JoinHandle<()>), SecureError> {
    let cert = secure.certs.load()?;
    let resolver = CertResolver::new(&cert)?;
    let acceptor = TlsAcceptor::from(Arc::new(tls_config(Arc::clone(&resolver))?));
    let listener = TcpListener::bind(addr).await.map_err(|error| SecureError::Bind { addr, error })?;
    let bound = listener.local_addr().map_err(|error| SecureError::Bind { addr, error })?;
    match &secure.certs {
        MetricsCerts::Generated(names) => {
            tracing::info!(addr = %bound, ?names, "serving /metrics over HTTPS (self-signed certificate), scrapes checked with TokenReview and SubjectAccessReview");
        }
        MetricsCerts::Dir(dir) => {
            tracing::info!(addr = %bound, dir = %dir.display(), "serving /metrics over HTTPS, scrapes checked with TokenReview and SubjectAccessReview");
        }
    }
    let follow = match &secure.certs {
        MetricsCerts::Dir(dir) => Some(follow_dir(dir.clone(), reload, cert, Arc::clone(&resolver))),
        MetricsCerts::Generated(_) => None,
    };
    let (metrics, auth) = (secure.metrics, secure.auth);
    let task = tokio::spawn(async move {
        let _follow = follow.map(|f| AbortOnDrop(tokio::spawn(f)));
        let mut connections = tokio::task::JoinSet::new();
        loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!(error = %e, "metrics server cannot accept a connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                Some(_) = connections.join_next() => continue,
            };
            let (acceptor, metrics, auth) = (acceptor.clone(), Arc::clone(&metrics), Arc::clone(&auth));
            connections.spawn(async move {
                let tls = match tokio::time::timeout(CLIENT_PATIENCE, acceptor.accept(stream)).await {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(e)) => return tracing::debug!(%peer, error = %e, "metrics TLS handshake failed"),
                    Err(_) => return tracing::debug!(%peer, "metrics TLS handshake timed out"),
                };
                let service = service_fn(move |req| {
                    let (metrics, auth) = (Arc::clone(&metrics), Arc::clone(&auth));
                    async move { Ok::<_, Infallible>(answer(&req, &metrics, &auth).await) }
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

async fn answer(req: &Request<Incoming>, metrics: &Metrics, auth: &MetricsAuth) -> Response<Full<Bytes>> {
    if req.uri().path() != METRICS_PATH {
        return text(StatusCode::NOT_FOUND, "not found (the probes are on the probe port)\n".into(), "text/plain");
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n".into(), "text/plain");
        response.headers_mut().insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    match auth.check(req.headers().get(header::AUTHORIZATION).map(header::HeaderValue::as_bytes)).await {
        Ok(Decision::Allowed { .. }) => text(StatusCode::OK, metrics.render(), METRICS_CONTENT_TYPE),
        Ok(Decision::Unauthenticated { reason }) => {
            tracing::debug!(%reason, "metrics scrape refused: unauthenticated");
            let mut response = text(StatusCode::UNAUTHORIZED, format!("unauthorized: {reason}\n"), "text/plain");
            response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
            response
        }
        Ok(Decision::Forbidden { user, reason }) => {
            tracing::debug!(%user, %reason, "metrics scrape refused: forbidden");
            text(StatusCode::FORBIDDEN, format!("forbidden: {user} may not get {METRICS_PATH}: {reason}\n"), "text/plain")
        }
        Err(e) => {
            tracing::warn!(error = %e, "metrics scrape not checked");
            text(StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n"), "text/plain")
        }
    }
}

/// Re-read `dir` every `period`; serve a changed, valid certificate to new connections. A
/// missing or invalid change keeps `current` serving and is logged.
async fn follow_dir(dir: PathBuf, period: Duration, mut current: ServingCert, resolver: Arc<CertResolver>) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match ServingCert::from_dir(&dir)
            .and_then(|cert| if cert == current { Ok(None) } else { resolver.swap(&cert).map(|()| Some(cert)) })
        {
            Ok(None) => {}
            Ok(Some(cert)) => {
                tracing::info!(dir = %dir.display(), "metrics certificate changed on disk; serving the new one");
                current = cert;
            }
            Err(e) => tracing::warn!(dir = %dir.display(), error = %e, "metrics certificate unusable; keeping the previous one"),
        }
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use rustls::pki_types::pem::PemObject;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A client whose API server does not exist: a review cannot be answered.
    fn unreachable_client() -> kube::Client {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        kube::Client::try_from(config).unwrap()
    }

    /// `request` over TLS (trusting `ca`) to `addr`: the response as text and the certificate
    /// the server presented.
    async fn send(addr: SocketAddr, ca: &str, request: &str) -> (String, Vec<u8>) {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let mut tls = connector.connect(name, tcp).await.unwrap();
        let presented = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
        tls.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        tls.read_to_string(&mut response).await.unwrap();
        (response, presented)
    }

    fn get(path: &str, token: Option<&str>) -> String {
        let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
        format!("GET {path} HTTP/1.1\r\nHost: h\r\n{auth}Connection: close\r\n\r\n")
    }

    fn write(dir: &std::path::Path, cert: &ServingCert) {
        std::fs::write(dir.join("tls.crt"), &cert.cert_pem).unwrap();
        std::fs::write(dir.join("tls.key"), &cert.key_pem).unwrap();
    }

    fn der(cert: &ServingCert) -> Vec<u8> {
        cert.certified_key().unwrap().cert[0].to_vec()
    }

    async fn start(certs: MetricsCerts) -> (SocketAddr, JoinHandle<()>) {
        let secure = SecureMetrics {
            metrics: Arc::new(Metrics::new()),
            auth: Arc::new(MetricsAuth::new(unreachable_client(), Duration::from_secs(10))),
            certs,
        };
        serve_secure("127.0.0.1:0".parse().unwrap(), secure).await.unwrap()
    }

    #[tokio::test]
    async fn a_scrape_without_a_token_is_401_and_an_unchecked_one_is_503_and_probes_are_not_here() {
        let dir = tempfile::tempdir().unwrap();
        let cert = ServingCert::generate(&["127.0.0.1".into()]).unwrap();
        write(dir.path(), &cert);
        let (addr, task) = start(MetricsCerts::Dir(dir.path().into())).await;
        let (response, _) = send(addr, &cert.ca_pem, &get("/metrics", None)).await;
        assert!(response.starts_with("HTTP/1.1 401"), "{response}");
        assert!(response.to_ascii_lowercase().contains("www-authenticate: bearer"), "{response}");
        let (response, _) = send(addr, &cert.ca_pem, &get("/metrics", Some("t"))).await;
        assert!(response.starts_with("HTTP/1.1 503"), "the API server cannot be asked: {response}");
        assert!(response.contains("cannot review the scrape's token"), "{response}");
        let (response, _) = send(addr, &cert.ca_pem, &get("/healthz", None)).await;
        assert!(response.starts_with("HTTP/1.1 404"), "{response}");
        task.abort();
    }

    #[tokio::test]
    async fn a_generated_certificate_is_served_for_loopback() {
        let certs = MetricsCerts::generated();
        let MetricsCerts::Generated(names) = &certs else { unreachable!() };
        assert_eq!(names[..2], ["localhost".to_owned(), "127.0.0.1".to_owned()]);
        let (addr, task) = start(certs).await;
        // A fresh self-signed certificate each start: a client trusting nothing sees it and
        // refuses its issuer (scrapers skip verification, or use --metrics-cert-dir).
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let err = connector.connect(rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap(), tcp).await.unwrap_err();
        assert!(err.to_string().contains("UnknownIssuer"), "{err}");
        task.abort();
    }

    #[tokio::test]
    async fn a_changed_certificate_directory_is_served_without_restart_and_a_broken_change_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let first = ServingCert::generate(&["127.0.0.1".into()]).unwrap();
        write(dir.path(), &first);
        let secure = SecureMetrics {
            metrics: Arc::new(Metrics::new()),
            auth: Arc::new(MetricsAuth::new(unreachable_client(), Duration::from_secs(10))),
            certs: MetricsCerts::Dir(dir.path().into()),
        };
        let (addr, task) = serve_every("127.0.0.1:0".parse().unwrap(), secure, Duration::from_millis(20)).await.unwrap();
        assert_eq!(send(addr, &first.ca_pem, &get("/metrics", None)).await.1, der(&first));
        let second = ServingCert::generate(&["127.0.0.1".into()]).unwrap();
        write(dir.path(), &second);
        let both = format!("{}{}", first.ca_pem, second.ca_pem);
        tokio::time::timeout(Duration::from_secs(10), async {
            while send(addr, &both, &get("/metrics", None)).await.1 != der(&second) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the new certificate is served to new connections");
        std::fs::write(dir.path().join("tls.key"), "garbage").unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(send(addr, &both, &get("/metrics", None)).await.1, der(&second), "the previous one keeps serving");
        task.abort();
    }
}
