//! `wasmop reconcile`: run a plugin once, offline, and print its response.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use serde_json::Value;

use super::fixtures::{default_namespace, read_objects, read_one};
use super::{Output, RuntimeArgs};
use crate::contract::{Kind, Request, Scope};
use crate::objects::{MemoryCache, ObjectCache};

/// Arguments of `wasmop reconcile`.
#[derive(Debug, clap::Args)]
pub struct ReconcileArgs {
    /// The plugin file.
    #[arg(long)]
    pub plugin: PathBuf,
    /// The parent object (YAML or JSON, one object).
    #[arg(long)]
    pub object: PathBuf,
    /// Observed children (YAML/JSON, any number of objects per file; repeatable).
    #[arg(long)]
    pub children: Vec<PathBuf>,
    /// Related objects the plugin may read (repeatable).
    #[arg(long)]
    pub related: Vec<PathBuf>,
    /// Call the plugin as if the parent were being deleted.
    #[arg(long)]
    pub finalizing: bool,
    /// The plugin's configuration (a YAML/JSON object).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t)]
    pub output: Output,
}

pub(super) async fn run(args: ReconcileArgs, runtime: &RuntimeArgs) -> anyhow::Result<()> {
    let plugin = runtime.runtime()?.load_file(&args.plugin).await?;
    let manifest = Arc::clone(plugin.manifest());
    let mut parent = read_one(&args.object)?;
    let kind = Kind::of_object(&parent).expect("read_one checks apiVersion and kind");
    if kind != manifest.parent {
        bail!("{}: the object is a {kind}, but plugin {} reconciles {}", args.object.display(), manifest.name, manifest.parent);
    }
    let namespace = match manifest.scope {
        Scope::Namespaced => {
            default_namespace(&mut parent, "default");
            parent["metadata"]["namespace"].as_str().map(str::to_owned)
        }
        Scope::Cluster => None,
    };
    let mut cache = MemoryCache::default();
    let mut load = |files: &[PathBuf], role: &str| -> anyhow::Result<()> {
        for file in files {
            for mut object in read_objects(file)? {
                let kind = Kind::of_object(&object).expect("read_objects checks apiVersion and kind");
                let allowed = if role == "child" { manifest.may_write(&kind) } else { manifest.may_read(&kind) };
                if !allowed {
                    bail!("{}: {kind} is not a {role} kind of plugin {}", file.display(), manifest.name);
                }
                if let Some(ns) = &namespace {
                    default_namespace(&mut object, ns);
                }
                cache.insert(object).with_context(|| format!("{}", file.display()))?;
            }
        }
        Ok(())
    };
    load(&args.children, "child")?;
    load(&args.related, "related")?;
    let mut request = Request::gather(Arc::new(parent), &manifest, &cache, false)?;
    request.finalizing = args.finalizing;
    if let Some(path) = &args.config {
        request.config = read_config(path)?;
    }
    let cache: Arc<dyn ObjectCache> = Arc::new(cache);
    let (response, stats) = plugin.reconcile(&request, cache).await?;
    tracing::debug!(elapsed = ?stats.elapsed, memory = stats.memory_high_water, "reconciled");
    print!("{}", args.output.render(&response)?);
    Ok(())
}

fn read_config(path: &std::path::Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let value: Value = serde_yaml::from_str(&text).with_context(|| format!("{}: not valid YAML", path.display()))?;
    if !value.is_object() {
        bail!("{}: the configuration must be an object", path.display());
    }
    Ok(value)
}
