//! The host's webhook configurations: one `ValidatingWebhookConfiguration` and one
//! `MutatingWebhookConfiguration`, both named after the release (`wasmop-<release>`), built from
//! the loaded plugins' manifests and kept up to date by [`Registrar`].
//!
//! Each declared webhook becomes one entry named `<webhook>.<plugin>.wasmop.dev`, with
//! `admissionReviewVersions: [v1]`, the CA bundle, and a client config that is either a URL
//! (`<base>/admission/<plugin>/<webhook>`, for a host outside the cluster or on loopback in
//! tests) or a Service reference with that path (in a cluster). With no webhook at all, both
//! configurations are deleted. `wasmop webhooks` prints the same documents ([`render_yaml`]).
//!
//! Every entry also carries the host's [`exclusions`](super::exclusions): its namespace selector
//! gains the namespaces no plugin webhook reaches, and its `matchConditions` exclude the objects
//! the host runs on.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::sync::watch;
use wasmop_types::{LabelSelector, MatchCondition, SelectorError, Webhook, WebhookType};

use super::exclusions::{HostObjects, exclude_namespaces};
use super::handler::webhook_path;
use crate::leader::Leadership;
use crate::policy::NamespaceGrant;

/// The field manager of the host's server-side applies of its webhook configurations.
pub const FIELD_MANAGER: &str = "wasmop-admission";

/// How long [`Registrar::update`] waits for the leader's write before going on.
pub const UPDATE_PATIENCE: Duration = Duration::from_secs(10);

/// Why configurations could not be built or written.
#[derive(Debug, thiserror::Error)]
pub enum RegistrationError {
    /// A declared selector does not parse.
    #[error("plugin {plugin}, webhook {webhook}: {error}")]
    Selector {
        /// The plugin.
        plugin: String,
        /// The webhook.
        webhook: String,
        /// The parse error.
        error: SelectorError,
    },
    /// The API server refused a write.
    #[error("cannot write {kind} {name}: {error}")]
    Api {
        /// `ValidatingWebhookConfiguration` or `MutatingWebhookConfiguration`.
        kind: &'static str,
        /// Its name.
        name: String,
        /// The API error.
        error: kube::Error,
    },
}

/// Where the API server reaches the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A base URL (`https://127.0.0.1:9443`); the webhook path is appended.
    Url(String),
    /// A Service in the cluster, with the port it serves the admission server on.
    Service {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
        /// The Service port.
        port: u16,
    },
}

/// Both configurations, as JSON documents; `webhooks` empty when there is none of that type.
#[derive(Debug, Clone, PartialEq)]
pub struct Configurations {
    /// The `ValidatingWebhookConfiguration`.
    pub validating: Value,
    /// The `MutatingWebhookConfiguration`.
    pub mutating: Value,
}

impl Configurations {
    /// Whether no plugin declares any webhook.
    pub fn is_empty(&self) -> bool {
        let empty = |c: &Value| c["webhooks"].as_array().is_none_or(Vec::is_empty);
        empty(&self.validating) && empty(&self.mutating)
    }
}

/// What the registered webhooks never reach: the host's objects, and for each plugin the
/// namespaces its policy grants (a plugin missing here is granted only its parents' namespaces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exclusions {
    /// The objects the host runs on.
    pub host: HostObjects,
    /// Each plugin's namespace grant (`grants.namespaces`), by plugin name.
    pub grants: BTreeMap<String, NamespaceGrant>,
}

impl Exclusions {
    /// The exclusions of `host`, with no plugin granted any other namespace.
    pub fn new(host: HostObjects) -> Self {
        Self { host, grants: BTreeMap::new() }
    }
}

/// The registered name of webhook `webhook` of `plugin`.
pub fn registered_name(plugin: &str, webhook: &str) -> String {
    format!("{webhook}.{plugin}.wasmop.dev")
}

/// A webhook's `matchConditions`: the plugin's own first, then the host's. The API server calls
/// the webhook only when all hold, so the plugin's narrow the call and never widen what the
/// host's exclude.
fn plugin_first(plugin: &[MatchCondition], host: &[Value]) -> Vec<Value> {
    plugin.iter().map(|c| json!({"name": c.name, "expression": c.expression})).chain(host.iter().cloned()).collect()
}

