//! `export_plugin!` and the conversions between the SDK's types and the raw WIT bindings.
//!
//! The wire conversions (JSON text in, JSON text out) are plain Rust and tested natively; the
//! mapping onto the generated binding types exists only on `wasm32`.

// Natively nothing but the tests calls the wire conversions.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

use std::time::Duration;

use serde_json::Value;

use crate::{Condition, Error, Event, ObjectRef, Request, Response};

/// Export a [`Plugin`](crate::Plugin) as a component of world `wasmop:plugin/operator@0.3.0`:
/// its `plugin`, `reconciler` and `admission` interfaces.
///
/// Invoke it once, at the top level of the plugin crate (built with
/// `crate-type = ["cdylib"]` for `wasm32-wasip2`). On `wasm32` it generates the adapter that
/// turns the host's raw records into a [`Request`] or an
/// [`AdmissionRequest`](crate::AdmissionRequest) and the plugin's answer back into records (a
/// parent or admitted object that is not valid JSON becomes an error without calling the
/// plugin; a response holding a recorded mistake becomes a terminal error; an admission call
/// for a webhook the manifest does not declare is answered `unknown-webhook` without calling
/// [`Plugin::admit`](crate::Plugin::admit)). On other
/// targets it only checks that the type implements `Plugin`, so the crate still unit-tests
/// natively.
///
/// ```
/// use wasmop_sdk::prelude::*;
///
/// struct Noop;
///
/// impl Plugin for Noop {
///     fn manifest() -> Manifest {
///         Manifest::new("noop", "0.1.0").parent(Kind::new("example.com", "v1", "Thing"), Scope::Namespaced)
///     }
///     fn reconcile(_req: Request, _ctx: &Context) -> Result<Response, Error> {
///         Ok(Response::new())
///     }
/// }
///
/// wasmop_sdk::export_plugin!(Noop);
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct __WasmopPluginExport;

            impl $crate::__private::PluginGuest for __WasmopPluginExport {
                fn manifest() -> $crate::__private::RawManifest {
                    $crate::__private::manifest::<$plugin>()
                }
            }

            impl $crate::__private::ReconcilerGuest for __WasmopPluginExport {
                fn reconcile(
                    request: $crate::__private::RawRequest,
                ) -> ::core::result::Result<$crate::__private::RawResponse, $crate::__private::RawReconcileError> {
                    $crate::__private::reconcile::<$plugin>(request)
                }
            }

            impl $crate::__private::AdmissionGuest for __WasmopPluginExport {
                fn admit(
                    webhook: ::std::string::String,
                    request: $crate::__private::RawAdmissionRequest,
                ) -> ::core::result::Result<$crate::__private::RawVerdict, $crate::__private::RawAdmissionError> {
                    $crate::__private::admit::<$plugin>(webhook, request)
                }
            }

    $crate::bindings::export!(__WasmopPluginExport with_types_in $crate::bindings);
        };

        #[cfg(not(target_arch = "wasm32"))]
        const _: fn() = || {
            fn assert_plugin<P: $crate::Plugin>() {}
            assert_plugin::<$plugin>();
        };
    };
}

/// A response flattened to what crosses the boundary: JSON text and typed records.
#[derive(Debug, PartialEq)]
pub(crate) struct WireResponse {
    pub children: Vec<String>,
    pub delete: Vec<ObjectRef>,
    pub status: Option<String>,
    pub conditions: Vec<Condition>,
    pub events: Vec<Event>,
    pub requeue_after_ms: Option<u64>,
    pub finalized: bool,
}

/// An error flattened to what crosses the boundary: its kind, message, status JSON text and
/// conditions.
#[derive(Debug, PartialEq)]
pub(crate) struct WireFailure {
    pub retryable: bool,
    pub message: String,
    pub status: Option<String>,
    pub conditions: Vec<Condition>,
}

impl Error {
    /// Flatten for the host.
    pub(crate) fn into_wire(self) -> WireFailure {
        let retryable = self.is_retryable();
        let (Error::Retryable(failure) | Error::Terminal(failure)) = self;
        WireFailure {
            retryable,
            message: failure.message,
            status: failure.status.as_ref().map(json_text),
            conditions: failure.conditions,
        }
    }
}

impl Request {
    /// Parse the host's JSON texts. Anything that is not JSON is a terminal error: retrying
    /// the same text cannot help.
    pub(crate) fn from_wire(
        parent: &str,
        children: &[String],
        related: &[String],
        finalizing: bool,
        config: &str,
    ) -> Result<Self, Error> {
        Ok(Self {
            parent: parse_json(parent, || "the parent object".into())?,
            children: parse_all(children, "observed child")?,
            related: parse_all(related, "related object")?,
            finalizing,
            config: match config.trim() {
                "" => Value::Object(Default::default()),
                text => parse_json(text, || "the plugin config".into())?,
            },
        })
    }
}

