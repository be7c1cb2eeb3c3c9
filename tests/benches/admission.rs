//! Latency admission adds to a create, seen from a client, on a real control plane: the
//! SidecarSet validation of `plugins/sidecarset` as a WebAssembly plugin behind the host, as
//! native Rust behind the same server stack, and as a ValidatingAdmissionPolicy (CEL, in the API
//! server itself); and the plugin's Pod webhook with and without its `matchConditions`.
//!
//! `cargo bench -p wasmop -p wasmop-e2e --bench admission` (a plain binary, `harness = false`;
//! env `N`, default 200 creates per variant).
//!
//! Setup: one `ControlPlane` (etcd + kube-apiserver + kube-controller-manager + kube-scheduler +
//! kwok, Kubernetes 1.37 unless `WASMOP_K8S_VERSION` says otherwise, on loopback) and the
//! sidecarset plugin loaded by a host `Manager`, whose admission `Handler` is served on loopback
//! (hyper + rustls). Each variant is a label value (`bench-admission=<variant>`) that one
//! configuration selects, so the variants share the control plane and are interleaved, one
//! create of each per round (each round in an order of its own, shuffled), each timed from the
//! client's `create` call to its answer.
//!
//! SidecarSet creates (valid objects, as dry runs: admitted and validated by the API server, not
//! stored, so the plugin's cache of SidecarSets, which the Pod webhook reads, stays the same
//! through the run):
//! - `none`: no webhook and no policy matches (the baseline);
//! - `vap`: a `ValidatingAdmissionPolicy` (`admissionregistration.k8s.io/v1`) whose CEL
//!   validations are the plugin's checks (name length, selector, namespace, containers), bound
//!   by a `ValidatingAdmissionPolicyBinding` with `validationActions: [Deny]`;
//! - `wasm`: the plugin's `validate` webhook as it declares it, through the host's handler: a
//!   fresh instance per call, the check in the guest;
//! - `native`: the same check (`sidecarset::validate`, the plugin's own code compiled natively)
//!   behind the same handler and server.
//!
//! Pod creates (every Pod opted out of injection, so no SidecarSet can apply to it):
//! - `pod-none`: no webhook (the baseline);
//! - `pod-wasm`: the plugin's `inject` webhook without its match condition: called for every
//!   Pod, it answers "allowed, unchanged";
//! - `pod-match`: the same webhook with the `matchConditions` it declares (WIT 0.3.0): the API
//!   server evaluates the CEL condition and does not call it.
//!
//! Before timing, every variant is shown to do its work: an invalid SidecarSet (two containers
//! of one name, created as a dry run) is admitted under `none` and refused under `vap`, `wasm`
//! and `native`; the host
//! counts a call of the inject webhook for a Pod under `pod-wasm` and for a Pod that did not opt
//! out under `pod-match`. After timing, the host must have counted no call for the opted-out
//! `pod-match` Pods and one for every `pod-wasm` Pod.
//!
//! Printed: p50 / p99 of each, the added p50 / p99 (variant − its baseline), and the figure
//! lines of `scripts/bench.sh`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use futures::future::BoxFuture;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::json;
use sidecarset::admission::{INJECT, INVALID, VALIDATE};
use sidecarset::inject::INJECT_ANNOTATION;
use sidecarset::sidecarset::MAX_NAME;
use wasmop::admission::registration::{self, Endpoint, Exclusions};
use wasmop::admission::{AdmissionMetrics, Admitter, CallFailure, CertResolver, Handler, HostObjects, NotServed, ServingCert};
use wasmop::controller::{ControllerConfig, Manager};
use wasmop::metrics::Metrics;
use wasmop::reload::{ReloadConfig, Reloader};
use wasmop::runtime::Runtime;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{apply_file, log_to_test_output};
use wasmop_e2e::figure;
use wasmop_e2e::plugins::{plugin, workspace};
use wasmop_types::{AdmissionRequest, Verdict, Webhook};

use figure::{Goal, figure};

