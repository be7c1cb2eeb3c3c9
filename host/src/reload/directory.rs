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

/// The plugin files of `dir`: every `*.wasm` entry, skipping hidden names (a ConfigMap volume's
/// `..data` and timestamped directories). Entries that are not (or do not lead to) a regular
/// file — a directory, a symlink loop, a FIFO — are listed too: reading them fails
/// ([`read_plugin_file`]) and they are reported like every other bad file.
///
/// # Errors
/// When the directory cannot be read.
pub fn scan(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let visible = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| !n.starts_with('.'));
        if visible && path.extension().is_some_and(|e| e == "wasm") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// The bytes of the plugin file `path`, read through its symlinks, only if it is a regular
/// file: a directory, a FIFO (whose read would never end), a device (`/dev/zero`, whose read
/// would fill memory) or a symlink loop is an error saying which.
///
/// # Errors
/// The OS error (`NotFound` when the file went away), or `InvalidInput` for what is not a
/// regular file.
pub async fn read_plugin_file(path: &Path) -> std::io::Result<Vec<u8>> {
    let metadata = tokio::fs::metadata(path).await?;
    if !metadata.is_file() {
        let what = if metadata.is_dir() { "a directory" } else { "a FIFO, socket or device" };
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("not a regular file: {what}")));
    }
    tokio::fs::read(path).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_directory_or_a_symlink_loop_named_wasm_is_listed_and_fails_to_read_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("dir.wasm")).unwrap();
        std::os::unix::fs::symlink("loop-b.wasm", dir.path().join("loop-a.wasm")).unwrap();
        std::os::unix::fs::symlink("loop-a.wasm", dir.path().join("loop-b.wasm")).unwrap();
        std::fs::write(dir.path().join("ok.wasm"), b"\0asm").unwrap();
        std::fs::write(dir.path().join(".hidden.wasm"), b"").unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"").unwrap();
        let names: Vec<String> =
            scan(dir.path()).unwrap().iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["dir.wasm", "loop-a.wasm", "loop-b.wasm", "ok.wasm"]);
        let err = read_plugin_file(&dir.path().join("dir.wasm")).await.unwrap_err();
        assert_eq!(err.to_string(), "not a regular file: a directory");
        let err = read_plugin_file(&dir.path().join("loop-a.wasm")).await.unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc_eloop()), "{err}");
        assert_eq!(read_plugin_file(&dir.path().join("ok.wasm")).await.unwrap(), b"\0asm");
    }

    #[tokio::test]
    async fn a_fifo_named_wasm_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe.wasm");
        let status = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(status.success());
        let read = tokio::time::timeout(std::time::Duration::from_secs(5), read_plugin_file(&fifo)).await;
        assert_eq!(read.expect("no hang").unwrap_err().to_string(), "not a regular file: a FIFO, socket or device");
    }

    /// `ELOOP` on Linux.
    fn libc_eloop() -> i32 {
        40
    }
}
