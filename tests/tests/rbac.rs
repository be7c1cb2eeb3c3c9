//! Least privilege: a host authenticated as a ServiceAccount bound only to what `wasmop rbac`
//! generates for its plugins still reconciles, and the same identity is refused anything else.

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{Host, api_for, apply, apply_file, eventually};
use wasmop_e2e::plugins::{plugin, workspace};

#[tokio::test]
async fn host_reconciles_with_exactly_the_generated_rbac() -> Result<()> {
    let cp = ControlPlane::start().await?;
    let admin = cp.client().await?;
    apply_file(&admin, &workspace().join("crds/memcached.yaml")).await?;
    apply_file(&admin, &workspace().join("crds/wasmplugin.yaml")).await?;

    // The RBAC `wasmop rbac` prints for the memcached plugin, bound to a ServiceAccount.
    let memcached = plugin("memcached", "wasm32-wasip2");
    let runtime = wasmop::runtime::Runtime::builder().artifact_dir(None).build()?;
    let manifest = runtime.load_file(&memcached).await?.manifest().as_ref().clone();
    let mut kinds = wasmop::contract::KnownKinds::builtin();
    kinds.add_crds(&workspace().join("crds/memcached.yaml"))?;
    let yaml =
        wasmop::rbac::render(&[manifest], &wasmop::policy::HostPolicy::default(), &kinds, "wasmop", "wasmop-system", "wasmop")?;
    apply(&admin, &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "wasmop-system"}})).await?;
    apply(
        &admin,
        &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "wasmop", "namespace": "wasmop-system"}}),
    )
    .await?;
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("rbac.yaml"), &yaml)?;
    apply_file(&admin, &dir.path().join("rbac.yaml")).await?;

    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), "wasmop-system");
    let request = TokenRequest {
        spec: TokenRequestSpec { audiences: vec![], expiration_seconds: Some(3600), ..Default::default() },
        ..Default::default()
    };
    let token = sas.create_token_request("wasmop", &PostParams::default(), &request).await?;
    let token = token.status.expect("token issued").token;
    let client = cp.client_with_token(&token).await?;

    // Not an admin: Secrets are out of reach.
    let secrets = api_for(&client, "v1", "Secret", Some("default")).await?;
    assert!(secrets.list(&Default::default()).await.is_err(), "the host identity must not read Secrets");

    let _host = Host::start(client.clone(), &[&memcached], Host::test_config()).await?;
    apply(
        &admin,
        &json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "least", "namespace": "default"}, "spec": {"size": 2}}),
    )
    .await?;
    let crs = api_for(&admin, "cache.example.com/v1alpha1", "Memcached", Some("default")).await?;
    let deployments = api_for(&admin, "apps/v1", "Deployment", Some("default")).await?;
    eventually("deployment applied by the least-privileged host", Duration::from_secs(30), || async {
        Ok(deployments.get_opt("least").await?.filter(|d| d.data.pointer("/spec/replicas") == Some(&json!(2))).map(|_| ()))
    })
    .await?;
    eventually("status written by the least-privileged host", Duration::from_secs(30), || async {
        let cr = crs.get("least").await?;
        let ok = cr
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Reconciled" && c["status"] == "True"));
        Ok(ok.then_some(()))
    })
    .await?;
    Ok(())
}
