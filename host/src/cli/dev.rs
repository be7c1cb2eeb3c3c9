//! `wasmop dev`: a local control plane, the example plugins, the host, the samples — one
//! command, run from the repository.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::Value;

use super::RuntimeArgs;
use super::apply::{api_for, apply, apply_file};
use super::object_files::read_objects;
use super::run::{client, shutdown_signal};
use crate::admission::{Admission, AdmissionConfig, CertSource};
use crate::controller::{ControllerConfig, Manager};
use crate::policy::HostPolicy;
use crate::reload::{ReloadConfig, Reloader};

/// Arguments of `wasmop dev`.
#[derive(Debug, clap::Args)]
pub struct DevArgs {
    /// Example plugins to build and run (crates under `plugins/`).
    #[arg(long, default_values_t = ["memcached".to_owned(), "sidecarset".to_owned(), "database".to_owned()])]
    pub plugin: Vec<String>,
    /// Keep the control plane's state directory after exit.
    #[arg(long)]
    pub keep: bool,
}

/// The demo's host policy: the Database plugin writes its credentials Secret; the SidecarSet
/// plugin's webhook mutates Pods (it injects the sidecar), which it does not declare as children.
const DEMO_POLICY: &str = "plugins:\n  database: {grants: {secrets: write}}\n  sidecarset: {grants: {webhookResources: [{resource: pods, mode: mutate}]}}\n";

/// The demo's volume for the Database sample's claim.
const DEMO_VOLUME: &str = "wasmop-dev-orders";

fn demo_volume() -> Value {
    serde_json::json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": DEMO_VOLUME},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": "/tmp/wasmop-dev-orders"}}})
}

fn stage(n: u32, text: &str) {
    eprintln!("\n==> [{n}/6] {text}");
}

/// The repository root: the nearest ancestor of the working directory with
/// `scripts/control-plane.sh`.
fn repo_root() -> anyhow::Result<PathBuf> {
    let cwd = std::env::current_dir()?;
    cwd.ancestors()
        .find(|p| p.join("scripts/control-plane.sh").is_file())
        .map(Path::to_path_buf)
        .context("wasmop dev runs inside the wasmop repository (no scripts/control-plane.sh above the working directory)")
}

