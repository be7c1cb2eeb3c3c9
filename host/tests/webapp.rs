//! The WebApp operator of `examples/webapp` (its README is the specification), written in each
//! language as a new user writes it, is one operator: every example builds with the command its
//! own README gives, plans byte-for-byte what the Rust one plans on the same objects (children,
//! status, conditions, and on an invalid spec the same failure line and the status it shows),
//! and its webhook gives the same verdicts with the same messages.
//!
//! One entry of [`LANGUAGES`] per language: adding one is a line and a build function.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use wasmop_e2e::fixtures::workspace;
use wasmop_e2e::polyglot::{go_caches, go_toolchain, toolchain};

const NOW: &str = "2024-01-01T00:00:00Z";

/// Builds the example in a directory into an output directory; returns the component's path.
type Build = fn(&Path, &Path) -> PathBuf;

/// A language's example and how it is built: `(directory under examples/webapp, build)`, the
/// build taking the directory to write into and returning the component. Rust first: the
/// others are compared with it.
const LANGUAGES: &[(&str, Build)] = &[("rust", build_rust), ("go", build_go), ("python", build_python), ("js", build_js)];

/// The example of `language`.
fn example(language: &str) -> PathBuf {
    workspace().join("examples/webapp").join(language)
}

/// Where the examples' builds write: under the target directory, never into the checkout.
fn out_dir() -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace().join("target"), PathBuf::from);
    let dir = base.join("webapp-examples");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The first command of the example's README that starts with `program` (an indented line of a
/// code block, without its `# comment`).
fn readme_command(dir: &Path, program: &str) -> String {
    let readme = std::fs::read_to_string(dir.join("README.md")).expect("the example has a README.md");
    let line = readme
        .lines()
        .filter(|line| line.starts_with("    "))
        .map(|line| line.split(" #").next().unwrap().trim())
        .find(|line| line.starts_with(program))
        .unwrap_or_else(|| panic!("{}/README.md gives no `{program}` command", dir.display()));
    line.to_owned()
}

/// Run `command` with `sh -c` in `dir`, with `envs`; panics with its output when it fails.
fn run(dir: &Path, command: &str, envs: &[(&str, PathBuf)]) {
    let output = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(dir)
        .envs(envs.iter().map(|(k, v)| (*k, v)))
        .output()
        .expect("sh runs");
    assert!(
        output.status.success(),
        "`{command}` in {} failed:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `cargo build --target wasm32-wasip2 --release`, as the Rust README gives it, into a target
/// directory of its own.
fn build_rust(dir: &Path, out: &Path) -> PathBuf {
    let command = readme_command(dir, "cargo build");
    let target = out.join("rust-target");
    let cargo = std::env::var_os("CARGO").map_or_else(|| PathBuf::from("cargo"), PathBuf::from);
    let cargo_dir = cargo.parent().map(Path::to_path_buf).unwrap_or_default();
    let path = std::env::join_paths(std::iter::once(cargo_dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())))
        .unwrap();
    run(dir, &command, &[("CARGO_TARGET_DIR", target.clone()), ("PATH", PathBuf::from(path))]);
    target.join("wasm32-wasip2/release/webapp.wasm")
}

/// `sh build.sh`, as the Go README gives it, with the component's path as its argument.
fn build_go(dir: &Path, out: &Path) -> PathBuf {
    let command = readme_command(dir, "sh build.sh");
    let wasm = out.join("webapp-go.wasm");
    let mut envs = vec![("WASMOP_GO_TOOLCHAIN", go_toolchain())];
    envs.extend(go_caches());
    run(dir, &format!("{command} {}", wasm.display()), &envs);
    wasm
}

/// `PATH` with the Python and JavaScript toolchains (componentize-py, componentize-js) first.
fn path_with_polyglot() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::iter::once(toolchain()).chain(std::env::split_paths(&path));
    PathBuf::from(std::env::join_paths(dirs).unwrap())
}

/// The SDK module `wasmop new` copied into a Python or JavaScript project is the repository's:
/// an example built on an older copy would test an SDK nobody gets any more.
fn assert_sdk_module_is_current(dir: &Path, module: &str, sdk: &str) {
    let copied = std::fs::read_to_string(dir.join(module)).unwrap_or_else(|e| panic!("{}/{module}: {e}", dir.display()));
    let current = std::fs::read_to_string(workspace().join(sdk).join(module)).unwrap();
    assert!(copied == current, "{}/{module} differs from {sdk}/{module}: copy the current one in", dir.display());
}

/// `sh build.sh OUT`, as the Python README gives it, with componentize-py on `PATH`.
fn build_python(dir: &Path, out: &Path) -> PathBuf {
    assert_sdk_module_is_current(dir, "wasmop_sdk.py", "guest-sdk/python");
    let command = readme_command(dir, "sh build.sh");
    let wasm = out.join("webapp-python.wasm");
    run(dir, &format!("{command} {}", wasm.display()), &[("PATH", path_with_polyglot())]);
    wasm
}

