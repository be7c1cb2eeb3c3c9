//! The deployment manifests of `deploy/` against a real control plane:
//!
//! - the kustomize base is current (CRD copies, generated RBAC, Helm defaults agree with it);
//! - `kubectl apply -k deploy/kustomize/base --server-side --dry-run=server` accepts every
//!   object, with strict field validation (a negative control proves the validation bites);
//! - a host authenticated as the ServiceAccount those manifests create, holding only the RBAC
//!   they grant, reconciles a `Memcached` (the plugin delivered through the documented
//!   `kubectl create configmap wasmop-plugins ...` command);
//!
//! - the namespaced overlay (`deploy/kustomize/namespaced`) is current with `wasmop rbac
//!   --namespace`, names the same namespaces in its Deployment, drops the base's ClusterRole,
//!   and passes the same server dry run.
//!
//! - the registry overlay (`deploy/kustomize/registry`) passes the dry run and grants what
//!   `wasmop rbac` grants for its policy.
//!
//! The kustomize parts run with the kubectl of the server's version (and any other within
//! kubectl's ±1 version skew, see `wasmop_e2e::tools`); the Helm chart is tested in `helm.rs`.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{Host, api_for, apply_file, deployment_available, eventually};
use wasmop_e2e::plugins::{plugin, workspace};
use wasmop_e2e::tools::{docs, kubectl, kubectl_name, kubectls, kustomize_base_objects, to_yaml_stream};

const WAIT: Duration = Duration::from_secs(60);
const NAMESPACE: &str = "wasmop-system";

fn base() -> PathBuf {
    workspace().join("deploy/kustomize/base")
}

fn overlay() -> PathBuf {
    workspace().join("deploy/kustomize/namespaced")
}

fn chart() -> PathBuf {
    workspace().join("deploy/helm/wasmop")
}

fn find<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects.iter().find(|o| o["kind"] == kind).unwrap_or_else(|| panic!("no {kind} in the base"))
}

/// The Deployment's host container.
fn container(deployment: &Value) -> &Value {
    &deployment["spec"]["template"]["spec"]["containers"][0]
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
    // The base serves metrics securely: `wasmop rbac --metrics-secure`.
    let generated =
        wasmop::rbac::render(&[manifest], &wasmop::policy::HostPolicy::default(), &kinds, "wasmop", NAMESPACE, "wasmop")?
            + &wasmop::rbac::render_metrics("wasmop", NAMESPACE, "wasmop")?;
    ensure!(
        generated_part(&base().join("rbac.yaml"))? == generated,
        "deploy/kustomize/base/rbac.yaml is stale; regenerate it (see its header). `wasmop rbac` now prints:\n{generated}"
    );

    // The chart's default rules are the same as the base's (values.yaml is plain YAML).
    let objects = kustomize_base_objects()?;
    let values: Value = wasmop::yaml::from_str(&std::fs::read_to_string(chart().join("values.yaml"))?)?;
    assert_eq!(
        values["rbac"]["rules"],
        find(&objects, "ClusterRole")["rules"],
        "helm values rbac.rules differ from the base's ClusterRole"
    );

    // The Deployment wires what the host needs.
    let deployment = find(&objects, "Deployment");
    let c = container(deployment);
    assert_eq!(
        c["args"],
        json!([
            "run",
            "--plugins",
            "/plugins",
            "--metrics-addr",
            "0.0.0.0:8443",
            "--metrics-secure",
            "--probe-addr",
            "0.0.0.0:8081",
            "--admission-service",
            "wasmop-webhook"
        ])
    );
    assert_eq!(c["ports"][0], json!({"name": "https-metrics", "containerPort": 8443, "protocol": "TCP"}));
    assert_eq!(c["ports"][1], json!({"name": "probes", "containerPort": 8081, "protocol": "TCP"}));
    assert_eq!(c["ports"][2], json!({"name": "webhook", "containerPort": 9443, "protocol": "TCP"}));
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(c[probe]["httpGet"]["port"], "probes", "{probe} on the plain probe port");
    }
    let metrics_service = objects.iter().find(|o| o["kind"] == "Service" && o["metadata"]["name"] == "wasmop-metrics");
    assert_eq!(metrics_service.context("Service wasmop-metrics")?["spec"]["ports"][0]["targetPort"], "https-metrics");
    let webhook_service = objects.iter().find(|o| o["kind"] == "Service" && o["metadata"]["name"] == "wasmop-webhook");
    assert_eq!(webhook_service.context("Service wasmop-webhook")?["spec"]["ports"][0]["targetPort"], "webhook");
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
    let chart_policy = wasmop::policy::HostPolicy::from_yaml(&wasmop::yaml::to_string(&values["policy"])?)?;
    assert_eq!(chart_policy, policy, "helm values.policy differs from the base's policy");
    Ok(())
}

