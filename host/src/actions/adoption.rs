//! Adoption on upgrade: children written by a host older than the child labels carry none, so
//! the label-filtered child watches would not see them (not in a reconcile's children, never
//! pruned). Once, when a plugin starts, the host lists each child kind for objects without its
//! label, and labels those a parent of the plugin controls; the watch then sees them.

use std::collections::HashSet;

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::{Map, Value, json};

use super::ActionError;
use super::labels::{MANAGED_BY, MANAGED_BY_LABEL, stamped};
use super::scope::PARENT_UID_LABEL;
use crate::objects::{controller_uid, name_of, namespace_of};

/// The field manager of the host's own label writes (never a plugin's, whose next apply would
/// otherwise lose every other field it manages).
pub const ADOPTION_FIELD_MANAGER: &str = "wasmop";

/// Objects listed per page.
const PAGE: u32 = 500;

/// Whether `object` is a child of one of the parents whose uids are `parents` (by its
/// controller ownerReference, or by [`PARENT_UID_LABEL`] for a cluster-scoped child of a
/// namespaced parent) and lacks the host's [`MANAGED_BY_LABEL`].
pub fn needs_label(object: &Value, parents: &HashSet<String>) -> bool {
    let labels = object.pointer("/metadata/labels");
    if labels.and_then(|l| l.get(MANAGED_BY_LABEL)).and_then(Value::as_str) == Some(MANAGED_BY) {
        return false;
    }
    let by_label = labels.and_then(|l| l.get(PARENT_UID_LABEL)).and_then(Value::as_str);
    controller_uid(object).or(by_label).is_some_and(|uid| parents.contains(uid))
}

/// List every object of `resource` (in `namespace`, else in the whole cluster) without the host's label (`managed-by!=wasmop`, server
/// side, page by page) and label, by a forced server-side apply of the labels alone with
/// [`ADOPTION_FIELD_MANAGER`], those [`needs_label`] says belong to one of `parents` (uids of
/// the plugin's parents). Returns how many were labelled.
///
/// # Errors
/// [`ActionError::Api`] for the first list or patch that fails; objects labelled before it stay
/// labelled.
pub async fn label_unlabelled_children(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    plugin: &str,
    parents: &HashSet<String>,
) -> Result<usize, ActionError> {
    let all: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    };
    let mut params = ListParams::default().labels(&format!("{MANAGED_BY_LABEL}!={MANAGED_BY}")).limit(PAGE);
    let mut labelled = 0;
    loop {
        let page = all.list(&params).await.map_err(|source| ActionError::Api {
            action: "list unlabelled",
            object: resource.kind.clone(),
            source,
        })?;
        for object in page.items {
            let object = serde_json::to_value(object).unwrap_or_default();
            if needs_label(&object, parents) {
                label(client, resource, &object, plugin).await?;
                labelled += 1;
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(next) => params = params.continue_token(&next),
            None => return Ok(labelled),
        }
    }
}

/// Apply the host's labels to `object` as [`ADOPTION_FIELD_MANAGER`].
async fn label(client: &kube::Client, resource: &ApiResource, object: &Value, plugin: &str) -> Result<(), ActionError> {
    let name = name_of(object).unwrap_or_default();
    let namespace = namespace_of(object);
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    };
    let labels: Map<String, Value> =
        stamped(plugin).into_iter().map(|(k, v)| (k.to_owned(), Value::String(v.to_owned()))).collect();
    let patch = json!({"apiVersion": resource.api_version, "kind": resource.kind, "metadata": {"name": name, "labels": labels}});
    api.patch(name, &PatchParams::apply(ADOPTION_FIELD_MANAGER).force(), &Patch::Apply(&patch)).await.map_err(|source| {
        ActionError::Api {
            action: "label",
            object: format!("{} {}/{name}", resource.kind, namespace.unwrap_or_default()),
            source,
        }
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parents() -> HashSet<String> {
        ["u1".to_owned()].into()
    }

    #[test]
    fn a_child_of_our_parent_without_the_label_needs_it() {
        let child = json!({"metadata": {"name": "d", "ownerReferences": [{"uid": "u1", "controller": true}]}});
        assert!(needs_label(&child, &parents()));
        let cluster_scoped = json!({"metadata": {"name": "r", "labels": {PARENT_UID_LABEL: "u1"}}});
        assert!(needs_label(&cluster_scoped, &parents()));
    }

    #[test]
    fn labelled_foreign_and_unowned_objects_are_left_alone() {
        let labelled = json!({"metadata": {"labels": {MANAGED_BY_LABEL: MANAGED_BY},
            "ownerReferences": [{"uid": "u1", "controller": true}]}});
        let foreign = json!({"metadata": {"ownerReferences": [{"uid": "u2", "controller": true}]}});
        let not_controller = json!({"metadata": {"ownerReferences": [{"uid": "u1"}]}});
        let unowned = json!({"metadata": {"name": "users"}});
        for object in [labelled, foreign, not_controller, unowned] {
            assert!(!needs_label(&object, &parents()), "{object}");
        }
    }

    #[test]
    fn a_child_another_tool_labelled_is_taken_back() {
        let helm =
            json!({"metadata": {"labels": {MANAGED_BY_LABEL: "Helm"}, "ownerReferences": [{"uid": "u1", "controller": true}]}});
        assert!(needs_label(&helm, &parents()));
    }
}
