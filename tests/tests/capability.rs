//! The host's one gate on a real control plane, with the host under exactly the RBAC
//! `wasmop rbac` prints for its plugins: the testbed's capability attacks (see
//! `plugins/testbed/src/capability.rs`) try to act as a cluster actor with the host's rights,
//! and each is refused — nothing written, the reason on the parent.
//!
//! - a cluster-scoped parent writing a Deployment with host access into `kube-system`, and a
//!   ClusterRoleBinding of the host's own ClusterRole to `system:authenticated`;
//! - adoption the policy does not grant (a user's ConfigMap), and the host's own Lease;
//! - a second plugin on the same parent kind taking over, or pruning, the first's child;
//! - a mutating webhook on a kind declared only as related (Pods), a validating webhook on
//!   Leases;
//! - a plugin declaring the host's `WasmPlugin` kind;
//! - Endpoints pointing a Service at the API server without the grant, a Service with
//!   `externalIPs`, and a mutating webhook giving Pods `seccompProfile: Unconfined`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use wasmop::admission::{Admission, AdmissionConfig, CertSource, HostObjects};
use wasmop::contract::{KnownKinds, Manifest};
use wasmop::controller::{BreakerConfig, Manager};
use wasmop::policy::HostPolicy;
use wasmop::reload::{ReloadConfig, Reloader};
use wasmop::runtime::Runtime;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{Host, api_for, apply, apply_file, eventually, log_to_test_output};
use wasmop_e2e::plugins::{plugin, plugin_with_features, workspace};

const WAIT: Duration = Duration::from_secs(30);
/// How long a refused write is watched for not happening.
const QUIET: Duration = Duration::from_secs(5);

/// Everything the `cluster-parent` build declares, granted: it may write in `tenant` only,
/// may bind (ClusterRoleBindings) and hold Leases, but has no host access and no adoption.
const CLUSTER_PARENT_GRANTS: &str = "plugins: {testbed: {grants: {writeNamespaces: [tenant], \
    clusterScopedChildren: [rbac.authorization.k8s.io/v1/ClusterRoleBinding], \
    escalationKinds: [rbac.authorization.k8s.io/v1/ClusterRoleBinding, coordination.k8s.io/v1/Lease]}}}";

const CRDS: &[&str] = &["crds/testbed.yaml", "crds/cluster-testbed.yaml", "crds/wasmplugin.yaml"];

fn runtime(policy: &str) -> Result<Runtime> {
    Ok(Runtime::builder().allowances(HostPolicy::from_yaml(policy)?.allowances()).artifact_dir(None).build()?)
}

async fn control_plane() -> Result<(ControlPlane, kube::Client)> {
    log_to_test_output();
    let cp = ControlPlane::start().await?;
    let admin = cp.client().await?;
    for crd in CRDS {
        apply_file(&admin, &workspace().join(crd)).await?;
    }
    for ns in ["tenant", "wasmop-system"] {
        apply(&admin, &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})).await?;
    }
    Ok((cp, admin))
}

/// A client authenticated as ServiceAccount `wasmop-system/wasmop`, bound to exactly what
/// `wasmop rbac` prints for `plugins` under `policy` (a plugin that does not load is left out,
/// as the host leaves it out).
async fn host_client(cp: &ControlPlane, admin: &kube::Client, plugins: &[&Path], policy: &str) -> Result<kube::Client> {
    let runtime = runtime(policy)?;
    let mut manifests: Vec<Manifest> = Vec::new();
    for path in plugins {
        if let Ok(plugin) = runtime.load_file(path).await {
            manifests.push(plugin.manifest().as_ref().clone());
        }
    }
    let mut kinds = KnownKinds::builtin();
    for crd in CRDS {
        kinds.add_crds(&workspace().join(crd))?;
    }
    let yaml = wasmop::rbac::render(&manifests, &HostPolicy::from_yaml(policy)?, &kinds, "wasmop", "wasmop-system", "wasmop")?;
    apply(
        admin,
        &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "wasmop", "namespace": "wasmop-system"}}),
    )
    .await?;
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("rbac.yaml"), &yaml)?;
    apply_file(admin, &dir.path().join("rbac.yaml")).await?;
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), "wasmop-system");
    let request = TokenRequest {
        spec: TokenRequestSpec { audiences: vec![], expiration_seconds: Some(3600), ..Default::default() },
        ..Default::default()
    };
    let token = sas.create_token_request("wasmop", &PostParams::default(), &request).await?;
    cp.client_with_token(&token.status.context("token issued")?.token).await
}

