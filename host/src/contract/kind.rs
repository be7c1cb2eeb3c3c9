//! Kinds, scopes and object references as the host sees them: the shared definitions of
//! `wasmop-types`, which the plugin SDK uses too (one `Display`, one parser, one JSON form).

pub use wasmop_types::{Kind, KindError, ObjectRef, Scope};
