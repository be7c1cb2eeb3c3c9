//! What a plugin asks for: [`Response`], validated from the plugin's raw output.

use std::collections::HashSet;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::fields::{FieldError, MAX_CONDITION_MESSAGE, MAX_EVENT_NOTE, check_child, check_delete, check_size};
use super::kind::ObjectRef;
use super::names::preview;
use super::parsed_size::{PARSED_SIZE_FACTOR, parsed_size};

/// Bounds on a plugin's output, checked before anything is parsed further.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    /// Total bytes of every string in the response: children and status JSON, every field of
    /// the delete references, condition types, reasons and messages, event reasons, actions
    /// and notes. Counted before anything is parsed.
    pub max_bytes: usize,
    /// Total entries in the response (children + deletes + conditions + events).
    pub max_actions: usize,
}

impl Default for OutputLimits {
    fn default() -> Self {
        Self { max_bytes: 16 << 20, max_actions: 10_000 }
    }
}

/// Conditions and events are the shared definitions of `wasmop-types` (the plugin SDK's too).
pub use wasmop_types::{Condition, ConditionStatus, Event, EventType};

/// A plugin's output as it crossed the boundary: JSON still unparsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawResponse {
    /// Desired children, JSON each.
    pub children: Vec<String>,
    /// Children to delete.
    pub delete: Vec<ObjectRef>,
    /// Status fields, JSON object.
    pub status: Option<String>,
    /// Conditions.
    pub conditions: Vec<Condition>,
    /// Events.
    pub events: Vec<Event>,
    /// Requeue delay.
    pub requeue_after_ms: Option<u64>,
    /// Cleanup done.
    pub finalized: bool,
}

/// A validated response: every child is a JSON object with `apiVersion`, `kind` and
/// `metadata.name`, the status is an object, conditions and events are well-formed, and every
/// name, namespace, label and size is one Kubernetes accepts (see [`FieldError`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    /// Desired children, in the order returned.
    pub children: Vec<Value>,
    /// Children to delete.
    pub delete: Vec<ObjectRef>,
    /// Status fields to apply.
    pub status: Option<Value>,
    /// Conditions to set, at most one per type.
    pub conditions: Vec<Condition>,
    /// Events to record.
    pub events: Vec<Event>,
    /// Reconcile again after this delay.
    #[serde(rename = "requeueAfterMs", serialize_with = "serialize_millis")]
    pub requeue_after: Option<Duration>,
    /// Cleanup done, the finalizer may go.
    pub finalized: bool,
}

/// Serialize a delay as whole milliseconds (`requeueAfterMs`), saturating.
pub(crate) fn serialize_millis<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        None => s.serialize_none(),
    }
}

/// Why a plugin's output was refused. Nothing of a refused response is applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResponseError {
    /// The strings of the response add up to more than [`OutputLimits::max_bytes`].
    #[error("response has {bytes} bytes, more than the limit of {limit}")]
    TooLarge {
        /// Bytes returned.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// The response's JSON would take more than [`PARSED_SIZE_FACTOR`] × [`OutputLimits::max_bytes`]
    /// once parsed (estimated on its bytes, before parsing: [`parsed_size`]).
    #[error(
        "response would take about {estimate} bytes parsed, more than {PARSED_SIZE_FACTOR} times the limit of {limit} \
         (its JSON is dense: many small values)"
    )]
    TooDense {
        /// The estimate.
        estimate: usize,
        /// `maxResponseBytes`.
        limit: usize,
    },
    /// The response holds more entries than [`OutputLimits::max_actions`].
    #[error("response has {count} actions, more than the limit of {limit}")]
    TooManyActions {
        /// Entries returned.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// A child or the status is not valid JSON.
    #[error("{what} is not valid JSON: {error}")]
    InvalidJson {
        /// Which part, e.g. `child #2`.
        what: String,
        /// The parser's message.
        error: String,
    },
    /// A child or the status is JSON but not an object.
    #[error("{what} is not a JSON object")]
    NotAnObject {
        /// Which part.
        what: String,
    },
    /// A child lacks `apiVersion`, `kind` or `metadata.name`.
    #[error("{what} has no {field}")]
    MissingField {
        /// Which child.
        what: String,
        /// The missing field.
        field: &'static str,
    },
    /// The same child is listed twice.
    #[error("child {0} is listed more than once")]
    DuplicateChild(String),
    /// A condition has an empty or malformed type or reason, or a type is set twice.
    #[error("invalid condition: {0}")]
    InvalidCondition(String),
    /// An event has an empty or over-long reason or action.
    #[error("invalid event: {0}")]
    InvalidEvent(String),
    /// A field breaks a rule Kubernetes enforces on it (its size, its syntax, its type).
    #[error("{0}")]
    Field(FieldError),
}

