//! [`PullReport`]: the latest pull of a plugin's file from its registry, as its `WasmPlugin`
//! shows it (`status.pull`). A failed pull makes `Ready=False` with the failure's reason, while
//! the version serving (if any) keeps serving.

use serde::Serialize;

use crate::contract::{Condition, ConditionStatus};

/// How the latest pull of a plugin's source ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PullState {
    /// The source's artifact is in the plugins directory (or was already).
    Pulled,
    /// The latest pull failed; the file in the plugins directory (if any) is the last good one.
    Failed,
}

/// The latest pull of a plugin's file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PullReport {
    /// The source, `oci://...`.
    pub source: String,
    /// How it ended.
    pub state: PullState,
    /// `sha256:...` of the manifest the source last resolved to successfully.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// `sha256:...` of that manifest's Wasm layer: the file's content.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer_digest: Option<String>,
    /// When the digest in `digest` was pulled (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pulled_at: Option<String>,
    /// When the latest attempt ended (RFC 3339).
    pub attempted_at: String,
    /// Why the latest attempt failed (a `Ready` reason: `RegistryUnreachable`,
    /// `Unauthorized`, `NotFound`, `DigestMismatch`, `TooLarge`, `NotWasmArtifact`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The failure, one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl PullReport {
    /// The `Ready` condition a failed pull imposes (`None` for a successful one): `version`
    /// is the version serving, if one does.
    pub fn ready(&self, version: Option<&str>) -> Option<Condition> {
        if self.state != PullState::Failed {
            return None;
        }
        let serving = match version {
            Some(v) => format!("version {v} keeps serving"),
            None => "no version of the plugin runs".to_owned(),
        };
        let last = self.digest.as_deref().map(|d| format!(" (last pulled: {d})")).unwrap_or_default();
        Some(Condition {
            type_: "Ready".into(),
            status: ConditionStatus::False,
            reason: self.reason.clone().unwrap_or_else(|| "PullFailed".into()),
            message: format!(
                "pulling {} failed; {serving}{last}: {}",
                self.source,
                self.message.as_deref().unwrap_or("unknown error")
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_pull_is_ready_false_with_its_reason_and_what_keeps_serving() {
        let mut report = PullReport {
            source: "oci://r/x:1".into(),
            state: PullState::Failed,
            digest: Some("sha256:aa".into()),
            layer_digest: None,
            pulled_at: None,
            attempted_at: "2026-01-01T00:00:00Z".into(),
            reason: Some("DigestMismatch".into()),
            message: Some("blob: digest mismatch".into()),
        };
        let ready = report.ready(Some("0.1.0")).unwrap();
        assert_eq!((ready.status, ready.reason.as_str()), (ConditionStatus::False, "DigestMismatch"));
        assert_eq!(
            ready.message,
            "pulling oci://r/x:1 failed; version 0.1.0 keeps serving (last pulled: sha256:aa): blob: digest mismatch"
        );
        assert!(report.ready(None).unwrap().message.contains("no version of the plugin runs"));
        report.state = PullState::Pulled;
        assert_eq!(report.ready(Some("0.1.0")), None);
    }
}
