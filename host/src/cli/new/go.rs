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
    let admission = admission_values(args);
    values.extend(admission.iter().map(|(k, v)| (*k, v.as_str())));
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
    let wasm = format!("{}.wasm", args.name);
    let mut steps = vec![
        "go test ./...".into(),
        "sh build.sh                   # wit-bindgen and wasm-tools in $WASMOP_GO_TOOLCHAIN: see README.md".into(),
        format!("wasmop reconcile --plugin {wasm} --object sample.yaml{}", super::crds_flag(args)),
    ];
    steps.extend(super::admit_steps(args, &wasm));
    steps
}

/// The values of the admission placeholders: the manifest's `Webhooks`, `Admit` and each
/// webhook's function and test when the plugin has webhooks (the build then makes world
/// `operator`); world `controller` and nothing else when it has none. Rendered first, so the
/// snippets' own placeholders (`{{Kind}}`) are filled after.
fn admission_values(args: &NewArgs) -> Vec<(&'static str, String)> {
    let crds_flag = ("crds_flag", super::crds_flag(args).to_owned());
    if args.webhooks.is_empty() {
        let none = ["manifest_webhooks", "admit_field", "webhook_functions", "webhook_tests", "readme_admit", "admit_commands"];
        let mut values: Vec<(&str, String)> = none.into_iter().map(|k| (k, String::new())).collect();
        values.extend([("world", "controller".to_owned()), crds_flag]);
        return values;
    }
    let (mut list, mut cases, mut functions, mut tests) =
        (String::new(), String::new(), String::new(), String::from(ADMISSION_TEST_GO));
    for webhook in &args.webhooks {
        let constructor = if webhook.is_mutating() { "MutatingWebhook" } else { "ValidatingWebhook" };
        let _ = writeln!(list, "\twasmop.{constructor}(\"{}\").WithRule(parentRule),", webhook.name);
        let ident = camel(&webhook.name);
        let _ = writeln!(cases, "\tcase \"{}\":\n\t\treturn Admit{ident}(req.Object), nil", webhook.name);
        let (function, test) =
            if webhook.is_mutating() { (MUTATING_GO, MUTATING_TEST_GO) } else { (VALIDATING_GO, VALIDATING_TEST_GO) };
        let fill = |t: &str| t.replace("{webhook}", &webhook.name).replace("{ident}", &ident);
        functions.push_str(&fill(function));
        tests.push_str(&fill(test));
    }
    let functions = ADMIT_GO.replace("{webhook_list}", &list).replace("{cases}", &cases) + &functions;
    let commands: String =
        super::admit_steps(args, &format!("{}.wasm", args.name)).iter().map(|c| format!("    {c}\n")).collect();
    vec![
        ("world", "operator".to_owned()),
        ("manifest_webhooks", "\n\tWebhooks:    Webhooks,".to_owned()),
        ("admit_field", ", Admit: Admit".to_owned()),
        ("webhook_functions", functions),
        ("webhook_tests", tests),
        ("readme_admit", ", its webhooks and `Admit(webhook, req) (Verdict, error)`".to_owned()),
        ("admit_commands", commands),
        crds_flag,
    ]
}

/// `set-defaults` as `SetDefaults`: the webhook's function is `Admit<Ident>`.
fn camel(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect()
}

const ADMIT_GO: &str = r#"
// parentRule is the requests the webhooks are called for: the parent's CREATE and UPDATE.
var parentRule = wasmop.NewRule([]wasmop.Operation{wasmop.Create, wasmop.Update}, Parent.Group, Parent.Version, "{{plural}}")

// Webhooks are the admission webhooks the plugin serves, each failing closed (the API server
// refuses the request when the call fails).
var Webhooks = []wasmop.Webhook{
{webhook_list}}

// Admit answers one admission request for the webhook named webhook. An error fails the call
// (the API server refuses the request with its message).
func Admit(webhook string, req wasmop.AdmissionRequest) (wasmop.Verdict, error) {
	if req.Object == nil {
		return wasmop.Verdict{}, wasmop.Terminalf("webhook %s: the request has no object", webhook)
	}
	switch webhook {
{cases}	}
	return wasmop.Verdict{}, &wasmop.UnknownWebhookError{Webhook: webhook}
}
"#;

const VALIDATING_GO: &str = r#"
// Admit{ident} is the `{webhook}` webhook (validating, on {{Kind}} CREATE and UPDATE): a {{Kind}}
// with an empty `spec.message` is refused. Replace this check with your own.
func Admit{ident}(object wasmop.Object) wasmop.Verdict {
	if message, _ := object.String("spec", "message"); message == "" {
		return wasmop.DenyWith(422, "spec.message must not be empty")
	}
	return wasmop.Allow()
}
"#;

const MUTATING_GO: &str = r#"
// Admit{ident} is the `{webhook}` webhook (mutating, on {{Kind}} CREATE and UPDATE): a {{Kind}}
// without `spec.message` gets `hello`. Replace this default with your own; the host computes the
// JSON Patch from the object returned.
func Admit{ident}(object wasmop.Object) wasmop.Verdict {
	spec := map[string]any{}
	if value, ok := object.Get("spec"); ok && value != nil {
		existing, isObject := value.(map[string]any)
		if !isObject {
			return wasmop.Allow()
		}
		if _, has := existing["message"]; has {
			return wasmop.Allow()
		}
		for key, field := range existing {
			spec[key] = field
		}
	}
	spec["message"] = "hello"
	mutated := wasmop.Object{}
	for key, field := range object {
		mutated[key] = field
	}
	mutated["spec"] = spec
	return wasmop.Mutate(mutated)
}
"#;

