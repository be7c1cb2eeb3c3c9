//! A valid WebAssembly component of a different world than `wasmop:plugin/operator`, for the
//! host's tests: loading it must fail with a clear error that names the missing
//! `wasmop:plugin/reconciler` export. Not an example. It is built without the SDK; on
//! non-wasm targets it is empty.

#[cfg(target_arch = "wasm32")]
mod component {
    wit_bindgen::generate!({
        inline: r"
            package test:other@0.1.0;

            world other {
                /// Says hello: the only thing this component does.
                export hello: func() -> string;
            }
        ",
        world: "other",
    });

    struct Other;

    impl Guest for Other {
        fn hello() -> String {
            "hello from the wrong world".to_owned()
        }
    }

    export!(Other);
}
