//! Plugin crates outside this repository, built the way a plugin author builds them: `wasmop
//! new` into a temporary directory, `cargo test`, `cargo build --target wasm32-wasip2 --release`,
//! `wasmop reconcile` on the sample; and a plugin that picks its own Kubernetes version of
//! k8s-openapi next to the SDK.
//!
//! The crates depend on this checkout's SDK by path (what `wasmop new` picks for a binary built
//! from a checkout, or `--sdk-path`). They are built
//! offline, with this workspace's `Cargo.lock` copied in so that cargo picks the versions already
//! downloaded; their target directory is shared (`$CARGO_TARGET_DIR/outside-plugins`), so only
//! the first run compiles the dependencies.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use wasmop_e2e::fixtures::workspace;

fn target_dir() -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace().join("target"), PathBuf::from);
    base.join("outside-plugins")
}

/// A temporary directory outside the workspace.
fn outside() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temporary directory");
    assert!(!dir.path().starts_with(workspace()), "{} is inside the workspace", dir.path().display());
    dir
}

fn check(what: &str, output: Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{what} failed ({}):\n{stdout}\n{}", output.status, String::from_utf8_lossy(&output.stderr));
    stdout
}

/// `cargo ARGS` in `dir`, offline, into the shared target directory.
fn cargo(dir: &Path, args: &[&str]) -> String {
    std::fs::copy(workspace().join("Cargo.lock"), dir.join("Cargo.lock")).expect("copy Cargo.lock");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .env("CARGO_NET_OFFLINE", "true")
        .output()
        .expect("cargo runs");
    check(&format!("cargo {}", args.join(" ")), output)
}

fn wasmop(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_wasmop")).args(args).output().expect("wasmop runs");
    check(&format!("wasmop {}", args.join(" ")), output)
}

#[test]
fn a_new_plugin_tests_builds_and_reconciles_its_sample_outside_the_repository() {
    let tmp = outside();
    let dir = tmp.path().join("hello");
    let created = wasmop(&[
        "new",
        "hello",
        "--parent",
        "example.com/v1/Hello",
        "--child",
        "v1/ConfigMap",
        "--dir",
        dir.to_str().unwrap(),
        "--webhook",
        "validating:check",
        "--webhook",
        "mutating:set-defaults",
    ]);
    assert!(created.starts_with("created plugin hello in "), "{created}");
    // Built from this checkout, wasmop depends the crate on the checkout's SDK by default.
    let sdk = std::fs::canonicalize(workspace().join("guest-sdk")).unwrap();
    assert!(
        created.contains(&format!("it depends on the SDK at {} (the checkout wasmop was built from", sdk.display())),
        "{created}"
    );
    assert!(created.contains("--sdk-path DIR") && created.contains("--dir DIR"), "{created}");
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(manifest.contains(&format!("wasmop-sdk = {{ path = {:?} }}", sdk.to_str().unwrap())), "{manifest}");

    let tests = cargo(&dir, &["test"]);
    assert!(tests.contains("test result: ok. 5 passed"), "three reconcile tests and one per webhook: {tests}");
    cargo(&dir, &["build", "--target", "wasm32-wasip2", "--release"]);

    let wasm = target_dir().join("wasm32-wasip2/release/hello.wasm");
    let sample = dir.join("sample.yaml");
    let plan = wasmop(&[
        "reconcile",
        "--no-cache",
        "--plugin",
        wasm.to_str().unwrap(),
        "--object",
        sample.to_str().unwrap(),
        "--crds",
        dir.join("crd.yaml").to_str().unwrap(),
        "--now",
        "2024-01-01T00:00:00Z",
        "--output",
        "json",
    ]);
    let plan: Value = serde_json::from_str(&plan).unwrap();
    assert_eq!(plan["apply"][0]["kind"], "ConfigMap", "{plan:#}");
    assert_eq!(plan["apply"][0]["data"]["message"], "hello");
    assert_eq!(plan["apply"][0]["metadata"]["ownerReferences"][0]["kind"], "Hello");
    let conditions = &plan["statusPatch"]["status"]["conditions"];
    assert_eq!(conditions[0]["type"], "Ready");
    assert_eq!(conditions[0]["status"], "False", "the ConfigMap does not exist yet");
    assert_eq!(conditions[1]["type"], "Reconciled");
    assert_eq!(conditions[1]["status"], "True");
    assert_eq!(conditions[1]["observedGeneration"], 1, "the sample is reconciled as just created");

    // Each webhook, called offline on the sample and on a Hello without a message.
    let crd = dir.join("crd.yaml");
    let admit = |webhook: &str, object: &Path| {
        Command::new(env!("CARGO_BIN_EXE_wasmop"))
            .args(["admit", "--no-cache", "--plugin", wasm.to_str().unwrap(), "--webhook", webhook])
            .args(["--object", object.to_str().unwrap(), "--crds", crd.to_str().unwrap()])
            .output()
            .expect("wasmop runs")
    };
    let silent = tmp.path().join("silent.yaml");
    std::fs::write(&silent, "apiVersion: example.com/v1\nkind: Hello\nmetadata: {name: silent}\nspec: {}\n").unwrap();
    assert_eq!(check("wasmop admit check", admit("check", &sample)), "allowed\n");
    let denied = admit("check", &silent);
    assert_eq!(denied.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&denied.stdout), "denied (422): spec.message must not be empty\n");
    let defaulted = check("wasmop admit set-defaults", admit("set-defaults", &silent));
    assert!(defaulted.starts_with("allowed\npatch (RFC 6902 JSON Patch):\n"), "{defaulted}");
    assert!(defaulted.contains(r#""path": "/spec/message""#) && defaulted.contains(r#""value": "hello""#), "{defaulted}");
}

/// Before the SDK left the version to the plugin, this failed with k8s-openapi's "Both v1_33 and
/// v1_35 features are enabled".
#[test]
fn a_plugin_picks_its_own_kubernetes_version_of_k8s_openapi() {
    let tmp = outside();
    let dir = tmp.path();
    let sdk = workspace().join("guest-sdk");
    let manifest = format!(
        r#"[package]
name = "pinned"
version = "0.1.0"
edition = "2024"

[lib]
crate-type = ["cdylib", "rlib"]

[dependencies]
wasmop-sdk = {{ path = {:?}, features = ["k8s-openapi"] }}
k8s-openapi = {{ version = "0.29", features = ["v1_35"] }}
serde_json = "1"

[workspace]
"#,
        sdk.to_str().unwrap()
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    std::fs::create_dir(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("src/lib.rs"),
        r#"use k8s_openapi::api::apps::v1::Deployment;
use wasmop_sdk::prelude::*;

pub struct Pinned;

impl Plugin for Pinned {
    fn manifest() -> Manifest {
        Manifest::new("pinned", "0.1.0")
            .parent(Kind::new("example.com", "v1", "Pinned"), Scope::Namespaced)
            .child(Kind::of::<Deployment>())
    }

    fn reconcile(_req: Request, _ctx: &Context) -> Result<Response, Error> {
        Ok(Response::new())
    }
}

wasmop_sdk::export_plugin!(Pinned);
"#,
    )
    .unwrap();
    cargo(dir, &["check", "--target", "wasm32-wasip2", "--release"]);
}
