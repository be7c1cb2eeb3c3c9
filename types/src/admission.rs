//! Admission: the webhooks a plugin serves, what each call is asked, and what it answers.
//!
//! The JSON forms follow Kubernetes' own (`admissionregistration.k8s.io/v1` for [`Webhook`]
//! and [`Rule`], `admission.k8s.io/v1` for [`AdmissionRequest`]), so the request inside an
//! `AdmissionReview` deserializes straight into an [`AdmissionRequest`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Kind;

/// An operation an admission rule matches, and the operation of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Operation {
    /// An object is created.
    #[serde(rename = "CREATE")]
    Create,
    /// An object is updated.
    #[serde(rename = "UPDATE")]
    Update,
    /// An object is deleted.
    #[serde(rename = "DELETE")]
    Delete,
    /// A connect request (`pods/exec`, `pods/portforward`, ...).
    #[serde(rename = "CONNECT")]
    Connect,
    /// Every operation (only in a [`Rule`]).
    #[serde(rename = "*")]
    All,
}

/// Whether a webhook may change the object or only judge it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WebhookType {
    /// Judges the object: allowed or denied, never changed. Registered in the host's
    /// `ValidatingWebhookConfiguration`.
    Validating,
    /// May answer a changed object (the host computes the JSON Patch). Registered in the
    /// host's `MutatingWebhookConfiguration`.
    Mutating,
}

/// What the API server does when the webhook cannot be called or fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum FailurePolicy {
    /// Refuse the request (Kubernetes' default).
    #[default]
    Fail,
    /// Let the request through.
    Ignore,
}

/// Whether calling the webhook has effects outside the admitted object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum SideEffects {
    /// None: plugins cannot write anything from an admission call, so this is the default.
    #[default]
    None,
    /// None when the request is a dry run.
    NoneOnDryRun,
}

/// Which objects a rule matches by scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum RuleScope {
    /// Cluster-scoped objects only.
    Cluster,
    /// Namespaced objects only.
    Namespaced,
    /// Both (Kubernetes' default).
    #[default]
    #[serde(rename = "*")]
    All,
}

/// Which requests a webhook is called for: operations on resources, as in
/// `admissionregistration.k8s.io/v1` `RuleWithOperations`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// Operations matched; `[All]` matches every one.
    pub operations: Vec<Operation>,
    /// API groups (`""` is the core group, `"*"` every group).
    pub api_groups: Vec<String>,
    /// API versions (`"*"` every version).
    pub api_versions: Vec<String>,
    /// Resources, plural and lowercase (`pods`), optionally with a subresource (`pods/status`).
    pub resources: Vec<String>,
    /// Which objects by scope.
    #[serde(default)]
    pub scope: RuleScope,
}

/// One admission webhook a plugin serves, as declared in its manifest.
///
/// The host registers it in its webhook configuration under the name
/// `<webhook>.<plugin>.wasmop.dev` and serves it at the path `/admission/<plugin>/<webhook>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    /// Name, a DNS-1123 label unique within the plugin; passed back to the plugin on every call
    /// so one plugin can serve several webhooks.
    pub name: String,
    /// Validating or mutating.
    #[serde(rename = "type")]
    pub type_: WebhookType,
    /// The requests it is called for; at least one rule.
    pub rules: Vec<Rule>,
    /// Only objects in namespaces whose labels match this selector (kubectl syntax, e.g.
    /// `env in (prod),!skip`); empty matches every namespace.
    #[serde(default)]
    pub namespace_selector: String,
    /// Only objects whose labels match this selector (kubectl syntax); empty matches all.
    #[serde(default)]
    pub object_selector: String,
    /// What the API server does when the call fails.
    #[serde(default)]
    pub failure_policy: FailurePolicy,
    /// Effects outside the object.
    #[serde(default)]
    pub side_effects: SideEffects,
    /// How long the API server waits, 1 to 30 seconds (Kubernetes' range). The host's deadline
    /// for the plugin call is well under it.
    pub timeout_seconds: u32,
    /// CEL conditions the API server evaluates before calling the webhook: it is called only
    /// when every one is true (WIT 0.3.0 on; empty for older plugins). The host adds its own
    /// after these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_conditions: Vec<MatchCondition>,
}

