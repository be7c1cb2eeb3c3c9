//! `wasmop new`: write a plugin project that tests, builds and reconciles straight away, in Rust
//! (a crate on the SDK), Python (componentize-py), JavaScript (componentize-js) or Go (a module
//! on the Go SDK, mainline Go for wasip1): a reconcile
//! skeleton with unit tests, what builds it, the parent's CRD (status schema with the host's
//! `Reconciled` condition, printer columns) and a sample object. Each language's files are in
//! its own module; the Python, JavaScript and Go templates are files under `templates/`.

mod go;
mod js;
mod python;
mod rust;

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::ValueEnum;

use wasmop_types::WebhookType;

use crate::contract::{Kind, is_dns1123_label};

/// Arguments of `wasmop new`.
#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// Plugin name: a DNS-1123 label (`memcached`, `my-db`); also the crate's or package's name.
    pub name: String,
    /// The kind the plugin reconciles, `group/version/Kind` (`example.com/v1/Hello`); the group
    /// needs a dot, as a CRD's does. The project gets its CRD (namespaced).
    #[arg(long, value_name = "GROUP/VERSION/KIND", value_parser = crate::policy::parse_kind)]
    pub parent: Kind,
    /// A kind the plugin creates for each parent, `group/version/Kind` or `v1/Kind` (repeatable).
    #[arg(long = "child", value_name = "GROUP/VERSION/KIND", value_parser = crate::policy::parse_kind)]
    pub children: Vec<Kind>,
    /// The plugin's language.
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    pub lang: Lang,
    /// Where to write the project (a new or empty directory) [default: ./NAME].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Rust and Go: a local checkout's SDK (`.../wasmop/guest-sdk`, `.../wasmop/sdk-go`) to
    /// depend on by path [default: the SDK of the checkout this `wasmop` was built from when
    /// it is still there, else the published one (`wasmop-sdk = { git = "...", tag =
    /// "vVERSION" }`; Go: `github.com/wasmop/wasmop/sdk-go vVERSION`)].
    #[arg(long, value_name = "DIR")]
    pub sdk_path: Option<PathBuf>,
    /// An admission webhook on the parent kind's CREATE and UPDATE, `validating:NAME` or
    /// `mutating:NAME` (repeatable): declared in the manifest, with a trivial function to
    /// replace and its unit test.
    #[arg(long = "webhook", value_name = "validating:NAME|mutating:NAME", value_parser = parse_webhook)]
    pub webhooks: Vec<NewWebhook>,
}

/// A webhook `wasmop new` declares: its type and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewWebhook {
    /// Validating (refuses a parent with an empty `spec.message`) or mutating (sets an absent
    /// `spec.message` to `hello`).
    pub type_: WebhookType,
    /// The webhook's name, a DNS-1123 label.
    pub name: String,
}

impl NewWebhook {
    /// `name` with `-` as `_`: the webhook's function is `admit_<ident>`.
    pub fn ident(&self) -> String {
        self.name.replace('-', "_")
    }

    /// Whether it may change the object.
    pub fn is_mutating(&self) -> bool {
        self.type_ == WebhookType::Mutating
    }
}

fn parse_webhook(text: &str) -> Result<NewWebhook, String> {
    let (type_, name) = match text.split_once(':') {
        Some(("validating", name)) => (WebhookType::Validating, name),
        Some(("mutating", name)) => (WebhookType::Mutating, name),
        _ => return Err(format!("{text:?} is not validating:NAME or mutating:NAME")),
    };
    if !is_dns1123_label(name) {
        return Err(format!("webhook name {name:?} is not a DNS-1123 label: lowercase letters, digits and '-', at most 63"));
    }
    Ok(NewWebhook { type_, name: name.to_owned() })
}

/// A plugin language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// Rust, with the `wasmop-sdk` crate.
    Rust,
    /// Python, built with componentize-py 0.25.
    Python,
    /// JavaScript, built with componentize-js 0.23.
    Js,
    /// Go 1.24 or newer (mainline, no TinyGo), with the Go SDK; built with wit-bindgen go and
    /// wasm-tools.
    Go,
}

