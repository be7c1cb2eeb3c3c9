//! Builders and accessors for the admission types: how a plugin declares a webhook, how a unit
//! test makes a request, and how a plugin answers.

use serde::de::{DeserializeOwned, Error as _};
use serde_json::Value;

use crate::Kind;
use crate::admission::{
    AdmissionRequest, FailurePolicy, GroupVersionResource, MatchCondition, Operation, Rule, RuleScope, SideEffects, UserInfo,
    Verdict, Webhook, WebhookType,
};

/// Kubernetes' default `timeoutSeconds` for a webhook.
const DEFAULT_TIMEOUT_SECONDS: u32 = 10;

impl Rule {
    /// A rule for `operations` on one resource (`""` is the core group), both scopes.
    ///
    /// ```
    /// use wasmop_types::{Operation, Rule, RuleScope};
    /// let rule = Rule::new([Operation::Create, Operation::Update], "apps", "v1", "deployments").scope(RuleScope::Namespaced);
    /// assert_eq!(rule.resources, ["deployments"]);
    /// ```
    pub fn new(
        operations: impl IntoIterator<Item = Operation>,
        group: impl Into<String>,
        version: impl Into<String>,
        resource: impl Into<String>,
    ) -> Self {
        Self {
            operations: operations.into_iter().collect(),
            api_groups: vec![group.into()],
            api_versions: vec![version.into()],
            resources: vec![resource.into()],
            scope: RuleScope::All,
        }
    }

    /// Match only objects of this scope.
    #[must_use]
    pub fn scope(mut self, scope: RuleScope) -> Self {
        self.scope = scope;
        self
    }
}

impl Webhook {
    fn of(name: impl Into<String>, type_: WebhookType) -> Self {
        Self {
            name: name.into(),
            type_,
            rules: Vec::new(),
            namespace_selector: String::new(),
            object_selector: String::new(),
            failure_policy: FailurePolicy::Fail,
            side_effects: SideEffects::None,
            timeout_seconds: DEFAULT_TIMEOUT_SECONDS,
            match_conditions: Vec::new(),
        }
    }

    /// A validating webhook named `name` (a DNS-1123 label), without rules yet; fails closed,
    /// no side effects, 10 s timeout.
    pub fn validating(name: impl Into<String>) -> Self {
        Self::of(name, WebhookType::Validating)
    }

    /// A mutating webhook named `name`, otherwise as [`Webhook::validating`].
    ///
    /// ```
    /// use wasmop_types::{FailurePolicy, Operation, Webhook};
    /// let inject = Webhook::mutating("inject")
    ///     .rule(Operation::Create, "", "v1", "pods")
    ///     .object_selector("inject!=false")
    ///     .failure_policy(FailurePolicy::Ignore)
    ///     .timeout_seconds(5);
    /// assert_eq!(inject.rules[0].api_versions, ["v1"]);
    /// ```
    pub fn mutating(name: impl Into<String>) -> Self {
        Self::of(name, WebhookType::Mutating)
    }

    /// Add a rule: one operation on one resource.
    #[must_use]
    pub fn rule(
        self,
        operation: Operation,
        group: impl Into<String>,
        version: impl Into<String>,
        resource: impl Into<String>,
    ) -> Self {
        self.with_rule(Rule::new([operation], group, version, resource))
    }

    /// Add a rule built with [`Rule::new`].
    #[must_use]
    pub fn with_rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Call the webhook only for objects in namespaces whose labels match (kubectl syntax).
    #[must_use]
    pub fn namespace_selector(mut self, selector: impl Into<String>) -> Self {
        self.namespace_selector = selector.into();
        self
    }

    /// Call the webhook only for objects whose labels match (kubectl syntax).
    #[must_use]
    pub fn object_selector(mut self, selector: impl Into<String>) -> Self {
        self.object_selector = selector.into();
        self
    }

