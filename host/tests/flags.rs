//! Every bad flag or policy value is one clear error line naming the flag (or policy field),
//! and a non-zero exit; none panics the host or blames the plugin.

use std::process::{Command, Output};
use wasmop_e2e::fixtures;

fn wasmop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(args)
        .env("WASMOP_CACHE_DIR", std::env::temp_dir().join("wasmop-flags-test-artifacts"))
        .env("RUST_LOG", "warn")
        .env_remove("WASMOP_POLICY")
        .output()
        .expect("running wasmop")
}

/// The error line of a failed run: exactly one line starting with `error: `, no panic.
fn error_line(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "should have failed; stderr:\n{text}");
    assert!(!text.contains("panicked"), "{text}");
    let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "exactly one error line expected in:\n{text}");
    errors[0].to_owned()
}

fn inspect_with(flags: &[&str]) -> Output {
    let plugin = fixtures::testbed();
    let mut args = vec!["inspect", plugin.to_str().unwrap()];
    args.extend_from_slice(flags);
    wasmop(&args)
}

#[test]
fn deadlines_out_of_range_are_refused_naming_the_flag() {
    let cases = [
        ("5000000000000000s", "5000000000000000s is more than the maximum of 5m"),
        ("18446744073709551615s", "18446744073709551615s is more than the maximum of 5m"),
        ("18446744073709551615h", "duration \"18446744073709551615h\" is too large"),
        ("0s", "must be more than 0"),
        ("0ms", "must be more than 0"),
        ("6m", "6m is more than the maximum of 5m"),
        ("fast", "invalid duration \"fast\""),
    ];
    for (value, why) in cases {
        let line = error_line(&inspect_with(&["--deadline", value]));
        assert!(line.starts_with(&format!("error: invalid value '{value}' for '--deadline <DURATION>': {why}")), "{line}");
    }
    assert!(inspect_with(&["--deadline", "5m"]).status.success());
}

#[test]
fn memory_caps_out_of_range_are_refused_naming_the_flag_not_the_plugin() {
    let cases = [
        ("1Mi", "1Mi is less than the 2Mi a plugin needs to start"),
        ("0", "0 is less than the 2Mi a plugin needs to start"),
        ("5Gi", "5Gi is more than the maximum of 4Gi"),
        ("99999999999Gi", "size \"99999999999Gi\" is too large"),
    ];
    for (value, why) in cases {
        let line = error_line(&inspect_with(&["--memory", value]));
        assert!(line.starts_with(&format!("error: invalid value '{value}' for '--memory <SIZE>': {why}")), "{line}");
        assert!(!line.contains("WebAssembly"), "{line}");
    }
    assert!(inspect_with(&["--memory", "2Mi"]).status.success(), "the documented minimum starts the testbed");
}

#[test]
fn run_flags_out_of_range_are_refused_before_connecting() {
    let dir = std::env::temp_dir();
    let plugins = dir.to_str().unwrap();
    let cases: [(&[&str], &str); 8] = [
        (&["--concurrency", "0"], "invalid value '0' for '--concurrency <CONCURRENCY>': 0 is not between 1 and 256"),
        (&["--concurrency", "100000"], "for '--concurrency <CONCURRENCY>': 100000 is not between 1 and 256"),
        (&["--resync", "1ms"], "for '--resync <RESYNC>': 1ms is less than the minimum of 1s"),
        (&["--resync", "9999h"], "for '--resync <RESYNC>': 9999h is more than the maximum of 168h"),
        (&["--leader-elect-lease-duration", "0s"], "for '--leader-elect-lease-duration <LEADER_ELECT_LEASE_DURATION>': 0s"),
        (&["--leader-elect-retry-period", "10ms"], "'--leader-elect-retry-period <LEADER_ELECT_RETRY_PERIOD>': 10ms"),
        (&["--leader-elect-renew-deadline", "2h"], "'--leader-elect-renew-deadline <LEADER_ELECT_RENEW_DEADLINE>': 2h"),
        (&["--metrics-addr", "localhost"], "for '--metrics-addr <METRICS_ADDR>': invalid address \"localhost\""),
    ];
    for (flags, expected) in cases {
        let mut args = vec!["run", "--plugins", plugins, "--kubeconfig", "/nonexistent/kubeconfig"];
        args.extend_from_slice(flags);
        let line = error_line(&wasmop(&args));
        assert!(line.starts_with("error: invalid value") && line.contains(expected), "{flags:?}: {line}");
    }
}

#[test]
fn policy_values_get_the_same_range_checks_as_flags() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    let cases = [
        ("defaults: {deadline: 10m}", "invalid policy: defaults.deadline: 10m is more than the maximum of 5m"),
        ("defaults: {deadline: 18446744073709551615h}", "invalid policy: defaults.deadline: duration"),
        ("plugins: {testbed: {memory: 1Mi}}", "invalid policy: plugins.testbed.memory: 1Mi is less than the 2Mi a plugin needs"),
        ("plugins: {testbed: {memory: 64Gi}}", "invalid policy: plugins.testbed.memory: 64Gi is more than the maximum of 4Gi"),
    ];
    for (yaml, expected) in cases {
        std::fs::write(&policy, yaml).unwrap();
        let line = error_line(&inspect_with(&["--policy", policy.to_str().unwrap()]));
        assert!(line.starts_with(&format!("error: {expected}")), "{yaml}: {line}");
    }
}
