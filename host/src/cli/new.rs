//! `wasmop new`: write a plugin crate that builds, tests and reconciles straight away — its
//! `Cargo.toml` (the SDK dependency, the size profile), a reconcile skeleton with unit tests, the
//! parent's CRD (status schema with the host's `Reconciled` condition, printer columns) and a
//! sample object.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::ValueEnum;

use crate::contract::{Kind, is_dns1123_label};

/// The git repository of the SDK, for the default dependency line.
const REPOSITORY: &str = env!("CARGO_PKG_REPOSITORY");

/// Arguments of `wasmop new`.
#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// Plugin name: a DNS-1123 label (`memcached`, `my-db`); also the crate's name.
    pub name: String,
    /// The kind the plugin reconciles, `group/version/Kind` (`example.com/v1/Hello`); the group
    /// needs a dot, as a CRD's does. The crate gets its CRD (namespaced).
    #[arg(long, value_name = "GROUP/VERSION/KIND", value_parser = crate::policy::parse_kind)]
    pub parent: Kind,
    /// A kind the plugin creates for each parent, `group/version/Kind` or `v1/Kind` (repeatable).
    #[arg(long = "child", value_name = "GROUP/VERSION/KIND", value_parser = crate::policy::parse_kind)]
    pub children: Vec<Kind>,
    /// The plugin's language.
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    pub lang: Lang,
    /// Where to write the crate (a new or empty directory) [default: ./NAME].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// A local checkout's SDK (`.../wasmop/guest-sdk`) to depend on by path, instead of the git
    /// repository (`wasmop-sdk = { git = "...", tag = "vVERSION" }`).
    #[arg(long, value_name = "DIR")]
    pub sdk_path: Option<PathBuf>,
}

/// A plugin language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// Rust, with the `wasmop-sdk` crate.
    Rust,
    /// Python (componentize-py): not yet supported by `wasmop new`.
    Python,
    /// JavaScript (componentize-js): not yet supported by `wasmop new`.
    Js,
}

pub(super) fn run(args: NewArgs) -> anyhow::Result<()> {
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from(&args.name));
    let files = generate(&args)?;
    write_all(&dir, &files)?;
    let lib = args.name.replace('-', "_");
    println!("created plugin {} in {}", args.name, dir.display());
    println!("next, in {}:", dir.display());
    println!("  cargo test");
    println!("  cargo build --target wasm32-wasip2 --release");
    println!("  wasmop reconcile --plugin target/wasm32-wasip2/release/{lib}.wasm --object sample.yaml");
    Ok(())
}

/// The files of the new crate, relative paths and contents.
///
/// # Errors
/// A language other than Rust, a name that is not a DNS-1123 label, a parent without a dotted
/// group, or a parent that is also a child.
pub fn generate(args: &NewArgs) -> anyhow::Result<Vec<(&'static str, String)>> {
    if args.lang != Lang::Rust {
        let lang = args.lang.to_possible_value().map(|v| v.get_name().to_owned()).unwrap_or_default();
        bail!("wasmop new --lang {lang} is not supported yet: only rust (see docs/plugin-guide.md for the SDK)");
    }
    if !is_dns1123_label(&args.name) {
        bail!("plugin name {:?} is not a DNS-1123 label: lowercase letters, digits and '-', at most 63", args.name);
    }
    if !args.parent.group.contains('.') {
        bail!("parent {}: a custom resource's group needs a dot (example.com), as Kubernetes requires of a CRD", args.parent);
    }
    if let Some(child) = args.children.iter().find(|c| **c == args.parent) {
        bail!("{child} is the parent: it cannot also be a child");
    }
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
        ("Cargo.toml", CARGO_TOML.replace("{name}", &args.name).replace("{sdk}", &sdk)),
        ("src/lib.rs", lib_rs(args)),
        ("crd.yaml", crd(&args.parent)),
        ("sample.yaml", sample(&args.parent)),
        (".gitignore", "/target\n".to_owned()),
    ])
}

