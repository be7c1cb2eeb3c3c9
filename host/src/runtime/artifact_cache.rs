//! A content-addressed store of precompiled plugins, so restarts and reloads skip compilation.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Precompiled components on disk, keyed by the plugin's digest and the engine's compatibility.
///
/// A file is `<sha256 of plugin>-<engine hash>.cwasm` holding the sha256 of the artifact
/// followed by the artifact. A file whose checksum does not match (a torn write, a disk error)
/// is ignored and rewritten.
///
/// # Safety of the directory
/// Artifacts are native code that wasmtime maps executable. The directory must be writable
/// only by the host (as wasmtime's own cache): whoever can write it can run code in the host.
#[derive(Debug, Clone)]
pub struct ArtifactCache {
    dir: PathBuf,
    engine_key: String,
}

impl ArtifactCache {
    /// A cache in `dir` for artifacts compatible with `engine`. The directory is created on
    /// first write.
    pub fn new(dir: impl Into<PathBuf>, engine: &Engine) -> Self {
        let mut hasher = std::hash::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        env!("CARGO_PKG_VERSION").hash(&mut hasher);
        Self { dir: dir.into(), engine_key: format!("{:016x}", hasher.finish()) }
    }

    /// The default directory: `$WASMOP_CACHE_DIR`, else `$XDG_CACHE_HOME/wasmop/artifacts`,
    /// else `$HOME/.cache/wasmop/artifacts`.
    pub fn default_dir() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("WASMOP_CACHE_DIR") {
            return Some(dir.into());
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
        Some(base.join("wasmop").join("artifacts"))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, digest: &str) -> PathBuf {
        self.dir.join(format!("{digest}-{}.cwasm", self.engine_key))
    }

    /// The precompiled component for a plugin digest, if cached and intact.
    pub fn load(&self, engine: &Engine, digest: &str) -> Option<Component> {
        let bytes = std::fs::read(self.path(digest)).ok()?;
        let (sum, artifact) = bytes.split_at_checked(32)?;
        if Sha256::digest(artifact).as_slice() != sum {
            tracing::warn!(path = %self.path(digest).display(), "ignoring a corrupt precompiled artifact");
            return None;
        }
        // SAFETY: the artifact was produced by `Component::serialize` of an engine with the same
        // compatibility hash (it is in the file name), its checksum matches, and the directory
        // is the host's own (see the type's docs). It is read into memory, never mapped from a
        // file that could change.
        match unsafe { Component::deserialize(engine, artifact) } {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(error = %e, "ignoring an incompatible precompiled artifact");
                None
            }
        }
    }

    /// Store a compiled component. Failures are logged, not returned: the cache is an
    /// optimisation.
    pub fn store(&self, digest: &str, component: &Component) {
        let result = (|| -> anyhow::Result<()> {
            let artifact = component.serialize()?;
            std::fs::create_dir_all(&self.dir)?;
            let tmp = self.dir.join(format!(".{digest}.{}.tmp", std::process::id()));
            let mut bytes = Sha256::digest(&artifact).to_vec();
            bytes.extend_from_slice(&artifact);
            std::fs::write(&tmp, bytes)?;
            std::fs::rename(&tmp, self.path(digest))?;
            Ok(())
        })();
        if let Err(e) = result {
            tracing::warn!(dir = %self.dir.display(), error = %e, "cannot store a precompiled artifact");
        }
    }
}
