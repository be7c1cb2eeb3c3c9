//! Admission calls into WIT 0.3.0 plugins built from source (the SDK's): verdicts, mutations,
//! lookups, and hostile webhooks (loop, memory bomb, trap, nonsense), each a typed error the
//! caller turns into a denial.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use wasmop::contract::VerdictError;
use wasmop::objects::{MemoryCache, ObjectCache};
use wasmop::runtime::{CallError, Limits, Plugin, Runtime, WitVersion};
use wasmop_e2e::fixtures::{self, plugin_with_features};
use wasmop_e2e::objects;
use wasmop_types::{AdmissionRequest, Operation, Verdict};

fn runtime(limits: Limits) -> Runtime {
    Runtime::builder().limits(limits).artifact_dir(None).build().expect("runtime starts")
}

/// The testbed's `admission` build, which declares one webhook per admission mode.
async fn testbed(limits: Limits) -> Plugin {
    runtime(limits).load_file(plugin_with_features("testbed", "wasm32-wasip2", &["admission"])).await.unwrap()
}

fn config_map(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": {"a": "b"}})
}

fn empty_cache() -> Arc<dyn ObjectCache> {
    Arc::new(MemoryCache::default())
}

async fn admit(plugin: &Plugin, webhook: &str) -> Result<Verdict, CallError> {
    let request = AdmissionRequest::new(Operation::Create, config_map("default", "c"));
    plugin.admit(webhook, &request, empty_cache()).await.map(|(v, _)| v)
}

#[tokio::test]
async fn a_0_3_0_plugin_declares_its_webhooks_and_answers_admit() {
    let plugin = testbed(Limits::default()).await;
    assert_eq!(plugin.wit_version(), WitVersion::V0_3);
    assert!(plugin.reconciles() && plugin.admits());
    assert_eq!(plugin.manifest().webhooks.len(), 8);
    let label = plugin.webhook("label").unwrap();
    assert_eq!(label.object_selector, "testbed-admission=label");
    assert_eq!(admit(&plugin, "allow").await.unwrap(), Verdict::allow().warning("testbed allows"));
    assert_eq!(admit(&plugin, "deny").await.unwrap(), Verdict::deny("testbed denies c"));
}

#[tokio::test]
async fn a_mutating_webhook_answers_the_changed_object() {
    let plugin = testbed(Limits::default()).await;
    let verdict = admit(&plugin, "label").await.unwrap();
    let mut expected = config_map("default", "c");
    expected["metadata"]["labels"] = json!({"testbed-admitted": "yes"});
    assert_eq!(verdict.mutated(), Some(&expected));
}

#[tokio::test]
async fn an_undeclared_webhook_is_no_such_webhook_and_a_plugin_without_webhooks_admits_nothing() {
    let plugin = testbed(Limits::default()).await;
    assert_eq!(admit(&plugin, "nope").await.unwrap_err(), CallError::NoSuchWebhook("nope".into()));
    let plain = runtime(Limits::default()).load_file(fixtures::testbed()).await.unwrap();
    assert!(plain.manifest().webhooks.is_empty());
    assert_eq!(admit(&plain, "deny").await.unwrap_err(), CallError::NoSuchWebhook("deny".into()));
}

#[tokio::test]
async fn a_renamed_object_is_refused_as_a_malformed_verdict() {
    let plugin = testbed(Limits::default()).await;
    let err = admit(&plugin, "rename").await.unwrap_err();
    assert!(matches!(err, CallError::MalformedVerdict(VerdictError::ChangedIdentity { field: "metadata.name", .. })), "{err}");
    assert_eq!(err.reason(), "MalformedVerdict");
}

#[tokio::test]
async fn a_looping_webhook_times_out_under_half_its_timeout() {
    // The plugin's deadline (10 s) is longer than half the webhook's timeout (5 s / 2).
    let plugin = testbed(Limits::default().deadline(Duration::from_secs(10))).await;
    match admit(&plugin, "loop").await.unwrap_err() {
        CallError::Timeout { deadline, elapsed } => {
            assert_eq!(deadline, Duration::from_millis(2500));
            assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
        }
        other => panic!("expected a timeout, got {other}"),
    }
    assert!(admit(&plugin, "allow").await.is_ok(), "the plugin keeps serving");
}

#[tokio::test]
async fn a_memory_bomb_and_a_trap_are_typed_errors() {
    let plugin = testbed(Limits::default().memory_bytes(32 << 20)).await;
    assert_eq!(admit(&plugin, "oom").await.unwrap_err(), CallError::OutOfMemory { limit: 32 << 20 });
    assert!(matches!(admit(&plugin, "trap").await.unwrap_err(), CallError::Trap { .. }));
    assert!(admit(&plugin, "allow").await.is_ok());
}

#[tokio::test]
async fn lookups_see_the_parent_kind_in_the_admitted_objects_namespace_only() {
    let plugin = testbed(Limits::default()).await;
    let mut cache = MemoryCache::default();
    for object in [objects::testbed("a").build(), objects::testbed("b").build(), objects::testbed("c").namespace("other").build()]
    {
        cache.insert(object).unwrap();
    }
    let request = AdmissionRequest::new(Operation::Create, config_map("default", "x"));
    let (verdict, _) = plugin.admit("lookup", &request, Arc::new(cache)).await.unwrap();
    assert_eq!(verdict.warnings(), ["testbeds: a,b"]);
}

#[tokio::test]
async fn a_verdict_waits_for_room_in_the_response_budget_and_is_refused_past_its_deadline() {
    let limits = Limits { deadline: Duration::from_millis(300), ..Limits::default() };
    let runtime = Runtime::builder().limits(limits).response_budget(1 << 10).artifact_dir(None).build().expect("runtime starts");
    let plugin = runtime.load_file(plugin_with_features("testbed", "wasm32-wasip2", &["admission"])).await.unwrap();
    // A reconcile's response holds the whole 1 KiB budget until its reservation is dropped.
    let request = wasmop::contract::Request::new(objects::testbed("held").build());
    let (_, _, held) = plugin.reconcile_reserved(&request, empty_cache()).await.unwrap();
    let err = admit(&plugin, "label").await.unwrap_err();
    assert!(matches!(&err, CallError::Host(m) if m.contains("response budget")), "{err}");
    drop(held);
    assert!(matches!(admit(&plugin, "label").await.unwrap(), Verdict::Allowed { .. }), "room again");
}
