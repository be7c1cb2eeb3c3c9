//! [`Plugin`]: one loaded, type-checked version of a plugin, callable any number of times.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::Component;
use wasmtime::{Engine, Store, Trap, UpdateDeadline};

use super::bindings::{Operator, OperatorPre, guest};
use super::convert;
use super::engine::{EPOCH_TICK, EpochTicker};
use super::error::{CallError, LoadError, MAX_PLUGIN_MESSAGE};
use super::log_budget::one_line;
use super::memory_limiter::MemoryLimitExceeded;
use super::state::{HostState, LookupScope};
use crate::contract::{Manifest, Request, Response, Scope};
use crate::objects::{ObjectCache, name_of, namespace_of};
use crate::policy::{Allowance, Allowances, Grants, Limits};
use wasmop_types::{AdmissionRequest, Verdict};

/// One version of a plugin: compiled, linked against the host's imports and type-checked
/// against the world once; every call then gets a fresh instance in a fresh store.
///
/// Cheap to clone; a clone keeps the version alive, so calls that started on it finish on it
/// even after a newer version replaced it.
#[derive(Clone)]
pub struct Plugin {
    inner: Arc<Inner>,
}

struct Inner {
    pre: OperatorPre<HostState>,
    engine: Engine,
    metered: bool,
    manifest: Arc<Manifest>,
    name: Arc<str>,
    digest: String,
    allowance: Allowance,
    _ticker: Arc<EpochTicker>,
}

/// The engine and linker a plugin is loaded with.
pub(super) struct Linked<'a> {
    pub engine: &'a Engine,
    pub linker: &'a wasmtime::component::Linker<HostState>,
    /// Whether the engine counts fuel (every store then needs some).
    pub metered: bool,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin").field("name", &self.inner.name).field("digest", &self.inner.digest).finish()
    }
}

/// What one call cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallStats {
    /// Wall time, instantiation included.
    pub elapsed: Duration,
    /// Largest total linear memory the instance had.
    pub memory_high_water: u64,
}

impl Plugin {
    /// Link `component`, check it implements the world, and ask it for its manifest (under
    /// the default limits); later calls run under the policy for the plugin's name.
    pub(super) async fn new(
        linked: Linked<'_>,
        component: &Component,
        digest: String,
        allowances: &Allowances,
        ticker: Arc<EpochTicker>,
    ) -> Result<Self, LoadError> {
        let Linked { engine, linker, metered } = linked;
        let wrong_world = |e: wasmtime::Error| LoadError::WrongWorld(format!("{e:#}"));
        let pre = OperatorPre::new(linker.instantiate_pre(component).map_err(wrong_world)?).map_err(wrong_world)?;
        let name: Arc<str> = Arc::from("(loading)");
        let defaults = Call { engine, pre: &pre, plugin: &name, limits: &allowances.defaults().limits, metered };
        let (raw, _) = call(defaults, None, async |op: Operator, store: &mut Store<HostState>| {
            op.wasmop_plugin_reconciler().call_manifest(store).await
        })
        .await
        .map_err(LoadError::Describe)?;
        let manifest = convert::manifest(raw)?;
        let name = Arc::from(manifest.name.as_str());
        let allowance = allowances.for_plugin(&manifest.name).clone();
        Ok(Self {
            inner: Arc::new(Inner {
                pre,
                engine: engine.clone(),
                metered,
                manifest: Arc::new(manifest),
                name,
                digest,
                allowance,
                _ticker: ticker,
            }),
        })
    }

    /// The plugin's validated manifest.
    pub fn manifest(&self) -> &Arc<Manifest> {
        &self.inner.manifest
    }

    /// The plugin name (from its manifest).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// sha256 of the plugin file, hex.
    pub fn digest(&self) -> &str {
        &self.inner.digest
    }

    /// The limits every call runs under (from the host's policy for this plugin's name).
    pub fn limits(&self) -> &Limits {
        &self.inner.allowance.limits
    }

    /// What the host's operator grants this plugin beyond its manifest.
    pub fn grants(&self) -> &Grants {
        &self.inner.allowance.grants
    }

    fn call_params(&self) -> Call<'_> {
        let inner = &*self.inner;
        Call {
            engine: &inner.engine,
            pre: &inner.pre,
            plugin: &inner.name,
            limits: &inner.allowance.limits,
            metered: inner.metered,
        }
    }

    /// Reconcile one parent: a fresh instance, the request in, the validated response out.
    /// Lookups the plugin makes are answered from `cache`, scoped by the manifest.
    ///
    /// # Errors
    /// [`CallError`]: the plugin's own error, or a timeout, memory exhaustion, a trap, or
    /// malformed output, each typed. The host is never affected.
    pub async fn reconcile(&self, request: &Request, cache: Arc<dyn ObjectCache>) -> Result<(Response, CallStats), CallError> {
        let manifest = Arc::clone(&self.inner.manifest);
        let namespace = match manifest.scope {
            Scope::Namespaced => namespace_of(&request.parent).map(str::to_owned),
            Scope::Cluster => None,
        };
        let parent_name = name_of(&request.parent).unwrap_or_default().to_owned();
        let lookup = LookupScope { manifest, grants: self.inner.allowance.grants.clone(), namespace, parent_name, cache };
        let raw_request = convert::request(request);
        let (result, stats) = call(self.call_params(), Some(lookup), async |op: Operator, store: &mut Store<HostState>| {
            op.wasmop_plugin_reconciler().call_reconcile(store, &raw_request).await
        })
        .await?;
        match result {
            Ok(raw) => Ok((convert::response(raw).validate(&self.inner.allowance.limits.output)?, stats)),
            Err(guest::ReconcileError::Retryable(m)) => Err(CallError::Retryable(one_line(&m, MAX_PLUGIN_MESSAGE))),
            Err(guest::ReconcileError::Terminal(m)) => Err(CallError::Terminal(one_line(&m, MAX_PLUGIN_MESSAGE))),
        }
    }
}

