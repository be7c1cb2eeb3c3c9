//! [`Compiler`]: where a plugin's machine code is made. In the host's process, or in a child
//! process (`wasmop compile`) that writes the artifact and exits, so that what Cranelift uses
//! to compile a 12–18 MB Python or JavaScript component (~400 MB) goes back to the system
//! instead of staying in the long-lived host's heap.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use wasmtime::Engine;
use wasmtime::component::Component;

use super::artifact_cache::{ArtifactCache, checksum_path, load_artifact};
use super::error::LoadError;
use super::loader;

/// How long a compiler process may run before it is killed: a 60 s compile of an 18 MB
/// component on 2 busy cores, with room to spare.
pub const COMPILE_TIMEOUT: Duration = Duration::from_secs(300);

/// The address space a compiler process may reserve (`RLIMIT_AS`): ten times what the largest
/// known compile uses (~400 MB resident), well under what a runaway one would take.
pub const COMPILE_MEMORY: u64 = 4 << 30;

/// A plugin file larger than this (a Python or JavaScript component; Rust plugins are well
/// under) compiles only when no other such file compiles in this process: each takes ~400 MB
/// and every core, and a host in a 512 MiB container must survive a directory of them. Smaller
/// ones (~70 MB) compile meanwhile — in the host process too, where a large one compiles on a
/// thread pool of its own ([`on_own_pool`]) — and a cached artifact never waits.
pub const LARGE_PLUGIN: usize = 4 << 20;

/// The one slot of large compiles ([`LARGE_PLUGIN`]).
static LARGE_COMPILES: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// The exit status of `wasmop compile` for bytes that are not valid WebAssembly.
const EXIT_INVALID: u8 = 3;
/// The exit status of `wasmop compile` for a core module that cannot be componentized.
const EXIT_COMPONENTIZE: u8 = 4;
/// The exit status of `wasmop compile` for bytes that are not WebAssembly at all.
const EXIT_NOT_WASM: u8 = 5;

/// Where plugins are compiled.
#[derive(Debug, Clone, Default)]
pub enum Compiler {
    /// On a blocking thread of the host (the default: library users and tests have no
    /// `wasmop` binary). Cranelift's memory stays with the process's allocator.
    #[default]
    InProcess,
    /// In a child process, `wasmop compile`, which writes the artifact into the artifact
    /// cache (or a temporary file); the host maps it from there.
    Subprocess(Subprocess),
    /// A test seam: wait until the gate lets this digest through, then compile with the
    /// inner compiler. Makes a compile deterministically slow, with no sleeping.
    Gated(CompileGate, Box<Compiler>),
}

/// A child process compiling one plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subprocess {
    /// The `wasmop` binary (run as `PROGRAM compile - OUT [--fuel] --max-memory N`).
    pub program: PathBuf,
    /// Killed after this long ([`COMPILE_TIMEOUT`]).
    pub timeout: Duration,
    /// Its address space cap in bytes ([`COMPILE_MEMORY`]).
    pub max_memory: u64,
}

impl Subprocess {
    /// Compile with `program`, with the default bounds.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self { program: program.into(), timeout: COMPILE_TIMEOUT, max_memory: COMPILE_MEMORY }
    }
}

/// What [`Compiler::Gated`] waits on: given the plugin's digest, a future that resolves when
/// its compile may start.
#[derive(Clone)]
pub struct CompileGate(
    /// Called with the digest before each compile; the compile starts when its future resolves.
    pub Arc<GateFn>,
);

/// What a [`CompileGate`] calls: the digest in, the future the compile waits on out.
pub type GateFn = dyn Fn(&str) -> BoxFuture<'static, ()> + Send + Sync;

impl std::fmt::Debug for CompileGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CompileGate")
    }
}

/// The engine and where artifacts go: what a compile needs from the runtime.
pub(super) struct Target<'a> {
    /// The host's engine, which loads the artifact.
    pub engine: &'a Engine,
    /// Whether that engine counts fuel (the child's must too).
    pub metered: bool,
    /// The artifact cache, if any.
    pub cache: Option<&'a ArtifactCache>,
}

