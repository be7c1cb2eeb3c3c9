//! The background compiles of the [`Reloader`]: one per file at most, started by a pass,
//! shown on a `WasmPlugin` when slow, abandoned by a newer content or the file's removal, and
//! applied (under the pass lock) when done.

use std::path::Path;
use std::time::Duration;

use super::{Reloader, Report};
use crate::reload::compile_status::{CompileEnd, CompileReport, CompileTarget};
use crate::reload::directory::read_plugin_file;
use crate::reload::file_report::needs_report;
use crate::runtime::{LoadError, Plugin, digest};

/// How long a load runs before its `WasmPlugin` shows it compiling: a cached artifact or a
/// small plugin loads sooner, and writes nothing it would at once take back.
pub const SHOW_COMPILING_AFTER: Duration = Duration::from_secs(1);

/// The next compile's ticket.
static NEXT_TICKET: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A file's content compiling in the background.
pub(super) struct Compile {
    /// The content's sha256.
    digest: String,
    /// Tells this compile from a later one of the same content.
    pub(super) ticket: u64,
    /// Where it was shown, if it was (ended with [`CompileReport::Ended`]).
    shown: Option<CompileTarget>,
    /// The task compiling, then applying the result.
    task: tokio::task::AbortHandle,
}

impl Reloader {
    /// Start compiling `path` if its content changed and is not compiling already.
    pub(super) async fn sync_file(&self, path: &Path) {
        // Read through the visible path (it follows a ConfigMap volume's symlinks); a writer
        // may be mid-write: a truncated read fails to load and the next event retries.
        let known = self.files.lock().expect("files lock").get(path).cloned().unwrap_or_default();
        let bytes = match read_plugin_file(path).await {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Gone between the scan and the read (or a dangling link mid-swap): the next
                // pass sees what is there.
                tracing::warn!(file = %path.display(), error = %e, "cannot read plugin file");
                self.retries.lock().expect("retries lock").remove(path);
                return;
            }
            Err(error) => {
                // Not a file that can ever load (a directory, a symlink loop, a FIFO...):
                // rejected once, with its line and file report, like every other bad file;
                // passes after that see the same "content" and stay quiet.
                let unreadable = format!("unreadable: {error}");
                if known.digest != unreadable {
                    self.abandon(path, true);
                    self.apply(path, unreadable, Err(LoadError::Io { path: path.to_owned(), error })).await;
                }
                return;
            }
        };
        let new_digest = digest(&bytes);
        let compiling = self.compiles.lock().expect("compiles lock").get(path).map(|c| c.digest.clone());
        if compiling.as_deref() == Some(new_digest.as_str()) {
            return;
        }
        if compiling.is_some() {
            // Written again: the older content's compile must never be swapped in.
            tracing::info!(file = %path.display(), digest = %new_digest, "plugin file changed while compiling; abandoning that compile");
            self.abandon(path, known.digest == new_digest);
        }
        if known.digest == new_digest {
            return;
        }
        let ticket = NEXT_TICKET.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (runtime, me, file, d) = (self.manager.runtime().clone(), self.me.clone(), path.to_owned(), new_digest.clone());
        let (size, cached) = (bytes.len(), runtime.is_cached(&new_digest));
        // Registered before the task can end (it looks its ticket up to apply its result).
        let mut compiles = self.compiles.lock().expect("compiles lock");
        let task = tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let load = std::pin::pin!(runtime.load(bytes));
            let loaded = match futures::future::select(load, std::pin::pin!(tokio::time::sleep(SHOW_COMPILING_AFTER))).await {
                futures::future::Either::Left((loaded, _)) => loaded,
                futures::future::Either::Right(((), load)) => {
                    if let Some(this) = me.upgrade() {
                        this.show_compiling(&file, ticket);
                    }
                    load.await
                }
            };
            if loaded.is_ok() {
                let elapsed = crate::units::approximate_duration(started.elapsed());
                let (file, size) = (file.display(), crate::units::approximate_bytes(size as u64));
                tracing::info!(%file, %size, %elapsed, from_cache = cached, "plugin file compiled");
            }
            if let Some(this) = me.upgrade() {
                this.finish(&file, ticket, d, loaded).await;
            }
        });
        let what = if cached { "loading plugin file (compiled before: from the cache)" } else { "compiling plugin file" };
        tracing::info!(file = %path.display(), size = %crate::units::approximate_bytes(size as u64), digest = %new_digest, "{what}");
        compiles.insert(path.to_owned(), Compile { digest: new_digest, ticket, shown: None, task: task.abort_handle() });
    }

    /// Show the compile `ticket` of `path` on a `WasmPlugin` (it is taking long), unless it
    /// ended meanwhile.
    fn show_compiling(&self, path: &Path, ticket: u64) {
        let known = self.files.lock().expect("files lock").get(path).cloned().unwrap_or_default();
        let mut compiles = self.compiles.lock().expect("compiles lock");
        let Some(compile) = compiles.get_mut(path).filter(|c| c.ticket == ticket) else { return };
        let target = match (&known.plugin, &known.not_started) {
            (Some(name), _) | (None, Some(name)) => CompileTarget::Plugin(name.clone()),
            (None, None) => CompileTarget::FileReport(path.to_owned()),
        };
        tracing::info!(file = %path.display(), digest = %compile.digest, "compiling plugin file; the WasmPlugin shows it");
        let report = CompileReport::Started {
            digest: compile.digest.clone(),
            since: crate::actions::timestamp_now(),
            serving: known.plugin.as_ref().and(known.version.clone()),
        };
        let _ = self.reports.send(Report::Compile { target: target.clone(), file: path.to_owned(), report });
        compile.shown = Some(target);
    }

    /// Abandon the compile of `path` (its file changed again or went away). With `report`,
    /// its `WasmPlugin` says so (no newer compile takes its place); a file report written only
    /// to show the compile goes.
    pub(super) fn abandon(&self, path: &Path, report: bool) {
        let Some(compile) = self.compiles.lock().expect("compiles lock").remove(path) else { return };
        compile.task.abort();
        self.compiles_ended.send_modify(|n| *n += 1);
        if let (true, Some(target)) = (report, compile.shown) {
            self.end_shown(target, path, CompileEnd::Abandoned);
        }
    }

    /// Report the end of a compile shown on `target`; a file report made to show it goes
    /// unless the file is rejected (its report then says why).
    fn end_shown(&self, target: CompileTarget, path: &Path, end: CompileEnd) {
        let status = self.files.lock().expect("files lock").get(path).cloned();
        if let CompileTarget::FileReport(_) = target
            && !status.as_ref().is_some_and(needs_report)
        {
            let _ = self.reports.send(Report::FileReportGone(path.to_owned()));
            return;
        }
        let _ = self.reports.send(Report::Compile { target, file: path.to_owned(), report: CompileReport::Ended(end) });
    }

    /// A compile of `path` ended with `loaded`: apply it unless it was abandoned meanwhile.
    async fn finish(&self, path: &Path, ticket: u64, new_digest: String, loaded: Result<Plugin, LoadError>) {
        let _one_at_a_time = self.sync_lock.lock().await;
        let compile = {
            let mut compiles = self.compiles.lock().expect("compiles lock");
            if compiles.get(path).is_none_or(|c| c.ticket != ticket) {
                return;
            }
            compiles.remove(path)
        };
        let end = if loaded.is_ok() { CompileEnd::Compiled } else { CompileEnd::Failed };
        self.apply(path, new_digest, loaded).await;
        if let Some(target) = compile.and_then(|c| c.shown) {
            self.end_shown(target, path, end);
        }
        self.compiles_ended.send_modify(|n| *n += 1);
        self.notify(None).await;
        self.check_stale();
    }
}
