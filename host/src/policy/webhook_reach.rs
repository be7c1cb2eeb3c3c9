//! What a plugin's admission webhooks let it see, judged against its manifest and grants.
//!
//! The API server sends a webhook every object its rules match, in every namespace, before
//! any RBAC of the plugin's own applies: a rule is a read. So every (API group, resource) pair
//! of every rule must be a kind the manifest declares (its parent, a child or a related kind,
//! resolved to its resource name), or be granted by `webhookResources` in the host policy.
//! A wildcard (`*` as the group or the resource) matches every kind, other plugins' included,
//! and needs `webhookResources: ["*"]`. A rule that can match Secrets (`secrets` or `*` in the
//! core group) also needs `secrets: read`, whatever else covers it.
//!
//! API versions are not judged: every version of a resource is the same object. A subresource
//! (`pods/status`) is judged by its resource (`pods`); `*/scale` is a wildcard.

use std::collections::BTreeSet;

use crate::contract::{KindScopes, Manifest};

/// The resources a plugin's webhooks may admit beyond the kinds its manifest declares
/// (`webhookResources` in the policy file).
///
/// Each entry is `RESOURCE.GROUP` as `kubectl` writes it (`deployments.apps`), a bare
/// `RESOURCE` for the core group (`pods`), or `*` for every resource of every group.
///
/// ```
/// use wasmop::policy::WebhookResources;
/// let granted = WebhookResources::parse(&["deployments.apps".into(), "pods".into()]).unwrap();
/// assert!(granted.covers("apps", "deployments") && granted.covers("", "pods"));
/// assert!(!granted.covers("", "secrets") && !granted.covers("*", "pods"));
/// assert!(WebhookResources::parse(&["*".into()]).unwrap().covers("*", "*"));
/// assert!(WebhookResources::parse(&["pods in".into()]).is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebhookResources(BTreeSet<String>);

