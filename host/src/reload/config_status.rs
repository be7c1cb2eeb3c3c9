//! A plugin's configuration on its `WasmPlugin`: `status.config` (source, the configuration in
//! use, the error of the latest one read) and the `ConfigValid` condition, applied by their own
//! field manager `wasmop-config` so that neither the file report nor the breaker's erases them.

use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::cluster_status::ClusterStatus;
use crate::actions::{merge_conditions, timestamp_now};
use crate::contract::{Condition, ConditionStatus};
use crate::plugin_config::ConfigStatus;

const CONFIG_FIELD_MANAGER: &str = "wasmop-config";
/// The condition type of the configuration: `True` while the latest configuration read is the
/// one in use, `False` (reason `Invalid`) with the reason it is not.
pub const CONFIG_VALID: &str = "ConfigValid";

impl ClusterStatus {
    /// Record `config` on the `WasmPlugin` of `plugin`. Failures are logged; a missing object
    /// (its file report not written yet) is skipped.
    pub async fn publish_config(&self, plugin: &str, config: &ConfigStatus) {
        let Some(api) = self.api().await else { return };
        let current = match api.get_opt(plugin).await {
            Ok(Some(object)) => object,
            Ok(None) => {
                tracing::debug!(plugin, "no WasmPlugin object to record the configuration on");
                return;
            }
            Err(e) => {
                tracing::warn!(plugin, error = %e, "cannot read WasmPlugin to record the configuration");
                return;
            }
        };
        let existing: Vec<Value> = current
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|c| c["type"] == CONFIG_VALID)
            .cloned()
            .collect();
        let conditions = merge_conditions(&existing, &[condition(config)], None, &timestamp_now());
        let patch = json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin", "metadata": {"name": plugin},
            "status": {"config": config_json(config), "conditions": conditions}});
        let params = PatchParams::apply(CONFIG_FIELD_MANAGER).force();
        if let Err(e) = api.patch_status(plugin, &params, &Patch::Apply(&patch)).await {
            tracing::warn!(plugin, error = %e, "cannot write the configuration to the WasmPlugin status");
        }
    }
}

/// The `ConfigValid` condition of a status.
fn condition(config: &ConfigStatus) -> Condition {
    match (&config.error, &config.in_use) {
        (None, _) => Condition {
            type_: CONFIG_VALID.into(),
            status: ConditionStatus::True,
            reason: "Valid".into(),
            message: format!("configuration from {} in use", config.source),
        },
        (Some(error), Some(_)) => Condition {
            type_: CONFIG_VALID.into(),
            status: ConditionStatus::False,
            reason: "Invalid".into(),
            message: format!("{error}; the last valid configuration stays in use"),
        },
        (Some(error), None) => Condition {
            type_: CONFIG_VALID.into(),
            status: ConditionStatus::False,
            reason: "Invalid".into(),
            message: format!("{error}; the plugin is not started until its configuration is valid"),
        },
    }
}

/// `status.config`: absent fields rather than nulls (the schema's fields are not nullable).
fn config_json(config: &ConfigStatus) -> Value {
    let mut out = json!({"source": config.source, "valid": config.error.is_none()});
    if let Some(in_use) = &config.in_use {
        out["inUse"] = in_use.clone();
    }
    if let Some(error) = &config.error {
        out["error"] = error.clone().into();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(in_use: Option<Value>, error: Option<&str>) -> ConfigStatus {
        ConfigStatus { source: "ConfigMap ops/c".into(), in_use, error: error.map(str::to_owned) }
    }

    #[test]
    fn a_valid_config_is_shown_in_use_with_config_valid_true() {
        let s = status(Some(json!({"image": "a"})), None);
        assert_eq!(config_json(&s), json!({"source": "ConfigMap ops/c", "valid": true, "inUse": {"image": "a"}}));
        let c = condition(&s);
        assert_eq!((c.status, c.reason.as_str()), (ConditionStatus::True, "Valid"));
    }

    #[test]
    fn an_invalid_config_shows_the_error_and_what_stays_in_use() {
        let s = status(Some(json!({"image": "a"})), Some("invalid config at /port: x"));
        assert_eq!(config_json(&s)["error"], "invalid config at /port: x");
        assert_eq!(config_json(&s)["valid"], false);
        let c = condition(&s);
        assert_eq!(c.status, ConditionStatus::False);
        assert_eq!(c.message, "invalid config at /port: x; the last valid configuration stays in use");
        let refused = condition(&status(None, Some("ConfigMap ops/c: not found")));
        assert!(refused.message.ends_with("the plugin is not started until its configuration is valid"), "{}", refused.message);
        assert!(config_json(&status(None, Some("e"))).get("inUse").is_none());
    }
}