/// The configurations named `name` for `plugins`' webhooks (by plugin name), reached at
/// `endpoint`, trusting `ca_pem` (omitted when `None`, e.g. for cert-manager's CA injector),
/// each webhook excluding what `exclusions` say.
///
/// # Errors
/// [`RegistrationError::Selector`] when a declared namespace or object selector does not parse.
pub fn build(
    name: &str,
    endpoint: &Endpoint,
    ca_pem: Option<&str>,
    exclusions: &Exclusions,
    plugins: &BTreeMap<String, Vec<Webhook>>,
) -> Result<Configurations, RegistrationError> {
    let (mut validating, mut mutating) = (Vec::new(), Vec::new());
    let match_conditions = exclusions.host.match_conditions(name);
    for (plugin, webhooks) in plugins {
        let grant = exclusions.grants.get(plugin).cloned().unwrap_or_default();
        let excluded = exclusions.host.excluded_namespaces(&grant);
        let mut webhooks: Vec<&Webhook> = webhooks.iter().collect();
        webhooks.sort_by(|a, b| a.name.cmp(&b.name));
        for webhook in webhooks {
            let selector = |s: &str| {
                selector(s).map_err(|error| RegistrationError::Selector {
                    plugin: plugin.clone(),
                    webhook: webhook.name.clone(),
                    error,
                })
            };
            let path = webhook_path(plugin, &webhook.name);
            let mut client_config = match endpoint {
                Endpoint::Url(base) => json!({"url": format!("{}{path}", base.trim_end_matches('/'))}),
                Endpoint::Service { namespace, name, port } => {
                    json!({"service": {"namespace": namespace, "name": name, "path": path, "port": port}})
                }
            };
            if let Some(ca) = ca_pem {
                client_config["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(ca));
            }
            let entry = json!({
                "name": registered_name(plugin, &webhook.name),
                "admissionReviewVersions": ["v1"],
                "clientConfig": client_config,
                "rules": webhook.rules,
                "failurePolicy": webhook.failure_policy,
                "sideEffects": webhook.side_effects,
                "timeoutSeconds": webhook.timeout_seconds,
                "matchPolicy": "Equivalent",
                "namespaceSelector": exclude_namespaces(selector(&webhook.namespace_selector)?, &excluded),
                "objectSelector": selector(&webhook.object_selector)?,
                "matchConditions": plugin_first(&webhook.match_conditions, &match_conditions),
            });
            match webhook.type_ {
                WebhookType::Validating => validating.push(entry),
                WebhookType::Mutating => mutating.push(entry),
            }
        }
    }
    let document = |kind: &str, webhooks: Vec<Value>| {
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "wasmop"}},
            "webhooks": webhooks,
        })
    };
    Ok(Configurations {
        validating: document("ValidatingWebhookConfiguration", validating),
        mutating: document("MutatingWebhookConfiguration", mutating),
    })
}

/// The configurations as a YAML stream (the mutating one first, as the API server calls
/// mutating webhooks first); a configuration without webhooks is left out.
///
/// # Errors
/// A YAML serialization failure.
pub fn render_yaml(configurations: &Configurations) -> Result<String, crate::yaml::YamlError> {
    let mut out = String::new();
    for document in [&configurations.mutating, &configurations.validating] {
        if document["webhooks"].as_array().is_some_and(|w| !w.is_empty()) {
            out.push_str("---\n");
            out.push_str(&crate::yaml::to_string(document)?);
        }
    }
    Ok(out)
}

/// A kubectl-syntax selector as a Kubernetes `LabelSelector` (`matchExpressions` only, which
/// can say everything the syntax can).
fn selector(text: &str) -> Result<Value, SelectorError> {
    // Parse first: only a valid selector is translated, from its canonical form.
    let canonical = LabelSelector::parse(text)?.to_string();
    let mut expressions = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    let mut parts = Vec::new();
    for (i, c) in canonical.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&canonical[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&canonical[start..]);
    for part in parts.into_iter().filter(|p| !p.is_empty()) {
        let set = |values: &str| values.trim_end_matches(')').split(',').map(str::to_owned).collect::<Vec<_>>();
        let expression = if let Some((key, values)) = part.split_once(" notin (") {
            json!({"key": key, "operator": "NotIn", "values": set(values)})
        } else if let Some((key, values)) = part.split_once(" in (") {
            json!({"key": key, "operator": "In", "values": set(values)})
        } else if let Some((key, value)) = part.split_once("!=") {
            json!({"key": key, "operator": "NotIn", "values": [value]})
        } else if let Some((key, value)) = part.split_once('=') {
            json!({"key": key, "operator": "In", "values": [value]})
        } else if let Some(key) = part.strip_prefix('!') {
            json!({"key": key, "operator": "DoesNotExist"})
        } else {
            json!({"key": part, "operator": "Exists"})
        };
        expressions.push(expression);
    }
    Ok(if expressions.is_empty() { json!({}) } else { json!({"matchExpressions": expressions}) })
}

