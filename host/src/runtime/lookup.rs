//! The plugin's lookup interface: the host side of the WIT `cache` interface — scoped,
//! read-only lookups in the host's object cache. One implementation, answered to the `cache`
//! import of every WIT version.

use std::sync::Arc;

use super::bindings::{v0_1, v0_2, v0_3};
use super::state::{HostState, LookupScope};
use crate::contract::{Kind, Scope};
use crate::objects::{LabelSelector, name_of, namespace_of};

/// Why a lookup was refused, whatever the WIT version of the plugin.
enum Refused {
    /// The kind is not declared in the manifest.
    UndeclaredKind(String),
    /// The namespace or kind is outside what the plugin may read.
    Forbidden(String),
    /// The label selector does not parse.
    InvalidSelector(String),
}

/// Each version's `lookup-error`, from a [`Refused`].
macro_rules! lookup_impl {
    ($v:ident) => {
        impl From<Refused> for $v::cache::LookupError {
            fn from(r: Refused) -> Self {
                match r {
                    Refused::UndeclaredKind(k) => Self::UndeclaredKind(k),
                    Refused::Forbidden(m) => Self::Forbidden(m),
                    Refused::InvalidSelector(m) => Self::InvalidSelector(m),
                }
            }
        }

        impl $v::cache::Host for HostState {
            async fn get(
                &mut self,
                kind: $v::types::KindRef,
                namespace: Option<String>,
                name: String,
            ) -> wasmtime::Result<Result<Option<String>, $v::cache::LookupError>> {
                let kind = Kind::new(kind.group, kind.version, kind.kind);
                Ok(self.get_object(kind, namespace.as_deref(), &name).map_err(Into::into))
            }

            async fn list(
                &mut self,
                kind: $v::types::KindRef,
                namespace: Option<String>,
                label_selector: String,
            ) -> wasmtime::Result<Result<Vec<String>, $v::cache::LookupError>> {
                let kind = Kind::new(kind.group, kind.version, kind.kind);
                Ok(self.list_objects(kind, namespace.as_deref(), &label_selector).map_err(Into::into))
            }
        }
    };
}

lookup_impl!(v0_1);
lookup_impl!(v0_2);
lookup_impl!(v0_3);

impl HostState {
    fn get_object(&mut self, kind: Kind, namespace: Option<&str>, name: &str) -> Result<Option<String>, Refused> {
        let (lookup, ns) = self.lookup_scope(&kind, namespace)?;
        let Some(object) = lookup.cache.get(&kind, ns.as_deref(), name) else { return Ok(None) };
        match visible_part(&lookup, &kind)? {
            Some(visible) if !visible.admits(&object) => Ok(None),
            _ => Ok(Some(object.json().to_owned())),
        }
    }

    fn list_objects(&mut self, kind: Kind, namespace: Option<&str>, label_selector: &str) -> Result<Vec<String>, Refused> {
        let (lookup, ns) = self.lookup_scope(&kind, namespace)?;
        let wanted = LabelSelector::parse(label_selector).map_err(|e| Refused::InvalidSelector(e.to_string()))?;
        let visible = visible_part(&lookup, &kind)?;
        Ok(lookup
            .cache
            .list(&kind, ns.as_deref())
            .into_iter()
            .filter(|o| wanted.matches_object(o) && visible.as_ref().is_none_or(|v| v.admits(o)))
            .map(|o| o.json().to_owned())
            .collect())
    }
}

impl HostState {
    /// Check a lookup against the manifest, the grants and the parent's namespace; returns
    /// the scope and the namespace to read. A refusal is also recorded: it fails the call once
    /// the plugin returns.
    fn lookup_scope(&mut self, kind: &Kind, namespace: Option<&str>) -> Result<(Arc<LookupScope>, Option<String>), Refused> {
        let Some(lookup) = self.lookup.clone() else {
            return Err(Refused::Forbidden("lookups are only available while reconciling or admitting".into()));
        };
        let ns = match (lookup.manifest.scope, namespace) {
            (Scope::Namespaced, None) => lookup.namespace.clone(),
            (_, ns) => ns.map(str::to_owned),
        };
        let refusal = refusal(&lookup, kind, ns.as_deref());
        if let Some(error) = refusal {
            let what = format!("{kind} in namespace {:?}: {}", ns.as_deref().unwrap_or_default(), lookup_error_text(&error));
            tracing::warn!(plugin = %self.plugin, "lookup refused: {what}");
            self.refused_lookups.push(what);
            return Err(error);
        }
        Ok((lookup, ns))
    }
}