impl Compiler {
    /// Compile `bytes` (whose sha256 is `digest`) for `target`'s engine, or take the cached
    /// artifact. Large files ([`LARGE_PLUGIN`]) compile one at a time. Dropping the future
    /// abandons the compile (a child process is killed).
    ///
    /// # Errors
    /// [`LoadError`] for bytes that are not a component or componentizable module;
    /// [`LoadError::Compiler`] when a compiler process fails, times out or writes nothing.
    pub(super) fn compile<'a>(
        &'a self,
        target: &'a Target<'a>,
        bytes: Arc<Vec<u8>>,
        digest: &'a str,
    ) -> BoxFuture<'a, Result<Component, LoadError>> {
        Box::pin(async move {
            if let Compiler::Gated(gate, inner) = self {
                (gate.0)(digest).await;
                return inner.compile(target, bytes, digest).await;
            }
            loader::detect(&bytes)?;
            let (engine, cache, digest) = (target.engine.clone(), target.cache.cloned(), digest.to_owned());
            if let Some(cache) = cache.clone() {
                let (engine, digest) = (engine.clone(), digest.clone());
                if let Some(component) = blocking(move || Ok(cache.load(&engine, &digest))).await? {
                    return Ok(component);
                }
            }
            // One large compile at a time: each takes ~400 MB and every core.
            let large_slot = if bytes.len() > LARGE_PLUGIN {
                Some(LARGE_COMPILES.acquire().await.map_err(|e| LoadError::Compiler(e.to_string()))?)
            } else {
                None
            };
            match self {
                Compiler::Subprocess(child) => {
                    let (child, metered) = (child.clone(), target.metered);
                    let cancelled = Arc::new(AtomicBool::new(false));
                    let _cancel_on_drop = CancelOnDrop(Arc::clone(&cancelled));
                    blocking(move || child.compile(&engine, &bytes, &digest, cache.as_ref(), metered, &cancelled)).await
                }
                Compiler::InProcess | Compiler::Gated(..) => {
                    let large = large_slot.is_some();
                    blocking(move || {
                        let compile = || loader::compile(&engine, &bytes, &digest, cache.as_ref());
                        if large { on_own_pool(compile) } else { compile() }
                    })
                    .await
                }
            }
        })
    }
}

/// Run `f` (a large compile) on a thread pool of its own, dropped when it returns; on the
/// process's pool where one cannot be started.
///
/// wasmtime compiles a component's functions in parallel on rayon's pool. On the process-wide
/// one, the thousands of jobs of a large component's compile come first: a small plugin's
/// compile, whose jobs join the pool's queue from outside, waited for the large one to finish
/// (a Rust plugin beside an 18 MB Python component took over 60 s instead of about one). With
/// its own pool the large compile shares the cores with the others through the kernel's
/// scheduler instead.
fn on_own_pool<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    match rayon::ThreadPoolBuilder::new().thread_name(|i| format!("wasmop-compile-{i}")).build() {
        Ok(pool) => pool.install(f),
        Err(e) => {
            tracing::warn!(error = %e, "cannot start a thread pool for a large compile; compiling on the shared one");
            f()
        }
    }
}

/// Run `f` on a blocking thread.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, LoadError> + Send + 'static) -> Result<T, LoadError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| LoadError::Compiler(format!("the compile task failed: {e}")))?
}

/// Sets its flag when dropped: the compile's future was dropped, its child is to be killed.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl Subprocess {
    /// Compile in a child process into the cache (or a temporary file, removed once mapped)
    /// and map the artifact. Blocking.
    fn compile(
        &self,
        engine: &Engine,
        bytes: &[u8],
        digest: &str,
        cache: Option<&ArtifactCache>,
        metered: bool,
        cancelled: &AtomicBool,
    ) -> Result<Component, LoadError> {
        if let Some(component) = cache.and_then(|c| c.load(engine, digest)) {
            return Ok(component);
        }
        let failed = |what: String| LoadError::Compiler(what);
        let (out, temporary) = match cache {
            Some(cache) => {
                std::fs::create_dir_all(cache.dir())
                    .map_err(|e| failed(format!("cannot create the artifact directory {}: {e}", cache.dir().display())))?;
                (cache.path(digest), false)
            }
            None => (temporary_artifact(), true),
        };
        let result = self.run(bytes, &out, metered, cancelled).and_then(|()| {
            load_artifact(engine, &out)
                .map_err(|e| failed(format!("cannot load the compiled artifact: {e}")))?
                .ok_or_else(|| failed("the compiler process exited without writing an artifact".into()))
        });
        if temporary {
            // Mapped already (or failed): the file's name is no longer needed.
            let _ = std::fs::remove_file(&out);
            let _ = std::fs::remove_file(checksum_path(&out));
        }
        result
    }

    /// Run `PROGRAM compile - OUT` with `bytes` on its stdin until it exits, times out or the
    /// compile is `cancelled`.
    fn run(&self, bytes: &[u8], out: &Path, metered: bool, cancelled: &AtomicBool) -> Result<(), LoadError> {
        let failed = |what: String| LoadError::Compiler(what);
        let mut command = Command::new(&self.program);
        command.arg("compile").arg("-").arg(out).arg("--max-memory").arg(self.max_memory.to_string());
        if metered {
            command.arg("--fuel");
        }
        command.env("RUST_LOG", "warn").stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child =
            command.spawn().map_err(|e| failed(format!("cannot start the compiler {}: {e}", self.program.display())))?;
        let stdin = child.stdin.take().map(|mut stdin| {
            let bytes = bytes.to_vec();
            // A child that dies early closes the pipe: the write fails, the exit status says why.
            std::thread::spawn(move || stdin.write_all(&bytes))
        });
        let stderr = child.stderr.take().map(|stderr| std::thread::spawn(move || last_line(stderr)));
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if cancelled.load(Ordering::Relaxed) || started.elapsed() > self.timeout => break None,
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(failed(format!("cannot wait for the compiler process: {e}"))),
            }
        };
        let Some(status) = status else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(failed(if cancelled.load(Ordering::Relaxed) {
                "the compile was abandoned (a newer file replaced it)".into()
            } else {
                format!("the compiler process did not finish within {:?} and was killed", self.timeout)
            }));
        };
        drop(stdin.map(std::thread::JoinHandle::join));
        let line = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
        if status.success() {
            return Ok(());
        }
        let detail = line.strip_prefix("error: ").unwrap_or(&line).to_owned();
        Err(match status.code().and_then(|c| u8::try_from(c).ok()) {
            Some(EXIT_INVALID) => LoadError::Invalid(strip(&detail, "invalid WebAssembly: ")),
            Some(EXIT_COMPONENTIZE) => LoadError::Componentize(detail),
            Some(EXIT_NOT_WASM) => LoadError::Invalid(detail),
            _ if detail.is_empty() => failed(format!("the compiler process failed ({status})")),
            _ => failed(format!("the compiler process failed ({status}): {detail}")),
        })
    }
}

