//! [`visible_to`]: which objects a plugin may see around one parent. One rule for the request
//! a reconcile is given ([`Request::gather`](crate::contract::Request::gather), `wasmop run`)
//! and for the fixtures an offline reconcile is given (`wasmop reconcile`), so the two cannot
//! drift. The lookups a plugin makes during a call (`runtime/lookup.rs`) ask the same
//! [`Visibility`] ([`Visibility::lookup`], [`Visibility::sees`]).

use serde_json::Value;

use super::{LabelSelector, SelectorError, name_of, namespace_of};
use crate::contract::{Kind, Manifest, RelatedKind, Scope};
use crate::policy::Grants;

/// Why an object is out of a plugin's sight for one parent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Hidden {
    /// The object's kind is neither the parent's nor a child or related kind of the plugin.
    #[error("{kind} is not declared in the manifest of plugin {plugin}")]
    Undeclared {
        /// The object's kind.
        kind: Kind,
        /// The plugin.
        plugin: String,
    },
    /// The object is not of a kind the plugin declares as a child.
    #[error("{kind} is not a child kind of plugin {plugin}")]
    NotAChildKind {
        /// The object's kind.
        kind: Kind,
        /// The plugin.
        plugin: String,
    },
    /// The object is not of a kind the plugin declares as related.
    #[error("plugin {plugin} does not declare {kind} as a related kind")]
    NotARelatedKind {
        /// The object's kind.
        kind: Kind,
        /// The plugin.
        plugin: String,
    },
    /// The host's policy does not grant the kind (Secrets) to the plugin.
    #[error("the host's policy does not grant {kind} to plugin {plugin}")]
    NotGranted {
        /// The object's kind.
        kind: Kind,
        /// The plugin.
        plugin: String,
    },
    /// The object is in another namespace than the parent's, and (for a related object) the
    /// policy grants no reads there.
    #[error("namespace {namespace:?} is not the parent's namespace {parent_namespace:?}{}",
        if *.related { " and not granted by the host's policy" } else { "" })]
    OtherNamespace {
        /// The object's namespace.
        namespace: String,
        /// The parent's namespace.
        parent_namespace: String,
        /// Whether the object was looked at as a related object (grants may widen those).
        related: bool,
    },
    /// The object's labels do not match the related kind's selector for this parent.
    #[error("its labels do not match the related selector {0}")]
    NotSelected(String),
    /// The related kind's selector does not parse once the parent's name is in it.
    #[error("the related selector does not parse for this parent: {0}")]
    BadSelector(SelectorError),
}

/// What the plugin of a manifest, under its grants, may see around one parent: made by
/// [`visible_to`].
#[derive(Debug, Clone, Copy)]
pub struct Visibility<'a> {
    manifest: &'a Manifest,
    grants: &'a Grants,
    namespace: Option<&'a str>,
    parent_name: &'a str,
    admission: bool,
}

/// Which objects of a kind a lookup may see ([`Visibility::lookup`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sight {
    /// Every object (a child kind; the parent's kind in an admission call).
    Whole,
    /// Those the related kind's selector matches for this parent.
    Selected(LabelSelector),
    /// Only the parent itself (its kind is not otherwise declared).
    ParentOnly,
}

/// What the plugin of `manifest`, granted `grants`, may see around `parent`: its children (of
/// the child kinds, in the parent's namespace) and its related objects (of the related kinds,
/// matching their selectors for this parent, in the parent's namespace or one the grants add).
/// A kind the grants withhold (Secrets) is never seen. A cluster-scoped parent sees every
/// namespace.
pub fn visible_to<'a>(manifest: &'a Manifest, grants: &'a Grants, parent: &'a Value) -> Visibility<'a> {
    let namespace = match manifest.scope {
        Scope::Namespaced => namespace_of(parent),
        Scope::Cluster => None,
    };
    visible_around(manifest, grants, namespace, name_of(parent).unwrap_or_default())
}

/// [`visible_to`] for a parent known by its namespace (`None`: a cluster-scoped parent, which
/// sees every namespace) and name, as a call's lookups know it (in an admission call, the
/// admitted object's).
pub fn visible_around<'a>(
    manifest: &'a Manifest,
    grants: &'a Grants,
    namespace: Option<&'a str>,
    parent_name: &'a str,
) -> Visibility<'a> {
    Visibility { manifest, grants, namespace, parent_name, admission: false }
}

