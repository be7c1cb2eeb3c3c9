//! Conversions between the WIT 0.3.0 bindings and [`crate::contract`] types.

use super::super::bindings::v0_3::{admission, plugin, reconciler, types};
use super::super::error::MAX_PLUGIN_MESSAGE;
use super::super::log_budget::one_line;
use crate::contract::{
    Condition, ConditionStatus, Event, EventType, Kind, Manifest, ManifestError, ObjectRef, RawFailure, RawResponse, RawVerdict,
    RelatedKind, Request, Scope,
};
use crate::contract::{MAX_DENIAL_MESSAGE, MAX_WARNING, MAX_WARNINGS};
use wasmop_types::{
    AdmissionRequest, FailurePolicy, MatchCondition, Operation, Rule, RuleScope, SideEffects, Webhook, WebhookType,
};

fn kind(k: types::KindRef) -> Kind {
    Kind::new(k.group, k.version, k.kind)
}

fn operation(o: types::Operation) -> Operation {
    match o {
        types::Operation::Create => Operation::Create,
        types::Operation::Update => Operation::Update,
        types::Operation::Delete => Operation::Delete,
        types::Operation::Connect => Operation::Connect,
        types::Operation::All => Operation::All,
    }
}

fn operation_to_raw(o: Operation) -> types::Operation {
    match o {
        Operation::Create => types::Operation::Create,
        Operation::Update => types::Operation::Update,
        Operation::Delete => types::Operation::Delete,
        Operation::Connect => types::Operation::Connect,
        Operation::All => types::Operation::All,
    }
}

fn webhook(w: plugin::Webhook) -> Webhook {
    Webhook {
        name: w.name,
        type_: match w.type_ {
            plugin::WebhookType::Validating => WebhookType::Validating,
            plugin::WebhookType::Mutating => WebhookType::Mutating,
        },
        rules: w
            .rules
            .into_iter()
            .map(|r| Rule {
                operations: r.operations.into_iter().map(operation).collect(),
                api_groups: r.api_groups,
                api_versions: r.api_versions,
                resources: r.resources,
                scope: match r.scope {
                    plugin::RuleScope::Cluster => RuleScope::Cluster,
                    plugin::RuleScope::Namespaced => RuleScope::Namespaced,
                    plugin::RuleScope::All => RuleScope::All,
                },
            })
            .collect(),
        namespace_selector: w.namespace_selector,
        object_selector: w.object_selector,
        failure_policy: match w.failure_policy {
            plugin::FailurePolicy::Fail => FailurePolicy::Fail,
            plugin::FailurePolicy::Ignore => FailurePolicy::Ignore,
        },
        side_effects: match w.side_effects {
            plugin::SideEffects::None => SideEffects::None,
            plugin::SideEffects::NoneOnDryRun => SideEffects::NoneOnDryRun,
        },
        timeout_seconds: w.timeout_seconds,
        match_conditions: w
            .match_conditions
            .into_iter()
            .map(|c| MatchCondition { name: c.name, expression: c.expression })
            .collect(),
    }
}

/// A manifest as the plugin returned it, validated.
pub(in super::super) fn manifest(m: plugin::PluginManifest) -> Result<Manifest, ManifestError> {
    let config_schema = m.config_schema.as_deref().map(super::config_schema).transpose()?;
    let manifest = Manifest {
        name: m.name,
        version: m.version,
        description: m.description,
        parent: kind(m.parent.kind),
        scope: match m.parent.scope {
            types::Scope::Namespaced => Scope::Namespaced,
            types::Scope::Cluster => Scope::Cluster,
        },
        children: m.children.into_iter().map(kind).collect(),
        related: m.related.into_iter().map(|r| RelatedKind { kind: kind(r.kind), label_selector: r.label_selector }).collect(),
        finalizer: m.finalizer,
        prune: m.prune,
        adopt_unowned: m.adopt_unowned,
        config_schema,
        webhooks: m.webhooks.into_iter().map(webhook).collect(),
    };
    manifest.validate()?;
    Ok(manifest)
}

/// `serde_json::to_string` is about twice as fast as `Value`'s `Display`.
fn text(v: &serde_json::Value) -> String {
    serde_json::to_string(v).expect("a Value always serializes")
}

/// The request record handed to the guest: each object's JSON text, serialized at most once
/// per object ([`Object::json`](crate::contract::Object::json)) and copied.
pub(in super::super) fn request(r: &Request) -> reconciler::Request {
    let json = |objects: &[std::sync::Arc<crate::contract::Object>]| objects.iter().map(|o| o.json().to_owned()).collect();
    reconciler::Request {
        parent: r.parent.json().to_owned(),
        children: json(&r.children),
        related: json(&r.related),
        finalizing: r.finalizing,
        config: text(&r.config),
    }
}

fn condition(c: reconciler::Condition) -> Condition {
    Condition {
        type_: c.type_,
        status: match c.status {
            reconciler::ConditionStatus::True => ConditionStatus::True,
            reconciler::ConditionStatus::False => ConditionStatus::False,
            reconciler::ConditionStatus::Unknown => ConditionStatus::Unknown,
        },
        reason: c.reason,
        message: c.message,
    }
}

/// The guest's failure, not yet validated: whether it is retryable, and what it carries, its
/// message already one line and cut to [`MAX_PLUGIN_MESSAGE`].
pub(in super::super) fn failure(e: reconciler::ReconcileError) -> (bool, RawFailure) {
    let (retryable, f) = match e {
        reconciler::ReconcileError::Retryable(f) => (true, f),
        reconciler::ReconcileError::Terminal(f) => (false, f),
    };
    let failure = RawFailure {
        message: one_line(&f.message, MAX_PLUGIN_MESSAGE),
        status: f.status,
        conditions: f.conditions.into_iter().map(condition).collect(),
    };
    (retryable, failure)
}

