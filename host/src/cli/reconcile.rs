//! `wasmop reconcile`: run a plugin once, offline, and print the host's plan — what `run` would
//! write — after the same gate (start-up grants, scope, ownership, content) and size checks.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, anyhow, bail};
use serde_json::Value;

use super::object_files::{default_namespace, observe, read_one};
use super::{Output, RuntimeArgs};
use crate::actions::{HostConditions, ReconcileContext, failure_status_patch, plan, timestamp_now};
use crate::contract::{Kind, KnownKinds, Manifest, Object, Request, Scope};
use crate::objects::{ObjectCache, visible_to};
use crate::plugin_config::{check, offline, parse_text};
use crate::policy::ConfigSource;

/// The uid given to a parent fixture that has none, so that the plan's owner references and
/// ownership checks have one to name.
pub const PLACEHOLDER_UID: &str = "00000000-0000-0000-0000-000000000000";

/// Arguments of `wasmop reconcile`.
#[derive(Debug, clap::Args)]
pub struct ReconcileArgs {
    /// The plugin file.
    #[arg(long)]
    pub plugin: PathBuf,
    /// The parent object (YAML or JSON, one object). Without `metadata.uid` it gets a
    /// placeholder uid; without `metadata.generation`, generation 1 (as the API server sets it
    /// on create).
    #[arg(long)]
    pub object: PathBuf,
    /// Observed children (YAML/JSON, any number of objects per file; repeatable). An object
    /// without `ownerReferences` is the parent's child; one with `ownerReferences` (`[]` for
    /// nobody, or another controller) is an existing object the parent does not control.
    #[arg(long)]
    pub children: Vec<PathBuf>,
    /// Related objects the plugin may read (repeatable).
    #[arg(long)]
    pub related: Vec<PathBuf>,
    /// Call the plugin as if the parent were being deleted.
    #[arg(long)]
    pub finalizing: bool,
    /// The plugin's configuration (a YAML/JSON object), checked against its `configSchema`
    /// [default: the host policy's `config` for the plugin, else `{}`; a plugin configured by a
    /// ConfigMap needs this flag with the ConfigMap's `config.yaml`].
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The time conditions that change are stamped with (RFC 3339, e.g. `2024-01-01T00:00:00Z`)
    /// [default: now]; for reproducible output.
    #[arg(long, value_parser = parse_time)]
    pub now: Option<String>,
    /// CRD files or directories telling the scope of custom child kinds (repeatable); Kubernetes'
    /// own kinds are built in. A child of a kind found in neither is refused (`UnknownScope`).
    #[arg(long)]
    pub crds: Vec<PathBuf>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t)]
    pub output: Output,
}

