//! Go webhooks, built from source with the real toolchain (`$WASMOP_GO_TOOLCHAIN` and Go,
//! required as by every polyglot test) and called with `wasmop admit`: the Go SidecarSet
//! webhook (`plugins/sidecarset-go`) allows a valid SidecarSet (exit 0) and denies an invalid
//! one (exit 2) with exactly the review the Rust plugin's webhook answers; a `wasmop new --lang
//! go --webhook ...` project tests, builds (world `operator`, read from its manifest) and
//! answers `wasmop admit` on its sample. Each Go build takes 2–60 s.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use wasmop_e2e::fixtures::{plugin, workspace};
use wasmop_e2e::polyglot::{Language, build, go_caches, go_toolchain};

/// The grant `run` needs to serve the Rust SidecarSet's Pod injection (the demo's policy).
const SIDECARSET_POLICY: &str = "plugins: {sidecarset: {grants: {webhookResources: [{resource: pods, mode: mutate}]}}}\n";

/// A SidecarSet both webhooks allow: the sample's.
const VALID: &str = "apiVersion: apps.wasmop.dev/v1alpha1\nkind: SidecarSet\nmetadata: {name: log-shipper}\n\
                     spec:\n  selector: {matchLabels: {app: web}}\n  containers: [{name: log-shipper, image: \"busybox:1.36\"}]\n";

fn wasmop(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(args)
        .current_dir(dir)
        .env("WASMOP_CACHE_DIR", std::env::temp_dir().join("wasmop-cli-test-artifacts"))
        .env_remove("WASMOP_POLICY")
        .env("RUST_LOG", "error")
        .output()
        .expect("running wasmop")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `program ARGS` in `dir` with the Go toolchain, which must succeed; its output.
fn run_go(dir: &Path, program: &str, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("WASMOP_GO_TOOLCHAIN", go_toolchain())
        .envs(go_caches())
        .output()
        .expect("the program runs");
    let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{program} {} in {} failed:\n{all}", args.join(" "), dir.display());
    all
}

fn sidecarset_go() -> PathBuf {
    build(Language::Go, &workspace().join("plugins/sidecarset-go"), "", "v0.3.0", "operator")
}

/// `wasmop admit` of `webhook` on `object` as JSON (the AdmissionReview), with its exit code.
fn admit(plugin: &Path, webhook: &str, object: &Path, policy: Option<&Path>) -> (Option<i32>, Value) {
    let dir = object.parent().unwrap();
    let crd = workspace().join("crds/sidecarset.yaml");
    let mut args = vec!["admit", "--plugin", plugin.to_str().unwrap(), "--webhook", webhook, "--object"];
    args.extend([object.to_str().unwrap(), "--crds", crd.to_str().unwrap(), "--output", "json"]);
    if let Some(policy) = policy {
        args.extend(["--policy", policy.to_str().unwrap()]);
    }
    let out = wasmop(dir, &args);
    let review =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", text(&out.stdout), text(&out.stderr)));
    (out.status.code(), review)
}

#[test]
#[ignore = "needs Go and the Go plugin toolchain from scripts/setup.sh (WASMOP_GO_TOOLCHAIN): scripts/test.sh runtime runs it"]
fn the_go_sidecarset_webhook_answers_what_the_rust_one_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (valid, policy) = (dir.path().join("valid.yaml"), dir.path().join("policy.yaml"));
    std::fs::write(&valid, VALID).unwrap();
    std::fs::write(&policy, SIDECARSET_POLICY).unwrap();
    let invalid = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sidecarset-without-image.yaml");
    let no_name = dir.path().join("bad-selector.yaml");
    std::fs::write(&no_name, VALID.replace("{matchLabels: {app: web}}", "{matchExpressions: [{key: app, operator: In}]}"))
        .unwrap();
    let (go, rust) = (sidecarset_go(), plugin("sidecarset", "wasm32-wasip2"));

    let (code, review) = admit(&go, "validate", &valid, None);
    assert_eq!(code, Some(0), "allowed: {review:#}");
    assert_eq!(review["response"]["allowed"], true);
    assert_eq!(review, admit(&rust, "validate", &valid, Some(&policy)).1);

    let (code, review) = admit(&go, "validate", &invalid, None);
    assert_eq!(code, Some(2), "denied: {review:#}");
    assert_eq!(review["response"]["allowed"], false);
    assert_eq!(review["response"]["status"]["code"], 422);
    assert_eq!(review["response"]["status"]["message"], "spec.containers[0].image is required (container \"log-shipper\")");
    assert_eq!(review, admit(&rust, "validate", &invalid, Some(&policy)).1, "the Go and Rust webhooks differ");

    let (code, review) = admit(&go, "validate", &no_name, None);
    assert_eq!(code, Some(2), "denied: {review:#}");
    assert_eq!(
        review["response"]["status"]["message"],
        "spec.selector.matchExpressions[0]: operator In needs at least one value"
    );
    assert_eq!(review, admit(&rust, "validate", &no_name, Some(&policy)).1, "the Go and Rust webhooks differ");
}

