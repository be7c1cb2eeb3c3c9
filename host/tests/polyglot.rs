//! Plugins in Python, JavaScript and Go are supported, not experiments: the memcached example
//! written in each language plans exactly what the Rust one plans on the same objects (and on
//! an invalid spec fails with the same line and shows the same status and conditions), a
//! default JavaScript build (which imports `wasi:http`) loads, and a Python exception, a
//! JavaScript error or a Go panic becomes a one-line reason naming it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use wasmop_e2e::fixtures::{memcached, workspace};
use wasmop_e2e::polyglot::{Language, build, memcached_go_for, memcached_js, memcached_py, stage};

const NOW: &str = "2024-01-01T00:00:00Z";

/// The contract the Go plugins are built against here.
const GO_WIT: &str = "v0.3.0";

/// The contract the Python and JavaScript plugins are built against here (world `controller`).
const PY_JS_WIT: &str = "v0.3.0";

/// `wasmop reconcile` of `plugin` on `parent` with observed `children` and `related` objects.
fn reconcile(plugin: &Path, parent: &Path, children: Option<&Path>, related: Option<&Path>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wasmop"));
    command.args(["reconcile", "-o", "json", "--now", NOW, "--plugin"]).arg(plugin).arg("--object").arg(parent);
    if let Some(children) = children {
        command.arg("--children").arg(children);
    }
    if let Some(related) = related {
        command.arg("--related").arg(related);
    }
    command
        .env("WASMOP_CACHE_DIR", std::env::temp_dir().join("wasmop-polyglot-test-artifacts"))
        .env("RUST_LOG", "error")
        .output()
        .expect("running wasmop")
}

/// The plan as JSON, or the error line when the plugin refused.
fn outcome(out: &Output) -> Result<Value, String> {
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).expect("a JSON plan"))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or_default().to_owned())
    }
}

struct Case {
    name: &'static str,
    parent: Value,
    children: Vec<Value>,
    related: Vec<Value>,
}

fn parent(spec: Value) -> Value {
    json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
           "metadata": {"name": "sample", "namespace": "default", "uid": "uid-1", "generation": 2}, "spec": spec})
}

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default",
           "labels": {"app": "memcached", "memcached_cr": "sample"}}})
}

fn deployment(available: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "sample", "namespace": "default"},
           "spec": {"replicas": 3}, "status": {"availableReplicas": available}})
}

fn cases() -> Vec<Case> {
    let case = |name, spec, children, related| Case { name, parent: parent(spec), children, related };
    vec![
        case("new parent", json!({"size": 3}), vec![], vec![]),
        case("pods listed, sorted", json!({"size": 3}), vec![deployment(1)], vec![pod("sample-b"), pod("sample-a")]),
        case("all available", json!({"size": 3}), vec![deployment(3)], vec![pod("a"), pod("b"), pod("c")]),
        case("scaled to zero", json!({"size": 0}), vec![deployment(0)], vec![]),
        case("size missing", json!({}), vec![], vec![]),
        case("size negative", json!({"size": -1}), vec![], vec![]),
        case("size too large", json!({"size": 4_294_967_296_i64}), vec![], vec![]),
    ]
}

fn write_all(dir: &Path, name: &str, objects: &[Value]) -> Option<PathBuf> {
    (!objects.is_empty()).then(|| {
        let path = dir.join(name);
        std::fs::write(
            &path,
            objects.iter().map(|o| format!("---\n{}\n", serde_json::to_string(o).unwrap())).collect::<String>(),
        )
        .unwrap();
        path
    })
}

#[test]
#[ignore = "needs the Python, JavaScript and Go toolchains from scripts/setup.sh: scripts/test.sh runtime runs it"]
fn python_javascript_and_go_memcached_plan_exactly_what_the_rust_one_plans() {
    let plugins =
        [("rust", memcached()), ("python", memcached_py()), ("javascript", memcached_js()), ("go", memcached_go_for(GO_WIT))];
    let dir = tempfile::tempdir().unwrap();
    for case in cases() {
        let parent = write_all(dir.path(), "parent.yaml", std::slice::from_ref(&case.parent)).unwrap();
        let children = write_all(dir.path(), "children.yaml", &case.children);
        let related = write_all(dir.path(), "related.yaml", &case.related);
        let outputs: Vec<(&str, Output)> = plugins
            .iter()
            .map(|(language, plugin)| (*language, reconcile(plugin, &parent, children.as_deref(), related.as_deref())))
            .collect();
        let expected = outcome(&outputs[0].1);
        let rust = String::from_utf8_lossy(&outputs[0].1.stdout);
        for (language, got) in &outputs[1..] {
            assert_eq!(outcome(got), expected, "case {:?}: the {language} plugin differs from the Rust one", case.name);
            // Every plugin is on the same contract (0.3.0), so a failure also shows the same
            // status and conditions (`Available=False InvalidSpec`), which `wasmop reconcile`
            // prints before its error.
            assert_eq!(
                String::from_utf8_lossy(&got.stdout),
                rust,
                "case {:?}: the {language} plugin prints another plan",
                case.name
            );
        }
        if case.name == "new parent" {
            assert!(expected.as_ref().is_ok_and(|plan| plan["apply"][0]["kind"] == "Deployment"), "{expected:?}");
        }
        if case.name.starts_with("size ") {
            assert!(expected.is_err(), "case {:?}: {expected:?}", case.name);
            let shown: Value = serde_json::from_str(&rust).unwrap_or_else(|e| panic!("case {:?}: {e}: {rust}", case.name));
            let available = &shown["statusPatch"]["status"]["conditions"][0];
            assert_eq!((&available["type"], &available["status"]), (&json!("Available"), &json!("False")), "{shown:#}");
            assert_eq!(available["reason"], "InvalidSpec", "{shown:#}");
            assert_eq!(
                format!("error: plugin error (terminal): {}", available["message"].as_str().unwrap()),
                *expected.as_ref().unwrap_err(),
                "the condition carries the failure's message"
            );
        }
        if case.name == "size negative" {
            assert_eq!(expected.as_ref().unwrap_err(), "error: plugin error (terminal): spec.size must be 0 or more, got -1");
        }
    }
}

