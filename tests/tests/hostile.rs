//! Hostile plugin behaviour beside a well-behaved plugin, on a real etcd + kube-apiserver +
//! kube-controller-manager: every hostile object is contained (typed failure, reason on the CR,
//! a Warning event, nothing written) while Memcached keeps converging new CRs.
//!
//! The circuit breaker has its own test (`breaker.rs`); here it is set so it never trips, so
//! that every hostile object is retried and reported on its own.

use std::time::Duration;

use anyhow::{Context, Result};
use kube::api::{DynamicObject, ListParams};
use serde_json::{Value, json};
use wasmop::controller::{BreakerConfig, ObjectKey};
use wasmop::policy::HostPolicy;
use wasmop::runtime::Runtime;
use wasmop_e2e::ControlPlane;
use wasmop_e2e::cluster::{Host, api_for, apply, apply_file, eventually};
use wasmop_e2e::plugins::{plugin, plugin_with_features, workspace};

const WAIT: Duration = Duration::from_secs(60);
const TESTBED_MEMORY: u64 = 256 << 20;

/// The hostile objects: name, testbed mode and spec extras, the `Reconciled` reason the host
/// must put on the CR, and a fragment of its message.
const HOSTILE: &[(&str, &str, &str, &str)] = &[
    ("spin", "loop", "PluginTimeout", "exceeded its deadline of 3s"),
    ("bomb", "oom", "PluginOutOfMemory", "memory limit of 268435456 bytes"),
    ("crash", "panic", "PluginTrapped", "testbed asked to panic"),
    ("trap", "unreachable", "PluginTrapped", "unreachable"),
    ("huge", "huge", "MalformedOutput", "more than the limit of 16777216"),
    ("many", "big", "MalformedOutput", "more than the limit of 10000"),
    ("escape", "other-namespace", "ActionRefused", "outside the parent's namespace"),
    ("secret", "undeclared", "ActionRefused", "which the plugin does not declare as a child"),
    ("peek", "read-secret", "LookupRefused", "v1/Secret is not declared in the manifest"),
    ("snoop", "read-namespace", "LookupRefused", "namespace \"kube-system\" is outside the parent's namespace"),
];

fn memcached(name: &str) -> Value {
    json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"size": 1}})
}

fn testbed(name: &str, mode: &str) -> Value {
    json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"mode": mode}})
}

fn reconciled(object: &DynamicObject) -> Option<&Value> {
    object.data.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == "Reconciled")
}

/// This process's resident memory (the host runs in-process), in bytes.
fn rss() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("VmRSS in /proc/self/status")?;
    Ok(kib << 10)
}

async fn start() -> Result<(ControlPlane, kube::Client, Host)> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/memcached.yaml")).await?;
    apply_file(&client, &workspace().join("crds/testbed.yaml")).await?;
    // The operator's policy gives testbed a memory cap and deadline big enough to build a
    // 100 MB answer (so the size limit, not the memory cap or the deadline, refuses it).
    let policy = HostPolicy::from_yaml("plugins:\n  testbed: {deadline: 3s, memory: 256Mi}\n")?;
    let runtime = Runtime::builder().allowances(policy.allowances()).artifact_dir(None).build()?;
    let mut config = Host::test_config();
    config.breaker = BreakerConfig::default().window_calls(1_000_000);
    let (memcached, testbed) = (plugin("memcached", "wasm32-wasip2"), plugin("testbed", "wasm32-wasip2"));
    let host = Host::start_with(client.clone(), &[&memcached, &testbed], config, runtime).await?;
    Ok((cp, client, host))
}

async fn converges(client: &kube::Client, name: &str) -> Result<()> {
    apply(client, &memcached(name)).await?;
    let deployments = api_for(client, "apps/v1", "Deployment", Some("default")).await?;
    eventually(&format!("deployment {name}"), WAIT, || async { Ok(deployments.get_opt(name).await?.map(|_| ())) }).await
}