/// The admitted object and old object, parsed from the host's JSON texts.
pub(crate) fn admission_objects(object: Option<&str>, old_object: Option<&str>) -> Result<(Option<Value>, Option<Value>), Error> {
    Ok((
        object.map(|o| parse_json(o, || "the admitted object".into())).transpose()?,
        old_object.map(|o| parse_json(o, || "the old object".into())).transpose()?,
    ))
}

fn parse_json(text: &str, what: impl FnOnce() -> String) -> Result<Value, Error> {
    serde_json::from_str(text).map_err(|e| Error::terminal(format!("{} sent by the host is not valid JSON: {e}", what())))
}

fn parse_all(texts: &[String], what: &str) -> Result<Vec<Value>, Error> {
    texts.iter().enumerate().map(|(i, text)| parse_json(text, || format!("{what} #{i}"))).collect()
}

/// `value` as compact JSON text.
fn json_text(value: &Value) -> String {
    serde_json::to_string(value).expect("a Value always serializes")
}

impl Response {
    /// Flatten for the host, or the first mistake recorded while building.
    pub(crate) fn into_wire(self) -> Result<WireResponse, Error> {
        let resp = self.validate()?;
        // `serde_json::to_string` writes bytes directly; `Value`'s `Display` goes through
        // `fmt::Write` and takes about twice as long.
        let mut children: Vec<String> = resp.children.iter().map(json_text).collect();
        children.extend(resp.raw_children);
        Ok(WireResponse {
            children,
            delete: resp.delete,
            status: resp.status.as_ref().map(json_text),
            conditions: resp.conditions,
            events: resp.events,
            requeue_after_ms: resp.requeue_after.map(duration_to_ms),
            finalized: resp.finalized,
        })
    }
}

fn duration_to_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The mapping onto the generated bindings (wasm32 only).
#[cfg(target_arch = "wasm32")]
mod raw {
    use crate::bindings::exports::wasmop::plugin::admission as a;
    use crate::bindings::exports::wasmop::plugin::plugin as p;
    use crate::bindings::exports::wasmop::plugin::reconciler as r;
    use crate::bindings::kind_to_raw;
    use crate::bindings::wasmop::plugin::types as t;
    use crate::{
        AdmissionRequest, Condition, ConditionStatus, Error, EventType, FailurePolicy, GroupVersionResource, Kind, Manifest,
        ObjectRef, Operation, Plugin, Request, RuleScope, Scope, SideEffects, UserInfo, Verdict, Webhook, WebhookType,
    };

    fn object_ref_to_raw(o: ObjectRef) -> t::ObjectRef {
        t::ObjectRef { api_version: o.api_version, kind: o.kind, namespace: o.namespace, name: o.name }
    }

    fn error_to_raw(e: Error) -> r::ReconcileError {
        let wire = e.into_wire();
        let failure = r::Failure {
            message: wire.message,
            status: wire.status,
            conditions: wire.conditions.into_iter().map(condition_to_raw).collect(),
        };
        if wire.retryable { r::ReconcileError::Retryable(failure) } else { r::ReconcileError::Terminal(failure) }
    }

    fn condition_to_raw(c: Condition) -> r::Condition {
        r::Condition {
            type_: c.type_,
            status: match c.status {
                ConditionStatus::True => r::ConditionStatus::True,
                ConditionStatus::False => r::ConditionStatus::False,
                ConditionStatus::Unknown => r::ConditionStatus::Unknown,
            },
            reason: c.reason,
            message: c.message,
        }
    }

    fn operation_to_raw(o: Operation) -> t::Operation {
        match o {
            Operation::Create => t::Operation::Create,
            Operation::Update => t::Operation::Update,
            Operation::Delete => t::Operation::Delete,
            Operation::Connect => t::Operation::Connect,
            Operation::All => t::Operation::All,
        }
    }

    fn operation_from_raw(o: t::Operation) -> Operation {
        match o {
            t::Operation::Create => Operation::Create,
            t::Operation::Update => Operation::Update,
            t::Operation::Delete => Operation::Delete,
            t::Operation::Connect => Operation::Connect,
            t::Operation::All => Operation::All,
        }
    }

