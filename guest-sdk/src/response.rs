//! The response: the desired state and the actions the host should take.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::request::object_name;
use crate::{Condition, Error, Event, Kind, ObjectRef};

/// What the host should do for one parent; built with chained, infallible methods.
///
/// [`apply`](Response::apply) and [`status`](Response::status) take anything `Serialize` (a
/// k8s-openapi `Deployment`, your own struct, a `serde_json::Value`). They check cheaply that a
/// child is a JSON object with `apiVersion`, `kind` and `metadata.name`, and that a status is a
/// JSON object. Such a mistake is a bug in the plugin, so rather than making every call
/// fallible the response remembers the first one and drops the bad value: the SDK then turns
/// the whole response into a terminal error naming it when it is handed to the host. Call
/// [`validate`](Response::validate) to surface it yourself (e.g. with `?`), and
/// [`error`](Response::error) in tests.
///
/// ```
/// use std::time::Duration;
/// use serde_json::json;
/// use wasmop_sdk::{Condition, Event, Kind, Response};
///
/// let resp = Response::new()
///     .apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-config"},
///                   "data": {"port": "8080"}}))
///     .status(json!({"phase": "Ready"}))
///     .condition(Condition::true_("Ready", "Reconciled", "1 child applied"))
///     .event(Event::normal("Applied", "Apply", "applied ConfigMap web-config"))
///     .requeue_after(Duration::from_secs(300));
///
/// assert!(resp.error().is_none());
/// assert_eq!(resp.children().len(), 1);
/// assert!(resp.child(&Kind::new("", "v1", "ConfigMap"), "web-config").is_some());
/// assert_eq!(resp.status_patch().unwrap()["phase"], "Ready");
/// assert_eq!(resp.condition_of("Ready").unwrap().reason, "Reconciled");
/// assert_eq!(resp.requeue_delay(), Some(Duration::from_secs(300)));
///
/// let bad = Response::new().apply(json!({"kind": "ConfigMap"}));
/// assert!(bad.validate().unwrap_err().message().contains("apiVersion"));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Response {
    pub(crate) children: Vec<Value>,
    pub(crate) raw_children: Vec<String>,
    pub(crate) delete: Vec<ObjectRef>,
    pub(crate) status: Option<Value>,
    pub(crate) conditions: Vec<Condition>,
    pub(crate) events: Vec<Event>,
    pub(crate) requeue_after: Option<Duration>,
    pub(crate) finalized: bool,
    pub(crate) error: Option<Error>,
}

impl Response {
    /// An empty response: no children, no status change, nothing to do.
    pub fn new() -> Self {
        Self::default()
    }

    /// Desire a child: the host server-side applies it with a controller ownerReference to the
    /// parent (its namespace defaults to the parent's). A value that does not serialize to an
    /// object with `apiVersion`, `kind` and `metadata.name` is dropped and recorded as the
    /// response's error.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    ///
    /// let cm = ConfigMap {
    ///     metadata: ObjectMeta { name: Some("settings".into()), ..Default::default() },
    ///     ..Default::default()
    /// };
    /// let resp = wasmop_sdk::Response::new().apply(&cm);
    /// assert_eq!(resp.children()[0]["kind"], "ConfigMap"); // k8s-openapi fills in apiVersion/kind
    /// ```
    #[must_use]
    pub fn apply(mut self, child: impl Serialize) -> Self {
        let index = self.children.len() + self.raw_children.len();
        match serde_json::to_value(child).map_err(not_serializable).and_then(check_child) {
            Ok(value) => self.children.push(value),
            Err(e) => self.fail(e.context(format_args!("child #{index}"))),
        }
        self
    }

    /// Escape hatch for host tests ONLY: pass a child's JSON text through unchecked, even if it
    /// is not JSON at all. The host must survive whatever a plugin sends; a real plugin never
    /// needs this.
    #[doc(hidden)]
    #[must_use]
    pub fn apply_raw_json(mut self, json: impl Into<String>) -> Self {
        self.raw_children.push(json.into());
        self
    }

