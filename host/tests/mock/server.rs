//! A mock Kubernetes API server behind a real `kube::Client` (`tower_test::mock::pair`, the way
//! kube-rs and controller-rs test their clients): the host's requests go to the test, which
//! checks each one and answers it.
//!
//! Discovery, lists, watches and the `GET` of one object (the host reads a child its
//! label-filtered cache does not hold before writing it) are answered by the server itself,
//! from a table of the kinds the tests use and the objects a test registers
//! ([`ApiServer::add`]; 404 for any other); every other request (the writes) is handed to the
//! test by [`ApiServer::next`], which fails the test when none arrives in time. Every request, answered here or by the test, is
//! in [`ApiServer::requests`].

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::channel::mpsc;
use futures::stream::BoxStream;
use http_body_util::StreamBody;
use hyper::body::Frame;
use hyper::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};
use tower_test::mock::{Handle, SendResponse};

/// The body of the mock's answers: one chunk, or the events of a watch as they are sent.
pub type MockBody = StreamBody<BoxStream<'static, Result<Frame<Bytes>, Infallible>>>;

/// How long [`ApiServer::next`] waits for a request before failing the test.
pub const PATIENCE: Duration = Duration::from_secs(5);

/// A kind the mock serves: `(apiVersion, kind, plural, namespaced, has a status subresource)`.
type Resource = (&'static str, &'static str, &'static str, bool, bool);

const RESOURCES: &[Resource] = &[
    ("v1", "ConfigMap", "configmaps", true, false),
    ("test.wasmop.dev/v1", "Testbed", "testbeds", true, true),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", false, false),
    ("cache.example.com/v1alpha1", "Memcached", "memcacheds", true, true),
    ("apps/v1", "Deployment", "deployments", true, false),
    ("v1", "Pod", "pods", true, false),
];

/// The kinds of `plugins/memcached`, discovered only once [`ApiServer::serve_memcached`] says so.
const MEMCACHED_KINDS: &[&str] = &["Memcached", "Deployment", "Pod"];

/// Where a request goes, read from its path.
struct Target {
    /// `v1` or `group/version`.
    api_version: String,
    /// The namespace in the path.
    namespace: Option<String>,
    /// The resource; `None` for the discovery of the group version.
    plural: Option<String>,
    /// The object's name; `None` for a collection.
    name: Option<String>,
}

impl Target {
    fn parse(path: &str) -> Option<Self> {
        let (grouped, rest) = match (path.strip_prefix("/apis/"), path.strip_prefix("/api/")) {
            (Some(rest), _) => (true, rest),
            (None, Some(rest)) => (false, rest),
            (None, None) => return None,
        };
        let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
        let (api_version, rest) = if grouped {
            (format!("{}/{}", parts.first()?, parts.get(1)?), &parts[2..])
        } else {
            (parts.first()?.to_string(), &parts[1..])
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
            _ => (None, rest),
        };
        let at = |i: usize| rest.get(i).map(|s| s.to_string());
        Some(Self { api_version, namespace, plural: at(0), name: at(1) })
    }
}

/// One request handed to the test: what it asks, and the means to answer it.
pub struct Call {
    /// The HTTP method.
    pub method: Method,
    /// The path, without the query.
    pub path: String,
    /// The query parameters, decoded.
    pub query: BTreeMap<String, String>,
    /// The JSON body (`Null` when empty).
    pub body: Value,
    /// `Content-Type`, which says the kind of patch.
    pub content_type: String,
    respond: SendResponse<Response<MockBody>>,
}

impl Call {
    /// A query parameter.
    pub fn query(&self, key: &str) -> Option<&str> {
        self.query.get(key).map(String::as_str)
    }

    /// Answer 200 with `object`.
    pub fn answer(self, object: Value) {
        self.respond.send_response(json_response(StatusCode::OK, &object));
    }

    /// Answer 200 with the request's own body as the server would store it: `resourceVersion`
    /// set to `resource_version`.
    pub fn echo(self, resource_version: &str) {
        let mut object = if self.body.is_object() { self.body.clone() } else { json!({}) };
        object["metadata"]["resourceVersion"] = json!(resource_version);
        self.answer(object);
    }

    /// Answer with a Kubernetes `Status` error.
    pub fn fail(self, code: u16, reason: &str) {
        let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("mock: {reason}"), "reason": reason, "code": code});
        self.respond.send_response(json_response(StatusCode::from_u16(code).expect("an HTTP status"), &status));
    }
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self} {}", self.body)
    }
}