    /// What the API server does when the call fails.
    #[must_use]
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.failure_policy = policy;
        self
    }

    /// Declare side effects (only `NoneOnDryRun` differs from the default).
    #[must_use]
    pub fn side_effects(mut self, side_effects: SideEffects) -> Self {
        self.side_effects = side_effects;
        self
    }

    /// How long the API server waits, 1 to 30 seconds.
    #[must_use]
    pub fn timeout_seconds(mut self, seconds: u32) -> Self {
        self.timeout_seconds = seconds;
        self
    }

    /// Call the webhook only for requests on which the CEL `expression` is true (a
    /// [`MatchCondition`] named `name`; every condition must hold). The API server evaluates it
    /// before calling, so requests the plugin would let through anyway never reach it.
    ///
    /// ```
    /// use wasmop_types::{Operation, Webhook};
    /// let inject = Webhook::mutating("inject")
    ///     .rule(Operation::Create, "", "v1", "pods")
    ///     .match_condition("not-injected", "!has(object.metadata.annotations) || !('injected' in object.metadata.annotations)");
    /// assert_eq!(inject.match_conditions[0].name, "not-injected");
    /// ```
    #[must_use]
    pub fn match_condition(mut self, name: impl Into<String>, expression: impl Into<String>) -> Self {
        self.match_conditions.push(MatchCondition { name: name.into(), expression: expression.into() });
        self
    }
}

impl AdmissionRequest {
    /// A request as the API server would send it for `operation` on `object` (for unit tests):
    /// kind, namespace and name are read from the object; the resource is the kind in
    /// lowercase plus `s` (set the real plural with [`AdmissionRequest::with_resource`] when
    /// that is wrong). For [`Operation::Delete`] the object is the old object and there is no
    /// new one.
    ///
    /// ```
    /// use serde_json::json;
    /// use wasmop_types::{AdmissionRequest, Operation};
    /// let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "prod"}});
    /// let req = AdmissionRequest::new(Operation::Create, pod);
    /// assert_eq!((req.namespace.as_deref(), req.name.as_deref(), req.resource.resource.as_str()), (Some("prod"), Some("web"), "pods"));
    /// ```
    pub fn new(operation: Operation, object: Value) -> Self {
        let kind = Kind::of_object(&object).unwrap_or_else(|| Kind::new("", "", ""));
        let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str).map(str::to_owned);
        let resource = GroupVersionResource {
            group: kind.group.clone(),
            version: kind.version.clone(),
            resource: format!("{}s", kind.kind.to_lowercase()),
        };
        let (namespace, name) = (text("/metadata/namespace"), text("/metadata/name"));
        let (object, old_object) = if operation == Operation::Delete { (None, Some(object)) } else { (Some(object), None) };
        Self {
            uid: "00000000-0000-0000-0000-000000000000".into(),
            kind,
            resource,
            sub_resource: None,
            operation,
            namespace,
            name,
            object,
            old_object,
            user_info: UserInfo::default(),
            dry_run: false,
        }
    }

    /// Set the object before the change (an UPDATE).
    #[must_use]
    pub fn with_old_object(mut self, old: Value) -> Self {
        self.old_object = Some(old);
        self
    }

    /// Set the resource (its plural name).
    #[must_use]
    pub fn with_resource(mut self, resource: impl Into<String>) -> Self {
        self.resource.resource = resource.into();
        self
    }

    /// Set who is asking.
    #[must_use]
    pub fn with_user(mut self, username: impl Into<String>, groups: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.user_info =
            UserInfo { username: username.into(), uid: String::new(), groups: groups.into_iter().map(Into::into).collect() };
        self
    }

    /// Mark the request a dry run.
    #[must_use]
    pub fn with_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// The object, typed (e.g. a k8s-openapi `Pod`).
    ///
    /// # Errors
    /// When the request has no object (a DELETE) or it does not deserialize into `T`.
    pub fn object_as<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        typed(self.object.as_ref(), "object")
    }

    /// The object before the change, typed.
    ///
    /// # Errors
    /// When the request has no old object (a CREATE) or it does not deserialize into `T`.
    pub fn old_object_as<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        typed(self.old_object.as_ref(), "old object")
    }
}

