//! The plugin's global allocator on `wasm32` (cargo feature `bump-alloc`, on by default): a
//! bump allocator, because an instance lives for one call.
//!
//! The host gives every call a fresh instance in a fresh store and drops both when the call
//! returns (isolation between calls is a promise of the host, see its `runtime::plugin`). So
//! nothing a plugin allocates outlives the call, and freeing memory only matters for the
//! peak of one call. A bump allocator is then the cheapest correct allocator:
//!
//! - `alloc` moves a cursor forward (aligned): first through a 256 KiB static region
//!   (zero-initialized data, so most calls never grow memory, see `INITIAL_HEAP`), then through
//!   linear memory it asks the engine for with `memory.grow`;
//! - `dealloc` takes the memory back only when it frees the last allocation (a vector that
//!   grows and is dropped right away, a temporary string), otherwise it does nothing;
//! - `realloc` of the last allocation grows or shrinks it in place, so a `Vec` or `String`
//!   being built (serializing JSON) does not copy itself at every doubling.
//!
//! Why it is sound. The arena owns only its static region (a Rust `static`, which nothing else
//! addresses) and memory it obtained from `memory.grow` itself: the grown pages
//! `[old size, new size)` belong to no one else (wasi-libc's own `malloc`, which a few libc
//! internals still use, takes the memory between `__heap_base` and the initial memory size and
//! grows memory itself, so the two never overlap). Every address handed out lies in memory
//! the arena holds, aligned as asked, and is handed out once until freed. A `wasm32-wasip2`
//! instance has one thread, so the cursor needs no atomics.
//!
//! What it changes for a plugin. Memory is not reused within a call, except the last
//! allocation: a plugin that frees and reallocates a lot in one call peaks higher than with
//! the default allocator. The host's memory cap still applies to every `memory.grow`: a plugin
//! that allocates without bound is stopped at its cap as before (the host reports
//! `PluginOutOfMemory`). A plugin that needs a reusing allocator (a long loop that frees what
//! it allocates) turns the feature off (`default-features = false`) and gets Rust's default.

// Natively only the tests use the arena.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

#[cfg(target_arch = "wasm32")]
use std::alloc::GlobalAlloc;
use std::alloc::Layout;
use std::cell::Cell;

/// A WebAssembly page.
pub(crate) const PAGE: usize = 64 << 10;

/// Memory grows by at least this many pages at a time (256 KiB), once the static region is
/// used up: few growths per call, and a plugin near its memory cap loses at most this much to
/// the step.
pub(crate) const MIN_GROW_PAGES: usize = 4;

/// Where an arena gets memory from: linear memory on `wasm32`, a buffer in the tests.
pub(crate) trait Grow {
    /// The region the arena starts with, `(start, end)`, before it grows memory.
    fn initial(&self) -> (usize, usize);

    /// Add `pages` pages at the end of memory; the address of the first new byte, or `None`
    /// when the engine refuses.
    fn grow(&self, pages: usize) -> Option<usize>;
}

/// A bump arena: `[next, end)` is free; `last` is where the last allocation starts.
pub(crate) struct Arena<G> {
    next: Cell<usize>,
    end: Cell<usize>,
    last: Cell<usize>,
    memory: G,
}

impl<G: Grow> Arena<G> {
    /// An arena that holds no memory yet.
    pub(crate) const fn new(memory: G) -> Self {
        Self { next: Cell::new(0), end: Cell::new(0), last: Cell::new(usize::MAX), memory }
    }

    /// Room for `layout`, or `None` when memory cannot grow.
    pub(crate) fn alloc(&self, layout: Layout) -> Option<usize> {
        let start = self.fit(layout.size(), layout.align())?;
        self.last.set(start);
        self.next.set(start + layout.size());
        Some(start)
    }

    /// Take the memory back if `address` is the last allocation.
    pub(crate) fn dealloc(&self, address: usize) {
        if address == self.last.get() {
            self.next.set(address);
            self.last.set(usize::MAX);
        }
    }

    /// Resize the allocation at `address` (of `layout`) to `new_size`: in place when it is the
    /// last one, else a new allocation holding a copy.
    ///
    /// # Safety
    /// `address` must be a live allocation of this arena made with `layout`.
    pub(crate) unsafe fn realloc(&self, address: usize, layout: Layout, new_size: usize) -> Option<usize> {
        if address == self.last.get() {
            let end = address.checked_add(new_size)?;
            let old_end = self.end.get();
            if end <= old_end || self.more(end - old_end)? == old_end {
                self.next.set(end);
                return Some(address);
            }
            // The new pages do not follow the arena's end: move, as for any other allocation.
        }
        let new = self.alloc(Layout::from_size_align(new_size, layout.align()).ok()?)?;
        // SAFETY: both ranges are allocations of this arena, distinct (the new one starts past
        // every live one), and at least `min(old, new)` bytes long.
        unsafe { std::ptr::copy_nonoverlapping(address as *const u8, new as *mut u8, layout.size().min(new_size)) };
        Some(new)
    }

