//! Against a real control plane: `wasmop inspect --kubeconfig` names, one line each, the kinds a
//! plugin declares and the resources its webhooks' rules name that the cluster does not serve
//! (the discovery check `run` makes); and a host outside the cluster (`--admission-url-base`)
//! keeps its certificate Secret in its own namespace, waits for that namespace to exist, and
//! on a clean exit (SIGTERM) removes the webhook configurations it registered, so writes of the
//! admitted kinds go through again; a host behind a Service keeps them for its replicas.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{apply, apply_file, eventually};
use wasmop_e2e::fixtures;
use wasmop_e2e::host::{HostCommand, HostProcess};

const WAIT: Duration = Duration::from_secs(60);
/// How long a host may take to exit after SIGTERM.
const TERM: Duration = Duration::from_secs(30);

/// The grant `run` needs to serve SidecarSet's Pod injection (the demo's policy).
const SIDECARSET_POLICY: &str = "plugins: {sidecarset: {grants: {webhookResources: [{resource: pods, mode: mutate}]}}}\n";

fn sidecarset() -> PathBuf {
    fixtures::plugin("sidecarset", "wasm32-wasip2")
}

/// `wasmop inspect PLUGIN --kubeconfig ... --output json`: its `notServed` lines.
fn not_served(cp: &ControlPlane, plugin: &Path) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(["inspect", plugin.to_str().unwrap(), "--output", "json", "--kubeconfig"])
        .arg(cp.kubeconfig_path())
        .env("RUST_LOG", "error")
        .output()
        .expect("running wasmop");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let inspection: Value = serde_json::from_slice(&out.stdout).unwrap();
    serde_json::from_value(inspection["notServed"].clone()).unwrap_or_else(|e| panic!("{e}: {inspection:#}"))
}

#[tokio::test]
async fn inspect_names_each_declared_kind_and_webhook_resource_the_cluster_does_not_serve() -> Result<()> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    let plugin = sidecarset();
    let lines = not_served(&cp, &plugin);
    let kind = "the API server does not serve apps.wasmop.dev/v1alpha1/SidecarSet: ";
    assert!(lines[0].starts_with(kind), "{lines:#?}");
    let resource = |webhook: &str| {
        format!("the API server does not serve resource sidecarsets of apps.wasmop.dev/v1alpha1 (webhook {webhook}): ")
    };
    assert!(lines[1].starts_with(&resource("validate")), "{lines:#?}");
    assert!(lines[2].starts_with(&resource("default")), "{lines:#?}");
    assert_eq!(lines.len(), 3, "Pods are served, the SidecarSet kind is not: {lines:#?}");
    assert!(lines.iter().all(|l| !l.contains('\n')), "one line each: {lines:#?}");

    apply_file(&client, &fixtures::workspace().join("crds/sidecarset.yaml")).await?;
    eventually("the SidecarSet CRD served", WAIT, || async { Ok(not_served(&cp, &plugin).is_empty().then_some(())) }).await?;
    Ok(())
}

/// `wasmop run` with the SidecarSet plugin and its policy, its log in `dir/host.log`.
fn spawn_host(cp: &ControlPlane, dir: &Path, admission: &[&str]) -> Result<HostProcess> {
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins)?;
    std::fs::copy(sidecarset(), plugins.join("sidecarset.wasm"))?;
    std::fs::write(dir.join("policy.yaml"), SIDECARSET_POLICY)?;
    HostCommand::new(env!("CARGO_BIN_EXE_wasmop"), cp.kubeconfig_path(), plugins)
        .policy(dir.join("policy.yaml"))
        .args(admission)
        .log(dir.join("host.log"))
        .spawn()
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Both webhook configurations named `wasmop` exist.
async fn registered(client: &kube::Client) -> Result<Option<()>> {
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    Ok((validating.get_opt("wasmop").await?.is_some() && mutating.get_opt("wasmop").await?.is_some()).then_some(()))
}

