//! [`ReconciledCondition`]: when the host writes its own `Reconciled` condition on a plugin's
//! parents.

use serde::Deserialize;

/// When the host writes its `Reconciled` condition (policy field `reconciledCondition`).
///
/// The condition is the host's own word on the last reconcile (like Crossplane's `Synced`):
/// `True` with reason `ReconcileSucceeded`, or `False` with the reason a reconcile failed (the
/// plugin trapped, its answer was refused, an apply failed). It costs the API server: with it
/// every parent carries one more condition and one more managed field set, which every status
/// write and every watch event of the parent pays (measured on the convergence bench: about 15 %
/// more kube-apiserver CPU for a status of one condition; BENCHMARKS.md, "What the API server
/// pays for the host's status").
///
/// ```
/// use wasmop::policy::{HostPolicy, ReconciledCondition};
/// let policy = HostPolicy::from_yaml("plugins: {busy: {reconciledCondition: onFailure}}").unwrap();
/// assert_eq!(policy.for_plugin("busy").reconciled_condition, ReconciledCondition::OnFailure);
/// assert_eq!(policy.for_plugin("other").reconciled_condition, ReconciledCondition::Always);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ReconciledCondition {
    /// The default: every reconcile sets it, `True` or `False`. `kubectl wait
    /// --for=condition=Reconciled` works on every parent.
    #[default]
    Always,
    /// Only a failed reconcile sets it (`False`, with the reason); the next successful reconcile
    /// removes it again. A healthy parent carries only the plugin's own status, so a failure is
    /// still visible on the parent (and as a Warning event) but success is the absence of the
    /// condition: `kubectl wait --for=condition=Reconciled` does not work on such parents.
    OnFailure,
}

impl ReconciledCondition {
    /// The policy spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ReconciledCondition::Always => "always",
            ReconciledCondition::OnFailure => "onFailure",
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::{HostPolicy, PolicyError, ReconciledCondition};

    #[test]
    fn reconciled_condition_defaults_to_always_and_is_set_per_plugin() {
        let p = HostPolicy::from_yaml("defaults: {reconciledCondition: onFailure}\nplugins: {a: {reconciledCondition: always}}")
            .unwrap();
        assert_eq!(p.for_plugin("a").reconciled_condition, ReconciledCondition::Always);
        assert_eq!(p.for_plugin("b").reconciled_condition, ReconciledCondition::OnFailure);
        assert_eq!(HostPolicy::from_yaml("").unwrap().for_plugin("a").reconciled_condition, ReconciledCondition::Always);
        assert_eq!(ReconciledCondition::OnFailure.as_str(), "onFailure");
    }

    #[test]
    fn an_unknown_reconciled_condition_value_is_an_error() {
        let err = HostPolicy::from_yaml("plugins: {a: {reconciledCondition: never}}").unwrap_err();
        assert!(matches!(err, PolicyError::Syntax(_)), "{err}");
        assert!(err.to_string().contains("unknown variant `never`"), "{err}");
    }
}
