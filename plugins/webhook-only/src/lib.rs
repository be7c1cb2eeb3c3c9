//! A component of world `wasmop:plugin/webhook@0.2.0`: it serves one validating webhook and
//! does not reconcile, for the host's tests (no controller calls, admission works). Not an
//! example: the SDK builds plugins of world `operator`. Built with `wit-bindgen` directly; on
//! non-wasm targets it is empty.
//!
//! Webhook `names` (ConfigMap CREATE) denies ConfigMaps whose name starts with `forbidden-`
//! and allows the rest.
//!
//! The `controller-world` build is the same manifest in a component of world `controller`
//! (reconcile, no admission export), which the host must refuse: it declares a webhook it could
//! never answer.
//!
//! The `operator-world` build is a 0.2.0 component of world `operator` (reconcile and
//! admission), pinned to `wit/v0.2.0` while the SDK moves on: it keeps proving that 0.2.0
//! reconcilers load and behave as they did. Its reconcile answers status `{wit: "0.2.0"}`, or,
//! for a parent named `fail-*`, a terminal error (0.2.0 errors carry a message only).

#[cfg(target_arch = "wasm32")]
mod component {
    #[cfg(not(any(feature = "controller-world", feature = "operator-world")))]
    wit_bindgen::generate!({
        path: "../../wit/v0.2.0",
        world: "webhook",
    });
    #[cfg(feature = "operator-world")]
    wit_bindgen::generate!({
        path: "../../wit/v0.2.0",
        world: "operator",
    });
    #[cfg(feature = "controller-world")]
    wit_bindgen::generate!({
        path: "../../wit/v0.2.0",
        world: "controller",
    });

    #[cfg(not(feature = "controller-world"))]
    use exports::wasmop::plugin::admission::{self, AdmissionError, AdmissionRequest, Allowed, Denied, Verdict};
    use exports::wasmop::plugin::plugin::{
        self, FailurePolicy, ParentKind, PluginManifest, Rule, RuleScope, SideEffects, Webhook, WebhookType,
    };
    use wasmop::plugin::types::{KindRef, Operation, Scope};

    struct WebhookOnly;

    impl plugin::Guest for WebhookOnly {
        fn manifest() -> PluginManifest {
            PluginManifest {
                name: "webhook-only".into(),
                version: "0.1.0".into(),
                description: "Admission without reconcile, for the host's tests (not an example)".into(),
                parent: ParentKind {
                    kind: KindRef { group: String::new(), version: "v1".into(), kind: "ConfigMap".into() },
                    scope: Scope::Namespaced,
                },
                children: vec![],
                related: vec![],
                finalizer: false,
                prune: false,
                adopt_unowned: false,
                config_schema: None,
                webhooks: vec![Webhook {
                    name: "names".into(),
                    type_: WebhookType::Validating,
                    rules: vec![Rule {
                        operations: vec![Operation::Create],
                        api_groups: vec![String::new()],
                        api_versions: vec!["v1".into()],
                        resources: vec!["configmaps".into()],
                        scope: RuleScope::Namespaced,
                    }],
                    namespace_selector: String::new(),
                    object_selector: String::new(),
                    failure_policy: FailurePolicy::Fail,
                    side_effects: SideEffects::None,
                    timeout_seconds: 5,
                }],
            }
        }
    }

    #[cfg(feature = "operator-world")]
    impl exports::wasmop::plugin::reconciler::Guest for WebhookOnly {
        fn reconcile(
            request: exports::wasmop::plugin::reconciler::Request,
        ) -> Result<exports::wasmop::plugin::reconciler::Response, exports::wasmop::plugin::reconciler::ReconcileError> {
            use exports::wasmop::plugin::reconciler::{ReconcileError, Response};
            if request.parent.contains("\"name\":\"fail-") {
                return Err(ReconcileError::Terminal("a 0.2.0 plugin's terminal error".into()));
            }
            Ok(Response {
                children: vec![],
                delete: vec![],
                status: Some(r#"{"wit":"0.2.0"}"#.into()),
                conditions: vec![],
                events: vec![],
                requeue_after_ms: None,
                finalized: false,
            })
        }
    }

    #[cfg(feature = "controller-world")]
    impl exports::wasmop::plugin::reconciler::Guest for WebhookOnly {
        fn reconcile(
            _request: exports::wasmop::plugin::reconciler::Request,
        ) -> Result<exports::wasmop::plugin::reconciler::Response, exports::wasmop::plugin::reconciler::ReconcileError> {
            Err(exports::wasmop::plugin::reconciler::ReconcileError::Terminal("never called".into()))
        }
    }

    #[cfg(not(feature = "controller-world"))]
    impl admission::Guest for WebhookOnly {
        fn admit(webhook: String, request: AdmissionRequest) -> Result<Verdict, AdmissionError> {
            if webhook != "names" {
                return Err(AdmissionError::UnknownWebhook(webhook));
            }
            let name = request.name.unwrap_or_default();
            Ok(if name.starts_with("forbidden-") {
                Verdict::Denied(Denied {
                    code: 422,
                    message: format!("{name}: the prefix forbidden- is reserved"),
                    warnings: vec![],
                })
            } else {
                Verdict::Allowed(Allowed { warnings: vec![], mutated: None })
            })
        }
    }

    export!(WebhookOnly);
}