/// The part of a checked-in `rbac.yaml` from its "# Generated by" line on.
fn generated_part(path: &std::path::Path) -> Result<String> {
    let checked_in = std::fs::read_to_string(path)?;
    let body = checked_in
        .find("\n# Generated by `wasmop rbac")
        .map(|i| checked_in[i + 1..].to_owned())
        .with_context(|| format!("{} has no line starting with \"# Generated by `wasmop rbac\"", path.display()))?;
    Ok(body)
}

/// The memcached plugin's manifest and the kinds it needs.
async fn memcached_manifest() -> Result<(wasmop::contract::Manifest, wasmop::contract::KnownKinds)> {
    let runtime = wasmop::runtime::Runtime::builder().artifact_dir(None).build()?;
    let manifest = runtime.load_file(&plugin("memcached", "wasm32-wasip2")).await?.manifest().as_ref().clone();
    let mut kinds = wasmop::contract::KnownKinds::builtin();
    kinds.add_crds(&workspace().join("crds/memcached.yaml"))?;
    Ok((manifest, kinds))
}

/// No cluster needed: the namespaced overlay's rbac.yaml is what `wasmop rbac --namespace`
/// prints for the namespaces its Deployment names, and the base's ClusterRole is dropped.
#[tokio::test]
async fn namespaced_overlay_is_current_with_wasmop_rbac_namespace() -> Result<()> {
    let patch: Value = wasmop::yaml::from_str(&std::fs::read_to_string(overlay().join("deployment.yaml"))?)?;
    let env = container(&patch)["env"].as_array().context("env")?;
    let value =
        env.iter().find(|e| e["name"] == "WASMOP_NAMESPACES").and_then(|e| e["value"].as_str()).context("WASMOP_NAMESPACES")?;
    let namespaces: BTreeSet<String> = value.split(',').map(str::to_owned).collect();
    assert_eq!(namespaces.len(), 2, "the example names two namespaces: {value}");

    let (manifest, kinds) = memcached_manifest().await?;
    let policy = wasmop::policy::HostPolicy::default();
    let generated = wasmop::rbac::render_namespaced(&[manifest], &policy, &kinds, "wasmop", &namespaces, NAMESPACE, "wasmop")?;
    ensure!(
        generated_part(&overlay().join("rbac.yaml"))? == generated,
        "deploy/kustomize/namespaced/rbac.yaml is stale or names other namespaces than WASMOP_NAMESPACES={value}; \
         regenerate it (see its header). `wasmop rbac --namespace` now prints:\n{generated}"
    );
    let kustomization = std::fs::read_to_string(overlay().join("kustomization.yaml"))?;
    for kind in ["ClusterRole", "ClusterRoleBinding"] {
        ensure!(kustomization.contains(&format!("$patch: delete\n      apiVersion: rbac.authorization.k8s.io/v1\n      kind: {kind}\n      metadata:\n        name: wasmop\n")),
            "the overlay deletes the base's {kind}");
    }
    Ok(())
}

