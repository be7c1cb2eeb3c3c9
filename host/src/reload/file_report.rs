//! File reports: a `WasmPlugin` for a plugin file from which no plugin runs and whose plugin
//! has no `WasmPlugin` of its own to say why (not wasm, not a component, the wrong world, a
//! missing import, an invalid manifest, a name another file already provides).
//!
//! The report is named after the file ([`report_name`]: `broken.wasm` for `broken.wasm`) and
//! labelled [`FILE_REPORT_LABEL`]; its `Ready` condition is `False` with a reason naming the
//! kind of rejection ([`rejection_reason`]) and the error as message. Plugin names are DNS-1123
//! labels, without dots, and report names always have one: the two never collide. The report
//! goes when the file goes, and when the file becomes a plugin (whose own `WasmPlugin` then
//! appears).

use std::path::Path;

use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::cluster_status::{ClusterStatus, FIELD_MANAGER, SCOPE_ANNOTATION};
use super::file_status::FileStatus;
use super::report_name::{FILE_REPORT_LABEL, report_name};
use crate::actions::{merge_conditions, timestamp_now};
use crate::contract::{Condition, ConditionStatus};
use crate::controller::PluginError;
use crate::runtime::LoadError;

/// The `Ready` reason of a file from which no plugin runs, by why it was rejected.
pub fn rejection_reason(error: &PluginError) -> &'static str {
    match error {
        PluginError::Load(LoadError::Io { .. }) => "Unreadable",
        PluginError::Load(LoadError::NotWasm { .. }) => "NotWasm",
        PluginError::Load(LoadError::Invalid(_)) => "InvalidWasm",
        PluginError::Load(LoadError::Componentize(_)) => "NotAComponent",
        PluginError::Load(LoadError::WrongWorld(_)) => "WrongWorld",
        PluginError::Load(LoadError::Describe(_)) => "ManifestFailed",
        PluginError::Load(LoadError::Manifest(_) | LoadError::ConfigSchema(_)) => "InvalidManifest",
        PluginError::Load(LoadError::Compiler(_)) => "CompileFailed",
        PluginError::Duplicate(_) => "DuplicatePlugin",
        PluginError::Start(_) => "NotStarted",
    }
}

/// Whether a file's status is one a file report shows: rejected, no plugin running from it,
/// and no plugin name known to carry the news on a `WasmPlugin` of its own.
pub fn needs_report(status: &FileStatus) -> bool {
    status.last_error.is_some() && status.plugin.is_none() && status.not_started.is_none()
}

impl ClusterStatus {
    /// Write the file report of `file` (see the module docs): `Ready=False` with `reason` and
    /// the file's `lastError`. Failures are logged: this is a report, not part of loading.
    pub async fn publish_file_report(&self, file: &FileStatus, reason: &str) {
        let Some(api) = self.api().await else { return };
        let name = report_name(&file.file);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let object = json!({
            "apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin",
            "metadata": {"name": name, "labels": {FILE_REPORT_LABEL: "true"}, "annotations": {SCOPE_ANNOTATION: self.scope}},
            "spec": {"file": file.file},
        });
        let current = match api.patch(&name, &params, &Patch::Apply(&object)).await {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(report = %name, error = %e, "cannot write the file report");
                return;
            }
        };
        let error = file.last_error.as_deref().unwrap_or_default();
        let file_name = file.file.file_name().unwrap_or_default().to_string_lossy();
        let ready = Condition {
            type_: "Ready".into(),
            status: ConditionStatus::False,
            reason: reason.into(),
            message: format!("no plugin runs from the file {file_name}: {error}"),
        };
        let existing: Vec<serde_json::Value> =
            current.data.pointer("/status/conditions").and_then(|c| c.as_array()).cloned().unwrap_or_default();
        let mut status = json!({
            "lastError": error,
            "conditions": merge_conditions(&existing, &[ready], None, &timestamp_now()),
        });
        if !file.digest.is_empty() {
            status["rejectedDigest"] = json!(file.digest);
        }
        let patch =
            json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin", "metadata": {"name": name}, "status": status});
        if let Err(e) = api.patch_status(&name, &params, &Patch::Apply(&patch)).await {
            tracing::warn!(report = %name, error = %e, "cannot write the file report's status");
        }
    }

    /// Delete the file report of `file`, if there is one.
    pub async fn remove_file_report(&self, file: &Path) {
        let Some(api) = self.api().await else { return };
        let name = report_name(file);
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) | Err(kube::Error::Api(_)) => {}
            Err(e) => tracing::warn!(report = %name, error = %e, "cannot delete the file report"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejections_have_a_reason_by_kind() {
        let not_wasm = PluginError::Load(LoadError::NotWasm { found: "6a 75".into() });
        assert_eq!(rejection_reason(&not_wasm), "NotWasm");
        assert_eq!(rejection_reason(&PluginError::Load(LoadError::WrongWorld("missing export".into()))), "WrongWorld");
        assert_eq!(rejection_reason(&PluginError::Duplicate("memcached".into())), "DuplicatePlugin");
    }

    #[test]
    fn only_rejected_files_without_a_plugin_name_need_a_report() {
        let rejected = FileStatus { last_error: Some("not wasm".into()), ..FileStatus::default() };
        assert!(needs_report(&rejected));
        assert!(!needs_report(&FileStatus { plugin: Some("memcached".into()), ..rejected.clone() }));
        assert!(!needs_report(&FileStatus { not_started: Some("testbed".into()), ..rejected }));
        assert!(!needs_report(&FileStatus { plugin: Some("memcached".into()), ..FileStatus::default() }));
    }
}
