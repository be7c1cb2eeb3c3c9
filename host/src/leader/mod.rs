//! Which replica writes: leader election on a Lease ([`LeaderElector`]), and this host's role
//! that everything writing waits for ([`Leadership`]).

mod election;
mod role;

pub use election::{LeaderElector, LeaderError, LeaseConfig};
pub use role::Leadership;