impl std::fmt::Display for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

/// The server side of a mock client.
pub struct ApiServer {
    handle: Handle<Request<Body>, Response<MockBody>>,
    objects: Vec<Value>,
    watches: Vec<(String, mpsc::UnboundedSender<Bytes>)>,
    forbidden: Vec<String>,
    requests: Vec<String>,
    memcached: bool,
}

/// A `kube::Client` (default namespace `default`) and the mock server it talks to.
pub fn mock_client() -> (kube::Client, ApiServer) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<MockBody>>();
    let server = ApiServer {
        handle,
        objects: Vec::new(),
        watches: Vec::new(),
        forbidden: Vec::new(),
        requests: Vec::new(),
        memcached: false,
    };
    (kube::Client::new(service, "default"), server)
}

impl ApiServer {
    /// Serve `object` in lists of its kind from now on.
    pub fn add(&mut self, object: Value) {
        self.objects.push(object);
    }

    /// Serve the kinds of `plugins/memcached` in discovery too (Memcacheds, Deployments, Pods).
    pub fn serve_memcached(&mut self) {
        self.memcached = true;
    }

    /// Answer lists and watches of `plural` with 403, as to a host without RBAC for it.
    pub fn forbid(&mut self, plural: &str) {
        self.forbidden.push(plural.to_owned());
    }

    /// Every request so far, as `METHOD path?query`, in order.
    pub fn requests(&self) -> &[String] {
        &self.requests
    }

    /// Send a watch event (`ADDED`, `MODIFIED`, `DELETED`) to every open watch of the object's
    /// resource; it is also served in later lists (or no longer, when deleted).
    pub fn event(&mut self, type_: &str, object: Value) {
        let plural = plural_of(&object).expect("an object of a served kind");
        let name = |o: &Value| o["metadata"]["name"].clone();
        self.objects.retain(|o| !(plural_of(o) == Some(plural) && name(o) == name(&object)));
        if type_ != "DELETED" {
            self.objects.push(object.clone());
        }
        let line = Bytes::from(format!("{}\n", json!({"type": type_, "object": object})));
        for (_, tx) in self.watches.iter().filter(|(p, _)| p == plural) {
            let _ = tx.unbounded_send(line.clone());
        }
    }

    /// The next request for the test, answering discovery, lists and watches meanwhile.
    ///
    /// # Panics
    /// When no such request arrives within [`PATIENCE`], listing the requests so far.
    pub async fn next(&mut self) -> Call {
        match self.next_within(PATIENCE).await {
            Some(call) => call,
            None => panic!("no request within {PATIENCE:?}; requests so far:\n{}", self.requests.join("\n")),
        }
    }