impl<'a> Visibility<'a> {
    /// The manifest.
    pub fn manifest(&self) -> &'a Manifest {
        self.manifest
    }

    /// The parent's name.
    pub fn parent_name(&self) -> &'a str {
        self.parent_name
    }

    /// Where children and the request's related objects are: the parent's namespace (`None`:
    /// every namespace, for a cluster-scoped parent).
    pub fn namespace(&self) -> Option<&'a str> {
        self.namespace
    }

    /// The same sight for an admission call: every object of the parent's kind in the
    /// namespace is seen, not only the parent.
    #[must_use]
    pub fn admitting(self) -> Self {
        Self { admission: true, ..self }
    }

    /// What a lookup of `kind` in `namespace` (`None`: every namespace) during a call may see:
    /// the kind is declared (parent, child or related) and granted, and the namespace is the
    /// parent's or one the grants add (a cluster-scoped parent reads every namespace).
    ///
    /// # Errors
    /// [`Hidden`]: [`Undeclared`](Hidden::Undeclared), [`NotGranted`](Hidden::NotGranted),
    /// [`OtherNamespace`](Hidden::OtherNamespace), or [`BadSelector`](Hidden::BadSelector) when
    /// the related selector does not parse for this parent.
    pub fn lookup(&self, kind: &Kind, namespace: Option<&str>) -> Result<Sight, Hidden> {
        if !self.manifest.may_read(kind) {
            return Err(Hidden::Undeclared { kind: kind.clone(), plugin: self.manifest.name.clone() });
        }
        if !self.grants.may_read_kind(kind) {
            return Err(self.not_granted(kind.clone()));
        }
        if let Some(ns) = namespace.filter(|ns| !self.grants.may_read_namespace(ns, self.namespace)) {
            let parent_namespace = self.namespace.unwrap_or_default().to_owned();
            return Err(Hidden::OtherNamespace { namespace: ns.to_owned(), parent_namespace, related: true });
        }
        if self.manifest.may_write(kind) || (self.admission && &self.manifest.parent == kind) {
            return Ok(Sight::Whole);
        }
        match self.manifest.related.iter().find(|r| &r.kind == kind) {
            Some(related) => self.selector(related).map(Sight::Selected).map_err(Hidden::BadSelector),
            None => Ok(Sight::ParentOnly),
        }
    }

    /// Whether a lookup with `sight` (from [`Visibility::lookup`]) sees `object`.
    pub fn sees(&self, sight: &Sight, object: &Value) -> bool {
        match sight {
            Sight::Whole => true,
            Sight::Selected(selector) => selector.matches_object(object),
            Sight::ParentOnly => name_of(object) == Some(self.parent_name) && namespace_of(object) == self.namespace,
        }
    }

    /// Whether objects of the child `kind` are seen at all.
    pub fn sees_children_of(&self, kind: &Kind) -> bool {
        self.manifest.may_write(kind) && self.grants.may_read_kind(kind)
    }

    /// Whether objects of the related `kind` are seen at all.
    pub fn sees_related(&self, related: &RelatedKind) -> bool {
        self.grants.may_read_kind(&related.kind)
    }

    /// The selector of `related` for this parent.
    ///
    /// # Errors
    /// [`SelectorError`] when it does not parse with the parent's name substituted.
    pub fn selector(&self, related: &RelatedKind) -> Result<LabelSelector, SelectorError> {
        related.selector_for(self.parent_name)
    }

    /// Whether `object` may be one of the parent's children as far as its kind, the grants and
    /// its namespace go (whether the parent controls it is the ownership check's).
    ///
    /// # Errors
    /// [`Hidden`]: why the plugin never sees it as a child.
    pub fn child(&self, object: &Value) -> Result<(), Hidden> {
        let kind = self.kind_of(object, true)?;
        if !self.grants.may_read_kind(&kind) {
            return Err(self.not_granted(kind));
        }
        self.in_namespace(object, false)
    }

    /// Whether the plugin sees `object` as a related object: of a related kind, granted, in the
    /// parent's namespace or one the grants add, and matching the kind's selector for this
    /// parent (a kind also declared as a child is seen whole).
    ///
    /// # Errors
    /// [`Hidden`]: why the plugin never sees it.
    pub fn related(&self, object: &Value) -> Result<(), Hidden> {
        let kind = self.kind_of(object, false)?;
        let Some(related) = self.manifest.related.iter().find(|r| r.kind == kind) else {
            return Err(Hidden::NotARelatedKind { kind, plugin: self.manifest.name.clone() });
        };
        if !self.sees_related(related) {
            return Err(self.not_granted(kind));
        }
        self.in_namespace(object, true)?;
        let selector = self.selector(related).map_err(Hidden::BadSelector)?;
        if !self.manifest.may_write(&kind) && !selector.matches_object(object) {
            return Err(Hidden::NotSelected(selector.to_string()));
        }
        Ok(())
    }

    fn kind_of(&self, object: &Value, child: bool) -> Result<Kind, Hidden> {
        let kind = Kind::of_object(object).unwrap_or_else(|| Kind::new("", "", ""));
        if child && !self.manifest.may_write(&kind) {
            return Err(Hidden::NotAChildKind { kind, plugin: self.manifest.name.clone() });
        }
        Ok(kind)
    }

    fn not_granted(&self, kind: Kind) -> Hidden {
        Hidden::NotGranted { kind, plugin: self.manifest.name.clone() }
    }

    /// `object`'s namespace is the parent's, or (for a related object) one the grants add.
    fn in_namespace(&self, object: &Value, related: bool) -> Result<(), Hidden> {
        let Some(parent_ns) = self.namespace else { return Ok(()) };
        let ns = namespace_of(object).unwrap_or_default();
        if ns == parent_ns || (related && self.grants.may_read_namespace(ns, Some(parent_ns))) {
            return Ok(());
        }
        Err(Hidden::OtherNamespace { namespace: ns.to_owned(), parent_namespace: parent_ns.to_owned(), related })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::policy::{NamespaceGrant, SecretAccess};

    fn manifest() -> Manifest {
        crate::contract::manifest::fixtures::memcached("app=m,cr=$(parent.name)")
    }

    fn parent() -> Value {
        json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "metadata": {"name": "a", "namespace": "ns"}})
    }

    fn pod(ns: &str, labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns, "labels": labels}})
    }

    fn deployment(ns: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": ns}})
    }

    #[test]
    fn a_child_is_seen_in_the_parents_namespace_only_whatever_the_grants() {
        let (m, parent) = (manifest(), parent());
        let everywhere = Grants { namespaces: NamespaceGrant::All, ..Grants::default() };
        for grants in [Grants::default(), everywhere] {
            let seen = visible_to(&m, &grants, &parent);
            assert_eq!(seen.child(&deployment("ns")), Ok(()));
            let other = seen.child(&deployment("other")).unwrap_err();
            assert_eq!(other.to_string(), r#"namespace "other" is not the parent's namespace "ns""#);
        }
        let err = visible_to(&m, &Grants::default(), &parent).child(&pod("ns", json!({}))).unwrap_err();
        assert!(matches!(err, Hidden::NotAChildKind { .. }), "{err}");
    }

    #[test]
    fn a_related_object_is_seen_when_its_labels_match_in_a_namespace_the_grants_allow() {
        let (m, parent) = (manifest(), parent());
        let none = Grants::default();
        let seen = visible_to(&m, &none, &parent);
        assert_eq!(seen.related(&pod("ns", json!({"app": "m", "cr": "a"}))), Ok(()));
        let err = seen.related(&pod("ns", json!({"app": "m", "cr": "b"}))).unwrap_err();
        assert!(matches!(err, Hidden::NotSelected(_)), "{err}");
        let err = seen.related(&pod("other", json!({"app": "m", "cr": "a"}))).unwrap_err();
        assert!(err.to_string().ends_with("and not granted by the host's policy"), "{err}");
        let other = Grants { namespaces: NamespaceGrant::Also(["other".to_owned()].into()), ..Grants::default() };
        assert_eq!(visible_to(&m, &other, &parent).related(&pod("other", json!({"app": "m", "cr": "a"}))), Ok(()));
        let err = seen.related(&deployment("ns")).unwrap_err();
        assert!(matches!(err, Hidden::NotARelatedKind { .. }), "{err}");
    }

    #[test]
    fn secrets_are_seen_only_when_granted() {
        let mut m = manifest();
        let secret = Kind::new("", "v1", "Secret");
        m.children.push(secret.clone());
        let parent = parent();
        let object = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "ns"}});
        let err = visible_to(&m, &Grants::default(), &parent).child(&object).unwrap_err();
        assert!(matches!(err, Hidden::NotGranted { .. }), "{err}");
        assert!(!visible_to(&m, &Grants::default(), &parent).sees_children_of(&secret));
        let read = Grants { secrets: SecretAccess::Read, ..Grants::default() };
        assert_eq!(visible_to(&m, &read, &parent).child(&object), Ok(()));
        assert!(visible_to(&m, &read, &parent).sees_children_of(&secret));
    }
}
