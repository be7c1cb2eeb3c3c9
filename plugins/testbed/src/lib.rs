//! A deliberately hostile, configurable plugin for testing the wasmop host. NOT an example.
//!
//! Do not copy anything from here into a real plugin: several modes exist to hang, exhaust
//! memory, trap, or return garbage, and one uses an SDK escape hatch that real plugins never
//! need. It reconciles `Testbed` objects (`test.wasmop.dev/v1`, namespaced), may create
//! ConfigMaps, and reads ConfigMaps labelled `testbed=<parent name>`. What it does is chosen by
//! the parent's `spec.mode`:
//!
//! Every mode is a [`Mode`] (`src/mode.rs`); a test there checks that some test of the host
//! or an end-to-end test uses each.
//!
//! | mode | behaviour |
//! |---|---|
//! | `ok` (default) | apply ConfigMap `<name>-out` with `data: {mode: ok}`, status `{phase: Ready}`, condition `Ready=True` |
//! | `loop` | spin forever (CPU deadline test) |
//! | `spin-half` | spin forever on parents whose name's bytes add up to an odd number (half of `x-0` … `x-9`), else like `ok` (CPU share test) |
//! | `oom` | allocate and touch 1 MiB chunks forever (memory cap test) |
//! | `panic` | `panic!("testbed asked to panic")` (a trap) |
//! | `unreachable` | execute the wasm `unreachable` instruction |
//! | `retryable` / `terminal` | return that error |
//! | `invalid` | a terminal error `spec.size is required` showing status `{phase: Invalid}` and condition `Ready=False InvalidSpec` (retryable with `spec.retry: true`) |
//! | `invalid-shown` | like `invalid`, but its condition's reason is `not camel case`, which the host refuses |
//! | `bad-json` | return a child whose text is not JSON |
//! | `no-kind` | return a child object without `kind` |
//! | `other-namespace` | apply a ConfigMap into `kube-system` |
//! | `undeclared` | apply a Secret (a kind the manifest does not declare) |
//! | `lookup` | list related ConfigMaps (allowed) and report their names in status |
//! | `read-secret` | `get` Secret `spec.name` (default `anything`): refused unless declared (the `declares-secrets` build) and granted, which fails the call |
//! | `read-namespace` | list ConfigMaps in namespace `spec.namespace` (default `kube-system`): refused unless granted |
//! | `read-parents` | list the other `Testbed` objects of its namespace: only the parent itself is visible |
//! | `log` | log at every level, print to stdout and stderr, then like `ok` |
//! | `big` | return `spec.count` ConfigMaps (default 100000) |
//! | `huge` | return one ConfigMap holding `spec.bytes` bytes of data (default 100000000) |
//! | `sleep-ms` | busy-wait `spec.millis` ms (default 100) on the monotonic clock, then like `ok` |
//! | `rename-out` | apply ConfigMap `<name>-renamed` instead of `<name>-out` (prune test: `<name>-out` is no longer returned) |
//! | `escape` | try to read file `spec.read` and write file `spec.write`, list directories, read the environment and arguments, connect to `127.0.0.1:spec.port` and bind sockets; report each attempt in `status.escape` (`{ok, detail}`) |
//! | `hot-loop` | like `ok`, but `<name>-out` gets `data.tick`, the wall clock in ns: a child that changes on every call, so every reconcile writes and re-queues its parent (circuit breaker test). Fixed in the `test-v2` build: `tick` is `fixed` |
//! | `log-flood` | log `spec.lines` lines (default 10000) of `spec.width` bytes (default 4000) through the `log` import, then as many to stdout and to stderr, then like `ok` |
//! | `log-forge` | log, print and eprint messages with embedded newlines, carriage returns and terminal escapes that imitate host log lines, then like `ok` |
//! | `long-field` | like `ok`, plus `spec.bytes` bytes (default 40000) in the field `spec.field`: `condition-message`, `event-note`, `delete-name`, `label-value` or `error` (a terminal error message full of newlines) |
//! | `deployment` | apply Deployment `<name>-web` without `spec.replicas`, leaving it to another field manager (an HPA), annotated `testbed.wasmop.dev/touch: <spec.touch>`; needs the `declares-deployments` build |
//! | `take` | apply ConfigMap `spec.target` (default `<name>-out`) with `data: {takenBy: <name>}` and the `ownerReferences` in `spec.ownerReferences`, if any (ownership tests) |
//! | `delete` | delete ConfigMap `spec.target` (ownership tests) |
//! | `cluster-role` | like `ok`, plus ClusterRole `testbed-<namespace>-<name>` (cluster-scoped; declared only by the `declares-cluster-role` build) |
//! | `cluster-role-in-namespace` | apply that ClusterRole with `metadata.namespace` set to the parent's (refused: the kind is cluster-scoped) |
//! | `recurse` | recurse `spec.depth` levels (default: without end), each holding 1 KiB of guest stack (stack-overflow test), then like `ok` |
//!
//! In the `admission` build the manifest declares one webhook per admission mode, each on
//! ConfigMap CREATE and UPDATE for ConfigMaps labelled `testbed-admission=<mode>` (so the
//! apiserver calls each only for the ConfigMaps a test labels for it); what the webhook does is
//! chosen by its name:
//!
//! | webhook | behaviour |
//! |---|---|
//! | `allow` (validating) | allow, with the warning `testbed allows` |
//! | `deny` (validating) | deny with code 403 and `testbed denies <name>` |
//! | `label` (mutating) | add the label `testbed-admitted: "yes"` |
//! | `loop` (validating) | spin forever (deadline) |
//! | `oom` (validating) | allocate without bound (memory cap) |
//! | `trap` (validating) | execute `unreachable` |
//! | `rename` (mutating) | answer the object renamed to `<name>-renamed` (nonsense the host refuses) |
//! | `lookup` (validating) | list the `Testbed` objects of the object's namespace and allow with one warning naming them |
//! | `secrets` (validating; `admits-secrets` build) | on *Secrets* labelled `testbed-admission=secrets`, which it does not declare: deny with `testbed saw secret <name>: <data keys>`, showing what it saw (hostile) |
//!
//! The capability attacks (builds `cluster-parent`, `twin`, `hostile-webhooks`,
//! `forges-reports`, and their modes) are listed in `capability.rs`. The builds attacking the
//! host's own surface and bounds (webhooks on Leases, mutations of ownership, configuration
//! schemas that cost more than they look) are listed in [`hostile_surface`]; the build attacking
//! the next variants of the host's classes (Endpoints, `externalIPs`, unconfining mutations) in
//! `edges.rs`.
//!
//! In the `finalizer` build the manifest asks for a finalizer, and a finalizing call (whatever
//! the mode) answers `finalized` with a Normal event `Finalized`.
//!
//! An unknown mode is a terminal error.

