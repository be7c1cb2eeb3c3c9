//! `wasmop run`: the operator host.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use super::{RuntimeArgs, units};
use std::sync::Arc;

use crate::controller::{ControllerConfig, Manager};
use crate::plugins::{ReloadConfig, Reloader};

/// Arguments of `wasmop run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Directory of plugins (`*.wasm`).
    #[arg(long, env = "WASMOP_PLUGINS")]
    pub plugins: PathBuf,
    /// Kubeconfig file (default: `$KUBECONFIG`, `~/.kube/config`, or the in-cluster config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Reconciles of one plugin running at once.
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// Address of `/metrics`, `/healthz` and `/readyz` (`none` disables).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub metrics_addr: String,
    /// Re-queue every parent this often (`0s` disables).
    #[arg(long, default_value = "10m", value_parser = units::parse_duration)]
    pub resync: Duration,
}

fn parse_addr(s: &str) -> Result<Option<std::net::SocketAddr>, String> {
    if s == "none" {
        return Ok(None);
    }
    s.parse().map(Some).map_err(|e| format!("invalid address {s:?}: {e}"))
}

/// A client from an explicit kubeconfig, or kube's default inference.
///
/// # Errors
/// When no usable configuration is found.
pub async fn client(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path).with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?
        }
        None => kube::Config::infer().await.context("no Kubernetes configuration found (use --kubeconfig)")?,
    };
    Ok(kube::Client::try_from(config)?)
}

impl RunArgs {
    /// The controller configuration these flags describe.
    pub fn controller_config(&self) -> ControllerConfig {
        ControllerConfig {
            concurrency: self.concurrency,
            resync: (!self.resync.is_zero()).then_some(self.resync),
            ..ControllerConfig::default()
        }
    }
}

pub(super) async fn run(args: RunArgs, runtime: &RuntimeArgs) -> anyhow::Result<()> {
    let client = client(args.kubeconfig.as_deref()).await?;
    if !args.plugins.is_dir() {
        anyhow::bail!("plugins directory {} does not exist", args.plugins.display());
    }
    let manager = Arc::new(Manager::new(client, runtime.runtime()?, args.controller_config()));
    let reloader = Reloader::new(Arc::clone(&manager), &args.plugins, ReloadConfig::default());
    let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let _server = match parse_addr(&args.metrics_addr).map_err(anyhow::Error::msg)? {
        Some(addr) => {
            let (m, s) = (Arc::clone(&manager), Arc::clone(&started));
            let ready: crate::server::Readiness = Arc::new(move || s.load(std::sync::atomic::Ordering::Relaxed) && m.synced());
            Some(crate::server::serve(addr, Arc::clone(manager.metrics()), ready).await.with_context(|| format!("cannot serve metrics on {addr}"))?.1)
        }
        None => None,
    };
    reloader.sync().await;
    started.store(true, std::sync::atomic::Ordering::Relaxed);
    tracing::info!(plugins = ?manager.plugins(), dir = %args.plugins.display(), "host running; watching the plugins directory");
    let watch = tokio::spawn(Arc::clone(&reloader).run());
    tokio::select! {
        () = shutdown_signal() => {}
        result = watch => match result {
            Ok(Err(e)) => tracing::error!(error = %e, "cannot watch the plugins directory"),
            _ => tracing::error!("the plugins directory watch ended"),
        },
    }
    tracing::info!("shutting down");
    manager.shutdown().await;
    Ok(())
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
