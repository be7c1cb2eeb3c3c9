//! Host side of the `log` interface, and forwarding of guest stdout/stderr, into `tracing`,
//! within the call's [`LogBudget`] (see [`super::log_budget`] for the bounds).

use super::bindings::{v0_1, v0_2, v0_3};
use super::log_budget::{LogBudget, MAX_LOG_BYTES, MAX_LOG_LINES};
use super::state::HostState;

impl v0_1::types::Host for HostState {}
impl v0_2::types::Host for HostState {}
impl v0_3::types::Host for HostState {}

impl v0_1::log::Host for HostState {
    async fn log(&mut self, level: v0_1::types::Level, message: String) -> wasmtime::Result<()> {
        use v0_1::types::Level as L;
        let level = match level {
            L::Trace => tracing::Level::TRACE,
            L::Debug => tracing::Level::DEBUG,
            L::Info => tracing::Level::INFO,
            L::Warn => tracing::Level::WARN,
            L::Error => tracing::Level::ERROR,
        };
        self.guest_log(level, &message);
        Ok(())
    }
}

impl v0_2::log::Host for HostState {
    async fn log(&mut self, level: v0_2::types::Level, message: String) -> wasmtime::Result<()> {
        use v0_2::types::Level as L;
        let level = match level {
            L::Trace => tracing::Level::TRACE,
            L::Debug => tracing::Level::DEBUG,
            L::Info => tracing::Level::INFO,
            L::Warn => tracing::Level::WARN,
            L::Error => tracing::Level::ERROR,
        };
        self.guest_log(level, &message);
        Ok(())
    }
}

impl v0_3::log::Host for HostState {
    async fn log(&mut self, level: v0_3::types::Level, message: String) -> wasmtime::Result<()> {
        use v0_3::types::Level as L;
        let level = match level {
            L::Trace => tracing::Level::TRACE,
            L::Debug => tracing::Level::DEBUG,
            L::Info => tracing::Level::INFO,
            L::Warn => tracing::Level::WARN,
            L::Error => tracing::Level::ERROR,
        };
        self.guest_log(level, &message);
        Ok(())
    }
}

impl HostState {
    /// One line from the `log` import, within the call's budget.
    fn guest_log(&mut self, level: tracing::Level, message: &str) {
        let Some(line) = self.log_budget.take(message) else { return };
        let plugin = &*self.plugin;
        match level {
            tracing::Level::TRACE => tracing::trace!(target: "wasmop::plugin", plugin, "{line}"),
            tracing::Level::DEBUG => tracing::debug!(target: "wasmop::plugin", plugin, "{line}"),
            tracing::Level::INFO => tracing::info!(target: "wasmop::plugin", plugin, "{line}"),
            tracing::Level::WARN => tracing::warn!(target: "wasmop::plugin", plugin, "{line}"),
            tracing::Level::ERROR => tracing::error!(target: "wasmop::plugin", plugin, "{line}"),
        }
    }

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
