//! Plugins pulled from a real OCI registry (Debian's docker-registry on loopback) into the
//! plugins directory of a host on a real control plane: what `oras push` pushed runs, a new
//! push under the same tag is swapped in, a tampered blob and wrong credentials are refused
//! while the previous version keeps serving, and each says so on the `WasmPlugin`. With
//! signatures required, only artifacts signed by a trusted key run.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, ensure};
use bytes::Bytes;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use wasmop::contract::KnownKinds;
use wasmop::controller::{ControllerConfig, Manager};
use wasmop::policy::{HostPolicy, OciReference, TrustedKey};
use wasmop::registry::{
    Credentials, OCI_MANIFEST_MEDIA_TYPE, PullCache, PullContext, PullMetrics, PullTarget, Puller, RegistryClient, SigningKey,
    WASM_CONFIG_MEDIA_TYPE, manifest, sha256_digest, sign, signature_tag,
};
use wasmop::reload::{ReloadConfig, Reloader};
use wasmop::runtime::Runtime;
use wasmop_e2e::cluster::{api_for, apply, apply_file, eventually, log_to_test_output};
use wasmop_e2e::plugins::{plugin, plugin_with_features, workspace};
use wasmop_e2e::polyglot::memcached_py;
use wasmop_e2e::registry::{Registry, run_oras};
use wasmop_e2e::{ControlPlane, StaticToken};

const WAIT: Duration = Duration::from_secs(60);
const V2_LABEL: &str = "wasmop.dev/test-version";

/// A host following `policy`'s sources (and its plugins directory), on a fresh control plane.
struct Host {
    _cp: ControlPlane,
    client: kube::Client,
    _dir: tempfile::TempDir,
    manager: Arc<Manager>,
    _watch: tokio::task::JoinHandle<notify::Result<()>>,
    _puller: Puller,
}

async fn control_plane(token: Option<&StaticToken>) -> Result<(ControlPlane, kube::Client)> {
    log_to_test_output();
    let cp = ControlPlane::start_with_tokens(token.map(std::slice::from_ref).unwrap_or_default()).await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/memcached.yaml")).await?;
    apply_file(&client, &workspace().join("crds/wasmplugin.yaml")).await?;
    Ok((cp, client))
}

/// A host on `cp` authenticating as `host` (`client` is the admin's, for the test itself).
async fn start_host(cp: ControlPlane, client: kube::Client, host: kube::Client, policy: &str) -> Result<Host> {
    start_host_with_artifacts(cp, client, host, policy, None).await
}

/// [`start_host`], its compiled plugins kept in `artifacts` (default: a fresh directory).
async fn start_host_with_artifacts(
    cp: ControlPlane,
    client: kube::Client,
    host: kube::Client,
    policy: &str,
    artifacts: Option<std::path::PathBuf>,
) -> Result<Host> {
    let dir = tempfile::tempdir()?;
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins)?;
    let policy = HostPolicy::from_yaml(policy)?;
    let artifacts = artifacts.unwrap_or_else(|| dir.path().join("artifacts"));
    let runtime = Runtime::builder().allowances(policy.allowances()).artifact_dir(Some(artifacts)).build()?;
    let targets: Vec<PullTarget> = policy
        .sources()
        .into_iter()
        .map(|(name, source)| PullTarget { max_bytes: policy.for_plugin(&name).max_module_bytes(), name, source })
        .collect();
    let manager = Arc::new(Manager::new(host.clone(), runtime, ControllerConfig { resync: None, policy, ..Default::default() }));
    let reload = ReloadConfig { debounce: Duration::from_millis(100), rescan: Duration::from_secs(5) };
    let reloader = Reloader::new(Arc::clone(&manager), &plugins, reload);
    let watch = tokio::spawn(Arc::clone(&reloader).run());
    let ctx = PullContext {
        plugins_dir: plugins.clone(),
        cache: PullCache::new(PullCache::beside(&plugins)),
        client: Some(host),
        reloader: Some(reloader),
        metrics: PullMetrics::registered(manager.metrics()),
        verification: manager.policy().verification().clone(),
    };
    let puller = Puller::start(ctx, targets);
    Ok(Host { _cp: cp, client, _dir: dir, manager, _watch: watch, _puller: puller })
}

