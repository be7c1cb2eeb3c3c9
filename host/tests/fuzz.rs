//! Property-based fuzzing of everything that parses untrusted plugin output or user input:
//! response validation, label selectors, manifest validation, file format detection, the host
//! policy file and the `$(parent.name)` label lookup. Each
//! property runs a bounded number of cases (`PROPTEST_CASES`, default 256) and must never
//! panic; validated output must satisfy the invariants the host relies on.

use proptest::prelude::*;
use serde_json::Value;
use wasmop::contract::{Condition, ConditionStatus, Kind, Manifest, OutputLimits, RawResponse, RelatedKind, Scope};
use wasmop::objects::LabelSelector;
use wasmop::policy::HostPolicy;

/// JSON-ish text: valid objects with random identity fields, and random garbage.
fn child_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        (
            proptest::option::of("[a-z/0-9]{0,12}"),
            proptest::option::of("[A-Za-z]{0,10}"),
            proptest::option::of("[a-z0-9.-]{0,20}")
        )
            .prop_map(|(api, kind, name)| {
                let mut o = serde_json::Map::new();
                if let Some(a) = api {
                    o.insert("apiVersion".into(), a.into());
                }
                if let Some(k) = kind {
                    o.insert("kind".into(), k.into());
                }
                if let Some(n) = name {
                    o.insert("metadata".into(), serde_json::json!({"name": n}));
                }
                Value::Object(o).to_string()
            }),
        "\\[[0-9,]{0,10}\\]",
    ]
}

fn condition() -> impl Strategy<Value = Condition> {
    (any::<String>(), 0..3u8, any::<String>(), any::<String>()).prop_map(|(t, s, r, m)| Condition {
        type_: t,
        status: [ConditionStatus::True, ConditionStatus::False, ConditionStatus::Unknown][s as usize],
        reason: r,
        message: m,
    })
}

proptest! {
    #[test]
    fn response_validation_never_panics_and_keeps_its_invariants(
        children in proptest::collection::vec(child_text(), 0..8),
        status in proptest::option::of(child_text()),
        conditions in proptest::collection::vec(condition(), 0..4),
        requeue in proptest::option::of(any::<u64>()),
    ) {
        let raw = RawResponse { children, status, conditions, requeue_after_ms: requeue, ..Default::default() };
        let limits = OutputLimits { max_bytes: 4096, max_actions: 6 };
        if let Ok(response) = raw.validate(&limits) {
            for child in &response.children {
                prop_assert!(child["apiVersion"].as_str().is_some_and(|s| !s.is_empty()));
                prop_assert!(child["kind"].as_str().is_some_and(|s| !s.is_empty()));
                prop_assert!(child.pointer("/metadata/name").and_then(Value::as_str).is_some_and(|s| !s.is_empty()));
            }
            prop_assert!(response.status.as_ref().is_none_or(Value::is_object));
            prop_assert!(response.children.len() + response.conditions.len() <= 6);
        }
    }

    #[test]
    fn selector_parsing_never_panics_and_round_trips(text in "[a-z=!,() .inotu/_-]{0,40}") {
        if let Ok(selector) = LabelSelector::parse(&text) {
            let again = LabelSelector::parse(&selector.to_string());
            prop_assert_eq!(again, Ok(selector));
        }
    }

    #[test]
    fn manifest_validation_never_panics(
        name in any::<String>(), version in any::<String>(), group in "[a-z.]{0,10}", kind in "[A-Za-z]{0,8}",
        selector in any::<String>(),
    ) {
        let m = Manifest {
            name, version, description: String::new(),
            parent: Kind::new(group.clone(), "v1", kind.clone()),
            scope: Scope::Namespaced,
            children: vec![Kind::new(group, "v1", format!("{kind}Child"))],
            related: vec![RelatedKind { kind: Kind::new("", "v1", "Pod"), label_selector: selector }],
            finalizer: false, prune: true, adopt_unowned: false, config_schema: None, webhooks: Vec::new(),
        };
        let _ = m.validate();
    }

    #[test]
    fn policy_parsing_never_panics_and_accepted_policies_are_sane(
        text in prop_oneof![
            any::<String>(),
            ("(deadline|memory|fuel|maxActions|maxResponseBytes)", "[0-9a-zA-Z.-]{0,8}")
                .prop_map(|(k, v)| format!("defaults: {{{k}: {v}}}\nplugins: {{p: {{{k}: {v}}}}}")),
            ("(secrets|namespaces)", "[a-z*\\[\\], ]{0,12}").prop_map(|(k, v)| format!("plugins: {{p: {{grants: {{{k}: {v}}}}}}}")),
        ]
    ) {
        if let Ok(policy) = HostPolicy::from_yaml(&text) {
            for name in ["p", "other"] {
                let limits = policy.for_plugin(name).limits;
                prop_assert!(!limits.deadline.is_zero());
                prop_assert!(limits.memory_bytes >= 1 << 20);
                prop_assert!(limits.fuel != Some(0));
            }
        }
    }

    #[test]
    fn the_parent_name_label_is_the_key_of_an_equality_on_the_placeholder(text in "[a-z=!,() $.inotu_-]{0,40}") {
        let related = RelatedKind { kind: Kind::new("", "v1", "Pod"), label_selector: text.clone() };
        if let Some(key) = related.parent_name_label() {
            let selector = related.selector_for("some-parent");
            prop_assert!(!key.is_empty() && !key.contains(','), "{key:?} from {text:?}");
            // When the selector parses, the named parent's selector requires that label value.
            if let Ok(selector) = selector {
                let labelled = serde_json::json!({"metadata": {"labels": {key: "other-parent"}}});
                prop_assert!(!selector.matches_object(&labelled), "{text:?} matched another parent via {key:?}");
            }
        }
    }

    #[test]
    fn format_detection_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = wasmop::runtime::detect(&bytes);
    }
}
