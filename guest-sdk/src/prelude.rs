//! Everything a plugin usually needs: `use wasmop_sdk::prelude::*;`.

pub use crate::log;
pub use crate::{
    AdmissionRequest, Condition, ConditionStatus, Context, Error, Event, EventType, FailurePolicy, Kind, LookupError, Manifest,
    ObjectRef, Operation, Plugin, Quantity, Request, Response, Rule, RuleScope, Scope, Verdict, Webhook,
};
