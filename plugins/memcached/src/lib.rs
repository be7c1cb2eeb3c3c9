//! The Memcached operator of the Operator SDK / Kubebuilder tutorials, as a wasmop plugin.
//!
//! For every `Memcached` (`cache.example.com/v1alpha1`, namespaced) it runs one Deployment of
//! `spec.size` memcached pods, named like the resource and in its namespace, and reports the
//! pods' names in `status.nodes` and an `Available` condition. CRD: `crds/memcached.yaml`.
//!
//! ```yaml
//! apiVersion: cache.example.com/v1alpha1
//! kind: Memcached
//! metadata: {name: memcached-sample, namespace: default}
//! spec: {size: 3}
//! ```
//!
//! Configuration (host policy `config`, or a ConfigMap's `config.yaml`; see [`config_schema`]):
//!
//! ```yaml
//! image: memcached:1.6.38-alpine   # default memcached:1.6.17-alpine
//! port: 11211                      # the container port, default 11211
//! ```

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, ContainerPort, Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::{Deserialize, Serialize};
use wasmop_sdk::prelude::*;

/// The plugin version (0.2.0 in the `test-v2` build used by the hot-reload tests).
pub const VERSION: &str = if cfg!(feature = "test-v2") { "0.2.0" } else { "0.1.0" };

/// The Deployment's own labels: the pod labels, plus a version marker in the `test-v2` build.
fn deployment_labels(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut labels = labels.clone();
    if cfg!(feature = "test-v2") {
        labels.insert("wasmop.dev/test-version".to_owned(), "v2".to_owned());
    }
    labels
}

/// The memcached image every pod runs, unless the configuration names another.
pub const IMAGE: &str = "memcached:1.6.17-alpine";

/// The container port memcached listens on, unless the configuration names another.
pub const PORT: i32 = 11211;

/// The plugin's configuration, as the host passes it (checked against [`config_schema`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemcachedConfig {
    /// The image of every pod [default: [`IMAGE`]].
    #[serde(default)]
    pub image: Option<String>,
    /// The container port [default: [`PORT`]].
    #[serde(default)]
    pub port: Option<i32>,
}

/// The JSON Schema of [`MemcachedConfig`], declared in the manifest: the host refuses any other
/// configuration before the plugin sees it.
pub fn config_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "image": {"type": "string", "minLength": 1, "description": "The memcached image of every pod."},
            "port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "The container port."},
        },
        "additionalProperties": false,
    })
}

/// The `Memcached` kind this plugin reconciles.
pub fn memcached_kind() -> Kind {
    Kind::new("cache.example.com", "v1alpha1", "Memcached")
}

/// The fields of a `Memcached` the plugin reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Memcached {
    /// The desired state.
    #[serde(default)]
    pub spec: Option<MemcachedSpec>,
}

/// `Memcached.spec`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct MemcachedSpec {
    /// Number of memcached pods; required, at least 0. Read as `i64` so that an out-of-range
    /// value gets a clear error rather than a parse failure.
    #[serde(default)]
    pub size: Option<i64>,
}

/// `Memcached.status` as the plugin writes it (conditions go through the response).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MemcachedStatus {
    /// Names of the memcached pods, sorted.
    pub nodes: Vec<String>,
}

/// The validated replica count: `spec.size`, which must be present and within `0..=i32::MAX`.
///
/// An invalid size is a terminal error that also shows on the Memcached: `Available=False`
/// with reason `InvalidSpec` and the same message (the next valid reconcile replaces it).
pub fn desired_size(memcached: &Memcached) -> Result<i32, Error> {
    let size = memcached.spec.as_ref().and_then(|s| s.size).ok_or_else(|| invalid_spec("spec.size is required".into()))?;
    if size < 0 {
        return Err(invalid_spec(format!("spec.size must be 0 or more, got {size}")));
    }
    i32::try_from(size).map_err(|_| invalid_spec(format!("spec.size must be at most {}, got {size}", i32::MAX)))
}

/// A terminal error for an invalid spec, shown as `Available=False InvalidSpec`.
pub fn invalid_spec(message: String) -> Error {
    Error::terminal(message.clone()).with_condition(Condition::false_("Available", "InvalidSpec", message))
}