fn memcached(name: &str) -> Value {
    json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"size": 1}})
}

/// The Deployment of Memcached `name` exists (with the v2 label when `v2`).
async fn converged(client: &kube::Client, name: &str, v2: bool) -> Result<()> {
    let api = api_for(client, "apps/v1", "Deployment", Some("default")).await?;
    eventually(&format!("Deployment {name} (v2 label: {v2})"), WAIT, || async {
        let found = api.get_opt(name).await?;
        Ok(found.filter(|d| d.metadata.labels.as_ref().and_then(|l| l.get(V2_LABEL)).is_some() == v2).map(|_| ()))
    })
    .await
}

/// No Memcached has a failed `Reconciled` condition.
async fn no_failed_reconciles(client: &kube::Client) -> Result<()> {
    let crs = api_for(client, "cache.example.com/v1alpha1", "Memcached", Some("default")).await?;
    for cr in crs.list(&ListParams::default()).await?.items {
        let conditions = cr.data.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
        for c in conditions {
            ensure!(!(c["type"] == "Reconciled" && c["status"] == "False"), "{:?}: {c}", cr.metadata.name);
        }
    }
    Ok(())
}

/// The `WasmPlugin` `name` once `pred` holds for it.
async fn wasm_plugin_when(client: &kube::Client, name: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Result<Value> {
    let api = api_for(client, "wasmop.dev/v1alpha1", "WasmPlugin", None).await?;
    eventually(&format!("WasmPlugin {name}: {what}"), WAIT, || async {
        let found: Option<DynamicObject> = api.get_opt(name).await?;
        Ok(found.map(|o| o.data).filter(|d| pred(d)))
    })
    .await
}

fn ready(plugin: &Value) -> Value {
    let conditions = plugin.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    conditions.into_iter().find(|c| c["type"] == "Ready").unwrap_or(Value::Null)
}

fn version(host: &Host) -> Option<String> {
    host.manager.controller("memcached").map(|c| c.plugin().manifest().version.clone())
}

/// `wasm` with a custom section appended: a valid component with another digest.
fn with_custom_section(wasm: &[u8], payload: &[u8]) -> Vec<u8> {
    let name = b"wasmop-test";
    let size = 1 + name.len() + payload.len();
    assert!(size < 128, "one-byte LEB128 sizes only");
    let mut out = wasm.to_vec();
    out.extend([0u8, size as u8, name.len() as u8]);
    out.extend(name);
    out.extend(payload);
    out
}

/// The pull counter of `plugin` for `outcome`, as `/metrics` shows it.
fn pulls(host: &Host, outcome: &str) -> u64 {
    let text = host.manager.metrics().render();
    let prefix = format!("wasmop_plugin_pulls_total{{plugin=\"memcached\",outcome=\"{outcome}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(&prefix)?.trim().parse().ok()).unwrap_or(0)
}

#[tokio::test]
async fn a_pulled_plugin_runs_follows_its_tag_and_refuses_a_tampered_blob() -> Result<()> {
    let registry = Registry::start()?;
    let v1 = plugin("memcached", "wasm32-wasip2");
    let v2 = plugin_with_features("memcached", "wasm32-wasip2", &["test-v2"]);
    // v1 pushed by another OCI client: the CNCF layout as oras writes it.
    let work = tempfile::tempdir()?;
    std::fs::copy(&v1, work.path().join("memcached.wasm"))?;
    std::fs::write(work.path().join("config.json"), br#"{"architecture":"wasm","os":"wasip2"}"#)?;
    let target = format!("{}/plugins/memcached:stable", registry.host());
    run_oras(
        &[
            "push",
            "--plain-http",
            &target,
            "--config",
            &format!("config.json:{WASM_CONFIG_MEDIA_TYPE}"),
            "memcached.wasm:application/wasm",
        ],
        work.path(),
    )?;
    let (cp, client) = control_plane(None).await?;
    let source = registry.reference("plugins/memcached:stable");
    let policy = format!("plugins:\n  memcached: {{source: \"{source}\", pullInterval: 1s, insecure: true}}\n");
    let host = start_host(cp, client.clone(), client, &policy).await?;

    eventually("memcached 0.1.0 serving", WAIT, || async { Ok((version(&host).as_deref() == Some("0.1.0")).then_some(())) })
        .await?;
    apply(&host.client, &memcached("pulled-1")).await?;
    converged(&host.client, "pulled-1", false).await?;
    let wp = wasm_plugin_when(&host.client, "memcached", "pulled and Ready", |p| {
        p.pointer("/status/pull/state") == Some(&json!("Pulled")) && ready(p)["status"] == "True"
    })
    .await?;
    let v1_digest = wp.pointer("/status/pull/digest").and_then(Value::as_str).unwrap_or_default().to_owned();
    ensure!(wp.pointer("/status/pull/source") == Some(&json!(source)), "{wp}");

    // v2 pushed under the same tag by wasmop: swapped in, every parent follows, none fails.
    let reference = OciReference::parse(&source).map_err(anyhow::Error::msg)?;
    let client = RegistryClient::new(&registry.host(), true, None);
    let pushed = wasmop::registry::push(&client, &reference, Bytes::from(std::fs::read(&v2)?), "memcached.wasm").await?;
    ensure!(pushed.manifest_digest != v1_digest);
    eventually("memcached 0.2.0 serving", WAIT, || async { Ok((version(&host).as_deref() == Some("0.2.0")).then_some(())) })
        .await?;
    converged(&host.client, "pulled-1", true).await?;
    wasm_plugin_when(&host.client, "memcached", "the new digest", |p| {
        p.pointer("/status/pull/digest") == Some(&json!(pushed.manifest_digest)) && ready(p)["status"] == "True"
    })
    .await?;
    no_failed_reconciles(&host.client).await?;

    // A new artifact whose layer is tampered with in the registry's storage before its manifest
    // is pushed: refused, 0.2.0 keeps serving, the WasmPlugin says why.
    let third = with_custom_section(&std::fs::read(&v2)?, b"three");
    let (manifest_bytes, config) = manifest(&third, "memcached.wasm");
    let layer = client.push_blob(&reference.repository, Bytes::from(third.clone())).await?;
    client.push_blob(&reference.repository, Bytes::from(config)).await?;
    let mut tampered = third.clone();
    *tampered.last_mut().expect("not empty") ^= 0x01;
    std::fs::write(registry.blob_path(&layer), &tampered)?;
    client.put_manifest(&reference.repository, "stable", OCI_MANIFEST_MEDIA_TYPE, Bytes::from(manifest_bytes)).await?;
    let wp =
        wasm_plugin_when(&host.client, "memcached", "Ready=False, DigestMismatch", |p| ready(p)["reason"] == "DigestMismatch")
            .await?;
    let ready_condition = ready(&wp);
    ensure!(ready_condition["status"] == "False", "{wp}");
    ensure!(ready_condition["message"].as_str().is_some_and(|m| m.contains("version 0.2.0 keeps serving")), "{wp}");
    ensure!(wp.pointer("/status/pull/state") == Some(&json!("Failed")), "{wp}");
    ensure!(wp.pointer("/status/pull/digest") == Some(&json!(pushed.manifest_digest)), "the last good digest stays: {wp}");
    ensure!(pulls(&host, "digest_mismatch") >= 1, "{}", host.manager.metrics().render());
    ensure!(version(&host).as_deref() == Some("0.2.0"));
    ensure!(
        std::fs::read_dir(host._dir.path().join("plugins"))?.count() == 1,
        "nothing but memcached.wasm in the plugins directory"
    );
    apply(&host.client, &memcached("pulled-2")).await?;
    converged(&host.client, "pulled-2", true).await?;
    no_failed_reconciles(&host.client).await?;

    // A good push under the tag again: pulled, Ready again.
    let fourth = wasmop::registry::push(
        &client,
        &reference,
        Bytes::from(with_custom_section(&std::fs::read(&v1)?, b"four")),
        "memcached.wasm",
    )
    .await?;
    eventually("memcached 0.1.0 serving again", WAIT, || async {
        Ok((version(&host).as_deref() == Some("0.1.0")).then_some(()))
    })
    .await?;
    wasm_plugin_when(&host.client, "memcached", "Ready again on the fourth push", |p| {
        p.pointer("/status/pull/digest") == Some(&json!(fourth.manifest_digest)) && ready(p)["status"] == "True"
    })
    .await?;
    converged(&host.client, "pulled-2", false).await?;
    no_failed_reconciles(&host.client).await?;
    Ok(())
}

/// Bind `user` to the ClusterRole `wasmop rbac` prints for memcached under `policy`, and to the
/// Role it prints for the registry credentials' Secrets (`get` by name).
async fn grant_what_rbac_prints(admin: &kube::Client, policy: &HostPolicy, user: &str) -> Result<()> {
    let manifest = Runtime::builder().artifact_dir(None).build()?.load_file(plugin("memcached", "wasm32-wasip2")).await?;
    let mut kinds = KnownKinds::builtin();
    kinds.add_crds(&workspace().join("crds"))?;
    let rules = wasmop::rbac::rules(&[(**manifest.manifest()).clone()], policy, &kinds)?;
    let subject = json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]);
    apply(
        admin,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "wasmop-host"}, "rules": rules}),
    )
    .await?;
    apply(
        admin,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "wasmop-host"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "wasmop-host"}, "subjects": subject}),
    )
    .await?;
    for (namespace, secrets) in wasmop::rbac::pull_secrets(policy) {
        let metadata = json!({"name": "wasmop-host-pull-secrets", "namespace": namespace});
        apply(
            admin,
            &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": metadata,
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": secrets, "verbs": ["get"]}]}),
        )
        .await?;
        apply(
            admin,
            &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "wasmop-host-pull-secrets"},
            "subjects": subject}),
        )
        .await?;
    }
    Ok(())
}

