//! The `wasmop` binary: offline `reconcile` golden output, `inspect`, and one-line errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use wasmop_e2e::fixtures::{self, workspace};

fn wasmop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(args)
        .env("WASMOP_CACHE_DIR", std::env::temp_dir().join("wasmop-cli-test-artifacts"))
        .env("RUST_LOG", "warn")
        .output()
        .expect("running wasmop")
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn stderr_line(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stderr);
    let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "exactly one error line expected in:\n{text}");
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

#[test]
fn memcached_reconcile_matches_golden_output() {
    let plugin = fixtures::memcached();
    let sample = workspace().join("crds/samples/memcached.yaml");
    let out = wasmop(&[
        "reconcile",
        "--plugin",
        plugin.to_str().unwrap(),
        "--object",
        sample.to_str().unwrap(),
        "--related",
        fixture("memcached-pods.yaml").to_str().unwrap(),
        "--children",
        fixture("memcached-deployment.yaml").to_str().unwrap(),
        "--now",
        "2024-01-01T00:00:00Z",
        "--output",
        "json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let response: serde_json::Value = serde_json::from_str(&text).unwrap();
    let deployment = &response["apply"][0];
    assert_eq!(deployment["apiVersion"], "apps/v1");
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(deployment["spec"]["template"]["spec"]["containers"][0]["image"], "memcached:1.6.17-alpine");
    assert_eq!(
        response["statusPatch"]["status"]["nodes"],
        serde_json::json!([
            "memcached-sample-6d4b9c7f8d-a81zq",
            "memcached-sample-6d4b9c7f8d-m3c4d",
            "memcached-sample-6d4b9c7f8d-x2k9p"
        ])
    );
    assert_eq!(response["statusPatch"]["status"]["conditions"][0]["status"], "True");
    // The sample has no metadata.generation: reconciled as just created, generation 1.
    assert_eq!(response["statusPatch"]["status"]["conditions"][0]["observedGeneration"], 1);
    assert_golden("memcached-reconcile.json", &text);
}

#[test]
fn memcached_without_fixtures_applies_a_deployment_and_reports_not_available() {
    let plugin = fixtures::memcached();
    let sample = workspace().join("crds/samples/memcached.yaml");
    let out = wasmop(&["reconcile", "--plugin", plugin.to_str().unwrap(), "--object", sample.to_str().unwrap(), "-o", "yaml"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let response: serde_json::Value = wasmop::yaml::from_slice(&out.stdout).unwrap();
    assert_eq!(response["apply"][0]["spec"]["replicas"], 3);
    assert_eq!(response["statusPatch"]["status"]["nodes"], serde_json::json!([]));
    assert_eq!(response["statusPatch"]["status"]["conditions"][0]["status"], "False");
}

#[test]
fn inspect_prints_the_manifest() {
    let out = wasmop(&["inspect", fixtures::memcached().to_str().unwrap(), "--output", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["manifest"]["name"], "memcached");
    assert_eq!(v["manifest"]["related"][0]["labelSelector"], "app=memcached,memcached_cr=$(parent.name)");
    assert_eq!(v["digest"].as_str().unwrap().len(), 64);
    assert_eq!(
        v["limits"],
        serde_json::json!({"deadline": "1000ms", "memory": "64Mi", "maxResponseBytes": "16Mi", "maxActions": 10000})
    );
    assert_eq!(
        v["grants"],
        serde_json::json!({"secrets": "none", "namespaces": [], "writeNamespaces": [], "clusterScopedChildren": [],
            "escalationKinds": [], "allowHostAccess": false, "adoptUnowned": false, "webhookResources": []})
    );
    assert!(v.get("notGranted").is_none());
}

#[test]
fn inspect_shows_what_the_policy_allows_and_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "plugins: {memcached: {memory: 128Mi, fuel: 1000, grants: {namespaces: [shared]}}}").unwrap();
    let plugin = fixtures::memcached();
    let out = wasmop(&["inspect", plugin.to_str().unwrap(), "--output", "json", "--policy", policy.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((&v["limits"]["memory"], &v["limits"]["fuel"]), (&serde_json::json!("128Mi"), &serde_json::json!(1000)));
    assert_eq!(v["grants"]["namespaces"], serde_json::json!(["shared"]));

    let secretive = fixtures::plugin_with_features("testbed", "wasm32-wasip2", &["declares-secrets"]);
    let out = wasmop(&["inspect", secretive.to_str().unwrap(), "--output", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["notGranted"], serde_json::json!(["reads v1/Secret (grant secrets: read)"]));
}

#[test]
fn a_looping_plugin_is_stopped_by_the_deadline_from_the_cli() {
    let plugin = fixtures::testbed();
    let dir = tempfile::tempdir().unwrap();
    let cr = dir.path().join("loop.yaml");
    std::fs::write(&cr, "apiVersion: test.wasmop.dev/v1\nkind: Testbed\nmetadata: {name: t}\nspec: {mode: loop}\n").unwrap();
    let started = Instant::now();
    let out =
        wasmop(&["reconcile", "--deadline", "100ms", "--plugin", plugin.to_str().unwrap(), "--object", cr.to_str().unwrap()]);
    assert!(!out.status.success());
    let line = stderr_line(&out);
    assert!(line.starts_with("error: plugin call exceeded its deadline of 100ms and was interrupted after 1"), "{line}");
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
}

#[test]
fn bad_inputs_exit_non_zero_with_one_clear_line() {
    let memcached = fixtures::memcached();
    let m = memcached.to_str().unwrap();
    let sample = workspace().join("crds/samples/memcached.yaml");
    let s = sample.to_str().unwrap();
    let not_wasm = fixture("memcached-pods.yaml");
    let (not_yaml, pods) = (fixture("not-yaml.yaml"), fixture("memcached-pods.yaml"));
    let (not_yaml, pods) = (not_yaml.to_str().unwrap(), pods.to_str().unwrap());
    let wrong_world = fixtures::plugin("wrong-world", "wasm32-wasip2");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["inspect", "/nonexistent.wasm"], "error: cannot read /nonexistent.wasm"),
        (vec!["inspect", not_wasm.to_str().unwrap()], "error: not a WebAssembly file"),
        (
            vec!["inspect", wrong_world.to_str().unwrap()],
            "error: not a wasmop plugin (the host accepts wasmop:plugin/operator@0.1.0",
        ),
        (vec!["reconcile", "--plugin", m, "--object", not_yaml], "error: "),
        (vec!["reconcile", "--plugin", m, "--object", pods], "error: "),
    ];
    for (args, prefix) in cases {
        let out = wasmop(&args);
        assert!(!out.status.success(), "{args:?} should fail");
        let line = stderr_line(&out);
        assert!(line.starts_with(prefix), "{args:?}: {line}");
    }
    let out = wasmop(&["reconcile", "--plugin", m, "--object", not_yaml]);
    assert!(stderr_line(&out).contains("not-yaml.yaml: document 1 is not valid YAML"));
    let out = wasmop(&["reconcile", "--plugin", m, "--object", pods]);
    assert!(stderr_line(&out).contains("expected one object, found 4"));
    // A fixture of the wrong role is not an error: it is ignored with a warning saying why.
    let out = wasmop(&["reconcile", "--plugin", m, "--object", s, "--children", pods]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("v1/Pod is not a child kind of plugin memcached (pass it with --related)")
    );
}

#[test]
fn the_policy_file_sets_a_plugins_limits_and_a_bad_one_is_one_clear_error() {
    let plugin = fixtures::testbed();
    let dir = tempfile::tempdir().unwrap();
    let cr = dir.path().join("loop.yaml");
    std::fs::write(&cr, "apiVersion: test.wasmop.dev/v1\nkind: Testbed\nmetadata: {name: t}\nspec: {mode: loop}\n").unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "kind: HostPolicy\nplugins:\n  testbed: {deadline: 150ms}\n").unwrap();
    let args = |policy: &str| {
        wasmop(&["reconcile", "--policy", policy, "--plugin", plugin.to_str().unwrap(), "--object", cr.to_str().unwrap()])
    };
    let line = stderr_line(&args(policy.to_str().unwrap()));
    assert!(line.starts_with("error: plugin call exceeded its deadline of 150ms"), "{line}");

    std::fs::write(&policy, "plugins:\n  testbed: {deadlne: 150ms}\n").unwrap();
    let out = args(policy.to_str().unwrap());
    assert!(!out.status.success());
    let line = stderr_line(&out);
    assert!(line.starts_with("error: invalid policy: ") && line.contains("unknown field `deadlne`"), "{line}");
    let line = stderr_line(&args("/nonexistent/policy.yaml"));
    assert!(line.starts_with("error: cannot read policy file /nonexistent/policy.yaml: "), "{line}");
}

#[test]
fn rbac_takes_resource_names_from_crd_files_and_an_unknown_kind_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixtures::testbed(), dir.path().join("testbed.wasm")).unwrap();
    let plugins = dir.path().to_str().unwrap();
    let crd = workspace().join("crds/testbed.yaml");
    let out = wasmop(&["rbac", "--plugins", plugins, "--crds", crd.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("- testbeds\n") && text.contains("- testbeds/status\n"), "{text}");

    let out = wasmop(&["rbac", "--plugins", plugins, "--kubeconfig", "/nonexistent/kubeconfig"]);
    assert!(!out.status.success());
    let line = stderr_line(&out);
    assert!(line.starts_with("error: kind test.wasmop.dev/v1/Testbed is unknown"), "{line}");
    assert!(line.contains("--crds") && line.contains("no cluster to ask"), "{line}");
}

#[test]
fn inspect_says_a_cluster_scoped_child_of_a_namespaced_parent_needs_a_grant() {
    let testbed = fixtures::plugin_with_features("testbed", "wasm32-wasip2", &["declares-cluster-role"]);
    let out = wasmop(&["inspect", testbed.to_str().unwrap(), "--output", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["notGranted"],
        serde_json::json!([
            "writes the cluster-scoped rbac.authorization.k8s.io/v1/ClusterRole from a namespaced parent \
             (grant clusterScopedChildren: [rbac.authorization.k8s.io/v1/ClusterRole])",
            "writes rbac.authorization.k8s.io/v1/ClusterRole, which grants rights \
             (grant escalationKinds: [rbac.authorization.k8s.io/v1/ClusterRole])"
        ])
    );
}

#[test]
fn inspect_with_crds_alone_lists_offline_what_neither_kubernetes_nor_those_crds_serve() {
    let sidecarset = wasmop_e2e::fixtures::plugin("sidecarset", "wasm32-wasip2");
    let inspect = |crds: &std::path::Path| {
        let out = wasmop(&["inspect", sidecarset.to_str().unwrap(), "--crds", crds.to_str().unwrap(), "--output", "json"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["notServed"].clone()
    };
    // The repository's CRD serves what the plugin declares: nothing missing.
    assert_eq!(inspect(&workspace().join("crds/sidecarset.yaml")), serde_json::json!([]));
    // A CRD that serves another version: the parent kind and every webhook rule naming its
    // resource at that version, one line each.
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("sidecarset-v1.yaml");
    let crd = std::fs::read_to_string(workspace().join("crds/sidecarset.yaml")).unwrap();
    std::fs::write(&other, crd.replace("- name: v1alpha1", "- name: v1")).unwrap();
    let lines = inspect(&other);
    let lines: Vec<&str> = lines.as_array().unwrap().iter().filter_map(serde_json::Value::as_str).collect();
    assert!(lines.contains(&"apps.wasmop.dev/v1alpha1/SidecarSet: its CRD serves v1, not v1alpha1"), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("webhook ") && l.contains("sidecarsets: its CRD serves v1")), "{lines:?}");
    // Without --crds and --kubeconfig there is nothing to check against: no list at all.
    let out = wasmop(&["inspect", sidecarset.to_str().unwrap(), "--output", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.get("notServed").is_none(), "{v}");
}

/// The policy under which the testbed's `cluster-parent` build may start: everything it
/// declares granted, the namespace `tenant` to write into, host access not.
const CLUSTER_PARENT_GRANTS: &str = "plugins: {testbed: {grants: {writeNamespaces: [tenant], \
    clusterScopedChildren: [rbac.authorization.k8s.io/v1/ClusterRoleBinding], \
    escalationKinds: [rbac.authorization.k8s.io/v1/ClusterRoleBinding, coordination.k8s.io/v1/Lease]}}}";

#[test]
fn reconcile_refuses_what_run_refuses() {
    let plugin = fixtures::plugin_with_features("testbed", "wasm32-wasip2", &["cluster-parent"]);
    let dir = tempfile::tempdir().unwrap();
    let crds = workspace().join("crds/cluster-testbed.yaml");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, CLUSTER_PARENT_GRANTS).unwrap();
    let reconcile = |mode: &str, extra: &str, policy: Option<&Path>| {
        let cr = dir.path().join(format!("{mode}.yaml"));
        let object = format!(
            "apiVersion: test.wasmop.dev/v1\nkind: ClusterTestbed\nmetadata: {{name: x}}\nspec: {{mode: {mode}{extra}}}\n"
        );
        std::fs::write(&cr, object).unwrap();
        let mut args = vec!["reconcile", "--plugin", plugin.to_str().unwrap(), "--object", cr.to_str().unwrap()];
        args.extend(["--crds", crds.to_str().unwrap()]);
        if let Some(policy) = policy {
            args.extend(["--policy", policy.to_str().unwrap()]);
        }
        stderr_line(&wasmop(&args))
    };
    // Without grants, run would not start it: neither does reconcile.
    let line = reconcile("kube-system-deployment", "", None);
    assert!(
        line.starts_with(
            "error: run would not start plugin testbed: it writes the namespaced v1/ConfigMap from a cluster-scoped parent"
        ),
        "{line}"
    );
    // Granted what it declares, every response run refuses is refused, by the same gate.
    let line = reconcile("kube-system-deployment", "", Some(&policy));
    assert!(
        line.contains(
            "apps/v1/Deployment kube-system/x-root is in namespace \"kube-system\", which the host's policy does not grant"
        ),
        "{line}"
    );
    assert!(line.starts_with("error: response refused (ActionRefused), run would write nothing: "), "{line}");
    let line = reconcile("kube-system-deployment", ", namespace: tenant", Some(&policy));
    assert!(line.contains("asks for host access, which the host's policy does not grant (allowHostAccess): spec.template.spec.hostNetwork is true"), "{line}");
    let line = reconcile("bind-authenticated", "", Some(&policy));
    assert!(line.contains("x-everyone is reserved for the host: it binds the host's own role \"wasmop\""), "{line}");
    let line = reconcile("take-lease", ", namespace: tenant", Some(&policy));
    assert!(line.contains("tenant/wasmop is reserved for the host"), "{line}");
}

#[test]
fn os_errors_are_printed_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let line = stderr_line(&wasmop(&["inspect", d]));
    assert_eq!(line, format!("error: cannot read {d}: Is a directory (os error 21)"));
    let line = stderr_line(&wasmop(&["inspect", "/nonexistent.wasm", "--policy", d]));
    assert_eq!(line, format!("error: cannot read policy file {d}: Is a directory (os error 21)"));
}

#[test]
fn reconcile_and_inspect_check_the_config_as_run_does() {
    let plugin = fixtures::memcached();
    let m = plugin.to_str().unwrap();
    let sample = workspace().join("crds/samples/memcached.yaml");
    let s = sample.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (config, policy) = (dir.path().join("config.yaml"), dir.path().join("policy.yaml"));
    let (c, p) = (config.to_str().unwrap(), policy.to_str().unwrap());
    let image = |out: &Output| -> serde_json::Value {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let plan: serde_json::Value = wasmop::yaml::from_slice(&out.stdout).unwrap();
        plan["apply"][0]["spec"]["template"]["spec"]["containers"][0]["image"].clone()
    };

    std::fs::write(&config, "image: memcached:1.6.38-alpine\nport: 11311\n").unwrap();
    assert_eq!(image(&wasmop(&["reconcile", "--plugin", m, "--object", s, "--config", c])), "memcached:1.6.38-alpine");
    std::fs::write(&config, "image: memcached:1.6.38-alpine\nport: high\n").unwrap();
    let line = stderr_line(&wasmop(&["reconcile", "--plugin", m, "--object", s, "--config", c]));
    assert_eq!(line, format!("error: {c}: run would not use it: invalid config at /port: \"high\" is not of type \"integer\""));

    // Without --config: the policy's, as run gives it.
    std::fs::write(&policy, "plugins: {memcached: {config: {image: \"memcached:1.6.39-alpine\"}}}").unwrap();
    assert_eq!(image(&wasmop(&["reconcile", "--policy", p, "--plugin", m, "--object", s])), "memcached:1.6.39-alpine");
    let out = wasmop(&["inspect", m, "-o", "json", "--policy", p]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let want = serde_json::json!({"source": "policy", "inUse": {"image": "memcached:1.6.39-alpine"}, "valid": true});
    assert_eq!(v["config"], want);
    std::fs::write(&policy, "plugins: {memcached: {config: {image: \"\"}}}").unwrap();
    let v: serde_json::Value = serde_json::from_slice(&wasmop(&["inspect", m, "-o", "json", "--policy", p]).stdout).unwrap();
    assert_eq!(v["config"]["valid"], false);
    assert!(v["config"]["error"].as_str().unwrap().starts_with("invalid config at /image: "), "{v}");
    assert!(stderr_line(&wasmop(&["reconcile", "--policy", p, "--plugin", m, "--object", s])).contains("at /image"));
    std::fs::write(&policy, "plugins: {memcached: {configMap: ops/memcached-config}}").unwrap();
    let line = stderr_line(&wasmop(&["reconcile", "--policy", p, "--plugin", m, "--object", s]));
    assert_eq!(
        line,
        "error: plugin memcached is configured by ConfigMap ops/memcached-config (host policy): pass its configuration with \
         --config FILE"
    );
    let v: serde_json::Value = serde_json::from_slice(&wasmop(&["inspect", m, "-o", "json", "--policy", p]).stdout).unwrap();
    assert_eq!(v["config"], serde_json::json!({"source": "ConfigMap ops/memcached-config"}));
    let plain = serde_json::from_slice::<serde_json::Value>(&wasmop(&["inspect", m, "-o", "json"]).stdout).unwrap();
    assert_eq!(plain["config"], serde_json::json!({"source": "none", "inUse": {}, "valid": true}));
}

#[test]
fn crds_prints_the_shipped_wasmplugin_crd() {
    let out = wasmop(&["crds"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed: serde_json::Value = wasmop::yaml::from_slice(&out.stdout).expect("YAML");
    assert_eq!(
        (printed["kind"].as_str(), printed["metadata"]["name"].as_str()),
        (Some("CustomResourceDefinition"), Some("wasmplugins.wasmop.dev"))
    );
    for shipped in
        ["crds/wasmplugin.yaml", "deploy/kustomize/base/crds/wasmplugin.yaml", "deploy/helm/wasmop/crds/wasmplugin.yaml"]
    {
        let text = std::fs::read_to_string(workspace().join(shipped)).unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), text, "{shipped}");
    }
}
