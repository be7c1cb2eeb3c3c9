//! Links the `wasmop` executable as a position-dependent (non-PIE) executable.
//!
//! A PIE's every pointer in static data (vtables, `&'static` tables, the relocated read-only
//! data) carries a relative relocation the dynamic loader applies at start: with wasmtime,
//! Cranelift, kube and rustls linked in that is ~75,000 relocations, a 1.7 MiB `.rela.dyn` read
//! once and left resident, and 1 MiB of `.data.rel.ro` made private and dirty. Linked at a fixed
//! address, the static linker resolves them instead, so neither is there at run time (issue 12,
//! the host's resident memory against a native controller). The Rust objects stay
//! position-independent code (no codegen flag changes, nothing rebuilt); only the link of the
//! binaries differs. The executable's own image loses ASLR (shared libraries, heap, stacks and
//! mmaps keep it).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    if target.contains("linux") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
