//! The wasmtime [`Engine`] configuration and the epoch ticker that drives call deadlines while
//! calls run.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::policy::MAX_MEMORY_BYTES;

/// How often the ticker advances the engine's epoch: the granularity of call deadlines.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// The name of the [`EpochTicker`]'s thread (as `/proc` shows it).
pub const EPOCH_THREAD: &str = "wasmop-epoch";

/// Ticks the [`EpochTicker`] goes on with after the last call ends (one second) before it
/// sleeps: calls that come more often than that never wait for the thread to wake.
const TICKS_AFTER_LAST_CALL: u32 = 200;

/// Plugins instantiated at once at most, per engine (pooling allocator slots).
const POOL_INSTANCES: u32 = 256;

/// Build the engine every plugin is compiled for.
///
/// Epoch interruption is on (deadlines), component-model async machinery is off (plugins are
/// synchronous WASIp2 components; this halves the cost of a call), and instances come from a
/// pooling allocator sized for `POOL_INSTANCES` concurrent calls; reused slots keep up to
/// 2 MiB of memory resident. A slot admits memories up to [`MAX_MEMORY_BYTES`] (the 4 GiB
/// each slot reserves anyway): the per-call memory cap is the store's limiter's job, which
/// names it when a plugin needs more to start, where a smaller slot would refuse the module
/// as if it were invalid.
///
/// With `fuel`, calls are metered (every store must then be given fuel).
///
/// # Errors
/// If wasmtime rejects the configuration (for example when virtual memory for the pool
/// cannot be reserved).
pub fn new_engine(pooling: bool, fuel: bool) -> wasmtime::Result<Engine> {
    let mut config = code_config(fuel);
    if pooling {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(POOL_INSTANCES)
            .total_core_instances(POOL_INSTANCES * 4)
            .total_memories(POOL_INSTANCES * 2)
            .total_tables(POOL_INSTANCES * 4)
            .total_stacks(POOL_INSTANCES)
            .max_memory_size(usize::try_from(MAX_MEMORY_BYTES).unwrap_or(usize::MAX))
            // Keep the first pages of a reused slot resident and reset them in place (with the
            // kernel's pagemap scan where available, Linux 6.7+) instead of unmapping them:
            // measured 22 → 0 page faults and 190 → 130 µs per memcached reconcile.
            .linear_memory_keep_resident(2 << 20)
            .table_keep_resident(1 << 20)
            .pagemap_scan(wasmtime::Enabled::Auto);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    Engine::new(&config)
}

/// The engine of a compiler process (`wasmop compile`): the host's [`new_engine`] with the
/// same `fuel`, whose artifacts the host loads. It has no pooling allocator, which does not
/// change compiled code (wasmtime documents artifacts as interchangeable with and without it)
/// and would only reserve the pool's virtual memory in a process that never instantiates.
///
/// # Errors
/// If wasmtime rejects the configuration.
pub fn compile_engine(fuel: bool) -> wasmtime::Result<Engine> {
    Engine::new(&code_config(fuel))
}

/// Everything of the engine configuration that decides the compiled code.
fn code_config(fuel: bool) -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.consume_fuel(fuel);
    config.concurrency_support(false);
    config.max_wasm_stack(1 << 20);
    config.async_stack_size(2 << 20);
    config
}

/// A thread advancing an engine's epoch every [`EPOCH_TICK`] while a call runs; stopped when
/// dropped.
///
/// Deadlines need the epoch to advance only under a running call: a call holds a [`Ticking`]
/// for as long as it runs, and once none has been held for [`TICKS_AFTER_LAST_CALL`] ticks the
/// thread sleeps until the next call starts. An idle host thus spends no CPU on ticks (ticking
/// all the time costs about 0.2 CPU-seconds a minute on a 2-core VM: 200 wake-ups a second),
/// and a busy one never pays for waking the thread. A call's deadline is counted from its own
/// start, so a first tick up to [`EPOCH_TICK`] after it starts changes nothing.
#[derive(Debug)]
pub struct EpochTicker {
    shared: Arc<TickerShared>,
    thread: Option<JoinHandle<()>>,
}

