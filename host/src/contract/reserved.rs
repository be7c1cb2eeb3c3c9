//! The host's own kinds: no plugin may declare them, as parent, child, related kind or webhook
//! resource. Every object of them is the host's (its `WasmPlugin` reports, see
//! `reload::cluster_status`), and a plugin that could write, read or veto them could forge
//! every plugin's report or stall the host.

use super::kind::Kind;

/// The API group of the host's own kinds (`WasmPlugin` and any the host adds later).
pub const HOST_API_GROUP: &str = "wasmop.dev";

/// Whether `kind` is one of the host's own kinds (any kind of [`HOST_API_GROUP`], every
/// version).
///
/// ```
/// use wasmop::contract::{Kind, is_host_kind};
/// assert!(is_host_kind(&Kind::new("wasmop.dev", "v1alpha1", "WasmPlugin")));
/// assert!(is_host_kind(&Kind::new("wasmop.dev", "v2", "Anything")));
/// assert!(!is_host_kind(&Kind::new("test.wasmop.dev", "v1", "Testbed")));
/// ```
pub fn is_host_kind(kind: &Kind) -> bool {
    kind.group == HOST_API_GROUP
}

/// Whether a webhook rule's API group reaches the host's own kinds by name (the group itself).
/// A `*` group reaches them too; the host keeps those off its own objects when it registers
/// the webhook.
pub fn is_host_group(group: &str) -> bool {
    group == HOST_API_GROUP
}
