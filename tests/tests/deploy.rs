//! The deployment manifests of `deploy/` against a real control plane:
//!
//! - the kustomize base is current (CRD copies, generated RBAC, Helm defaults agree with it);
//! - `kubectl apply -k deploy/kustomize/base --server-side --dry-run=server` accepts every
//!   object, with strict field validation (a negative control proves the validation bites);
//! - a host authenticated as the ServiceAccount those manifests create, holding only the RBAC
//!   they grant, reconciles a `Memcached` (the plugin delivered through the documented
//!   `kubectl create configmap wasmop-plugins ...` command);
//! - the Helm chart, rendered by `helm template`, passes the same dry run — only where `helm`
//!   is installed.
//!
//! A part whose tool (`kubectl`, `helm`) is not on `PATH` prints `SKIPPED: ...` and returns.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{Host, api_for, apply, apply_file, eventually};
use wasmop_e2e::plugins::{plugin, workspace};

const WAIT: Duration = Duration::from_secs(60);
const NAMESPACE: &str = "wasmop-system";

fn base() -> PathBuf {
    workspace().join("deploy/kustomize/base")
}

fn chart() -> PathBuf {
    workspace().join("deploy/helm/wasmop")
}

/// `name` on `PATH`, if any.
fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|dir| Path::new(dir).join(name)).find(|p| p.is_file())
}

/// Say that a part is skipped, on the real stderr: libtest captures `println!`/`eprintln!` of
/// passing tests, and a skip must not pass silently.
fn skipped(message: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED: {message}");
}

fn kubectl_or_skip(what: &str) -> Option<PathBuf> {
    let found = which("kubectl");
    if found.is_none() {
        skipped(&format!("{what}: kubectl is not on PATH"));
    }
    found
}

/// The strictest `--validate` this kubectl knows: `strict` (1.25+: unknown and duplicate
/// fields are errors, checked by the server), else `true` (Debian's 1.20 `kubernetes-client`,
/// which `scripts/setup.sh` installs: client-side schema validation; the 1.20 server's apply
/// still rejects fields outside the schema).
fn validate_flag(bin: &Path) -> &'static str {
    let minor = Command::new(bin)
        .args(["version", "--client", "-o", "json"])
        .output()
        .ok()
        .and_then(|out| serde_json::from_slice::<Value>(&out.stdout).ok())
        .and_then(|v| v.pointer("/clientVersion/minor")?.as_str()?.trim_end_matches('+').parse::<u32>().ok());
    if minor.is_some_and(|m| m >= 25) { "--validate=strict" } else { "--validate=true" }
}

