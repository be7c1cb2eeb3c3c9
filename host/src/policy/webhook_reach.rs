//! What a plugin's admission webhooks let it do, judged against its manifest and grants.
//!
//! The API server sends a webhook every object its rules match, in every namespace, before
//! any RBAC of the plugin's own applies. A *validating* webhook's rule is a read and a veto of
//! every object it matches; a *mutating* webhook's rule is also a write of each of them. So
//! every (API group, resource) pair of every rule must be:
//!
//! - for a validating webhook, a kind the manifest declares (its parent, a child or a related
//!   kind, resolved to its resource name), or granted by `webhookResources` (either mode);
//! - for a mutating webhook, a kind the plugin writes — its parent (defaulting) or a child
//!   kind — or granted by `webhookResources` with `mode: mutate`. Declaring a kind as related
//!   is a read, and does not let a webhook change it.
//!
//! Whatever covers them, rules that can match an escalation kind ([`super::ESCALATION_KINDS`],
//! Leases included: a veto on them stalls leader election) need `escalationKinds` naming it,
//! and rules that can match Secrets need `secrets: read` (validating) or `secrets: write`
//! (mutating). A wildcard (`*` as the group or the resource) matches every kind, other plugins'
//! included, and needs `webhookResources: ["*"]` (with `mode: mutate` for a mutating webhook).
//!
//! API versions are not judged: every version of a resource is the same object. A subresource
//! (`pods/status`) is judged by its resource (`pods`); `*/scale` is a wildcard.

use std::collections::BTreeSet;

use wasmop_types::WebhookType;

use super::escalation::matched_by_rule;
use super::grants::{Grants, SecretAccess};
use super::webhook_resources::{WebhookMode, key};
use crate::contract::{Kind, KindScopes, Manifest};

/// The (group, resource) of each of `declared` that `kinds` knows.
fn resources<'k>(kinds: &dyn KindScopes, declared: impl Iterator<Item = &'k Kind>) -> BTreeSet<(String, String)> {
    declared.filter_map(|kind| kinds.plural_of(kind).map(|plural| (kind.group.clone(), plural))).collect()
}

