//! Typed errors of loading and calling plugins.

use std::path::PathBuf;
use std::time::Duration;

use crate::contract::{Failure, ManifestError, ResponseError, VerdictError};

/// Why a plugin could not be loaded. The previous version of a plugin (if any) keeps serving.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error: in the message, not also a `source` (a chain printed with `{:#}` would
        /// say it twice).
        error: std::io::Error,
    },
    /// The bytes are not WebAssembly at all.
    #[error("not a WebAssembly file (expected the `\\0asm` magic, found {found})")]
    NotWasm {
        /// A short hex dump of the first bytes.
        found: String,
    },
    /// The bytes are WebAssembly but do not validate or compile (truncated, corrupt, or using
    /// features the host does not enable).
    #[error("invalid WebAssembly: {0}")]
    Invalid(String),
    /// A core module (wasm32-wasip1) could not be turned into a component; typically it was not
    /// built with the wasmop SDK, so it carries no component type.
    #[error("cannot turn this core module into a component (was it built with wasmop-sdk?): {0}")]
    Componentize(String),
    /// The component implements none of the worlds the host accepts (`operator` of
    /// `wasmop:plugin@0.1.0`; `operator`, `controller` or `webhook` of `wasmop:plugin@0.2.0`):
    /// an export is missing or has the wrong type, or it imports something the host does not
    /// provide.
    #[error("not a wasmop plugin (the host accepts {worlds}): {0}", worlds = super::bindings::ACCEPTED_WORLDS)]
    WrongWorld(String),
    /// Calling `manifest()` failed.
    #[error("describing the plugin failed: {0}")]
    Describe(CallError),
    /// The manifest the plugin returned is invalid.
    #[error("invalid manifest: {0}")]
    Manifest(ManifestError),
    /// The manifest's configuration schema would cost the host more than it accepts to compile
    /// or to validate against (see [`schema_bounds`](crate::contract::schema_bounds)); refused
    /// at load, once, before any JSON Schema compiler sees it.
    #[error("invalid manifest: configSchema refused: {0}")]
    ConfigSchema(crate::contract::schema_bounds::SchemaBoundError),
    /// The compiler (a `wasmop compile` process, or the task running it) failed, timed out or
    /// was abandoned, for a reason outside the bytes: the message says which, with the last
    /// line the process wrote on stderr.
    #[error("compiling failed: {0}")]
    Compiler(String),
}

// Manual `From`s: the detail is in the message, so it is not also reported as a source (an
// error chain printed with `{:#}` would say it twice).
impl From<ManifestError> for LoadError {
    fn from(e: ManifestError) -> Self {
        LoadError::Manifest(e)
    }
}

impl From<ResponseError> for CallError {
    fn from(e: ResponseError) -> Self {
        CallError::MalformedOutput(e)
    }
}

impl From<VerdictError> for CallError {
    fn from(e: VerdictError) -> Self {
        CallError::MalformedVerdict(e)
    }
}

/// Longest error message kept from a plugin (escaped as a log line, then cut): it reaches the
/// log, and the Warning event (whose note Kubernetes caps at 1 KiB) and condition the host
/// records about the parent.
pub const MAX_PLUGIN_MESSAGE: usize = 512;

/// Why a call into a plugin failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// The plugin returned a retryable error: its message (escaped and cut to
    /// [`MAX_PLUGIN_MESSAGE`] bytes), and the status and conditions it asks the parent to show
    /// (WIT 0.3.0 on), checked as a response's.
    #[error("plugin error (retryable): {0}")]
    Retryable(Failure),
    /// The plugin returned a terminal error (its message and what it shows as for
    /// `Retryable`); an admission call's failure is one, with a message only.
    #[error("plugin error (terminal): {0}")]
    Terminal(Failure),
    /// The call ran past its deadline and was interrupted.
    #[error("plugin call exceeded its deadline of {deadline:?} and was interrupted after {elapsed:?}")]
    Timeout {
        /// The deadline.
        deadline: Duration,
        /// When the call was stopped, measured from its start (instantiation included).
        elapsed: Duration,
    },
    /// The call used up its fuel (see [`crate::runtime::Limits::fuel`]) and was stopped.
    #[error("plugin call used up its fuel of {fuel} and was stopped")]
    OutOfFuel {
        /// The fuel it had.
        fuel: u64,
    },
    /// The plugin tried to grow its memory past the cap and was stopped.
    #[error("plugin exceeded its memory limit of {limit} bytes and was stopped")]
    OutOfMemory {
        /// The cap.
        limit: u64,
    },
    /// The memory limit is smaller than the memory the plugin's instance has when it starts
    /// (its initial linear memories): no call can succeed under this limit.
    #[error(
        "plugin needs {needed} bytes of memory to start, more than its memory limit of {limit} bytes \
         (raise --memory or the host policy's memory)"
    )]
    MemoryTooSmall {
        /// The cap.
        limit: u64,
        /// What instantiation asked for.
        needed: u64,
    },
    /// The plugin trapped (a panic, `unreachable`, an out-of-bounds access, a stack overflow).
    #[error("plugin trapped: {message}")]
    Trap {
        /// The trap, and the guest's last stderr line when it left one (a panic message).
        message: String,
    },
    /// The plugin returned output the host refuses; nothing of it is applied.
    #[error("plugin returned malformed output: {0}")]
    MalformedOutput(ResponseError),
    /// The plugin answered an admission request with a verdict the host refuses (a mutated
    /// object with another identity, a mutation from a validating webhook, an invalid code,
    /// too large); the request is denied.
    #[error("plugin returned a malformed verdict: {0}")]
    MalformedVerdict(VerdictError),
    /// The plugin asked for objects it may not read (see [`crate::policy::Grants`]); the
    /// lookup failed in the guest, and the host refuses the whole response.
    #[error("plugin attempted a read it is not allowed: {0}")]
    LookupRefused(String),
    /// The request could not be built or the instance could not be created.
    #[error("cannot call plugin: {0}")]
    Host(String),
    /// The plugin does not serve the admission webhook it was asked for: it declares no
    /// webhook of that name, or it does not export admission at all (every WIT 0.1.0 plugin).
    #[error("plugin serves no admission webhook named {0:?}")]
    NoSuchWebhook(String),
}

impl CallError {
    /// Whether retrying (with backoff) can help. Only a terminal plugin error says no: traps,
    /// timeouts and malformed output are retried with backoff because a fixed plugin version
    /// or a changed object may resolve them.
    pub fn is_retryable(&self) -> bool {
        !matches!(self, CallError::Terminal(_))
    }

    /// A CamelCase reason for events and conditions.
    pub fn reason(&self) -> &'static str {
        match self {
            CallError::Retryable(_) => "ReconcileError",
            CallError::Terminal(_) => "ReconcileFailed",
            CallError::Timeout { .. } => "PluginTimeout",
            CallError::OutOfFuel { .. } => "PluginOutOfFuel",
            CallError::OutOfMemory { .. } | CallError::MemoryTooSmall { .. } => "PluginOutOfMemory",
            CallError::LookupRefused(_) => "LookupRefused",
            CallError::Trap { .. } => "PluginTrapped",
            CallError::MalformedOutput(_) => "MalformedOutput",
            CallError::MalformedVerdict(_) => "MalformedVerdict",
            CallError::Host(_) => "HostError",
            CallError::NoSuchWebhook(_) => "NoSuchWebhook",
        }
    }

    /// The plugin's own failure (retryable or terminal), with the status and conditions it
    /// asks the parent to show; `None` for every error the host detected itself.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            CallError::Retryable(f) | CallError::Terminal(f) => Some(f),
            _ => None,
        }
    }
}