use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use wasmop_sdk::prelude::*;

mod admission;
pub mod hostile_surface;
pub use admission::{ADMISSION_LABEL, admission_webhooks};
mod capability;
mod edges;
mod mode;
pub use capability::cluster_testbed_kind;
pub use mode::{Mode, UnknownMode};

/// The plugin version (0.2.0 in the `test-v2` build used by the circuit breaker tests).
pub const VERSION: &str = if cfg!(feature = "test-v2") { "0.2.0" } else { "0.1.0" };

/// The `Testbed` kind.
pub fn testbed_kind() -> Kind {
    Kind::new("test.wasmop.dev", "v1", "Testbed")
}

fn config_map_kind() -> Kind {
    Kind::new("", "v1", "ConfigMap")
}

/// The plugin.
#[derive(Debug)]
pub struct Testbed;

impl Plugin for Testbed {
    fn manifest() -> Manifest {
        let manifest = Manifest::new("testbed", VERSION)
            .description("Hostile test plugin for the wasmop host (not an example)")
            .parent(testbed_kind(), Scope::Namespaced)
            .child(config_map_kind());
        let manifest = if cfg!(feature = "declares-deployments") { manifest.child(deployment_kind()) } else { manifest };
        let manifest =
            manifest.related(config_map_kind(), "testbed=$(parent.name)").prune(true).finalizer(cfg!(feature = "finalizer"));
        let manifest = if cfg!(feature = "declares-secrets") {
            manifest.related(Kind::new("", "v1", "Secret"), "testbed=$(parent.name)")
        } else {
            manifest
        };
        let manifest = if cfg!(feature = "declares-cluster-role") { manifest.child(cluster_role_kind()) } else { manifest };
        let manifest = if cfg!(feature = "declares-resource-claims") {
            manifest.related(Kind::new("resource.k8s.io", "v1", "ResourceClaim"), "testbed=$(parent.name)")
        } else {
            manifest
        };
        let manifest =
            if cfg!(feature = "vetoes-leases") { manifest.related(hostile_surface::lease_kind(), "") } else { manifest };
        let manifest = hostile_surface::hostile_webhooks().into_iter().fold(manifest, Manifest::webhook);
        let manifest = match hostile_surface::config_schema() {
            Some(schema) => manifest.config_schema(schema),
            None => manifest,
        };
        let manifest = if cfg!(feature = "admission") {
            admission_webhooks().into_iter().fold(manifest, Manifest::webhook)
        } else {
            manifest
        };
        edges::extend(capability::extend(manifest))
    }

    fn admit(webhook: &str, req: AdmissionRequest, ctx: &Context) -> Result<Verdict, Error> {
        // Both hostile sets name a Lease veto `veto-leases`: the build says whose it is.
        if cfg!(any(feature = "vetoes-leases", feature = "mutates-ownership"))
            && let Some(verdict) = hostile_surface::admit(webhook, &req)
        {
            return verdict;
        }
        if let Some(verdict) = capability::admit(webhook, &req).or_else(|| edges::admit(webhook, &req)) {
            return Ok(verdict);
        }
        admission::admit(webhook, req, ctx)
    }

