//! `wasmop new --lang rust`: a crate on the `wasmop-sdk` (its `Cargo.toml` with the SDK
//! dependency and the release profile, `.cargo/config.toml` with the guest stack size, and `src/lib.rs`: a reconcile skeleton with unit tests).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use super::NewArgs;
use crate::contract::Kind;

/// The crate's README (`{{placeholders}}` filled by `render`).
const README: &str = include_str!("../templates/rust/README.md");

/// The git repository of the SDK, for the default dependency line.
const REPOSITORY: &str = env!("CARGO_PKG_REPOSITORY");

/// The SDK of the checkout this binary was built from (`<checkout>/guest-sdk`), known at build
/// time; `None` when that directory is gone (a binary installed elsewhere, a removed checkout).
fn checkout_sdk() -> Option<PathBuf> {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk");
    std::fs::canonicalize(sdk).ok().filter(|p| p.join("Cargo.toml").is_file())
}

/// The SDK dependency of a new crate, and where it comes from in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SdkDependency {
    /// The line in `Cargo.toml`.
    pub line: String,
    /// `the SDK at PATH (--sdk-path)`, `...(the checkout wasmop was built from)` or `the SDK
    /// from REPOSITORY, tag vVERSION`.
    pub source: String,
}

/// `--sdk-path` when given, else the checkout this binary was built from when its SDK is
/// there, else the git repository at this version's tag.
///
/// # Errors
/// An `--sdk-path` that is not a directory with a `Cargo.toml`.
pub(super) fn sdk_dependency(args: &NewArgs) -> anyhow::Result<SdkDependency> {
    choose_sdk(args.sdk_path.as_deref(), checkout_sdk())
}

fn choose_sdk(sdk_path: Option<&Path>, checkout: Option<PathBuf>) -> anyhow::Result<SdkDependency> {
    let by_path = |path: &Path, why: &str| SdkDependency {
        line: format!("wasmop-sdk = {{ path = {:?} }}", path.display().to_string()),
        source: format!("the SDK at {} ({why})", path.display()),
    };
    Ok(match (sdk_path, checkout) {
        (Some(path), _) => {
            let path = std::fs::canonicalize(path).with_context(|| format!("SDK path {}", path.display()))?;
            if !path.join("Cargo.toml").is_file() {
                bail!("SDK path {}: no Cargo.toml there (give the checkout's guest-sdk directory)", path.display());
            }
            by_path(&path, "--sdk-path")
        }
        (None, Some(checkout)) => by_path(&checkout, "the checkout wasmop was built from; --sdk-path picks another"),
        (None, None) => {
            let tag = format!("v{}", env!("CARGO_PKG_VERSION"));
            SdkDependency {
                line: format!("wasmop-sdk = {{ git = {REPOSITORY:?}, tag = {tag:?} }}"),
                source: format!("the SDK from {REPOSITORY}, tag {tag} (--sdk-path DIR depends on a local checkout's)"),
            }
        }
    })
}

/// The crate's own files (the CRD and the sample are added by the caller).
///
/// # Errors
/// An `--sdk-path` that is not a directory with a `Cargo.toml`.
pub(super) fn files(args: &NewArgs) -> anyhow::Result<Vec<(String, String)>> {
    let sdk = sdk_dependency(args)?;
    Ok(vec![
        ("Cargo.toml".into(), CARGO_TOML.replace("{name}", &args.name).replace("{sdk}", &sdk.line)),
        ("src/lib.rs".into(), lib_rs(args)),
        ("README.md".into(), readme(args, &sdk)),
        (".gitignore".into(), "/target\n".to_owned()),
        (".cargo/config.toml".into(), CARGO_CONFIG.to_owned()),
    ])
}

/// The commands to run in the new crate, one a line.
pub(super) fn next_steps(args: &NewArgs) -> Vec<String> {
    let lib = args.name.replace('-', "_");
    let wasm = format!("target/wasm32-wasip2/release/{lib}.wasm");
    let mut steps = vec![
        "cargo test".into(),
        "cargo build --target wasm32-wasip2 --release".into(),
        format!("wasmop reconcile --plugin {wasm} --object sample.yaml{}", super::crds_flag(args)),
    ];
    steps.extend(super::admit_steps(args, &wasm));
    steps
}

