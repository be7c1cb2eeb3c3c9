//! Applying a plugin's response to the cluster: scope checks, children, pruning, status,
//! events, finalizers. Data flows one way: response → checks → writes.

mod diff;
mod events;
mod finalizer;
mod scope;
mod status;

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

pub use diff::contains;

pub use events::EventSink;
pub use finalizer::{add_finalizer, has_finalizer, remove_finalizer};
pub use scope::{PARENT_ANNOTATION, PARENT_UID_LABEL, ScopeError, check as check_scope};
pub use status::{RECONCILED, merge_conditions, now, status_patch};

use crate::contract::{Kind, Manifest, ObjectRef};
use crate::controller::discovery::{Discovery, DiscoveryError};
use crate::objects::{ObjectCache, name_of, namespace_of};

/// Why writing a response failed. Writes already done stay done (each is idempotent); the
/// reconcile is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// The API server refused or failed a write.
    #[error("{action} {object}: {source}")]
    Api {
        /// What was attempted (`apply`, `delete`, `patch status`, ...).
        action: &'static str,
        /// The object.
        object: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A child kind could not be resolved.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
}

/// What a response's writes did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// Children server-side applied.
    pub applied: usize,
    /// Children skipped because they already matched.
    pub unchanged: usize,
    /// Children deleted (explicitly or pruned).
    pub deleted: usize,
    /// Whether the status was patched.
    pub status: bool,
}

impl Written {
    /// Whether anything was written: a child applied or deleted, or the status patched.
    pub fn anything(&self) -> bool {
        self.applied > 0 || self.deleted > 0 || self.status
    }
}

/// Everything needed to write on behalf of one plugin for one parent.
pub struct Writer<'a> {
    /// The client.
    pub client: &'a kube::Client,
    /// Kind resolution.
    pub discovery: &'a Discovery,
    /// The plugin's manifest.
    pub manifest: &'a Manifest,
    /// The parent object (from the cache).
    pub parent: &'a Value,
    /// The parent's resource.
    pub parent_resource: &'a ApiResource,
    /// The object cache (to skip unchanged applies).
    pub cache: &'a dyn ObjectCache,
    /// What was last applied to each child, so an apply is skipped only when both the
    /// desired content is unchanged and the observed object still contains it.
    pub applied: &'a AppliedChildren,
}

/// Fingerprints of the last content applied per child, kept per plugin.
///
/// Skipping an apply because the observed object contains the desired fields is not enough:
/// a field the plugin stopped returning must be removed, which only a new apply does.
#[derive(Debug, Default)]
pub struct AppliedChildren(Mutex<HashMap<ObjectRef, u64>>);

impl AppliedChildren {
    fn fingerprint(object: &Value) -> u64 {
        let mut hasher = std::hash::DefaultHasher::new();
        object.to_string().hash(&mut hasher);
        hasher.finish()
    }

    fn unchanged(&self, r: &ObjectRef, desired: &Value) -> bool {
        self.0.lock().expect("applied lock").get(r) == Some(&Self::fingerprint(desired))
    }

    fn record(&self, r: ObjectRef, desired: &Value) {
        self.0.lock().expect("applied lock").insert(r, Self::fingerprint(desired));
    }

    fn forget(&self, r: &ObjectRef) {
        self.0.lock().expect("applied lock").remove(r);
    }
}

impl std::fmt::Debug for Writer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").field("plugin", &self.manifest.name).finish_non_exhaustive()
    }
}

impl Writer<'_> {
    fn params(&self) -> PatchParams {
        PatchParams::apply(&self.manifest.field_manager()).force()
    }

    async fn api(&self, kind: &Kind, namespace: Option<&str>) -> Result<Api<DynamicObject>, ActionError> {
        let resolved = self.discovery.resolve(kind, std::time::Duration::from_secs(10)).await?;
        Ok(match (resolved.scope, namespace) {
            (crate::contract::Scope::Namespaced, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &resolved.resource),
            _ => Api::all_with(self.client.clone(), &resolved.resource),
        })
    }

    /// The controller ownerReference to the parent.
    fn owner_reference(&self) -> Value {
        json!({
            "apiVersion": self.parent_resource.api_version,
            "kind": self.parent_resource.kind,
            "name": name_of(self.parent).unwrap_or_default(),
            "uid": self.parent.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default(),
            "controller": true,
            "blockOwnerDeletion": true,
        })
    }

    /// Server-side apply each child with the plugin's field manager and a controller
    /// ownerReference, skipping children whose observed state already matches.
    ///
    /// # Errors
    /// The first failed write.
    pub async fn apply_children(&self, children: Vec<Value>, written: &mut Written) -> Result<(), ActionError> {
        let owner = self.owner_reference();
        for mut child in children {
            let r = ObjectRef::of_object(&child).expect("validated children have identity");
            // A cluster-scoped child of a namespaced parent cannot be owned by it (Kubernetes
            // forbids it): it names its parent by label instead (see `scope::check`).
            let owned = r.namespace.is_some() || namespace_of(self.parent).is_none();
            child["metadata"]["ownerReferences"] = if owned { json!([owner]) } else { json!([]) };
            let kind = r.kind();
            if self.applied.unchanged(&r, &child)
                && let Some(observed) = self.cache.get(&kind, r.namespace.as_deref(), &r.name)
                && contains(&observed, &child)
            {
                written.unchanged += 1;
                continue;
            }
            let api = self.api(&kind, r.namespace.as_deref()).await?;
            api.patch(&r.name, &self.params(), &Patch::Apply(&child)).await.map_err(|source| ActionError::Api {
                action: "apply",
                object: r.to_string(),
                source,
            })?;
            self.applied.record(r, &child);
            written.applied += 1;
        }
        Ok(())
    }

    /// Delete children by reference. A child that is already gone is fine.
    ///
    /// # Errors
    /// The first failed delete.
    pub async fn delete(&self, refs: &[ObjectRef], written: &mut Written) -> Result<(), ActionError> {
        for r in refs {
            let api = self.api(&r.kind(), r.namespace.as_deref()).await?;
            self.applied.forget(r);
            match api.delete(&r.name, &DeleteParams::background()).await {
                Ok(_) => written.deleted += 1,
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(source) => return Err(ActionError::Api { action: "delete", object: r.to_string(), source }),
            }
        }
        Ok(())
    }

    /// The observed children (controlled by the parent) that `desired` no longer lists.
    pub fn absent_children(observed: &[Arc<Value>], desired: &[Value]) -> Vec<ObjectRef> {
        let wanted: std::collections::HashSet<ObjectRef> = desired.iter().filter_map(ObjectRef::of_object).collect();
        observed.iter().filter_map(|o| ObjectRef::of_object(o)).filter(|r| !wanted.contains(r)).collect()
    }

    /// Merge-patch the parent's status subresource.
    ///
    /// # Errors
    /// The API error.
    pub async fn patch_status(&self, patch: &Value) -> Result<(), ActionError> {
        let api = self.parent_api();
        let name = name_of(self.parent).unwrap_or_default();
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch)).await.map_err(|source| ActionError::Api {
            action: "patch status of",
            object: format!("{} {}", self.manifest.parent, name),
            source,
        })?;
        Ok(())
    }

    /// The API of the parent's kind, in its namespace.
    pub fn parent_api(&self) -> Api<DynamicObject> {
        match namespace_of(self.parent) {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, self.parent_resource),
            None => Api::all_with(self.client.clone(), self.parent_resource),
        }
    }
}