const BENCH: &str = "admission";
/// The label whose value selects a variant.
const VARIANT: &str = "bench-admission";
/// The plugin as the host loads it.
const PLUGIN: &str = "sidecarset";

/// The SidecarSet validation in native Rust: the plugin's own `validate`, outside a sandbox.
struct Native(Webhook);

impl Admitter for Native {
    fn find(&self, plugin: &str, webhook: &str) -> Result<Webhook, NotServed> {
        if (plugin, webhook) == ("native", VALIDATE) { Ok(self.0.clone()) } else { Err(NotServed::NoPlugin(plugin.into())) }
    }

    fn call(&self, _: &str, _: &str, request: AdmissionRequest, _: Duration) -> BoxFuture<'static, Result<Verdict, CallFailure>> {
        Box::pin(async move {
            let object = request.object.unwrap_or_default();
            Ok(match sidecarset::validate(&object) {
                Ok(()) => Verdict::allow(),
                Err(invalid) => Verdict::deny_with(INVALID, invalid.to_string()),
            })
        })
    }

    fn webhooks(&self) -> Vec<(String, Vec<Webhook>)> {
        vec![("native".into(), vec![self.0.clone()])]
    }
}

/// `webhook` selecting only the objects of `variant`.
fn for_variant(mut webhook: Webhook, variant: &str) -> Webhook {
    webhook.object_selector = format!("{VARIANT}={variant}");
    webhook
}

/// The plugin's declared webhook `name`.
fn declared(webhooks: &[Webhook], name: &str) -> Result<Webhook> {
    webhooks.iter().find(|w| w.name == name).cloned().with_context(|| format!("the plugin declares no webhook {name}"))
}

/// The CEL validations of the policy: the checks of `sidecarset::validate`, in its order.
fn policy(name: &str) -> Result<ValidatingAdmissionPolicy> {
    let rule = |expression: String, message: &str| json!({"expression": expression, "message": message});
    let validations = [
        rule(
            format!("!has(object.metadata.name) || object.metadata.name.size() <= {MAX_NAME}"),
            &format!("metadata.name is longer than {MAX_NAME} characters"),
        ),
        rule("has(object.spec.selector)".into(), "spec.selector is required"),
        rule(
            "!has(object.spec.selector.matchLabels) || object.spec.selector.matchLabels.all(k, k != '')".into(),
            "spec.selector.matchLabels: a key is empty",
        ),
        rule(
            "!has(object.spec.selector.matchExpressions) || object.spec.selector.matchExpressions.all(e, e.key != '' && \
             (e.operator in ['In', 'NotIn'] ? (has(e.values) && size(e.values) > 0) : \
             (e.operator in ['Exists', 'DoesNotExist'] && (!has(e.values) || size(e.values) == 0))))"
                .into(),
            "spec.selector.matchExpressions: an empty key, an unknown operator, In/NotIn without values or Exists/DoesNotExist with values",
        ),
        rule(
            "!has(object.spec.__namespace__) || (size(object.spec.__namespace__) <= 63 && \
             object.spec.__namespace__.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))"
                .into(),
            "spec.namespace is not a valid namespace name",
        ),
        rule("size(object.spec.containers) > 0".into(), "spec.containers must list at least one container"),
        rule(
            "object.spec.containers.all(c, has(c.name) && c.name != '' && has(c.image) && c.image != '')".into(),
            "spec.containers: every container needs a name and an image",
        ),
        rule(
            "object.spec.containers.all(c, object.spec.containers.exists_one(d, d.name == c.name))".into(),
            "spec.containers: a name is used by more than one container",
        ),
    ];
    Ok(serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [sidecarset::sidecarset::GROUP],
                "apiVersions": [sidecarset::sidecarset::VERSION], "operations": ["CREATE", "UPDATE"], "resources": ["sidecarsets"]}]},
            "validations": validations,
        }
    }))?)
}

fn binding(name: &str, policy: &str, variant: &str) -> Result<ValidatingAdmissionPolicyBinding> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": policy, "validationActions": ["Deny"],
            "matchResources": {"objectSelector": {"matchLabels": {VARIANT: variant}}}}
    }))?)
}

