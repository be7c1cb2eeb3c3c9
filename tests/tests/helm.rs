//! The Helm chart (`deploy/helm/wasmop`) with a real helm 4 against a real control plane:
//!
//! - `helm lint --strict` passes;
//! - `helm template` of the chart's variants passes a server-side dry run with strict
//!   validation;
//! - with `watchNamespaces` the chart grants, Role for Role, what `wasmop rbac --namespace`
//!   prints (no ClusterRole but the reports'), passes the dry run, and passes the namespaces
//!   to the host;
//! - with `plugins.source=registry` the chart renders each plugin's source and the trusted keys
//!   into a host policy the host reads as such (signatures required by default, refused to
//!   render without a key), grants `get` on exactly the pull Secrets `wasmop rbac` grants, and
//!   gives the host a writable plugins directory; it passes the dry run. The host's pulls
//!   themselves are not shown live here (kwok's Pods run no container): tests/tests/registry.rs
//!   runs them against a real registry;
//! - the chart's Pod runs in a namespace enforcing the Pod Security `restricted` profile, and
//!   the chart renders a PodDisruptionBudget exactly when `replicaCount > 1`;
//! - `helm install` creates the same objects as the kustomize base (its Namespace aside),
//!   wired the same way; `helm upgrade` rolls a changed value into the Deployment; `helm
//!   uninstall` removes what the release created (CRDs stay, as Helm keeps `crds/`).
//!
//! helm and a current kubectl come from `scripts/tools.sh` (`WASMOP_TOOLS`), which `cargo`
//! cannot provide: the tests are `#[ignore]`d in a plain `cargo test` and run by
//! `scripts/test.sh` (`--include-ignored`), where a missing helm fails them with how to install it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, ensure};
use std::time::Duration;

use serde_json::{Value, json};
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{api_for, apply, deployment_available, eventually};
use wasmop_e2e::plugins::{plugin, workspace};
use wasmop_e2e::tools::{self, docs, kubectl_name, kustomize_base_objects, to_yaml_stream};

const NAMESPACE: &str = "wasmop-system";

fn chart() -> String {
    workspace().join("deploy/helm/wasmop").display().to_string()
}

/// Run `helm args...` against `cp`; stdout on success.
fn helm(bin: &Path, cp: &ControlPlane, args: &[&str]) -> Result<String> {
    let out = Command::new(bin)
        .args(args)
        .env("KUBECONFIG", cp.kubeconfig_path())
        // Helm's caches and config stay in the test's control-plane directory.
        .env("HELM_CACHE_HOME", cp.dir().join("helm/cache"))
        .env("HELM_CONFIG_HOME", cp.dir().join("helm/config"))
        .env("HELM_DATA_HOME", cp.dir().join("helm/data"))
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    ensure!(out.status.success(), "helm {} failed ({}): {}", args.join(" "), out.status, String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8(out.stdout)?)
}

fn find<'a>(objects: &'a [Value], kind: &str) -> Result<&'a Value> {
    objects.iter().find(|o| o["kind"] == kind).with_context(|| format!("no {kind}"))
}

/// `helm lint --strict`: only the informational "icon is recommended" remains.
#[test]
#[ignore = "needs helm from scripts/setup.sh: scripts/test.sh e2e runs it"]
fn chart_lints_strictly() -> Result<()> {
    let helm_bin = tools::helm()?;
    let out = Command::new(&helm_bin).args(["lint", "--strict", &chart()]).output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    ensure!(out.status.success(), "helm lint --strict failed:\n{text}{}", String::from_utf8_lossy(&out.stderr));
    ensure!(text.contains("1 chart(s) linted, 0 chart(s) failed"), "{text}");
    Ok(())
}

