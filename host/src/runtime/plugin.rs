//! [`Plugin`]: one loaded, type-checked version of a plugin, callable any number of times.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::{Component, Instance, InstancePre};
use wasmtime::{Engine, Store, Trap, UpdateDeadline};

use super::engine::{EPOCH_TICK, EpochTicker};
use super::error::{CallError, LoadError};
use super::exports::{Exports, Reconciled, WitVersion};
use super::memory_limiter::MemoryLimitExceeded;
use super::response_budget::{Reservation, ResponseBudget};
use super::state::{HostState, LookupScope};
use crate::contract::{Manifest, ManifestError, Request, Response, Scope};
use crate::metrics::Metrics;
use crate::objects::{ObjectCache, name_of, namespace_of};
use crate::policy::{Allowance, Allowances, Grants, Limits};
use wasmop_types::{AdmissionRequest, Verdict, Webhook};

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
    pre: InstancePre<HostState>,
    exports: Exports,
    engine: Engine,
    metered: bool,
    manifest: Arc<Manifest>,
    name: Arc<str>,
    digest: String,
    allowance: Allowance,
    budget: ResponseBudget,
    metrics: Arc<Metrics>,
    ticker: Arc<EpochTicker>,
}

/// The engine and linker a plugin is loaded with.
pub(super) struct Linked<'a> {
    pub engine: &'a Engine,
    pub linker: &'a wasmtime::component::Linker<HostState>,
    /// Whether the engine counts fuel (every store then needs some).
    pub metered: bool,
    /// The runtime's budget of response bytes held at once.
    pub budget: &'a ResponseBudget,
    /// Where the plugin's calls are recorded.
    pub metrics: &'a Arc<Metrics>,
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
    /// Of `elapsed`, the time to a ready instance: the fresh store, the instance's memories
    /// and tables, and the guest's start-up code (a core module's start function or
    /// `_initialize`, where the component has one) — what a call costs before the export runs.
    pub instantiate: Duration,
    /// Largest total linear memory the instance had.
    pub memory_high_water: u64,
}

impl Plugin {
    /// Link `component`, find which world it implements, ask it for its manifest (under the
    /// default limits) and type-check its exports; later calls run under the policy for the
    /// plugin's name.
    pub(super) async fn new(
        linked: Linked<'_>,
        component: &Component,
        digest: String,
        allowances: &Allowances,
        ticker: Arc<EpochTicker>,
    ) -> Result<Self, LoadError> {
        let Linked { engine, linker, metered, budget, metrics } = linked;
        let wrong_world = |e: wasmtime::Error| LoadError::WrongWorld(format!("{e:#}"));
        let pre = linker.instantiate_pre(component).map_err(wrong_world)?;
        let exports = Exports::find(&pre)?;
        let name: Arc<str> = Arc::from("(loading)");
        let limits = &allowances.defaults().limits;
        let defaults = Call { engine, ticker: &ticker, pre: &pre, plugin: &name, limits, deadline: limits.deadline, metered };
        let exports_ref = &exports;
        let (described, _) = call(defaults, None, async |instance: Instance, store: &mut Store<HostState>| {
            // Type-check every export first: a mismatch is the wrong world, not a failed call.
            if let Err(e) = exports_ref.check(&mut *store, &instance) {
                return Ok(Err(e));
            }
            exports_ref.describe(store, &instance).await
        })
        .await
        .map_err(LoadError::Describe)?;
        let manifest = described?;
        if !exports.admits() && !manifest.webhooks.is_empty() {
            return Err(ManifestError::WebhooksWithoutAdmission(manifest.webhooks.len()).into());
        }
        let name = Arc::from(manifest.name.as_str());
        let allowance = allowances.for_plugin(&manifest.name).clone();
        Ok(Self {
            inner: Arc::new(Inner {
                pre,
                exports,
                engine: engine.clone(),
                metered,
                manifest: Arc::new(manifest),
                name,
                digest,
                allowance,
                budget: budget.clone(),
                metrics: Arc::clone(metrics),
                ticker,
            }),
        })
    }

    /// The WIT version the plugin was built against.
    pub fn wit_version(&self) -> WitVersion {
        self.inner.exports.version()
    }

    /// Whether the plugin reconciles (exports `reconciler`). The controller of a plugin that
    /// does not (world `webhook`) keeps the watches its lookups read and reconciles nothing.
    pub fn reconciles(&self) -> bool {
        self.inner.exports.reconciles()
    }

