//! The directory reloader: keeping the running plugins in step with the plugin files of a
//! directory.
//!
//! [`Reloader`] maps each `*.wasm` file of the plugins directory to a running plugin. It
//! watches the directory (never the files: editors and ConfigMap volumes replace them),
//! debounces, re-reads every file through its visible path, and acts on content digests:
//! a new file starts a plugin, a changed one is compiled in the background (its `WasmPlugin`
//! shows `Compiling`; other files' changes go on meanwhile), loaded and type-checked *before*
//! it replaces the running version, a removed one stops its plugin. A file that fails to load changes
//! nothing: the previous version keeps serving, and the failure is logged and kept in the
//! file's status until the file changes again. A periodic rescan catches missed events.
//! A rejected file from which no plugin runs gets a `WasmPlugin` of its own, a file report
//! named after the file ([`report_name`]), until it goes or loads. A file pulled from a registry
//! (`crate::registry`) is followed like any other; its latest pull ([`PullReport`]) shows on
//! its `WasmPlugin` too.

mod cluster_status;
mod compile_status;
mod config_status;
mod cpu_status;
mod directory;
mod file_report;
mod file_status;
mod pull_status;
mod reloader;
mod report_name;

pub use cluster_status::{ClusterStatus, SCOPE_ANNOTATION, WASMPLUGIN_CRD};
pub use compile_status::{COMPILING, CompileEnd, CompileReport, CompileTarget};
pub use config_status::CONFIG_VALID;
pub use directory::{DirectoryEvents, scan};
pub use file_status::FileStatus;
pub use pull_status::{PullReport, PullState};
pub use reloader::{PluginSetObserver, ReloadConfig, Reloader, SHOW_COMPILING_AFTER, START_RETRY};
pub use report_name::{FILE_REPORT_LABEL, report_name};