/// What `manifest`'s webhooks would admit that neither the manifest nor `grants` cover, one
/// line per item (each says which grant would cover it); empty when every rule is covered.
///
/// Declared kinds are resolved to resource names by `kinds`; a declared kind it does not know
/// covers nothing (the host resolves every kind by discovery first).
pub(super) fn uncovered(grants: &Grants, manifest: &Manifest, kinds: &dyn KindScopes) -> Vec<String> {
    let declared_kinds =
        || std::iter::once(&manifest.parent).chain(&manifest.children).chain(manifest.related.iter().map(|r| &r.kind));
    let readable = resources(kinds, declared_kinds());
    let writable = resources(kinds, std::iter::once(&manifest.parent).chain(&manifest.children));
    // Declared kinds whose resource name is unknown here (offline, without their CRD): a rule
    // naming their group is then refused with a hint at what is missing.
    let unresolved: Vec<&Kind> = declared_kinds().filter(|kind| kinds.plural_of(kind).is_none()).collect();
    let mut missing = Vec::new();
    let mut note = |line: String| {
        if !missing.contains(&line) {
            missing.push(line);
        }
    };
    for webhook in &manifest.webhooks {
        let name = &webhook.name;
        let (mode, declared, verb) = match webhook.type_ {
            WebhookType::Validating => (WebhookMode::Validate, &readable, "admits"),
            WebhookType::Mutating => (WebhookMode::Mutate, &writable, "mutates"),
        };
        let pairs = webhook.rules.iter().flat_map(|rule| {
            rule.api_groups.iter().flat_map(move |group| rule.resources.iter().map(move |resource| (group, resource)))
        });
        for (group, full_resource) in pairs {
            let resource = full_resource.split('/').next().unwrap_or_default();
            let wildcard = group == "*" || resource == "*";
            let is_declared = !wildcard && declared.contains(&(group.clone(), resource.to_owned()));
            if !is_declared && !grants.webhook_resources.covers(group, resource, mode) {
                let key = key(group, resource);
                let unknown = unresolved.iter().find(|kind| !wildcard && &kind.group == group).map_or_else(String::new, |kind| {
                    format!("; the resource of the declared {kind} is not known (install its CRD; offline, give it with --crds)")
                });
                let grant = match mode {
                    WebhookMode::Validate => format!("\"{key}\""),
                    WebhookMode::Mutate => format!("{{resource: \"{key}\", mode: mutate}}"),
                };
                note(match (wildcard, mode) {
                    (true, _) => format!(
                        "{verb} every resource matching {key} in webhook {name:?} (grant webhookResources: [{}])",
                        grant.replace(&key, "*")
                    ),
                    (false, WebhookMode::Validate) => format!(
                        "admits {key} in webhook {name:?}, a resource its manifest does not declare (declare the kind, or \
                         grant webhookResources: [{key}]){unknown}"
                    ),
                    (false, WebhookMode::Mutate) => format!(
                        "mutates {key} in webhook {name:?}, a resource it does not write (declare the kind as a child, or \
                         grant webhookResources: [{grant}]){unknown}"
                    ),
                });
            }
            let reaches_secrets = matches!(group.as_str(), "" | "*") && matches!(resource, "secrets" | "*");
            let secrets_needed = match mode {
                WebhookMode::Validate => SecretAccess::Read,
                WebhookMode::Mutate => SecretAccess::Write,
            };
            if reaches_secrets && grants.secrets < secrets_needed {
                let access = if mode == WebhookMode::Mutate { "write" } else { "read" };
                note(format!("{verb} Secrets in webhook {name:?} (grant secrets: {access})"));
            }
            for e in matched_by_rule(group, full_resource) {
                let granted = grants.escalation_kinds.iter().any(|k| k.group == e.group && k.kind == e.kind);
                if !granted {
                    let kind =
                        if e.group.is_empty() { format!("v1/{}", e.kind) } else { format!("{}/VERSION/{}", e.group, e.kind) };
                    note(format!("{verb} {}, which {}, in webhook {name:?} (grant escalationKinds: [{kind}])", e.kind, e.why));
                }
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
    use crate::policy::{WebhookResourceEntry, WebhookResources};

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
            match_conditions: Vec::new(),
        }
    }

    fn kinds() -> KnownKinds {
        let mut kinds = KnownKinds::builtin();
        kinds.add_crds(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds")).unwrap();
        kinds
    }

    fn mutating(name: &str, group: &str, resource: &str) -> Webhook {
        Webhook { type_: WebhookType::Mutating, ..webhook(name, group, resource) }
    }

    fn granted(entries: &[&str], secrets_readable: bool) -> Grants {
        let webhook_resources = WebhookResources::parse(&entries.iter().map(|e| (*e).to_owned()).collect::<Vec<_>>()).unwrap();
        let secrets = if secrets_readable { SecretAccess::Read } else { SecretAccess::None };
        Grants { webhook_resources, secrets, ..Grants::default() }
    }

    /// What memcached's manifest with `webhooks` leaves uncovered under the grants.
    fn judge(resources: &[&str], secrets_readable: bool, webhooks: Vec<Webhook>) -> Vec<String> {
        let manifest = Manifest { webhooks, ..fixtures::memcached("") };
        uncovered(&granted(resources, secrets_readable), &manifest, &kinds())
    }

    /// What memcached's manifest with `webhooks` leaves uncovered under `grants`.
    fn judge_under(grants: &Grants, webhooks: Vec<Webhook>) -> Vec<String> {
        uncovered(grants, &Manifest { webhooks, ..fixtures::memcached("") }, &kinds())
    }

    #[test]
    fn a_mutating_webhook_on_a_related_kind_is_a_write_that_needs_the_mutate_grant() {
        // memcached declares Pods as related: it may see them, not change them.
        assert_eq!(
            judge(&[], false, vec![mutating("inject", "", "pods")]),
            ["mutates pods in webhook \"inject\", a resource it does not write (declare the kind as a child, or grant \
              webhookResources: [{resource: \"pods\", mode: mutate}])"]
        );
        assert_eq!(judge(&["pods"], false, vec![mutating("inject", "", "pods")]).len(), 1, "a plain entry is validate only");
        let mutate = WebhookResources::from_entries(&[WebhookResourceEntry::WithMode {
            resource: "pods".into(),
            mode: WebhookMode::Mutate,
        }])
        .unwrap();
        let grants = Grants { webhook_resources: mutate, ..Grants::default() };
        assert!(judge_under(&grants, vec![mutating("inject", "", "pods")]).is_empty());
        assert!(judge_under(&grants, vec![webhook("check", "", "pods")]).is_empty(), "mutate covers validate");
        assert!(judge(&[], false, vec![mutating("default", "cache.example.com", "memcacheds")]).is_empty(), "its parent");
        assert!(judge(&[], false, vec![mutating("child", "apps", "deployments")]).is_empty(), "its child kind");
        assert_eq!(
            judge(&["*"], false, vec![mutating("all", "*", "*")])[0],
            "mutates every resource matching *.* in webhook \"all\" (grant webhookResources: [{resource: \"*\", mode: mutate}])"
        );
    }

    #[test]
    fn a_webhook_on_an_escalation_kind_needs_the_kind_named_even_when_declared() {
        let mut declares_leases = fixtures::memcached("");
        declares_leases
            .related
            .push(RelatedKind { kind: Kind::new("coordination.k8s.io", "v1", "Lease"), label_selector: String::new() });
        declares_leases.webhooks = vec![webhook("veto", "coordination.k8s.io", "leases")];
        assert_eq!(
            uncovered(&Grants::default(), &declares_leases, &kinds()),
            ["admits Lease, which holds or blocks leader election, in webhook \"veto\" (grant escalationKinds: \
              [coordination.k8s.io/VERSION/Lease])"]
        );
        let named = Grants { escalation_kinds: [Kind::new("coordination.k8s.io", "v1", "Lease")].into(), ..Grants::default() };
        assert!(uncovered(&named, &declares_leases, &kinds()).is_empty());
        let all = judge(&["*"], true, vec![webhook("all", "*", "*")]);
        assert_eq!(
            all.len(),
            super::super::ESCALATION_KINDS.len() - 1,
            "every escalation kind but the token subresource: {all:#?}"
        );
        let rbac = judge(&["*"], false, vec![webhook("rbac", "rbac.authorization.k8s.io", "*")]);
        assert_eq!(rbac.len(), 4, "{rbac:#?}");
    }

    #[test]
    fn a_mutating_webhook_on_secrets_needs_secrets_write() {
        let mut declares = fixtures::memcached("");
        declares.children.push(Kind::new("", "v1", "Secret"));
        declares.webhooks = vec![mutating("mine", "", "secrets")];
        let read = Grants { secrets: SecretAccess::Read, ..Grants::default() };
        assert_eq!(uncovered(&read, &declares, &kinds()), ["mutates Secrets in webhook \"mine\" (grant secrets: write)"]);
        let write = Grants { secrets: SecretAccess::Write, ..Grants::default() };
        assert!(uncovered(&write, &declares, &kinds()).is_empty());
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
        assert!(uncovered(&granted(&[], true), &declares, &kinds()).is_empty(), "a declared, granted Secret may be admitted");
        assert_eq!(
            uncovered(&granted(&[], false), &declares, &kinds()),
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
            judge(&["*"], false, vec![webhook("all", "*", "*")])[0],
            "admits Secrets in webhook \"all\" (grant secrets: read)"
        );
        assert!(judge(&["*"], false, vec![webhook("apps", "apps", "*")]).is_empty(), "no Secrets outside the core group");
    }

    #[test]
    fn a_rule_on_a_declared_kind_whose_crd_is_missing_says_the_crd_is_what_is_missing() {
        let manifest =
            Manifest { webhooks: vec![webhook("validate", "cache.example.com", "memcacheds")], ..fixtures::memcached("") };
        assert_eq!(
            uncovered(&granted(&[], false), &manifest, &KnownKinds::builtin()),
            ["admits memcacheds.cache.example.com in webhook \"validate\", a resource its manifest does not declare \
              (declare the kind, or grant webhookResources: [memcacheds.cache.example.com]); the resource of the declared \
              cache.example.com/v1alpha1/Memcached is not known (install its CRD; offline, give it with --crds)"]
        );
        assert!(uncovered(&granted(&[], false), &manifest, &kinds()).is_empty(), "with the CRD the rule is the parent's");
    }

    #[test]
    fn other_kinds_are_named_with_the_grant_that_covers_them() {
        let missing = judge(&[], false, vec![webhook("w", "apps", "statefulsets")]);
        assert_eq!(
            missing,
            ["admits statefulsets.apps in webhook \"w\", a resource its manifest does not declare \
                 (declare the kind, or grant webhookResources: [statefulsets.apps])"]
        );
        assert!(judge(&["statefulsets.apps"], false, vec![webhook("w", "apps", "statefulsets")]).is_empty());
        let roles = vec![webhook("w", "rbac.authorization.k8s.io", "clusterroles")];
        assert_eq!(
            judge(&["clusterroles.rbac.authorization.k8s.io"], false, roles.clone()),
            ["admits ClusterRole, which grants rights, in webhook \"w\" (grant escalationKinds: \
              [rbac.authorization.k8s.io/VERSION/ClusterRole])"],
            "an escalation kind needs its own grant besides webhookResources"
        );
        let named = Grants {
            escalation_kinds: [Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole")].into(),
            ..granted(&["clusterroles.rbac.authorization.k8s.io"], false)
        };
        assert!(judge_under(&named, roles).is_empty());
    }

    #[test]
    fn policy_entries_are_checked() {
        for bad in ["", "pods apps", "*.apps", "pod*"] {
            assert!(WebhookResources::parse(&[bad.into()]).unwrap_err().contains("is not a resource"), "{bad:?}");
        }
    }
}
