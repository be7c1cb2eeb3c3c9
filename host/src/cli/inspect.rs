//! `wasmop inspect`: print a plugin's manifest.

use std::path::PathBuf;

use serde::Serialize;

use super::{Output, RuntimeArgs};
use crate::contract::Manifest;

/// Arguments of `wasmop inspect`.
#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// The plugin file (`.wasm`: a component, or a wasm32-wasip1 module).
    pub plugin: PathBuf,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t)]
    pub output: Output,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Inspection<'a> {
    digest: &'a str,
    manifest: &'a Manifest,
}

pub(super) async fn run(args: InspectArgs, runtime: &RuntimeArgs) -> anyhow::Result<()> {
    let plugin = runtime.runtime()?.load_file(&args.plugin).await?;
    let out = Inspection { digest: plugin.digest(), manifest: plugin.manifest() };
    print!("{}", args.output.render(&out)?);
    Ok(())
}
