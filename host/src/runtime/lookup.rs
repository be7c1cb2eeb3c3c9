//! The plugin's lookup interface: the host side of the WIT `cache` interface — scoped,
//! read-only lookups in the host's object cache. One implementation, answered to the `cache`
//! import of every WIT version.

use std::sync::Arc;

use super::bindings::{v0_1, v0_2, v0_3};
use super::state::{HostState, LookupScope};
use crate::contract::{Kind, Scope};
use crate::objects::{Hidden, LabelSelector, Sight, Visibility, visible_around};

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
        let (lookup, ns, sight) = self.lookup_scope(&kind, namespace)?;
        let Some(object) = lookup.cache.get(&kind, ns.as_deref(), name) else { return Ok(None) };
        Ok(lookup.visibility().sees(&sight, object.head()).then(|| object.json().to_owned()))
    }

    fn list_objects(&mut self, kind: Kind, namespace: Option<&str>, label_selector: &str) -> Result<Vec<String>, Refused> {
        let (lookup, ns, sight) = self.lookup_scope(&kind, namespace)?;
        let wanted = LabelSelector::parse(label_selector).map_err(|e| Refused::InvalidSelector(e.to_string()))?;
        let visibility = lookup.visibility();
        // A label the selector requires one value of, and the cache indexes, narrows the
        // candidates (the watch indexes what related selectors name with `$(parent.name)`); the
        // whole selector and the plugin's sight are checked on each candidate all the same.
        let cache = &lookup.cache;
        let candidates = match wanted.required_values().find(|(label, _)| cache.indexes_label(&kind, label)) {
            Some((label, value)) => cache.labelled(&kind, ns.as_deref(), label, value),
            None => cache.list(&kind, ns.as_deref()),
        };
        Ok(candidates
            .into_iter()
            .filter(|o| wanted.matches_object(o.head()) && visibility.sees(&sight, o.head()))
            .map(|o| o.json().to_owned())
            .collect())
    }
}

impl LookupScope {
    /// What the plugin may see around this call's parent: the one rule of
    /// [`visible_to`](crate::objects::visible_to), which the request of a reconcile and
    /// `wasmop reconcile` follow too.
    fn visibility(&self) -> Visibility<'_> {
        let seen = visible_around(&self.manifest, &self.grants, self.namespace.as_deref(), &self.parent_name);
        if self.admission { seen.admitting() } else { seen }
    }
}

impl HostState {
    /// Check a lookup against what the plugin may see around the parent ([`Visibility::lookup`]);
    /// returns the scope, the namespace to read and which of its objects are seen. A refusal
    /// is also recorded: it fails the call once the plugin returns.
    fn lookup_scope(
        &mut self,
        kind: &Kind,
        namespace: Option<&str>,
    ) -> Result<(Arc<LookupScope>, Option<String>, Sight), Refused> {
        let Some(lookup) = self.lookup.clone() else {
            return Err(Refused::Forbidden("lookups are only available while reconciling or admitting".into()));
        };
        let ns = match (lookup.manifest.scope, namespace) {
            (Scope::Namespaced, None) => lookup.namespace.clone(),
            (_, ns) => ns.map(str::to_owned),
        };
        let sight = lookup.visibility().lookup(kind, ns.as_deref());
        match sight {
            Ok(sight) => Ok((lookup, ns, sight)),
            Err(hidden) => {
                let error = Refused::from(hidden);
                let what = format!("{kind} in namespace {:?}: {}", ns.as_deref().unwrap_or_default(), lookup_error_text(&error));
                tracing::warn!(plugin = %self.plugin, "lookup refused: {what}");
                self.refused_lookups.push(what);
                Err(error)
            }
        }
    }
}

impl From<Hidden> for Refused {
    fn from(hidden: Hidden) -> Self {
        match hidden {
            Hidden::Undeclared { kind, .. } => Refused::UndeclaredKind(kind.to_string()),
            Hidden::NotGranted { kind, .. } => {
                Refused::Forbidden(format!("{kind} is not granted to this plugin by the host's policy"))
            }
            Hidden::OtherNamespace { namespace, parent_namespace, .. } => {
                Refused::Forbidden(format!("namespace {namespace:?} is outside the parent's namespace {parent_namespace:?}"))
            }
            // Only a parent name that is not a valid label value makes a related selector that
            // parsed at load time fail here.
            other => Refused::Forbidden(other.to_string()),
        }
    }
}

