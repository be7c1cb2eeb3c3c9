//! Kinds a cluster serves, on each supported Kubernetes version: a plugin declaring
//! `resource.k8s.io/v1` ResourceClaims (served from 1.34 on) starts on 1.37 and is refused on
//! 1.33 with one line naming the kind, before any watch or write.

use anyhow::Result;
use serde_json::json;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{Host, api_for, apply, apply_file, eventually, log_to_test_output};
use wasmop_e2e::plugins::{plugin_with_features, workspace};

#[tokio::test]
async fn a_kind_only_newer_servers_serve_starts_there_and_is_refused_by_older_ones() -> Result<()> {
    log_to_test_output();
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/testbed.yaml")).await?;
    let version = client.apiserver_version().await?;
    let minor: u32 = version.minor.trim_end_matches('+').parse()?;
    let testbed = plugin_with_features("testbed", "wasm32-wasip2", &["declares-resource-claims"]);
    let started = Host::start(client.clone(), &[&testbed], Host::test_config()).await;
    if minor >= 34 {
        let host = started?;
        assert_eq!(host.manager.plugins(), ["testbed"], "on {}", version.git_version);
        // And it runs: a parent is reconciled into its ConfigMap.
        apply(
            &client,
            &json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
            "metadata": {"name": "claims", "namespace": "default"}, "spec": {"mode": "ok"}}),
        )
        .await?;
        let cms = api_for(&client, "v1", "ConfigMap", Some("default")).await?;
        eventually("the parent's ConfigMap", std::time::Duration::from_secs(30), || async {
            Ok(cms.get_opt("claims-out").await?)
        })
        .await?;
    } else {
        let Err(refused) = started else {
            anyhow::bail!("the plugin started on {}, which does not serve the kind", version.git_version)
        };
        let message = format!("{refused:#}");
        assert!(message.contains("does not serve resource.k8s.io/v1/ResourceClaim"), "on {}: {message}", version.git_version);
    }
    Ok(())
}
