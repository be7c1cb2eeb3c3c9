//! The work queue a plugin's workers take keys from ([`WorkQueue`]), and the delays of its
//! retries ([`QueueConfig`]: per-key exponential backoff and a global token bucket).

mod rate_limit;
mod work_queue;

pub use rate_limit::QueueConfig;
pub use work_queue::{Lease, QueueKey, WorkQueue};
