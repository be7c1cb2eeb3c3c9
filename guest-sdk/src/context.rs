//! Read-only lookups in the host's watch cache (the `cache` import), with a native fixture.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::request::{deserialize_object, object_name};
use crate::{AdmissionRequest, Error, Kind, LabelSelector, LookupError, Manifest, Request, Scope};

/// Access to the host's watch cache, handed to [`Plugin::reconcile`](crate::Plugin::reconcile).
///
/// Lookups never make an API call: they read the host's in-memory cache, restricted to the
/// kinds the manifest declares and (for a namespaced parent) to the parent's namespace.
/// `namespace: None` means the parent's namespace for namespaced kinds.
///
/// In a plugin compiled to WebAssembly the context calls the host. Natively (in unit tests)
/// build one with [`Context::fixture`] or [`Context::fixture_for`]: it answers from a list of
/// objects the way the host answers from its cache — `namespace: None` is the parent's
/// namespace, label selectors are parsed and matched by the host's own [`LabelSelector`], and
/// (with [`Context::restrict_to`]) undeclared kinds are refused. It does not model the host
/// policy's grants (other namespaces, Secrets): those are checked by the host.
///
/// ```
/// use serde_json::json;
/// use wasmop_sdk::{Context, Kind};
///
/// let pod = |name: &str, app: &str| json!({
///     "apiVersion": "v1", "kind": "Pod",
///     "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
/// });
/// let ctx = Context::fixture(vec![pod("web-1", "web"), pod("db-1", "db")]);
/// let pods = Kind::new("", "v1", "Pod");
///
/// let web = ctx.list(&pods, Some("default"), "app=web")?;
/// assert_eq!(web.len(), 1);
/// assert!(ctx.get(&pods, None, "db-1")?.is_some()); // the parent's namespace: `default`
/// assert!(ctx.get(&pods, Some("other"), "db-1")?.is_none());
/// assert_eq!(ctx.list(&pods, None, "app in (web, db), !canary")?.len(), 2);
/// # Ok::<(), wasmop_sdk::LookupError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Context {
    source: Source,
    /// Set by `restrict_to` (fixtures only).
    declared: Option<Manifest>,
    /// The parent's namespace, which `namespace: None` means (fixtures only); `None` for a
    /// cluster-scoped parent, whose lookups without a namespace see every namespace.
    parent_namespace: Option<String>,
}

#[derive(Debug, Clone)]
enum Source {
    #[cfg(target_arch = "wasm32")]
    Host,
    Fixture(Vec<Value>),
}

impl Default for Context {
    /// [`Context::host`].
    fn default() -> Self {
        Self::host()
    }
}

impl Context {
    /// The host's cache. Natively there is no host: this is an empty fixture.
    pub fn host() -> Self {
        #[cfg(target_arch = "wasm32")]
        return Self { source: Source::Host, declared: None, parent_namespace: None };
        #[cfg(not(target_arch = "wasm32"))]
        return Self::fixture(Vec::new());
    }

    /// A context that answers from these objects (for unit tests), for a parent in the
    /// namespace `default`: a lookup with `namespace: None` reads `default`, as the host reads
    /// the parent's namespace. Selectors are kubectl syntax, equality- and set-based
    /// (`k=v`, `k!=v`, `k in (a,b)`, `k notin (a)`, `k`, `!k`).
    pub fn fixture(objects: Vec<Value>) -> Self {
        Self { source: Source::Fixture(objects), declared: None, parent_namespace: Some("default".to_owned()) }
    }

    /// [`Context::fixture`] for this request's parent: `namespace: None` reads the parent's
    /// namespace, or every namespace when the parent is cluster-scoped (has no namespace).
    ///
    /// ```
    /// use serde_json::json;
    /// use wasmop_sdk::{Context, Kind, Request};
    ///
    /// let cm = |ns: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": ns}});
    /// let req = Request::new(json!({"metadata": {"name": "p", "namespace": "team-a"}}));
    /// let ctx = Context::fixture_for(&req, vec![cm("team-a"), cm("team-b")]);
    /// assert_eq!(ctx.list(&Kind::new("", "v1", "ConfigMap"), None, "")?.len(), 1);
    ///
    /// let cluster_scoped = Request::new(json!({"metadata": {"name": "p"}}));
    /// let ctx = Context::fixture_for(&cluster_scoped, vec![cm("team-a"), cm("team-b")]);
    /// assert_eq!(ctx.list(&Kind::new("", "v1", "ConfigMap"), None, "")?.len(), 2);
    /// # Ok::<(), wasmop_sdk::LookupError>(())
    /// ```
    pub fn fixture_for(request: &Request, objects: Vec<Value>) -> Self {
        Self { source: Source::Fixture(objects), declared: None, parent_namespace: request.namespace().map(str::to_owned) }
    }