fn typed<T: DeserializeOwned>(value: Option<&Value>, what: &str) -> Result<T, serde_json::Error> {
    let value = value.ok_or_else(|| serde_json::Error::custom(format!("the request has no {what}")))?;
    T::deserialize(value)
}

impl Verdict {
    /// Denied with an HTTP-style `code` (400–599) and `message`.
    pub fn deny_with(code: u16, message: impl Into<String>) -> Self {
        Self::Denied { code, message: message.into(), warnings: Vec::new() }
    }

    /// Allowed, with the object changed into `object` (a mutating webhook). It must keep the
    /// request's `apiVersion`, `kind`, name and namespace; the host computes the JSON Patch.
    ///
    /// ```
    /// use serde_json::json;
    /// use wasmop_types::Verdict;
    /// let v = Verdict::mutate(json!({"kind": "Pod"})).warning("defaulted imagePullPolicy");
    /// assert_eq!(v.mutated(), Some(&json!({"kind": "Pod"})));
    /// assert_eq!(v.warnings(), ["defaulted imagePullPolicy"]);
    /// ```
    pub fn mutate(object: Value) -> Self {
        Self::Allowed { warnings: Vec::new(), mutated: Some(object) }
    }

    /// Add a warning shown to the client.
    #[must_use]
    pub fn warning(mut self, warning: impl Into<String>) -> Self {
        match &mut self {
            Self::Allowed { warnings, .. } | Self::Denied { warnings, .. } => warnings.push(warning.into()),
        }
        self
    }

    /// The mutated object, if the verdict changes the object.
    pub fn mutated(&self) -> Option<&Value> {
        match self {
            Self::Allowed { mutated, .. } => mutated.as_ref(),
            Self::Denied { .. } => None,
        }
    }

    /// The warnings.
    pub fn warnings(&self) -> &[String] {
        match self {
            Self::Allowed { warnings, .. } | Self::Denied { warnings, .. } => warnings,
        }
    }

    /// The denial's message, if denied.
    pub fn message(&self) -> Option<&str> {
        match self {
            Self::Denied { message, .. } => Some(message),
            Self::Allowed { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_delete_request_carries_the_old_object_only() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let req = AdmissionRequest::new(Operation::Delete, cm.clone());
        assert_eq!((req.object, req.old_object), (None, Some(cm)));
    }

    #[test]
    fn typed_access_names_what_is_missing() {
        let req =
            AdmissionRequest::new(Operation::Create, json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {}}));
        assert_eq!(req.kind, Kind::new("apps", "v1", "Deployment"));
        let err = req.old_object_as::<Value>().unwrap_err();
        assert_eq!(err.to_string(), "the request has no old object");
        assert_eq!(req.object_as::<Value>().unwrap()["kind"], "Deployment");
    }

    #[test]
    fn builders_fill_kubernetes_defaults() {
        let w = Webhook::validating("check").rule(Operation::All, "example.com", "*", "things");
        assert_eq!((w.timeout_seconds, w.failure_policy, w.type_), (10, FailurePolicy::Fail, WebhookType::Validating));
        let denied = Verdict::deny_with(422, "bad").warning("w");
        assert_eq!((denied.message(), denied.warnings().len(), denied.mutated()), (Some("bad"), 1, None));
    }

    #[test]
    fn match_conditions_keep_their_order_and_serialize_as_kubernetes_does() {
        let w = Webhook::mutating("inject")
            .rule(Operation::Create, "", "v1", "pods")
            .match_condition("a", "true")
            .match_condition("b", "request.namespace != 'x'");
        let names: Vec<&str> = w.match_conditions.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let json = serde_json::to_value(&w).unwrap();
        assert_eq!(json["matchConditions"][1], json!({"name": "b", "expression": "request.namespace != 'x'"}));
        let plain = serde_json::to_value(Webhook::validating("v")).unwrap();
        assert!(plain.get("matchConditions").is_none(), "none: the field is left out, as before");
        let back: Webhook = serde_json::from_value(plain).unwrap();
        assert!(back.match_conditions.is_empty());
    }
}
