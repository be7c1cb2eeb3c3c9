//! `SidecarSet.status`: how many Pods it matches, how many carry its current sidecars, how many
//! of those are Ready.

use serde::Serialize;
use serde_json::Value;
use wasmop_sdk::Condition;

use crate::sidecarset::SidecarSet;

/// `SidecarSet.status` as the plugin writes it (conditions go through the response).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetStatus {
    /// Pods the selector (and namespace, if set) matches.
    pub matched_pods: i64,
    /// Matched Pods that carry the current sidecar hash.
    pub updated_pods: i64,
    /// Updated Pods whose `Ready` condition is `True`.
    pub ready_pods: i64,
    /// The `metadata.generation` these counts were made for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Count `pods` (any namespace) for `set`. Pods being deleted are not counted.
pub fn count<'a>(set: &SidecarSet, pods: impl IntoIterator<Item = &'a Value>) -> SidecarSetStatus {
    let mut status = SidecarSetStatus { observed_generation: set.generation, ..SidecarSetStatus::default() };
    for pod in pods {
        let namespace = pod.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
        if pod.pointer("/metadata/deletionTimestamp").is_some() || !set.applies_to(pod, namespace) {
            continue;
        }
        status.matched_pods += 1;
        if set.is_current_on(pod) {
            status.updated_pods += 1;
            if is_ready(pod) {
                status.ready_pods += 1;
            }
        }
    }
    status
}

/// Whether a Pod's `Ready` condition is `True`.
pub fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|conditions| conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// The `Updated` condition: `True` when every matched Pod carries the current sidecars.
pub fn updated_condition(status: &SidecarSetStatus) -> Condition {
    let message = format!("{}/{} matched Pods carry the current sidecars", status.updated_pods, status.matched_pods);
    if status.updated_pods == status.matched_pods {
        Condition::true_("Updated", "AllPodsUpdated", message)
    } else {
        // Sidecars are injected at Pod creation only: older Pods keep the previous version.
        Condition::false_("Updated", "PodsNotUpdated", message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set() -> SidecarSet {
        SidecarSet::from_object(&json!({"metadata": {"name": "log", "generation": 2}, "spec": {
            "selector": {"matchLabels": {"app": "web"}}, "containers": [{"name": "log", "image": "busybox"}]}}))
        .unwrap()
    }

    fn pod(ns: &str, app: &str, hash: Option<&str>, ready: bool) -> Value {
        let mut pod =
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns, "labels": {"app": app}}});
        if let Some(hash) = hash {
            pod["metadata"]["annotations"] = json!({"sidecarset.wasmop.dev/log-hash": hash});
        }
        if ready {
            pod["status"] = json!({"conditions": [{"type": "Ready", "status": "True"}]});
        }
        pod
    }

    #[test]
    fn counts_matched_updated_and_ready_pods_across_namespaces() {
        let s = set();
        let current = s.hash();
        let pods = [
            pod("a", "web", Some(&current), true),
            pod("b", "web", Some(&current), false),
            pod("c", "web", Some("old"), true),
            pod("a", "web", None, true),
            pod("a", "db", Some(&current), true),
        ];
        let status = count(&s, &pods);
        assert_eq!(status, SidecarSetStatus { matched_pods: 4, updated_pods: 2, ready_pods: 1, observed_generation: Some(2) });
        assert_eq!(updated_condition(&status).status, wasmop_sdk::ConditionStatus::False);
    }

    #[test]
    fn pods_being_deleted_are_not_counted() {
        let mut p = pod("a", "web", None, false);
        p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(count(&set(), [&p]).matched_pods, 0);
    }

    #[test]
    fn no_matched_pod_is_all_updated() {
        let status = count(&set(), []);
        assert_eq!(updated_condition(&status).status, wasmop_sdk::ConditionStatus::True);
        assert_eq!(updated_condition(&status).message, "0/0 matched Pods carry the current sidecars");
    }
}