/// The guest's response, not yet validated.
pub(in super::super) fn response(r: reconciler::Response) -> RawResponse {
    RawResponse {
        children: r.children,
        delete: r
            .delete
            .into_iter()
            .map(|d| ObjectRef { api_version: d.api_version, kind: d.kind, namespace: d.namespace, name: d.name })
            .collect(),
        status: r.status,
        conditions: r.conditions.into_iter().map(condition).collect(),
        events: r
            .events
            .into_iter()
            .map(|e| Event {
                type_: match e.type_ {
                    reconciler::EventType::Normal => EventType::Normal,
                    reconciler::EventType::Warning => EventType::Warning,
                },
                reason: e.reason,
                action: e.action,
                note: e.note,
            })
            .collect(),
        requeue_after_ms: r.requeue_after_ms,
        finalized: r.finalized,
    }
}

/// The admission request record handed to the guest.
pub(in super::super) fn admission_request(r: &AdmissionRequest) -> admission::AdmissionRequest {
    admission::AdmissionRequest {
        uid: r.uid.clone(),
        kind: types::KindRef { group: r.kind.group.clone(), version: r.kind.version.clone(), kind: r.kind.kind.clone() },
        resource: admission::GroupVersionResource {
            group: r.resource.group.clone(),
            version: r.resource.version.clone(),
            resource: r.resource.resource.clone(),
        },
        sub_resource: r.sub_resource.clone(),
        operation: operation_to_raw(r.operation),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
        object: r.object.as_ref().map(text),
        old_object: r.old_object.as_ref().map(text),
        user_info: admission::UserInfo {
            username: r.user_info.username.clone(),
            uid: r.user_info.uid.clone(),
            groups: r.user_info.groups.clone(),
        },
        dry_run: r.dry_run,
    }
}

/// The guest's verdict, not yet validated; its texts already one line each and cut: at most
/// [`MAX_WARNINGS`] warnings of [`MAX_WARNING`] bytes, a message of [`MAX_DENIAL_MESSAGE`].
pub(in super::super) fn verdict(v: admission::Verdict) -> RawVerdict {
    let warnings = |w: Vec<String>| w.iter().take(MAX_WARNINGS).map(|w| one_line(w, MAX_WARNING)).collect();
    match v {
        admission::Verdict::Allowed(a) => RawVerdict::Allowed { warnings: warnings(a.warnings), mutated: a.mutated },
        admission::Verdict::Denied(d) => {
            RawVerdict::Denied { code: d.code, message: one_line(&d.message, MAX_DENIAL_MESSAGE), warnings: warnings(d.warnings) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn webhook_of(match_conditions: Vec<plugin::MatchCondition>) -> plugin::Webhook {
        plugin::Webhook {
            name: "inject".into(),
            type_: plugin::WebhookType::Mutating,
            rules: vec![plugin::Rule {
                operations: vec![types::Operation::Create],
                api_groups: vec![String::new()],
                api_versions: vec!["v1".into()],
                resources: vec!["pods".into()],
                scope: plugin::RuleScope::Namespaced,
            }],
            namespace_selector: String::new(),
            object_selector: String::new(),
            failure_policy: plugin::FailurePolicy::Ignore,
            side_effects: plugin::SideEffects::None,
            timeout_seconds: 5,
            match_conditions,
        }
    }

    #[test]
    fn a_webhooks_match_conditions_convert_in_order() {
        let condition =
            |name: &str, expression: &str| plugin::MatchCondition { name: name.into(), expression: expression.into() };
        let w = webhook(webhook_of(vec![condition("b", "true"), condition("a", "object != null")]));
        let expected = [("b", "true"), ("a", "object != null")]
            .map(|(name, expression)| MatchCondition { name: name.into(), expression: expression.into() });
        assert_eq!(w.match_conditions, expected);
        assert!(webhook(webhook_of(Vec::new())).match_conditions.is_empty());
    }

    #[test]
    fn a_failure_keeps_its_kind_status_and_conditions_and_its_message_is_one_line() {
        let raw = reconciler::Failure {
            message: "spec.size\nis required".into(),
            status: Some(r#"{"phase":"Invalid"}"#.into()),
            conditions: vec![reconciler::Condition {
                type_: "Ready".into(),
                status: reconciler::ConditionStatus::False,
                reason: "InvalidSpec".into(),
                message: "spec.size is required".into(),
            }],
        };
        let (retryable, failure) = failure(reconciler::ReconcileError::Terminal(raw.clone()));
        assert!(!retryable);
        assert_eq!(failure.message, one_line("spec.size\nis required", MAX_PLUGIN_MESSAGE));
        assert!(!failure.message.contains('\n'));
        assert_eq!(failure.status.as_deref(), Some(r#"{"phase":"Invalid"}"#));
        assert_eq!(
            failure.conditions,
            [Condition {
                type_: "Ready".into(),
                status: ConditionStatus::False,
                reason: "InvalidSpec".into(),
                message: "spec.size is required".into()
            }]
        );
        let bare = reconciler::Failure { message: "later".into(), status: None, conditions: Vec::new() };
        let (retryable, failure) = failure_of_retryable(bare);
        assert!(retryable);
        assert_eq!((failure.status, failure.conditions.len()), (None, 0));
    }

    fn failure_of_retryable(f: reconciler::Failure) -> (bool, RawFailure) {
        failure(reconciler::ReconcileError::Retryable(f))
    }
}
