//! The `webapp` wasmop plugin: reconciles `WebApp` (demo.example.com/v1) into a ServiceAccount,
//! a ConfigMap, a Deployment, a Service and a PodDisruptionBudget, and validates WebApps.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};
use wasmop_sdk::prelude::*;

/// `WebApp.spec`.
#[derive(Debug, Default, Deserialize)]
pub struct Spec {
    /// The container image (required).
    #[serde(default)]
    pub image: Option<String>,
    /// 0..=50, default 1.
    #[serde(default)]
    pub replicas: Option<i64>,
    /// 1..=65535, default 8080.
    #[serde(default)]
    pub port: Option<i64>,
    /// The container's environment.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
}

/// A `WebApp`.
#[derive(Debug, Deserialize)]
pub struct WebApp {
    /// The desired state.
    #[serde(default)]
    pub spec: Spec,
}

impl Spec {
    /// The spec's replicas and port, or the message saying why it is invalid.
    pub fn check(&self) -> Result<(i64, i64), String> {
        if self.image.as_deref().unwrap_or("").is_empty() {
            return Err("spec.image must be set".into());
        }
        let (replicas, port) = (self.replicas.unwrap_or(1), self.port.unwrap_or(8080));
        if !(0..=50).contains(&replicas) {
            return Err(format!("spec.replicas must be between 0 and 50, got {replicas}"));
        }
        if !(1..=65535).contains(&port) {
            return Err(format!("spec.port must be between 1 and 65535, got {port}"));
        }
        Ok((replicas, port))
    }
}

/// The plugin.
#[derive(Debug)]
pub struct WebAppReconciler;

impl Plugin for WebAppReconciler {
    fn manifest() -> Manifest {
        Manifest::new("webapp", env!("CARGO_PKG_VERSION"))
            .description("Reconciles WebApp")
            .parent(Kind::new("demo.example.com", "v1", "WebApp"), Scope::Namespaced)
            .child(Kind::new("", "v1", "ServiceAccount"))
            .child(Kind::new("", "v1", "ConfigMap"))
            .child(Kind::new("apps", "v1", "Deployment"))
            .child(Kind::new("", "v1", "Service"))
            .child(Kind::new("policy", "v1", "PodDisruptionBudget"))
            .prune(true)
            .webhook(Webhook::validating("validate").with_rule(Rule::new(
                [Operation::Create, Operation::Update],
                "demo.example.com",
                "v1",
                "webapps",
            )))
    }

    fn reconcile(req: Request, _ctx: &Context) -> Result<Response, Error> {
        let spec = req.parent_as::<WebApp>()?.spec;
        let (replicas, port) = spec.check().map_err(|message| {
            let ready = Condition::false_("Ready", "InvalidSpec", &message);
            Error::terminal(message).with_status(json!({"phase": "Invalid"})).with_condition(ready)
        })?;
        let name = req.name();
        let config = format!("{name}-config");
        let labels = json!({"app.kubernetes.io/name": "webapp", "app.kubernetes.io/instance": name});
        let labelled = |mut body: Value| {
            body["metadata"] = json!({"labels": labels});
            body
        };
        let container = json!({"name": "app", "image": spec.image, "ports": [{"name": "http", "containerPort": port}],
            "envFrom": [{"configMapRef": {"name": config}}]});
        let pod = json!({"metadata": {"labels": labels}, "spec": {"serviceAccountName": name, "containers": [container]}});
        let selector = json!({"matchLabels": labels});
        let deployment = Kind::new("apps", "v1", "Deployment");
        let ready = req.child(&deployment, name).and_then(|d| d.pointer("/status/readyReplicas")?.as_i64()).unwrap_or(0);
        let (phase, reason) = if ready >= replicas { ("Ready", "AllReplicasReady") } else { ("Progressing", "ReplicasNotReady") };
        let message = format!("{ready}/{replicas} replicas ready");
        Ok(Response::new()
            .apply(req.new_child(
                &Kind::new("", "v1", "ServiceAccount"),
                name,
                labelled(json!({"automountServiceAccountToken": false})),
            ))
            .apply(req.new_child(&Kind::new("", "v1", "ConfigMap"), &config, labelled(json!({"data": spec.config}))))
            .apply(req.new_child(
                &deployment,
                name,
                labelled(json!({"spec": {"replicas": replicas, "selector": selector, "template": pod}})),
            ))
            .apply(req.new_child(
                &Kind::new("", "v1", "Service"),
                name,
                labelled(json!({"spec": {"selector": labels,
                "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}})),
            ))
            .apply(req.new_child(
                &Kind::new("policy", "v1", "PodDisruptionBudget"),
                name,
                labelled(json!({"spec": {"maxUnavailable": 1, "selector": selector}})),
            ))
            .status(json!({"readyReplicas": ready, "phase": phase}))
            .condition(Condition::new("Ready", ready >= replicas, reason, message)))
    }

    fn admit(webhook: &str, req: AdmissionRequest, _ctx: &Context) -> Result<Verdict, Error> {
        match webhook {
            "validate" => admit_validate(&req),
            other => Err(Error::terminal(format!("no webhook named {other:?}"))),
        }
    }
}

/// The `validate` webhook: the reconcile's checks, and an image that names a tag or a digest.
pub fn admit_validate(req: &AdmissionRequest) -> Result<Verdict, Error> {
    let spec = req.object_as::<WebApp>()?.spec;
    if let Err(message) = spec.check() {
        return Ok(Verdict::deny_with(422, message));
    }
    let image = spec.image.unwrap_or_default();
    let last = image.rsplit('/').next().unwrap_or_default();
    Ok(if image.contains('@') || last.contains(':') {
        Verdict::allow()
    } else {
        Verdict::deny_with(422, format!("spec.image must name a tag or a digest, got {image:?}"))
    })
}

wasmop_sdk::export_plugin!(WebAppReconciler);

#[cfg(test)]
mod tests {
    use super::*;

    fn webapp(spec: Value) -> Value {
        json!({"apiVersion": "demo.example.com/v1", "kind": "WebApp",
               "metadata": {"name": "shop", "namespace": "default", "generation": 1}, "spec": spec})
    }

    fn reconcile(req: Request) -> Result<Response, Error> {
        let ctx = Context::fixture_for(&req, vec![]).restrict_to(&WebAppReconciler::manifest());
        WebAppReconciler::reconcile(req, &ctx)?.validate()
    }

    fn deployment(ready: i64) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "shop", "namespace": "default"},
               "status": {"readyReplicas": ready}})
    }

