//! The admission webhooks a manifest declares: the checks that keep every one registrable in a
//! Kubernetes webhook configuration.

use std::collections::HashSet;

use super::names::{MAX_SELECTOR, is_dns1123_label, preview};
use wasmop_types::{LabelSelector, MatchCondition, Operation, SelectorError, WEBHOOK_TIMEOUT_RANGE, Webhook};

/// Most webhooks one plugin may declare.
pub const MAX_WEBHOOKS: usize = 16;
/// Most rules per webhook, and most entries in each list of a rule.
const MAX_RULE_ENTRIES: usize = 64;
/// Most `matchConditions` the API server accepts on one webhook.
pub const KUBERNETES_MAX_MATCH_CONDITIONS: usize = 64;
/// Most `matchConditions` the host adds to every webhook it registers (its exclusions: see
/// `admission::exclusions`).
pub const HOST_MATCH_CONDITIONS: usize = 4;
/// Most match conditions a plugin may declare on one webhook: what the API server accepts
/// beside the host's own.
pub const MAX_MATCH_CONDITIONS: usize = KUBERNETES_MAX_MATCH_CONDITIONS - HOST_MATCH_CONDITIONS;
/// Longest CEL expression of a match condition, in bytes.
pub const MAX_MATCH_EXPRESSION: usize = 8 << 10;
/// The prefix of the host's own match condition names, which no plugin's may take (names are
/// unique within a webhook, the host's included).
pub const HOST_MATCH_CONDITION_PREFIX: &str = "wasmop-";

/// Why a declared webhook is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WebhookError {
    /// More webhooks than [`MAX_WEBHOOKS`].
    #[error("{0} webhooks declared, more than the limit of {MAX_WEBHOOKS}")]
    TooMany(usize),
    /// The name is not a DNS-1123 label (quoted, and cut when long).
    #[error("webhook name {0} is not a DNS-1123 label (lowercase letters, digits and '-', at most 63 characters)")]
    InvalidName(String),
    /// Two webhooks have the same name.
    #[error("webhook {0:?} is declared more than once")]
    DuplicateName(String),
    /// A webhook without rules would never be called.
    #[error("webhook {0:?} has no rules")]
    NoRules(String),
    /// A rule has an empty list, too many entries, or an entry that is empty, has whitespace
    /// or is longer than 253 bytes.
    #[error("webhook {webhook:?} rule #{rule}: {problem}")]
    InvalidRule {
        /// The webhook.
        webhook: String,
        /// The rule's index.
        rule: usize,
        /// What is wrong, naming the field.
        problem: String,
    },
    /// `timeoutSeconds` outside [`WEBHOOK_TIMEOUT_RANGE`].
    #[error("webhook {webhook:?}: timeoutSeconds {seconds} is not between 1 and 30")]
    InvalidTimeout {
        /// The webhook.
        webhook: String,
        /// The timeout declared.
        seconds: u32,
    },
    /// A namespace or object selector does not parse, or is longer than
    /// [`MAX_SELECTOR`](super::names::MAX_SELECTOR) bytes.
    #[error("webhook {webhook:?} {which}: {problem}")]
    InvalidSelector {
        /// The webhook.
        webhook: String,
        /// `namespaceSelector` or `objectSelector`.
        which: &'static str,
        /// The parser's complaint, or the size.
        problem: String,
    },
    /// A match condition has a malformed, reserved or repeated name, an empty or over-long
    /// expression, or there are more than [`MAX_MATCH_CONDITIONS`].
    #[error("webhook {webhook:?} matchConditions: {problem}")]
    InvalidMatchCondition {
        /// The webhook.
        webhook: String,
        /// What is wrong, naming the condition.
        problem: String,
    },
}

/// Check every declared webhook.
///
/// # Errors
/// The first [`WebhookError`] found.
pub(super) fn validate(webhooks: &[Webhook]) -> Result<(), WebhookError> {
    if webhooks.len() > MAX_WEBHOOKS {
        return Err(WebhookError::TooMany(webhooks.len()));
    }
    let mut names = HashSet::new();
    for webhook in webhooks {
        let name = &webhook.name;
        if !is_dns1123_label(name) {
            return Err(WebhookError::InvalidName(preview(name)));
        }
        if !names.insert(name) {
            return Err(WebhookError::DuplicateName(name.clone()));
        }
        if webhook.rules.is_empty() {
            return Err(WebhookError::NoRules(name.clone()));
        }
        let invalid = |rule: usize, problem: String| WebhookError::InvalidRule { webhook: name.clone(), rule, problem };
        if webhook.rules.len() > MAX_RULE_ENTRIES {
            return Err(invalid(MAX_RULE_ENTRIES, format!("more than {MAX_RULE_ENTRIES} rules")));
        }
        for (i, rule) in webhook.rules.iter().enumerate() {
            check_operations(&rule.operations).map_err(|p| invalid(i, p))?;
            for (field, entries) in
                [("apiGroups", &rule.api_groups), ("apiVersions", &rule.api_versions), ("resources", &rule.resources)]
            {
                check_entries(field, entries, field == "apiGroups").map_err(|p| invalid(i, p))?;
            }
        }
        if !WEBHOOK_TIMEOUT_RANGE.contains(&webhook.timeout_seconds) {
            return Err(WebhookError::InvalidTimeout { webhook: name.clone(), seconds: webhook.timeout_seconds });
        }
        for (which, selector) in
            [("namespaceSelector", &webhook.namespace_selector), ("objectSelector", &webhook.object_selector)]
        {
            check_selector(selector).map_err(|problem| WebhookError::InvalidSelector {
                webhook: name.clone(),
                which,
                problem,
            })?;
        }
        check_match_conditions(&webhook.match_conditions)
            .map_err(|problem| WebhookError::InvalidMatchCondition { webhook: name.clone(), problem })?;
    }
    Ok(())
}