impl From<FieldError> for ResponseError {
    fn from(e: FieldError) -> Self {
        ResponseError::Field(e)
    }
}

impl RawResponse {
    /// Parse and check everything the host will act on: first the size of every string
    /// ([`OutputLimits`]), then the JSON, then the fields as Kubernetes would check them.
    ///
    /// # Errors
    /// The first [`ResponseError`] found; nothing of the response should be applied then.
    pub fn validate(self, limits: &OutputLimits) -> Result<Response, ResponseError> {
        let estimate = self.parsed_estimate();
        self.validate_estimated(limits, estimate)
    }

    /// [`RawResponse::validate`] with the response's [`RawResponse::parsed_estimate`] already
    /// taken (for [`RawResponse::held_bytes`]), so the text is scanned once.
    ///
    /// # Errors
    /// As [`RawResponse::validate`].
    pub fn validate_estimated(mut self, limits: &OutputLimits, estimate: usize) -> Result<Response, ResponseError> {
        let bytes = self.bytes();
        if bytes > limits.max_bytes {
            return Err(ResponseError::TooLarge { bytes, limit: limits.max_bytes });
        }
        let count = self.children.len() + self.delete.len() + self.conditions.len() + self.events.len();
        if count > limits.max_actions {
            return Err(ResponseError::TooManyActions { count, limit: limits.max_actions });
        }
        if estimate > limits.max_bytes.saturating_mul(PARSED_SIZE_FACTOR) {
            return Err(ResponseError::TooDense { estimate, limit: limits.max_bytes });
        }
        let mut seen = HashSet::new();
        // Each child's text is dropped once parsed: the text and the tree of one child at a
        // time, not of all of them.
        let children = std::mem::take(&mut self.children)
            .into_iter()
            .enumerate()
            .map(|(i, text)| {
                let what = format!("child #{i}");
                let child = parse_object(&what, &text)?;
                drop(text);
                let present = |v: Option<&Value>| v.and_then(Value::as_str).is_some_and(|s| !s.is_empty());
                for (value, name) in [
                    (child.get("apiVersion"), "apiVersion"),
                    (child.get("kind"), "kind"),
                    (child.get("metadata").and_then(|m| m.get("name")), "metadata.name"),
                ] {
                    if !present(value) {
                        return Err(ResponseError::MissingField { what, field: name });
                    }
                }
                check_child(&what, &child)?;
                let id = ObjectRef::of_object(&child).expect("fields checked above");
                if !seen.insert(id.clone()) {
                    return Err(ResponseError::DuplicateChild(id.to_string()));
                }
                Ok(child)
            })
            .collect::<Result<Vec<_>, _>>()?;
        for (i, d) in self.delete.iter().enumerate() {
            check_delete(&format!("delete #{i}"), d)?;
        }
        let status = self.status.as_deref().map(|s| parse_object("status", s)).transpose()?;
        let mut types = HashSet::new();
        for c in &self.conditions {
            if !is_camel_identifier(&c.type_) || !types.insert(c.type_.as_str()) {
                return Err(ResponseError::InvalidCondition(format!(
                    "type {} is empty, malformed or set twice",
                    preview(&c.type_)
                )));
            }
            if !is_camel_identifier(&c.reason) {
                return Err(ResponseError::InvalidCondition(format!(
                    "condition {} has reason {}; a reason is a non-empty CamelCase word",
                    c.type_,
                    preview(&c.reason)
                )));
            }
            let field = || format!("condition {}: message", c.type_);
            check_size(field, c.message.len(), MAX_CONDITION_MESSAGE)?;
        }
        let events = self
            .events
            .into_iter()
            .map(|e| {
                if e.reason.is_empty() || e.reason.len() > 128 || e.action.is_empty() || e.action.len() > 128 {
                    return Err(ResponseError::InvalidEvent(format!(
                        "reason {} and action {} must each be 1 to 128 characters",
                        preview(&e.reason),
                        preview(&e.action)
                    )));
                }
                check_size(|| format!("event {}: note", e.reason), e.note.len(), MAX_EVENT_NOTE)?;
                Ok(e)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Response {
            children,
            delete: self.delete,
            status,
            conditions: self.conditions,
            events,
            requeue_after: self.requeue_after_ms.map(Duration::from_millis),
            finalized: self.finalized,
        })
    }
}

impl RawResponse {
    /// What the JSON of the response (its children and status) takes once parsed, estimated on
    /// its text ([`parsed_size`]) without parsing it.
    pub fn parsed_estimate(&self) -> usize {
        self.children.iter().chain(&self.status).map(|t| parsed_size(t)).fold(0, usize::saturating_add)
    }

