//! `wasmop new --lang rust`: a crate on the `wasmop-sdk` (its `Cargo.toml` with the SDK
//! dependency and the release profile, `.cargo/config.toml` with the guest stack size, and `src/lib.rs`: a reconcile skeleton with unit tests).

use std::fmt::Write as _;

use anyhow::{Context as _, bail};

use super::NewArgs;
use crate::contract::Kind;

/// The git repository of the SDK, for the default dependency line.
const REPOSITORY: &str = env!("CARGO_PKG_REPOSITORY");

/// The crate's own files (the CRD and the sample are added by the caller).
///
/// # Errors
/// An `--sdk-path` that is not a directory with a `Cargo.toml`.
pub(super) fn files(args: &NewArgs) -> anyhow::Result<Vec<(String, String)>> {
    let sdk = match &args.sdk_path {
        Some(path) => {
            let path = std::fs::canonicalize(path).with_context(|| format!("SDK path {}", path.display()))?;
            if !path.join("Cargo.toml").is_file() {
                bail!("SDK path {}: no Cargo.toml there (give the checkout's guest-sdk directory)", path.display());
            }
            format!("wasmop-sdk = {{ path = {:?} }}", path.display().to_string())
        }
        None => format!("wasmop-sdk = {{ git = {REPOSITORY:?}, tag = \"v{}\" }}", env!("CARGO_PKG_VERSION")),
    };
    Ok(vec![
        ("Cargo.toml".into(), CARGO_TOML.replace("{name}", &args.name).replace("{sdk}", &sdk)),
        ("src/lib.rs".into(), lib_rs(args)),
        (".gitignore".into(), "/target\n".to_owned()),
        (".cargo/config.toml".into(), CARGO_CONFIG.to_owned()),
    ])
}

/// The commands to run in the new crate, one a line.
pub(super) fn next_steps(args: &NewArgs) -> Vec<String> {
    let lib = args.name.replace('-', "_");
    vec![
        "cargo test".into(),
        "cargo build --target wasm32-wasip2 --release".into(),
        format!("wasmop reconcile --plugin target/wasm32-wasip2/release/{lib}.wasm --object sample.yaml"),
    ]
}

/// `Kind::new("group", "version", "Kind")` as Rust source.
fn kind_expr(kind: &Kind) -> String {
    format!("Kind::new({:?}, {:?}, {:?})", kind.group, kind.version, kind.kind)
}

fn lib_rs(args: &NewArgs) -> String {
    let parent = &args.parent;
    let mut children = String::new();
    let mut manifest_children = String::new();
    for child in &args.children {
        let _ = writeln!(children, "        {},", kind_expr(child));
        let _ = write!(manifest_children, "\n            .child({})", kind_expr(child));
    }
    LIB_RS
        .replace("{name}", &args.name)
        .replace("{Kind}", &parent.kind)
        .replace("{api_version}", &parent.api_version())
        .replace("{parent_kind}", &kind_expr(parent))
        .replace("{children}", &children)
        .replace("{manifest_children}", &manifest_children)
        .replace("{child_count}", &args.children.len().to_string())
}

const CARGO_TOML: &str = r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
# cdylib: the plugin component (`cargo build --target wasm32-wasip2 --release`);
# rlib: the same logic called natively by `cargo test`.
crate-type = ["cdylib", "rlib"]

[dependencies]
{sdk}
serde = { version = "1", features = ["derive"] }
serde_json = "1"
# Typed Kubernetes objects (`Kind::of::<Deployment>()`, `req.children_as::<Deployment>(..)`): the
# plugin, not the SDK, picks the Kubernetes version of k8s-openapi. Uncomment to use it:
# k8s-openapi = { version = "0.29", features = ["v1_33"] }
# wasmop-sdk's `k8s-openapi` feature (on by default) then gives `Kind::of`.

# Its own workspace: the crate builds the same inside or outside another repository.
[workspace]

# The release profile of a plugin: optimised for speed, one codegen unit, no symbols. The
# guest's code runs on every reconcile; `opt-level = 3` made the memcached example's calls about
# 1.5x faster than "s" for a 10 % larger component (measured, see the plugin guide).
[profile.release]
opt-level = 3
codegen-units = 1
strip = true
"#;

/// `.cargo/config.toml`: a 128 KiB guest stack instead of Rust's 1 MiB default for wasm, the
/// memory every call starts from (see the plugin guide).
const CARGO_CONFIG: &str = r#"# A 128 KiB guest stack (Rust's default for wasm is 1 MiB): the host gives every call a fresh
# instance, and the stack is most of the memory each call starts from. 128 KiB holds the SDK's
# deepest use (serde_json's 128 nesting levels); an overflow is a clean trap, not corruption.
[target.wasm32-wasip2]
rustflags = ["-C", "link-arg=-zstack-size=131072"]
"#;

const LIB_RS: &str = r#"//! The `{name}` wasmop plugin: reconciles `{Kind}` ({api_version}).
//!
//! `cargo test` runs the logic natively; `cargo build --target wasm32-wasip2 --release` builds
//! the plugin, and `wasmop reconcile --plugin target/wasm32-wasip2/release/<crate>.wasm
//! --object sample.yaml` prints what the host would write for the sample.

use serde::Deserialize;
use serde_json::{Value, json};
use wasmop_sdk::prelude::*;

/// The kind this plugin reconciles.
pub fn parent_kind() -> Kind {
    {parent_kind}
}

/// The kinds this plugin creates for each parent (one object of each, named like the parent).
pub fn child_kinds() -> Vec<Kind> {
    vec![
{children}    ]
}