/// `kubectl apply -k deploy/kustomize/namespaced --server-side --dry-run=server` validates:
/// Roles in the two namespaces, no ClusterRole but the reports', the namespaces in the
/// Deployment's environment.
#[tokio::test]
async fn namespaced_overlay_passes_server_dry_run() -> Result<()> {
    let kubectls = kubectls()?;
    let cp = ControlPlane::start().await?;
    let overlay_arg = overlay().display().to_string();
    for ns in [NAMESPACE, "team-a", "team-b"] {
        let _ = kubectls[0].run(&cp, &["create", "namespace", ns], None);
    }
    for kubectl in &kubectls {
        let rendered = docs(&kubectl.run(&cp, &["kustomize", &overlay_arg], None)?)?;
        let names: BTreeSet<String> = rendered.iter().map(kubectl_name).collect();
        let cluster_roles: Vec<&String> = names.iter().filter(|n| n.starts_with("clusterrole.")).collect();
        // The reports' from the overlay; the secure metrics' from the base, the same in both modes.
        let expected_cluster_roles = ["wasmop-metrics-auth", "wasmop-metrics-reader", "wasmop-reports"]
            .map(|name| format!("clusterrole.rbac.authorization.k8s.io/{name}"));
        assert_eq!(cluster_roles, expected_cluster_roles.iter().collect::<Vec<_>>(), "kubectl 1.{}", kubectl.minor);
        let roles: BTreeSet<(&str, &str)> = rendered
            .iter()
            .filter(|o| o["kind"] == "Role")
            .filter_map(|o| Some((o.pointer("/metadata/namespace")?.as_str()?, o.pointer("/metadata/name")?.as_str()?)))
            .collect();
        // The admission certificate's Role comes from the base, the same in both modes.
        let expected: BTreeSet<(&str, &str)> = [
            ("team-a", "wasmop"),
            ("team-b", "wasmop"),
            (NAMESPACE, "wasmop-leader-election"),
            (NAMESPACE, "wasmop-admission"),
            ("default", "wasmop-events"),
        ]
        .into();
        assert_eq!(roles, expected, "kubectl 1.{}", kubectl.minor);
        let env = container(find(&rendered, "Deployment"))["env"].as_array().context("env")?;
        ensure!(
            env.iter().any(|e| e["name"] == "WASMOP_NAMESPACES" && e["value"] == "team-a,team-b"),
            "kubectl 1.{}: the Deployment's env: {env:?}",
            kubectl.minor
        );
        let args = ["apply", "-k", &overlay_arg, "--server-side", "--dry-run=server", kubectl.validate_flag(), "-o", "name"];
        let applied: BTreeSet<String> = kubectl.run(&cp, &args, None)?.lines().map(str::to_owned).collect();
        assert_eq!(applied, names, "kubectl 1.{}: every object of the overlay passes the server dry run", kubectl.minor);
    }
    Ok(())
}

