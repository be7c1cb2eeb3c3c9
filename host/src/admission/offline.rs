//! Admission offline (`wasmop admit`): the `AdmissionRequest` the API server would send a
//! plugin's webhook for an object read from a file, and the answer `wasmop run` would give it.
//!
//! [`request`] builds the request as the API server does: the kind from the object, the
//! resource (its plural) resolved by [`KnownKinds`] as every offline command resolves kinds,
//! the namespace defaulted as `kubectl` defaults it, and the webhook's rules and object
//! selector matched as the API server matches them before it calls a webhook (a request the
//! API server would not send is an error saying which rule it misses). The namespace selector
//! is not judged (the namespace's labels are not known offline), nor are the webhook's CEL
//! match conditions (the API server evaluates them; `wasmop admit` says so and calls the
//! webhook as if they held).
//!
//! [`OfflineAdmitter`] serves one loaded plugin, with fixtures as its object cache, to the
//! live [`Handler`]: the call ([`Plugin::admit_within`](crate::runtime::Plugin::admit_within)), the checks of the verdict and the fail-closed
//! denials are the ones `run` answers the API server with.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use wasmop_types::{
    AdmissionRequest, GroupVersionResource, LabelSelector, Operation, Rule, RuleScope, UserInfo, Verdict, Webhook,
};

use super::admitter::{Admitter, CallFailure, NotServed};
use super::handler::Handler;
use super::metrics::AdmissionMetrics;
use super::review::Answer;
use crate::contract::{Kind, KindScopes, Manifest, Scope};
use crate::metrics::Metrics;
use crate::objects::{MemoryCache, ObjectCache};
use crate::policy::Grants;
use crate::runtime::Plugin;

/// The uid of every request built offline (an answer copies it back): fixed, so that output is
/// reproducible.
pub const OFFLINE_UID: &str = "00000000-0000-0000-0000-000000000000";

/// The user a request is sent as when none is given: the administrator of a kubeadm cluster.
pub const DEFAULT_USER: &str = "kubernetes-admin";

/// The groups of [`DEFAULT_USER`].
pub const DEFAULT_GROUPS: [&str; 2] = ["kubeadm:cluster-admins", "system:authenticated"];

/// What the user asks: the request's objects and who asks.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    /// The object (for a DELETE, the object being deleted).
    pub object: Value,
    /// The object before an UPDATE.
    pub old_object: Option<Value>,
    /// The operation [default: UPDATE with an old object, else CREATE].
    pub operation: Option<Operation>,
    /// The namespace [default: the object's, else `default` for a namespaced kind].
    pub namespace: Option<String>,
    /// The user [default: [`DEFAULT_USER`]].
    pub user: Option<String>,
    /// The user's groups [default: [`DEFAULT_GROUPS`] for the default user, else none].
    pub groups: Vec<String>,
}

/// Why no request could be built: the API server would not send one like it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    /// The object has no `apiVersion` or `kind`.
    #[error("the object has no apiVersion or kind")]
    NoKind,
    /// The object's kind is not known offline.
    #[error(
        "kind {0} is unknown: it is not a built-in Kubernetes kind and no CustomResourceDefinition given defines it \
         (pass its CRD file or directory with --crds)"
    )]
    UnknownKind(Kind),
    /// The operation does not go with the objects given.
    #[error("{0}")]
    Operation(String),
    /// The namespace does not go with the object or its kind.
    #[error("{0}")]
    Namespace(String),
    /// The old object is not the same object.
    #[error("the old object is {old}, not {object}: an UPDATE changes one object")]
    OtherObject {
        /// `kind namespace/name` of the object.
        object: String,
        /// `kind namespace/name` of the old object.
        old: String,
    },
    /// No rule of the webhook matches the request.
    #[error("webhook {webhook} is not called for {request}: its rules match {rules}")]
    NoRule {
        /// The webhook.
        webhook: String,
        /// `OPERATION resource.group/version (scope)` of the request.
        request: String,
        /// The rules, `;`-separated.
        rules: String,
    },
    /// The object's labels do not match the webhook's object selector.
    #[error("webhook {webhook} is not called for this object: its labels do not match the objectSelector {selector:?}")]
    ObjectSelector {
        /// The webhook.
        webhook: String,
        /// The selector.
        selector: String,
    },
}

