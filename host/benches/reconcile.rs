//! Host overhead per reconcile, for the memcached plugin: `cargo bench -p wasmop --bench reconcile`.
//!
//! A plain `fn main` (`harness = false`), no benchmark framework. It runs the SAME memcached
//! logic (`plugins/memcached`, [`memcached::MemcachedOperator`]) on the SAME input, three ways,
//! and prints p50 / p90 / p99 per iteration in µs plus the ratios its targets are stated in:
//!
//! - **(w) wasm via the host**: a [`wasmop::runtime::Runtime`] (default limits, pooling
//!   allocator on, artifact cache off) loads the memcached component, built from source first
//!   (`cargo build --release --target wasm32-wasip2 -p memcached` into
//!   `<target>/bench-plugins`). One iteration is `plugin.reconcile(&request, cache)`: objects
//!   serialized to JSON text, fresh store + fresh instance (pre-instantiated, pooled), the
//!   request copied in, the guest parses it, runs the logic and serializes its answer, the
//!   answer copied out, then parsed and validated by the host into a `contract::Response`.
//!   The wall time minus the same logic natively is the host's overhead.
//! - **(a) native through the SDK**: the same crate linked natively. One iteration does what
//!   the guest adapter does inside the component: parse the request's JSON texts into a
//!   `wasmop_sdk::Request`, call `<MemcachedOperator as Plugin>::reconcile`, validate, and
//!   serialize the children and status back to JSON text. No sandbox, no copies, no host-side
//!   (de)serialization: the floor.
//! - **(b) Metacontroller-style hook: JSON over HTTP/1.1 on loopback**: a hyper 1 server on
//!   127.0.0.1 whose handler parses `{"parent", "children", "related"}`, runs the same native
//!   logic and answers `{"children", "status", "conditions"}`. The client (hyper
//!   `http1::handshake` on one kept-alive TCP connection, `TCP_NODELAY` on both ends)
//!   serializes the request body from the same objects, POSTs it and parses the answer,
//!   every iteration. The server runs on its own OS thread with its own tokio runtime (a
//!   stand-in for the webhook process; in a cluster it is another pod, behind a Service, so
//!   this is a lower bound). Row (b0) is the same hook served from the client's own
//!   single-threaded runtime (no cross-thread wake-ups): an even lower bound, for reference.
//!
//! Input (all three): parent = `crds/samples/memcached.yaml` as JSON plus a uid and a
//! generation; one observed child = the Deployment as the API server would return it
//! (status included, no managedFields); three related Pods carrying the memcached labels.
//! The outputs of the three ways are checked to be identical before measuring.
//!
//! Method: one current-thread tokio runtime drives (w), (a) and the client of (b); every way
//! is warmed up ([`WARMUP`] iterations), then measured [`N`] times, interleaved in
//! [`ROUNDS`] rounds of `N / ROUNDS` per way (the order rotates each round) so that noise
//! from other work on the machine spreads over all of them. Each iteration is timed with
//! [`Instant`], the result dropped inside the timed region. Percentiles are nearest-rank.
//!
//! Also printed, to explain the figures rather than to judge them:
//! - (w) split into `CallStats::elapsed` (new store, instantiation, the guest call, as the host
//!   itself reports it) and the rest (the request turned into JSON text, the store dropped,
//!   which resets the instance's linear memory, and the response validated);
//! - (w1) / (a1): (w) and (a) on the parent alone, so the fixed cost of a call shows apart
//!   from the cost of copying and parsing 6 KB of objects;
//! - minor page faults per iteration (`getrusage`, whole process);
//! - pieces of the host's work timed alone (request to JSON text: serialized with
//!   `Value::to_string`, with `serde_json::to_string`, and copied from the texts each cached
//!   [`Object`] keeps, which is what the host does; response validation) and the
//!   native log line;
//! - the 1-minute load average before and after measuring (the machine may be shared), and the
//!   share of the cores' time the hypervisor gave to other guests while measuring (steal, from
//!   `/proc/stat`). A VM is also slowed, with no steal to see, by its host's other work on the
//!   same cores and caches, the wasm ways more than the native one: the native way's p50 is the
//!   yardstick of the machine's speed of the minute, and the machine's pace while measuring
//!   (`wasmop_e2e::pace`: the CPU time of a fixed piece of work, sampled on the other core) a
//!   second one that does not depend on this bench's code;
//! - **(f) the floor** of any call, measured in the same interleaved rounds as the rest:
//!   `plugins/webhook-only`'s `admit` (a few lines of guest code without the SDK, a 66 KB
//!   component) through the same runtime and engine settings: a fresh store and instance, a tiny
//!   request lowered, the verdict lifted and checked, the store dropped.
//!
//! Logging: the plugin logs one `debug` line per reconcile. In wasm that is a `log` import
//! call that the host hands to `tracing` (no subscriber here: filtered out). Natively the SDK
//! `eprintln!`s it; fd 2 is pointed at `/dev/null` while measuring so that (a) and (b) pay
//! a `write(2)` to `/dev/null`, not a terminal. Its cost is printed separately.
//!
//! Targets: p50(w) ≤ 50 µs; p50(b)/p50(w) ≥ 20; p50(w)/p50(a) ≤ 3; and the tighter pair that
//! `scripts/bench.sh` reports: p50(w)/p50(a) ≤ 1.3, and a fixed cost per call,
//! p50(w1) − p50(a1), at most 10 µs over the floor p50(f) of the same run.
//! Each is printed as PASS or MISS; a MISS is information, the bench never fails on it.
//!
//! `RECONCILE_PROFILE=w|w1|a|a1|floor` runs one way alone, for a profiler (see [`profile`]).
//! `RECONCILE_WASM=path` measures that memcached component instead of building one (to compare
//! builds of the plugin, e.g. guest allocators or stack sizes, with the same host binary).