/// What the registrar is to write: its generation, each plugin's webhooks and namespace grant.
type Desired = (u64, BTreeMap<String, Vec<Webhook>>, BTreeMap<String, NamespaceGrant>);

/// Keeps the host's two webhook configurations equal to what the loaded plugins declare.
///
/// Every replica follows the plugins; only the leader writes (a standby's latest desired
/// state is written when it starts leading). Writes are server-side applies with the field
/// manager [`FIELD_MANAGER`], or deletes when no webhook is left.
#[derive(Debug)]
pub struct Registrar {
    desired: watch::Sender<Desired>,
    applied: watch::Receiver<u64>,
    published: watch::Receiver<String>,
    leadership: Leadership,
}

impl Registrar {
    /// Start writing the configurations named `name` for `endpoint`, trusting the CA bundle
    /// `ca` holds now and later, every webhook excluding `host`'s objects. Nothing is written
    /// before the first [`Registrar::update`].
    /// Returns the registrar and its writing task (abort it to stop).
    pub fn start(
        client: kube::Client,
        name: String,
        endpoint: Endpoint,
        host: HostObjects,
        leadership: Leadership,
        mut ca: watch::Receiver<String>,
    ) -> (Arc<Self>, tokio::task::JoinHandle<()>) {
        let (desired, mut wanted) = watch::channel((0, BTreeMap::new(), BTreeMap::new()));
        let (applied_tx, applied) = watch::channel(0);
        let (published_tx, published) = watch::channel(String::new());
        let leading = leadership.clone();
        let task = tokio::spawn(async move {
            loop {
                leading.until_leader().await;
                let (generation, plugins, grants) = wanted.borrow_and_update().clone();
                let bundle = ca.borrow_and_update().clone();
                if generation > 0 {
                    let exclusions = Exclusions { host: host.clone(), grants };
                    let written = async {
                        let configurations = build(&name, &endpoint, Some(&bundle), &exclusions, &plugins)?;
                        write(&client, &name, &configurations).await
                    };
                    if let Err(e) = written.await {
                        tracing::error!(error = %e, "cannot update the webhook configurations; trying again");
                        tokio::time::sleep(Duration::from_secs(2)).await;
                        wanted.mark_changed();
                        continue;
                    }
                    applied_tx.send_replace(generation);
                }
                // Before any plugin was registered this host wrote no bundle anywhere: none is
                // stale.
                published_tx.send_replace(bundle);
                tokio::select! {
                    changed = wanted.changed() => if changed.is_err() { return },
                    changed = ca.changed() => if changed.is_err() { return },
                }
            }
        });
        (Arc::new(Self { desired, applied, published, leadership }), task)
    }

    /// The CA bundle the webhook configurations carry: the one this registrar last wrote as
    /// the leader (empty before).
    pub fn published(&self) -> watch::Receiver<String> {
        self.published.clone()
    }

    /// Register exactly `plugins`' webhooks, each plugin's reaching the namespaces `grants`
    /// gives it. On the leader, returns once they are written (at most [`UPDATE_PATIENCE`]), so
    /// that a caller removing a plugin can stop it only after the API server was told to stop
    /// calling it; on a standby, at once.
    pub async fn update(&self, plugins: BTreeMap<String, Vec<Webhook>>, grants: BTreeMap<String, NamespaceGrant>) {
        let mut generation = 0;
        self.desired.send_if_modified(|(g, current, current_grants)| {
            if *current == plugins && *current_grants == grants {
                return false;
            }
            *g += 1;
            generation = *g;
            *current = plugins;
            *current_grants = grants;
            true
        });
        if generation == 0 || !self.leadership.is_leader() {
            return;
        }
        let mut applied = self.applied.clone();
        let written = tokio::time::timeout(UPDATE_PATIENCE, applied.wait_for(|g| *g >= generation)).await;
        if written.is_err() {
            tracing::warn!("webhook configurations not written within {UPDATE_PATIENCE:?}; going on");
        }
    }
}

/// Delete both configurations named `name` (one already gone is not an error): what a host
/// outside the cluster does on a clean exit, so that writes of the admitted kinds are not
/// refused for a webhook no host answers any more.
///
/// # Errors
/// [`RegistrationError::Api`] when the API server refuses a delete.
pub async fn unregister(client: &kube::Client, name: &str) -> Result<(), RegistrationError> {
    let empty = Configurations { validating: json!({}), mutating: json!({}) };
    delete_or_apply(client, name, &empty).await?;
    tracing::info!(name, "webhook configurations removed: a clean exit outside a cluster");
    Ok(())
}

