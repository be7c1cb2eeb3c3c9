//! Sharding across replicas, with Kubernetes primitives only (the design of
//! kubernetes-controller-sharding):
//!
//! - membership: every replica renews its own Lease ([`Membership`]); a Lease not renewed
//!   within its duration is a dead replica;
//! - assignment: the elected leader's [`Sharder`] hashes each parent's `namespace/name` onto
//!   the live replicas ([`Ring`]) and writes the owner into the parent's [`SHARD_LABEL`];
//! - each replica watches only the parents labelled for it (the parent watch's label
//!   selector, [`shard_selector`]), so both the work and the parent cache divide;
//! - children follow their parent: a replica stamps its shard label on every child it applies
//!   ([`stamp`]) and watches only its own children ([`child_selector`]); the sharder relabels a
//!   parent's children for its new owner before the parent itself, so the child caches divide
//!   too;
//! - handover: a live owner is never bypassed. The sharder marks a parent to move with
//!   [`DRAIN_LABEL`]; its owner finishes any reconcile running for it, then removes both labels
//!   ([`hand_over`]); only then the sharder labels it for the new owner. A dead replica's parents
//!   are relabelled at once.

mod drain;
mod feeds;
mod host;
mod membership;
pub mod ring;
mod sharder;

pub use drain::{Handover, HeldParent, hand_over};
pub use host::ShardHost;
pub use membership::{Membership, MembershipError, lease_name};
pub use ring::Ring;
pub use sharder::{Move, PluginKinds, RESYNC, Sharder, children_owner, decide};

/// The label naming the replica a parent belongs to.
pub const SHARD_LABEL: &str = "wasmop.dev/shard";
/// Set (to `true`) by the sharder on a parent that moves away from its live owner.
pub const DRAIN_LABEL: &str = "drain.wasmop.dev/shard";
/// Marks the membership Leases (value `true`).
pub const LEASE_LABEL: &str = crate::policy::SHARD_LEASE_LABEL;
/// The field manager of the sharder's label writes.
pub const SHARDER_MANAGER: &str = "wasmop-sharder";

/// The label selector of the parents of replica `identity`.
pub fn shard_selector(identity: &str) -> String {
    format!("{SHARD_LABEL}={identity}")
}

/// The label selector of the children of replica `identity`: the host's children (the
/// selector of an unsharded host's child watches) labelled for it.
pub fn child_selector(identity: &str) -> String {
    format!("{},{}", crate::actions::managed_selector(), shard_selector(identity))
}

/// Label each of `children` (objects with a `metadata` map, stamped with the host's labels)
/// for replica `identity`, over whatever the plugin wrote under [`SHARD_LABEL`].
pub fn label_for_replica(children: &mut [serde_json::Value], identity: &str) {
    for child in children {
        child["metadata"]["labels"][SHARD_LABEL] = serde_json::Value::String(identity.to_owned());
    }
}

/// `name` if it can name a shard: a label value that also makes a Lease name (lowercase
/// letters, digits, `-` and `.`, starting and ending with a letter or digit, at most 50
/// characters, leaving room for the Lease's `wasmop-shard-` prefix). Pod names qualify.
///
/// # Errors
/// A message naming the value and what is wrong with it.
pub fn shard_name(name: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if name.len() > 50 {
        return Err(format!("{name:?} is not a shard name: longer than 50 characters"));
    }
    if !name.chars().all(allowed) || !edge(name.chars().next()) || !edge(name.chars().next_back()) {
        return Err(format!(
            "{name:?} is not a shard name: use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
        ));
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_names_are_shard_names_and_others_are_refused_naming_them() {
        assert_eq!(shard_name("wasmop-7d9f8-x2x4z").as_deref(), Ok("wasmop-7d9f8-x2x4z"));
        assert_eq!(shard_name("host.1").as_deref(), Ok("host.1"));
        for bad in ["", "Host", "a_b", "-a", "a-", &"a".repeat(51)] {
            let err = shard_name(bad).unwrap_err();
            assert!(err.starts_with(&format!("{bad:?} is not a shard name")), "{err}");
        }
    }

    #[test]
    fn a_replica_selects_its_own_label() {
        assert_eq!(shard_selector("host-a"), "wasmop.dev/shard=host-a");
        assert_eq!(child_selector("host-a"), "app.kubernetes.io/managed-by=wasmop,wasmop.dev/shard=host-a");
    }

    #[test]
    fn stamped_children_carry_the_replicas_label_over_the_plugins() {
        let mut children = vec![
            serde_json::json!({"metadata": {"name": "a", "labels": {"app": "x", SHARD_LABEL: "forged"}}}),
            serde_json::json!({"metadata": {"name": "b", "labels": {}}}),
        ];
        label_for_replica(&mut children, "host-a");
        assert_eq!(children[0]["metadata"]["labels"], serde_json::json!({"app": "x", SHARD_LABEL: "host-a"}));
        assert_eq!(children[1]["metadata"]["labels"][SHARD_LABEL], "host-a");
    }
}
