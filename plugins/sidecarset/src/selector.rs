//! `spec.selector`: a Kubernetes `metav1.LabelSelector` (`matchLabels` and `matchExpressions`),
//! checked and matched against Pod labels with the API server's semantics.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A `metav1.LabelSelector`. Every requirement must hold (AND); a selector with no requirement
/// matches every Pod.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSelector {
    /// Labels that must be present with exactly these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<Expression>,
}

/// One `matchExpressions` entry: `key operator values`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expression {
    /// The label key.
    #[serde(default)]
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    #[serde(default)]
    pub operator: String,
    /// The values for `In` and `NotIn`; must be empty for `Exists` and `DoesNotExist`.
    #[serde(default)]
    pub values: Option<Vec<String>>,
}

/// Why a selector is invalid; the text names the offending field as the user wrote it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A `matchLabels` or `matchExpressions` key is empty.
    #[error("{field}: the label key is empty")]
    EmptyKey {
        /// The field path, e.g. `spec.selector.matchExpressions[1].key`.
        field: String,
    },
    /// An operator other than `In`, `NotIn`, `Exists`, `DoesNotExist`.
    #[error("{field}: operator {operator:?} is not one of In, NotIn, Exists, DoesNotExist")]
    UnknownOperator {
        /// The field path.
        field: String,
        /// The operator as given.
        operator: String,
    },
    /// `In` or `NotIn` without values.
    #[error("{field}: operator {operator} needs at least one value")]
    MissingValues {
        /// The field path.
        field: String,
        /// `In` or `NotIn`.
        operator: String,
    },
    /// `Exists` or `DoesNotExist` with values.
    #[error("{field}: operator {operator} takes no values")]
    UnexpectedValues {
        /// The field path.
        field: String,
        /// `Exists` or `DoesNotExist`.
        operator: String,
    },
}

impl PodSelector {
    /// Check every requirement, as the API server checks a Deployment's selector.
    ///
    /// # Errors
    /// The first [`SelectorError`], naming its field under `field` (e.g. `spec.selector`).
    pub fn validate(&self, field: &str) -> Result<(), SelectorError> {
        if let Some(key) = self.match_labels.keys().find(|k| k.is_empty()) {
            return Err(SelectorError::EmptyKey { field: format!("{field}.matchLabels[{key:?}]") });
        }
        for (i, e) in self.match_expressions.iter().enumerate() {
            let at = format!("{field}.matchExpressions[{i}]");
            if e.key.is_empty() {
                return Err(SelectorError::EmptyKey { field: format!("{at}.key") });
            }
            let has_values = e.values.as_ref().is_some_and(|v| !v.is_empty());
            match (e.operator.as_str(), has_values) {
                ("In" | "NotIn", false) => {
                    return Err(SelectorError::MissingValues { field: at, operator: e.operator.clone() });
                }
                ("Exists" | "DoesNotExist", true) => {
                    return Err(SelectorError::UnexpectedValues { field: at, operator: e.operator.clone() });
                }
                ("In" | "NotIn" | "Exists" | "DoesNotExist", _) => {}
                _ => return Err(SelectorError::UnknownOperator { field: at, operator: e.operator.clone() }),
            }
        }
        Ok(())
    }

    /// Whether labels satisfy every requirement. A requirement with an unknown operator
    /// matches nothing (such a selector never passes [`PodSelector::validate`]).
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.match_labels.iter().all(|(k, v)| get(k) == Some(v.as_str()))
            && self.match_expressions.iter().all(|e| match e.operator.as_str() {
                "In" => get(&e.key).is_some_and(|x| e.has_value(x)),
                "NotIn" => !get(&e.key).is_some_and(|x| e.has_value(x)),
                "Exists" => get(&e.key).is_some(),
                "DoesNotExist" => get(&e.key).is_none(),
                _ => false,
            })
    }

    /// Whether an object's `metadata.labels` satisfy the selector.
    pub fn matches_object(&self, object: &Value) -> bool {
        self.matches(object.pointer("/metadata/labels").and_then(Value::as_object))
    }
}

impl Expression {
    fn has_value(&self, value: &str) -> bool {
        self.values.iter().flatten().any(|v| v == value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn selector(value: Value) -> PodSelector {
        serde_json::from_value(value).unwrap()
    }

    fn labels(value: Value) -> Value {
        json!({"metadata": {"labels": value}})
    }

    #[test]
    fn match_labels_and_expressions_must_all_hold() {
        let s = selector(json!({"matchLabels": {"app": "web"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["front", "edge"]},
            {"key": "canary", "operator": "DoesNotExist"},
            {"key": "env", "operator": "NotIn", "values": ["dev"]},
            {"key": "team", "operator": "Exists"}]}));
        assert!(s.matches_object(&labels(json!({"app": "web", "tier": "edge", "team": "a"}))));
        assert!(!s.matches_object(&labels(json!({"app": "web", "tier": "back", "team": "a"}))));
        assert!(!s.matches_object(&labels(json!({"app": "web", "tier": "edge", "team": "a", "canary": "1"}))));
        assert!(!s.matches_object(&labels(json!({"app": "web", "tier": "edge", "team": "a", "env": "dev"}))));
        assert!(!s.matches_object(&labels(json!({"app": "web", "tier": "edge"}))));
        assert!(!s.matches_object(&json!({"metadata": {}})));
    }

    #[test]
    fn the_empty_selector_matches_every_pod() {
        assert!(PodSelector::default().matches_object(&json!({"metadata": {}})));
    }

    #[test]
    fn validate_names_the_bad_requirement() {
        let err = |v: Value| selector(v).validate("spec.selector").unwrap_err().to_string();
        assert_eq!(
            err(
                json!({"matchExpressions": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Equals", "values": ["x"]}]})
            ),
            "spec.selector.matchExpressions[1]: operator \"Equals\" is not one of In, NotIn, Exists, DoesNotExist"
        );
        assert_eq!(
            err(json!({"matchExpressions": [{"key": "a", "operator": "In"}]})),
            "spec.selector.matchExpressions[0]: operator In needs at least one value"
        );
        assert_eq!(
            err(json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": []}]})),
            "spec.selector.matchExpressions[0]: operator NotIn needs at least one value"
        );
        assert_eq!(
            err(json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]})),
            "spec.selector.matchExpressions[0]: operator Exists takes no values"
        );
        assert_eq!(
            err(json!({"matchExpressions": [{"key": "", "operator": "Exists"}]})),
            "spec.selector.matchExpressions[0].key: the label key is empty"
        );
        assert_eq!(err(json!({"matchLabels": {"": "x"}})), "spec.selector.matchLabels[\"\"]: the label key is empty");
        assert!(
            selector(json!({"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "c", "operator": "In", "values": ["d"]}]}))
                .validate("spec.selector")
                .is_ok()
        );
    }

    #[test]
    fn an_unknown_operator_matches_nothing() {
        let s = selector(json!({"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]}));
        assert!(!s.matches_object(&labels(json!({"a": "x"}))));
    }
}
