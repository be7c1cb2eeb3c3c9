//! [`OnRemove`]: what the host does with a plugin's finalizers when its file is removed.

use serde::Deserialize;

/// What happens to the parents still holding a plugin's finalizer when its file leaves the
/// plugins directory (policy field `onRemove`). Plugins without `finalizer: true` simply stop.
///
/// ```
/// use wasmop::policy::{HostPolicy, OnRemove};
/// let policy = HostPolicy::from_yaml("plugins: {db: {onRemove: releaseFinalizers}}").unwrap();
/// assert_eq!(policy.for_plugin("db").on_remove, OnRemove::ReleaseFinalizers);
/// assert_eq!(policy.for_plugin("other").on_remove, OnRemove::KeepFinalizing);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum OnRemove {
    /// The default: the last version keeps running for finalizing calls only. A parent being
    /// deleted still gets its finalizing call and loses the finalizer; other parents (new,
    /// updated) are not reconciled and get no finalizer. Once no parent holds the finalizer the
    /// plugin stops. Its `WasmPlugin` says `Ready=False`, reason `Finalizing`, meanwhile.
    #[default]
    KeepFinalizing,
    /// Stop at once and remove the finalizer from every parent holding it, without a finalizing
    /// call, with a Warning event `FinalizerReleased` on each: the plugin's cleanup is skipped.
    ReleaseFinalizers,
}

impl OnRemove {
    /// The policy spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            OnRemove::KeepFinalizing => "keepFinalizing",
            OnRemove::ReleaseFinalizers => "releaseFinalizers",
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::{HostPolicy, OnRemove, PolicyError};

    #[test]
    fn on_remove_defaults_to_keep_finalizing_and_is_set_per_plugin() {
        let p =
            HostPolicy::from_yaml("defaults: {onRemove: releaseFinalizers}\nplugins: {a: {onRemove: keepFinalizing}}").unwrap();
        assert_eq!(p.for_plugin("a").on_remove, OnRemove::KeepFinalizing);
        assert_eq!(p.for_plugin("b").on_remove, OnRemove::ReleaseFinalizers);
        assert_eq!(HostPolicy::from_yaml("").unwrap().for_plugin("a").on_remove, OnRemove::KeepFinalizing);
        assert_eq!(OnRemove::ReleaseFinalizers.as_str(), "releaseFinalizers");
    }

    #[test]
    fn an_unknown_on_remove_value_is_an_error() {
        let err = HostPolicy::from_yaml("plugins: {a: {onRemove: strip}}").unwrap_err();
        assert!(matches!(err, PolicyError::Syntax(_)), "{err}");
        assert!(err.to_string().contains("unknown variant `strip`"), "{err}");
    }
}
