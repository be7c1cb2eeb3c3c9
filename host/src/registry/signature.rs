//! Cosign-compatible keyed signatures of Wasm artifacts: what `cosign sign --key` writes and
//! `cosign verify --key` reads, made and checked here with `ring` (ECDSA P-256, SHA-256).
//!
//! The signatures of the manifest `sha256:HEX` live in the same repository under the tag
//! `sha256-HEX.sig`: an OCI image manifest whose layers are simple-signing payloads
//! ([`SIMPLE_SIGNING_MEDIA_TYPE`], JSON naming the signed manifest's digest), each carrying the
//! base64 of an ASN.1 DER ECDSA signature over the payload's bytes in the
//! [`SIGNATURE_ANNOTATION`] annotation. [`sign`] adds one (keeping the signatures already
//! there), [`fetch_signatures`] reads them and [`verify`] checks them against the policy's
//! trusted keys, offline, so a pinned artifact's signatures kept in the cache are checked
//! again after a restart without asking the registry.

use base64::Engine as _;
use bytes::Bytes;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair, UnparsedPublicKey};
use rustls::pki_types::PrivatePkcs8KeyDer;
use rustls::pki_types::pem::PemObject;
use serde::{Deserialize, Serialize};

use super::artifact::{Descriptor, Manifest, OCI_MANIFEST_MEDIA_TYPE};
use super::client::{RegistryClient, sha256_digest};
use super::error::RegistryError;
use crate::policy::{TrustedKey, Verification};

/// The media type of a simple-signing payload layer.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// `critical.type` of a payload.
const SIGNATURE_TYPE: &str = "cosign container image signature";
/// The config media type of a signature manifest (an image config, as cosign writes).
const IMAGE_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// The largest payload read (they are about 250 bytes).
const MAX_PAYLOAD_BYTES: u64 = 64 << 10;

/// One signature as found: the payload's bytes and the base64 signature over them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signed {
    /// The simple-signing payload, as stored (the signature is over these bytes).
    #[serde(with = "base64_bytes")]
    pub payload: Vec<u8>,
    /// Base64 of the ASN.1 DER ECDSA signature.
    pub signature: String,
}

mod base64_bytes {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

/// The simple-signing payload, the fields read.
#[derive(Debug, Deserialize)]
struct Payload {
    critical: Critical,
}

#[derive(Debug, Deserialize)]
struct Critical {
    image: Image,
    #[serde(rename = "type")]
    type_: String,
}

#[derive(Debug, Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// The tag the signatures of the manifest `digest` (`sha256:HEX`) are stored under.
pub fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replacen(':', "-", 1))
}

/// The simple-signing payload for the manifest `digest` of `docker_reference`
/// (`REGISTRY/REPOSITORY`), as cosign writes it.
pub fn payload(docker_reference: &str, digest: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "critical": {
            "identity": {"docker-reference": docker_reference},
            "image": {"docker-manifest-digest": digest},
            "type": SIGNATURE_TYPE,
        },
        "optional": null,
    }))
    .expect("a JSON value serializes")
}

/// A private ECDSA P-256 key that signs artifacts (`wasmop push --key`).
#[derive(Debug)]
pub struct SigningKey(EcdsaKeyPair);