fn cluster_testbed(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "test.wasmop.dev/v1", "kind": "ClusterTestbed", "metadata": {"name": name}, "spec": spec})
}

fn testbed(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed", "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

/// The message of `object`'s `Reconciled=False` condition with `reason`, once it has one.
async fn refused(api: &Api<kube::api::DynamicObject>, name: &str, reason: &str) -> Result<String> {
    let condition = eventually(&format!("{name}: Reconciled=False {reason}"), WAIT, || async {
        let object = api.get(name).await?;
        let conditions = object.data.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
        Ok(conditions.into_iter().find(|c| c["type"] == "Reconciled" && c["reason"] == reason))
    })
    .await?;
    Ok(condition["message"].as_str().unwrap_or_default().to_owned())
}

/// Whether `api` holds `name`, after [`QUIET`] of letting the host try.
async fn exists_after_a_while(api: &Api<kube::api::DynamicObject>, name: &str) -> Result<bool> {
    tokio::time::sleep(QUIET).await;
    Ok(api.get_opt(name).await?.is_some())
}

#[tokio::test]
async fn a_cluster_scoped_parent_without_grants_is_not_started_and_writes_nothing() -> Result<()> {
    let (cp, admin) = control_plane().await?;
    let file = plugin_with_features("testbed", "wasm32-wasip2", &["cluster-parent"]);
    let client = host_client(&cp, &admin, &[&file], "").await?;
    let started = Host::start_with(client, &[&file], Host::test_config(), runtime("")?).await;
    let message = format!("{:#}", started.as_ref().err().context("the plugin must not start without grants")?);
    assert!(message.contains("writes the namespaced v1/ConfigMap from a cluster-scoped parent"), "{message}");
    assert!(message.contains("(grant escalationKinds: [rbac.authorization.k8s.io/v1/ClusterRoleBinding])"), "{message}");

    apply(&admin, &cluster_testbed("escape", json!({"mode": "kube-system-deployment"}))).await?;
    apply(&admin, &cluster_testbed("everyone", json!({"mode": "bind-authenticated"}))).await?;
    let deployments = api_for(&admin, "apps/v1", "Deployment", Some("kube-system")).await?;
    let bindings = api_for(&admin, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", None).await?;
    assert!(!exists_after_a_while(&deployments, "escape-root").await?, "no Deployment in kube-system");
    assert!(bindings.get_opt("everyone-everyone").await?.is_none(), "no binding to the host's role");
    Ok(())
}

#[tokio::test]
async fn a_cluster_scoped_parent_writes_only_where_granted_and_never_with_the_hosts_rights() -> Result<()> {
    let (cp, admin) = control_plane().await?;
    let cms = api_for(&admin, "v1", "ConfigMap", Some("tenant")).await?;
    let leases = api_for(&admin, "coordination.k8s.io/v1", "Lease", Some("tenant")).await?;
    apply(
        &admin,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "users", "namespace": "tenant"},
        "data": {"owner": "a user"}}),
    )
    .await?;
    // Stands in for the host's leader Lease (the host names it `wasmop`).
    apply(
        &admin,
        &json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "wasmop", "namespace": "tenant"}, "spec": {"holderIdentity": "host-0", "leaseDurationSeconds": 15}}),
    )
    .await?;
    let file = plugin_with_features("testbed", "wasm32-wasip2", &["cluster-parent"]);
    let client = host_client(&cp, &admin, &[&file], CLUSTER_PARENT_GRANTS).await?;
    // The RBAC `wasmop rbac` printed matches the gate: the host's identity writes ConfigMaps in
    // `tenant` (a Role there), not in every namespace (a ClusterRole).
    let probe: kube::api::DynamicObject =
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe"}}))?;
    let elsewhere = api_for(&client, "v1", "ConfigMap", Some("default")).await?.create(&PostParams::default(), &probe).await;
    assert!(
        matches!(&elsewhere, Err(kube::Error::Api(status)) if status.code == 403),
        "the host's identity must not write ConfigMaps outside writeNamespaces: {elsewhere:?}"
    );
    // Every refused parent is retried and reported on its own: the breaker never trips here.
    let mut config = Host::test_config();
    config.breaker = BreakerConfig::default().window_calls(1_000_000);
    let _host = Host::start_with(client, &[&file], config, runtime(CLUSTER_PARENT_GRANTS)?).await?;
    let parents = api_for(&admin, "test.wasmop.dev/v1", "ClusterTestbed", None).await?;

    // Where it is granted, it writes (so what follows is the gate, not a broken plugin).
    apply(&admin, &cluster_testbed("fine", json!({"mode": "adopt", "target": "fresh", "namespace": "tenant"}))).await?;
    let fresh = eventually("ConfigMap tenant/fresh applied", WAIT, || async { Ok(cms.get_opt("fresh").await?) }).await?;
    assert_eq!(fresh.data["data"]["takenBy"], "fine");

    apply(&admin, &cluster_testbed("escape", json!({"mode": "kube-system-deployment"}))).await?;
    let message = refused(&parents, "escape", "ActionRefused").await?;
    assert!(
        message.contains("kube-system/escape-root is in namespace \"kube-system\", which the host's policy does not grant"),
        "{message}"
    );
    let system = api_for(&admin, "apps/v1", "Deployment", Some("kube-system")).await?;
    assert!(system.get_opt("escape-root").await?.is_none());

    apply(&admin, &cluster_testbed("rooted", json!({"mode": "kube-system-deployment", "namespace": "tenant"}))).await?;
    let message = refused(&parents, "rooted", "ActionRefused").await?;
    assert!(message.contains("asks for host access") && message.contains("mounts the host path \"/\""), "{message}");
    let tenant = api_for(&admin, "apps/v1", "Deployment", Some("tenant")).await?;
    assert!(tenant.get_opt("rooted-root").await?.is_none());

    apply(&admin, &cluster_testbed("everyone", json!({"mode": "bind-authenticated"}))).await?;
    let message = refused(&parents, "everyone", "ActionRefused").await?;
    assert!(message.contains("it binds the host's own role \"wasmop\""), "{message}");
    let bindings = api_for(&admin, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", None).await?;
    assert!(bindings.get_opt("everyone-everyone").await?.is_none());

    // Adoption: the manifest asks for it, the policy does not grant it.
    apply(&admin, &cluster_testbed("adopter", json!({"mode": "adopt", "target": "users", "namespace": "tenant"}))).await?;
    let message = refused(&parents, "adopter", "AlreadyOwned").await?;
    assert!(message.contains("tenant/users already exists and is controlled by nobody"), "{message}");
    assert_eq!(cms.get("users").await?.data["data"], json!({"owner": "a user"}));

    // The host's Lease, whatever is granted.
    apply(&admin, &cluster_testbed("leaser", json!({"mode": "take-lease", "namespace": "tenant"}))).await?;
    let message = refused(&parents, "leaser", "ActionRefused").await?;
    assert!(message.contains("tenant/wasmop is reserved for the host"), "{message}");
    assert_eq!(leases.get("wasmop").await?.data["spec"]["holderIdentity"], "host-0");
    Ok(())
}