    /// [`Context::fixture`] for an admission call: `namespace: None` reads the admitted
    /// object's namespace, or every namespace for a cluster-scoped object. (The host reads
    /// every namespace for a plugin whose parent is cluster-scoped; [`Context::restrict_to`]
    /// applies that.)
    ///
    /// ```
    /// use serde_json::json;
    /// use wasmop_sdk::{AdmissionRequest, Context, Kind, Operation};
    ///
    /// let cm = |ns: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": ns}});
    /// let req = AdmissionRequest::new(Operation::Create, cm("team-a"));
    /// let ctx = Context::fixture_for_admission(&req, vec![cm("team-a"), cm("team-b")]);
    /// assert_eq!(ctx.list(&Kind::new("", "v1", "ConfigMap"), None, "")?.len(), 1);
    /// # Ok::<(), wasmop_sdk::LookupError>(())
    /// ```
    pub fn fixture_for_admission(request: &AdmissionRequest, objects: Vec<Value>) -> Self {
        Self { source: Source::Fixture(objects), declared: None, parent_namespace: request.namespace.clone() }
    }

    /// Refuse lookups of kinds the manifest does not declare, like the host does, and take the
    /// parent's scope from it: for a cluster-scoped parent `namespace: None` reads every
    /// namespace (fixtures only; the host applies the real manifest).
    ///
    /// ```
    /// use wasmop_sdk::{Context, Kind, LookupError, Manifest};
    ///
    /// let manifest = Manifest::new("x", "0.1.0").child(Kind::new("", "v1", "ConfigMap"));
    /// let ctx = Context::fixture(vec![]).restrict_to(&manifest);
    /// assert!(ctx.list(&Kind::new("", "v1", "ConfigMap"), None, "").is_ok());
    /// assert!(matches!(ctx.get(&Kind::new("", "v1", "Secret"), None, "s"), Err(LookupError::UndeclaredKind(_))));
    /// ```
    #[must_use]
    pub fn restrict_to(mut self, manifest: &Manifest) -> Self {
        self.declared = Some(manifest.clone());
        self
    }

    /// Get one object by name; `Ok(None)` when it is not in the cache.
    pub fn get(&self, kind: &Kind, namespace: Option<&str>, name: &str) -> Result<Option<Value>, LookupError> {
        match &self.source {
            #[cfg(target_arch = "wasm32")]
            Source::Host => host::get(kind, namespace, name),
            Source::Fixture(objects) => {
                check_declared(self.declared.as_ref(), kind)?;
                let namespace = self.namespace_or_parent(namespace);
                Ok(objects
                    .iter()
                    .find(|o| kind.matches(o) && in_namespace(o, namespace) && object_name(o) == Some(name))
                    .cloned())
            }
        }
    }

    /// List the objects of a kind that match a label selector (kubectl syntax, e.g.
    /// `app=memcached,tier!=test`; empty selects everything), ordered by namespace and name.
    pub fn list(&self, kind: &Kind, namespace: Option<&str>, label_selector: &str) -> Result<Vec<Value>, LookupError> {
        match &self.source {
            #[cfg(target_arch = "wasm32")]
            Source::Host => host::list(kind, namespace, label_selector),
            Source::Fixture(objects) => {
                check_declared(self.declared.as_ref(), kind)?;
                let selector = LabelSelector::parse(label_selector).map_err(|e| LookupError::InvalidSelector(e.to_string()))?;
                let namespace = self.namespace_or_parent(namespace);
                let mut found: Vec<Value> = objects
                    .iter()
                    .filter(|o| kind.matches(o) && in_namespace(o, namespace) && selector.matches_object(o))
                    .cloned()
                    .collect();
                found.sort_by(|a, b| sort_key(a).cmp(&sort_key(b)));
                Ok(found)
            }
        }
    }

    /// The namespace a fixture lookup reads, as the host resolves it: the one asked for, else
    /// the parent's (none, meaning all, for a cluster-scoped parent).
    fn namespace_or_parent<'a>(&'a self, namespace: Option<&'a str>) -> Option<&'a str> {
        let cluster_parent = self.declared.as_ref().and_then(|m| m.parent.as_ref()).is_some_and(|(_, s)| *s == Scope::Cluster);
        match namespace {
            Some(ns) => Some(ns),
            None if cluster_parent => None,
            None => self.parent_namespace.as_deref(),
        }
    }

