//! Latency an admission webhook adds to a create, seen from a client, on a real control plane:
//! a WebAssembly plugin behind the host against the same mutation written in native Rust.
//!
//! `cargo bench -p wasmop-e2e --bench admission` (a plain binary, `harness = false`; env `N`,
//! default 200 creates per variant).
//!
//! Setup: one `ControlPlane` (etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok, Kubernetes 1.37 unless `WASMOP_K8S_VERSION` says otherwise, on loopback). Three kinds of
//! ConfigMap creates, interleaved (one of each per round), each timed from the client's `create`
//! call to its answer:
//! - `none`: no webhook matches (the baseline);
//! - `wasm`: the testbed plugin's `label` webhook (admission build) through the host's
//!   admission server (`Admission::start` over a `Manager`): a fresh instance per call, the
//!   mutation in the guest, the JSON Patch computed by the host;
//! - `native`: the same mutation (add the label `testbed-admitted: yes`) answered by native Rust
//!   code behind the same server stack (hyper + rustls, the same `Handler`, patch and review
//!   code), on its own port and `MutatingWebhookConfiguration`.
//!
//! Printed: p50 / p99 of each, and the added p50 / p99 (variant − baseline).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use futures::future::BoxFuture;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use wasmop::admission::registration::{self, Endpoint};
use wasmop::admission::{Admission, AdmissionConfig, AdmissionMetrics, Admitter, CallFailure, CertSource, Handler, NotServed};
use wasmop::admission::{CertResolver, ServingCert};
use wasmop::controller::{ControllerConfig, Manager};
use wasmop::metrics::Metrics;
use wasmop::reload::{ReloadConfig, Reloader};
use wasmop::runtime::Runtime;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{apply_file, log_to_test_output};
use wasmop_e2e::plugins::{plugin_with_features, workspace};
use wasmop_types::{AdmissionRequest, Verdict, Webhook};

use wasmop_e2e::figure;

use figure::{Goal, figure};

/// The `label` mutation of the testbed, natively.
struct Native(Webhook);

impl Admitter for Native {
    fn find(&self, plugin: &str, webhook: &str) -> Result<Webhook, NotServed> {
        if (plugin, webhook) == ("native", "label") { Ok(self.0.clone()) } else { Err(NotServed::NoPlugin(plugin.into())) }
    }

    fn call(&self, _: &str, _: &str, request: AdmissionRequest, _: Duration) -> BoxFuture<'static, Result<Verdict, CallFailure>> {
        Box::pin(async move {
            let mut object = request.object.unwrap_or_default();
            object["metadata"]["labels"]["testbed-admitted"] = json!("yes");
            Ok(Verdict::Allowed { warnings: vec![], mutated: Some(object) })
        })
    }

    fn webhooks(&self) -> Vec<(String, Vec<Webhook>)> {
        vec![("native".into(), vec![self.0.clone()])]
    }
}

