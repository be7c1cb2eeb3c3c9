//! `wasmop inspect`: print a plugin's manifest, and what this host's policy would allow it; with
//! `--kubeconfig`, which of the kinds it declares (and resources its webhooks' rules name) the
//! cluster does not serve, by the discovery check `run` makes before it starts a plugin.

use std::path::PathBuf;

use serde::Serialize;

use super::{Output, RuntimeArgs};
use crate::cluster::Discovery;
use crate::contract::{KnownKinds, Manifest};
use crate::plugin_config::{check, compile_schema, offline};
use crate::policy::{ConfigSource, grants_json, limits_json};

/// Arguments of `wasmop inspect`.
#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// The plugin file (`.wasm`: a component, or a wasm32-wasip1 module).
    pub plugin: PathBuf,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t)]
    pub output: Output,
    /// CustomResourceDefinitions of the plugin's custom kinds (a file or a directory;
    /// repeatable), to tell whether they are cluster-scoped. Without `--kubeconfig`, the kinds
    /// and webhook resources the plugin declares are also checked offline against Kubernetes'
    /// own and these CRDs (name and served version), as if they were the cluster's: what is
    /// missing is listed under `notServed`.
    #[arg(long)]
    pub crds: Vec<std::path::PathBuf>,
    /// Check every kind the plugin declares (parent, children, related kinds) and every
    /// resource its webhooks' rules name against this cluster's discovery, as `run` does
    /// before it starts the plugin; those not served are listed under `notServed`, one line
    /// each.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Inspection<'a> {
    digest: &'a str,
    manifest: &'a Manifest,
    /// The limits its calls would run under (the `--policy` file, flags, defaults).
    limits: serde_json::Value,
    /// What the policy grants it beyond its manifest.
    grants: serde_json::Value,
    /// The configuration the policy gives it, and whether its schema accepts it.
    config: ConfigInUse,
    /// What it declares that the policy does not grant: a host would not start it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    not_granted: Vec<String>,
    /// Child kinds whose scope this command cannot tell (neither built in nor in `--crds`),
    /// so `not_granted` may miss a cluster-scoped one; a host decides by discovery.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unknown_child_kinds: Vec<String>,
    /// With `--kubeconfig`: what the cluster does not serve, one line each (a host would not
    /// start the plugin there). With `--crds` alone: what neither Kubernetes' own kinds nor
    /// those CRDs serve.
    #[serde(skip_serializing_if = "Option::is_none")]
    not_served: Option<Vec<String>>,
}

/// The plugin's configuration as `run` would use it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConfigInUse {
    /// `none`, `policy`, or `ConfigMap NAMESPACE/NAME`.
    source: String,
    /// The configuration (absent for a ConfigMap: only `run` reads it).
    #[serde(skip_serializing_if = "Option::is_none")]
    in_use: Option<serde_json::Value>,
    /// Whether the plugin's schema accepts it (absent for a ConfigMap).
    #[serde(skip_serializing_if = "Option::is_none")]
    valid: Option<bool>,
    /// Why not: a host would not start the plugin.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

impl ConfigInUse {
    fn of(source: &ConfigSource, manifest: &Manifest) -> Self {
        let config = offline(source);
        // A broken schema is reported even when the configuration in use does not need it yet.
        let error = compile_schema(manifest).err().or_else(|| config.as_ref().and_then(|c| check(manifest, c).err()));
        let error = error.map(|e| e.to_string());
        Self { source: source.to_string(), valid: config.as_ref().map(|_| error.is_none()), in_use: config, error }
    }
}

pub(super) async fn run(args: InspectArgs, runtime: &RuntimeArgs) -> anyhow::Result<()> {
    let plugin = super::progress::load_file(&runtime.runtime()?, &args.plugin).await?;
    let mut kinds = KnownKinds::builtin();
    for path in &args.crds {
        kinds.add_crds(path)?;
    }
    let unknown = plugin.manifest().children.iter().filter(|k| kinds.get(k).is_none());
    let not_served = match &args.kubeconfig {
        Some(path) => Some(not_served(plugin.manifest(), path).await?),
        None if !args.crds.is_empty() => Some(not_served_offline(plugin.manifest(), &kinds)),
        None => None,
    };
    let out = Inspection {
        digest: plugin.digest(),
        manifest: plugin.manifest(),
        limits: limits_json(plugin.limits()),
        grants: grants_json(plugin.grants()),
        config: ConfigInUse::of(&runtime.host_policy()?.for_plugin(plugin.name()).config, plugin.manifest()),
        not_granted: plugin.grants().ungranted(plugin.manifest(), &kinds),
        unknown_child_kinds: unknown.map(ToString::to_string).collect(),
        not_served,
    };
    print!("{}", args.output.render(&out)?);
    Ok(())
}

/// What a cluster serving Kubernetes' own kinds and exactly the CRDs of `kinds` would not serve
/// of what `manifest` declares, in the order [`not_served`] reports it.
fn not_served_offline(manifest: &Manifest, kinds: &KnownKinds) -> Vec<String> {
    let declared = std::iter::once(&manifest.parent).chain(&manifest.children).chain(manifest.related.iter().map(|r| &r.kind));
    let mut lines: Vec<String> = declared.filter_map(|kind| kinds.serves(kind).err()).collect();
    for (webhook, group, version, resource) in manifest.webhook_rule_resources() {
        if let Err(why) = kinds.serves_resource(group, version, resource) {
            lines.push(format!("webhook {webhook}: {why}"));
        }
    }
    lines.dedup();
    lines
}

/// How long a lookup waits for an unreachable API server.
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// What the cluster of `kubeconfig` does not serve of what `manifest` declares: the declared
/// kinds, resolved as a plugin's start resolves them, then the webhooks' rules' resources.
///
/// # Errors
/// A kubeconfig that cannot be used.
async fn not_served(manifest: &Manifest, kubeconfig: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let discovery = Discovery::new(super::run::client(Some(kubeconfig)).await?);
    let kinds = discovery.resolve_declared(manifest, PATIENCE).await.err().unwrap_or_default();
    let resources = discovery.check_webhook_resources(manifest).await.err().unwrap_or_default();
    // One line each, whatever the server's answer holds.
    let line = |e: &crate::cluster::DiscoveryError| e.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
    Ok(kinds.iter().chain(&resources).map(line).collect())
}
