//! The admission server's certificate: generated at start and shared through a Secret, or read
//! from a directory (the cert-manager way) and reloaded when it changes.
//!
//! The API server only calls webhooks over TLS and checks the serving certificate against the
//! `caBundle` of the webhook configuration, so the host needs a CA it can publish there and a
//! serving certificate for the names it is reached by: the Service's DNS names
//! (`<svc>.<ns>.svc`, `<svc>.<ns>.svc.cluster.local`), and `localhost` / `127.0.0.1` for a
//! webhook configured by URL on loopback.
//!
//! - [`ServingCert::generate_for`]: a fresh CA and a serving certificate signed by it (`rcgen`),
//!   each valid for its [`Lifetimes`] (by default a year for the CA, 90 days for the serving
//!   certificate, which never outlives its CA). [`shared_secret`] keeps them in a
//!   `kubernetes.io/tls` Secret (`tls.crt`, `tls.key`, `ca.crt`, and `ca.key`, the key of the
//!   CA that signs renewals), created if absent; a replica that finds it (or loses the race to
//!   create it) uses the one in the Secret, so every replica serves the same certificate under
//!   one CA. [`rotation`](super::rotation) renews them from there.
//! - [`ServingCert::from_dir`]: `tls.crt`, `tls.key` and optionally `ca.crt` of a mounted
//!   Secret; [`follow_dir`] re-reads them periodically and swaps the certificate served by the
//!   [`CertResolver`] without a restart (new connections get the new one).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::sync::watch;

use super::metrics::AdmissionMetrics;

/// The default name of the Secret holding the generated CA and certificate.
pub const ADMISSION_SECRET: &str = "wasmop-admission-tls";

/// How long the generated admission certificates are valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetimes {
    /// The CA's: [`Lifetimes::DEFAULT_CA`] unless set.
    pub ca: Duration,
    /// A serving certificate's: [`Lifetimes::DEFAULT_SERVING`] unless set; never beyond the
    /// expiry of the CA that signs it.
    pub serving: Duration,
}

impl Default for Lifetimes {
    fn default() -> Self {
        Self { ca: Self::DEFAULT_CA, serving: Self::DEFAULT_SERVING }
    }
}

impl Lifetimes {
    /// A CA is valid for a year.
    pub const DEFAULT_CA: Duration = Duration::from_secs(365 * 24 * 3600);
    /// A serving certificate is valid for 90 days.
    pub const DEFAULT_SERVING: Duration = Duration::from_secs(90 * 24 * 3600);

    /// Lifetimes of `ca` and `serving`.
    ///
    /// # Errors
    /// [`CertError::Lifetimes`] when the serving certificate's is under 3 seconds or more than
    /// a third of the CA's (a CA must outlive the serving certificates it signs while it is
    /// rolled over, which starts when a third of its life is left).
    pub fn new(ca: Duration, serving: Duration) -> Result<Self, CertError> {
        if serving < Duration::from_secs(3) || serving.saturating_mul(3) > ca {
            return Err(CertError::Lifetimes { ca, serving });
        }
        Ok(Self { ca, serving })
    }

    /// How often the Secret is read and the certificates checked: a sixteenth of the serving
    /// certificate's life, between 1 second and 1 minute.
    pub fn check_period(&self) -> Duration {
        (self.serving / 16).clamp(Duration::from_secs(1), Duration::from_secs(60))
    }

    /// How long a change must have been visible before the next step of a CA rollover is
    /// taken: two check periods, so that every replica read it and the API server saw the
    /// webhook configurations carry it.
    pub fn settle(&self) -> Duration {
        self.check_period() * 2
    }
}

/// When a certificate starts and stops being valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    /// `notBefore`.
    pub not_before: SystemTime,
    /// `notAfter`.
    pub not_after: SystemTime,
}