use std::convert::Infallible;
use std::fmt::Write as _;
use std::hint::black_box;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail, ensure};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HOST};
use hyper::service::service_fn;
use hyper::{StatusCode, client::conn::http1 as client_http1, server::conn::http1 as server_http1};
use hyper_util::rt::TokioIo;
use memcached::MemcachedOperator;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wasmop::contract::{Condition as HostCondition, ConditionStatus as HostConditionStatus, Object, OutputLimits, RawResponse};
use wasmop::objects::{MemoryCache, ObjectCache};
use wasmop::runtime::{Limits, Plugin as WasmPlugin, Runtime};
use wasmop_e2e::machine::MachineTicks;
use wasmop_e2e::pace::PaceProbe;
use wasmop_e2e::plugins::workspace;
use wasmop_sdk::Plugin as _;

/// Iterations per way before measuring.
const WARMUP: usize = 500;
/// Measured iterations per way.
const N: usize = 5_000;
/// Rounds the measured iterations are interleaved in.
const ROUNDS: usize = 10;

fn main() -> anyhow::Result<()> {
    let wasm_path = build_memcached_component()?;
    let fixtures = Fixtures::new(true)?;
    let parent_only = Fixtures::new(false)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(run(&fixtures, &parent_only, &wasm_path))
}

// ---------------------------------------------------------------------------------------------
// The input

/// The one input every way reconciles, as values and as the JSON texts the guest receives.
struct Fixtures {
    parent: Value,
    children: Vec<Value>,
    related: Vec<Value>,
    /// `parent`, `children`, `related` and the config as JSON text (what crosses into the guest).
    parent_text: String,
    children_text: Vec<String>,
    related_text: Vec<String>,
    config_text: String,
}

impl Fixtures {
    /// The full input, or (`with_objects = false`) the parent alone: no child, no related.
    fn new(with_objects: bool) -> anyhow::Result<Self> {
        let sample = workspace().join("crds/samples/memcached.yaml");
        let text = std::fs::read_to_string(&sample).with_context(|| format!("reading {}", sample.display()))?;
        let mut parent: Value = wasmop::yaml::from_str(&text).with_context(|| format!("parsing {}", sample.display()))?;
        let meta = parent["metadata"].as_object_mut().ok_or_else(|| anyhow!("the sample has no metadata"))?;
        meta.insert("uid".into(), json!("6b1f5a0e-2c4d-4e55-9a51-3d2f1c0b7a10"));
        meta.insert("generation".into(), json!(1));
        let name = parent["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let namespace = parent["metadata"]["namespace"].as_str().unwrap_or("default").to_owned();
        let children = if with_objects { vec![observed_deployment(&name, &namespace)] } else { vec![] };
        let related = if with_objects { (0..3).map(|i| pod(&name, &namespace, i)).collect() } else { vec![] };
        let to_text = |v: &[Value]| v.iter().map(Value::to_string).collect::<Vec<_>>();
        Ok(Self {
            parent_text: parent.to_string(),
            children_text: to_text(&children),
            related_text: to_text(&related),
            config_text: json!({}).to_string(),
            parent,
            children,
            related,
        })
    }

    /// The host's request: the same values, shared (`Arc<Object>`) as the watch cache holds
    /// them. Each object's JSON text is serialized on the first call and reused by later ones,
    /// as for an object that did not change between two reconciles.
    fn host_request(&self) -> wasmop::contract::Request {
        let mut req = wasmop::contract::Request::new(self.parent.clone());
        req.children = self.children.iter().cloned().map(|v| Arc::new(Object::new(v))).collect();
        req.related = self.related.iter().cloned().map(|v| Arc::new(Object::new(v))).collect();
        req
    }

    fn input_bytes(&self) -> usize {
        self.parent_text.len()
            + self.children_text.iter().map(String::len).sum::<usize>()
            + self.related_text.iter().map(String::len).sum::<usize>()
    }
}

/// The memcached Deployment as the API server returns it once it has rolled out.
fn observed_deployment(name: &str, namespace: &str) -> Value {
    let labels = json!({"app": "memcached", "memcached_cr": name});
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name, "namespace": namespace,
            "uid": "0d7c1e2a-8f3b-4c6d-9e1f-2a3b4c5d6e7f", "resourceVersion": "48213", "generation": 1,
            "creationTimestamp": "2026-11-02T10:15:00Z",
            "labels": labels,
            "annotations": {"deployment.kubernetes.io/revision": "1"},
            "ownerReferences": [{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "name": name,
                "uid": "6b1f5a0e-2c4d-4e55-9a51-3d2f1c0b7a10", "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [{
                        "name": "memcached", "image": "memcached:1.6.17-alpine",
                        "command": ["memcached", "-m=64", "-o", "modern", "-v"],
                        "ports": [{"name": "memcached", "containerPort": 11211, "protocol": "TCP"}],
                        "resources": {}, "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"
                    }],
                    "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                    "securityContext": {}, "schedulerName": "default-scheduler"
                }
            },
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
            "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600
        },
        "status": {
            "observedGeneration": 1, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3,
            "conditions": [
                {"type": "Available", "status": "True", "lastUpdateTime": "2026-11-02T10:15:09Z",
                 "lastTransitionTime": "2026-11-02T10:15:09Z", "reason": "MinimumReplicasAvailable",
                 "message": "Deployment has minimum availability."},
                {"type": "Progressing", "status": "True", "lastUpdateTime": "2026-11-02T10:15:09Z",
                 "lastTransitionTime": "2026-11-02T10:15:00Z", "reason": "NewReplicaSetAvailable",
                 "message": format!("ReplicaSet \"{name}-6d8f7c9b5\" has successfully progressed.")}
            ]
        }
    })
}