/// A `kubernetes.io/dockerconfigjson` Secret `default/regcred` for `registry`.
async fn set_credentials(client: &kube::Client, registry: &str, user: &str, password: &str) -> Result<()> {
    let config = json!({"auths": {registry: {"username": user, "password": password}}});
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "regcred", "namespace": "default"},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": config.to_string()},
    }))?;
    let api: Api<Secret> = Api::namespaced(client.clone(), "default");
    api.patch("regcred", &PatchParams::apply("registry-test").force(), &Patch::Apply(&secret)).await?;
    Ok(())
}

#[tokio::test]
async fn wrong_credentials_and_unknown_tags_are_refused_and_the_previous_version_keeps_serving() -> Result<()> {
    let registry = Registry::start_with_auth("alice", "s3cret")?;
    let v1 = plugin("memcached", "wasm32-wasip2");
    let source = registry.reference("plugins/memcached:1");
    let reference = OciReference::parse(&source).map_err(anyhow::Error::msg)?;
    let anonymous = RegistryClient::new(&registry.host(), true, None);
    let err =
        wasmop::registry::push(&anonymous, &reference, Bytes::from(std::fs::read(&v1)?), "memcached.wasm").await.unwrap_err();
    ensure!(err.reason() == "Unauthorized", "{err}");
    let alice = Credentials { username: "alice".into(), password: "s3cret".into() };
    let client = RegistryClient::new(&registry.host(), true, Some(alice));
    wasmop::registry::push(&client, &reference, Bytes::from(std::fs::read(&v1)?), "memcached.wasm").await?;

    // The host runs as a user granted only what `wasmop rbac` prints: the Secret by name.
    let token = StaticToken::new("host-token", "wasmop-host", &[]);
    let (cp, client) = control_plane(Some(&token)).await?;
    set_credentials(&client, &registry.host(), "alice", "s3cret").await?;
    let ghost = registry.reference("plugins/ghost:1");
    let policy = format!(
        "plugins:\n  memcached: {{source: \"{source}\", pullInterval: 1s, insecure: true, credentials: {{secret: default/regcred}}}}\n  \
         ghost: {{source: \"{ghost}\", insecure: true, credentials: {{secret: default/regcred}}}}\n"
    );
    grant_what_rbac_prints(&client, &HostPolicy::from_yaml(&policy)?, &token.user).await?;
    let as_host = cp.client_with_token(&token.token).await?;
    let host = start_host(cp, client, as_host, &policy).await?;
    eventually("memcached 0.1.0 serving", WAIT, || async { Ok((version(&host).as_deref() == Some("0.1.0")).then_some(())) })
        .await?;
    apply(&host.client, &memcached("private-1")).await?;
    converged(&host.client, "private-1", false).await?;

    // A tag the registry does not have: a WasmPlugin says so, and nothing runs for it.
    let wp = wasm_plugin_when(&host.client, "ghost", "Ready=False, NotFound", |p| ready(p)["reason"] == "NotFound").await?;
    ensure!(ready(&wp)["message"].as_str().is_some_and(|m| m.contains("no version of the plugin runs")), "{wp}");
    ensure!(host.manager.controller("ghost").is_none());

    // The Secret's password changed to a wrong one: refused, 0.1.0 keeps serving.
    set_credentials(&host.client, &registry.host(), "alice", "wrong").await?;
    let wp = wasm_plugin_when(&host.client, "memcached", "Ready=False, Unauthorized", |p| ready(p)["reason"] == "Unauthorized")
        .await?;
    ensure!(
        ready(&wp)["message"].as_str().is_some_and(|m| m.contains("version 0.1.0 keeps serving") && m.contains("alice")),
        "{wp}"
    );
    ensure!(pulls(&host, "unauthorized") >= 1, "{}", host.manager.metrics().render());
    apply(&host.client, &memcached("private-2")).await?;
    converged(&host.client, "private-2", false).await?;
    ensure!(version(&host).as_deref() == Some("0.1.0"));

    // Fixed again: Ready again.
    set_credentials(&host.client, &registry.host(), "alice", "s3cret").await?;
    wasm_plugin_when(&host.client, "memcached", "Ready again", |p| ready(p)["status"] == "True").await?;
    no_failed_reconciles(&host.client).await?;
    Ok(())
}