fn config_map(name: &str, mode: Option<&str>) -> ConfigMap {
    let labels = mode.map_or_else(|| json!({}), |m| json!({"testbed-admission": m}));
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": labels}, "data": {"k": "v"}}))
    .unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() -> Result<()> {
    log_to_test_output();
    let n: usize = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/testbed.yaml")).await?;
    apply_file(&client, &workspace().join("crds/wasmplugin.yaml")).await?;

    // The host with the testbed's admission build.
    let dir = tempfile::tempdir()?;
    std::fs::copy(plugin_with_features("testbed", "wasm32-wasip2", &["admission"]), dir.path().join("testbed.wasm"))?;
    let runtime = Runtime::builder().artifact_dir(Some(dir.path().join(".artifacts"))).build()?;
    let manager = Arc::new(Manager::new(client.clone(), runtime, ControllerConfig { resync: None, ..Default::default() }));
    let reloader = Reloader::new(Arc::clone(&manager), dir.path(), ReloadConfig::default());
    let certs = CertSource::Secret { namespace: "default".into(), name: "bench-tls".into(), names: vec!["127.0.0.1".into()] };
    let admission = Admission::start(
        AdmissionConfig { configuration_name: "bench-wasm".into(), ..AdmissionConfig::new(certs) },
        Arc::clone(&manager),
    )
    .await?;
    reloader.observe(admission.observer());
    reloader.sync().await;

    // The native webhook: same server stack, same certificate, its own configuration.
    let native_hook = wasmop_testbed_label_webhook();
    let cert = ServingCert::generate(&["127.0.0.1".into()])?;
    let handler = Handler::new(Arc::new(Native(native_hook.clone())), AdmissionMetrics::new(&Metrics::new()), 64);
    let (addr, _native) = wasmop::admission::server::serve("127.0.0.1:0".parse()?, handler, CertResolver::new(&cert)?).await?;
    let configurations = registration::build(
        "bench-native",
        &Endpoint::Url(format!("https://127.0.0.1:{}", addr.port())),
        Some(&cert.ca_pem),
        &registration::Exclusions::new(wasmop::admission::HostObjects::outside("default")),
        &[("native".to_owned(), vec![native_hook])].into(),
    )?;
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    mutating.patch("bench-native", &PatchParams::apply("bench").force(), &Patch::Apply(&configurations.mutating)).await?;

    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    // Warm up until both webhooks are called (the API server's informer may lag).
    for (mode, warm) in [("label", "warm-wasm"), ("native", "warm-native")] {
        for i in 0.. {
            let created = config_maps.create(&PostParams::default(), &config_map(&format!("{warm}-{i}"), Some(mode))).await?;
            if created.metadata.labels.unwrap_or_default().contains_key("testbed-admitted") {
                break;
            }
            anyhow::ensure!(i < 200, "webhook {mode} never called");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let mut times: [Vec<Duration>; 3] = Default::default();
    for i in 0..n {
        for (slot, mode) in [(0, None), (1, Some("label")), (2, Some("native"))] {
            let name = format!("cm-{}-{i}", mode.unwrap_or("none"));
            let started = Instant::now();
            let created = config_maps.create(&PostParams::default(), &config_map(&name, mode)).await?;
            times[slot].push(started.elapsed());
            let labelled = created.metadata.labels.unwrap_or_default().contains_key("testbed-admitted");
            anyhow::ensure!(labelled == mode.is_some(), "{name}: labelled {labelled}");
        }
    }
    for t in &mut times {
        t.sort();
    }
    let (base50, base99) = (percentile(&times[0], 0.5), percentile(&times[0], 0.99));
    println!("admission latency, {n} creates each (ms)");
    println!("{:<8} {:>8} {:>8} {:>12} {:>12}", "variant", "p50", "p99", "added p50", "added p99");
    for (label, t) in ["none", "wasm", "native"].iter().zip(&times) {
        let (p50, p99) = (percentile(t, 0.5), percentile(t, 0.99));
        println!("{label:<8} {:>8.2} {:>8.2} {:>12.2} {:>12.2}", ms(p50), ms(p99), ms(p50) - ms(base50), ms(p99) - ms(base99));
    }
    let wasm_call = manager.metrics().render();
    let line =
        wasm_call.lines().find(|l| l.starts_with("wasmop_plugin_call_duration_seconds_sum")).unwrap_or_default().to_owned();
    println!("host-side plugin call time: {line}");
    let added = |slot: usize| ms(percentile(&times[slot], 0.5)) - ms(base50);
    figure(
        "admission",
        &format!("added latency p50, wasm vs native webhook ({n} creates each)"),
        added(1),
        Some(added(2)),
        "ms",
        Goal::RatioAtMost(1.5),
    );
    figure("admission", "added latency p50, wasm webhook (loopback)", added(1), None, "ms", Goal::AtMost(2.0));
    drop(admission);
    Ok(())
}

/// The testbed's `label` webhook, declared for the native plugin on its own label value.
fn wasmop_testbed_label_webhook() -> Webhook {
    serde_json::from_value(json!({
        "name": "label", "type": "Mutating", "timeoutSeconds": 5,
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"], "scope": "Namespaced"}],
        "objectSelector": "testbed-admission=native"
    }))
    .unwrap()
}
