//! The `wasmop` command line. `main.rs` only parses arguments and calls [`run`].

mod admit;
pub mod apply;
pub mod audit_log;
mod compile;
mod crds;
mod dev;
mod inspect;
pub mod new;
mod object_files;
mod progress;
pub mod push;
pub mod rbac;
mod reconcile;
pub mod run;
mod webhooks;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::policy::HostPolicy;
use crate::runtime::{self, ArtifactCache, Runtime, RuntimeBuilder};

/// Kubernetes operators as sandboxed WebAssembly plugins.
#[derive(Debug, Parser)]
#[command(name = "wasmop", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Runtime options shared by every command.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// Log format on stderr (filter with `RUST_LOG`, default `info`; the audit events, target
    /// `wasmop::audit`, only when named there or written by `run --audit-log`).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

impl Cli {
    /// Where `wasmop run --audit-log` sends the audit lines; `None` for other commands or
    /// without the flag.
    pub fn audit_log(&self) -> Option<audit_log::Destination> {
        match &self.command {
            Command::Run(args) => {
                args.audit_log.as_deref().map(|path| audit_log::Destination::new(path, args.audit_log_max_bytes))
            }
            _ => None,
        }
    }
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, with the span fields (plugin, kind, namespace, name, generation).
    Json,
}

/// Options of the plugin runtime.
#[derive(Debug, clap::Args)]
pub struct RuntimeArgs {
    /// Deadline of one plugin call (e.g. `100ms`, `1s`; more than 0, at most 5m) [default: the
    /// policy's, else 1s].
    #[arg(long, global = true, value_name = "DURATION", value_parser = runtime::parse_deadline)]
    pub deadline: Option<Duration>,
    /// Memory cap of one plugin instance (e.g. `64Mi`; from 2Mi to 4Gi) [default: the policy's,
    /// else 64Mi].
    #[arg(long, global = true, value_name = "SIZE", value_parser = runtime::parse_memory)]
    pub memory: Option<u64>,
    /// Host policy file: per-plugin limits and grants (Secrets, extra namespaces). Owned by
    /// the host's operator; every key is explained under "Policy keys" in docs/security.md.
    #[arg(long, global = true, env = "WASMOP_POLICY")]
    pub policy: Option<PathBuf>,
    /// Directory of precompiled plugins (default `$WASMOP_CACHE_DIR` or `~/.cache/wasmop/artifacts`).
    #[arg(long, global = true, env = "WASMOP_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Compile plugins every time; never read or write precompiled artifacts.
    #[arg(long, global = true)]
    pub no_cache: bool,
    /// Bytes of plugin responses the host holds at once, every plugin's calls together (at
    /// least 1Mi); a response that does not fit waits.
    #[arg(long, global = true, value_name = "SIZE", default_value = "64Mi",
        value_parser = |s: &str| crate::units::bytes_in(s, 1 << 20, 1 << 40))]
    pub response_budget: u64,
}

impl RuntimeArgs {
    /// Start a runtime with these options.
    ///
    /// # Errors
    /// If the engine cannot be configured.
    pub fn runtime(&self) -> anyhow::Result<Runtime> {
        Ok(self.builder()?.build()?)
    }

    /// A runtime builder with these options, to add to.
    ///
    /// # Errors
    /// When the policy file cannot be read or is invalid.
    pub fn builder(&self) -> anyhow::Result<RuntimeBuilder> {
        let artifact_dir = if self.no_cache { None } else { self.cache_dir.clone().or_else(ArtifactCache::default_dir) };
        Ok(Runtime::builder()
            .allowances(self.host_policy()?.allowances())
            .artifact_dir(artifact_dir)
            .response_budget(self.response_budget))
    }

    /// The policy file (if any) with the flags over its defaults.
    ///
    /// # Errors
    /// When the policy file cannot be read or is invalid.
    pub fn host_policy(&self) -> anyhow::Result<HostPolicy> {
        let policy = match &self.policy {
            Some(path) => HostPolicy::load(path)?,
            None => HostPolicy::default(),
        };
        Ok(policy.with_default_limits(self.deadline, self.memory))
    }
}

/// Output format of documents printed on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Output {
    /// Pretty-printed JSON.
    Json,
    /// YAML.
    #[default]
    Yaml,
}

impl Output {
    /// Render a value in this format.
    ///
    /// # Errors
    /// If the value cannot be serialized.
    pub fn render(self, value: &impl serde::Serialize) -> anyhow::Result<String> {
        Ok(match self {
            Output::Json => serde_json::to_string_pretty(value)? + "\n",
            Output::Yaml => crate::yaml::to_string(value)?,
        })
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a plugin's manifest: what it reconciles and everything it may touch.
    Inspect(inspect::InspectArgs),
    /// Run a plugin once, offline, on an object and fixtures; print its response.
    Reconcile(reconcile::ReconcileArgs),
    /// Call a plugin's admission webhook offline on an object; print the verdict, warnings and
    /// JSON Patch `run` would answer (exit 0 allowed, 2 denied).
    Admit(admit::AdmitArgs),
    /// Run the operator host: reconcile every plugin in a directory against a cluster.
    Run(Box<run::RunArgs>),
    /// Local demo: control plane, example plugins, host and samples in one command.
    Dev(dev::DevArgs),
    /// Print the RBAC a host needs for a plugins directory: a ClusterRole, or with `--namespace`
    /// a Role per namespace.
    Rbac(rbac::RbacArgs),
    /// Print the CustomResourceDefinitions the host itself needs (the `WasmPlugin` CRD), for
    /// `kubectl apply -f -`.
    Crds(crds::CrdsArgs),
    /// Write a new plugin project in Rust, Go, Python or JavaScript: the logic's skeleton, its
    /// unit tests, the build command, README, CRD and sample.
    New(new::NewArgs),
    /// Print the webhook configurations a host registers for a plugins directory (YAML).
    Webhooks(webhooks::WebhooksArgs),
    /// Push a plugin file to an OCI registry as a Wasm artifact; print its digest.
    Push(push::PushArgs),
    /// Compile one plugin file into an artifact: the compiler process of a running host.
    #[command(hide = true)]
    Compile(compile::CompileArgs),
}

/// Run a parsed command line; the exit code is success unless the command's answer says
/// otherwise (`admit`: a denied request).
///
/// # Errors
/// Whatever the command failed with; `main` prints it on one line and exits non-zero.
pub async fn run(cli: Cli) -> anyhow::Result<std::process::ExitCode> {
    let done = match cli.command {
        Command::Admit(args) => return admit::run(args, &cli.runtime).await,
        Command::Inspect(args) => inspect::run(args, &cli.runtime).await,
        Command::Reconcile(args) => reconcile::run(args, &cli.runtime).await,
        Command::Run(args) => run::run(*args, &cli.runtime).await,
        Command::Dev(args) => dev::run(args, &cli.runtime).await,
        Command::Rbac(args) => rbac::run(args, &cli.runtime).await,
        Command::New(args) => new::run(args),
        Command::Crds(args) => crds::run(args),
        Command::Webhooks(args) => webhooks::run(args, &cli.runtime).await,
        Command::Push(args) => push::run(args).await,
        Command::Compile(args) => compile::run(args),
    };
    done.map(|()| std::process::ExitCode::SUCCESS)
}
