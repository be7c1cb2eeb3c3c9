//! The admission server's certificate: generated at start and shared through a Secret, or read
//! from a directory (the cert-manager way) and reloaded when it changes.
//!
//! The API server only calls webhooks over TLS and checks the serving certificate against the
//! `caBundle` of the webhook configuration, so the host needs a CA it can publish there and a
//! serving certificate for the names it is reached by: the Service's DNS names
//! (`<svc>.<ns>.svc`, `<svc>.<ns>.svc.cluster.local`), and `localhost` / `127.0.0.1` for a
//! webhook configured by URL on loopback.
//!
//! - [`ServingCert::generate`]: a fresh CA and a serving certificate signed by it (`rcgen`).
//!   [`shared_secret`] keeps them in a `kubernetes.io/tls` Secret (`tls.crt`, `tls.key`,
//!   `ca.crt`), created if absent; a replica that finds it (or loses the race to create it)
//!   uses the one in the Secret, so every replica serves the same certificate under one CA.
//! - [`ServingCert::from_dir`]: `tls.crt`, `tls.key` and optionally `ca.crt` of a mounted
//!   Secret; [`follow_dir`] re-reads them periodically and swaps the certificate served by the
//!   [`CertResolver`] without a restart (new connections get the new one).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::sync::watch;

/// The default name of the Secret holding the generated CA and certificate.
pub const ADMISSION_SECRET: &str = "wasmop-admission-tls";

/// Why a certificate could not be made, read or used.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// rcgen could not generate a key or a certificate.
    #[error("cannot generate the admission certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// A certificate file could not be read.
    #[error("cannot read {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The PEM holds no certificate or no usable private key.
    #[error("invalid certificate or key ({what}): {message}")]
    Invalid {
        /// Which part (`tls.crt`, `tls.key`, the Secret's name).
        what: String,
        /// What is wrong.
        message: String,
    },
    /// The Secret could not be read or created.
    #[error("cannot read or create the certificate Secret {namespace}/{name}: {error}")]
    Secret {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The API error.
        error: kube::Error,
    },
}

/// A CA and a serving certificate signed by it, in PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct ServingCert {
    /// The CA certificate(s): what the webhook configurations' `caBundle` carries.
    pub ca_pem: String,
    /// The serving certificate chain.
    pub cert_pem: String,
    /// The serving certificate's private key.
    pub key_pem: String,
}

impl std::fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCert").field("ca_pem", &self.ca_pem).finish_non_exhaustive()
    }
}

/// The names a host behind Service `namespace/service` is called by: the Service's DNS names,
/// `localhost` and `127.0.0.1`.
pub fn service_names(namespace: &str, service: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
        "localhost".into(),
        "127.0.0.1".into(),
    ]
}