    /// Whether the plugin answers admission requests (exports `admission`, WIT 0.2.0 and later).
    pub fn admits(&self) -> bool {
        self.inner.exports.admits()
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

    fn call_params(&self, deadline: Duration) -> Call<'_> {
        let inner = &*self.inner;
        Call {
            engine: &inner.engine,
            ticker: &inner.ticker,
            pre: &inner.pre,
            plugin: &inner.name,
            limits: &inner.allowance.limits,
            deadline,
            metered: inner.metered,
        }
    }

    /// Reconcile one parent: a fresh instance, the request in, the validated response out.
    /// Lookups the plugin makes are answered from `cache`, scoped by the manifest.
    ///
    /// # Errors
    /// [`CallError`]: the plugin's own error ([`CallError::failure`], its status and conditions
    /// checked as a response's: [`CallError::MalformedOutput`] when they fail the checks), or a
    /// timeout, memory exhaustion, a trap, or malformed output, each typed; [`CallError::Host`]
    /// for a plugin that does not reconcile
    /// ([`Plugin::reconciles`]). The host is never affected.
    pub async fn reconcile(&self, request: &Request, cache: Arc<dyn ObjectCache>) -> Result<(Response, CallStats), CallError> {
        self.reconcile_reserved(request, cache).await.map(|(response, stats, _)| (response, stats))
    }

    /// [`Plugin::reconcile`], the response's bytes reserved from the runtime's
    /// [`ResponseBudget`] before it is parsed (waiting while they do not fit): the reservation
    /// comes back with the response, for the caller to hold until it is done with it (planned
    /// and written).
    ///
    /// # Errors
    /// As [`Plugin::reconcile`].
    pub async fn reconcile_reserved(
        &self,
        request: &Request,
        cache: Arc<dyn ObjectCache>,
    ) -> Result<(Response, CallStats, Reservation), CallError> {
        let started = Instant::now();
        let reconciled = self.call_reconcile(request, cache).await;
        self.record(started, reconciled.as_ref().map(|(_, stats, _)| stats));
        reconciled
    }

    /// [`Plugin::reconcile_reserved`], unrecorded.
    async fn call_reconcile(
        &self,
        request: &Request,
        cache: Arc<dyn ObjectCache>,
    ) -> Result<(Response, CallStats, Reservation), CallError> {
        let manifest = Arc::clone(&self.inner.manifest);
        let namespace = match manifest.scope {
            Scope::Namespaced => namespace_of(request.parent.head()).map(str::to_owned),
            Scope::Cluster => None,
        };
        let parent_name = name_of(request.parent.head()).unwrap_or_default().to_owned();
        let lookup = LookupScope {
            manifest,
            grants: self.inner.allowance.grants.clone(),
            namespace,
            parent_name,
            cache,
            admission: false,
        };
        let exports = &self.inner.exports;
        let (raw, stats) = call(self.call_params(self.limits().deadline), Some(lookup), async |instance: Instance, store| {
            exports.reconcile(store, &instance, request).await
        })
        .await?;
        // Reserved: the text and what it parses into (dense JSON parses into many times its
        // text), estimated once on the text and checked against the limits by the same figure.
        let limits = &self.inner.allowance.limits.output;
        match raw? {
            Reconciled::Response(raw) => {
                let estimate = raw.parsed_estimate();
                let reservation = self.inner.budget.reserve(raw.held_bytes(limits, estimate)).await;
                Ok((raw.validate_estimated(limits, estimate)?, stats, reservation))
            }
            Reconciled::Failed { retryable, failure } => {
                // Held while the failure's status is parsed; a failure is recorded at once.
                let _reservation = self.inner.budget.reserve(failure.held_bytes(limits)).await;
                let failure = failure.validate(limits)?;
                Err(if retryable { CallError::Retryable(failure) } else { CallError::Terminal(failure) })
            }
        }
    }
}

impl Plugin {
    /// The webhook `name` of the manifest.
    pub fn webhook(&self, name: &str) -> Option<&Webhook> {
        self.inner.manifest.webhooks.iter().find(|w| w.name == name)
    }