pub(super) fn run(args: NewArgs) -> anyhow::Result<()> {
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from(&args.name));
    let files = generate(&args)?;
    write_all(&dir, &files)?;
    println!("created plugin {} in {}", args.name, dir.display());
    if args.lang == Lang::Rust {
        println!("it depends on {}", rust::sdk_dependency(&args)?.source);
    }
    println!("next, in {}:", dir.display());
    let steps = match args.lang {
        Lang::Rust => rust::next_steps(&args),
        Lang::Python => python::next_steps(&args),
        Lang::Js => js::next_steps(&args),
        Lang::Go => go::next_steps(&args),
    };
    for step in steps {
        println!("  {step}");
    }
    match args.lang {
        Lang::Rust => println!(
            "(wasmop new --dir DIR writes the project elsewhere; --sdk-path DIR depends on another checkout's guest-sdk)"
        ),
        Lang::Go => {
            println!("(wasmop new --dir DIR writes the project elsewhere; --sdk-path DIR depends on another checkout's sdk-go)")
        }
        Lang::Python | Lang::Js => println!("(wasmop new --dir DIR writes the project elsewhere)"),
    }
    Ok(())
}

/// The files of the new project, relative paths and contents.
///
/// # Errors
/// A name that is not a DNS-1123 label, a parent without a dotted group, a parent that is also
/// a child, an `--sdk-path` with a language other than Rust or Go, or an `--sdk-path` without
/// the SDK (a `Cargo.toml`, the Go SDK's `go.mod`).
pub fn generate(args: &NewArgs) -> anyhow::Result<Vec<(String, String)>> {
    if !is_dns1123_label(&args.name) {
        bail!("plugin name {:?} is not a DNS-1123 label: lowercase letters, digits and '-', at most 63", args.name);
    }
    if !args.parent.group.contains('.') {
        bail!("parent {}: a custom resource's group needs a dot (example.com), as Kubernetes requires of a CRD", args.parent);
    }
    if let Some(child) = args.children.iter().find(|c| **c == args.parent) {
        bail!("{child} is the parent: it cannot also be a child");
    }
    for (i, webhook) in args.webhooks.iter().enumerate() {
        if args.webhooks[..i].iter().any(|w| w.name == webhook.name) {
            bail!("webhook {:?} is given twice: webhook names are unique within a plugin", webhook.name);
        }
    }
    if args.sdk_path.is_some() && !matches!(args.lang, Lang::Rust | Lang::Go) {
        let lang = args.lang.to_possible_value().map(|v| v.get_name().to_owned()).unwrap_or_default();
        bail!("--sdk-path is the Rust or Go SDK's: a --lang {lang} plugin builds against the WIT it is given, drop --sdk-path");
    }
    let mut files = match args.lang {
        Lang::Rust => rust::files(args)?,
        Lang::Python => python::files(args),
        Lang::Js => js::files(args),
        Lang::Go => go::files(args)?,
    };
    files.push(("crd.yaml".into(), crd(&args.parent)));
    files.push(("sample.yaml".into(), sample(&args.parent)));
    Ok(files)
}

/// The contract a Python, JavaScript or Go plugin builds against, `wasmop:plugin@0.3.0` (world
/// `controller`, or `operator` with webhooks), as files under `wit/`: every SDK targets the
/// newest contract.
const WIT_0_3_0: [(&str, &str); 7] = [
    ("wit/admission.wit", include_str!("../../../wit/v0.3.0/admission.wit")),
    ("wit/cache.wit", include_str!("../../../wit/v0.3.0/cache.wit")),
    ("wit/log.wit", include_str!("../../../wit/v0.3.0/log.wit")),
    ("wit/plugin.wit", include_str!("../../../wit/v0.3.0/plugin.wit")),
    ("wit/reconciler.wit", include_str!("../../../wit/v0.3.0/reconciler.wit")),
    ("wit/types.wit", include_str!("../../../wit/v0.3.0/types.wit")),
    ("wit/world.wit", include_str!("../../../wit/v0.3.0/world.wit")),
];

/// The contract version a `--lang go` project builds against.
const GO_WIT_VERSION: &str = "0.3.0";

