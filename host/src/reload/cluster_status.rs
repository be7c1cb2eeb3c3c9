//! Plugin state in the cluster: one `WasmPlugin` object (`crds/wasmplugin.yaml`) per loaded
//! plugin, so `kubectl get wasmplugins` shows what a host runs, why a file was rejected and
//! whether its circuit breaker throttles it.
//!
//! Two field managers share the status: `wasmop` (the file: version, digest, `Ready`) and
//! `wasmop-breaker` (`circuitBreaker` and the `Throttled` condition). Each applies only its own
//! fields, so neither report erases the other.
//!
//! Each object carries the [`SCOPE_ANNOTATION`] of the host that wrote it (`*`, or its
//! namespaces): hosts of different namespaces share the cluster's `WasmPlugin`s, and one host
//! never deletes or marks another's at start.
//!
//! The CRD itself is [`WASMPLUGIN_CRD`], built into the binary (`wasmop crds` prints it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kube::api::{Api, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::pinned_kind;
use serde_json::json;

use super::file_status::FileStatus;
use super::pull_status::PullReport;
use super::report_name::{FILE_REPORT_LABEL, report_name};
use crate::actions::merge_conditions;
use crate::cluster::InstallScope;
use crate::contract::{Condition, ConditionStatus};
use crate::controller::{BreakerPhase, BreakerStatus};
use crate::policy::{grants_json, limits_json};
use crate::runtime::Plugin;

/// The `WasmPlugin` CustomResourceDefinition (`crds/wasmplugin.yaml`, copied into `deploy/`),
/// as the binary was built with it: the one CRD the host itself needs.
pub const WASMPLUGIN_CRD: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../crds/wasmplugin.yaml"));

/// The field manager of the file reports (the file's fields and `Ready`).
pub(super) const FIELD_MANAGER: &str = "wasmop";
const BREAKER_FIELD_MANAGER: &str = "wasmop-breaker";
/// The `Ready` reason of a plugin kept for finalizing calls after its file was removed.
const FINALIZING: &str = "Finalizing";
/// The `Ready` reason of a plugin whose file went away while it was finalizing.
const FILE_MISSING: &str = "FileMissing";
/// The annotation naming the scope of the host that wrote a `WasmPlugin`
/// ([`InstallScope::as_value`]); absent on objects of hosts older than namespaced installs,
/// which watched the whole cluster.
pub const SCOPE_ANNOTATION: &str = "wasmop.dev/host-scope";
/// The condition type of the circuit breaker.
pub const THROTTLED: &str = "Throttled";

/// Writes `WasmPlugin` objects. When the CRD is not installed it says so once and does
/// nothing else (the host works without it).
pub struct ClusterStatus {
    client: kube::Client,
    /// This host's [`InstallScope::as_value`].
    pub(super) scope: String,
    api: tokio::sync::Mutex<Option<Api<DynamicObject>>>,
    warned: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for ClusterStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterStatus").finish_non_exhaustive()
    }
}

impl ClusterStatus {
    /// A writer using `client`, for a host working in `install`.
    pub fn new(client: kube::Client, install: &InstallScope) -> Self {
        Self { client, scope: install.as_value(), api: tokio::sync::Mutex::new(None), warned: Default::default() }
    }

    /// The `WasmPlugin` API; `None` (said once) while the CRD is not installed.
    pub(super) async fn api(&self) -> Option<Api<DynamicObject>> {
        let mut api = self.api.lock().await;
        if api.is_none() {
            match pinned_kind(&self.client, &GroupVersionKind::gvk("wasmop.dev", "v1alpha1", "WasmPlugin")).await {
                Ok((resource, _)) => *api = Some(Api::all_with(self.client.clone(), &resource)),
                Err(e) => {
                    if !self.warned.swap(true, std::sync::atomic::Ordering::Relaxed) {
                        tracing::info!(error = %e, "WasmPlugin objects are not written: install their CRD (`wasmop crds | kubectl apply -f -`) to see plugins with kubectl");
                    }
                    return None;
                }
            }
        }
        api.clone()
    }

