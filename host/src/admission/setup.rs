//! [`Admission`]: the certificate, the HTTPS server and the registration started together over a
//! [`Manager`], and the observer that keeps the registration in step with the reloader.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::watch;

use super::admitter::Admitter;
use super::certs::{self, CertError, CertResolver, Lifetimes, ServingCert};
use super::exclusions::HostObjects;
use super::handler::{DEFAULT_MAX_IN_FLIGHT, Handler};
use super::metrics::AdmissionMetrics;
use super::registration::{self, Endpoint, Registrar, RegistrationError};
use super::rotation::Rotation;
use super::server::{self, ServeError};
use crate::controller::Manager;
use crate::reload::PluginSetObserver;

/// How often a certificate directory is re-read.
pub const CERT_DIR_PERIOD: Duration = Duration::from_secs(10);

/// Why admission could not start.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// No usable certificate.
    #[error(transparent)]
    Cert(#[from] CertError),
    /// The server could not listen.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// Where the serving certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertSource {
    /// Generated at start for `names` and kept in Secret `namespace/name` (shared by replicas),
    /// renewed there by the leader and followed by every replica ([`super::rotation`]).
    Secret {
        /// The Secret's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
        /// DNS names and IP addresses of the certificate.
        names: Vec<String>,
    },
    /// `tls.crt`, `tls.key` (and `ca.crt`) of a directory, reloaded when they change.
    Dir(PathBuf),
}

/// How admission runs.
#[derive(Debug, Clone)]
pub struct AdmissionConfig {
    /// Where the HTTPS server listens.
    pub bind: SocketAddr,
    /// How the API server reaches it; `None`: `https://127.0.0.1:<bound port>` (tests, a host
    /// on the API server's machine).
    pub endpoint: Option<Endpoint>,
    /// Name of both webhook configurations (`wasmop-<release>`).
    pub configuration_name: String,
    /// The certificate.
    pub certs: CertSource,
    /// How long generated certificates are valid ([`CertSource::Secret`]).
    pub cert_lifetimes: Lifetimes,
    /// Plugin calls served at once.
    pub max_in_flight: usize,
    /// The objects the host runs on, which no registered webhook reaches.
    pub host: HostObjects,
}

impl AdmissionConfig {
    /// Defaults for everything but where the certificate comes from: any port on loopback,
    /// reached by URL, configurations named `wasmop`, [`DEFAULT_MAX_IN_FLIGHT`], a host outside
    /// the cluster with its Leases in `default` (and its Secret, if the certificate is kept in one).
    pub fn new(certs: CertSource) -> Self {
        let mut host = HostObjects::outside("default");
        if let CertSource::Secret { namespace, name, .. } = &certs {
            host.secret = Some((namespace.clone(), name.clone()));
        }
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            endpoint: None,
            configuration_name: "wasmop".into(),
            certs,
            cert_lifetimes: Lifetimes::default(),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            host,
        }
    }
}

/// The running admission server and registration; dropping it stops both (the webhook
/// configurations stay, so the API server applies their `failurePolicy` while no host answers,
/// unless [`Admission::unregister`] removed them).
pub struct Admission {
    addr: SocketAddr,
    ca_pem: watch::Receiver<String>,
    follow: Arc<Follow>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The registrar's writing task.
    writing: tokio::task::JoinHandle<()>,
    client: kube::Client,
    configuration_name: String,
    outside: bool,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("addr", &self.addr)
            .field("configuration_name", &self.configuration_name)
            .field("outside", &self.outside)
            .finish_non_exhaustive()
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        self.writing.abort();
    }
}

impl Admission {
    /// Get the certificate, start serving `manager`'s plugins' webhooks, and start the
    /// registrar (it writes once told about the plugins: [`Admission::observer`]).
    ///
    /// # Errors
    /// [`SetupError`]: no usable certificate (Secret unreadable or not creatable, files
    /// missing or invalid), or the address cannot be bound.
    pub async fn start(config: AdmissionConfig, manager: Arc<Manager>) -> Result<Self, SetupError> {
        let admitter: Arc<dyn Admitter> = manager.clone();
        Self::start_with(config, &manager, admitter).await
    }

