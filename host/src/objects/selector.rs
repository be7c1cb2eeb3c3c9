//! Label selectors in kubectl syntax: the shared [`LabelSelector`] of `wasmop-types`, which the
//! plugin SDK's native test fixture uses too, so a selector matches the same objects in a unit
//! test as in the host.

pub use wasmop_types::{LabelSelector, SelectorError};