#[tokio::test]
async fn hostile_objects_are_contained_while_memcached_keeps_converging() -> Result<()> {
    let (_cp, client, host) = start().await?;
    converges(&client, "before").await?;
    let baseline = rss()?;

    for (name, mode, _, _) in HOSTILE {
        apply(&client, &testbed(name, mode)).await?;
    }
    for i in 0..5 {
        converges(&client, &format!("during-{i}")).await?;
    }

    // Every hostile object carries the reason on its CR and in a Warning event.
    let crs = api_for(&client, "test.wasmop.dev/v1", "Testbed", Some("default")).await?;
    let events = api_for(&client, "events.k8s.io/v1", "Event", Some("default")).await?;
    for (name, mode, reason, fragment) in HOSTILE {
        let condition = eventually(&format!("{name} ({mode}): Reconciled=False/{reason}"), WAIT, || async {
            let cr = crs.get(name).await?;
            Ok(reconciled(&cr).filter(|c| c["status"] == "False" && c["reason"] == *reason).cloned())
        })
        .await?;
        let message = condition["message"].as_str().unwrap_or_default();
        assert!(message.contains(fragment), "{name} ({mode}): {message}");
        eventually(&format!("{name}: Warning event {reason}"), WAIT, || async {
            let found = events.list(&ListParams::default()).await?.items.iter().any(|e| {
                e.data["type"] == "Warning"
                    && e.data["reason"] == *reason
                    && e.data.pointer("/regarding/name") == Some(&json!(name))
            });
            Ok(found.then_some(()))
        })
        .await?;
        if *mode == "loop" {
            eprintln!("infinite loop stopped: {message}");
        }
    }

    // Nothing of a hostile response was written anywhere.
    let config_maps = api_for(&client, "v1", "ConfigMap", None).await?;
    let written: Vec<String> = config_maps
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|cm| cm.metadata.name)
        .filter(|n| HOSTILE.iter().any(|(name, ..)| n.starts_with(&format!("{name}-"))))
        .collect();
    assert!(written.is_empty(), "hostile ConfigMaps written: {written:?}");
    let secrets = api_for(&client, "v1", "Secret", Some("default")).await?;
    assert!(secrets.get_opt("secret-secret").await?.is_none(), "no Secret written");

    // Failing objects back off: a few seconds of retries are a handful of calls, not hundreds.
    let controller = host.manager.controller("testbed").expect("testbed still running");
    let crash = ObjectKey { namespace: Some("default".into()), name: "crash".into() };
    tokio::time::sleep(Duration::from_secs(3)).await;
    let failures = controller.failures(&crash);
    assert!((2..=16).contains(&failures), "panicking object retried {failures} times");

    // Memory bombs are stopped at the cap and give their memory back: after many bombs (and
    // a 100 MB answer) the host holds less than one cap more than before them.
    let bomb = ObjectKey { namespace: Some("default".into()), name: "bomb".into() };
    eventually("the memory bomb retried", WAIT, || async { Ok((controller.failures(&bomb) >= 4).then_some(())) }).await?;
    let after = rss()?;
    eprintln!(
        "host RSS: {} MiB before the hostile objects, {} MiB after (testbed cap {} MiB)",
        baseline >> 20,
        after >> 20,
        TESTBED_MEMORY >> 20
    );
    assert!(after < baseline + TESTBED_MEMORY, "RSS grew from {baseline} to {after} bytes");

    // The host is up and both plugins still serve.
    assert_eq!(host.manager.plugins(), ["memcached", "testbed"]);
    converges(&client, "after").await?;
    apply(&client, &testbed("fine", "ok")).await?;
    let cms = api_for(&client, "v1", "ConfigMap", Some("default")).await?;
    eventually("the testbed plugin still serves well-behaved objects", WAIT, || async {
        Ok(cms.get_opt("fine-out").await?.map(|_| ()))
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn declared_secrets_need_a_grant_and_then_only_the_selected_ones_are_readable() -> Result<()> {
    let cp = ControlPlane::start().await?;
    let client = cp.client().await?;
    apply_file(&client, &workspace().join("crds/testbed.yaml")).await?;
    // A testbed build whose manifest declares Secrets labelled `testbed=<parent name>`.
    let testbed = plugin_with_features("testbed", "wasm32-wasip2", &["declares-secrets"]);
    let runtime = |policy: &str| -> Result<Runtime> {
        Ok(Runtime::builder().allowances(HostPolicy::from_yaml(policy)?.allowances()).artifact_dir(None).build()?)
    };

    // Declaring is not enough: without a grant the plugin does not start, and says why.
    let refused = Host::start_with(client.clone(), &[&testbed], Host::test_config(), runtime("")?).await;
    let message = format!("{:#}", refused.err().context("a plugin declaring ungranted Secrets must not start")?);
    assert!(message.contains("plugin testbed is not started: it reads v1/Secret (grant secrets: read)"), "{message}");

    // Granted: its lookups see the Secrets its selector picks for the parent, and no other.
    let grant = "plugins: {testbed: {grants: {secrets: read}}}";
    let _host = Host::start_with(client.clone(), &[&testbed], Host::test_config(), runtime(grant)?).await?;
    for (name, labels) in [("mine", json!({"testbed": "reader"})), ("unlabelled", json!({}))] {
        apply(
            &client,
            &json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": "default", "labels": labels}, "stringData": {"k": "v"}}),
        )
        .await?;
    }
    let crs = api_for(&client, "test.wasmop.dev/v1", "Testbed", Some("default")).await?;
    for (secret, found) in [("mine", json!(["mine"])), ("unlabelled", json!([]))] {
        apply(
            &client,
            &json!({"apiVersion": "test.wasmop.dev/v1", "kind": "Testbed",
            "metadata": {"name": "reader", "namespace": "default"}, "spec": {"mode": "read-secret", "name": secret}}),
        )
        .await?;
        eventually(&format!("reading Secret {secret} finds {found}"), WAIT, || async {
            let cr = crs.get("reader").await?;
            let done = cr.data.pointer("/status/probe/found") == Some(&found)
                && cr.metadata.generation == cr.data.pointer("/status/conditions/0/observedGeneration").and_then(Value::as_i64);
            Ok(done.then_some(()))
        })
        .await?;
    }
    Ok(())
}
