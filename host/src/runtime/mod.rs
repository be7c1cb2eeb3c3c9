//! The sandboxed plugin runtime: one wasmtime engine, one linker, plugins loaded from bytes.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use wasmop::contract::Request;
//! use wasmop::objects::MemoryCache;
//! use wasmop::runtime::{Limits, Runtime};
//!
//! let runtime = Runtime::builder().limits(Limits::default()).build()?;
//! let plugin = runtime.load_file("memcached.wasm").await?;
//! let parent = serde_json::json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
//!     "metadata": {"name": "a", "namespace": "default"}, "spec": {"size": 3}});
//! let (response, _stats) = plugin.reconcile(&Request::new(parent), Arc::new(MemoryCache::default())).await?;
//! println!("{}", serde_json::to_string_pretty(&response)?);
//! # Ok(()) }
//! ```

mod artifact_cache;
mod bindings;
mod compiler;
mod convert;
mod engine;
mod error;
mod exports;
mod guest_failure;
mod http_denied;
mod loader;
mod log;
mod log_budget;
mod lookup;
mod memory_limiter;
mod plugin;
mod response_budget;
mod state;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker};

pub use crate::policy::{Limits, MAX_DEADLINE, MAX_MEMORY_BYTES, MIN_MEMORY_BYTES, parse_deadline, parse_memory};
pub use artifact_cache::{ArtifactCache, load_artifact, write_artifact};
pub use compiler::{
    COMPILE_MEMORY, COMPILE_TIMEOUT, CompileGate, Compiler, GateFn, LARGE_PLUGIN, Subprocess, exit_code, precompile,
};
pub use engine::{EPOCH_THREAD, EPOCH_TICK};
pub use error::{CallError, LoadError, MAX_PLUGIN_MESSAGE};
pub use exports::WitVersion;
pub use loader::{WasmFormat, componentize, detect, digest};
pub use log_budget::{MAX_LOG_BYTES, MAX_LOG_LINES};
pub use memory_limiter::MemoryLimitExceeded;
pub use plugin::{CallStats, Plugin, admission_deadline};
pub use response_budget::{DEFAULT_RESPONSE_BUDGET, Reservation, ResponseBudget};

use crate::metrics::Metrics;
use crate::policy::Allowances;
use bindings::{v0_1, v0_2, v0_3};
use engine::EpochTicker;
use state::HostState;

/// Why the runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// wasmtime rejected the engine configuration or the host imports.
    #[error("cannot start the wasm runtime: {0}")]
    Engine(String),
}

/// Builder for [`Runtime`].
#[derive(Debug, Clone)]
pub struct RuntimeBuilder {
    allowances: Allowances,
    artifact_dir: Option<PathBuf>,
    pooling: bool,
    compiler: Compiler,
    response_budget: u64,
    metrics: Arc<Metrics>,
}

impl RuntimeBuilder {
    /// The bytes of plugin responses held at once, every plugin's calls together (default
    /// [`DEFAULT_RESPONSE_BUDGET`]); a call whose response does not fit waits.
    #[must_use]
    pub fn response_budget(mut self, bytes: u64) -> Self {
        self.response_budget = bytes;
        self
    }

    /// The same limits for every plugin, no grants (default: [`Limits::default`]).
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.allowances = Allowances::uniform(limits);
        self
    }

    /// Limits and grants per plugin, from the host's operator
    /// ([`HostPolicy::allowances`](crate::policy::HostPolicy::allowances)).
    #[must_use]
    pub fn allowances(mut self, allowances: Allowances) -> Self {
        self.allowances = allowances;
        self
    }

    /// Where precompiled plugins are kept; `None` disables the artifact cache.
    /// Default: [`ArtifactCache::default_dir`].
    #[must_use]
    pub fn artifact_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.artifact_dir = dir;
        self
    }

    /// Use wasmtime's pooling allocator (default on): faster instantiation, virtual memory
    /// reserved up front.
    #[must_use]
    pub fn pooling(mut self, pooling: bool) -> Self {
        self.pooling = pooling;
        self
    }

    /// Where plugins are compiled (default [`Compiler::InProcess`]; the `wasmop run` host uses
    /// a [`Subprocess`] of its own binary).
    #[must_use]
    pub fn compiler(mut self, compiler: Compiler) -> Self {
        self.compiler = compiler;
        self
    }

    /// The registry every plugin call is recorded in (duration, memory high-water, failure
    /// reason); default: a registry of the runtime's own.
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Start the engine, its epoch ticker and the linker.
    ///
    /// # Errors
    /// [`RuntimeError`] if wasmtime cannot be configured.
    pub fn build(self) -> Result<Runtime, RuntimeError> {
        let err = |e: wasmtime::Error| RuntimeError::Engine(format!("{e:#}"));
        let metered = self.allowances.uses_fuel();
        let engine = engine::new_engine(self.pooling, metered).map_err(err)?;
        let mut linker = Linker::<HostState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(err)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).map_err(err)?;
        v0_1::Operator::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s).map_err(err)?;
        v0_2::Operator::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s).map_err(err)?;
        v0_3::Operator::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s).map_err(err)?;
        let artifacts = self.artifact_dir.map(|dir| ArtifactCache::new(dir, &engine));
        let ticker = Arc::new(EpochTicker::start(&engine));
        let compiler = self.compiler;
        Ok(Runtime {
            inner: Arc::new(Inner {
                engine,
                linker,
                allowances: self.allowances,
                metered,
                artifacts,
                compiler,
                ticker,
                budget: ResponseBudget::new(self.response_budget),
                metrics: self.metrics,
            }),
        })
    }
}

