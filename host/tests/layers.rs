//! The host's modules import one way: each only from modules below it in [`LAYERS`] (the order
//! `src/lib.rs` lists them in). A `crate::<module>` path in a module's code (tests excluded)
//! that points up or sideways fails here, naming the file and the path.

use std::path::Path;

/// Lowest first.
const LAYERS: &[&str] = &[
    "allocator",
    "units",
    "metrics",
    "yaml",
    "contract",
    "policy",
    "objects",
    "runtime",
    "cluster",
    "watch",
    "queue",
    "leader",
    "plugin_config",
    "actions",
    "shard",
    "controller",
    "reload",
    "registry",
    "admission",
    "rbac",
    "server",
    "cli",
];

fn layer(module: &str) -> usize {
    LAYERS.iter().position(|l| *l == module).unwrap_or_else(|| panic!("module {module} is not in LAYERS"))
}

/// `text` without comments, string literals and its `#[cfg(test)]` module.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or_default();
        let mut in_string = false;
        let mut escaped = false;
        for c in line.chars() {
            match (in_string, escaped, c) {
                (true, false, '\\') => escaped = true,
                (true, false, '"') => in_string = false,
                (true, ..) => escaped = false,
                (false, _, '"') => in_string = true,
                (false, ..) => out.push(c),
            }
        }
        out.push('\n');
    }
    out
}

/// The top-level modules named by `crate::<module>` paths in `code`.
fn imported(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let rest = &code[i + "crate::".len()..];
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if !name.is_empty() {
            found.push(name);
        }
    }
    found
}

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable src dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_module_imports_only_from_modules_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    files(&src, &mut paths);
    let mut wrong = Vec::new();
    for path in &paths {
        let rel = path.strip_prefix(&src).expect("under src");
        let module = rel.iter().next().and_then(|m| m.to_str()).expect("utf-8 path").trim_end_matches(".rs");
        if matches!(module, "lib" | "main") {
            continue;
        }
        let text = std::fs::read_to_string(path).expect("readable source");
        for target in imported(&code(&text)) {
            if target == module {
                continue;
            }
            if layer(&target) >= layer(module) {
                wrong.push(format!("{}: crate::{target} ({module} is below {target} in LAYERS)", rel.display()));
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(wrong.is_empty(), "imports against the layer order:\n{}", wrong.join("\n"));
}

#[test]
fn the_check_sees_an_upward_import() {
    let upward = code("use crate::controller::Manager; // crate::cli\nconst S: &str = \"crate::server\";\n");
    assert_eq!(imported(&upward), ["controller"]);
    assert!(layer("controller") > layer("policy"), "a policy file with this line would fail the check");
}