/// The request the API server would send `webhook` for `ask`, kinds resolved by `kinds`.
///
/// # Errors
/// [`AskError`]: an object without kind or of an unknown kind, an operation without the objects
/// it needs, a namespace that does not fit, or a request the webhook's rules or object selector
/// do not match.
pub fn request(webhook: &Webhook, kinds: &dyn KindScopes, ask: Ask) -> Result<AdmissionRequest, AskError> {
    let Ask { mut object, mut old_object, operation, namespace, user, groups } = ask;
    let kind = Kind::of_object(&object).ok_or(AskError::NoKind)?;
    let (Some(plural), Some(scope)) = (kinds.plural_of(&kind), kinds.scope_of(&kind)) else {
        return Err(AskError::UnknownKind(kind));
    };
    let operation = operation.unwrap_or(if old_object.is_some() { Operation::Update } else { Operation::Create });
    match (operation, old_object.is_some()) {
        (Operation::Update, false) => {
            return Err(AskError::Operation("an UPDATE needs the object before it (--old-object)".into()));
        }
        (Operation::Create | Operation::Delete, true) => {
            return Err(AskError::Operation(format!(
                "a {} has no object before it: --old-object is for an UPDATE",
                operation_name(operation)
            )));
        }
        (Operation::Connect | Operation::All, _) => {
            return Err(AskError::Operation("the operation is CREATE, UPDATE or DELETE".into()));
        }
        _ => {}
    }
    let namespace = match scope {
        Scope::Namespaced => {
            let own = object.pointer("/metadata/namespace").and_then(Value::as_str).filter(|n| !n.is_empty());
            let chosen = match (&namespace, own) {
                (Some(asked), Some(own)) if asked != own => {
                    return Err(AskError::Namespace(format!(
                        "the object's namespace {own:?} does not match the namespace {asked:?} asked for"
                    )));
                }
                (Some(asked), _) => asked.clone(),
                (None, Some(own)) => own.to_owned(),
                (None, None) => "default".to_owned(),
            };
            for o in std::iter::once(&mut object).chain(old_object.as_mut()) {
                if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.entry("namespace").or_insert_with(|| Value::String(chosen.clone()));
                }
            }
            Some(chosen)
        }
        Scope::Cluster => {
            let own = object.pointer("/metadata/namespace").and_then(Value::as_str).filter(|n| !n.is_empty());
            if let Some(ns) = namespace.as_deref().or(own) {
                return Err(AskError::Namespace(format!("{kind} is cluster-scoped: it has no namespace, not {ns:?}")));
            }
            None
        }
    };
    if let Some(old) = &old_object {
        let (this, before) = (describe(&object), describe(old));
        if this != before {
            return Err(AskError::OtherObject { object: this, old: before });
        }
    }
    let resource = GroupVersionResource { group: kind.group.clone(), version: kind.version.clone(), resource: plural };
    if !webhook.rules.iter().any(|rule| rule_matches(rule, operation, &resource, scope)) {
        let scope_name = if scope == Scope::Namespaced { "namespaced" } else { "cluster-scoped" };
        return Err(AskError::NoRule {
            webhook: webhook.name.clone(),
            request: format!("{} {} ({scope_name})", operation_name(operation), gvr(&resource)),
            rules: webhook.rules.iter().map(rule_text).collect::<Vec<_>>().join("; "),
        });
    }
    let selector = LabelSelector::parse(&webhook.object_selector).unwrap_or_default();
    // The API server calls a webhook when the object or the old object matches.
    if !std::iter::once(&object).chain(old_object.as_ref()).any(|o| selector.matches_object(o)) {
        return Err(AskError::ObjectSelector { webhook: webhook.name.clone(), selector: webhook.object_selector.clone() });
    }
    let name = object.pointer("/metadata/name").and_then(Value::as_str).map(str::to_owned);
    let (object, old_object) = if operation == Operation::Delete { (None, Some(object)) } else { (Some(object), old_object) };
    let groups = match (&user, groups.is_empty()) {
        (None, true) => DEFAULT_GROUPS.iter().map(|g| (*g).to_owned()).collect(),
        _ => groups,
    };
    let user_info = UserInfo { username: user.unwrap_or_else(|| DEFAULT_USER.to_owned()), uid: String::new(), groups };
    Ok(AdmissionRequest {
        uid: OFFLINE_UID.to_owned(),
        kind,
        resource,
        sub_resource: None,
        operation,
        namespace,
        name,
        object,
        old_object,
        user_info,
        dry_run: false,
    })
}