    /// Delete a child explicitly (without waiting for pruning).
    ///
    /// ```
    /// use wasmop_sdk::{Kind, ObjectRef, Response};
    /// let old = ObjectRef::namespaced(&Kind::new("", "v1", "Service"), "default", "legacy");
    /// assert_eq!(Response::new().delete(old.clone()).deletions(), [old]);
    /// ```
    #[must_use]
    pub fn delete(mut self, object: ObjectRef) -> Self {
        self.delete.push(object);
        self
    }

    /// Fields of the parent's status to apply through the status subresource. Must serialize
    /// to a JSON object; calling it again merges the new top-level fields into the earlier
    /// ones. Leave it out to keep the status as it is. Conditions go through
    /// [`condition`](Response::condition), not here.
    ///
    /// ```
    /// use serde_json::json;
    /// let resp = wasmop_sdk::Response::new().status(json!({"nodes": ["a"]})).status(json!({"phase": "Ready"}));
    /// assert_eq!(resp.status_patch(), Some(&json!({"nodes": ["a"], "phase": "Ready"})));
    /// ```
    #[must_use]
    pub fn status(mut self, status: impl Serialize) -> Self {
        match serde_json::to_value(status).map_err(not_serializable) {
            Ok(Value::Object(fields)) => match &mut self.status {
                Some(Value::Object(existing)) => existing.extend(fields),
                _ => self.status = Some(Value::Object(fields)),
            },
            Ok(other) => self.fail(Error::terminal(format!("status must be a JSON object, got {}", json_type(&other)))),
            Err(e) => self.fail(e.context("status")),
        }
        self
    }

    /// Set a condition on the parent's `status.conditions` (by type; a later one with the same
    /// type wins).
    #[must_use]
    pub fn condition(mut self, condition: Condition) -> Self {
        self.conditions.retain(|c| c.type_ != condition.type_);
        self.conditions.push(condition);
        self
    }

    /// Record an event about the parent.
    #[must_use]
    pub fn event(mut self, event: Event) -> Self {
        self.events.push(event);
        self
    }

    /// Reconcile this parent again after this delay even if nothing changes (millisecond
    /// precision).
    #[must_use]
    pub fn requeue_after(mut self, delay: Duration) -> Self {
        self.requeue_after = Some(delay);
        self
    }

    /// When finalizing: cleanup is complete and the host may remove its finalizer.
    #[must_use]
    pub fn finalized(mut self) -> Self {
        self.finalized = true;
        self
    }

    /// The desired children, in the order they were applied (invalid ones are not here).
    pub fn children(&self) -> &[Value] {
        &self.children
    }

    /// The desired child of this kind with this name, if any.
    pub fn child(&self, kind: &Kind, name: &str) -> Option<&Value> {
        self.children.iter().find(|c| kind.matches(c) && object_name(c) == Some(name))
    }

    /// The explicit deletions.
    pub fn deletions(&self) -> &[ObjectRef] {
        &self.delete
    }

    /// The status fields to apply, if any.
    pub fn status_patch(&self) -> Option<&Value> {
        self.status.as_ref()
    }

    /// The conditions to set.
    pub fn conditions(&self) -> &[Condition] {
        &self.conditions
    }

    /// The condition of this type, if one is set.
    pub fn condition_of(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// The events to record.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The requeue delay, if any.
    pub fn requeue_delay(&self) -> Option<Duration> {
        self.requeue_after
    }

    /// Whether the response says cleanup is complete.
    pub fn is_finalized(&self) -> bool {
        self.finalized
    }

    /// The first mistake recorded while building (a child or status of the wrong shape).
    pub fn error(&self) -> Option<&Error> {
        self.error.as_ref()
    }

    /// The response, or the first mistake recorded while building it.
    ///
    /// ```
    /// # fn reconcile() -> Result<wasmop_sdk::Response, wasmop_sdk::Error> {
    /// let resp = wasmop_sdk::Response::new().status(serde_json::json!({"phase": "Ready"})).validate()?;
    /// # Ok(resp) }
    /// # assert!(reconcile().is_ok());
    /// ```
    pub fn validate(self) -> Result<Self, Error> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self),
        }
    }

    fn fail(&mut self, error: Error) {
        self.error.get_or_insert(error);
    }
}

