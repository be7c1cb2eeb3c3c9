//! The sidecarset plugin on a real control plane: a cluster-scoped parent (`SidecarSet`) whose
//! related objects (Pods) live in namespaces. A Pod created, relabelled, marked Ready or
//! deleted in any namespace requeues the SidecarSets, whose status counts it. Pods run on the
//! control plane's simulated Nodes (kwok marks them Running and Ready); a Pod whose nodeSelector
//! matches no Node stays Pending and is counted as matched, not ready. "Injected" is the
//! annotation the webhook sets, here set by the test.
//!
//! Its webhooks, called through the host's runtime (the component built from source, lookups
//! answered from a host cache), then by the kube-apiserver over TLS on loopback: a Pod gets the
//! sidecars of the cluster-scoped SidecarSets in any namespace, a Pod they do not select is
//! untouched, an invalid SidecarSet is refused with the plugin's reason, a SidecarSet is
//! defaulted.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use sidecarset::SidecarSet;
use sidecarset::admission::{DEFAULT, INJECT, VALIDATE};
use wasmop::admission::{Admission, AdmissionConfig, CertSource};
use wasmop::controller::Manager;
use wasmop::objects::MemoryCache;
use wasmop::reload::{ReloadConfig, Reloader};
use wasmop::runtime::Runtime;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{Host, api_for, apply, apply_file, eventually, log_to_test_output};
use wasmop_e2e::plugins::{plugin, workspace};
use wasmop_types::{AdmissionRequest, Operation, Verdict};

const WAIT: Duration = Duration::from_secs(30);
/// The host policy a SidecarSet host needs: its webhook mutates every Pod it selects.
const SIDECARSET_GRANTS: &str = "plugins: {sidecarset: {grants: {webhookResources: [{resource: pods, mode: mutate}]}}}";

async fn setup() -> Result<(ControlPlane, kube::Client, Host)> {
    log_to_test_output();
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/sidecarset.yaml")).await?;
    for ns in ["team-a", "team-b"] {
        apply(&client, &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})).await?;
    }
    let sidecarset = plugin("sidecarset", "wasm32-wasip2");
    // Its injecting webhook mutates Pods, which it declares only as related: the operator grants it.
    let policy = wasmop::policy::HostPolicy::from_yaml(SIDECARSET_GRANTS)?;
    let runtime = Runtime::builder().allowances(policy.allowances()).artifact_dir(None).build()?;
    let host = Host::start_with(client.clone(), &[&sidecarset], Host::test_config(), runtime).await?;
    Ok((cp, client, host))
}

fn sidecarset(name: &str, namespace: Option<&str>) -> Value {
    let mut set = json!({"apiVersion": "apps.wasmop.dev/v1alpha1", "kind": "SidecarSet", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "sidecars", "operator": "NotIn", "values": ["off"]}]},
                 "containers": [{"name": "log-shipper", "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent"}]}});
    if let Some(ns) = namespace {
        set["spec"]["namespace"] = json!(ns);
    }
    set
}

fn pod(namespace: &str, name: &str, labels: Value, annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}})
}

/// `(matchedPods, updatedPods, readyPods)` of a SidecarSet.
fn counts(set: &DynamicObject) -> (i64, i64, i64) {
    let n = |f: &str| set.data.pointer(&format!("/status/{f}")).and_then(Value::as_i64).unwrap_or(-1);
    (n("matchedPods"), n("updatedPods"), n("readyPods"))
}

async fn wait_for_counts(sets: &Api<DynamicObject>, name: &str, want: (i64, i64, i64)) -> Result<DynamicObject> {
    let last = std::cell::Cell::new((0, 0, 0));
    let seen = &last;
    let result = eventually(&format!("SidecarSet {name} with (matched, updated, ready) = {want:?}"), WAIT, || async move {
        let set = sets.get(name).await?;
        seen.set(counts(&set));
        Ok((seen.get() == want).then_some(set))
    })
    .await;
    result.map_err(|e| e.context(format!("SidecarSet {name} last counted {:?}", last.get())))
}

