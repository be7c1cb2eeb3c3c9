//! The `bindgen!` sites, one per WIT version the host loads.
//!
//! Private to the runtime; [`super::convert`] maps these generated types to and from
//! [`crate::contract`]. Each version's imports are linked into the same linker (their
//! interface names carry the version), so one linker instantiates plugins of every version.

/// `wasmop:plugin@0.1.0`: world `operator` (manifest and reconcile in one interface).
pub mod v0_1 {
    wasmtime::component::bindgen!({
        path: "../wit/v0.1.0",
        world: "operator",
        imports: { default: async | trappable },
        exports: { default: async },
    });

    pub use self::exports::wasmop::plugin::reconciler as guest;
    pub use self::wasmop::plugin::{cache, log, types};

    /// The name of the interface every 0.1.0 plugin exports.
    pub const RECONCILER: &str = "wasmop:plugin/reconciler@0.1.0";
}

/// `wasmop:plugin@0.2.0`: worlds `operator` (reconcile and admission), `controller`
/// (reconcile) and `webhook` (admission). The bindings are those of `operator`; a plugin of
/// another world is called through the per-interface indices of the exports it has.
pub mod v0_2 {
    wasmtime::component::bindgen!({
        path: "../wit/v0.2.0",
        world: "operator",
        imports: { default: async | trappable },
        exports: { default: async },
    });

    pub use self::exports::wasmop::plugin::{admission, plugin, reconciler};
    pub use self::wasmop::plugin::{cache, log, types};

    /// The name of the interface every 0.2.0 plugin exports.
    pub const PLUGIN: &str = "wasmop:plugin/plugin@0.2.0";
    /// The name of the reconcile interface.
    pub const RECONCILER: &str = "wasmop:plugin/reconciler@0.2.0";
    /// The name of the admission interface.
    pub const ADMISSION: &str = "wasmop:plugin/admission@0.2.0";
}

/// `wasmop:plugin@0.3.0`: the worlds of 0.2.0; a reconcile failure carries status and
/// conditions, a webhook its CEL match conditions. Bound as for 0.2.0.
pub mod v0_3 {
    wasmtime::component::bindgen!({
        path: "../wit/v0.3.0",
        world: "operator",
        imports: { default: async | trappable },
        exports: { default: async },
    });

    pub use self::exports::wasmop::plugin::{admission, plugin, reconciler};
    pub use self::wasmop::plugin::{cache, log, types};

    /// The name of the interface every 0.3.0 plugin exports.
    pub const PLUGIN: &str = "wasmop:plugin/plugin@0.3.0";
    /// The name of the reconcile interface.
    pub const RECONCILER: &str = "wasmop:plugin/reconciler@0.3.0";
    /// The name of the admission interface.
    pub const ADMISSION: &str = "wasmop:plugin/admission@0.3.0";
}

/// The worlds the host accepts, for error messages.
pub const ACCEPTED_WORLDS: &str =
    "wasmop:plugin/operator@0.1.0, or wasmop:plugin@0.2.0 or @0.3.0 worlds operator, controller or webhook";
