//! Per-call sandbox limits: [`Limits`] (deadline, memory, fuel, output bounds) and the parsers
//! of their flag and policy values. Plain data; the runtime enforces them.

use std::time::Duration;

use super::CpuShare;
use crate::contract::OutputLimits;
use crate::units;

/// Longest call deadline accepted (flag `--deadline`, policy `deadline`): 5 minutes. A call
/// holds a worker for that long; work that needs more belongs in several reconciles.
pub const MAX_DEADLINE: Duration = Duration::from_secs(300);
/// Smallest memory cap accepted (flag `--memory`, policy `memory`): 2 MiB. Plugins built with
/// the SDK in this workspace (128 KiB guest stack, the SDK's bump allocator) peak at about
/// 0.5 MiB starting and running one small reconcile (measured: testbed 458,752 bytes,
/// memcached 524,288; the test `smallest_memory_cap_runs_the_example_plugins` runs both at this
/// cap); a plugin linked with Rust's default 1 MiB stack needs about 1.2 MiB, so below 2 MiB
/// little useful fits.
pub const MIN_MEMORY_BYTES: u64 = 2 << 20;
/// Largest memory cap accepted: 4 GiB, all a 32-bit wasm memory can address and the address
/// space wasmtime reserves per memory.
pub const MAX_MEMORY_BYTES: u64 = 4 << 30;

/// Parse a call deadline: more than 0, at most [`MAX_DEADLINE`].
///
/// ```
/// use wasmop::policy::parse_deadline;
/// assert!(parse_deadline("250ms").is_ok());
/// assert_eq!(parse_deadline("0s").unwrap_err(), "must be more than 0");
/// assert_eq!(parse_deadline("10m").unwrap_err(), "10m is more than the maximum of 5m");
/// ```
///
/// # Errors
/// One line saying what is wrong, without naming the flag or field (the caller does).
pub fn parse_deadline(s: &str) -> Result<Duration, String> {
    if units::parse_duration(s)?.is_zero() {
        return Err("must be more than 0".into());
    }
    units::duration_in(s, Duration::from_millis(1), MAX_DEADLINE)
}

/// Parse a memory cap: from [`MIN_MEMORY_BYTES`] to [`MAX_MEMORY_BYTES`].
///
/// ```
/// use wasmop::policy::parse_memory;
/// assert_eq!(parse_memory("64Mi"), Ok(64 << 20));
/// assert_eq!(parse_memory("1Mi").unwrap_err(), "1Mi is less than the 2Mi a plugin needs to start");
/// assert_eq!(parse_memory("8Gi").unwrap_err(), "8Gi is more than the maximum of 4Gi");
/// ```
///
/// # Errors
/// One line saying what is wrong, without naming the flag or field (the caller does).
pub fn parse_memory(s: &str) -> Result<u64, String> {
    if units::parse_bytes(s)? < MIN_MEMORY_BYTES {
        return Err(format!("{s} is less than the {} a plugin needs to start", units::format_bytes(MIN_MEMORY_BYTES)));
    }
    units::bytes_in(s, MIN_MEMORY_BYTES, MAX_MEMORY_BYTES)
}

/// Limits applied to every call into a plugin.
///
/// ```
/// use std::time::Duration;
/// use wasmop::policy::Limits;
/// let limits = Limits::default().deadline(Duration::from_millis(100)).memory_bytes(16 << 20);
/// assert_eq!(limits.memory_bytes, 16 << 20);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget of one call, instantiation included. Default 1 s.
    pub deadline: Duration,
    /// Total linear memory of one instance, all memories together. Default 64 MiB.
    pub memory_bytes: u64,
    /// Fuel (about one unit per wasm instruction) of one call; `None` (the default) meters
    /// nothing. A deterministic bound, unlike the deadline; costs some speed when enabled.
    pub fuel: Option<u64>,
    /// Bounds on what a call may return.
    pub output: OutputLimits,
    /// Call time per second the plugin's reconciles may use across its workers (policy
    /// `cpuShare`); `None` (the default): a fair share of `--concurrency` ([`CpuShare::fair`]).
    /// The controller's queue enforces it, not the runtime.
    pub cpu_share: Option<CpuShare>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(1),
            memory_bytes: 64 << 20,
            fuel: None,
            output: OutputLimits::default(),
            cpu_share: None,
        }
    }
}

impl Limits {
    /// Set the call deadline.
    #[must_use]
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Set the memory cap in bytes.
    #[must_use]
    pub fn memory_bytes(mut self, bytes: u64) -> Self {
        self.memory_bytes = bytes;
        self
    }

    /// Set the fuel of one call (`None`: unmetered).
    #[must_use]
    pub fn fuel(mut self, fuel: Option<u64>) -> Self {
        self.fuel = fuel;
        self
    }

    /// Set the output bounds.
    #[must_use]
    pub fn output(mut self, output: OutputLimits) -> Self {
        self.output = output;
        self
    }

    /// Set the CPU share (`None`: the fair default).
    #[must_use]
    pub fn cpu_share(mut self, share: Option<CpuShare>) -> Self {
        self.cpu_share = share;
        self
    }
}
