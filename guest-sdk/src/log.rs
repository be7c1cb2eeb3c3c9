//! Logging into the host's structured log (the `log` import).
//!
//! Lines are tagged by the host with the plugin name and the object being reconciled. Use the
//! functions with a ready string or the macros with `format!` arguments:
//!
//! ```
//! use wasmop_sdk::log;
//!
//! log::info("reconciling");
//! let replicas = 3;
//! log::debug!("want {replicas} replicas");
//! log::warn!("{} pods are not ready", 2);
//! ```
//!
//! In a plugin compiled to WebAssembly these call the host; natively (in unit tests) they print
//! `[LEVEL] message` to stderr, which the test harness captures.

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Very detailed tracing output.
    Trace,
    /// Debugging output.
    Debug,
    /// Normal operational messages.
    Info,
    /// Something unexpected that the plugin recovered from.
    Warn,
    /// A failure.
    Error,
}

impl Level {
    /// The level's name in upper case, e.g. `"INFO"`.
    ///
    /// ```
    /// assert_eq!(wasmop_sdk::log::Level::Warn.as_str(), "WARN");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trace => "TRACE",
            Self::Debug => "DEBUG",
            Self::Info => "INFO",
            Self::Warn => "WARN",
            Self::Error => "ERROR",
        }
    }
}

/// Write one log line at a level. Never fails; the host truncates very long messages.
///
/// ```
/// wasmop_sdk::log::log(wasmop_sdk::log::Level::Info, "hello");
/// ```
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    crate::bindings::wasmop::plugin::log::log(level_to_raw(level), message);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[{}] {message}", level.as_str());
}

/// A level as the generated bindings' `level` enum.
#[cfg(target_arch = "wasm32")]
fn level_to_raw(level: Level) -> crate::bindings::wasmop::plugin::types::Level {
    use crate::bindings::wasmop::plugin::types::Level as Raw;
    match level {
        Level::Trace => Raw::Trace,
        Level::Debug => Raw::Debug,
        Level::Info => Raw::Info,
        Level::Warn => Raw::Warn,
        Level::Error => Raw::Error,
    }
}

/// Log at `trace` level.
pub fn trace(message: &str) {
    log(Level::Trace, message);
}

/// Log at `debug` level.
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// Log at `info` level.
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// Log at `warn` level.
pub fn warn(message: &str) {
    log(Level::Warn, message);
}

/// Log at `error` level.
pub fn error(message: &str) {
    log(Level::Error, message);
}

#[doc(hidden)]
#[macro_export]
macro_rules! __wasmop_log {
    ($level:ident, $($arg:tt)+) => {
        $crate::log::log($crate::log::Level::$level, &::std::format!($($arg)+))
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __wasmop_log_trace {
    ($($arg:tt)+) => { $crate::__wasmop_log!(Trace, $($arg)+) };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __wasmop_log_debug {
    ($($arg:tt)+) => { $crate::__wasmop_log!(Debug, $($arg)+) };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __wasmop_log_info {
    ($($arg:tt)+) => { $crate::__wasmop_log!(Info, $($arg)+) };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __wasmop_log_warn {
    ($($arg:tt)+) => { $crate::__wasmop_log!(Warn, $($arg)+) };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __wasmop_log_error {
    ($($arg:tt)+) => { $crate::__wasmop_log!(Error, $($arg)+) };
}

/// Log a `format!`-style message at `trace` level: `log::trace!("x = {x}")`.
#[doc(inline)]
pub use crate::__wasmop_log_trace as trace;

/// Log a `format!`-style message at `debug` level: `log::debug!("x = {x}")`.
#[doc(inline)]
pub use crate::__wasmop_log_debug as debug;

/// Log a `format!`-style message at `info` level: `log::info!("x = {x}")`.
#[doc(inline)]
pub use crate::__wasmop_log_info as info;

/// Log a `format!`-style message at `warn` level: `log::warn!("x = {x}")`.
#[doc(inline)]
pub use crate::__wasmop_log_warn as warn;

/// Log a `format!`-style message at `error` level: `log::error!("x = {x}")`.
#[doc(inline)]
pub use crate::__wasmop_log_error as error;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_ordered_by_severity() {
        assert!(Level::Trace < Level::Debug && Level::Debug < Level::Info);
        assert!(Level::Info < Level::Warn && Level::Warn < Level::Error);
    }

    #[test]
    fn functions_and_macros_share_names_and_never_fail() {
        trace("t");
        debug("d");
        info("i");
        warn("w");
        error("e");
        let n = 2;
        crate::log::trace!("t {n}");
        crate::log::debug!("d {}", n);
        crate::log::info!("i");
        crate::log::warn!("w {n:?}");
        crate::log::error!("e {}", "x");
    }
}
