//! A compile the user waits for says so: `wasmop inspect` (as `reconcile` and `admit`) logs
//! what it compiles and its size when the compile starts, and when done the time taken and
//! whether the artifact came from the cache.

use std::process::Command;
use wasmop_e2e::fixtures;

fn inspect(cache: &std::path::Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(["inspect", fixtures::memcached().to_str().unwrap()])
        .env("WASMOP_CACHE_DIR", cache)
        .env_remove("WASMOP_POLICY")
        .env("RUST_LOG", "info")
        .output()
        .expect("running wasmop");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    plain(&String::from_utf8_lossy(&out.stderr))
}

/// `text` without its terminal colours (`ESC [ ... m`).
fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|&c| c == 'm');
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn a_compile_says_what_it_compiles_how_big_how_long_and_whether_it_was_cached() {
    let cache = tempfile::tempdir().unwrap();
    let first = inspect(cache.path());
    let lines: Vec<&str> = first.lines().collect();
    assert_eq!(lines.len(), 2, "one line when it starts, one when done:\n{first}");
    assert!(lines[0].contains("compiling the plugin (not in the artifact cache yet"), "{first}");
    assert!(lines[0].contains("memcached.wasm") && lines[0].contains(" KB"), "{first}");
    assert!(lines[1].contains("plugin compiled (cached for next time)") && lines[1].contains("elapsed="), "{first}");
    let second = inspect(cache.path());
    let lines: Vec<&str> = second.lines().collect();
    assert_eq!(lines.len(), 1, "a cached artifact starts no compile:\n{second}");
    assert!(lines[0].contains("plugin loaded from the artifact cache") && lines[0].contains("elapsed="), "{second}");
}