    /// The most the host holds of this response while it parses, plans and writes it: its
    /// text plus its `estimate`d parsed form; only its text when the estimate is over what
    /// [`RawResponse::validate_estimated`] parses (such a response is refused on its estimate,
    /// before anything is parsed). What the response budget reserves for it: the parsed form
    /// of dense JSON is many times its text.
    pub fn held_bytes(&self, limits: &OutputLimits, estimate: usize) -> usize {
        let parsed = if estimate > limits.max_bytes.saturating_mul(PARSED_SIZE_FACTOR) { 0 } else { estimate };
        self.bytes().saturating_add(parsed)
    }

    /// Bytes of every string in the response, saturating.
    pub fn bytes(&self) -> usize {
        let strings = self
            .children
            .iter()
            .chain(&self.status)
            .map(String::len)
            .chain(
                self.delete
                    .iter()
                    .flat_map(|d| [d.api_version.len(), d.kind.len(), d.name.len(), d.namespace.as_ref().map_or(0, String::len)]),
            )
            .chain(self.conditions.iter().flat_map(|c| [c.type_.len(), c.reason.len(), c.message.len()]))
            .chain(self.events.iter().flat_map(|e| [e.reason.len(), e.action.len(), e.note.len()]));
        strings.fold(0, usize::saturating_add)
    }
}

/// A failed reconcile as it crossed the boundary (WIT 0.3.0 on; older plugins' failures carry
/// a message only): what the parent should show beside the failure, JSON still unparsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawFailure {
    /// The plugin's message, already one line and cut.
    pub message: String,
    /// Status fields, JSON object.
    pub status: Option<String>,
    /// Conditions.
    pub conditions: Vec<Condition>,
}

/// A validated failure: its status and conditions passed the checks of a [`Response`]'s.
/// Nothing else of a response (children, deletes, events, requeue) comes with a failure.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    /// Human-readable message for the Warning event and the host's failure condition.
    pub message: String,
    /// Status fields to apply with the failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
    /// Conditions to set with the failure, at most one per type.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

impl Failure {
    /// A failure that says nothing about the parent but its message (every failure of a WIT
    /// 0.1.0 or 0.2.0 plugin, and an admission call's).
    pub fn message(message: impl Into<String>) -> Self {
        Self { message: message.into(), status: None, conditions: Vec::new() }
    }

