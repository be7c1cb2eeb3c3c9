//! Watching the cluster: one watch per kind, shared by every plugin, which is the host's object
//! cache and its change feed ([`Watches`]); how a watch makes its initial list
//! ([`InitialList`]); how long a failed watch waits ([`backoff`]).

pub mod backoff;
mod initial_list;
mod label_index;
mod watches;

pub use initial_list::InitialList;
pub use watches::{Subscriber, Subscription, SyncTimeout, Watches, common_selector};
