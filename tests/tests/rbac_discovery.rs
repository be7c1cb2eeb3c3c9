//! `wasmop rbac` resource names from discovery on a real control plane: a CRD whose plural is
//! irregular (`Octopus` → `octopodes`) gets rules that name it, and a ServiceAccount bound to
//! those rules can list the custom resources (a name derived from the kind, `octopuses`, would
//! be refused).

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::json;
use wasmop::cli::rbac::known_kinds;
use wasmop::contract::{Kind, Manifest, Scope};
use wasmop::policy::HostPolicy;
use wasmop::rbac::{kinds_of, render};
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{api_for, apply, apply_file, eventually};

const OCTOPUS_CRD: &str = "\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: octopodes.sea.example.com}
spec:
  group: sea.example.com
  scope: Namespaced
  names: {kind: Octopus, listKind: OctopusList, plural: octopodes, singular: octopus}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
";

fn octopus_plugin() -> Manifest {
    Manifest {
        name: "octopus".into(),
        version: "0.1.0".into(),
        description: String::new(),
        parent: Kind::new("sea.example.com", "v1", "Octopus"),
        scope: Scope::Namespaced,
        children: vec![Kind::new("", "v1", "ConfigMap")],
        related: vec![],
        finalizer: false,
        prune: false,
        adopt_unowned: false,
        config_schema: None,
        webhooks: Vec::new(),
    }
}

#[tokio::test]
async fn an_irregular_plural_comes_from_discovery_and_the_rules_work() -> Result<()> {
    let cp = ControlPlane::start().await?;
    let admin = cp.client().await?;
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("octopus.yaml"), OCTOPUS_CRD)?;
    apply_file(&admin, &dir.path().join("octopus.yaml")).await?;

    // No --crds: the plural and scope come from the cluster.
    let manifests = [octopus_plugin()];
    let kinds = known_kinds(&kinds_of(&manifests), &[], Some(&cp.kubeconfig_path())).await?;
    let octopus = kinds.resolve(&manifests[0].parent)?;
    assert_eq!((octopus.plural.as_str(), octopus.scope), ("octopodes", Scope::Namespaced));
    let yaml = render(&manifests, &HostPolicy::default(), &kinds, "wasmop", "wasmop-system", "wasmop")?;
    assert!(yaml.contains("- octopodes\n") && yaml.contains("- octopodes/status\n"), "{yaml}");
    assert!(!yaml.contains("octopuses"), "no name derived from the kind:\n{yaml}");

    // Bound to a ServiceAccount, the rules let it list and patch Octopus objects.
    apply(&admin, &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "wasmop-system"}})).await?;
    apply(
        &admin,
        &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "wasmop", "namespace": "wasmop-system"}}),
    )
    .await?;
    std::fs::write(dir.path().join("rbac.yaml"), &yaml)?;
    apply_file(&admin, &dir.path().join("rbac.yaml")).await?;
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), "wasmop-system");
    let request = TokenRequest {
        spec: TokenRequestSpec { audiences: vec![], expiration_seconds: Some(3600), ..Default::default() },
        ..Default::default()
    };
    let token = sas.create_token_request("wasmop", &PostParams::default(), &request).await?.status.expect("token issued").token;
    let host = cp.client_with_token(&token).await?;
    apply(
        &admin,
        &json!({"apiVersion": "sea.example.com/v1", "kind": "Octopus", "metadata": {"name": "paul", "namespace": "default"}}),
    )
    .await?;
    let octopodes = api_for(&host, "sea.example.com/v1", "Octopus", Some("default")).await?;
    let listed = eventually("the host identity lists octopodes", Duration::from_secs(30), || async {
        Ok(Some(octopodes.list(&Default::default()).await?))
    })
    .await?;
    assert_eq!(listed.items.len(), 1);
    Ok(())
}
