//! Watching the plugins directory: debounced change signals and directory scans.

use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{EventKind, RecursiveMode};
use notify_debouncer_full::{DebounceEventResult, new_debouncer};
use tokio::sync::mpsc;

/// Debounced "something changed" signals for a directory. Dropping it stops the watch.
pub struct DirectoryEvents {
    rx: mpsc::UnboundedReceiver<()>,
    _debouncer: Box<dyn std::any::Any + Send>,
}

impl std::fmt::Debug for DirectoryEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectoryEvents").finish_non_exhaustive()
    }
}

impl DirectoryEvents {
    /// Watch `dir` non-recursively. Access events (our own reads) are ignored; everything else
    /// — creates, writes, renames (including a ConfigMap volume's `..data` swap), removals —
    /// yields one signal per debounce window.
    ///
    /// # Errors
    /// When the watch cannot be set up (missing directory, inotify limits).
    pub fn watch(dir: &Path, debounce: Duration) -> notify::Result<Self> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut debouncer = new_debouncer(debounce, None, move |result: DebounceEventResult| match result {
            Ok(events) => {
                if events.iter().any(|e| !matches!(e.kind, EventKind::Access(_))) {
                    let _ = tx.send(());
                }
            }
            Err(errors) => {
                for e in errors {
                    tracing::warn!(error = %e, "plugins directory watch error");
                }
                let _ = tx.send(());
            }
        })?;
        debouncer.watch(dir, RecursiveMode::NonRecursive)?;
        Ok(Self { rx, _debouncer: Box::new(debouncer) })
    }

    /// Wait for the next change; `None` if the watch ended.
    pub async fn changed(&mut self) -> Option<()> {
        let first = self.rx.recv().await;
        while self.rx.try_recv().is_ok() {}
        first
    }
}

/// The plugin files of `dir`: every `*.wasm` entry that is (or links to) a regular file,
/// skipping hidden names (a ConfigMap volume's `..data` and timestamped directories).
///
/// # Errors
/// When the directory cannot be read.
pub fn scan(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let visible = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| !n.starts_with('.'));
        if visible && path.extension().is_some_and(|e| e == "wasm") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}
