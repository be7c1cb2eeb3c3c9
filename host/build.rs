//! Link order of the release `wasmop` binary: the symbols that start-up and the steady path touch
//! come first (`link/symbol-order.txt.gz`, made by `scripts/symbol_order.sh`), so the pages they
//! occupy are few and together instead of spread over the whole `.text`, each dragging its
//! neighbours in through the kernel's fault-around (BENCHMARKS.md, "Link order").
//!
//! Only for release builds where the linker is LLD (x86_64 Linux with glibc: rustc's default
//! linker there since 1.90); debug builds, other targets (the musl image) and
//! `WASMOP_NO_SYMBOL_ORDER=1` keep the default order. A symbol the list names that the binary
//! lacks (code changed since the list was made) is skipped: a stale list costs pages, not
//! correctness.

use std::io::Read;
use std::path::PathBuf;

fn main() {
    const ORDER: &str = "link/symbol-order.txt.gz";
    println!("cargo:rerun-if-changed={ORDER}");
    println!("cargo:rerun-if-env-changed=WASMOP_NO_SYMBOL_ORDER");
    let var = |key: &str| std::env::var(key).unwrap_or_default();
    let lld_by_default =
        var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ARCH") == "x86_64" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    if var("PROFILE") != "release" || !lld_by_default || std::env::var_os("WASMOP_NO_SYMBOL_ORDER").is_some() {
        return;
    }
    let source = PathBuf::from(var("CARGO_MANIFEST_DIR")).join(ORDER);
    let Ok(file) = std::fs::File::open(&source) else { return };
    let mut list = String::new();
    flate2::read::GzDecoder::new(file).read_to_string(&mut list).expect("link/symbol-order.txt.gz is gzip'd text");
    let order = PathBuf::from(var("OUT_DIR")).join("symbol-order.txt");
    std::fs::write(&order, list).expect("OUT_DIR is writable");
    println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}", order.display());
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
}
