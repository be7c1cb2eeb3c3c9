//! A sharded worker's check before it reconciles: the plugin controller's side of
//! [`crate::shard::hand_over`] (is the parent this replica's, is it draining).

use kube::api::{Api, DynamicObject};

use super::mapping::ObjectKey;
use super::plugin_controller::PluginController;
use crate::objects::ObjectCache;
use crate::shard::{Handover, HeldParent, hand_over};

impl PluginController {
    /// Replica `me`'s handover of the parent `key`, read from this host's cache:
    /// [`Handover::Reconcile`] when it is its own and not draining; otherwise what was done
    /// instead (see [`crate::shard::hand_over`]).
    pub(super) async fn hand_over(&self, key: &ObjectKey, me: &str) -> Handover {
        let plugin = self.plugin();
        let manifest = plugin.manifest();
        let cached = self.shared.watches.get(&manifest.parent, key.namespace.as_deref(), &key.name);
        let api: Api<DynamicObject> = match &key.namespace {
            Some(ns) => Api::namespaced_with(self.shared.client.clone(), ns, &self.parent.resource),
            None => Api::all_with(self.shared.client.clone(), &self.parent.resource),
        };
        let parent = HeldParent {
            plugin: &manifest.name,
            api,
            namespace: key.namespace.as_deref(),
            name: &key.name,
            cached: cached.as_deref().map(|p| p.head()),
        };
        hand_over(parent, me).await
    }
}
