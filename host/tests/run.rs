//! The `wasmop run` binary against a real control plane: plugins from a directory, metrics and
//! probes on HTTP (or metrics over HTTPS behind the API server and probes apart), graceful exit on
//! SIGTERM.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{api_for, apply, apply_file, eventually};
use wasmop_e2e::fixtures;
use wasmop_e2e::host::{HostCommand, HostProcess};

const WAIT: Duration = Duration::from_secs(30);

/// A plain HTTP/1.0 GET on loopback: (status code, body).
fn get(port: u16, path: &str) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    let status = text.split_whitespace().nth(1).context("status line")?.parse()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Ok((status, body))
}

#[tokio::test]
async fn run_serves_metrics_and_probes_and_stops_on_sigterm() -> Result<()> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    let root = fixtures::workspace();
    apply_file(&client, &root.join("crds/memcached.yaml")).await?;
    apply_file(&client, &root.join("crds/wasmplugin.yaml")).await?;
    let dir = tempfile::tempdir()?;
    std::fs::copy(fixtures::memcached(), dir.path().join("memcached.wasm"))?;
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let mut host = spawn_host(&cp, dir.path(), port, &[])?;

    eventually("/readyz ok", WAIT, || async { Ok(get(port, "/readyz").ok().filter(|(s, _)| *s == 200).map(|_| ())) }).await?;
    assert_eq!(get(port, "/healthz")?.0, 200);

    apply(
        &client,
        &json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "m", "namespace": "default"}, "spec": {"size": 2}}),
    )
    .await?;
    let deployments = api_for(&client, "apps/v1", "Deployment", Some("default")).await?;
    eventually("deployment m", WAIT, || async { Ok(deployments.get_opt("m").await?.map(|_| ())) }).await?;

    let metrics = eventually("reconcile metrics", WAIT, || async {
        let (_, body) = get(port, "/metrics")?;
        Ok(body.contains(r#"controller_runtime_reconcile_total{controller="memcached",result="success"}"#).then_some(body))
    })
    .await?;
    for series in [
        r#"workqueue_depth{name="memcached"}"#,
        r#"workqueue_adds_total{name="memcached"}"#,
        "controller_runtime_reconcile_time_seconds_bucket",
        r#"wasmop_plugin_call_duration_seconds_count{plugin="memcached"}"#,
        r#"wasmop_plugin_info{plugin="memcached",version="0.1.0""#,
        "wasmop_plugin_loads_total",
    ] {
        assert!(metrics.contains(series), "missing {series} in:\n{metrics}");
    }

    // SIGTERM: graceful exit, well within a pod's default 30 s grace period.
    let (exited, _) = host.terminate(Duration::from_secs(20)).await?;
    assert!(exited.success(), "exit status {exited}");
    Ok(())
}

fn spawn_host(cp: &ControlPlane, plugins: &std::path::Path, port: u16, extra: &[&str]) -> Result<HostProcess> {
    HostCommand::new(env!("CARGO_BIN_EXE_wasmop"), cp.kubeconfig_path(), plugins)
        .metrics_port(port)
        .args(extra)
        .cache_dir(plugins.join(".cache"))
        .spawn()
}

/// Reconciles this host has counted, from its `/metrics`.
fn reconciles(port: u16) -> u64 {
    let Ok((_, body)) = get(port, "/metrics") else { return 0 };
    body.lines()
        .filter(|l| l.starts_with("controller_runtime_reconcile_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// This host's `wasmop_leader` gauge (1 leading, 0 standing by), from its `/metrics`.
fn leader_gauge(port: u16) -> Option<u64> {
    let (_, body) = get(port, "/metrics").ok()?;
    body.lines().find_map(|l| l.strip_prefix("wasmop_leader ")?.trim().parse().ok())
}

/// A rolling update with one replica: the new pod starts while the old one holds the Lease.
/// It must turn Ready (or the rollout never replaces the old pod), write nothing while the old
/// one leads, and take over as soon as the old one releases the Lease on SIGTERM.
#[tokio::test]
async fn a_standby_is_ready_writes_nothing_and_takes_over_when_the_leader_releases() -> Result<()> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    let root = fixtures::workspace();
    apply_file(&client, &root.join("crds/memcached.yaml")).await?;
    apply_file(&client, &root.join("crds/wasmplugin.yaml")).await?;
    let dir = tempfile::tempdir()?;
    std::fs::copy(fixtures::memcached(), dir.path().join("memcached.wasm"))?;
    // A long Lease: a takeover well within it comes from the release, not from expiry.
    let lease = [
        "--leader-elect",
        "--leader-elect-name",
        "rollout",
        "--leader-elect-lease-duration",
        "60s",
        "--leader-elect-renew-deadline",
        "40s",
        "--leader-elect-retry-period",
        "500ms",
    ];
    let ports: Vec<u16> = (0..2)
        .map(|_| TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()))
        .collect::<Result<_, _>>()?;
    let deployments = api_for(&client, "apps/v1", "Deployment", Some("default")).await?;
    let memcached = |name: &str, size: u32| {
        json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"size": size}})
    };
    let replicas = |d: &kube::api::DynamicObject| d.data.pointer("/spec/replicas").and_then(serde_json::Value::as_u64);

    let mut old = spawn_host(&cp, dir.path(), ports[0], &lease)?;
    eventually("the old pod Ready", WAIT, || async { Ok(get(ports[0], "/readyz").ok().filter(|(s, _)| *s == 200).map(|_| ())) })
        .await?;
    apply(&client, &memcached("a", 1)).await?;
    eventually("deployment a from the old pod", WAIT, || async { Ok(deployments.get_opt("a").await?.map(|_| ())) }).await?;
    assert_eq!(leader_gauge(ports[0]), Some(1), "the old pod leads");

    let _new = spawn_host(&cp, dir.path(), ports[1], &lease)?;
    eventually("the new pod Ready while the old one holds the Lease", WAIT, || async {
        Ok(get(ports[1], "/readyz").ok().filter(|(s, _)| *s == 200).map(|_| ()))
    })
    .await?;
    assert_eq!(leader_gauge(ports[1]), Some(0), "the new pod stands by");
    // A change while the old pod leads: the old pod reconciles it, the standby does not.
    apply(&client, &memcached("a", 2)).await?;
    eventually("deployment a scaled by the old pod", WAIT, || async {
        Ok(deployments.get_opt("a").await?.filter(|d| replicas(d) == Some(2)).map(|_| ()))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(reconciles(ports[1]), 0, "the standby reconciles nothing while the old pod leads");
    assert_eq!(leader_gauge(ports[1]), Some(0), "the new pod still stands by");

    // The rollout stops the old pod: it releases the Lease on its way out.
    let (exited, _) = old.terminate(WAIT).await?;
    assert!(exited.success(), "the old pod exits cleanly: {exited}");
    let released = std::time::Instant::now();
    apply(&client, &memcached("b", 1)).await?;
    eventually("deployment b from the new pod", WAIT, || async { Ok(deployments.get_opt("b").await?.map(|_| ())) }).await?;
    let took = released.elapsed();
    assert_eq!(leader_gauge(ports[1]), Some(1), "the new pod leads");
    eventually("the new pod counts its reconciles", WAIT, || async { Ok((reconciles(ports[1]) > 0).then_some(())) }).await?;
    assert!(took < Duration::from_secs(20), "takeover after a release took {took:?} (Lease: 60 s)");
    eprintln!("takeover after the leader released the Lease: {took:?}");
    Ok(())
}

#[tokio::test]
async fn only_the_leader_reconciles_and_a_follower_takes_over() -> Result<()> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &fixtures::workspace().join("crds/memcached.yaml")).await?;
    let dir = tempfile::tempdir()?;
    std::fs::copy(fixtures::memcached(), dir.path().join("memcached.wasm"))?;
    let lease = [
        "--leader-elect",
        "--leader-elect-lease-duration",
        "4s",
        "--leader-elect-renew-deadline",
        "3s",
        "--leader-elect-retry-period",
        "500ms",
    ];
    let ports: Vec<u16> = (0..2)
        .map(|_| TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()))
        .collect::<Result<_, _>>()?;
    let mut first = spawn_host(&cp, dir.path(), ports[0], &lease)?;
    eventually("first host ready (leader)", WAIT, || async {
        Ok(get(ports[0], "/readyz").ok().filter(|(s, _)| *s == 200).map(|_| ()))
    })
    .await?;
    let _second = spawn_host(&cp, dir.path(), ports[1], &lease)?;
    eventually("second host serving", WAIT, || async { Ok(get(ports[1], "/healthz").ok().map(|_| ())) }).await?;

    let deployments = api_for(&client, "apps/v1", "Deployment", Some("default")).await?;
    let memcached = |name: &str| {
        json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"size": 1}})
    };
    apply(&client, &memcached("a")).await?;
    eventually("deployment a", WAIT, || async { Ok(deployments.get_opt("a").await?.map(|_| ())) }).await?;
    eventually("the leader counts its reconciles", WAIT, || async { Ok((reconciles(ports[0]) > 0).then_some(())) }).await?;
    assert_eq!(reconciles(ports[1]), 0, "the follower does not reconcile");
    eventually("the follower Ready (warm standby)", WAIT, || async {
        Ok(get(ports[1], "/readyz").ok().filter(|(s, _)| *s == 200).map(|_| ()))
    })
    .await?;
    assert_eq!(leader_gauge(ports[1]), Some(0), "the follower reports it stands by");

    // Kill the leader without letting it release the Lease: the follower takes over once the
    // Lease expires (4 s) and reconciles what is created meanwhile.
    first.kill()?;
    let killed = std::time::Instant::now();
    apply(&client, &memcached("b")).await?;
    eventually("deployment b from the new leader", WAIT, || async { Ok(deployments.get_opt("b").await?.map(|_| ())) }).await?;
    let took = killed.elapsed();
    // The Deployment is applied before the reconcile ends and is counted.
    eventually("the new leader counts its reconciles", WAIT, || async { Ok((reconciles(ports[1]) > 0).then_some(())) }).await?;
    assert!(took < Duration::from_secs(4 + 10), "takeover took {took:?}");
    eprintln!("takeover after the leader was killed: {took:?}");
    Ok(())
}

