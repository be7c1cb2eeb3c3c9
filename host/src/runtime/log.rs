//! Host side of the `log` interface, and forwarding of guest stdout/stderr, into `tracing`.

use super::bindings::{log, types};
use super::state::HostState;
use crate::contract::truncate_utf8;

/// Longest log line kept from a plugin.
const MAX_LINE: usize = 4096;

impl types::Host for HostState {}

impl log::Host for HostState {
    async fn log(&mut self, level: types::Level, mut message: String) -> wasmtime::Result<()> {
        truncate_utf8(&mut message, MAX_LINE);
        let plugin = &*self.plugin;
        match level {
            types::Level::Trace => tracing::trace!(target: "wasmop::plugin", plugin, "{message}"),
            types::Level::Debug => tracing::debug!(target: "wasmop::plugin", plugin, "{message}"),
            types::Level::Info => tracing::info!(target: "wasmop::plugin", plugin, "{message}"),
            types::Level::Warn => tracing::warn!(target: "wasmop::plugin", plugin, "{message}"),
            types::Level::Error => tracing::error!(target: "wasmop::plugin", plugin, "{message}"),
        }
        Ok(())
    }
}

impl HostState {
    /// Log what the guest wrote to stdout (info) and stderr (warn), one event per line.
    pub(super) fn flush_guest_output(&self) {
        let plugin = &*self.plugin;
        for line in self.stdout.text().lines().filter(|l| !l.is_empty()) {
            tracing::info!(target: "wasmop::plugin", plugin, stream = "stdout", "{line}");
        }
        for line in self.stderr.text().lines().filter(|l| !l.is_empty()) {
            tracing::warn!(target: "wasmop::plugin", plugin, stream = "stderr", "{line}");
        }
    }

    /// What the guest last said on stderr before failing: for a Rust panic, the `panicked at`
    /// line joined with the message under it; otherwise the last non-empty line. Rust's
    /// `note: run with RUST_BACKTRACE=1` hint is skipped.
    pub(super) fn last_stderr_line(&self) -> Option<String> {
        let text = self.stderr.text();
        let lines: Vec<&str> =
            text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("note: run with")).collect();
        if let Some(i) = lines.iter().rposition(|l| l.contains("panicked at")) {
            let at = lines[i].split_once("panicked at").map_or(lines[i], |(_, at)| at.trim());
            return Some(match lines.get(i + 1) {
                Some(message) => format!("panicked at {at} {message}"),
                None => format!("panicked at {at}"),
            });
        }
        lines.last().map(|l| (*l).to_owned())
    }
}