impl SigningKey {
    /// The key in PEM text holding one unencrypted PKCS#8 `PRIVATE KEY` block.
    ///
    /// # Errors
    /// A message when there is no such block or it is not an ECDSA P-256 key.
    pub fn from_pem(pem: &str) -> Result<Self, String> {
        let der = PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes()).map_err(|e| {
            let hint = if pem.contains("ENCRYPTED") {
                " (an encrypted key, such as cosign.key: give an unencrypted PKCS#8 PEM and `cosign import-key-pair --key` it for cosign)"
            } else if pem.contains("EC PRIVATE KEY") {
                " (a SEC1 key: convert it with `openssl pkcs8 -topk8 -nocrypt`)"
            } else {
                ""
            };
            format!("no unencrypted PKCS#8 \"PRIVATE KEY\" PEM block{hint}: {e}")
        })?;
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, der.secret_pkcs8_der(), &SystemRandom::new())
            .map(Self)
            .map_err(|e| format!("not an ECDSA P-256 private key: {e}"))
    }

    /// A new random key and its unencrypted PKCS#8 PEM (what `wasmop push --key` reads).
    ///
    /// # Panics
    /// Never in practice: only when the system's random source fails.
    pub fn generate() -> (Self, String) {
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &SystemRandom::new())
            .expect("the system's random source works");
        let body = base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref());
        let lines: Vec<&str> = body.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).expect("base64 is ASCII")).collect();
        let pem = format!("-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n", lines.join("\n"));
        let key = Self::from_pem(&pem).expect("a generated key reads back");
        (key, pem)
    }

    /// Its public key, to trust (`verification.keys`).
    pub fn public_key(&self, name: &str) -> TrustedKey {
        TrustedKey { name: name.to_owned(), point: self.0.public_key().as_ref().to_vec() }
    }

    /// The base64 of the ASN.1 DER signature of `payload`.
    ///
    /// # Panics
    /// Never in practice: only when the system's random source fails.
    pub fn sign(&self, payload: &[u8]) -> String {
        let signature = self.0.sign(&SystemRandom::new(), payload).expect("the system's random source works");
        base64::engine::general_purpose::STANDARD.encode(signature.as_ref())
    }
}

/// The config blob of a signature manifest whose layers have `digests` (uncompressed: the
/// diff IDs are the digests), as cosign writes it.
fn config(digests: &[String]) -> Vec<u8> {
    let text = format!(
        r#"{{"architecture":"","created":"0001-01-01T00:00:00Z","history":[{{"created":"0001-01-01T00:00:00Z"}}],"os":"","rootfs":{{"type":"layers","diff_ids":{}}},"config":{{}}}}"#,
        serde_json::to_string(digests).expect("strings serialize")
    );
    text.into_bytes()
}

/// Sign the manifest `digest` of `repository` with `key`: a payload layer added to the
/// `sha256-HEX.sig` manifest (a new one, or the one there with its signatures kept).
/// Returns the signature manifest's digest.
///
/// # Errors
/// Any [`RegistryError`] of the exchange.
pub async fn sign(client: &RegistryClient, repository: &str, digest: &str, key: &SigningKey) -> Result<String, RegistryError> {
    let tag = signature_tag(digest);
    let payload = payload(&format!("{}/{repository}", client.registry()), digest);
    let signature = key.sign(&payload);
    let mut layers = match client.get_manifest(repository, &tag).await {
        Ok(existing) => serde_json::from_slice::<Manifest>(&existing.bytes).map(|m| m.layers).unwrap_or_default(),
        Err(RegistryError::NotFound { .. }) => Vec::new(),
        Err(e) => return Err(e),
    };
    let payload_digest = client.push_blob(repository, Bytes::from(payload.clone())).await?;
    layers.push(Descriptor {
        media_type: SIMPLE_SIGNING_MEDIA_TYPE.into(),
        digest: payload_digest,
        size: payload.len() as u64,
        annotations: [(SIGNATURE_ANNOTATION.to_owned(), signature)].into(),
    });
    let digests: Vec<String> = layers.iter().map(|l| l.digest.clone()).collect();
    let config = config(&digests);
    let config_descriptor = Descriptor {
        media_type: IMAGE_CONFIG_MEDIA_TYPE.into(),
        digest: sha256_digest(&config),
        size: config.len() as u64,
        annotations: Default::default(),
    };
    client.push_blob(repository, Bytes::from(config)).await?;
    let manifest =
        Manifest { schema_version: 2, media_type: Some(OCI_MANIFEST_MEDIA_TYPE.into()), config: config_descriptor, layers };
    let bytes = serde_json::to_vec(&manifest).expect("a manifest serializes");
    client.put_manifest(repository, &tag, OCI_MANIFEST_MEDIA_TYPE, Bytes::from(bytes)).await
}