    /// Answer one admission request for the webhook `webhook` of the manifest: a fresh
    /// instance under the same memory cap, fuel and output limits as a reconcile, with the
    /// deadline of [`admission_deadline`]. Lookups are answered from `cache`, scoped by the
    /// manifest as for a reconcile, with the admitted object in the parent's place: its
    /// namespace (for a namespaced parent) and its name (in related kinds' selectors); every
    /// object of the parent's kind in that scope is visible. The answer is checked
    /// ([`RawVerdict::validate`](crate::contract::RawVerdict::validate)): a mutated object
    /// keeps its identity, only a mutating webhook mutates, sizes are bounded.
    ///
    /// # Errors
    /// [`CallError::NoSuchWebhook`] when the manifest declares no such webhook (a WIT 0.1.0
    /// plugin declares none) or the plugin disowns it; [`CallError::Terminal`] when the plugin
    /// says it cannot judge the request; [`CallError::MalformedVerdict`] for an answer the
    /// host refuses; otherwise as [`Plugin::reconcile`]. Callers fail closed: an error is a
    /// denial.
    pub async fn admit(
        &self,
        webhook: &str,
        request: &AdmissionRequest,
        cache: Arc<dyn ObjectCache>,
    ) -> Result<(Verdict, CallStats), CallError> {
        self.admit_within(webhook, request, cache, Duration::MAX).await
    }

    /// [`Plugin::admit`], given up after `within` at the latest (the time the caller has left to
    /// answer): then [`CallError::Timeout`].
    ///
    /// # Errors
    /// As [`Plugin::admit`].
    pub async fn admit_within(
        &self,
        webhook: &str,
        request: &AdmissionRequest,
        cache: Arc<dyn ObjectCache>,
        within: Duration,
    ) -> Result<(Verdict, CallStats), CallError> {
        let started = Instant::now();
        let admitted = match tokio::time::timeout(within, self.call_admit(webhook, request, cache)).await {
            Ok(admitted) => admitted,
            Err(_) => Err(CallError::Timeout { deadline: within, elapsed: started.elapsed() }),
        };
        self.record(started, admitted.as_ref().map(|(_, stats)| stats));
        admitted
    }

    /// [`Plugin::admit`], unrecorded.
    async fn call_admit(
        &self,
        webhook: &str,
        request: &AdmissionRequest,
        cache: Arc<dyn ObjectCache>,
    ) -> Result<(Verdict, CallStats), CallError> {
        let Some(declared) = self.webhook(webhook) else { return Err(CallError::NoSuchWebhook(webhook.to_owned())) };
        let manifest = Arc::clone(&self.inner.manifest);
        let namespace = match manifest.scope {
            // A cluster-scoped object admitted for a namespaced parent: no namespace is readable.
            Scope::Namespaced => Some(request.namespace.clone().unwrap_or_default()),
            Scope::Cluster => None,
        };
        let parent_name = request.name.clone().unwrap_or_default();
        let lookup =
            LookupScope { manifest, grants: self.inner.allowance.grants.clone(), namespace, parent_name, cache, admission: true };
        let deadline = admission_deadline(self.limits().deadline, declared.timeout_seconds);
        let exports = &self.inner.exports;
        let (raw, stats) = call(self.call_params(deadline), Some(lookup), async |instance: Instance, store| {
            exports.admit(store, &instance, webhook, request).await
        })
        .await?;
        let raw = raw?;
        // The verdict's bytes and its parsed form are held while it is parsed and checked,
        // within the runtime's response budget as a reconcile's are; an admission does not wait past its deadline
        // for room (the caller denies).
        let bytes = raw.held_bytes();
        let _reservation = tokio::time::timeout(deadline, self.inner.budget.reserve(bytes)).await.map_err(|_| {
            CallError::Host(format!(
                "no room within {deadline:?} in the host's response budget for a verdict holding {bytes} bytes parsed"
            ))
        })?;
        let verdict = raw.validate(request, declared.type_, &self.inner.allowance.limits.output)?;
        Ok((verdict, stats))
    }
}

impl Plugin {
    /// Record one call in the runtime's metrics: its duration and memory high-water, or, when
    /// it failed, the time until it failed and the reason.
    fn record(&self, started: Instant, called: Result<&CallStats, &CallError>) {
        let metrics = &self.inner.metrics;
        match called {
            Ok(stats) => metrics.called(&self.inner.name, stats.elapsed.as_secs_f64(), stats.memory_high_water, None),
            Err(e) => metrics.called(&self.inner.name, started.elapsed().as_secs_f64(), 0, Some(e.reason())),
        }
    }
}

