//! [`Reloader`]: the running plugins follow the files of the plugins directory.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::cluster_status::ClusterStatus;
use super::compile_status::{CompileReport, CompileTarget};
use super::directory::{DirectoryEvents, scan};
use super::file_report::{needs_report, rejection_reason};
use super::file_status::FileStatus;
use super::pull_status::PullReport;
use compiles::Compile;
pub use compiles::SHOW_COMPILING_AFTER;

mod compiles;
use crate::controller::{BreakerStatus, CpuStatus, Manager, PluginController, PluginError, Removal, StartError};
use crate::plugin_config::ConfigStatus;
use crate::runtime::{LoadError, Plugin};

/// How the directory is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReloadConfig {
    /// Quiet time after the last change before files are re-read. Default 200 ms.
    pub debounce: Duration,
    /// Full rescan period, a safety net for missed events. Default 30 s.
    pub rescan: Duration,
}

impl Default for ReloadConfig {
    fn default() -> Self {
        Self { debounce: Duration::from_millis(200), rescan: Duration::from_secs(30) }
    }
}

/// First delay before a plugin that failed to start (a kind not served or not listable) is
/// tried again; it doubles per failure up to the rescan period.
pub const START_RETRY: Duration = Duration::from_secs(1);

/// Told when the set of serving plugins changes (the admission layer keeps its webhook
/// configurations equal to it).
pub trait PluginSetObserver: Send + Sync {
    /// `leaving`: the plugin named is about to stop serving (its file was removed, or now
    /// provides another plugin); the call comes *before* it stops, and the plugin stops once it
    /// returns. `None`: a pass over the directory ended, after loading, replacing or starting
    /// plugins.
    fn plugins_changed<'a>(&'a self, leaving: Option<&'a str>) -> futures::future::BoxFuture<'a, ()>;
}

/// Keeps a [`Manager`]'s plugins in step with a directory.
///
/// A removed file whose plugin holds finalizers on parents is handled as the host policy's
/// `onRemove` says ([`crate::policy::OnRemove`]). After its first pass the reloader also
/// reconciles the `WasmPlugin` objects of its directory with the files it found: objects of
/// files gone while the host was down are deleted, objects of files that no longer load say so.
pub struct Reloader {
    me: Weak<Reloader>,
    manager: Arc<Manager>,
    dir: PathBuf,
    config: ReloadConfig,
    files: Mutex<BTreeMap<PathBuf, FileStatus>>,
    sync_lock: tokio::sync::Mutex<()>,
    /// Reports for the `WasmPlugin` objects, written in order by a background task so that a
    /// swap never waits for API round trips.
    reports: tokio::sync::mpsc::UnboundedSender<Report>,
    /// Per plugin: the controller whose circuit breaker is followed, and the task forwarding
    /// its transitions to `reports`.
    breakers: Mutex<HashMap<String, (std::sync::Weak<PluginController>, tokio::task::AbortHandle)>>,
    /// Per plugin: the controller whose configuration status is followed, and its task.
    configs: Mutex<HashMap<String, (std::sync::Weak<PluginController>, tokio::task::AbortHandle)>>,
    /// Per plugin: the controller whose CPU share status is followed, and its task.
    cpus: Mutex<HashMap<String, (std::sync::Weak<PluginController>, tokio::task::AbortHandle)>>,
    /// Files whose plugin failed to start: failures in a row, and when to try again.
    retries: Mutex<HashMap<PathBuf, (u32, tokio::time::Instant)>>,
    /// Compiles in flight, per file (at most one: a newer content abandons the older one's).
    compiles: Mutex<HashMap<PathBuf, Compile>>,
    /// Bumped whenever a compile ends (applied or abandoned): what [`Reloader::sync`] waits on.
    compiles_ended: tokio::sync::watch::Sender<u64>,
    /// Whether a pass over the directory has ended.
    passed: AtomicBool,
    /// Whether the stale `WasmPlugin` objects were dealt with (after the first pass and the
    /// compiles it started).
    stale_checked: AtomicBool,
    /// Told about plugins leaving and passes ending ([`Reloader::observe`]).
    observer: Mutex<Option<Arc<dyn PluginSetObserver>>>,
    /// Plugins whose pulls were reported ([`Reloader::pulled`]).
    pulled: Mutex<BTreeSet<String>>,
}

