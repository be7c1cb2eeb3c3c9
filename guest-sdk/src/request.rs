//! The request: everything the plugin needs to decide about one parent.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{Error, Kind};

/// Everything the plugin is given about one parent, parsed from the host's cache.
///
/// Objects are `serde_json::Value`s, the same documents `kubectl get -o json` prints; the
/// `*_as` helpers deserialize them into your own types or k8s-openapi structs.
///
/// In tests, build one with [`Request::new`] and the `with_*` methods:
///
/// ```
/// use serde_json::json;
/// use wasmop_sdk::{Kind, Request};
///
/// let req = Request::new(json!({
///         "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
///         "metadata": {"name": "sample", "namespace": "default", "generation": 2},
///         "spec": {"size": 3},
///     }))
///     .with_child(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "sample"}}))
///     .with_related(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sample-abc"}}));
///
/// assert_eq!(req.name(), "sample");
/// assert_eq!(req.namespace(), Some("default"));
/// assert_eq!(req.generation(), Some(2));
/// assert_eq!(req.parent["spec"]["size"], 3);
/// assert_eq!(req.children_of(&Kind::new("apps", "v1", "Deployment")).count(), 1);
/// assert!(!req.finalizing);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The parent object.
    pub parent: Value,
    /// The observed children: objects of the declared child kinds that the parent controls.
    pub children: Vec<Value>,
    /// The observed related objects selected by the manifest's related kinds.
    pub related: Vec<Value>,
    /// The parent is being deleted and the host holds the plugin's finalizer: clean up, then
    /// answer [`Response::finalized`](crate::Response::finalized).
    pub finalizing: bool,
    /// The plugin's configuration, a JSON object (`{}` when none is set).
    pub config: Value,
}

impl Request {
    /// A request for this parent with no children, no related objects, not finalizing, and
    /// the empty configuration `{}`.
    pub fn new(parent: Value) -> Self {
        Self { parent, children: Vec::new(), related: Vec::new(), finalizing: false, config: Value::Object(Default::default()) }
    }

    /// Add an observed child.
    #[must_use]
    pub fn with_child(mut self, child: Value) -> Self {
        self.children.push(child);
        self
    }

    /// Add an observed related object.
    #[must_use]
    pub fn with_related(mut self, related: Value) -> Self {
        self.related.push(related);
        self
    }

    /// Set whether the parent is being deleted.
    ///
    /// ```
    /// let req = wasmop_sdk::Request::new(serde_json::json!({})).finalizing(true);
    /// assert!(req.finalizing);
    /// ```
    #[must_use]
    pub fn finalizing(mut self, finalizing: bool) -> Self {
        self.finalizing = finalizing;
        self
    }

    /// Set the plugin configuration.
    #[must_use]
    pub fn with_config(mut self, config: Value) -> Self {
        self.config = config;
        self
    }

    /// The parent's `metadata.name` (empty if it has none).
    pub fn name(&self) -> &str {
        self.parent.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
    }

    /// The parent's `metadata.namespace`; `None` for a cluster-scoped parent.
    pub fn namespace(&self) -> Option<&str> {
        self.parent.pointer("/metadata/namespace").and_then(Value::as_str)
    }

    /// The parent's `metadata.generation`, which the API server bumps on every spec change.
    pub fn generation(&self) -> Option<i64> {
        self.parent.pointer("/metadata/generation").and_then(Value::as_i64)
    }

    /// The parent deserialized into `T` (your CRD type, a k8s-openapi struct, ...). A parent of
    /// another shape is a terminal error naming the parent.
    ///
    /// ```
    /// #[derive(serde::Deserialize, Debug)]
    /// struct Memcached { spec: Spec }
    /// #[derive(serde::Deserialize, Debug)]
    /// struct Spec { size: i32 }
    ///
    /// let req = wasmop_sdk::Request::new(serde_json::json!({"metadata": {"name": "m"}, "spec": {"size": 3}}));
    /// assert_eq!(req.parent_as::<Memcached>()?.spec.size, 3);
    ///
    /// let bad = wasmop_sdk::Request::new(serde_json::json!({"metadata": {"name": "m"}, "spec": {"size": "x"}}));
    /// assert!(bad.parent_as::<Memcached>().unwrap_err().message().starts_with("parent m:"));
    /// # Ok::<(), wasmop_sdk::Error>(())
    /// ```
    pub fn parent_as<T: DeserializeOwned>(&self) -> Result<T, Error> {
        T::deserialize(&self.parent).map_err(|e| Error::from(e).context(format_args!("parent {}", self.name())))
    }