/// A CEL expression the API server evaluates before it calls a webhook, as Kubernetes'
/// `MatchCondition` (`admissionregistration.k8s.io/v1`, GA since 1.30).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MatchCondition {
    /// Unique within the webhook: letters, digits, `-`, `.` and `_`, starting and ending with a
    /// letter or digit, at most 63 characters. The API server names it when the expression
    /// fails to evaluate.
    pub name: String,
    /// A CEL expression over `object`, `oldObject`, `request` and `authorizer` that evaluates
    /// to a bool.
    pub expression: String,
}

/// Shortest and longest `timeoutSeconds` Kubernetes accepts for a webhook.
pub const WEBHOOK_TIMEOUT_RANGE: std::ops::RangeInclusive<u32> = 1..=30;

/// A resource: API group, version and plural name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct GroupVersionResource {
    /// API group; empty for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural, lowercase resource name (`pods`).
    pub resource: String,
}

/// Who made the request.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UserInfo {
    /// The user name (`system:serviceaccount:ns:name` for service accounts).
    #[serde(default)]
    pub username: String,
    /// The user's uid.
    #[serde(default)]
    pub uid: String,
    /// The groups the user is in.
    #[serde(default)]
    pub groups: Vec<String>,
}

/// What one admission call is asked: the `request` of an `admission.k8s.io/v1`
/// `AdmissionReview`, with the fields a plugin decides on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    /// Identifies this request; the host copies it into the answer.
    pub uid: String,
    /// The kind of the object.
    pub kind: Kind,
    /// The resource being requested.
    pub resource: GroupVersionResource,
    /// The subresource (`status`, `scale`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_resource: Option<String>,
    /// What is being done.
    pub operation: Operation,
    /// The object's namespace; `None` for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The object's name; may be `None` on CREATE with `generateName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The object as it would be stored; `None` on DELETE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    /// The object before the change; `None` on CREATE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_object: Option<Value>,
    /// Who is asking.
    #[serde(default)]
    pub user_info: UserInfo,
    /// Nothing will be persisted.
    #[serde(default)]
    pub dry_run: bool,
}

/// What an admission call answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "camelCase")]
pub enum Verdict {
    /// Let the request through.
    Allowed {
        /// Warnings shown to the client (`kubectl` prints them).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        warnings: Vec<String>,
        /// For a mutating webhook: the object as it should be stored. The host computes the
        /// JSON Patch from the request's object to this one. `None`: unchanged.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mutated: Option<Value>,
    },
    /// Refuse the request.
    Denied {
        /// HTTP-style status code the client sees (400–599; 403 when unsure).
        code: u16,
        /// Why, in words the user of `kubectl` understands.
        message: String,
        /// Warnings shown to the client.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        warnings: Vec<String>,
    },
}

impl Verdict {
    /// Allowed, unchanged, without warnings.
    pub fn allow() -> Self {
        Self::Allowed { warnings: Vec::new(), mutated: None }
    }

    /// Denied with code 403 and `message`.
    pub fn deny(message: impl Into<String>) -> Self {
        Self::Denied { code: 403, message: message.into(), warnings: Vec::new() }
    }

    /// Whether the request is let through.
    pub fn is_allowed(&self) -> bool {
        matches!(self, Self::Allowed { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_of_an_admission_review_deserializes() {
        let request: AdmissionRequest = serde_json::from_value(serde_json::json!({
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE",
            "namespace": "default",
            "userInfo": {"username": "admin", "groups": ["system:masters"]},
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-"}},
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }))
        .unwrap();
        assert_eq!(request.operation, Operation::Create);
        assert_eq!(request.kind, Kind::new("", "v1", "Pod"));
        assert_eq!(request.name, None);
        assert_eq!(request.user_info.groups, ["system:masters"]);
    }

    #[test]
    fn a_webhook_reads_with_kubernetes_defaults() {
        let webhook: Webhook = serde_json::from_value(serde_json::json!({
            "name": "inject", "type": "Mutating", "timeoutSeconds": 5,
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]
        }))
        .unwrap();
        assert_eq!(webhook.failure_policy, FailurePolicy::Fail);
        assert_eq!(webhook.side_effects, SideEffects::None);
        assert_eq!(webhook.rules[0].scope, RuleScope::All);
        assert_eq!(serde_json::to_value(Operation::All).unwrap(), "*");
    }

    #[test]
    fn verdicts_say_whether_the_request_passes() {
        assert!(Verdict::allow().is_allowed());
        assert!(!Verdict::deny("no").is_allowed());
        assert_eq!(Verdict::deny("no"), Verdict::Denied { code: 403, message: "no".into(), warnings: vec![] });
    }
}