    /// [`get`](Context::get), deserialized into `T`.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Secret;
    /// use wasmop_sdk::{Context, Kind};
    ///
    /// let ctx = Context::fixture(vec![serde_json::json!(
    ///     {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "ns"}})]);
    /// let secret: Option<Secret> = ctx.get_as(&Kind::of::<Secret>(), Some("ns"), "creds")?;
    /// assert!(secret.is_some());
    /// # Ok::<(), wasmop_sdk::Error>(())
    /// ```
    pub fn get_as<T: DeserializeOwned>(&self, kind: &Kind, namespace: Option<&str>, name: &str) -> Result<Option<T>, Error> {
        self.get(kind, namespace, name)?.map(|o| deserialize_object(&o, kind)).transpose()
    }

    /// [`list`](Context::list), each object deserialized into `T`.
    pub fn list_as<T: DeserializeOwned>(
        &self,
        kind: &Kind,
        namespace: Option<&str>,
        label_selector: &str,
    ) -> Result<Vec<T>, Error> {
        self.list(kind, namespace, label_selector)?.iter().map(|o| deserialize_object(o, kind)).collect()
    }
}

fn check_declared(declared: Option<&Manifest>, kind: &Kind) -> Result<(), LookupError> {
    match declared {
        Some(manifest) if !manifest.declares(kind) => Err(LookupError::UndeclaredKind(kind.to_string())),
        _ => Ok(()),
    }
}

fn namespace_of(object: &Value) -> Option<&str> {
    object.pointer("/metadata/namespace").and_then(Value::as_str)
}

fn in_namespace(object: &Value, namespace: Option<&str>) -> bool {
    namespace.is_none() || namespace_of(object) == namespace
}

fn sort_key(object: &Value) -> (&str, &str) {
    (namespace_of(object).unwrap_or_default(), object_name(object).unwrap_or_default())
}

#[cfg(target_arch = "wasm32")]
mod host {
    use serde_json::Value;

    use crate::bindings::wasmop::plugin::cache;
    use crate::{Kind, LookupError};

    fn parse(json: &str) -> Result<Value, LookupError> {
        serde_json::from_str(json).map_err(|e| LookupError::InvalidObject(e.to_string()))
    }

    pub(super) fn get(kind: &Kind, namespace: Option<&str>, name: &str) -> Result<Option<Value>, LookupError> {
        match cache::get(&crate::bindings::kind_to_raw(kind), namespace, name) {
            Ok(found) => found.as_deref().map(parse).transpose(),
            Err(e) => Err(from_raw(e)),
        }
    }

    pub(super) fn list(kind: &Kind, namespace: Option<&str>, selector: &str) -> Result<Vec<Value>, LookupError> {
        match cache::list(&crate::bindings::kind_to_raw(kind), namespace, selector) {
            Ok(found) => found.iter().map(|o| parse(o)).collect(),
            Err(e) => Err(from_raw(e)),
        }
    }

    fn from_raw(e: cache::LookupError) -> LookupError {
        match e {
            cache::LookupError::UndeclaredKind(m) => LookupError::UndeclaredKind(m),
            cache::LookupError::Forbidden(m) => LookupError::Forbidden(m),
            cache::LookupError::InvalidSelector(m) => LookupError::InvalidSelector(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cm(ns: &str, name: &str, labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns, "labels": labels}})
    }

    fn names(objects: &[Value]) -> Vec<&str> {
        objects.iter().filter_map(object_name).collect()
    }

    fn fixture_objects() -> Vec<Value> {
        vec![
            cm("b", "z", json!({"app": "web", "tier": "front"})),
            cm("a", "y", json!({"app": "web"})),
            cm("a", "x", json!({"app": "db"})),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x", "namespace": "a"}}),
        ]
    }

    fn fixture() -> Context {
        Context::fixture(fixture_objects())
    }

    const CM: fn() -> Kind = || Kind::new("", "v1", "ConfigMap");

    fn all_namespaces() -> Context {
        Context::fixture_for(&Request::new(json!({"metadata": {"name": "cluster-scoped"}})), fixture_objects())
    }

    #[test]
    fn list_filters_by_kind_and_namespace_and_sorts() {
        assert_eq!(names(&all_namespaces().list(&CM(), None, "").unwrap()), ["x", "y", "z"]);
        assert_eq!(names(&fixture().list(&CM(), Some("a"), "").unwrap()), ["x", "y"]);
    }

