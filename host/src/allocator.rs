//! Memory a long-running host gives back: the C allocator's settings and what it holds, and
//! hash maps that shrink as they empty.
//!
//! The `wasmop` binary calls [`tune`] first thing; benches that run a host inside their own
//! process call it too, so they measure the allocator the host really runs with.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hash};

/// Tables with room for fewer entries than this are never shrunk (not worth a rehash).
const SHRINK_FLOOR: usize = 64;

/// A hash table that gives its memory back once it is mostly empty.
///
/// A `HashMap` keeps the table it grew to for as long as it lives: one that held an entry per
/// parent keeps room for the most parents it ever saw after they are all deleted (measured by
/// the churn bench: the work queue, the apply fingerprints, the owner index and the breaker's
/// write runs kept about 1 MiB after 2,000 parents came and went).
pub trait ShrinkWhenSparse {
    /// After removals: when fewer than a quarter of the table's room is used, shrink it to
    /// twice what is used. Each shrink costs a rehash of what is left, paid for by the removals
    /// that at least halved it since the last one, so a removal stays O(1) amortized.
    fn shrink_when_sparse(&mut self);
}

/// The rule both impls share: the room to shrink to, if any.
fn shrunk_room(len: usize, capacity: usize) -> Option<usize> {
    (capacity > SHRINK_FLOOR && len.saturating_mul(4) < capacity).then(|| len * 2)
}

impl<K: Eq + Hash, V, S: BuildHasher> ShrinkWhenSparse for HashMap<K, V, S> {
    fn shrink_when_sparse(&mut self) {
        if let Some(room) = shrunk_room(self.len(), self.capacity()) {
            self.shrink_to(room);
        }
    }
}

impl<K: Eq + Hash, S: BuildHasher> ShrinkWhenSparse for HashSet<K, S> {
    fn shrink_when_sparse(&mut self) {
        if let Some(room) = shrunk_room(self.len(), self.capacity()) {
            self.shrink_to(room);
        }
    }
}

/// Arenas glibc's `malloc` may create at least; else one per core, as many as tokio has workers
/// (glibc's default is eight per core: one more for each thread that allocates while the
/// others hold theirs, each keeping its own freed memory).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MIN_ARENAS: usize = 2;

/// Allocations from this size on are mapped on their own and unmapped when freed (glibc's
/// default, 128 KiB, but fixed: glibc otherwise raises it to the largest block freed so far, up
/// to 32 MiB, after which a decoded LIST page or a plugin's large answer is carved from an arena
/// that keeps it resident after it is freed).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: usize = 128 << 10;

/// Set glibc's `malloc` up for a long-running host: one arena per core (at least
/// [`MIN_ARENAS`]) and a fixed [`MMAP_THRESHOLD`] (setting it turns glibc's dynamic thresholds
/// off, so the trim threshold stays at its 128 KiB too: freed memory at the top of an arena
/// goes back to the kernel). Measured in BENCHMARKS.md, section "Resident memory against the
/// native controller".
///
/// Other C libraries keep their own allocator's defaults: this does nothing there.
///
/// # Caveats
/// Call it before the process starts a second thread: glibc reads these settings when a thread
/// first allocates.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        let arenas = i32::try_from(cores.max(MIN_ARENAS)).unwrap_or(i32::MAX);
        let threshold = i32::try_from(MMAP_THRESHOLD).unwrap_or(i32::MAX);
        // SAFETY: mallopt only changes malloc's parameters.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
            libc::mallopt(libc::M_MMAP_THRESHOLD, threshold);
        }
    }
}

/// What the allocator holds, over all its arenas, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heap {
    /// Bytes in blocks the program has allocated and not freed.
    pub in_use: usize,
    /// Bytes the allocator has taken from the kernel (arenas and mapped blocks): `in_use` plus
    /// the free blocks it keeps. Not all of it need be resident.
    pub held: usize,
}

/// What glibc's `malloc` holds now (`mallinfo2`), or `None` under another C library.
#[must_use]
pub fn heap() -> Option<Heap> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's counters.
        let info = unsafe { libc::mallinfo2() };
        Some(Heap { in_use: info.uordblks + info.hblkhd, held: info.arena + info.hblkhd })
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}

/// Give the free memory glibc's `malloc` keeps back to the kernel (`malloc_trim(0)`); nothing
/// under another C library.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap memory to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_that_empties_gives_its_table_back() {
        let mut map: HashMap<u32, u32> = (0..10_000).map(|i| (i, i)).collect();
        let grown = map.capacity();
        for i in 0..10_000 {
            map.remove(&i);
            map.shrink_when_sparse();
        }
        assert!(map.capacity() <= SHRINK_FLOOR, "{} of {grown} left", map.capacity());
    }

    #[test]
    fn a_table_shrinks_only_when_under_a_quarter_used_and_not_small() {
        assert_eq!(shrunk_room(500, 1792), None, "over a quarter used");
        assert_eq!(shrunk_room(400, 1792), Some(800), "to twice what is used");
        assert_eq!(shrunk_room(0, SHRINK_FLOOR), None, "small tables stay");
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn heap_counts_a_live_block_in_use() {
        let before = heap().expect("glibc").in_use;
        // Far more than other tests running beside this one allocate and free between the reads.
        let block = vec![1u8; 64 << 20];
        let during = heap().expect("glibc");
        assert!(during.in_use >= before + (32 << 20), "{before} then {during:?}");
        assert!(during.held >= during.in_use);
        drop(block);
    }
}
