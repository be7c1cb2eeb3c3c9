//! `wasmop webhooks`: the webhook configurations a host registers for a plugins directory, as
//! YAML, for GitOps (the same documents `wasmop run` applies). A plugin the host policy would
//! not start (its webhooks admit what it neither declares nor is granted) is left out, with a
//! comment saying why, as the host leaves it out.

use std::collections::BTreeMap;
use std::path::PathBuf;

use wasmop_types::Webhook;

use super::RuntimeArgs;
use super::rbac::known_kinds;
use crate::admission::HostObjects;
use crate::admission::registration::{self, Endpoint};
use crate::cluster::InstallScope;
use crate::contract::{KnownKinds, Manifest};
use crate::policy::{HostPolicy, NamespaceGrant};
use crate::rbac::{self, kinds_of};
use crate::reload::scan;

/// Arguments of `wasmop webhooks`.
#[derive(Debug, clap::Args)]
pub struct WebhooksArgs {
    /// Directory of plugins (`*.wasm`) the host will run.
    #[arg(long)]
    pub plugins: PathBuf,
    /// Name of both configurations (`wasmop run --admission-configuration-name`).
    #[arg(long, default_value = "wasmop")]
    pub name: String,
    /// The Service the host serves webhooks behind, `NAMESPACE/NAME`.
    #[arg(long, value_name = "NAMESPACE/NAME", default_value = "wasmop-system/wasmop-webhook", conflicts_with = "url_base")]
    pub service: String,
    /// The Service port.
    #[arg(long, default_value_t = 443)]
    pub service_port: u16,
    /// Point the webhooks at this base URL instead of a Service.
    #[arg(long, value_name = "URL")]
    pub url_base: Option<String>,
    /// PEM file of the CA that signed the serving certificate, written as `caBundle` (without
    /// it there is none: let cert-manager's CA injector fill it in).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// CustomResourceDefinition files or directories defining the plugins' custom kinds (to
    /// judge which resources their webhooks admit; as `wasmop rbac --crds`).
    #[arg(long)]
    pub crds: Vec<PathBuf>,
    /// Ask this cluster for kinds neither built in nor given with `--crds`.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

pub(super) async fn run(args: WebhooksArgs, runtime: &RuntimeArgs) -> anyhow::Result<()> {
    let policy = runtime.host_policy()?;
    let runtime = runtime.runtime()?;
    let mut manifests = Vec::new();
    for file in scan(&args.plugins)? {
        let plugin = runtime.load_file(&file).await.map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        if !plugin.manifest().webhooks.is_empty() {
            manifests.push(plugin.manifest().as_ref().clone());
        }
    }
    let kinds = known_kinds(&kinds_of(&manifests), &args.crds, args.kubeconfig.as_deref()).await?;
    let (plugins, left_out) = served(&manifests, &policy, &kinds);
    let grants = plugins.keys().map(|name| (name.clone(), policy.for_plugin(name).grants.namespaces)).collect();
    print!("{}", render(&args, &plugins, &grants, &left_out)?);
    Ok(())
}

/// The webhooks of the plugins in `manifests` that `policy` lets start, by plugin name, and a
/// comment line for each plugin left out, saying what is not granted.
pub fn served(manifests: &[Manifest], policy: &HostPolicy, kinds: &KnownKinds) -> (BTreeMap<String, Vec<Webhook>>, Vec<String>) {
    let mut plugins = BTreeMap::new();
    let mut left_out = Vec::new();
    for m in manifests.iter().filter(|m| !m.webhooks.is_empty()) {
        match rbac::left_out(m, policy, kinds, &InstallScope::Cluster) {
            None => {
                plugins.insert(m.name.clone(), m.webhooks.clone());
            }
            Some(why) => left_out.push(why),
        }
    }
    (plugins, left_out)
}

/// The configurations for `plugins`' webhooks (by plugin name) as `args` say, each plugin's
/// reaching the namespaces `grants` gives it (beyond the host's exclusions), as YAML after a
/// comment naming the plugins and the `left_out` comment lines.
///
/// # Errors
/// A `--service` that is not `NAMESPACE/NAME`; an unreadable `--ca-file`; a declared selector
/// that does not parse.
pub fn render(
    args: &WebhooksArgs,
    plugins: &BTreeMap<String, Vec<Webhook>>,
    grants: &BTreeMap<String, NamespaceGrant>,
    left_out: &[String],
) -> anyhow::Result<String> {
    let endpoint = match &args.url_base {
        Some(url) => Endpoint::Url(url.clone()),
        None => {
            let Some((namespace, name)) = args.service.split_once('/').filter(|(ns, n)| !ns.is_empty() && !n.is_empty()) else {
                anyhow::bail!("--service {:?}: expected NAMESPACE/NAME", args.service);
            };
            Endpoint::Service { namespace: namespace.into(), name: name.into(), port: args.service_port }
        }
    };
    let ca = match &args.ca_file {
        Some(path) => Some(std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?),
        None => None,
    };
    // The host runs in its Service's namespace (its Leases and certificate Secret too).
    let namespace = match &endpoint {
        Endpoint::Service { namespace, .. } => namespace.clone(),
        Endpoint::Url(_) => "default".to_owned(),
    };
    let host = HostObjects {
        namespace: matches!(endpoint, Endpoint::Service { .. }).then(|| namespace.clone()),
        secret: Some((namespace.clone(), crate::admission::certs::ADMISSION_SECRET.to_owned())),
        lease_namespace: namespace,
    };
    let exclusions = registration::Exclusions { host, grants: grants.clone() };
    let configurations = registration::build(&args.name, &endpoint, ca.as_deref(), &exclusions, plugins)?;
    let header = if configurations.is_empty() {
        format!("# Generated by `wasmop webhooks`: no plugin in {} declares a webhook\n", args.plugins.display())
    } else {
        let names: Vec<&str> = plugins.keys().map(String::as_str).collect();
        format!("# Generated by `wasmop webhooks` for plugins: {}\n", names.join(", "))
    };
    Ok(header + &left_out.concat() + &registration::render_yaml(&configurations)?)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn args(extra: &[&str]) -> WebhooksArgs {
        let cli = Cli::try_parse_from([&["wasmop", "webhooks", "--plugins", "/p"], extra].concat()).unwrap();
        let Command::Webhooks(args) = cli.command else { unreachable!("a webhooks command") };
        args
    }

    fn plugins() -> BTreeMap<String, Vec<Webhook>> {
        let webhook: Webhook =
            serde_json::from_value(serde_json::json!({"name": "inject", "type": "Mutating", "timeoutSeconds": 5,
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}))
            .unwrap();
        [("sidecarset".to_owned(), vec![webhook])].into()
    }

    #[test]
    fn the_default_points_at_the_deployed_service_and_names_the_plugins() {
        let yaml = render(&args(&[]), &plugins(), &BTreeMap::new(), &[]).unwrap();
        assert!(yaml.starts_with("# Generated by `wasmop webhooks` for plugins: sidecarset\n---\n"), "{yaml}");
        let document: serde_json::Value = crate::yaml::from_str(yaml.split("---\n").nth(1).unwrap()).unwrap();
        assert_eq!(document["kind"], "MutatingWebhookConfiguration");
        assert_eq!(
            document["webhooks"][0]["clientConfig"],
            serde_json::json!({"service": {"namespace": "wasmop-system", "name": "wasmop-webhook", "path": "/admission/sidecarset/inject", "port": 443}})
        );
        assert!(!yaml.contains("ValidatingWebhookConfiguration") && !yaml.contains("caBundle"), "{yaml}");
    }

    #[test]
    fn a_webhooks_match_conditions_are_printed_before_the_hosts() {
        let mut plugins = plugins();
        let inject = &mut plugins.get_mut("sidecarset").unwrap()[0];
        *inject = inject.clone().match_condition("not-opted-out", "object.metadata.name != 'skip'");
        let yaml = render(&args(&[]), &plugins, &BTreeMap::new(), &[]).unwrap();
        let document: serde_json::Value = crate::yaml::from_str(yaml.split("---\n").nth(1).unwrap()).unwrap();
        let conditions = document["webhooks"][0]["matchConditions"].as_array().unwrap();
        assert_eq!(conditions[0], serde_json::json!({"name": "not-opted-out", "expression": "object.metadata.name != 'skip'"}));
        assert!(conditions.len() > 1, "the host's follow: {conditions:?}");
        assert!(conditions[1..].iter().all(|c| c["name"].as_str().unwrap().starts_with("wasmop-")), "{conditions:?}");
    }

    #[test]
    fn a_ca_file_is_the_bundle_and_bad_arguments_are_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.crt"), "PEM").unwrap();
        let ca = dir.path().join("ca.crt").display().to_string();
        let yaml = render(&args(&["--url-base", "https://h:9443", "--ca-file", &ca]), &plugins(), &BTreeMap::new(), &[]).unwrap();
        assert!(yaml.contains("url: https://h:9443/admission/sidecarset/inject") && yaml.contains("caBundle: UEVN"), "{yaml}");
        let err = render(&args(&["--service", "nonamespace"]), &plugins(), &BTreeMap::new(), &[]).unwrap_err().to_string();
        assert_eq!(err, "--service \"nonamespace\": expected NAMESPACE/NAME");
        let none = render(&args(&[]), &BTreeMap::new(), &BTreeMap::new(), &[]).unwrap();
        assert_eq!(none, "# Generated by `wasmop webhooks`: no plugin in /p declares a webhook\n");
    }