    #[test]
    fn no_namespace_means_the_parent_namespace() {
        assert_eq!(names(&fixture().list(&CM(), None, "").unwrap()), Vec::<&str>::new(), "the default parent is in `default`");
        let in_a = Context::fixture_for(&Request::new(json!({"metadata": {"name": "p", "namespace": "a"}})), fixture_objects());
        assert_eq!(names(&in_a.list(&CM(), None, "").unwrap()), ["x", "y"]);
        assert!(in_a.get(&CM(), None, "x").unwrap().is_some());
        assert!(in_a.get(&CM(), None, "z").unwrap().is_none(), "z is in namespace b");
        assert!(in_a.get(&CM(), Some("b"), "z").unwrap().is_some());
    }

    #[test]
    fn a_cluster_scoped_parent_in_the_manifest_reads_every_namespace() {
        let manifest = Manifest::new("p", "0.1.0").parent(Kind::new("x.io", "v1", "Tenant"), Scope::Cluster).child(CM());
        assert_eq!(names(&fixture().restrict_to(&manifest).list(&CM(), None, "").unwrap()), ["x", "y", "z"]);
    }

    #[test]
    fn list_applies_equality_selectors() {
        let ctx = all_namespaces();
        assert_eq!(names(&ctx.list(&CM(), None, "app=web").unwrap()), ["y", "z"]);
        assert_eq!(names(&ctx.list(&CM(), None, "app==web, tier=front").unwrap()), ["z"]);
        assert_eq!(names(&ctx.list(&CM(), None, "app!=web").unwrap()), ["x"]);
        assert_eq!(names(&ctx.list(&CM(), None, "tier").unwrap()), ["z"]);
        assert_eq!(names(&ctx.list(&CM(), None, "!tier").unwrap()), ["x", "y"]);
    }

    #[test]
    fn list_applies_set_based_selectors() {
        let ctx = all_namespaces();
        assert_eq!(names(&ctx.list(&CM(), None, "app in (db, web)").unwrap()), ["x", "y", "z"]);
        assert_eq!(names(&ctx.list(&CM(), None, "app notin (web)").unwrap()), ["x"]);
        assert_eq!(names(&ctx.list(&CM(), None, "app in (web),!tier").unwrap()), ["y"]);
        assert_eq!(
            names(&ctx.list(&CM(), None, "tier notin (back)").unwrap()),
            ["x", "y", "z"],
            "absent label is not in the set"
        );
    }

    #[test]
    fn malformed_selectors_are_invalid_with_the_host_message() {
        for s in ["tier in (a,b", "a=b=c", "=x", "a in ()"] {
            let e = fixture().list(&CM(), None, s).unwrap_err();
            let LookupError::InvalidSelector(message) = e else { panic!("{s}: {e:?}") };
            assert_eq!(message, LabelSelector::parse(s).unwrap_err().to_string(), "{s}");
        }
    }

    #[test]
    fn get_finds_by_kind_namespace_and_name() {
        let ctx = fixture();
        assert_eq!(ctx.get(&Kind::new("", "v1", "Secret"), Some("a"), "x").unwrap().unwrap()["kind"], "Secret");
        assert!(ctx.get(&CM(), Some("b"), "x").unwrap().is_none());
    }

    #[test]
    fn restricted_fixture_refuses_undeclared_kinds() {
        let ctx = fixture().restrict_to(&Manifest::new("p", "0.1.0").related(CM(), ""));
        assert!(ctx.list(&CM(), None, "").is_ok());
        let e = ctx.get(&Kind::new("", "v1", "Secret"), None, "x").unwrap_err();
        assert_eq!(e.to_string(), "kind not declared in the manifest: v1/Secret");
    }

    #[test]
    fn typed_lookups_deserialize_or_fail_terminally() {
        #[derive(serde::Deserialize)]
        struct Named {
            metadata: std::collections::BTreeMap<String, Value>,
        }
        let all: Vec<Named> = all_namespaces().list_as(&CM(), None, "").unwrap();
        assert_eq!(all.len(), 3);
        assert!(all[0].metadata.contains_key("labels"));
        assert!(!fixture().get_as::<u8>(&CM(), Some("a"), "x").unwrap_err().is_retryable());
    }

    #[test]
    fn native_default_context_is_empty() {
        assert!(Context::default().list(&CM(), None, "").unwrap().is_empty());
    }
}