/// `s` without `prefix`.
fn strip(s: &str, prefix: &str) -> String {
    s.strip_prefix(prefix).unwrap_or(s).to_owned()
}

/// A fresh path for an artifact that is not cached.
fn temporary_artifact() -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("wasmop-compile-{}-{n}.cwasm", std::process::id()))
}

/// The last non-empty line of a stream, read to its end.
fn last_line(mut stream: impl Read) -> String {
    let mut last = String::new();
    let mut tail = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = stream.read(&mut buf) {
        if n == 0 {
            break;
        }
        tail.extend_from_slice(&buf[..n]);
        if let Some(end) = tail.iter().rposition(|b| *b == b'\n') {
            let complete: Vec<u8> = tail.drain(..=end).collect();
            if let Some(line) = String::from_utf8_lossy(&complete).lines().rev().find(|l| !l.trim().is_empty()) {
                last = line.trim().to_owned();
            }
        }
        // A line longer than any useful reason: keep its end only.
        if tail.len() > 64 << 10 {
            tail.drain(..tail.len() - (4 << 10));
        }
    }
    let rest = String::from_utf8_lossy(&tail);
    rest.lines().rev().find(|l| !l.trim().is_empty()).map_or(last, |l| l.trim().to_owned())
}

/// The exit status `wasmop compile` ends with for `error` (1 when it is not a [`LoadError`]
/// about the bytes); the host reads it back into the same kind of [`LoadError`].
pub fn exit_code(error: &anyhow::Error) -> u8 {
    match error.downcast_ref::<LoadError>() {
        Some(LoadError::Invalid(_)) => EXIT_INVALID,
        Some(LoadError::Componentize(_)) => EXIT_COMPONENTIZE,
        Some(LoadError::NotWasm { .. }) => EXIT_NOT_WASM,
        _ => 1,
    }
}