/// Pod `i` of the memcached Deployment, running.
fn pod(name: &str, namespace: &str, i: usize) -> Value {
    let suffix = ["x7k2p", "m4q9z", "c8v3n"][i % 3];
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("{name}-6d8f7c9b5-{suffix}"), "generateName": format!("{name}-6d8f7c9b5-"),
            "namespace": namespace, "uid": format!("3c2b1a00-0000-4000-8000-00000000000{i}"),
            "resourceVersion": format!("4820{i}"), "creationTimestamp": "2026-11-02T10:15:00Z",
            "labels": {"app": "memcached", "memcached_cr": name, "pod-template-hash": "6d8f7c9b5"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{name}-6d8f7c9b5"),
                "uid": "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {
            "containers": [{
                "name": "memcached", "image": "memcached:1.6.17-alpine",
                "command": ["memcached", "-m=64", "-o", "modern", "-v"],
                "ports": [{"name": "memcached", "containerPort": 11211, "protocol": "TCP"}],
                "resources": {}, "imagePullPolicy": "IfNotPresent"
            }],
            "restartPolicy": "Always", "nodeName": "node-1", "serviceAccountName": "default"
        },
        "status": {
            "phase": "Running", "podIP": format!("10.244.0.{}", 11 + i), "hostIP": "172.18.0.2",
            "startTime": "2026-11-02T10:15:01Z",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-02T10:15:08Z"}],
            "containerStatuses": [{"name": "memcached", "ready": true, "restartCount": 0,
                "image": "memcached:1.6.17-alpine", "started": true,
                "state": {"running": {"startedAt": "2026-11-02T10:15:07Z"}}}]
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Building the component

/// The memcached component built from source (`wasmop_e2e::plugins`), or the component
/// `RECONCILE_WASM` names.
fn build_memcached_component() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("RECONCILE_WASM") {
        eprintln!("measuring the memcached component {} (RECONCILE_WASM)", Path::new(&path).display());
        return Ok(PathBuf::from(path));
    }
    build_component("memcached")
}

/// `package` built for wasm32-wasip2 in release, the way the tests build it.
fn build_component(package: &str) -> anyhow::Result<PathBuf> {
    eprintln!("building the {package} component (wasm32-wasip2, release)");
    Ok(wasmop_e2e::plugins::plugin(package, "wasm32-wasip2"))
}

/// The floor of a call (f): `plugins/webhook-only`'s `admit` (no SDK, a few lines of guest
/// code, a 66 KB component) on a tiny ConfigMap, through the same runtime: a fresh store and
/// instance, the request lowered, the verdict lifted and checked, the store dropped. What any
/// plugin call costs before its guest does work.
struct Floor {
    plugin: WasmPlugin,
    request: wasmop_sdk::AdmissionRequest,
}

impl Floor {
    async fn load(runtime: &Runtime) -> anyhow::Result<Self> {
        let plugin = runtime.load_file(build_component("webhook-only")?).await?;
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}});
        Ok(Self { plugin, request: wasmop_sdk::AdmissionRequest::new(wasmop_sdk::Operation::Create, object) })
    }

    /// One empty call, timed.
    async fn once(&self, cache: &Arc<dyn ObjectCache>) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let (verdict, _) = self.plugin.admit("names", &self.request, Arc::clone(cache)).await?;
        let elapsed = started.elapsed();
        drop(black_box(verdict));
        Ok(elapsed)
    }
}

// ---------------------------------------------------------------------------------------------
// (w) wasm via the host

/// One reconcile through the host; returns the wall time and the time inside the sandboxed
/// call (`CallStats::elapsed`: store, instance, copies, guest work).
async fn wasm_once(
    plugin: &WasmPlugin,
    request: &wasmop::contract::Request,
    cache: &Arc<dyn ObjectCache>,
) -> anyhow::Result<(Duration, Duration)> {
    let started = Instant::now();
    let inside = {
        let (response, stats) = plugin.reconcile(request, Arc::clone(cache)).await?;
        black_box(&response);
        stats.elapsed
    };
    Ok((started.elapsed(), inside))
}

// ---------------------------------------------------------------------------------------------
// (a) native through the SDK

