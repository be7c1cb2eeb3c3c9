//! Reconcile errors: retryable or terminal.

/// Why a reconcile failed.
///
/// The host retries a [`Retryable`](Error::Retryable) error with exponential backoff, and
/// records a [`Terminal`](Error::Terminal) one (event + condition) and waits until the object
/// changes. Traps, timeouts and exhausted memory are not errors a plugin returns: the host
/// detects those itself.
///
/// `?` converts the usual failures into terminal errors: a JSON (de)serialization error (text
/// that is not JSON, or an object that does not have the shape the plugin expects) and a
/// refused cache lookup (the plugin's manifest does not declare what it reads).
///
/// ```
/// use wasmop_sdk::Error;
///
/// let e = Error::retryable("the Service has no cluster IP yet");
/// assert!(e.is_retryable());
/// assert_eq!(e.to_string(), "the Service has no cluster IP yet");
///
/// let e: Error = serde_json::from_str::<u32>("\"three\"").unwrap_err().into();
/// assert!(!e.is_retryable());
/// assert!(e.message().starts_with("does not match the expected type:"));
/// let e: Error = serde_json::from_str::<serde_json::Value>("{").unwrap_err().into();
/// assert!(e.message().starts_with("invalid JSON:"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A transient failure (something not ready yet, a conflict): the host retries with
    /// exponential backoff.
    #[error("{0}")]
    Retryable(String),
    /// A permanent failure for this version of the object (an invalid spec): the host records
    /// it and waits for the object to change.
    #[error("{0}")]
    Terminal(String),
}

impl Error {
    /// A transient failure; the host retries with backoff.
    ///
    /// ```
    /// # fn check(ready: bool) -> Result<(), wasmop_sdk::Error> {
    /// if !ready {
    ///     return Err(wasmop_sdk::Error::retryable("waiting for the database"));
    /// }
    /// # Ok(()) }
    /// # assert!(check(false).is_err());
    /// ```
    pub fn retryable(message: impl Into<String>) -> Self {
        Self::Retryable(message.into())
    }

    /// A permanent failure for this version of the object; the host waits for it to change.
    ///
    /// ```
    /// let e = wasmop_sdk::Error::terminal("spec.size must not be negative");
    /// assert!(!e.is_retryable());
    /// ```
    pub fn terminal(message: impl Into<String>) -> Self {
        Self::Terminal(message.into())
    }

    /// Whether the host should retry.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Retryable(_))
    }

    /// The message, without the retryable/terminal classification.
    pub fn message(&self) -> &str {
        match self {
            Self::Retryable(m) | Self::Terminal(m) => m,
        }
    }

    /// The same error with `context: ` in front of its message.
    ///
    /// ```
    /// let e = wasmop_sdk::Error::terminal("missing field `size`").context("spec");
    /// assert_eq!(e.message(), "spec: missing field `size`");
    /// ```
    #[must_use]
    pub fn context(self, context: impl std::fmt::Display) -> Self {
        match self {
            Self::Retryable(m) => Self::Retryable(format!("{context}: {m}")),
            Self::Terminal(m) => Self::Terminal(format!("{context}: {m}")),
        }
    }
}

impl From<serde_json::Error> for Error {
    /// A terminal error: data of the wrong shape does not fix itself by retrying. Valid JSON of
    /// another shape than the Rust type "does not match the expected type"; text that is not
    /// JSON is "invalid JSON".
    fn from(e: serde_json::Error) -> Self {
        match e.classify() {
            serde_json::error::Category::Data => Self::Terminal(format!("does not match the expected type: {e}")),
            _ => Self::Terminal(format!("invalid JSON: {e}")),
        }
    }
}

impl From<LookupError> for Error {
    /// A terminal error: a refused lookup is a bug in the plugin or its manifest.
    fn from(e: LookupError) -> Self {
        Self::Terminal(format!("cache lookup refused: {e}"))
    }
}

/// Why a lookup was refused. A refusal is a bug in the plugin or its manifest, never a transient
/// condition; `?` turns it into a terminal [`Error`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// The kind is not declared in the plugin's manifest. Carries the kind as text.
    #[error("kind not declared in the manifest: {0}")]
    UndeclaredKind(String),
    /// The namespace is outside what the plugin may read. Carries the reason.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// The label selector could not be parsed. Carries the parser's message.
    #[error("invalid label selector: {0}")]
    InvalidSelector(String),
    /// The host answered with an object that is not valid JSON (a host bug).
    #[error("the host returned an object that is not valid JSON: {0}")]
    InvalidObject(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_pick_the_variant() {
        assert_eq!(Error::retryable("x"), Error::Retryable("x".into()));
        assert_eq!(Error::terminal("x"), Error::Terminal("x".into()));
    }

    #[test]
    fn display_is_the_bare_message() {
        assert_eq!(Error::terminal("bad spec").to_string(), "bad spec");
    }

    #[test]
    fn json_errors_become_terminal_with_a_clear_message() {
        let e: Error = serde_json::from_str::<serde_json::Value>("{").unwrap_err().into();
        assert!(matches!(e, Error::Terminal(_)));
        assert!(e.message().starts_with("invalid JSON: EOF"), "{e}");
        let e: Error = serde_json::from_value::<u8>(serde_json::json!("x")).unwrap_err().into();
        assert_eq!(e.message(), "does not match the expected type: invalid type: string \"x\", expected u8");
    }

    #[test]
    fn lookup_errors_become_terminal() {
        let e: Error = LookupError::UndeclaredKind("v1/Secret".into()).into();
        assert!(!e.is_retryable());
        assert!(e.message().contains("v1/Secret"), "{e}");
    }

    #[test]
    fn context_keeps_the_variant() {
        assert!(Error::retryable("x").context("y").is_retryable());
        assert_eq!(Error::retryable("x").context("y").message(), "y: x");
    }
}
