//! Rotation of the generated admission certificates kept in a Secret: the leader renews the
//! serving certificate and rolls the CA over; every replica serves what the Secret holds.
//!
//! Each [`Lifetimes::check_period`], every replica reads the Secret and, when it changed, serves
//! the new pair through its [`CertResolver`] (new connections get it; no restart) and publishes
//! the CA bundle to the [`Registrar`](super::Registrar). The leader then takes at most one
//! [`Step`] and writes it back (an update on the `resourceVersion` it read, so two writers
//! never both win):
//!
//! 1. **Renew** the serving certificate once two thirds of its life are gone, signed by the
//!    CA whose key the Secret holds (`ca.key`).
//! 2. **Roll the CA over** once two thirds of the CA's life are gone (or when the Secret holds
//!    no CA key, as one an earlier host wrote): a new CA is *added* to the bundle (`ca.crt`)
//!    and the serving certificate renewed one last time by the old CA; once every webhook configuration carries that
//!    bundle (the registrar says so) and it has [settled](Lifetimes::settle), the serving
//!    certificate is *switched* to one of the new CA; once that has settled too (every
//!    replica serves it), the old CA is *dropped* from the bundle.
//!
//! So at every moment each certificate any replica serves chains to a CA of the bundle the API
//! server holds. Each step is one log line and counts in
//! `wasmop_admission_certificate_rotations_total{step}`; the expiry of the serving certificate
//! and of the signing CA is `wasmop_admission_certificate_expiry_timestamp_seconds{certificate}`.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use tokio::sync::watch;

use super::certs::{self, CertError, CertResolver, Lifetimes, ServingCert, Validity};
use super::metrics::AdmissionMetrics;
use crate::leader::Leadership;

/// The CA whose key the host holds: it signs new serving certificates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    /// Its validity.
    pub validity: Validity,
    /// Its certificate (one PEM block).
    pub pem: String,
    /// Whether it signed the serving certificate.
    pub signed_serving: bool,
}

/// What rotation needs to know of a certificate kept in the Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    /// The serving certificate's validity.
    pub serving: Validity,
    /// The CA of the bundle whose key the Secret holds, if any.
    pub signer: Option<Signer>,
    /// How many CAs the bundle holds.
    pub cas: usize,
}

impl Inspection {
    /// Read the validity of `cert`'s certificates and find the CA its `ca_key_pem` belongs to.
    ///
    /// # Errors
    /// [`CertError::Invalid`] when a certificate or the CA key does not parse.
    pub fn of(cert: &ServingCert) -> Result<Self, CertError> {
        use rcgen::PublicKeyData as _;
        let invalid = |what: &str, message: String| CertError::Invalid { what: what.into(), message };
        let serving_der = certs::ders(&cert.cert_pem, "tls.crt")?;
        let serving_der = serving_der.first().ok_or_else(|| invalid("tls.crt", "no CERTIFICATE block".into()))?;
        let serving = certs::validity(serving_der)?;
        let (_, serving_x509) =
            x509_parser::parse_x509_certificate(serving_der).map_err(|e| invalid("tls.crt", e.to_string()))?;
        let cas = certs::ders(&cert.ca_pem, "ca.crt")?;
        let key = match cert.ca_key_pem.trim() {
            "" => None,
            pem => Some(rcgen::KeyPair::from_pem(pem).map_err(|e| invalid("ca.key", e.to_string()))?),
        };
        let mut signer = None;
        for der in &cas {
            let (_, ca) = x509_parser::parse_x509_certificate(der).map_err(|e| invalid("ca.crt", e.to_string()))?;
            if key.as_ref().is_some_and(|key| key.der_bytes() == ca.public_key().subject_public_key.data.as_ref()) {
                signer = Some(Signer {
                    validity: certs::validity(der)?,
                    pem: certs::to_pem(der),
                    signed_serving: serving_x509.verify_signature(Some(ca.public_key())).is_ok(),
                });
            }
        }
        Ok(Self { serving, signer, cas: cas.len() })
    }
}

/// One step of rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing to do now.
    Keep,
    /// A new serving certificate from the signing CA.
    Renew,
    /// A new CA added to the bundle (it signs from now on), and the serving certificate
    /// renewed by the old CA one last time.
    AddCa,
    /// The serving certificate replaced by one of the new CA (its bundle is published).
    Switch,
    /// The CAs other than the signing one dropped from the bundle.
    DropCa,
}