/// A change to report in the cluster.
enum Report {
    Loaded(FileStatus, Option<Arc<crate::runtime::Plugin>>),
    Removed(String),
    /// A file from which no plugin runs was rejected, for this reason: its file report.
    FileRejected(FileStatus, &'static str),
    /// The file report of this file is over: the file is gone or provides a plugin now.
    FileReportGone(PathBuf),
    /// A removed file's plugin serves finalizing calls only, for `holders` parents.
    Finalizing(FileStatus, Option<Arc<crate::runtime::Plugin>>, usize),
    /// Deal with `WasmPlugin` objects of the directory for which no plugin runs: keep those
    /// named in `keep`, mark those of a `rejected` file (with the error), delete the rest.
    Stale {
        dir: PathBuf,
        keep: BTreeSet<String>,
        rejected: BTreeMap<PathBuf, String>,
    },
    /// A plugin's circuit breaker changed; `opened` when it tripped since the last report.
    Breaker {
        plugin: String,
        status: BreakerStatus,
        opened: bool,
    },
    /// A plugin's configuration status changed (or a plugin was refused for its configuration).
    Config {
        plugin: String,
        status: ConfigStatus,
    },
    /// A plugin's CPU share or whether it is throttled changed.
    Cpu {
        plugin: String,
        status: CpuStatus,
    },
    /// The latest pull of a file from its registry, shown with the file's status.
    Pull(FileStatus, Option<Arc<crate::runtime::Plugin>>, Box<PullReport>),
    /// A file's compile started or ended, shown on `target`.
    Compile {
        target: CompileTarget,
        file: PathBuf,
        report: CompileReport,
    },
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader").field("dir", &self.dir).field("config", &self.config).finish_non_exhaustive()
    }
}