/// A policy pulling memcached from `source` every second, signatures required, `keys` trusted.
fn signed_policy(source: &str, keys: &[TrustedKey]) -> String {
    let mut policy = format!(
        "plugins:\n  memcached: {{source: \"{source}\", pullInterval: 1s, insecure: true}}\n\
         verification:\n  requireSignature: true\n  keys:\n"
    );
    for key in keys {
        policy.push_str(&format!("    - name: {}\n      publicKey: |\n", key.name));
        for line in key.to_pem().lines() {
            policy.push_str(&format!("        {line}\n"));
        }
    }
    policy
}

/// Wait for `Ready=False` with `reason` on memcached's `WasmPlugin`, then check that version
/// 0.1.0 still serves, says so, counts the failure as `outcome`, and reconciles a new parent.
async fn refused_while_v1_serves(host: &Host, reason: &str, outcome: &str, parent: &str) -> Result<()> {
    let wp =
        wasm_plugin_when(&host.client, "memcached", &format!("Ready=False, {reason}"), |p| ready(p)["reason"] == reason).await?;
    ensure!(ready(&wp)["status"] == "False", "{wp}");
    ensure!(ready(&wp)["message"].as_str().is_some_and(|m| m.contains("version 0.1.0 keeps serving")), "{wp}");
    ensure!(wp.pointer("/status/pull/state") == Some(&json!("Failed")), "{wp}");
    ensure!(pulls(host, outcome) >= 1, "{}", host.manager.metrics().render());
    ensure!(version(host).as_deref() == Some("0.1.0"));
    apply(&host.client, &memcached(parent)).await?;
    converged(&host.client, parent, false).await?;
    Ok(())
}