    fn reconcile(req: Request, ctx: &Context) -> Result<Response, Error> {
        let spec = &req.parent["spec"];
        let name = req.name();
        if req.finalizing {
            return Ok(finalized(name));
        }
        let mode: Mode = capability::mode(spec).parse().map_err(|e: UnknownMode| Error::terminal(e.to_string()))?;
        match mode {
            Mode::Ok => Ok(ok(name)),
            Mode::Loop => spin_forever(),
            Mode::SpinHalf if spins_on(name) => spin_forever(),
            Mode::SpinHalf => Ok(ok(name)),
            Mode::Oom => exhaust_memory(),
            Mode::Panic => panic!("testbed asked to panic"),
            Mode::Unreachable => trap(),
            Mode::Retryable => Err(Error::retryable("testbed asked for a retryable error")),
            Mode::Terminal => Err(Error::terminal("testbed asked for a terminal error")),
            Mode::Invalid => Err(invalid(spec["retry"].as_bool().unwrap_or(false), "InvalidSpec")),
            Mode::InvalidShown => Err(invalid(false, "not camel case")),
            Mode::BadJson => Ok(Response::new().apply_raw_json("{\"apiVersion\": \"v1\", \"kind\": ")),
            Mode::NoKind => Ok(Response::new()
                .apply_raw_json(json!({"apiVersion": "v1", "metadata": {"name": format!("{name}-no-kind")}}).to_string())),
            Mode::OtherNamespace => Ok(Response::new().apply(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("{name}-escaped"), "namespace": "kube-system"},
                "data": {"mode": mode.name()},
            }))),
            Mode::Undeclared => Ok(Response::new().apply(json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": format!("{name}-secret")},
                "stringData": {"mode": mode.name()},
            }))),
            Mode::Lookup => Ok(lookup(name, ctx)),
            Mode::ReadSecret => {
                let secret = spec["name"].as_str().unwrap_or("anything").to_owned();
                Ok(probe(ctx, |ctx| ctx.get(&Kind::new("", "v1", "Secret"), None, &secret).map(|o| o.into_iter().collect())))
            }
            Mode::ReadNamespace => {
                let ns = spec["namespace"].as_str().unwrap_or("kube-system").to_owned();
                Ok(probe(ctx, |ctx| ctx.list(&config_map_kind(), Some(&ns), "")))
            }
            Mode::ReadParents => Ok(probe(ctx, |ctx| ctx.list(&testbed_kind(), None, ""))),
            Mode::Log => {
                log::trace!("testbed {name}: trace");
                log::debug!("testbed {name}: debug");
                log::info!("testbed {name}: info");
                log::warn!("testbed {name}: warn");
                log::error!("testbed {name}: error");
                println!("testbed {name}: stdout");
                eprintln!("testbed {name}: stderr");
                Ok(ok(name))
            }
            Mode::Big => Ok(big(name, spec["count"].as_u64().unwrap_or(100_000))),
            Mode::Huge => Ok(huge(name, spec["bytes"].as_u64().unwrap_or(100_000_000))),
            Mode::Dense => Ok(hostile_surface::dense(name, spec["bytes"].as_u64().unwrap_or(15_000_000))),
            Mode::SleepMs => {
                busy_wait(Duration::from_millis(spec["millis"].as_u64().unwrap_or(100)));
                Ok(ok(name))
            }
            Mode::HotLoop => Ok(hot_loop(name)),
            Mode::LogFlood => {
                log_flood(name, spec["lines"].as_u64().unwrap_or(10_000), spec["width"].as_u64().unwrap_or(4000));
                Ok(ok(name))
            }
            Mode::LogForge => {
                log_forge();
                Ok(ok(name))
            }
            Mode::LongField => {
                long_field(name, spec["field"].as_str().unwrap_or_default(), spec["bytes"].as_u64().unwrap_or(40_000))
            }
            Mode::Deployment => Ok(deployment_without_replicas(name, spec["touch"].as_str().unwrap_or_default())),
            Mode::Take => Ok(take(name, spec)),
            Mode::Delete => Ok(Response::new().delete(ObjectRef::namespaced(
                &config_map_kind(),
                req.namespace().unwrap_or("default"),
                spec["target"].as_str().unwrap_or_default(),
            ))),
            Mode::ClusterRole => Ok(ok(name).apply(cluster_role(&req, false))),
            Mode::ClusterRoleInNamespace => Ok(Response::new().apply(cluster_role(&req, true))),
            Mode::RenameOut => Ok(renamed(name)),
            Mode::Escape => Ok(escape(
                spec["read"].as_str().unwrap_or("/etc/hostname"),
                spec["write"].as_str().unwrap_or("/tmp/wasmop-testbed-escape"),
                spec["port"].as_u64().unwrap_or(1),
            )),
            Mode::Recurse => {
                black_box(recurse(spec["depth"].as_u64().unwrap_or(u64::MAX)));
                Ok(ok(name))
            }
            Mode::Idle | Mode::KubeSystemDeployment | Mode::BindAuthenticated | Mode::TakeLease | Mode::Adopt | Mode::Forge => {
                Ok(capability::reconcile(mode, &req))
            }
            Mode::EndpointsToApiserver | Mode::ExternalIps => Ok(edges::reconcile(mode, &req)),
        }
    }
}