/// Whether `rule` matches a request for `operation` on `resource` of `scope`, as the API server
/// matches it.
fn rule_matches(rule: &Rule, operation: Operation, resource: &GroupVersionResource, scope: Scope) -> bool {
    let listed = |list: &[String], value: &str| list.iter().any(|entry| entry == "*" || entry == value);
    let operation_ok = rule.operations.iter().any(|o| *o == Operation::All || *o == operation);
    let resource_ok = rule.resources.iter().any(|r| r == "*" || r == "*/*" || *r == resource.resource);
    let scope_ok = match rule.scope {
        RuleScope::All => true,
        RuleScope::Namespaced => scope == Scope::Namespaced,
        RuleScope::Cluster => scope == Scope::Cluster,
    };
    operation_ok
        && listed(&rule.api_groups, &resource.group)
        && listed(&rule.api_versions, &resource.version)
        && resource_ok
        && scope_ok
}

fn operation_name(operation: Operation) -> &'static str {
    match operation {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
        Operation::All => "*",
    }
}

/// `resource.group/version`, or `resource/version` for the core group.
fn gvr(resource: &GroupVersionResource) -> String {
    match resource.group.as_str() {
        "" => format!("{}/{}", resource.resource, resource.version),
        group => format!("{}.{group}/{}", resource.resource, resource.version),
    }
}

/// A rule as one line: `CREATE,UPDATE sidecarsets.apps.wasmop.dev/v1alpha1 (namespaced)`.
fn rule_text(rule: &Rule) -> String {
    let operations: Vec<&str> = rule.operations.iter().map(|o| operation_name(*o)).collect();
    let mut resources = Vec::new();
    for group in &rule.api_groups {
        for version in &rule.api_versions {
            for resource in &rule.resources {
                let r = GroupVersionResource { group: group.clone(), version: version.clone(), resource: resource.clone() };
                resources.push(gvr(&r));
            }
        }
    }
    let scope = match rule.scope {
        RuleScope::All => "",
        RuleScope::Namespaced => " (namespaced)",
        RuleScope::Cluster => " (cluster-scoped)",
    };
    format!("{} {}{scope}", operations.join(","), resources.join(","))
}

/// `Kind namespace/name` of an object.
fn describe(object: &Value) -> String {
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned();
    let kind = Kind::of_object(object).map(|k| k.to_string()).unwrap_or_default();
    match text("/metadata/namespace") {
        ns if ns.is_empty() => format!("{kind} {}", text("/metadata/name")),
        ns => format!("{kind} {ns}/{}", text("/metadata/name")),
    }
}

/// One loaded plugin serving its webhooks, with fixtures standing in for the host's watch
/// cache, and no circuit breaker (one call, nothing to protect).
pub struct OfflineAdmitter {
    plugin: Plugin,
    cache: Arc<dyn ObjectCache>,
}

impl std::fmt::Debug for OfflineAdmitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OfflineAdmitter").field("plugin", &self.plugin.name()).finish_non_exhaustive()
    }
}

impl OfflineAdmitter {
    /// `plugin`, reading `cache`.
    pub fn new(plugin: Plugin, cache: Arc<dyn ObjectCache>) -> Self {
        Self { plugin, cache }
    }

    /// The answer `run` would give the API server for `request` to the webhook `webhook`:
    /// through the live [`Handler`], within half the webhook's `timeoutSeconds`.
    ///
    /// # Errors
    /// [`NotServed`] (as a message) when the plugin declares no such webhook; a message when
    /// the call was not made.
    pub async fn answer(self, webhook: &str, request: AdmissionRequest) -> Result<Answer, String> {
        let plugin = self.plugin.name().to_owned();
        let declared = self.find(&plugin, webhook).map_err(|e| e.to_string())?;
        let handler = Handler::new(Arc::new(self), AdmissionMetrics::new(&Metrics::new()), 1);
        handler.answer(&plugin, &declared, request).await.map_err(|failure| failure.message)
    }
}

impl Admitter for OfflineAdmitter {
    fn find(&self, plugin: &str, webhook: &str) -> Result<Webhook, NotServed> {
        if plugin != self.plugin.name() {
            return Err(NotServed::NoPlugin(plugin.into()));
        }
        let found = self.plugin.webhook(webhook).cloned();
        found.ok_or_else(|| NotServed::NoWebhook { plugin: plugin.into(), webhook: webhook.into() })
    }