    /// Record a file's status on the `WasmPlugin` of the plugin it provides, with the latest
    /// pull of the file from its registry (`pull`, if it has a source: a failed pull makes
    /// `Ready=False` with its reason). Failures are logged: this is a report, not part of
    /// loading.
    pub async fn publish(&self, file: &FileStatus, running: Option<&Plugin>, pull: Option<&PullReport>) {
        let version = file.plugin.as_ref().and(file.version.as_deref());
        if let Some(ready) = pull.and_then(|p| p.ready(version)) {
            return self.write(file, running, ready, pull).await;
        }
        let ready = match &file.last_error {
            Some(e) if file.plugin.is_none() => Condition {
                type_: "Ready".into(),
                status: ConditionStatus::False,
                reason: "NotStarted".into(),
                message: format!("the plugin is not running: {e}"),
            },
            None => Condition {
                type_: "Ready".into(),
                status: ConditionStatus::True,
                reason: "Loaded".into(),
                message: format!("version {} serving", file.version.as_deref().unwrap_or("?")),
            },
            Some(e) => Condition {
                type_: "Ready".into(),
                status: ConditionStatus::False,
                reason: "Rejected".into(),
                message: format!(
                    "the file's new content was rejected; version {} keeps serving: {e}",
                    file.version.as_deref().unwrap_or("?")
                ),
            },
        };
        self.write(file, running, ready, pull).await;
    }

    /// Record that the file of a plugin with a finalizer was removed and its last version
    /// serves finalizing calls only, for `holders` parents (`Ready=False`, reason `Finalizing`).
    pub async fn publish_finalizing(&self, file: &FileStatus, running: Option<&Plugin>, holders: usize) {
        let finalizer = running.map_or_else(String::new, |p| p.manifest().finalizer_name());
        let ready = Condition {
            type_: "Ready".into(),
            status: ConditionStatus::False,
            reason: FINALIZING.into(),
            message: format!(
                "the plugin file was removed; version {} serves finalizing calls only until no parent holds its finalizer \
                 {finalizer} ({holders} did), then stops (host policy onRemove: keepFinalizing)",
                file.version.as_deref().unwrap_or("?")
            ),
        };
        self.write(file, running, ready, None).await;
    }

