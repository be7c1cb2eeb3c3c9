//! The data of one call's `Store`: WASI context, limits, and what the plugin may look up.

use std::sync::{Arc, Mutex};

use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::http_denied::DenyOutgoingHttp;

use super::log_budget::LogBudget;
use super::memory_limiter::MemoryLimiter;
use crate::contract::Manifest;
use crate::objects::ObjectCache;
use crate::policy::Grants;

/// Bytes of guest stdout, and of stderr, held in memory per call; the rest is dropped (and
/// counted). As much as the log takes from one call ([`super::log_budget::MAX_LOG_BYTES`]).
const MAX_GUEST_OUTPUT: usize = 64 << 10;

/// What one call may read through the `cache` import.
pub struct LookupScope {
    /// The plugin's manifest: the kinds it may read.
    pub manifest: Arc<Manifest>,
    /// What the host's operator grants beyond the manifest (Secrets, other namespaces).
    pub grants: Grants,
    /// The parent's namespace (for namespaced parents); in an admission call, the admitted
    /// object's.
    pub namespace: Option<String>,
    /// The parent's name, substituted in related selectors; in an admission call, the
    /// admitted object's.
    pub parent_name: String,
    /// The objects.
    pub cache: Arc<dyn ObjectCache>,
    /// An admission call: every object of the parent's kind in the namespace scope is visible,
    /// not only the parent.
    pub admission: bool,
}

impl std::fmt::Debug for LookupScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LookupScope").field("namespace", &self.namespace).field("parent", &self.parent_name).finish()
    }
}

/// Store data for one call.
pub struct HostState {
    wasi: WasiCtx,
    /// `wasi:http`, linked for runtimes that import it; every request is denied.
    http: WasiHttpCtx,
    http_hooks: DenyOutgoingHttp,
    table: ResourceTable,
    pub(super) limiter: MemoryLimiter,
    /// Plugin name, for log lines.
    pub(super) plugin: Arc<str>,
    /// Lookups allowed during this call; `None` while describing the plugin.
    /// Shared so that each lookup can hold it while the store records refusals.
    pub(super) lookup: Option<Arc<LookupScope>>,
    /// Lookups refused for lack of permission, in order; any makes the call fail.
    pub(super) refused_lookups: Vec<String>,
    pub(super) stdout: GuestOutput,
    pub(super) stderr: GuestOutput,
    /// What the plugin may still log during this call.
    pub(super) log_budget: LogBudget,
}

impl HostState {
    /// A sandbox with no filesystem, network, environment, arguments or stdin; stdout and
    /// stderr are captured (bounded) for the log.
    pub fn new(plugin: Arc<str>, memory_bytes: u64, lookup: Option<LookupScope>) -> Self {
        let (stdout, stderr) = (GuestOutput::default(), GuestOutput::default());
        let wasi = WasiCtx::builder().stdout(stdout.clone()).stderr(stderr.clone()).build();
        Self {
            wasi,
            http: WasiHttpCtx::new(),
            http_hooks: DenyOutgoingHttp,
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(memory_bytes),
            plugin,
            lookup: lookup.map(Arc::new),
            refused_lookups: Vec::new(),
            stdout,
            stderr,
            log_budget: LogBudget::default(),
        }
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.http_hooks }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// A bounded in-memory sink for guest stdout or stderr: at most `MAX_GUEST_OUTPUT` bytes are
/// kept. Writes past the bound are dropped and counted, never failed, so a chatty guest cannot
/// trap on output nor grow the host's memory.
#[derive(Debug, Clone, Default)]
pub struct GuestOutput(Arc<Mutex<Captured>>);

#[derive(Debug, Default)]
struct Captured {
    kept: Vec<u8>,
    dropped_bytes: usize,
    dropped_lines: usize,
}

impl GuestOutput {
    /// Everything kept so far, lossily decoded.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("guest output lock").kept).into_owned()
    }

    /// Lines (newlines) and bytes written past the bound.
    pub fn dropped(&self) -> (usize, usize) {
        let c = self.0.lock().expect("guest output lock");
        (c.dropped_lines, c.dropped_bytes)
    }

    fn push(&self, bytes: &[u8]) {
        let mut c = self.0.lock().expect("guest output lock");
        let (kept, dropped) = bytes.split_at(bytes.len().min(MAX_GUEST_OUTPUT.saturating_sub(c.kept.len())));
        c.kept.extend_from_slice(kept);
        c.dropped_bytes = c.dropped_bytes.saturating_add(dropped.len());
        c.dropped_lines = c.dropped_lines.saturating_add(dropped.iter().filter(|&&b| b == b'\n').count());
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for GuestOutput {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestOutput {
    fn write(&mut self, bytes: bytes::Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(MAX_GUEST_OUTPUT)
    }
}

impl tokio::io::AsyncWrite for GuestOutput {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.push(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: std::pin::Pin<&mut Self>, _cx: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: std::pin::Pin<&mut Self>, _cx: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_output_is_bounded_and_never_fails() {
        let mut out = GuestOutput::default();
        for _ in 0..3 {
            out.write(bytes::Bytes::from(vec![b'x'; MAX_GUEST_OUTPUT / 2 + 1])).unwrap();
        }
        assert_eq!(out.text().len(), MAX_GUEST_OUTPUT);
        assert_eq!(out.dropped(), (0, 3 * (MAX_GUEST_OUTPUT / 2 + 1) - MAX_GUEST_OUTPUT));
        out.write(bytes::Bytes::from_static(b"a\nb\n")).unwrap();
        assert_eq!(out.dropped().0, 2);
    }
}
