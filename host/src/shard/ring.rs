//! [`Ring`]: consistent hashing of parents onto the live replicas.
//!
//! Every member is placed on a 64-bit ring at [`VIRTUAL_NODES`] points (the hash of
//! `member#i`); a key (a parent's `namespace/name`) belongs to the member of the first point at
//! or after the key's own hash, wrapping around. Hashes are the first 8 bytes of SHA-256: the
//! same on every replica and every version of the host, so a new leader computes the same
//! assignment as the old one. When a member joins or leaves, only the keys between its points
//! and their predecessors move (about 1/N of them); the others keep their owner.

use sha2::{Digest, Sha256};

/// Points per member on the ring: enough that three members get each a third of 300 keys
/// within ±15 % (pinned by the tests below).
pub const VIRTUAL_NODES: usize = 200;

/// A consistent-hash ring of members; pure and cheap to rebuild on every membership change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ring {
    /// `(hash, index into members)`, sorted by hash.
    points: Vec<(u64, usize)>,
    /// The members, sorted and without duplicates.
    members: Vec<String>,
}

fn hash(text: &str) -> u64 {
    let digest = Sha256::digest(text.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

impl Ring {
    /// A ring of `members` (the order they are given in and duplicates do not matter).
    pub fn new<S: Into<String>>(members: impl IntoIterator<Item = S>) -> Self {
        let mut members: Vec<String> = members.into_iter().map(Into::into).collect();
        members.sort();
        members.dedup();
        let mut points: Vec<(u64, usize)> = members
            .iter()
            .enumerate()
            .flat_map(|(i, m)| (0..VIRTUAL_NODES).map(move |v| (hash(&format!("{m}#{v}")), i)))
            .collect();
        points.sort_unstable();
        Self { points, members }
    }

    /// The members, sorted.
    pub fn members(&self) -> &[String] {
        &self.members
    }

    /// The member `key` belongs to; `None` when the ring is empty.
    pub fn owner(&self, key: &str) -> Option<&str> {
        let h = hash(key);
        let at = self.points.partition_point(|(p, _)| *p < h);
        let (_, member) = self.points.get(at).or_else(|| self.points.first())?;
        Some(&self.members[*member])
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn keys(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("default/parent-{i}")).collect()
    }

    fn counts(ring: &Ring, keys: &[String]) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for key in keys {
            *counts.entry(ring.owner(key).expect("an owner").to_owned()).or_insert(0) += 1;
        }
        counts
    }

    #[test]
    fn three_members_get_each_a_third_of_300_keys_within_15_percent() {
        let ring = Ring::new(["host-a", "host-b", "host-c"]);
        let counts = counts(&ring, &keys(300));
        assert_eq!(counts.len(), 3, "{counts:?}");
        for (member, n) in &counts {
            assert!((85..=115).contains(n), "{member} owns {n} of 300: {counts:?}");
        }
    }

    #[test]
    fn other_names_and_sizes_stay_balanced_too() {
        for members in [vec!["wasmop-0", "wasmop-1", "wasmop-2"], vec!["a", "b", "c", "d"]] {
            let ring = Ring::new(members.clone());
            let keys: Vec<String> = (0..4000).map(|i| format!("ns-{}/cr-{i}", i % 7)).collect();
            let fair = keys.len() / members.len();
            for (member, n) in counts(&ring, &keys) {
                assert!(n.abs_diff(fair) * 100 <= fair * 15, "{member} owns {n}, fair is {fair}");
            }
        }
    }

    #[test]
    fn a_member_that_leaves_moves_only_its_own_keys() {
        let keys = keys(300);
        let before = Ring::new(["host-a", "host-b", "host-c"]);
        let after = Ring::new(["host-a", "host-c"]);
        for key in &keys {
            let (old, new) = (before.owner(key).unwrap(), after.owner(key).unwrap());
            if old != "host-b" {
                assert_eq!(old, new, "{key} moved from a member that stayed");
            }
        }
    }

    #[test]
    fn a_member_that_joins_takes_about_a_third_and_only_from_the_others() {
        let keys = keys(300);
        let before = Ring::new(["host-a", "host-b"]);
        let after = Ring::new(["host-a", "host-b", "host-c"]);
        let mut moved = 0;
        for key in &keys {
            let (old, new) = (before.owner(key).unwrap(), after.owner(key).unwrap());
            if old != new {
                assert_eq!(new, "host-c", "{key} moved between members that stayed");
                moved += 1;
            }
        }
        assert!((85..=115).contains(&moved), "the new member took {moved} of 300");
    }

    #[test]
    fn the_order_members_are_given_in_does_not_matter() {
        let one = Ring::new(["c", "a", "b", "a"]);
        let other = Ring::new(["a", "b", "c"]);
        assert_eq!(one, other);
        assert_eq!(one.members(), ["a", "b", "c"]);
    }

    #[test]
    fn an_empty_ring_has_no_owner() {
        assert_eq!(Ring::new(Vec::<String>::new()).owner("default/a"), None);
        assert_eq!(Ring::new(["only"]).owner("default/a"), Some("only"));
    }
}
