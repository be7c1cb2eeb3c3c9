//! What a plugin declares about itself: [`Manifest`].

use serde::Serialize;

use super::kind::{Kind, Scope};
pub use super::names::is_dns1123_label;
use super::names::preview;
use wasmop_types::{LabelSelector, SelectorError, Webhook};

/// The placeholder in a related kind's selector replaced by the parent's name.
pub const PARENT_NAME_PLACEHOLDER: &str = "$(parent.name)";

/// Longest description, in bytes: one line of text.
pub const MAX_DESCRIPTION: usize = 1024;
/// Most child kinds, and most related kinds, a manifest may declare (each is one watch).
pub const MAX_KINDS: usize = 64;
pub use super::names::MAX_SELECTOR;
/// Largest configuration schema, serialized as JSON, in bytes.
pub const MAX_CONFIG_SCHEMA: usize = 64 << 10;
/// Longest version string, in bytes (the semantic version and its suffix).
pub const MAX_VERSION: usize = 128;

/// A kind the plugin may read, limited by a label selector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RelatedKind {
    /// The kind.
    pub kind: Kind,
    /// Label selector; may contain [`PARENT_NAME_PLACEHOLDER`].
    pub label_selector: String,
}

impl RelatedKind {
    /// The selector for one parent, with the placeholder replaced by `parent_name`.
    ///
    /// # Errors
    /// [`SelectorError`] if the substituted selector does not parse (checked at load time, so
    /// only a parent name that is not a valid label value can fail here).
    pub fn selector_for(&self, parent_name: &str) -> Result<LabelSelector, SelectorError> {
        LabelSelector::parse(&self.label_selector.replace(PARENT_NAME_PLACEHOLDER, parent_name))
    }

    /// The label key whose value names the parent, when the selector requires
    /// `key=$(parent.name)` (or `==`): then a related object names its only candidate parent,
    /// and no scan of the parents is needed to map it.
    ///
    /// ```
    /// use wasmop::contract::{Kind, RelatedKind};
    /// let pods = |s: &str| RelatedKind { kind: Kind::new("", "v1", "Pod"), label_selector: s.into() };
    /// assert_eq!(pods("app=memcached,memcached_cr=$(parent.name)").parent_name_label(), Some("memcached_cr"));
    /// assert_eq!(pods("app in (a,b),cr==$(parent.name)").parent_name_label(), Some("cr"));
    /// assert_eq!(pods("cr!=$(parent.name)").parent_name_label(), None);
    /// assert_eq!(pods("app=memcached").parent_name_label(), None);
    /// ```
    pub fn parent_name_label(&self) -> Option<&str> {
        self.requirements().find_map(|r| {
            let key = r.strip_suffix(PARENT_NAME_PLACEHOLDER)?.trim_end();
            let key = key.strip_suffix("==").or_else(|| key.strip_suffix('='))?.trim_end();
            (!key.is_empty() && !key.ends_with('!')).then_some(key)
        })
    }

    /// The part of the selector that is the same for every parent, for a server-side watch of
    /// the kind: the requirements without [`PARENT_NAME_PLACEHOLDER`], plus the existence of
    /// the key a `key=$(parent.name)` or `key in (…, $(parent.name))` requirement names.
    /// `None` when no part is fixed (the whole kind must be watched).
    ///
    /// ```
    /// use wasmop::contract::{Kind, RelatedKind};
    /// let pods = |s: &str| RelatedKind { kind: Kind::new("", "v1", "Pod"), label_selector: s.into() };
    /// assert_eq!(pods("app=memcached,memcached_cr=$(parent.name)").fixed_selector().as_deref(), Some("app=memcached,memcached_cr"));
    /// assert_eq!(pods("tier in (a, $(parent.name))").fixed_selector().as_deref(), Some("tier"));
    /// assert_eq!(pods("app=x").fixed_selector().as_deref(), Some("app=x"));
    /// assert_eq!(pods("cr!=$(parent.name)").fixed_selector(), None);
    /// ```
    pub fn fixed_selector(&self) -> Option<String> {
        let fixed: Vec<&str> = self
            .requirements()
            .filter_map(|r| {
                if !r.contains(PARENT_NAME_PLACEHOLDER) {
                    return Some(r);
                }
                let key = match r.split_whitespace().collect::<Vec<_>>()[..] {
                    [key, "in", ..] => key,
                    _ => r.split_once('=').map(|(key, _)| key.trim_end())?,
                };
                (!key.is_empty() && !key.ends_with('!')).then_some(key)
            })
            .collect();
        (!fixed.is_empty()).then(|| fixed.join(","))
    }