#[tokio::test]
async fn pods_in_any_namespace_requeue_the_cluster_scoped_sidecarset_and_are_counted() -> Result<()> {
    let (_cp, client, _host) = setup().await?;
    let sets = api_for(&client, "apps.wasmop.dev/v1alpha1", "SidecarSet", None).await?;
    let created = apply(&client, &sidecarset("log-shipper", None)).await?;
    apply(&client, &sidecarset("team-b-only", Some("team-b"))).await?;
    let set = wait_for_counts(&sets, "log-shipper", (0, 0, 0)).await?;
    assert_eq!(set.data.pointer("/status/observedGeneration"), created.metadata.generation.map(Value::from).as_ref());
    let hash = SidecarSet::from_object(&serde_json::to_value(&created)?)?.hash();

    // Pods created after the SidecarSet, in two namespaces: each change requeues it. They are
    // scheduled and become Ready on the simulated Nodes.
    apply(&client, &pod("team-a", "web-1", json!({"app": "web"}), json!({}))).await?;
    wait_for_counts(&sets, "log-shipper", (1, 0, 0)).await?;
    let injected = json!({"sidecarset.wasmop.dev/log-shipper-hash": hash});
    apply(&client, &pod("team-b", "web-2", json!({"app": "web"}), injected.clone())).await?;
    // Updated (injected) and Ready: counted as ready.
    wait_for_counts(&sets, "log-shipper", (2, 1, 1)).await?;
    wait_for_counts(&sets, "team-b-only", (1, 0, 0)).await?;
    let team_b_pods: Api<DynamicObject> = api_for(&client, "v1", "Pod", Some("team-b")).await?;
    let web_2 = team_b_pods.get("web-2").await?;
    assert!(web_2.data.pointer("/spec/nodeName").and_then(Value::as_str).is_some_and(|n| n.starts_with("node-")), "{web_2:?}");

    // Not matched: another app, or opted out through the matchExpressions.
    apply(&client, &pod("team-a", "db-1", json!({"app": "db"}), json!({}))).await?;
    apply(&client, &pod("team-a", "web-off", json!({"app": "web", "sidecars": "off"}), injected.clone())).await?;

    // Matched but never Ready: no Node fits its nodeSelector, so it stays Pending.
    let mut pending = pod("team-b", "web-pending", json!({"app": "web"}), injected.clone());
    pending["spec"]["nodeSelector"] = json!({"wasmop.dev/no-such-node": "true"});
    apply(&client, &pending).await?;
    wait_for_counts(&sets, "log-shipper", (3, 2, 1)).await?;

    // A relabelled Pod leaves the count, deleted ones too (kwok finishes their deletion).
    let team_a_pods: Api<DynamicObject> = api_for(&client, "v1", "Pod", Some("team-a")).await?;
    let relabel = json!({"metadata": {"labels": {"app": "db"}}});
    team_a_pods.patch("web-1", &PatchParams::default(), &Patch::Merge(&relabel)).await?;
    wait_for_counts(&sets, "log-shipper", (2, 2, 1)).await?;
    team_b_pods.delete("web-2", &DeleteParams::default()).await?;
    wait_for_counts(&sets, "log-shipper", (1, 1, 0)).await?;
    team_b_pods.delete("web-pending", &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() }).await?;
    wait_for_counts(&sets, "log-shipper", (0, 0, 0)).await?;
    wait_for_counts(&sets, "team-b-only", (0, 0, 0)).await?;
    Ok(())
}