    #[test]
    fn a_plugin_whose_webhooks_admit_ungranted_resources_is_left_out_with_the_reason() {
        let mut steal = crate::contract::manifest::fixtures::memcached("");
        steal.name = "steal".into();
        steal.webhooks = plugins().remove("sidecarset").unwrap();
        steal.webhooks[0].rules[0].resources = vec!["secrets".into()];
        let mut fine = crate::contract::manifest::fixtures::memcached("");
        fine.webhooks = plugins().remove("sidecarset").unwrap();
        // Its mutating webhook writes Pods: it declares them as a child (memcached declares
        // them only as related, a read).
        fine.children.push(crate::contract::Kind::new("", "v1", "Pod"));
        let policy = HostPolicy::default();
        let (plugins, left_out) = served(&[steal.clone(), fine], &policy, &KnownKinds::builtin());
        assert_eq!(plugins.keys().collect::<Vec<_>>(), ["memcached"]);
        assert_eq!(left_out.len(), 1);
        assert!(left_out[0].starts_with("# LEFT OUT: plugin steal mutates secrets in webhook \"inject\""), "{left_out:?}");
        let yaml = render(&args(&[]), &plugins, &BTreeMap::new(), &left_out).unwrap();
        assert!(yaml.contains("# LEFT OUT: plugin steal") && !yaml.contains("/admission/steal/"), "{yaml}");
        let granted = HostPolicy::from_yaml(
            "plugins: {steal: {grants: {secrets: write, webhookResources: [{resource: secrets, mode: mutate}]}}}",
        )
        .unwrap();
        let (plugins, left_out) = served(&[steal], &granted, &KnownKinds::builtin());
        assert!(plugins.contains_key("steal") && left_out.is_empty());
    }
}
