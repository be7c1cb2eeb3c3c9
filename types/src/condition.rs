//! Conditions and events a plugin records about its parent.

use serde::{Deserialize, Serialize};

/// Status of a [`Condition`], as in `metav1.Condition`.
///
/// `bool` converts into it, so `Condition::new("Ready", true, ..)` reads naturally.
///
/// ```
/// use wasmop_types::ConditionStatus;
/// assert_eq!(ConditionStatus::from(true), ConditionStatus::True);
/// assert_eq!(ConditionStatus::False.as_str(), "False");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// The plugin cannot tell.
    Unknown,
}

impl ConditionStatus {
    /// `"True"`, `"False"` or `"Unknown"`, as written in `status.conditions`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(holds: bool) -> Self {
        if holds { Self::True } else { Self::False }
    }
}

/// A condition to set on the parent's `status.conditions` (by type).
///
/// The host fills in `observedGeneration` and `lastTransitionTime`.
///
/// ```
/// use wasmop_types::{Condition, ConditionStatus};
///
/// let c = Condition::new("Available", false, "Progressing", "1/3 replicas available");
/// assert_eq!(c.status, ConditionStatus::False);
/// let ready = Condition::true_("Ready", "Reconciled", "all children applied");
/// assert_eq!(ready.type_, "Ready");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    /// Condition type in CamelCase, e.g. `Available`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// Machine-readable reason in CamelCase, e.g. `MinimumReplicasAvailable`.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

impl Condition {
    /// A condition with any status (`bool` or [`ConditionStatus`]).
    ///
    /// ```
    /// let c = wasmop_types::Condition::new("Degraded", wasmop_types::ConditionStatus::Unknown, "NoData", "");
    /// assert_eq!(c.status.as_str(), "Unknown");
    /// ```
    pub fn new(
        type_: impl Into<String>,
        status: impl Into<ConditionStatus>,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self { type_: type_.into(), status: status.into(), reason: reason.into(), message: message.into() }
    }

    /// A condition that holds.
    ///
    /// ```
    /// let c = wasmop_types::Condition::true_("Ready", "Reconciled", "");
    /// assert_eq!(c.status, wasmop_types::ConditionStatus::True);
    /// ```
    pub fn true_(type_: impl Into<String>, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(type_, ConditionStatus::True, reason, message)
    }

    /// A condition that does not hold.
    ///
    /// ```
    /// let c = wasmop_types::Condition::false_("Ready", "Waiting", "0/1 pods ready");
    /// assert_eq!(c.status, wasmop_types::ConditionStatus::False);
    /// ```
    pub fn false_(type_: impl Into<String>, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(type_, ConditionStatus::False, reason, message)
    }

    /// A condition whose state the plugin cannot tell.
    ///
    /// ```
    /// let c = wasmop_types::Condition::unknown("Ready", "NoData", "");
    /// assert_eq!(c.status, wasmop_types::ConditionStatus::Unknown);
    /// ```
    pub fn unknown(type_: impl Into<String>, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(type_, ConditionStatus::Unknown, reason, message)
    }
}

/// Type of a Kubernetes event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something needs attention.
    Warning,
}

/// A Kubernetes event to record about the parent (`events.k8s.io/v1`).
///
/// ```
/// use wasmop_types::{Event, EventType};
///
/// let e = Event::normal("ScaledUp", "Scale", "replicas 1 -> 3");
/// assert_eq!(e.type_, EventType::Normal);
/// assert_eq!(Event::warning("BadSpec", "Validate", "size < 0").type_, EventType::Warning);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Normal or Warning.
    #[serde(rename = "type")]
    pub type_: EventType,
    /// Why the action was taken, CamelCase, e.g. `ScaledUp`.
    pub reason: String,
    /// What was done, CamelCase, e.g. `Scale`.
    pub action: String,
    /// Human-readable description, at most 1 KiB as in `events.k8s.io/v1`: the host refuses a
    /// response with a longer note rather than record a different text than the plugin wrote.
    pub note: String,
}

impl Event {
    /// An event of any type.
    pub fn new(type_: EventType, reason: impl Into<String>, action: impl Into<String>, note: impl Into<String>) -> Self {
        Self { type_, reason: reason.into(), action: action.into(), note: note.into() }
    }

    /// A `Normal` event: something expected happened.
    ///
    /// ```
    /// let e = wasmop_types::Event::normal("Created", "Create", "created Deployment web");
    /// assert_eq!(e.reason, "Created");
    /// ```
    pub fn normal(reason: impl Into<String>, action: impl Into<String>, note: impl Into<String>) -> Self {
        Self::new(EventType::Normal, reason, action, note)
    }

    /// A `Warning` event: something needs attention.
    ///
    /// ```
    /// let e = wasmop_types::Event::warning("InvalidSpec", "Validate", "spec.size is negative");
    /// assert_eq!(e.note, "spec.size is negative");
    /// ```
    pub fn warning(reason: impl Into<String>, action: impl Into<String>, note: impl Into<String>) -> Self {
        Self::new(EventType::Warning, reason, action, note)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bool_converts_to_true_and_false() {
        assert_eq!(Condition::new("A", true, "R", "").status, ConditionStatus::True);
        assert_eq!(Condition::new("A", false, "R", "").status, ConditionStatus::False);
    }

    #[test]
    fn shorthand_constructors_set_every_field() {
        let c = Condition::false_("Available", "Progressing", "1/3 replicas available");
        assert_eq!(
            c,
            Condition {
                type_: "Available".into(),
                status: ConditionStatus::False,
                reason: "Progressing".into(),
                message: "1/3 replicas available".into(),
            }
        );
    }

    #[test]
    fn status_strings_match_metav1() {
        let all = [ConditionStatus::True, ConditionStatus::False, ConditionStatus::Unknown];
        assert_eq!(all.map(ConditionStatus::as_str), ["True", "False", "Unknown"]);
    }

    #[test]
    fn serde_forms_are_the_kubernetes_ones() {
        let c = Condition::true_("Ready", "Reconciled", "ok");
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            serde_json::json!({"type": "Ready", "status": "True", "reason": "Reconciled", "message": "ok"})
        );
        let e = Event::warning("BadSpec", "Validate", "n");
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"type": "Warning", "reason": "BadSpec", "action": "Validate", "note": "n"})
        );
        assert_eq!(serde_json::from_value::<Condition>(serde_json::to_value(&c).unwrap()).unwrap(), c);
    }

    #[test]
    fn event_constructors_pick_the_type() {
        assert_eq!(Event::normal("a", "b", "c").type_, EventType::Normal);
        let w = Event::warning("a", "b", "c");
        assert_eq!((w.type_, w.reason.as_str(), w.action.as_str(), w.note.as_str()), (EventType::Warning, "a", "b", "c"));
    }
}