impl Step {
    /// The `step` label of the rotations counter.
    pub fn label(self) -> &'static str {
        match self {
            Self::Keep => "keep",
            Self::Renew => "renew",
            Self::AddCa => "add-ca",
            Self::Switch => "switch",
            Self::DropCa => "drop-ca",
        }
    }

    fn message(self) -> &'static str {
        match self {
            Self::Keep => "admission certificates kept",
            Self::Renew => "admission serving certificate renewed",
            Self::AddCa => {
                "admission CA rollover started: a new CA added to the caBundle; the serving certificate switches once \
                            the webhook configurations carry it"
            }
            Self::Switch => "admission CA rollover: serving a certificate of the new CA",
            Self::DropCa => "admission CA rollover done: the previous CA dropped from the caBundle",
        }
    }
}

/// The next step for a certificate `found` at `now`: `published` says whether the webhook
/// configurations carry its bundle, `settled` whether it (and that) has not changed for
/// [`Lifetimes::settle`].
pub fn next_step(found: &Inspection, now: SystemTime, lifetimes: &Lifetimes, published: bool, settled: bool) -> Step {
    // Due once a third of the nominal life is left.
    let due = |validity: &Validity, life: std::time::Duration| now + life / 3 >= validity.not_after;
    let Some(signer) = &found.signer else { return Step::AddCa };
    if due(&signer.validity, lifetimes.ca) {
        return Step::AddCa;
    }
    if !signer.signed_serving {
        return if published && settled { Step::Switch } else { Step::Keep };
    }
    if due(&found.serving, lifetimes.serving) {
        return Step::Renew;
    }
    if found.cas > 1 && settled {
        return Step::DropCa;
    }
    Step::Keep
}

/// `cert` after `step`, for `names`, at `now`.
///
/// # Errors
/// [`CertError`] when a key or certificate cannot be generated or parsed.
pub fn advance(
    cert: &ServingCert,
    found: &Inspection,
    step: Step,
    names: &[String],
    lifetimes: &Lifetimes,
    now: SystemTime,
) -> Result<ServingCert, CertError> {
    let signer =
        || found.signer.as_ref().ok_or_else(|| CertError::Invalid { what: "ca.key".into(), message: "no CA key".into() });
    Ok(match step {
        Step::Keep => cert.clone(),
        Step::AddCa => {
            let (ca, ca_key_pem) = certs::new_ca(Some((now, lifetimes.ca)))?;
            // Only CAs still valid stay beside the new one.
            let kept = certs::ders(&cert.ca_pem, "ca.crt")?
                .iter()
                .filter(|der| certs::validity(der).is_ok_and(|v| v.not_after > now))
                .map(|der| certs::to_pem(der))
                .collect::<String>();
            // The old CA's last serving certificate, fresh: the switch has its whole life to
            // wait for the new bundle to be published.
            let (cert_pem, key_pem) = match &found.signer {
                Some(old) => certs::sign_serving(&old.pem, &cert.ca_key_pem, names, Some((now, lifetimes.serving)))?,
                None => (cert.cert_pem.clone(), cert.key_pem.clone()),
            };
            ServingCert { ca_pem: kept + &ca, cert_pem, key_pem, ca_key_pem }
        }
        Step::Renew | Step::Switch => {
            let (cert_pem, key_pem) =
                certs::sign_serving(&signer()?.pem, &cert.ca_key_pem, names, Some((now, lifetimes.serving)))?;
            ServingCert { cert_pem, key_pem, ..cert.clone() }
        }
        Step::DropCa => ServingCert { ca_pem: signer()?.pem.clone(), ..cert.clone() },
    })
}

/// Everything the rotation of one Secret needs.
#[derive(Debug)]
pub struct Rotation {
    /// The Secret's namespace.
    pub api: Api<Secret>,
    /// The Secret's name.
    pub name: String,
    /// The names of new serving certificates.
    pub names: Vec<String>,
    /// The lifetimes of new certificates.
    pub lifetimes: Lifetimes,
    /// What the TLS server serves.
    pub resolver: Arc<CertResolver>,
    /// The CA bundle the registrar writes into the webhook configurations.
    pub ca: watch::Sender<String>,
    /// The CA bundle the webhook configurations carry (what the registrar last wrote).
    pub published: watch::Receiver<String>,
    /// Only the leader writes the Secret.
    pub leadership: Leadership,
    /// Expiry and rotation metrics.
    pub metrics: AdmissionMetrics,
}