/// The plugin runtime. Cheap to clone; all clones share one engine.
#[derive(Debug, Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    linker: Linker<HostState>,
    allowances: Allowances,
    /// Whether the engine counts fuel.
    metered: bool,
    artifacts: Option<ArtifactCache>,
    compiler: Compiler,
    /// Shared with every plugin: deadlines need the epoch to advance for as long as any
    /// plugin can be called, even after the runtime handle is dropped.
    ticker: Arc<EpochTicker>,
    /// Shared with every plugin: the bytes of responses held at once.
    budget: ResponseBudget,
    /// Where every plugin call is recorded.
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("allowances", &self.allowances)
            .field("artifacts", &self.artifacts)
            .field("compiler", &self.compiler)
            .finish()
    }
}

impl Runtime {
    /// A builder with default limits, the default artifact directory and pooling on.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder {
            allowances: Allowances::default(),
            artifact_dir: ArtifactCache::default_dir(),
            pooling: true,
            compiler: Compiler::InProcess,
            response_budget: DEFAULT_RESPONSE_BUDGET,
            metrics: Arc::new(Metrics::new()),
        }
    }

    /// The registry every plugin call of this runtime is recorded in
    /// ([`RuntimeBuilder::metrics`]).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// The default limits (plugins without an entry of their own in the policy).
    pub fn limits(&self) -> &Limits {
        &self.inner.allowances.defaults().limits
    }

    /// The limits and grants of every plugin.
    pub fn allowances(&self) -> &Allowances {
        &self.inner.allowances
    }

    /// Whether compiled plugins are kept in an artifact cache (not with `--no-cache`).
    pub fn caches_artifacts(&self) -> bool {
        self.inner.artifacts.is_some()
    }

    /// Whether the compiled artifact of the plugin file whose sha256 is `digest` is in the
    /// artifact cache, so that [`Runtime::load`] maps it instead of compiling (a damaged one is
    /// compiled again).
    pub fn is_cached(&self, digest: &str) -> bool {
        self.inner.artifacts.as_ref().is_some_and(|cache| cache.contains(digest))
    }

    /// Load a plugin from its bytes: detect the format, componentize a core module, compile
    /// with the runtime's [`Compiler`] (or map the precompiled artifact), link, find its world (WIT 0.1.0 or 0.2.0) and
    /// type-check its exports, and read and validate the manifest. Nothing is swapped or started: a failed load changes nothing.
    ///
    /// # Errors
    /// [`LoadError`] saying what is wrong with the bytes.
    pub async fn load(&self, bytes: Vec<u8>) -> Result<Plugin, LoadError> {
        let digest = loader::digest(&bytes);
        let inner = &self.inner;
        let target = compiler::Target { engine: &inner.engine, metered: inner.metered, cache: inner.artifacts.as_ref() };
        let component = inner.compiler.compile(&target, Arc::new(bytes), &digest).await?;
        let engine = plugin::Linked {
            engine: &self.inner.engine,
            linker: &self.inner.linker,
            metered: self.inner.metered,
            budget: &self.inner.budget,
            metrics: &self.inner.metrics,
        };
        Plugin::new(engine, &component, digest, &self.inner.allowances, Arc::clone(&self.inner.ticker)).await
    }

    /// [`Runtime::load`] of a file's contents.
    ///
    /// # Errors
    /// [`LoadError::Io`] if the file cannot be read, else as [`Runtime::load`].
    pub async fn load_file(&self, path: impl AsRef<Path>) -> Result<Plugin, LoadError> {
        let path = path.as_ref();
        let bytes = tokio::fs::read(path).await.map_err(|error| LoadError::Io { path: path.to_owned(), error })?;
        self.load(bytes).await
    }
}
