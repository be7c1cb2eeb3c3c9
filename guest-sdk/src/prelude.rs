//! Everything a plugin usually needs: `use wasmop_sdk::prelude::*;`.

pub use crate::log;
pub use crate::{
    Condition, ConditionStatus, Context, Error, Event, EventType, Kind, LookupError, Manifest, ObjectRef, Plugin, Quantity,
    Request, Response, Scope,
};