#[tokio::test]
async fn sigterm_during_a_burst_exits_in_time_and_a_restart_converges_everything() -> Result<()> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &fixtures::workspace().join("crds/memcached.yaml")).await?;
    let dir = tempfile::tempdir()?;
    std::fs::copy(fixtures::memcached(), dir.path().join("memcached.wasm"))?;
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let mut host = spawn_host(&cp, dir.path(), port, &[])?;
    eventually("host ready", WAIT, || async { Ok(get(port, "/readyz").ok().filter(|(s, _)| *s == 200).map(|_| ())) }).await?;

    let n = 100;
    let creates = (0..n).map(|i| {
        let client = client.clone();
        async move {
            apply(
                &client,
                &json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
                "metadata": {"name": format!("burst-{i}"), "namespace": "default"}, "spec": {"size": i % 3}}),
            )
            .await
        }
    });
    for r in futures::future::join_all(creates).await {
        r?;
    }
    // SIGTERM while the host works through the burst.
    let (status, took) = host.terminate(Duration::from_secs(15)).await?; // the grace is 10 s
    assert!(status.success(), "{status}");
    eprintln!("exited {took:?} after SIGTERM");

    // A new host finishes the work: every CR converges, none half-done.
    let _restarted = spawn_host(&cp, dir.path(), port, &[])?;
    let deployments = api_for(&client, "apps/v1", "Deployment", Some("default")).await?;
    eventually("all burst CRs converged after restart", Duration::from_secs(90), || async {
        let list = deployments.list(&Default::default()).await?;
        let ok = (0..n).all(|i| {
            list.items.iter().any(|d| {
                d.metadata.name.as_deref() == Some(&format!("burst-{i}"))
                    && d.data.pointer("/spec/replicas") == Some(&json!(i % 3))
            })
        });
        Ok(ok.then_some(()))
    })
    .await?;
    Ok(())
}