/// The well-behaved answer.
fn ok(name: &str) -> Response {
    Response::new()
        .apply(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{name}-out")},
            "data": {"mode": "ok"},
        }))
        .status(json!({"phase": "Ready"}))
        .condition(Condition::true_("Ready", "Reconciled", "testbed is ok"))
}

/// The failure of mode `invalid`: the parent shows `phase: Invalid` and `Ready=False` with
/// `reason`.
fn invalid(retry: bool, reason: &str) -> Error {
    let message = "spec.size is required";
    let error = if retry { Error::retryable(message) } else { Error::terminal(message) };
    error.with_status(json!({"phase": "Invalid"})).with_condition(Condition::false_("Ready", reason, message))
}

/// Like [`ok`], with a `tick` that changes on every call (or `fixed` in the `test-v2` build).
fn hot_loop(name: &str) -> Response {
    let tick = if cfg!(feature = "test-v2") {
        "fixed".to_owned()
    } else {
        SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos().to_string()
    };
    Response::new()
        .apply(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{name}-out")},
            "data": {"mode": "hot-loop", "tick": tick},
        }))
        .status(json!({"phase": "Ready"}))
        .condition(Condition::true_("Ready", "Reconciled", "testbed is looping"))
}

/// Whether mode `spin-half` spins on the parent `name`: its bytes add up to an odd number.
pub fn spins_on(name: &str) -> bool {
    name.bytes().map(u32::from).sum::<u32>() % 2 == 1
}

pub(crate) fn spin_forever() -> ! {
    let mut counter = 0_u64;
    loop {
        counter = black_box(counter.wrapping_add(1));
    }
}

pub(crate) fn exhaust_memory() -> ! {
    const MIB: usize = 1 << 20;
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut chunk = vec![0_u8; MIB];
        for byte in chunk.iter_mut().step_by(4096) {
            *byte = 1;
        }
        chunks.push(black_box(chunk));
        black_box(&chunks);
    }
}

pub(crate) fn trap() -> ! {
    #[cfg(target_arch = "wasm32")]
    core::arch::wasm32::unreachable();
    #[cfg(not(target_arch = "wasm32"))]
    unreachable!("testbed asked for a trap");
}

fn lookup(name: &str, ctx: &Context) -> Response {
    let (config_maps, list_error) = match ctx.list(&config_map_kind(), None, &format!("testbed={name}")) {
        Ok(found) => (names(&found), None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    Response::new()
        .status(json!({"phase": "Ready", "lookup": {"configMaps": config_maps, "listError": list_error}}))
        .condition(Condition::true_("Ready", "LookedUp", "lookups done"))
}

/// Try a read the host may refuse; report what happened in status (if the host lets the
/// response through at all: a refused read fails the whole call).
fn probe(ctx: &Context, read: impl FnOnce(&Context) -> Result<Vec<Value>, LookupError>) -> Response {
    let (found, error) = match read(ctx) {
        Ok(found) => (names(&found), None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    Response::new().status(json!({"phase": "Ready", "probe": {"found": found, "error": error}})).condition(Condition::true_(
        "Ready",
        "Probed",
        "read attempted",
    ))
}

fn names(objects: &[Value]) -> Vec<Value> {
    objects.iter().filter_map(|o| o.pointer("/metadata/name").cloned()).collect()
}

/// `count` ConfigMaps, built as text: the point is the size of the answer, and `Value`s would
/// cost several times the memory.
fn big(name: &str, count: u64) -> Response {
    (0..count).fold(Response::new(), |resp, i| {
        resp.apply_raw_json(format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}-big-{i}"}},"data":{{"i":"{i}"}}}}"#
        ))
    })
}

/// One child of about `bytes` bytes, built in place (no serde `Value`, no doubling growth).
fn huge(name: &str, bytes: u64) -> Response {
    Response::new().apply_raw_json(huge_child(name, usize::try_from(bytes).unwrap_or(usize::MAX)))
}

fn huge_child(name: &str, bytes: usize) -> String {
    let mut text = String::with_capacity(bytes.saturating_add(200));
    text.push_str(&format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}-huge"}},"data":{{"blob":""#));
    text.extend(std::iter::repeat_n('x', bytes));
    text.push_str(r#""}}"#);
    text
}

fn busy_wait(duration: Duration) {
    let start = Instant::now();
    while start.elapsed() < duration {
        black_box(());
    }
}

/// A line imitating one of the host's own log lines (text format).
const FORGED: &str = "2026-11-30T09:00:00.000000Z  INFO wasmop::controller: forged host line plugin=\"other\"";

fn log_flood(name: &str, lines: u64, width: u64) {
    let line = format!("testbed {name}: {}", "f".repeat(usize::try_from(width).unwrap_or(0)));
    for _ in 0..lines {
        log::info!("{line}");
    }
    for _ in 0..lines {
        println!("{line}");
    }
    for _ in 0..lines {
        eprintln!("{line}");
    }
}

fn log_forge() {
    log::warn!("innocent\n{FORGED}");
    log::info!("erase\r\u{1b}[2K{FORGED}\u{85}{FORGED}");
    println!("stdout\r{FORGED}\u{1b}[31m");
    eprintln!("stderr \u{2028}{FORGED}");
}

/// `ok`, with one field `bytes` long, or a terminal error of that size.
fn long_field(name: &str, field: &str, bytes: u64) -> Result<Response, Error> {
    let text = "x".repeat(usize::try_from(bytes).unwrap_or(0));
    let response = ok(name);
    Ok(match field {
        "condition-message" => response.condition(Condition::true_("Ready", "Reconciled", text)),
        "event-note" => response.event(Event::normal("Reconciled", "Reconcile", text)),
        "delete-name" => response.delete(ObjectRef::namespaced(&config_map_kind(), "default", text)),
        "label-value" => response.apply(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{name}-labelled"), "labels": {"testbed": text}},
        })),
        "error" => return Err(Error::terminal(format!("line\n{FORGED}\n").repeat(text.len() / 100 + 1))),
        other => return Err(Error::terminal(format!("unknown spec.field {other:?}"))),
    })
}

/// The `Deployment` kind (a child only in the `declares-deployments` build).
fn deployment_kind() -> Kind {
    Kind::new("apps", "v1", "Deployment")
}

/// Deployment `<name>-web` with no `spec.replicas`: the plugin leaves that field to whoever
/// else manages it (the API server defaults it to 1 on creation). Annotation
/// `testbed.wasmop.dev/touch` is `touch`, so changing it makes the host apply again.
fn deployment_without_replicas(name: &str, touch: &str) -> Response {
    let app = format!("{name}-web");
    Response::new()
        .apply(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": app, "labels": {"app": app}, "annotations": {"testbed.wasmop.dev/touch": touch}},
            "spec": {
                "selector": {"matchLabels": {"app": app}},
                "template": {
                    "metadata": {"labels": {"app": app}},
                    "spec": {"containers": [{"name": "web", "image": "registry.invalid/web:1"}]},
                },
            },
        }))
        .status(json!({"phase": "Ready"}))
        .condition(Condition::true_("Ready", "Reconciled", "deployment applied"))
}