/// The crate's README: its files and the commands that test, build and try it.
fn readme(args: &NewArgs, sdk: &SdkDependency) -> String {
    let lib = args.name.replace('-', "_");
    let wasm = format!("target/wasm32-wasip2/release/{lib}.wasm");
    let admit_commands: String = super::admit_steps(args, &wasm).iter().map(|c| format!("    {c}\n")).collect();
    let readme_admit = if args.webhooks.is_empty() { "" } else { ", `admit` (its webhooks)" };
    let sdk_note = format!(" ({})", sdk.source);
    let mut values: Vec<(&str, &str)> = vec![
        ("lib", &lib),
        ("admit_commands", &admit_commands),
        ("readme_admit", readme_admit),
        ("sdk_note", &sdk_note),
        ("crds_flag", super::crds_flag(args)),
    ];
    let common = super::common_values(args);
    values.extend(common.iter().map(|(k, v)| (*k, v.as_str())));
    super::render(README, &values)
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
        .replace("{manifest_webhooks}", &manifest_webhooks(args))
        .replace("{admit}", &admit(args))
        .replace("{webhook_functions}", &webhook_functions(args))
        .replace("{webhook_tests}", &webhook_tests(args))
        .replace("{admission_helper}", if args.webhooks.is_empty() { "" } else { ADMISSION_HELPER_RS })
        .replace("{name}", &args.name)
        .replace("{Kind}", &parent.kind)
        .replace("{api_version}", &parent.api_version())
        .replace("{parent_kind}", &kind_expr(parent))
        .replace("{children}", &children)
        .replace("{manifest_children}", &manifest_children)
        .replace("{child_count}", &args.children.len().to_string())
}

/// The manifest's `.webhook(...)` calls: each on the parent's CREATE and UPDATE.
fn manifest_webhooks(args: &NewArgs) -> String {
    let parent = &args.parent;
    let plural = super::plural(&parent.kind);
    let mut text = String::new();
    for webhook in &args.webhooks {
        let constructor = if webhook.is_mutating() { "mutating" } else { "validating" };
        let _ = write!(
            text,
            "\n            .webhook(Webhook::{constructor}({:?}).with_rule(Rule::new([Operation::Create, Operation::Update], {:?}, {:?}, {plural:?})))",
            webhook.name, parent.group, parent.version
        );
    }
    text
}

/// `Plugin::admit`, dispatching on the webhook's name; nothing without webhooks.
fn admit(args: &NewArgs) -> String {
    if args.webhooks.is_empty() {
        return String::new();
    }
    let mut arms = String::new();
    for webhook in &args.webhooks {
        let reference = if webhook.is_mutating() { "" } else { "&" };
        let _ = writeln!(arms, "            {:?} => admit_{}({reference}req),", webhook.name, webhook.ident());
    }
    ADMIT_RS.replace("{arms}", &arms)
}

/// One function per webhook: the trivial check or default to replace.
fn webhook_functions(args: &NewArgs) -> String {
    args.webhooks
        .iter()
        .map(|w| {
            let template = if w.is_mutating() { MUTATING_RS } else { VALIDATING_RS };
            template.replace("{webhook}", &w.name).replace("{ident}", &w.ident()).replace("{Kind}", &args.parent.kind)
        })
        .collect()
}

/// One unit test per webhook.
fn webhook_tests(args: &NewArgs) -> String {
    args.webhooks
        .iter()
        .map(|w| {
            let template = if w.is_mutating() { MUTATING_TEST_RS } else { VALIDATING_TEST_RS };
            template.replace("{ident}", &w.ident())
        })
        .collect()
}

const ADMISSION_HELPER_RS: &str = r#"
    fn admission(spec: Value) -> AdmissionRequest {
        AdmissionRequest::new(Operation::Create, json!({
            "apiVersion": "{api_version}", "kind": "{Kind}",
            "metadata": {"name": "sample", "namespace": "default"},
            "spec": spec,
        }))
    }
"#;

const ADMIT_RS: &str = r#"

    fn admit(webhook: &str, req: AdmissionRequest, _ctx: &Context) -> Result<Verdict, Error> {
        match webhook {
{arms}            other => Err(Error::terminal(format!("no webhook named {other:?}"))),
        }
    }"#;

