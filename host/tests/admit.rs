//! `wasmop admit`: a plugin's webhook called offline answers what `run` answers the API server —
//! the sidecar injected as a JSON Patch, an invalid SidecarSet denied, a mutation adding an
//! owner denied by the host — with the exit code saying allowed (0) or denied (2), and one-line
//! errors for a request that cannot be asked.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use wasmop_e2e::fixtures::{plugin, plugin_with_features, workspace};

/// The grant `run` needs to serve SidecarSet's Pod injection (the demo's policy).
const SIDECARSET_POLICY: &str = "plugins: {sidecarset: {grants: {webhookResources: [{resource: pods, mode: mutate}]}}}\n";

fn wasmop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(args)
        .env("WASMOP_CACHE_DIR", std::env::temp_dir().join("wasmop-cli-test-artifacts"))
        .env_remove("WASMOP_POLICY")
        .env("RUST_LOG", "error")
        .output()
        .expect("running wasmop")
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name).display().to_string()
}

fn repo(path: &str) -> String {
    workspace().join(path).display().to_string()
}

fn sidecarset_policy(dir: &Path) -> String {
    let path = dir.join("policy.yaml");
    std::fs::write(&path, SIDECARSET_POLICY).unwrap();
    path.display().to_string()
}

fn sidecarset() -> PathBuf {
    plugin("sidecarset", "wasm32-wasip2")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn error_line(out: &Output) -> String {
    let stderr = text(&out.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "exactly one error line expected in:\n{stderr}");
    errors[0].to_owned()
}

/// Compare with a golden file; `UPDATE_GOLDEN=1` rewrites it.
fn assert_golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(actual, expected, "golden file {} differs (UPDATE_GOLDEN=1 rewrites it)", path.display());
}

fn inject(dir: &Path, output: &[&str]) -> Output {
    let (plugin, policy) = (sidecarset(), sidecarset_policy(dir));
    let mut args = vec!["admit", "--plugin", plugin.to_str().unwrap(), "--policy", &policy, "--webhook", "inject", "--object"];
    let (pod, sample, crd) = (fixture("web-pod.yaml"), repo("crds/samples/sidecarset.yaml"), repo("crds/sidecarset.yaml"));
    args.extend([pod.as_str(), "--related", &sample, "--crds", &crd]);
    args.extend(output);
    wasmop(&args)
}

#[test]
fn the_sidecar_is_injected_and_shown_as_a_json_patch() {
    let dir = tempfile::tempdir().unwrap();
    let out = inject(dir.path(), &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("allowed\npatch (RFC 6902 JSON Patch):\n"), "{stdout}");
    let patch: Value = serde_json::from_str(stdout.split_once("JSON Patch):\n").unwrap().1).unwrap();
    let ops = patch.as_array().unwrap();
    assert!(
        ops.iter().any(|op| op["op"] == "add"
            && op["path"] == "/spec/containers/1"
            && op["value"]["name"] == "log-shipper"
            && op["value"]["image"] == "busybox:1.36"),
        "{patch:#}"
    );
    assert!(ops.iter().any(|op| op["path"].as_str().is_some_and(|p| p.starts_with("/metadata/annotations"))), "{patch:#}");
}

