//! The plugin's finalizer on parents: added before the first reconcile, removed once the
//! plugin answers `finalized`.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

/// Whether `parent` carries `finalizer`.
pub fn has_finalizer(parent: &Value, finalizer: &str) -> bool {
    finalizers(parent).iter().any(|f| f == finalizer)
}

fn finalizers(parent: &Value) -> Vec<String> {
    parent
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|f| f.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

async fn set(api: &Api<DynamicObject>, parent: &Value, list: Vec<String>, field_manager: &str) -> kube::Result<()> {
    let name = parent.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    // resourceVersion makes this an optimistic write: a concurrent change yields a conflict
    // and a retry instead of a lost finalizer.
    let patch = json!({"metadata": {"finalizers": list, "resourceVersion": parent.pointer("/metadata/resourceVersion")}});
    let params = PatchParams { field_manager: Some(field_manager.to_owned()), ..PatchParams::default() };
    super::patch(api, super::Target::Object, name, &params, &Patch::Merge(&patch)).await.map(|_| ())
}

/// Add `finalizer` to `parent`, written as `field_manager` (the plugin's: the object's
/// `managedFields` then name the plugin that holds it).
///
/// # Errors
/// The API error (a conflict when the parent changed meanwhile).
pub async fn add_finalizer(api: &Api<DynamicObject>, parent: &Value, finalizer: &str, field_manager: &str) -> kube::Result<()> {
    let mut list = finalizers(parent);
    list.push(finalizer.to_owned());
    set(api, parent, list, field_manager).await
}

/// Remove `finalizer` from `parent`, written as `field_manager`.
///
/// # Errors
/// The API error; a parent already gone is not an error.
pub async fn remove_finalizer(
    api: &Api<DynamicObject>,
    parent: &Value,
    finalizer: &str,
    field_manager: &str,
) -> kube::Result<()> {
    let list = finalizers(parent).into_iter().filter(|f| f != finalizer).collect();
    match set(api, parent, list, field_manager).await {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other,
    }
}