#[tokio::test]
async fn the_webhooks_inject_validate_and_default_through_the_host_runtime() -> Result<()> {
    let runtime = Runtime::builder().artifact_dir(None).build()?;
    let plugin = runtime.load_file(&plugin("sidecarset", "wasm32-wasip2")).await?;
    let mut cache = MemoryCache::default();
    let set = sidecarset("log-shipper", None);
    cache.insert(set.clone())?;
    let cache = Arc::new(cache);
    let admit = async |webhook: &str, request: AdmissionRequest| -> Result<Verdict> {
        Ok(plugin.admit(webhook, &request, cache.clone()).await?.0)
    };

    // A Pod in any namespace reads the cluster-scoped SidecarSets through a lookup.
    let web = pod("team-a", "web-1", json!({"app": "web"}), json!({}));
    let verdict = admit(INJECT, AdmissionRequest::new(Operation::Create, web)).await?;
    let injected = verdict.mutated().expect("the Pod is mutated");
    let names: Vec<&str> =
        injected["spec"]["containers"].as_array().into_iter().flatten().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["web", "log-shipper"]);
    let hash = SidecarSet::from_object(&set)?.hash();
    assert_eq!(injected.pointer("/metadata/annotations/sidecarset.wasmop.dev~1log-shipper-hash"), Some(&json!(hash)));
    let db = pod("team-b", "db-1", json!({"app": "db"}), json!({}));
    assert_eq!(admit(INJECT, AdmissionRequest::new(Operation::Create, db)).await?, Verdict::allow());

    // An invalid SidecarSet is refused with the reason the user sees.
    let mut invalid = sidecarset("bad", None);
    invalid["spec"]["selector"] = json!({"matchExpressions": [{"key": "app", "operator": "In"}]});
    let verdict = admit(VALIDATE, AdmissionRequest::new(Operation::Create, invalid)).await?;
    assert_eq!(verdict, Verdict::deny_with(422, "spec.selector.matchExpressions[0]: operator In needs at least one value"));

    // Defaulting fills imagePullPolicy.
    let mut bare = sidecarset("bare", None);
    bare["spec"]["containers"][0].as_object_mut().map(|c| c.remove("imagePullPolicy"));
    let verdict = admit(DEFAULT, AdmissionRequest::new(Operation::Create, bare)).await?;
    assert_eq!(verdict.mutated().and_then(|s| s.pointer("/spec/containers/0/imagePullPolicy")), Some(&json!("IfNotPresent")));
    Ok(())
}

/// The names of a Pod's containers.
fn container_names(pod: &DynamicObject) -> Vec<String> {
    let containers = pod.data.pointer("/spec/containers").and_then(Value::as_array);
    containers.into_iter().flatten().filter_map(|c| c["name"].as_str().map(str::to_owned)).collect()
}

/// Create `pod` and return it as stored once the mutating webhook has seen it (the API server
/// takes a moment to load a new webhook configuration, and the Pod webhook fails open): a Pod
/// created before that is deleted and created again.
async fn create_through_webhook(client: &kube::Client, pod: &Value) -> Result<DynamicObject> {
    let namespace = pod["metadata"]["namespace"].as_str().unwrap_or("default");
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let pods = api_for(client, "v1", "Pod", Some(namespace)).await?;
    let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
    eventually(&format!("Pod {namespace}/{name} created through the webhook"), WAIT, || async {
        let object: DynamicObject = serde_json::from_value(pod.clone())?;
        let created = pods.create(&PostParams::default(), &object).await?;
        let seen = created.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(SEEN));
        if seen {
            return Ok(Some(created));
        }
        pods.delete(name, &now).await?;
        eventually("the Pod deleted", WAIT, || async { Ok(pods.get_opt(name).await?.is_none().then_some(())) }).await?;
        Ok(None)
    })
    .await
}

/// The annotation the `witness` SidecarSet, which selects every Pod, leaves on each Pod it is
/// injected into: the proof that the mutating webhook saw the Pod.
const SEEN: &str = "sidecarset.wasmop.dev/witness-hash";