/// `helm template` of each variant of the chart passes a strict server-side dry run.
#[tokio::test]
#[ignore = "needs helm from scripts/setup.sh: scripts/test.sh e2e runs it"]
async fn chart_variants_render_and_pass_server_dry_run() -> Result<()> {
    let (helm_bin, kubectl) = (tools::helm()?, tools::kubectl()?);
    let cp = ControlPlane::start().await?;
    kubectl.run(&cp, &["create", "namespace", NAMESPACE], None)?;
    let variants: [&[&str]; 4] = [
        &[],
        &["--set", "plugins.source=initContainer", "--set", "plugins.initContainer.image=busybox:1.36"],
        &[
            "--set",
            "leaderElection.enabled=true",
            "--set",
            "replicaCount=2",
            "--set",
            "limits.deadline=500ms",
            "--set",
            "limits.memory=32Mi",
        ],
        &["--set", "sharding.enabled=true", "--set", "replicaCount=3"],
    ];
    let chart = chart();
    for extra in variants {
        let mut args = vec!["template", "wasmop", chart.as_str(), "--namespace", NAMESPACE, "--include-crds"];
        args.extend_from_slice(extra);
        let rendered = docs(&helm(&helm_bin, &cp, &args)?)?;
        let expected: BTreeSet<String> = rendered.iter().map(kubectl_name).collect();
        let applied = kubectl.server_dry_run(&cp, &to_yaml_stream(&rendered)?)?;
        assert_eq!(applied, expected, "helm template {extra:?}: every object passes the server dry run");
        let c = &find(&rendered, "Deployment")?["spec"]["template"]["spec"]["containers"][0];
        let args: Vec<&str> = c["args"].as_array().context("args")?.iter().filter_map(Value::as_str).collect();
        assert_eq!(
            &args[..8],
            [
                "run",
                "--plugins",
                "/plugins",
                "--metrics-addr",
                "0.0.0.0:8443",
                "--metrics-secure",
                "--probe-addr",
                "0.0.0.0:8081"
            ]
        );
        assert_eq!(args.contains(&"--sharding"), extra.contains(&"sharding.enabled=true"), "helm template {extra:?}: {args:?}");
        // A PodDisruptionBudget exactly when there are several replicas; spread shards over nodes.
        let replicas = find(&rendered, "Deployment")?["spec"]["replicas"].as_u64().context("replicas")?;
        let pdb = rendered.iter().find(|o| o["kind"] == "PodDisruptionBudget");
        assert_eq!(pdb.is_some(), replicas > 1, "helm template {extra:?}: a PDB with {replicas} replica(s)");
        if let Some(pdb) = pdb {
            assert_eq!(pdb["spec"]["maxUnavailable"], 1, "helm template {extra:?}");
        }
        let spread = &find(&rendered, "Deployment")?["spec"]["template"]["spec"]["topologySpreadConstraints"];
        assert_eq!(spread.is_array(), extra.contains(&"sharding.enabled=true"), "helm template {extra:?}: {spread}");
        let policy = find(&rendered, "NetworkPolicy")?;
        assert_eq!(policy["spec"]["ingress"][0]["ports"][0]["port"], "webhook", "the webhook port from anywhere");
        assert!(policy["spec"]["ingress"][0].get("from").is_none(), "the webhook port from anywhere");
        assert_eq!(policy["spec"]["ingress"][1]["ports"][0]["port"], "https-metrics", "metrics from the selected namespaces");
    }
    Ok(())
}