    fn webhook_to_raw(w: Webhook) -> p::Webhook {
        p::Webhook {
            name: w.name,
            type_: match w.type_ {
                WebhookType::Validating => p::WebhookType::Validating,
                WebhookType::Mutating => p::WebhookType::Mutating,
            },
            rules: w
                .rules
                .into_iter()
                .map(|rule| p::Rule {
                    operations: rule.operations.into_iter().map(operation_to_raw).collect(),
                    api_groups: rule.api_groups,
                    api_versions: rule.api_versions,
                    resources: rule.resources,
                    scope: match rule.scope {
                        RuleScope::Cluster => p::RuleScope::Cluster,
                        RuleScope::Namespaced => p::RuleScope::Namespaced,
                        RuleScope::All => p::RuleScope::All,
                    },
                })
                .collect(),
            namespace_selector: w.namespace_selector,
            object_selector: w.object_selector,
            failure_policy: match w.failure_policy {
                FailurePolicy::Fail => p::FailurePolicy::Fail,
                FailurePolicy::Ignore => p::FailurePolicy::Ignore,
            },
            side_effects: match w.side_effects {
                SideEffects::None => p::SideEffects::None,
                SideEffects::NoneOnDryRun => p::SideEffects::NoneOnDryRun,
            },
            timeout_seconds: w.timeout_seconds,
            match_conditions: w
                .match_conditions
                .into_iter()
                .map(|c| p::MatchCondition { name: c.name, expression: c.expression })
                .collect(),
        }
    }

    pub(crate) fn manifest_to_raw(m: Manifest) -> p::PluginManifest {
        let (parent, scope) = m.parent.unwrap_or_else(|| (Kind::new("", "", ""), Scope::Namespaced));
        p::PluginManifest {
            name: m.name,
            version: m.version,
            description: m.description,
            parent: p::ParentKind {
                kind: kind_to_raw(&parent),
                scope: match scope {
                    Scope::Namespaced => t::Scope::Namespaced,
                    Scope::Cluster => t::Scope::Cluster,
                },
            },
            children: m.children.iter().map(kind_to_raw).collect(),
            related: m
                .related
                .into_iter()
                .map(|rk| p::RelatedKind { kind: kind_to_raw(&rk.kind), label_selector: rk.label_selector })
                .collect(),
            finalizer: m.finalizer,
            prune: m.prune,
            adopt_unowned: m.adopt_unowned,
            config_schema: m.config_schema.map(|s| s.to_string()),
            webhooks: m.webhooks.into_iter().map(webhook_to_raw).collect(),
        }
    }

    pub(crate) fn admit<P: Plugin>(webhook: String, raw: a::AdmissionRequest) -> Result<a::Verdict, a::AdmissionError> {
        if !P::manifest().webhooks.iter().any(|w| w.name == webhook) {
            return Err(a::AdmissionError::UnknownWebhook(webhook));
        }
        let failed = |e: Error| a::AdmissionError::Failed(e.message().to_owned());
        let (object, old_object) = super::admission_objects(raw.object.as_deref(), raw.old_object.as_deref()).map_err(failed)?;
        let request = AdmissionRequest {
            uid: raw.uid,
            kind: Kind::new(raw.kind.group, raw.kind.version, raw.kind.kind),
            resource: GroupVersionResource {
                group: raw.resource.group,
                version: raw.resource.version,
                resource: raw.resource.resource,
            },
            sub_resource: raw.sub_resource,
            operation: operation_from_raw(raw.operation),
            namespace: raw.namespace,
            name: raw.name,
            object,
            old_object,
            user_info: UserInfo { username: raw.user_info.username, uid: raw.user_info.uid, groups: raw.user_info.groups },
            dry_run: raw.dry_run,
        };
        let ctx = crate::Context::host();
        Ok(match P::admit(&webhook, request, &ctx).map_err(failed)? {
            Verdict::Allowed { warnings, mutated } => {
                a::Verdict::Allowed(a::Allowed { warnings, mutated: mutated.map(|m| m.to_string()) })
            }
            Verdict::Denied { code, message, warnings } => a::Verdict::Denied(a::Denied { code, message, warnings }),
        })
    }

    pub(crate) fn reconcile<P: Plugin>(request: r::Request) -> Result<r::Response, r::ReconcileError> {
        let request =
            Request::from_wire(&request.parent, &request.children, &request.related, request.finalizing, &request.config)
                .map_err(error_to_raw)?;
        let ctx = crate::Context::host();
        let wire = P::reconcile(request, &ctx).and_then(crate::Response::into_wire).map_err(error_to_raw)?;
        Ok(r::Response {
            children: wire.children,
            delete: wire.delete.into_iter().map(object_ref_to_raw).collect(),
            status: wire.status,
            conditions: wire.conditions.into_iter().map(condition_to_raw).collect(),
            events: wire
                .events
                .into_iter()
                .map(|e| r::Event {
                    type_: match e.type_ {
                        EventType::Normal => r::EventType::Normal,
                        EventType::Warning => r::EventType::Warning,
                    },
                    reason: e.reason,
                    action: e.action,
                    note: e.note,
                })
                .collect(),
            requeue_after_ms: wire.requeue_after_ms,
            finalized: wire.finalized,
        })
    }
}