/// What crosses back from the guest: children and status as JSON text, typed conditions.
struct NativeWire {
    children: Vec<String>,
    status: Option<String>,
    conditions: Vec<wasmop_sdk::Condition>,
}

/// Exactly the guest adapter's work: parse the texts, reconcile, validate, serialize.
fn native_once(f: &Fixtures) -> anyhow::Result<NativeWire> {
    let parse = |t: &str| serde_json::from_str::<Value>(t);
    let request = wasmop_sdk::Request {
        parent: parse(&f.parent_text)?,
        children: f.children_text.iter().map(|t| parse(t)).collect::<Result<_, _>>()?,
        related: f.related_text.iter().map(|t| parse(t)).collect::<Result<_, _>>()?,
        finalizing: false,
        config: parse(&f.config_text)?,
    };
    let response =
        MemcachedOperator::reconcile(request, &wasmop_sdk::Context::fixture(vec![])).and_then(wasmop_sdk::Response::validate)?;
    Ok(NativeWire {
        children: response.children().iter().map(serde_json::to_string).collect::<Result<_, _>>()?,
        status: response.status_patch().map(serde_json::to_string).transpose()?,
        conditions: response.conditions().to_vec(),
    })
}

// ---------------------------------------------------------------------------------------------
// (b) Metacontroller-style JSON-over-HTTP hook

#[derive(Serialize)]
struct HookRequestOut<'a> {
    parent: &'a Value,
    children: &'a [Value],
    related: &'a [Value],
}

#[derive(Deserialize)]
struct HookRequestIn {
    parent: Value,
    #[serde(default)]
    children: Vec<Value>,
    #[serde(default)]
    related: Vec<Value>,
}

#[derive(Serialize)]
struct HookConditionOut<'a> {
    #[serde(rename = "type")]
    type_: &'a str,
    status: &'a str,
    reason: &'a str,
    message: &'a str,
}

#[derive(Serialize)]
struct HookReplyOut<'a> {
    children: &'a [Value],
    status: Option<&'a Value>,
    conditions: Vec<HookConditionOut<'a>>,
}

#[derive(Deserialize)]
struct HookReplyIn {
    children: Vec<Value>,
    status: Option<Value>,
    #[serde(default)]
    conditions: Vec<Value>,
}

/// The hook: parse the body, run the native logic, answer JSON.
async fn hook(req: hyper::Request<Incoming>) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let reply = async {
        let body = req.into_body().collect().await?.to_bytes();
        let input: HookRequestIn = serde_json::from_slice(&body)?;
        let request = wasmop_sdk::Request {
            parent: input.parent,
            children: input.children,
            related: input.related,
            finalizing: false,
            config: json!({}),
        };
        let response = MemcachedOperator::reconcile(request, &wasmop_sdk::Context::fixture(vec![]))
            .and_then(wasmop_sdk::Response::validate)?;
        let out = HookReplyOut {
            children: response.children(),
            status: response.status_patch(),
            conditions: response
                .conditions()
                .iter()
                .map(|c| HookConditionOut { type_: &c.type_, status: c.status.as_str(), reason: &c.reason, message: &c.message })
                .collect(),
        };
        anyhow::Ok(serde_json::to_vec(&out)?)
    }
    .await;
    let (status, body) = match reply {
        Ok(body) => (StatusCode::OK, body),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}").into_bytes()),
    };
    let mut response = hyper::Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, "application/json".parse().expect("static header"));
    Ok(response)
}

/// Serve the hook on every connection `listener` accepts.
async fn serve(listener: tokio::net::TcpListener) {
    while let Ok((stream, _)) = listener.accept().await {
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let _ = server_http1::Builder::new().serve_connection(TokioIo::new(stream), service_fn(hook)).await;
        });
    }
}

/// Start the hook on its own OS thread with its own single-threaded runtime.
fn start_hook_thread() -> anyhow::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    std::thread::Builder::new().name("hook-server".into()).spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("hook runtime");
        rt.block_on(async move { serve(tokio::net::TcpListener::from_std(listener).expect("hook listener")).await });
    })?;
    Ok(addr)
}

/// Start the hook as a task of the current (the client's) runtime.
async fn start_hook_task() -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(serve(listener));
    Ok(addr)
}

/// A kept-alive HTTP/1.1 connection to the hook.
struct HookClient {
    sender: client_http1::SendRequest<Full<Bytes>>,
    authority: String,
}

impl HookClient {
    async fn connect(addr: SocketAddr) -> anyhow::Result<Self> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (sender, connection) = client_http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Self { sender, authority: addr.to_string() })
    }

    /// Serialize the request from the objects, POST it, parse the answer.
    async fn call(&mut self, f: &Fixtures) -> anyhow::Result<HookReplyIn> {
        let body = serde_json::to_vec(&HookRequestOut { parent: &f.parent, children: &f.children, related: &f.related })?;
        let request = hyper::Request::post("/sync")
            .header(HOST, &self.authority)
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))?;
        self.sender.ready().await?;
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        if status != StatusCode::OK {
            bail!("hook answered {status}: {}", String::from_utf8_lossy(&body));
        }
        Ok(serde_json::from_slice(&body)?)
    }
}

// ---------------------------------------------------------------------------------------------
// Measuring

