//! What sharding needs from the host that runs the plugins, as a trait the layer above
//! (`controller::Manager`) implements: the sharder and the membership read the running
//! plugins' kinds and cache sizes through it, so this layer never names the controller.

use futures::future::BoxFuture;

use super::PluginKinds;
use crate::cluster::InstallScope;

/// The host's running plugins as sharding sees them.
pub trait ShardHost: Send + Sync {
    /// The client every shard write and watch goes through.
    fn client(&self) -> &kube::Client;

    /// Where the host works: the namespaces the sharder watches parents in.
    fn install(&self) -> &InstallScope;

    /// Every running plugin's parent and child kinds (what the sharder assigns).
    fn families(&self) -> BoxFuture<'_, Vec<PluginKinds>>;

    /// Per running plugin, how many of its parents this host's cache holds.
    fn cached_parents(&self) -> Vec<(String, usize)>;

    /// Per watched kind, how many objects this host's cache holds.
    fn cached_objects(&self) -> Vec<(String, usize)>;
}
