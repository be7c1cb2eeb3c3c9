//! Older WIT versions keep loading: a component built from `plugins/legacy-v0-1` (pinned to
//! `wit/v0.1.0`, no SDK) loads and reconciles next to 0.3.0 plugins in one runtime, and has no
//! webhooks to answer; components of the 0.2.0 worlds `webhook` (no reconcile export) and
//! `operator` (pinned to `wit/v0.2.0`) load, admit and reconcile, their failures showing
//! nothing and their webhooks carrying no match conditions.

use std::sync::Arc;

use serde_json::json;
use wasmop::contract::{Failure, Kind, Request};
use wasmop::objects::MemoryCache;
use wasmop::runtime::{CallError, Runtime, WitVersion};
use wasmop_e2e::fixtures::{self, memcached_cr, plugin};
use wasmop_types::{AdmissionRequest, Operation};

#[tokio::test]
async fn a_0_1_0_plugin_reconciles_next_to_0_3_0_plugins_and_admits_nothing() {
    let runtime = Runtime::builder().artifact_dir(None).build().unwrap();
    let legacy = runtime.load_file(plugin("legacy-v0-1", "wasm32-wasip2")).await.unwrap();
    let memcached = runtime.load_file(fixtures::memcached()).await.unwrap();
    assert_eq!((legacy.wit_version(), memcached.wit_version()), (WitVersion::V0_1, WitVersion::V0_3));
    assert!(legacy.reconciles() && !legacy.admits());
    assert_eq!(legacy.manifest().parent, Kind::new("legacy.wasmop.dev", "v1", "Legacy"));
    assert!(legacy.manifest().webhooks.is_empty() && !legacy.manifest().adopt_unowned);

    let parent =
        json!({"apiVersion": "legacy.wasmop.dev/v1", "kind": "Legacy", "metadata": {"name": "old", "namespace": "default"}});
    let cache = Arc::new(MemoryCache::default());
    let (response, _) = legacy.reconcile(&Request::new(parent.clone()), cache.clone()).await.unwrap();
    assert_eq!(response.children.len(), 1);
    assert_eq!(response.children[0]["metadata"]["name"], "old-legacy");
    assert_eq!(response.children[0]["data"]["wit"], "0.1.0");
    let (response, _) = memcached.reconcile(&Request::new(memcached_cr("new", 2)), cache.clone()).await.unwrap();
    assert_eq!(response.children.len(), 1, "the 0.3.0 plugin reconciles in the same runtime");

    let request = AdmissionRequest::new(Operation::Create, parent);
    assert_eq!(legacy.admit("any", &request, cache).await.unwrap_err(), CallError::NoSuchWebhook("any".into()));
}

#[tokio::test]
async fn a_webhook_world_plugin_admits_and_does_not_reconcile() {
    let runtime = Runtime::builder().artifact_dir(None).build().unwrap();
    let plugin = runtime.load_file(plugin("webhook-only", "wasm32-wasip2")).await.unwrap();
    assert_eq!(plugin.wit_version(), WitVersion::V0_2);
    assert!(plugin.admits() && !plugin.reconciles());
    let cache = Arc::new(MemoryCache::default());
    let config_map = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "a"}});
    let request = AdmissionRequest::new(Operation::Create, config_map("forbidden-x"));
    let (verdict, _) = plugin.admit("names", &request, cache.clone()).await.unwrap();
    assert_eq!(verdict.message(), Some("forbidden-x: the prefix forbidden- is reserved"));
    let request = AdmissionRequest::new(Operation::Create, config_map("fine"));
    assert!(plugin.admit("names", &request, cache.clone()).await.unwrap().0.is_allowed());
    let err = plugin.reconcile(&Request::new(config_map("fine")), cache).await.unwrap_err();
    assert!(matches!(err, CallError::Host(ref m) if m.contains("does not reconcile")), "{err}");
}

#[tokio::test]
async fn a_component_of_no_accepted_world_is_refused_naming_the_accepted_worlds() {
    let runtime = Runtime::builder().artifact_dir(None).build().unwrap();
    let err = runtime.load_file(plugin("wrong-world", "wasm32-wasip2")).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("wasmop:plugin/operator@0.1.0")
            && text.contains("wasmop:plugin@0.2.0 or @0.3.0 worlds operator, controller or webhook"),
        "{text}"
    );
    assert!(
        text.contains(
            "exports none of wasmop:plugin/reconciler@0.1.0, wasmop:plugin/plugin@0.2.0 and wasmop:plugin/plugin@0.3.0"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn a_0_2_0_operator_reconciles_and_admits_as_before_its_failures_showing_nothing() {
    let runtime = Runtime::builder().artifact_dir(None).build().unwrap();
    let path = fixtures::plugin_with_features("webhook-only", "wasm32-wasip2", &["operator-world"]);
    let plugin = runtime.load_file(path).await.unwrap();
    assert_eq!(plugin.wit_version(), WitVersion::V0_2);
    assert!(plugin.admits() && plugin.reconciles());
    assert!(plugin.manifest().webhooks[0].match_conditions.is_empty(), "0.2.0 declares none");
    let cache = Arc::new(MemoryCache::default());
    let config_map = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "a"}});
    let (response, _) = plugin.reconcile(&Request::new(config_map("fine")), cache.clone()).await.unwrap();
    assert_eq!(response.status, Some(json!({"wit": "0.2.0"})));
    let err = plugin.reconcile(&Request::new(config_map("fail-now")), cache.clone()).await.unwrap_err();
    assert_eq!(err, CallError::Terminal(Failure::message("a 0.2.0 plugin's terminal error")));
    assert!(!err.failure().unwrap().shows_anything());
    let request = AdmissionRequest::new(Operation::Create, config_map("forbidden-y"));
    assert!(!plugin.admit("names", &request, cache).await.unwrap().0.is_allowed());
}

#[tokio::test]
async fn a_plugin_declaring_webhooks_without_the_admission_export_is_refused() {
    let runtime = Runtime::builder().artifact_dir(None).build().unwrap();
    let path = fixtures::plugin_with_features("webhook-only", "wasm32-wasip2", &["controller-world"]);
    let err = runtime.load_file(path).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid manifest: the manifest declares 1 webhooks but the plugin does not export admission \
         (build it for world operator or webhook)"
    );
}