/// ConfigMap `spec.target` (default `<name>-out`), with the plugin's own `ownerReferences`
/// from `spec.ownerReferences` when given (which the host must replace).
fn take(name: &str, spec: &Value) -> Response {
    let target = spec["target"].as_str().map_or_else(|| format!("{name}-out"), str::to_owned);
    let mut metadata = json!({"name": target});
    if let Some(refs) = spec.get("ownerReferences") {
        metadata["ownerReferences"] = refs.clone();
    }
    Response::new().apply(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"takenBy": name},
    }))
}

/// The `ClusterRole` kind (cluster-scoped).
pub fn cluster_role_kind() -> Kind {
    Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole")
}

/// ClusterRole `testbed-<namespace>-<name>` granting `get` of ConfigMaps; with
/// `with_namespace`, it (wrongly) carries the parent's namespace.
fn cluster_role(req: &Request, with_namespace: bool) -> Value {
    let namespace = req.parent.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
    let mut metadata = json!({"name": format!("testbed-{namespace}-{}", req.name())});
    if with_namespace {
        metadata["namespace"] = namespace.into();
    }
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": metadata,
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
    })
}

/// The answer to a finalizing call: cleanup done, and an event saying so.
fn finalized(name: &str) -> Response {
    Response::new().event(Event::normal("Finalized", "Finalize", format!("testbed {name} cleaned up"))).finalized()
}

/// Like [`ok`], with the child named `<name>-renamed`.
fn renamed(name: &str) -> Response {
    Response::new()
        .apply(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{name}-renamed")},
            "data": {"mode": "rename-out"},
        }))
        .status(json!({"phase": "Ready"}))
}

/// Every way out of the sandbox a std program has: each attempt as `{ok, detail}`.
fn escape(read: &str, write: &str, port: u64) -> Response {
    fn attempt<T: std::fmt::Debug, E: std::fmt::Display>(result: Result<T, E>) -> Value {
        match result {
            Ok(v) => json!({"ok": true, "detail": format!("{v:?}")}),
            Err(e) => json!({"ok": false, "detail": e.to_string()}),
        }
    }
    let port = u16::try_from(port).unwrap_or(1);
    let env: Vec<String> = std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
    let args: Vec<String> = std::env::args().collect();
    let escape = json!({
        "readFile": attempt(std::fs::read_to_string(read)),
        "writeFile": attempt(std::fs::write(write, b"escaped")),
        "listRoot": attempt(std::fs::read_dir("/").map(|d| d.count())),
        "listCwd": attempt(std::fs::read_dir(".").map(|d| d.count())),
        "env": env,
        "home": attempt(std::env::var("HOME")),
        "args": args,
        "connect": attempt(std::net::TcpStream::connect(("127.0.0.1", port))),
        "listen": attempt(std::net::TcpListener::bind("127.0.0.1:0")),
        "udp": attempt(std::net::UdpSocket::bind("127.0.0.1:0")),
        "resolve": attempt(std::net::ToSocketAddrs::to_socket_addrs(&("localhost", port)).map(|a| a.count())),
    });
    Response::new().status(json!({"phase": "Ready", "escape": escape}))
}

