//! Against a real control plane: `wasmop run --audit-log PATH` with the memcached and testbed
//! plugins writes one JSON line per write the host makes — the apply of memcached's Deployment
//! and its status, a testbed child applied then pruned, the Warning event and status of a
//! refused response — and one for the refusal itself, each naming the plugin, its version and
//! the digest of its file, the parent, the verb, the object, the field manager and the outcome.
//! The file never grows past `--audit-log-max-bytes`: it is rotated to `PATH.1`, one previous
//! file kept.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use sha2::Digest as _;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{api_for, apply, apply_file, eventually};
use wasmop_e2e::host::{HostCommand, HostProcess};
use wasmop_e2e::objects::{memcached, testbed};

const WAIT: Duration = Duration::from_secs(60);
/// The audit log's cap: a few dozen lines.
const CAP: u64 = 16 << 10;

fn sha256_hex(path: &Path) -> Result<String> {
    Ok(hex::encode(sha2::Sha256::digest(std::fs::read(path)?)))
}

/// `wasmop run` with memcached and testbed, auditing to `dir/audit.jsonl`, its log in `dir/host.log`.
fn spawn_host(cp: &ControlPlane, dir: &Path) -> Result<HostProcess> {
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins)?;
    std::fs::copy(wasmop_e2e::fixtures::memcached(), plugins.join("memcached.wasm"))?;
    std::fs::copy(wasmop_e2e::fixtures::testbed(), plugins.join("testbed.wasm"))?;
    HostCommand::new(env!("CARGO_BIN_EXE_wasmop"), cp.kubeconfig_path(), plugins)
        .arg("--audit-log")
        .arg(dir.join("audit.jsonl"))
        .args(["--audit-log-max-bytes", &CAP.to_string()])
        .log(dir.join("host.log"))
        .spawn()
}

/// Every audit line seen so far, across rotations (the test reads the files more often than
/// they rotate).
#[derive(Default)]
struct Trail {
    seen: BTreeSet<String>,
    lines: Vec<Value>,
}

impl Trail {
    fn read(&mut self, path: &Path) -> Result<()> {
        let previous = PathBuf::from(format!("{}.1", path.display()));
        for file in [previous, path.to_owned()] {
            let Ok(text) = std::fs::read_to_string(&file) else { continue };
            for line in text.lines() {
                if self.seen.insert(line.to_owned()) {
                    self.lines.push(serde_json::from_str(line).with_context(|| format!("not JSON: {line}"))?);
                }
            }
        }
        Ok(())
    }

    /// The first line with every field of `want`.
    fn find(&self, want: &Value) -> Option<Value> {
        let want = want.as_object().expect("an object");
        self.lines.iter().find(|line| want.iter().all(|(k, v)| line.get(k) == Some(v))).cloned()
    }
}

/// Wait for an audit line with every field of `want`.
async fn line(trail: &mut Trail, path: &Path, want: Value, log: &Path) -> Result<Value> {
    let found = eventually(&format!("an audit line {want}"), WAIT, || {
        let read = trail.read(path);
        let found = read.map(|()| trail.find(&want));
        async move { found }
    })
    .await;
    found.with_context(|| format!("host log:\n{}", std::fs::read_to_string(log).unwrap_or_default()))
}