    /// Deal with the `WasmPlugin` objects of files in `dir` (their `spec.file`) that no running
    /// or not-started plugin named in `keep` accounts for, as a host finds them at start: an
    /// object whose file is `rejected` gets `Ready=False`, reason `NotStarted`, with the error;
    /// one of a plugin that was serving finalizing calls when the host stopped gets reason
    /// `FileMissing` (its parents keep the finalizer until the file is back); any other (its file
    /// gone while the host was down) is deleted. Objects of files in other directories belong
    /// to other hosts and are left alone, and so are those another host's scope wrote
    /// ([`SCOPE_ANNOTATION`]). A file report (named by [`crate::reload::report_name`]) stays only
    /// while its file is `rejected` (this pass wrote it); any other is deleted.
    pub async fn reconcile_stale(&self, dir: &Path, keep: &BTreeSet<String>, rejected: &BTreeMap<PathBuf, String>) {
        let Some(api) = self.api().await else { return };
        let objects = match api.list(&ListParams::default()).await {
            Ok(list) => list.items,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list WasmPlugin objects to find stale ones");
                return;
            }
        };
        for object in objects {
            let Some(name) = object.metadata.name.clone().filter(|n| !keep.contains(n)) else { continue };
            let Some(file) = object.data.pointer("/spec/file").and_then(serde_json::Value::as_str).map(PathBuf::from) else {
                continue;
            };
            if file.parent() != Some(dir) || !written_by(&object, &self.scope) {
                continue;
            }
            if is_file_report(&object) {
                if !(rejected.contains_key(&file) && report_name(&file) == name) {
                    tracing::info!(report = %name, file = %file.display(), "reported file gone or loading; deleting the report");
                    self.remove(&name).await;
                }
                continue;
            }
            match rejected.get(&file) {
                Some(error) => {
                    tracing::info!(plugin = %name, file = %file.display(), "the plugin's file no longer loads; marking its WasmPlugin");
                    let status =
                        FileStatus { file, not_started: Some(name), last_error: Some(error.clone()), ..FileStatus::default() };
                    self.publish(&status, None, None).await;
                }
                None if was_finalizing(&object) => {
                    let finalizer = format!("wasmop.dev/{name}");
                    tracing::warn!(plugin = %name, file = %file.display(), %finalizer,
                        "the file of a plugin that was finalizing its parents is gone; they keep its finalizer until it is back");
                    let ready = Condition {
                        type_: "Ready".into(),
                        status: ConditionStatus::False,
                        reason: FILE_MISSING.into(),
                        message: format!(
                            "the host restarted while this plugin served finalizing calls, and its file is gone: parents \
                             holding its finalizer {finalizer} keep it until the file is back (or remove the finalizer by hand)"
                        ),
                    };
                    let status = FileStatus { file, not_started: Some(name), ..FileStatus::default() };
                    self.write(&status, None, ready, None).await;
                }
                None => {
                    tracing::info!(plugin = %name, file = %file.display(), "the plugin's file is gone; deleting its WasmPlugin");
                    self.remove(&name).await;
                }
            }
        }
    }

    /// Apply the object (`spec.file`) and this manager's status fields with `ready` (and
    /// `pull`, the latest pull of the file from its registry).
    async fn write(&self, file: &FileStatus, running: Option<&Plugin>, ready: Condition, pull: Option<&PullReport>) {
        let Some(name) = file.plugin.as_ref().or(file.not_started.as_ref()) else { return };
        let manifest = running.map(|p| p.manifest().as_ref());
        let Some(api) = self.api().await else { return };
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let object = json!({
            "apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin",
            "metadata": {"name": name, "annotations": {SCOPE_ANNOTATION: self.scope}}, "spec": {"file": file.file},
        });
        let current = match api.patch(name, &params, &Patch::Apply(&object)).await {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(plugin = %name, error = %e, "cannot write WasmPlugin");
                return;
            }
        };
        // Only this manager's condition: `Throttled` belongs to the breaker's.
        let existing: Vec<serde_json::Value> = current
            .data
            .pointer("/status/conditions")
            .and_then(|c| c.as_array())
            .into_iter()
            .flatten()
            .filter(|c| c["type"] == "Ready")
            .cloned()
            .collect();
        let status = json!({
            "version": file.version,
            "digest": file.running_digest,
            "parent": manifest.map(|m| m.parent.to_string()),
            "children": manifest.map(|m| m.children.iter().map(ToString::to_string).collect::<Vec<_>>()),
            "loadedAt": file.loaded_at,
            "loads": file.loads,
            "lastError": file.last_error,
            "rejectedDigest": file.last_error.as_ref().map(|_| &file.digest).filter(|d| !d.is_empty()),
            "limits": running.map(|p| limits_json(p.limits())),
            "grants": running.map(|p| grants_json(p.grants())),
            "pull": pull,
            "conditions": merge_conditions(&existing, &[ready], None, &crate::actions::timestamp_now()),
        });
        // Absent, not null: the schema's fields are not nullable.
        let status: serde_json::Map<String, serde_json::Value> =
            status.as_object().into_iter().flatten().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), v.clone())).collect();
        let patch =
            json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin", "metadata": {"name": name}, "status": status});
        if let Err(e) = api.patch_status(name, &params, &Patch::Apply(&patch)).await {
            tracing::warn!(plugin = %name, error = %e, "cannot write WasmPlugin status");
        }
    }

    /// Record the circuit breaker of `plugin` on its `WasmPlugin`: `status.circuitBreaker` and
    /// the `Throttled` condition (True while open or half-open). With `opened`, also a Warning
    /// event about the object. Failures are logged; a missing object (its file report not
    /// written yet, or a host without a plugins directory) is skipped.
    pub async fn publish_breaker(&self, plugin: &str, breaker: &BreakerStatus, opened: bool) {
        let Some(api) = self.api().await else { return };
        let throttled = breaker.phase != BreakerPhase::Closed;
        let reason = breaker.reason.filter(|_| throttled).map_or("Closed", |r| r.as_str());
        let condition = json!({
            "type": THROTTLED,
            "status": if throttled { "True" } else { "False" },
            "reason": reason,
            "message": breaker.message,
            "lastTransitionTime": breaker.since,
        });
        let mut circuit = json!({"state": breaker.phase.as_str(), "message": breaker.message, "trips": breaker.trips});
        if throttled {
            circuit["reason"] = json!(reason);
        }
        if let Some(at) = &breaker.opened_at {
            circuit["openedAt"] = json!(at);
        }
        if let Some(at) = &breaker.retry_at {
            circuit["retryAt"] = json!(at);
        }
        let patch = json!({"apiVersion": "wasmop.dev/v1alpha1", "kind": "WasmPlugin", "metadata": {"name": plugin},
            "status": {"circuitBreaker": circuit, "conditions": [condition]}});
        let params = PatchParams::apply(BREAKER_FIELD_MANAGER).force();
        let object = match api.patch_status(plugin, &params, &Patch::Apply(&patch)).await {
            Ok(o) => o,
            Err(kube::Error::Api(e)) if e.code == 404 => {
                tracing::debug!(plugin, "no WasmPlugin object to record the circuit breaker on");
                return;
            }
            Err(e) => {
                tracing::warn!(plugin, error = %e, "cannot write the circuit breaker to the WasmPlugin status");
                return;
            }
        };
        if opened {
            self.warn_opened(plugin, &object, &breaker.message).await;
        }
    }

    /// A Warning event `CircuitBreakerOpened` about the `WasmPlugin` object.
    ///
    /// # Caveats
    /// Written to `default`: an `events.k8s.io/v1` Event about a cluster-scoped object lives in
    /// `default` or `kube-system` (the API server accepts no other namespace), and the host
    /// stays out of `kube-system`; `default` is also where kube's recorder writes such events.
    async fn warn_opened(&self, plugin: &str, object: &DynamicObject, message: &str) {
        use k8s_openapi::api::core::v1::ObjectReference;
        use k8s_openapi::api::events::v1::Event as KubeEvent;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
        let now = k8s_openapi::jiff::Timestamp::now();
        let instance = std::env::var("POD_NAME").or_else(|_| std::env::var("HOSTNAME")).unwrap_or_else(|_| "wasmop".into());
        let event = KubeEvent {
            // Named as client-go and kube name events: the object, a dot, the time in hex.
            metadata: ObjectMeta { name: Some(format!("{plugin}.{:x}", now.as_nanosecond())), ..ObjectMeta::default() },
            event_time: Some(MicroTime(now)),
            type_: Some("Warning".into()),
            reason: Some("CircuitBreakerOpened".into()),
            action: Some("Throttle".into()),
            note: Some(message.chars().take(1024).collect()),
            regarding: Some(ObjectReference {
                api_version: Some("wasmop.dev/v1alpha1".into()),
                kind: Some("WasmPlugin".into()),
                name: Some(plugin.into()),
                uid: object.metadata.uid.clone(),
                resource_version: object.metadata.resource_version.clone(),
                ..ObjectReference::default()
            }),
            reporting_controller: Some(format!("wasmop/{plugin}")),
            reporting_instance: Some(instance.chars().take(128).collect()),
            ..KubeEvent::default()
        };
        let events: Api<KubeEvent> = Api::namespaced(self.client.clone(), "default");
        if let Err(e) = events.create(&PostParams::default(), &event).await {
            tracing::warn!(plugin, error = %e, "cannot record the CircuitBreakerOpened event");
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

/// Whether a host of `scope` wrote `object` (one without the annotation: a host for the whole
/// cluster).
fn written_by(object: &DynamicObject, scope: &str) -> bool {
    let annotations = object.metadata.annotations.as_ref();
    annotations.and_then(|a| a.get(SCOPE_ANNOTATION)).map_or("*", String::as_str) == scope
}

/// Whether a `WasmPlugin` says its plugin was serving finalizing calls (or still could not,
/// its file missing): its parents may hold the finalizer.
fn was_finalizing(object: &DynamicObject) -> bool {
    let conditions = object.data.pointer("/status/conditions").and_then(serde_json::Value::as_array);
    conditions.into_iter().flatten().any(|c| c["type"] == "Ready" && (c["reason"] == FINALIZING || c["reason"] == FILE_MISSING))
}

/// Whether a `WasmPlugin` is a file report (labelled [`FILE_REPORT_LABEL`]), not a plugin's.
fn is_file_report(object: &DynamicObject) -> bool {
    object.metadata.labels.as_ref().and_then(|l| l.get(FILE_REPORT_LABEL)).is_some_and(|v| v == "true")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(annotation: Option<&str>) -> DynamicObject {
        let annotations = annotation.map(|scope| [(SCOPE_ANNOTATION.to_owned(), scope.to_owned())].into());
        let metadata = kube::api::ObjectMeta { name: Some("memcached".into()), annotations, ..Default::default() };
        DynamicObject { types: None, metadata, data: serde_json::Value::Null }
    }

    #[test]
    fn a_wasmplugin_belongs_to_the_scope_that_wrote_it_and_an_unmarked_one_to_the_whole_cluster() {
        assert!(written_by(&object(Some("a,b")), "a,b"));
        assert!(!written_by(&object(Some("a,b")), "c"));
        assert!(!written_by(&object(Some("a,b")), "*"));
        assert!(written_by(&object(None), "*"));
        assert!(!written_by(&object(None), "a,b"));
    }
}
