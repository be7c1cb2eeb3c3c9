//! Host side of the `cache` interface: scoped, read-only lookups in the host's object cache.

use super::bindings::{cache, types};
use super::state::{HostState, LookupScope};
use crate::contract::{Kind, Scope};
use crate::objects::LabelSelector;

type Lookup<T> = wasmtime::Result<Result<T, cache::LookupError>>;

impl cache::Host for HostState {
    async fn get(&mut self, kind: types::KindRef, namespace: Option<String>, name: String) -> Lookup<Option<String>> {
        let scope = match self.lookup_scope(&kind, namespace.as_deref()) {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        let (lookup, kind, ns) = scope;
        let Some(object) = lookup.cache.get(&kind, ns.as_deref(), &name) else { return Ok(Ok(None)) };
        match related_selector(&lookup, &kind) {
            Err(e) => return Ok(Err(e)),
            Ok(Some(selector)) if !selector.matches_object(&object) => return Ok(Ok(None)),
            Ok(_) => {}
        }
        Ok(Ok(Some(object.to_string())))
    }

    async fn list(&mut self, kind: types::KindRef, namespace: Option<String>, label_selector: String) -> Lookup<Vec<String>> {
        let (lookup, kind, ns) = match self.lookup_scope(&kind, namespace.as_deref()) {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        let wanted = match LabelSelector::parse(&label_selector) {
            Ok(s) => s,
            Err(e) => return Ok(Err(cache::LookupError::InvalidSelector(e.to_string()))),
        };
        let declared = match related_selector(&lookup, &kind) {
            Ok(d) => d,
            Err(e) => return Ok(Err(e)),
        };
        let objects = lookup
            .cache
            .list(&kind, ns.as_deref())
            .into_iter()
            .filter(|o| wanted.matches_object(o) && declared.as_ref().is_none_or(|d| d.matches_object(o)))
            .map(|o| o.to_string())
            .collect();
        Ok(Ok(objects))
    }
}

impl HostState {
    /// Check a lookup against the manifest and the parent's namespace; returns the scope, the
    /// kind and the namespace to read.
    fn lookup_scope(
        &self,
        kind: &types::KindRef,
        namespace: Option<&str>,
    ) -> Result<(LookupScope, Kind, Option<String>), cache::LookupError> {
        let Some(lookup) = self.lookup.clone() else {
            return Err(cache::LookupError::Forbidden("lookups are only available while reconciling".into()));
        };
        let kind = Kind::new(&kind.group, &kind.version, &kind.kind);
        if !lookup.manifest.may_read(&kind) {
            return Err(cache::LookupError::UndeclaredKind(kind.to_string()));
        }
        let ns = match (lookup.manifest.scope, namespace) {
            (Scope::Cluster, ns) => ns.map(str::to_owned),
            (Scope::Namespaced, None) => lookup.namespace.clone(),
            (Scope::Namespaced, Some(ns)) if Some(ns) == lookup.namespace.as_deref() => Some(ns.to_owned()),
            (Scope::Namespaced, Some(ns)) => {
                return Err(cache::LookupError::Forbidden(format!(
                    "namespace {ns:?} is outside the parent's namespace {:?}",
                    lookup.namespace.as_deref().unwrap_or_default()
                )));
            }
        };
        Ok((lookup, kind, ns))
    }
}

/// The declared selector restricting a related kind for this parent; `None` when the kind is
/// also the parent's or a child kind (readable without restriction).
fn related_selector(lookup: &LookupScope, kind: &Kind) -> Result<Option<LabelSelector>, cache::LookupError> {
    let Some(related) = lookup.manifest.related.iter().find(|r| &r.kind == kind) else { return Ok(None) };
    if lookup.manifest.may_write(kind) || &lookup.manifest.parent == kind {
        return Ok(None);
    }
    // The selector parsed at load time with a placeholder; only a parent name that is not a
    // valid label value can make it fail here.
    related.selector_for(&lookup.parent_name).map(Some).map_err(|e| cache::LookupError::Forbidden(e.to_string()))
}