/// `npm run build` with `OUT`, as the JavaScript README gives it, with componentize-js on `PATH`.
fn build_js(dir: &Path, out: &Path) -> PathBuf {
    assert_sdk_module_is_current(dir, "wasmop_sdk.js", "guest-sdk/js");
    let command = readme_command(dir, "npm run build");
    let wasm = out.join("webapp-js.wasm");
    run(dir, &command, &[("PATH", path_with_polyglot()), ("OUT", wasm.clone())]);
    wasm
}

/// Every example, built.
fn built() -> Vec<(&'static str, PathBuf)> {
    let out = out_dir();
    LANGUAGES.iter().map(|(language, build)| (*language, build(&example(language), &out))).collect()
}

fn wasmop(args: &[&str], files: &[(&str, &Path)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wasmop"));
    command.args(args);
    for (flag, path) in files {
        command.arg(flag).arg(path);
    }
    command
        .env("WASMOP_CACHE_DIR", std::env::temp_dir().join("wasmop-webapp-test-artifacts"))
        .env("RUST_LOG", "error")
        .output()
        .expect("running wasmop")
}

fn write(dir: &Path, name: &str, objects: &[Value]) -> PathBuf {
    let path = dir.join(name);
    let text: String = objects.iter().map(|o| format!("---\n{}\n", serde_json::to_string(o).unwrap())).collect();
    std::fs::write(&path, text).unwrap();
    path
}

fn webapp(spec: Value) -> Value {
    json!({"apiVersion": "demo.example.com/v1", "kind": "WebApp",
           "metadata": {"name": "shop", "namespace": "default", "uid": "uid-1", "generation": 2}, "spec": spec})
}

fn deployment(status: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "shop", "namespace": "default"},
           "spec": {"replicas": 2}, "status": status})
}

/// `(case, spec, observed children, the failure line when the spec is invalid)`.
fn cases() -> Vec<(&'static str, Value, Vec<Value>, Option<&'static str>)> {
    let spec = json!({"image": "nginx:1.27", "replicas": 2, "port": 9090, "config": {"MODE": "live", "LOG": "debug"}});
    let invalid = |name, spec, message| (name, spec, vec![], Some(message));
    vec![
        ("new parent", spec.clone(), vec![], None),
        ("deployment without ready replicas", spec.clone(), vec![deployment(json!({}))], None),
        ("deployment with some ready", spec.clone(), vec![deployment(json!({"readyReplicas": 1}))], None),
        ("deployment with all ready", spec.clone(), vec![deployment(json!({"readyReplicas": 2}))], None),
        ("config, replicas and port absent", json!({"image": "nginx:1.27"}), vec![], None),
        ("scaled to zero", json!({"image": "nginx:1.27", "replicas": 0}), vec![], None),
        invalid("image missing", json!({"replicas": 2}), "spec.image must be set"),
        invalid("image empty", json!({"image": ""}), "spec.image must be set"),
        invalid("replicas negative", json!({"image": "a:1", "replicas": -1}), "spec.replicas must be between 0 and 50, got -1"),
        invalid("replicas too many", json!({"image": "a:1", "replicas": 51}), "spec.replicas must be between 0 and 50, got 51"),
        invalid("port zero", json!({"image": "a:1", "port": 0}), "spec.port must be between 1 and 65535, got 0"),
        invalid("port too high", json!({"image": "a:1", "port": 65536}), "spec.port must be between 1 and 65535, got 65536"),
        invalid("image checked first", json!({"replicas": 99, "port": 0}), "spec.image must be set"),
    ]
}

