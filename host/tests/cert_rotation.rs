//! Against a real control plane: `wasmop run` outside the cluster (`--admission-url-base`)
//! with short certificate lifetimes renews its admission serving certificate and rolls its CA
//! over while the kube-apiserver keeps calling the SidecarSet plugin's webhook. A steady stream
//! of Pod creates across two renewals and a CA rollover is admitted without one failure (each
//! Pod comes back with the sidecar the webhook injects: its `failurePolicy: Ignore` would
//! hide a failed call otherwise), the Secret's certificate and CA really change, the CA bundle
//! holds both CAs during the rollover, and the certificate the host serves at the end is the
//! Secret's newest, trusted by the bundle the webhook configuration carries.

use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, DeleteParams, PostParams};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::json;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{apply, apply_file, eventually};
use wasmop_e2e::host::{HostCommand, HostProcess};

const WAIT: Duration = Duration::from_secs(60);
/// The grant `run` needs to serve SidecarSet's Pod injection.
const SIDECARSET_POLICY: &str = "plugins: {sidecarset: {grants: {webhookResources: [{resource: pods, mode: mutate}]}}}\n";
/// A CA lives 60 s (rolled over at 40 s), a serving certificate 20 s (renewed at about 13 s).
const LIFETIMES: [&str; 4] = ["--admission-ca-lifetime", "60s", "--admission-cert-lifetime", "20s"];
/// How long the stream of creates may take to see two renewals and a whole CA rollover.
const ROTATIONS: Duration = Duration::from_secs(150);
const NAMESPACE: &str = "team-a";
const SECRET: &str = "wasmop-admission-tls";

/// `wasmop run` with the SidecarSet plugin outside the cluster on `port`.
fn spawn_host(cp: &ControlPlane, dir: &Path, port: u16) -> Result<HostProcess> {
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins)?;
    std::fs::copy(wasmop_e2e::plugins::plugin("sidecarset", "wasm32-wasip2"), plugins.join("sidecarset.wasm"))?;
    std::fs::write(dir.join("policy.yaml"), SIDECARSET_POLICY)?;
    let (bind, url) = (format!("127.0.0.1:{port}"), format!("https://127.0.0.1:{port}"));
    HostCommand::new(env!("CARGO_BIN_EXE_wasmop"), cp.kubeconfig_path(), plugins)
        .policy(dir.join("policy.yaml"))
        .args(["--admission-url-base", &url, "--admission-bind", &bind, "--admission-cert-namespace", "default"])
        .args(LIFETIMES)
        .spawn()
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// `(tls.crt, ca.crt)` of the Secret.
async fn stored(secrets: &Api<Secret>) -> Result<(String, String)> {
    let data = secrets.get(SECRET).await?.data.context("the Secret has no data")?;
    let text = |key: &str| -> Result<String> { Ok(String::from_utf8(data.get(key).context("missing field")?.0.clone())?) };
    Ok((text("tls.crt")?, text("ca.crt")?))
}

fn certificates(pem: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes()).collect::<Result<_, _>>().expect("PEM")
}

/// The certificate the host presents on `port` to a client trusting exactly the CAs of
/// `bundle` (the handshake fails unless it chains to one of them).
async fn served(port: u16, bundle: &str) -> Result<CertificateDer<'static>> {
    let mut roots = rustls::RootCertStore::empty();
    for der in certificates(bundle) {
        roots.add(der)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1")?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await?;
    let (_, connection) = tls.get_ref();
    Ok(connection.peer_certificates().context("no peer certificate")?[0].clone().into_owned())
}

fn web_pod(name: &str) -> Pod {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}))
    .expect("a Pod")
}

/// Create a Pod; `Ok(())` only when the API server admitted it with the sidecar injected.
async fn admitted(pods: &Api<Pod>, name: &str) -> Result<()> {
    let pod = pods.create(&PostParams::default(), &web_pod(name)).await.with_context(|| format!("creating {name}"))?;
    let containers: Vec<&str> =
        pod.spec.as_ref().map(|s| s.containers.iter().map(|c| c.name.as_str()).collect()).unwrap_or_default();
    anyhow::ensure!(containers == ["web", "log-shipper"], "{name} admitted without the webhook's sidecar: {containers:?}");
    pods.delete(name, &DeleteParams::default()).await?;
    Ok(())
}