/// Run `kubectl args...` against `cp` as admin, with `stdin` piped in; stdout on success.
fn kubectl(bin: &Path, cp: &ControlPlane, args: &[&str], stdin: Option<&str>) -> Result<String> {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env("KUBECONFIG", cp.kubeconfig_path())
        .current_dir(workspace())
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().context("running kubectl")?;
    if let Some(input) = stdin {
        child.stdin.take().expect("piped").write_all(input.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    // kubectl 1.32 against a 1.20 apiserver warns about the version skew: not an error.
    let stderr: Vec<&str> = stderr.lines().filter(|l| !l.contains("version difference")).collect();
    if !out.status.success() {
        bail!("kubectl {} failed ({}):\n{}", args.join(" "), out.status, stderr.join("\n"));
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// Every document of a multi-document YAML string (empty documents dropped).
fn docs(yaml: &str) -> Result<Vec<Value>> {
    let mut all = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let v: Value = serde::Deserialize::deserialize(doc)?;
        if !v.is_null() {
            all.push(v);
        }
    }
    Ok(all)
}

/// The objects of the base, read from the files its kustomization lists (it has no
/// transformers, so they are what `kubectl kustomize` emits).
fn base_objects() -> Result<Vec<Value>> {
    let kustomization: Value = serde_yaml::from_str(&std::fs::read_to_string(base().join("kustomization.yaml"))?)?;
    let mut all = Vec::new();
    for file in kustomization["resources"].as_array().context("resources")? {
        let path = base().join(file.as_str().context("resource path")?);
        all.extend(docs(&std::fs::read_to_string(&path).with_context(|| path.display().to_string())?)?);
    }
    Ok(all)
}

/// `kind.group/name` as `kubectl ... -o name` prints it.
fn kubectl_name(obj: &Value) -> String {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let kind = obj["kind"].as_str().unwrap_or_default().to_lowercase();
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    if group.is_empty() { format!("{kind}/{name}") } else { format!("{kind}.{group}/{name}") }
}

fn find<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects.iter().find(|o| o["kind"] == kind).unwrap_or_else(|| panic!("no {kind} in the base"))
}

/// The Deployment's host container.
fn container(deployment: &Value) -> &Value {
    &deployment["spec"]["template"]["spec"]["containers"][0]
}

/// Server-side dry-run `yaml` with strict validation; the names kubectl reports.
fn server_dry_run(bin: &Path, cp: &ControlPlane, yaml: &str) -> Result<BTreeSet<String>> {
    let out = kubectl(
        bin,
        cp,
        &[
            "apply",
            "--server-side",
            "--dry-run=server",
            validate_flag(bin),
            "--field-manager=wasmop-e2e",
            "-o",
            "name",
            "-f",
            "-",
        ],
        Some(yaml),
    )?;
    Ok(out.lines().map(str::to_owned).collect())
}

fn to_yaml_stream(objects: &[Value]) -> Result<String> {
    let mut s = String::new();
    for o in objects {
        s.push_str("---\n");
        s.push_str(&serde_yaml::to_string(o)?);
    }
    Ok(s)
}

/// No cluster needed: the base's copies and generated parts match their sources.
#[tokio::test]
async fn base_is_current_with_its_sources() -> Result<()> {
    // CRD copies (kustomize refuses files outside its root; Helm reads only the chart's crds/).
    for crd in ["memcached.yaml", "wasmplugin.yaml"] {
        let original = std::fs::read_to_string(workspace().join("crds").join(crd))?;
        for copy in [base().join("crds").join(crd), chart().join("crds").join(crd)] {
            ensure!(
                std::fs::read_to_string(&copy)? == original,
                "{} differs from crds/{crd}: copy it again (cp crds/{crd} {})",
                copy.display(),
                copy.display()
            );
        }
    }

    // rbac.yaml is exactly what `wasmop rbac` prints for the memcached plugin.
    let memcached = plugin("memcached", "wasm32-wasip2");
    let runtime = wasmop::runtime::Runtime::builder().artifact_dir(None).build()?;
    let manifest = runtime.load_file(&memcached).await?.manifest().as_ref().clone();
    let mut kinds = wasmop::contract::KnownKinds::builtin();
    kinds.add_crds(&workspace().join("crds/memcached.yaml"))?;
    let generated = wasmop::cli::rbac::render(&[manifest], runtime.policy(), &kinds, "wasmop", NAMESPACE, "wasmop")?;
    let checked_in = std::fs::read_to_string(base().join("rbac.yaml"))?;
    let body = checked_in
        .find("\n# Generated by `wasmop rbac`")
        .map(|i| &checked_in[i + 1..])
        .context("rbac.yaml has no line starting with \"# Generated by `wasmop rbac`\"")?;
    ensure!(
        body == generated,
        "deploy/kustomize/base/rbac.yaml is stale; regenerate it (see its header). `wasmop rbac` now prints:\n{generated}"
    );

    // The chart's default rules are the same as the base's (values.yaml is plain YAML).
    let objects = base_objects()?;
    let values: Value = serde_yaml::from_str(&std::fs::read_to_string(chart().join("values.yaml"))?)?;
    assert_eq!(
        values["rbac"]["rules"],
        find(&objects, "ClusterRole")["rules"],
        "helm values rbac.rules differ from the base's ClusterRole"
    );

    // The Deployment wires what the host needs.
    let deployment = find(&objects, "Deployment");
    let c = container(deployment);
    assert_eq!(c["args"], json!(["run", "--plugins", "/plugins", "--metrics-addr", "0.0.0.0:8080"]));
    assert_eq!(c["ports"][0]["containerPort"], 8080);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    let env: Vec<&str> = c["env"].as_array().unwrap().iter().filter_map(|e| e["name"].as_str()).collect();
    assert!(env.contains(&"WASMOP_CACHE_DIR") && env.contains(&"POD_NAME"), "env: {env:?}");
    for mount in c["volumeMounts"].as_array().unwrap() {
        assert!(mount.get("subPath").is_none(), "a subPath mount never sees ConfigMap updates: {mount}");
    }
    let volumes = deployment["spec"]["template"]["spec"]["volumes"].as_array().unwrap();
    assert!(volumes.iter().any(|v| v["configMap"]["name"] == "wasmop-plugins"), "plugins from ConfigMap wasmop-plugins");
    assert!(volumes.iter().any(|v| v.get("emptyDir").is_some()), "a writable cache volume");
    assert_eq!(deployment["spec"]["template"]["spec"]["serviceAccountName"], "wasmop");

    // The policy ConfigMap is mounted where WASMOP_POLICY points, and parses as a policy
    // whose defaults are the chart's.
    let policy_env = c["env"].as_array().unwrap().iter().find(|e| e["name"] == "WASMOP_POLICY").context("WASMOP_POLICY")?;
    assert_eq!(policy_env["value"], "/etc/wasmop/policy.yaml");
    assert!(volumes.iter().any(|v| v["configMap"]["name"] == "wasmop-policy"), "policy from ConfigMap wasmop-policy");
    let text = find(&objects, "ConfigMap")["data"]["policy.yaml"].as_str().context("policy.yaml")?;
    let policy = wasmop::policy::HostPolicy::from_yaml(text)?;
    assert_eq!(policy, wasmop::policy::HostPolicy::default(), "the base's policy spells out the built-in defaults");
    let chart_policy = wasmop::policy::HostPolicy::from_yaml(&serde_yaml::to_string(&values["policy"])?)?;
    assert_eq!(chart_policy, policy, "helm values.policy differs from the base's policy");
    Ok(())
}

/// (a) `kubectl apply -k deploy/kustomize/base --server-side --dry-run=server` validates.
#[tokio::test]
async fn kustomize_base_passes_server_dry_run() -> Result<()> {
    let Some(bin) = kubectl_or_skip("kustomize base server dry run") else {
        return Ok(());
    };
    let cp = ControlPlane::start().await?;
    let base_arg = base().display().to_string();

    let rendered = docs(&kubectl(&bin, &cp, &["kustomize", &base_arg], None)?)?;
    let expected: BTreeSet<String> = rendered.iter().map(kubectl_name).collect();
    let from_files: BTreeSet<String> = base_objects()?.iter().map(kubectl_name).collect();
    assert_eq!(expected, from_files, "kustomize output differs from the base's files");
    assert_eq!(expected.len(), 9, "objects: {expected:?}");

    // A dry run of objects in a namespace that does not exist yet fails ("namespaces
    // \"wasmop-system\" not found"): create it for real, then dry-run everything.
    kubectl(&bin, &cp, &["apply", "--server-side", "-f", &base().join("namespace.yaml").display().to_string()], None)?;
    let out = kubectl(
        &bin,
        &cp,
        &[
            "apply",
            "-k",
            &base_arg,
            "--server-side",
            "--dry-run=server",
            validate_flag(&bin),
            "--field-manager=wasmop-e2e",
            "-o",
            "name",
        ],
        None,
    )?;
    let applied: BTreeSet<String> = out.lines().map(str::to_owned).collect();
    assert_eq!(applied, expected, "every object of the base passes the server dry run");

    // The negative control: the same dry run refuses an unknown field, so "validates" means it.
    let mut bogus = find(&rendered, "Deployment").clone();
    bogus["spec"]["template"]["spec"]["containers"][0]["bogusField"] = json!(1);
    let err = server_dry_run(&bin, &cp, &to_yaml_stream(&[bogus])?).expect_err("an unknown field must be refused");
    assert!(err.to_string().contains("bogusField"), "{err:#}");
    Ok(())
}

/// (b) A host authenticated as the base's ServiceAccount, with only the base's RBAC, reconciles.
#[tokio::test]
async fn host_reconciles_as_the_deployed_service_account() -> Result<()> {
    let cp = ControlPlane::start().await?;
    let admin = cp.client().await?;
    let memcached = plugin("memcached", "wasm32-wasip2");

    let bin = which("kubectl");
    match &bin {
        Some(bin) => {
            kubectl(
                bin,
                &cp,
                &["apply", "-k", &base().display().to_string(), "--server-side", "--field-manager=wasmop-e2e"],
                None,
            )?;
            // The documented way to deliver plugins, verbatim (from the plugin's directory).
            // Server-side: a client-side apply stores the whole object in the
            // last-applied-configuration annotation, and annotations are capped at 256 KiB.
            let dir = memcached.parent().unwrap().display().to_string();
            let script = format!(
                "cd {dir} && kubectl create configmap wasmop-plugins -n {NAMESPACE} --from-file=memcached.wasm --dry-run=client -o yaml | kubectl apply --server-side -f -"
            );
            let out = Command::new("sh").args(["-c", &script]).env("KUBECONFIG", cp.kubeconfig_path()).output()?;
            ensure!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
            let cms = api_for(&admin, "v1", "ConfigMap", Some(NAMESPACE)).await?;
            let cm = cms.get("wasmop-plugins").await?;
            let data =
                cm.data.pointer("/binaryData/memcached.wasm").and_then(Value::as_str).context("binaryData memcached.wasm")?;
            // base64 of the file: 4 characters per 3 bytes.
            let size = std::fs::metadata(&memcached)?.len();
            assert_eq!(data.len() as u64, size.div_ceil(3) * 4, "the ConfigMap holds the whole plugin");
            assert!(size < 1024 * 1024, "memcached.wasm ({size} bytes) fits a ConfigMap");
        }
        None => {
            skipped("kubectl apply -k / kubectl create configmap: kubectl is not on PATH; applying the base's files directly");
            for object in base_objects()? {
                apply(&admin, &object).await.with_context(|| kubectl_name(&object))?;
            }
        }
    }
    // The Deployment exists (its pod stays Pending: no kubelet here).
    let deployments = api_for(&admin, "apps/v1", "Deployment", Some(NAMESPACE)).await?;
    ensure!(deployments.get_opt("wasmop").await?.is_some(), "Deployment wasmop applied");

    // The pod's identity: a token of ServiceAccount wasmop-system/wasmop.
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), NAMESPACE);
    let request = TokenRequest {
        spec: TokenRequestSpec { audiences: vec![], expiration_seconds: Some(3600), ..Default::default() },
        ..Default::default()
    };
    let token = sas.create_token_request("wasmop", &PostParams::default(), &request).await?;
    let client = cp.client_with_token(&token.status.context("token issued")?.token).await?;
    let secrets = api_for(&client, "v1", "Secret", Some("default")).await?;
    assert!(secrets.list(&Default::default()).await.is_err(), "the host identity must not read Secrets");

    let _host = Host::start(client, &[&memcached], Host::test_config()).await?;
    apply_file(&admin, &workspace().join("crds/samples/memcached.yaml")).await?;
    let crs = api_for(&admin, "cache.example.com/v1alpha1", "Memcached", Some("default")).await?;
    let children = api_for(&admin, "apps/v1", "Deployment", Some("default")).await?;
    eventually("the sample's Deployment, applied by the host as the ServiceAccount", WAIT, || async {
        Ok(children
            .get_opt("memcached-sample")
            .await?
            .filter(|d| d.data.pointer("/spec/replicas") == Some(&json!(3)))
            .map(|_| ()))
    })
    .await?;
    eventually("the sample's status, written by the host as the ServiceAccount", WAIT, || async {
        let cr = crs.get("memcached-sample").await?;
        let reconciled = cr
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Reconciled" && c["status"] == "True"));
        Ok(reconciled.then_some(()))
    })
    .await?;
    Ok(())
}