    /// The aligned start of `size` free bytes, growing memory when needed.
    fn fit(&self, size: usize, align: usize) -> Option<usize> {
        if self.end.get() == 0 {
            let (start, end) = self.memory.initial();
            self.next.set(start);
            self.end.set(end);
        }
        loop {
            let start = self.next.get().checked_next_multiple_of(align)?;
            let end = start.checked_add(size)?;
            if end <= self.end.get() {
                return Some(start);
            }
            // Each turn grows memory (or fails): when the new pages follow the arena, the next
            // turn fits; when not, the arena starts over in them and the next turn checks again.
            self.more(end - self.end.get())?;
        }
    }

    /// Grow memory by at least `bytes` (and [`MIN_GROW_PAGES`]); the first new address. The
    /// arena's end moves to the end of the new pages; when they do not follow the arena's
    /// end, the arena continues from them (the gap belongs to whoever grew memory in between).
    fn more(&self, bytes: usize) -> Option<usize> {
        let pages = bytes.div_ceil(PAGE).max(MIN_GROW_PAGES);
        let first = self.memory.grow(pages)?;
        if first != self.end.get() {
            self.next.set(first);
            self.last.set(usize::MAX);
        }
        self.end.set(first + pages * PAGE);
        Some(first)
    }
}

/// Bytes of the arena's first region, reserved in the plugin's zero-initialized data.
///
/// Growing memory is not free: the host's engine makes the new pages accessible (`mprotect`)
/// and takes that back before the slot's next instance, two system calls per call (measured:
/// a memcached reconcile on the parent alone took 7 µs longer when its first allocation grew
/// memory). Zero-initialized data is part of the initial memory, which the engine keeps
/// mapped from one instance to the next and resets only where it was written; so a call that
/// needs less than this never grows memory, and the pages it does not touch cost nothing.
#[cfg(target_arch = "wasm32")]
const INITIAL_HEAP: usize = 256 << 10;

/// The first region: zero-initialized data (`.bss`), so it does not enlarge the component.
#[cfg(target_arch = "wasm32")]
#[repr(C, align(16))]
struct InitialHeap(std::cell::UnsafeCell<[u8; INITIAL_HEAP]>);

// SAFETY: only the arena takes addresses in it, on the instance's one thread.
#[cfg(target_arch = "wasm32")]
unsafe impl Sync for InitialHeap {}

#[cfg(target_arch = "wasm32")]
static INITIAL: InitialHeap = InitialHeap(std::cell::UnsafeCell::new([0; INITIAL_HEAP]));

/// Linear memory 0 of the instance.
#[cfg(target_arch = "wasm32")]
struct LinearMemory;

#[cfg(target_arch = "wasm32")]
impl Grow for LinearMemory {
    fn initial(&self) -> (usize, usize) {
        let start = INITIAL.0.get() as usize;
        (start, start + INITIAL_HEAP)
    }

    fn grow(&self, pages: usize) -> Option<usize> {
        let previous = core::arch::wasm32::memory_grow(0, pages);
        (previous != usize::MAX).then(|| previous * PAGE)
    }
}

/// The global allocator: an [`Arena`] on linear memory.
#[cfg(target_arch = "wasm32")]
struct BumpAllocator(Arena<LinearMemory>);

// SAFETY: a wasm32-wasip2 instance runs one thread, so the cells are never shared.
#[cfg(target_arch = "wasm32")]
unsafe impl Sync for BumpAllocator {}

// SAFETY: every address comes from `Arena`, which hands out aligned, distinct ranges of
// memory it grew itself, and null when memory cannot grow (under the host's memory cap the
// engine traps first).
#[cfg(target_arch = "wasm32")]
unsafe impl GlobalAlloc for BumpAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.0.alloc(layout).map_or(std::ptr::null_mut(), |a| a as *mut u8)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        self.0.dealloc(ptr as usize);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller passes a live allocation of this allocator with its layout.
        unsafe { self.0.realloc(ptr as usize, layout, new_size) }.map_or(std::ptr::null_mut(), |a| a as *mut u8)
    }
}

/// The allocator of every plugin built with the SDK for `wasm32` (feature `bump-alloc`).
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOCATOR: BumpAllocator = BumpAllocator(Arena::new(LinearMemory));

#[cfg(test)]
mod tests {
    use super::*;

    /// A memory of at most `max` pages inside a buffer; `foreign` pages are grown by someone
    /// else before the next growth of the arena.
    struct Buffer {
        base: usize,
        /// Pages at the start given to the arena as its initial region.
        initial: usize,
        pages: Cell<usize>,
        max: usize,
        foreign: Cell<usize>,
        _buffer: Vec<u8>,
    }

    impl Buffer {
        fn new(max: usize) -> Self {
            let buffer = vec![0u8; (max + 1) * PAGE];
            let base = (buffer.as_ptr() as usize).next_multiple_of(PAGE);
            Self { base, initial: 0, pages: Cell::new(0), max, foreign: Cell::new(0), _buffer: buffer }
        }