/// Point fd 2 at /dev/null while alive (the native SDK `eprintln!`s the plugin's log lines).
struct StderrToDevNull {
    saved: libc::c_int,
}

impl StderrToDevNull {
    fn new() -> anyhow::Result<Self> {
        let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
        // SAFETY: dup/dup2 on fd 2 and on a file we own; the saved fd is restored on drop.
        let saved = unsafe { libc::dup(2) };
        ensure!(saved >= 0, "dup(2): {}", std::io::Error::last_os_error());
        // SAFETY: as above.
        if unsafe { libc::dup2(null.as_raw_fd(), 2) } < 0 {
            bail!("dup2: {}", std::io::Error::last_os_error());
        }
        Ok(Self { saved })
    }
}

impl Drop for StderrToDevNull {
    fn drop(&mut self) {
        // SAFETY: `saved` is the fd dup'ed in `new`, owned by us.
        unsafe {
            libc::dup2(self.saved, 2);
            libc::close(self.saved);
        }
    }
}

/// Per-iteration durations of one way.
#[derive(Default)]
struct Samples(Vec<Duration>);

impl Samples {
    /// Nearest-rank percentile, in µs.
    fn percentile(&self, q: f64) -> f64 {
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        micros(sorted[rank - 1])
    }

    fn mean(&self) -> f64 {
        micros(self.0.iter().sum::<Duration>()) / self.0.len() as f64
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The ways, in the order of the table.
#[derive(Clone, Copy)]
enum Way {
    Wasm,
    Native,
    Hook,
    HookSameThread,
    /// (w) and (a) on the parent alone: what a call costs when there is little to copy and parse.
    WasmParentOnly,
    NativeParentOnly,
    /// (f) an empty guest's call: the floor.
    Floor,
}

const WAYS: [Way; 7] =
    [Way::Wasm, Way::Native, Way::Hook, Way::HookSameThread, Way::WasmParentOnly, Way::NativeParentOnly, Way::Floor];

/// Minor page faults of the whole process so far.
fn minor_faults() -> u64 {
    // SAFETY: getrusage writes into the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &raw mut usage) } != 0 {
        return 0;
    }
    u64::try_from(usage.ru_minflt).unwrap_or(0)
}

struct Bench<'a> {
    f: &'a Fixtures,
    parent_only: &'a Fixtures,
    plugin: WasmPlugin,
    request: wasmop::contract::Request,
    parent_only_request: wasmop::contract::Request,
    cache: Arc<dyn ObjectCache>,
    hook: HookClient,
    hook_same_thread: HookClient,
    /// (w) wall, (w) inside `call`, (a), (b), (b0).
    wasm: Samples,
    wasm_inside: Samples,
    /// (w) wall minus `CallStats::elapsed`, per iteration.
    wasm_outside: Samples,
    native: Samples,
    http: Samples,
    http_same_thread: Samples,
    wasm_parent_only: Samples,
    native_parent_only: Samples,
    floor_call: Floor,
    floor: Samples,
    /// Minor page faults during the measured iterations, per way (index in `WAYS`).
    faults: [u64; WAYS.len()],
}

impl Bench<'_> {
    /// `n` iterations of one way; recorded unless warming up.
    async fn run(&mut self, way: Way, n: usize, record: bool) -> anyhow::Result<()> {
        let faults_before = minor_faults();
        for _ in 0..n {
            match way {
                Way::Wasm => {
                    let (total, inside) = wasm_once(&self.plugin, &self.request, &self.cache).await?;
                    if record {
                        self.wasm.0.push(total);
                        self.wasm_inside.0.push(inside);
                        self.wasm_outside.0.push(total.saturating_sub(inside));
                    }
                }
                Way::Native => {
                    let started = Instant::now();
                    black_box(&native_once(self.f)?);
                    let elapsed = started.elapsed();
                    if record {
                        self.native.0.push(elapsed);
                    }
                }
                Way::Hook | Way::HookSameThread => {
                    let client = if matches!(way, Way::Hook) { &mut self.hook } else { &mut self.hook_same_thread };
                    let started = Instant::now();
                    black_box(&client.call(self.f).await?);
                    let elapsed = started.elapsed();
                    if record {
                        let samples = if matches!(way, Way::Hook) { &mut self.http } else { &mut self.http_same_thread };
                        samples.0.push(elapsed);
                    }
                }
                Way::WasmParentOnly => {
                    let (total, _) = wasm_once(&self.plugin, &self.parent_only_request, &self.cache).await?;
                    if record {
                        self.wasm_parent_only.0.push(total);
                    }
                }
                Way::NativeParentOnly => {
                    let started = Instant::now();
                    black_box(&native_once(self.parent_only)?);
                    let elapsed = started.elapsed();
                    if record {
                        self.native_parent_only.0.push(elapsed);
                    }
                }
                Way::Floor => {
                    let elapsed = self.floor_call.once(&self.cache).await?;
                    if record {
                        self.floor.0.push(elapsed);
                    }
                }
            }
        }
        if record {
            self.faults[way as usize] += minor_faults() - faults_before;
        }
        Ok(())
    }
}