/// The chart's Pod passes the Pod Security `restricted` profile: installed into a namespace
/// that enforces it, its Deployment becomes Available (kwok runs the Pod) and no ReplicaSet
/// reports `FailedCreate`; the same namespace refuses a Pod that is not restricted.
#[tokio::test]
#[ignore = "needs helm from scripts/setup.sh: scripts/test.sh e2e runs it"]
async fn chart_runs_in_a_namespace_enforcing_the_restricted_profile() -> Result<()> {
    let helm_bin = tools::helm()?;
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    let restricted = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE,
        "labels": {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}});
    apply(&client, &restricted).await?;
    // The negative control: the namespace refuses a Pod that is not restricted.
    let pods = api_for(&client, "v1", "Pod", Some(NAMESPACE)).await?;
    let loose: kube::api::DynamicObject = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "loose", "namespace": NAMESPACE}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))?;
    let refused = pods.create(&Default::default(), &loose).await.expect_err("a Pod without a restricted securityContext");
    assert!(refused.to_string().contains("violates PodSecurity \"restricted"), "{refused}");

    helm(&helm_bin, &cp, &["install", "wasmop", &chart(), "--namespace", NAMESPACE])?;
    deployment_available(&client, NAMESPACE, "wasmop", Duration::from_secs(60)).await?;
    // Several replicas too (a PDB, warm standbys), each Pod admitted.
    helm(
        &helm_bin,
        &cp,
        &[
            "upgrade",
            "wasmop",
            &chart(),
            "--namespace",
            NAMESPACE,
            "--set",
            "replicaCount=2",
            "--set",
            "leaderElection.enabled=true",
        ],
    )?;
    deployment_available(&client, NAMESPACE, "wasmop", Duration::from_secs(60)).await?;
    let deployments = api_for(&client, "apps/v1", "Deployment", Some(NAMESPACE)).await?;
    let ready = eventually("two ready replicas", Duration::from_secs(60), || async {
        let d = deployments.get("wasmop").await?;
        Ok((d.data.pointer("/status/readyReplicas") == Some(&json!(2))).then_some(()))
    })
    .await;
    ready?;
    Ok(())
}

/// `watchNamespaces: [team-a, team-b]`: Roles instead of the ClusterRole, the same rules as
/// `wasmop rbac --namespace team-a --namespace team-b` for the memcached plugin, `--namespace`
/// arguments for the host, and a strict server dry run.
#[tokio::test]
#[ignore = "needs helm from scripts/setup.sh: scripts/test.sh e2e runs it"]
async fn namespaced_chart_grants_what_wasmop_rbac_namespace_prints() -> Result<()> {
    let (helm_bin, kubectl) = (tools::helm()?, tools::kubectl()?);
    let cp = ControlPlane::start().await?;
    for ns in [NAMESPACE, "team-a", "team-b"] {
        kubectl.run(&cp, &["create", "namespace", ns], None)?;
    }
    let chart = chart();
    let args =
        ["template", "wasmop", &chart, "--namespace", NAMESPACE, "--include-crds", "--set", "watchNamespaces={team-a,team-b}"];
    let rendered = docs(&helm(&helm_bin, &cp, &args)?)?;
    let expected: BTreeSet<String> = rendered.iter().map(kubectl_name).collect();
    let applied = kubectl.server_dry_run(&cp, &to_yaml_stream(&rendered)?)?;
    assert_eq!(applied, expected, "every object of the namespaced chart passes the server dry run");

    let c = &find(&rendered, "Deployment")?["spec"]["template"]["spec"]["containers"][0];
    let host_args: Vec<&str> = c["args"].as_array().context("args")?.iter().filter_map(Value::as_str).collect();
    ensure!(host_args.ends_with(&["--namespace", "team-a", "--namespace", "team-b"]), "{host_args:?}");

    // Role for Role, the rules of `wasmop rbac --namespace` (the chart's default rbac.rules are
    // the memcached plugin's).
    let runtime = wasmop::runtime::Runtime::builder().artifact_dir(None).build()?;
    let manifest = runtime.load_file(&plugin("memcached", "wasm32-wasip2")).await?.manifest().as_ref().clone();
    let mut kinds = wasmop::contract::KnownKinds::builtin();
    kinds.add_crds(&workspace().join("crds/memcached.yaml"))?;
    let namespaces: BTreeSet<String> = ["team-a".into(), "team-b".into()].into();
    let policy = wasmop::policy::HostPolicy::default();
    // The chart serves metrics securely: `wasmop rbac --metrics-secure` adds its roles in both modes.
    let generated = docs(
        &(wasmop::rbac::render_namespaced(&[manifest], &policy, &kinds, "wasmop", &namespaces, NAMESPACE, "wasmop")?
            + &wasmop::rbac::render_metrics("wasmop", NAMESPACE, "wasmop")?),
    )?;
    // The admission Secret's Role is the same in both modes: `wasmop rbac` without --namespace
    // prints it (the chart renders it whenever admission is enabled).
    let admission_secret = |o: &Value| o["metadata"]["name"] == "wasmop-admission";
    let roles = |objects: &[Value]| -> std::collections::BTreeMap<String, Value> {
        objects
            .iter()
            .filter(|o| (o["kind"] == "Role" || o["kind"] == "ClusterRole") && !admission_secret(o))
            .map(|o| (kubectl_name(o) + " in " + o["metadata"]["namespace"].as_str().unwrap_or("*"), o["rules"].clone()))
            .collect()
    };
    assert_eq!(roles(&rendered), roles(&generated), "the chart's Roles and ClusterRole differ from `wasmop rbac --namespace`'s");
    let bindings = |objects: &[Value]| -> BTreeSet<String> {
        objects
            .iter()
            .filter(|o| o["kind"].as_str().is_some_and(|k| k.ends_with("Binding")) && !admission_secret(o))
            .map(kubectl_name)
            .collect()
    };
    assert_eq!(bindings(&rendered), bindings(&generated), "the chart's bindings");
    Ok(())
}