    /// Whether it carries status fields or conditions to apply.
    pub fn shows_anything(&self) -> bool {
        self.status.is_some() || !self.conditions.is_empty()
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl RawFailure {
    /// Bytes of its status and conditions, as [`RawResponse::bytes`] counts them.
    pub fn bytes(&self) -> usize {
        self.as_response().bytes()
    }

    /// What the host holds of it while it checks it, as [`RawResponse::held_bytes`] counts a
    /// response's: its text and its status's parsed form.
    pub fn held_bytes(&self, limits: &OutputLimits) -> usize {
        let shown = self.as_response();
        shown.held_bytes(limits, shown.parsed_estimate())
    }

    /// Check the status and conditions exactly as a response's ([`RawResponse::validate`]):
    /// the same size bounds, JSON and condition rules.
    ///
    /// # Errors
    /// The first [`ResponseError`]; nothing of the failure's status should be applied then.
    pub fn validate(self, limits: &OutputLimits) -> Result<Failure, ResponseError> {
        let shown = self.as_response().validate(limits)?;
        Ok(Failure { message: self.message, status: shown.status, conditions: shown.conditions })
    }

    fn as_response(&self) -> RawResponse {
        RawResponse { status: self.status.clone(), conditions: self.conditions.clone(), ..RawResponse::default() }
    }
}

fn parse_object(what: &str, text: &str) -> Result<Value, ResponseError> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| ResponseError::InvalidJson { what: what.to_owned(), error: e.to_string() })?;
    if value.is_object() { Ok(value) } else { Err(ResponseError::NotAnObject { what: what.to_owned() }) }
}