fn sidecarset_resource() -> ApiResource {
    ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
        sidecarset::sidecarset::GROUP,
        sidecarset::sidecarset::VERSION,
        "SidecarSet",
    ))
}

/// A SidecarSet of `variant`: valid, or with two containers of one name.
fn sidecarset_object(name: &str, variant: &str, valid: bool) -> DynamicObject {
    let second = if valid { "proxy" } else { "log" };
    let object = json!({"apiVersion": "apps.wasmop.dev/v1alpha1", "kind": "SidecarSet",
        "metadata": {"name": name, "labels": {VARIANT: variant}},
        "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["bench-nothing"]}]},
            "namespace": "default",
            "containers": [{"name": "log", "image": "busybox:1"}, {"name": second, "image": "envoy:1"}]}});
    serde_json::from_value(object).expect("a SidecarSet")
}

/// A Pod of `variant`, opted out of injection unless `opted_in`.
fn pod(name: &str, variant: &str, opted_in: bool) -> Pod {
    let annotations = if opted_in { json!({}) } else { json!({INJECT_ANNOTATION: "false"}) };
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {VARIANT: variant}, "annotations": annotations},
        "spec": {"containers": [{"name": "app", "image": "busybox:1"}]}}))
    .expect("a Pod")
}

/// The calls of the plugin's inject webhook the host counted.
fn inject_calls(metrics: &Metrics) -> f64 {
    let prefix = format!("wasmop_admission_outcomes_total{{plugin=\"{PLUGIN}\",webhook=\"{INJECT}\",");
    metrics.render().lines().filter(|l| l.starts_with(&prefix)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Retry `attempt` every 50 ms until it returns true (at most 400 times).
async fn until<F: AsyncFnMut(usize) -> Result<bool>>(what: &str, mut attempt: F) -> Result<()> {
    for i in 0..400 {
        if attempt(i).await? {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!("{what}: not after 400 attempts")
}

#[tokio::main]
async fn main() -> Result<()> {
    log_to_test_output();
    let n: usize = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/sidecarset.yaml")).await?;
    apply_file(&client, &workspace().join("crds/wasmplugin.yaml")).await?;

    // The host with the sidecarset plugin; its handler served on loopback.
    let dir = tempfile::tempdir()?;
    let wasm = tokio::task::spawn_blocking(|| plugin(PLUGIN, "wasm32-wasip2")).await?;
    std::fs::copy(wasm, dir.path().join("sidecarset.wasm"))?;
    // The grant a deployment gives the plugin for its Pod webhook (docs/admission.md).
    let host_policy = wasmop::policy::HostPolicy::from_yaml(
        "plugins: {sidecarset: {grants: {webhookResources: [{resource: pods, mode: mutate}]}}}",
    )?;
    let runtime =
        Runtime::builder().allowances(host_policy.allowances()).artifact_dir(Some(dir.path().join(".artifacts"))).build()?;
    let manager = Arc::new(Manager::new(client.clone(), runtime, ControllerConfig { resync: None, ..Default::default() }));
    let reloader = Reloader::new(Arc::clone(&manager), dir.path(), ReloadConfig::default());
    reloader.sync().await;
    let declared_hooks =
        manager.webhooks().into_iter().find(|(p, _)| p == PLUGIN).map(|(_, w)| w).context("plugin not loaded")?;
    let validate = declared(&declared_hooks, VALIDATE)?;
    let inject = declared(&declared_hooks, INJECT)?;
    ensure!(!inject.match_conditions.is_empty(), "the inject webhook declares no match condition");

    let cert = ServingCert::generate(&["127.0.0.1".into()])?;
    let wasm_metrics = Metrics::new();
    let handler = Handler::new(Arc::clone(&manager) as Arc<dyn Admitter>, AdmissionMetrics::new(&wasm_metrics), 64);
    let (wasm_addr, _wasm_server) =
        wasmop::admission::server::serve("127.0.0.1:0".parse()?, handler, CertResolver::new(&cert)?).await?;
    let native_hook = for_variant(validate.clone(), "native");
    let handler = Handler::new(Arc::new(Native(native_hook.clone())), AdmissionMetrics::new(&Metrics::new()), 64);
    let (native_addr, _native_server) =
        wasmop::admission::server::serve("127.0.0.1:0".parse()?, handler, CertResolver::new(&cert)?).await?;

    // The configurations: one per server, the match-condition variant on its own.
    let exclusions = Exclusions::new(HostObjects::outside("default"));
    let url = |port: u16| Endpoint::Url(format!("https://127.0.0.1:{port}"));
    let mut without_condition = for_variant(inject.clone(), "pod-wasm");
    without_condition.match_conditions.clear();
    let configurations = [
        (
            "bench-wasm",
            url(wasm_addr.port()),
            BTreeMap::from([(PLUGIN.to_owned(), vec![for_variant(validate.clone(), "wasm"), without_condition])]),
        ),
        ("bench-match", url(wasm_addr.port()), BTreeMap::from([(PLUGIN.to_owned(), vec![for_variant(inject, "pod-match")])])),
        ("bench-native", url(native_addr.port()), BTreeMap::from([("native".to_owned(), vec![native_hook])])),
    ];
    let validating: Api<DynamicObject> =
        Api::all_with(client.clone(), &ApiResource::erase::<ValidatingWebhookConfiguration>(&()));
    let mutating: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::erase::<MutatingWebhookConfiguration>(&()));
    let apply = PatchParams::apply("bench").force();
    for (name, endpoint, hooks) in &configurations {
        let built = registration::build(name, endpoint, Some(&cert.ca_pem), &exclusions, hooks)?;
        if built.validating["webhooks"].as_array().is_some_and(|w| !w.is_empty()) {
            validating.patch(name, &apply, &Patch::Apply(&built.validating)).await?;
        }
        if built.mutating["webhooks"].as_array().is_some_and(|w| !w.is_empty()) {
            mutating.patch(name, &apply, &Patch::Apply(&built.mutating)).await?;
        }
    }
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    policies.patch("bench-sidecarset", &apply, &Patch::Apply(&policy("bench-sidecarset")?)).await?;
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    bindings.patch("bench-sidecarset", &apply, &Patch::Apply(&binding("bench-sidecarset", "bench-sidecarset", "vap")?)).await?;

    // Each variant does its work before it is timed (the API server's informers lag).
    let sets: Api<DynamicObject> = Api::all_with(client.clone(), &sidecarset_resource());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let post = PostParams::default();
    // SidecarSets are created as dry runs: admitted (webhooks and policies run) but never stored,
    // so the plugin never reconciles them and the Pod webhook's SidecarSet cache stays empty.
    let dry = PostParams { dry_run: true, ..PostParams::default() };
    sets.create(&dry, &sidecarset_object("invalid-none", "none", false)).await.context("an invalid SidecarSet without checks")?;
    for variant in ["vap", "wasm", "native"] {
        until(&format!("{variant} refuses an invalid SidecarSet"), async |i| {
            match sets.create(&dry, &sidecarset_object(&format!("invalid-{variant}-{i}"), variant, false)).await {
                Ok(_) => Ok(false),
                Err(kube::Error::Api(e)) if e.message.contains("more than one container") => Ok(true),
                Err(e) => Err(e).context(format!("{variant}: an invalid SidecarSet")),
            }
        })
        .await?;
    }
    for (variant, opted_in) in [("pod-wasm", false), ("pod-match", true)] {
        until(&format!("{variant} calls the inject webhook"), async |i| {
            let before = inject_calls(&wasm_metrics);
            pods.create(&post, &pod(&format!("warm-{variant}-{i}"), variant, opted_in)).await?;
            Ok(inject_calls(&wasm_metrics) > before)
        })
        .await?;
    }

    let variants = ["none", "vap", "wasm", "native", "pod-none", "pod-wasm", "pod-match"];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); variants.len()];
    let calls_before = inject_calls(&wasm_metrics);
    let mut order: Vec<usize> = (0..variants.len()).collect();
    let mut random = SplitMix64(0x5eed);
    for i in 0..n {
        // Each round in its own order: a Pod create leaves the API server work behind it (the
        // scheduler's binding, the node's status updates), which a fixed or rotated order would
        // always hand to the same next variant.
        random.shuffle(&mut order);
        for &slot in &order {
            let variant = variants[slot];
            let name = format!("{variant}-{i}");
            let started = Instant::now();
            if variant.starts_with("pod-") {
                pods.create(&post, &pod(&name, variant, false)).await?;
            } else {
                sets.create(&dry, &sidecarset_object(&name, variant, true)).await?;
            }
            times[slot].push(started.elapsed());
        }
    }
    let calls = inject_calls(&wasm_metrics) - calls_before;
    ensure!(
        calls == n as f64,
        "the inject webhook was called {calls} times for {n} pod-wasm and {n} pod-match Pods: expected {n}"
    );
    for t in &mut times {
        t.sort();
    }

    let at = |slot: usize, p: f64| ms(percentile(&times[slot], p));
    let added = |slot: usize, base: usize, p: f64| at(slot, p) - at(base, p);
    println!("admission latency, {n} creates each (ms); SidecarSets against none, Pods against pod-none");
    println!("{:<10} {:>8} {:>8} {:>12} {:>12}", "variant", "p50", "p99", "added p50", "added p99");
    for (slot, variant) in variants.iter().enumerate() {
        let base = if variant.starts_with("pod-") { 4 } else { 0 };
        println!(
            "{variant:<10} {:>8.2} {:>8.2} {:>12.2} {:>12.2}",
            at(slot, 0.5),
            at(slot, 0.99),
            added(slot, base, 0.5),
            added(slot, base, 0.99)
        );
    }
    let what = |variant: &str| match variant {
        "vap" => "ValidatingAdmissionPolicy (CEL in the API server)",
        "wasm" => "wasm plugin webhook",
        "native" => "native Rust webhook",
        "pod-wasm" => "wasm Pod webhook called for every Pod",
        _ => "wasm Pod webhook behind its matchConditions",
    };
    for (slot, base, variant) in [(1, 0, "vap"), (2, 0, "wasm"), (3, 0, "native"), (5, 4, "pod-wasm"), (6, 4, "pod-match")] {
        let object = if base == 0 { "SidecarSet validation" } else { "opted-out Pods" };
        for (p, label) in [(0.5, "p50"), (0.99, "p99")] {
            figure(
                BENCH,
                &format!("added latency {label}, {} ({object}, {n} creates)", what(variant)),
                added(slot, base, p),
                None,
                "ms",
                Goal::None,
            );
        }
    }
    figure(
        BENCH,
        &format!("added latency p50, wasm vs native webhook (SidecarSet validation, {n} creates each)"),
        added(2, 0, 0.5),
        Some(added(3, 0, 0.5)),
        "ms",
        Goal::RatioAtMost(1.5),
    );
    figure(
        BENCH,
        "added latency p50, wasm webhook (SidecarSet validation, loopback)",
        added(2, 0, 0.5),
        None,
        "ms",
        Goal::AtMost(2.0),
    );
    figure(
        BENCH,
        &format!("added latency p50, wasm webhook vs ValidatingAdmissionPolicy (SidecarSet validation, {n} creates each)"),
        added(2, 0, 0.5),
        Some(added(1, 0, 0.5)),
        "ms",
        Goal::None,
    );
    let host_side = manager.metrics().render();
    let line =
        host_side.lines().find(|l| l.starts_with("wasmop_plugin_call_duration_seconds_sum")).unwrap_or_default().to_owned();
    println!("host-side plugin call time: {line}");
    Ok(())
}

/// A small deterministic generator (SplitMix64) for the rounds' orders: the same orders on every
/// run, no dependency.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Fisher–Yates.
    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}