/// The fields of a `{Kind}` the plugin reads. Add the ones your CRD defines.
#[derive(Debug, Deserialize)]
pub struct {Kind} {
    /// The desired state.
    #[serde(default)]
    pub spec: Spec,
}

/// `{Kind}.spec`.
#[derive(Debug, Default, Deserialize)]
pub struct Spec {
    /// A message for the children (in a ConfigMap's data).
    #[serde(default)]
    pub message: String,
}

/// The object of `kind` this plugin wants for the parent: named like the parent, in its
/// namespace. Fill in each kind's fields here (a Deployment needs its spec).
pub fn desired(kind: &Kind, req: &Request, spec: &Spec) -> Value {
    let mut child = json!({
        "apiVersion": kind.api_version(),
        "kind": kind.kind,
        "metadata": {"name": req.name(), "namespace": req.namespace(), "labels": {"app.kubernetes.io/managed-by": "{name}"}},
    });
    if kind.group.is_empty() && kind.kind == "ConfigMap" {
        child["data"] = json!({"message": spec.message});
    }
    child
}

/// The plugin.
#[derive(Debug)]
pub struct {Kind}Reconciler;

impl Plugin for {Kind}Reconciler {
    fn manifest() -> Manifest {
        Manifest::new("{name}", env!("CARGO_PKG_VERSION"))
            .description("Reconciles {Kind}")
            .parent(parent_kind(), Scope::Namespaced){manifest_children}
            .prune(true)
    }

    fn reconcile(req: Request, _ctx: &Context) -> Result<Response, Error> {
        // A spec of the wrong shape is a terminal error: the host records it and waits for an edit.
        let parent: {Kind} = req.parent_as()?;
        let mut response = Response::new();
        let mut waiting = Vec::new();
        for kind in child_kinds() {
            if req.child(&kind, req.name()).is_none() {
                waiting.push(kind.to_string());
            }
            response = response.apply(desired(&kind, &req, &parent.spec));
        }
        let ready = if waiting.is_empty() {
            Condition::true_("Ready", "ChildrenReady", "every child exists")
        } else {
            Condition::false_("Ready", "Creating", format!("waiting for {}", waiting.join(", ")))
        };
        Ok(response.status(json!({"children": child_kinds().len() - waiting.len()})).condition(ready))
    }
}

wasmop_sdk::export_plugin!({Kind}Reconciler);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn sample(spec: Value) -> Request {
        Request::new(json!({
            "apiVersion": "{api_version}", "kind": "{Kind}",
            "metadata": {"name": "sample", "namespace": "default", "generation": 1},
            "spec": spec,
        }))
    }

    fn reconcile(req: Request) -> Result<Response, Error> {
        let ctx = Context::fixture_for(&req, vec![]).restrict_to(&{Kind}Reconciler::manifest());
        {Kind}Reconciler::reconcile(req, &ctx)?.validate()
    }

    #[test]
    fn applies_one_child_of_each_kind_and_waits_for_them() {
        let response = reconcile(sample(json!({"message": "hi"}))).unwrap();
        assert_eq!(response.children().len(), {child_count});
        for kind in child_kinds() {
            assert!(response.child(&kind, "sample").is_some(), "{kind}");
        }
        let ready = response.condition_of("Ready").unwrap();
        assert_eq!(ready.status, ConditionStatus::from(child_kinds().is_empty()));
    }

    #[test]
    fn ready_once_every_child_is_observed() {
        let desired = reconcile(sample(json!({}))).unwrap();
        let observed = desired.children().iter().cloned().fold(sample(json!({})), Request::with_child);
        let response = reconcile(observed).unwrap();
        assert_eq!(response.condition_of("Ready").unwrap().status, ConditionStatus::True);
        assert_eq!(response.status_patch().unwrap()["children"], {child_count});
    }

    #[test]
    fn a_spec_of_the_wrong_shape_is_a_terminal_error() {
        let error = reconcile(sample(json!({"message": 3}))).unwrap_err();
        assert!(!error.is_retryable());
        assert!(error.message().contains("does not match the expected type"), "{error}");
    }
}
"#;

#[cfg(test)]
mod tests {
    use super::super::Lang;
    use super::super::generate;
    use super::super::tests::{args, file, paths};
    use super::*;

    #[test]
    fn the_crate_declares_parent_and_children_and_depends_on_the_sdk_by_git() {
        let files =
            generate(&args("my-db", "example.com/v1/Database", &["v1/ConfigMap", "apps/v1/Deployment"], Lang::Rust)).unwrap();
        assert_eq!(paths(&files), [".cargo/config.toml", ".gitignore", "Cargo.toml", "crd.yaml", "sample.yaml", "src/lib.rs"]);
        let lib = file(&files, "src/lib.rs");
        assert!(lib.contains(r#"Kind::new("example.com", "v1", "Database")"#), "{lib}");
        assert!(lib.contains(r#".child(Kind::new("", "v1", "ConfigMap"))"#), "{lib}");
        assert!(lib.contains("pub struct DatabaseReconciler;"), "{lib}");
        let cargo = file(&files, "Cargo.toml");
        assert!(cargo.contains("name = \"my-db\""), "{cargo}");
        let sdk = format!("wasmop-sdk = {{ git = \"{REPOSITORY}\", tag = \"v{}\" }}", env!("CARGO_PKG_VERSION"));
        assert!(cargo.contains(&sdk), "{cargo}");
        assert!(cargo.contains("[profile.release]\nopt-level = 3"), "{cargo}");
        assert!(file(&files, ".cargo/config.toml").contains("link-arg=-zstack-size=131072"));
    }
}
