//! Hostile plugins against the runtime: every failure is typed, bounded, and the host goes on.

mod support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use support::{testbed, testbed_cr};
use wasmop::contract::Request;
use wasmop::objects::{MemoryCache, ObjectCache};
use wasmop::runtime::{CallError, Limits, Plugin, Runtime};

fn runtime(limits: Limits) -> Runtime {
    Runtime::builder().limits(limits).artifact_dir(None).build().expect("runtime starts")
}

fn empty_cache() -> Arc<dyn ObjectCache> {
    Arc::new(MemoryCache::default())
}

async fn call(plugin: &Plugin, mode: &str, extra: serde_json::Value) -> Result<wasmop::contract::Response, CallError> {
    plugin.reconcile(&Request::new(testbed_cr("t", mode, extra)), empty_cache()).await.map(|(r, _)| r)
}

#[tokio::test]
async fn infinite_loop_is_interrupted_within_50ms_of_the_deadline() {
    let deadline = Duration::from_millis(100);
    let rt = runtime(Limits::default().deadline(deadline));
    let plugin = rt.load_file(testbed()).await.unwrap();
    // The best of five: one call delayed by a loaded machine must not fail the test, but a
    // broken interrupt (no ticker, a coarse tick, the fallback timer) fails all five.
    let mut overshoots = Vec::new();
    for _ in 0..5 {
        match call(&plugin, "loop", json!({})).await.unwrap_err() {
            CallError::Timeout { deadline: d, elapsed } => {
                assert_eq!(d, deadline);
                assert!(elapsed >= deadline, "stopped before its deadline: {elapsed:?}");
                overshoots.push(elapsed - deadline);
            }
            other => panic!("expected a timeout, got {other}"),
        }
    }
    let best = overshoots.iter().min().unwrap();
    assert!(*best < Duration::from_millis(50), "interrupted {overshoots:?} after the deadline");
    // The same plugin version keeps serving.
    assert!(call(&plugin, "ok", json!({})).await.is_ok());
}

#[tokio::test]
async fn memory_bomb_is_stopped_at_the_cap() {
    let rt = runtime(Limits::default().memory_bytes(32 << 20));
    let plugin = rt.load_file(testbed()).await.unwrap();
    let err = call(&plugin, "oom", json!({})).await.unwrap_err();
    assert_eq!(err, CallError::OutOfMemory { limit: 32 << 20 });
    assert!(call(&plugin, "ok", json!({})).await.is_ok());
}

#[tokio::test]
async fn panic_is_a_trap_carrying_the_panic_message() {
    let plugin = runtime(Limits::default()).load_file(testbed()).await.unwrap();
    let err = call(&plugin, "panic", json!({})).await.unwrap_err();
    let CallError::Trap { message } = &err else { panic!("expected a trap, got {err:?}") };
    assert!(message.contains("testbed asked to panic"), "{message}");
    let err = call(&plugin, "unreachable", json!({})).await.unwrap_err();
    assert!(matches!(err, CallError::Trap { .. }), "{err:?}");
    assert!(err.is_retryable());
}

#[tokio::test]
async fn plugin_errors_keep_their_kind() {
    let plugin = runtime(Limits::default()).load_file(testbed()).await.unwrap();
    assert!(matches!(call(&plugin, "retryable", json!({})).await, Err(CallError::Retryable(_))));
    let terminal = call(&plugin, "terminal", json!({})).await.unwrap_err();
    assert!(matches!(terminal, CallError::Terminal(_)) && !terminal.is_retryable());
}

#[tokio::test]
async fn malformed_output_is_refused() {
    let plugin = runtime(Limits::default()).load_file(testbed()).await.unwrap();
    let err = call(&plugin, "bad-json", json!({})).await.unwrap_err();
    assert!(matches!(err, CallError::MalformedOutput(_)), "{err:?}");
    let err = call(&plugin, "no-kind", json!({})).await.unwrap_err();
    assert!(err.to_string().contains("has no kind"), "{err}");
}

#[tokio::test]
async fn oversized_responses_are_refused_by_the_output_limits() {
    let plugin = runtime(Limits::default()).load_file(testbed()).await.unwrap();
    let err = call(&plugin, "big", json!({"count": 20000})).await.unwrap_err();
    assert!(err.to_string().contains("more than the limit of 10000"), "{err}");
}

#[tokio::test]
async fn lookups_are_scoped_to_declared_kinds_and_selectors() {
    let plugin = runtime(Limits::default()).load_file(testbed()).await.unwrap();
    let mut cache = MemoryCache::default();
    for (name, owner) in [("mine", "t"), ("theirs", "other")] {
        cache
            .insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default", "labels": {"testbed": owner}}}))
            .unwrap();
    }
    cache.insert(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}})).unwrap();
    let request = Request::new(testbed_cr("t", "lookup", json!({})));
    let (response, _) = plugin.reconcile(&request, Arc::new(cache)).await.unwrap();
    let status = response.status.expect("lookup mode reports in status");
    let text = status.to_string();
    assert!(text.contains("mine") && !text.contains("theirs"), "{text}");
    assert!(text.contains("kind not declared in the manifest: v1/Secret"), "{text}");
}

#[tokio::test]
async fn host_survives_every_hostile_mode_in_a_row() {
    let rt = runtime(Limits::default().deadline(Duration::from_millis(200)).memory_bytes(32 << 20));
    let plugin = rt.load_file(testbed()).await.unwrap();
    for mode in ["loop", "oom", "panic", "unreachable", "bad-json", "no-kind", "retryable", "terminal"] {
        assert!(call(&plugin, mode, json!({})).await.is_err(), "mode {mode} should fail");
    }
    let response = call(&plugin, "ok", json!({})).await.expect("still serving after all hostile calls");
    assert_eq!(response.children.len(), 1);
}

#[tokio::test]
async fn guest_stdout_and_logs_do_not_break_the_call() {
    let plugin = runtime(Limits::default()).load_file(testbed()).await.unwrap();
    assert!(call(&plugin, "log", json!({})).await.is_ok());
}
