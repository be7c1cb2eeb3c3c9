//! Progress of the compile a command waits for (`reconcile`, `admit`, `inspect`): a line when
//! a compile starts (a plugin not in the artifact cache may take seconds to minutes), and one
//! when the plugin is ready, with its size, the time taken and whether the compiled artifact
//! came from the cache. Both are `info` logs on stderr (`RUST_LOG=warn` silences them); stdout
//! keeps only the command's output.

use std::path::Path;
use std::time::Instant;

use crate::runtime::{LoadError, Plugin, Runtime, digest};
use crate::units::{approximate_bytes, approximate_duration};

/// [`Runtime::load_file`], saying what it compiles and how long it took.
///
/// # Errors
/// As [`Runtime::load_file`].
pub async fn load_file(runtime: &Runtime, path: &Path) -> Result<Plugin, LoadError> {
    let bytes = tokio::fs::read(path).await.map_err(|error| LoadError::Io { path: path.to_owned(), error })?;
    let (file, size) = (path.display(), approximate_bytes(bytes.len() as u64));
    let cached = runtime.is_cached(&digest(&bytes));
    if !cached {
        tracing::info!(%file, %size, "compiling the plugin (not in the artifact cache yet; large plugins take a minute or more)");
    }
    let started = Instant::now();
    let plugin = runtime.load(bytes).await?;
    let elapsed = approximate_duration(started.elapsed());
    if cached {
        tracing::info!(%file, %size, %elapsed, "plugin loaded from the artifact cache");
    } else if runtime.caches_artifacts() {
        tracing::info!(%file, %size, %elapsed, "plugin compiled (cached for next time)");
    } else {
        tracing::info!(%file, %size, %elapsed, "plugin compiled (not cached: --no-cache)");
    }
    Ok(plugin)
}
