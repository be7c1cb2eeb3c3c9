//! The machine's pace while a bench runs: how much CPU time one fixed piece of work takes.
//!
//! A VM's speed is not constant: the same code runs up to 1.7 times slower for minutes at a
//! time when its hypervisor's other work competes for the core and its caches, without any
//! time the guest sees as stolen. Two runs of the same controller doing the same requests then
//! differ by a third in every process's CPU and in wall time. A [`PaceProbe`] samples, in a
//! thread of its own, the thread CPU time of [`FixedWork`] (sorting, string formatting,
//! hashing: cache-bound work like a control plane's), so a bench can print beside each run how
//! fast the machine ran it.
//!
//! The work allocates nothing and touches no new page once warm: it shares neither the
//! allocator nor the memory-map lock with what else runs in the bench's process (a controller
//! under test that instantiates wasm, for one), only the machine. Read it under load: on an
//! idle machine each sample also pays a cold core and cold caches after the probe's sleep, and
//! reads slower than under load.
//!
//! ```no_run
//! use wasmop_e2e::pace::PaceProbe;
//! let probe = PaceProbe::start(std::time::Duration::from_millis(500));
//! let mark = probe.mark();
//! // ... the phase being measured ...
//! if let Some(pace) = probe.since(mark) {
//!     println!("fixed work: {:.0} µs of CPU (median of {})", pace.micros(), pace.samples);
//! }
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// Samples of [`FixedWork`]'s CPU time, taken every period until dropped.
#[derive(Debug)]
pub struct PaceProbe {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// What the probe's thread and its readers share.
#[derive(Debug, Default)]
struct Shared {
    stop: AtomicBool,
    samples: Mutex<Vec<Duration>>,
}

/// A point in a probe's samples (from [`PaceProbe::mark`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaceMark(usize);

/// The machine's pace over a stretch of time: the median CPU time of [`FixedWork::run`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    /// The median of the samples (larger: a slower machine).
    pub median: Duration,
    /// How many samples the median is of.
    pub samples: usize,
}

impl Pace {
    /// The median in microseconds.
    #[must_use]
    pub fn micros(&self) -> f64 {
        self.median.as_secs_f64() * 1e6
    }
}

impl PaceProbe {
    /// Start sampling every `period`, in a thread named `pace-probe`. Each sample runs
    /// [`FixedWork::run`] twice and keeps the second run's CPU time (the first warms the core).
    ///
    /// # Panics
    /// If the thread cannot be spawned.
    #[must_use]
    pub fn start(period: Duration) -> Self {
        let shared = Arc::new(Shared::default());
        let state = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("pace-probe".to_owned())
            .spawn(move || {
                let mut work = FixedWork::new();
                let mut sink = 0u64;
                while !state.stop.load(Ordering::Relaxed) {
                    sink ^= work.run();
                    let Some(before) = thread_cpu_time() else { return };
                    sink ^= work.run();
                    let Some(after) = thread_cpu_time() else { return };
                    state.samples.lock().unwrap_or_else(PoisonError::into_inner).push(after.saturating_sub(before));
                    std::thread::park_timeout(period);
                }
                std::hint::black_box(sink);
            })
            .expect("spawning the pace probe's thread");
        Self { shared, thread: Some(thread) }
    }

    /// The point from which [`since`](Self::since) reads.
    #[must_use]
    pub fn mark(&self) -> PaceMark {
        PaceMark(self.samples().len())
    }

    /// The pace over the samples taken since `mark`; `None` if there are none (a stretch
    /// shorter than the period, or no thread CPU clock).
    #[must_use]
    pub fn since(&self, mark: PaceMark) -> Option<Pace> {
        let samples = self.samples();
        median(samples.get(mark.0..)?)
    }