impl Rotation {
    /// Serve `current` (read from the Secret at start) and follow the Secret until the task is
    /// aborted; on the leader, rotate. Failures (the Secret unreadable, a conflicting write)
    /// keep the certificate being served and are tried again a period later.
    pub async fn run(self, mut current: ServingCert) {
        self.observe(&current);
        let period = self.lifetimes.check_period();
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Since when the Secret's content and its bundle's publication are what they are now.
        let mut seen = (current.clone(), false);
        let mut since = Instant::now();
        loop {
            tick.tick().await;
            let secret = match self.api.get(&self.name).await {
                Ok(secret) => secret,
                Err(e) => {
                    tracing::warn!(secret = %self.name, error = %e, "cannot read the admission certificate Secret; serving the current one");
                    continue;
                }
            };
            match ServingCert::from_secret(&secret) {
                Ok(stored) if stored == current => {}
                Ok(stored) => match self.serve(&stored) {
                    Ok(()) => {
                        tracing::info!(secret = %self.name, "admission certificate changed in its Secret; serving the new one");
                        current = stored;
                    }
                    Err(e) => {
                        tracing::warn!(secret = %self.name, error = %e, "new admission certificate unusable; keeping the previous one")
                    }
                },
                Err(e) => {
                    tracing::warn!(secret = %self.name, error = %e, "admission certificate Secret unusable; keeping the previous one")
                }
            }
            if !self.leadership.is_leader() {
                continue;
            }
            let published = *self.published.borrow() == current.ca_pem;
            if seen != (current.clone(), published) {
                seen = (current.clone(), published);
                since = Instant::now();
            }
            match self.step(&current, published, since.elapsed() >= self.lifetimes.settle(), secret).await {
                Ok(Some(next)) => current = next,
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(secret = %self.name, error = %e, "cannot rotate the admission certificate; trying again")
                }
            }
        }
    }

    /// Take the next step for `current` (stored in `secret`); the certificate written, if any.
    async fn step(
        &self,
        current: &ServingCert,
        published: bool,
        settled: bool,
        secret: Secret,
    ) -> Result<Option<ServingCert>, RotationError> {
        let found = Inspection::of(current)?;
        let now = SystemTime::now();
        let step = next_step(&found, now, &self.lifetimes, published, settled);
        if step == Step::Keep {
            if found.signer.as_ref().is_some_and(|s| !s.signed_serving) && !published {
                tracing::debug!("admission CA rollover waits for the webhook configurations to carry the new CA");
            }
            return Ok(None);
        }
        let next = advance(current, &found, step, &self.names, &self.lifetimes, now)?;
        let namespace = secret.metadata.namespace.clone().unwrap_or_default();
        let mut stored = next.to_secret(&namespace, &self.name);
        stored.metadata.labels = secret.metadata.labels.clone().or(stored.metadata.labels);
        stored.metadata.annotations = secret.metadata.annotations.clone();
        stored.metadata.resource_version = secret.metadata.resource_version.clone();
        match self.api.replace(&self.name, &PostParams::default(), &stored).await {
            Ok(_) => {}
            // Another writer (a leader before this one) changed it: read it again next period.
            Err(kube::Error::Api(e)) if e.code == 409 => return Ok(None),
            Err(error) => return Err(RotationError::Write { name: self.name.clone(), error }),
        }
        self.serve(&next)?;
        self.metrics.rotated(step.label());
        let found = Inspection::of(&next)?;
        tracing::info!(
            secret = %self.name,
            step = step.label(),
            serving_expires = found.serving.expiry_unix(),
            ca_expires = found.signer.as_ref().map_or(0, |s| s.validity.expiry_unix()),
            cas = found.cas,
            "{}",
            step.message()
        );
        Ok(Some(next))
    }

    /// Serve `cert`, publish its bundle, show its expiry.
    fn serve(&self, cert: &ServingCert) -> Result<(), CertError> {
        self.resolver.swap(cert)?;
        self.ca.send_if_modified(|bundle| {
            let changed = *bundle != cert.ca_pem;
            bundle.clone_from(&cert.ca_pem);
            changed
        });
        self.observe(cert);
        Ok(())
    }

    fn observe(&self, cert: &ServingCert) {
        if let Ok(found) = Inspection::of(cert) {
            self.metrics.certificate_expires("serving", found.serving.expiry_unix());
            if let Some(signer) = &found.signer {
                self.metrics.certificate_expires("ca", signer.validity.expiry_unix());
            }
        }
    }
}

