//! `wasmop reconcile` prints the host's plan after the checks `run` makes: scope, ownership,
//! sizes; it exits non-zero with the reason when `run` would refuse, and warns about every
//! fixture it does not use.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use wasmop_e2e::fixtures::{self, workspace};

const NOW: &str = "2024-01-01T00:00:00Z";
const PLACEHOLDER_UID: &str = "00000000-0000-0000-0000-000000000000";

/// A directory of fixture files for one test.
struct Fixtures(tempfile::TempDir);

impl Fixtures {
    fn new() -> Self {
        Self(tempfile::tempdir().unwrap())
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A `Testbed` parent in `mode`, with extra spec fields (YAML flow mapping entries).
    fn testbed(&self, mode: &str, extra: &str) -> PathBuf {
        self.file(
            "parent.yaml",
            &format!("apiVersion: test.wasmop.dev/v1\nkind: Testbed\nmetadata: {{name: t}}\nspec: {{mode: {mode}{extra}}}\n"),
        )
    }
}

/// `wasmop reconcile --plugin <plugin> --object <parent> -o json --now NOW <extra...>`.
fn reconcile(plugin: &Path, parent: &Path, extra: &[&Path]) -> Output {
    let mut args: Vec<String> = ["reconcile", "-o", "json", "--now", NOW, "--plugin"].map(str::to_owned).to_vec();
    args.push(plugin.display().to_string());
    args.push("--object".into());
    args.push(parent.display().to_string());
    let mut flag = None;
    for p in extra {
        match p.to_str().unwrap() {
            f @ ("--children" | "--related") => flag = Some(f),
            path => args.extend([flag.expect("a flag before each fixture").to_owned(), path.to_owned()]),
        }
    }
    Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(&args)
        .env("WASMOP_CACHE_DIR", std::env::temp_dir().join("wasmop-cli-test-artifacts"))
        .env("RUST_LOG", "warn")
        .output()
        .expect("running wasmop")
}

fn children() -> &'static Path {
    Path::new("--children")
}

fn related() -> &'static Path {
    Path::new("--related")
}

fn plan(out: &Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The single `error: ` line of a failed run.
fn error(out: &Output) -> String {
    assert!(!out.status.success(), "expected a refusal, got:\n{}", String::from_utf8_lossy(&out.stdout));
    let text = String::from_utf8_lossy(&out.stderr);
    let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "exactly one error line expected in:\n{text}");
    errors[0].to_owned()
}

fn warnings(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr).lines().filter(|l| l.starts_with("warning: ")).map(str::to_owned).collect()
}

#[test]
fn the_plan_has_the_host_owner_reference_the_status_patch_and_the_rest() {
    let f = Fixtures::new();
    let out = reconcile(&fixtures::testbed(), &f.testbed("ok", ""), &[]);
    let plan = plan(&out);
    assert!(warnings(&out).is_empty(), "{:?}", warnings(&out));
    let child = &plan["apply"][0];
    assert_eq!((&child["metadata"]["name"], &child["metadata"]["namespace"]), (&json!("t-out"), &json!("default")));
    assert_eq!(
        child["metadata"]["ownerReferences"],
        json!([{"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed", "name": "t", "uid": PLACEHOLDER_UID,
            "controller": true, "blockOwnerDeletion": true}])
    );
    let status = &plan["statusPatch"]["status"];
    assert_eq!(status["phase"], "Ready");
    let types: Vec<_> =
        status["conditions"].as_array().unwrap().iter().map(|c| (c["type"].clone(), c["status"].clone())).collect();
    assert_eq!(types, [(json!("Ready"), json!("True")), (json!("Reconciled"), json!("True"))]);
    assert_eq!(status["conditions"][1]["lastTransitionTime"], NOW);
    assert_eq!(
        (&plan["prune"], &plan["delete"], &plan["events"], &plan["requeueAfterMs"], &plan["finalized"]),
        (&json!([]), &json!([]), &json!([]), &Value::Null, &json!(false))
    );
}

