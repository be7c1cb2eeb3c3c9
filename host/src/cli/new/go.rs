//! `wasmop new --lang go`: a Go module on the Go SDK (`sdk-go/`, module
//! `github.com/wasmop/wasmop/sdk-go`). The logic is plain Go in `plugin.go` (unit-tested by
//! `go test`, no WebAssembly in sight); `build.sh` runs the SDK's `build/component.sh`, which
//! generates the component's entry (wit-bindgen go) and builds with mainline Go for wasip1.
//! Templates: `templates/go/`.

use std::fmt::Write as _;

use anyhow::{Context as _, bail};

use super::{NewArgs, common_values, render, wit_files_of};
use crate::contract::Kind;

const PLUGIN_GO: &str = include_str!("../templates/go/plugin.go");
const TEST_GO: &str = include_str!("../templates/go/plugin_test.go");
const BUILD_SH: &str = include_str!("../templates/go/build.sh");
const README: &str = include_str!("../templates/go/README.md");

/// The Go SDK of the checkout this binary was built from (`<checkout>/sdk-go`), known at build
/// time; `None` when that directory is gone (a binary installed elsewhere, a removed checkout).
fn checkout_sdk() -> Option<std::path::PathBuf> {
    let sdk = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk-go");
    std::fs::canonicalize(sdk).ok().filter(|p| p.join("go.mod").is_file())
}

/// The Go module path of the SDK.
pub(super) const SDK_MODULE: &str = "github.com/wasmop/wasmop/sdk-go";

/// The project's own files (the CRD and the sample are added by the caller).
///
/// # Errors
/// An `--sdk-path` that is not a directory with the SDK's `go.mod`.
pub(super) fn files(args: &NewArgs) -> anyhow::Result<Vec<(String, String)>> {
    if let Some(webhook) = args.webhooks.first() {
        bail!(
            "--webhook {}: a --lang go project declares no webhooks yet; declare them in its Manifest (sdk-go, docs/go.md)",
            webhook.name
        );
    }
    let (replace, sdk_note) =
        match args.sdk_path.clone().map(|p| (p, "--sdk-path")).or_else(|| checkout_sdk().map(|p| (p, "checkout"))) {
            Some((path, "checkout")) => (
                format!("\nreplace {SDK_MODULE} => {}\n", path.display()),
                format!(", from {} (the checkout wasmop was built from; --sdk-path picks another)", path.display()),
            ),
            Some((path, _)) => {
                let path = std::fs::canonicalize(&path).with_context(|| format!("SDK path {}", path.display()))?;
                let go_mod = std::fs::read_to_string(path.join("go.mod")).unwrap_or_default();
                if !go_mod.lines().any(|l| l.trim() == format!("module {SDK_MODULE}")) {
                    bail!("SDK path {}: no go.mod of {SDK_MODULE} there (give the checkout's sdk-go directory)", path.display());
                }
                (format!("\nreplace {SDK_MODULE} => {}\n", path.display()), format!(", from {}", path.display()))
            }
            None => (String::new(), format!(" (tag `sdk-go/v{}` of the repository)", env!("CARGO_PKG_VERSION"))),
        };
    let mut children = String::new();
    for child in &args.children {
        let _ = writeln!(children, "\t{},", kind(child));
    }
    let parent = kind(&args.parent);
    let package = package(&args.name);
    let mut values: Vec<(&str, &str)> = Vec::new();
    let common = common_values(args);
    values.extend(common.iter().map(|(k, v)| (*k, v.as_str())));
    values.extend([
        ("parent", parent.as_str()),
        ("children", children.as_str()),
        ("package", package.as_str()),
        ("sdk_note", sdk_note.as_str()),
        ("wit_version", super::GO_WIT_VERSION),
    ]);
    let go_mod =
        format!("module example.com/{}\n\ngo 1.24\n\nrequire {SDK_MODULE} v{}\n{replace}", args.name, env!("CARGO_PKG_VERSION"));
    let mut files = vec![
        ("go.mod".to_owned(), go_mod),
        ("plugin.go".to_owned(), render(PLUGIN_GO, &values)),
        ("plugin_test.go".to_owned(), render(TEST_GO, &values)),
        ("build.sh".to_owned(), render(BUILD_SH, &values)),
        ("README.md".to_owned(), render(README, &values)),
        (".gitignore".to_owned(), "*.wasm\n".to_owned()),
    ];
    files.extend(wit_files_of(super::GO_WIT_VERSION));
    Ok(files)
}