    /// The next request for the test, if one arrives within `within`.
    pub async fn next_within(&mut self, within: Duration) -> Option<Call> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let (request, respond) = tokio::time::timeout_at(deadline, self.handle.next_request()).await.ok()??;
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await.expect("a readable request body");
            let path = parts.uri.path().to_owned();
            let query = decode_query(parts.uri.query().unwrap_or_default());
            self.requests.push(format!("{} {}", parts.method, parts.uri));
            // The group lists (aggregated discovery included) are not served: discovery falls
            // back to asking each group-version, as with a server without aggregated discovery.
            if parts.method == Method::GET && (path == "/api" || path == "/apis") {
                let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                    "message": "mock: the group lists are not served", "code": 404});
                respond.send_response(json_response(StatusCode::NOT_FOUND, &status));
                continue;
            }
            let target = Target::parse(&path).unwrap_or_else(|| panic!("not a Kubernetes API path: {path}"));
            let get = parts.method == Method::GET;
            match (&target.plural, &target.name) {
                (None, _) if get => respond.send_response(discovery(&target.api_version, self.memcached)),
                (Some(plural), None) if get && self.forbidden.contains(plural) => {
                    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                        "message": format!("mock: {plural} is forbidden"), "code": 403});
                    respond.send_response(json_response(StatusCode::FORBIDDEN, &status));
                }
                (Some(plural), None) if get && query.get("watch").is_some_and(|w| w == "true") => {
                    let (tx, rx) = mpsc::unbounded();
                    self.watches.push((plural.clone(), tx));
                    let body = StreamBody::new(rx.map(|b| Ok(Frame::data(b))).boxed());
                    respond.send_response(Response::new(body));
                }
                (Some(plural), None) if get => respond.send_response(self.list(&target, plural)),
                (Some(plural), Some(name)) if get => respond.send_response(self.get(&target, plural, name)),
                _ => {
                    let body = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).expect("a JSON body") };
                    let content_type = parts
                        .headers
                        .get(hyper::header::CONTENT_TYPE)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    return Some(Call { method: parts.method, path, query, body, content_type, respond });
                }
            }
        }
    }

    /// One registered object, or a 404 Status.
    fn get(&self, target: &Target, plural: &str, name: &str) -> Response<MockBody> {
        let found = self.objects.iter().find(|o| {
            plural_of(o) == Some(plural)
                && o["metadata"]["name"] == name
                && target.namespace.as_ref().is_none_or(|ns| o["metadata"]["namespace"] == ns.as_str())
        });
        match found {
            Some(object) => json_response(StatusCode::OK, object),
            None => {
                let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                    "message": format!("mock: {plural} {name:?} not found"), "code": 404});
                json_response(StatusCode::NOT_FOUND, &status)
            }
        }
    }

    fn list(&self, target: &Target, plural: &str) -> Response<MockBody> {
        let items: Vec<&Value> = self
            .objects
            .iter()
            .filter(|o| plural_of(o) == Some(plural))
            .filter(|o| target.namespace.as_ref().is_none_or(|ns| o["metadata"]["namespace"] == ns.as_str()))
            .collect();
        let (api_version, kind, ..) = resource(|r| r.2 == plural).unwrap_or_else(|| panic!("the mock does not serve {plural}"));
        json_response(
            StatusCode::OK,
            &json!({"apiVersion": api_version, "kind": format!("{kind}List"), "metadata": {"resourceVersion": "1"}, "items": items}),
        )
    }
}

fn resource(matches: impl Fn(&Resource) -> bool) -> Option<Resource> {
    RESOURCES.iter().copied().find(|r| matches(r))
}

fn plural_of(object: &Value) -> Option<&'static str> {
    resource(|r| object["apiVersion"] == r.0 && object["kind"] == r.1).map(|r| r.2)
}

/// The `APIResourceList` of one group version (with the [`MEMCACHED_KINDS`] when `memcached`),
/// or 404 when the mock serves nothing in it.
fn discovery(api_version: &str, memcached: bool) -> Response<MockBody> {
    let resources: Vec<Value> = RESOURCES
        .iter()
        .filter(|r| r.0 == api_version && (memcached || !MEMCACHED_KINDS.contains(&r.1)))
        .flat_map(|&(_, kind, plural, namespaced, status)| {
            let verbs = json!(["create", "delete", "get", "list", "patch", "update", "watch"]);
            let main = json!({"name": plural, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": verbs});
            let sub = json!({"name": format!("{plural}/status"), "singularName": "", "namespaced": namespaced, "kind": kind,
                "verbs": ["get", "patch", "update"]});
            if status { vec![main, sub] } else { vec![main] }
        })
        .collect();
    if resources.is_empty() {
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404});
        return json_response(StatusCode::NOT_FOUND, &status);
    }
    json_response(StatusCode::OK, &json!({"kind": "APIResourceList", "groupVersion": api_version, "resources": resources}))
}

fn json_response(status: StatusCode, value: &Value) -> Response<MockBody> {
    let bytes = Bytes::from(serde_json::to_vec(value).expect("JSON"));
    let body = StreamBody::new(futures::stream::once(async move { Ok(Frame::data(bytes)) }).boxed());
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    response
}

/// `a=b&c=d%2Fe` → `{a: b, c: d/e}`.
fn decode_query(query: &str) -> BTreeMap<String, String> {
    let decode = |s: &str| {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'%' if i + 2 < bytes.len() => {
                    let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                    out.push(hex.expect("a percent escape"));
                    i += 3;
                }
                b'+' => {
                    out.push(b' ');
                    i += 1;
                }
                b => {
                    out.push(b);
                    i += 1;
                }
            }
        }
        String::from_utf8(out).expect("UTF-8 query")
    };
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}