#[tokio::test]
async fn a_second_plugin_on_the_same_kind_neither_takes_over_nor_prunes_the_firsts_child() -> Result<()> {
    let (cp, admin) = control_plane().await?;
    let (victim, twin) = (plugin("testbed", "wasm32-wasip2"), plugin_with_features("testbed", "wasm32-wasip2", &["twin"]));
    let client = host_client(&cp, &admin, &[&victim, &twin], "").await?;
    let _host = Host::start_with(client, &[&victim, &twin], Host::test_config(), runtime("")?).await?;
    let cms = api_for(&admin, "v1", "ConfigMap", Some("default")).await?;

    // The twin answers the parents with nothing at all, pruning on: the victim's children are
    // not its to prune.
    apply(&admin, &testbed("shared", json!({"mode": "ok", "twinMode": "idle"}))).await?;
    apply(&admin, &testbed("pruned", json!({"mode": "ok", "twinMode": "idle"}))).await?;
    let uid = |cm: &kube::api::DynamicObject| cm.metadata.uid.clone().unwrap_or_default();
    let shared = eventually("shared-out applied", WAIT, || async { Ok(cms.get_opt("shared-out").await?) }).await?;
    let pruned = eventually("pruned-out applied", WAIT, || async { Ok(cms.get_opt("pruned-out").await?) }).await?;
    // Then the twin answers one parent with the victim's child: refused, AlreadyOwned.
    apply(&admin, &testbed("shared", json!({"mode": "ok", "twinMode": "take"}))).await?;
    let events = api_for(&admin, "events.k8s.io/v1", "Event", Some("default")).await?;
    let refusal = eventually("a Warning AlreadyOwned event for shared", WAIT, || async {
        let list = events.list(&ListParams::default()).await?;
        Ok(list.items.into_iter().find(|e| e.data["reason"] == "AlreadyOwned" && e.data["regarding"]["name"] == "shared"))
    })
    .await?;
    let note = refusal.data["note"].as_str().unwrap_or_default();
    assert!(note.contains("controlled by plugin testbed (label wasmop.dev/plugin)"), "{note}");
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = cms.get("shared-out").await?;
        assert_eq!(now.data["data"], json!({"mode": "ok"}), "the victim's child is not taken over");
        assert_eq!(uid(&now), uid(&shared));
        assert_eq!(uid(&cms.get("pruned-out").await?), uid(&pruned), "the victim's child is not pruned");
    }
    Ok(())
}

