//! One reconcile of one parent: cache → request → plugin → plan (checks) → writes.

use std::sync::Arc;

use serde_json::Value;
use tracing::Instrument;

use super::mapping::ObjectKey;
use super::plugin_controller::{PluginController, ReconcileOutcome};
use crate::actions::{
    ActionError, Audit, HostConditions, ReconcileContext, Writer, failure_status_patch, has_finalizer, parent_name, plan,
    timestamp_now,
};
use crate::contract::{Event, EventType, Failure, Request};
use crate::objects::{ObjectCache, visible_to};

impl PluginController {
    /// Reconcile the parent `key` with the controller's current plugin version.
    pub(super) async fn reconcile(&self, key: &ObjectKey) -> ReconcileOutcome {
        reconcile(self, key).await
    }
}

/// [`PluginController::reconcile`].
async fn reconcile(controller: &PluginController, key: &ObjectKey) -> ReconcileOutcome {
    let plugin = controller.plugin();
    let manifest = Arc::clone(plugin.manifest());
    let watches = Arc::clone(&controller.shared.watches);
    let Some(cached) = watches.get(&manifest.parent, key.namespace.as_deref(), &key.name) else {
        return ReconcileOutcome::Done { requeue_after: None, wrote: false };
    };
    // The host's own last status write, when the watch has not delivered it yet.
    let parent = controller.writes.statuses.freshest(cached);
    let generation = parent.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or_default();
    let span = tracing::info_span!("reconcile", plugin = %manifest.name, version = %manifest.version, kind = %manifest.parent.kind,
        namespace = key.namespace.as_deref().unwrap_or(""), name = %key.name, generation);
    let parent_name = parent_name(&manifest.parent.kind, key.namespace.as_deref(), &key.name);
    let field_manager = manifest.field_manager();
    async move {
        let audit = Audit {
            plugin: &manifest.name,
            version: &manifest.version,
            digest: plugin.digest(),
            parent: &parent_name,
            field_manager: &field_manager,
        };
        let context = ReconcileContext::new(&manifest, &*controller.shared.discovery, &*watches, &parent).grants(plugin.grants());
        let writer = controller.writes.writer(context, audit);
        let deleting = parent.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
        let finalizer = manifest.finalizer_name();
        if manifest.finalizer {
            let held = has_finalizer(&parent, &finalizer);
            if deleting && !held {
                return ReconcileOutcome::Done { requeue_after: None, wrote: false };
            }
            if !deleting && !held {
                if let Err(e) = writer.add_finalizer(&finalizer).await {
                    tracing::warn!(error = %e, "cannot add finalizer; retrying");
                    return ReconcileOutcome::Retry;
                }
                // The update event re-queues the parent with the finalizer in place.
                return ReconcileOutcome::Done { requeue_after: None, wrote: true };
            }
        } else if deleting {
            return ReconcileOutcome::Done { requeue_after: None, wrote: false };
        }

        let mut request =
            match Request::gather(Arc::clone(&parent), &visible_to(&manifest, plugin.grants(), &parent), &*watches, true) {
                Ok(r) => r,
                Err(e) => return fail(controller, &writer, "InvalidSelector", &e.to_string(), false).await,
            };
        request.finalizing = deleting;
        request.config = (*controller.config.current()).clone();
        let cache: Arc<dyn ObjectCache> = watches.clone();
        let metrics = &controller.shared.metrics;
        // The reservation of the response's bytes is held until it is written.
        // The call's time is charged to the plugin's CPU share, failed or not.
        let called = std::time::Instant::now();
        let (response, stats, _reserved) = match plugin.reconcile_reserved(&request, cache).await {
            Ok(ok) => ok,
            Err(e) => {
                controller.cpu.charge(called.elapsed());
                return fail_showing(controller, &writer, e.reason(), &e.to_string(), e.is_retryable(), e.failure()).await;
            }
        };
        controller.cpu.charge(stats.elapsed);
        let now = timestamp_now();
        let host_conditions = HostConditions { now: &now, reconciled: controller.reconciled_condition };
        let mut plan = match plan(&context, response, host_conditions) {
            Ok(plan) => plan,
            Err(e) => {
                metrics.refused(&manifest.name);
                writer.refused(&e);
                return fail(controller, &writer, e.reason(), &format!("response refused, nothing written: {e}"), true).await;
            }
        };
        if let Some(me) = &controller.shard {
            // Children follow their parent: cached by its replica only.
            crate::shard::label_for_replica(&mut plan.apply, me);
        }
        let written = match writer.execute(&plan).await {
            Ok(written) => written,
            Err(ActionError::Refused(refused)) => {
                metrics.refused(&manifest.name);
                writer.refused(&refused);
                let message = format!("response refused, nothing written: {refused}");
                return fail(controller, &writer, refused.reason(), &message, true).await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "writing the response failed; retrying with backoff");
                return ReconcileOutcome::Retry;
            }
        };
        for event in &plan.events {
            writer.event(&controller.events, event).await;
        }
        if deleting && plan.finalized {
            // After the host's own status write, the finalizer's removal names the parent's new
            // resourceVersion: the cached one would conflict and cost a second finalizing call.
            // (Only then is the parent copied: not on every status write.)
            let current = written.parent_resource_version.as_ref().map(|version| {
                let mut current = parent.value().clone();
                current["metadata"]["resourceVersion"] = version.as_str().into();
                current
            });
            if let Err(e) = writer.remove_finalizer(current.as_ref().unwrap_or(&parent), &finalizer).await {
                tracing::warn!(error = %e, "cannot remove finalizer; retrying");
                return ReconcileOutcome::Retry;
            }
        }
        tracing::debug!(elapsed = ?stats.elapsed, applied = written.applied, unchanged = written.unchanged,
            deleted = written.deleted, status = written.status, "reconciled");
        ReconcileOutcome::Done { requeue_after: plan.requeue_after, wrote: written.anything() || plan.finalized }
    }
    .instrument(span)
    .await
}

/// Report a failed reconcile on the parent: a log line, a Warning event and a `Reconciled`
/// condition saying why. Writes nothing else.
async fn fail(controller: &PluginController, writer: &Writer<'_>, reason: &str, message: &str, retry: bool) -> ReconcileOutcome {
    fail_showing(controller, writer, reason, message, retry, None).await
}

/// [`fail`], and the status fields and conditions the plugin's own failure asks the parent to
/// show (WIT 0.3.0 on), in the same status patch as the host's `Reconciled` condition: applied
/// as a response's (the status subresource, `observedGeneration` on each condition); the
/// runtime checked them as a response's. The host's `Reconciled=False` wins over a
/// `Reconciled` condition of the plugin's.
async fn fail_showing(
    controller: &PluginController,
    writer: &Writer<'_>,
    reason: &str,
    message: &str,
    retry: bool,
    shown: Option<&Failure>,
) -> ReconcileOutcome {
    tracing::warn!(reason, retry, "{message}");
    let event = Event { type_: EventType::Warning, reason: reason.into(), action: "Reconcile".into(), note: message.into() };
    writer.event(&controller.events, &event).await;
    if let Some(patch) = failure_status_patch(writer.context.parent, reason, message, shown, &timestamp_now())
        && let Err(e) = writer.patch_status(&patch).await
    {
        tracing::warn!(error = %e, "cannot record the failure in the parent's status");
    }
    if retry { ReconcileOutcome::Retry } else { ReconcileOutcome::GiveUp }
}