/// The signatures stored for the manifest `digest` of `repository` (none when its
/// `sha256-HEX.sig` tag does not exist).
///
/// # Errors
/// [`RegistryError::SignatureInvalid`] for a signature manifest that does not parse or a
/// payload larger than 64 KiB; any [`RegistryError`] of the exchange.
pub async fn fetch_signatures(client: &RegistryClient, repository: &str, digest: &str) -> Result<Vec<Signed>, RegistryError> {
    let tag = signature_tag(digest);
    let fetched = match client.get_manifest(repository, &tag).await {
        Ok(fetched) => fetched,
        Err(RegistryError::NotFound { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let manifest: Manifest = serde_json::from_slice(&fetched.bytes)
        .map_err(|e| RegistryError::SignatureInvalid(format!("the signature manifest {repository}:{tag} does not parse: {e}")))?;
    let mut found = Vec::new();
    for layer in manifest.layers.iter().filter(|l| l.media_type == SIMPLE_SIGNING_MEDIA_TYPE) {
        let Some(signature) = layer.annotations.get(SIGNATURE_ANNOTATION) else { continue };
        if layer.size > MAX_PAYLOAD_BYTES {
            return Err(RegistryError::SignatureInvalid(format!(
                "a signature payload of {repository}:{tag} has {} bytes (at most {MAX_PAYLOAD_BYTES})",
                layer.size
            )));
        }
        let payload = client.get_blob(repository, &layer.digest, layer.size).await?;
        found.push(Signed { payload: payload.to_vec(), signature: signature.clone() });
    }
    Ok(found)
}

/// Check the signatures `signed` of the manifest `digest` (of `reference`, for messages)
/// against `verification`: the name of the trusted key one of them verifies with, or `None`
/// when no signature is needed (verification off, or an unsigned artifact allowed).
///
/// A signature counts when its payload is a cosign payload naming `digest` and its signature
/// over the payload's bytes verifies with a trusted key. With `requireSignature: false`, an
/// unsigned artifact passes, but one whose signatures all fail is refused.
///
/// # Errors
/// [`RegistryError::SignatureMissing`] when a signature is required and there is none;
/// [`RegistryError::KeyNotTrusted`] when a signature names this artifact but verifies with no
/// trusted key (another key made it, or it does not match its payload);
/// [`RegistryError::SignatureInvalid`] when no signature names this artifact or one is not
/// even a signature (not base64, a payload that is not cosign's).
pub fn verify(
    signed: &[Signed],
    digest: &str,
    verification: &Verification,
    reference: &str,
) -> Result<Option<String>, RegistryError> {
    if !verification.enabled() {
        return Ok(None);
    }
    if signed.is_empty() {
        return if verification.require_signature {
            Err(RegistryError::SignatureMissing { reference: reference.to_owned(), tag: signature_tag(digest) })
        } else {
            Ok(None)
        };
    }
    let mut problems = Vec::new();
    let mut names_this = false;
    for s in signed {
        let payload = match serde_json::from_slice::<Payload>(&s.payload) {
            Ok(p) if p.critical.type_ == SIGNATURE_TYPE => p,
            Ok(p) => {
                problems.push(format!("a payload of type {:?}", p.critical.type_));
                continue;
            }
            Err(e) => {
                problems.push(format!("a payload that is not cosign's: {e}"));
                continue;
            }
        };
        if payload.critical.image.docker_manifest_digest != digest {
            problems.push(format!("a signature of another artifact ({})", payload.critical.image.docker_manifest_digest));
            continue;
        }
        let Ok(der) = base64::engine::general_purpose::STANDARD.decode(s.signature.trim()) else {
            problems.push("a signature that is not base64".into());
            continue;
        };
        names_this = true;
        for key in &verification.keys {
            if UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &key.point).verify(&s.payload, &der).is_ok() {
                return Ok(Some(key.name.clone()));
            }
        }
    }
    let trusted: Vec<&str> = verification.keys.iter().map(|k| k.name.as_str()).collect();
    if names_this {
        Err(RegistryError::KeyNotTrusted { reference: reference.to_owned(), count: signed.len(), keys: trusted.join(", ") })
    } else {
        Err(RegistryError::SignatureInvalid(format!("{reference}: {} signature(s): {}", signed.len(), problems.join("; "))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:3f6c1b7e0f5b2a4d9c8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c";

    fn generated() -> SigningKey {
        SigningKey::generate().0
    }

    fn trusting(keys: &[&SigningKey], require: bool) -> Verification {
        let keys = keys.iter().enumerate().map(|(i, k)| k.public_key(&format!("k{i}"))).collect();
        Verification { require_signature: require, keys }
    }

    fn signed_by(key: &SigningKey, digest: &str) -> Signed {
        let payload = payload("127.0.0.1:5000/plugins/memcached", digest);
        Signed { signature: key.sign(&payload), payload }
    }

    #[test]
    fn the_signature_tag_is_cosigns() {
        assert_eq!(signature_tag("sha256:abc"), "sha256-abc.sig");
    }

    #[test]
    fn a_signature_by_a_trusted_key_verifies_and_names_the_key() {
        let (a, b) = (generated(), generated());
        let verification = trusting(&[&a, &b], true);
        assert_eq!(verify(&[signed_by(&b, DIGEST)], DIGEST, &verification, "r").unwrap().as_deref(), Some("k1"));
        // Among several signatures, one by a trusted key is enough.
        let other = generated();
        let both = [signed_by(&other, DIGEST), signed_by(&a, DIGEST)];
        assert_eq!(verify(&both, DIGEST, &verification, "r").unwrap().as_deref(), Some("k0"));
    }

    #[test]
    fn an_unsigned_artifact_is_refused_only_when_signatures_are_required() {
        let a = generated();
        let err = verify(&[], DIGEST, &trusting(&[&a], true), "oci://r/p:1").unwrap_err();
        assert_eq!((err.reason(), err.outcome()), ("SignatureMissing", "signature_missing"));
        assert!(err.to_string().contains("sha256-3f6c"), "{err}");
        assert_eq!(verify(&[], DIGEST, &trusting(&[&a], false), "r").unwrap(), None);
        assert_eq!(verify(&[signed_by(&a, DIGEST)], DIGEST, &Verification::default(), "r").unwrap(), None);
    }

    #[test]
    fn a_signature_by_a_key_not_trusted_is_refused_even_when_not_required() {
        let (a, other) = (generated(), generated());
        for require in [true, false] {
            let err = verify(&[signed_by(&other, DIGEST)], DIGEST, &trusting(&[&a], require), "r").unwrap_err();
            assert_eq!((err.reason(), err.outcome()), ("KeyNotTrusted", "key_not_trusted"), "{err}");
        }
    }

    #[test]
    fn a_signature_of_another_artifact_or_a_changed_payload_is_refused() {
        let a = generated();
        let verification = trusting(&[&a], true);
        let other_digest = DIGEST.replace("3f6c", "0000");
        let err = verify(&[signed_by(&a, &other_digest)], DIGEST, &verification, "r").unwrap_err();
        assert_eq!(err.reason(), "SignatureInvalid");
        assert!(err.to_string().contains("a signature of another artifact"), "{err}");
        // The payload edited after signing (still naming this digest): no key verifies it.
        let mut changed = signed_by(&a, DIGEST);
        changed.payload = String::from_utf8(changed.payload).unwrap().replace("127.0.0.1", "127.0.0.2").into_bytes();
        assert_eq!(verify(&[changed], DIGEST, &verification, "r").unwrap_err().reason(), "KeyNotTrusted");
        let garbage = Signed { payload: b"{}".to_vec(), signature: "!!".into() };
        assert_eq!(verify(&[garbage], DIGEST, &verification, "r").unwrap_err().reason(), "SignatureInvalid");
    }

    #[test]
    fn the_payload_is_cosigns_simple_signing_layout() {
        let json: serde_json::Value = serde_json::from_slice(&payload("reg/repo", DIGEST)).unwrap();
        assert_eq!(json["critical"]["image"]["docker-manifest-digest"], DIGEST);
        assert_eq!(json["critical"]["identity"]["docker-reference"], "reg/repo");
        assert_eq!(json["critical"]["type"], SIGNATURE_TYPE);
        assert!(json["optional"].is_null());
    }

    #[test]
    fn keys_that_cannot_sign_are_refused_with_a_hint() {
        let err = SigningKey::from_pem(
            "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n",
        )
        .unwrap_err();
        assert!(err.contains("cosign import-key-pair"), "{err}");
    }
}
