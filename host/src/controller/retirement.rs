//! A plugin whose file was removed while parents still hold its finalizer: its last version
//! kept for finalizing calls only ([`OnRemove::KeepFinalizing`]), or its finalizers released
//! ([`OnRemove::ReleaseFinalizers`]). See [`crate::controller::Manager::remove`].
//!
//! [`OnRemove::KeepFinalizing`]: crate::policy::OnRemove::KeepFinalizing
//! [`OnRemove::ReleaseFinalizers`]: crate::policy::OnRemove::ReleaseFinalizers

use std::time::Duration;

use kube::api::{Api, DynamicObject, ListParams};
use serde_json::Value;

use super::mapping::ObjectKey;
use super::plugin_controller::{PluginController, Serving};
use crate::actions::{Audit, AuditObject, Verb, has_finalizer, parent_name, remove_finalizer};
use crate::contract::{Event, EventType};
use crate::objects::ObjectCache;

/// How often a retiring plugin counts its finalizer's holders without a watch event.
const RECOUNT: Duration = Duration::from_secs(1);

/// Reason of the Warning event on a parent whose finalizer the host removed.
const FINALIZER_RELEASED: &str = "FinalizerReleased";

impl PluginController {
    /// Parents in the cache that hold the plugin's finalizer (0 for a plugin without one).
    pub fn finalizer_holders(&self) -> usize {
        let manifest = std::sync::Arc::clone(self.plugin().manifest());
        if !manifest.finalizer {
            return 0;
        }
        let finalizer = manifest.finalizer_name();
        self.shared.watches.list(&manifest.parent, None).iter().filter(|p| has_finalizer(p.head(), &finalizer)).count()
    }

    /// From now on reconcile only parents being deleted (their finalizing call), until a new
    /// version is swapped in ([`PluginController::swap`]) or the controller stops.
    pub fn retire(&self) {
        self.serving.send_replace(Serving::FinalizingOnly);
        self.enqueue_all();
    }

    /// Which parents are reconciled now.
    pub fn serving(&self) -> Serving {
        *self.serving.borrow()
    }

    /// Whether the worker skips `key`: the plugin does not reconcile (it only serves admission
    /// webhooks: its controller keeps the watches its lookups read and calls nothing), or
    /// finalizing only and the parent is not being deleted.
    pub(super) fn skips(&self, key: &ObjectKey) -> bool {
        if !self.plugin().reconciles() {
            return true;
        }
        if *self.serving.borrow() != Serving::FinalizingOnly {
            return false;
        }
        let plugin = self.plugin();
        let parent = self.shared.watches.get(&plugin.manifest().parent, key.namespace.as_deref(), &key.name);
        parent.is_none_or(|p| p.head().pointer("/metadata/deletionTimestamp").is_none_or(Value::is_null))
    }

    /// Wait while the plugin serves finalizing calls only: `true` once no parent holds its
    /// finalizer any more, `false` if it serves every parent again or stopped meanwhile.
    pub async fn until_released(&self) -> bool {
        let mut serving = self.serving.subscribe();
        loop {
            if *serving.borrow_and_update() != Serving::FinalizingOnly {
                return false;
            }
            if self.finalizer_holders() == 0 {
                return true;
            }
            tokio::select! {
                _ = serving.changed() => {}
                () = self.changed.notified() => {}
                () = tokio::time::sleep(RECOUNT) => {}
            }
        }
    }

    /// Remove the plugin's finalizer from every parent holding it (read from the API server,
    /// not the cache, in the host's namespaces), each with a Warning event `FinalizerReleased`.
    /// A parent changed meanwhile is read again (up to 5 tries); other failures are logged and
    /// skipped. Call it after [`PluginController::stop`], so no reconcile adds the finalizer
    /// back.
    ///
    /// # Errors
    /// When the parents cannot be listed.
    pub async fn release_finalizers(&self) -> kube::Result<usize> {
        let plugin = self.plugin();
        let manifest = plugin.manifest();
        let finalizer = manifest.finalizer_name();
        let resource = &self.parent.resource;
        let client = &self.shared.client;
        // A namespaced install lists (and may list) only its namespaces.
        let lists: Vec<Api<DynamicObject>> = match self.shared.watches.install().namespaces() {
            Some(names) => names.iter().map(|ns| Api::namespaced_with(client.clone(), ns, resource)).collect(),
            None => vec![Api::all_with(client.clone(), resource)],
        };
        let mut parents = Vec::new();
        for list in &lists {
            parents.extend(list.list(&ListParams::default()).await?.items);
        }
        let mut released = 0;
        for object in parents {
            let api = match object.metadata.namespace.as_deref() {
                Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
                None => Api::all_with(client.clone(), resource),
            };
            let name = object.metadata.name.clone().unwrap_or_default();
            let object_namespace = object.metadata.namespace.clone();
            let mut current = Some(object);
            for _ in 0..5 {
                let Some(object) = current.take() else { break };
                let mut parent = serde_json::to_value(&object).unwrap_or(Value::Null);
                parent["apiVersion"] = resource.api_version.clone().into();
                parent["kind"] = resource.kind.clone().into();
                if !has_finalizer(&parent, &finalizer) {
                    break;
                }
                let removed = remove_finalizer(&api, &parent, &finalizer, &manifest.field_manager()).await;
                let parent_name = parent_name(&resource.kind, object_namespace.as_deref(), &name);
                let audit = Audit {
                    plugin: &manifest.name,
                    version: &manifest.version,
                    digest: plugin.digest(),
                    parent: &parent_name,
                    field_manager: &manifest.field_manager(),
                };
                let target = AuditObject {
                    api_version: &resource.api_version,
                    kind: &resource.kind,
                    namespace: object_namespace.as_deref().unwrap_or_default(),
                    name: &name,
                };
                audit.wrote(Verb::FinalizerRemove, target, &finalizer, removed.as_ref().map(drop));
                match removed {
                    Ok(()) => {
                        released += 1;
                        let note = format!(
                            "plugin {} was removed from the host: its finalizer {finalizer} was removed without a finalizing \
                             call (host policy onRemove: releaseFinalizers)",
                            manifest.name
                        );
                        let event = Event {
                            type_: EventType::Warning,
                            reason: FINALIZER_RELEASED.into(),
                            action: "Release".into(),
                            note,
                        };
                        let recorded = self.events.try_publish(&parent, &event).await;
                        let target = AuditObject { api_version: "events.k8s.io/v1", kind: "Event", ..target };
                        audit.wrote(Verb::Event, target, FINALIZER_RELEASED, recorded.as_ref().map(drop));
                        if let Err(e) = recorded {
                            tracing::warn!(error = %e, reason = FINALIZER_RELEASED, "cannot record event");
                        }
                        tracing::warn!(plugin = %manifest.name, parent = %name, %finalizer, "finalizer released without a finalizing call");
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => match api.get_opt(&name).await {
                        Ok(fresh) => current = fresh,
                        Err(e) => tracing::warn!(plugin = %manifest.name, parent = %name, error = %e, "cannot re-read parent"),
                    },
                    Err(e) => {
                        tracing::warn!(plugin = %manifest.name, parent = %name, error = %e, "cannot release the finalizer");
                    }
                }
            }
        }
        Ok(released)
    }
}
