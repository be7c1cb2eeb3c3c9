//! `wasmop run --audit-log PATH`: the audit events ([`crate::actions::AUDIT_TARGET`]) as JSON
//! lines in a file of bounded size, written off the reconcile path.
//!
//! Each event is formatted where it happens and handed to a writer thread through a bounded
//! queue of [`QUEUE_LINES`] lines; a full queue drops the line and counts it in
//! `wasmop_audit_dropped_lines_total` (a reconcile never waits for the disk). The thread
//! appends to `PATH`; a line that would take it past `--audit-log-max-bytes` first renames it
//! to `PATH.1` (replacing the previous one) and starts a new `PATH`, so the trail never takes
//! more than twice the cap, however fast it is written. `-` writes to stderr instead, uncapped.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, LazyLock};

use prometheus_client::metrics::counter::Counter;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::MakeWriter;

use crate::actions::AUDIT_TARGET;

/// Lines waiting for the writer thread at most.
pub const QUEUE_LINES: usize = 8192;

/// The default size of the audit log file before it is rotated.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;

/// Lines dropped because the writer could not keep up (or failed), since start.
static DROPPED: LazyLock<Counter> = LazyLock::new(Counter::default);
/// Lines written, since start.
static WRITTEN: LazyLock<Counter> = LazyLock::new(Counter::default);

/// Why the audit log could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum AuditLogError {
    /// The file (or its directory) cannot be opened for appending.
    #[error("cannot open the audit log {path}: {error}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
}

/// Where the audit lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// Standard error (`--audit-log -`).
    Stderr,
    /// A file, rotated to `<file>.1` at `max_bytes`.
    File {
        /// The file.
        path: PathBuf,
        /// Its size cap.
        max_bytes: u64,
    },
}

impl Destination {
    /// `-` is stderr, anything else a file capped at `max_bytes`.
    pub fn new(path: &Path, max_bytes: u64) -> Self {
        if path == Path::new("-") { Self::Stderr } else { Self::File { path: path.to_owned(), max_bytes } }
    }
}

/// The counters of the audit log, to register in the host's metrics registry.
pub fn counters() -> [(&'static str, &'static str, Counter); 2] {
    [
        ("wasmop_audit_lines", "Audit lines written to the audit log", WRITTEN.clone()),
        (
            "wasmop_audit_dropped_lines",
            "Audit lines dropped because the audit log's writer could not keep up or failed",
            DROPPED.clone(),
        ),
    ]
}

/// The tracing layer writing audit events to `destination` as JSON lines, one per event
/// (`timestamp`, `level`, `message`, `target` and every field at the top level), and its writer
/// thread.
///
/// # Errors
/// [`AuditLogError::Open`] when the file cannot be opened for appending.
pub fn layer<S>(
    destination: &Destination,
) -> Result<impl tracing_subscriber::Layer<S> + Send + Sync + 'static + use<S>, AuditLogError>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use tracing_subscriber::Layer as _;
    let sink = match destination {
        Destination::Stderr => Sink::Stderr,
        Destination::File { path, max_bytes } => Sink::File(Rotating::open(path, *max_bytes)?),
    };
    let (lines, queue) = sync_channel(QUEUE_LINES);
    std::thread::Builder::new()
        .name("wasmop-audit".into())
        .spawn(move || sink.run(&queue))
        .map_err(|error| AuditLogError::Open { path: "the audit writer thread".into(), error })?;
    Ok(tracing_subscriber::fmt::layer()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_writer(Lines(Arc::new(lines)))
        .with_filter(Targets::new().with_target(AUDIT_TARGET, tracing::Level::INFO)))
}

/// Hands each formatted line to the writer thread.
#[derive(Debug, Clone)]
struct Lines(Arc<SyncSender<Vec<u8>>>);

/// One event's line, sent when dropped.
struct Line {
    queue: Arc<SyncSender<Vec<u8>>>,
    bytes: Vec<u8>,
}

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if self.bytes.is_empty() {
            return;
        }
        match self.queue.try_send(std::mem::take(&mut self.bytes)) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                DROPPED.inc();
            }
        }
    }
}