    fn call(
        &self,
        plugin: &str,
        webhook: &str,
        request: AdmissionRequest,
        deadline: Duration,
    ) -> BoxFuture<'static, Result<Verdict, CallFailure>> {
        let (version, cache) = (self.plugin.clone(), Arc::clone(&self.cache));
        let (plugin, webhook) = (plugin.to_owned(), webhook.to_owned());
        Box::pin(async move {
            let called = version.admit_within(&webhook, &request, cache, deadline).await;
            called.map(|(verdict, _)| verdict).map_err(|error| CallFailure::from_call(&plugin, &error))
        })
    }

    fn webhooks(&self) -> Vec<(String, Vec<Webhook>)> {
        vec![(self.plugin.name().to_owned(), self.plugin.manifest().webhooks.clone())]
    }

    fn grants(&self, plugin: &str) -> Grants {
        if plugin == self.plugin.name() { self.plugin.grants().clone() } else { Grants::default() }
    }
}

/// The object cache of an offline call: the `related` fixtures of the kinds `manifest`
/// declares (parent, children, related), as the host's watches would hold them; a namespaced
/// object without a namespace is in `namespace`. One warning for each fixture of another kind
/// (the host does not watch it for this plugin, so the plugin never reads it).
pub fn fixtures(manifest: &Manifest, kinds: &dyn KindScopes, namespace: &str, related: Vec<Value>) -> (MemoryCache, Vec<String>) {
    let declared: Vec<&Kind> =
        std::iter::once(&manifest.parent).chain(&manifest.children).chain(manifest.related.iter().map(|r| &r.kind)).collect();
    let (mut cache, mut warnings) = (MemoryCache::default(), Vec::new());
    for mut object in related {
        let Some(kind) = Kind::of_object(&object).filter(|k| declared.contains(&k)) else {
            warnings.push(format!("{} is ignored: plugin {} declares no such kind", describe(&object), manifest.name));
            continue;
        };
        if kinds.scope_of(&kind) == Some(Scope::Namespaced)
            && let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.entry("namespace").or_insert_with(|| Value::String(namespace.to_owned()));
        }
        if let Err(e) = cache.insert(object) {
            warnings.push(format!("ignored: {e}"));
        }
    }
    (cache, warnings)
}

