//! `wasmop rbac`: its arguments, the kinds it resolves (built in, `--crds`, the cluster's
//! discovery), and the YAML it prints ([`crate::rbac`]).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use super::RuntimeArgs;
use crate::cluster::install_scope::namespace_name;
use crate::cluster::{Discovery, InstallScope};
use crate::contract::{Kind, KindInfo, KindsError, KnownKinds};
use crate::rbac::{kinds_of, render, render_metrics, render_namespaced};
use crate::reload::scan;

/// Arguments of `wasmop rbac`.
#[derive(Debug, clap::Args)]
pub struct RbacArgs {
    /// Directory of plugins (`*.wasm`) the host will run.
    #[arg(long)]
    pub plugins: PathBuf,
    /// Name of the ClusterRole and ClusterRoleBinding (of the Roles and RoleBindings with
    /// `--namespace`; the others' names start with it).
    #[arg(long, default_value = "wasmop")]
    pub name: String,
    /// A namespace the host watches (`wasmop run --namespace`; repeatable, comma-separated):
    /// a Role and RoleBinding in each instead of a ClusterRole [default: the whole cluster].
    #[arg(long = "namespace", value_name = "NS", value_delimiter = ',', value_parser = namespace_name)]
    pub namespaces: Vec<String>,
    /// Namespace of the host's ServiceAccount (and of its leader-election Lease).
    #[arg(long, default_value = "wasmop-system")]
    pub service_account_namespace: String,
    /// The host's ServiceAccount.
    #[arg(long, default_value = "wasmop")]
    pub service_account: String,
    /// CustomResourceDefinitions of the plugins' custom kinds: a YAML/JSON file, or a
    /// directory of them (repeatable). Their `spec.names.plural` and `spec.scope` are used.
    #[arg(long)]
    pub crds: Vec<PathBuf>,
    /// For a host run with `--metrics-secure`: also the ClusterRole `<name>-metrics-auth`
    /// (create TokenReviews and SubjectAccessReviews, to check each scrape) bound to the host,
    /// and the ClusterRole `<name>-metrics-reader` (get `/metrics`) to bind to the scrapers.
    #[arg(long)]
    pub metrics_secure: bool,
    /// Ask this cluster (by discovery) about kinds that are neither built in nor in `--crds`
    /// [default: the default kubeconfig, when there is one].
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

/// The built-in kinds, the CRDs in `crds`, and — for any of `needed` still unknown — what the
/// cluster's discovery says (`kubeconfig`, else the default kubeconfig). No cluster is
/// contacted when every needed kind is known offline.
///
/// # Errors
/// A CRD file that cannot be read; a kind still unknown (with the cluster's answer, if one
/// was asked).
pub async fn known_kinds(
    needed: &BTreeSet<Kind>,
    crds: &[PathBuf],
    kubeconfig: Option<&std::path::Path>,
) -> anyhow::Result<KnownKinds> {
    let mut kinds = KnownKinds::builtin();
    for path in crds {
        kinds.add_crds(path)?;
    }
    let unknown: Vec<&Kind> = needed.iter().filter(|k| kinds.get(k).is_none()).collect();
    let Some(first) = unknown.first() else { return Ok(kinds) };
    let client = super::run::client(kubeconfig)
        .await
        .map_err(|e| anyhow::anyhow!("{} (and no cluster to ask: {e:#})", KindsError::Unknown { kind: (*first).clone() }))?;
    let discovery = Discovery::new(client);
    for kind in unknown {
        let resolved = discovery
            .resolve(kind, Duration::from_secs(5))
            .await
            .with_context(|| format!("{} (and the cluster does not serve it)", KindsError::Unknown { kind: kind.clone() }))?;
        kinds.insert(kind, KindInfo { plural: resolved.resource.plural, scope: resolved.scope });
    }
    Ok(kinds)
}

pub(super) async fn run(args: RbacArgs, runtime: &RuntimeArgs) -> anyhow::Result<()> {
    let policy = runtime.host_policy()?;
    let runtime = runtime.runtime()?;
    let mut manifests = Vec::new();
    for file in scan(&args.plugins)? {
        let plugin = runtime.load_file(&file).await.map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        manifests.push(plugin.manifest().as_ref().clone());
    }
    let kinds = known_kinds(&kinds_of(&manifests), &args.crds, args.kubeconfig.as_deref()).await?;
    let (sa_namespace, sa) = (&args.service_account_namespace, &args.service_account);
    let mut yaml = match InstallScope::from_names(&args.namespaces)? {
        InstallScope::Cluster => render(&manifests, &policy, &kinds, &args.name, sa_namespace, sa)?,
        InstallScope::Namespaces(namespaces) => {
            render_namespaced(&manifests, &policy, &kinds, &args.name, &namespaces, sa_namespace, sa)?
        }
    };
    if args.metrics_secure {
        yaml.push_str(&render_metrics(&args.name, sa_namespace, sa)?);
    }
    print!("{yaml}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::fixtures::octopus_crd;

    #[tokio::test]
    async fn known_kinds_asks_no_cluster_when_the_files_know_every_kind() {
        let dir = tempfile::tempdir().unwrap();
        let crd = octopus_crd(dir.path());
        let needed: BTreeSet<Kind> = [Kind::new("sea.example.com", "v1", "Octopus"), Kind::new("", "v1", "Pod")].into();
        let absent = dir.path().join("no-kubeconfig");
        let kinds = known_kinds(&needed, &[crd], Some(&absent)).await.unwrap();
        assert_eq!(kinds.resolve(&Kind::new("sea.example.com", "v1", "Octopus")).unwrap().plural, "octopodes");
        let err = known_kinds(&needed, &[], Some(&absent)).await.unwrap_err();
        let err = format!("{err:#}");
        assert!(err.starts_with("kind sea.example.com/v1/Octopus is unknown") && err.contains("and no cluster to ask"), "{err}");
    }

    #[test]
    fn rbac_namespace_is_repeatable_and_the_service_account_namespace_is_its_own_flag() {
        use clap::Parser;
        let args =
            ["wasmop", "rbac", "--plugins", "p", "--namespace", "a,b", "--namespace", "c", "--service-account-namespace", "ops"];
        let crate::cli::Command::Rbac(args) = crate::cli::Cli::try_parse_from(args).unwrap().command else { panic!("not rbac") };
        assert_eq!(args.namespaces, ["a", "b", "c"]);
        assert_eq!(args.service_account_namespace, "ops");
        let bad = crate::cli::Cli::try_parse_from(["wasmop", "rbac", "--plugins", "p", "--namespace", "A"]).unwrap_err();
        assert!(bad.to_string().contains("\"A\" is not a namespace name"), "{bad}");
    }
}
