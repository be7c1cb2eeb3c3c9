//! The parent's status: plugin fields plus `metav1.Condition`s with observedGeneration and
//! lastTransitionTime kept stable.

use serde_json::{Map, Value, json};

use super::diff::contains;
use crate::contract::{Condition, ConditionStatus, Failure};
use crate::policy::ReconciledCondition;

/// The condition type the host itself maintains: whether the last reconcile succeeded.
pub const RECONCILED: &str = "Reconciled";

/// What the host adds to the conditions of a successful reconcile: the time a changed condition
/// transitioned, and whether its own `Reconciled` condition is set or removed.
#[derive(Debug, Clone, Copy)]
pub struct HostConditions<'a> {
    /// The current time as a Kubernetes timestamp ([`timestamp_now`]).
    pub now: &'a str,
    /// The plugin's policy: [`ReconciledCondition::Always`] sets `Reconciled=True`,
    /// [`ReconciledCondition::OnFailure`] removes a `Reconciled` condition a failure left.
    pub reconciled: ReconciledCondition,
}

impl<'a> HostConditions<'a> {
    /// A stamp at `now` that sets `Reconciled=True` (the default policy).
    pub fn always(now: &'a str) -> Self {
        Self { now, reconciled: ReconciledCondition::Always }
    }
}

/// `status.conditions` after setting `updates`: a condition whose status did not change keeps
/// its `lastTransitionTime`; every updated condition gets `observedGeneration`; conditions not
/// mentioned are kept as they are.
pub fn merge_conditions(existing: &[Value], updates: &[Condition], generation: Option<i64>, now: &str) -> Vec<Value> {
    let mut merged: Vec<Value> = existing.to_vec();
    for c in updates {
        let status = match c.status {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        };
        let position = merged.iter().position(|e| e["type"] == c.type_.as_str());
        let transition = position
            .map(|i| &merged[i])
            .filter(|e| e["status"] == status)
            .and_then(|e| e["lastTransitionTime"].as_str())
            .unwrap_or(now)
            .to_owned();
        let mut value = json!({
            "type": c.type_,
            "status": status,
            "reason": c.reason,
            "message": c.message,
            "lastTransitionTime": transition,
        });
        if let Some(g) = generation {
            value["observedGeneration"] = json!(g);
        }
        match position {
            Some(i) => merged[i] = value,
            None => merged.push(value),
        }
    }
    merged
}