/// (c) `helm template` of the chart passes the same server dry run — where helm is installed.
#[tokio::test]
async fn helm_chart_renders_and_passes_server_dry_run() -> Result<()> {
    let Some(helm) = which("helm") else {
        skipped("helm chart render + server dry run: helm is not on PATH (deploy/helm/wasmop is not rendered by any test here)");
        return Ok(());
    };
    let Some(bin) = kubectl_or_skip("helm chart server dry run") else {
        return Ok(());
    };
    let cp = ControlPlane::start().await?;
    kubectl(&bin, &cp, &["create", "namespace", NAMESPACE], None)?;
    let variants: [&[&str]; 3] = [
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
    ];
    let chart = chart().display().to_string();
    for extra in variants {
        let mut args = vec!["template", "wasmop", chart.as_str(), "--namespace", NAMESPACE, "--include-crds"];
        args.extend_from_slice(extra);
        let out = Command::new(&helm).args(&args).output()?;
        ensure!(out.status.success(), "helm {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        let rendered = docs(&String::from_utf8(out.stdout)?)?;
        let expected: BTreeSet<String> = rendered.iter().map(kubectl_name).collect();
        let applied = server_dry_run(&bin, &cp, &to_yaml_stream(&rendered)?)?;
        assert_eq!(applied, expected, "helm template {extra:?}: every object passes the server dry run");
        let c = container(find(&rendered, "Deployment"));
        let args: Vec<&str> = c["args"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        assert_eq!(&args[..5], ["run", "--plugins", "/plugins", "--metrics-addr", "0.0.0.0:8080"]);
    }
    Ok(())
}
