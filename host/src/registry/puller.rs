//! [`Puller`]: the plugins the host policy names a registry source for (`plugins.NAME.source`)
//! pulled into the plugins directory as `NAME.wasm`, where the reloader takes over as for a
//! file dropped there by hand.
//!
//! Each source has a task of its own: a pull never waits for another, nor for a reconcile. A
//! pull resolves the reference to a manifest (a tag each `pullInterval`; a digest once),
//! checks that it is a Wasm artifact whose layer fits `maxModuleBytes`, reads the layer from
//! the cache or the registry (checked against its digest and size, and for the WebAssembly
//! header), keeps it in the cache ([`PullCache`]) and renames it into the plugins directory when
//! it differs from the file there. With the policy's `verification:`, the artifact's cosign
//! signatures are checked once the manifest is resolved, before its layer is read. A failure changes nothing in the plugins directory: the file
//! there (the last good pull) keeps serving, and the failure is logged (one line per new
//! failure), counted (`wasmop_plugin_pulls_total{plugin,outcome}`) and shown on the plugin's
//! `WasmPlugin` (`status.pull`, `Ready=False` with the reason) until a pull succeeds. A failed
//! pull is tried again after 1 s, doubling up to the pull interval (5 minutes without one).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use k8s_openapi::api::core::v1::Secret;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::artifact::{self, Descriptor};
use super::cache::{PullCache, write_atomically};
use super::client::{RegistryClient, sha256_digest};
use super::credentials::{Credentials, DOCKER_CONFIG_JSON_KEY, DOCKER_CONFIG_JSON_TYPE};
use super::error::RegistryError;
use super::signature::{self, Signed};
use crate::metrics::Metrics;
use crate::policy::{PluginSource, SecretRef, Verification};
use crate::reload::{PullReport, PullState, Reloader};

/// The longest wait before a failed pull is tried again, for a source without a pull interval.
pub const MAX_RETRY: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PullLabels {
    plugin: String,
    outcome: String,
}

/// `wasmop_plugin_pulls_total{plugin,outcome}`: pulls by how they ended: `pulled` (a new file
/// in the plugins directory), `unchanged`, or a failure (`unreachable`, `unauthorized`,
/// `not_found`, `registry_error`, `digest_mismatch`, `too_large`, `not_wasm`, `credentials`,
/// `signature_missing`, `key_not_trusted`, `signature_invalid`, `write_failed`).
#[derive(Debug, Clone, Default)]
pub struct PullMetrics(Family<PullLabels, Counter>);

impl PullMetrics {
    /// The counter, registered in `metrics`.
    pub fn registered(metrics: &Metrics) -> Self {
        let family = Family::<PullLabels, Counter>::default();
        metrics.register(
            "wasmop_plugin_pulls",
            "Pulls of plugin files from OCI registries by plugin and outcome (pulled, unchanged, or why it failed)",
            family.clone(),
        );
        Self(family)
    }

    fn count(&self, plugin: &str, outcome: &str) {
        self.0.get_or_create(&PullLabels { plugin: plugin.into(), outcome: outcome.into() }).inc();
    }
}

/// What pulls need: where files go, the cache, the cluster (for credentials' Secrets), where
/// pulls are shown and counted.
#[derive(Clone)]
pub struct PullContext {
    /// The plugins directory the reloader follows.
    pub plugins_dir: PathBuf,
    /// The cache of pulled files.
    pub cache: PullCache,
    /// The cluster, to read credentials' Secrets from (`None`: sources with credentials fail).
    pub client: Option<kube::Client>,
    /// Shows each pull on the plugin's `WasmPlugin`.
    pub reloader: Option<Arc<Reloader>>,
    /// Counts pulls.
    pub metrics: PullMetrics,
    /// The signatures pulled artifacts need (the policy's `verification:`).
    pub verification: Verification,
}

impl std::fmt::Debug for PullContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PullContext").field("plugins_dir", &self.plugins_dir).field("cache", &self.cache).finish_non_exhaustive()
    }
}

/// One plugin pulled from a registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullTarget {
    /// The plugin (its file is `NAME.wasm`).
    pub name: String,
    /// Where from.
    pub source: PluginSource,
    /// `maxModuleBytes`.
    pub max_bytes: u64,
}

/// A successful pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pull {
    /// `sha256:...` of the manifest the reference resolved to.
    pub manifest_digest: String,
    /// Its Wasm layer.
    pub layer: Descriptor,
    /// Whether the file in the plugins directory changed (false: it was already this).
    pub installed: bool,
    /// The trusted key a signature of it verified with (`None`: verification off, or an
    /// unsigned artifact allowed).
    pub signer: Option<String>,
}