/// A copy of the plugin in `plugins/<dir>` (its files, links to the SDK modules followed, in a
/// temporary directory named `<dir>-failing`), with `edit` applied to its entry file.
fn variant(dir: &str, entry: &str, edit: impl Fn(&str) -> String) -> (tempfile::TempDir, PathBuf) {
    let temp = tempfile::tempdir().unwrap();
    let target = temp.path().join(format!("{dir}-failing"));
    std::fs::rename(stage(&workspace().join("plugins").join(dir), temp.path()), &target).unwrap();
    let source = std::fs::read_to_string(workspace().join("plugins").join(dir).join(entry)).unwrap();
    let edited = edit(&source);
    assert_ne!(edited, source, "the edit must change {dir}/{entry}");
    std::fs::write(target.join(entry), edited).unwrap();
    (temp, target)
}

#[test]
#[ignore = "needs componentize-py and componentize-js from scripts/setup.sh (WASMOP_POLYGLOT): scripts/test.sh runtime runs it"]
fn a_python_exception_and_a_javascript_error_end_in_one_line_naming_them() {
    let py_dir = variant("memcached-py", "app.py", |s| {
        s.replace(
            "    size = desired_size(req.parent)\n",
            "    size = desired_size(req.parent)\n    raise ValueError(f\"unlucky size {size}\")\n",
        )
    });
    let js_dir = variant("memcached-js", "memcached.js", |s| {
        s.replace(
            "    const size = desiredSize(req.parent);\n",
            "    const size = desiredSize(req.parent);\n    throw new TypeError(`unlucky size ${size}`);\n",
        )
    });
    let py = build(Language::Python, &py_dir.1, "app", PY_JS_WIT, "controller");
    let js = build(Language::JavaScript, &js_dir.1, "memcached.js", PY_JS_WIT, "controller");
    let dir = tempfile::tempdir().unwrap();
    let parent = write_all(dir.path(), "parent.yaml", &[parent(json!({"size": 13}))]).unwrap();
    for (plugin, reason) in
        [(py, "Python exception: ValueError: unlucky size 13"), (js, "JavaScript error: TypeError: unlucky size 13")]
    {
        let error = outcome(&reconcile(&plugin, &parent, None, None)).unwrap_err();
        assert!(error.starts_with("error: plugin trapped: "), "{error}");
        assert!(error.ends_with(&format!("(guest stderr: {reason})")), "{error}");
    }
}

#[test]
#[ignore = "needs Go and the Go plugin toolchain from scripts/setup.sh (WASMOP_GO_TOOLCHAIN): scripts/test.sh runtime runs it"]
fn a_go_panic_ends_in_one_line_naming_it() {
    let (_temp, dir) = variant("memcached-go", "memcached.go", |s| {
        s.replace(
            "\tname, namespace := req.Name(), req.Namespace()\n",
            "\tname, namespace := req.Name(), req.Namespace()\n\tpanic(fmt.Sprintf(\"unlucky size %d\", size))\n",
        )
    });
    // The copy depends on this checkout's SDK by absolute path.
    let go_mod = std::fs::read_to_string(workspace().join("plugins/memcached-go/go.mod")).unwrap();
    let sdk = format!("=> {}", workspace().join("sdk-go").display());
    std::fs::write(dir.join("go.mod"), go_mod.replace("=> ../../sdk-go", &sdk)).unwrap();
    let go = build(Language::Go, &dir, "", GO_WIT, "controller");
    let temp = tempfile::tempdir().unwrap();
    let parent = write_all(temp.path(), "parent.yaml", &[parent(json!({"size": 13}))]).unwrap();
    let error = outcome(&reconcile(&go, &parent, None, None)).unwrap_err();
    // Go prints the panic and exits; in a reactor component the exit ends in `unreachable`.
    assert_eq!(
        error,
        "error: plugin trapped: wasm trap: wasm `unreachable` instruction executed (guest stderr: Go panic: unlucky size 13)"
    );
}
