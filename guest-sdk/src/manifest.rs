//! The plugin's manifest: what it reconciles and everything it may touch.

use serde_json::Value;

use crate::{Kind, Scope, Webhook};

/// A kind the plugin may read but does not own, limited by a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelatedKind {
    /// The kind.
    pub kind: Kind,
    /// Label selector (kubectl syntax). `$(parent.name)` in it is replaced by the parent's name.
    /// Empty: every object of the kind in the parent's namespace.
    pub label_selector: String,
}

/// What a plugin is, and everything it may touch; built with chained setters.
///
/// The host grants nothing else: lookups and actions on kinds not declared here are refused.
///
/// ```
/// use wasmop_sdk::{Kind, Manifest, Scope};
///
/// let m = Manifest::new("memcached", "0.1.0")
///     .description("Runs memcached for each Memcached resource")
///     .parent(Kind::new("cache.example.com", "v1alpha1", "Memcached"), Scope::Namespaced)
///     .child(Kind::new("apps", "v1", "Deployment"))
///     .related(Kind::new("", "v1", "Pod"), "app=memcached,memcached_cr=$(parent.name)")
///     .prune(true);
/// assert_eq!(m.children.len(), 1);
/// assert!(m.declares(&Kind::new("", "v1", "Pod")));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// Plugin name: a DNS-1123 label. Used as the controller name and in the field manager
    /// `wasmop/<name>`.
    pub name: String,
    /// Plugin version, semantic versioning (`1.2.3`).
    pub version: String,
    /// One line saying what the plugin does.
    pub description: String,
    /// The kind the plugin reconciles and its scope; set with [`Manifest::parent`]. A manifest
    /// without one is refused by the host.
    pub parent: Option<(Kind, Scope)>,
    /// Kinds the plugin may create, update and delete as children of a parent.
    pub children: Vec<Kind>,
    /// Kinds the plugin may read, each with its label selector.
    pub related: Vec<RelatedKind>,
    /// Whether the host holds a finalizer on every parent (default `false`).
    pub finalizer: bool,
    /// Whether owned children the response no longer lists are deleted (default `false`).
    pub prune: bool,
    /// Whether the plugin may take over an existing object of a child kind that no controller
    /// owns (default `false`).
    pub adopt_unowned: bool,
    /// JSON Schema of the plugin's configuration, if it takes any.
    pub config_schema: Option<Value>,
    /// The admission webhooks the plugin serves (answered by [`Plugin::admit`](crate::Plugin::admit)).
    pub webhooks: Vec<Webhook>,
}

