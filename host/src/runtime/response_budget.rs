//! [`ResponseBudget`]: the bytes of plugin responses the host holds at once, all plugins and
//! calls together.
//!
//! Each call's output is bounded (`maxResponseBytes`, and its parsed form by
//! [`PARSED_SIZE_FACTOR`](crate::contract::parsed_size::PARSED_SIZE_FACTOR) times that), but
//! eight workers of eight plugins returning large responses at once would still hold 64 of them:
//! 15.9 MB children for 8 parents once took a host to 2.13 GB. A response is therefore admitted
//! into the host only with a reservation of its bytes from one budget shared by every call of the
//! runtime; the reservation is held while the response is parsed, planned and written, and a call
//! that does not fit waits for others to finish (it never fails for it). A response larger than
//! the whole budget waits until it is alone. An admission verdict (a mutated object, up to
//! 3 MiB) is reserved from the same budget while it is parsed and checked; it waits at most its
//! call's deadline, and is then refused (the request denied) rather than answered late.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The default budget: 64 MiB of responses in flight (four responses of the default 16 MiB
/// limit; small responses are never held up by it).
pub const DEFAULT_RESPONSE_BUDGET: u64 = 64 << 20;

/// The budget's unit, in bytes: reservations are rounded up to it.
const UNIT: u64 = 1 << 10;

/// Bytes of responses that may be held at once; see the module docs.
#[derive(Debug, Clone)]
pub struct ResponseBudget {
    units: Arc<Semaphore>,
    total: u32,
}

/// A reservation: its bytes go back to the budget when it is dropped.
#[derive(Debug)]
pub struct Reservation {
    _permit: Option<OwnedSemaphorePermit>,
}

impl ResponseBudget {
    /// A budget of `bytes` (at least one unit of 1 KiB).
    pub fn new(bytes: u64) -> Self {
        let total = u32::try_from(bytes.div_ceil(UNIT))
            .unwrap_or(u32::MAX)
            .clamp(1, u32::try_from(Semaphore::MAX_PERMITS).unwrap_or(u32::MAX));
        Self { units: Arc::new(Semaphore::new(total as usize)), total }
    }

    /// Reserve `bytes` (rounded up to 1 KiB, at most the whole budget), waiting until they are
    /// free.
    pub async fn reserve(&self, bytes: usize) -> Reservation {
        let units = u32::try_from((bytes as u64).div_ceil(UNIT)).unwrap_or(u32::MAX).clamp(1, self.total);
        // The semaphore is never closed: a permit always comes.
        let permit = Arc::clone(&self.units).acquire_many_owned(units).await.ok();
        Reservation { _permit: permit }
    }

    /// Bytes free now (for tests and metrics).
    pub fn available(&self) -> u64 {
        self.units.available_permits() as u64 * UNIT
    }
}

impl Default for ResponseBudget {
    fn default() -> Self {
        Self::new(DEFAULT_RESPONSE_BUDGET)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_response_that_does_not_fit_waits_until_others_are_done() {
        let budget = ResponseBudget::new(10 << 10);
        let first = budget.reserve(6 << 10).await;
        assert_eq!(budget.available(), 4 << 10);
        let waiting = tokio::time::timeout(Duration::from_millis(50), budget.reserve(6 << 10)).await;
        assert!(waiting.is_err(), "6 KiB do not fit in the 4 KiB left");
        let small = tokio::time::timeout(Duration::from_millis(50), budget.reserve(100)).await;
        assert!(small.is_ok(), "a small response passes");
        drop(small);
        drop(first);
        let second = tokio::time::timeout(Duration::from_millis(50), budget.reserve(6 << 10)).await;
        assert!(second.is_ok(), "fits once the first is done");
    }

    #[tokio::test]
    async fn a_response_larger_than_the_budget_waits_until_it_is_alone_and_never_fails() {
        let budget = ResponseBudget::new(4 << 10);
        let other = budget.reserve(1).await;
        let huge = budget.clone();
        let task = tokio::spawn(async move { huge.reserve(1 << 30).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!task.is_finished());
        drop(other);
        let held = tokio::time::timeout(Duration::from_secs(1), task).await.expect("alone now").unwrap();
        assert_eq!(budget.available(), 0);
        drop(held);
        assert_eq!(budget.available(), 4 << 10);
    }
}
