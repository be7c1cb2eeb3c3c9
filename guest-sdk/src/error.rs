//! Reconcile errors: retryable or terminal, with what the parent should show.

use serde::Serialize;
use serde_json::Value;

use crate::Condition;

/// Why a reconcile failed.
///
/// The host retries a [`Retryable`](Error::Retryable) error with exponential backoff, and
/// records a [`Terminal`](Error::Terminal) one (event + condition) and waits until the object
/// changes. Traps, timeouts and exhausted memory are not errors a plugin returns: the host
/// detects those itself.
///
/// An error may also carry status fields and conditions for the parent to show
/// ([`with_status`](Error::with_status), [`with_condition`](Error::with_condition)): the host
/// applies them as it applies a response's, then records the failure. Nothing else of a
/// response comes with an error.
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
    Retryable(Failure),
    /// A permanent failure for this version of the object (an invalid spec): the host records
    /// it and waits for the object to change.
    #[error("{0}")]
    Terminal(Failure),
}

/// What an [`Error`] carries: its message, and the status fields and conditions the parent
/// should show beside the failure (none unless set).
///
/// It converts from a `String` or `&str` and dereferences to the message, so
/// `Error::Terminal("bad spec".into())` builds an error that shows nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Failure {
    /// Human-readable message for the Warning event and the host's failure condition.
    pub message: String,
    /// Fields of the parent's status to apply (a JSON object), or `None` to leave it alone.
    pub status: Option<Value>,
    /// Conditions to set on the parent's `status.conditions`, at most one per type.
    pub conditions: Vec<Condition>,
}

impl Failure {
    /// Whether it carries status fields or conditions.
    pub fn shows_anything(&self) -> bool {
        self.status.is_some() || !self.conditions.is_empty()
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Self { message, ..Self::default() }
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Self {
        message.to_owned().into()
    }
}

impl std::ops::Deref for Failure {
    type Target = str;

    fn deref(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
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
        Self::Retryable(message.into().into())
    }

    /// A permanent failure for this version of the object; the host waits for it to change.
    ///
    /// ```
    /// let e = wasmop_sdk::Error::terminal("spec.size must not be negative");
    /// assert!(!e.is_retryable());
    /// ```
    pub fn terminal(message: impl Into<String>) -> Self {
        Self::Terminal(message.into().into())
    }

    /// Whether the host should retry.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Retryable(_))
    }

    /// The message, without the retryable/terminal classification.
    pub fn message(&self) -> &str {
        &self.failure().message
    }

    /// The message, status fields and conditions.
    pub fn failure(&self) -> &Failure {
        match self {
            Self::Retryable(f) | Self::Terminal(f) => f,
        }
    }

    fn failure_mut(&mut self) -> &mut Failure {
        match self {
            Self::Retryable(f) | Self::Terminal(f) => f,
        }
    }

    /// The status fields the parent should show with the failure, if any.
    pub fn status_patch(&self) -> Option<&Value> {
        self.failure().status.as_ref()
    }

    /// The conditions the parent should show with the failure.
    pub fn conditions(&self) -> &[Condition] {
        &self.failure().conditions
    }

    /// The condition of type `type_` the parent should show with the failure, if set.
    pub fn condition_of(&self, type_: &str) -> Option<&Condition> {
        self.conditions().iter().find(|c| c.type_ == type_)
    }

    /// The same error with `context: ` in front of its message.
    ///
    /// ```
    /// let e = wasmop_sdk::Error::terminal("missing field `size`").context("spec");
    /// assert_eq!(e.message(), "spec: missing field `size`");
    /// ```
    #[must_use]
    pub fn context(mut self, context: impl std::fmt::Display) -> Self {
        let failure = self.failure_mut();
        failure.message = format!("{context}: {}", failure.message);
        self
    }