impl Manifest {
    /// A manifest with a name and version and nothing declared yet.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            description: String::new(),
            parent: None,
            children: Vec::new(),
            related: Vec::new(),
            finalizer: false,
            prune: false,
            adopt_unowned: false,
            config_schema: None,
            webhooks: Vec::new(),
        }
    }

    /// Set the one-line description.
    #[must_use]
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Set the kind the plugin reconciles and whether it is namespaced.
    #[must_use]
    pub fn parent(mut self, kind: Kind, scope: Scope) -> Self {
        self.parent = Some((kind, scope));
        self
    }

    /// Declare a kind the plugin may create, update and delete as a child.
    #[must_use]
    pub fn child(mut self, kind: Kind) -> Self {
        self.children.push(kind);
        self
    }

    /// Declare a kind the plugin may read, limited by a label selector in which
    /// `$(parent.name)` stands for the parent's name.
    ///
    /// ```
    /// use wasmop_sdk::{Kind, Manifest};
    /// let m = Manifest::new("x", "0.1.0").related(Kind::new("", "v1", "Secret"), "app=x");
    /// assert_eq!(m.related[0].label_selector, "app=x");
    /// ```
    #[must_use]
    pub fn related(mut self, kind: Kind, label_selector: impl Into<String>) -> Self {
        self.related.push(RelatedKind { kind, label_selector: label_selector.into() });
        self
    }

    /// Ask the host to hold a finalizer on every parent, so the plugin is called with
    /// [`Request::finalizing`](crate::Request::finalizing) set before the parent goes away.
    #[must_use]
    pub fn finalizer(mut self, finalizer: bool) -> Self {
        self.finalizer = finalizer;
        self
    }

    /// Delete owned children of the declared kinds that the response no longer lists.
    #[must_use]
    pub fn prune(mut self, prune: bool) -> Self {
        self.prune = prune;
        self
    }

    /// Let the plugin take over an existing object of a child kind that no controller owns;
    /// objects controlled by another owner are never taken over.
    #[must_use]
    pub fn adopt_unowned(mut self, adopt: bool) -> Self {
        self.adopt_unowned = adopt;
        self
    }

    /// Declare an admission webhook the plugin serves; the host registers it with the API
    /// server and calls [`Plugin::admit`](crate::Plugin::admit) with its name.
    ///
    /// ```
    /// use wasmop_sdk::{Kind, Manifest, Operation, Scope, Webhook};
    /// let m = Manifest::new("sidecars", "0.1.0")
    ///     .parent(Kind::new("example.com", "v1", "SidecarSet"), Scope::Cluster)
    ///     .webhook(Webhook::mutating("inject").rule(Operation::Create, "", "v1", "pods"));
    /// assert_eq!(m.webhooks[0].name, "inject");
    /// ```
    #[must_use]
    pub fn webhook(mut self, webhook: Webhook) -> Self {
        self.webhooks.push(webhook);
        self
    }

    /// Set the JSON Schema of the plugin's configuration.
    ///
    /// ```
    /// let m = wasmop_sdk::Manifest::new("x", "0.1.0")
    ///     .config_schema(serde_json::json!({"type": "object", "properties": {"image": {"type": "string"}}}));
    /// assert!(m.config_schema.is_some());
    /// ```
    #[must_use]
    pub fn config_schema(mut self, schema: Value) -> Self {
        self.config_schema = Some(schema);
        self
    }

    /// Whether the manifest declares this kind as parent, child or related kind (what the host
    /// lets the plugin read).
    pub fn declares(&self, kind: &Kind) -> bool {
        self.parent.as_ref().is_some_and(|(k, _)| k == kind)
            || self.children.contains(kind)
            || self.related.iter().any(|r| &r.kind == kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_declares_nothing_and_wants_no_finalizer_or_prune() {
        let m = Manifest::new("p", "1.0.0");
        assert_eq!((m.name.as_str(), m.version.as_str(), m.description.as_str()), ("p", "1.0.0", ""));
        assert!(m.parent.is_none() && m.children.is_empty() && m.related.is_empty());
        assert!(!m.finalizer && !m.prune && !m.adopt_unowned && m.config_schema.is_none() && m.webhooks.is_empty());
    }

    #[test]
    fn setters_accumulate_children_and_related_in_order() {
        let m = Manifest::new("p", "1.0.0")
            .child(Kind::new("", "v1", "ConfigMap"))
            .child(Kind::new("", "v1", "Service"))
            .related(Kind::new("", "v1", "Pod"), "a=b")
            .finalizer(true);
        assert_eq!(m.children.iter().map(|k| k.kind.as_str()).collect::<Vec<_>>(), ["ConfigMap", "Service"]);
        assert_eq!(m.related, [RelatedKind { kind: Kind::new("", "v1", "Pod"), label_selector: "a=b".into() }]);
        assert!(m.finalizer);
    }

    #[test]
    fn declares_covers_parent_children_and_related_only() {
        let m = Manifest::new("p", "1.0.0")
            .parent(Kind::new("x.io", "v1", "Thing"), Scope::Cluster)
            .child(Kind::new("", "v1", "ConfigMap"))
            .related(Kind::new("", "v1", "Pod"), "");
        assert!(m.declares(&Kind::new("x.io", "v1", "Thing")));
        assert!(m.declares(&Kind::new("", "v1", "ConfigMap")));
        assert!(m.declares(&Kind::new("", "v1", "Pod")));
        assert!(!m.declares(&Kind::new("", "v1", "Secret")));
    }
}