const VALIDATING_RS: &str = r#"
/// The `{webhook}` webhook (validating, on {Kind} CREATE and UPDATE): a {Kind} with an empty
/// `spec.message` is refused. Replace this check with your own.
pub fn admit_{ident}(req: &AdmissionRequest) -> Result<Verdict, Error> {
    let object: {Kind} = req.object_as()?;
    Ok(if object.spec.message.is_empty() {
        Verdict::deny_with(422, "spec.message must not be empty")
    } else {
        Verdict::allow()
    })
}
"#;

const MUTATING_RS: &str = r#"
/// The `{webhook}` webhook (mutating, on {Kind} CREATE and UPDATE): a {Kind} without
/// `spec.message` gets `hello`. Replace this default with your own; the host computes the JSON
/// Patch from the object returned.
pub fn admit_{ident}(req: AdmissionRequest) -> Result<Verdict, Error> {
    let mut object = req.object.ok_or_else(|| Error::terminal("the request has no object"))?;
    let spec_is_object = object["spec"].is_object() || object["spec"].is_null();
    if object.pointer("/spec/message").is_some() || !spec_is_object {
        return Ok(Verdict::allow());
    }
    object["spec"]["message"] = json!("hello");
    Ok(Verdict::mutate(object))
}
"#;

const VALIDATING_TEST_RS: &str = r#"
    #[test]
    fn webhook_{ident}_refuses_an_empty_message() {
        assert!(admit_{ident}(&admission(json!({"message": "hi"}))).unwrap().is_allowed());
        let verdict = admit_{ident}(&admission(json!({}))).unwrap();
        assert_eq!(verdict.message(), Some("spec.message must not be empty"));
    }
"#;

const MUTATING_TEST_RS: &str = r#"
    #[test]
    fn webhook_{ident}_sets_an_absent_message() {
        let verdict = admit_{ident}(admission(json!({}))).unwrap();
        assert_eq!(verdict.mutated().unwrap()["spec"]["message"], "hello");
        assert_eq!(admit_{ident}(admission(json!({"message": "hi"}))).unwrap(), Verdict::allow());
    }
"#;

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
# and add `features = ["k8s-openapi"]` to the wasmop-sdk line for `Kind::of` (the SDK's
# `k8s-openapi` feature, off by default).

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
        "metadata": {"name": req.name(), "namespace": req.namespace()},
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
            .prune(true){manifest_webhooks}
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
    }{admit}
}
{webhook_functions}
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
{admission_helper}
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
{webhook_tests}}
"#;

#[cfg(test)]
mod tests {
    use super::super::Lang;
    use super::super::generate;
    use super::super::tests::{args, file, paths};
    use super::*;