/// A host on the plugins directory `dir` (reporting to `WasmPlugin`s), with its identity's RBAC.
async fn reloading_host(client: kube::Client, dir: &Path) -> Result<(Arc<Manager>, tokio::task::JoinHandle<notify::Result<()>>)> {
    let manager = Arc::new(Manager::new(client, runtime("")?, Host::test_config()));
    let config = ReloadConfig { debounce: Duration::from_millis(100), rescan: Duration::from_secs(60) };
    let reloader = Reloader::new(Arc::clone(&manager), dir, config);
    let watch = tokio::spawn(Arc::clone(&reloader).run());
    Ok((manager, watch))
}

/// The `Ready` message of `WasmPlugin` `name` once its reason is `reason` (the plugin is
/// compiled first: minutes on a busy machine).
async fn report(admin: &kube::Client, name: &str, reason: &str) -> Result<String> {
    let wasmplugins = api_for(admin, "wasmop.dev/v1alpha1", "WasmPlugin", None).await?;
    let ready = eventually(&format!("WasmPlugin {name}: Ready=False {reason}"), WAIT * 4, || async {
        let Some(wp) = wasmplugins.get_opt(name).await? else { return Ok(None) };
        let conditions = wp.data.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
        Ok(conditions.into_iter().find(|c| c["type"] == "Ready" && c["reason"] == reason))
    })
    .await?;
    Ok(ready["message"].as_str().unwrap_or_default().to_owned())
}

