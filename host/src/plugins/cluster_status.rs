//! Plugin state in the cluster: one `WasmPlugin` object (`crds/wasmplugin.yaml`) per loaded
//! plugin, so `kubectl get wasmplugins` shows what a host runs and why a file was rejected.

use kube::api::{Api, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::pinned_kind;
use serde_json::json;

use super::reloader::FileStatus;
use crate::actions::merge_conditions;
use crate::contract::{Condition, ConditionStatus, Manifest};

const FIELD_MANAGER: &str = "wasmop";

/// Writes `WasmPlugin` objects. When the CRD is not installed it says so once and does
/// nothing else (the host works without it).
pub struct ClusterStatus {
    client: kube::Client,
    api: tokio::sync::Mutex<Option<Api<DynamicObject>>>,
    warned: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for ClusterStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterStatus").finish_non_exhaustive()
    }
}

impl ClusterStatus {
    /// A writer using `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client, api: tokio::sync::Mutex::new(None), warned: Default::default() }
    }

    async fn api(&self) -> Option<Api<DynamicObject>> {
        let mut api = self.api.lock().await;
        if api.is_none() {
            match pinned_kind(&self.client, &GroupVersionKind::gvk("wasmop.dev", "v1alpha1", "WasmPlugin")).await {
                Ok((resource, _)) => *api = Some(Api::all_with(self.client.clone(), &resource)),
                Err(e) => {
                    if !self.warned.swap(true, std::sync::atomic::Ordering::Relaxed) {
                        tracing::info!(error = %e, "WasmPlugin objects are not written: install crds/wasmplugin.yaml to see plugins with kubectl");
                    }
                    return None;
                }
            }
        }
        api.clone()
    }

    /// Record a file's status on the `WasmPlugin` of the plugin it provides. Failures are
    /// logged: this is a report, not part of loading.
    pub async fn publish(&self, file: &FileStatus, manifest: Option<&Manifest>) {
        let Some(name) = &file.plugin else { return };
        let Some(api) = self.api().await else { return };
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let object = json!({
            "apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin",
            "metadata": {"name": name}, "spec": {"file": file.file},
        });
        let current = match api.patch(name, &params, &Patch::Apply(&object)).await {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(plugin = %name, error = %e, "cannot write WasmPlugin");
                return;
            }
        };
        let ready = match &file.last_error {
            None => Condition { type_: "Ready".into(), status: ConditionStatus::True, reason: "Loaded".into(),
                message: format!("version {} serving", file.version.as_deref().unwrap_or("?")) },
            Some(e) => Condition {
                type_: "Ready".into(),
                status: ConditionStatus::False,
                reason: "Rejected".into(),
                message: format!("the file's new content was rejected; version {} keeps serving: {e}", file.version.as_deref().unwrap_or("?")),
            },
        };
        let existing = current.data.pointer("/status/conditions").and_then(|c| c.as_array()).cloned().unwrap_or_default();
        let status = json!({
            "version": file.version,
            "digest": file.running_digest,
            "parent": manifest.map(|m| m.parent.to_string()),
            "children": manifest.map(|m| m.children.iter().map(ToString::to_string).collect::<Vec<_>>()),
            "loadedAt": file.loaded_at,
            "loads": file.loads,
            "lastError": file.last_error,
            "rejectedDigest": file.last_error.as_ref().map(|_| &file.digest),
            "conditions": merge_conditions(&existing, &[ready], None, &crate::actions::now()),
        });
        // Absent, not null: the schema's fields are not nullable.
        let status: serde_json::Map<String, serde_json::Value> =
            status.as_object().into_iter().flatten().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), v.clone())).collect();
        let patch = json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin", "metadata": {"name": name}, "status": status});
        if let Err(e) = api.patch_status(name, &params, &Patch::Apply(&patch)).await {
            tracing::warn!(plugin = %name, error = %e, "cannot write WasmPlugin status");
        }
    }

    /// Delete the `WasmPlugin` of an unloaded plugin.
    pub async fn remove(&self, plugin: &str) {
        let Some(api) = self.api().await else { return };
        match api.delete(plugin, &DeleteParams::default()).await {
            Ok(_) | Err(kube::Error::Api(_)) => {}
            Err(e) => tracing::warn!(plugin, error = %e, "cannot delete WasmPlugin"),
        }
    }
}