    #[test]
    fn the_crate_declares_parent_and_children_and_depends_on_this_checkouts_sdk() {
        let files =
            generate(&args("my-db", "example.com/v1/Database", &["v1/ConfigMap", "apps/v1/Deployment"], Lang::Rust)).unwrap();
        assert_eq!(
            paths(&files),
            [".cargo/config.toml", ".gitignore", "Cargo.toml", "README.md", "crd.yaml", "sample.yaml", "src/lib.rs"]
        );
        let lib = file(&files, "src/lib.rs");
        assert!(lib.contains(r#"Kind::new("example.com", "v1", "Database")"#), "{lib}");
        assert!(lib.contains(r#".child(Kind::new("", "v1", "ConfigMap"))"#), "{lib}");
        assert!(lib.contains("pub struct DatabaseReconciler;"), "{lib}");
        let cargo = file(&files, "Cargo.toml");
        assert!(cargo.contains("name = \"my-db\""), "{cargo}");
        let checkout = std::fs::canonicalize(concat!(env!("CARGO_MANIFEST_DIR"), "/../guest-sdk")).unwrap();
        let sdk = format!("wasmop-sdk = {{ path = {:?} }}", checkout.display().to_string());
        assert!(cargo.contains(&sdk), "built from this checkout, the crate depends on its SDK: {cargo}");
        assert!(cargo.contains("[profile.release]\nopt-level = 3"), "{cargo}");
        assert!(file(&files, ".cargo/config.toml").contains("link-arg=-zstack-size=131072"));
    }

    #[test]
    fn the_sdk_is_the_flags_else_the_checkouts_else_the_git_tag() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Cargo.toml"), "[package]\n").unwrap();
        let given = std::fs::canonicalize(dir.path()).unwrap();
        let checkout = PathBuf::from("/src/wasmop/guest-sdk");
        let flag = choose_sdk(Some(dir.path()), Some(checkout.clone())).unwrap();
        assert_eq!(flag.line, format!("wasmop-sdk = {{ path = {:?} }}", given.display().to_string()));
        assert!(flag.source.ends_with("(--sdk-path)"), "{}", flag.source);
        let built = choose_sdk(None, Some(checkout)).unwrap();
        assert_eq!(built.line, "wasmop-sdk = { path = \"/src/wasmop/guest-sdk\" }");
        assert!(built.source.contains("the checkout wasmop was built from"), "{}", built.source);
        let git = choose_sdk(None, None).unwrap();
        let tag = format!("v{}", env!("CARGO_PKG_VERSION"));
        assert_eq!(git.line, format!("wasmop-sdk = {{ git = \"{REPOSITORY}\", tag = \"{tag}\" }}"));
        let empty = tempfile::tempdir().unwrap();
        let err = choose_sdk(Some(empty.path()), None).unwrap_err().to_string();
        assert!(err.contains("no Cargo.toml there"), "{err}");
    }

    #[test]
    fn the_child_carries_no_label_the_host_overwrites_and_the_feature_comment_is_true() {
        let files = generate(&args("my-db", "example.com/v1/Database", &["v1/ConfigMap"], Lang::Rust)).unwrap();
        assert!(!file(&files, "src/lib.rs").contains("managed-by"));
        let cargo = file(&files, "Cargo.toml");
        assert!(cargo.contains("`k8s-openapi` feature, off by default"), "{cargo}");
        let sdk_manifest = include_str!("../../../../guest-sdk/Cargo.toml");
        assert!(sdk_manifest.contains("default = [\"bump-alloc\"]"), "the SDK's default features changed: update the comment");
    }

    #[test]
    fn the_readme_gives_every_next_step_and_fills_every_placeholder() {
        let mut new = args("my-db", "example.com/v1/Database", &["v1/ConfigMap"], Lang::Rust);
        new.webhooks = vec![super::super::NewWebhook { type_: wasmop_types::WebhookType::Validating, name: "check".into() }];
        let readme = file(&generate(&new).unwrap(), "README.md");
        for step in next_steps(&new) {
            assert!(readme.contains(&format!("    {step}")), "{step}\nnot in\n{readme}");
        }
        assert!(readme.contains("kubectl get databases"), "{readme}");
        assert!(!readme.contains("{{"), "{readme}");
    }

    #[test]
    fn webhooks_are_declared_dispatched_and_tested() {
        let mut new = args("my-db", "example.com/v1/Database", &[], Lang::Rust);
        new.webhooks = vec![
            super::super::NewWebhook { type_: wasmop_types::WebhookType::Validating, name: "check".into() },
            super::super::NewWebhook { type_: wasmop_types::WebhookType::Mutating, name: "set-defaults".into() },
        ];
        let lib = file(&generate(&new).unwrap(), "src/lib.rs");
        for expected in [
            r#".webhook(Webhook::validating("check").with_rule(Rule::new([Operation::Create, Operation::Update], "example.com", "v1", "databases")))"#,
            r#".webhook(Webhook::mutating("set-defaults")"#,
            r#""check" => admit_check(&req),"#,
            r#""set-defaults" => admit_set_defaults(req),"#,
            "pub fn admit_check(req: &AdmissionRequest) -> Result<Verdict, Error> {",
            "let object: Database = req.object_as()?;",
            "fn webhook_set_defaults_sets_an_absent_message() {",
            r#""apiVersion": "example.com/v1", "kind": "Database","#,
        ] {
            assert!(lib.contains(expected), "{expected}\nnot in\n{lib}");
        }
        let steps = next_steps(&new);
        assert_eq!(
            steps.last().unwrap(),
            "wasmop admit --plugin target/wasm32-wasip2/release/my_db.wasm --webhook set-defaults --object sample.yaml --crds crd.yaml"
        );
        let plain = file(&generate(&args("my-db", "example.com/v1/Database", &[], Lang::Rust)).unwrap(), "src/lib.rs");
        assert!(!plain.contains("fn admit") && !plain.contains(".webhook("), "{plain}");
    }
}
