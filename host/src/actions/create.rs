//! Creating a child the cache does not hold in one request: a server-side apply that only
//! creates.
//!
//! The cache holds only the host's labelled children, so a child missing from it may still
//! exist (a user's object of the same name, a child an older host wrote) and must then be
//! checked before it is applied ([`Writer::execute`](super::Writer::execute)). Reading it
//! first costs a request for every new child. Instead, the apply names
//! a version no stored object has (`ABSENT_ONLY_VERSION`) as the object's `resourceVersion`: the API server checks it as an
//! optimistic-concurrency precondition, so an existing object (whose version is never that one)
//! makes the apply fail with 409 Conflict and leaves the object untouched, while an absent one
//! is created, its fields owned by the plugin's field manager as with any apply. Only a
//! conflict costs the read and the ownership check.
//!
//! Not every API server takes a `resourceVersion` on a create through apply (kube-apiserver's
//! generic store does; some built-in kinds' own storage refused it in some releases, answering
//! "resourceVersion should not be set on objects to be created"). A kind so refused is
//! remembered, and its children are read first from then on.

use std::collections::HashSet;
use std::sync::Mutex;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::Value;

use crate::contract::Kind;

/// The `resourceVersion` a create-only apply names. Kubernetes versions are the storage's
/// revision of an object's last write; etcd's first write is revision 2 (revision 1 is the
/// empty store), so no stored object has version 1.
const ABSENT_ONLY_VERSION: &str = "1";

/// What a create-only apply found.
#[derive(Debug, Clone, PartialEq)]
pub enum Created {
    /// The child did not exist and is created: the object as the API server stored it (as the
    /// watches decode objects: no `managedFields`).
    Created(Box<Value>),
    /// An object of that name exists; nothing was written.
    Exists,
    /// The API server does not take a create-only apply for this kind (it is remembered);
    /// nothing was written.
    Unsupported,
}

/// The kinds whose create-only applies the API server refused, per plugin controller.
#[derive(Debug, Default)]
pub struct CreateOnly {
    refused: Mutex<HashSet<Kind>>,
}

impl CreateOnly {
    /// Whether a create-only apply is worth trying for `kind` (not refused before).
    pub fn supported(&self, kind: &Kind) -> bool {
        !self.refused.lock().expect("create-only lock").contains(kind)
    }

    /// Server-side apply `child` (the plugin's desired object, with identity) through `api`
    /// with `params` only if no object of its name exists.
    ///
    /// # Errors
    /// Any other failure of the apply (the child is invalid, the API server unreachable, ...):
    /// nothing was written, and the caller reads the child first as without this.
    pub async fn apply(
        &self,
        api: &Api<DynamicObject>,
        kind: &Kind,
        name: &str,
        child: &Value,
        params: &PatchParams,
    ) -> Result<Created, kube::Error> {
        let mut absent_only = child.clone();
        absent_only["metadata"]["resourceVersion"] = ABSENT_ONLY_VERSION.into();
        match super::patch_answered(api, super::Target::Object, name, params, &Patch::Apply(&absent_only)).await {
            Ok(stored) => Ok(Created::Created(Box::new(stored))),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Created::Exists),
            Err(kube::Error::Api(s)) if refuses_versions_on_create(&s.message) => {
                tracing::info!(%kind, message = %s.message, "the API server refuses create-only applies of this kind; its new children are read first");
                self.refused.lock().expect("create-only lock").insert(kind.clone());
                Ok(Created::Unsupported)
            }
            Err(e) => Err(e),
        }
    }
}

/// Whether an API server's error says it does not take a `resourceVersion` on a create.
fn refuses_versions_on_create(message: &str) -> bool {
    message.contains("resourceVersion should not be set") || message.contains("resourceVersion may not be set")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_refusal_of_a_version_on_create_marks_a_kind_unsupported() {
        assert!(refuses_versions_on_create("resourceVersion should not be set on objects to be created"));
        assert!(refuses_versions_on_create("resourceVersion may not be set on objects to be created"));
        assert!(!refuses_versions_on_create("Deployment.apps \"d\" is invalid: spec.replicas: Invalid value: -1"));
    }

    #[test]
    fn every_kind_is_tried_until_refused() {
        let creates = CreateOnly::default();
        let (deployments, services) = (Kind::new("apps", "v1", "Deployment"), Kind::new("", "v1", "Service"));
        assert!(creates.supported(&deployments) && creates.supported(&services));
        creates.refused.lock().unwrap().insert(services.clone());
        assert!(creates.supported(&deployments));
        assert!(!creates.supported(&services));
    }
}