/// `answer` for a person: `allowed` or `denied (CODE): MESSAGE`, one `warning: ...` line per
/// warning, and a mutation's JSON Patch (RFC 6902), pretty-printed.
pub fn summary(answer: &Answer) -> String {
    let mut text = match (&answer.allowed, &answer.status) {
        (true, _) => "allowed".to_owned(),
        (false, Some((code, message))) => format!("denied ({code}): {message}"),
        (false, None) => "denied".to_owned(),
    };
    text.push('\n');
    for warning in &answer.warnings {
        text.push_str(&format!("warning: {warning}\n"));
    }
    if let Some(patch) = &answer.patch {
        let json = serde_json::to_string_pretty(patch).expect("a JSON Patch serializes");
        text.push_str(&format!("patch (RFC 6902 JSON Patch):\n{json}\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wasmop_types::{FailurePolicy, SideEffects, WebhookType};

    use super::*;
    use crate::contract::KnownKinds;

    fn webhook(rules: Vec<Rule>, object_selector: &str) -> Webhook {
        Webhook {
            name: "check".into(),
            type_: WebhookType::Validating,
            rules,
            namespace_selector: String::new(),
            object_selector: object_selector.into(),
            failure_policy: FailurePolicy::Fail,
            side_effects: SideEffects::None,
            timeout_seconds: 5,
            match_conditions: Vec::new(),
        }
    }

    fn pods() -> Rule {
        Rule::new([Operation::Create], "", "v1", "pods")
    }

    fn pod(labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": labels}})
    }

    #[test]
    fn a_create_is_built_as_the_api_server_sends_it() {
        let ask = Ask { object: pod(json!({})), ..Ask::default() };
        let request = request(&webhook(vec![pods()], ""), &KnownKinds::builtin(), ask).unwrap();
        assert_eq!(
            (request.operation, request.namespace.as_deref(), request.name.as_deref()),
            (Operation::Create, Some("default"), Some("web"))
        );
        assert_eq!(request.resource.resource, "pods");
        assert_eq!(request.object.unwrap()["metadata"]["namespace"], "default", "the object carries its namespace");
        assert_eq!((request.user_info.username.as_str(), request.user_info.groups.len()), (DEFAULT_USER, 2));
        assert_eq!(request.uid, OFFLINE_UID);
    }

    #[test]
    fn a_delete_sends_the_object_as_the_old_object_and_an_update_needs_one() {
        let rule = Rule::new([Operation::All], "", "v1", "pods");
        let ask = Ask { object: pod(json!({})), operation: Some(Operation::Delete), ..Ask::default() };
        let request = request(&webhook(vec![rule.clone()], ""), &KnownKinds::builtin(), ask).unwrap();
        assert!(request.object.is_none() && request.old_object.is_some());
        let ask = Ask { object: pod(json!({})), operation: Some(Operation::Update), ..Ask::default() };
        let err = super::request(&webhook(vec![rule.clone()], ""), &KnownKinds::builtin(), ask).unwrap_err();
        assert_eq!(err.to_string(), "an UPDATE needs the object before it (--old-object)");
        let mut other = pod(json!({}));
        other["metadata"]["name"] = json!("db");
        let ask = Ask { object: pod(json!({})), old_object: Some(other), ..Ask::default() };
        let err = super::request(&webhook(vec![rule], ""), &KnownKinds::builtin(), ask).unwrap_err();
        assert_eq!(err.to_string(), "the old object is v1/Pod default/db, not v1/Pod default/web: an UPDATE changes one object");
    }

    #[test]
    fn a_request_no_rule_matches_names_the_rules() {
        let ask = Ask { object: pod(json!({})), operation: Some(Operation::Delete), ..Ask::default() };
        let err = request(&webhook(vec![pods()], ""), &KnownKinds::builtin(), ask).unwrap_err();
        assert_eq!(
            err.to_string(),
            "webhook check is not called for DELETE pods/v1 (namespaced): its rules match CREATE pods/v1"
        );
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let err = request(&webhook(vec![pods()], ""), &KnownKinds::builtin(), Ask { object: cm, ..Ask::default() });
        assert!(err.unwrap_err().to_string().starts_with("webhook check is not called for CREATE configmaps/v1"));
    }

    #[test]
    fn an_object_the_selector_does_not_match_is_not_sent_and_an_unknown_kind_asks_for_its_crd() {
        let ask = Ask { object: pod(json!({"app": "db"})), ..Ask::default() };
        let err = request(&webhook(vec![pods()], "app=web"), &KnownKinds::builtin(), ask).unwrap_err();
        assert_eq!(
            err.to_string(),
            "webhook check is not called for this object: its labels do not match the objectSelector \"app=web\""
        );
        let octopus = json!({"apiVersion": "sea.example.com/v1", "kind": "Octopus", "metadata": {"name": "o"}});
        let err = request(&webhook(vec![pods()], ""), &KnownKinds::builtin(), Ask { object: octopus, ..Ask::default() });
        assert!(err.unwrap_err().to_string().contains("pass its CRD file or directory with --crds"));
    }

    #[test]
    fn a_namespace_must_fit_the_object_and_its_kind() {
        let ask = Ask { object: pod(json!({})), namespace: Some("prod".into()), ..Ask::default() };
        assert_eq!(request(&webhook(vec![pods()], ""), &KnownKinds::builtin(), ask).unwrap().namespace.as_deref(), Some("prod"));
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"}});
        let rule = Rule::new([Operation::Create], "", "v1", "namespaces");
        let ask = Ask { object: ns, namespace: Some("x".into()), ..Ask::default() };
        let err = request(&webhook(vec![rule], ""), &KnownKinds::builtin(), ask).unwrap_err();
        assert_eq!(err.to_string(), "v1/Namespace is cluster-scoped: it has no namespace, not \"x\"");
    }

    #[test]
    fn the_summary_shows_the_verdict_warnings_and_patch() {
        let denied = Answer { warnings: vec!["careful".into()], ..Answer::deny(OFFLINE_UID, 422, "no") };
        assert_eq!(summary(&denied), "denied (422): no\nwarning: careful\n");
        let patch = serde_json::from_value(json!([{"op": "add", "path": "/a", "value": 1}])).unwrap();
        let allowed = Answer { uid: OFFLINE_UID.into(), allowed: true, status: None, warnings: vec![], patch: Some(patch) };
        assert_eq!(
            summary(&allowed),
            "allowed\npatch (RFC 6902 JSON Patch):\n[\n  {\n    \"op\": \"add\",\n    \"path\": \"/a\",\n    \"value\": 1\n  }\n]\n"
        );
    }
}