impl ServingCert {
    /// A new CA (`wasmop admission CA`) and a serving certificate for `names` (DNS names, or
    /// IP addresses written as such) signed by it.
    ///
    /// # Errors
    /// [`CertError::Generate`] when a name is invalid or key generation fails.
    pub fn generate(names: &[String]) -> Result<Self, CertError> {
        let ca_key = rcgen::KeyPair::generate()?;
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        ca_params.distinguished_name.push(rcgen::DnType::CommonName, "wasmop admission CA");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
        ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key)?;
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(names.to_vec())?;
        params.distinguished_name.push(rcgen::DnType::CommonName, names.first().map_or("wasmop", String::as_str));
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &ca)?;
        Ok(Self { ca_pem: ca.pem(), cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }

    /// `tls.crt`, `tls.key` and, when present, `ca.crt` of `dir` (without `ca.crt`, the
    /// certificate chain itself is the CA bundle: a self-signed certificate).
    ///
    /// # Errors
    /// [`CertError::Read`] for a missing `tls.crt` or `tls.key`; [`CertError::Invalid`] when
    /// they hold no certificate or key.
    pub fn from_dir(dir: &Path) -> Result<Self, CertError> {
        let read = |file: &str| {
            let path = dir.join(file);
            std::fs::read_to_string(&path).map_err(|error| CertError::Read { path, error })
        };
        let (cert_pem, key_pem) = (read("tls.crt")?, read("tls.key")?);
        let ca_pem = match read("ca.crt") {
            Ok(ca) if !ca.trim().is_empty() => ca,
            _ => cert_pem.clone(),
        };
        let cert = Self { ca_pem, cert_pem, key_pem };
        cert.certified_key()?;
        Ok(cert)
    }

    /// The certificate chain and signing key rustls serves.
    ///
    /// # Errors
    /// [`CertError::Invalid`] when the PEM holds no certificate, or the key is missing or of a
    /// type rustls cannot sign with.
    pub fn certified_key(&self) -> Result<Arc<CertifiedKey>, CertError> {
        let invalid = |what: &str, message: String| CertError::Invalid { what: what.into(), message };
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(self.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| invalid("tls.crt", e.to_string()))?;
        if chain.is_empty() {
            return Err(invalid("tls.crt", "no CERTIFICATE block".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).map_err(|e| invalid("tls.key", e.to_string()))?;
        let signer = rustls::crypto::ring::sign::any_supported_type(&key).map_err(|e| invalid("tls.key", e.to_string()))?;
        Ok(Arc::new(CertifiedKey::new(chain, signer)))
    }

    fn to_secret(&self, namespace: &str, name: &str) -> Secret {
        let data = [("tls.crt", &self.cert_pem), ("tls.key", &self.key_pem), ("ca.crt", &self.ca_pem)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
            .collect::<BTreeMap<_, _>>();
        Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                labels: Some([("app.kubernetes.io/managed-by".to_owned(), "wasmop".to_owned())].into()),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(data),
            ..Secret::default()
        }
    }

    fn from_secret(secret: &Secret) -> Result<Self, CertError> {
        let what = format!("Secret {}", secret.metadata.name.as_deref().unwrap_or_default());
        let data = secret.data.as_ref();
        let field = |key: &str| {
            let bytes = data
                .and_then(|d| d.get(key))
                .ok_or_else(|| CertError::Invalid { what: what.clone(), message: format!("no {key}") })?;
            String::from_utf8(bytes.0.clone())
                .map_err(|_| CertError::Invalid { what: what.clone(), message: format!("{key} is not PEM text") })
        };
        let cert = Self { ca_pem: field("ca.crt")?, cert_pem: field("tls.crt")?, key_pem: field("tls.key")? };
        cert.certified_key()?;
        Ok(cert)
    }
}

/// The certificate of Secret `namespace/name`, or — when there is no such Secret — a new one
/// for `names`, stored there first. Replicas starting together agree: the one whose create
/// loses (409 Conflict) reads the winner's. While `namespace` does not exist, it waits for it
/// (a warning says so, once).
///
/// # Errors
/// [`CertError::Secret`] when the API server refuses; [`CertError::Invalid`] when the Secret
/// exists but does not hold a usable certificate (it is never overwritten).
pub async fn shared_secret(
    client: kube::Client,
    namespace: &str,
    name: &str,
    names: &[String],
) -> Result<ServingCert, CertError> {
    let api: Api<Secret> = Api::namespaced(client, namespace);
    let api_error = |error| CertError::Secret { namespace: namespace.into(), name: name.into(), error };
    if let Some(existing) = api.get_opt(name).await.map_err(api_error)? {
        tracing::info!(%namespace, %name, "admission certificate read from its Secret");
        return ServingCert::from_secret(&existing);
    }
    let fresh = ServingCert::generate(names)?;
    let mut waiting = false;
    loop {
        match api.create(&PostParams::default(), &fresh.to_secret(namespace, name)).await {
            Ok(_) => {
                tracing::info!(%namespace, %name, ?names, "admission CA and certificate generated and stored in a Secret");
                return Ok(fresh);
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {
                tracing::info!(%namespace, %name, "another replica created the admission certificate first; using it");
                return ServingCert::from_secret(&api.get(name).await.map_err(api_error)?);
            }
            // The namespace does not exist (yet): wait for it rather than exit.
            Err(kube::Error::Api(e)) if e.code == 404 => {
                if !waiting {
                    tracing::warn!(
                        %namespace,
                        %name,
                        "namespace {namespace} does not exist yet: waiting for it to keep the admission certificate's \
                         Secret there (create it: kubectl create namespace {namespace})"
                    );
                    waiting = true;
                }
                tokio::time::sleep(NAMESPACE_POLL).await;
            }
            Err(e) => return Err(api_error(e)),
        }
    }
}

/// How often a host waiting for the certificate Secret's namespace looks again.
const NAMESPACE_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// The certificate the TLS server presents, swappable while it serves.
#[derive(Debug)]
pub struct CertResolver {
    current: ArcSwap<CertifiedKey>,
}

impl CertResolver {
    /// Serve `cert`.
    ///
    /// # Errors
    /// As [`ServingCert::certified_key`].
    pub fn new(cert: &ServingCert) -> Result<Arc<Self>, CertError> {
        Ok(Arc::new(Self { current: ArcSwap::new(cert.certified_key()?) }))
    }

    /// Serve `cert` to every new connection from now on.
    ///
    /// # Errors
    /// As [`ServingCert::certified_key`]; the previous certificate keeps serving.
    pub fn swap(&self, cert: &ServingCert) -> Result<(), CertError> {
        self.current.store(cert.certified_key()?);
        Ok(())
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// Re-read the certificate of `dir` every `period`; when it changed and is valid, serve it
/// (through `resolver`) and publish its CA bundle on `ca` (the registration follows it). An
/// invalid or half-written change keeps the previous certificate serving and is logged.
/// Runs until the task is aborted.
pub async fn follow_dir(
    dir: PathBuf,
    period: Duration,
    mut current: ServingCert,
    resolver: Arc<CertResolver>,
    ca: watch::Sender<String>,
) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match ServingCert::from_dir(&dir) {
            Ok(cert) if cert == current => {}
            Ok(cert) => match resolver.swap(&cert) {
                Ok(()) => {
                    tracing::info!(dir = %dir.display(), "admission certificate changed on disk; serving the new one");
                    ca.send_if_modified(|bundle| {
                        let changed = *bundle != cert.ca_pem;
                        bundle.clone_from(&cert.ca_pem);
                        changed
                    });
                    current = cert;
                }
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "new admission certificate unusable; keeping the previous one")
                }
            },
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot read the admission certificate; keeping the previous one")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, cert: &ServingCert, with_ca: bool) {
        std::fs::write(dir.join("tls.crt"), &cert.cert_pem).unwrap();
        std::fs::write(dir.join("tls.key"), &cert.key_pem).unwrap();
        if with_ca {
            std::fs::write(dir.join("ca.crt"), &cert.ca_pem).unwrap();
        }
    }

    fn served(resolver: &CertResolver) -> Vec<u8> {
        resolver.current.load().cert[0].to_vec()
    }

    #[test]
    fn a_generated_certificate_is_signed_by_its_own_ca_for_the_service_names() {
        use rustls::client::danger::ServerCertVerifier;
        let names = service_names("wasmop-system", "wasmop");
        assert_eq!(names[..2], ["wasmop.wasmop-system.svc".to_owned(), "wasmop.wasmop-system.svc.cluster.local".to_owned()]);
        let cert = ServingCert::generate(&names).unwrap();
        assert!(cert.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_ne!(cert.ca_pem, cert.cert_pem);
        let key = cert.certified_key().unwrap();
        assert_eq!(key.cert.len(), 1);
        // The CA verifies the serving certificate for each name (as the API server will).
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_slice(cert.ca_pem.as_bytes()).unwrap()).unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        for name in ["wasmop.wasmop-system.svc", "localhost", "127.0.0.1"] {
            let server_name = rustls::pki_types::ServerName::try_from(name).unwrap();
            let now = rustls::pki_types::UnixTime::now();
            verifier.verify_server_cert(&key.cert[0], &[], &server_name, &[], now).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let other = rustls::pki_types::ServerName::try_from("elsewhere.example.com").unwrap();
        assert!(verifier.verify_server_cert(&key.cert[0], &[], &other, &[], rustls::pki_types::UnixTime::now()).is_err());
    }

    #[test]
    fn a_directory_without_ca_crt_uses_the_chain_as_the_bundle_and_a_missing_key_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let cert = ServingCert::generate(&["localhost".into()]).unwrap();
        write(dir.path(), &cert, false);
        assert_eq!(ServingCert::from_dir(dir.path()).unwrap().ca_pem, cert.cert_pem);
        std::fs::remove_file(dir.path().join("tls.key")).unwrap();
        let err = ServingCert::from_dir(dir.path()).unwrap_err().to_string();
        assert!(err.starts_with("cannot read ") && err.contains("tls.key"), "{err}");
        std::fs::write(dir.path().join("tls.key"), "not a key").unwrap();
        let err = ServingCert::from_dir(dir.path()).unwrap_err().to_string();
        assert!(err.starts_with("invalid certificate or key (tls.key)"), "{err}");
    }

    #[test]
    fn a_secret_round_trips_and_a_broken_one_is_refused() {
        let cert = ServingCert::generate(&["localhost".into()]).unwrap();
        let secret = cert.to_secret("ns", "wasmop-admission");
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
        assert_eq!(ServingCert::from_secret(&secret).unwrap(), cert);
        let mut broken = secret;
        broken.data.as_mut().unwrap().remove("ca.crt");
        assert_eq!(
            ServingCert::from_secret(&broken).unwrap_err().to_string(),
            "invalid certificate or key (Secret wasmop-admission): no ca.crt"
        );
    }

    #[tokio::test]
    async fn a_changed_directory_is_served_without_restart_and_a_broken_change_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let first = ServingCert::generate(&["localhost".into()]).unwrap();
        write(dir.path(), &first, true);
        let resolver = CertResolver::new(&first).unwrap();
        let (ca, mut bundle) = watch::channel(first.ca_pem.clone());
        let task =
            tokio::spawn(follow_dir(dir.path().into(), Duration::from_millis(20), first.clone(), Arc::clone(&resolver), ca));
        let second = ServingCert::generate(&["localhost".into()]).unwrap();
        write(dir.path(), &second, true);
        tokio::time::timeout(Duration::from_secs(5), bundle.changed()).await.expect("CA bundle published").unwrap();
        assert_eq!(*bundle.borrow(), second.ca_pem);
        assert_eq!(served(&resolver), second.certified_key().unwrap().cert[0].to_vec());
        std::fs::write(dir.path().join("tls.key"), "garbage").unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(served(&resolver), second.certified_key().unwrap().cert[0].to_vec(), "the previous one keeps serving");
        task.abort();
    }
}