/// Recurse `depth` levels, each holding 1 KiB on the guest's own stack in linear memory (not
/// in wasm locals): a large `depth` overflows the stack the plugin was linked with.
fn recurse(depth: u64) -> u64 {
    let mut frame = [0_u8; 1024];
    frame[0] = depth.to_le_bytes()[0];
    let frame = black_box(&mut frame);
    if depth == 0 {
        return u64::from(frame[0]);
    }
    recurse(depth - 1) + u64::from(frame[1023])
}

wasmop_sdk::export_plugin!(Testbed);

#[cfg(test)]
mod tests {
    use super::*;

    fn request(spec: Value) -> Request {
        Request::new(json!({
            "apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
            "metadata": {"name": "tb", "namespace": "default"},
            "spec": spec,
        }))
    }

    fn reconcile(spec: Value) -> Result<Response, Error> {
        Testbed::reconcile(request(spec), &Context::fixture(vec![]))
    }

    #[test]
    fn ok_is_the_default_and_applies_one_config_map() {
        for spec in [json!({}), json!({"mode": "ok"})] {
            let resp = reconcile(spec).unwrap();
            assert_eq!(resp.children().len(), 1);
            let cm = resp.child(&config_map_kind(), "tb-out").unwrap();
            assert_eq!(cm["data"], json!({"mode": "ok"}));
            assert_eq!(resp.status_patch(), Some(&json!({"phase": "Ready"})));
            assert_eq!(resp.condition_of("Ready").unwrap().status, ConditionStatus::True);
        }
    }

    #[test]
    fn spin_half_spins_on_half_of_ten_numbered_names_and_answers_ok_on_the_others() {
        let spinning: Vec<String> = (0..10).map(|i| format!("x-{i}")).filter(|n| spins_on(n)).collect();
        assert_eq!(spinning, ["x-0", "x-2", "x-4", "x-6", "x-8"]);
        // "tb" adds up to 214: even, so it is answered (a spinning name would never return).
        let resp = reconcile(json!({"mode": "spin-half"})).unwrap();
        assert!(resp.child(&config_map_kind(), "tb-out").is_some());
    }

    #[test]
    fn error_modes_return_their_error_kind() {
        assert!(reconcile(json!({"mode": "retryable"})).unwrap_err().is_retryable());
        assert!(!reconcile(json!({"mode": "terminal"})).unwrap_err().is_retryable());
        let e = reconcile(json!({"mode": "nonsense"})).unwrap_err();
        assert_eq!(e, Error::terminal("unknown spec.mode \"nonsense\""));
    }

    #[test]
    fn no_kind_and_bad_json_bypass_the_sdk_checks() {
        for mode in ["no-kind", "bad-json"] {
            let resp = reconcile(json!({"mode": mode})).unwrap();
            assert!(resp.error().is_none(), "{mode}");
            assert!(resp.children().is_empty(), "{mode}: the raw child is not a checked child");
        }
    }

    #[test]
    fn other_namespace_targets_kube_system() {
        let resp = reconcile(json!({"mode": "other-namespace"})).unwrap();
        assert_eq!(resp.children()[0]["metadata"]["namespace"], "kube-system");
    }

    #[test]
    fn undeclared_applies_a_secret() {
        let resp = reconcile(json!({"mode": "undeclared"})).unwrap();
        assert_eq!(resp.children()[0]["kind"], "Secret");
    }

