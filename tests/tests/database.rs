//! The Database example plugin on a real control plane: a `Database` becomes a headless
//! Service, a StatefulSet and a credentials Secret (granted by the host policy), its status
//! follows the StatefulSet — `Provisioning` while its Pod waits for a volume, `Ready` once the
//! claim is bound and the Pod runs on a simulated Node — the generated password survives later
//! reconciles, and invalid specs end in a terminal `Reconciled` condition that names the field.

use std::time::Duration;

use anyhow::{Context, Result};
use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};
use wasmop::policy::HostPolicy;
use wasmop::runtime::Runtime;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{Host, api_for, apply, apply_file, eventually, log_to_test_output};
use wasmop_e2e::plugins::{plugin, workspace};

const WAIT: Duration = Duration::from_secs(60);

fn database(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "db.example.com/v1alpha1", "kind": "Database",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

/// A 1Gi volume with no storage class, which a claim of the StatefulSet's binds to.
fn volume(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": format!("/tmp/{name}")}}})
}

/// The `Reconciled` condition of a Database once it describes its current generation.
async fn reconciled(dbs: &Api<DynamicObject>, name: &str) -> Result<Option<Value>> {
    let Some(db) = dbs.get_opt(name).await? else { return Ok(None) };
    let conditions = db.data.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let current =
        conditions.into_iter().find(|c| c["type"] == "Reconciled" && c["observedGeneration"].as_i64() == db.metadata.generation);
    Ok(current)
}

#[tokio::test]
async fn a_database_gets_its_service_stateful_set_and_a_kept_password_and_bad_specs_are_terminal() -> Result<()> {
    log_to_test_output();
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/database.yaml")).await?;
    let database_plugin = plugin("database", "wasm32-wasip2");

    // Without the policy's grant the plugin does not start, and says what it needs.
    let runtime = |policy: &str| -> Result<Runtime> {
        Ok(Runtime::builder().allowances(HostPolicy::from_yaml(policy)?.allowances()).artifact_dir(None).build()?)
    };
    let refused = Host::start_with(client.clone(), &[&database_plugin], Host::test_config(), runtime("")?).await;
    let message = format!("{:#}", refused.err().context("the database plugin must not start without a Secret grant")?);
    assert!(message.contains("writes v1/Secret (grant secrets: write)"), "{message}");
    let grant = "plugins: {database: {grants: {secrets: write}}}";
    let host = Host::start_with(client.clone(), &[&database_plugin], Host::test_config(), runtime(grant)?).await?;

    let (dbs, services, sets, secrets) = (
        api_for(&client, "db.example.com/v1alpha1", "Database", Some("default")).await?,
        api_for(&client, "v1", "Service", Some("default")).await?,
        api_for(&client, "apps/v1", "StatefulSet", Some("default")).await?,
        api_for(&client, "v1", "Secret", Some("default")).await?,
    );
    apply(&client, &database("orders", json!({"version": "17", "storageSize": "1Gi", "replicas": 1}))).await?;

    let svc = eventually("the headless Service", WAIT, || async { Ok(services.get_opt("orders").await?) }).await?;
    assert_eq!(svc.data["spec"]["clusterIP"], "None");
    let sts = eventually("the StatefulSet", WAIT, || async { Ok(sets.get_opt("orders").await?) }).await?;
    assert_eq!(sts.data["spec"]["template"]["spec"]["containers"][0]["image"], "postgres:17");
    assert_eq!(sts.data["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"], "1Gi");
    let secret = secrets.get("orders-credentials").await?;
    let password = secret.data["data"]["password"].clone();
    assert!(password.as_str().is_some_and(|p| !p.is_empty()), "{secret:?}");
    assert_eq!(secret.metadata.owner_references.as_ref().map(|o| o[0].name.as_str()), Some("orders"));

    // No volume for the StatefulSet's claim yet: its Pod cannot be scheduled, the Database says so.
    let db = eventually("the Database status", WAIT, || async {
        let db = dbs.get("orders").await?;
        Ok((db.data.pointer("/status/phase") == Some(&json!("Provisioning"))).then_some(db))
    })
    .await?;
    assert_eq!(db.data["status"]["readyReplicas"], 0);
    let ready = db.data["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").cloned();
    assert_eq!(ready.as_ref().map(|c| (&c["status"], &c["message"])), Some((&json!("False"), &json!("0/1 replicas ready"))));

    // Two volumes, as a cluster's administrator provides static storage: the claim binds, the
    // Pod runs on a simulated Node, and the Database is Ready.
    for i in 0..2 {
        apply(&client, &volume(&format!("orders-volume-{i}"))).await?;
    }
    let db = eventually("the Database Ready", WAIT, || async {
        let db = dbs.get("orders").await?;
        Ok((db.data.pointer("/status/phase") == Some(&json!("Ready"))).then_some(db))
    })
    .await
    .with_context(|| format!("kube-scheduler's log:\n{}", cp.log_tail("kube-scheduler", 10)))?;
    assert_eq!(db.data["status"]["readyReplicas"], 1);
    assert_eq!(sets.get("orders").await?.data["status"]["readyReplicas"], 1);

    // A spec change is reconciled again: the StatefulSet follows, the password stays.
    apply(&client, &database("orders", json!({"version": "17", "storageSize": "1Gi", "replicas": 2}))).await?;
    eventually("the StatefulSet scaled to 2", WAIT, || async {
        Ok((sets.get("orders").await?.data["spec"]["replicas"] == 2).then_some(()))
    })
    .await?;
    eventually("the Database Ready with 2 replicas", WAIT, || async {
        let db = dbs.get("orders").await?;
        Ok((db.data.pointer("/status/readyReplicas") == Some(&json!(2)) && db.data["status"]["phase"] == "Ready").then_some(()))
    })
    .await?;
    eventually("the re-reconcile recorded", WAIT, || async { reconciled(&dbs, "orders").await }).await?;
    assert_eq!(secrets.get("orders-credentials").await?.data["data"]["password"], password, "the password was regenerated");

    // So does a new host, which remembers nothing it applied before.
    host.manager.shutdown().await;
    let _host = Host::start_with(client.clone(), &[&database_plugin], Host::test_config(), runtime(grant)?).await?;
    apply(&client, &database("orders", json!({"version": "17", "storageSize": "1Gi", "replicas": 1}))).await?;
    eventually("the new host scaled the StatefulSet back to 1", WAIT, || async {
        Ok((sets.get("orders").await?.data["spec"]["replicas"] == 1).then_some(()))
    })
    .await?;
    eventually("the new host's reconcile recorded", WAIT, || async { reconciled(&dbs, "orders").await }).await?;
    assert_eq!(secrets.get("orders-credentials").await?.data["data"]["password"], password, "a new host regenerated it");

    // A storage size a StatefulSet cannot take: terminal, named, and nothing changes.
    apply(&client, &database("orders", json!({"version": "17", "storageSize": "2Gi", "replicas": 1}))).await?;
    let condition = eventually("the storage change refused", WAIT, || async { reconciled(&dbs, "orders").await }).await?;
    assert_eq!((&condition["status"], &condition["reason"]), (&json!("False"), &json!("ReconcileFailed")));
    let message = condition["message"].as_str().unwrap_or_default();
    assert!(message.contains("spec.storageSize cannot change from 1Gi to 2Gi"), "{message}");
    let claim = &sets.get("orders").await?.data["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"];
    assert_eq!(claim["storage"], "1Gi");

    // Values the schema lets through but the plugin refuses, each named.
    for (name, spec, wanted) in [
        ("bad-size", json!({"version": "17", "storageSize": "lots"}), "spec.storageSize: \"lots\" is not a quantity"),
        ("no-version", json!({"storageSize": "1Gi"}), "spec.version must be a postgres image tag like 17 or 16.4, got \"\""),
        ("too-many", json!({"version": "17", "storageSize": "1Gi", "replicas": 9}), "spec.replicas must be 1 to 5, got 9"),
    ] {
        apply(&client, &database(name, spec)).await?;
        let condition = eventually(&format!("{name} refused"), WAIT, || async { reconciled(&dbs, name).await }).await?;
        assert_eq!(condition["reason"], "ReconcileFailed", "{condition}");
        assert!(condition["message"].as_str().unwrap_or_default().contains(wanted), "{condition}");
        assert!(secrets.get_opt(&format!("{name}-credentials")).await?.is_none(), "{name}: nothing is written");
    }
    Ok(())
}
