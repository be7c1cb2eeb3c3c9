//! The plugin's three webhooks, each a thin layer over a plain function: Pod injection
//! ([`inject`](crate::inject())), SidecarSet validation ([`validate`](crate::validate())) and
//! defaulting ([`default`](crate::default())).

use serde_json::Value;
use wasmop_sdk::{AdmissionRequest, Context, Error, FailurePolicy, Operation, Verdict, Webhook};

use crate::inject::NOT_OPTED_OUT;
use crate::sidecarset::{GROUP, SidecarSet, VERSION, sidecarset_kind};
use crate::{default, inject, validate};

/// The mutating webhook on Pod CREATE that injects the sidecars.
pub const INJECT: &str = "inject";
/// The name of the inject webhook's match condition.
pub const NOT_OPTED_OUT_NAME: &str = "not-opted-out";
/// The validating webhook on SidecarSet CREATE and UPDATE.
pub const VALIDATE: &str = "validate";
/// The mutating (defaulting) webhook on SidecarSet CREATE and UPDATE.
pub const DEFAULT: &str = "default";

/// HTTP-style code of a refused SidecarSet: 422 Unprocessable Entity, as the API server answers
/// an invalid object.
pub const INVALID: u16 = 422;

/// The webhooks the manifest declares.
///
/// Pod injection fails open (`Ignore`): while the host is unreachable Pods are still created,
/// without sidecars, rather than no Pod in the cluster being created at all. Its match
/// condition [`NOT_OPTED_OUT`](crate::inject::NOT_OPTED_OUT) keeps the API server from calling
/// it for a Pod that opted out of injection. The SidecarSet webhooks fail closed: an unchecked
/// SidecarSet is never stored.
pub fn webhooks() -> Vec<Webhook> {
    let sidecarsets = |webhook: Webhook| {
        webhook
            .rule(Operation::Create, GROUP, VERSION, "sidecarsets")
            .rule(Operation::Update, GROUP, VERSION, "sidecarsets")
            .timeout_seconds(5)
    };
    vec![
        Webhook::mutating(INJECT)
            .rule(Operation::Create, "", "v1", "pods")
            .failure_policy(FailurePolicy::Ignore)
            .timeout_seconds(5)
            .match_condition(NOT_OPTED_OUT_NAME, NOT_OPTED_OUT),
        sidecarsets(Webhook::validating(VALIDATE)),
        sidecarsets(Webhook::mutating(DEFAULT)),
    ]
}

/// Answer one admission request for the webhook `webhook`.
///
/// # Errors
/// A terminal [`Error`] (the host denies the request with its message) when the request has no
/// object, when a lookup of the SidecarSets fails, or for a webhook this plugin does not serve.
pub fn admit(webhook: &str, req: AdmissionRequest, ctx: &Context) -> Result<Verdict, Error> {
    let object = req.object.ok_or_else(|| Error::terminal(format!("webhook {webhook}: the request has no object")))?;
    match webhook {
        INJECT => {
            let sets = sidecarsets(ctx)?;
            let namespace = req.namespace.as_deref().unwrap_or_default();
            let injection = inject(object, namespace, &sets);
            let verdict = if injection.injected.is_empty() { Verdict::allow() } else { Verdict::mutate(injection.pod) };
            Ok(injection.warnings.into_iter().fold(verdict, Verdict::warning))
        }
        VALIDATE => Ok(match validate(&object) {
            Ok(()) => Verdict::allow(),
            Err(invalid) => Verdict::deny_with(INVALID, invalid.to_string()),
        }),
        DEFAULT => {
            let defaulted = default(object.clone());
            Ok(if defaulted == object { Verdict::allow() } else { Verdict::mutate(defaulted) })
        }
        other => Err(Error::terminal(format!("the sidecarset plugin serves no webhook {other:?}"))),
    }
}