#[tokio::test]
async fn only_artifacts_signed_by_a_trusted_key_run_and_the_previous_version_serves_meanwhile() -> Result<()> {
    let registry = Registry::start()?;
    let (trusted, _) = SigningKey::generate();
    let (stranger, _) = SigningKey::generate();
    let v1 = std::fs::read(plugin("memcached", "wasm32-wasip2"))?;
    let v2 = std::fs::read(plugin_with_features("memcached", "wasm32-wasip2", &["test-v2"]))?;
    let source = registry.reference("plugins/memcached:stable");
    let reference = OciReference::parse(&source).map_err(anyhow::Error::msg)?;
    let repository = reference.repository.clone();
    let client = RegistryClient::new(&registry.host(), true, None);
    let first = wasmop::registry::push(&client, &reference, Bytes::from(v1.clone()), "memcached.wasm").await?;
    sign(&client, &repository, &first.manifest_digest, &trusted).await?;

    let (cp, admin) = control_plane(None).await?;
    let policy = signed_policy(&source, &[trusted.public_key("release")]);
    let host = start_host(cp, admin.clone(), admin, &policy).await?;
    eventually("memcached 0.1.0 serving", WAIT, || async { Ok((version(&host).as_deref() == Some("0.1.0")).then_some(())) })
        .await?;
    apply(&host.client, &memcached("signed-1")).await?;
    converged(&host.client, "signed-1", false).await?;
    wasm_plugin_when(&host.client, "memcached", "the signed push pulled and Ready", |p| {
        p.pointer("/status/pull/digest") == Some(&json!(first.manifest_digest)) && ready(p)["status"] == "True"
    })
    .await?;

    // An unsigned push under the tag: refused.
    let unsigned = wasmop::registry::push(&client, &reference, Bytes::from(v2.clone()), "memcached.wasm").await?;
    refused_while_v1_serves(&host, "SignatureMissing", "signature_missing", "signed-2").await?;

    // Signed, but by a key the host does not trust: refused.
    sign(&client, &repository, &unsigned.manifest_digest, &stranger).await?;
    refused_while_v1_serves(&host, "KeyNotTrusted", "key_not_trusted", "signed-3").await?;

    // The trusted signature of 0.1.0 copied onto another artifact: refused.
    let third = with_custom_section(&v2, b"three");
    let third_digest = sha256_digest(&manifest(&third, "memcached.wasm").0);
    let first_signatures = client.get_manifest(&repository, &signature_tag(&first.manifest_digest)).await?;
    client.put_manifest(&repository, &signature_tag(&third_digest), OCI_MANIFEST_MEDIA_TYPE, first_signatures.bytes).await?;
    let pushed = wasmop::registry::push(&client, &reference, Bytes::from(third), "memcached.wasm").await?;
    ensure!(pushed.manifest_digest == third_digest);
    refused_while_v1_serves(&host, "SignatureInvalid", "signature_invalid", "signed-4").await?;

    // Signed by the trusted key, then its layer tampered with in the registry's storage: the
    // signature holds (it covers the manifest), the layer's digest does not.
    let fourth = with_custom_section(&v2, b"four");
    let (manifest_bytes, config) = manifest(&fourth, "memcached.wasm");
    sign(&client, &repository, &sha256_digest(&manifest_bytes), &trusted).await?;
    let layer = client.push_blob(&repository, Bytes::from(fourth.clone())).await?;
    client.push_blob(&repository, Bytes::from(config)).await?;
    let mut tampered = fourth;
    *tampered.last_mut().expect("not empty") ^= 0x01;
    std::fs::write(registry.blob_path(&layer), &tampered)?;
    client.put_manifest(&repository, "stable", OCI_MANIFEST_MEDIA_TYPE, Bytes::from(manifest_bytes)).await?;
    refused_while_v1_serves(&host, "DigestMismatch", "digest_mismatch", "signed-5").await?;
    let plugins = host._dir.path().join("plugins");
    ensure!(std::fs::read_dir(&plugins)?.count() == 1, "nothing but memcached.wasm in the plugins directory");
    ensure!(std::fs::read(plugins.join("memcached.wasm"))? == v1, "the plugins directory still holds the signed 0.1.0");

    // 0.2.0 signed by the trusted key: swapped in, every parent follows, none failed.
    let good = wasmop::registry::push(&client, &reference, Bytes::from(v2), "memcached.wasm").await?;
    ensure!(good.manifest_digest == unsigned.manifest_digest, "the same file, the same digest (signed by a stranger so far)");
    sign(&client, &repository, &good.manifest_digest, &trusted).await?;
    eventually("memcached 0.2.0 serving", WAIT, || async { Ok((version(&host).as_deref() == Some("0.2.0")).then_some(())) })
        .await?;
    wasm_plugin_when(&host.client, "memcached", "Ready again on the trusted signature", |p| {
        p.pointer("/status/pull/digest") == Some(&json!(good.manifest_digest)) && ready(p)["status"] == "True"
    })
    .await?;
    for parent in ["signed-1", "signed-2", "signed-3", "signed-4", "signed-5"] {
        converged(&host.client, parent, true).await?;
    }
    no_failed_reconciles(&host.client).await?;
    Ok(())
}

