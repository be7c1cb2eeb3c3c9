//! The raw bindings of the WIT world `wasmop:plugin/operator@0.3.0` (wasm32 only).
//!
//! This is the crate's single `generate!` site. Plugin authors never use it directly: the
//! SDK's types wrap it and `export_plugin!` reaches it through `$crate::bindings`.

wit_bindgen::generate!({
    path: "../wit/v0.3.0",
    world: "operator",
    pub_export_macro: true,
    default_bindings_module: "wasmop_sdk::bindings",
    export_macro_name: "export",
});

/// A kind as the generated bindings' `kind-ref` record (lookups and the manifest).
pub(crate) fn kind_to_raw(kind: &crate::Kind) -> wasmop::plugin::types::KindRef {
    wasmop::plugin::types::KindRef { group: kind.group.clone(), version: kind.version.clone(), kind: kind.kind.clone() }
}
