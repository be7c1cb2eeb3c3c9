//! Hostile plugins against the runtime: every failure is typed, bounded, and the host goes on.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use wasmop::contract::{Condition, OutputLimits, Request, ResponseError};
use wasmop::objects::{MemoryCache, ObjectCache};
use wasmop::policy::HostPolicy;
use wasmop::runtime::{CallError, Limits, MIN_MEMORY_BYTES, Plugin, Runtime, WitVersion};
use wasmop_e2e::fixtures::{self, testbed, testbed_cr};

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
async fn a_0_3_0_failure_carries_its_status_and_conditions_checked_as_a_responses() {
    let plugin = runtime(Limits::default()).load_file(testbed()).await.unwrap();
    assert_eq!(plugin.wit_version(), WitVersion::V0_3);
    let err = call(&plugin, "invalid", json!({})).await.unwrap_err();
    let CallError::Terminal(failure) = &err else { panic!("expected the plugin's terminal error, got {err:?}") };
    assert_eq!(failure.message, "spec.size is required");
    assert_eq!(failure.status, Some(json!({"phase": "Invalid"})));
    assert_eq!(failure.conditions, [Condition::false_("Ready", "InvalidSpec", "spec.size is required")]);
    assert_eq!(err.to_string(), "plugin error (terminal): spec.size is required");
    let retryable = call(&plugin, "invalid", json!({"retry": true})).await.unwrap_err();
    assert!(matches!(&retryable, CallError::Retryable(f) if f.status == failure.status), "{retryable:?}");
    // What a failure shows passes the checks of a response's: a reason that is not CamelCase is
    // refused whole, as it would be in a response.
    let refused = call(&plugin, "invalid-shown", json!({})).await.unwrap_err();
    assert!(
        matches!(&refused, CallError::MalformedOutput(ResponseError::InvalidCondition(m)) if m.contains("not camel case")),
        "{refused:?}"
    );
    // Under a byte limit smaller than the failure's status and condition: refused as too large.
    let small =
        runtime(Limits::default().output(OutputLimits { max_bytes: 40, max_actions: 10 })).load_file(testbed()).await.unwrap();
    let too_large = call(&small, "invalid", json!({})).await.unwrap_err();
    assert!(matches!(too_large, CallError::MalformedOutput(ResponseError::TooLarge { limit: 40, .. })), "{too_large:?}");
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

fn lookup_cache() -> Arc<dyn ObjectCache> {
    let mut cache = MemoryCache::default();
    for (name, namespace, owner) in [("mine", "default", "t"), ("theirs", "default", "other"), ("system", "kube-system", "t")] {
        cache
            .insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace, "labels": {"testbed": owner}}}))
            .unwrap();
    }
    cache.insert(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}})).unwrap();
    cache.insert(testbed_cr("t", "read-parents", json!({}))).unwrap();
    cache.insert(testbed_cr("sibling", "ok", json!({}))).unwrap();
    Arc::new(cache)
}

async fn lookup(plugin: &Plugin, mode: &str, extra: serde_json::Value) -> Result<serde_json::Value, CallError> {
    let request = Request::new(testbed_cr("t", mode, extra));
    plugin.reconcile(&request, lookup_cache()).await.map(|(r, _)| r.status.expect("lookup modes report in status"))
}

#[tokio::test]
async fn lookups_see_only_the_declared_selection() {
    let plugin = runtime(Limits::default()).load_file(testbed()).await.unwrap();
    let status = lookup(&plugin, "lookup", json!({})).await.unwrap();
    assert_eq!(status["lookup"]["configMaps"], json!(["mine"]));
    let status = lookup(&plugin, "read-parents", json!({})).await.unwrap();
    assert_eq!(status["probe"]["found"], json!(["t"]), "other objects of the parent kind stay hidden");
}

#[tokio::test]
async fn refused_lookups_fail_the_call_with_the_reason() {
    let plugin = runtime(Limits::default()).load_file(testbed()).await.unwrap();
    let err = lookup(&plugin, "read-secret", json!({"name": "s"})).await.unwrap_err();
    assert_eq!(err.reason(), "LookupRefused");
    assert_eq!(
        err.to_string(),
        "plugin attempted a read it is not allowed: v1/Secret in namespace \"default\": v1/Secret is not declared in the manifest"
    );
    let err = lookup(&plugin, "read-namespace", json!({})).await.unwrap_err();
    assert!(err.to_string().ends_with("namespace \"kube-system\" is outside the parent's namespace \"default\""), "{err}");
}

