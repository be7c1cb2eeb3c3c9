//! The one `bindgen!` site: host bindings for world `wasmop:plugin/operator@0.1.0`.
//!
//! Private to the runtime; [`super::convert`] maps these generated types to and from
//! [`crate::contract`].

wasmtime::component::bindgen!({
    path: "../wit/v0.1.0",
    world: "operator",
    imports: { default: async | trappable },
    exports: { default: async },
});

pub use self::exports::wasmop::plugin::reconciler as guest;
pub use self::wasmop::plugin::{cache, log, types};