/// What `export_plugin!` expands to refers to these; not part of the public API.
#[doc(hidden)]
#[cfg(target_arch = "wasm32")]
pub mod __private {
    pub use crate::bindings::exports::wasmop::plugin::admission::{
        AdmissionError as RawAdmissionError, AdmissionRequest as RawAdmissionRequest, Guest as AdmissionGuest,
        Verdict as RawVerdict,
    };
    pub use crate::bindings::exports::wasmop::plugin::plugin::{Guest as PluginGuest, PluginManifest as RawManifest};
    pub use crate::bindings::exports::wasmop::plugin::reconciler::{
        Guest as ReconcilerGuest, ReconcileError as RawReconcileError, Request as RawRequest, Response as RawResponse,
    };

    /// The plugin's manifest as a raw record.
    pub fn manifest<P: crate::Plugin>() -> RawManifest {
        super::raw::manifest_to_raw(P::manifest())
    }

    /// Run the plugin on a raw request.
    pub fn reconcile<P: crate::Plugin>(request: RawRequest) -> Result<RawResponse, RawReconcileError> {
        super::raw::reconcile::<P>(request)
    }

    /// Run the plugin's admission on a raw request.
    pub fn admit<P: crate::Plugin>(webhook: String, request: RawAdmissionRequest) -> Result<RawVerdict, RawAdmissionError> {
        super::raw::admit::<P>(webhook, request)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{Condition, Kind};

    #[test]
    fn an_error_crosses_as_its_kind_message_status_text_and_conditions() {
        let ready = Condition::false_("Ready", "InvalidSpec", "spec.size is required");
        let e = Error::terminal("spec.size is required").with_status(json!({"phase": "Invalid"})).with_condition(ready.clone());
        assert_eq!(
            e.into_wire(),
            WireFailure {
                retryable: false,
                message: "spec.size is required".into(),
                status: Some(r#"{"phase":"Invalid"}"#.into()),
                conditions: vec![ready],
            }
        );
        let bare = Error::retryable("later").into_wire();
        assert!(bare.retryable);
        assert_eq!((bare.status, bare.conditions.len()), (None, 0));
    }

    #[test]
    fn parent_that_is_not_json_is_a_terminal_error() {
        let e = Request::from_wire("{oops", &[], &[], false, "{}").unwrap_err();
        assert!(!e.is_retryable());
        assert!(e.message().starts_with("the parent object sent by the host is not valid JSON:"), "{e}");
    }

    #[test]
    fn bad_child_or_related_text_names_its_index() {
        let ok = r#"{"kind":"X"}"#.to_string();
        let e = Request::from_wire("{}", &[ok.clone(), "nope".into()], &[], false, "{}").unwrap_err();
        assert!(e.message().starts_with("observed child #1 sent by the host"), "{e}");
        let e = Request::from_wire("{}", &[], &["[".into()], false, "{}").unwrap_err();
        assert!(e.message().starts_with("related object #0"), "{e}");
    }

    #[test]
    fn empty_config_text_means_empty_object() {
        let req = Request::from_wire(r#"{"metadata":{"name":"p"}}"#, &[], &[], true, "").unwrap();
        assert_eq!(req.config, json!({}));
        assert!(req.finalizing);
        assert_eq!(req.name(), "p");
    }

    #[test]
    fn response_flattens_to_json_text() {
        let wire = Response::new()
            .apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}))
            .apply_raw_json("not json")
            .status(json!({"phase": "Ready"}))
            .condition(Condition::true_("Ready", "Ok", ""))
            .delete(ObjectRef::cluster(&Kind::new("", "v1", "Namespace"), "n"))
            .requeue_after(Duration::from_micros(2_500_000))
            .finalized()
            .into_wire()
            .unwrap();
        assert_eq!(wire.children, [r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#, "not json"]);
        assert_eq!(wire.status.as_deref(), Some(r#"{"phase":"Ready"}"#));
        assert_eq!((wire.conditions.len(), wire.delete.len()), (1, 1));
        assert_eq!(wire.requeue_after_ms, Some(2500));
        assert!(wire.finalized && wire.events.is_empty());
    }

    #[test]
    fn response_with_a_recorded_mistake_flattens_to_that_error() {
        let e = Response::new().apply(json!({"kind": "X"})).into_wire().unwrap_err();
        assert_eq!(e.message(), "child #0: has no apiVersion");
    }

    #[test]
    fn admitted_objects_that_are_not_json_name_which_one() {
        let e = admission_objects(Some("{}"), Some("nope")).unwrap_err();
        assert!(e.message().starts_with("the old object sent by the host is not valid JSON"), "{e}");
        assert_eq!(admission_objects(None, Some("{}")).unwrap(), (None, Some(json!({}))));
    }

    #[test]
    fn huge_requeue_delay_saturates() {
        assert_eq!(duration_to_ms(Duration::MAX), u64::MAX);
    }
}