/// The three ways must produce the same children, status and conditions.
async fn check_same_output(b: &mut Bench<'_>) -> anyhow::Result<()> {
    let (w, _) = b.plugin.reconcile(&b.request, Arc::clone(&b.cache)).await?;
    let a = native_once(b.f)?;
    let a_children = a.children.iter().map(|t| serde_json::from_str::<Value>(t)).collect::<Result<Vec<_>, _>>()?;
    let a_status = a.status.as_deref().map(serde_json::from_str::<Value>).transpose()?;
    ensure!(w.children == a_children, "wasm and native children differ");
    ensure!(w.status == a_status, "wasm and native status differ");
    let host_conditions = |c: &[HostCondition]| {
        c.iter()
            .map(|c| {
                let status = match c.status {
                    HostConditionStatus::True => "True",
                    HostConditionStatus::False => "False",
                    HostConditionStatus::Unknown => "Unknown",
                };
                (c.type_.clone(), status.to_owned(), c.reason.clone(), c.message.clone())
            })
            .collect::<Vec<_>>()
    };
    let sdk_conditions = a
        .conditions
        .iter()
        .map(|c| (c.type_.clone(), c.status.as_str().to_owned(), c.reason.clone(), c.message.clone()))
        .collect::<Vec<_>>();
    ensure!(host_conditions(&w.conditions) == sdk_conditions, "wasm and native conditions differ");
    for client in [&mut b.hook, &mut b.hook_same_thread] {
        let h = client.call(b.f).await?;
        ensure!(h.children == a_children, "hook and native children differ");
        ensure!(h.status == a_status, "hook and native status differ");
        ensure!(h.conditions.len() == a.conditions.len(), "hook and native conditions differ");
    }
    ensure!(w.children.len() == 1 && w.children[0]["spec"]["replicas"] == 3, "unexpected children: {:?}", w.children);
    Ok(())
}

/// p50 of `n` runs of `f`, in µs (for the breakdown lines).
fn p50_of(n: usize, mut f: impl FnMut()) -> f64 {
    let mut s = Samples::default();
    for _ in 0..n {
        let started = Instant::now();
        f();
        s.0.push(started.elapsed());
    }
    s.percentile(0.5)
}

async fn run(f: &Fixtures, parent_only: &Fixtures, wasm_path: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(wasm_path).with_context(|| format!("reading {}", wasm_path.display()))?;
    let component_size = bytes.len();
    let runtime = Runtime::builder().limits(Limits::default()).artifact_dir(None).pooling(true).build()?;
    let started = Instant::now();
    let plugin = runtime.load(bytes).await?;
    let load_time = started.elapsed();

    let hook_addr = start_hook_thread()?;
    let hook_same_addr = start_hook_task().await?;
    let (_, first_call) = plugin.reconcile(&f.host_request(), Arc::new(MemoryCache::default())).await?;
    let mut b = Bench {
        f,
        parent_only,
        plugin,
        request: f.host_request(),
        parent_only_request: parent_only.host_request(),
        cache: Arc::new(MemoryCache::default()),
        hook: HookClient::connect(hook_addr).await?,
        hook_same_thread: HookClient::connect(hook_same_addr).await?,
        wasm: Samples::default(),
        wasm_inside: Samples::default(),
        wasm_outside: Samples::default(),
        native: Samples::default(),
        http: Samples::default(),
        http_same_thread: Samples::default(),
        wasm_parent_only: Samples::default(),
        native_parent_only: Samples::default(),
        floor_call: Floor::load(&runtime).await?,
        floor: Samples::default(),
        faults: [0; WAYS.len()],
    };

    if let Ok(only) = std::env::var("RECONCILE_PROFILE") {
        return profile(&mut b, &only).await;
    }
    let load_before = load_average();
    let ticks_before = MachineTicks::now();
    let pace = PaceProbe::start(Duration::from_millis(500));
    let pace_mark = pace.mark();
    eprintln!("measuring: {WARMUP} warm-up + {N} iterations per way ({} ways), in {ROUNDS} interleaved rounds ...", WAYS.len());
    let measured_at = Instant::now();
    let breakdown = {
        let _quiet = StderrToDevNull::new()?;
        check_same_output(&mut b).await?;
        for way in WAYS {
            b.run(way, WARMUP, false).await?;
        }
        for round in 0..ROUNDS {
            for i in 0..WAYS.len() {
                b.run(WAYS[(round + i) % WAYS.len()], N / ROUNDS, true).await?;
            }
        }
        breakdown(f)?
    };
    let measured_for = measured_at.elapsed();
    let load_after = load_average();
    let stolen = MachineTicks::now().and_then(|after| stolen_percent(ticks_before?, after));
    let pace = pace.since(pace_mark);

    println!("{}", report(&b, component_size, load_time, first_call.memory_high_water, &breakdown, measured_for));
    println!("load average (1 min) before / after measuring: {load_before} / {load_after}");
    let stolen = stolen.map_or_else(|| "?".to_owned(), |percent| format!("{percent:.1} %"));
    println!("CPU time stolen by the hypervisor while measuring: {stolen} of the cores' time");
    if let Some(p) = pace {
        println!(
            "machine pace while measuring: the fixed work took {:.0} µs of CPU (median of {} samples; larger is slower)",
            p.micros(),
            p.samples
        );
    }
    Ok(())
}