fn sidecarset_object(name: &str) -> Value {
    json!({"apiVersion": "apps.wasmop.dev/v1alpha1", "kind": "SidecarSet", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}}, "containers": [{"name": "log", "image": "busybox:1.36"}]}})
}

#[tokio::test]
async fn a_host_outside_the_cluster_waits_for_its_namespace_and_unregisters_on_a_clean_exit() -> Result<()> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &fixtures::workspace().join("crds/sidecarset.yaml")).await?;
    let dir = tempfile::tempdir()?;
    let port = free_port()?;
    let (bind, url) = (format!("127.0.0.1:{port}"), format!("https://127.0.0.1:{port}"));
    let args = ["--admission-url-base", &url, "--admission-bind", &bind, "--admission-cert-namespace", "wasmop-host"];
    let mut host = spawn_host(&cp, dir.path(), &args)?;

    // The namespace does not exist yet: the host says so and waits (it does not exit).
    let log = dir.path().join("host.log");
    eventually("the host waiting for its namespace", WAIT, || async {
        Ok(std::fs::read_to_string(&log)?.contains("namespace wasmop-host does not exist yet: waiting for it").then_some(()))
    })
    .await?;
    assert!(host.exited()?.is_none(), "the host exited:\n{}", std::fs::read_to_string(&log)?);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = serde_json::from_value(json!({"metadata": {"name": "wasmop-host"}}))?;
    namespaces.create(&PostParams::default(), &namespace).await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "wasmop-host");
    eventually("the certificate Secret in the host's namespace", WAIT, || async {
        Ok(secrets.get_opt("wasmop-admission-tls").await?.map(|_| ()))
    })
    .await?;
    let defaults: Api<Secret> = Api::namespaced(client.clone(), "default");
    assert!(defaults.get_opt("wasmop-admission-tls").await?.is_none(), "a Secret in default");
    eventually("the webhook configurations", WAIT, || registered(&client)).await?;
    // The host answers: an invalid SidecarSet is refused by the plugin's webhook.
    let invalid = json!({"apiVersion": "apps.wasmop.dev/v1alpha1", "kind": "SidecarSet", "metadata": {"name": "bad"},
        "spec": {"selector": {}, "containers": [{"name": "log"}]}});
    let refused = eventually("the validating webhook answering", WAIT, || async {
        Ok(apply(&client, &invalid).await.err().map(|e| format!("{e:#}")).filter(|e| e.contains("image is required")))
    })
    .await?;
    assert!(refused.contains("spec.containers[0].image is required"), "{refused}");

    assert!(host.terminate(TERM).await?.0.success(), "a clean exit:\n{}", std::fs::read_to_string(&log)?);
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    assert!(validating.get_opt("wasmop").await?.is_none(), "the ValidatingWebhookConfiguration stayed");
    assert!(mutating.get_opt("wasmop").await?.is_none(), "the MutatingWebhookConfiguration stayed");
    assert!(std::fs::read_to_string(&log)?.contains("webhook configurations removed"));
    // Writes of the admitted kinds go through: no webhook is left that nothing answers.
    apply(&client, &sidecarset_object("after-exit")).await?;
    Ok(())
}

#[tokio::test]
async fn a_host_behind_a_service_keeps_its_webhook_configurations_on_exit() -> Result<()> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &fixtures::workspace().join("crds/sidecarset.yaml")).await?;
    let dir = tempfile::tempdir()?;
    let bind = format!("127.0.0.1:{}", free_port()?);
    let mut host = spawn_host(&cp, dir.path(), &["--admission-service", "default/wasmop-hooks", "--admission-bind", &bind])?;
    eventually("the webhook configurations", WAIT, || registered(&client)).await?;
    let log = dir.path().join("host.log");
    assert!(host.terminate(TERM).await?.0.success(), "a clean exit:\n{}", std::fs::read_to_string(&log)?);
    assert!(registered(&client).await?.is_some(), "the other replicas behind the Service keep answering: they stay");
    Ok(())
}