/// The contract version a `--lang python` or `--lang js` project builds against.
const PY_JS_WIT_VERSION: &str = "0.3.0";

/// The WIT files, for a Python or JavaScript project.
fn wit_files() -> impl Iterator<Item = (String, String)> {
    wit_files_of(PY_JS_WIT_VERSION)
}

/// The WIT files of contract `version` (0.3.0, the only one `wasmop new` writes).
fn wit_files_of(version: &str) -> impl Iterator<Item = (String, String)> {
    debug_assert_eq!(version, "0.3.0", "wasmop new writes projects for the newest contract only");
    WIT_0_3_0.iter().map(|(path, text)| ((*path).to_owned(), (*text).to_owned()))
}

/// `template` with every `{{key}}` replaced by its value.
fn render(template: &str, values: &[(&str, &str)]) -> String {
    values.iter().fold(template.to_owned(), |text, (key, value)| text.replace(&format!("{{{{{key}}}}}"), value))
}

/// The values every Python and JavaScript template takes: `{{name}}`, `{{Kind}}`,
/// `{{api_version}}`, `{{plural}}` and `{{repository}}`.
fn common_values(args: &NewArgs) -> [(&'static str, String); 5] {
    [
        ("repository", env!("CARGO_PKG_REPOSITORY").to_owned()),
        ("name", args.name.clone()),
        ("Kind", args.parent.kind.clone()),
        ("api_version", args.parent.api_version()),
        ("plural", plural(&args.parent.kind)),
    ]
}

/// ` --crds crd.yaml` for a plugin with webhooks: offline commands resolve the parent's
/// resource name (its webhooks' rules) from the CRD; nothing without webhooks.
fn crds_flag(args: &NewArgs) -> &'static str {
    if args.webhooks.is_empty() { "" } else { " --crds crd.yaml" }
}

/// The `wasmop admit` command of each webhook, on the sample, for the plugin file `wasm`.
fn admit_steps(args: &NewArgs, wasm: &str) -> Vec<String> {
    let steps = args
        .webhooks
        .iter()
        .map(|w| format!("wasmop admit --plugin {wasm} --webhook {} --object sample.yaml --crds crd.yaml", w.name));
    steps.collect()
}