/// `RECONCILE_PROFILE=w|w1|a|a1|floor`: that way alone, `10 × N` times after the warm-up, for a
/// profiler (`perf record`) to see one way's work only; prints its p50 and nothing else.
async fn profile(b: &mut Bench<'_>, only: &str) -> anyhow::Result<()> {
    let way = match only {
        "w" => Way::Wasm,
        "w1" => Way::WasmParentOnly,
        "a" => Way::Native,
        "a1" => Way::NativeParentOnly,
        "floor" | "f" => Way::Floor,
        other => bail!("RECONCILE_PROFILE={other}: expected w, w1, a, a1 or floor"),
    };
    let _quiet = StderrToDevNull::new()?;
    b.run(way, WARMUP, false).await?;
    b.run(way, 10 * N, true).await?;
    let samples = match way {
        Way::Wasm => &b.wasm,
        Way::WasmParentOnly => &b.wasm_parent_only,
        Way::Native => &b.native,
        Way::Floor => &b.floor,
        _ => &b.native_parent_only,
    };
    println!("{only}: p50 {:.1} µs over {} iterations", samples.percentile(0.5), samples.0.len());
    Ok(())
}

/// Pieces of (w) timed alone, p50 µs.
struct Breakdown {
    /// The request's objects turned into JSON text with `Value::to_string` (what the host did
    /// first).
    serialize_request: f64,
    /// The same with `serde_json::to_string` (writes bytes directly, not through `fmt::Write`).
    serialize_request_to_string: f64,
    /// The texts the cached objects keep, copied (what the host does for an object whose text
    /// is already serialized).
    copy_cached_texts: f64,
    /// The host parsing and checking the guest's answer (`RawResponse::validate`).
    validate_response: f64,
    /// One `eprintln!` of the plugin's debug line to /dev/null (paid by (a) and (b) only).
    native_log_line: f64,
}

fn breakdown(f: &Fixtures) -> anyhow::Result<Breakdown> {
    let n = N;
    let request = f.host_request();
    // The request's objects as decoded values: what the host serialized per call before its
    // cache kept each object's text.
    let (parent, children, related) = (
        request.parent.to_value(),
        request.children.iter().map(|o| o.to_value()).collect::<Vec<_>>(),
        request.related.iter().map(|o| o.to_value()).collect::<Vec<_>>(),
    );
    let serialize_request = p50_of(n, || {
        let texts = (
            parent.to_string(),
            children.iter().map(Value::to_string).collect::<Vec<_>>(),
            related.iter().map(Value::to_string).collect::<Vec<_>>(),
            request.config.to_string(),
        );
        black_box(&texts);
    });
    let to_json = |v: &Value| serde_json::to_string(v).expect("a Value always serializes");
    let serialize_request_to_string = p50_of(n, || {
        let texts = (
            to_json(&parent),
            children.iter().map(to_json).collect::<Vec<_>>(),
            related.iter().map(to_json).collect::<Vec<_>>(),
            to_json(&request.config),
        );
        black_box(&texts);
    });
    let copy_cached_texts = p50_of(n, || {
        let texts = (
            request.parent.json().to_owned(),
            request.children.iter().map(|o| o.json().to_owned()).collect::<Vec<_>>(),
            request.related.iter().map(|o| o.json().to_owned()).collect::<Vec<_>>(),
            to_json(&request.config),
        );
        black_box(&texts);
    });
    let wire = native_once(f)?;
    let raw = RawResponse {
        children: wire.children,
        status: wire.status,
        conditions: wire
            .conditions
            .iter()
            .map(|c| HostCondition {
                type_: c.type_.clone(),
                status: match c.status.as_str() {
                    "True" => HostConditionStatus::True,
                    "False" => HostConditionStatus::False,
                    _ => HostConditionStatus::Unknown,
                },
                reason: c.reason.clone(),
                message: c.message.clone(),
            })
            .collect(),
        ..RawResponse::default()
    };
    let limits = OutputLimits::default();
    let validate_response = p50_of(n, || {
        black_box(&raw.clone().validate(&limits));
    });
    let name = f.parent["metadata"]["name"].as_str().unwrap_or_default();
    let native_log_line = p50_of(n, || {
        wasmop_sdk::log::debug!("memcached default/{name}: want 3 replicas");
    });
    Ok(Breakdown { serialize_request, serialize_request_to_string, copy_cached_texts, validate_response, native_log_line })
}

/// The 1-minute load average (Linux), to tell a quiet machine from a busy one.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

/// The share of the cores' time from `earlier` to `later` that the hypervisor stole, in percent.
fn stolen_percent(earlier: MachineTicks, later: MachineTicks) -> Option<f64> {
    let total = later.total().checked_sub(earlier.total()).filter(|&t| t > 0)?;
    let steal = later.steal().checked_sub(earlier.steal())?;
    Some(100.0 * steal as f64 / total as f64)
}

fn pass(ok: bool) -> &'static str {
    if ok { "PASS" } else { "MISS" }
}

