//! The wasmtime [`Engine`] configuration and the epoch ticker that drives call deadlines.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::policy::MAX_MEMORY_BYTES;

/// How often the ticker advances the engine's epoch: the granularity of call deadlines.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

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

/// A thread advancing an engine's epoch every [`EPOCH_TICK`]; stopped when dropped.
#[derive(Debug)]
pub struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    /// Start ticking `engine`.
    pub fn start(engine: &Engine) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (engine, flag) = (engine.clone(), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("wasmop-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .expect("spawning the epoch ticker thread");
        Self { stop, thread: Some(thread) }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
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

    #[test]
    fn a_compiler_engine_makes_artifacts_the_pooled_host_engine_accepts() {
        for fuel in [false, true] {
            let host = new_engine(true, fuel).unwrap();
            assert_eq!(compatibility(&compile_engine(fuel).unwrap()), compatibility(&host), "fuel: {fuel}");
        }
        assert_ne!(compatibility(&compile_engine(true).unwrap()), compatibility(&new_engine(true, false).unwrap()));
    }
}