impl Reloader {
    /// A reloader for `dir`; nothing happens until [`Reloader::sync`] or [`Reloader::run`].
    /// Must be called within a tokio runtime (it starts the task writing `WasmPlugin`s, which
    /// writes only while the manager's [`Leadership`](crate::leader::Leadership) leads).
    pub fn new(manager: Arc<Manager>, dir: impl Into<PathBuf>, config: ReloadConfig) -> Arc<Self> {
        let cluster = ClusterStatus::new(manager.client().clone(), manager.install());
        let leadership = manager.leadership().clone();
        let (reports, mut rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            // The latest pull of each file pulled from a registry, shown with its status.
            let mut pulls: HashMap<PathBuf, PullReport> = HashMap::new();
            while let Some(report) = rx.recv().await {
                // A standby writes nothing: its reports wait, in order, until it leads (the
                // last one of each plugin then stands, as it would have on the leader).
                leadership.until_leader().await;
                match report {
                    Report::Loaded(status, plugin) => cluster.publish(&status, plugin.as_deref(), pulls.get(&status.file)).await,
                    Report::Pull(status, plugin, pull) => {
                        // A good pull of a file not loaded yet is shown when it loads.
                        if pull.state == super::PullState::Failed || status.plugin.is_some() {
                            cluster.publish(&status, plugin.as_deref(), Some(&*pull)).await;
                        }
                        pulls.insert(status.file, *pull);
                    }
                    Report::Removed(name) => cluster.remove(&name).await,
                    Report::FileRejected(status, reason) => cluster.publish_file_report(&status, reason).await,
                    Report::FileReportGone(file) => cluster.remove_file_report(&file).await,
                    Report::Finalizing(status, plugin, holders) => {
                        cluster.publish_finalizing(&status, plugin.as_deref(), holders).await
                    }
                    Report::Stale { dir, keep, rejected } => cluster.reconcile_stale(&dir, &keep, &rejected).await,
                    Report::Breaker { plugin, status, opened } => cluster.publish_breaker(&plugin, &status, opened).await,
                    Report::Config { plugin, status } => cluster.publish_config(&plugin, &status).await,
                    Report::Cpu { plugin, status } => cluster.publish_cpu(&plugin, &status).await,
                    Report::Compile { target, file, report } => cluster.publish_compile(&target, &file, &report).await,
                }
            }
        });
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            manager,
            dir: dir.into(),
            config,
            files: Mutex::default(),
            sync_lock: Default::default(),
            reports,
            breakers: Mutex::default(),
            configs: Mutex::default(),
            cpus: Mutex::default(),
            retries: Mutex::default(),
            compiles: Mutex::default(),
            compiles_ended: tokio::sync::watch::Sender::new(0),
            passed: AtomicBool::new(false),
            stale_checked: AtomicBool::new(false),
            observer: Mutex::default(),
            pulled: Mutex::default(),
        })
    }

    /// Tell `observer` about every change of the serving plugins from now on, instead of the
    /// previous one (if any).
    pub fn observe(&self, observer: Arc<dyn PluginSetObserver>) {
        *self.observer.lock().expect("observer lock") = Some(observer);
    }

    async fn notify(&self, leaving: Option<&str>) {
        let observer = self.observer.lock().expect("observer lock").clone();
        if let Some(observer) = observer {
            observer.plugins_changed(leaving).await;
        }
    }

    /// The directory followed.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Show the latest pull of `plugin`'s file (`PLUGIN.wasm` in the directory) from its
    /// registry on its `WasmPlugin`, with the file's status (a plugin with no file yet gets an
    /// object saying so). A failed pull makes `Ready=False` with its reason until a pull
    /// succeeds; the version serving keeps serving.
    pub fn pulled(&self, plugin: &str, pull: PullReport) {
        self.pulled.lock().expect("pulled lock").insert(plugin.to_owned());
        let file = self.dir.join(format!("{plugin}.wasm"));
        let known = self.files.lock().expect("files lock").get(&file).cloned();
        let status = known.filter(|s| s.plugin.is_some() || s.not_started.is_some()).unwrap_or_else(|| FileStatus {
            file,
            not_started: Some(plugin.to_owned()),
            ..FileStatus::default()
        });
        let running = status.plugin.as_deref().and_then(|p| self.manager.controller(p)).map(|c| c.plugin());
        let _ = self.reports.send(Report::Pull(status, running, Box::new(pull)));
    }

    /// The status of every plugin file seen.
    pub fn statuses(&self) -> Vec<FileStatus> {
        self.files.lock().expect("files lock").values().cloned().collect()
    }

    /// Follow the directory until the task is dropped: an initial pass, then a pass after
    /// every debounced change, every rescan period, and when a plugin that failed to start is
    /// due to be tried again (backoff from [`START_RETRY`], doubling up to the rescan period).
    ///
    /// # Errors
    /// When the directory cannot be watched at all.
    pub async fn run(self: Arc<Self>) -> notify::Result<()> {
        let mut events = DirectoryEvents::watch(&self.dir, self.config.debounce)?;
        self.pass().await;
        let mut rescan = tokio::time::interval(self.config.rescan);
        rescan.tick().await;
        let mut compile_ended = self.compiles_ended.subscribe();
        loop {
            let retry = self.retries.lock().expect("retries lock").values().map(|(_, at)| *at).min();
            tokio::select! {
                changed = events.changed() => if changed.is_none() { return Ok(()) },
                _ = rescan.tick() => {}
                () = tokio::time::sleep_until(retry.unwrap_or_else(far_future)), if retry.is_some() => {}
                // A compile ended after the pass that started it: a plugin that failed to
                // start has a retry due now, which the wait above must see.
                Ok(()) = compile_ended.changed() => continue,
            }
            self.pass().await;
        }
    }

    /// One pass ([`Reloader::pass`]), then wait until every compile in flight at its end is
    /// applied (its plugin started, swapped in or rejected) or abandoned.
    pub async fn sync(&self) {
        let waiting = self.pass().await;
        let mut ended = self.compiles_ended.subscribe();
        loop {
            let in_flight = {
                let compiles = self.compiles.lock().expect("compiles lock");
                waiting.iter().any(|(path, ticket)| compiles.get(path).is_some_and(|c| c.ticket == *ticket))
            };
            if !in_flight {
                // A compile leaves the map when its result starts being applied, under the
                // pass lock: taking the lock once waits until that application is done (the
                // plugin started, swapped in or rejected).
                drop(self.sync_lock.lock().await);
                return;
            }
            if ended.changed().await.is_err() {
                return;
            }
        }
    }

    /// One pass: read every plugin file, start compiling the ones whose content changed (in
    /// the background: the pass goes on, the previous version keeps serving until the new one
    /// is ready and swapped in, and a newer content abandons an older one's compile), stop the
    /// plugins whose file is gone. Returns the compiles in flight (file and ticket).
    pub async fn pass(&self) -> Vec<(PathBuf, u64)> {
        let _one_at_a_time = self.sync_lock.lock().await;
        let present = match scan(&self.dir) {
            Ok(files) => files,
            Err(e) => {
                tracing::error!(dir = %self.dir.display(), error = %e, "cannot read the plugins directory; keeping every plugin as is");
                return self.in_flight();
            }
        };
        for path in &present {
            self.sync_file(path).await;
        }
        let gone: Vec<FileStatus> = {
            let mut files = self.files.lock().expect("files lock");
            let gone: Vec<PathBuf> = files.keys().filter(|p| !present.contains(p)).cloned().collect();
            gone.iter().filter_map(|p| files.remove(p)).collect()
        };
        self.retries.lock().expect("retries lock").retain(|p, _| present.contains(p));
        let abandoned: Vec<PathBuf> =
            self.compiles.lock().expect("compiles lock").keys().filter(|p| !present.contains(p)).cloned().collect();
        for path in abandoned {
            self.abandon(&path, true);
        }
        for status in gone {
            if let Some(name) = status.plugin.clone() {
                tracing::info!(file = %status.file.display(), plugin = %name, "plugin file removed; stopping the plugin");
                self.notify(Some(&name)).await;
                self.remove(&name, status).await;
            } else if let Some(name) = status.not_started {
                let _ = self.reports.send(Report::Removed(name));
            } else if needs_report(&status) {
                let _ = self.reports.send(Report::FileReportGone(status.file));
            }
        }
        self.notify(None).await;
        self.passed.store(true, Ordering::Relaxed);
        self.check_stale();
        self.in_flight()
    }

    /// The compiles in flight: file and ticket.
    fn in_flight(&self) -> Vec<(PathBuf, u64)> {
        self.compiles.lock().expect("compiles lock").iter().map(|(p, c)| (p.clone(), c.ticket)).collect()
    }

    /// Deal with the stale `WasmPlugin` objects once: after the first pass, when the compiles
    /// it started have ended (a plugin still compiling keeps its object).
    fn check_stale(&self) {
        let idle = self.compiles.lock().expect("compiles lock").is_empty();
        if idle && self.passed.load(Ordering::Relaxed) && !self.stale_checked.swap(true, Ordering::Relaxed) {
            self.report_stale();
        }
    }

    /// The file of plugin `name` is gone: stop it, or retire it as the host policy says when
    /// parents hold its finalizer.
    async fn remove(&self, name: &str, status: FileStatus) {
        let on_remove = self.manager.policy().for_plugin(name).on_remove;
        match self.manager.remove(name, on_remove).await {
            Removal::NotRunning | Removal::Stopped => {}
            Removal::Released { released } => {
                tracing::warn!(
                    plugin = name,
                    released,
                    "finalizer removed from the parents of a removed plugin (onRemove: releaseFinalizers)"
                );
            }
            Removal::Finalizing { holders, .. } => {
                let Some(controller) = self.manager.controller(name) else { return };
                let _ = self.reports.send(Report::Finalizing(status, Some(controller.plugin()), holders));
                let (me, name) = (self.me.clone(), name.to_owned());
                tokio::spawn(async move {
                    while controller.until_released().await {
                        let Some(this) = me.upgrade() else { return };
                        let _one_at_a_time = this.sync_lock.lock().await;
                        if this.manager.stop_retired(&name).await {
                            this.unfollow_breaker(&name);
                            let _ = this.reports.send(Report::Removed(name));
                            return;
                        }
                    }
                });
                return;
            }
        }
        self.unfollow_breaker(name);
        let _ = self.reports.send(Report::Removed(name.to_owned()));
    }

    /// Ask for the `WasmPlugin` objects of this directory to match what the first pass found.
    fn report_stale(&self) {
        let files = self.files.lock().expect("files lock");
        let mut keep: BTreeSet<String> = self.manager.plugins().into_iter().collect();
        // A plugin pulled from a registry keeps its object while it has no file yet: it says why.
        keep.extend(self.pulled.lock().expect("pulled lock").iter().cloned());
        keep.extend(files.values().filter_map(|s| s.plugin.clone().or_else(|| s.not_started.clone())));
        let rejected = files
            .values()
            .filter(|s| s.plugin.is_none() && s.not_started.is_none())
            .filter_map(|s| Some((s.file.clone(), s.last_error.clone()?)))
            .collect();
        let _ = self.reports.send(Report::Stale { dir: self.dir.clone(), keep, rejected });
    }

    /// Act on a loaded (or rejected) new content of `path`: start or swap in its plugin, or
    /// keep the previous version and say why.
    async fn apply(&self, path: &Path, new_digest: String, loaded: Result<Plugin, LoadError>) {
        let known = self
            .files
            .lock()
            .expect("files lock")
            .get(path)
            .cloned()
            .unwrap_or_else(|| FileStatus { file: path.to_owned(), ..FileStatus::default() });
        let mut status = FileStatus { digest: new_digest.clone(), ..known.clone() };
        let mut attempted = None;
        let mut rejection = None;
        let mut config_refusal = None;
        let result = match loaded {
            Err(e) => Err(PluginError::Load(e)),
            Ok(plugin) => {
                let name = plugin.name().to_owned();
                attempted = Some(name.clone());
                let claimed_elsewhere =
                    self.files.lock().expect("files lock").values().any(|s| s.file != path && s.plugin.as_deref() == Some(&name));
                if claimed_elsewhere {
                    Err(PluginError::Duplicate(name))
                } else {
                    if let Some(old) = known.plugin.as_deref().filter(|old| *old != name) {
                        tracing::info!(file = %path.display(), from = old, to = %name, "plugin file now provides another plugin");
                        self.notify(Some(old)).await;
                        self.manager.stop(old).await;
                        self.unfollow_breaker(old);
                        status.plugin = None;
                    }
                    let version = plugin.manifest().version.clone();
                    self.manager.replace(plugin).await.map(|_| (name, version))
                }
            }
        };
        match result {
            Ok((name, version)) => {
                self.manager.metrics().file_loaded(&path.display().to_string(), true);
                tracing::info!(file = %path.display(), plugin = %name, %version, digest = %new_digest, "plugin loaded");
                status.plugin = Some(name);
                status.version = Some(version);
                status.running_digest = Some(new_digest);
                status.loaded_at = Some(crate::actions::timestamp_now());
                status.loads += 1;
                status.last_error = None;
                status.not_started = None;
                self.retries.lock().expect("retries lock").remove(path);
            }
            Err(e) => {
                self.manager.metrics().file_loaded(&path.display().to_string(), false);
                let keeps = status.plugin.as_deref().map_or_else(
                    || "no plugin runs from it".to_owned(),
                    |p| format!("plugin {p} keeps running its previous version"),
                );
                tracing::error!(file = %path.display(), error = %e, "plugin file rejected; {keeps}");
                status.last_error = Some(e.to_string());
                rejection = Some(rejection_reason(&e));
                if matches!(e, PluginError::Start(_)) {
                    // Starting can fail for reasons outside the file (a CRD not installed
                    // yet, a kind the host may not list): forget the digest and try again
                    // with backoff.
                    status.digest.clear();
                    if status.plugin.as_deref().is_some_and(|p| self.manager.controller(p).is_none()) {
                        // A restart with other kinds stopped the old version before failing.
                        self.unfollow_breaker(status.plugin.as_deref().unwrap_or_default());
                        status.plugin = None;
                    }
                    if status.plugin.is_none() {
                        if let (Some(name), PluginError::Start(StartError::Config { from, error, .. })) = (&attempted, &e) {
                            config_refusal = Some((name.clone(), ConfigStatus::refused(from.clone(), error)));
                        }
                        status.not_started = attempted;
                    }
                    self.schedule_retry(path);
                } else {
                    self.retries.lock().expect("retries lock").remove(path);
                }
            }
        }
        self.files.lock().expect("files lock").insert(path.to_owned(), status.clone());
        if let (true, Some(reason)) = (needs_report(&status), rejection) {
            let _ = self.reports.send(Report::FileRejected(status, reason));
            return;
        }
        if needs_report(&known) {
            let _ = self.reports.send(Report::FileReportGone(path.to_owned()));
        }
        let controller = status.plugin.as_deref().and_then(|p| self.manager.controller(p));
        let running = controller.as_ref().map(|c| c.plugin());
        let plugin = status.plugin.clone();
        let _ = self.reports.send(Report::Loaded(status, running));
        if let (Some(plugin), Some(controller)) = (plugin, controller) {
            // After the file report, which creates the object the breaker is recorded on.
            self.follow_breaker(&plugin, &controller);
            self.follow_config(&plugin, &controller);
            self.follow_cpu(&plugin, &controller);
        } else if let Some((plugin, status)) = config_refusal {
            // Not started for its configuration: `ConfigValid=False` says why.
            let _ = self.reports.send(Report::Config { plugin, status });
        }
    }

    /// Try `path` again after a backoff: [`START_RETRY`] doubled per failure in a row, at most
    /// the rescan period.
    fn schedule_retry(&self, path: &Path) {
        let mut retries = self.retries.lock().expect("retries lock");
        let failures = retries.get(path).map_or(0, |(n, _)| *n) + 1;
        let delay = retry_delay(failures, self.config.rescan);
        tracing::info!(file = %path.display(), failures, ?delay, "plugin not started; trying again later");
        retries.insert(path.to_owned(), (failures, tokio::time::Instant::now() + delay));
    }

    /// Report `controller`'s circuit breaker transitions from now on (its current state
    /// first), unless they are already followed.
    fn follow_breaker(&self, plugin: &str, controller: &Arc<PluginController>) {
        let mut breakers = self.breakers.lock().expect("breakers lock");
        if let Some((followed, task)) = breakers.get(plugin) {
            if followed.upgrade().is_some_and(|f| Arc::ptr_eq(&f, controller)) {
                return;
            }
            task.abort();
        }
        let mut changes = controller.breaker().subscribe();
        let reports = self.reports.clone();
        let name = plugin.to_owned();
        let task = tokio::spawn(async move {
            let mut trips = 0;
            loop {
                let status = changes.borrow_and_update().clone();
                let opened = status.trips > trips;
                trips = status.trips;
                if reports.send(Report::Breaker { plugin: name.clone(), status, opened }).is_err() {
                    return;
                }
                if changes.changed().await.is_err() {
                    return;
                }
            }
        });
        breakers.insert(plugin.to_owned(), (Arc::downgrade(controller), task.abort_handle()));
    }

    fn unfollow_breaker(&self, plugin: &str) {
        if let Some((_, task)) = self.breakers.lock().expect("breakers lock").remove(plugin) {
            task.abort();
        }
        if let Some((_, task)) = self.configs.lock().expect("configs lock").remove(plugin) {
            task.abort();
        }
        if let Some((_, task)) = self.cpus.lock().expect("cpus lock").remove(plugin) {
            task.abort();
        }
    }

    /// Report `controller`'s configuration status (now, then on every change), unless it is
    /// already followed. Stopped with the breaker's ([`Reloader::unfollow_breaker`]).
    fn follow_config(&self, plugin: &str, controller: &Arc<PluginController>) {
        let mut configs = self.configs.lock().expect("configs lock");
        if let Some((followed, task)) = configs.get(plugin) {
            if followed.upgrade().is_some_and(|f| Arc::ptr_eq(&f, controller)) {
                return;
            }
            task.abort();
        }
        let mut changes = controller.config().subscribe();
        let (reports, name) = (self.reports.clone(), plugin.to_owned());
        let task = tokio::spawn(async move {
            loop {
                let status = changes.borrow_and_update().clone();
                if reports.send(Report::Config { plugin: name.clone(), status }).is_err() || changes.changed().await.is_err() {
                    return;
                }
            }
        });
        configs.insert(plugin.to_owned(), (Arc::downgrade(controller), task.abort_handle()));
    }
}

