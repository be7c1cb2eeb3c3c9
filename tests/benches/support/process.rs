//! What the benches that run real `wasmop` processes against a control plane share: the
//! Memcached resource, numeric knobs from the environment, plain HTTP reads of a process's
//! metrics, where the release binary is, and waiting until every parent converged.
//!
//! Included by path (`#[path = "support/process.rs"] mod process;`); each bench uses some.
#![allow(dead_code)]

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};

/// The example's `Memcached` custom resource.
pub fn memcached_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("cache.example.com", "v1alpha1", "Memcached"), "memcacheds")
}

/// The knob `name` from the environment, else `default`.
///
/// # Errors
/// A value that is not a number.
pub fn env_usize(name: &str, default: usize) -> Result<usize> {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().with_context(|| format!("{name}={v:?} is not a number")),
        Err(_) => Ok(default),
    }
}

/// `GET path` on 127.0.0.1:`port`: (status, body).
///
/// # Errors
/// The connection or the read fails, or the answer has no status line.
pub fn get(port: u16, path: &str) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    let status = text.split_whitespace().nth(1).context("no status line")?.parse()?;
    Ok((status, text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default()))
}

/// The sum of the samples of the metric family `family` on a Prometheus text `page`.
pub fn metric_sum(page: &str, family: &str) -> f64 {
    page.lines()
        .filter(|l| l.strip_prefix(family).is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' ')))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Wait until the `wasmop run` serving its metrics on `port` is Ready (`/readyz` answers 200)
/// with `plugins` plugins loaded (its `wasmop_plugin_info` series) and none rejected, looking
/// every `poll`; `running` is asked first each time whether the process is still there.
///
/// # Errors
/// `running` fails (the process exited), the host rejected a plugin file, or it is not Ready
/// within `limit`.
pub async fn until_host_ready(
    port: u16,
    plugins: usize,
    limit: Duration,
    poll: Duration,
    mut running: impl FnMut() -> Result<()>,
) -> Result<()> {
    let started = Instant::now();
    loop {
        running()?;
        if let Ok((_, page)) = get(port, "/metrics") {
            let rejected = metric_sum(&page, "wasmop_plugin_rejections_total");
            ensure!(rejected == 0.0, "the host rejected {rejected} plugin files (its log says why)");
            let loaded = page.lines().filter(|l| l.starts_with("wasmop_plugin_info{")).count();
            if loaded == plugins && matches!(get(port, "/readyz"), Ok((200, _))) {
                return Ok(());
            }
        }
        ensure!(started.elapsed() < limit, "the host is not Ready with {plugins} plugins after {limit:?}");
        tokio::time::sleep(poll).await;
    }
}

/// The release `wasmop` binary: `WASMOP_BIN`, else `wasmop` in the directory above this bench's.
///
/// # Errors
/// Neither exists.
pub fn host_binary() -> Result<PathBuf> {
    if let Some(bin) = std::env::var_os("WASMOP_BIN") {
        return Ok(bin.into());
    }
    let exe = std::env::current_exe()?;
    let bin = exe.parent().and_then(Path::parent).context("bench binary location")?.join("wasmop");
    ensure!(
        bin.is_file(),
        "{} not found: build it first with `cargo build --profile bench -p wasmop --bin wasmop`",
        bin.display()
    );
    Ok(bin)
}

/// Wait until every one of the `n` Memcacheds in `namespace` has `Available=True` for its
/// generation and there are `n` Deployments the host manages, listing every `poll`.
///
/// # Errors
/// Not converged within `timeout`, or a list fails.
pub async fn wait_converged(client: &kube::Client, namespace: &str, n: usize, poll: Duration, timeout: Duration) -> Result<()> {
    let crs: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &memcached_resource());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let started = Instant::now();
    loop {
        let available = crs
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|cr| {
                cr.data.pointer("/status/conditions").and_then(|c| c.as_array()).is_some_and(|c| {
                    c.iter().any(|c| {
                        c["type"] == "Available"
                            && c["status"] == "True"
                            && c["observedGeneration"].as_i64() == cr.metadata.generation
                    })
                })
            })
            .count();
        let children = deployments.list_metadata(&ListParams::default().labels("app.kubernetes.io/managed-by=wasmop")).await?;
        if available == n && children.items.len() == n {
            return Ok(());
        }
        ensure!(
            started.elapsed() < timeout,
            "after {timeout:?}: {available} / {n} Available, {} Deployments",
            children.items.len()
        );
        tokio::time::sleep(poll).await;
    }
}