/// What `wasmop compile` does: the artifact of a plugin file for a host engine with (or
/// without) `fuel`, as the host would compile it.
///
/// # Errors
/// [`LoadError`] for bytes that are not a component or componentizable module;
/// [`LoadError::Compiler`] if the engine cannot be built.
pub fn precompile(bytes: &[u8], fuel: bool) -> Result<Vec<u8>, LoadError> {
    let engine = super::engine::compile_engine(fuel).map_err(|e| LoadError::Compiler(format!("{e:#}")))?;
    loader::precompile(&engine, bytes)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::sync::mpsc;

    use rayon::prelude::*;

    use super::*;

    #[test]
    fn a_large_compile_runs_its_parallel_work_while_the_shared_pool_is_busy() {
        // Every thread of the process-wide pool held until the end of the test.
        let threads = rayon::current_num_threads();
        let (started_tx, started) = mpsc::channel();
        let (release, held) = mpsc::channel::<()>();
        let held = Arc::new(std::sync::Mutex::new(held));
        for _ in 0..threads {
            let (started_tx, held) = (started_tx.clone(), Arc::clone(&held));
            rayon::spawn(move || {
                started_tx.send(()).expect("the test waits");
                let _ = held.lock().expect("not poisoned").recv();
            });
        }
        for _ in 0..threads {
            started.recv_timeout(Duration::from_secs(30)).expect("every shared thread busy");
        }
        // Parallel work on a pool of its own finishes meanwhile (on the shared pool it would
        // wait for the held threads: the receive below would time out).
        let (done_tx, done) = mpsc::channel();
        std::thread::spawn(move || {
            let sum: u64 = on_own_pool(|| (1..=1000u64).into_par_iter().sum());
            done_tx.send(sum).expect("the test waits");
        });
        let sum = done.recv_timeout(Duration::from_secs(30));
        drop(release);
        assert_eq!(sum, Ok(500_500), "the work did not finish while the shared pool was busy");
    }

    /// A stand-in compiler program: a shell script.
    fn script(dir: &Path, body: &str) -> PathBuf {
        let path = dir.join("fake-wasmop");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";

    #[test]
    fn a_failing_compiler_process_is_reported_with_the_last_line_of_its_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let child = Subprocess::new(script(dir.path(), "echo starting >&2; echo 'error: out of patience' >&2; exit 1"));
        let err = child.run(EMPTY_COMPONENT, &dir.path().join("out"), false, &AtomicBool::new(false)).unwrap_err();
        assert!(matches!(err, LoadError::Compiler(_)), "{err:?}");
        assert!(err.to_string().ends_with("(exit status: 1): out of patience"), "{err}");
    }

    #[test]
    fn a_compiler_process_that_runs_too_long_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let child = Subprocess { timeout: Duration::from_millis(300), ..Subprocess::new(script(dir.path(), "exec sleep 30")) };
        let started = Instant::now();
        let err = child.run(EMPTY_COMPONENT, &dir.path().join("out"), false, &AtomicBool::new(false)).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5), "killed, not waited for");
        assert!(err.to_string().contains("did not finish within 300ms and was killed"), "{err}");
    }

    #[test]
    fn the_exit_status_keeps_the_kind_of_error() {
        let dir = tempfile::tempdir().unwrap();
        let child = Subprocess::new(script(dir.path(), "echo 'error: invalid WebAssembly: bad section' >&2; exit 3"));
        let err = child.run(EMPTY_COMPONENT, &dir.path().join("out"), false, &AtomicBool::new(false)).unwrap_err();
        assert!(matches!(&err, LoadError::Invalid(m) if m == "bad section"), "{err:?}");
        let invalid = anyhow::Error::from(LoadError::Invalid("x".into()));
        assert_eq!(exit_code(&invalid), EXIT_INVALID);
        assert_eq!(exit_code(&anyhow::anyhow!("disk full")), 1);
    }

    #[test]
    fn a_compiler_that_writes_nothing_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let engine = super::super::engine::new_engine(false, false).unwrap();
        let child = Subprocess::new(script(dir.path(), "cat > /dev/null"));
        let err = child.compile(&engine, EMPTY_COMPONENT, "d", None, false, &AtomicBool::new(false)).unwrap_err();
        assert!(err.to_string().contains("exited without writing an artifact"), "{err}");
    }

    #[tokio::test]
    async fn a_large_file_waits_for_the_large_compile_in_progress_and_a_small_one_does_not() {
        let engine = super::super::engine::new_engine(false, false).unwrap();
        let target = Target { engine: &engine, metered: false, cache: None };
        let mut large = EMPTY_COMPONENT.to_vec();
        large.resize(LARGE_PLUGIN + 1, 0);
        let held = LARGE_COMPILES.acquire().await.unwrap();
        let small = Compiler::InProcess.compile(&target, Arc::new(EMPTY_COMPONENT.to_vec()), "small");
        tokio::time::timeout(Duration::from_secs(30), small).await.expect("a small file does not wait").unwrap();
        let mut waiting = Compiler::InProcess.compile(&target, Arc::new(large), "large");
        assert!(tokio::time::timeout(Duration::from_millis(300), &mut waiting).await.is_err(), "waits for the slot");
        drop(held);
        let outcome = tokio::time::timeout(Duration::from_secs(30), waiting).await.expect("runs once the slot is free");
        assert!(matches!(outcome, Err(LoadError::Invalid(_))), "compiled (and refused: trailing zeros)");
    }

    #[test]
    fn the_last_line_is_the_last_non_empty_one() {
        assert_eq!(last_line(&b"a\nb\n\n"[..]), "b");
        assert_eq!(last_line(&b"a\nno newline"[..]), "no newline");
        assert_eq!(last_line(&b""[..]), "");
    }
}