/// `helm install` → the base's objects; `helm upgrade` → the new value; `helm uninstall` → gone.
#[tokio::test]
#[ignore = "needs helm from scripts/setup.sh: scripts/test.sh e2e runs it"]
async fn chart_installs_upgrades_and_uninstalls_like_the_base() -> Result<()> {
    let helm_bin = tools::helm()?;
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    let chart = chart();
    helm(&helm_bin, &cp, &["install", "wasmop", &chart, "--namespace", NAMESPACE, "--create-namespace"])?;

    // Every object of the base but its Namespace (Helm's --create-namespace makes that) exists.
    let base = kustomize_base_objects()?;
    for object in base.iter().filter(|o| o["kind"] != "Namespace") {
        let api_version = object["apiVersion"].as_str().context("apiVersion")?;
        let kind = object["kind"].as_str().context("kind")?;
        let name = object.pointer("/metadata/name").and_then(Value::as_str).context("name")?;
        let namespaced = object.pointer("/metadata/namespace").is_some();
        let api = api_for(&client, api_version, kind, namespaced.then_some(NAMESPACE)).await?;
        ensure!(api.get_opt(name).await?.is_some(), "helm install did not create {}", kubectl_name(object));
    }
    // Wired the same way (as written, before the server's defaults): the host's arguments,
    // identity, volumes, the RBAC rules and the host policy.
    let rendered = docs(&helm(&helm_bin, &cp, &["template", "wasmop", &chart, "--namespace", NAMESPACE])?)?;
    let (ours, theirs) = (find(&rendered, "Deployment")?, find(&base, "Deployment")?);
    for pointer in
        ["/spec/template/spec/containers/0/args", "/spec/template/spec/serviceAccountName", "/spec/template/spec/volumes"]
    {
        assert_eq!(ours.pointer(pointer), theirs.pointer(pointer), "Deployment {pointer}: chart and base differ");
    }
    assert_eq!(find(&rendered, "ClusterRole")?["rules"], find(&base, "ClusterRole")?["rules"], "ClusterRole rules");
    let policy = |objects: &[Value]| -> Result<wasmop::policy::HostPolicy> {
        let text = find(objects, "ConfigMap")?["data"]["policy.yaml"].as_str().context("policy.yaml")?;
        Ok(wasmop::policy::HostPolicy::from_yaml(text)?)
    };
    assert_eq!(policy(&rendered)?, policy(&base)?, "the host policy");

    // An upgrade rolls a new value into the Deployment.
    helm(&helm_bin, &cp, &["upgrade", "wasmop", &chart, "--namespace", NAMESPACE, "--set", "limits.deadline=500ms"])?;
    let deployments = api_for(&client, "apps/v1", "Deployment", Some(NAMESPACE)).await?;
    let deployment = deployments.get("wasmop").await?;
    let args = deployment.data.pointer("/spec/template/spec/containers/0/args").cloned().unwrap_or_default();
    let args: Vec<&str> = args.as_array().context("args")?.iter().filter_map(Value::as_str).collect();
    ensure!(args.windows(2).any(|w| w == ["--deadline", "500ms"]), "after helm upgrade: {args:?}");
    let history = helm(&helm_bin, &cp, &["history", "wasmop", "--namespace", NAMESPACE, "-o", "json"])?;
    assert_eq!(serde_json::from_str::<Vec<Value>>(&history)?.len(), 2, "two revisions: {history}");

    // Uninstall removes the release's objects; the CRDs from crds/ stay (Helm never deletes them).
    helm(&helm_bin, &cp, &["uninstall", "wasmop", "--namespace", NAMESPACE, "--wait"])?;
    ensure!(deployments.get_opt("wasmop").await?.is_none(), "the Deployment is gone after helm uninstall");
    let roles = api_for(&client, "rbac.authorization.k8s.io/v1", "ClusterRole", None).await?;
    ensure!(roles.get_opt("wasmop").await?.is_none(), "the ClusterRole is gone after helm uninstall");
    let crds = api_for(&client, "apiextensions.k8s.io/v1", "CustomResourceDefinition", None).await?;
    ensure!(crds.get_opt("wasmplugins.wasmop.dev").await?.is_some(), "CRDs stay after helm uninstall");
    Ok(())
}