impl Validity {
    /// `notAfter` in seconds since the Unix epoch.
    pub fn expiry_unix(&self) -> i64 {
        self.not_after.duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
    }
}

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
    /// The lifetimes asked for cannot be rotated safely.
    #[error(
        "admission certificate lifetimes: the serving certificate's ({serving:?}) must be at least 3s and at most a third of \
         the CA's ({ca:?})"
    )]
    Lifetimes {
        /// The CA's lifetime.
        ca: Duration,
        /// The serving certificate's lifetime.
        serving: Duration,
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
    /// The private key of the CA that signs renewals (the newest of `ca_pem`), when the host
    /// holds it (a certificate it generated); empty otherwise.
    pub ca_key_pem: String,
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
    /// IP addresses written as such) signed by it, valid for as long as rcgen's defaults
    /// (until 4096): what a self-signed metrics certificate uses.
    ///
    /// # Errors
    /// [`CertError::Generate`] when a name is invalid or key generation fails.
    pub fn generate(names: &[String]) -> Result<Self, CertError> {
        let (ca_pem, ca_key_pem) = new_ca(None)?;
        let (cert_pem, key_pem) = sign_serving(&ca_pem, &ca_key_pem, names, None)?;
        Ok(Self { ca_pem, cert_pem, key_pem, ca_key_pem })
    }

    /// A new CA valid for `lifetimes.ca` from `now` and a serving certificate for `names`
    /// signed by it, valid for `lifetimes.serving`.
    ///
    /// # Errors
    /// [`CertError::Generate`] when a name is invalid or key generation fails.
    pub fn generate_for(names: &[String], lifetimes: &Lifetimes, now: SystemTime) -> Result<Self, CertError> {
        let (ca_pem, ca_key_pem) = new_ca(Some((now, lifetimes.ca)))?;
        let (cert_pem, key_pem) = sign_serving(&ca_pem, &ca_key_pem, names, Some((now, lifetimes.serving)))?;
        Ok(Self { ca_pem, cert_pem, key_pem, ca_key_pem })
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
        let cert = Self { ca_pem, cert_pem, key_pem, ca_key_pem: String::new() };
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

    /// The `kubernetes.io/tls` Secret `namespace/name` holding this certificate.
    pub fn to_secret(&self, namespace: &str, name: &str) -> Secret {
        let data =
            [("tls.crt", &self.cert_pem), ("tls.key", &self.key_pem), ("ca.crt", &self.ca_pem), ("ca.key", &self.ca_key_pem)]
                .into_iter()
                .filter(|(_, v)| !v.is_empty())
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

    /// The certificate a Secret written by [`ServingCert::to_secret`] holds (`ca.key` may be
    /// missing: a Secret of an earlier host).
    ///
    /// # Errors
    /// [`CertError::Invalid`] when a field is missing or not a usable certificate or key.
    pub fn from_secret(secret: &Secret) -> Result<Self, CertError> {
        let what = format!("Secret {}", secret.metadata.name.as_deref().unwrap_or_default());
        let data = secret.data.as_ref();
        let field = |key: &str| {
            let bytes = data
                .and_then(|d| d.get(key))
                .ok_or_else(|| CertError::Invalid { what: what.clone(), message: format!("no {key}") })?;
            String::from_utf8(bytes.0.clone())
                .map_err(|_| CertError::Invalid { what: what.clone(), message: format!("{key} is not PEM text") })
        };
        let ca_key_pem = if data.is_some_and(|d| d.contains_key("ca.key")) { field("ca.key")? } else { String::new() };
        let cert = Self { ca_pem: field("ca.crt")?, cert_pem: field("tls.crt")?, key_pem: field("tls.key")?, ca_key_pem };
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
    lifetimes: &Lifetimes,
) -> Result<ServingCert, CertError> {
    let api: Api<Secret> = Api::namespaced(client, namespace);
    let api_error = |error| CertError::Secret { namespace: namespace.into(), name: name.into(), error };
    if let Some(existing) = api.get_opt(name).await.map_err(api_error)? {
        tracing::info!(%namespace, %name, "admission certificate read from its Secret");
        return ServingCert::from_secret(&existing);
    }
    let fresh = ServingCert::generate_for(names, lifetimes, SystemTime::now())?;
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

/// How far back a new certificate's `notBefore` lies (a tenth of its life, at most 5 minutes):
/// the API server's clock may be a little behind the host's.
fn backdate(lifetime: Duration) -> Duration {
    (lifetime / 10).min(Duration::from_secs(300))
}

/// Valid from (a little before) `now` for `lifetime`, not beyond `cap`; `None`: rcgen's defaults.
fn set_validity(params: &mut rcgen::CertificateParams, valid: Option<(SystemTime, Duration)>, cap: Option<SystemTime>) {
    let Some((now, lifetime)) = valid else { return };
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    let since = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let end = cap.map_or(now + lifetime, |cap| cap.min(now + lifetime));
    params.not_before = epoch + since(now - backdate(lifetime));
    params.not_after = epoch + since(end);
}

/// A new self-signed CA (PEM certificate and key), valid for `valid` = (from, lifetime).
pub(super) fn new_ca(valid: Option<(SystemTime, Duration)>) -> Result<(String, String), CertError> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    // A name of its own per CA: during a rollover the bundle holds two.
    let serial = valid.map_or(0, |(now, _)| now.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis());
    let name = if serial == 0 { "wasmop admission CA".to_owned() } else { format!("wasmop admission CA {serial}") };
    params.distinguished_name.push(rcgen::DnType::CommonName, name);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
    params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
    set_validity(&mut params, valid, None);
    let cert = params.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A serving certificate (PEM certificate and key) for `names`, signed by the CA `ca_pem`
/// (one certificate) with key `ca_key_pem`, valid for `valid` = (from, lifetime) but never
/// beyond the CA's own expiry.
pub(super) fn sign_serving(
    ca_pem: &str,
    ca_key_pem: &str,
    names: &[String],
    valid: Option<(SystemTime, Duration)>,
) -> Result<(String, String), CertError> {
    let ca_key = rcgen::KeyPair::from_pem(ca_key_pem)?;
    let ca_expiry = match valid {
        Some(_) => Some(validity(&first_der(ca_pem, "ca.crt")?)?.not_after),
        None => None,
    };
    let issuer = rcgen::Issuer::from_ca_cert_pem(ca_pem, ca_key)?;
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(names.to_vec())?;
    params.distinguished_name.push(rcgen::DnType::CommonName, names.first().map_or("wasmop", String::as_str));
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    set_validity(&mut params, valid, ca_expiry);
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Each certificate of a PEM text, in order.
///
/// # Errors
/// [`CertError::Invalid`] (naming `what`) when a block does not decode.
pub fn ders(pem: &str, what: &str) -> Result<Vec<CertificateDer<'static>>, CertError> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| CertError::Invalid { what: what.into(), message: e.to_string() })
}

fn first_der(pem: &str, what: &str) -> Result<CertificateDer<'static>, CertError> {
    ders(pem, what)?
        .into_iter()
        .next()
        .ok_or_else(|| CertError::Invalid { what: what.into(), message: "no CERTIFICATE block".into() })
}

/// The validity of a DER certificate.
///
/// # Errors
/// [`CertError::Invalid`] when it is not an X.509 certificate.
pub fn validity(der: &CertificateDer<'_>) -> Result<Validity, CertError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| CertError::Invalid { what: "certificate".into(), message: e.to_string() })?;
    let at = |t: &x509_parser::time::ASN1Time| UNIX_EPOCH + Duration::from_secs(u64::try_from(t.timestamp()).unwrap_or(0));
    Ok(Validity { not_before: at(&cert.validity().not_before), not_after: at(&cert.validity().not_after) })
}

/// A DER certificate as one PEM block.
pub fn to_pem(der: &[u8]) -> String {
    use base64::Engine as _;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in text.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
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

/// Show when a certificate read from a directory expires: `serving` is its `tls.crt`, `ca` the
/// soonest-expiring certificate of the bundle the API server trusts (`ca.crt`, else the chain).
/// Whoever writes the directory (cert-manager) renews them; the gauges say whether it did.
fn observe_dir_expiry(metrics: &AdmissionMetrics, cert: &ServingCert) {
    let soonest = |pem: &str, what: &str| -> Option<i64> {
        ders(pem, what).ok()?.iter().filter_map(|der| validity(der).ok()).map(|v| v.expiry_unix()).min()
    };
    let serving = ders(&cert.cert_pem, "tls.crt").ok().and_then(|d| d.first().and_then(|der| validity(der).ok()));
    if let Some(serving) = serving {
        metrics.certificate_expires("serving", serving.expiry_unix());
    }
    if let Some(ca) = soonest(&cert.ca_pem, "ca.crt") {
        metrics.certificate_expires("ca", ca);
    }
}

/// Re-read the certificate of `dir` every `period`; when it changed and is valid, serve it
/// (through `resolver`), publish its CA bundle on `ca` (the registration follows it) and show its
/// expiry in `metrics`. An invalid or half-written change keeps the previous certificate
/// serving and is logged. Runs until the task is aborted.
pub async fn follow_dir(
    dir: PathBuf,
    period: Duration,
    mut current: ServingCert,
    resolver: Arc<CertResolver>,
    ca: watch::Sender<String>,
    metrics: AdmissionMetrics,
) {
    observe_dir_expiry(&metrics, &current);
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match ServingCert::from_dir(&dir) {
            Ok(cert) if cert == current => {}
            Ok(cert) => match resolver.swap(&cert) {
                Ok(()) => {
                    tracing::info!(dir = %dir.display(), "admission certificate changed on disk; serving the new one");
                    observe_dir_expiry(&metrics, &cert);
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
    async fn a_changed_directory_is_served_without_restart_with_its_expiry_shown_and_a_broken_change_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let first = ServingCert::generate(&["localhost".into()]).unwrap();
        write(dir.path(), &first, true);
        let resolver = CertResolver::new(&first).unwrap();
        let (ca, mut bundle) = watch::channel(first.ca_pem.clone());
        let registry = crate::metrics::Metrics::new();
        let metrics = AdmissionMetrics::new(&registry);
        let task = tokio::spawn(follow_dir(
            dir.path().into(),
            Duration::from_millis(20),
            first.clone(),
            Arc::clone(&resolver),
            ca,
            metrics,
        ));
        let lifetimes = Lifetimes::new(Duration::from_secs(3600), Duration::from_secs(600)).unwrap();
        let second = ServingCert::generate_for(&["localhost".into()], &lifetimes, SystemTime::now()).unwrap();
        write(dir.path(), &second, true);
        tokio::time::timeout(Duration::from_secs(5), bundle.changed()).await.expect("CA bundle published").unwrap();
        assert_eq!(*bundle.borrow(), second.ca_pem);
        assert_eq!(served(&resolver), second.certified_key().unwrap().cert[0].to_vec());
        // The gauges follow the certificate served: its own expiry and its CA's.
        let expiry = |pem: &str| validity(&ders(pem, "test").unwrap()[0]).unwrap().expiry_unix();
        let text = registry.render();
        for (label, pem) in [("serving", &second.cert_pem), ("ca", &second.ca_pem)] {
            let line =
                format!(r#"wasmop_admission_certificate_expiry_timestamp_seconds{{certificate="{label}"}} {}"#, expiry(pem));
            assert!(text.contains(&line), "{line} in\n{text}");
        }
        std::fs::write(dir.path().join("tls.key"), "garbage").unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(served(&resolver), second.certified_key().unwrap().cert[0].to_vec(), "the previous one keeps serving");
        task.abort();
    }
}