#[tokio::test]
async fn the_api_server_calls_the_sidecarset_webhooks_over_tls() -> Result<()> {
    log_to_test_output();
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/sidecarset.yaml")).await?;
    apply(&client, &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}})).await?;
    let dir = tempfile::tempdir()?;
    std::fs::copy(plugin("sidecarset", "wasm32-wasip2"), dir.path().join("sidecarset.wasm"))?;
    let policy = wasmop::policy::HostPolicy::from_yaml(SIDECARSET_GRANTS)?;
    let runtime = Runtime::builder().allowances(policy.allowances()).artifact_dir(None).build()?;
    let manager = Arc::new(Manager::new(client.clone(), runtime, Host::test_config()));
    let reloader = Reloader::new(Arc::clone(&manager), dir.path(), ReloadConfig::default());
    let certs = CertSource::Secret {
        namespace: "default".into(),
        name: "wasmop-admission-tls".into(),
        names: vec!["localhost".into(), "127.0.0.1".into()],
    };
    let config = AdmissionConfig { configuration_name: "wasmop-sidecarset-e2e".into(), ..AdmissionConfig::new(certs) };
    let admission = Admission::start(config, Arc::clone(&manager)).await?;
    reloader.observe(admission.observer());
    reloader.sync().await;
    let sets = api_for(&client, "apps.wasmop.dev/v1alpha1", "SidecarSet", None).await?;

    // Validating: an invalid SidecarSet is refused with the plugin's reason (retried until the
    // API server has loaded the webhook configuration).
    let mut invalid = sidecarset("invalid", None);
    invalid["spec"]["selector"] = json!({"matchExpressions": [{"key": "app", "operator": "In"}]});
    let refusal = eventually("the invalid SidecarSet refused", WAIT, || async {
        match apply(&client, &invalid).await {
            Ok(_) => {
                sets.delete("invalid", &DeleteParams::default()).await?;
                Ok(None)
            }
            Err(e) => Ok(Some(format!("{e:#}"))),
        }
    })
    .await?;
    assert!(refusal.contains("spec.selector.matchExpressions[0]: operator In needs at least one value"), "{refusal}");
    assert!(refusal.contains("validate.sidecarset.wasmop.dev"), "{refusal}");

    // The witness selects every Pod: a created Pod that carries its annotation went through the
    // mutating webhook (which is then loaded by the API server).
    let witness = json!({"apiVersion": "apps.wasmop.dev/v1alpha1", "kind": "SidecarSet", "metadata": {"name": "witness"},
        "spec": {"selector": {}, "containers": [{"name": "witness", "image": "busybox:1.36"}]}});
    apply(&client, &witness).await?;
    wait_for_counts(&sets, "witness", (0, 0, 0)).await?;
    let db = create_through_webhook(&client, &pod("default", "db-1", json!({"app": "db"}), json!({}))).await?;
    assert_eq!(container_names(&db), ["web", "witness"]);

    // Defaulting: imagePullPolicy filled in on the stored object.
    let mut undefaulted = sidecarset("log-shipper", None);
    undefaulted["spec"]["containers"][0].as_object_mut().map(|c| c.remove("imagePullPolicy"));
    let stored = apply(&client, &undefaulted).await?;
    assert_eq!(stored.data.pointer("/spec/containers/0/imagePullPolicy"), Some(&json!("IfNotPresent")));
    let hash = SidecarSet::from_object(&serde_json::to_value(&stored)?)?.hash();
    wait_for_counts(&sets, "log-shipper", (0, 0, 0)).await?; // in the host's cache

    // Injection on Pod CREATE, in any namespace; a Pod the selector does not match is untouched.
    let web = create_through_webhook(&client, &pod("default", "web-1", json!({"app": "web"}), json!({}))).await?;
    assert_eq!(container_names(&web), ["web", "log-shipper", "witness"]);
    let annotation = web.metadata.annotations.as_ref().and_then(|a| a.get("sidecarset.wasmop.dev/log-shipper-hash"));
    assert_eq!(annotation, Some(&hash));
    let other = create_through_webhook(&client, &pod("team-b", "web-2", json!({"app": "web"}), json!({}))).await?;
    assert_eq!(container_names(&other), ["web", "log-shipper", "witness"]);
    assert!(db.metadata.annotations.as_ref().is_none_or(|a| !a.contains_key("sidecarset.wasmop.dev/log-shipper-hash")));

    // The reconcile counts the injected Pods of both namespaces as updated, and as ready once
    // they run on the simulated Nodes.
    wait_for_counts(&sets, "log-shipper", (2, 2, 2)).await?;
    drop(admission);
    Ok(())
}

