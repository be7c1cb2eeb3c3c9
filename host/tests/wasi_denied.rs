//! What a plugin cannot reach: files, the environment, the network. And what it can: its
//! stdout, which reaches the host's log.

use std::net::TcpListener;
use std::process::Command;
use std::sync::Arc;

use serde_json::{Value, json};
use wasmop::contract::Request;
use wasmop::objects::MemoryCache;
use wasmop::runtime::Runtime;
use wasmop_e2e::fixtures::{testbed, testbed_cr};

#[tokio::test]
async fn files_environment_and_network_are_denied_and_nothing_leaks() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "host-only secret").unwrap();
    let written = dir.path().join("written-by-plugin");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    // SAFETY: set before any thread of this test reads the environment; the variable exists only
    // so that a leak would be visible.
    unsafe { std::env::set_var("WASMOP_TEST_HOST_SECRET", "leaked") };

    let runtime = Runtime::builder().artifact_dir(None).build().unwrap();
    let plugin = runtime.load_file(testbed()).await.unwrap();
    let cr = testbed_cr("t", "escape", json!({"read": secret, "write": written, "port": port}));
    let (response, _) =
        plugin.reconcile(&Request::new(cr), Arc::new(MemoryCache::default())).await.expect("the call itself succeeds");
    let escape = &response.status.expect("status")["escape"];
    eprintln!("{escape:#}");

    for attempt in ["readFile", "writeFile", "listRoot", "listCwd", "home", "connect", "listen", "udp", "resolve"] {
        assert_eq!(escape[attempt]["ok"], false, "{attempt} must be denied: {}", escape[attempt]);
        let detail = escape[attempt]["detail"].as_str().unwrap();
        assert!(!detail.is_empty(), "{attempt}: the plugin gets an error it can report");
    }
    assert_eq!(escape["env"], json!([]), "no environment variable reaches the plugin");
    assert_eq!(escape["args"], json!([]), "no arguments reach the plugin");
    assert!(!escape.to_string().contains("host-only secret"), "the file's content leaked: {escape}");
    assert!(!escape.to_string().contains("leaked"), "the host's environment leaked: {escape}");
    assert!(!written.exists(), "the plugin wrote a file on the host");
    assert_eq!(listener.accept().map(|_| ()).unwrap_err().kind(), std::io::ErrorKind::WouldBlock, "the plugin reached a socket");
}

#[test]
fn plugin_stdout_reaches_the_host_log_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let cr = dir.path().join("log.yaml");
    std::fs::write(&cr, "apiVersion: test.wasmop.dev/v1\nkind: Testbed\nmetadata: {name: chatty}\nspec: {mode: log}\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(["reconcile", "--plugin", testbed().to_str().unwrap(), "--object", cr.to_str().unwrap(), "--output", "json"])
        .env("WASMOP_CACHE_DIR", dir.path().join("cache"))
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let log = String::from_utf8_lossy(&out.stderr);
    let line =
        log.lines().find(|l| l.contains("testbed chatty: stdout")).unwrap_or_else(|| panic!("no stdout line in the log:\n{log}"));
    assert!(line.contains("INFO") && line.contains("stdout"), "{line}");
    let stderr_line = log.lines().find(|l| l.contains("testbed chatty: stderr")).expect("the stderr line is logged too");
    assert!(stderr_line.contains("WARN"), "{stderr_line}");
    // The process's stdout carries the plan only: the plugin's output went to the log.
    let plan: Value = serde_json::from_slice(&out.stdout).expect("stdout is the JSON plan alone");
    assert_eq!(plan["statusPatch"]["status"]["phase"], "Ready");
}
