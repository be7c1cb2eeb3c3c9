//! Deciding whether a write would change anything.

use serde_json::Value;

/// Whether every field of `desired` is present in `observed` with the same value: arrays
/// must have the same length with each element contained. Fields the server added
/// (defaults, status, metadata) do not matter.
///
/// Used to skip server-side applies and status patches that would change nothing; a false
/// "changed" only costs one idempotent write.
///
/// ```
/// use serde_json::json;
/// use wasmop::actions::contains;
/// let observed = json!({"spec": {"replicas": 3, "paused": false}, "status": {}});
/// assert!(contains(&observed, &json!({"spec": {"replicas": 3}})));
/// assert!(!contains(&observed, &json!({"spec": {"replicas": 5}})));
/// ```
pub fn contains(observed: &Value, desired: &Value) -> bool {
    match (observed, desired) {
        (Value::Object(o), Value::Object(d)) => d.iter().all(|(k, dv)| o.get(k).is_some_and(|ov| contains(ov, dv))),
        (Value::Array(o), Value::Array(d)) => o.len() == d.len() && o.iter().zip(d).all(|(ov, dv)| contains(ov, dv)),
        (Value::Number(o), Value::Number(d)) => o.as_f64() == d.as_f64(),
        (o, d) => o == d,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lists_must_match_in_length() {
        assert!(!contains(&json!({"a": [1, 2]}), &json!({"a": [1]})));
        assert!(contains(&json!({"a": [{"x": 1, "y": 2}]}), &json!({"a": [{"x": 1}]})));
    }

    #[test]
    fn fields_left_to_other_managers_are_not_changes() {
        // The plugin omits spec.replicas; an HPA set it to 5: nothing for the plugin to apply.
        let observed = json!({"spec": {"replicas": 5, "template": {"metadata": {"labels": {"app": "a"}}}}});
        assert!(contains(&observed, &json!({"spec": {"template": {"metadata": {"labels": {"app": "a"}}}}})));
    }

    #[test]
    fn missing_fields_are_changes() {
        assert!(!contains(&json!({}), &json!({"a": null})));
        assert!(contains(&json!({"a": 1.0}), &json!({"a": 1})));
    }
}
