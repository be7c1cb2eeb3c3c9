//! A plugin's webhooks admit only what it may read, on a real control plane.
//!
//! The testbed's `admits-secrets` build declares a validating webhook on Secrets, a kind its
//! manifest does not declare: registered, the API server would send it every such Secret in
//! plaintext. Without a grant the host does not start it (its `WasmPlugin` says why), registers
//! no webhook for it, and Secrets are created untouched; with `secrets: read` and
//! `webhookResources: [secrets]` granted, the same file is started and does see them.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use wasmop::admission::{Admission, AdmissionConfig, CertSource};
use wasmop::controller::Manager;
use wasmop::policy::HostPolicy;
use wasmop::reload::{ReloadConfig, Reloader};
use wasmop::runtime::Runtime;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{Host, api_for, apply_file, eventually, log_to_test_output};
use wasmop_e2e::plugins::{plugin_with_features, workspace};

const WAIT: Duration = Duration::from_secs(30);
const CONFIGURATION: &str = "wasmop-e2e-reach";
const GRANT: &str = "plugins: {testbed: {grants: {secrets: read, webhookResources: [secrets]}}}";

fn secret(name: &str) -> Secret {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": "default", "labels": {"testbed-admission": "secrets"}},
        "stringData": {"password": "hunter2"}
    }))
    .unwrap()
}

/// A host on `plugins` with `policy`, serving admission under [`CONFIGURATION`].
async fn host(
    client: &kube::Client,
    plugins: &std::path::Path,
    policy: &str,
) -> Result<(Arc<Manager>, Arc<Reloader>, Admission)> {
    let runtime = Runtime::builder().allowances(HostPolicy::from_yaml(policy)?.allowances()).artifact_dir(None).build()?;
    let manager = Arc::new(Manager::new(client.clone(), runtime, Host::test_config()));
    let reloader = Reloader::new(Arc::clone(&manager), plugins, ReloadConfig::default());
    let certs = CertSource::Secret { namespace: "default".into(), name: "tls".into(), names: vec!["127.0.0.1".into()] };
    let config = AdmissionConfig { configuration_name: CONFIGURATION.into(), ..AdmissionConfig::new(certs) };
    let admission = Admission::start(config, Arc::clone(&manager)).await?;
    reloader.observe(admission.observer());
    reloader.sync().await;
    Ok((manager, reloader, admission))
}

#[tokio::test]
async fn a_webhook_on_undeclared_secrets_is_not_registered_unless_granted() -> Result<()> {
    log_to_test_output();
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/testbed.yaml")).await?;
    apply_file(&client, &workspace().join("crds/wasmplugin.yaml")).await?;
    let dir = tempfile::tempdir()?;
    std::fs::copy(
        plugin_with_features("testbed", "wasm32-wasip2", &["admission", "admits-secrets"]),
        dir.path().join("testbed.wasm"),
    )?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());

    // Without the grant: not started, and the WasmPlugin names what is missing.
    let (manager, reloader, admission) = host(&client, dir.path(), "").await?;
    let wasmplugins = api_for(&client, "wasmop.dev/v1alpha1", "WasmPlugin", None).await?;
    let wp = eventually("WasmPlugin testbed: Ready=False NotStarted", WAIT, || async {
        let wp = wasmplugins.get_opt("testbed").await?;
        Ok(wp.filter(|wp| wp.data.pointer("/status/conditions/0/reason") == Some(&json!("NotStarted"))))
    })
    .await?;
    let message = wp.data.pointer("/status/conditions/0/message").and_then(Value::as_str).unwrap_or_default();
    assert!(message.contains("admits secrets in webhook \"secrets\", a resource its manifest does not declare"), "{message}");
    assert!(message.contains("admits Secrets in webhook \"secrets\" (grant secrets: read)"), "{message}");
    assert!(manager.controller("testbed").is_none(), "not running");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let registered = validating.get_opt(CONFIGURATION).await?.and_then(|c| c.webhooks).unwrap_or_default();
    assert!(registered.is_empty(), "no webhook registered: {:?}", registered.iter().map(|w| &w.name).collect::<Vec<_>>());
    // The Secret is created: no plugin saw it.
    secrets.create(&PostParams::default(), &secret("unseen")).await?;
    drop((admission, reloader, manager));

    // Granted: the same file runs, and its webhook does see Secrets (so the refusal above is
    // what kept them from it).
    let (manager, _reloader, _admission) = host(&client, dir.path(), GRANT).await?;
    assert!(manager.controller("testbed").is_some(), "started with the grant");
    let refused = eventually("the granted webhook sees a Secret", WAIT, || async {
        let _ = secrets.delete("seen", &DeleteParams::default()).await;
        Ok(secrets.create(&PostParams::default(), &secret("seen")).await.err().map(|e| e.to_string()))
    })
    .await?;
    assert!(refused.contains("testbed saw secret seen: password"), "{refused}");
    Ok(())
}