/// The commands to run in the new project, one a line.
pub(super) fn next_steps(args: &NewArgs) -> Vec<String> {
    vec![
        "go test ./...".into(),
        "sh build.sh                   # wit-bindgen and wasm-tools in $WASMOP_GO_TOOLCHAIN: see README.md".into(),
        format!("wasmop reconcile --plugin {}.wasm --object sample.yaml", args.name),
    ]
}

/// The Go package name of a plugin name: `-` becomes `_`, and a leading digit gets `plugin_`.
fn package(name: &str) -> String {
    let package = name.replace('-', "_");
    if package.starts_with(|c: char| c.is_ascii_digit()) { format!("plugin_{package}") } else { package }
}

/// A kind as a Go expression. Kinds hold only letters, digits, `.` and `-` (checked when
/// parsed), so no character needs escaping.
fn kind(kind: &Kind) -> String {
    format!(r#"wasmop.NewKind("{}", "{}", "{}")"#, kind.group, kind.version, kind.kind)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{args, file, paths};
    use super::super::{Lang, generate};
    use super::checkout_sdk;

    #[test]
    fn the_project_declares_parent_and_children_in_plain_go() {
        let files =
            generate(&args("my-db", "example.com/v1/Database", &["v1/ConfigMap", "apps/v1/Deployment"], Lang::Go)).unwrap();
        let own: Vec<&str> = paths(&files).into_iter().filter(|p| !p.starts_with("wit/")).collect();
        assert_eq!(
            own,
            [".gitignore", "README.md", "build.sh", "crd.yaml", "go.mod", "plugin.go", "plugin_test.go", "sample.yaml"]
        );
        let logic = file(&files, "plugin.go");
        assert!(logic.contains("\npackage my_db\n"), "{logic}");
        assert!(logic.contains(r#"var Parent = wasmop.NewKind("example.com", "v1", "Database")"#), "{logic}");
        let children = "var Children = []wasmop.Kind{\n\twasmop.NewKind(\"\", \"v1\", \"ConfigMap\"),\n\t\
                        wasmop.NewKind(\"apps\", \"v1\", \"Deployment\"),\n}\n";
        assert!(logic.contains(children), "{logic}");
        assert!(!logic.contains("wasm\"") && !logic.contains("go:wasm"), "the logic is plain Go");
        let go_mod = file(&files, "go.mod");
        assert!(
            go_mod.starts_with("module example.com/my-db\n\ngo 1.24\n\nrequire github.com/wasmop/wasmop/sdk-go v"),
            "{go_mod}"
        );
        // Built from this checkout: its sdk-go by default.
        let checkout = checkout_sdk().expect("this checkout's sdk-go");
        assert!(go_mod.ends_with(&format!("\nreplace github.com/wasmop/wasmop/sdk-go => {}\n", checkout.display())), "{go_mod}");
        let build = file(&files, "build.sh");
        assert!(build.contains("\nbash \"$sdk/build/component.sh\" . my-db.wasm wit controller\n"), "{build}");
    }

    #[test]
    fn go_builds_against_a_copy_of_wit_0_3_0() {
        let files = generate(&args("x", "example.com/v1/X", &[], Lang::Go)).unwrap();
        let wit = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit/v0.3.0");
        let copied: Vec<&str> = paths(&files).into_iter().filter(|p| p.starts_with("wit/")).collect();
        assert_eq!(copied.len(), std::fs::read_dir(&wit).unwrap().count());
        for path in copied {
            let name = path.trim_start_matches("wit/");
            assert_eq!(file(&files, path), std::fs::read_to_string(wit.join(name)).unwrap(), "{name}");
        }
        assert!(file(&files, "README.md").contains("`wasmop:plugin@0.3.0`, world `controller`"));
    }

    #[test]
    fn a_leading_digit_gets_a_package_prefix_and_sdk_path_a_replace() {
        let mut a = args("1db", "example.com/v1/X", &[], Lang::Go);
        a.sdk_path = Some(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk-go"));
        let files = generate(&a).unwrap();
        assert!(file(&files, "plugin.go").contains("\npackage plugin_1db\n"));
        assert!(file(&files, "plugin.go").contains("var Children = []wasmop.Kind{\n}\n"));
        let go_mod = file(&files, "go.mod");
        assert!(go_mod.contains("\nreplace github.com/wasmop/wasmop/sdk-go => /"), "{go_mod}");
        a.sdk_path = Some(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")));
        let err = generate(&a).unwrap_err().to_string();
        assert!(
            err.ends_with("no go.mod of github.com/wasmop/wasmop/sdk-go there (give the checkout's sdk-go directory)"),
            "{err}"
        );
    }
}