/// `kubectl apply -k deploy/kustomize/registry --server-side --dry-run=server` validates; its
/// policy names a source and requires signatures by a key read from the mounted Secret, its
/// Role grants `get` on exactly the pull Secrets `wasmop rbac` grants for that policy, and the
/// plugins directory is writable.
#[tokio::test]
async fn registry_overlay_passes_server_dry_run_and_grants_what_wasmop_rbac_grants() -> Result<()> {
    let kubectls = kubectls()?;
    let cp = ControlPlane::start().await?;
    let overlay_arg = workspace().join("deploy/kustomize/registry").display().to_string();
    let _ = kubectls[0].run(&cp, &["create", "namespace", NAMESPACE], None);
    let kubectl = &kubectls[0];
    let rendered = docs(&kubectl.run(&cp, &["kustomize", &overlay_arg], None)?)?;
    let names: BTreeSet<String> = rendered.iter().map(kubectl_name).collect();
    let args = ["apply", "-k", &overlay_arg, "--server-side", "--dry-run=server", kubectl.validate_flag(), "-o", "name"];
    let applied: BTreeSet<String> = kubectl.run(&cp, &args, None)?.lines().map(str::to_owned).collect();
    assert_eq!(applied, names, "every object of the overlay passes the server dry run");

    // The policy as the host reads it, the key file where the Secret is mounted.
    let config = rendered
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "wasmop-policy")
        .context("the policy ConfigMap")?;
    let text = config["data"]["policy.yaml"].as_str().context("policy.yaml")?;
    let deployment = find(&rendered, "Deployment");
    let mounts = container(deployment)["volumeMounts"].as_array().context("mounts")?;
    let keys_mount = mounts.iter().find(|m| m["name"] == "verification-keys").context("the keys' mount")?;
    let keys_dir = keys_mount["mountPath"].as_str().context("mountPath")?;
    ensure!(text.contains(&format!("file: {keys_dir}/release.pub")), "the policy reads the key where it is mounted: {text}");
    let local = tempfile::tempdir()?;
    let key = wasmop::registry::SigningKey::generate().0.public_key("release");
    std::fs::write(local.path().join("release.pub"), key.to_pem())?;
    let policy = wasmop::policy::HostPolicy::from_yaml(&text.replace(keys_dir, &local.path().display().to_string()))?;
    ensure!(policy.verification().require_signature && policy.verification().keys == [key]);
    ensure!(policy.sources().len() == 1, "{:?}", policy.sources());
    let volumes = deployment["spec"]["template"]["spec"]["volumes"].as_array().context("volumes")?;
    let secret = volumes.iter().find(|v| v["name"] == "verification-keys").context("keys volume")?;
    ensure!(secret["secret"]["secretName"] == "wasmop-verification-keys", "{secret}");
    let plugins = volumes.iter().find(|v| v["name"] == "plugins").context("plugins volume")?;
    ensure!(plugins["emptyDir"].is_object() && plugins.get("configMap").is_none(), "{plugins}");
    let plugins_mount = mounts.iter().find(|m| m["name"] == "plugins").context("plugins mount")?;
    ensure!(plugins_mount["readOnly"] == false, "{plugins_mount}");
    let args: Vec<&str> = container(deployment)["args"].as_array().context("args")?.iter().filter_map(Value::as_str).collect();
    ensure!(args.windows(2).any(|w| w == ["--plugin-cache", "/cache/pulled"]), "{args:?}");

    let mut granted: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for role in rendered.iter().filter(|o| o["kind"] == "Role" && o["metadata"]["name"] == "wasmop-pull-secrets") {
        ensure!(role["rules"].as_array().map(Vec::len) == Some(1) && role["rules"][0]["verbs"] == serde_json::json!(["get"]));
        let names = role["rules"][0]["resourceNames"].as_array().context("resourceNames")?;
        granted.insert(
            role["metadata"]["namespace"].as_str().context("namespace")?.to_owned(),
            names.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        );
    }
    assert_eq!(granted, wasmop::rbac::pull_secrets(&policy));
    Ok(())
}

/// (a) `kubectl apply -k deploy/kustomize/base --server-side --dry-run=server` validates, with
/// the kubectl of the server's version.
#[tokio::test]
async fn kustomize_base_passes_server_dry_run() -> Result<()> {
    let kubectls = kubectls()?;
    let cp = ControlPlane::start().await?;
    let base_arg = base().display().to_string();
    for kubectl in &kubectls {
        let rendered = docs(&kubectl.run(&cp, &["kustomize", &base_arg], None)?)?;
        let expected: BTreeSet<String> = rendered.iter().map(kubectl_name).collect();
        let from_files: BTreeSet<String> = kustomize_base_objects()?.iter().map(kubectl_name).collect();
        assert_eq!(expected, from_files, "kubectl 1.{}: kustomize output differs from the base's files", kubectl.minor);
        assert_eq!(expected.len(), 16, "objects: {expected:?}");

        // A dry run of objects in a namespace that does not exist yet fails ("namespaces
        // \"wasmop-system\" not found"): create it for real, then dry-run everything.
        kubectl.run(&cp, &["apply", "--server-side", "-f", &base().join("namespace.yaml").display().to_string()], None)?;
        let args = [
            "apply",
            "-k",
            &base_arg,
            "--server-side",
            "--dry-run=server",
            kubectl.validate_flag(),
            "--field-manager=wasmop-e2e",
            "-o",
            "name",
        ];
        let applied: BTreeSet<String> = kubectl.run(&cp, &args, None)?.lines().map(str::to_owned).collect();
        assert_eq!(applied, expected, "kubectl 1.{}: every object of the base passes the server dry run", kubectl.minor);

        // The negative control: the same dry run refuses an unknown field, so "validates" means it.
        let mut bogus = find(&rendered, "Deployment").clone();
        bogus["spec"]["template"]["spec"]["containers"][0]["bogusField"] = json!(1);
        let err = kubectl.server_dry_run(&cp, &to_yaml_stream(&[bogus])?).expect_err("an unknown field must be refused");
        assert!(err.to_string().contains("bogusField"), "kubectl 1.{}: {err:#}", kubectl.minor);
    }
    Ok(())
}