    /// [`Admission::start`] serving and registering the webhooks of `admitter` instead of the
    /// manager's own (the manager still gives the client, leadership and metrics registry).
    ///
    /// # Errors
    /// As [`Admission::start`].
    pub async fn start_with(config: AdmissionConfig, manager: &Manager, admitter: Arc<dyn Admitter>) -> Result<Self, SetupError> {
        let mut tasks = Vec::new();
        let cert = match &config.certs {
            CertSource::Secret { namespace, name, names } => {
                certs::shared_secret(manager.client().clone(), namespace, name, names, &config.cert_lifetimes).await?
            }
            CertSource::Dir(dir) => ServingCert::from_dir(dir)?,
        };
        let resolver = CertResolver::new(&cert)?;
        let (ca_tx, ca_pem) = watch::channel(cert.ca_pem.clone());
        let metrics = AdmissionMetrics::new(manager.metrics());
        let handler = Handler::new(Arc::clone(&admitter), metrics.clone(), config.max_in_flight);
        let (addr, serving) = server::serve(config.bind, handler, Arc::clone(&resolver)).await?;
        tasks.push(serving);
        let endpoint = config.endpoint.unwrap_or_else(|| Endpoint::Url(format!("https://127.0.0.1:{}", addr.port())));
        let outside = matches!(endpoint, Endpoint::Url(_));
        let configuration_name = config.configuration_name.clone();
        tracing::info!(?endpoint, configurations = %config.configuration_name, "admission webhooks registered for this endpoint");
        let (registrar, writing) = Registrar::start(
            manager.client().clone(),
            config.configuration_name,
            endpoint,
            config.host,
            manager.leadership().clone(),
            ca_pem.clone(),
        );
        let follow_certs = match &config.certs {
            CertSource::Dir(dir) => tokio::spawn(certs::follow_dir(dir.clone(), CERT_DIR_PERIOD, cert, resolver, ca_tx, metrics)),
            CertSource::Secret { namespace, name, names } => {
                let rotation = Rotation {
                    api: kube::Api::namespaced(manager.client().clone(), namespace),
                    name: name.clone(),
                    names: names.clone(),
                    lifetimes: config.cert_lifetimes,
                    resolver,
                    ca: ca_tx,
                    published: registrar.published(),
                    leadership: manager.leadership().clone(),
                    metrics,
                };
                tokio::spawn(rotation.run(cert))
            }
        };
        tasks.push(follow_certs);
        let follow = Arc::new(Follow { admitter, registrar });
        Ok(Self { addr, ca_pem, follow, tasks, writing, client: manager.client().clone(), configuration_name, outside })
    }

    /// Whether the API server reaches this host by URL (a host outside the cluster, or `wasmop
    /// dev`), not through a Service whose other replicas keep answering.
    pub fn outside_cluster(&self) -> bool {
        self.outside
    }

    /// On a clean exit: stop registering, and delete both webhook configurations, so that
    /// writes of the admitted kinds are not refused ("connection refused") once no host
    /// answers. Call it only where no other replica answers for this host (outside a cluster:
    /// [`Admission::outside_cluster`]) and on the replica that writes them (the leader); the
    /// server keeps answering until the `Admission` is dropped.
    ///
    /// # Errors
    /// [`RegistrationError`] when the API server refuses a delete (the configurations stay).
    pub async fn unregister(&mut self) -> Result<(), RegistrationError> {
        // Stop the registrar first, so that no write follows the deletes.
        self.writing.abort();
        let _cancelled = (&mut self.writing).await;
        registration::unregister(&self.client, &self.configuration_name).await
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The CA bundle the webhook configurations carry now (PEM).
    pub fn ca_pem(&self) -> String {
        self.ca_pem.borrow().clone()
    }

    /// What keeps the registration equal to the plugins: give it to
    /// [`Reloader::observe`](crate::reload::Reloader::observe).
    pub fn observer(&self) -> Arc<dyn PluginSetObserver> {
        self.follow.clone()
    }
}

/// Registers the webhooks of the admitter's serving plugins, without the one leaving.
struct Follow {
    admitter: Arc<dyn Admitter>,
    registrar: Arc<Registrar>,
}

impl std::fmt::Debug for Follow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follow").field("registrar", &self.registrar).finish_non_exhaustive()
    }
}

impl PluginSetObserver for Follow {
    fn plugins_changed<'a>(&'a self, leaving: Option<&'a str>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let plugins: BTreeMap<String, _> = self
                .admitter
                .webhooks()
                .into_iter()
                .filter(|(name, hooks)| Some(name.as_str()) != leaving && !hooks.is_empty())
                .collect();
            let grants = plugins.keys().map(|name| (name.clone(), self.admitter.grants(name).namespaces)).collect();
            self.registrar.update(plugins, grants).await;
        })
    }
}
