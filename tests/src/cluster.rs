//! Cluster helpers for end-to-end tests: applying YAML, waiting, running the host in-process.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use kube::api::{Api, DynamicObject};
use serde_json::Value;
use wasmop::controller::{ControllerConfig, Manager};
use wasmop::runtime::Runtime;

/// Field manager of objects the tests write.
pub const TEST_MANAGER: &str = "wasmop-e2e";

/// How long a test waits for kube-controller-manager's garbage collector to remove a child
/// whose owner is gone. The collector learns of a kind installed after it started (every CRD
/// a test installs) at its next discovery resync, every 30 s, and only then sees its objects'
/// deletions: a collection can take a resync period plus the work queued before it.
pub const GARBAGE_COLLECTION: Duration = Duration::from_secs(90);

/// Send the host's logs to the test's captured output, filtered by `RUST_LOG` (default
/// `warn`). Idempotent: the first call in a test binary installs the subscriber.
pub fn log_to_test_output() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    let _ = tracing_subscriber::fmt().with_test_writer().with_env_filter(filter).try_init();
}

/// Poll `f` every 100 ms until it yields `Some`; fail after `timeout` saying `what`.
///
/// # Errors
/// On timeout, with the last error `f` returned.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last_err = None;
    loop {
        match f().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last_err = Some(e),
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what} (last error: {last_err:?})");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The API of a kind, in `namespace` when given.
///
/// # Errors
/// When the kind is not served.
pub async fn api_for(
    client: &kube::Client,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
) -> Result<Api<DynamicObject>> {
    wasmop::cli::apply::api_for(client, api_version, kind, namespace).await
}

/// Server-side apply one object as [`TEST_MANAGER`].
///
/// # Errors
/// The API error.
pub async fn apply(client: &kube::Client, object: &Value) -> Result<DynamicObject> {
    wasmop::cli::apply::apply(client, object, TEST_MANAGER).await
}

/// Apply every object of a YAML file (CRDs waited for until served).
///
/// # Errors
/// Parse or API errors.
pub async fn apply_file(client: &kube::Client, path: &Path) -> Result<()> {
    wasmop::cli::apply::apply_file(client, path, TEST_MANAGER).await.map(|_| ())
}

/// The wasmop host running in this process against the test cluster.
#[derive(Debug)]
pub struct Host {
    /// The plugins' manager.
    pub manager: Arc<Manager>,
}

impl Host {
    /// Start a host with the given plugin files and a short resync-free configuration.
    ///
    /// # Errors
    /// When a plugin does not load or start.
    pub async fn start(client: kube::Client, plugins: &[&Path], config: ControllerConfig) -> Result<Self> {
        Self::start_with(client, plugins, config, Runtime::builder().artifact_dir(None).build()?).await
    }

    /// [`Host::start`] on a given runtime (for a host policy: per-plugin limits and grants).
    ///
    /// # Errors
    /// When a plugin does not load or start.
    pub async fn start_with(client: kube::Client, plugins: &[&Path], config: ControllerConfig, runtime: Runtime) -> Result<Self> {
        let manager = Arc::new(Manager::new(client, runtime.clone(), config));
        for path in plugins {
            let plugin = runtime.load_file(path).await.with_context(|| format!("loading {}", path.display()))?;
            manager.start(plugin).await?;
        }
        Ok(Self { manager })
    }

    /// A configuration for tests: no periodic resync, fast backoff.
    pub fn test_config() -> ControllerConfig {
        ControllerConfig { resync: None, ..ControllerConfig::default() }
    }
}

/// Wait until Deployment `namespace/name` is `Available`, failing at once with the message of
/// any `FailedCreate` event in `namespace` (a ReplicaSet whose Pod admission refused, e.g. by
/// Pod Security).
///
/// # Errors
/// A `FailedCreate` event, or not Available within `timeout`.
pub async fn deployment_available(client: &kube::Client, namespace: &str, name: &str, timeout: Duration) -> Result<()> {
    let deployments = api_for(client, "apps/v1", "Deployment", Some(namespace)).await?;
    let events = api_for(client, "v1", "Event", Some(namespace)).await?;
    let failed_create = kube::api::ListParams::default().fields("reason=FailedCreate");
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        // A refusal fails at once: waiting longer would not admit the Pod.
        if let Some(event) = events.list(&failed_create).await?.items.first() {
            bail!("a Pod of {namespace}/{name} was refused: {}", event.data["message"]);
        }
        let deployment = deployments.get(name).await?;
        let available = deployment
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Available" && c["status"] == "True"));
        if available {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("Deployment {namespace}/{name} not Available after {timeout:?}: {}", deployment.data["status"]);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