/// `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`, at most 316 characters (metav1.Condition).
fn is_camel_identifier(s: &str) -> bool {
    s.len() <= 316
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b',' | b':'))
        && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(name: &str) -> String {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}}).to_string()
    }

    fn condition(t: &str, reason: &str) -> Condition {
        Condition { type_: t.into(), status: ConditionStatus::True, reason: reason.into(), message: String::new() }
    }

    #[test]
    fn a_failures_status_and_conditions_pass_the_checks_of_a_responses() {
        let raw = RawFailure {
            message: "spec.size is required".into(),
            status: Some(r#"{"phase":"Invalid"}"#.into()),
            conditions: vec![condition("Ready", "InvalidSpec")],
        };
        let failure = raw.clone().validate(&OutputLimits::default()).unwrap();
        assert_eq!(failure.status, Some(json!({"phase": "Invalid"})));
        assert_eq!(failure.conditions, raw.conditions);
        assert_eq!(failure.to_string(), "spec.size is required");
        assert!(failure.shows_anything() && !Failure::message("m").shows_anything());
        let list = RawFailure { status: Some("[1]".into()), ..raw.clone() };
        assert!(matches!(list.validate(&OutputLimits::default()), Err(ResponseError::NotAnObject { .. })));
        let twice = RawFailure { conditions: vec![condition("Ready", "A"), condition("Ready", "B")], ..raw.clone() };
        assert!(matches!(twice.validate(&OutputLimits::default()), Err(ResponseError::InvalidCondition(_))));
        let limits = OutputLimits { max_bytes: 10, max_actions: 10 };
        assert_eq!(raw.bytes(), 19 + 5 + 11);
        assert!(matches!(raw.validate(&limits), Err(ResponseError::TooLarge { bytes: 35, limit: 10 })));
    }

    #[test]
    fn well_formed_output_validates() {
        let raw = RawResponse {
            children: vec![deployment("a")],
            status: Some(r#"{"nodes":[]}"#.into()),
            conditions: vec![condition("Available", "MinimumReplicasAvailable")],
            requeue_after_ms: Some(1500),
            ..Default::default()
        };
        let r = raw.validate(&OutputLimits::default()).unwrap();
        assert_eq!(r.children[0]["kind"], "Deployment");
        assert_eq!(r.requeue_after, Some(Duration::from_millis(1500)));
        assert_eq!(serde_json::to_value(&r).unwrap()["requeueAfterMs"], 1500);
    }

    #[test]
    fn child_that_is_not_json_is_refused() {
        let raw = RawResponse { children: vec!["{nope".into()], ..Default::default() };
        assert!(matches!(raw.validate(&OutputLimits::default()), Err(ResponseError::InvalidJson { .. })));
    }

    #[test]
    fn child_without_kind_is_refused() {
        let raw = RawResponse { children: vec![r#"{"apiVersion":"v1","metadata":{"name":"x"}}"#.into()], ..Default::default() };
        let err = raw.validate(&OutputLimits::default()).unwrap_err();
        assert_eq!(err.to_string(), "child #0 has no kind");
    }

    #[test]
    fn duplicate_children_are_refused() {
        let raw = RawResponse { children: vec![deployment("a"), deployment("a")], ..Default::default() };
        assert!(matches!(raw.validate(&OutputLimits::default()), Err(ResponseError::DuplicateChild(_))));
    }

    #[test]
    fn status_must_be_an_object() {
        let raw = RawResponse { status: Some("[1]".into()), ..Default::default() };
        assert!(matches!(raw.validate(&OutputLimits::default()), Err(ResponseError::NotAnObject { .. })));
    }

    #[test]
    fn oversized_output_is_refused_before_parsing() {
        let limits = OutputLimits { max_bytes: 10, max_actions: 2 };
        let raw = RawResponse { children: vec!["x".repeat(11)], ..Default::default() };
        assert!(matches!(raw.validate(&limits), Err(ResponseError::TooLarge { bytes: 11, limit: 10 })));
        let raw = RawResponse { children: vec!["{}".into(); 3], ..Default::default() };
        assert!(matches!(raw.validate(&limits), Err(ResponseError::TooManyActions { count: 3, limit: 2 })));
    }

    #[test]
    fn conditions_need_camel_case_reasons_and_unique_types() {
        let bad_reason = RawResponse { conditions: vec![condition("Ready", "not ok")], ..Default::default() };
        assert!(matches!(bad_reason.validate(&OutputLimits::default()), Err(ResponseError::InvalidCondition(_))));
        let twice = RawResponse { conditions: vec![condition("Ready", "A"), condition("Ready", "B")], ..Default::default() };
        assert!(matches!(twice.validate(&OutputLimits::default()), Err(ResponseError::InvalidCondition(_))));
    }

    fn event(note: &str) -> Event {
        Event { type_: EventType::Normal, reason: "Created".into(), action: "Create".into(), note: note.into() }
    }

    fn delete(namespace: Option<&str>, name: &str) -> ObjectRef {
        ObjectRef { api_version: "v1".into(), kind: "ConfigMap".into(), namespace: namespace.map(Into::into), name: name.into() }
    }

    #[test]
    fn children_and_deletes_are_checked_as_kubernetes_would() {
        let err = refusal(child(json!({"name": "Bad_Name"})));
        assert!(err.starts_with("child #0: metadata.name \"Bad_Name\" is not a DNS-1123 subdomain"), "{err}");
        let err = refusal(RawResponse { delete: vec![delete(None, "a"), delete(Some("No"), "a")], ..Default::default() });
        assert!(err.starts_with("delete #1: namespace \"No\" is not a DNS-1123 label"), "{err}");
    }

    fn refusal(raw: RawResponse) -> String {
        raw.validate(&OutputLimits::default()).unwrap_err().to_string()
    }

    fn child(metadata: Value) -> RawResponse {
        RawResponse {
            children: vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}).to_string()],
            ..Default::default()
        }
    }

    #[test]
    fn dense_json_under_the_byte_limit_is_refused_before_it_is_parsed() {
        let limits = OutputLimits { max_bytes: 1 << 20, max_actions: 10 };
        let zeros = format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"x\"}},\"z\":[{}0]}}",
            "0,".repeat(400_000)
        );
        assert!(zeros.len() < limits.max_bytes);
        let raw = RawResponse { children: vec![zeros], ..RawResponse::default() };
        let err = raw.validate(&limits).unwrap_err();
        assert!(matches!(err, ResponseError::TooDense { limit: 1_048_576, .. }), "{err}");
        let plain = format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"x\"}},\"data\":{{\"k\":\"{}\"}}}}",
            "a".repeat(900_000)
        );
        let raw = RawResponse { children: vec![plain], ..RawResponse::default() };
        assert_eq!(raw.validate(&limits).unwrap().children.len(), 1, "as many bytes of string are fine");
    }

    #[test]
    fn a_response_holds_its_text_and_its_parsed_form_at_most_as_dense_as_validation_admits() {
        let limits = OutputLimits { max_bytes: 1 << 20, max_actions: 10 };
        let child =
            |body: String| format!("{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"x\"}},{body}}}");
        // A string costs about its bytes twice (text and parsed), whatever its length.
        let plain = RawResponse {
            children: vec![child(format!("\"data\":{{\"k\":\"{}\"}}", "a".repeat(500_000)))],
            ..Default::default()
        };
        let held = plain.held_bytes(&limits, plain.parsed_estimate());
        assert!((1_000_000..1_001_000).contains(&held), "{held}");
        // Dense JSON of the same text holds many times more once parsed: that is reserved.
        let dense = RawResponse { children: vec![child(format!("\"z\":[{}0]", "0,".repeat(40_000)))], ..Default::default() };
        let held = dense.held_bytes(&limits, dense.parsed_estimate());
        assert!(held > 20 * dense.bytes(), "{held} for {} bytes of text", dense.bytes());
        // Beyond what validation parses, only the text is held: it is refused before parsing.
        let refused = RawResponse { children: vec![child(format!("\"z\":[{}0]", "0,".repeat(400_000)))], ..Default::default() };
        let estimate = refused.parsed_estimate();
        assert_eq!(refused.held_bytes(&limits, estimate), refused.bytes());
        assert!(matches!(refused.validate_estimated(&limits, estimate), Err(ResponseError::TooDense { .. })));
    }

    #[test]
    fn every_string_counts_toward_max_bytes() {
        let limits = OutputLimits { max_bytes: 100, max_actions: 10 };
        let long = "x".repeat(101);
        let mut message = condition("Ready", "Ok");
        message.message.clone_from(&long);
        let cases = [
            RawResponse { conditions: vec![message], ..Default::default() },
            RawResponse { events: vec![event(&long)], ..Default::default() },
            RawResponse { delete: vec![delete(None, &long)], ..Default::default() },
            RawResponse { delete: vec![delete(Some(&long), "a")], ..Default::default() },
        ];
        for raw in cases {
            let err = raw.clone().validate(&limits).unwrap_err();
            assert!(matches!(err, ResponseError::TooLarge { limit: 100, .. }), "{raw:?}: {err}");
        }
    }

    #[test]
    fn condition_messages_over_32_kib_are_refused_naming_the_condition() {
        let mut c = condition("Ready", "Ok");
        c.message = "m".repeat(40_000);
        let err = refusal(RawResponse { conditions: vec![c.clone()], ..Default::default() });
        assert_eq!(err, "condition Ready: message has 40000 bytes, more than Kubernetes' 32768");
        c.message = "m".repeat(MAX_CONDITION_MESSAGE);
        assert!(RawResponse { conditions: vec![c], ..Default::default() }.validate(&OutputLimits::default()).is_ok());
    }

    /// Refused rather than truncated: a cut note would be recorded as if the plugin wrote it.
    #[test]
    fn event_notes_over_1_kib_are_refused_not_truncated() {
        let err = refusal(RawResponse { events: vec![event(&"é".repeat(1000))], ..Default::default() });
        assert_eq!(err, "event Created: note has 2000 bytes, more than Kubernetes' 1024");
        let ok = RawResponse { events: vec![event(&"n".repeat(1024))], ..Default::default() };
        assert_eq!(ok.validate(&OutputLimits::default()).unwrap().events[0].note.len(), 1024);
    }

    #[test]
    fn refusals_quote_at_most_64_bytes_of_a_value() {
        let mut c = condition("Ready", "Ok");
        c.reason = "r r".repeat(1 << 20);
        let err = refusal(RawResponse { conditions: vec![c], ..Default::default() });
        assert!(err.len() < 300, "{}", &err[..300]);
        let e = Event { reason: "x".repeat(1 << 20), ..event("") };
        assert!(refusal(RawResponse { events: vec![e], ..Default::default() }).len() < 300);
    }
}
