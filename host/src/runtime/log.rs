//! Host side of the `log` interface, and forwarding of guest stdout/stderr, into `tracing`,
//! within the call's [`LogBudget`] (see [`super::log_budget`] for the bounds).

use super::bindings::{log, types};
use super::log_budget::{LogBudget, MAX_LOG_BYTES, MAX_LOG_LINES};
use super::state::HostState;

impl types::Host for HostState {}

impl log::Host for HostState {
    async fn log(&mut self, level: types::Level, message: String) -> wasmtime::Result<()> {
        let Some(line) = self.log_budget.take(&message) else { return Ok(()) };
        let plugin = &*self.plugin;
        match level {
            types::Level::Trace => tracing::trace!(target: "wasmop::plugin", plugin, "{line}"),
            types::Level::Debug => tracing::debug!(target: "wasmop::plugin", plugin, "{line}"),
            types::Level::Info => tracing::info!(target: "wasmop::plugin", plugin, "{line}"),
            types::Level::Warn => tracing::warn!(target: "wasmop::plugin", plugin, "{line}"),
            types::Level::Error => tracing::error!(target: "wasmop::plugin", plugin, "{line}"),
        }
        Ok(())
    }
}

impl HostState {
    /// Log what the guest wrote to stdout (info) and stderr (warn), one event per line, within
    /// the call's budget; then, if anything was dropped, one warning saying how much.
    pub(super) fn flush_guest_output(&mut self) {
        let plugin = &*self.plugin;
        for (stream, output) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            for text in output.text().lines().filter(|l| !l.is_empty()) {
                let Some(line) = self.log_budget.take(text) else { continue };
                if stream == "stdout" {
                    tracing::info!(target: "wasmop::plugin", plugin, stream, "{line}");
                } else {
                    tracing::warn!(target: "wasmop::plugin", plugin, stream, "{line}");
                }
            }
            let (lines, bytes) = output.dropped();
            self.log_budget.dropped(lines, bytes);
        }
        let LogBudget { dropped_lines, dropped_bytes, .. } = self.log_budget;
        if dropped_lines > 0 || dropped_bytes > 0 {
            tracing::warn!(target: "wasmop::plugin", plugin, dropped_lines, dropped_bytes,
                "plugin log output over the limit of {MAX_LOG_LINES} lines and {MAX_LOG_BYTES} bytes per call: \
                 dropped {dropped_lines} lines ({dropped_bytes} bytes)");
        }
    }

    /// Why the guest failed, in its runtime's words (see [`super::guest_failure`]): a Rust panic
    /// message, a Python exception, a JavaScript error, else the last line it wrote on stderr.
    pub(super) fn last_stderr_line(&self) -> Option<String> {
        super::guest_failure::reason(&self.stderr.text())
    }
}
