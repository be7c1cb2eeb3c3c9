//! `wasmop admit`: call a plugin's admission webhook offline, on an object from a file, and
//! print the answer `run` would give the API server.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use wasmop_types::Operation;

use super::object_files::{read_objects, read_one};
use super::{Output, RuntimeArgs};
use crate::admission::OfflineAdmitter;
use crate::admission::offline::{Ask, fixtures, request, summary};
use crate::contract::KnownKinds;

/// Exit code of a denied request (the verdict is printed; a request that could not be asked
/// exits 1 with one `error:` line).
pub const EXIT_DENIED: u8 = 2;

/// Arguments of `wasmop admit`.
#[derive(Debug, clap::Args)]
pub struct AdmitArgs {
    /// The plugin file.
    #[arg(long)]
    pub plugin: PathBuf,
    /// The name of the webhook to call, as the plugin's manifest declares it (`wasmop inspect`
    /// lists them).
    #[arg(long)]
    pub webhook: String,
    /// The object of the request (YAML or JSON, one object); for a DELETE, the object deleted.
    #[arg(long)]
    pub object: PathBuf,
    /// The object before an UPDATE.
    #[arg(long)]
    pub old_object: Option<PathBuf>,
    /// The operation [default: UPDATE with --old-object, else CREATE].
    #[arg(long, value_parser = parse_operation)]
    pub operation: Option<Operation>,
    /// The namespace of the request [default: the object's, else `default` for a namespaced
    /// kind].
    #[arg(long, short)]
    pub namespace: Option<String>,
    /// The user asking [default: kubernetes-admin, in the groups kubeadm:cluster-admins and
    /// system:authenticated].
    #[arg(long)]
    pub user: Option<String>,
    /// A group of the user (repeatable).
    #[arg(long = "group")]
    pub groups: Vec<String>,
    /// Objects the plugin may read while it answers (YAML/JSON, any number per file;
    /// repeatable): they stand in for the host's watch cache.
    #[arg(long)]
    pub related: Vec<PathBuf>,
    /// CRD files or directories of the custom kinds involved (repeatable); Kubernetes' own
    /// kinds are built in.
    #[arg(long)]
    pub crds: Vec<PathBuf>,
    /// Print the `AdmissionReview` response as the API server would receive it, in this format
    /// [default: the verdict, warnings and JSON Patch as text].
    #[arg(long, short, value_enum)]
    pub output: Option<Output>,
}

fn parse_operation(text: &str) -> Result<Operation, String> {
    match text.to_ascii_uppercase().as_str() {
        "CREATE" => Ok(Operation::Create),
        "UPDATE" => Ok(Operation::Update),
        "DELETE" => Ok(Operation::Delete),
        _ => Err(format!("{text:?} is not CREATE, UPDATE or DELETE")),
    }
}

pub(super) async fn run(args: AdmitArgs, runtime: &RuntimeArgs) -> anyhow::Result<ExitCode> {
    let plugin = super::progress::load_file(&runtime.runtime()?, &args.plugin).await?;
    let manifest = Arc::clone(plugin.manifest());
    let Some(webhook) = plugin.webhook(&args.webhook).cloned() else {
        let names: Vec<&str> = manifest.webhooks.iter().map(|w| w.name.as_str()).collect();
        match names.as_slice() {
            [] => bail!("plugin {} declares no webhook", manifest.name),
            _ => {
                bail!("plugin {} declares no webhook named {:?} (it declares {})", manifest.name, args.webhook, names.join(", "))
            }
        }
    };
    let mut kinds = KnownKinds::builtin();
    for path in &args.crds {
        kinds.add_crds(path)?;
    }
    // The start-up half of the gate, as `run` judges it before serving the plugin's webhooks.
    let missing = plugin.grants().ungranted(&manifest, &kinds);
    if !missing.is_empty() {
        bail!("run would not start plugin {}: it {}", manifest.name, missing.join(", "));
    }
    let ask = Ask {
        object: read_one(&args.object)?,
        old_object: args.old_object.as_deref().map(read_one).transpose()?,
        operation: args.operation,
        namespace: args.namespace,
        user: args.user,
        groups: args.groups,
    };
    let request = request(&webhook, &kinds, ask).with_context(|| format!("{}", args.object.display()))?;
    let mut related = Vec::new();
    for path in &args.related {
        related.extend(read_objects(path)?);
    }
    let namespace = request.namespace.clone().unwrap_or_else(|| "default".into());
    let (cache, warnings) = fixtures(&manifest, &kinds, &namespace, related);
    for warning in &warnings {
        eprintln!("warning: --related {warning}");
    }
    for condition in &webhook.match_conditions {
        eprintln!(
            "note: match condition {:?} is not evaluated offline (the API server evaluates it): {}",
            condition.name, condition.expression
        );
    }
    let admitter = OfflineAdmitter::new(plugin, Arc::new(cache));
    let answer = admitter.answer(&webhook.name, request).await.map_err(anyhow::Error::msg)?;
    match args.output {
        Some(output) => print!("{}", output.render(&answer.to_review())?),
        None => print!("{}", summary(&answer)),
    }
    Ok(if answer.allowed { ExitCode::SUCCESS } else { ExitCode::from(EXIT_DENIED) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_parse_in_any_case_and_others_are_named() {
        assert_eq!(parse_operation("delete"), Ok(Operation::Delete));
        assert_eq!(parse_operation("PATCH").unwrap_err(), "\"PATCH\" is not CREATE, UPDATE or DELETE");
    }
}