/// (b) A host authenticated as the base's ServiceAccount, with only the base's RBAC, reconciles.
#[tokio::test]
async fn host_reconciles_as_the_deployed_service_account() -> Result<()> {
    let cp = ControlPlane::start().await?;
    let admin = cp.client().await?;
    let memcached = plugin("memcached", "wasm32-wasip2");

    let kubectl = kubectl()?;
    kubectl.run(&cp, &["apply", "-k", &base().display().to_string(), "--server-side", "--field-manager=wasmop-e2e"], None)?;
    // The documented way to deliver plugins, verbatim (from the plugin's directory).
    // Server-side: a client-side apply stores the whole object in the
    // last-applied-configuration annotation, and annotations are capped at 256 KiB.
    let dir = memcached.parent().unwrap().display().to_string();
    let script = format!(
        "cd {dir} && kubectl create configmap wasmop-plugins -n {NAMESPACE} --from-file=memcached.wasm --dry-run=client -o yaml | kubectl apply --server-side -f -"
    );
    // `kubectl` in the script is the one of the server's version.
    let path = format!("{}:{}", kubectl.bin.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new("sh").args(["-c", &script]).env("KUBECONFIG", cp.kubeconfig_path()).env("PATH", path).output()?;
    ensure!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
    let cms = api_for(&admin, "v1", "ConfigMap", Some(NAMESPACE)).await?;
    let cm = cms.get("wasmop-plugins").await?;
    let data = cm.data.pointer("/binaryData/memcached.wasm").and_then(Value::as_str).context("binaryData memcached.wasm")?;
    // base64 of the file: 4 characters per 3 bytes.
    let size = std::fs::metadata(&memcached)?.len();
    assert_eq!(data.len() as u64, size.div_ceil(3) * 4, "the ConfigMap holds the whole plugin");
    assert!(size < 1024 * 1024, "memcached.wasm ({size} bytes) fits a ConfigMap");
    // The base's namespace enforces the Pod Security `restricted` profile, and the host's Pod
    // passes it: the Deployment becomes Available (kwok runs its Pod; no container runs here).
    let namespaces = api_for(&admin, "v1", "Namespace", None).await?;
    let labels = namespaces.get(NAMESPACE).await?.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("pod-security.kubernetes.io/enforce").map(String::as_str), Some("restricted"));
    deployment_available(&admin, NAMESPACE, "wasmop", WAIT).await?;

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

    let host = Host::start(client, &[&memcached], Host::test_config()).await?;
    // Admission as deployed: the ServiceAccount creates the certificate Secret in its namespace
    // (a second start reads it back), and may write its webhook configurations.
    let certs = wasmop::admission::CertSource::Secret {
        namespace: NAMESPACE.into(),
        name: "wasmop-admission-tls".into(),
        names: wasmop::admission::certs::service_names(NAMESPACE, "wasmop-webhook"),
    };
    let mut cas = Vec::new();
    for _ in 0..2 {
        let config = wasmop::admission::AdmissionConfig::new(certs.clone());
        cas.push(wasmop::admission::Admission::start(config, std::sync::Arc::clone(&host.manager)).await?.ca_pem());
    }
    assert_eq!(cas[0], cas[1], "the second start uses the Secret the first created");
    let tls = api_for(&admin, "v1", "Secret", Some(NAMESPACE)).await?.get("wasmop-admission-tls").await?;
    assert_eq!(tls.data["type"], "kubernetes.io/tls");
    let configurations =
        api_for(host.manager.client(), "admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", None).await?;
    let empty = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": {"name": "wasmop"}});
    configurations.patch("wasmop", &kube::api::PatchParams::apply("wasmop-admission"), &kube::api::Patch::Apply(&empty)).await?;
    configurations.delete("wasmop", &Default::default()).await?;
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