    /// The plugin configuration deserialized into `T`.
    ///
    /// ```
    /// #[derive(serde::Deserialize, Default)]
    /// #[serde(default)]
    /// struct Config { image: Option<String> }
    ///
    /// let req = wasmop_sdk::Request::new(serde_json::json!({})).with_config(serde_json::json!({"image": "x:1"}));
    /// assert_eq!(req.config_as::<Config>()?.image.as_deref(), Some("x:1"));
    /// # Ok::<(), wasmop_sdk::Error>(())
    /// ```
    pub fn config_as<T: DeserializeOwned>(&self) -> Result<T, Error> {
        T::deserialize(&self.config).map_err(|e| Error::from(e).context("plugin config"))
    }

    /// The observed children of one kind.
    pub fn children_of<'a>(&'a self, kind: &Kind) -> impl Iterator<Item = &'a Value> {
        self.children.iter().filter(move |o| kind.matches(o))
    }

    /// The observed child of this kind with this name, if any.
    ///
    /// ```
    /// use serde_json::json;
    /// let cm = wasmop_sdk::Kind::new("", "v1", "ConfigMap");
    /// let req = wasmop_sdk::Request::new(json!({}))
    ///     .with_child(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}));
    /// assert!(req.child(&cm, "a").is_some());
    /// assert!(req.child(&cm, "b").is_none());
    /// ```
    pub fn child(&self, kind: &Kind, name: &str) -> Option<&Value> {
        self.children_of(kind).find(|o| object_name(o) == Some(name))
    }

    /// The observed status of the child of this kind with this name, deserialized into `T` (a
    /// k8s-openapi status struct such as `DeploymentStatus`, or your own): `Ok(None)` while the
    /// child does not exist or has no status yet; a status of another shape is a terminal error
    /// naming the child.
    ///
    /// ```
    /// use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
    /// use serde_json::json;
    /// use wasmop_sdk::{Kind, Request};
    ///
    /// let deployments = Kind::of::<Deployment>();
    /// let req = Request::new(json!({})).with_child(json!({"apiVersion": "apps/v1", "kind": "Deployment",
    ///     "metadata": {"name": "web"}, "status": {"readyReplicas": 2, "replicas": 3}}));
    /// let status: DeploymentStatus = req.child_status(&deployments, "web")?.unwrap_or_default();
    /// assert_eq!(status.ready_replicas, Some(2));
    /// assert!(req.child_status::<DeploymentStatus>(&deployments, "db")?.is_none());
    /// # Ok::<(), wasmop_sdk::Error>(())
    /// ```
    pub fn child_status<T: DeserializeOwned>(&self, kind: &Kind, name: &str) -> Result<Option<T>, Error> {
        let Some(child) = self.child(kind, name) else { return Ok(None) };
        match child.get("status") {
            None | Some(Value::Null) => Ok(None),
            Some(status) => {
                T::deserialize(status).map(Some).map_err(|e| Error::from(e).context(format_args!("{kind} {name} status")))
            }
        }
    }

    /// A child for the response: an object of `kind` named `name` in the parent's namespace
    /// (none for a cluster-scoped parent), with the fields of `body` beside its `apiVersion`,
    /// `kind` and `metadata`; `body.metadata` (labels, annotations) is merged into the
    /// metadata, whose name and namespace stay these.
    ///
    /// ```
    /// use serde_json::json;
    /// use wasmop_sdk::{Kind, Request};
    ///
    /// let req = Request::new(json!({"metadata": {"name": "shop", "namespace": "prod"}}));
    /// let labels = json!({"app.kubernetes.io/instance": req.name()});
    /// let cm = req.new_child(&Kind::new("", "v1", "ConfigMap"), "shop-config",
    ///     json!({"metadata": {"labels": labels}, "data": {"MODE": "live"}}));
    /// assert_eq!(cm, json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"MODE": "live"},
    ///     "metadata": {"name": "shop-config", "namespace": "prod", "labels": labels}}));
    /// ```
    ///
    /// # Panics
    /// When `body` is neither an object nor `null`, or its `metadata` is not an object: a bug
    /// in the plugin's code, not in its input.
    pub fn new_child(&self, kind: &Kind, name: &str, body: Value) -> Value {
        let mut object = match body {
            Value::Object(fields) => fields,
            Value::Null => serde_json::Map::new(),
            other => panic!("the body of a new child must be a JSON object, got {other}"),
        };
        let mut metadata = match object.remove("metadata") {
            Some(Value::Object(metadata)) => metadata,
            None | Some(Value::Null) => serde_json::Map::new(),
            Some(other) => panic!("the metadata of a new child must be a JSON object, got {other}"),
        };
        metadata.insert("name".into(), name.into());
        match self.namespace() {
            Some(namespace) => metadata.insert("namespace".into(), namespace.into()),
            None => metadata.remove("namespace"),
        };
        object.insert("apiVersion".into(), kind.api_version().into());
        object.insert("kind".into(), kind.kind.clone().into());
        object.insert("metadata".into(), Value::Object(metadata));
        Value::Object(object)
    }

    /// The observed related objects of one kind.
    pub fn related_of<'a>(&'a self, kind: &Kind) -> impl Iterator<Item = &'a Value> {
        self.related.iter().filter(move |o| kind.matches(o))
    }

    /// The observed children of one kind, deserialized into `T`.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use serde_json::json;
    /// use wasmop_sdk::{Kind, Request};
    ///
    /// let req = Request::new(json!({}))
    ///     .with_child(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}));
    /// let maps: Vec<ConfigMap> = req.children_as(&Kind::of::<ConfigMap>())?;
    /// assert_eq!(maps[0].metadata.name.as_deref(), Some("a"));
    /// # Ok::<(), wasmop_sdk::Error>(())
    /// ```
    pub fn children_as<T: DeserializeOwned>(&self, kind: &Kind) -> Result<Vec<T>, Error> {
        self.children_of(kind).map(|o| deserialize_object(o, kind)).collect()
    }

    /// The observed related objects of one kind, deserialized into `T`.
    pub fn related_as<T: DeserializeOwned>(&self, kind: &Kind) -> Result<Vec<T>, Error> {
        self.related_of(kind).map(|o| deserialize_object(o, kind)).collect()
    }
}