#[test]
fn the_json_output_is_the_review_the_api_server_receives() {
    let dir = tempfile::tempdir().unwrap();
    let out = inject(dir.path(), &["--output", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let review: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!((review["apiVersion"].as_str(), review["kind"].as_str()), (Some("admission.k8s.io/v1"), Some("AdmissionReview")));
    assert_eq!(review["response"]["uid"], "00000000-0000-0000-0000-000000000000");
    assert_eq!(
        (review["response"]["allowed"].as_bool(), review["response"]["patchType"].as_str()),
        (Some(true), Some("JSONPatch"))
    );
    assert_golden("sidecarset-inject-review.json", &stdout);
}

#[test]
fn a_pod_no_sidecarset_selects_is_allowed_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let pod = dir.path().join("db.yaml");
    std::fs::write(
        &pod,
        "{apiVersion: v1, kind: Pod, metadata: {name: db, labels: {app: db}}, spec: {containers: [{name: db, image: postgres}]}}",
    )
    .unwrap();
    let (plugin, policy) = (sidecarset(), sidecarset_policy(dir.path()));
    let out = wasmop(&[
        "admit",
        "--plugin",
        plugin.to_str().unwrap(),
        "--policy",
        &policy,
        "--webhook",
        "inject",
        "--object",
        pod.to_str().unwrap(),
        "--related",
        &repo("crds/samples/sidecarset.yaml"),
        "--crds",
        &repo("crds/sidecarset.yaml"),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "allowed\n");
}

#[test]
fn an_invalid_sidecarset_is_denied_with_the_plugins_code_and_message() {
    let dir = tempfile::tempdir().unwrap();
    let (plugin, policy) = (sidecarset(), sidecarset_policy(dir.path()));
    let out = wasmop(&[
        "admit",
        "--plugin",
        plugin.to_str().unwrap(),
        "--policy",
        &policy,
        "--webhook",
        "validate",
        "--object",
        &fixture("sidecarset-without-image.yaml"),
        "--crds",
        &repo("crds/sidecarset.yaml"),
        "--output",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(2), "denied: {}", text(&out.stderr));
    let review: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        review["response"],
        json!({"uid": "00000000-0000-0000-0000-000000000000", "allowed": false,
            "status": {"code": 422, "message": "spec.containers[0].image is required (container \"log-shipper\")"}})
    );
}

#[test]
fn a_mutation_adding_an_owner_is_denied_offline_as_run_denies_it() {
    let testbed = plugin_with_features("testbed", "wasm32-wasip2", &["mutates-ownership"]);
    let out = wasmop(&[
        "admit",
        "--plugin",
        testbed.to_str().unwrap(),
        "--webhook",
        "own",
        "--object",
        &fixture("owned-config-map.yaml"),
        "--crds",
        &repo("crds/testbed.yaml"),
    ]);
    assert_eq!(out.status.code(), Some(2), "denied: {}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "denied (500): denied by wasmop (fail closed): plugin testbed: the mutation changes the object's \
         metadata.ownerReferences; a webhook may not change who owns an object or what the host keeps on it\n"
    );
}

#[test]
fn a_request_that_cannot_be_asked_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let (plugin, policy) = (sidecarset(), sidecarset_policy(dir.path()));
    let plugin = plugin.to_str().unwrap();
    let crd = repo("crds/sidecarset.yaml");
    let pod = fixture("web-pod.yaml");
    let base = ["admit", "--plugin", plugin, "--policy", &policy, "--crds", &crd];
    let cases: [(&[&str], &str); 5] = [
        (
            &["--webhook", "injects", "--object", &pod],
            "error: plugin sidecarset declares no webhook named \"injects\" (it declares inject, validate, default)",
        ),
        (
            &["--webhook", "inject", "--object", &pod, "--operation", "DELETE"],
            "error: webhook inject is not called for DELETE pods/v1 (namespaced): its rules match CREATE pods/v1",
        ),
        (
            &["--webhook", "validate", "--object", &pod],
            "error: webhook validate is not called for CREATE pods/v1 (namespaced): its rules match CREATE \
             sidecarsets.apps.wasmop.dev/v1alpha1; UPDATE sidecarsets.apps.wasmop.dev/v1alpha1",
        ),
        (&["--webhook", "inject", "--object", "/nonexistent/pod.yaml"], "error: cannot read /nonexistent/pod.yaml"),
        (
            &["--webhook", "inject", "--object", &pod, "--operation", "UPDATE"],
            "error: an UPDATE needs the object before it (--old-object)",
        ),
    ];
    for (extra, expected) in cases {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let out = wasmop(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out.stderr));
        let line = error_line(&out);
        assert!(
            line.starts_with(expected) || line.ends_with(expected.trim_start_matches("error: ")),
            "{line}\nexpected: {expected}"
        );
    }
    let without_grant = wasmop(&["admit", "--plugin", plugin, "--crds", &crd, "--webhook", "inject", "--object", &pod]);
    assert_eq!(
        error_line(&without_grant),
        "error: run would not start plugin sidecarset: it mutates pods in webhook \"inject\", a resource it does not write \
         (declare the kind as a child, or grant webhookResources: [{resource: \"pods\", mode: mutate}])"
    );
}