/// `(object's spec, what `wasmop admit` prints)`.
fn admissions() -> Vec<(Value, &'static str)> {
    vec![
        (json!({"image": "nginx:1.27", "replicas": 2}), "allowed"),
        (json!({"image": "registry.local:5000/shop@sha256:0123"}), "allowed"),
        (json!({"image": "nginx"}), r#"denied (422): spec.image must name a tag or a digest, got "nginx""#),
        (
            json!({"image": "registry.local:5000/shop"}),
            r#"denied (422): spec.image must name a tag or a digest, got "registry.local:5000/shop""#,
        ),
        (json!({"replicas": 2}), "denied (422): spec.image must be set"),
        (json!({"image": "nginx:1.27", "replicas": 51}), "denied (422): spec.replicas must be between 0 and 50, got 51"),
        (json!({"image": "nginx:1.27", "port": 70000}), "denied (422): spec.port must be between 1 and 65535, got 70000"),
    ]
}

fn kinds(plan: &Value) -> Vec<(&str, &str)> {
    let apply = plan["apply"].as_array().unwrap();
    apply.iter().map(|c| (c["kind"].as_str().unwrap(), c["metadata"]["name"].as_str().unwrap())).collect()
}

#[test]
#[ignore = "builds every language's example (the Go, Python and JavaScript toolchains from scripts/setup.sh): scripts/test.sh runtime runs it"]
fn every_language_plans_and_admits_exactly_what_the_rust_webapp_does() {
    let plugins = built();
    let dir = tempfile::tempdir().unwrap();
    let crd = example("rust").join("crd.yaml");
    for (case, spec, children, failure) in cases() {
        let parent = write(dir.path(), "parent.yaml", &[webapp(spec)]);
        let observed = write(dir.path(), "children.yaml", &children);
        let outputs: Vec<(&str, Output)> = plugins
            .iter()
            .map(|(language, plugin)| {
                let args = ["reconcile", "-o", "json", "--now", NOW];
                let mut files = vec![("--plugin", plugin.as_path()), ("--object", parent.as_path()), ("--crds", crd.as_path())];
                if !children.is_empty() {
                    files.push(("--children", observed.as_path()));
                }
                (*language, wasmop(&args, &files))
            })
            .collect();
        let rust = &outputs[0].1;
        for (language, got) in &outputs[1..] {
            assert_eq!(got.status.code(), rust.status.code(), "case {case:?}: {language} exits otherwise than Rust");
            assert_eq!(
                String::from_utf8_lossy(&got.stdout),
                String::from_utf8_lossy(&rust.stdout),
                "case {case:?}: {language} plans otherwise than Rust"
            );
            let last = |o: &Output| String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or_default().to_owned();
            assert_eq!(last(got), last(rust), "case {case:?}: {language} fails otherwise than Rust");
        }
        // What the Rust plan says, against the specification.
        let plan: Value = serde_json::from_slice(&rust.stdout).unwrap_or_else(|e| panic!("case {case:?}: {e}"));
        let status = &plan["statusPatch"]["status"];
        let ready = &status["conditions"][0];
        if let Some(message) = failure {
            let error = String::from_utf8_lossy(&rust.stderr);
            assert!(error.trim_end().ends_with(&format!("error: plugin error (terminal): {message}")), "case {case:?}: {error}");
            assert_eq!(status["phase"], "Invalid", "case {case:?}: {plan:#}");
            assert_eq!(
                (&ready["type"], &ready["reason"], &ready["message"]),
                (&json!("Ready"), &json!("InvalidSpec"), &json!(message))
            );
            continue;
        }
        assert!(rust.status.success(), "case {case:?}: {}", String::from_utf8_lossy(&rust.stderr));
        let expected_kinds = [
            ("ServiceAccount", "shop"),
            ("ConfigMap", "shop-config"),
            ("Deployment", "shop"),
            ("Service", "shop"),
            ("PodDisruptionBudget", "shop"),
        ];
        assert_eq!(kinds(&plan), expected_kinds, "case {case:?}");
        let (ready_replicas, replicas, phase) = match case {
            "deployment with some ready" => (1, 2, "Progressing"),
            "deployment with all ready" => (2, 2, "Ready"),
            "config, replicas and port absent" => (0, 1, "Progressing"),
            "scaled to zero" => (0, 0, "Ready"),
            _ => (0, 2, "Progressing"),
        };
        assert_eq!(status["readyReplicas"], ready_replicas, "case {case:?}: {plan:#}");
        assert_eq!(status["phase"], phase, "case {case:?}: {plan:#}");
        assert_eq!(ready["message"], format!("{ready_replicas}/{replicas} replicas ready"), "case {case:?}");
        assert_eq!(ready["status"], if phase == "Ready" { "True" } else { "False" }, "case {case:?}");
        let deployment = &plan["apply"][2];
        assert_eq!(deployment["spec"]["replicas"], replicas, "case {case:?}");
        if case == "config, replicas and port absent" {
            assert_eq!(plan["apply"][1]["data"], json!({}), "case {case:?}");
            assert_eq!(deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"], 8080);
        }
    }

    for (spec, expected) in admissions() {
        let object = write(dir.path(), "object.yaml", &[webapp(spec.clone())]);
        for (language, plugin) in &plugins {
            let files = [("--plugin", plugin.as_path()), ("--object", object.as_path()), ("--crds", crd.as_path())];
            let out = wasmop(&["admit", "--webhook", "validate"], &files);
            let said = String::from_utf8_lossy(&out.stdout);
            assert_eq!(said.trim_end(), expected, "{language} on {spec}: {}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(out.status.code(), Some(if expected == "allowed" { 0 } else { 2 }), "{language} on {spec}");
        }
    }
}
