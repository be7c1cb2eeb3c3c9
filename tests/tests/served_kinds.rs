//! Kinds a cluster serves, on each supported Kubernetes version: a plugin declaring
//! `resource.k8s.io/v1` ResourceClaims (served from 1.34 on) starts on 1.37 and is refused on
//! 1.33 with one line naming the kind, before any watch or write; and the host learns every
//! served kind from the server's aggregated discovery in two requests.

use anyhow::Result;
use serde_json::json;
use wasmop::cluster::{Discovery, DiscoveryError};
use wasmop::contract::{Kind, Scope};
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

#[tokio::test]
async fn kinds_of_six_group_versions_are_resolved_in_two_requests_and_a_crd_installed_later_in_one_more() -> Result<()> {
    log_to_test_output();
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/testbed.yaml")).await?;
    let discovery = Discovery::new(client.clone());
    let kinds = [
        (Kind::new("", "v1", "ConfigMap"), "configmaps", Scope::Namespaced),
        (Kind::new("apps", "v1", "Deployment"), "deployments", Scope::Namespaced),
        (Kind::new("batch", "v1", "Job"), "jobs", Scope::Namespaced),
        (Kind::new("policy", "v1", "PodDisruptionBudget"), "poddisruptionbudgets", Scope::Namespaced),
        (Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole"), "clusterroles", Scope::Cluster),
        (Kind::new("test.wasmop.dev", "v1", "Testbed"), "testbeds", Scope::Namespaced),
    ];
    for (kind, plural, scope) in &kinds {
        let resolved = discovery.resolve(kind, std::time::Duration::from_secs(5)).await?;
        assert_eq!((resolved.resource.plural.as_str(), resolved.scope), (*plural, *scope), "{kind}");
    }
    assert!(discovery.aggregated().await, "both supported versions serve aggregated discovery");
    assert_eq!(discovery.requests(), 2, "/api and /apis answer every kind");

    // The same answers as asking each group-version on its own.
    let per_kind = Discovery::new(client.clone());
    for (kind, _, _) in &kinds {
        let (one, other) =
            (discovery.resolve(kind, std::time::Duration::ZERO).await?, per_kind.resolve(kind, std::time::Duration::ZERO).await?);
        assert_eq!((one.resource, one.scope), (other.resource, other.scope), "{kind}");
    }
    assert_eq!(discovery.requests(), 2, "answered from the cache");

    // A CRD installed after the snapshot is asked for on its own group-version.
    apply_file(&client, &workspace().join("crds/memcached.yaml")).await?;
    let memcached =
        discovery.resolve(&Kind::new("cache.example.com", "v1alpha1", "Memcached"), std::time::Duration::from_secs(5)).await?;
    assert_eq!(memcached.resource.plural, "memcacheds");
    assert_eq!(discovery.requests(), 3);

    // A kind nobody serves is refused, naming it.
    let err =
        discovery.resolve(&Kind::new("nowhere.example.com", "v1", "Ghost"), std::time::Duration::from_secs(1)).await.unwrap_err();
    let DiscoveryError::NotServed { kind, .. } = &err else { panic!("another error: {err}") };
    assert_eq!(kind.to_string(), "nowhere.example.com/v1/Ghost");
    Ok(())
}