/// The value of one metrics series (`0` when absent).
fn metric(port: u16, series: &str) -> u64 {
    let Ok((_, body)) = get(port, "/metrics") else { return 0 };
    body.lines().find_map(|l| l.strip_prefix(series)?.trim().parse().ok()).unwrap_or(0)
}

#[tokio::test]
async fn sigterm_lets_a_reconcile_in_flight_finish_its_writes_before_exit() -> Result<()> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &fixtures::workspace().join("crds/testbed.yaml")).await?;
    let dir = tempfile::tempdir()?;
    std::fs::copy(fixtures::testbed(), dir.path().join("testbed.wasm"))?;
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let mut host = spawn_host(&cp, dir.path(), port, &["--deadline", "20s"])?;
    eventually("host ready", WAIT, || async { Ok(get(port, "/readyz").ok().filter(|(s, _)| *s == 200).map(|_| ())) }).await?;

    // A reconcile that spins for 3 s before returning its child and status.
    apply(
        &client,
        &json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
            "metadata": {"name": "slow", "namespace": "default"}, "spec": {"mode": "sleep-ms", "millis": 3000}}),
    )
    .await?;
    // In flight: a worker took the key (added, queue empty) and no reconcile has ended.
    eventually("a reconcile in flight", WAIT, || async {
        let taken = metric(port, r#"workqueue_adds_total{name="testbed"}"#) >= 1
            && metric(port, r#"workqueue_depth{name="testbed"}"#) == 0;
        Ok(taken.then_some(()))
    })
    .await?;
    let configmaps = api_for(&client, "v1", "ConfigMap", Some("default")).await?;
    assert!(configmaps.get_opt("slow-out").await?.is_none(), "the reconcile must still be running at SIGTERM");
    assert_eq!(reconciles(port), 0, "no reconcile has ended yet");

    let (status, took) = host.terminate(Duration::from_secs(15)).await?; // the grace is 10 s
    assert!(status.success(), "{status}");
    eprintln!("exited {took:?} after SIGTERM");

    // The process is gone; what the reconcile in flight wrote is in the cluster.
    let child = configmaps.get("slow-out").await?;
    assert_eq!(child.data["data"]["mode"], "ok");
    let testbeds = api_for(&client, "test.wasmop.dev/v1", "Testbed", Some("default")).await?;
    assert_eq!(testbeds.get("slow").await?.data.pointer("/status/phase"), Some(&json!("Ready")));
    Ok(())
}

/// `GET /metrics` over TLS (trusting `ca`) without a token: the status line.
async fn anonymous_scrape(port: u16, ca: &str) -> Result<String> {
    use rustls::pki_types::pem::PemObject;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls::pki_types::CertificateDer::from_pem_slice(ca.as_bytes())?)?;
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1")?;
    let mut tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)).connect(name, tcp).await?;
    tls.write_all(b"GET /metrics HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n").await?;
    let mut response = String::new();
    tls.read_to_string(&mut response).await?;
    Ok(response.lines().next().unwrap_or_default().to_owned())
}

