//! The [`MemoryLimiter`] that enforces a call's memory cap ([`Limits::memory_bytes`]).
//!
//! [`Limits::memory_bytes`]: crate::policy::Limits::memory_bytes

/// The error a guest traps with when it grows past its memory cap.
#[derive(Debug, thiserror::Error)]
#[error("memory limit of {limit} bytes exceeded (the guest asked for {requested} bytes in total)")]
pub struct MemoryLimitExceeded {
    /// The cap.
    pub limit: u64,
    /// What the instance would have had after the growth.
    pub requested: u64,
}

/// Caps the sum of all linear memories of one store and records its high-water mark.
///
/// `StoreLimits` caps each memory separately; a component holds several core instances, so
/// the total is what must be bounded.
#[derive(Debug)]
pub struct MemoryLimiter {
    limit: u64,
    total: u64,
    high_water: u64,
}

const MAX_TABLE_ELEMENTS: usize = 1 << 20;
const MAX_INSTANCES: usize = 64;

impl MemoryLimiter {
    /// A limiter allowing `limit` bytes of linear memory in total.
    pub fn new(limit: u64) -> Self {
        Self { limit, total: 0, high_water: 0 }
    }

    /// The largest total the instance reached.
    pub fn high_water(&self) -> u64 {
        self.high_water
    }
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let requested = self.total + (desired - current) as u64;
        if requested > self.limit {
            return Err(wasmtime::Error::new(MemoryLimitExceeded { limit: self.limit, requested }));
        }
        self.total = requested;
        self.high_water = self.high_water.max(requested);
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_INSTANCES
    }

    fn memories(&self) -> usize {
        MAX_INSTANCES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    #[test]
    fn limiter_caps_the_sum_of_memories() {
        let mut l = MemoryLimiter::new(100);
        assert!(l.memory_growing(0, 60, None).unwrap());
        let err = l.memory_growing(0, 50, None).unwrap_err();
        assert!(err.downcast_ref::<MemoryLimitExceeded>().is_some());
        assert!(l.memory_growing(0, 40, None).unwrap());
        assert!(l.memory_growing(40, 41, None).is_err());
        assert_eq!(l.high_water(), 100);
    }
}