#[tokio::test]
async fn pods_are_admitted_without_one_failure_across_two_renewals_and_a_ca_rollover() -> Result<()> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &wasmop_e2e::plugins::workspace().join("crds/sidecarset.yaml")).await?;
    apply(&client, &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})).await?;
    let dir = tempfile::tempdir()?;
    let port = free_port()?;
    let host = spawn_host(&cp, dir.path(), port)?;
    let host_log = || host.log();
    let configurations: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    eventually("the mutating webhook configuration", WAIT, || async { Ok(configurations.get_opt("wasmop").await?.map(|_| ())) })
        .await
        .with_context(host_log)?;
    apply(
        &client,
        &json!({"apiVersion": "apps.wasmop.dev/v1alpha1", "kind": "SidecarSet", "metadata": {"name": "log-shipper"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "containers": [{"name": "log-shipper", "image": "busybox:1.36"}]}}),
    )
    .await
    .with_context(host_log)?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    // The host's cache holds the SidecarSet once a Pod gets its sidecar.
    let mut probe = 0;
    eventually("a Pod injected by the webhook", WAIT, || {
        probe += 1;
        let (name, pods) = (format!("probe-{probe}"), pods.clone());
        async move { Ok(admitted(&pods, &name).await.ok()) }
    })
    .await
    .with_context(host_log)?;

    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let (first_cert, first_ca) = stored(&secrets).await?;
    assert_eq!(certificates(&first_ca).len(), 1, "one CA at start");
    let mut serving = vec![first_cert];
    let mut bundles = vec![first_ca.clone()];
    let mut failures = Vec::new();
    let mut created = 0;
    let start = std::time::Instant::now();
    // Creates without a pause, the Secret read between them: until two renewals and a whole
    // rollover (two CAs in the bundle, then one that is not the first) were seen.
    let done = |serving: &[String], bundles: &[String]| {
        let rolled = bundles.iter().any(|b| certificates(b).len() == 2);
        let last = bundles.last().expect("a bundle");
        serving.len() >= 4 && rolled && certificates(last).len() == 1 && *last != first_ca
    };
    while !done(&serving, &bundles) {
        anyhow::ensure!(
            start.elapsed() < ROTATIONS,
            "no complete rotation within {ROTATIONS:?}: {} serving certificates, bundles of {:?} CAs\n{}",
            serving.len(),
            bundles.iter().map(|b| certificates(b).len()).collect::<Vec<_>>(),
            host_log()
        );
        created += 1;
        if let Err(e) = admitted(&pods, &format!("web-{created}")).await {
            failures.push(format!("{:?} after start: {e:#}", start.elapsed()));
        }
        let (cert, ca) = stored(&secrets).await?;
        if serving.last() != Some(&cert) {
            serving.push(cert);
        }
        if bundles.last() != Some(&ca) {
            bundles.push(ca);
        }
    }
    assert!(failures.is_empty(), "{} of {created} creates failed:\n{}\n{}", failures.len(), failures.join("\n"), host_log());
    assert!(created >= 20, "a steady stream: {created} creates");
    // The rollover's order: the new CA joined the old one before it was the only one.
    let sizes: Vec<usize> = bundles.iter().map(|b| certificates(b).len()).collect();
    assert_eq!(sizes, [1, 2, 1], "bundles in order: {sizes:?}");
    assert!(certificates(&bundles[1]).contains(&certificates(&first_ca)[0]), "the old CA stays during the overlap");
    // The host serves the Secret's newest certificate, trusted by the published bundle alone.
    let (_, bundle) = stored(&secrets).await?;
    eventually("the webhook configuration carrying the Secret's bundle", WAIT, || async {
        let carried = configurations.get("wasmop").await?.webhooks.unwrap_or_default()[0].client_config.ca_bundle.clone();
        Ok((carried.map(|b| b.0) == Some(bundle.clone().into_bytes())).then_some(()))
    })
    .await?;
    let presented = eventually("the newest certificate served", WAIT, || async {
        let presented = served(port, &bundle).await?;
        let (now, _) = stored(&secrets).await?;
        Ok((presented == certificates(&now)[0]).then_some(presented))
    })
    .await?;
    assert!(presented != certificates(&serving[0])[0], "the certificate served at start is not served any more");
    assert!(served(port, &first_ca).await.is_err(), "the first CA alone no longer verifies what is served");
    let text = host_log();
    for line in [
        "admission serving certificate renewed",
        "admission CA rollover started",
        "serving a certificate of the new CA",
        "admission CA rollover done",
    ] {
        assert!(text.contains(line), "no {line:?} in the host's log:\n{text}");
    }
    Ok(())
}
