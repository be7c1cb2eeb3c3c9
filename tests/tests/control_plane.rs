//! Smoke test of the e2e harness: a real etcd + kube-apiserver + kube-controller-manager +
//! kube-scheduler, with kwok's simulated Nodes running the Pods.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::eventually;

const NS: &str = "e2e";
const MANAGER: &str = "wasmop-e2e";

/// ReplicaSets in `NS` controlled by the Deployment with `uid`.
async fn owned_replicasets(rs: &Api<ReplicaSet>, uid: &str) -> Result<Vec<ReplicaSet>> {
    Ok(rs
        .list(&ListParams::default().labels("app=web"))
        .await?
        .items
        .into_iter()
        .filter(|r| {
            r.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.uid == uid && o.controller == Some(true) && o.kind == "Deployment")
        })
        .collect())
}

#[tokio::test]
async fn control_plane_smoke() -> Result<()> {
    let t0 = std::time::Instant::now();
    let cp = ControlPlane::start().await?;
    eprintln!("control plane ready in {:?} at {}", t0.elapsed(), cp.server_url());
    assert!(cp.kubeconfig_path().is_file());
    let client = cp.client().await?;

    // The version asked for (WASMOP_K8S_VERSION, default the newest) is the one that runs.
    let version = client.apiserver_version().await?;
    let asked = std::env::var("WASMOP_K8S_VERSION").unwrap_or_default();
    let wanted = match asked.as_str() {
        "" | "newest" => "1.37",
        "floor" => "1.33",
        exact => exact.get(..4).unwrap_or(exact),
    };
    assert_eq!(format!("{}.{}", version.major, version.minor), wanted, "{version:?}");

    // Namespace.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": NS}}))?)
        .await
        .context("creating namespace")?;

    // CRD (apiextensions.k8s.io/v1, namespaced, status subresource) -> Established.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.e2e.wasmop.dev"},
        "spec": {
            "group": "e2e.wasmop.dev",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
                    }
                }}
            }]
        }
    }))?;
    crds.create(&PostParams::default(), &crd).await.context("creating CRD")?;
    tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(crds.clone(), "widgets.e2e.wasmop.dev", conditions::is_crd_established()),
    )
    .await
    .context("CRD not Established within 30 s")??;

    // A custom resource: server-side apply of the object, then of its status subresource.
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("e2e.wasmop.dev", "v1", "Widget"), "widgets");
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ar);
    let ssa = PatchParams::apply(MANAGER);
    // The CRD's REST endpoint can lag a moment behind the Established condition.
    eventually("widget apply", Duration::from_secs(15), || async {
        let patch = json!({
            "apiVersion": "e2e.wasmop.dev/v1", "kind": "Widget",
            "metadata": {"name": "w1"}, "spec": {"size": 3}
        });
        Ok(Some(widgets.patch("w1", &ssa, &Patch::Apply(patch)).await?))
    })
    .await?;
    let status =
        json!({"apiVersion": "e2e.wasmop.dev/v1", "kind": "Widget", "metadata": {"name": "w1"}, "status": {"ready": true}});
    let w = widgets.patch_status("w1", &ssa, &Patch::Apply(status)).await.context("SSA on status")?;
    assert_eq!(w.data["status"]["ready"], json!(true));
    assert_eq!(w.data["spec"]["size"], json!(3));

    // Server-side apply a Deployment; kube-controller-manager creates its ReplicaSet and Pods.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let deploy = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}
            }
        }
    });
    let d = deployments.patch("web", &ssa, &Patch::Apply(deploy)).await.context("SSA of Deployment")?;
    let uid = d.metadata.uid.clone().context("deployment uid")?;
    let replicasets: Api<ReplicaSet> = Api::namespaced(client.clone(), NS);
    let rs = eventually("ReplicaSet owned by the Deployment", Duration::from_secs(30), || async {
        let owned = owned_replicasets(&replicasets, &uid).await?;
        Ok(owned.into_iter().next())
    })
    .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    eventually("2 Pods of the ReplicaSet", Duration::from_secs(30), || async {
        let n = pods.list(&ListParams::default().labels("app=web")).await?.items.len();
        Ok((n == 2).then_some(()))
    })
    .await?;
    // The scheduler binds them to the simulated Nodes, kwok marks them Ready, and the Deployment
    // becomes Available.
    eventually("the Deployment Available with 2 Ready Pods", Duration::from_secs(60), || async {
        let d = deployments.get("web").await?;
        let status = d.status.unwrap_or_default();
        Ok((status.available_replicas == Some(2) && status.ready_replicas == Some(2)).then_some(()))
    })
    .await
    .with_context(|| format!("kwok's log:\n{}", cp.log_tail("kwok", 20)))?;
    for pod in pods.list(&ListParams::default().labels("app=web")).await?.items {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
        assert!(node.starts_with("node-"), "{:?} runs on {node:?}", pod.metadata.name);
        assert_eq!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Running"));
    }

    // Stop the API server: requests fail; restart it on the same port and same etcd.
    let t1 = std::time::Instant::now();
    cp.stop_apiserver()?;
    eprintln!("apiserver stopped in {:?}", t1.elapsed());
    assert!(deployments.list(&ListParams::default()).await.is_err(), "list must fail while the API server is down");
    let t1 = std::time::Instant::now();
    cp.start_apiserver().await?;
    eprintln!("apiserver restarted and ready in {:?}", t1.elapsed());

    // Same client, same data.
    let names: Vec<String> =
        deployments.list(&ListParams::default()).await?.items.into_iter().filter_map(|d| d.metadata.name).collect();
    assert_eq!(names, vec!["web".to_owned()]);
    let w = widgets.get("w1").await?;
    assert_eq!(w.data["status"]["ready"], json!(true));
    assert_eq!(owned_replicasets(&replicasets, &uid).await?.len(), 1);

    // A crash (SIGKILL) and restart: still the same data.
    cp.kill_apiserver()?;
    cp.start_apiserver().await?;
    assert!(widgets.get_opt("w1").await?.is_some());

    // ownerReference garbage collection (by the restarted-against controller-manager).
    let t2 = std::time::Instant::now();
    deployments.delete("web", &DeleteParams::background()).await?;
    let rs_name = rs.metadata.name.clone().unwrap_or_default();
    eventually("ReplicaSet garbage-collected", Duration::from_secs(60), || async {
        Ok(replicasets.get_opt(&rs_name).await?.is_none().then_some(()))
    })
    .await
    .with_context(|| format!("controller-manager log:\n{}", cp.log_tail("kube-controller-manager", 20)))?;

    eprintln!("ReplicaSet garbage-collected in {:?}", t2.elapsed());
    Ok(())
}