/// Write the files into `dir`, which must not exist or be empty.
fn write_all(dir: &Path, files: &[(String, String)]) -> anyhow::Result<()> {
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

    /// The arguments of `wasmop new NAME --parent PARENT --child CHILD... --lang LANG`.
    pub(super) fn args(name: &str, parent: &str, children: &[&str], lang: Lang) -> NewArgs {
        NewArgs {
            name: name.into(),
            parent: Kind::parse(parent).unwrap(),
            children: children.iter().map(|c| Kind::parse(c).unwrap()).collect(),
            lang,
            dir: None,
            sdk_path: None,
            webhooks: vec![],
        }
    }

    /// The text of the generated file at `path`.
    pub(super) fn file(files: &[(String, String)], path: &str) -> String {
        files.iter().find(|(p, _)| p == path).unwrap_or_else(|| panic!("no {path} among the files")).1.clone()
    }

    /// The generated paths, sorted.
    pub(super) fn paths(files: &[(String, String)]) -> Vec<&str> {
        let mut paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        paths.sort_unstable();
        paths
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
    fn every_language_gets_the_crd_and_the_sample() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js, Lang::Go] {
            let files = generate(&args("my-db", "example.com/v1/Database", &["v1/ConfigMap"], lang)).unwrap();
            let crd = file(&files, "crd.yaml");
            assert!(crd.contains("name: databases.example.com") && crd.contains(r#"@.type=="Reconciled""#), "{crd}");
            assert!(file(&files, "sample.yaml").starts_with("apiVersion: example.com/v1\nkind: Database\n"));
            for (path, text) in &files {
                assert!(!text.contains("{{"), "{lang:?}: {path} has a placeholder left:\n{text}");
            }
        }
    }

    #[test]
    fn webhooks_make_every_language_build_world_operator_with_nothing_left_to_fill() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js, Lang::Go] {
            let mut new = args("my-db", "example.com/v1/Database", &["v1/ConfigMap"], lang);
            new.webhooks = vec![parse_webhook("validating:check").unwrap(), parse_webhook("mutating:set-defaults").unwrap()];
            let files = generate(&new).unwrap();
            for (path, text) in &files {
                assert!(!text.contains("{{") && !text.contains("{ident}"), "{lang:?}: {path}:\n{text}");
            }
            let build = match lang {
                Lang::Rust => continue,
                Lang::Python | Lang::Go => file(&files, "build.sh"),
                Lang::Js => file(&files, "package.json"),
            };
            assert!(build.contains("operator") && !build.contains("controller"), "{lang:?}: {build}");
        }
        let plain = generate(&args("my-db", "example.com/v1/Database", &[], Lang::Js)).unwrap();
        assert!(file(&plain, "package.json").contains("--world-name controller"));
        assert!(!file(&plain, "my-db.js").contains("export const admission"));
    }

    #[test]
    fn python_and_javascript_build_against_a_copy_of_wit_0_3_0() {
        let wit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit/v0.3.0");
        let mut names: Vec<String> =
            std::fs::read_dir(&wit).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        for lang in [Lang::Python, Lang::Js] {
            let files = generate(&args("x", "example.com/v1/X", &[], lang)).unwrap();
            let copied: Vec<&str> = paths(&files).into_iter().filter(|p| p.starts_with("wit/")).collect();
            assert_eq!(copied, names.iter().map(|n| format!("wit/{n}")).collect::<Vec<_>>(), "{lang:?}");
            for name in &names {
                assert_eq!(file(&files, &format!("wit/{name}")), std::fs::read_to_string(wit.join(name)).unwrap(), "{name}");
            }
        }
    }

    #[test]
    fn bad_arguments_are_refused_naming_what_is_wrong() {
        let err = generate(&args("My_Plugin", "example.com/v1/X", &[], Lang::Rust)).unwrap_err().to_string();
        assert!(err.starts_with("plugin name \"My_Plugin\" is not a DNS-1123 label"), "{err}");
        let err = generate(&args("x", "example/v1/X", &[], Lang::Python)).unwrap_err().to_string();
        assert!(err.contains("group needs a dot"), "{err}");
        let err = generate(&args("x", "example.com/v1/X", &["example.com/v1/X"], Lang::Js)).unwrap_err().to_string();
        assert_eq!(err, "example.com/v1/X is the parent: it cannot also be a child");
        let mut sdk = args("x", "example.com/v1/X", &[], Lang::Rust);
        sdk.sdk_path = Some(PathBuf::from("/nonexistent/guest-sdk"));
        assert!(generate(&sdk).unwrap_err().to_string().starts_with("SDK path /nonexistent/guest-sdk"));
        sdk.lang = Lang::Python;
        let err = generate(&sdk).unwrap_err().to_string();
        assert_eq!(
            err,
            "--sdk-path is the Rust or Go SDK's: a --lang python plugin builds against the WIT it is given, drop --sdk-path"
        );
    }

    #[test]
    fn webhooks_are_validating_or_mutating_with_a_unique_label() {
        assert_eq!(
            parse_webhook("mutating:set-defaults"),
            Ok(NewWebhook { type_: WebhookType::Mutating, name: "set-defaults".into() })
        );
        assert_eq!(parse_webhook("check").unwrap_err(), "\"check\" is not validating:NAME or mutating:NAME");
        assert!(parse_webhook("validating:Check").unwrap_err().contains("is not a DNS-1123 label"));
        let mut twice = args("x", "example.com/v1/X", &[], Lang::Rust);
        twice.webhooks = vec![parse_webhook("validating:a").unwrap(), parse_webhook("mutating:a").unwrap()];
        assert_eq!(
            generate(&twice).unwrap_err().to_string(),
            "webhook \"a\" is given twice: webhook names are unique within a plugin"
        );
    }

    #[test]
    fn a_non_empty_directory_is_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep"), "x").unwrap();
        let err = write_all(dir.path(), &[("Cargo.toml".into(), String::new())]).unwrap_err().to_string();
        assert!(err.ends_with("exists and is not empty: give a new directory with --dir"), "{err}");
        assert!(!dir.path().join("Cargo.toml").exists());
    }
}
