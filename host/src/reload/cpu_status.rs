//! A plugin's share of CPU on its `WasmPlugin`: `status.cpu` (the share, where it comes from,
//! whether the plugin is throttled for going over it), applied by its own field manager
//! `wasmop-cpu` so that neither the file report nor the breaker's erases it.

use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::cluster_status::ClusterStatus;
use crate::controller::CpuStatus;

const CPU_FIELD_MANAGER: &str = "wasmop-cpu";

impl ClusterStatus {
    /// Record `cpu` on the `WasmPlugin` of `plugin`. Failures are logged; a missing object
    /// (its file report not written yet) is skipped.
    pub async fn publish_cpu(&self, plugin: &str, cpu: &CpuStatus) {
        let Some(api) = self.api().await else { return };
        let patch = json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin", "metadata": {"name": plugin},
            "status": {"cpu": cpu_json(cpu)}});
        let params = PatchParams::apply(CPU_FIELD_MANAGER).force();
        match api.patch_status(plugin, &params, &Patch::Apply(&patch)).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {
                tracing::debug!(plugin, "no WasmPlugin object to record the CPU share on");
            }
            Err(e) => tracing::warn!(plugin, error = %e, "cannot write the CPU share to the WasmPlugin status"),
        }
    }
}

/// `status.cpu`.
fn cpu_json(cpu: &CpuStatus) -> Value {
    json!({
        "share": cpu.share.to_string(),
        "source": cpu.source.as_str(),
        "throttled": cpu.throttled,
        "since": cpu.since,
        "message": cpu.message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::ShareSource;
    use crate::policy::parse_cpu_share;

    #[test]
    fn the_status_shows_the_share_in_cores_its_source_and_whether_it_is_throttled() {
        let status = CpuStatus {
            share: parse_cpu_share("250m").unwrap(),
            source: ShareSource::Policy,
            throttled: true,
            since: "2026-12-02T20:00:00Z".into(),
            message: "over".into(),
        };
        assert_eq!(
            cpu_json(&status),
            json!({"share": "0.25", "source": "Policy", "throttled": true, "since": "2026-12-02T20:00:00Z", "message": "over"})
        );
    }
}