/// What the ticker's thread and the calls share.
#[derive(Debug, Default)]
struct TickerShared {
    stop: AtomicBool,
    /// Calls holding a [`Ticking`].
    calls: AtomicUsize,
    /// Ticks so far.
    ticks: AtomicU64,
}

/// The epoch advances while this lives (see [`EpochTicker::ticking`]).
#[derive(Debug)]
#[must_use = "the epoch advances only while the guard is held"]
pub struct Ticking<'a> {
    shared: &'a TickerShared,
}

impl EpochTicker {
    /// Start the thread that ticks `engine` while calls run.
    pub fn start(engine: &Engine) -> Self {
        let shared = Arc::new(TickerShared::default());
        let (engine, state) = (engine.clone(), Arc::clone(&shared));
        let thread = std::thread::Builder::new()
            .name(EPOCH_THREAD.into())
            .spawn(move || {
                // Ticks since a call last ran; starts past the linger: no call yet, no tick.
                let mut idle = TICKS_AFTER_LAST_CALL;
                while !state.stop.load(Ordering::Acquire) {
                    if state.calls.load(Ordering::Acquire) > 0 {
                        idle = 0;
                    } else if idle >= TICKS_AFTER_LAST_CALL {
                        // Woken by the next call's `ticking` (or by drop); a wake-up that came
                        // before this park makes it return at once.
                        std::thread::park();
                        continue;
                    } else {
                        idle += 1;
                    }
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                    state.ticks.fetch_add(1, Ordering::Relaxed);
                }
            })
            .expect("spawning the epoch ticker thread");
        Self { shared, thread: Some(thread) }
    }

    /// Keep the epoch advancing until the returned guard is dropped: held by every call for as
    /// long as it runs.
    pub fn ticking(&self) -> Ticking<'_> {
        if self.shared.calls.fetch_add(1, Ordering::AcqRel) == 0
            && let Some(thread) = &self.thread
        {
            thread.thread().unpark();
        }
        Ticking { shared: &self.shared }
    }

    /// How many times the epoch has advanced.
    #[cfg(test)]
    fn ticks(&self) -> u64 {
        self.shared.ticks.load(Ordering::Relaxed)
    }
}

impl Drop for Ticking<'_> {
    fn drop(&mut self) {
        self.shared.calls.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::hash::{DefaultHasher, Hash, Hasher};

    use super::*;

    fn compatibility(engine: &Engine) -> u64 {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        hasher.finish()
    }

    /// Whether `done` holds within 10 s, polled.
    fn within_10s(mut done: impl FnMut() -> bool) -> bool {
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < until {
            if done() {
                return true;
            }
            std::thread::sleep(EPOCH_TICK);
        }
        false
    }

    #[test]
    fn the_epoch_advances_only_while_a_call_runs() {
        let engine = new_engine(false, false).unwrap();
        let ticker = EpochTicker::start(&engine);
        std::thread::sleep(10 * EPOCH_TICK);
        assert_eq!(ticker.ticks(), 0, "no call, no tick");
        {
            let (_first, _second) = (ticker.ticking(), ticker.ticking());
            assert!(within_10s(|| ticker.ticks() >= 3), "ticks while calls run: {}", ticker.ticks());
        }
        let settled = || {
            let before = ticker.ticks();
            std::thread::sleep(10 * EPOCH_TICK);
            ticker.ticks() == before
        };
        assert!(within_10s(settled), "the ticks stop once the last call ends");
        let idle = ticker.ticks();
        let _next = ticker.ticking();
        assert!(within_10s(|| ticker.ticks() >= idle + 3), "the next call wakes the ticker");
    }

    #[test]
    fn a_compiler_engine_makes_artifacts_the_pooled_host_engine_accepts() {
        for fuel in [false, true] {
            let host = new_engine(true, fuel).unwrap();
            assert_eq!(compatibility(&compile_engine(fuel).unwrap()), compatibility(&host), "fuel: {fuel}");
        }
        assert_ne!(compatibility(&compile_engine(true).unwrap()), compatibility(&new_engine(true, false).unwrap()));
    }
}