impl<'a> MakeWriter<'a> for Lines {
    type Writer = Line;
    fn make_writer(&'a self) -> Line {
        Line { queue: Arc::clone(&self.0), bytes: Vec::with_capacity(512) }
    }
}

/// The writer thread's end.
enum Sink {
    Stderr,
    File(Rotating),
}

impl Sink {
    fn run(mut self, queue: &Receiver<Vec<u8>>) {
        while let Ok(line) = queue.recv() {
            let written = match &mut self {
                Self::Stderr => std::io::stderr().write_all(&line),
                Self::File(file) => file.append(&line),
            };
            match written {
                Ok(()) => {
                    WRITTEN.inc();
                }
                Err(e) => {
                    DROPPED.inc();
                    // Said once per failure burst is enough: the counter has the rest.
                    if DROPPED.get() == 1 || DROPPED.get().is_power_of_two() {
                        eprintln!("wasmop: cannot write the audit log: {e}");
                    }
                }
            }
        }
    }
}

/// A file of at most `max_bytes`, its previous content in `<path>.1`.
#[derive(Debug)]
pub struct Rotating {
    path: PathBuf,
    max_bytes: u64,
    file: std::fs::File,
    size: u64,
}

impl Rotating {
    /// Open `path` for appending (created if absent).
    ///
    /// # Errors
    /// [`AuditLogError::Open`].
    pub fn open(path: &Path, max_bytes: u64) -> Result<Self, AuditLogError> {
        let open = std::fs::OpenOptions::new().create(true).append(true).open(path);
        let file = open.map_err(|error| AuditLogError::Open { path: path.to_owned(), error })?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Self { path: path.to_owned(), max_bytes, file, size })
    }

    /// The previous file's path: `<path>.1`.
    pub fn previous(path: &Path) -> PathBuf {
        let mut name = path.as_os_str().to_owned();
        name.push(".1");
        PathBuf::from(name)
    }

    /// Append `line`, rotating first when it would take the file past its cap (a line longer
    /// than the cap gets a file of its own).
    ///
    /// # Errors
    /// The I/O error of the rename, the reopening or the write.
    pub fn append(&mut self, line: &[u8]) -> std::io::Result<()> {
        let len = line.len() as u64;
        if self.size > 0 && self.size + len > self.max_bytes {
            std::fs::rename(&self.path, Self::previous(&self.path))?;
            self.file = std::fs::OpenOptions::new().create(true).append(true).open(&self.path)?;
            self.size = 0;
        }
        self.file.write_all(line)?;
        self.size += len;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rotating_file_never_holds_more_than_its_cap_and_keeps_one_previous_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut file = Rotating::open(&path, 100).unwrap();
        for i in 0..50 {
            file.append(format!("{{\"line\":{i:04}}}\n").as_bytes()).unwrap();
        }
        let current = std::fs::read_to_string(&path).unwrap();
        let previous = std::fs::read_to_string(Rotating::previous(&path)).unwrap();
        assert!(current.len() <= 100 && previous.len() <= 100, "{} and {}", current.len(), previous.len());
        assert!(current.ends_with("{\"line\":0049}\n"), "{current}");
        assert!(previous.ends_with("{\"line\":0048}\n"), "the previous file ends where the current one starts: {previous}");
        let files = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(files, 2, "one previous file only");
    }

    #[test]
    fn a_line_over_the_cap_gets_a_file_of_its_own_and_reopening_appends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        Rotating::open(&path, 10).unwrap().append(b"short\n").unwrap();
        let mut file = Rotating::open(&path, 10).unwrap();
        file.append(b"a line longer than the cap\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a line longer than the cap\n");
        assert_eq!(std::fs::read_to_string(Rotating::previous(&path)).unwrap(), "short\n");
    }

    #[test]
    fn an_unwritable_path_is_named() {
        let err = Rotating::open(Path::new("/nonexistent-dir/audit.jsonl"), 10).unwrap_err().to_string();
        assert!(err.starts_with("cannot open the audit log /nonexistent-dir/audit.jsonl: "), "{err}");
    }
}