const ADMISSION_TEST_GO: &str = r#"
func admissionRequest(t *testing.T, spec string) wasmop.AdmissionRequest {
	t.Helper()
	object, err := wasmop.ParseObject(`{"apiVersion": "{{api_version}}", "kind": "{{Kind}}",
		"metadata": {"name": "sample", "namespace": "default"}, "spec": ` + spec + `}`)
	if err != nil {
		t.Fatal(err)
	}
	return wasmop.NewAdmissionRequest(wasmop.Create, object)
}

func TestEveryWebhookIsAnsweredAndNoOtherOne(t *testing.T) {
	for _, webhook := range Webhooks {
		if _, err := Admit(webhook.Name, admissionRequest(t, `{"message": "hi"}`)); err != nil {
			t.Errorf("%s: %v", webhook.Name, err)
		}
	}
	var unknown *wasmop.UnknownWebhookError
	if _, err := Admit("no-such-webhook", admissionRequest(t, `{}`)); !errors.As(err, &unknown) {
		t.Errorf("%v", err)
	}
}
"#;

const VALIDATING_TEST_GO: &str = r#"
func TestWebhook{ident}RefusesAnEmptyMessage(t *testing.T) {
	if verdict, _ := Admit("{webhook}", admissionRequest(t, `{"message": "hi"}`)); !verdict.Allowed {
		t.Errorf("%+v", verdict)
	}
	verdict, err := Admit("{webhook}", admissionRequest(t, `{}`))
	if err != nil || verdict.Allowed || verdict.Code != 422 || verdict.Message != "spec.message must not be empty" {
		t.Errorf("%+v %v", verdict, err)
	}
}
"#;

const MUTATING_TEST_GO: &str = r#"
func TestWebhook{ident}SetsAnAbsentMessage(t *testing.T) {
	verdict, err := Admit("{webhook}", admissionRequest(t, `{}`))
	if err != nil || !verdict.Allowed {
		t.Fatalf("%+v %v", verdict, err)
	}
	if mutated, _ := wasmop.ToObject(verdict.Mutated); mutated == nil {
		t.Errorf("no mutated object: %+v", verdict)
	} else if message, _ := mutated.String("spec", "message"); message != "hello" {
		t.Errorf("%+v", mutated)
	}
	if verdict, _ := Admit("{webhook}", admissionRequest(t, `{"message": "hi"}`)); !verdict.Allowed || verdict.Mutated != nil {
		t.Errorf("%+v", verdict)
	}
}
"#;

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
    use super::super::{Lang, generate, parse_webhook};
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
        assert!(build.contains("\nbash \"$sdk/build/component.sh\" . \"$out\" wit\n"), "{build}");
        assert!(build.contains(r#"out=$(realpath -m "${1:-$(dirname "$0")/my-db.wasm}")"#), "{build}");
        assert!(build.contains("(world `controller`:"), "{build}");
        assert!(!logic.contains("Admit") && !logic.contains("Webhooks"), "{logic}");
        // The host stamps `app.kubernetes.io/managed-by: wasmop` over any value a plugin sets.
        assert!(!logic.contains("managed-by") && logic.contains(r#""app.kubernetes.io/name": "my-db""#), "{logic}");
    }

    #[test]
    fn webhooks_are_declared_dispatched_and_tested_in_plain_go() {
        let mut new = args("my-db", "example.com/v1/Database", &["v1/ConfigMap"], Lang::Go);
        new.webhooks = vec![parse_webhook("validating:check").unwrap(), parse_webhook("mutating:set-defaults").unwrap()];
        let files = generate(&new).unwrap();
        let logic = file(&files, "plugin.go");
        for expected in [
            "wasmop.Register(wasmop.Plugin{Manifest: Manifest, Reconcile: Reconcile, Admit: Admit})",
            "\tWebhooks:    Webhooks,\n}",
            "var parentRule = wasmop.NewRule([]wasmop.Operation{wasmop.Create, wasmop.Update}, Parent.Group, Parent.Version, \"databases\")",
            "\twasmop.ValidatingWebhook(\"check\").WithRule(parentRule),\n\twasmop.MutatingWebhook(\"set-defaults\").WithRule(parentRule),\n}",
            "\tcase \"set-defaults\":\n\t\treturn AdmitSetDefaults(req.Object), nil\n",
            "func AdmitCheck(object wasmop.Object) wasmop.Verdict {",
            "// AdmitSetDefaults is the `set-defaults` webhook (mutating, on Database CREATE and UPDATE)",
        ] {
            assert!(logic.contains(expected), "no {expected:?} in:\n{logic}");
        }
        let tests = file(&files, "plugin_test.go");
        assert!(tests.contains("func TestWebhookCheckRefusesAnEmptyMessage(t *testing.T) {"), "{tests}");
        assert!(tests.contains("func TestWebhookSetDefaultsSetsAnAbsentMessage(t *testing.T) {"), "{tests}");
        assert!(file(&files, "build.sh").contains("(world `operator`: the build"));
        let readme = file(&files, "README.md");
        assert!(
            readme.contains("    wasmop admit --plugin my-db.wasm --webhook set-defaults --object sample.yaml --crds crd.yaml\n"),
            "{readme}"
        );
        assert!(readme.contains("wasmop reconcile --plugin my-db.wasm --object sample.yaml --crds crd.yaml\n"), "{readme}");
        let steps = super::next_steps(&new);
        assert_eq!(
            steps.last().unwrap(),
            "wasmop admit --plugin my-db.wasm --webhook set-defaults --object sample.yaml --crds crd.yaml"
        );
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
