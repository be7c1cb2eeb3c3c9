//! `wasmop crds`: print the CustomResourceDefinitions the host itself needs, built into the
//! binary (`wasmop crds | kubectl apply -f -`).

use crate::reload::WASMPLUGIN_CRD;

/// Arguments of `wasmop crds`.
#[derive(Debug, clap::Args)]
pub struct CrdsArgs {}

pub(super) fn run(_args: CrdsArgs) -> anyhow::Result<()> {
    print!("{WASMPLUGIN_CRD}");
    Ok(())
}
