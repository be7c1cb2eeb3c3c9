//! A plugin's configuration: checked against the schema its manifest declares ([`check`]), and
//! followed from its source in the host policy while the plugin runs ([`PluginConfig`]). `wasmop run`,
//! `wasmop reconcile --config` and `wasmop inspect` all go through these, so they agree on what
//! is valid.

mod check;
mod watch;

pub use check::{ConfigError, check, compile_schema, from_config_map, offline, parse_text};
pub use watch::{ConfigReader, ConfigStatus, PluginConfig};