#[tokio::test]
async fn run_with_secure_metrics_serves_the_probes_apart_and_refuses_an_anonymous_scrape() -> Result<()> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &fixtures::workspace().join("crds/wasmplugin.yaml")).await?;
    let dir = tempfile::tempdir()?;
    let certs = dir.path().join("certs");
    std::fs::create_dir_all(dir.path().join("plugins"))?;
    std::fs::create_dir(&certs)?;
    let cert = wasmop::admission::ServingCert::generate(&["127.0.0.1".into()])?;
    std::fs::write(certs.join("tls.crt"), &cert.cert_pem)?;
    std::fs::write(certs.join("tls.key"), &cert.key_pem)?;
    let [metrics, probes] = [(); 2].map(|()| TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()));
    let (metrics, probes) = (metrics?, probes?);
    let _host = HostCommand::new(env!("CARGO_BIN_EXE_wasmop"), cp.kubeconfig_path(), dir.path().join("plugins"))
        .metrics_port(metrics)
        .args(["--metrics-secure", "--metrics-cert-dir"])
        .arg(&certs)
        .args(["--probe-addr", &format!("127.0.0.1:{probes}")])
        .cache_dir(dir.path().join(".cache"))
        .spawn()?;
    eventually("/readyz ok on the probe port", WAIT, || async {
        Ok(get(probes, "/readyz").ok().filter(|(s, _)| *s == 200).map(|_| ()))
    })
    .await?;
    assert_eq!(get(probes, "/metrics")?.0, 404, "no metrics on the probe port");
    let status = anonymous_scrape(metrics, &cert.ca_pem).await?;
    assert!(status.starts_with("HTTP/1.1 401"), "an anonymous scrape: {status}");
    Ok(())
}