/// Apply both configurations (or delete those without webhooks).
async fn write(client: &kube::Client, name: &str, configurations: &Configurations) -> Result<(), RegistrationError> {
    delete_or_apply(client, name, configurations).await?;
    let count = |c: &Value| c["webhooks"].as_array().map_or(0, Vec::len);
    tracing::info!(
        name,
        validating = count(&configurations.validating),
        mutating = count(&configurations.mutating),
        "webhook configurations updated"
    );
    Ok(())
}

/// Apply each configuration that has webhooks, delete each that has none.
async fn delete_or_apply(client: &kube::Client, name: &str, configurations: &Configurations) -> Result<(), RegistrationError> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let has = |c: &Value| c["webhooks"].as_array().is_some_and(|w| !w.is_empty());
    let api_error = |kind, error| RegistrationError::Api { kind, name: name.into(), error };
    for (document, kind) in [
        (&configurations.validating, "ValidatingWebhookConfiguration"),
        (&configurations.mutating, "MutatingWebhookConfiguration"),
    ] {
        let result = match (has(document), kind) {
            (true, "ValidatingWebhookConfiguration") => validating.patch(name, &params, &Patch::Apply(document)).await.map(drop),
            (true, _) => mutating.patch(name, &params, &Patch::Apply(document)).await.map(drop),
            (false, "ValidatingWebhookConfiguration") => validating.delete(name, &DeleteParams::default()).await.map(drop),
            (false, _) => mutating.delete(name, &DeleteParams::default()).await.map(drop),
        };
        match result {
            Ok(()) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(api_error(kind, e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmop_types::{FailurePolicy, Operation, Rule, RuleScope, SideEffects};

    fn webhook(name: &str, type_: WebhookType) -> Webhook {
        Webhook {
            name: name.into(),
            type_,
            rules: vec![Rule {
                operations: vec![Operation::Create],
                api_groups: vec!["".into()],
                api_versions: vec!["v1".into()],
                resources: vec!["pods".into()],
                scope: RuleScope::Namespaced,
            }],
            namespace_selector: "env in (prod,staging),!skip".into(),
            object_selector: String::new(),
            failure_policy: FailurePolicy::Ignore,
            side_effects: SideEffects::None,
            timeout_seconds: 5,
            match_conditions: Vec::new(),
        }
    }

    fn outside() -> Exclusions {
        Exclusions::new(HostObjects::outside("default"))
    }

    fn plugins() -> BTreeMap<String, Vec<Webhook>> {
        [
            ("sidecarset".to_owned(), vec![webhook("inject", WebhookType::Mutating), webhook("check", WebhookType::Validating)]),
            ("plain".to_owned(), vec![]),
        ]
        .into()
    }

    #[test]
    fn each_webhook_is_registered_under_its_name_path_and_ca_with_kubernetes_fields() {
        let configurations =
            build("wasmop-test", &Endpoint::Url("https://127.0.0.1:9443/".into()), Some("PEM"), &outside(), &plugins()).unwrap();
        let inject = &configurations.mutating["webhooks"][0];
        assert_eq!(configurations.mutating["metadata"]["name"], "wasmop-test");
        assert_eq!(inject["name"], "inject.sidecarset.wasmop.dev");
        assert_eq!(inject["clientConfig"]["url"], "https://127.0.0.1:9443/admission/sidecarset/inject");
        assert_eq!(inject["clientConfig"]["caBundle"], "UEVN");
        assert_eq!(inject["admissionReviewVersions"], json!(["v1"]));
        assert_eq!(
            inject["rules"],
            json!([{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "scope": "Namespaced"}])
        );
        assert_eq!(
            (&inject["failurePolicy"], &inject["sideEffects"], &inject["timeoutSeconds"]),
            (&json!("Ignore"), &json!("None"), &json!(5))
        );
        assert_eq!(
            inject["namespaceSelector"],
            json!({"matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "staging"]}, {"key": "skip", "operator": "DoesNotExist"},
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]})
        );
        assert_eq!(inject["objectSelector"], json!({}));
        assert_eq!(configurations.validating["webhooks"][0]["name"], "check.sidecarset.wasmop.dev");
        assert!(!configurations.is_empty());
        assert!(build("w", &Endpoint::Url("https://x".into()), None, &outside(), &BTreeMap::new()).unwrap().is_empty());
    }

    #[test]
    fn the_service_form_points_at_the_service_and_yaml_lists_mutating_first() {
        let service = Endpoint::Service { namespace: "wasmop-system".into(), name: "wasmop-webhook".into(), port: 443 };
        let configurations = build("wasmop", &service, None, &outside(), &plugins()).unwrap();
        assert_eq!(
            configurations.validating["webhooks"][0]["clientConfig"],
            json!({"service": {"namespace": "wasmop-system", "name": "wasmop-webhook", "path": "/admission/sidecarset/check", "port": 443}})
        );
        let yaml = render_yaml(&configurations).unwrap();
        let mutating = yaml.find("kind: MutatingWebhookConfiguration").unwrap();
        assert!(mutating < yaml.find("kind: ValidatingWebhookConfiguration").unwrap(), "{yaml}");
        assert_eq!(render_yaml(&build("w", &service, None, &outside(), &BTreeMap::new()).unwrap()).unwrap(), "");
    }

    #[test]
    fn every_webhook_excludes_the_hosts_namespace_kube_system_and_the_hosts_objects() {
        let host = HostObjects {
            namespace: Some("wasmop-system".into()),
            lease_namespace: "wasmop-system".into(),
            secret: Some(("wasmop-system".into(), "wasmop-admission-tls".into())),
        };
        let mut plugins = plugins();
        plugins.insert("granted".into(), vec![webhook("watch", WebhookType::Validating)]);
        plugins.get_mut("granted").unwrap()[0].namespace_selector = String::new();
        let exclusions = Exclusions {
            host: host.clone(),
            grants: [("granted".to_owned(), NamespaceGrant::from_list(vec!["kube-system".into()]))].into(),
        };
        let configurations = build("wasmop", &Endpoint::Url("https://x".into()), None, &exclusions, &plugins).unwrap();
        let inject = &configurations.mutating["webhooks"][0];
        assert_eq!(
            inject["namespaceSelector"]["matchExpressions"][2],
            json!({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "wasmop-system"]}),
            "the plugin's own requirements stay, the exclusion is added"
        );
        assert_eq!(inject["matchConditions"], json!(host.match_conditions("wasmop")));
        let granted =
            configurations.validating["webhooks"].as_array().unwrap().iter().find(|w| w["name"] == "watch.granted.wasmop.dev");
        let granted = granted.expect("the granted plugin's webhook");
        assert_eq!(
            granted["namespaceSelector"],
            json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["wasmop-system"]}]}),
            "kube-system granted: only the host's namespace is excluded"
        );
        assert_eq!(granted["matchConditions"][0]["name"], "wasmop-excludes-leader-leases", "Leases there stay excluded");
    }

    #[test]
    fn a_plugins_match_conditions_come_before_the_hosts_which_all_stay() {
        let host = HostObjects::outside("wasmop-system");
        let exclusions = Exclusions { host: host.clone(), grants: BTreeMap::new() };
        let mut plugins = plugins();
        let inject = &mut plugins.get_mut("sidecarset").unwrap()[0];
        *inject = inject.clone().match_condition("not-injected", "object.metadata.name != 'x'");
        let configurations = build("wasmop", &Endpoint::Url("https://x".into()), None, &exclusions, &plugins).unwrap();
        let conditions = configurations.mutating["webhooks"][0]["matchConditions"].as_array().unwrap().clone();
        let hosts = host.match_conditions("wasmop");
        assert_eq!(conditions.len(), 1 + hosts.len());
        assert_eq!(conditions[0], json!({"name": "not-injected", "expression": "object.metadata.name != 'x'"}));
        assert_eq!(conditions[1..], hosts[..], "the host's follow, every one of them");
        let check = &configurations.validating["webhooks"][0]["matchConditions"];
        assert_eq!(check, &json!(hosts), "a webhook declaring none carries the host's alone");
    }

    #[test]
    fn selectors_translate_every_operator_and_a_bad_one_names_the_webhook() {
        assert_eq!(
            selector("a=1,b!=2,c notin (x),d").unwrap(),
            json!({"matchExpressions": [
                {"key": "a", "operator": "In", "values": ["1"]}, {"key": "b", "operator": "NotIn", "values": ["2"]},
                {"key": "c", "operator": "NotIn", "values": ["x"]}, {"key": "d", "operator": "Exists"}]})
        );
        let mut bad = plugins();
        bad.get_mut("sidecarset").unwrap()[0].object_selector = "a in (".into();
        let err = build("w", &Endpoint::Url("https://x".into()), None, &outside(), &bad).unwrap_err().to_string();
        assert!(err.starts_with("plugin sidecarset, webhook inject: label selector \"a in (\""), "{err}");
    }
}
