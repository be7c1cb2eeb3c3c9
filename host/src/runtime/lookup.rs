//! The plugin's lookup interface: the host side of the WIT `cache` interface — scoped,
//! read-only lookups in the host's object cache.

use std::sync::Arc;

use super::bindings::{cache, types};
use super::state::{HostState, LookupScope};
use crate::contract::{Kind, Scope};
use crate::objects::{LabelSelector, name_of, namespace_of};

type Lookup<T> = wasmtime::Result<Result<T, cache::LookupError>>;

impl cache::Host for HostState {
    async fn get(&mut self, kind: types::KindRef, namespace: Option<String>, name: String) -> Lookup<Option<String>> {
        let (lookup, kind, ns) = match self.lookup_scope(&kind, namespace.as_deref()) {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        let Some(object) = lookup.cache.get(&kind, ns.as_deref(), &name) else { return Ok(Ok(None)) };
        match visible_part(&lookup, &kind) {
            Err(e) => return Ok(Err(e)),
            Ok(Some(visible)) if !visible.admits(&object) => return Ok(Ok(None)),
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
        let visible = match visible_part(&lookup, &kind) {
            Ok(d) => d,
            Err(e) => return Ok(Err(e)),
        };
        let objects = lookup
            .cache
            .list(&kind, ns.as_deref())
            .into_iter()
            .filter(|o| wanted.matches_object(o) && visible.as_ref().is_none_or(|v| v.admits(o)))
            .map(|o| o.to_string())
            .collect();
        Ok(Ok(objects))
    }
}

impl HostState {
    /// Check a lookup against the manifest, the grants and the parent's namespace; returns
    /// the scope, the kind and the namespace to read. A refusal is also recorded: it fails
    /// the call once the plugin returns.
    fn lookup_scope(
        &mut self,
        kind: &types::KindRef,
        namespace: Option<&str>,
    ) -> Result<(Arc<LookupScope>, Kind, Option<String>), cache::LookupError> {
        let Some(lookup) = self.lookup.clone() else {
            return Err(cache::LookupError::Forbidden("lookups are only available while reconciling".into()));
        };
        let kind = Kind::new(&kind.group, &kind.version, &kind.kind);
        let ns = match (lookup.manifest.scope, namespace) {
            (Scope::Namespaced, None) => lookup.namespace.clone(),
            (_, ns) => ns.map(str::to_owned),
        };
        let refusal = refusal(&lookup, &kind, ns.as_deref());
        if let Some(error) = refusal {
            let what = format!("{kind} in namespace {:?}: {}", ns.as_deref().unwrap_or_default(), lookup_error_text(&error));
            tracing::warn!(plugin = %self.plugin, "lookup refused: {what}");
            self.refused_lookups.push(what);
            return Err(error);
        }
        Ok((lookup, kind, ns))
    }
}

/// Why `lookup` may not read `kind` in `ns`, if it may not: the manifest does not declare the
/// kind, the policy does not grant it (Secrets), or the namespace is neither the parent's nor
/// granted.
fn refusal(lookup: &LookupScope, kind: &Kind, ns: Option<&str>) -> Option<cache::LookupError> {
    if !lookup.manifest.may_read(kind) {
        return Some(cache::LookupError::UndeclaredKind(kind.to_string()));
    }
    if !lookup.grants.may_read_kind(kind) {
        return Some(cache::LookupError::Forbidden(format!("{kind} is not granted to this plugin by the host's policy")));
    }
    let parent_ns = lookup.namespace.as_deref();
    let other = ns.filter(|ns| !lookup.grants.may_read_namespace(ns, parent_ns))?;
    Some(cache::LookupError::Forbidden(format!(
        "namespace {other:?} is outside the parent's namespace {:?}",
        parent_ns.unwrap_or_default()
    )))
}

fn lookup_error_text(e: &cache::LookupError) -> String {
    match e {
        cache::LookupError::UndeclaredKind(k) => format!("{k} is not declared in the manifest"),
        cache::LookupError::Forbidden(m) | cache::LookupError::InvalidSelector(m) => m.clone(),
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

/// The restriction on a readable kind: `None` for child kinds (readable in the namespace);
/// the declared selector for related kinds; the parent alone for the parent's kind.
fn visible_part(lookup: &LookupScope, kind: &Kind) -> Result<Option<Visible>, cache::LookupError> {
    if lookup.manifest.may_write(kind) {
        return Ok(None);
    }
    if let Some(related) = lookup.manifest.related.iter().find(|r| &r.kind == kind) {
        // The selector parsed at load time with a placeholder; only a parent name that is not
        // a valid label value can make it fail here.
        return related
            .selector_for(&lookup.parent_name)
            .map(|s| Some(Visible::Selected(s)))
            .map_err(|e| cache::LookupError::Forbidden(e.to_string()));
    }
    Ok(Some(Visible::ParentOnly(lookup.parent_name.clone(), lookup.namespace.clone())))
}