/// The labels of the pods of one `Memcached`, also the Deployment's selector.
pub fn labels(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_owned(), "memcached".to_owned()), ("memcached_cr".to_owned(), name.to_owned())])
}

/// The Deployment that runs `size` memcached pods for the `Memcached` `namespace/name`, with
/// the default configuration.
pub fn deployment(name: &str, namespace: Option<&str>, size: i32) -> Deployment {
    configured_deployment(name, namespace, size, &MemcachedConfig::default())
}

/// [`deployment`] with the image and port of `config`.
pub fn configured_deployment(name: &str, namespace: Option<&str>, size: i32, config: &MemcachedConfig) -> Deployment {
    let labels = labels(name);
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: namespace.map(str::to_owned),
            labels: Some(deployment_labels(&labels)),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(size),
            selector: LabelSelector { match_labels: Some(labels.clone()), ..LabelSelector::default() },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels), ..ObjectMeta::default() }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "memcached".to_owned(),
                        image: Some(config.image.as_deref().unwrap_or(IMAGE).to_owned()),
                        command: Some(["memcached", "-m=64", "-o", "modern", "-v"].map(str::to_owned).to_vec()),
                        ports: Some(vec![ContainerPort {
                            name: Some("memcached".to_owned()),
                            container_port: config.port.unwrap_or(PORT),
                            ..ContainerPort::default()
                        }]),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

/// The `Available` condition, from the observed Deployment (if any) and the desired size.
pub fn available(observed: Option<&serde_json::Value>, size: i32) -> Condition {
    let Some(deployment) = observed else {
        return Condition::false_(
            "Available",
            "DeploymentMissing",
            format!("0/{size} replicas available: the Deployment does not exist yet"),
        );
    };
    let ready = deployment.pointer("/status/availableReplicas").and_then(serde_json::Value::as_i64).unwrap_or(0);
    let message = format!("{ready}/{size} replicas available");
    if ready >= i64::from(size) {
        Condition::true_("Available", "MinimumReplicasAvailable", message)
    } else {
        Condition::false_("Available", "Progressing", message)
    }
}

/// The plugin.
#[derive(Debug)]
pub struct MemcachedOperator;

impl Plugin for MemcachedOperator {
    fn manifest() -> Manifest {
        Manifest::new("memcached", VERSION)
            .description("Runs a memcached Deployment of spec.size pods for each Memcached")
            .parent(memcached_kind(), Scope::Namespaced)
            .child(Kind::of::<Deployment>())
            .related(Kind::of::<Pod>(), "app=memcached,memcached_cr=$(parent.name)")
            .finalizer(false)
            .prune(true)
            .config_schema(config_schema())
    }

    fn reconcile(req: Request, _ctx: &Context) -> Result<Response, Error> {
        let size = desired_size(&req.parent_as::<Memcached>()?)?;
        let config: MemcachedConfig = req.config_as()?;
        let name = req.name();
        log::debug!("memcached {}/{name}: want {size} replicas", req.namespace().unwrap_or_default());

        let pods = Kind::of::<Pod>();
        let mut nodes: Vec<String> = req
            .related_of(&pods)
            .filter_map(|pod| pod.pointer("/metadata/name").and_then(serde_json::Value::as_str))
            .map(str::to_owned)
            .collect();
        nodes.sort_unstable();

        let observed = req.child(&Kind::of::<Deployment>(), name);
        Ok(Response::new()
            .apply(configured_deployment(name, req.namespace(), size, &config))
            .status(MemcachedStatus { nodes })
            .condition(available(observed, size)))
    }
}