impl WebhookResources {
    /// The grant a policy file's list describes.
    ///
    /// # Errors
    /// The first entry that is empty, has whitespace or a `*` other than the whole entry.
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        for entry in entries {
            let wildcard_inside = entry.contains('*') && entry != "*";
            if entry.is_empty() || entry.len() > 253 || entry.chars().any(char::is_whitespace) || wildcard_inside {
                return Err(format!(
                    "{entry:?} is not a resource: write RESOURCE.GROUP (deployments.apps), RESOURCE for the core group \
                     (pods), or \"*\" for all"
                ));
            }
        }
        Ok(Self(entries.iter().cloned().collect()))
    }

    /// Whether webhooks may admit `resource` of API group `group` (either may be `*`).
    pub fn covers(&self, group: &str, resource: &str) -> bool {
        self.0.contains("*") || (group != "*" && resource != "*" && self.0.contains(&key(group, resource)))
    }

    /// The entries, sorted.
    pub fn entries(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

/// `resource.group`, or `resource` for the core group: how `kubectl` and the policy name it.
fn key(group: &str, resource: &str) -> String {
    if group.is_empty() { resource.to_owned() } else { format!("{resource}.{group}") }
}

/// What `manifest`'s webhooks would admit that neither the manifest nor the grants (`granted`
/// resources; `secrets_readable`: `secrets: read` or more) cover, one line per item (each says
/// which grant would cover it); empty when every rule is covered.
///
/// Declared kinds are resolved to resource names by `kinds`; a declared kind it does not know
/// covers nothing (the host resolves every kind by discovery first).
pub(super) fn uncovered(
    granted: &WebhookResources,
    secrets_readable: bool,
    manifest: &Manifest,
    kinds: &dyn KindScopes,
) -> Vec<String> {
    let declared: BTreeSet<(String, String)> = std::iter::once(&manifest.parent)
        .chain(&manifest.children)
        .chain(manifest.related.iter().map(|r| &r.kind))
        .filter_map(|kind| kinds.plural_of(kind).map(|plural| (kind.group.clone(), plural)))
        .collect();
    let mut missing = Vec::new();
    let mut note = |line: String| {
        if !missing.contains(&line) {
            missing.push(line);
        }
    };
    for webhook in &manifest.webhooks {
        let name = &webhook.name;
        let pairs = webhook.rules.iter().flat_map(|rule| {
            rule.api_groups.iter().flat_map(move |group| rule.resources.iter().map(move |resource| (group, resource)))
        });
        for (group, resource) in pairs {
            let resource = resource.split('/').next().unwrap_or_default();
            let wildcard = group == "*" || resource == "*";
            let declared = !wildcard && declared.contains(&(group.clone(), resource.to_owned()));
            if !declared && !granted.covers(group, resource) {
                let key = key(group, resource);
                note(if wildcard {
                    format!("admits every resource matching {key} in webhook {name:?} (grant webhookResources: [\"*\"])")
                } else {
                    format!(
                        "admits {key} in webhook {name:?}, a resource its manifest does not declare (declare the kind, or \
                         grant webhookResources: [{key}])"
                    )
                });
            }
            let reaches_secrets = matches!(group.as_str(), "" | "*") && matches!(resource, "secrets" | "*");
            if reaches_secrets && !secrets_readable {
                note(format!("admits Secrets in webhook {name:?} (grant secrets: read)"));
            }
        }
    }
    missing
}

#[cfg(test)]
mod tests {
    use wasmop_types::{Operation, Rule, Webhook, WebhookType};

    use super::*;
    use crate::contract::manifest::fixtures;
    use crate::contract::{Kind, KnownKinds, RelatedKind};

    fn webhook(name: &str, group: &str, resource: &str) -> Webhook {
        Webhook {
            name: name.into(),
            type_: WebhookType::Validating,
            rules: vec![Rule {
                operations: vec![Operation::Create],
                api_groups: vec![group.into()],
                api_versions: vec!["*".into()],
                resources: vec![resource.into()],
                scope: Default::default(),
            }],
            namespace_selector: String::new(),
            object_selector: String::new(),
            failure_policy: Default::default(),
            side_effects: Default::default(),
            timeout_seconds: 5,
        }
    }

    fn kinds() -> KnownKinds {
        let mut kinds = KnownKinds::builtin();
        kinds.add_crds(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds")).unwrap();
        kinds
    }

    fn granted(entries: &[&str]) -> WebhookResources {
        WebhookResources::parse(&entries.iter().map(|e| (*e).to_owned()).collect::<Vec<_>>()).unwrap()
    }

    /// What memcached's manifest with `webhooks` leaves uncovered under the grants.
    fn judge(resources: &[&str], secrets_readable: bool, webhooks: Vec<Webhook>) -> Vec<String> {
        let manifest = Manifest { webhooks, ..fixtures::memcached("") };
        uncovered(&granted(resources), secrets_readable, &manifest, &kinds())
    }

    #[test]
    fn webhooks_on_declared_kinds_need_no_grant() {
        // memcached declares its parent, Deployments (child) and Pods (related).
        let declared = vec![
            webhook("parent", "cache.example.com", "memcacheds"),
            webhook("child", "apps", "deployments/scale"),
            webhook("related", "", "pods"),
        ];
        assert_eq!(judge(&[], false, declared), Vec::<String>::new());
    }

    #[test]
    fn a_webhook_on_secrets_is_refused_without_both_grants() {
        let missing = judge(&[], false, vec![webhook("steal", "", "secrets")]);
        assert_eq!(
            missing,
            [
                "admits secrets in webhook \"steal\", a resource its manifest does not declare (declare the kind, or grant \
                 webhookResources: [secrets])",
                "admits Secrets in webhook \"steal\" (grant secrets: read)",
            ]
        );
        assert_eq!(judge(&[], true, vec![webhook("steal", "", "secrets")]).len(), 1, "reading Secrets is not admitting them");
        assert!(judge(&["secrets"], true, vec![webhook("steal", "", "secrets")]).is_empty());
        let mut declares = fixtures::memcached("");
        declares.related.push(RelatedKind { kind: Kind::new("", "v1", "Secret"), label_selector: String::new() });
        declares.webhooks = vec![webhook("mine", "", "secrets")];
        assert!(uncovered(&granted(&[]), true, &declares, &kinds()).is_empty(), "a declared, granted Secret may be admitted");
        assert_eq!(
            uncovered(&granted(&[]), false, &declares, &kinds()),
            ["admits Secrets in webhook \"mine\" (grant secrets: read)"]
        );
    }

    #[test]
    fn wildcards_need_the_wildcard_grant_and_secrets_read() {
        for (group, resource) in [("*", "pods"), ("", "*"), ("*", "*/scale")] {
            let missing = judge(&[], false, vec![webhook("all", group, resource)]);
            assert!(
                missing[0].ends_with("in webhook \"all\" (grant webhookResources: [\"*\"])"),
                "{group} {resource}: {missing:?}"
            );
        }
        assert_eq!(
            judge(&["pods"], false, vec![webhook("all", "*", "pods")]).len(),
            1,
            "a named resource does not cover a wildcard"
        );
        assert_eq!(
            judge(&["*"], false, vec![webhook("all", "*", "*")]),
            ["admits Secrets in webhook \"all\" (grant secrets: read)"]
        );
        assert!(judge(&["*"], false, vec![webhook("apps", "apps", "*")]).is_empty(), "no Secrets outside the core group");
        assert!(judge(&["*"], true, vec![webhook("all", "*", "*")]).is_empty());
    }

    #[test]
    fn other_kinds_are_named_with_the_grant_that_covers_them() {
        let missing = judge(&[], false, vec![webhook("w", "rbac.authorization.k8s.io", "clusterroles")]);
        assert_eq!(
            missing,
            ["admits clusterroles.rbac.authorization.k8s.io in webhook \"w\", a resource its manifest does not declare \
                 (declare the kind, or grant webhookResources: [clusterroles.rbac.authorization.k8s.io])"]
        );
        let named = ["clusterroles.rbac.authorization.k8s.io"];
        assert!(judge(&named, false, vec![webhook("w", "rbac.authorization.k8s.io", "clusterroles")]).is_empty());
    }

    #[test]
    fn policy_entries_are_checked() {
        for bad in ["", "pods apps", "*.apps", "pod*"] {
            assert!(WebhookResources::parse(&[bad.into()]).unwrap_err().contains("is not a resource"), "{bad:?}");
        }
    }
}