    #[test]
    fn a_new_webapp_gets_five_labelled_children_and_is_progressing() {
        let response = reconcile(Request::new(webapp(json!({"image": "nginx:1.27", "replicas": 2})))).unwrap();
        assert_eq!(response.children().len(), 5);
        let deployment = response.child(&Kind::new("apps", "v1", "Deployment"), "shop").unwrap();
        assert_eq!(deployment["spec"]["replicas"], 2);
        assert_eq!(deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"], 8080);
        assert_eq!(deployment["metadata"]["labels"]["app.kubernetes.io/instance"], "shop");
        assert!(response.child(&Kind::new("", "v1", "ConfigMap"), "shop-config").is_some());
        assert_eq!(response.status_patch().unwrap()["phase"], "Progressing");
        assert_eq!(response.condition_of("Ready").unwrap().message, "0/2 replicas ready");
    }

    #[test]
    fn ready_once_the_deployment_has_every_replica_ready() {
        let req = Request::new(webapp(json!({"image": "nginx:1.27", "replicas": 2}))).with_child(deployment(2));
        let response = reconcile(req).unwrap();
        assert_eq!(response.status_patch().unwrap(), &json!({"readyReplicas": 2, "phase": "Ready"}));
        assert_eq!(response.condition_of("Ready").unwrap().reason, "AllReplicasReady");
    }

    #[test]
    fn an_invalid_spec_is_a_terminal_error_that_shows_on_the_parent() {
        let error = reconcile(Request::new(webapp(json!({"image": "nginx:1.27", "replicas": 51})))).unwrap_err();
        assert!(!error.is_retryable());
        assert_eq!(error.message(), "spec.replicas must be between 0 and 50, got 51");
        assert_eq!(error.status_patch().unwrap()["phase"], "Invalid");
        assert_eq!(error.condition_of("Ready").unwrap().reason, "InvalidSpec");
    }

    #[test]
    fn the_webhook_refuses_an_image_without_a_tag_and_an_invalid_spec() {
        let admit = |spec| admit_validate(&AdmissionRequest::new(Operation::Create, webapp(spec))).unwrap();
        assert!(admit(json!({"image": "nginx:1.27"})).is_allowed());
        assert!(admit(json!({"image": "registry:5000/nginx@sha256:abc"})).is_allowed());
        let message = |spec| admit(spec).message().map(str::to_owned);
        assert_eq!(message(json!({"image": "nginx"})).unwrap(), r#"spec.image must name a tag or a digest, got "nginx""#);
        assert_eq!(
            message(json!({"image": "registry:5000/nginx"})).unwrap(),
            r#"spec.image must name a tag or a digest, got "registry:5000/nginx""#
        );
        assert_eq!(message(json!({"port": 80})).unwrap(), "spec.image must be set");
    }
}