fn script(root: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("bash")
        .arg(root.join("scripts/control-plane.sh"))
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .context("running scripts/control-plane.sh")?;
    if !out.status.success() {
        bail!("scripts/control-plane.sh {} failed", args.join(" "));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Stops the control plane when dropped (also on errors and Ctrl-C).
struct ControlPlaneGuard {
    root: PathBuf,
    dir: PathBuf,
    keep: bool,
}

impl Drop for ControlPlaneGuard {
    fn drop(&mut self) {
        let _ = script(&self.root, &["down", &self.dir.to_string_lossy()]);
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

pub(super) async fn run(args: DevArgs, runtime: &RuntimeArgs) -> anyhow::Result<()> {
    let root = repo_root()?;
    stage(1, "control plane binaries (built once from Go modules, then cached)");
    script(&root, &["install"])?;
    stage(2, "starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and simulated Nodes (kwok) on loopback");
    let dir = std::env::temp_dir().join(format!("wasmop-dev-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let guard = ControlPlaneGuard { root: root.clone(), dir: dir.clone(), keep: args.keep };
    script(&root, &["up", &dir.to_string_lossy()])?;
    let kubeconfig = dir.join("kubeconfig");
    eprintln!("    export KUBECONFIG={}   # to look around with kubectl", kubeconfig.display());
    let client = client(Some(&kubeconfig)).await?;

    stage(3, "installing CRDs from crds/");
    for entry in std::fs::read_dir(root.join("crds"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            apply_file(&client, &path, "wasmop-dev").await?;
            eprintln!("    applied {}", path.strip_prefix(&root).unwrap_or(&path).display());
        }
    }

    if args.plugin.iter().any(|p| p == "database") {
        // The demo cluster has no storage provisioner: a volume for the Database sample's claim,
        // as an administrator provides static storage.
        apply(&client, &demo_volume(), "wasmop-dev").await?;
        eprintln!("    applied PersistentVolume {DEMO_VOLUME} (1Gi, for the Database sample's claim)");
    }

    stage(4, "building the example plugins for wasm32-wasip2");
    let plugins_dir = dir.join("plugins");
    std::fs::create_dir_all(&plugins_dir)?;
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo.current_dir(&root).args(["build", "--release", "--target", "wasm32-wasip2"]);
    for p in &args.plugin {
        cargo.args(["-p", p]);
    }
    if !cargo.status().context("running cargo")?.success() {
        bail!("building the plugins failed");
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    for p in &args.plugin {
        let file = format!("{}.wasm", p.replace('-', "_"));
        std::fs::copy(target.join("wasm32-wasip2/release").join(&file), plugins_dir.join(&file))?;
        eprintln!("    {}", plugins_dir.join(&file).display());
    }

    stage(5, "starting the wasmop host on the plugins directory");
    let policy = match &runtime.policy {
        Some(_) => runtime.host_policy()?,
        None => {
            eprintln!(
                "    host policy (the demo's, `--policy FILE` for another):\n      {}",
                DEMO_POLICY.trim_end().replace('\n', "\n      ")
            );
            HostPolicy::from_yaml(DEMO_POLICY)?.with_default_limits(runtime.deadline, runtime.memory)
        }
    };
    let engine = runtime.builder()?.allowances(policy.allowances()).build()?;
    let manager = Arc::new(Manager::new(client.clone(), engine, ControllerConfig { policy, ..ControllerConfig::default() }));
    let reloader = Reloader::new(Arc::clone(&manager), &plugins_dir, ReloadConfig::default());
    // Admission on loopback (the API server runs here too), with a CA kept in a Secret.
    let certs = CertSource::Secret {
        namespace: "default".into(),
        name: "wasmop-dev-admission".into(),
        names: vec!["localhost".into(), "127.0.0.1".into()],
    };
    let config = AdmissionConfig { configuration_name: "wasmop-dev".into(), ..AdmissionConfig::new(certs) };
    let mut admission = Admission::start(config, Arc::clone(&manager)).await.context("serving admission webhooks")?;
    reloader.observe(admission.observer());
    eprintln!("    admission webhooks served at https://{}", admission.addr());
    reloader.sync().await;
    let _watch = tokio::spawn(Arc::clone(&reloader).run());
    let _give_back = tokio::spawn(crate::allocator::give_back());
    eprintln!(
        "    plugins running: {:?} (drop or replace .wasm files in {} to hot-reload)",
        manager.plugins(),
        plugins_dir.display()
    );

    stage(6, "applying the samples from crds/samples/ — watch the host reconcile them (Ctrl-C stops everything)");
    let mut samples = Vec::new();
    for entry in std::fs::read_dir(root.join("crds/samples"))? {
        let path = entry?.path();
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        if args.plugin.contains(&name) {
            let applied = samples.len();
            for object in read_objects(&path)? {
                // A Pod is admitted against what the host has seen: wait until the custom
                // resources before it in the file have been reconciled (have a status).
                if object["kind"] == "Pod" {
                    wait_for_status(&client, &samples[applied..]).await;
                }
                samples.push(apply(&client, &object, "wasmop-dev").await?);
            }
            eprintln!("    applied {}", path.strip_prefix(&root).unwrap_or(&path).display());
        }
    }
    let report = async {
        let mut last = String::new();
        loop {
            let mut lines = Vec::new();
            for s in &samples {
                let (Some(types), Some(name)) = (&s.types, &s.metadata.name) else { continue };
                let api = api_for(&client, &types.api_version, &types.kind, s.metadata.namespace.as_deref()).await;
                if let Ok(Some(obj)) = match api {
                    Ok(a) => a.get_opt(name).await.map_err(anyhow::Error::from),
                    Err(e) => Err(e),
                } {
                    let summary = if types.kind == "Pod" { containers(&obj.data) } else { summarize(obj.data.get("status")) };
                    lines.push(format!("    {} {name}: {summary}", types.kind));
                }
            }
            let text = lines.join("\n");
            if text != last {
                eprintln!("{text}");
                last = text;
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    };
    tokio::select! {
        () = shutdown_signal() => {}
        () = report => {}
    }
    eprintln!("\n==> stopping the host and the control plane");
    // Nothing answers the webhooks after this: remove their configurations first.
    if let Err(e) = admission.unregister().await {
        eprintln!("    cannot remove the webhook configurations: {e}");
    }
    manager.shutdown().await;
    drop(guard);
    Ok(())
}

/// Wait (at most 20 s) until each of `objects` that is a custom resource has a status.
async fn wait_for_status(client: &kube::Client, objects: &[kube::api::DynamicObject]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    for object in objects {
        let (Some(types), Some(name)) = (&object.types, &object.metadata.name) else { continue };
        if !types.api_version.contains('.') {
            continue;
        }
        let Ok(api) = api_for(client, &types.api_version, &types.kind, object.metadata.namespace.as_deref()).await else {
            continue;
        };
        while tokio::time::Instant::now() < deadline {
            if api.get_opt(name).await.ok().flatten().is_some_and(|o| o.data.get("status").is_some()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// A Pod's containers, e.g. `containers: web, log-shipper`.
fn containers(pod: &Value) -> String {
    let names: Vec<&str> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    format!("containers: {}", names.join(", "))
}

/// One line for a status: its conditions as `Type=Status (message)`, then its other fields.
fn summarize(status: Option<&Value>) -> String {
    let Some(Value::Object(status)) = status else { return "no status yet".into() };
    let mut parts: Vec<String> = status
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{}={} ({})",
                c["type"].as_str().unwrap_or("?"),
                c["status"].as_str().unwrap_or("?"),
                c["message"].as_str().unwrap_or("")
            )
        })
        .collect();
    parts.extend(status.iter().filter(|(k, _)| *k != "conditions").map(|(k, v)| format!("{k}: {v}")));
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_policy_is_a_valid_host_policy() {
        HostPolicy::from_yaml(DEMO_POLICY).expect("the demo's policy parses");
    }
}
