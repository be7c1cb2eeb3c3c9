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