        fn with_initial(max: usize, initial: usize) -> Self {
            let buffer = Self::new(max);
            buffer.pages.set(initial);
            Self { initial, ..buffer }
        }
    }

    impl Grow for &Buffer {
        fn initial(&self) -> (usize, usize) {
            (self.base, self.base + self.initial * PAGE)
        }

        fn grow(&self, pages: usize) -> Option<usize> {
            self.pages.set(self.pages.get() + self.foreign.take());
            let first = self.pages.get();
            (first + pages <= self.max).then(|| {
                self.pages.set(first + pages);
                self.base + first * PAGE
            })
        }
    }

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn allocations_are_aligned_distinct_and_grow_memory_in_steps() {
        let buffer = Buffer::new(64);
        let arena = Arena::new(&buffer);
        let a = arena.alloc(layout(3, 1)).unwrap();
        let b = arena.alloc(layout(8, 8)).unwrap();
        assert_eq!(b % 8, 0);
        assert!(b >= a + 3);
        assert_eq!(buffer.pages.get(), MIN_GROW_PAGES, "one step covers small allocations");
        let big = arena.alloc(layout(MIN_GROW_PAGES * PAGE, 16)).unwrap();
        assert!(big > b && big + MIN_GROW_PAGES * PAGE <= buffer.base + buffer.pages.get() * PAGE);
        // The memory is really there: write all of it.
        unsafe { std::ptr::write_bytes(big as *mut u8, 7, MIN_GROW_PAGES * PAGE) };
    }

    #[test]
    fn freeing_the_last_allocation_reuses_it_and_freeing_another_does_not() {
        let buffer = Buffer::new(8);
        let arena = Arena::new(&buffer);
        let a = arena.alloc(layout(128, 8)).unwrap();
        let b = arena.alloc(layout(128, 8)).unwrap();
        arena.dealloc(a);
        let c = arena.alloc(layout(128, 8)).unwrap();
        assert_eq!(c, b + 128, "a was not the last one: its room stays taken");
        arena.dealloc(c);
        assert_eq!(arena.alloc(layout(64, 8)).unwrap(), c, "the last one is taken back");
    }

    #[test]
    fn realloc_of_the_last_allocation_stays_in_place_and_others_move_with_their_bytes() {
        let buffer = Buffer::new(64);
        let arena = Arena::new(&buffer);
        let a = arena.alloc(layout(4, 4)).unwrap();
        unsafe { (a as *mut u32).write(0xdead_beef) };
        let grown = unsafe { arena.realloc(a, layout(4, 4), 10 * PAGE) }.unwrap();
        assert_eq!(grown, a, "the last allocation grows in place, past the first step too");
        let b = arena.alloc(layout(4, 4)).unwrap();
        assert_eq!(b, a + 10 * PAGE);
        let moved = unsafe { arena.realloc(a, layout(4, 4), 8) }.unwrap();
        assert!(moved > b);
        assert_eq!(unsafe { (moved as *const u32).read() }, 0xdead_beef);
    }

    #[test]
    fn memory_grown_by_someone_else_is_never_handed_out() {
        let buffer = Buffer::new(64);
        let arena = Arena::new(&buffer);
        let a = arena.alloc(layout(PAGE, 1)).unwrap();
        buffer.foreign.set(3);
        let foreign_start = buffer.base + MIN_GROW_PAGES * PAGE;
        let b = arena.alloc(layout(MIN_GROW_PAGES * PAGE, 1)).unwrap();
        assert!(b >= foreign_start + 3 * PAGE, "{b:#x} is in the foreign pages");
        assert_ne!(a, b);
        let grown = unsafe { arena.realloc(b, layout(MIN_GROW_PAGES * PAGE, 1), 40 * PAGE) }.unwrap();
        assert_eq!(grown, b);
    }

    #[test]
    fn refused_growth_is_a_failed_allocation() {
        let buffer = Buffer::new(MIN_GROW_PAGES);
        let arena = Arena::new(&buffer);
        assert!(arena.alloc(layout(PAGE, 1)).is_some());
        assert_eq!(arena.alloc(layout(MIN_GROW_PAGES * PAGE, 1)), None);
        let last = arena.alloc(layout(8, 1)).unwrap();
        assert_eq!(unsafe { arena.realloc(last, layout(8, 1), MIN_GROW_PAGES * PAGE) }, None);
    }

    #[test]
    fn the_initial_region_serves_first_and_memory_grows_only_past_it() {
        let buffer = Buffer::with_initial(64, 2);
        let arena = Arena::new(&buffer);
        let a = arena.alloc(layout(PAGE, 8)).unwrap();
        assert_eq!(a, buffer.base, "the first allocation is at the start of the initial region");
        let b = arena.alloc(layout(PAGE / 2, 8)).unwrap();
        assert_eq!(buffer.pages.get(), 2, "no growth while the initial region holds it");
        let c = arena.alloc(layout(PAGE, 8)).unwrap();
        assert!(c > b && buffer.pages.get() > 2);
        assert!(c + PAGE <= buffer.base + buffer.pages.get() * PAGE);
    }
}