pub(super) async fn run(args: ReconcileArgs, runtime: &RuntimeArgs) -> anyhow::Result<()> {
    let plugin = super::progress::load_file(&runtime.runtime()?, &args.plugin).await?;
    let manifest = Arc::clone(plugin.manifest());
    let mut kinds = KnownKinds::builtin();
    for path in &args.crds {
        kinds.add_crds(path)?;
    }
    // The start-up half of the gate, as `run` judges it before starting the plugin.
    let missing = plugin.grants().ungranted(&manifest, &kinds);
    if !missing.is_empty() {
        bail!("run would not start plugin {}: it {}", manifest.name, missing.join(", "));
    }
    let mut parent = read_one(&args.object)?;
    let kind = Kind::of_object(&parent).expect("read_one checks apiVersion and kind");
    if kind != manifest.parent {
        bail!("{}: the object is a {kind}, but plugin {} reconciles {}", args.object.display(), manifest.name, manifest.parent);
    }
    if manifest.scope == Scope::Namespaced {
        default_namespace(&mut parent, "default");
    }
    if parent.pointer("/metadata/uid").and_then(Value::as_str).is_none_or(str::is_empty) {
        parent["metadata"]["uid"] = Value::String(PLACEHOLDER_UID.into());
    }
    // The API server sets generation 1 on create: an object written without one (a sample)
    // reconciles as just created, and conditions carry their observedGeneration.
    if parent.pointer("/metadata/generation").is_none() {
        parent["metadata"]["generation"] = Value::from(1);
    }
    let observed = observe(&manifest, plugin.grants(), &parent, &args.children, &args.related)?;
    for warning in &observed.warnings {
        eprintln!("warning: {warning}");
    }
    let cache: Arc<dyn ObjectCache> = Arc::new(observed.cache);
    let visible = visible_to(&manifest, plugin.grants(), &parent);
    let mut request = Request::gather(Arc::new(Object::new(parent.clone())), &visible, &*cache, true)?;
    request.finalizing = args.finalizing;
    // What `run` would use for this plugin: its configuration source and its `Reconciled` policy.
    let policy = runtime.host_policy()?.for_plugin(&manifest.name);
    request.config = config(&args, &policy.config, &manifest)?;
    let now = args.now.unwrap_or_else(timestamp_now);
    let (response, stats) = match plugin.reconcile(&request, Arc::clone(&cache)).await {
        Ok(ok) => ok,
        Err(e) => {
            // What `run` writes about a failure that shows the parent something: printed, and
            // the run still fails with the plugin's error.
            if let Some(failure) = e.failure().filter(|f| f.shows_anything()) {
                let message = e.to_string();
                let status_patch = failure_status_patch(&parent, e.reason(), &message, Some(failure), &now);
                let failed =
                    FailedPlan { failed: Failed { reason: e.reason(), message, retryable: e.is_retryable() }, status_patch };
                print!("{}", args.output.render(&failed)?);
            }
            return Err(e.into());
        }
    };
    tracing::debug!(elapsed = ?stats.elapsed, memory = stats.memory_high_water, "reconciled");
    let host_conditions = HostConditions { now: &now, reconciled: policy.reconciled_condition };
    let context = ReconcileContext::new(&manifest, &kinds, &*cache, &parent).grants(plugin.grants());
    let plan = plan(&context, response, host_conditions)
        .map_err(|e| anyhow!("response refused ({}), run would write nothing: {e}", e.reason()))?;
    print!("{}", args.output.render(&plan)?);
    Ok(())
}

/// What `run` would write for a failed reconcile whose failure shows the parent a status or
/// conditions: the failure as recorded (Warning event, `Reconciled=False`) and the status patch.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct FailedPlan {
    /// The failure.
    failed: Failed,
    /// The merge patch of the parent's status: the plugin's fields and conditions and the host's
    /// `Reconciled=False`; `None` when the parent already shows them.
    status_patch: Option<Value>,
}

/// A failure as the host records it.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Failed {
    /// The reason of the Warning event and of `Reconciled=False`.
    reason: &'static str,
    /// Their message.
    message: String,
    /// Retried with backoff (else the host waits for the parent to change).
    retryable: bool,
}

fn parse_time(text: &str) -> Result<String, String> {
    let t: k8s_openapi::jiff::Timestamp =
        text.parse().map_err(|e| format!("{text:?} is not an RFC 3339 time such as 2024-01-01T00:00:00Z: {e}"))?;
    Ok(t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}

/// The configuration `run` would give the plugin: `--config`, else the policy's; checked
/// against the plugin's schema as `run` checks it.
fn config(args: &ReconcileArgs, source: &ConfigSource, manifest: &Manifest) -> anyhow::Result<Value> {
    let (config, from) = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            (parse_text(&text, &path.display().to_string())?, path.display().to_string())
        }
        None => {
            let Some(config) = offline(source) else {
                bail!(
                    "plugin {} is configured by {source} (host policy): pass its configuration with --config FILE",
                    manifest.name
                )
            };
            (config, format!("configuration from {source}"))
        }
    };
    check(manifest, &config).with_context(|| format!("{from}: run would not use it"))?;
    Ok(config)
}
