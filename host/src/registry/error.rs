//! [`RegistryError`]: why a push or a pull failed, each with the reason a `WasmPlugin` shows
//! and the outcome label of `wasmop_plugin_pulls_total`.

/// Why an exchange with a registry, or what it sent, failed.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The registry could not be reached or stopped answering: connection refused, name
    /// resolution, TLS, a timeout, a body cut short.
    #[error("registry {registry} unreachable: {message}")]
    Unreachable {
        /// `HOST[:PORT]`.
        registry: String,
        /// What failed.
        message: String,
    },
    /// The registry wants credentials and none were configured, or it refused them.
    #[error("registry {registry} refused access{}: {message}", to_user(.user))]
    Unauthorized {
        /// `HOST[:PORT]`.
        registry: String,
        /// The user the credentials name, if any.
        user: Option<String>,
        /// What the registry said.
        message: String,
    },
    /// The repository, tag, manifest or blob does not exist.
    #[error("{what} not found in registry {registry}{}", colon(.body))]
    NotFound {
        /// `HOST[:PORT]`.
        registry: String,
        /// What was asked for.
        what: String,
        /// The registry's error body, cut.
        body: String,
    },
    /// The registry answered with a status the protocol does not expect.
    #[error("registry {registry} answered {status} to {request}: {body}")]
    Protocol {
        /// `HOST[:PORT]`.
        registry: String,
        /// The request, `METHOD PATH`.
        request: String,
        /// The HTTP status.
        status: u16,
        /// The registry's error body, cut.
        body: String,
    },
    /// Content is not what its digest (or size) says: tampered with, or not what was pinned.
    #[error("{what}: digest mismatch: expected {expected}, got {actual}")]
    DigestMismatch {
        /// What was read.
        what: String,
        /// The digest asked for.
        expected: String,
        /// The digest of what came.
        actual: String,
    },
    /// Content larger than allowed (`maxModuleBytes` for a plugin file).
    #[error("{what}: {}more than the {limit} bytes allowed (maxModuleBytes)", bytes_comma(.size))]
    TooLarge {
        /// What was read.
        what: String,
        /// Its size, when known before reading it.
        size: Option<u64>,
        /// The limit.
        limit: u64,
    },
    /// The manifest is not a Wasm artifact: not an OCI image manifest, or not exactly one
    /// `application/wasm` layer.
    #[error("not a Wasm artifact: {0}")]
    NotWasmArtifact(String),
    /// The layer is not a WebAssembly binary (no `\0asm` header).
    #[error("the layer is not WebAssembly: {0}")]
    NotWasm(String),
    /// The plugin's credentials could not be read: the Secret is missing, unreadable, of
    /// another type, or has no entry for the registry.
    #[error("credentials {secret}: {message}")]
    Credentials {
        /// `NAMESPACE/NAME` of the Secret.
        secret: String,
        /// What is wrong.
        message: String,
    },
    /// Signatures are required (`verification.requireSignature`) and the artifact has none.
    #[error("{reference} is not signed (no signature manifest under the tag {tag}) and verification.requireSignature is on")]
    SignatureMissing {
        /// The source.
        reference: String,
        /// The tag its signatures would be stored under.
        tag: String,
    },
    /// A signature names the artifact but verifies with no trusted key: another key made it,
    /// or it does not match its payload.
    #[error("{reference}: none of its {count} signature(s) verifies with a trusted key ({keys})")]
    KeyNotTrusted {
        /// The source.
        reference: String,
        /// How many signatures it has.
        count: usize,
        /// The names of the trusted keys.
        keys: String,
    },
    /// The signatures are not signatures of this artifact: another artifact's, payloads that
    /// are not cosign's, signatures that are not base64, a signature manifest that does not
    /// parse.
    #[error("invalid signature: {0}")]
    SignatureInvalid(String),
    /// The local cache or the plugins directory could not be written.
    #[error("{what}: {error}")]
    Io {
        /// The path and the operation.
        what: String,
        /// The I/O error.
        error: std::io::Error,
    },
}

impl RegistryError {
    /// The reason a `WasmPlugin`'s `Ready` condition shows for it.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Unreachable { .. } => "RegistryUnreachable",
            Self::Unauthorized { .. } => "Unauthorized",
            Self::NotFound { .. } => "NotFound",
            Self::Protocol { .. } => "RegistryError",
            Self::DigestMismatch { .. } => "DigestMismatch",
            Self::TooLarge { .. } => "TooLarge",
            Self::NotWasmArtifact(_) => "NotWasmArtifact",
            Self::NotWasm(_) => "NotWasm",
            Self::Credentials { .. } => "CredentialsUnavailable",
            Self::SignatureMissing { .. } => "SignatureMissing",
            Self::KeyNotTrusted { .. } => "KeyNotTrusted",
            Self::SignatureInvalid(_) => "SignatureInvalid",
            Self::Io { .. } => "WriteFailed",
        }
    }

    /// The `outcome` label of `wasmop_plugin_pulls_total` for it.
    pub fn outcome(&self) -> &'static str {
        match self {
            Self::Unreachable { .. } => "unreachable",
            Self::Unauthorized { .. } => "unauthorized",
            Self::NotFound { .. } => "not_found",
            Self::Protocol { .. } => "registry_error",
            Self::DigestMismatch { .. } => "digest_mismatch",
            Self::TooLarge { .. } => "too_large",
            Self::NotWasmArtifact(_) | Self::NotWasm(_) => "not_wasm",
            Self::Credentials { .. } => "credentials",
            Self::SignatureMissing { .. } => "signature_missing",
            Self::KeyNotTrusted { .. } => "key_not_trusted",
            Self::SignatureInvalid(_) => "signature_invalid",
            Self::Io { .. } => "write_failed",
        }
    }
}

/// `": BODY"`, or nothing for an empty body.
fn colon(body: &str) -> String {
    if body.is_empty() { String::new() } else { format!(": {body}") }
}

/// `"N bytes, "` when the size is known.
fn bytes_comma(size: &Option<u64>) -> String {
    size.map(|n| format!("{n} bytes, ")).unwrap_or_default()
}

/// `" to user NAME"` when credentials were given.
fn to_user(user: &Option<String>) -> String {
    user.as_ref().map(|u| format!(" to user {u}")).unwrap_or_default()
}