/// The deadline of an admission call: the plugin's deadline, but at most half the webhook's
/// `timeoutSeconds`, so the host answers (a denial, when the plugin is too slow) well before
/// the API server gives up on it.
///
/// ```
/// use std::time::Duration;
/// use wasmop::runtime::admission_deadline;
/// assert_eq!(admission_deadline(Duration::from_secs(1), 10), Duration::from_secs(1));
/// assert_eq!(admission_deadline(Duration::from_secs(5), 2), Duration::from_secs(1));
/// assert_eq!(admission_deadline(Duration::from_secs(5), 1), Duration::from_millis(500));
/// ```
pub fn admission_deadline(deadline: Duration, timeout_seconds: u32) -> Duration {
    deadline.min(Duration::from_secs(u64::from(timeout_seconds)) / 2)
}

/// What [`call`] runs: a pre-instance, under limits and a deadline.
struct Call<'a> {
    engine: &'a Engine,
    /// Kept ticking while the call runs: its deadline needs the epoch to advance.
    ticker: &'a EpochTicker,
    pre: &'a InstancePre<HostState>,
    plugin: &'a Arc<str>,
    limits: &'a Limits,
    /// The call's deadline: the limits' own, or shorter for an admission call.
    deadline: Duration,
    metered: bool,
}

/// Run `f` on a fresh instance in a fresh store, under the deadline, memory cap and fuel.
async fn call<R>(
    params: Call<'_>,
    lookup: Option<LookupScope>,
    f: impl AsyncFnOnce(Instance, &mut Store<HostState>) -> wasmtime::Result<R>,
) -> Result<(R, CallStats), CallError> {
    let Call { engine, ticker, pre, plugin, limits, deadline: limit, metered } = params;
    let _ticking = ticker.ticking();
    let started = Instant::now();
    let mut store = Store::new(engine, HostState::new(Arc::clone(plugin), limits.memory_bytes, lookup));
    store.limiter(|s| &mut s.limiter);
    if metered {
        store.set_fuel(limits.fuel.unwrap_or(u64::MAX)).map_err(|e| CallError::Host(format!("cannot set fuel: {e}")))?;
    }
    // `None`: past what an `Instant` can hold, so never. Flags and the policy cap the deadline
    // at `MAX_DEADLINE`; only `Limits` built in code can get here.
    let deadline = started.checked_add(limit);
    store.epoch_deadline_callback(move |_| {
        Ok(if deadline.is_some_and(|d| Instant::now() >= d) { UpdateDeadline::Interrupt } else { UpdateDeadline::Yield(1) })
    });
    store.set_epoch_deadline(1);
    let mut instantiated = None;
    let run = async {
        let instance = pre.instantiate_async(&mut store).await?;
        instantiated = Some(started.elapsed());
        f(instance, &mut store).await
    };
    // The epoch callback interrupts the guest; the timer also covers time spent in the host.
    let outcome = tokio::time::timeout(limit.saturating_add(4 * EPOCH_TICK), run).await;
    store.data_mut().flush_guest_output();
    let state = store.data();
    let elapsed = started.elapsed();
    let stats =
        CallStats { elapsed, instantiate: instantiated.unwrap_or(elapsed), memory_high_water: state.limiter.high_water() };
    match outcome {
        Ok(Ok(_)) if !state.refused_lookups.is_empty() => Err(CallError::LookupRefused(state.refused_lookups.join("; "))),
        Ok(Ok(value)) => Ok((value, stats)),
        Ok(Err(error)) => match error.downcast_ref::<MemoryLimitExceeded>() {
            Some(oom) if instantiated.is_none() => Err(CallError::MemoryTooSmall { limit: oom.limit, needed: oom.requested }),
            _ => Err(classify(&error, limits, limit, stats.elapsed, state.last_stderr_line())),
        },
        Err(_) => Err(CallError::Timeout { deadline: limit, elapsed: stats.elapsed }),
    }
}

/// Turn a wasmtime error from instantiate or call into a typed [`CallError`].
fn classify(
    error: &wasmtime::Error,
    limits: &Limits,
    deadline: Duration,
    elapsed: Duration,
    stderr: Option<String>,
) -> CallError {
    if let Some(oom) = error.downcast_ref::<MemoryLimitExceeded>() {
        return CallError::OutOfMemory { limit: oom.limit };
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => CallError::Timeout { deadline, elapsed },
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