    /// The selector's requirements ([`selector_requirements`]).
    fn requirements(&self) -> impl Iterator<Item = &str> {
        selector_requirements(&self.label_selector)
    }
}

/// The requirements of a label selector in kubectl syntax: split at commas outside parentheses
/// (`tier in (a,b)` is one), trimmed.
///
/// ```
/// use wasmop::contract::selector_requirements;
/// let parts: Vec<&str> = selector_requirements("app=web, tier in (a,b),!canary").collect();
/// assert_eq!(parts, ["app=web", "tier in (a,b)", "!canary"]);
/// ```
pub fn selector_requirements(selector: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0_u32;
    selector
        .split(move |c| {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                _ => {}
            }
            c == ',' && depth == 0
        })
        .map(str::trim)
}

/// A validated plugin manifest: everything the plugin may touch.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// DNS-1123 label naming the plugin (controller name, field manager suffix).
    pub name: String,
    /// Semantic version of the plugin.
    pub version: String,
    /// One line saying what it does.
    pub description: String,
    /// The reconciled kind.
    pub parent: Kind,
    /// Scope of the reconciled kind.
    pub scope: Scope,
    /// Kinds the plugin may write as children.
    pub children: Vec<Kind>,
    /// Kinds the plugin may read.
    pub related: Vec<RelatedKind>,
    /// Whether the host holds a finalizer on every parent.
    pub finalizer: bool,
    /// Whether owned children absent from a response are deleted.
    pub prune: bool,
    /// Whether the plugin may take over an existing object of a child kind that no controller
    /// owns (the object then gets this parent as its controller). Objects controlled by
    /// another owner are never taken over.
    pub adopt_unowned: bool,
    /// JSON Schema of the plugin's configuration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_schema: Option<serde_json::Value>,
    /// Admission webhooks the plugin serves (WIT 0.2.0 and later; always empty for a 0.1.0
    /// plugin).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub webhooks: Vec<Webhook>,
}

/// Why a manifest was rejected.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ManifestError {
    /// The name is not a DNS-1123 label (quoted, and cut when long).
    #[error("plugin name {0} is not a DNS-1123 label (lowercase letters, digits and '-', at most 63 characters)")]
    InvalidName(String),
    /// The version is not `MAJOR.MINOR.PATCH` with an optional suffix.
    #[error("plugin version {0:?} is not a semantic version (MAJOR.MINOR.PATCH)")]
    InvalidVersion(String),
    /// A kind (quoted, and cut when long) has an empty version or kind name, characters that cannot appear in one, or a
    /// part longer than Kubernetes allows (group 253, version and kind 63 bytes).
    #[error("invalid kind {0}: version and kind must be non-empty and the kind CamelCase, at most 63 characters each")]
    InvalidKind(String),
    /// The same kind is declared twice, or the parent is also declared as a child.
    #[error("kind {0} is declared more than once")]
    DuplicateKind(String),
    /// A related kind's selector does not parse.
    #[error("related kind {kind}: {source}")]
    InvalidSelector {
        /// The related kind.
        kind: String,
        /// The parser's complaint.
        source: SelectorError,
    },
    /// The configuration schema is not a JSON object.
    #[error("config schema is not a JSON object: {0}")]
    InvalidConfigSchema(String),
    /// A field is larger than the host accepts: `description` over [`MAX_DESCRIPTION`] bytes,
    /// a related kind's selector over [`MAX_SELECTOR`] bytes, `configSchema` over
    /// [`MAX_CONFIG_SCHEMA`] bytes of JSON, `version` over [`MAX_VERSION`] bytes.
    #[error("{field} has {size} bytes, more than the limit of {limit}")]
    TooLarge {
        /// The field, e.g. `description`.
        field: String,
        /// Its size in bytes.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A declared admission webhook is refused.
    #[error("{0}")]
    Webhook(super::webhooks::WebhookError),
    /// The manifest declares webhooks but the plugin does not export the `admission` interface
    /// (a plugin of world `controller`), so no webhook could ever be answered.
    #[error(
        "the manifest declares {0} webhooks but the plugin does not export admission (build it for world operator or webhook)"
    )]
    WebhooksWithoutAdmission(usize),
    /// The manifest declares one of the host's own kinds (see [`super::is_host_kind`]) as its
    /// parent, a child, a related kind, or in a webhook rule's API groups.
    #[error("{what} is one of the host's own kinds ({group} API group), which no plugin may declare", group = super::HOST_API_GROUP)]
    ReservedKind {
        /// Where it is declared and what: `parent wasmop.dev/v1alpha1/WasmPlugin`,
        /// `webhook "w" API group wasmop.dev`.
        what: String,
    },
    /// More child kinds, or more related kinds, than [`MAX_KINDS`].
    #[error("{field} declares {count} kinds, more than the limit of {limit}")]
    TooManyKinds {
        /// `children` or `related`.
        field: &'static str,
        /// Kinds declared.
        count: usize,
        /// The limit.
        limit: usize,
    },
}

