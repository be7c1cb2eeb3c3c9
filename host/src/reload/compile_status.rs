//! A compile in progress on a `WasmPlugin`: `status.compiling` (the digest compiled, since
//! when) and the `Compiling` condition, applied by their own field manager `wasmop-compile`
//! so that the file's report (`Ready`, the version serving) stays as it is meanwhile.
//!
//! The object is the plugin's when the file already provides one (its previous version keeps
//! serving: `Ready` says so), else the file's report ([`super::report_name`]), which goes when
//! the file loads.

use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::cluster_status::{ClusterStatus, SCOPE_ANNOTATION};
use super::report_name::{FILE_REPORT_LABEL, report_name};
use crate::actions::{merge_conditions, timestamp_now};
use crate::contract::{Condition, ConditionStatus};

const COMPILE_FIELD_MANAGER: &str = "wasmop-compile";
/// The condition type of compiling: `True` while a new content of the file compiles.
pub const COMPILING: &str = "Compiling";

/// The `WasmPlugin` a compile is shown on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompileTarget {
    /// The plugin's own object: the file provides this plugin (running, or not started).
    Plugin(String),
    /// The file's report: no plugin name is known for the file yet.
    FileReport(std::path::PathBuf),
}

impl CompileTarget {
    fn name(&self) -> String {
        match self {
            CompileTarget::Plugin(name) => name.clone(),
            CompileTarget::FileReport(file) => report_name(file),
        }
    }
}

/// A compile that started, or ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompileReport {
    /// The file's content of this sha256 is compiling since this time (RFC 3339); `serving`
    /// names the version that keeps serving meanwhile, if any.
    Started {
        /// The content compiling.
        digest: String,
        /// When it started.
        since: String,
        /// The version serving meanwhile.
        serving: Option<String>,
    },
    /// The compile ended (the file's `Ready` says how).
    Ended(CompileEnd),
}

/// How a compile ended: the `Compiling=False` condition's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompileEnd {
    /// Compiled and loaded (started or swapped in, or refused for another reason: `Ready`).
    Compiled,
    /// The content did not compile or load.
    Failed,
    /// The file changed again or went away before the compile ended.
    Abandoned,
}

impl ClusterStatus {
    /// Record `report` on `target`'s `WasmPlugin`. Failures are logged: this is a report, not
    /// part of loading. An ended compile of an object that is gone is skipped.
    pub async fn publish_compile(&self, target: &CompileTarget, file: &std::path::Path, report: &CompileReport) {
        let Some(api) = self.api().await else { return };
        let name = target.name();
        let params = PatchParams::apply(COMPILE_FIELD_MANAGER).force();
        if let CompileReport::Started { .. } = report {
            let mut metadata = json!({"name": name, "annotations": {SCOPE_ANNOTATION: self.scope}});
            if let CompileTarget::FileReport(_) = target {
                metadata["labels"] = json!({FILE_REPORT_LABEL: "true"});
            }
            let object = json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin", "metadata": metadata,
                "spec": {"file": file}});
            if let Err(e) = api.patch(&name, &params, &Patch::Apply(&object)).await {
                tracing::warn!(object = %name, error = %e, "cannot write WasmPlugin to show a compile");
                return;
            }
        }
        let existing: Vec<Value> = match api.get_opt(&name).await {
            Ok(Some(object)) => object.data.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default(),
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(object = %name, error = %e, "cannot read WasmPlugin to show a compile");
                return;
            }
        };
        if let CompileReport::Ended(_) = report {
            // Removed by a merge patch first: an apply that leaves the field out makes the
            // API server (1.20) see it as null, which the schema refuses.
            let remove = json!({"status": {"compiling": null}});
            if let Err(e) = api
                .patch_status(
                    &name,
                    &PatchParams { field_manager: Some(COMPILE_FIELD_MANAGER.into()), ..PatchParams::default() },
                    &Patch::Merge(&remove),
                )
                .await
            {
                tracing::warn!(object = %name, error = %e, "cannot remove status.compiling from the WasmPlugin");
            }
        }
        let existing: Vec<Value> = existing.into_iter().filter(|c| c["type"] == COMPILING).collect();
        let conditions = merge_conditions(&existing, &[condition(report)], None, &timestamp_now());
        let mut status = json!({"conditions": conditions});
        if let CompileReport::Started { digest, since, .. } = report {
            status["compiling"] = json!({"digest": digest, "since": since});
        }
        let patch = json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin", "metadata": {"name": name},
            "status": status});
        if let Err(e) = api.patch_status(&name, &params, &Patch::Apply(&patch)).await {
            tracing::warn!(object = %name, error = %e, "cannot write a compile to the WasmPlugin status");
        }
    }
}

/// The `Compiling` condition of a report.
fn condition(report: &CompileReport) -> Condition {
    match report {
        CompileReport::Started { digest, serving, .. } => Condition {
            type_: COMPILING.into(),
            status: ConditionStatus::True,
            reason: COMPILING.into(),
            message: match serving {
                Some(version) => format!("compiling the file's new content (sha256 {digest}); version {version} keeps serving"),
                None => format!("compiling the file (sha256 {digest}); the plugin starts when it is compiled"),
            },
        },
        CompileReport::Ended(end) => {
            let (reason, message) = match end {
                CompileEnd::Compiled => ("Compiled", "the file's content is compiled"),
                CompileEnd::Failed => ("Failed", "the file's content did not compile or load: Ready says why"),
                CompileEnd::Abandoned => ("Abandoned", "the compile was abandoned: the file changed again or went away"),
            };
            Condition { type_: COMPILING.into(), status: ConditionStatus::False, reason: reason.into(), message: message.into() }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compile_names_the_version_that_keeps_serving() {
        let started = CompileReport::Started { digest: "ab12".into(), since: "t".into(), serving: Some("1.2.0".into()) };
        let c = condition(&started);
        assert_eq!((c.status, c.reason.as_str()), (ConditionStatus::True, COMPILING));
        assert!(c.message.contains("version 1.2.0 keeps serving") && c.message.contains("ab12"), "{}", c.message);
        let first = CompileReport::Started { digest: "ab12".into(), since: "t".into(), serving: None };
        assert!(condition(&first).message.contains("starts when it is compiled"));
        let ended = condition(&CompileReport::Ended(CompileEnd::Compiled));
        assert_eq!((ended.status, ended.reason.as_str()), (ConditionStatus::False, "Compiled"));
    }

    #[test]
    fn a_compile_is_shown_on_the_plugin_or_else_on_the_file_report() {
        assert_eq!(CompileTarget::Plugin("memcached".into()).name(), "memcached");
        assert_eq!(CompileTarget::FileReport("/plugins/big.wasm".into()).name(), "big.wasm");
    }
}
