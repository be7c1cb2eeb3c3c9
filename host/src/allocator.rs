//! Memory a long-running host gives back: the C allocator's settings and what it holds, and
//! hash maps that shrink as they empty.
//!
//! The `wasmop` binary calls [`tune`] first thing, and `wasmop run` and `wasmop dev` run
//! [`give_back`]; benches that run a host inside their own process do both too, so they measure
//! the allocator the host really runs with.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

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

/// How often [`give_back`] looks at the resident memory and what the allocator holds.
pub const GIVE_BACK_EVERY: Duration = Duration::from_secs(10);

/// Growth of the memory resident beyond the allocator's live blocks, from its lowest since the
/// last trim, after which [`give_back`] trims.
const GIVE_BACK_AFTER: u64 = 8 << 20;

/// When to give the allocator's free memory back: once the memory resident beyond the
/// allocator's live blocks (the resident set − [`Heap::in_use`]: code, stacks, wasmtime's pool
/// and the free blocks the allocator keeps resident) has grown by [`GIVE_BACK_AFTER`] from its
/// lowest since the last trim (or since the start).
///
/// Memory freed between live blocks stays resident: after a wave of work (a list, a burst of
/// watch events, the deletes of thousands of parents) the host would hold its peak for good.
/// Neither the resident set (a wave that frees what an earlier one grew leaves it as it was)
/// nor the free blocks' size (a trim takes their pages, not the blocks) says it alone; their
/// difference does, and a trim lowers it. A quiet host never trims, a growing one whose growth
/// is live data neither, and memory that is reused and freed again is trimmed again.
#[derive(Debug, Clone, Copy)]
pub struct GiveBack {
    lowest: u64,
}

impl GiveBack {
    /// Start from the memory resident beyond the live blocks now, in bytes.
    #[must_use]
    pub fn new(slack: u64) -> Self {
        Self { lowest: slack }
    }

    /// Whether to trim with `slack` bytes resident beyond the live blocks.
    pub fn due(&mut self, slack: u64) -> bool {
        self.lowest = self.lowest.min(slack);
        slack.saturating_sub(self.lowest) >= GIVE_BACK_AFTER
    }

    /// A trim left `slack` bytes resident beyond the live blocks: growth counts from there on.
    pub fn trimmed(&mut self, slack: u64) {
        self.lowest = slack;
    }
}

/// The memory resident beyond the allocator's live blocks, in bytes; `None` without both figures.
fn slack() -> Option<u64> {
    let in_use = u64::try_from(heap()?.in_use).ok()?;
    Some(resident()?.saturating_sub(in_use))
}

/// The process's resident memory in bytes (`/proc/self/statm`), or `None` where there is none.
#[must_use]
pub fn resident() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
        let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
        // SAFETY: sysconf only reads a configuration value.
        let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
        Some(pages * page)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// Give the allocator's free memory back to the kernel when [`GiveBack`] says so, looking every
/// [`GIVE_BACK_EVERY`]; runs until dropped. `wasmop run` and `wasmop dev` run it beside [`tune`],
/// and so does a bench that runs a host inside its own process. Does nothing under another C
/// library.
pub async fn give_back() {
    let Some(start) = slack() else { return };
    let mut rule = GiveBack::new(start);
    let mut every = tokio::time::interval(GIVE_BACK_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(before) = slack() else { return };
        if rule.due(before) {
            trim();
            let after = slack().unwrap_or(before);
            rule.trimmed(after);
            tracing::debug!(
                before_mib = before >> 20,
                after_mib = after >> 20,
                "gave the allocator's free memory back (MiB resident beyond live blocks)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn give_back_trims_when_the_slack_grows_from_its_lowest_since_the_last_trim() {
        const MIB: u64 = 1 << 20;
        let mut rule = GiveBack::new(30 * MIB);
        assert!(!rule.due(37 * MIB), "7 MiB more is not enough");
        assert!(!rule.due(25 * MIB), "less never trims");
        assert!(rule.due(33 * MIB), "8 MiB over the lowest point seen, 25 MiB");
        rule.trimmed(26 * MIB);
        assert!(!rule.due(33 * MIB), "growth counts from what the trim left");
        assert!(rule.due(34 * MIB), "freed again: trimmed again");
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn small_blocks_freed_between_live_ones_make_a_trim_due_and_the_trim_gives_them_back() {
        let mut rule = GiveBack::new(slack().unwrap());
        // 48 MiB in 1 KiB blocks, every 64th kept: the freed ones lie between live ones, where
        // malloc keeps them resident until trimmed.
        let mut blocks: Vec<Vec<u8>> = (0..48 * 1024).map(|i| vec![u8::try_from(i % 251).unwrap(); 1024]).collect();
        let loaded = resident().unwrap();
        let mut i = 0;
        blocks.retain(|_| {
            i += 1;
            i % 64 == 0
        });
        let freed = resident().unwrap();
        assert!(rule.due(slack().unwrap()), "47 MiB freed and resident is a wave to give back");
        trim();
        let trimmed = resident().unwrap();
        assert!(blocks.iter().all(|b| b.len() == 1024));
        assert!(freed + (8 << 20) > loaded, "malloc keeps freed blocks resident: {loaded} then {freed}");
        assert!(trimmed + (24 << 20) < freed, "trim gives most of 47 MiB back: {freed} then {trimmed}");
    }

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
