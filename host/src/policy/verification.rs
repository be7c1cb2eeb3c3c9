//! Which signatures a plugin pulled from a registry needs ([`Verification`], the policy's
//! top-level `verification:`): trusted public keys of cosign-compatible keyed signatures, and
//! whether an unsigned artifact may run. Plain data, checked when the policy is read; the
//! puller verifies (docs/registries.md).
//!
//! ```yaml
//! verification:
//!   requireSignature: true      # an unsigned artifact never reaches the plugins directory
//!   keys:
//!     - name: release           # shown in logs (default key-1, key-2, ...)
//!       publicKey: |            # PEM "PUBLIC KEY" (SPKI), ECDSA P-256: what cosign.pub holds
//!         -----BEGIN PUBLIC KEY-----
//!         ...
//!     - name: ci
//!       file: /etc/wasmop/keys/ci.pub   # the same, from a file (a mounted Secret or ConfigMap)
//! ```
//!
//! Keyless signatures (a Fulcio certificate for an OIDC identity, logged in Rekor) would be a
//! sibling list, `keyless: [{issuer, subject}]`; they need the public Sigstore services and are
//! refused with a message saying so.

use std::fmt;

use rustls::pki_types::SubjectPublicKeyInfoDer;
use rustls::pki_types::pem::PemObject;
use serde::Deserialize;

/// The DER of an ECDSA P-256 `SubjectPublicKeyInfo` up to its 65-byte uncompressed point:
/// `SEQUENCE { SEQUENCE { id-ecPublicKey, prime256v1 }, BIT STRING (0 unused bits) ... }`.
/// DER has one encoding, so the prefix is the whole check of the structure.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03,
    0x01, 0x07, 0x03, 0x42, 0x00,
];

/// A public key signatures are checked against.
#[derive(Clone, PartialEq, Eq)]
pub struct TrustedKey {
    /// Its name in logs.
    pub name: String,
    /// The ECDSA P-256 public point, uncompressed (`0x04 || X || Y`, 65 bytes).
    pub point: Vec<u8>,
}

impl fmt::Debug for TrustedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrustedKey").field("name", &self.name).field("point", &hex::encode(&self.point)).finish()
    }
}

impl TrustedKey {
    /// A key from PEM text holding one `PUBLIC KEY` (SPKI) block of an ECDSA P-256 key.
    ///
    /// # Errors
    /// A message naming what is wrong: no PEM block, another algorithm or curve.
    pub fn from_pem(name: &str, pem: &str) -> Result<Self, String> {
        let der = SubjectPublicKeyInfoDer::from_pem_slice(pem.as_bytes())
            .map_err(|e| format!("no PEM \"PUBLIC KEY\" block (SubjectPublicKeyInfo): {e}"))?;
        Self::from_spki_der(name, der.as_ref())
    }

    /// A key from the DER of an ECDSA P-256 `SubjectPublicKeyInfo`.
    ///
    /// # Errors
    /// A message when it is another algorithm or curve, or not a point on 65 bytes.
    pub fn from_spki_der(name: &str, der: &[u8]) -> Result<Self, String> {
        match der.strip_prefix(P256_SPKI_PREFIX.as_slice()) {
            Some(point) if point.len() == 65 && point[0] == 0x04 => Ok(Self { name: name.to_owned(), point: point.to_vec() }),
            _ => Err("not an ECDSA P-256 public key (cosign's default: `cosign generate-key-pair`, or \
                 `openssl ecparam -name prime256v1 -genkey`)"
                .into()),
        }
    }

    /// The key's `SubjectPublicKeyInfo` DER.
    pub fn spki_der(&self) -> Vec<u8> {
        [P256_SPKI_PREFIX.as_slice(), &self.point].concat()
    }

    /// The key as PEM (`PUBLIC KEY`, what `publicKey:` takes and cosign reads).
    pub fn to_pem(&self) -> String {
        use base64::Engine as _;
        let body = base64::engine::general_purpose::STANDARD.encode(self.spki_der());
        let lines: Vec<&str> = body.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).expect("base64 is ASCII")).collect();
        format!("-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n", lines.join("\n"))
    }
}

/// The policy's `verification:` as checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verification {
    /// Whether an artifact without a signature is refused.
    pub require_signature: bool,
    /// The keys a signature may be made with; a signature by no key here is refused.
    pub keys: Vec<TrustedKey>,
}

impl Verification {
    /// Whether pulls look for signatures at all (a key is trusted, or signatures are required).
    pub fn enabled(&self) -> bool {
        self.require_signature || !self.keys.is_empty()
    }
}

/// `verification:` as written.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct VerificationEntry {
    #[serde(default)]
    pub require_signature: bool,
    #[serde(default)]
    pub keys: Vec<KeyEntry>,
    /// Reserved for keyless signatures; refused.
    pub keyless: Option<serde_json::Value>,
}

/// One entry of `verification.keys`.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct KeyEntry {
    pub name: Option<String>,
    /// PEM text.
    pub public_key: Option<String>,
    /// An absolute path to a PEM file.
    pub file: Option<String>,
}