#[test]
fn a_child_in_kube_system_is_refused_with_the_reason() {
    let f = Fixtures::new();
    let line = error(&reconcile(&fixtures::testbed(), &f.testbed("other-namespace", ""), &[]));
    assert_eq!(
        line,
        "error: response refused (ActionRefused), run would write nothing: v1/ConfigMap kube-system/t-escaped is in \
         namespace \"kube-system\", outside the parent's namespace \"default\""
    );
}

#[test]
fn an_undeclared_kind_is_refused_with_the_reason() {
    let f = Fixtures::new();
    let line = error(&reconcile(&fixtures::testbed(), &f.testbed("undeclared", ""), &[]));
    assert!(line.contains("(ActionRefused)") && line.contains("which the plugin does not declare as a child"), "{line}");
}

#[test]
fn an_object_of_another_owner_is_already_owned_and_never_a_child() {
    let f = Fixtures::new();
    let theirs = f.file(
        "theirs.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: t-out\n  ownerReferences:\n  \
         - {apiVersion: test.wasmop.dev/v1, kind: Testbed, name: other, uid: u-other, controller: true}\n",
    );
    let out = reconcile(&fixtures::testbed(), &f.testbed("ok", ""), &[children(), &theirs]);
    let line = error(&out);
    assert!(line.starts_with("error: response refused (AlreadyOwned)"), "{line}");
    assert!(
        line.contains("v1/ConfigMap default/t-out already exists and is controlled by Testbed other (uid u-other)"),
        "{line}"
    );
    let warned = warnings(&out);
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0].ends_with("is kept but not a child of the parent: it is controlled by Testbed other (uid u-other); applying it would be refused (AlreadyOwned)"), "{warned:?}");
}

#[test]
fn a_users_own_object_is_already_owned() {
    let f = Fixtures::new();
    let users = f.file(
        "users.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: t-out, ownerReferences: []}\ndata: {mine: 'yes'}\n",
    );
    let line = error(&reconcile(&fixtures::testbed(), &f.testbed("ok", ""), &[children(), &users]));
    assert!(line.contains("(AlreadyOwned)") && line.contains("is controlled by nobody"), "{line}");
}

#[test]
fn a_plugin_cannot_point_a_child_at_another_owner() {
    let f = Fixtures::new();
    let forged = ", ownerReferences: [{apiVersion: v1, kind: Testbed, name: victim, uid: u-victim, controller: true}]";
    let plan = plan(&reconcile(&fixtures::testbed(), &f.testbed("take", forged), &[]));
    let refs = &plan["apply"][0]["metadata"]["ownerReferences"];
    assert_eq!(refs.as_array().unwrap().len(), 1, "{refs}");
    assert_eq!((&refs[0]["name"], &refs[0]["uid"]), (&json!("t"), &json!(PLACEHOLDER_UID)));
}

#[test]
fn only_the_parents_own_children_are_pruned() {
    let f = Fixtures::new();
    let observed = f.file(
        "observed.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: t-stale, uid: u-stale}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {name: t-users, ownerReferences: []}\n",
    );
    let out = reconcile(&fixtures::testbed(), &f.testbed("ok", ""), &[children(), &observed]);
    let plan = plan(&out);
    assert_eq!(
        plan["prune"],
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "default", "name": "t-stale", "uid": "u-stale"}])
    );
    assert_eq!(warnings(&out).len(), 1, "the user's ConfigMap is not a child: {:?}", warnings(&out));
}

#[test]
fn explicit_deletes_touch_only_the_parents_children() {
    let f = Fixtures::new();
    let observed = f.file(
        "observed.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mine, uid: u-mine}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {name: users, ownerReferences: []}\n",
    );
    let plan = plan(&reconcile(&fixtures::testbed(), &f.testbed("delete", ", target: mine"), &[children(), &observed]));
    assert_eq!(
        plan["delete"],
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "default", "name": "mine", "uid": "u-mine"}])
    );
    let line = error(&reconcile(&fixtures::testbed(), &f.testbed("delete", ", target: users"), &[children(), &observed]));
    assert!(line.starts_with("error: response refused (NotControlled)") && line.contains("controlled by nobody"), "{line}");
}