/// Check that a child is an object with the fields the host needs.
fn check_child(value: Value) -> Result<Value, Error> {
    let Value::Object(map) = &value else {
        return Err(Error::terminal(format!("must be a JSON object, got {}", json_type(&value))));
    };
    for field in ["apiVersion", "kind"] {
        if map.get(field).and_then(Value::as_str).is_none_or(str::is_empty) {
            return Err(Error::terminal(format!("has no {field}")));
        }
    }
    if object_name(&value).is_none_or(str::is_empty) {
        return Err(Error::terminal(format!("{} has no metadata.name", map["kind"].as_str().unwrap_or_default())));
    }
    Ok(value)
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A child or status whose `Serialize` failed: a terminal error (a bug in the plugin's types).
fn not_serializable(e: serde_json::Error) -> Error {
    Error::terminal(format!("cannot be serialized to JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
    }

    #[test]
    fn apply_keeps_valid_children_in_order() {
        let resp = Response::new().apply(cm("a")).apply(cm("b"));
        assert_eq!(resp.children().iter().filter_map(object_name).collect::<Vec<_>>(), ["a", "b"]);
        assert!(resp.validate().is_ok());
    }

    #[test]
    fn apply_records_the_first_invalid_child_and_drops_it() {
        let resp =
            Response::new().apply(cm("a")).apply(json!({"apiVersion": "v1", "metadata": {"name": "x"}})).apply(json!([1, 2]));
        assert_eq!(resp.children().len(), 1);
        let e = resp.error().unwrap();
        assert!(!e.is_retryable());
        assert_eq!(e.message(), "child #1: has no kind");
    }

    #[test]
    fn apply_rejects_non_objects_and_nameless_objects() {
        assert_eq!(Response::new().apply("text").error().unwrap().message(), "child #0: must be a JSON object, got a string");
        let nameless = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {}});
        assert_eq!(Response::new().apply(nameless).error().unwrap().message(), "child #0: Secret has no metadata.name");
    }

    #[test]
    fn apply_surfaces_serialization_failures() {
        struct Broken;
        impl Serialize for Broken {
            fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
                Err(serde::ser::Error::custom("boom"))
            }
        }
        let e = Response::new().apply(Broken).validate().unwrap_err();
        assert_eq!(e.message(), "child #0: cannot be serialized to JSON: boom");
    }

    #[test]
    fn status_must_be_an_object_and_merges() {
        assert!(Response::new().status(json!([1])).error().unwrap().message().contains("an array"));
        let resp = Response::new().status(json!({"a": 1, "b": 1})).status(json!({"b": 2}));
        assert_eq!(resp.status_patch(), Some(&json!({"a": 1, "b": 2})));
    }

    #[test]
    fn later_condition_of_same_type_wins() {
        let resp = Response::new()
            .condition(Condition::false_("Ready", "A", ""))
            .condition(Condition::true_("Synced", "B", ""))
            .condition(Condition::true_("Ready", "C", ""));
        assert_eq!(resp.conditions().len(), 2);
        assert_eq!(resp.condition_of("Ready").unwrap().reason, "C");
    }

    #[test]
    fn raw_json_bypasses_checks() {
        let resp = Response::new().apply_raw_json("{not json");
        assert!(resp.error().is_none());
        assert!(resp.children().is_empty());
        assert_eq!(resp.raw_children, ["{not json"]);
    }

    #[test]
    fn finalized_and_events_are_recorded() {
        let resp = Response::new().event(Event::warning("R", "A", "N")).finalized();
        assert!(resp.is_finalized());
        assert_eq!(resp.events().len(), 1);
    }
}
