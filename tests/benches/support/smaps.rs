//! A process's mappings and their resident sizes, from `/proc/PID/smaps`, and which of them are
//! wasmtime's instance pool.
//!
//! Included by path (`#[path = "support/smaps.rs"] mod smaps;`).
#![allow(dead_code)]

/// Contiguous mappings spanning at least this much are wasmtime's pool: it reserves 4 GiB and a
/// guard for each of its memory slots, next to its tables and fiber stacks.
const POOL_SPAN: u64 = 64 << 30;

/// One mapping of `/proc/PID/smaps`.
#[derive(Debug, Clone)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// The path or pseudo-name (`[heap]`, `[stack]`), empty for anonymous memory.
    pub name: String,
    /// Resident size, MiB.
    pub rss: f64,
    /// Whether it is part of wasmtime's instance pool. A used slot's pages are not in one large
    /// anonymous mapping: the copy-on-write image of a plugin's memory (`/memfd:wasm-memory-image`)
    /// and the accessible part of the slot are mappings of their own, cut out of the
    /// reservation, so the pool is told by the span of the contiguous run it belongs to.
    pub pool: bool,
}

/// The mappings of `smaps` (the text of a `/proc/PID/smaps`), in address order.
pub fn mappings(smaps: &str) -> Vec<Mapping> {
    let mut maps: Vec<Mapping> = Vec::new();
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or_default();
        let range = first.split_once('-').filter(|_| !first.ends_with(':'));
        if let Some((Ok(start), Ok(end))) = range.map(|(a, b)| (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16))) {
            let name = fields.nth(4).unwrap_or_default().to_owned();
            maps.push(Mapping { start, end, name, rss: 0.0, pool: false });
        } else if first == "Rss:"
            && let Some(last) = maps.last_mut()
        {
            last.rss = fields.next().and_then(|v| v.parse::<f64>().ok()).unwrap_or_default() / 1024.0;
        }
    }
    maps.sort_by_key(|m| m.start);
    for run in maps.chunk_by_mut(|a, b| a.end == b.start) {
        if run[run.len() - 1].end - run[0].start >= POOL_SPAN {
            run.iter_mut().for_each(|m| m.pool = true);
        }
    }
    maps
}

/// The resident part of wasmtime's instance pool in `/proc/self/smaps`, MiB.
pub fn own_pool() -> f64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    mappings(&smaps).iter().filter(|m| m.pool).map(|m| m.rss).sum()
}