#[test]
fn every_ignored_fixture_is_warned_about_with_the_reason() {
    let f = Fixtures::new();
    let kids = f.file(
        "children.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: elsewhere, namespace: other}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: a-pod, labels: {app: memcached, memcached_cr: memcached-sample}}\n",
    );
    let rel = f.file(
        "related.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a-deployment}\n---\n\
         apiVersion: v1\nkind: Service\nmetadata: {name: a-service}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: far-pod, namespace: other, labels: {app: memcached, memcached_cr: memcached-sample}}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: other-pod, labels: {app: memcached, memcached_cr: other}}\n---\n\
         apiVersion: cache.example.com/v1alpha1\nkind: Memcached\nmetadata: {name: sibling}\n",
    );
    let sample = workspace().join("crds/samples/memcached.yaml");
    let out = reconcile(&fixtures::memcached(), &sample, &[children(), &kids, related(), &rel]);
    plan(&out);
    let warned = warnings(&out);
    let expected = [
        "apps/v1/Deployment other/elsewhere is ignored: namespace \"other\" is not the parent's namespace \"default\"",
        "v1/Pod default/a-pod is ignored: v1/Pod is not a child kind of plugin memcached (pass it with --related)",
        "apps/v1/Deployment default/a-deployment is ignored: apps/v1/Deployment is declared only as a child kind of plugin memcached (pass it with --children)",
        "v1/Service default/a-service is ignored: plugin memcached does not declare v1/Service",
        "v1/Pod other/far-pod is ignored: namespace \"other\" is not the parent's namespace \"default\" and not granted by the host's policy",
        "v1/Pod default/other-pod is ignored: its labels do not match the related selector app=memcached,memcached_cr=memcached-sample",
        "cache.example.com/v1alpha1/Memcached default/sibling is ignored: cache.example.com/v1alpha1/Memcached is the parent's kind, and a plugin sees no other object of it",
    ];
    assert_eq!(warned.len(), expected.len(), "{warned:#?}");
    for (line, want) in warned.iter().zip(expected) {
        assert!(line.starts_with("warning: ") && line.ends_with(want), "{line}\n  does not end with\n{want}");
    }
}

#[test]
fn a_bad_now_is_one_error_naming_the_flag() {
    let f = Fixtures::new();
    let out = Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(["reconcile", "--plugin", "x.wasm", "--object"])
        .arg(f.testbed("ok", ""))
        .args(["--now", "yesterday"])
        .output()
        .unwrap();
    let line = error(&out);
    assert!(line.contains("--now") && line.contains("not an RFC 3339 time"), "{line}");
}

/// A failure that shows the parent a status and conditions (WIT 0.3.0): the status patch `run`
/// would write is printed (the fixture has no generation: reconciled as generation 1, as the API
/// server sets it on create), then the run fails with the plugin's error; a failure that shows
/// nothing prints nothing.
#[test]
fn a_failure_showing_status_prints_the_status_patch_and_fails_with_the_error() {
    let f = Fixtures::new();
    let out = reconcile(&fixtures::testbed(), &f.testbed("invalid", ""), &[]);
    assert_eq!(error(&out), "error: plugin error (terminal): spec.size is required");
    let printed: Value = serde_json::from_slice(&out.stdout).expect("the failure's plan as JSON");
    assert_eq!(
        printed["failed"],
        json!({"reason": "ReconcileFailed", "message": "plugin error (terminal): spec.size is required", "retryable": false})
    );
    let status = &printed["statusPatch"]["status"];
    assert_eq!(status["phase"], "Invalid");
    assert_eq!(
        status["conditions"][0],
        json!({"type": "Ready", "status": "False", "reason": "InvalidSpec", "message": "spec.size is required",
               "lastTransitionTime": NOW, "observedGeneration": 1})
    );
    assert_eq!(
        (&status["conditions"][1]["type"], &status["conditions"][1]["reason"]),
        (&json!("Reconciled"), &json!("ReconcileFailed"))
    );
    let bare = reconcile(&fixtures::testbed(), &f.testbed("terminal", ""), &[]);
    assert_eq!(error(&bare), "error: plugin error (terminal): testbed asked for a terminal error");
    assert!(bare.stdout.is_empty(), "{}", String::from_utf8_lossy(&bare.stdout));
}