/// Why `lookup` may not read `kind` in `ns`, if it may not: the manifest does not declare the
/// kind, the policy does not grant it (Secrets), or the namespace is neither the parent's nor
/// granted.
fn refusal(lookup: &LookupScope, kind: &Kind, ns: Option<&str>) -> Option<Refused> {
    if !lookup.manifest.may_read(kind) {
        return Some(Refused::UndeclaredKind(kind.to_string()));
    }
    if !lookup.grants.may_read_kind(kind) {
        return Some(Refused::Forbidden(format!("{kind} is not granted to this plugin by the host's policy")));
    }
    let parent_ns = lookup.namespace.as_deref();
    let other = ns.filter(|ns| !lookup.grants.may_read_namespace(ns, parent_ns))?;
    Some(Refused::Forbidden(format!("namespace {other:?} is outside the parent's namespace {:?}", parent_ns.unwrap_or_default())))
}

fn lookup_error_text(e: &Refused) -> String {
    match e {
        Refused::UndeclaredKind(k) => format!("{k} is not declared in the manifest"),
        Refused::Forbidden(m) | Refused::InvalidSelector(m) => m.clone(),
    }
}

/// Which objects of a readable kind a lookup may see.
enum Visible {
    /// Those the related kind's declared selector matches for this parent.
    Selected(LabelSelector),
    /// Only the parent itself (its kind is not otherwise declared).
    ParentOnly(String, Option<String>),
}

impl Visible {
    fn admits(&self, object: &serde_json::Value) -> bool {
        match self {
            Visible::Selected(selector) => selector.matches_object(object),
            Visible::ParentOnly(name, ns) => name_of(object) == Some(name) && namespace_of(object) == ns.as_deref(),
        }
    }
}

/// The restriction on a readable kind: `None` for child kinds (readable in the namespace),
/// and for the parent's kind in an admission call; the declared selector for related kinds;
/// the parent alone for the parent's kind in a reconcile.
fn visible_part(lookup: &LookupScope, kind: &Kind) -> Result<Option<Visible>, Refused> {
    if lookup.manifest.may_write(kind) || (lookup.admission && &lookup.manifest.parent == kind) {
        return Ok(None);
    }
    if let Some(related) = lookup.manifest.related.iter().find(|r| &r.kind == kind) {
        // The selector parsed at load time with a placeholder; only a parent name that is not
        // a valid label value can make it fail here.
        return related
            .selector_for(&lookup.parent_name)
            .map(|s| Some(Visible::Selected(s)))
            .map_err(|e| Refused::Forbidden(e.to_string()));
    }
    Ok(Some(Visible::ParentOnly(lookup.parent_name.clone(), lookup.namespace.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::objects::MemoryCache;
    use crate::policy::Grants;
    use serde_json::{Value, json};

    /// A reconcile's lookups for a parent of `scope` in `namespace`, reading Pods `app=web`
    /// (related kind) from a cache with one such Pod in each of `team-a` and `team-b`.
    fn reconcile_lookups(scope: Scope, namespace: Option<&str>) -> HostState {
        let mut manifest = crate::contract::manifest::fixtures::memcached("app=web");
        manifest.scope = scope;
        let mut cache = MemoryCache::default();
        for ns in ["team-a", "team-b"] {
            cache.insert(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": ns, "labels": {"app": "web"}}})).unwrap();
        }
        let lookup = LookupScope {
            manifest: Arc::new(manifest),
            grants: Grants::default(),
            namespace: namespace.map(str::to_owned),
            parent_name: "p".into(),
            cache: Arc::new(cache),
            admission: false,
        };
        HostState::new(Arc::from("test"), 1 << 20, Some(lookup))
    }

    /// The namespaces of the Pods a list lookup answers, or `None` when it is refused.
    fn listed(state: &mut HostState, namespace: Option<&str>) -> Option<Vec<String>> {
        let found = state.list_objects(Kind::new("", "v1", "Pod"), namespace, "").ok()?;
        let parsed = found.iter().map(|o| serde_json::from_str::<Value>(o).unwrap());
        Some(parsed.map(|o| namespace_of(&o).unwrap_or_default().to_owned()).collect())
    }

    #[test]
    fn a_cluster_scoped_parent_lists_related_objects_of_every_namespace() {
        let mut state = reconcile_lookups(Scope::Cluster, None);
        assert_eq!(listed(&mut state, None).unwrap(), ["team-a", "team-b"]);
        assert_eq!(listed(&mut state, Some("team-b")).unwrap(), ["team-b"]);
        assert!(state.refused_lookups.is_empty(), "{:?}", state.refused_lookups);
    }

    #[test]
    fn a_namespaced_parent_lists_its_own_namespace_and_is_refused_another() {
        let mut state = reconcile_lookups(Scope::Namespaced, Some("team-a"));
        assert_eq!(listed(&mut state, None).unwrap(), ["team-a"]);
        assert_eq!(listed(&mut state, Some("team-b")), None);
        assert_eq!(state.refused_lookups.len(), 1);
    }
}