#[test]
#[ignore = "needs Go and the Go plugin toolchain from scripts/setup.sh (WASMOP_GO_TOOLCHAIN): scripts/test.sh runtime runs it"]
fn a_webhook_the_go_plugin_does_not_declare_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let valid = dir.path().join("valid.yaml");
    std::fs::write(&valid, VALID).unwrap();
    let go = sidecarset_go();
    let crd = workspace().join("crds/sidecarset.yaml");
    let args = ["admit", "--plugin", go.to_str().unwrap(), "--webhook", "inject", "--object", valid.to_str().unwrap()];
    let out = wasmop(dir.path(), &[&args[..], &["--crds", crd.to_str().unwrap()]].concat());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr).trim_end(),
        "error: plugin sidecarset-go declares no webhook named \"inject\" (it declares validate)"
    );
}

#[test]
#[ignore = "needs Go and the Go plugin toolchain from scripts/setup.sh (WASMOP_GO_TOOLCHAIN): scripts/test.sh runtime runs it"]
fn a_new_go_plugin_with_webhooks_tests_builds_and_admits_its_sample() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(!tmp.path().starts_with(workspace()));
    let dir = tmp.path().join("hello-hooks");
    let sdk = workspace().join("sdk-go");
    let new = [
        "new",
        "hello-hooks",
        "--parent",
        "example.com/v1/Hello",
        "--child",
        "v1/ConfigMap",
        "--lang",
        "go",
        "--webhook",
        "validating:check",
        "--webhook",
        "mutating:set-defaults",
        "--sdk-path",
        sdk.to_str().unwrap(),
        "--dir",
        dir.to_str().unwrap(),
    ];
    let created = wasmop(tmp.path(), &new);
    assert!(created.status.success(), "{}", text(&created.stderr));
    let tests = run_go(&dir, "go", &["test", "-v", "./..."]);
    for test in ["TestWebhookCheckRefusesAnEmptyMessage", "TestWebhookSetDefaultsSetsAnAbsentMessage"] {
        assert!(tests.contains(&format!("--- PASS: {test}")), "{tests}");
    }
    run_go(&dir, "go", &["vet", "./..."]);
    let built = run_go(&dir, "sh", &["build.sh"]);
    assert!(built.contains("world operator"), "the build reads world operator from the manifest: {built}");

    let admit = |webhook: &str, object: &str| {
        wasmop(&dir, &["admit", "--plugin", "hello-hooks.wasm", "--webhook", webhook, "--object", object, "--crds", "crd.yaml"])
    };
    let allowed = admit("check", "sample.yaml");
    assert_eq!(allowed.status.code(), Some(0), "{}", text(&allowed.stderr));
    assert_eq!(text(&allowed.stdout), "allowed\n");
    let sample = std::fs::read_to_string(dir.join("sample.yaml")).unwrap();
    std::fs::write(dir.join("empty.yaml"), sample.replace("  message: hello\n", "  {}\n").replace("spec:\n  {}", "spec: {}"))
        .unwrap();
    let denied = admit("check", "empty.yaml");
    assert_eq!(denied.status.code(), Some(2), "{}{}", text(&denied.stdout), text(&denied.stderr));
    assert_eq!(text(&denied.stdout), "denied (422): spec.message must not be empty\n");
    let defaulted = admit("set-defaults", "empty.yaml");
    assert_eq!(defaulted.status.code(), Some(0), "{}", text(&defaulted.stderr));
    let stdout = text(&defaulted.stdout);
    assert!(stdout.starts_with("allowed\npatch (RFC 6902 JSON Patch):\n"), "{stdout}");
    let patch: Value = serde_json::from_str(stdout.split_once("JSON Patch):\n").unwrap().1).unwrap();
    assert_eq!(patch, serde_json::json!([{"op": "add", "path": "/spec/message", "value": "hello"}]));

    let plan = wasmop(&dir, &["reconcile", "--plugin", "hello-hooks.wasm", "--object", "sample.yaml", "--crds", "crd.yaml"]);
    assert!(plan.status.success(), "{}", text(&plan.stderr));
}

#[test]
#[ignore = "needs Go and the Go plugin toolchain from scripts/setup.sh (WASMOP_GO_TOOLCHAIN): scripts/test.sh runtime runs it"]
fn a_go_plugin_declaring_webhooks_without_admit_is_refused_by_the_build_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let source = workspace().join("plugins/sidecarset-go");
    for name in ["sidecarset.go", "validate.go"] {
        std::fs::copy(source.join(name), tmp.path().join(name)).unwrap();
    }
    let go_mod = std::fs::read_to_string(source.join("go.mod")).unwrap();
    let sdk = format!("=> {}", workspace().join("sdk-go").display());
    std::fs::write(tmp.path().join("go.mod"), go_mod.replace("=> ../../sdk-go", &sdk)).unwrap();
    let plugin = tmp.path().join("sidecarset.go");
    let code = std::fs::read_to_string(&plugin).unwrap();
    assert!(code.contains(", Admit: Admit}"), "{code}");
    std::fs::write(&plugin, code.replace(", Admit: Admit}", "}")).unwrap();
    let out = Command::new("bash")
        .arg(workspace().join("sdk-go/build/component.sh"))
        .args([tmp.path(), &tmp.path().join("out.wasm"), &workspace().join("wit/v0.3.0")])
        .env("WASMOP_GO_TOOLCHAIN", go_toolchain())
        .envs(go_caches())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        text(&out.stderr).trim_end(),
        "[go-plugin] error: github.com/wasmop/wasmop/plugins/sidecarset-go declares webhooks in its manifest but registers no Admit"
    );
    assert!(!tmp.path().join("out.wasm").exists());
}
