//! [`ReconcileContext`]: one plugin's reconcile of one parent, as the checks ([`plan`]) and the
//! writes ([`Writer`]) see it.
//!
//! [`plan`]: super::plan
//! [`Writer`]: super::Writer

use std::sync::LazyLock;

use serde_json::Value;

use crate::contract::{KindScopes, Manifest};
use crate::objects::ObjectCache;
use crate::policy::Grants;

/// The grants of a plugin the policy names nowhere: nothing beyond its manifest.
static NO_GRANTS: LazyLock<Grants> = LazyLock::new(Grants::default);

/// One plugin's reconcile of one parent: the plugin's manifest and grants, how kinds resolve,
/// the objects the host observes and the parent. The controller makes one per reconcile from
/// the plugin version serving, `wasmop reconcile` from fixture files; both then plan and write
/// through it alike.

#[derive(Clone, Copy)]
pub struct ReconcileContext<'a> {
    /// The plugin's manifest.
    pub manifest: &'a Manifest,
    /// What the host's policy grants the plugin beyond its manifest.
    pub grants: &'a Grants,
    /// Namespaced or cluster-scoped, per kind (discovery online; the built-in table and CRD
    /// files offline).
    pub scopes: &'a (dyn KindScopes + Sync),
    /// The objects the host observes (its watch cache; the fixtures offline).
    pub cache: &'a dyn ObjectCache,
    /// The parent being reconciled.
    pub parent: &'a Value,
}

impl<'a> ReconcileContext<'a> {
    /// The reconcile of `parent` by the plugin of `manifest`, granted nothing beyond its
    /// manifest (see [`ReconcileContext::grants`]).
    pub fn new(
        manifest: &'a Manifest,
        scopes: &'a (dyn KindScopes + Sync),
        cache: &'a dyn ObjectCache,
        parent: &'a Value,
    ) -> Self {
        Self { manifest, grants: &NO_GRANTS, scopes, cache, parent }
    }

    /// The same reconcile with the plugin's `grants`.
    #[must_use]
    pub fn grants(self, grants: &'a Grants) -> Self {
        Self { grants, ..self }
    }
}

impl std::fmt::Debug for ReconcileContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReconcileContext")
            .field("plugin", &self.manifest.name)
            .field("grants", self.grants)
            .field("parent", &crate::objects::name_of(self.parent))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::KnownKinds;
    use crate::objects::MemoryCache;

    #[test]
    fn a_context_grants_nothing_until_given_the_plugins_grants() {
        let manifest = crate::contract::manifest::fixtures::memcached("app=m");
        let (kinds, cache, parent) = (KnownKinds::builtin(), MemoryCache::default(), serde_json::json!({}));
        let context = ReconcileContext::new(&manifest, &kinds, &cache, &parent);
        assert_eq!(context.grants, &Grants::default());
        let secrets = Grants { secrets: crate::policy::SecretAccess::Write, ..Grants::default() };
        assert_eq!(context.grants(&secrets).grants, &secrets);
    }
}
