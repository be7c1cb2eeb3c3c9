//! Read-only lookups in the host's watch cache (the `cache` import), with a native fixture.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::request::{deserialize_object, object_name};
use crate::{Error, Kind, LookupError, Manifest};

/// Access to the host's watch cache, handed to [`Plugin::reconcile`](crate::Plugin::reconcile).
///
/// Lookups never make an API call: they read the host's in-memory cache, restricted to the
/// kinds the manifest declares and (for a namespaced parent) to the parent's namespace.
/// `namespace: None` means the parent's namespace for namespaced kinds.
///
/// In a plugin compiled to WebAssembly the context calls the host. Natively (in unit tests)
/// build one with [`Context::fixture`]: it answers from a list of objects.
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
/// assert!(ctx.get(&pods, None, "db-1")?.is_some());
/// assert!(ctx.get(&pods, Some("other"), "db-1")?.is_none());
/// # Ok::<(), wasmop_sdk::LookupError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Context {
    source: Source,
    /// Set by `restrict_to` (fixtures only).
    declared: Option<Manifest>,
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
        return Self { source: Source::Host, declared: None };
        #[cfg(not(target_arch = "wasm32"))]
        return Self::fixture(Vec::new());
    }

    /// A context that answers from these objects (for unit tests). `namespace: None` matches
    /// any namespace; selectors support `key=value`, `key==value`, `key!=value`, `key` and
    /// `!key` joined by commas (set-based requirements are refused as invalid).
    pub fn fixture(objects: Vec<Value>) -> Self {
        Self { source: Source::Fixture(objects), declared: None }
    }

    /// Refuse lookups of kinds the manifest does not declare, like the host does (fixtures
    /// only; the host applies the real manifest).
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
                let selector = parse_selector(label_selector)?;
                let mut found: Vec<Value> = objects
                    .iter()
                    .filter(|o| kind.matches(o) && in_namespace(o, namespace) && selector.iter().all(|r| r.matches(o)))
                    .cloned()
                    .collect();
                found.sort_by(|a, b| sort_key(a).cmp(&sort_key(b)));
                Ok(found)
            }
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

/// One requirement of an equality-based label selector.
#[derive(Debug, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
}

impl Requirement {
    fn matches(&self, object: &Value) -> bool {
        let label = |key: &str| object.pointer("/metadata/labels").and_then(|l| l.get(key)).and_then(Value::as_str);
        match self {
            Self::Equals(k, v) => label(k) == Some(v),
            Self::NotEquals(k, v) => label(k) != Some(v),
            Self::Exists(k) => label(k).is_some(),
            Self::NotExists(k) => label(k).is_none(),
        }
    }
}

fn parse_selector(selector: &str) -> Result<Vec<Requirement>, LookupError> {
    let invalid = |why: &str| LookupError::InvalidSelector(format!("{why} in {selector:?}"));
    let valid = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
    let mut requirements = Vec::new();
    for part in selector.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if part.contains('(') || part.contains(' ') {
            return Err(invalid("set-based requirements are not supported by the native fixture"));
        }
        let requirement = if let Some((k, v)) = part.split_once("!=") {
            Requirement::NotEquals(k.into(), v.into())
        } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
            Requirement::Equals(k.into(), v.into())
        } else if let Some(k) = part.strip_prefix('!') {
            Requirement::NotExists(k.into())
        } else {
            Requirement::Exists(part.into())
        };
        let ok = match &requirement {
            Requirement::Equals(k, v) | Requirement::NotEquals(k, v) => valid(k) && (v.is_empty() || valid(v)),
            Requirement::Exists(k) | Requirement::NotExists(k) => valid(k),
        };
        if !ok {
            return Err(invalid(&format!("bad requirement {part:?}")));
        }
        requirements.push(requirement);
    }
    Ok(requirements)
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

    fn fixture() -> Context {
        Context::fixture(vec![
            cm("b", "z", json!({"app": "web", "tier": "front"})),
            cm("a", "y", json!({"app": "web"})),
            cm("a", "x", json!({"app": "db"})),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x", "namespace": "a"}}),
        ])
    }

    const CM: fn() -> Kind = || Kind::new("", "v1", "ConfigMap");

    #[test]
    fn list_filters_by_kind_and_namespace_and_sorts() {
        assert_eq!(names(&fixture().list(&CM(), None, "").unwrap()), ["x", "y", "z"]);
        assert_eq!(names(&fixture().list(&CM(), Some("a"), "").unwrap()), ["x", "y"]);
    }

    #[test]
    fn list_applies_equality_selectors() {
        let ctx = fixture();
        assert_eq!(names(&ctx.list(&CM(), None, "app=web").unwrap()), ["y", "z"]);
        assert_eq!(names(&ctx.list(&CM(), None, "app==web, tier=front").unwrap()), ["z"]);
        assert_eq!(names(&ctx.list(&CM(), None, "app!=web").unwrap()), ["x"]);
        assert_eq!(names(&ctx.list(&CM(), None, "tier").unwrap()), ["z"]);
        assert_eq!(names(&ctx.list(&CM(), None, "!tier").unwrap()), ["x", "y"]);
    }

    #[test]
    fn set_based_or_malformed_selectors_are_invalid() {
        for s in ["tier in (a,b)", "a=b=c", "=x"] {
            assert!(matches!(fixture().list(&CM(), None, s), Err(LookupError::InvalidSelector(_))), "{s}");
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
        assert_eq!(e.to_string(), "kind not declared in the manifest: v1 Secret");
    }

    #[test]
    fn typed_lookups_deserialize_or_fail_terminally() {
        #[derive(serde::Deserialize)]
        struct Named {
            metadata: std::collections::BTreeMap<String, Value>,
        }
        let all: Vec<Named> = fixture().list_as(&CM(), None, "").unwrap();
        assert_eq!(all.len(), 3);
        assert!(all[0].metadata.contains_key("labels"));
        assert!(!fixture().get_as::<u8>(&CM(), None, "x").unwrap_err().is_retryable());
    }

    #[test]
    fn native_default_context_is_empty() {
        assert!(Context::default().list(&CM(), None, "").unwrap().is_empty());
    }
}
