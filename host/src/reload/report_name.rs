//! The name and label of a file report: the `WasmPlugin` of a plugin file from which no plugin
//! runs (see `file_report.rs`). Plugin names are DNS-1123 labels, without dots; report names
//! always have one, so the two never collide.

use std::path::Path;

use crate::runtime::digest;

/// The label (value `"true"`) on a `WasmPlugin` that reports a rejected file rather than a plugin.
pub const FILE_REPORT_LABEL: &str = "wasmop.dev/file-report";

/// The longest part of a report name taken from the file name (a name may have 253 characters).
const MAX_STEM: usize = 200;

/// The name of the file report of `file`: a DNS-1123 subdomain ending in `.wasm`. A file name
/// that is one already (`broken.wasm`) is kept; any other is lowercased, each run of other
/// characters becomes `-`, and 8 hex digits of the original name's sha256 keep apart files
/// that map to the same text (`My_Plugin.wasm` is `my-plugin-1a2b3c4d.wasm`).
pub fn report_name(file: &Path) -> String {
    let original = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = original.strip_suffix(".wasm").unwrap_or(&original);
    let mut clean = String::with_capacity(stem.len());
    for c in stem.chars().map(|c| c.to_ascii_lowercase()) {
        match c {
            'a'..='z' | '0'..='9' => clean.push(c),
            '.' if !clean.is_empty() && !clean.ends_with(['.', '-']) => clean.push('.'),
            _ if !clean.is_empty() && !clean.ends_with(['.', '-']) => clean.push('-'),
            _ => {}
        }
    }
    clean.truncate(MAX_STEM);
    let clean = clean.trim_end_matches(['.', '-']);
    if clean == stem {
        format!("{clean}.wasm")
    } else {
        let hash = &digest(original.as_bytes())[..8];
        if clean.is_empty() { format!("file-{hash}.wasm") } else { format!("{clean}-{hash}.wasm") }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::contract::is_dns1123_label;
    use crate::contract::names::is_dns1123_subdomain;

    fn name(file: &str) -> String {
        report_name(&PathBuf::from("/plugins").join(file))
    }

    #[test]
    fn a_file_name_that_is_a_dns_subdomain_is_the_report_name() {
        assert_eq!(name("broken.wasm"), "broken.wasm");
        assert_eq!(name("memcached-v2.wasm"), "memcached-v2.wasm");
        assert_eq!(name("a.b.wasm"), "a.b.wasm");
    }

    #[test]
    fn other_file_names_are_cleaned_and_told_apart_by_a_hash() {
        let upper = name("My_Plugin.wasm");
        assert!(upper.starts_with("my-plugin-") && upper.ends_with(".wasm") && upper.len() == "my-plugin-".len() + 8 + 5);
        assert_ne!(upper, name("my_plugin.wasm"), "two files, two reports");
        assert_eq!(upper, name("My_Plugin.wasm"), "stable");
        assert!(name("__.wasm").starts_with("file-"));
        assert!(name("-x-.wasm").starts_with("x-"));
    }

    #[test]
    fn every_report_name_is_a_subdomain_that_no_plugin_name_can_be() {
        let long = format!("{}.wasm", "a".repeat(300));
        for file in ["broken.wasm", "My_Plugin.wasm", "__.wasm", "a..b.wasm", "-.-.wasm", "ünïcode.wasm", "x y.wasm", &long] {
            let n = name(file);
            assert!(is_dns1123_subdomain(&n), "{file} -> {n}");
            assert!(!is_dns1123_label(&n), "{file} -> {n} could be a plugin's name");
        }
    }
}