/// `metadata.name` of an object.
pub(crate) fn object_name(object: &Value) -> Option<&str> {
    object.pointer("/metadata/name").and_then(Value::as_str)
}

/// Deserialize one object, naming it in the error.
pub(crate) fn deserialize_object<T: DeserializeOwned>(object: &Value, kind: &Kind) -> Result<T, Error> {
    T::deserialize(object).map_err(|e| Error::from(e).context(format_args!("{kind} {}", object_name(object).unwrap_or("?"))))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_new_child_lives_in_the_parents_namespace_whatever_its_body_says() {
        let kind = Kind::new("apps", "v1", "Deployment");
        let namespaced = Request::new(json!({"metadata": {"name": "p", "namespace": "prod"}}));
        let body = json!({"metadata": {"name": "other", "namespace": "x", "labels": {"a": "b"}}, "spec": {"replicas": 1}});
        let child = namespaced.new_child(&kind, "web", body.clone());
        assert_eq!(
            child,
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 1},
                   "metadata": {"name": "web", "namespace": "prod", "labels": {"a": "b"}}})
        );
        let cluster = Request::new(json!({"metadata": {"name": "p"}}));
        assert_eq!(cluster.new_child(&kind, "web", body)["metadata"], json!({"name": "web", "labels": {"a": "b"}}));
        assert_eq!(cluster.new_child(&kind, "web", Value::Null)["metadata"], json!({"name": "web"}));
    }

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}})
    }

    #[test]
    fn new_has_empty_object_config_and_no_objects() {
        let req = Request::new(json!({"metadata": {"name": "p"}}));
        assert_eq!(req.config, json!({}));
        assert!(req.children.is_empty() && req.related.is_empty() && !req.finalizing);
    }

    #[test]
    fn metadata_helpers_tolerate_missing_fields() {
        let req = Request::new(json!({"kind": "X"}));
        assert_eq!((req.name(), req.namespace(), req.generation()), ("", None, None));
    }

    #[test]
    fn children_of_filters_by_kind() {
        let req = Request::new(json!({}))
            .with_child(cm("a"))
            .with_child(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}))
            .with_child(cm("b"));
        let names: Vec<_> = req.children_of(&Kind::new("", "v1", "ConfigMap")).filter_map(object_name).collect();
        assert_eq!(names, ["a", "b"]);
    }

    #[test]
    fn related_as_deserializes_each_object() {
        #[derive(serde::Deserialize)]
        struct Cm {
            data: std::collections::BTreeMap<String, String>,
        }
        let req = Request::new(json!({})).with_related(cm("a")).with_related(cm("b"));
        let maps: Vec<Cm> = req.related_as(&Kind::new("", "v1", "ConfigMap")).unwrap();
        assert_eq!(maps.iter().map(|m| m.data["k"].as_str()).collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn typed_helper_errors_are_terminal_and_name_the_object() {
        let req = Request::new(json!({})).with_child(cm("a"));
        let e = req.children_as::<u32>(&Kind::new("", "v1", "ConfigMap")).unwrap_err();
        assert!(!e.is_retryable());
        assert_eq!(e.message(), "v1/ConfigMap a: does not match the expected type: invalid type: map, expected u32");
    }

    #[test]
    fn parent_of_the_wrong_shape_does_not_match_the_expected_type() {
        #[derive(Debug, serde::Deserialize)]
        struct Parent {
            #[allow(dead_code)]
            spec: Spec,
        }
        #[derive(Debug, serde::Deserialize)]
        struct Spec {
            #[allow(dead_code)]
            size: i32,
        }
        let req = Request::new(json!({"metadata": {"name": "m"}, "spec": {"size": "three"}}));
        let e = req.parent_as::<Parent>().unwrap_err();
        assert!(!e.is_retryable());
        assert_eq!(e.message(), "parent m: does not match the expected type: invalid type: string \"three\", expected i32");
    }

    #[test]
    fn child_status_is_typed_absent_or_a_terminal_error() {
        #[derive(Debug, PartialEq, serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Status {
            ready_replicas: Option<i32>,
        }
        let deploy = Kind::new("apps", "v1", "Deployment");
        let child = |name: &str, status: Value| json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "status": status});
        let req = Request::new(json!({}))
            .with_child(child("ready", json!({"readyReplicas": 2})))
            .with_child(child("new", Value::Null))
            .with_child(child("odd", json!({"readyReplicas": "two"})));
        assert_eq!(req.child_status::<Status>(&deploy, "ready").unwrap(), Some(Status { ready_replicas: Some(2) }));
        assert_eq!(req.child_status::<Status>(&deploy, "new").unwrap(), None);
        assert_eq!(req.child_status::<Status>(&deploy, "missing").unwrap(), None);
        let e = req.child_status::<Status>(&deploy, "odd").unwrap_err();
        assert!(!e.is_retryable());
        assert!(e.message().starts_with("apps/v1/Deployment odd status: does not match the expected type:"), "{e}");
    }

    #[test]
    fn config_as_reads_the_config() {
        let req = Request::new(json!({})).with_config(json!({"replicas": 2}));
        #[derive(serde::Deserialize)]
        struct C {
            replicas: u8,
        }
        assert_eq!(req.config_as::<C>().unwrap().replicas, 2);
        assert!(req.config_as::<String>().unwrap_err().message().starts_with("plugin config:"));
    }
}