#[tokio::test]
async fn namespace_grants_widen_lookups_and_secret_grants_are_still_bounded_by_the_manifest() {
    let policy = HostPolicy::from_yaml("plugins: {testbed: {grants: {namespaces: [kube-system], secrets: read}}}").unwrap();
    let rt = Runtime::builder().allowances(policy.allowances()).artifact_dir(None).build().unwrap();
    let plugin = rt.load_file(testbed()).await.unwrap();
    let status = lookup(&plugin, "read-namespace", json!({})).await.unwrap();
    assert_eq!(status["probe"]["found"], json!(["system"]));
    let err = lookup(&plugin, "read-secret", json!({"name": "s"})).await.unwrap_err();
    assert_eq!(err.reason(), "LookupRefused", "a grant does not cover a kind the manifest does not declare");
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

#[tokio::test]
async fn the_policy_sets_limits_per_plugin_by_name() {
    let policy = HostPolicy::from_yaml("defaults: {memory: 64Mi}\nplugins: {testbed: {memory: 16Mi, deadline: 150ms}}").unwrap();
    let rt = Runtime::builder().allowances(policy.allowances()).artifact_dir(None).build().unwrap();
    let plugin = rt.load_file(testbed()).await.unwrap();
    assert_eq!(call(&plugin, "oom", json!({})).await.unwrap_err(), CallError::OutOfMemory { limit: 16 << 20 });
    assert!(
        matches!(call(&plugin, "loop", json!({})).await, Err(CallError::Timeout { deadline, .. }) if deadline == Duration::from_millis(150))
    );
    let memcached = rt.load_file(fixtures::memcached()).await.unwrap();
    assert_eq!(memcached.limits().memory_bytes, 64 << 20, "other plugins keep the defaults");
}

#[tokio::test]
async fn fuel_stops_a_loop_deterministically_and_leaves_normal_calls_alone() {
    let policy = HostPolicy::from_yaml("plugins: {testbed: {fuel: 50000000, deadline: 30s}}").unwrap();
    let rt = Runtime::builder().allowances(policy.allowances()).artifact_dir(None).build().unwrap();
    let plugin = rt.load_file(testbed()).await.unwrap();
    assert_eq!(call(&plugin, "loop", json!({})).await.unwrap_err(), CallError::OutOfFuel { fuel: 50_000_000 });
    assert_eq!(call(&plugin, "loop", json!({})).await.unwrap_err().reason(), "PluginOutOfFuel");
    assert!(call(&plugin, "ok", json!({})).await.is_ok());
    let memcached = rt.load_file(fixtures::memcached()).await.unwrap();
    assert_eq!(memcached.limits().fuel, None, "unmetered plugins get unlimited fuel on a metered engine");
}

#[tokio::test]
async fn smallest_memory_cap_runs_the_example_plugins() {
    let rt = runtime(Limits::default().memory_bytes(MIN_MEMORY_BYTES));
    let testbed = rt.load_file(testbed()).await.unwrap();
    let (_, stats) = testbed.reconcile(&Request::new(testbed_cr("t", "ok", json!({}))), empty_cache()).await.unwrap();
    let memcached = rt.load_file(fixtures::memcached()).await.unwrap();
    let (_, m_stats) = memcached.reconcile(&Request::new(fixtures::memcached_cr("m", 3)), empty_cache()).await.unwrap();
    // The guest stack is 128 KiB (`.cargo/config.toml`); the SDK's allocator grows memory by
    // 256 KiB steps.
    for high_water in [stats.memory_high_water, m_stats.memory_high_water] {
        assert!(
            high_water > 128 << 10 && high_water < 1 << 20,
            "testbed {}, memcached {}: the documented measurement is off",
            stats.memory_high_water,
            m_stats.memory_high_water
        );
    }
}

#[tokio::test]
async fn a_memory_cap_below_what_the_plugin_needs_to_start_says_so() {
    for pooling in [true, false] {
        let limits = Limits::default().memory_bytes(64 << 10);
        let rt = Runtime::builder().limits(limits).pooling(pooling).artifact_dir(None).build().unwrap();
        let err = rt.load_file(testbed()).await.unwrap_err().to_string();
        let needs = "describing the plugin failed: plugin needs ";
        assert!(
            err.starts_with(needs) && err.contains("to start, more than its memory limit of 65536 bytes"),
            "{pooling}: {err}"
        );
    }
    let policy = HostPolicy::from_yaml("plugins: {testbed: {memory: 2Mi}}").unwrap();
    let rt = Runtime::builder().allowances(policy.allowances()).artifact_dir(None).build().unwrap();
    let plugin = rt.load_file(testbed()).await.unwrap();
    let err = call(&plugin, "huge", json!({"bytes": 4_000_000})).await.unwrap_err();
    assert_eq!(err, CallError::OutOfMemory { limit: 2 << 20 }, "past the start, running out is OutOfMemory");
}

#[tokio::test]
async fn every_long_field_is_refused_naming_it() {
    let rt = runtime(Limits::default().memory_bytes(256 << 20));
    let plugin = rt.load_file(testbed()).await.unwrap();
    let cases = [
        ("condition-message", 40_000, "condition Ready: message has 40000 bytes, more than Kubernetes' 32768"),
        ("event-note", 2_000, "event Reconciled: note has 2000 bytes, more than Kubernetes' 1024"),
        ("delete-name", 5_000_000, "delete #0: name \"xxxx"),
        ("label-value", 64, "child #1: metadata.labels.testbed \"xxxx"),
        ("condition-message", 20_000_000, "response has 20000"),
    ];
    for (field, bytes, expected) in cases {
        let err = call(&plugin, "long-field", json!({"field": field, "bytes": bytes})).await.unwrap_err();
        let CallError::MalformedOutput(refusal) = &err else { panic!("{field}: expected a refusal, got {err}") };
        let text = refusal.to_string();
        assert!(text.starts_with(expected) && text.len() < 400, "{field} of {bytes} bytes: {}", &text[..text.len().min(400)]);
    }
}

#[tokio::test]
async fn a_plugin_error_message_is_one_bounded_line() {
    let plugin = runtime(Limits::default()).load_file(testbed()).await.unwrap();
    let err = call(&plugin, "long-field", json!({"field": "error", "bytes": 1_000_000})).await.unwrap_err();
    let CallError::Terminal(failure) = &err else { panic!("expected the plugin's terminal error, got {err:?}") };
    let message = &failure.message;
    assert!(message.len() <= wasmop::runtime::MAX_PLUGIN_MESSAGE + 32, "{} bytes", message.len());
    assert!(!message.contains('\n') && message.starts_with("line\\n2026-11-30T09:00:00"), "{message}");
}

/// Log output of the calls made while it is held, in the host's text format.
#[derive(Clone, Default)]
struct CapturedLogs(Arc<std::sync::Mutex<Vec<u8>>>);

impl CapturedLogs {
    fn start() -> (Self, tracing::subscriber::DefaultGuard) {
        let logs = Self::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(logs.clone())
            .with_ansi(false)
            .with_env_filter(tracing_subscriber::EnvFilter::new("wasmop=trace"))
            .compact()
            .finish();
        (logs.clone(), tracing::subscriber::set_default(subscriber))
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for CapturedLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for CapturedLogs {
    type Writer = Self;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test]
async fn a_log_flood_is_cut_to_the_per_call_budget_with_one_line_saying_so() {
    use wasmop::runtime::{MAX_LOG_BYTES, MAX_LOG_LINES};
    let plugin = runtime(Limits::default().deadline(Duration::from_secs(30))).load_file(testbed()).await.unwrap();
    let (logs, _guard) = CapturedLogs::start();
    call(&plugin, "log-flood", json!({"lines": 2000, "width": 4000})).await.unwrap();
    let text = logs.text();
    let plugin_lines: Vec<&str> = text.lines().filter(|l| l.contains("wasmop::plugin")).collect();
    assert!(plugin_lines.len() <= MAX_LOG_LINES + 1, "{} lines logged", plugin_lines.len());
    assert!(text.len() < MAX_LOG_BYTES + (MAX_LOG_LINES + 1) * 200, "{} bytes logged", text.len());
    let reports: Vec<&&str> = plugin_lines.iter().filter(|l| l.contains("over the limit")).collect();
    assert_eq!(reports.len(), 1, "one line says what was dropped:\n{}", &text[text.len().saturating_sub(2000)..]);
    // 16 lines of 4011 bytes fit in 64 KiB; the other 1984 logged and 2 × 2000 printed do not.
    assert!(reports[0].contains("dropped 598"), "{}", reports[0]);

    let (logs, _guard) = CapturedLogs::start();
    call(&plugin, "log-flood", json!({"lines": 150, "width": 10})).await.unwrap();
    let text = logs.text();
    assert_eq!(text.lines().filter(|l| l.contains("testbed t: ffff")).count(), MAX_LOG_LINES, "lines are capped too");
    assert!(text.contains("dropped 350 lines"), "{}", &text[text.len().saturating_sub(500)..]);
}

#[tokio::test]
async fn plugin_text_cannot_forge_a_host_log_line() {
    let plugin = runtime(Limits::default()).load_file(testbed()).await.unwrap();
    let (logs, _guard) = CapturedLogs::start();
    call(&plugin, "log-forge", json!({})).await.unwrap();
    call(&plugin, "panic", json!({})).await.unwrap_err();
    let text = logs.text();
    assert_eq!(text.matches("forged host line").count(), 5, "{text}");
    for line in text.lines() {
        assert!(!line.starts_with("2026-11-30T09:00:00"), "a forged line:\n{text}");
        if line.contains("forged host line") {
            assert!(line.contains("wasmop::plugin"), "forged text outside a plugin line: {line}");
        }
    }
    assert!(!text.contains(['\r', '\u{1b}', '\u{85}', '\u{2028}']), "control characters reached the log: {text:?}");
}

#[tokio::test]
async fn a_guest_stack_overflow_is_a_clean_trap() {
    // Plugins of this workspace link a 128 KiB guest stack (`.cargo/config.toml`): 1 KiB frames
    // without end run past it, below address 0 of linear memory, and trap.
    let plugin = runtime(Limits::default()).load_file(testbed()).await.unwrap();
    let err = call(&plugin, "recurse", json!({})).await.unwrap_err();
    let CallError::Trap { message } = &err else { panic!("expected a trap, got {err:?}") };
    assert!(message.contains("out of bounds memory access"), "{message}");
    // Up to about the stack size, recursion works.
    assert!(call(&plugin, "recurse", json!({"depth": 100})).await.is_ok());
}

#[tokio::test]
async fn a_parent_nested_to_serde_json_s_limit_fits_the_guest_stack() {
    // serde_json stops at 128 nested levels: the deepest parent the SDK can parse must not
    // overflow the smaller guest stack.
    let mut deep = json!("leaf");
    for _ in 0..125 {
        deep = json!([deep]);
    }
    let plugin = runtime(Limits::default()).load_file(testbed()).await.unwrap();
    let response = call(&plugin, "ok", json!({"deep": deep})).await.unwrap();
    assert_eq!(response.children.len(), 1);
}

#[tokio::test]
async fn the_runtime_records_each_call_and_its_failure_reason_in_its_metrics() {
    let metrics = Arc::new(wasmop::metrics::Metrics::new());
    let rt = Runtime::builder().artifact_dir(None).metrics(Arc::clone(&metrics)).build().expect("runtime starts");
    let plugin = rt.load_file(testbed()).await.unwrap();
    let before = metrics.render();
    assert!(!before.contains(r#"wasmop_plugin_call_duration_seconds_count{plugin="testbed"}"#), "loading is no call:\n{before}");
    call(&plugin, "ok", json!({})).await.unwrap();
    call(&plugin, "unreachable", json!({})).await.unwrap_err();
    let text = metrics.render();
    assert!(text.contains(r#"wasmop_plugin_call_duration_seconds_count{plugin="testbed"} 2"#), "{text}");
    assert!(text.contains(r#"wasmop_plugin_call_failures_total{plugin="testbed",reason="PluginTrapped"} 1"#), "{text}");
    assert!(!text.contains(r#"wasmop_plugin_memory_high_water_bytes{plugin="testbed"} 0"#), "{text}");
}