    #[test]
    fn lookup_reports_related_names() {
        let cm = |n: &str, owner: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": n, "namespace": "default", "labels": {"testbed": owner}}})
        };
        let ctx = Context::fixture(vec![cm("b", "tb"), cm("a", "tb"), cm("c", "other")]).restrict_to(&Testbed::manifest());
        let resp = Testbed::reconcile(request(json!({"mode": "lookup"})), &ctx).unwrap();
        let lookup = &resp.status_patch().unwrap()["lookup"];
        assert_eq!(lookup["configMaps"], json!(["a", "b"]));
        assert_eq!(lookup["listError"], Value::Null);
    }

    #[cfg(not(feature = "declares-secrets"))]
    #[test]
    fn read_secret_reports_the_refusal_it_gets() {
        let ctx = Context::fixture(vec![]).restrict_to(&Testbed::manifest());
        let resp = Testbed::reconcile(request(json!({"mode": "read-secret"})), &ctx).unwrap();
        assert_eq!(resp.status_patch().unwrap()["probe"]["error"], "kind not declared in the manifest: v1/Secret");
    }

    #[test]
    fn read_namespace_and_read_parents_report_what_they_found() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "kube-system"}});
        let ctx = Context::fixture(vec![cm]);
        let resp = Testbed::reconcile(request(json!({"mode": "read-namespace"})), &ctx).unwrap();
        assert_eq!(resp.status_patch().unwrap()["probe"]["found"], json!(["x"]));
        let resp = Testbed::reconcile(request(json!({"mode": "read-parents"})), &ctx).unwrap();
        assert_eq!(resp.status_patch().unwrap()["probe"]["found"], json!([]));
    }

    #[test]
    fn huge_returns_one_child_of_the_asked_size() {
        let child: Value = serde_json::from_str(&huge_child("tb", 1000)).unwrap();
        assert_eq!(child["data"]["blob"].as_str().unwrap().len(), 1000);
        assert_eq!(child["metadata"]["name"], "tb-huge");
        assert!(reconcile(json!({"mode": "huge", "bytes": 10})).is_ok());
    }

    #[test]
    fn log_mode_behaves_like_ok() {
        assert_eq!(reconcile(json!({"mode": "log"})).unwrap(), reconcile(json!({})).unwrap());
    }

    #[test]
    #[cfg(not(feature = "test-v2"))]
    fn hot_loop_ticks_differ_between_calls() {
        let tick = |resp: &Response| resp.child(&config_map_kind(), "tb-out").unwrap()["data"]["tick"].clone();
        let first = tick(&reconcile(json!({"mode": "hot-loop"})).unwrap());
        // Wait until the wall clock has moved past the first tick, however coarse it is.
        let first_ns: u128 = first.as_str().unwrap().parse().unwrap();
        while SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_nanos() <= first_ns {
            std::hint::spin_loop();
        }
        let second = reconcile(json!({"mode": "hot-loop"})).unwrap();
        assert_ne!(tick(&second), first);
        assert_eq!(second.status_patch(), Some(&json!({"phase": "Ready"})));
    }

    #[test]
    #[cfg(feature = "test-v2")]
    fn hot_loop_is_fixed_in_the_v2_build() {
        let tick = |resp: &Response| resp.child(&config_map_kind(), "tb-out").unwrap()["data"]["tick"].clone();
        assert_eq!(tick(&reconcile(json!({"mode": "hot-loop"})).unwrap()), "fixed");
        assert_eq!(Testbed::manifest().version, "0.2.0");
    }

    #[test]
    fn invalid_fails_showing_a_phase_and_a_ready_condition() {
        let e = reconcile(json!({"mode": "invalid"})).unwrap_err();
        assert!(!e.is_retryable());
        assert_eq!(e.message(), "spec.size is required");
        assert_eq!(e.status_patch(), Some(&json!({"phase": "Invalid"})));
        assert_eq!(e.condition_of("Ready").unwrap().reason, "InvalidSpec");
        assert!(reconcile(json!({"mode": "invalid", "retry": true})).unwrap_err().is_retryable());
        assert_eq!(
            reconcile(json!({"mode": "invalid-shown"})).unwrap_err().condition_of("Ready").unwrap().reason,
            "not camel case"
        );
    }

    #[test]
    fn sleep_ms_waits_then_behaves_like_ok() {
        let start = Instant::now();
        let resp = reconcile(json!({"mode": "sleep-ms", "millis": 20})).unwrap();
        assert!(start.elapsed() >= Duration::from_millis(20));
        assert_eq!(resp, reconcile(json!({})).unwrap());
    }

    #[test]
    fn long_field_puts_the_bytes_where_asked() {
        let resp = reconcile(json!({"mode": "long-field", "field": "condition-message", "bytes": 100})).unwrap();
        assert_eq!(resp.condition_of("Ready").unwrap().message.len(), 100);
        let resp = reconcile(json!({"mode": "long-field", "field": "delete-name", "bytes": 10})).unwrap();
        assert_eq!(resp.deletions()[0].name.len(), 10);
        let resp = reconcile(json!({"mode": "long-field", "field": "event-note", "bytes": 7})).unwrap();
        assert_eq!(resp.events()[0].note.len(), 7);
        let resp = reconcile(json!({"mode": "long-field", "field": "label-value", "bytes": 70})).unwrap();
        assert_eq!(resp.children()[1]["metadata"]["labels"]["testbed"].as_str().unwrap().len(), 70);
        assert!(reconcile(json!({"mode": "long-field", "field": "error"})).unwrap_err().message().contains('\n'));
        assert!(reconcile(json!({"mode": "long-field", "field": "nope"})).is_err());
    }

    #[test]
    fn log_modes_behave_like_ok() {
        assert_eq!(reconcile(json!({"mode": "log-forge"})).unwrap(), reconcile(json!({})).unwrap());
        assert_eq!(reconcile(json!({"mode": "log-flood", "lines": 2, "width": 3})).unwrap(), reconcile(json!({})).unwrap());
    }

    #[test]
    fn a_finalizing_call_answers_finalized_with_an_event() {
        let resp = Testbed::reconcile(request(json!({"mode": "terminal"})).finalizing(true), &Context::fixture(vec![])).unwrap();
        assert!(resp.is_finalized());
        assert_eq!(resp.events()[0].reason, "Finalized");
        assert_eq!(Testbed::manifest().finalizer, cfg!(feature = "finalizer"));
    }

    #[test]
    fn rename_out_returns_only_the_renamed_child() {
        let resp = reconcile(json!({"mode": "rename-out"})).unwrap();
        assert_eq!(resp.children().len(), 1);
        assert!(resp.child(&config_map_kind(), "tb-renamed").is_some());
    }

    #[test]
    fn escape_reports_every_attempt() {
        let dir = std::env::temp_dir().join(format!("testbed-escape-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (read, write) = (dir.join("in"), dir.join("out"));
        std::fs::write(&read, "natively readable").unwrap();
        let spec = json!({"mode": "escape", "port": 9, "read": read, "write": write});
        let resp = reconcile(spec).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let escape = &resp.status_patch().unwrap()["escape"];
        for key in ["readFile", "writeFile", "listRoot", "listCwd", "home", "connect", "listen", "udp", "resolve"] {
            assert!(escape[key]["ok"].is_boolean(), "{key}: {escape}");
        }
        assert!(escape["env"].is_array() && escape["args"].is_array());
        assert_eq!(escape["readFile"]["detail"], "\"natively readable\"", "natively nothing is denied");
    }

    #[test]
    #[should_panic(expected = "testbed asked to panic")]
    fn panic_mode_panics() {
        let _ = reconcile(json!({"mode": "panic"}));
    }

    #[cfg(not(any(feature = "declares-secrets", feature = "declares-deployments", feature = "declares-cluster-role")))]
    #[test]
    fn manifest_declares_config_maps_only() {
        let m = Testbed::manifest();
        assert_eq!(m.children, [config_map_kind()]);
        assert_eq!(m.related[0].label_selector, "testbed=$(parent.name)");
        assert!(!m.declares(&Kind::new("", "v1", "Secret")));
    }

    #[cfg(feature = "declares-secrets")]
    #[test]
    fn the_declares_secrets_build_reads_only_its_labelled_secrets() {
        assert!(Testbed::manifest().declares(&Kind::new("", "v1", "Secret")));
        let secret = |n: &str, owner: &str| {
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": n, "namespace": "default", "labels": {"testbed": owner}}})
        };
        let ctx = Context::fixture(vec![secret("mine", "tb")]).restrict_to(&Testbed::manifest());
        let resp = Testbed::reconcile(request(json!({"mode": "read-secret", "name": "mine"})), &ctx).unwrap();
        assert_eq!(resp.status_patch().unwrap()["probe"]["found"], json!(["mine"]));
    }

    #[test]
    fn deployment_mode_leaves_replicas_to_others() {
        let resp = reconcile(json!({"mode": "deployment", "touch": "1"})).unwrap();
        let d = resp.child(&deployment_kind(), "tb-web").unwrap();
        assert!(d["spec"].get("replicas").is_none());
        assert_eq!(d["metadata"]["annotations"]["testbed.wasmop.dev/touch"], "1");
        assert_eq!(d["spec"]["selector"]["matchLabels"]["app"], "tb-web");
    }

    #[test]
    fn take_mode_writes_the_owner_references_it_is_given() {
        let refs = json!([{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "u", "controller": true}]);
        let resp = reconcile(json!({"mode": "take", "target": "victim", "ownerReferences": refs})).unwrap();
        let cm = resp.child(&config_map_kind(), "victim").unwrap();
        assert_eq!((&cm["metadata"]["ownerReferences"], &cm["data"]["takenBy"]), (&refs, &json!("tb")));
        assert!(reconcile(json!({"mode": "take"})).unwrap().child(&config_map_kind(), "tb-out").is_some());
    }

    #[test]
    fn delete_mode_deletes_the_target() {
        let resp = reconcile(json!({"mode": "delete", "target": "victim"})).unwrap();
        assert_eq!(resp.deletions(), [ObjectRef::namespaced(&config_map_kind(), "default", "victim")]);
    }

    #[cfg(feature = "declares-deployments")]
    #[test]
    fn the_declares_deployments_build_writes_deployments_too() {
        assert!(Testbed::manifest().declares(&deployment_kind()));
    }

    #[test]
    fn cluster_role_modes_apply_one_cluster_role_named_for_the_parent() {
        let resp = reconcile(json!({"mode": "cluster-role"})).unwrap();
        let role = resp.child(&cluster_role_kind(), "testbed-default-tb").unwrap();
        assert!(role["metadata"].get("namespace").is_none());
        assert!(resp.child(&config_map_kind(), "tb-out").is_some());
        let resp = reconcile(json!({"mode": "cluster-role-in-namespace"})).unwrap();
        assert_eq!(resp.children()[0]["metadata"]["namespace"], "default");
    }

    #[test]
    fn only_the_declares_cluster_role_build_declares_cluster_roles() {
        assert_eq!(Testbed::manifest().declares(&cluster_role_kind()), cfg!(feature = "declares-cluster-role"));
    }

    #[test]
    fn recurse_mode_returns_ok_when_the_stack_holds_it() {
        assert!(reconcile(json!({"mode": "recurse", "depth": 16})).unwrap().child(&config_map_kind(), "tb-out").is_some());
    }
}