/// Admission requests the host served for the sidecarset plugin's inject webhook, whatever
/// their answer (`controller_runtime_webhook_requests_total`).
fn inject_calls(manager: &Manager) -> u64 {
    let label = format!("webhook=\"/admission/sidecarset/{INJECT}\"");
    manager
        .metrics()
        .render()
        .lines()
        .filter(|l| l.starts_with("controller_runtime_webhook_requests_total{") && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// The inject webhook's match condition, registered before the host's own: the API server never
/// calls the plugin for a Pod that opted out of injection (the host's webhook metrics do not
/// move), while a Pod that did not opt out is still injected.
#[tokio::test]
async fn a_pod_that_opted_out_is_created_without_a_call_to_the_plugin() -> Result<()> {
    log_to_test_output();
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/sidecarset.yaml")).await?;
    let dir = tempfile::tempdir()?;
    std::fs::copy(plugin("sidecarset", "wasm32-wasip2"), dir.path().join("sidecarset.wasm"))?;
    let policy = wasmop::policy::HostPolicy::from_yaml(SIDECARSET_GRANTS)?;
    let runtime = Runtime::builder().allowances(policy.allowances()).artifact_dir(None).build()?;
    let manager = Arc::new(Manager::new(client.clone(), runtime, Host::test_config()));
    let reloader = Reloader::new(Arc::clone(&manager), dir.path(), ReloadConfig::default());
    let certs = CertSource::Secret {
        namespace: "default".into(),
        name: "wasmop-admission-tls".into(),
        names: vec!["localhost".into(), "127.0.0.1".into()],
    };
    let config = AdmissionConfig { configuration_name: "wasmop-match-e2e".into(), ..AdmissionConfig::new(certs) };
    let admission = Admission::start(config, Arc::clone(&manager)).await?;
    reloader.observe(admission.observer());
    reloader.sync().await;
    let sets = api_for(&client, "apps.wasmop.dev/v1alpha1", "SidecarSet", None).await?;

    // The witness selects every Pod: once a Pod carries its annotation, the API server has
    // loaded the mutating webhook.
    let witness = json!({"apiVersion": "apps.wasmop.dev/v1alpha1", "kind": "SidecarSet", "metadata": {"name": "witness"},
        "spec": {"selector": {}, "containers": [{"name": "witness", "image": "busybox:1.36"}]}});
    apply(&client, &witness).await?;
    wait_for_counts(&sets, "witness", (0, 0, 0)).await?;
    let first = create_through_webhook(&client, &pod("default", "first", json!({"app": "db"}), json!({}))).await?;
    assert_eq!(container_names(&first), ["web", "witness"]);

    // The registered configuration: the plugin's condition first, then every one of the host's.
    let configurations = api_for(&client, "admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", None).await?;
    let registered = configurations.get("wasmop-match-e2e").await?;
    let webhooks = registered.data["webhooks"].as_array().cloned().unwrap_or_default();
    let inject = webhooks.iter().find(|w| w["name"] == "inject.sidecarset.wasmop.dev").expect("the inject webhook registered");
    let names: Vec<&str> =
        inject["matchConditions"].as_array().into_iter().flatten().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names.first(), Some(&sidecarset::admission::NOT_OPTED_OUT_NAME), "{names:?}");
    assert!(names.len() > 1 && names[1..].iter().all(|n| n.starts_with("wasmop-")), "the host's follow: {names:?}");
    assert_eq!(inject["matchConditions"][0]["expression"], sidecarset::inject::NOT_OPTED_OUT);

    // Opted out: created, untouched, and the plugin never called.
    let before = inject_calls(&manager);
    assert!(before >= 1, "the first Pod went through the webhook");
    let opted_out = json!({sidecarset::inject::INJECT_ANNOTATION: "false"});
    let created = apply(&client, &pod("default", "opted-out", json!({"app": "web"}), opted_out)).await?;
    assert_eq!(container_names(&created), ["web"]);
    assert!(created.metadata.annotations.as_ref().is_some_and(|a| !a.contains_key(SEEN)));
    assert_eq!(inject_calls(&manager), before, "no admission request reached the host for the opted-out Pod");

    // Not opted out: still injected, through a call.
    let web = create_through_webhook(&client, &pod("default", "web-1", json!({"app": "web"}), json!({}))).await?;
    assert_eq!(container_names(&web), ["web", "witness"]);
    assert_eq!(inject_calls(&manager), before + 1);
    drop(admission);
    Ok(())
}