/// At most [`MAX_MATCH_CONDITIONS`], each named as Kubernetes requires (the name part of a
/// qualified name: at most 63 letters, digits, `-`, `.`, `_`, starting and ending with a letter
/// or digit), outside the host's [`HOST_MATCH_CONDITION_PREFIX`], unique, with a non-empty
/// expression of at most [`MAX_MATCH_EXPRESSION`] bytes. The API server compiles the CEL.
fn check_match_conditions(conditions: &[MatchCondition]) -> Result<(), String> {
    if conditions.len() > MAX_MATCH_CONDITIONS {
        return Err(format!(
            "{} declared, more than {MAX_MATCH_CONDITIONS} (Kubernetes accepts {KUBERNETES_MAX_MATCH_CONDITIONS} a webhook, \
             {HOST_MATCH_CONDITIONS} of them the host's)",
            conditions.len()
        ));
    }
    let mut names = HashSet::new();
    for c in conditions {
        if !is_qualified_name_part(&c.name) {
            return Err(format!(
                "name {} is not a qualified name (letters, digits, '-', '.' and '_', starting and ending with a letter or \
                 digit, at most 63 characters)",
                preview(&c.name)
            ));
        }
        if c.name.starts_with(HOST_MATCH_CONDITION_PREFIX) {
            return Err(format!(
                "name {} starts with {HOST_MATCH_CONDITION_PREFIX:?}, reserved for the host's",
                preview(&c.name)
            ));
        }
        if !names.insert(c.name.as_str()) {
            return Err(format!("name {:?} is declared more than once", c.name));
        }
        if c.expression.trim().is_empty() {
            return Err(format!("condition {:?} has an empty expression", c.name));
        }
        if c.expression.len() > MAX_MATCH_EXPRESSION {
            return Err(format!(
                "condition {:?} has a {}-byte expression, more than {MAX_MATCH_EXPRESSION}",
                c.name,
                c.expression.len()
            ));
        }
    }
    Ok(())
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most 63 characters: the name of a Kubernetes
/// qualified name.
fn is_qualified_name_part(s: &str) -> bool {
    let alphanumeric = |b: Option<&u8>| b.is_some_and(u8::is_ascii_alphanumeric);
    s.len() <= 63
        && alphanumeric(s.as_bytes().first())
        && alphanumeric(s.as_bytes().last())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn check_operations(operations: &[Operation]) -> Result<(), String> {
    if operations.is_empty() {
        return Err("operations is empty".into());
    }
    if operations.len() > 1 && operations.contains(&Operation::All) {
        return Err("operations has \"*\" and more: \"*\" must be alone".into());
    }
    Ok(())
}

/// A list of a rule: not empty, at most [`MAX_RULE_ENTRIES`] entries, each without
/// whitespace, at most 253 bytes, and not empty (except an API group: `""` is the core group).
fn check_entries(field: &str, entries: &[String], empty_allowed: bool) -> Result<(), String> {
    if entries.is_empty() {
        return Err(format!("{field} is empty"));
    }
    if entries.len() > MAX_RULE_ENTRIES {
        return Err(format!("{field} has {} entries, more than {MAX_RULE_ENTRIES}", entries.len()));
    }
    let bad = entries.iter().find(|e| (e.is_empty() && !empty_allowed) || e.len() > 253 || e.chars().any(char::is_whitespace));
    match bad {
        Some(entry) => Err(format!("{field} has the invalid entry {}", preview(entry))),
        None => Ok(()),
    }
}

fn check_selector(selector: &str) -> Result<(), String> {
    if selector.len() > MAX_SELECTOR {
        return Err(format!("has {} bytes, more than the limit of {MAX_SELECTOR}", selector.len()));
    }
    LabelSelector::parse(selector).map(drop).map_err(|e: SelectorError| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmop_types::{Rule, WebhookType};

    fn inject() -> Webhook {
        Webhook {
            name: "inject".into(),
            type_: WebhookType::Mutating,
            rules: vec![Rule {
                operations: vec![Operation::Create],
                api_groups: vec![String::new()],
                api_versions: vec!["v1".into()],
                resources: vec!["pods".into()],
                scope: Default::default(),
            }],
            namespace_selector: "env in (prod)".into(),
            object_selector: String::new(),
            failure_policy: Default::default(),
            side_effects: Default::default(),
            timeout_seconds: 5,
            match_conditions: Vec::new(),
        }
    }

    #[test]
    fn a_well_formed_webhook_passes() {
        assert_eq!(validate(&[inject()]), Ok(()));
        assert_eq!(validate(&[]), Ok(()));
    }

    #[test]
    fn names_are_dns_labels_and_unique() {
        let bad = Webhook { name: "Inject_Pods".into(), ..inject() };
        assert!(matches!(validate(&[bad]), Err(WebhookError::InvalidName(_))));
        assert_eq!(validate(&[inject(), inject()]), Err(WebhookError::DuplicateName("inject".into())));
    }

    #[test]
    fn a_webhook_needs_complete_rules() {
        assert_eq!(validate(&[Webhook { rules: vec![], ..inject() }]), Err(WebhookError::NoRules("inject".into())));
        let mut w = inject();
        w.rules[0].resources.clear();
        assert_eq!(validate(&[w]).unwrap_err().to_string(), r#"webhook "inject" rule #0: resources is empty"#);
        let mut w = inject();
        w.rules[0].operations.push(Operation::All);
        assert!(validate(&[w]).unwrap_err().to_string().contains("\"*\" must be alone"));
        let mut w = inject();
        w.rules[0].api_versions = vec![String::new()];
        assert!(validate(&[w]).unwrap_err().to_string().contains("apiVersions has the invalid entry \"\""));
    }

    #[test]
    fn timeouts_stay_in_kubernetes_range() {
        for seconds in [0, 31] {
            let w = Webhook { timeout_seconds: seconds, ..inject() };
            assert_eq!(validate(&[w]), Err(WebhookError::InvalidTimeout { webhook: "inject".into(), seconds }));
        }
        assert_eq!(validate(&[Webhook { timeout_seconds: 30, ..inject() }]), Ok(()));
    }

    #[test]
    fn selectors_must_parse() {
        let w = Webhook { object_selector: "app in (".into(), ..inject() };
        assert!(matches!(validate(&[w]), Err(WebhookError::InvalidSelector { which: "objectSelector", .. })));
    }

    #[test]
    fn at_most_sixteen_webhooks() {
        let many: Vec<Webhook> = (0..17).map(|i| Webhook { name: format!("w{i}"), ..inject() }).collect();
        assert_eq!(validate(&many), Err(WebhookError::TooMany(17)));
    }

    fn with_conditions(conditions: &[(&str, &str)]) -> Webhook {
        conditions.iter().fold(inject(), |w, (name, expression)| w.match_condition(*name, *expression))
    }

    fn condition_problem(conditions: &[(&str, &str)]) -> String {
        match validate(&[with_conditions(conditions)]) {
            Err(WebhookError::InvalidMatchCondition { webhook, problem }) if webhook == "inject" => problem,
            other => panic!("{conditions:?}: {other:?}"),
        }
    }

    #[test]
    fn match_conditions_are_named_as_kubernetes_requires_and_unique() {
        assert_eq!(validate(&[with_conditions(&[("Not.Injected_2", "true"), ("a", "object != null")])]), Ok(()));
        let long = "a".repeat(64);
        for bad in ["", "-a", "a-", "a b", "a/b", long.as_str()] {
            assert!(condition_problem(&[(bad, "true")]).contains("is not a qualified name"), "{bad:?}");
        }
        assert_eq!(validate(&[with_conditions(&[(&long[..63], "true")])]), Ok(()));
        assert!(condition_problem(&[("a", "true"), ("a", "false")]).contains("\"a\" is declared more than once"));
        let host = condition_problem(&[("wasmop-excludes-host-kinds", "true")]);
        assert!(host.contains("reserved for the host's"), "{host}");
    }

    #[test]
    fn match_condition_expressions_are_present_and_bounded() {
        assert!(condition_problem(&[("a", " ")]).contains("empty expression"));
        let huge = "x".repeat(MAX_MATCH_EXPRESSION + 1);
        assert!(condition_problem(&[("a", &huge)]).contains("more than 8192"));
    }

    #[test]
    fn match_conditions_leave_room_for_the_hosts_within_kubernetes_64() {
        let names: Vec<String> = (0..=MAX_MATCH_CONDITIONS).map(|i| format!("c{i}")).collect();
        let all: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "true")).collect();
        assert_eq!(validate(&[with_conditions(&all[..MAX_MATCH_CONDITIONS])]), Ok(()));
        assert!(condition_problem(&all).starts_with("61 declared, more than 60"), "{}", condition_problem(&all));
    }
}