wasmop_sdk::export_plugin!(MemcachedOperator);

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn memcached(size: Value) -> Request {
        Request::new(json!({
            "apiVersion": "cache.example.com/v1alpha1",
            "kind": "Memcached",
            "metadata": {"name": "memcached-sample", "namespace": "default", "generation": 1},
            "spec": {"size": size},
        }))
    }

    fn pod(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default",
               "labels": {"app": "memcached", "memcached_cr": "memcached-sample"}}})
    }

    fn observed_deployment(available: Option<i64>) -> Value {
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                           "metadata": {"name": "memcached-sample", "namespace": "default"}, "status": {}});
        if let Some(n) = available {
            d["status"]["availableReplicas"] = json!(n);
        }
        d
    }

    fn reconcile(req: Request) -> Result<Response, Error> {
        MemcachedOperator::reconcile(req, &Context::fixture(vec![]))
    }

    fn the_deployment(resp: &Response) -> &Value {
        resp.child(&Kind::of::<Deployment>(), "memcached-sample").expect("a Deployment named like the CR")
    }

    #[test]
    fn size_3_gives_one_deployment_with_3_replicas_and_the_memcached_image() {
        let resp = reconcile(memcached(json!(3))).unwrap();
        assert_eq!(resp.children().len(), 1);
        let d = the_deployment(&resp);
        assert_eq!(d["spec"]["replicas"], 3);
        let container = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], "memcached:1.6.17-alpine");
        assert_eq!(container["name"], "memcached");
        assert_eq!(container["command"], json!(["memcached", "-m=64", "-o", "modern", "-v"]));
        assert_eq!(container["ports"], json!([{"containerPort": 11211, "name": "memcached"}]));
    }

    #[test]
    fn deployment_is_named_like_the_cr_in_its_namespace() {
        let resp = reconcile(memcached(json!(1))).unwrap();
        let d = the_deployment(&resp);
        assert_eq!(d["apiVersion"], "apps/v1");
        assert_eq!(d["metadata"]["namespace"], "default");
    }

    #[test]
    fn labels_and_selector_select_the_pods_of_one_cr() {
        let resp = reconcile(memcached(json!(2))).unwrap();
        let d = the_deployment(&resp);
        let want = json!({"app": "memcached", "memcached_cr": "memcached-sample"});
        assert_eq!(d["spec"]["selector"], json!({"matchLabels": want}));
        assert_eq!(d["spec"]["template"]["metadata"]["labels"], want);
        assert_eq!(d["metadata"]["labels"], want);
    }

    #[test]
    fn related_pods_become_sorted_status_nodes() {
        let req = memcached(json!(3))
            .with_related(pod("memcached-sample-c"))
            .with_related(pod("memcached-sample-a"))
            .with_related(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "not-a-pod"}}))
            .with_related(pod("memcached-sample-b"));
        let resp = reconcile(req).unwrap();
        assert_eq!(
            resp.status_patch(),
            Some(&json!({"nodes": ["memcached-sample-a", "memcached-sample-b", "memcached-sample-c"]}))
        );
    }

    #[test]
    fn no_pods_gives_empty_nodes() {
        assert_eq!(reconcile(memcached(json!(3))).unwrap().status_patch(), Some(&json!({"nodes": []})));
    }

    #[test]
    fn available_is_true_when_enough_replicas_are_available() {
        let resp = reconcile(memcached(json!(3)).with_child(observed_deployment(Some(3)))).unwrap();
        let c = resp.condition_of("Available").unwrap();
        assert_eq!(c.status, ConditionStatus::True);
        assert_eq!(c.reason, "MinimumReplicasAvailable");
        assert_eq!(c.message, "3/3 replicas available");
    }

    #[test]
    fn available_is_false_while_replicas_are_missing() {
        let resp = reconcile(memcached(json!(3)).with_child(observed_deployment(Some(1)))).unwrap();
        let c = resp.condition_of("Available").unwrap();
        assert_eq!(
            (c.status, c.reason.as_str(), c.message.as_str()),
            (ConditionStatus::False, "Progressing", "1/3 replicas available")
        );
        // A fresh Deployment has no availableReplicas field at all.
        let resp = reconcile(memcached(json!(2)).with_child(observed_deployment(None))).unwrap();
        assert_eq!(resp.condition_of("Available").unwrap().message, "0/2 replicas available");
    }

    #[test]
    fn available_is_false_when_the_deployment_does_not_exist_yet() {
        let resp = reconcile(memcached(json!(3))).unwrap();
        let c = resp.condition_of("Available").unwrap();
        assert_eq!((c.status, c.reason.as_str()), (ConditionStatus::False, "DeploymentMissing"));
        assert!(c.message.starts_with("0/3 replicas available"), "{}", c.message);
    }

    #[test]
    fn size_zero_is_valid() {
        let resp = reconcile(memcached(json!(0)).with_child(observed_deployment(None))).unwrap();
        assert_eq!(the_deployment(&resp)["spec"]["replicas"], 0);
        assert_eq!(resp.condition_of("Available").unwrap().status, ConditionStatus::True);
    }

    /// A terminal error showing `Available=False InvalidSpec` with its message.
    fn invalid(message: &str) -> Error {
        Error::terminal(message).with_condition(Condition::false_("Available", "InvalidSpec", message))
    }

    #[test]
    fn negative_size_is_a_terminal_error_shown_as_invalid_spec() {
        let e = reconcile(memcached(json!(-1))).unwrap_err();
        assert_eq!(e, invalid("spec.size must be 0 or more, got -1"));
        let available = e.condition_of("Available").unwrap();
        assert_eq!((available.status, available.reason.as_str()), (ConditionStatus::False, "InvalidSpec"));
        assert_eq!(e.status_patch(), None, "the status fields stay as they are");
    }

    #[test]
    fn missing_size_or_spec_is_a_terminal_error_shown_as_invalid_spec() {
        let mut req = memcached(json!(null));
        assert_eq!(reconcile(req.clone()).unwrap_err(), invalid("spec.size is required"));
        req.parent.as_object_mut().unwrap().remove("spec");
        assert_eq!(reconcile(req).unwrap_err(), invalid("spec.size is required"));
    }

    #[test]
    fn size_of_the_wrong_type_or_range_is_a_terminal_error() {
        let e = reconcile(memcached(json!("three"))).unwrap_err();
        assert!(!e.is_retryable());
        assert!(
            e.message().starts_with("parent memcached-sample: does not match the expected type: invalid type: string \"three\""),
            "{e}"
        );
        let e = reconcile(memcached(json!(1_u64 << 40))).unwrap_err();
        assert!(e.message().contains("at most 2147483647"), "{e}");
        assert_eq!(e.condition_of("Available").unwrap().reason, "InvalidSpec");
    }

    #[test]
    fn the_configured_image_and_port_reach_the_deployment() {
        let req = memcached(json!(2)).with_config(json!({"image": "memcached:1.6.38-alpine", "port": 11311}));
        let resp = reconcile(req).unwrap();
        let container = &the_deployment(&resp)["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], "memcached:1.6.38-alpine");
        assert_eq!(container["ports"], json!([{"containerPort": 11311, "name": "memcached"}]));
        let only_image = reconcile(memcached(json!(1)).with_config(json!({"image": "m:2"}))).unwrap();
        assert_eq!(the_deployment(&only_image)["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"], 11211);
    }

    #[test]
    fn an_empty_config_keeps_the_default_image_and_port() {
        let resp = reconcile(memcached(json!(1)).with_config(json!({}))).unwrap();
        let container = &the_deployment(&resp)["spec"]["template"]["spec"]["containers"][0];
        assert_eq!((container["image"].as_str(), container["ports"][0]["containerPort"].as_i64()), (Some(IMAGE), Some(11211)));
    }

    #[test]
    fn a_config_the_schema_would_refuse_is_a_terminal_error_natively_too() {
        let e = reconcile(memcached(json!(1)).with_config(json!({"imag": "x"}))).unwrap_err();
        assert!(!e.is_retryable());
        assert!(e.message().starts_with("plugin config:"), "{e}");
    }

    #[test]
    fn the_schema_declares_image_and_port_only() {
        let schema = MemcachedOperator::manifest().config_schema.unwrap();
        assert_eq!(schema["properties"]["image"]["type"], "string");
        assert_eq!(schema["properties"]["port"]["maximum"], 65535);
        assert_eq!(schema["additionalProperties"], false);
    }

    #[test]
    fn manifest_declares_deployments_and_pods_and_prunes() {
        let m = MemcachedOperator::manifest();
        assert_eq!((m.name.as_str(), m.version.as_str()), ("memcached", "0.1.0"));
        assert_eq!(m.parent, Some((Kind::new("cache.example.com", "v1alpha1", "Memcached"), Scope::Namespaced)));
        assert_eq!(m.children, [Kind::new("apps", "v1", "Deployment")]);
        assert_eq!(m.related[0].kind, Kind::new("", "v1", "Pod"));
        assert_eq!(m.related[0].label_selector, "app=memcached,memcached_cr=$(parent.name)");
        assert!(m.prune && !m.finalizer);
    }
}