/// Write the files into `dir`, which must not exist or be empty.
fn write_all(dir: &Path, files: &[(&str, String)]) -> anyhow::Result<()> {
    if dir.exists() && std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?.next().is_some() {
        bail!("{} exists and is not empty: give a new directory with --dir", dir.display());
    }
    for (path, text) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// The plural resource name Kubernetes would guess for a kind (`Database` → `databases`,
/// `Policy` → `policies`, `Class` → `classes`).
pub fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if let Some(stem) = lower.strip_suffix('y').filter(|s| !s.ends_with(['a', 'e', 'i', 'o', 'u'])) {
        format!("{stem}ies")
    } else if ["s", "x", "z", "ch", "sh"].iter().any(|end| lower.ends_with(end)) {
        format!("{lower}es")
    } else {
        format!("{lower}s")
    }
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

fn crd(parent: &Kind) -> String {
    let plural = plural(&parent.kind);
    CRD_YAML
        .replace("{plural}", &plural)
        .replace("{singular}", &parent.kind.to_ascii_lowercase())
        .replace("{group}", &parent.group)
        .replace("{version}", &parent.version)
        .replace("{Kind}", &parent.kind)
}

fn sample(parent: &Kind) -> String {
    format!(
        "apiVersion: {}\nkind: {}\nmetadata:\n  name: sample\n  namespace: default\nspec:\n  message: hello\n",
        parent.api_version(),
        parent.kind
    )
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

# The size profile of a plugin: this skeleton's component is 189 KB with it, 283 KB with
# cargo's default release profile (a third smaller; measured, see the plugin guide). `lto` and
# `panic = "abort"` changed nothing measurable.
[profile.release]
opt-level = "s"
codegen-units = 1
strip = true
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

const CRD_YAML: &str = r#"# The {Kind} custom resource. `kubectl apply -f crd.yaml` before the plugin reconciles it.
# Check the plural: `wasmop new` guessed it from the kind.
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.{group}
spec:
  group: {group}
  names:
    kind: {Kind}
    listKind: {Kind}List
    plural: {plural}
    singular: {singular}
  scope: Namespaced
  versions:
    - name: {version}
      served: true
      storage: true
      # The host writes status through the status subresource.
      subresources:
        status: {}
      additionalPrinterColumns:
        - name: Ready
          type: string
          jsonPath: .status.conditions[?(@.type=="Ready")].status
        - name: Reconciled
          type: string
          jsonPath: .status.conditions[?(@.type=="Reconciled")].status
        - name: Reason
          type: string
          jsonPath: .status.conditions[?(@.type=="Reconciled")].reason
          priority: 1
        - name: Age
          type: date
          jsonPath: .metadata.creationTimestamp
      schema:
        openAPIV3Schema:
          type: object
          properties:
            apiVersion:
              type: string
            kind:
              type: string
            metadata:
              type: object
            spec:
              type: object
              properties:
                message:
                  description: A message for the children.
                  type: string
            status:
              description: Written by the host for the plugin; fields not listed here are dropped by the API server.
              type: object
              properties:
                children:
                  description: How many of the plugin's children exist.
                  type: integer
                conditions:
                  description: The plugin's conditions (Ready) and the host's Reconciled condition.
                  type: array
                  x-kubernetes-list-type: map
                  x-kubernetes-list-map-keys: [type]
                  items:
                    type: object
                    required: [type, status, lastTransitionTime, reason, message]
                    properties:
                      type:
                        type: string
                        maxLength: 316
                      status:
                        type: string
                        enum: ["True", "False", "Unknown"]
                      observedGeneration:
                        type: integer
                        format: int64
                        minimum: 0
                      lastTransitionTime:
                        type: string
                        format: date-time
                      reason:
                        type: string
                        maxLength: 1024
                      message:
                        type: string
                        maxLength: 32768
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn args(name: &str, parent: &str, children: &[&str]) -> NewArgs {
        NewArgs {
            name: name.into(),
            parent: Kind::parse(parent).unwrap(),
            children: children.iter().map(|c| Kind::parse(c).unwrap()).collect(),
            lang: Lang::Rust,
            dir: None,
            sdk_path: None,
        }
    }

    fn file(files: &[(&str, String)], name: &str) -> String {
        files.iter().find(|(p, _)| *p == name).unwrap().1.clone()
    }

    #[test]
    fn plurals_follow_the_english_rules_kubernetes_guesses() {
        assert_eq!(plural("Database"), "databases");
        assert_eq!(plural("Policy"), "policies");
        assert_eq!(plural("Gateway"), "gateways");
        assert_eq!(plural("Class"), "classes");
        assert_eq!(plural("Box"), "boxes");
    }

    #[test]
    fn the_crate_declares_parent_and_children_and_depends_on_the_sdk_by_git() {
        let files = generate(&args("my-db", "example.com/v1/Database", &["v1/ConfigMap", "apps/v1/Deployment"])).unwrap();
        let lib = file(&files, "src/lib.rs");
        assert!(lib.contains(r#"Kind::new("example.com", "v1", "Database")"#), "{lib}");
        assert!(lib.contains(r#".child(Kind::new("", "v1", "ConfigMap"))"#), "{lib}");
        assert!(lib.contains("pub struct DatabaseReconciler;"), "{lib}");
        let cargo = file(&files, "Cargo.toml");
        assert!(cargo.contains("name = \"my-db\""), "{cargo}");
        let sdk = format!("wasmop-sdk = {{ git = \"{REPOSITORY}\", tag = \"v{}\" }}", env!("CARGO_PKG_VERSION"));
        assert!(cargo.contains(&sdk), "{cargo}");
        assert!(cargo.contains("[profile.release]\nopt-level = \"s\""), "{cargo}");
        let crd = file(&files, "crd.yaml");
        assert!(crd.contains("name: databases.example.com") && crd.contains(r#"@.type=="Reconciled""#), "{crd}");
        assert!(file(&files, "sample.yaml").starts_with("apiVersion: example.com/v1\nkind: Database\n"));
    }

    #[test]
    fn bad_arguments_are_refused_naming_what_is_wrong() {
        let mut python = args("x", "example.com/v1/X", &[]);
        python.lang = Lang::Python;
        let err = generate(&python).unwrap_err().to_string();
        assert_eq!(err, "wasmop new --lang python is not supported yet: only rust (see docs/plugin-guide.md for the SDK)");
        let err = generate(&args("My_Plugin", "example.com/v1/X", &[])).unwrap_err().to_string();
        assert!(err.starts_with("plugin name \"My_Plugin\" is not a DNS-1123 label"), "{err}");
        let err = generate(&args("x", "example/v1/X", &[])).unwrap_err().to_string();
        assert!(err.contains("group needs a dot"), "{err}");
        let err = generate(&args("x", "example.com/v1/X", &["example.com/v1/X"])).unwrap_err().to_string();
        assert_eq!(err, "example.com/v1/X is the parent: it cannot also be a child");
        let mut sdk = args("x", "example.com/v1/X", &[]);
        sdk.sdk_path = Some(PathBuf::from("/nonexistent/guest-sdk"));
        assert!(generate(&sdk).unwrap_err().to_string().starts_with("SDK path /nonexistent/guest-sdk"));
    }

    #[test]
    fn a_non_empty_directory_is_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep"), "x").unwrap();
        let err = write_all(dir.path(), &[("Cargo.toml", String::new())]).unwrap_err().to_string();
        assert!(err.ends_with("exists and is not empty: give a new directory with --dir"), "{err}");
        assert!(!dir.path().join("Cargo.toml").exists());
    }
}