    /// Fields of the parent's status to apply with the failure, as
    /// [`Response::status`](crate::Response::status): a JSON object, merged into fields set
    /// before. The host applies them through the status subresource before it records the
    /// failure (WIT 0.3.0 on). A value that is not a JSON object is not applied: the message
    /// says so instead.
    ///
    /// ```
    /// use serde_json::json;
    /// use wasmop_sdk::{Condition, Error};
    /// let e = Error::terminal("spec.size is required")
    ///     .with_status(json!({"phase": "Invalid"}))
    ///     .with_condition(Condition::false_("Ready", "InvalidSpec", "spec.size is required"));
    /// assert!(!e.is_retryable());
    /// assert_eq!(e.status_patch(), Some(&json!({"phase": "Invalid"})));
    /// assert_eq!(e.condition_of("Ready").unwrap().reason, "InvalidSpec");
    /// assert_eq!(e.message(), "spec.size is required");
    /// ```
    #[must_use]
    pub fn with_status(mut self, status: impl Serialize) -> Self {
        let failure = self.failure_mut();
        match serde_json::to_value(status) {
            Ok(Value::Object(fields)) => match &mut failure.status {
                Some(Value::Object(existing)) => existing.extend(fields),
                _ => failure.status = Some(Value::Object(fields)),
            },
            Ok(other) => {
                let kind = if other.is_array() { "an array" } else { "not an object" };
                failure.message = format!("{} (status not shown: it must be a JSON object, got {kind})", failure.message);
            }
            Err(e) => failure.message = format!("{} (status not shown: cannot be serialized to JSON: {e})", failure.message),
        }
        self
    }

    /// A condition for the parent's `status.conditions` to show with the failure (by type; a
    /// later one with the same type wins), e.g. `Ready=False` with reason `InvalidSpec`. The
    /// host fills in `observedGeneration` as for a response's conditions.
    #[must_use]
    pub fn with_condition(mut self, condition: Condition) -> Self {
        let conditions = &mut self.failure_mut().conditions;
        conditions.retain(|c| c.type_ != condition.type_);
        conditions.push(condition);
        self
    }
}

impl From<serde_json::Error> for Error {
    /// A terminal error: data of the wrong shape does not fix itself by retrying. Valid JSON of
    /// another shape than the Rust type "does not match the expected type"; text that is not
    /// JSON is "invalid JSON".
    fn from(e: serde_json::Error) -> Self {
        match e.classify() {
            serde_json::error::Category::Data => Self::terminal(format!("does not match the expected type: {e}")),
            _ => Self::terminal(format!("invalid JSON: {e}")),
        }
    }
}

impl From<LookupError> for Error {
    /// A terminal error: a refused lookup is a bug in the plugin or its manifest.
    fn from(e: LookupError) -> Self {
        Self::terminal(format!("cache lookup refused: {e}"))
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
    use serde_json::json;

    use super::*;

    #[test]
    fn constructors_pick_the_variant() {
        assert_eq!(Error::retryable("x"), Error::Retryable("x".into()));
        assert_eq!(Error::terminal("x"), Error::Terminal("x".into()));
        assert_eq!(Error::terminal(String::from("x")), Error::Terminal(String::from("x").into()));
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

    #[test]
    fn an_error_carries_status_and_conditions_and_keeps_its_kind() {
        let ready = |reason: &str| Condition::false_("Ready", reason, "spec.size is required");
        let e = Error::terminal("spec.size is required")
            .with_status(json!({"phase": "Invalid"}))
            .with_status(json!({"observedSize": null}))
            .with_condition(ready("Pending"))
            .with_condition(Condition::true_("Degraded", "InvalidSpec", ""))
            .with_condition(ready("InvalidSpec"));
        assert!(!e.is_retryable());
        assert_eq!(e.status_patch(), Some(&json!({"phase": "Invalid", "observedSize": null})), "merged by field");
        let types: Vec<&str> = e.conditions().iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["Degraded", "Ready"], "one per type, the later wins");
        assert_eq!(e.condition_of("Ready").unwrap().reason, "InvalidSpec");
        assert!(e.failure().shows_anything());
        let e = e.context("spec");
        assert_eq!((e.message(), e.to_string().as_str()), ("spec: spec.size is required", "spec: spec.size is required"));
        assert!(e.status_patch().is_some(), "context keeps what the error shows");
        let retry = Error::retryable("later").with_condition(ready("Waiting"));
        assert!(retry.is_retryable() && retry.status_patch().is_none());
        assert!(!Error::terminal("x").failure().shows_anything());
    }

    #[test]
    fn a_status_that_is_not_an_object_is_not_shown_and_the_message_says_so() {
        let e = Error::terminal("bad").with_status(json!([1]));
        assert_eq!(e.status_patch(), None);
        assert_eq!(e.message(), "bad (status not shown: it must be a JSON object, got an array)");
        assert!(!e.is_retryable());
    }

    #[test]
    fn a_failure_reads_as_its_message() {
        let Error::Terminal(failure) = Error::terminal("bad spec") else { unreachable!() };
        assert!(failure.starts_with("bad"), "dereferences to the message");
        assert_eq!(failure.to_string(), "bad spec");
    }
}