#[tokio::test]
async fn a_python_component_too_large_for_a_config_map_arrives_signed_through_the_registry_and_reconciles() -> Result<()> {
    let wasm = std::fs::read(memcached_py())?;
    // What a ConfigMap cannot carry: its data is limited to 1 MiB in total.
    ensure!(wasm.len() > 8 << 20, "the Python component has {} bytes", wasm.len());
    let registry = Registry::start()?;
    let (key, _) = SigningKey::generate();
    let source = registry.reference("plugins/memcached-py:0.1.0");
    let reference = OciReference::parse(&source).map_err(anyhow::Error::msg)?;
    let client = RegistryClient::new(&registry.host(), true, None);
    let pushed = wasmop::registry::push(&client, &reference, Bytes::from(wasm.clone()), "memcached.wasm").await?;
    sign(&client, &reference.repository, &pushed.manifest_digest, &key).await?;

    let (cp, admin) = control_plane(None).await?;
    let policy = signed_policy(&source, &[key.public_key("release")]);
    // The compiled component is kept between runs (a debug host compiles it in tens of seconds).
    let artifacts = std::env::temp_dir().join("wasmop-registry-e2e-artifacts");
    let host = start_host_with_artifacts(cp, admin.clone(), admin, &policy, Some(artifacts)).await?;
    let slow = Duration::from_secs(300);
    eventually("the Python memcached serving", slow, || async { Ok((version(&host).as_deref() == Some("0.1.0")).then_some(())) })
        .await?;
    let pulled = std::fs::read(host._dir.path().join("plugins/memcached.wasm"))?;
    ensure!(pulled == wasm, "the plugins directory holds the pushed component");
    let wp = wasm_plugin_when(&host.client, "memcached", "pulled and Ready", |p| {
        p.pointer("/status/pull/digest") == Some(&json!(pushed.manifest_digest)) && ready(p)["status"] == "True"
    })
    .await?;
    ensure!(wp.pointer("/status/pull/layerDigest") == Some(&json!(pushed.layer_digest)), "{wp}");

    apply(
        &host.client,
        &json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "from-python", "namespace": "default"}, "spec": {"size": 3}}),
    )
    .await?;
    let deployments = api_for(&host.client, "apps/v1", "Deployment", Some("default")).await?;
    let d = eventually("the Python plugin's Deployment with 3 replicas", slow, || async {
        let d = deployments.get_opt("from-python").await?;
        Ok(d.filter(|d| d.data.pointer("/spec/replicas").and_then(Value::as_i64) == Some(3)))
    })
    .await?;
    let managers: Vec<_> = d.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.clone()).collect();
    ensure!(managers.iter().any(|m| m == "wasmop/memcached"), "{managers:?}");
    no_failed_reconciles(&host.client).await?;
    Ok(())
}