impl Plugin {
    /// Answer one admission request for the webhook `webhook` of the manifest: a fresh
    /// instance under the same limits as a reconcile; lookups are answered from `cache`, scoped
    /// by the manifest and, for a namespaced object, its namespace.
    ///
    /// # Errors
    /// [`CallError::NoSuchWebhook`] when the manifest declares no such webhook (a WIT 0.1.0
    /// plugin declares none); otherwise as [`Plugin::reconcile`]. Callers fail closed: an error
    /// is a denial.
    pub async fn admit(
        &self,
        webhook: &str,
        _request: &AdmissionRequest,
        _cache: Arc<dyn ObjectCache>,
    ) -> Result<(Verdict, CallStats), CallError> {
        // Every plugin this runtime loads implements WIT 0.1.0, which has no admission export.
        Err(CallError::NoSuchWebhook(webhook.to_owned()))
    }
}

/// What [`call`] runs: a pre-instance, under limits.
struct Call<'a> {
    engine: &'a Engine,
    pre: &'a OperatorPre<HostState>,
    plugin: &'a Arc<str>,
    limits: &'a Limits,
    metered: bool,
}

/// Run `f` on a fresh instance in a fresh store, under the deadline, memory cap and fuel.
async fn call<R>(
    params: Call<'_>,
    lookup: Option<LookupScope>,
    f: impl AsyncFnOnce(Operator, &mut Store<HostState>) -> wasmtime::Result<R>,
) -> Result<(R, CallStats), CallError> {
    let Call { engine, pre, plugin, limits, metered } = params;
    let started = Instant::now();
    let mut store = Store::new(engine, HostState::new(Arc::clone(plugin), limits.memory_bytes, lookup));
    store.limiter(|s| &mut s.limiter);
    if metered {
        store.set_fuel(limits.fuel.unwrap_or(u64::MAX)).map_err(|e| CallError::Host(format!("cannot set fuel: {e}")))?;
    }
    // `None`: past what an `Instant` can hold, so never. Flags and the policy cap the deadline
    // at `MAX_DEADLINE`; only `Limits` built in code can get here.
    let deadline = started.checked_add(limits.deadline);
    store.epoch_deadline_callback(move |_| {
        Ok(if deadline.is_some_and(|d| Instant::now() >= d) { UpdateDeadline::Interrupt } else { UpdateDeadline::Yield(1) })
    });
    store.set_epoch_deadline(1);
    let mut instantiated = false;
    let run = async {
        let instance = pre.instantiate_async(&mut store).await?;
        instantiated = true;
        f(instance, &mut store).await
    };
    // The epoch callback interrupts the guest; the timer also covers time spent in the host.
    let outcome = tokio::time::timeout(limits.deadline.saturating_add(4 * EPOCH_TICK), run).await;
    store.data_mut().flush_guest_output();
    let state = store.data();
    let stats = CallStats { elapsed: started.elapsed(), memory_high_water: state.limiter.high_water() };
    match outcome {
        Ok(Ok(_)) if !state.refused_lookups.is_empty() => Err(CallError::LookupRefused(state.refused_lookups.join("; "))),
        Ok(Ok(value)) => Ok((value, stats)),
        Ok(Err(error)) => match error.downcast_ref::<MemoryLimitExceeded>() {
            Some(oom) if !instantiated => Err(CallError::MemoryTooSmall { limit: oom.limit, needed: oom.requested }),
            _ => Err(classify(&error, limits, stats.elapsed, state.last_stderr_line())),
        },
        Err(_) => Err(CallError::Timeout { deadline: limits.deadline, elapsed: stats.elapsed }),
    }
}

/// Turn a wasmtime error from instantiate or call into a typed [`CallError`].
fn classify(error: &wasmtime::Error, limits: &Limits, elapsed: Duration, stderr: Option<String>) -> CallError {
    if let Some(oom) = error.downcast_ref::<MemoryLimitExceeded>() {
        return CallError::OutOfMemory { limit: oom.limit };
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => CallError::Timeout { deadline: limits.deadline, elapsed },
        Some(Trap::OutOfFuel) => CallError::OutOfFuel { fuel: limits.fuel.unwrap_or(u64::MAX) },
        Some(trap) => {
            let message = match stderr {
                Some(line) => format!("{trap} (guest stderr: {line})"),
                None => trap.to_string(),
            };
            CallError::Trap { message }
        }
        None => CallError::Host(format!("{error:#}").lines().next().unwrap_or_default().to_owned()),
    }
}