#[tokio::test]
async fn every_write_and_refusal_is_one_audit_line_with_its_plugin_version_object_and_outcome_and_the_file_stays_capped()
-> Result<()> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &wasmop_e2e::plugins::workspace().join("crds/memcached.yaml")).await?;
    apply_file(&client, &wasmop_e2e::plugins::workspace().join("crds/testbed.yaml")).await?;
    let dir = tempfile::tempdir()?;
    let _host = spawn_host(&cp, dir.path())?;
    let (path, log) = (dir.path().join("audit.jsonl"), dir.path().join("host.log"));
    let (memcached_digest, testbed_digest) =
        (sha256_hex(&dir.path().join("plugins/memcached.wasm"))?, sha256_hex(&dir.path().join("plugins/testbed.wasm"))?);
    let mut trail = Trail::default();

    // memcached: its Deployment applied, its status written.
    apply(&client, &memcached("cache").size(1).build()).await?;
    let applied = line(&mut trail, &path, json!({"plugin": "memcached", "kind": "Deployment", "outcome": "ok"}), &log).await?;
    // A new child is created in one request, an existing one applied.
    assert!(applied["verb"] == "create" || applied["verb"] == "apply", "{applied}");
    assert_eq!(applied["target"], "wasmop::audit");
    assert_eq!(applied["version"], memcached::VERSION);
    assert_eq!(applied["digest"], memcached_digest.as_str(), "the digest of the file serving");
    assert_eq!(applied["parent"], "Memcached default/cache");
    assert_eq!(applied["api_version"], "apps/v1");
    assert_eq!((&applied["namespace"], &applied["name"]), (&json!("default"), &json!("cache")));
    assert_eq!(applied["field_manager"], "wasmop/memcached");
    assert_eq!(applied["outcome"], "ok");
    // The field manager the line names is the one the API server recorded on the object.
    let deployments = api_for(&client, "apps/v1", "Deployment", Some("default")).await?;
    let deployment = deployments.get("cache").await?;
    let managers: Vec<String> =
        deployment.metadata.managed_fields.unwrap_or_default().into_iter().filter_map(|m| m.manager).collect();
    assert!(managers.iter().any(|m| m == "wasmop/memcached"), "{managers:?}");
    let status = line(&mut trail, &path, json!({"plugin": "memcached", "verb": "status"}), &log).await?;
    assert_eq!((&status["kind"], &status["name"], &status["outcome"]), (&json!("Memcached"), &json!("cache"), &json!("ok")));
    // The status write names the plugin's field manager too, on the status subresource.
    let memcacheds = api_for(&client, "cache.example.com/v1alpha1", "Memcached", Some("default")).await?;
    let parent = memcacheds.get_status("cache").await?;
    let status_managers: Vec<(String, String)> = parent
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .map(|m| (m.manager.unwrap_or_default(), m.subresource.unwrap_or_default()))
        .collect();
    assert!(status_managers.contains(&("wasmop/memcached".to_owned(), "status".to_owned())), "{status_managers:?}");

    // testbed: a child applied, then pruned once the plugin returns another.
    let testbeds: Api<DynamicObject> = api_for(&client, "test.wasmop.dev/v1", "Testbed", Some("default")).await?;
    apply(&client, &testbed("t").mode("ok").build()).await?;
    let out = line(&mut trail, &path, json!({"plugin": "testbed", "name": "t-out", "outcome": "ok"}), &log).await?;
    assert_eq!(
        (&out["kind"], &out["parent"], &out["digest"]),
        (&json!("ConfigMap"), &json!("Testbed default/t"), &json!(testbed_digest))
    );
    let patch = json!({"spec": {"mode": "rename-out"}});
    testbeds.patch("t", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    line(&mut trail, &path, json!({"plugin": "testbed", "name": "t-renamed", "outcome": "ok"}), &log).await?;
    let pruned = line(&mut trail, &path, json!({"plugin": "testbed", "verb": "prune", "name": "t-out"}), &log).await?;
    assert_eq!(
        (&pruned["kind"], &pruned["outcome"], &pruned["parent"]),
        (&json!("ConfigMap"), &json!("ok"), &json!("Testbed default/t"))
    );

    // A refused response: one refusal line with the check's reason, then the Warning event and
    // the status that report it; nothing else written for that parent.
    apply(&client, &testbed("bad").mode("undeclared").build()).await?;
    let refused =
        line(&mut trail, &path, json!({"plugin": "testbed", "verb": "refuse", "parent": "Testbed default/bad"}), &log).await?;
    assert_eq!((&refused["outcome"], &refused["reason"]), (&json!("refused"), &json!("ActionRefused")));
    assert!(refused["object"].as_str().is_some_and(|o| o.contains("Secret")), "{refused}");
    assert!(refused["message"].as_str().is_some_and(|m| m.contains("does not declare as a child")), "{refused}");
    let event = line(&mut trail, &path, json!({"verb": "event", "parent": "Testbed default/bad"}), &log).await?;
    assert_eq!((&event["kind"], &event["detail"], &event["outcome"]), (&json!("Event"), &json!("ActionRefused"), &json!("ok")));
    line(&mut trail, &path, json!({"verb": "status", "parent": "Testbed default/bad", "outcome": "ok"}), &log).await?;
    let applies_for_bad = trail
        .lines
        .iter()
        .filter(|l| l["parent"] == "Testbed default/bad" && (l["verb"] == "apply" || l["verb"] == "create"))
        .count();
    assert_eq!(applies_for_bad, 0, "nothing of a refused response is written");

    // The cap: enough writes to rotate; neither file is ever past it.
    for i in 0..40 {
        apply(&client, &testbed(&format!("many-{i}")).mode("ok").build()).await?;
    }
    line(&mut trail, &path, json!({"verb": "status", "parent": "Testbed default/many-39"}), &log).await?;
    let previous = PathBuf::from(format!("{}.1", path.display()));
    let sizes = (std::fs::metadata(&path)?.len(), std::fs::metadata(&previous).context("rotated to PATH.1")?.len());
    assert!(sizes.0 <= CAP && sizes.1 <= CAP, "files of {sizes:?} bytes over the cap of {CAP}");
    assert!(sizes.1 > CAP / 2, "the previous file was filled before rotating: {sizes:?}");
    let files: Vec<_> = std::fs::read_dir(dir.path())?.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect();
    assert_eq!(files.iter().filter(|f| f.starts_with("audit.jsonl")).count(), 2, "one previous file only: {files:?}");
    assert!(trail.lines.iter().all(|l| l["target"] == "wasmop::audit"), "only audit events in the file");
    Ok(())
}