#[tokio::test]
async fn webhooks_that_mutate_a_related_kind_or_veto_leases_are_not_started() -> Result<()> {
    let (cp, admin) = control_plane().await?;
    let file = plugin_with_features("testbed", "wasm32-wasip2", &["hostile-webhooks"]);
    let dir = tempfile::tempdir()?;
    std::fs::copy(&file, dir.path().join("testbed.wasm"))?;
    let client = host_client(&cp, &admin, &[&file], "").await?;
    let (manager, _reloader) = reloading_host(client, dir.path()).await?;
    let message = report(&admin, "testbed", "NotStarted").await?;
    assert!(message.contains("mutates pods in webhook \"inject\", a resource it does not write"), "{message}");
    assert!(message.contains("admits Lease, which holds or blocks leader election, in webhook \"veto-leases\""), "{message}");
    assert!(manager.controller("testbed").is_none(), "not running, so no webhook of it is served");
    Ok(())
}

#[tokio::test]
async fn a_plugin_declaring_the_hosts_wasmplugin_kind_is_refused_at_load() -> Result<()> {
    let (cp, admin) = control_plane().await?;
    let file = plugin_with_features("testbed", "wasm32-wasip2", &["forges-reports"]);
    let dir = tempfile::tempdir()?;
    std::fs::copy(&file, dir.path().join("testbed.wasm"))?;
    let client = host_client(&cp, &admin, &[&file], "").await?;
    let (manager, _reloader) = reloading_host(client, dir.path()).await?;
    let message = report(&admin, "testbed.wasm", "InvalidManifest").await?;
    assert!(message.contains("parent wasmop.dev/v1alpha1/WasmPlugin is one of the host's own kinds"), "{message}");
    assert!(manager.controller("testbed").is_none());
    let wasmplugins = api_for(&admin, "wasmop.dev/v1alpha1", "WasmPlugin", None).await?;
    assert!(wasmplugins.get_opt("testbed").await?.is_none(), "no report of a plugin that never ran, forged or not");
    Ok(())
}

/// The address of the API server, as its `default/kubernetes` Endpoints (or, without them, the
/// Service) name it.
async fn api_server_address(admin: &kube::Client) -> Result<String> {
    let endpoints = api_for(admin, "v1", "Endpoints", Some("default")).await?;
    let listed = endpoints
        .get_opt("kubernetes")
        .await?
        .and_then(|e| e.data.pointer("/subsets/0/addresses/0/ip").and_then(Value::as_str).map(str::to_owned));
    if let Some(ip) = listed {
        return Ok(ip);
    }
    let services = api_for(admin, "v1", "Service", Some("default")).await?;
    let service = services.get("kubernetes").await?;
    Ok(service.data.pointer("/spec/clusterIP").and_then(Value::as_str).context("kubernetes Service clusterIP")?.to_owned())
}

#[tokio::test]
async fn a_plugin_declaring_endpoints_is_not_started_without_the_grant_and_points_no_service_at_the_api_server() -> Result<()> {
    let (cp, admin) = control_plane().await?;
    let file = plugin_with_features("testbed", "wasm32-wasip2", &["edge-kinds"]);
    let client = host_client(&cp, &admin, &[&file], "").await?;
    let started = Host::start_with(client, &[&file], Host::test_config(), runtime("")?).await;
    let message = format!("{:#}", started.as_ref().err().context("the plugin must not start without the Endpoints grant")?);
    assert!(
        message.contains(
            "writes v1/Endpoints, which points a Service at any address, the API server's or a metadata endpoint's \
             (grant escalationKinds: [v1/Endpoints])"
        ),
        "{message}"
    );
    let ip = api_server_address(&admin).await?;
    apply(&admin, &testbed("hijack", json!({"mode": "endpoints-to-apiserver", "ip": ip}))).await?;
    let endpoints = api_for(&admin, "v1", "Endpoints", Some("default")).await?;
    assert!(!exists_after_a_while(&endpoints, "hijack-api").await?, "no Endpoints pointing at the API server");
    Ok(())
}