/// The merge patch of the parent's status (`{"status": {...}}`) that sets the plugin's fields
/// and conditions and removes the condition of type `removed` (unless `conditions` sets it), or
/// `None` when the parent already has them all.
pub fn status_patch(
    parent: &Value,
    fields: Option<&Value>,
    conditions: &[Condition],
    removed: Option<&str>,
    now: &str,
) -> Option<Value> {
    let observed = parent.get("status").cloned().unwrap_or_else(|| Value::Object(Map::new()));
    let mut status = fields.cloned().unwrap_or_else(|| Value::Object(Map::new()));
    let mut existing = observed.get("conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let before = existing.len();
    if let Some(gone) = removed {
        existing.retain(|c| c["type"] != gone);
    }
    if !conditions.is_empty() || existing.len() != before {
        let generation = parent.pointer("/metadata/generation").and_then(Value::as_i64);
        status["conditions"] = Value::Array(merge_conditions(&existing, conditions, generation, now));
    }
    if status.as_object().is_some_and(Map::is_empty) || contains(&observed, &status) {
        return None;
    }
    Some(json!({ "status": status }))
}

/// The status patch recording a failed reconcile: the fields and conditions the plugin's own
/// failure shows (WIT 0.3.0 on), merged as a response's (conditions by type, with
/// `observedGeneration`), then the host's `Reconciled=False` naming `reason` (it replaces a
/// `Reconciled` condition of the plugin's); `None` when the parent has them all.
pub fn failure_status_patch(parent: &Value, reason: &str, message: &str, shown: Option<&Failure>, now: &str) -> Option<Value> {
    let mut conditions: Vec<Condition> = shown.map(|f| f.conditions.clone()).unwrap_or_default();
    conditions.retain(|c| c.type_ != RECONCILED);
    conditions.push(Condition {
        type_: RECONCILED.into(),
        status: ConditionStatus::False,
        reason: reason.into(),
        message: message.into(),
    });
    status_patch(parent, shown.and_then(|f| f.status.as_ref()), &conditions, None, now)
}

/// The current time as a Kubernetes timestamp (RFC 3339, seconds, UTC).
pub fn timestamp_now() -> String {
    k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(status: ConditionStatus, reason: &str) -> Condition {
        Condition { type_: "Available".into(), status, reason: reason.into(), message: String::new() }
    }

    #[test]
    fn unchanged_status_keeps_transition_time() {
        let existing =
            vec![json!({"type": "Available", "status": "True", "reason": "A", "message": "", "lastTransitionTime": "t0"})];
        let merged = merge_conditions(&existing, &[cond(ConditionStatus::True, "B")], Some(2), "t1");
        assert_eq!(merged[0]["lastTransitionTime"], "t0");
        assert_eq!(merged[0]["reason"], "B");
        assert_eq!(merged[0]["observedGeneration"], 2);
        let flipped = merge_conditions(&existing, &[cond(ConditionStatus::False, "B")], Some(2), "t1");
        assert_eq!(flipped[0]["lastTransitionTime"], "t1");
    }

    #[test]
    fn other_conditions_are_kept() {
        let existing = vec![json!({"type": "Other", "status": "True"})];
        let merged = merge_conditions(&existing, &[cond(ConditionStatus::True, "A")], None, "t");
        assert_eq!(merged.len(), 2);
        assert!(merged[1].get("observedGeneration").is_none());
    }

    #[test]
    fn patch_is_skipped_when_nothing_changes() {
        let parent = json!({"metadata": {"generation": 1}, "status": {"nodes": ["a"], "conditions": [
            {"type": "Available", "status": "True", "reason": "A", "message": "", "lastTransitionTime": "t0", "observedGeneration": 1}]}});
        assert_eq!(status_patch(&parent, Some(&json!({"nodes": ["a"]})), &[cond(ConditionStatus::True, "A")], None, "t1"), None);
        let patch = status_patch(&parent, Some(&json!({"nodes": ["a", "b"]})), &[], None, "t1").unwrap();
        assert_eq!(patch, json!({"status": {"nodes": ["a", "b"]}}));
    }

    #[test]
    fn a_removed_condition_is_left_out_of_the_patch_and_absent_is_no_change() {
        let failed = json!({"type": RECONCILED, "status": "False", "reason": "Trap", "message": "", "lastTransitionTime": "t0"});
        let available = json!({"type": "Available", "status": "True", "reason": "A", "message": "",
            "lastTransitionTime": "t0", "observedGeneration": 1});
        let parent = json!({"metadata": {"generation": 1}, "status": {"conditions": [failed, available.clone()]}});
        let patch = status_patch(&parent, None, &[cond(ConditionStatus::True, "A")], Some(RECONCILED), "t1").unwrap();
        assert_eq!(patch, json!({"status": {"conditions": [available.clone()]}}));
        // Removal alone, the plugin setting no condition: still a patch.
        let patch = status_patch(&parent, None, &[], Some(RECONCILED), "t1").unwrap();
        assert_eq!(patch, json!({"status": {"conditions": [available.clone()]}}));
        // Nothing to remove: nothing to write.
        let healthy = json!({"metadata": {"generation": 1}, "status": {"conditions": [available]}});
        assert_eq!(status_patch(&healthy, None, &[cond(ConditionStatus::True, "A")], Some(RECONCILED), "t1"), None);
        assert_eq!(status_patch(&healthy, None, &[], Some(RECONCILED), "t1"), None);
    }

    fn invalid() -> Failure {
        Failure {
            message: "spec.size is required".into(),
            status: Some(json!({"phase": "Invalid"})),
            conditions: vec![
                Condition::false_("Ready", "InvalidSpec", "spec.size is required"),
                Condition::true_(RECONCILED, "Forged", "the plugin's own Reconciled"),
            ],
        }
    }

    #[test]
    fn a_failure_shows_its_status_and_conditions_beside_the_hosts_reconciled_false() {
        let parent = json!({"metadata": {"name": "m", "generation": 3}, "status": {"readyReplicas": 2}});
        let patch = failure_status_patch(
            &parent,
            "ReconcileFailed",
            "plugin error (terminal): spec.size is required",
            Some(&invalid()),
            "t",
        )
        .unwrap();
        let status = &patch["status"];
        assert_eq!(status["phase"], "Invalid");
        let conditions = status["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 2, "{conditions:?}");
        assert_eq!(
            conditions[0],
            json!({"type": "Ready", "status": "False", "reason": "InvalidSpec", "message": "spec.size is required",
                   "lastTransitionTime": "t", "observedGeneration": 3})
        );
        assert_eq!((&conditions[1]["type"], &conditions[1]["status"]), (&json!(RECONCILED), &json!("False")), "the host's wins");
        assert_eq!(conditions[1]["reason"], "ReconcileFailed");
        assert_eq!(conditions[1]["observedGeneration"], 3);
    }

    #[test]
    fn a_failure_showing_nothing_records_the_hosts_condition_only() {
        let parent = json!({"metadata": {"name": "m", "generation": 1}, "status": {"phase": "Running"}});
        for shown in [None, Some(&Failure::message("m"))] {
            let patch = failure_status_patch(&parent, "PluginTrapped", "trap", shown, "t").unwrap();
            assert_eq!(patch["status"].as_object().unwrap().len(), 1, "{patch}");
            assert_eq!(patch["status"]["conditions"][0]["reason"], "PluginTrapped");
        }
        let recorded = json!({"metadata": {"name": "m", "generation": 1}, "status": {"phase": "Invalid", "conditions": [
            {"type": "Ready", "status": "False", "reason": "InvalidSpec", "message": "spec.size is required",
             "lastTransitionTime": "t0", "observedGeneration": 1},
            {"type": RECONCILED, "status": "False", "reason": "ReconcileFailed", "message": "m",
             "lastTransitionTime": "t0", "observedGeneration": 1}]}});
        let again = Failure { conditions: vec![invalid().conditions[0].clone()], ..invalid() };
        assert_eq!(failure_status_patch(&recorded, "ReconcileFailed", "m", Some(&again), "t1"), None, "already shown: no write");
    }

    /// The Python and JavaScript SDK modules compute what the parent shows the same way, against
    /// the same vectors (`guest-sdk/vectors/sdk.json`).
    #[test]
    fn merged_conditions_match_the_shared_sdk_vectors() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk/vectors/sdk.json");
        let vectors: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let cases = vectors.pointer("/conditions/merge").and_then(Value::as_array).unwrap();
        assert!(!cases.is_empty());
        for case in cases {
            let existing = case["existing"].as_array().unwrap();
            let updates: Vec<Condition> = serde_json::from_value(case["updates"].clone()).unwrap();
            let merged = merge_conditions(existing, &updates, case["generation"].as_i64(), case["now"].as_str().unwrap());
            assert_eq!(Value::Array(merged), case["conditions"], "{}", case["about"]);
        }
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        let t = timestamp_now();
        assert_eq!(t.len(), 20);
        assert!(t.ends_with('Z'));
    }
}