/// Why a rotation step failed (the certificate served stays).
#[derive(Debug, thiserror::Error)]
pub enum RotationError {
    /// A certificate could not be made or read.
    #[error(transparent)]
    Cert(#[from] CertError),
    /// The Secret could not be written.
    #[error("cannot write the admission certificate Secret {name}: {error}")]
    Write {
        /// The Secret's name.
        name: String,
        /// The API error.
        error: kube::Error,
    },
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const NAMES: &[&str] = &["localhost", "127.0.0.1"];

    fn names() -> Vec<String> {
        NAMES.iter().map(|n| (*n).to_owned()).collect()
    }

    /// Now in whole seconds, as certificates record it.
    fn now() -> SystemTime {
        std::time::UNIX_EPOCH + Duration::from_secs(SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs())
    }

    fn lifetimes() -> Lifetimes {
        Lifetimes::new(Duration::from_secs(3 * 3600), Duration::from_secs(3600)).unwrap()
    }

    /// Whether `cert`'s serving certificate verifies against its own bundle for `localhost` at `at`.
    fn trusted(cert: &ServingCert, bundle: &str, at: SystemTime) -> bool {
        use rustls::client::danger::ServerCertVerifier;
        let mut roots = rustls::RootCertStore::empty();
        for der in certs::ders(bundle, "ca.crt").unwrap() {
            roots.add(der).unwrap();
        }
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        let key = cert.certified_key().unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let at = rustls::pki_types::UnixTime::since_unix_epoch(at.duration_since(std::time::UNIX_EPOCH).unwrap());
        verifier.verify_server_cert(&key.cert[0], &[], &name, &[], at).is_ok()
    }

    #[test]
    fn lifetimes_refuse_a_serving_certificate_longer_than_a_third_of_its_ca() {
        assert!(Lifetimes::new(Duration::from_secs(90), Duration::from_secs(30)).is_ok());
        let err = Lifetimes::new(Duration::from_secs(60), Duration::from_secs(30)).unwrap_err().to_string();
        assert!(err.contains("at most a third of the CA's"), "{err}");
        assert!(Lifetimes::new(Duration::from_secs(60), Duration::from_secs(1)).is_err());
        let defaults = Lifetimes::default();
        assert_eq!((defaults.ca.as_secs() / 86400, defaults.serving.as_secs() / 86400), (365, 90));
        assert_eq!(defaults.check_period(), Duration::from_secs(60));
        assert_eq!(
            Lifetimes::new(Duration::from_secs(72), Duration::from_secs(24)).unwrap().check_period(),
            Duration::from_millis(1500)
        );
    }

    #[test]
    fn a_new_certificate_is_kept_then_renewed_at_two_thirds_of_its_life_by_the_same_ca() {
        let t0 = now();
        let cert = ServingCert::generate_for(&names(), &lifetimes(), t0).unwrap();
        let found = Inspection::of(&cert).unwrap();
        let signer = found.signer.clone().expect("the generated CA's key is kept");
        assert!(signer.signed_serving);
        assert_eq!(found.cas, 1);
        let life = |v: &Validity| v.not_after.duration_since(t0).unwrap().as_secs();
        assert_eq!((life(&found.serving), life(&signer.validity)), (3600, 3 * 3600));
        assert_eq!(next_step(&found, t0, &lifetimes(), true, true), Step::Keep);
        let later = t0 + Duration::from_secs(2401);
        assert_eq!(next_step(&found, later, &lifetimes(), false, false), Step::Renew);
        let renewed = advance(&cert, &found, Step::Renew, &names(), &lifetimes(), later).unwrap();
        assert_eq!(renewed.ca_pem, cert.ca_pem, "the bundle is unchanged");
        assert_ne!(renewed.cert_pem, cert.cert_pem);
        assert!(trusted(&renewed, &cert.ca_pem, later + Duration::from_secs(3000)), "valid past the first one's expiry");
        assert!(!trusted(&cert, &cert.ca_pem, later + Duration::from_secs(3000)), "the first one has expired by then");
        assert_eq!(next_step(&Inspection::of(&renewed).unwrap(), later, &lifetimes(), true, true), Step::Keep);
    }

    #[test]
    fn a_ca_rollover_adds_the_new_ca_first_switches_once_published_and_drops_the_old_one_last() {
        let t0 = now();
        let l = lifetimes();
        let first = ServingCert::generate_for(&names(), &l, t0).unwrap();
        // Two thirds of the CA's life: the serving certificate is renewed meanwhile, then the CA is due.
        let t1 = t0 + Duration::from_secs(2 * 3600 + 1);
        let found = Inspection::of(&first).unwrap();
        assert_eq!(next_step(&found, t1, &l, true, true), Step::AddCa);
        let added = advance(&first, &found, Step::AddCa, &names(), &l, t1).unwrap();
        let found = Inspection::of(&added).unwrap();
        assert_eq!(found.cas, 2, "both CAs in the bundle");
        assert!(added.ca_pem.starts_with(&first.ca_pem), "the old CA stays first");
        assert_ne!(added.cert_pem, first.cert_pem, "renewed one last time by the old CA");
        assert!(trusted(&added, &first.ca_pem, t1 + Duration::from_secs(3000)), "for a whole serving life");
        assert!(!found.signer.as_ref().unwrap().signed_serving);
        assert!(trusted(&added, &added.ca_pem, t1), "the served certificate chains to the new bundle");
        // Not switched before the webhook configurations carry the bundle and it settled.
        assert_eq!(next_step(&found, t1, &l, false, true), Step::Keep);
        assert_eq!(next_step(&found, t1, &l, true, false), Step::Keep);
        assert_eq!(next_step(&found, t1, &l, true, true), Step::Switch);
        let switched = advance(&added, &found, Step::Switch, &names(), &l, t1).unwrap();
        assert!(trusted(&switched, &added.ca_pem, t1), "the new certificate chains to the published bundle");
        assert!(!trusted(&switched, &first.ca_pem, t1), "and not to the old CA alone");
        let found = Inspection::of(&switched).unwrap();
        assert_eq!(next_step(&found, t1, &l, true, false), Step::Keep, "the old CA stays until the switch settled");
        assert_eq!(next_step(&found, t1, &l, true, true), Step::DropCa);
        let dropped = advance(&switched, &found, Step::DropCa, &names(), &l, t1).unwrap();
        let found = Inspection::of(&dropped).unwrap();
        assert_eq!(found.cas, 1);
        assert!(!dropped.ca_pem.contains(first.ca_pem.trim()), "the old CA is gone");
        assert!(trusted(&dropped, &dropped.ca_pem, t1));
        assert_eq!(next_step(&found, t1, &l, true, true), Step::Keep);
    }

    #[test]
    fn a_secret_without_a_ca_key_rolls_over_to_a_ca_the_host_holds() {
        let t0 = now();
        let mut legacy = ServingCert::generate_for(&names(), &lifetimes(), t0).unwrap();
        legacy.ca_key_pem.clear();
        let secret = legacy.to_secret("ns", "s");
        assert!(!secret.data.as_ref().unwrap().contains_key("ca.key"));
        let read = ServingCert::from_secret(&secret).unwrap();
        let found = Inspection::of(&read).unwrap();
        assert_eq!(found.signer, None);
        assert_eq!(next_step(&found, t0, &lifetimes(), true, true), Step::AddCa);
        let added = advance(&read, &found, Step::AddCa, &names(), &lifetimes(), t0).unwrap();
        assert_eq!(Inspection::of(&added).unwrap().cas, 2);
    }

    #[test]
    fn a_serving_certificate_never_outlives_its_ca() {
        let t0 = now();
        let cert = ServingCert::generate_for(&names(), &lifetimes(), t0).unwrap();
        let late = t0 + Duration::from_secs(3 * 3600 - 600);
        let found = Inspection::of(&cert).unwrap();
        let renewed = advance(&cert, &found, Step::Renew, &names(), &lifetimes(), late).unwrap();
        let found = Inspection::of(&renewed).unwrap();
        assert_eq!(found.serving.not_after, found.signer.unwrap().validity.not_after);
    }
}