impl Reloader {
    /// Report `controller`'s CPU share status (now, then on every change), unless it is
    /// already followed. Stopped with the breaker's ([`Reloader::unfollow_breaker`]).
    fn follow_cpu(&self, plugin: &str, controller: &Arc<PluginController>) {
        let mut cpus = self.cpus.lock().expect("cpus lock");
        if let Some((followed, task)) = cpus.get(plugin) {
            if followed.upgrade().is_some_and(|f| Arc::ptr_eq(&f, controller)) {
                return;
            }
            task.abort();
        }
        let mut changes = controller.cpu().subscribe();
        let (reports, name) = (self.reports.clone(), plugin.to_owned());
        let task = tokio::spawn(async move {
            loop {
                let status = changes.borrow_and_update().clone();
                if reports.send(Report::Cpu { plugin: name.clone(), status }).is_err() || changes.changed().await.is_err() {
                    return;
                }
            }
        });
        cpus.insert(plugin.to_owned(), (Arc::downgrade(controller), task.abort_handle()));
    }
}

/// The wait before the next start attempt after `failures` failures in a row: [`START_RETRY`]
/// doubled per failure, at most `cap`.
fn retry_delay(failures: u32, cap: Duration) -> Duration {
    START_RETRY.saturating_mul(1 << failures.saturating_sub(1).min(16)).min(cap)
}

/// An instant that never comes (the disabled branch of a `select!` still builds its future).
fn far_future() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(86_400 * 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_retries_back_off_from_one_second_up_to_the_rescan_period() {
        let cap = Duration::from_secs(30);
        let delays: Vec<u64> = (1..=7).map(|n| retry_delay(n, cap).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(retry_delay(u32::MAX, cap), cap);
        assert_eq!(retry_delay(3, Duration::from_secs(3)), Duration::from_secs(3));
    }
}