    fn samples(&self) -> std::sync::MutexGuard<'_, Vec<Duration>> {
        self.shared.samples.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for PaceProbe {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

/// The median of `samples` and their count; `None` when empty.
fn median(samples: &[Duration]) -> Option<Pace> {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let mid = sorted.len() / 2;
    let median = match sorted.len() {
        0 => return None,
        n if n % 2 == 1 => sorted[mid],
        _ => (sorted[mid - 1] + sorted[mid]) / 2,
    };
    Some(Pace { median, samples: sorted.len() })
}

/// The same work every time, about a millisecond on the 2-core VMs the benches run on: sort
/// 20,000 pseudo-random numbers, write every fourth in hexadecimal into a text and hash the
/// text. Its buffers are allocated once, in [`new`](Self::new), so a run allocates nothing.
#[derive(Debug, Clone)]
pub struct FixedWork {
    input: Vec<u64>,
    sorted: Vec<u64>,
    text: String,
}

impl FixedWork {
    /// How many numbers a run sorts.
    const NUMBERS: usize = 20_000;

    /// The input and the buffers of every run.
    #[must_use]
    pub fn new() -> Self {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let input: Vec<u64> = (0..Self::NUMBERS)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            })
            .collect();
        let sorted = input.clone();
        // 16 hex digits and a separator for each number written.
        let text = String::with_capacity(Self::NUMBERS / 4 * 17);
        Self { input, sorted, text }
    }

    /// Do the work once; returns a value that depends on all of it, so none is optimized away.
    pub fn run(&mut self) -> u64 {
        use std::fmt::Write as _;
        self.sorted.copy_from_slice(&self.input);
        self.sorted.sort_unstable();
        self.text.clear();
        for n in self.sorted.iter().step_by(4) {
            // Writing into a String that has the capacity cannot fail or allocate.
            let _ = write!(self.text, "{n:x},");
        }
        // FNV-1a over the text.
        let hash = self.text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
        hash ^ self.sorted[Self::NUMBERS / 2]
    }
}

impl Default for FixedWork {
    fn default() -> Self {
        Self::new()
    }
}

/// This thread's CPU time so far (`CLOCK_THREAD_CPUTIME_ID`); `None` if the clock is missing.
#[must_use]
pub fn thread_cpu_time() -> Option<Duration> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the call writes only it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    (rc == 0).then(|| Duration::new(u64::try_from(ts.tv_sec).unwrap_or(0), u32::try_from(ts.tv_nsec).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_the_middle_sample_or_the_mean_of_the_two_middle_ones() {
        let us = Duration::from_micros;
        assert_eq!(median(&[us(5), us(1), us(3)]), Some(Pace { median: us(3), samples: 3 }));
        assert_eq!(median(&[us(4), us(1), us(2), us(9)]), Some(Pace { median: us(3), samples: 4 }));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn the_fixed_work_is_the_same_every_time_and_costs_cpu_time() {
        let mut work = FixedWork::new();
        let first = work.run();
        assert_eq!(work.run(), first);
        assert_eq!(FixedWork::new().run(), first);
        let (text, sorted) = (work.text.as_ptr(), work.sorted.as_ptr());
        work.run();
        assert_eq!((work.text.as_ptr(), work.sorted.as_ptr()), (text, sorted), "a run reuses its buffers");
        let before = thread_cpu_time().expect("a thread CPU clock on Linux");
        std::hint::black_box(work.run());
        let after = thread_cpu_time().expect("a thread CPU clock on Linux");
        assert!(after > before, "the work took no CPU time: {before:?} → {after:?}");
    }

    #[test]
    fn a_probe_reads_only_the_samples_after_its_mark() {
        let probe = PaceProbe::start(Duration::from_millis(1));
        while probe.mark().0 < 3 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let mark = probe.mark();
        assert!(probe.since(PaceMark(mark.0 + 1_000)).is_none(), "no samples past the end");
        while probe.mark().0 < mark.0 + 2 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let pace = probe.since(mark).expect("samples after the mark");
        assert!(pace.samples >= 2 && pace.median > Duration::ZERO, "{pace:?}");
        assert!(pace.samples < probe.since(PaceMark(0)).expect("every sample").samples);
    }
}