/// The pull tasks; dropping it stops them.
#[derive(Debug)]
pub struct Puller {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Puller {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Puller {
    /// Start one task per target (within a tokio runtime).
    pub fn start(ctx: PullContext, targets: Vec<PullTarget>) -> Self {
        let ctx = Arc::new(ctx);
        let tasks = targets.into_iter().map(|target| tokio::spawn(follow(Arc::clone(&ctx), target))).collect();
        Self { tasks }
    }
}

/// Pull `target` until it needs no more pulls: a pinned digest once it succeeded, a tag once
/// (or every pull interval), a failure after a backoff.
async fn follow(ctx: Arc<PullContext>, target: PullTarget) {
    let source = target.source.reference.to_string();
    let mut last_good: Option<(String, String, String)> = None;
    let mut last_failure: Option<String> = None;
    let mut failures: u32 = 0;
    let mut last_shown: Option<PullReport> = None;
    loop {
        let result = pull_once(&ctx, &target).await;
        let now = crate::actions::timestamp_now();
        let report = match &result {
            Ok(pull) => {
                failures = 0;
                let outcome = if pull.installed { "pulled" } else { "unchanged" };
                ctx.metrics.count(&target.name, outcome);
                if pull.installed || last_failure.is_some() || last_good.is_none() {
                    tracing::info!(plugin = %target.name, %source, digest = %pull.manifest_digest, layer = %pull.layer.digest,
                        installed = pull.installed, signed_by = pull.signer.as_deref().unwrap_or("-"), "plugin pulled from its registry");
                }
                last_failure = None;
                // When this digest was first pulled.
                let pulled_at = match &last_good {
                    Some((digest, _, at)) if *digest == pull.manifest_digest => at.clone(),
                    _ => now.clone(),
                };
                last_good = Some((pull.manifest_digest.clone(), pull.layer.digest.clone(), pulled_at.clone()));
                PullReport {
                    source: source.clone(),
                    state: PullState::Pulled,
                    digest: Some(pull.manifest_digest.clone()),
                    layer_digest: Some(pull.layer.digest.clone()),
                    pulled_at: Some(pulled_at),
                    attempted_at: now,
                    reason: None,
                    message: None,
                }
            }
            Err(e) => {
                failures += 1;
                ctx.metrics.count(&target.name, e.outcome());
                let message = e.to_string();
                if last_failure.as_deref() != Some(message.as_str()) {
                    tracing::warn!(plugin = %target.name, %source, reason = e.reason(), error = %message,
                        "cannot pull the plugin from its registry; the file in the plugins directory (if any) keeps serving");
                }
                last_failure = Some(message.clone());
                PullReport {
                    source: source.clone(),
                    state: PullState::Failed,
                    digest: last_good.as_ref().map(|g| g.0.clone()),
                    layer_digest: last_good.as_ref().map(|g| g.1.clone()),
                    pulled_at: last_good.as_ref().map(|g| g.2.clone()),
                    attempted_at: now,
                    reason: Some(e.reason().to_owned()),
                    message: Some(message),
                }
            }
        };
        // Shown when it says something new (not for each attempt failing the same way).
        let shown = PullReport { attempted_at: String::new(), ..report.clone() };
        if let Some(reloader) = ctx.reloader.as_ref().filter(|_| last_shown.as_ref() != Some(&shown)) {
            reloader.pulled(&target.name, report);
        }
        last_shown = Some(shown);
        let interval = target.source.pull_interval;
        let pinned = target.source.reference.digest.is_some();
        let wait = match (&result, interval) {
            (Ok(_), _) if pinned => return,
            (Ok(_), None) => return,
            (Ok(_), Some(every)) => every,
            (Err(_), every) => retry_delay(failures, every.unwrap_or(MAX_RETRY)),
        };
        tokio::time::sleep(wait).await;
    }
}

/// 1 s doubled per failure in a row, at most `max`.
fn retry_delay(failures: u32, max: Duration) -> Duration {
    Duration::from_secs(1u64 << failures.saturating_sub(1).min(16)).min(max)
}

/// One pull of `target` (see the module's documentation).
///
/// # Errors
/// Any [`RegistryError`]: the plugins directory is then unchanged.
pub async fn pull_once(ctx: &PullContext, target: &PullTarget) -> Result<Pull, RegistryError> {
    let reference = &target.source.reference;
    let source = reference.to_string();
    // A pinned manifest already pulled (and its cached signatures still trusted): nothing to
    // ask the registry.
    if let Some(digest) = &reference.digest
        && let Some(layer) = ctx.cache.manifest(digest).filter(|l| l.size <= target.max_bytes)
        && let Some(wasm) = ctx.cache.blob(&layer.digest)
        && let Some(signer) = cached_signer(ctx, digest, &source)
    {
        let installed = install(ctx, &target.name, wasm, None, None).await?;
        return Ok(Pull { manifest_digest: digest.clone(), layer, installed, signer });
    }
    let credentials = match &target.source.credentials {
        Some(secret) => Some(credentials(ctx, secret, &reference.registry).await?),
        None => None,
    };
    let client = RegistryClient::new(&reference.registry, target.source.insecure, credentials);
    let (manifest_digest, layer) = artifact::resolve(&client, reference, target.max_bytes).await?;
    // Verified before the layer is read: a refused artifact's bytes are never fetched.
    let signed = if ctx.verification.enabled() {
        signature::fetch_signatures(&client, &reference.repository, &manifest_digest).await?
    } else {
        Vec::new()
    };
    let signer = signature::verify(&signed, &manifest_digest, &ctx.verification, &source)?;
    let (wasm, fetched) = match ctx.cache.blob(&layer.digest).filter(|w| w.len() as u64 == layer.size) {
        Some(wasm) => (wasm, false),
        None => (artifact::fetch_layer(&client, reference, &layer).await?, true),
    };
    artifact::check_wasm(&wasm)?;
    let keep = fetched.then(|| (layer.clone(), manifest_digest.clone()));
    let signatures = (!signed.is_empty()).then(|| (manifest_digest.clone(), signed));
    let installed = install(ctx, &target.name, wasm, keep, signatures).await?;
    Ok(Pull { manifest_digest, layer, installed, signer })
}

/// For a pinned manifest found in the cache: `Some(signer)` when it may be installed without
/// asking the registry (verification off, or its cached signatures still verify with a
/// trusted key), `None` to go to the registry.
fn cached_signer(ctx: &PullContext, digest: &str, source: &str) -> Option<Option<String>> {
    if !ctx.verification.enabled() {
        return Some(None);
    }
    let signed = ctx.cache.signatures(digest).unwrap_or_default();
    signature::verify(&signed, digest, &ctx.verification, source).ok()
}

/// Put `wasm` into the plugins directory as `NAME.wasm` unless the file there is already
/// it; with `keep`, also into the cache (the layer and the manifest it belongs to), and with
/// `signatures` the manifest's signatures. Off the async workers: files may be tens of MB.
async fn install(
    ctx: &PullContext,
    name: &str,
    wasm: Bytes,
    keep: Option<(Descriptor, String)>,
    signatures: Option<(String, Vec<Signed>)>,
) -> Result<bool, RegistryError> {
    let (cache, path) = (ctx.cache.clone(), ctx.plugins_dir.join(format!("{name}.wasm")));
    let work = move || -> Result<bool, RegistryError> {
        let digest = sha256_digest(&wasm);
        if let Some((manifest, signed)) = &signatures {
            cache.store_signatures(manifest, signed)?;
        }
        if let Some((layer, manifest)) = &keep {
            cache.store_blob(&layer.digest, &wasm)?;
            cache.store_manifest(manifest, layer)?;
        }
        if std::fs::read(&path).is_ok_and(|present| sha256_digest(&present) == digest) {
            return Ok(false);
        }
        write_atomically(&path, &wasm)?;
        Ok(true)
    };
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| {
        Err(RegistryError::Io { what: "writing the pulled file".into(), error: std::io::Error::other(e.to_string()) })
    })
}

/// The credentials for `registry` in the `kubernetes.io/dockerconfigjson` Secret `secret`.
async fn credentials(ctx: &PullContext, secret: &SecretRef, registry: &str) -> Result<Credentials, RegistryError> {
    let fail = |message: String| RegistryError::Credentials { secret: secret.to_string(), message };
    let client = ctx.client.clone().ok_or_else(|| fail("no cluster to read the Secret from".into()))?;
    let api: kube::Api<Secret> = kube::Api::namespaced(client, &secret.namespace);
    let found = api.get(&secret.name).await.map_err(|e| match e {
        kube::Error::Api(s) if s.code == 404 => fail("the Secret does not exist".into()),
        kube::Error::Api(s) if s.code == 403 => {
            fail(format!("the host may not read the Secret (wasmop rbac grants get on it by name): {}", s.message))
        }
        e => fail(format!("cannot read the Secret: {e}")),
    })?;
    if found.type_.as_deref() != Some(DOCKER_CONFIG_JSON_TYPE) {
        return Err(fail(format!("the Secret's type is {:?}, not {DOCKER_CONFIG_JSON_TYPE}", found.type_.unwrap_or_default())));
    }
    let data = found
        .data
        .as_ref()
        .and_then(|d| d.get(DOCKER_CONFIG_JSON_KEY))
        .ok_or_else(|| fail(format!("the Secret has no {DOCKER_CONFIG_JSON_KEY} key")))?;
    Credentials::from_docker_config(&data.0, registry).map_err(|e| fail(format!("its {DOCKER_CONFIG_JSON_KEY} {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_pull_is_retried_after_a_doubling_delay_up_to_the_interval() {
        let delays: Vec<u64> = (1..=5).map(|n| retry_delay(n, Duration::from_secs(10)).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 10]);
        assert_eq!(retry_delay(200, MAX_RETRY), MAX_RETRY);
    }
}
