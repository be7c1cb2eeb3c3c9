//! Conversions between the generated bindings and [`crate::contract`] types, one module per
//! WIT version.

pub(super) mod v0_1;
pub(super) mod v0_2;