impl Manifest {
    /// Every `(webhook, group, version, resource)` the rules of this plugin's webhooks name,
    /// each once per webhook however many rules repeat it, in rule order: what the cluster
    /// must serve for the webhooks to be registered.
    pub fn webhook_rule_resources(&self) -> Vec<(&str, &str, &str, &str)> {
        let mut named: Vec<(&str, &str, &str, &str)> = Vec::new();
        for webhook in &self.webhooks {
            for rule in &webhook.rules {
                for group in &rule.api_groups {
                    for version in &rule.api_versions {
                        for resource in &rule.resources {
                            let key = (webhook.name.as_str(), group.as_str(), version.as_str(), resource.as_str());
                            if !named.contains(&key) {
                                named.push(key);
                            }
                        }
                    }
                }
            }
        }
        named
    }

    /// Check every field; called by the runtime on what a plugin returns from `manifest()`.
    ///
    /// # Errors
    /// The first [`ManifestError`] found.
    pub fn validate(&self) -> Result<(), ManifestError> {
        self.check_sizes()?;
        if !is_dns1123_label(&self.name) {
            return Err(ManifestError::InvalidName(preview(&self.name)));
        }
        if !is_semver(&self.version) {
            return Err(ManifestError::InvalidVersion(self.version.clone()));
        }
        let mut seen = std::collections::HashSet::new();
        for kind in std::iter::once(&self.parent).chain(&self.children) {
            validate_kind(kind)?;
            if !seen.insert(kind) {
                return Err(ManifestError::DuplicateKind(kind.to_string()));
            }
        }
        let mut related_seen = std::collections::HashSet::new();
        for related in &self.related {
            validate_kind(&related.kind)?;
            if !related_seen.insert(&related.kind) {
                return Err(ManifestError::DuplicateKind(related.kind.to_string()));
            }
            related
                .selector_for("probe")
                .map_err(|source| ManifestError::InvalidSelector { kind: related.kind.to_string(), source })?;
        }
        self.check_reserved()?;
        if let Some(schema) = &self.config_schema
            && !schema.is_object()
        {
            return Err(ManifestError::InvalidConfigSchema(schema.to_string()));
        }
        super::webhooks::validate(&self.webhooks).map_err(ManifestError::Webhook)
    }

    /// Refuse a declaration of one of the host's own kinds, wherever it is.
    fn check_reserved(&self) -> Result<(), ManifestError> {
        let reserved = |what: String| Err(ManifestError::ReservedKind { what });
        if super::is_host_kind(&self.parent) {
            return reserved(format!("parent {}", self.parent));
        }
        if let Some(kind) = self.children.iter().find(|k| super::is_host_kind(k)) {
            return reserved(format!("child {kind}"));
        }
        if let Some(r) = self.related.iter().find(|r| super::is_host_kind(&r.kind)) {
            return reserved(format!("related kind {}", r.kind));
        }
        for webhook in &self.webhooks {
            let groups = webhook.rules.iter().flat_map(|r| &r.api_groups);
            if let Some(group) = groups.into_iter().find(|g| super::is_host_group(g)) {
                return reserved(format!("webhook {:?} API group {group}", webhook.name));
            }
        }
        Ok(())
    }

    /// Refuse fields larger than the host accepts, before looking into any of them.
    fn check_sizes(&self) -> Result<(), ManifestError> {
        let too_large = |field: &str, size: usize, limit: usize| {
            if size > limit { Err(ManifestError::TooLarge { field: field.to_owned(), size, limit }) } else { Ok(()) }
        };
        too_large("description", self.description.len(), MAX_DESCRIPTION)?;
        too_large("version", self.version.len(), MAX_VERSION)?;
        for (field, count) in [("children", self.children.len()), ("related", self.related.len())] {
            if count > MAX_KINDS {
                return Err(ManifestError::TooManyKinds { field, count, limit: MAX_KINDS });
            }
        }
        for (i, related) in self.related.iter().enumerate() {
            too_large(&format!("related #{i} labelSelector"), related.label_selector.len(), MAX_SELECTOR)?;
        }
        if let Some(schema) = &self.config_schema {
            too_large("configSchema", serde_json::to_string(schema).map_or(usize::MAX, |s| s.len()), MAX_CONFIG_SCHEMA)?;
        }
        Ok(())
    }