/// `plugins.source=registry`: the sources and keys reach the host policy, the pull Secrets'
/// Roles are `wasmop rbac`'s, the plugins directory is writable, and it all passes the dry run.
#[tokio::test]
#[ignore = "needs helm from scripts/setup.sh: scripts/test.sh e2e runs it"]
async fn chart_pulls_plugins_from_registries_requires_signatures_and_grants_only_the_named_secrets() -> Result<()> {
    let (helm_bin, kubectl) = (tools::helm()?, tools::kubectl()?);
    let cp = ControlPlane::start().await?;
    for ns in [NAMESPACE, "shared"] {
        kubectl.run(&cp, &["create", "namespace", ns], None)?;
    }
    let key = wasmop::registry::SigningKey::generate().0.public_key("release");
    let pem: String = key.to_pem().lines().map(|l| format!("        {l}\n")).collect();
    let digest = format!("sha256:{}", "ab".repeat(32));
    let values = format!(
        "plugins:\n  source: registry\n  registry:\n    memcached:\n      source: oci://registry.example.com/plugins/memcached:0.2.0\n      \
         pullInterval: 5m\n      credentials: {{secret: {NAMESPACE}/registry-pull}}\n    web:\n      \
         source: oci://registry.example.com/plugins/web@{digest}\n      credentials: {{secret: shared/pull}}\n    \
         public:\n      source: oci://registry.example.com/plugins/public:1\n\
         policy:\n  plugins:\n    memcached: {{memory: 128Mi}}\n\
         verification:\n  keys:\n    - name: release\n      publicKey: |\n{pem}"
    );
    let file = cp.dir().join("registry-values.yaml");
    std::fs::write(&file, &values)?;
    let chart = chart();
    let file_arg = file.display().to_string();
    let args = ["template", "wasmop", chart.as_str(), "--namespace", NAMESPACE, "--include-crds", "-f", file_arg.as_str()];
    let rendered = docs(&helm(&helm_bin, &cp, &args)?)?;
    let expected: BTreeSet<String> = rendered.iter().map(kubectl_name).collect();
    assert_eq!(kubectl.server_dry_run(&cp, &to_yaml_stream(&rendered)?)?, expected, "every object passes the server dry run");

    // The host reads the rendered policy as sources, limits and keys.
    let config = rendered
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "wasmop-policy")
        .context("the policy ConfigMap")?;
    let policy = wasmop::policy::HostPolicy::from_yaml(config["data"]["policy.yaml"].as_str().context("policy.yaml")?)?;
    let sources: Vec<(String, String)> = policy.sources().into_iter().map(|(n, s)| (n, s.reference.to_string())).collect();
    assert_eq!(
        sources,
        [
            ("memcached".to_owned(), "oci://registry.example.com/plugins/memcached:0.2.0".to_owned()),
            ("public".to_owned(), "oci://registry.example.com/plugins/public:1".to_owned()),
            ("web".to_owned(), format!("oci://registry.example.com/plugins/web@{digest}")),
        ]
    );
    assert_eq!(policy.for_plugin("memcached").limits.memory_bytes, 128 << 20, "policy.plugins and the source merge");
    assert!(policy.verification().require_signature, "signatures required by default");
    assert_eq!(policy.verification().keys, [key]);

    // get on exactly the Secrets the policy names, by name, as `wasmop rbac` grants.
    let mut granted: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for role in rendered.iter().filter(|o| o["kind"] == "Role" && o["metadata"]["name"] == "wasmop-pull-secrets") {
        let ns = role["metadata"]["namespace"].as_str().context("namespace")?.to_owned();
        assert_eq!(role["rules"].as_array().map(Vec::len), Some(1), "{role}");
        assert_eq!(role["rules"][0]["verbs"], json!(["get"]), "{role}");
        assert_eq!(role["rules"][0]["resources"], json!(["secrets"]), "{role}");
        let names = role["rules"][0]["resourceNames"].as_array().context("resourceNames")?;
        granted.insert(ns, names.iter().filter_map(Value::as_str).map(str::to_owned).collect());
    }
    assert_eq!(granted, wasmop::rbac::pull_secrets(&policy));
    let bindings = rendered.iter().filter(|o| o["kind"] == "RoleBinding" && o["metadata"]["name"] == "wasmop-pull-secrets");
    assert_eq!(bindings.count(), 2);

    // A writable plugins directory the host pulls into, its pull cache on the cache volume.
    let pod = &find(&rendered, "Deployment")?["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"].as_array().context("args")?.iter().filter_map(Value::as_str).collect();
    assert!(args.windows(2).any(|w| w == ["--plugin-cache", "/cache/pulled"]), "{args:?}");
    let mounts = container["volumeMounts"].as_array().context("mounts")?;
    let plugins = mounts.iter().find(|m| m["name"] == "plugins").context("plugins mount")?;
    assert!(plugins.get("readOnly").is_none_or(|r| r == false), "{plugins}");
    let volumes = pod["volumes"].as_array().context("volumes")?;
    assert!(volumes.iter().any(|v| v["name"] == "plugins" && v["emptyDir"].is_object()), "{volumes:?}");

    // Signatures required and no key: the chart refuses to render.
    let no_keys = cp.dir().join("no-keys.yaml");
    std::fs::write(&no_keys, "plugins:\n  source: registry\n  registry:\n    memcached: {source: oci://r.example.com/m:1}\n")?;
    let no_keys_arg = no_keys.display().to_string();
    let err = helm(&helm_bin, &cp, &["template", "wasmop", chart.as_str(), "-f", no_keys_arg.as_str()]).unwrap_err();
    assert!(err.to_string().contains("verification.keys is empty"), "{err}");
    // The default chart names no pull Secret and no verification.
    let default = docs(&helm(&helm_bin, &cp, &["template", "wasmop", chart.as_str(), "--namespace", NAMESPACE])?)?;
    assert!(!default.iter().any(|o| o["metadata"]["name"] == "wasmop-pull-secrets"));
    let config =
        default.iter().find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "wasmop-policy").context("policy")?;
    assert!(!config["data"]["policy.yaml"].as_str().unwrap_or_default().contains("verification"));
    Ok(())
}