fn report(
    b: &Bench<'_>,
    component_size: usize,
    load_time: Duration,
    memory_high_water: u64,
    bd: &Breakdown,
    measured_for: Duration,
) -> String {
    let mut out = String::new();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let _ =
        writeln!(out, "\nwasmop reconcile overhead: memcached plugin, {N} iterations per way ({WARMUP} warm-up), {cores} cores");
    let _ = writeln!(
        out,
        "component: {component_size} bytes ({:.1} KiB); load (compile + link + manifest, artifact cache off): {:.1} ms",
        component_size as f64 / 1024.0,
        load_time.as_secs_f64() * 1e3
    );
    let _ = writeln!(
        out,
        "input: parent + 1 Deployment + 3 Pods = {} bytes of JSON (parent alone: {}); guest linear memory per call: {} KiB; measuring took {:.1} s\n",
        b.f.input_bytes(),
        b.parent_only.input_bytes(),
        memory_high_water >> 10,
        measured_for.as_secs_f64()
    );
    let _ = writeln!(out, "{:<52} {:>9} {:>9} {:>9} {:>9} {:>9}", "way", "p50 µs", "p90 µs", "p99 µs", "mean µs", "faults/it");
    let per_iteration = |way: Way| format!("{:.1}", b.faults[way as usize] as f64 / N as f64);
    let rows: [(&str, &Samples, String); 9] = [
        ("(w)  wasm via host: Plugin::reconcile", &b.wasm, per_iteration(Way::Wasm)),
        ("     CallStats.elapsed: store, instance, guest call", &b.wasm_inside, String::new()),
        ("     the rest: request JSON, store drop, validation", &b.wasm_outside, String::new()),
        ("(a)  native via SDK: parse + reconcile + serialize", &b.native, per_iteration(Way::Native)),
        ("(b)  JSON/HTTP hook, loopback, server thread", &b.http, per_iteration(Way::Hook)),
        ("(b0) JSON/HTTP hook, loopback, same thread", &b.http_same_thread, per_iteration(Way::HookSameThread)),
        ("(w1) as (w), parent alone", &b.wasm_parent_only, per_iteration(Way::WasmParentOnly)),
        ("(a1) as (a), parent alone", &b.native_parent_only, per_iteration(Way::NativeParentOnly)),
        ("(f)  floor: an empty guest's call (no SDK)", &b.floor, per_iteration(Way::Floor)),
    ];
    for (name, s, faults) in rows {
        let _ = writeln!(
            out,
            "{name:<52} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {faults:>9}",
            s.percentile(0.5),
            s.percentile(0.9),
            s.percentile(0.99),
            s.mean()
        );
    }
    let _ = writeln!(out, "\nbreakdown (each timed alone, p50 µs):");
    let _ = writeln!(out, "  request objects to JSON text with Value::to_string    {:>7.1}", bd.serialize_request);
    let _ = writeln!(out, "    ... with serde_json::to_string instead of to_string  {:>7.1}", bd.serialize_request_to_string);
    let _ = writeln!(out, "    ... copying the texts the cached objects keep (host) {:>7.1}", bd.copy_cached_texts);
    let _ = writeln!(out, "  host parses + validates the answer (RawResponse)      {:>7.1}", bd.validate_response);
    let _ = writeln!(out, "  native log line (eprintln! to /dev/null; (a),(b) only) {:>6.1}", bd.native_log_line);

    let (w, a, hb, hb0) =
        (b.wasm.percentile(0.5), b.native.percentile(0.5), b.http.percentile(0.5), b.http_same_thread.percentile(0.5));
    let ratio = |x: &Samples, y: &Samples, q: f64| x.percentile(q) / y.percentile(q);
    let _ = writeln!(out, "\nratios            p50     p90     p99");
    for (name, x, y) in [
        ("b / w ", &b.http, &b.wasm),
        ("b0 / w", &b.http_same_thread, &b.wasm),
        ("w / a ", &b.wasm, &b.native),
        ("w1 / a1", &b.wasm_parent_only, &b.native_parent_only),
    ] {
        let _ =
            writeln!(out, "  {name:<7}      {:>6.2}  {:>6.2}  {:>6.2}", ratio(x, y, 0.5), ratio(x, y, 0.9), ratio(x, y, 0.99));
    }
    let _ = writeln!(out, "\ntargets: absolute, against a hook, against native");
    let _ = writeln!(out, "  p50(w) <= 50 µs          {w:>8.1} µs   {}", pass(w <= 50.0));
    let _ = writeln!(out, "  p50(b)/p50(w) >= 20      {:>8.2}      {}   (b0: {:.2})", hb / w, pass(hb / w >= 20.0), hb0 / w);
    let _ = writeln!(out, "  p50(w)/p50(a) <= 3       {:>8.2}      {}", w / a, pass(w / a <= 3.0));
    let (w1, a1) = (b.wasm_parent_only.percentile(0.5), b.native_parent_only.percentile(0.5));
    let floor = b.floor.percentile(0.5);
    let _ = writeln!(out, "\ntargets: against native, fixed cost per call against the floor");
    let _ = writeln!(out, "  p50(w)/p50(a) <= 1.3     {:>8.2}      {}", w / a, pass(w / a <= 1.3));
    let _ = writeln!(
        out,
        "  fixed cost p50(w1)-p50(a1) <= floor p50(f) + 10 µs   {:>6.1} µs, floor {floor:.1} µs: {:+.1} µs over it   {}",
        w1 - a1,
        w1 - a1 - floor,
        pass(w1 - a1 <= floor + 10.0)
    );
    out
}