    /// The field manager the host uses for this plugin's writes: `wasmop/<name>`.
    pub fn field_manager(&self) -> String {
        format!("wasmop/{}", self.name)
    }

    /// The finalizer the host holds on parents when [`Manifest::finalizer`] is set.
    pub fn finalizer_name(&self) -> String {
        format!("wasmop.dev/{}", self.name)
    }

    /// Whether the plugin may write objects of `kind`.
    pub fn may_write(&self, kind: &Kind) -> bool {
        self.children.contains(kind)
    }

    /// Whether the plugin may read objects of `kind` (parent, children or related).
    pub fn may_read(&self, kind: &Kind) -> bool {
        &self.parent == kind || self.may_write(kind) || self.related.iter().any(|r| &r.kind == kind)
    }
}

fn validate_kind(kind: &Kind) -> Result<(), ManifestError> {
    let ok_size = kind.group.len() <= 253 && kind.version.len() <= 63 && kind.kind.len() <= 63;
    let ok_group = kind.group.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-');
    let ok_version = !kind.version.is_empty() && kind.version.chars().all(|c| c.is_ascii_alphanumeric());
    let ok_kind =
        kind.kind.chars().next().is_some_and(|c| c.is_ascii_uppercase()) && kind.kind.chars().all(|c| c.is_ascii_alphanumeric());
    if ok_size && ok_group && ok_version && ok_kind {
        Ok(())
    } else {
        Err(ManifestError::InvalidKind(preview(&kind.to_string())))
    }
}

