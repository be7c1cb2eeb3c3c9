//! A plugin pinned to the WIT contract `wasmop:plugin@0.1.0`, for the host's compatibility
//! tests. Not an example: real plugins use the SDK.
//!
//! Built with `wit-bindgen` directly against `wit/v0.1.0`, so it stays a 0.1.0 component
//! whatever version the SDK moves to. It reconciles `Legacy` objects (`legacy.wasmop.dev/v1`,
//! namespaced) into one ConfigMap `<name>-legacy` with `data: {wit: "0.1.0"}` and status
//! `{phase: Ready}`. The decision is plain Rust ([`desired`]) so it unit-tests natively.

use serde_json::{Value, json};

/// The plugin name in its manifest.
pub const NAME: &str = "legacy-v0-1";

/// The ConfigMap a parent gets, and the status to set; an error message for a parent without
/// a name.
///
/// # Errors
/// When the parent text is not JSON or has no `metadata.name`.
pub fn desired(parent: &str) -> Result<(Value, Value), String> {
    let parent: Value = serde_json::from_str(parent).map_err(|e| format!("the parent is not JSON: {e}"))?;
    let name = parent["metadata"]["name"].as_str().ok_or("the parent has no metadata.name")?;
    let config_map = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("{name}-legacy")},
        "data": {"wit": "0.1.0"},
    });
    Ok((config_map, json!({"phase": "Ready"})))
}

#[cfg(target_arch = "wasm32")]
mod component {
    wit_bindgen::generate!({
        path: "../../wit/v0.1.0",
        world: "operator",
    });

    use exports::wasmop::plugin::reconciler::{Guest, ParentKind, PluginManifest, ReconcileError, Request, Response};
    use wasmop::plugin::types::{KindRef, Scope};

    struct Legacy;

    impl Guest for Legacy {
        fn manifest() -> PluginManifest {
            PluginManifest {
                name: super::NAME.into(),
                version: "0.1.0".into(),
                description: "A WIT 0.1.0 plugin for the host's compatibility tests (not an example)".into(),
                parent: ParentKind {
                    kind: KindRef { group: "legacy.wasmop.dev".into(), version: "v1".into(), kind: "Legacy".into() },
                    scope: Scope::Namespaced,
                },
                children: vec![KindRef { group: String::new(), version: "v1".into(), kind: "ConfigMap".into() }],
                related: vec![],
                finalizer: false,
                prune: true,
                config_schema: None,
            }
        }

        fn reconcile(request: Request) -> Result<Response, ReconcileError> {
            let (config_map, status) = super::desired(&request.parent).map_err(ReconcileError::Terminal)?;
            Ok(Response {
                children: vec![config_map.to_string()],
                delete: vec![],
                status: Some(status.to_string()),
                conditions: vec![],
                events: vec![],
                requeue_after_ms: None,
                finalized: false,
            })
        }
    }

    export!(Legacy);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parent_gets_one_config_map_named_after_it() {
        let (cm, status) = desired(r#"{"metadata": {"name": "old"}}"#).unwrap();
        assert_eq!(cm["metadata"]["name"], "old-legacy");
        assert_eq!(cm["data"]["wit"], "0.1.0");
        assert_eq!(status["phase"], "Ready");
    }

    #[test]
    fn a_parent_without_a_name_is_an_error() {
        assert_eq!(desired("{}").unwrap_err(), "the parent has no metadata.name");
    }
}
