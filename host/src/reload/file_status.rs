//! [`FileStatus`]: what the host knows about one plugin file, as the reloader keeps it and the
//! file's `WasmPlugin` object shows it.

use std::path::PathBuf;

use serde::Serialize;

/// What the host knows about one plugin file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileStatus {
    /// The file.
    pub file: PathBuf,
    /// sha256 of the content last read.
    pub digest: String,
    /// The plugin it provides, when one is running from it.
    pub plugin: Option<String>,
    /// That plugin's version.
    pub version: Option<String>,
    /// Digest of the version running (differs from `digest` after a rejected update).
    pub running_digest: Option<String>,
    /// When the running version was loaded (RFC 3339).
    pub loaded_at: Option<String>,
    /// Successful loads of this file.
    pub loads: u64,
    /// Why the last content read was rejected, if it was.
    pub last_error: Option<String>,
    /// The plugin the file's content provides when it loaded but could not be started (a kind
    /// not served, Secrets not granted) and no version of it runs: its `WasmPlugin` says why.
    pub not_started: Option<String>,
}