fn is_semver(s: &str) -> bool {
    let core = s.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3 && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Manifests for the host's unit tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;

    /// The memcached example plugin's manifest, with a related-Pod selector `related`.
    pub(crate) fn memcached(related: &str) -> Manifest {
        Manifest {
            name: "memcached".into(),
            version: "0.1.0".into(),
            description: String::new(),
            parent: Kind::new("cache.example.com", "v1alpha1", "Memcached"),
            scope: Scope::Namespaced,
            children: vec![Kind::new("apps", "v1", "Deployment")],
            related: vec![RelatedKind { kind: Kind::new("", "v1", "Pod"), label_selector: related.into() }],
            finalizer: false,
            prune: true,
            adopt_unowned: false,
            config_schema: None,
            webhooks: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memcached() -> Manifest {
        fixtures::memcached("app=memcached,memcached_cr=$(parent.name)")
    }

    #[test]
    fn a_well_formed_manifest_validates() {
        assert_eq!(memcached().validate(), Ok(()));
    }

    #[test]
    fn names_must_be_dns_labels() {
        let m = Manifest { name: "Mem_cached".into(), ..memcached() };
        assert!(matches!(m.validate(), Err(ManifestError::InvalidName(_))));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(!is_dns1123_label("-a"));
    }

    #[test]
    fn versions_must_be_semver() {
        assert!(is_semver("1.2.3") && is_semver("1.2.3-rc.1") && !is_semver("1.2") && !is_semver("v1.2.3"));
        let m = Manifest { version: "latest".into(), ..memcached() };
        assert!(matches!(m.validate(), Err(ManifestError::InvalidVersion(_))));
    }

    #[test]
    fn parent_declared_as_child_is_a_duplicate() {
        let mut m = memcached();
        m.children.push(m.parent.clone());
        assert!(matches!(m.validate(), Err(ManifestError::DuplicateKind(_))));
    }

    #[test]
    fn broken_related_selector_is_rejected() {
        let mut m = memcached();
        m.related[0].label_selector = "app in (".into();
        assert!(matches!(m.validate(), Err(ManifestError::InvalidSelector { .. })));
    }

    #[test]
    fn related_selector_substitutes_parent_name() {
        let sel = memcached().related[0].selector_for("a").unwrap();
        assert_eq!(sel.to_string(), "app=memcached,memcached_cr=a");
    }

    #[test]
    fn oversized_fields_are_refused_naming_the_field_and_limit() {
        let m = Manifest { description: "d".repeat(20 << 20), ..memcached() };
        assert_eq!(m.validate().unwrap_err().to_string(), "description has 20971520 bytes, more than the limit of 1024");
        let m = Manifest { version: format!("1.0.0-{}", "x".repeat(200)), ..memcached() };
        assert!(matches!(m.validate(), Err(ManifestError::TooLarge { limit: MAX_VERSION, .. })));
        let mut m = memcached();
        m.related[0].label_selector = format!("app in ({})", "a,".repeat(1000));
        assert_eq!(m.validate().unwrap_err().to_string(), "related #0 labelSelector has 2009 bytes, more than the limit of 1024");
        let schema = serde_json::json!({"type": "object", "description": "s".repeat(70_000)});
        let m = Manifest { config_schema: Some(schema), ..memcached() };
        assert!(matches!(m.validate(), Err(ManifestError::TooLarge { ref field, limit: 65536, .. }) if field == "configSchema"));
        let m = Manifest { description: "d".repeat(MAX_DESCRIPTION), ..memcached() };
        assert_eq!(m.validate(), Ok(()));
    }

    #[test]
    fn at_most_64_child_and_related_kinds() {
        let kinds = |n: usize| (0..n).map(|i| Kind::new("example.com", "v1", format!("K{i}"))).collect::<Vec<_>>();
        let m = Manifest { children: kinds(5000), ..memcached() };
        assert_eq!(m.validate().unwrap_err().to_string(), "children declares 5000 kinds, more than the limit of 64");
        let related = kinds(65).into_iter().map(|kind| RelatedKind { kind, label_selector: String::new() }).collect();
        let m = Manifest { related, ..memcached() };
        assert!(matches!(m.validate(), Err(ManifestError::TooManyKinds { field: "related", count: 65, limit: 64 })));
        assert_eq!(Manifest { children: kinds(64), ..memcached() }.validate(), Ok(()));
    }

    #[test]
    fn huge_names_and_kinds_are_refused_without_repeating_them() {
        let m = Manifest { name: "N".repeat(1 << 20), ..memcached() };
        assert!(m.validate().unwrap_err().to_string().len() < 500);
        let m = Manifest { children: vec![Kind::new("", "v1", "K".repeat(1 << 20))], ..memcached() };
        let err = m.validate().unwrap_err();
        assert!(matches!(err, ManifestError::InvalidKind(_)) && err.to_string().len() < 500, "{err}");
    }

    #[test]
    fn the_hosts_own_kinds_are_refused_as_parent_child_related_or_webhook_group() {
        let wasm_plugin = Kind::new("wasmop.dev", "v1alpha1", "WasmPlugin");
        let parent = Manifest { parent: wasm_plugin.clone(), ..memcached() };
        assert_eq!(
            parent.validate().unwrap_err().to_string(),
            "parent wasmop.dev/v1alpha1/WasmPlugin is one of the host's own kinds (wasmop.dev API group), which no plugin may declare"
        );
        let mut child = memcached();
        child.children.push(Kind::new("wasmop.dev", "v9", "Future"));
        assert!(matches!(child.validate(), Err(ManifestError::ReservedKind { ref what }) if what.starts_with("child ")));
        let mut related = memcached();
        related.related.push(RelatedKind { kind: wasm_plugin, label_selector: String::new() });
        assert!(matches!(related.validate(), Err(ManifestError::ReservedKind { ref what }) if what.starts_with("related ")));
        let rule = wasmop_types::Rule {
            operations: vec![wasmop_types::Operation::Update],
            api_groups: vec!["apps".into(), "wasmop.dev".into()],
            api_versions: vec!["*".into()],
            resources: vec!["*".into()],
            scope: Default::default(),
        };
        let webhook = wasmop_types::Webhook {
            name: "forge".into(),
            type_: wasmop_types::WebhookType::Mutating,
            rules: vec![rule],
            namespace_selector: String::new(),
            object_selector: String::new(),
            failure_policy: Default::default(),
            side_effects: Default::default(),
            timeout_seconds: 5,
            match_conditions: Vec::new(),
        };
        let hooked = Manifest { webhooks: vec![webhook], ..memcached() };
        assert_eq!(
            hooked.validate().unwrap_err().to_string(),
            "webhook \"forge\" API group wasmop.dev is one of the host's own kinds (wasmop.dev API group), which no plugin may declare"
        );
        let look_alike = Manifest { parent: Kind::new("test.wasmop.dev", "v1", "Testbed"), ..memcached() };
        assert_eq!(look_alike.validate(), Ok(()));
    }

    #[test]
    fn read_and_write_permissions_follow_declarations() {
        let m = memcached();
        assert!(m.may_write(&Kind::new("apps", "v1", "Deployment")));
        assert!(!m.may_write(&Kind::new("", "v1", "Pod")));
        assert!(m.may_read(&Kind::new("", "v1", "Pod")));
        assert!(m.may_read(&m.parent));
        assert!(!m.may_read(&Kind::new("", "v1", "Secret")));
    }
}