/// Every valid SidecarSet in the host's cache that is not being deleted (one that is not valid
/// was stored while its webhook was not registered: it is skipped, and its own status says why).
fn sidecarsets(ctx: &Context) -> Result<Vec<SidecarSet>, Error> {
    let objects = ctx.list(&sidecarset_kind(), None, "")?;
    let live = objects.iter().filter(|o| o.pointer("/metadata/deletionTimestamp").is_none() && validate(o).is_ok());
    Ok(live.filter_map(|o: &Value| SidecarSet::from_object(o).ok()).collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wasmop_sdk::{Plugin, WebhookType};

    use super::*;
    use crate::SidecarSetOperator;

    fn sidecarset(name: &str, spec: Value) -> Value {
        json!({"apiVersion": "apps.wasmop.dev/v1alpha1", "kind": "SidecarSet", "metadata": {"name": name}, "spec": spec})
    }

    fn log_shipper() -> Value {
        sidecarset(
            "log",
            json!({"selector": {"matchLabels": {"app": "web"}}, "containers": [{"name": "log", "image": "busybox:1"}]}),
        )
    }

    fn pod(namespace: &str, app: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-", "namespace": namespace, "labels": {"app": app}},
               "spec": {"containers": [{"name": "web", "image": "nginx"}]}})
    }

    /// Call the plugin as the host would, with `cache` as the host's cache (SidecarSets are
    /// cluster-scoped: a Pod's lookup reads them whatever its namespace).
    fn admit(webhook: &str, req: AdmissionRequest, cache: Vec<Value>) -> Result<Verdict, Error> {
        let ctx = Context::fixture_for_admission(&req, cache).restrict_to(&SidecarSetOperator::manifest());
        SidecarSetOperator::admit(webhook, req, &ctx)
    }

    #[test]
    fn the_manifest_declares_pod_injection_failing_open_and_sidecarset_checks_failing_closed() {
        let webhooks = SidecarSetOperator::manifest().webhooks;
        let summary: Vec<_> = webhooks
            .iter()
            .map(|w| {
                (w.name.as_str(), w.type_, w.failure_policy, w.rules.iter().flat_map(|r| r.resources.clone()).collect::<Vec<_>>())
            })
            .collect();
        assert_eq!(
            summary,
            [
                (INJECT, WebhookType::Mutating, FailurePolicy::Ignore, vec!["pods".to_owned()]),
                (
                    VALIDATE,
                    WebhookType::Validating,
                    FailurePolicy::Fail,
                    vec!["sidecarsets".to_owned(), "sidecarsets".to_owned()]
                ),
                (DEFAULT, WebhookType::Mutating, FailurePolicy::Fail, vec!["sidecarsets".to_owned(), "sidecarsets".to_owned()]),
            ]
        );
        assert_eq!(webhooks[0].rules[0].operations, [Operation::Create]);
        assert_eq!(webhooks[1].rules.iter().map(|r| r.operations[0]).collect::<Vec<_>>(), [Operation::Create, Operation::Update]);
        let conditions: Vec<(&str, &str)> =
            webhooks[0].match_conditions.iter().map(|c| (c.name.as_str(), c.expression.as_str())).collect();
        assert_eq!(conditions, [(NOT_OPTED_OUT_NAME, NOT_OPTED_OUT)], "the inject webhook skips opted-out Pods");
        assert!(webhooks[1..].iter().all(|w| w.match_conditions.is_empty()), "every SidecarSet is checked");
    }

    #[test]
    fn a_matching_pod_in_any_namespace_gets_the_sidecars_of_the_cached_sidecarsets() {
        let verdict = admit(INJECT, AdmissionRequest::new(Operation::Create, pod("team-b", "web")), vec![log_shipper()]).unwrap();
        let pod = verdict.mutated().expect("a mutation");
        assert_eq!(pod["spec"]["containers"][1], json!({"name": "log", "image": "busybox:1"}));
        let hash = SidecarSet::from_object(&log_shipper()).unwrap().hash();
        assert_eq!(pod["metadata"]["annotations"]["sidecarset.wasmop.dev/log-hash"], json!(hash));
        assert!(verdict.warnings().is_empty());
    }

    #[test]
    fn a_pod_no_sidecarset_matches_is_allowed_unchanged() {
        let verdict = admit(INJECT, AdmissionRequest::new(Operation::Create, pod("team-a", "db")), vec![log_shipper()]).unwrap();
        assert_eq!(verdict, Verdict::allow());
    }

    #[test]
    fn a_name_collision_is_a_warning_and_an_invalid_cached_sidecarset_is_skipped() {
        let clash = sidecarset("clash", json!({"selector": {}, "containers": [{"name": "web", "image": "x"}]}));
        let invalid = sidecarset("invalid", json!({"selector": {}, "containers": [{"name": "no-image"}]}));
        let verdict =
            admit(INJECT, AdmissionRequest::new(Operation::Create, pod("team-a", "web")), vec![log_shipper(), clash, invalid])
                .unwrap();
        let names: Vec<_> =
            verdict.mutated().unwrap()["spec"]["containers"].as_array().unwrap().iter().map(|c| c["name"].clone()).collect();
        assert_eq!(names, [json!("web"), json!("log")]);
        assert_eq!(verdict.warnings(), ["SidecarSet clash: not injected, the Pod already has a container named \"web\""]);
    }

    #[test]
    fn a_sidecarset_being_deleted_injects_nothing() {
        let mut leaving = log_shipper();
        leaving["metadata"]["deletionTimestamp"] = json!("2026-11-30T12:00:00Z");
        let verdict = admit(INJECT, AdmissionRequest::new(Operation::Create, pod("team-a", "web")), vec![leaving]).unwrap();
        assert_eq!(verdict, Verdict::allow());
    }

    #[test]
    fn an_invalid_sidecarset_is_denied_with_the_reason_and_a_valid_one_allowed() {
        let bad = sidecarset(
            "bad",
            json!({"selector": {"matchExpressions": [{"key": "app", "operator": "In"}]}, "containers": [{"name": "a", "image": "b"}]}),
        );
        let verdict = admit(VALIDATE, AdmissionRequest::new(Operation::Create, bad), vec![]).unwrap();
        assert_eq!(verdict, Verdict::deny_with(422, "spec.selector.matchExpressions[0]: operator In needs at least one value"));
        let update = AdmissionRequest::new(Operation::Update, log_shipper()).with_old_object(log_shipper());
        assert_eq!(admit(VALIDATE, update, vec![]).unwrap(), Verdict::allow());
    }

    #[test]
    fn defaulting_mutates_only_what_it_fills() {
        let verdict = admit(DEFAULT, AdmissionRequest::new(Operation::Create, log_shipper()), vec![]).unwrap();
        assert_eq!(verdict.mutated().unwrap()["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");
        let mut complete = log_shipper();
        complete["spec"]["containers"][0]["imagePullPolicy"] = json!("Always");
        assert_eq!(admit(DEFAULT, AdmissionRequest::new(Operation::Update, complete), vec![]).unwrap(), Verdict::allow());
    }

    #[test]
    fn a_request_without_object_or_for_another_webhook_is_an_error() {
        let delete = AdmissionRequest::new(Operation::Delete, log_shipper());
        assert!(admit(VALIDATE, delete, vec![]).unwrap_err().to_string().contains("the request has no object"));
        let err = admit("other", AdmissionRequest::new(Operation::Create, log_shipper()), vec![]).unwrap_err();
        assert!(err.to_string().contains("serves no webhook \"other\""), "{err}");
    }
}
