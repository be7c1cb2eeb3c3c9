//! One reconcile of one parent: cache → request → plugin → plan (checks) → writes.

use std::sync::Arc;

use serde_json::Value;
use tracing::Instrument;

use super::mapping::ObjectKey;
use super::plugin_controller::{PluginController, ReconcileOutcome};
use crate::actions::{
    ActionError, Audit, HostConditions, Plan, ReconcileContext, Writer, failure_status_patch, has_finalizer, parent_name,
    plan as plan_response, timestamp_now,
};
use crate::contract::{Event, EventType, Failure, Object, ObjectRef, Request};
use crate::objects::{ObjectCache, controller_uid, is_of_plugin, visible_to};
use crate::runtime::{Plugin, Reservation};

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
    // The whole parent, decoded once: the checks read its status (the cache keeps its text).
    let parent_value = parent.to_value();
    let generation = parent.head().pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or_default();
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
        let context =
            ReconcileContext::new(&manifest, &*controller.shared.discovery, &*watches, &parent_value).grants(plugin.grants());
        let writer = controller.writes.writer(context, audit);
        let deleting = parent.head().pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
        let finalizer = manifest.finalizer_name();
        if manifest.finalizer {
            let held = has_finalizer(parent.head(), &finalizer);
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
            match Request::gather(Arc::clone(&parent), &visible_to(&manifest, plugin.grants(), parent.head()), &*watches, true) {
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
        let (response, stats, reserved) = match plugin.reconcile_reserved(&request, cache).await {
            Ok(ok) => ok,
            Err(e) => {
                controller.cpu.charge(called.elapsed());
                return fail_showing(controller, &writer, e.reason(), &e.to_string(), e.is_retryable(), e.failure()).await;
            }
        };
        controller.cpu.charge(stats.elapsed);
        let now = timestamp_now();
        let host_conditions = HostConditions { now: &now, reconciled: controller.reconciled_condition };
        let mut plan = match plan_response(&context, response, host_conditions) {
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
        let mut written = match writer.execute_children(&plan).await {
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
        let mut reserved = Some(reserved);
        let created = std::mem::take(&mut written.answered);
        if !deleting && !created.is_empty() {
            // The first answer's bytes go back before the second's are reserved: a worker
            // never holds a reservation while it waits for another (a response larger than the
            // budget waits until it is alone, and would wait forever for such a worker).
            drop(reserved.take());
            let again = AskAgain { controller, plugin: &plugin, context: &context, request: &request, host_conditions };
            reserved = again.with_created(created, &mut plan, key).await;
        }
        if let Err(e) = writer.execute_status(&plan, &mut written).await {
            tracing::warn!(error = %e, "writing the response failed; retrying with backoff");
            return ReconcileOutcome::Retry;
        }
        for event in &plan.events {
            writer.event(&controller.events, event).await;
        }
        if deleting && plan.finalized {
            // After the host's own status write, the finalizer's removal names the parent's new
            // resourceVersion: the cached one would conflict and cost a second finalizing call.
            // (Only then is the parent copied: not on every status write.)
            let current = written.parent_resource_version.as_ref().map(|version| {
                let mut current = parent_value.clone();
                current["metadata"]["resourceVersion"] = version.as_str().into();
                current
            });
            if let Err(e) = writer.remove_finalizer(current.as_ref().unwrap_or(&parent_value), &finalizer).await {
                tracing::warn!(error = %e, "cannot remove finalizer; retrying");
                return ReconcileOutcome::Retry;
            }
        }
        drop(reserved);
        tracing::debug!(elapsed = ?stats.elapsed, applied = written.applied, unchanged = written.unchanged,
            deleted = written.deleted, status = written.status, "reconciled");
        ReconcileOutcome::Done { requeue_after: plan.requeue_after, wrote: written.anything() || plan.finalized }
    }
    .instrument(span)
    .await
}

/// What a reconcile needs to ask its plugin once more: the answer's children written, the
/// status not yet.
struct AskAgain<'a> {
    controller: &'a PluginController,
    plugin: &'a Plugin,
    context: &'a ReconcileContext<'a>,
    /// The request of the first answer.
    request: &'a Request,
    host_conditions: HostConditions<'a>,
}

impl AskAgain<'_> {
    /// A reconcile whose writes created children the plugin had not seen asks it once more,
    /// with those children as the API server stored them, before writing the parent's status:
    /// a status computed from the children's absence ("the Deployment does not exist yet") is
    /// then not written only to be replaced one reconcile later, when the watch delivers the
    /// new children. The second answer is taken when it makes the same writes to the children
    /// ([`Plan::settle`]): its status, requeue and new events. Otherwise, or when the plugin
    /// fails or its answer is refused, the first answer's status is written, and the watch's
    /// event of the new children reconciles the parent again, as without this.
    ///
    /// Only children the request would have held are shown: controlled by the parent and of
    /// the plugin, of a child kind it sees. When the second answer is taken, the children it
    /// was shown are remembered ([`ShownChildren`](super::shown::ShownChildren)): their
    /// creation coming back through the watch does not queue the parent `key` again. The call
    /// is charged to the plugin's CPU share. The reservation of the second answer's bytes is
    /// returned, to be held until the status is written; the caller gives the first answer's
    /// back before it asks again.
    async fn with_created(&self, created: Vec<Value>, plan: &mut Plan, key: &ObjectKey) -> Option<Reservation> {
        let manifest = self.context.manifest;
        let parent = &self.request.parent;
        let uid = parent.head().pointer("/metadata/uid").and_then(Value::as_str)?;
        let visible = visible_to(manifest, self.plugin.grants(), parent.head());
        let unseen: Vec<Arc<Object>> = created
            .into_iter()
            .filter(|o| controller_uid(o) == Some(uid) && is_of_plugin(o, &manifest.name))
            .filter(|o| ObjectRef::of_object(o).is_some_and(|r| visible.sees_children_of(&r.kind())))
            .map(|o| Arc::new(Object::from(o)))
            .collect();
        if unseen.is_empty() {
            return None;
        }
        let mut request = self.request.clone();
        request.children.extend(unseen.iter().cloned());
        let cache: Arc<dyn ObjectCache> = self.controller.shared.watches.clone();
        let called = std::time::Instant::now();
        let (response, stats, reserved) = match self.plugin.reconcile_reserved(&request, cache).await {
            Ok(answered) => answered,
            Err(e) => {
                self.controller.cpu.charge(called.elapsed());
                tracing::debug!(error = %e, "asked again with the children it created, the plugin failed: the first answer's status stands");
                return None;
            }
        };
        self.controller.cpu.charge(stats.elapsed);
        let mut again = match plan_response(self.context, response, self.host_conditions) {
            Ok(again) => again,
            Err(e) => {
                tracing::debug!(error = %e, "asked again with the children it created, the answer is refused: the first answer's status stands");
                return None;
            }
        };
        if let Some(me) = &self.controller.shard {
            crate::shard::label_for_replica(&mut again.apply, me);
        }
        if plan.settle(again) {
            for child in &unseen {
                self.controller.shown.record(child.head(), key);
            }
        } else {
            tracing::debug!(
                "asked again with the children it created, the plugin wants other writes: the first answer's status stands"
            );
        }
        Some(reserved)
    }
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