fn lookup_error_text(e: &Refused) -> String {
    match e {
        Refused::UndeclaredKind(k) => format!("{k} is not declared in the manifest"),
        Refused::Forbidden(m) | Refused::InvalidSelector(m) => m.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::objects::{MemoryCache, name_of, namespace_of, visible_to};
    use crate::policy::{Grants, NamespaceGrant};
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

    /// A cache that indexes one label, as the watches index the label a related selector
    /// names with `$(parent.name)`: [`ObjectCache::labelled`] of that label answers only the
    /// objects carrying it.
    struct IndexedBy(MemoryCache, &'static str);

    impl crate::objects::ObjectCache for IndexedBy {
        fn list(&self, kind: &Kind, namespace: Option<&str>) -> Vec<Arc<crate::contract::Object>> {
            self.0.list(kind, namespace)
        }

        fn get(&self, kind: &Kind, namespace: Option<&str>, name: &str) -> Option<Arc<crate::contract::Object>> {
            self.0.get(kind, namespace, name)
        }

        fn indexes_label(&self, _kind: &Kind, label: &str) -> bool {
            label == self.1
        }
    }

    #[test]
    fn a_list_through_an_indexed_label_still_applies_the_whole_selector_and_the_sight() {
        let manifest = crate::contract::manifest::fixtures::memcached("app=web,cr=$(parent.name)");
        let pod = |name: &str, ns: &str, labels: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels}});
        let mut cache = MemoryCache::default();
        for o in [
            pod("mine", "team-a", json!({"app": "web", "cr": "p"})),
            pod("impostor", "team-a", json!({"app": "db", "cr": "p"})),
            pod("another-parent", "team-a", json!({"app": "web", "cr": "q"})),
            pod("elsewhere", "team-b", json!({"app": "web", "cr": "p"})),
        ] {
            cache.insert(o).unwrap();
        }
        let names = |cache: Arc<dyn crate::objects::ObjectCache>, namespace: Option<&str>, selector: &str| {
            let lookup = LookupScope {
                manifest: Arc::new(manifest.clone()),
                grants: Grants::default(),
                namespace: Some("team-a".into()),
                parent_name: "p".into(),
                cache,
                admission: false,
            };
            let mut state = HostState::new(Arc::from("test"), 1 << 20, Some(lookup));
            let found = state.list_objects(Kind::new("", "v1", "Pod"), namespace, selector);
            found.map(|found| {
                found.iter().map(|o| name_of(&serde_json::from_str::<Value>(o).unwrap()).unwrap().to_owned()).collect::<Vec<_>>()
            })
        };
        let indexed: Arc<dyn crate::objects::ObjectCache> = Arc::new(IndexedBy(cache.clone(), "cr"));
        let scanned: Arc<dyn crate::objects::ObjectCache> = Arc::new(cache);
        // The sight (the parent's related selector, `app=web,cr=p`) holds whatever the plugin
        // asks for: the impostor and the other parent's Pod are never answered.
        let cases: [(&str, &[&str]); 7] = [
            ("cr=p", &["mine"]),
            ("cr=p,app=web", &["mine"]),
            ("app in (web),cr in (p)", &["mine"]),
            ("app=web", &["mine"]),
            ("", &["mine"]),
            ("cr=q", &[]),
            ("cr=p,app!=web", &[]),
        ];
        for (selector, expected) in cases {
            let through_index = names(Arc::clone(&indexed), None, selector).ok();
            assert_eq!(
                through_index.as_deref(),
                Some(expected.iter().map(|n| n.to_string()).collect::<Vec<_>>().as_slice()),
                "selector {selector:?}"
            );
            assert_eq!(through_index, names(Arc::clone(&scanned), None, selector).ok(), "selector {selector:?}");
        }
        assert!(names(indexed, Some("team-b"), "cr=p").is_err(), "another namespace stays refused");
    }

    #[test]
    fn lookups_answer_exactly_the_objects_the_requests_rule_lets_the_plugin_see() {
        let manifest = crate::contract::manifest::fixtures::memcached("app=web,cr=$(parent.name)");
        let parent = json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "metadata": {"name": "p", "namespace": "team-a"}});
        let object = |api: &str, kind: &str, name: &str, ns: &str, labels: Value| json!({"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": ns, "labels": labels}});
        let objects = [
            object("v1", "Pod", "selected", "team-a", json!({"app": "web", "cr": "p"})),
            object("v1", "Pod", "for-another-parent", "team-a", json!({"app": "web", "cr": "q"})),
            object("v1", "Pod", "elsewhere", "team-b", json!({"app": "web", "cr": "p"})),
            object("v1", "Pod", "granted", "team-c", json!({"app": "web", "cr": "p"})),
            object("apps/v1", "Deployment", "child", "team-a", json!({})),
            object("v1", "ConfigMap", "undeclared", "team-a", json!({})),
        ];
        let mut cache = MemoryCache::default();
        for o in &objects {
            cache.insert(o.clone()).unwrap();
        }
        let cache: Arc<dyn crate::objects::ObjectCache> = Arc::new(cache);
        let grants = Grants { namespaces: NamespaceGrant::Also(["team-c".to_owned()].into()), ..Grants::default() };
        let seen = visible_to(&manifest, &grants, &parent);
        for o in &objects {
            let lookup = LookupScope {
                manifest: Arc::new(manifest.clone()),
                grants: grants.clone(),
                namespace: Some("team-a".into()),
                parent_name: "p".into(),
                cache: Arc::clone(&cache),
                admission: false,
            };
            let mut state = HostState::new(Arc::from("test"), 1 << 20, Some(lookup));
            let kind = Kind::of_object(o).unwrap();
            let looked_up = state.get_object(kind.clone(), namespace_of(o), name_of(o).unwrap()).ok().flatten().is_some();
            let requested = if manifest.may_write(&kind) { seen.child(o).is_ok() } else { seen.related(o).is_ok() };
            assert_eq!(looked_up, requested, "lookup and request disagree on {o}");
        }
    }
}