impl VerificationEntry {
    /// Check the entry: read key files, parse every key.
    ///
    /// # Errors
    /// `(where, message)`: `keyless` given, a key with neither or both of `publicKey` and
    /// `file`, a relative or unreadable file, a key that is not ECDSA P-256, two keys of one
    /// name, `requireSignature` without any key.
    pub(super) fn check(&self) -> Result<Verification, (String, String)> {
        if self.keyless.is_some() {
            return Err((
                "verification.keyless".into(),
                "keyless signatures (Fulcio certificates, Rekor) are not supported yet: list public keys under \
                 verification.keys"
                    .into(),
            ));
        }
        let mut keys: Vec<TrustedKey> = Vec::with_capacity(self.keys.len());
        for (i, entry) in self.keys.iter().enumerate() {
            let at = format!("verification.keys[{i}]");
            let name = entry.name.clone().unwrap_or_else(|| format!("key-{}", i + 1));
            let pem = match (&entry.public_key, &entry.file) {
                (Some(pem), None) => pem.clone(),
                (None, Some(file)) => {
                    if !std::path::Path::new(file).is_absolute() {
                        return Err((format!("{at}.file"), format!("{file:?} is not an absolute path")));
                    }
                    std::fs::read_to_string(file).map_err(|e| (format!("{at}.file"), format!("cannot read {file}: {e}")))?
                }
                _ => return Err((at, "give exactly one of publicKey (PEM) and file (a PEM file's path)".into())),
            };
            let key = TrustedKey::from_pem(&name, &pem).map_err(|e| (at.clone(), e))?;
            if keys.iter().any(|k| k.name == key.name) {
                return Err((format!("{at}.name"), format!("{name:?} names two keys")));
            }
            keys.push(key);
        }
        if self.require_signature && keys.is_empty() {
            return Err((
                "verification.requireSignature".into(),
                "signatures are required but no key is trusted: list public keys under verification.keys".into(),
            ));
        }
        Ok(Verification { require_signature: self.require_signature, keys })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A P-256 public key made with `openssl ecparam -name prime256v1 -genkey | openssl ec -pubout`.
    const PUBLIC_PEM: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAECP4mawyKN7uZp5CsyV7C7aOElAuF
06CmPV/lN4GxMio5Uwb2zEONB6LAz+MOU7NBdHJm6pdos5+hIPHyQdwC3w==
-----END PUBLIC KEY-----
";

    /// A P-384 public key (`openssl ecparam -name secp384r1 -genkey | openssl ec -pubout`).
    const P384_PEM: &str = "-----BEGIN PUBLIC KEY-----
MHYwEAYHKoZIzj0CAQYFK4EEACIDYgAE/JOvizl0WRKyN77ZS+1QdAQwPzQ0TcX/
yeHSyTfpGsRPSA56XcjFqLIDKFv+MNXTyvx1SSO5z921gZyrnJanzicGWfhafT8+
zdOjnNuwpBtZLtpAFD5aMU2z/dprX+Xt
-----END PUBLIC KEY-----
";

    fn entry(yaml: &str) -> Result<Verification, (String, String)> {
        crate::yaml::from_str::<VerificationEntry>(yaml).unwrap().check()
    }

    #[test]
    fn a_p256_public_key_is_read_from_pem_and_written_back_as_the_same_der() {
        let key = TrustedKey::from_pem("k", PUBLIC_PEM).unwrap();
        assert_eq!((key.point.len(), key.point[0]), (65, 0x04));
        let der = SubjectPublicKeyInfoDer::from_pem_slice(PUBLIC_PEM.as_bytes()).unwrap();
        assert_eq!(key.spki_der(), der.as_ref());
        assert_eq!(key.to_pem(), PUBLIC_PEM);
    }

    #[test]
    fn keys_of_another_curve_and_text_without_a_public_key_are_refused() {
        let err = TrustedKey::from_pem("k", P384_PEM).unwrap_err();
        assert!(err.contains("not an ECDSA P-256 public key"), "{err}");
        let err = TrustedKey::from_pem("k", "hello").unwrap_err();
        assert!(err.contains("no PEM \"PUBLIC KEY\" block"), "{err}");
    }

    #[test]
    fn keys_come_inline_or_from_an_absolute_file_and_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ci.pub");
        std::fs::write(&file, PUBLIC_PEM).unwrap();
        let yaml = format!(
            "requireSignature: true\nkeys:\n  - publicKey: |\n{}\n  - {{name: ci, file: {}}}\n",
            PUBLIC_PEM.lines().map(|l| format!("      {l}")).collect::<Vec<_>>().join("\n"),
            file.display()
        );
        let v = entry(&yaml).unwrap();
        assert!(v.require_signature && v.enabled());
        let names: Vec<&str> = v.keys.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["key-1", "ci"]);
        assert_eq!(v.keys[0].point, v.keys[1].point);
    }

    #[test]
    fn required_signatures_without_keys_keyless_and_ambiguous_keys_are_refused() {
        let (at, message) = entry("requireSignature: true").unwrap_err();
        assert_eq!(at, "verification.requireSignature");
        assert!(message.contains("no key is trusted"), "{message}");
        let (at, _) = entry("keyless: [{issuer: https://accounts.google.com, subject: a@b.c}]").unwrap_err();
        assert_eq!(at, "verification.keyless");
        let (at, _) = entry("keys: [{name: a}]").unwrap_err();
        assert_eq!(at, "verification.keys[0]");
        let (at, message) = entry("keys: [{file: relative.pub}]").unwrap_err();
        assert_eq!((at.as_str(), message.contains("not an absolute path")), ("verification.keys[0].file", true));
        assert!(!entry("").unwrap().enabled(), "no keys, not required: nothing is looked for");
    }
}
