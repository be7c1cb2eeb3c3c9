//! Secure metrics (`wasmop run --metrics-secure`) against a real control plane: `/metrics` over
//! HTTPS, each scrape's token reviewed by the API server with the host's own identity, which
//! holds only what `wasmop rbac --metrics-secure` grants: no token or an unknown one → 401, a
//! ServiceAccount without the `wasmop-metrics-reader` role → 403, with it bound → 200; the
//! probes answer on their own plain port.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wasmop::admission::ServingCert;
use wasmop::metrics::{Metrics, ReconcileResult};
use wasmop::server::{MetricsCerts, MetricsConfig, ServeContext};
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{apply, apply_file};

const NAMESPACE: &str = "wasmop-system";

/// A token of ServiceAccount `NAMESPACE/name`, from the TokenRequest API.
async fn token(admin: &kube::Client, name: &str) -> Result<String> {
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), NAMESPACE);
    let request = TokenRequest {
        spec: TokenRequestSpec { audiences: vec![], expiration_seconds: Some(3600), ..Default::default() },
        ..Default::default()
    };
    let issued = sas.create_token_request(name, &PostParams::default(), &request).await?;
    Ok(issued.status.context("token issued")?.token)
}

/// `GET /metrics` from `https://127.0.0.1:port`, trusting `ca`, with `token` when given: the
/// HTTP status and the body.
async fn scrape(port: u16, ca: &std::path::Path, token: Option<&str>) -> Result<(u16, String)> {
    let user = match token {
        Some(token) => format!("  user:\n    token: {token}\n"),
        None => "  user: {}\n".into(),
    };
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: metrics\n  cluster:\n    server: https://127.0.0.1:{port}\n    \
         certificate-authority: {}\nusers:\n- name: scraper\n{user}contexts:\n- name: c\n  context:\n    cluster: metrics\n    \
         user: scraper\ncurrent-context: c\n",
        ca.display()
    );
    let config = kube::Config::from_custom_kubeconfig(Kubeconfig::from_yaml(&kubeconfig)?, &KubeConfigOptions::default()).await?;
    let client = kube::Client::try_from(config)?;
    match client.request_text(http::Request::get("/metrics").body(Vec::new())?).await {
        Ok(body) => Ok((200, body)),
        Err(kube::Error::Api(status)) => Ok((status.code, status.message.clone())),
        Err(e) => Err(e.into()),
    }
}

/// A plain HTTP/1.0 GET on loopback: the status code.
async fn get_plain(port: u16, path: &str) -> Result<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes()).await?;
    let mut text = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut text)).await??;
    Ok(text.split_whitespace().nth(1).context("status line")?.parse()?)
}

#[tokio::test]
async fn metrics_scrapes_are_authenticated_and_authorized_by_the_api_server() -> Result<()> {
    let cp = ControlPlane::start().await?;
    let admin = cp.client().await?;
    apply(&admin, &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})).await?;
    for sa in ["wasmop", "scraper", "prometheus"] {
        apply(&admin, &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": NAMESPACE}}))
            .await?;
    }
    // The host's rights and the reader role, as `wasmop rbac --metrics-secure` prints them.
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("rbac.yaml"), wasmop::rbac::render_metrics("wasmop", NAMESPACE, "wasmop")?)?;
    apply_file(&admin, &dir.path().join("rbac.yaml")).await?;
    apply(
        &admin,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "prometheus-metrics-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "wasmop-metrics-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": NAMESPACE}]}),
    )
    .await?;

    // The host as its ServiceAccount, serving a certificate from a directory (cert-manager's way).
    let host = cp.client_with_token(&token(&admin, "wasmop").await?).await?;
    let certs = dir.path().join("certs");
    std::fs::create_dir(&certs)?;
    let cert = ServingCert::generate(&["127.0.0.1".into()])?;
    std::fs::write(certs.join("tls.crt"), &cert.cert_pem)?;
    std::fs::write(certs.join("tls.key"), &cert.key_pem)?;
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, &cert.ca_pem)?;
    let metrics = Arc::new(Metrics::new());
    metrics.reconciled("memcached", ReconcileResult::Success, 0.002);
    let config = MetricsConfig {
        metrics_addr: Some("127.0.0.1:0".parse()?),
        secure: Some(MetricsCerts::Dir(certs)),
        probe_addr: Some("127.0.0.1:0".parse()?),
        ..MetricsConfig::default()
    };
    let context = ServeContext { metrics: Arc::clone(&metrics), ready: Arc::new(|| true), client: host };
    let serving = wasmop::server::start(&config, context).await?;
    let (port, probes) = (serving.metrics.context("metrics served")?.port(), serving.probes.context("probes served")?.port());
    assert_ne!(port, probes, "the probes have their own port");

    let (status, body) = scrape(port, &ca, None).await?;
    assert_eq!(status, 401, "no token: {body}");
    let (status, body) = scrape(port, &ca, Some("not-a-token")).await?;
    assert_eq!(status, 401, "a token the API server does not know: {body}");
    let (status, body) = scrape(port, &ca, Some(&token(&admin, "scraper").await?)).await?;
    assert_eq!(status, 403, "a ServiceAccount without the reader role: {body}");
    assert!(body.contains("system:serviceaccount:wasmop-system:scraper"), "the refusal names the user: {body}");
    let (status, body) = scrape(port, &ca, Some(&token(&admin, "prometheus").await?)).await?;
    if status != 200 {
        bail!("the reader role's ServiceAccount is refused ({status}): {body}");
    }
    assert!(body.contains(r#"controller_runtime_reconcile_total{controller="memcached",result="success"} 1"#), "{body}");
    assert_eq!(body, metrics.render(), "the registry, as plain metrics would serve it");

    // The probes: plain HTTP on their own port; /metrics is not served there.
    assert_eq!(get_plain(probes, "/readyz").await?, 200);
    assert_eq!(get_plain(probes, "/healthz").await?, 200);
    assert_eq!(get_plain(probes, "/metrics").await?, 404);
    Ok(())
}