/// The `edge-kinds` build granted Endpoints: it may point its own Service anywhere, nothing more.
const EDGE_GRANTS: &str = "plugins: {testbed: {grants: {escalationKinds: [v1/Endpoints]}}}";

#[tokio::test]
async fn a_service_with_external_ips_and_a_mutation_unconfining_pods_are_refused_under_the_hosts_rbac() -> Result<()> {
    let (cp, admin) = control_plane().await?;
    let file = plugin_with_features("testbed", "wasm32-wasip2", &["edge-kinds"]);
    let client = host_client(&cp, &admin, &[&file], EDGE_GRANTS).await?;
    let host = Host::start_with(client, &[&file], Host::test_config(), runtime(EDGE_GRANTS)?).await?;
    let parents = api_for(&admin, "test.wasmop.dev/v1", "Testbed", Some("default")).await?;
    let services = api_for(&admin, "v1", "Service", Some("default")).await?;

    // Granted, Endpoints are written (so what follows is the gate, not a broken plugin).
    apply(&admin, &testbed("granted", json!({"mode": "endpoints-to-apiserver", "ip": "10.1.2.3"}))).await?;
    let endpoints = api_for(&admin, "v1", "Endpoints", Some("default")).await?;
    eventually("Endpoints granted-api applied", WAIT, || async { Ok(endpoints.get_opt("granted-api").await?) }).await?;

    let ip = api_server_address(&admin).await?;
    apply(&admin, &testbed("intercept", json!({"mode": "external-ips", "ip": ip}))).await?;
    let message = refused(&parents, "intercept", "ActionRefused").await?;
    assert!(
        message.contains(&format!("is a Service with spec.externalIPs {ip}, which intercepts the traffic"))
            && message.contains("(grant escalationKinds: [v1/Service])"),
        "{message}"
    );
    assert!(services.get_opt("intercept-intercept").await?.is_none(), "no Service with externalIPs");

    // The webhook mutates Pods, a declared child kind: allowed, but not into unconfined ones.
    let certs = CertSource::Secret {
        namespace: "wasmop-system".into(),
        name: "wasmop-admission-tls".into(),
        names: vec!["127.0.0.1".into()],
    };
    let config = AdmissionConfig {
        host: HostObjects {
            namespace: Some("wasmop-system".into()),
            lease_namespace: "wasmop-system".into(),
            secret: Some(("wasmop-system".into(), "wasmop-admission-tls".into())),
        },
        ..AdmissionConfig::new(certs)
    };
    let admission = Admission::start(config, Arc::clone(&host.manager)).await?;
    admission.observer().plugins_changed(None).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "victim", "labels": {"testbed-admission": "unconfine"}},
        "spec": {"containers": [{"name": "web", "image": "registry.invalid/web:1"}]}}))?;
    // Until the API server calls the webhook, a create is stored: take it back and retry.
    let denied = eventually("the unconfining mutation denied", WAIT, || async {
        Ok(match pods.create(&PostParams::default(), &pod).await {
            Ok(_) => {
                pods.delete("victim", &Default::default()).await?;
                anyhow::bail!("stored")
            }
            Err(e) if e.to_string().contains("InvalidMutation") || e.to_string().contains("denied") => Some(e.to_string()),
            Err(e) => anyhow::bail!("{e}"),
        })
    })
    .await?;
    assert!(denied.contains("spec.containers[0] (web).securityContext.seccompProfile.type is Unconfined"), "{denied}");
    assert!(pods.get_opt("victim").await?.is_none_or(|p| p.metadata.deletion_timestamp.is_some()));
    Ok(())
}
