//! Adoption on upgrade: children written by a host older than the child labels carry none, so
//! the label-filtered child watches would not see them (not in a reconcile's children, never
//! pruned). Once, when a plugin starts, the host lists each child kind for objects without its
//! label, and labels those a parent of the plugin controls; the watch then sees them.
//!
//! The list asks for metadata only (`PartialObjectMetadata`) and decodes of each object only
//! what [`needs_label`] and the label patch read ([`Listed`]): its selector,
//! `managed-by!=wasmop`, also matches every foreign object of the kind (every Deployment in the
//! cluster that no plugin wrote), and decoding their whole objects (or their `managedFields`),
//! a page at a time, left the host's heap 11–16 MiB larger for good after its start (freed, but
//! fragmented: glibc could not give it back). Measured in BENCHMARKS.md, section "Resident
//! memory against the native controller".

use std::collections::HashSet;

use kube::Resource as _;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::ActionError;
use super::audit::{Audit, AuditObject, Verb};
use super::labels::{MANAGED_BY, MANAGED_BY_LABEL, host_labels};
use super::scope::PARENT_UID_LABEL;
use crate::objects::{controller_uid, name_of, namespace_of};

/// The field manager of the host's own label writes (never a plugin's, whose next apply would
/// otherwise lose every other field it manages).
pub const ADOPTION_FIELD_MANAGER: &str = "wasmop";

/// Objects listed per page.
const PAGE: u32 = 500;

/// One page of a metadata-only list, as far as adoption reads it.
#[derive(Deserialize)]
struct Page {
    /// The API server answers an empty metadata list with `"items": null`.
    #[serde(default, deserialize_with = "null_as_empty")]
    items: Vec<Listed>,
    #[serde(default)]
    metadata: PageMeta,
}

/// The list's own metadata: the token of the next page.
#[derive(Deserialize, Default)]
struct PageMeta {
    #[serde(default, rename = "continue")]
    next: Option<String>,
}

/// A listed object: its metadata, of which only what adoption reads; every other field (and
/// `managedFields`) is skipped by the decoder without being allocated.
#[derive(Deserialize)]
struct Listed {
    metadata: ListedMeta,
}

/// The fields of an object's metadata [`needs_label`] and [`label`] read.
#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct ListedMeta {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    labels: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner_references: Option<Value>,
}

/// `null` (or an absent field) as an empty list.
fn null_as_empty<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

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

/// List the metadata of every object of `resource` (in `namespace`, else in the whole cluster)
/// without the host's label (`managed-by!=wasmop`, server side, page by page) and label, by a forced server-side apply of the labels alone with
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
    audit: Audit<'_>,
    parents: &HashSet<String>,
) -> Result<usize, ActionError> {
    let url = DynamicObject::url_path(resource, namespace);
    let mut params = ListParams::default().labels(&format!("{MANAGED_BY_LABEL}!={MANAGED_BY}")).limit(PAGE);
    let mut labelled = 0;
    loop {
        let failed = |source| ActionError::Api { action: "list unlabelled", object: resource.kind.clone(), source };
        let request = kube::core::Request::new(&url).list_metadata(&params).map_err(|e| failed(kube::Error::BuildRequest(e)))?;
        let page: Page = client.request(request).await.map_err(failed)?;
        for listed in page.items {
            let object = json!({ "metadata": listed.metadata });
            if needs_label(&object, parents) {
                label(client, resource, &object, audit).await?;
                labelled += 1;
            }
        }
        match page.metadata.next.filter(|c| !c.is_empty()) {
            Some(next) => params = params.continue_token(&next),
            None => return Ok(labelled),
        }
    }
}

/// Apply the host's labels to `object` as [`ADOPTION_FIELD_MANAGER`].
async fn label(client: &kube::Client, resource: &ApiResource, object: &Value, audit: Audit<'_>) -> Result<(), ActionError> {
    let plugin = audit.plugin;
    let name = name_of(object).unwrap_or_default();
    let namespace = namespace_of(object);
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    };
    let labels: Map<String, Value> =
        host_labels(plugin).into_iter().map(|(k, v)| (k.to_owned(), Value::String(v.to_owned()))).collect();
    let patch = json!({"apiVersion": resource.api_version, "kind": resource.kind, "metadata": {"name": name, "labels": labels}});
    let labelled = api.patch(name, &PatchParams::apply(ADOPTION_FIELD_MANAGER).force(), &Patch::Apply(&patch)).await;
    let parent = controller_uid(object).or_else(|| object.pointer("/metadata/labels")?.get(PARENT_UID_LABEL)?.as_str());
    let parent = format!("uid {}", parent.unwrap_or_default());
    let target =
        AuditObject { api_version: &resource.api_version, kind: &resource.kind, namespace: namespace.unwrap_or_default(), name };
    let audit = Audit { parent: &parent, field_manager: ADOPTION_FIELD_MANAGER, ..audit };
    audit.wrote(Verb::Adopt, target, "", labelled.as_ref().map(drop));
    labelled.map_err(|source| ActionError::Api {
        action: "label",
        object: format!("{} {}/{name}", resource.kind, namespace.unwrap_or_default()),
        source,
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
    fn a_listed_page_keeps_what_needs_label_reads_and_the_next_token() {
        let text = json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": "7", "continue": "next-page"},
        "items": [
            {"kind": "PartialObjectMetadata", "metadata": {"name": "web", "namespace": "ns", "uid": "d1",
                "labels": {"app": "web"}, "ownerReferences": [{"uid": "u1", "controller": true, "kind": "Memcached"}],
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]}},
            {"kind": "PartialObjectMetadata", "metadata": {"name": "theirs", "namespace": "ns"}}
        ]})
        .to_string();
        let page: Page = serde_json::from_str(&text).unwrap();
        assert_eq!(page.metadata.next.as_deref(), Some("next-page"));
        let objects: Vec<Value> = page.items.into_iter().map(|l| json!({"metadata": l.metadata})).collect();
        assert!(needs_label(&objects[0], &parents()));
        assert!(!needs_label(&objects[1], &parents()));
        assert_eq!((name_of(&objects[0]), namespace_of(&objects[0])), (Some("web"), Some("ns")));
        assert_eq!(objects[0]["metadata"].get("managedFields"), None, "managedFields are not kept");
    }

    #[test]
    fn an_empty_list_answered_with_null_items_is_an_empty_page() {
        // What kube-apiserver sends for a metadata-only list that matches nothing.
        let text = r#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"9"},"items":null}"#;
        let page: Page = serde_json::from_str(text).unwrap();
        assert!(page.items.is_empty() && page.metadata.next.is_none());
    }

    #[test]
    fn a_child_another_tool_labelled_is_taken_back() {
        let helm =
            json!({"metadata": {"labels": {MANAGED_BY_LABEL: "Helm"}, "ownerReferences": [{"uid": "u1", "controller": true}]}});
        assert!(needs_label(&helm, &parents()));
    }
}
