//! A content-addressed store of precompiled plugins, so restarts and reloads skip compilation.

use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

/// Precompiled components on disk, keyed by the plugin's digest and the engine's compatibility.
///
/// A file `<sha256 of plugin>-<engine hash>.cwasm` holds the artifact as wasmtime wrote it,
/// and `<same>.cwasm.crc32` the artifact's CRC-32 (hex). An artifact is mapped from its file
/// ([`Component::deserialize_file`]): its code is file-backed, shared and clean, not a copy in
/// the host's heap. One whose checksum does not match (a torn write, a disk error) is ignored
/// and rewritten. Files are only ever replaced by a rename, never rewritten in place, so a
/// mapped artifact never changes under the host.
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

    /// Where the artifact of a plugin digest is (or would be) kept.
    pub fn path(&self, digest: &str) -> PathBuf {
        self.dir.join(format!("{digest}-{}.cwasm", self.engine_key))
    }

    /// Whether an artifact of a plugin digest is on disk with its checksum (whether it is
    /// intact is known only by [`load`](Self::load)ing it).
    pub fn contains(&self, digest: &str) -> bool {
        let path = self.path(digest);
        path.is_file() && checksum_path(&path).is_file()
    }

    /// The precompiled component for a plugin digest, if cached and intact.
    pub fn load(&self, engine: &Engine, digest: &str) -> Option<Component> {
        match load_artifact(engine, &self.path(digest)) {
            Ok(component) => component,
            Err(e) => {
                tracing::warn!(path = %self.path(digest).display(), error = %e, "ignoring a precompiled artifact");
                None
            }
        }
    }

    /// Store a compiled component. Failures are logged, not returned: the cache is an
    /// optimisation.
    pub fn store(&self, digest: &str, component: &Component) {
        let result = component.serialize().map_err(|e| e.to_string()).and_then(|artifact| {
            std::fs::create_dir_all(&self.dir).map_err(|e| e.to_string())?;
            write_artifact(&self.path(digest), &artifact).map_err(|e| e.to_string())
        });
        if let Err(e) = result {
            tracing::warn!(dir = %self.dir.display(), error = %e, "cannot store a precompiled artifact");
        }
    }
}

/// The checksum file of the artifact at `path`.
///
/// The checksum is a CRC-32: it is there to catch a torn write or a disk error, which it
/// detects as well as a cryptographic digest would, at several times the speed (the artifact is
/// read whole on every load; for the memcached plugin's 1.7 MB, about 1 ms with SHA-256). It
/// is no defence against a writer of the directory, and needs to be none: whoever can write
/// an artifact can write its checksum too (see [`ArtifactCache`]).
pub(crate) fn checksum_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".crc32");
    PathBuf::from(name)
}

/// The checksum of an artifact's bytes as its checksum file holds it.
fn checksum_text(crc: u32) -> String {
    format!("{crc:08x}")
}

/// Write `artifact` to `path` with its checksum file, each through a temporary file renamed
/// into place (the checksum first: a reader never takes a new checksum's artifact for intact
/// unless it is).
///
/// # Errors
/// When a file cannot be written, synced or renamed.
pub fn write_artifact(path: &Path, artifact: &[u8]) -> std::io::Result<()> {
    let write = |target: &Path, bytes: &[u8]| -> std::io::Result<()> {
        let mut tmp = target.as_os_str().to_owned();
        tmp.push(format!(".{}.tmp", std::process::id()));
        let tmp = PathBuf::from(tmp);
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, target)
    };
    write(&checksum_path(path), checksum_text(crc32fast::hash(artifact)).as_bytes())?;
    write(path, artifact)?;
    // The checksum file of earlier versions (a SHA-256), which this one never reads.
    let mut earlier = path.as_os_str().to_owned();
    earlier.push(".sha256");
    let _ = std::fs::remove_file(earlier);
    Ok(())
}

/// The component precompiled at `path` by [`write_artifact`], mapped from the file; `None`
/// when there is none.
///
/// # Errors
/// When the file's checksum does not match or wasmtime refuses it (another engine's).
pub fn load_artifact(engine: &Engine, path: &Path) -> Result<Option<Component>, String> {
    let Ok(expected) = std::fs::read_to_string(checksum_path(path)) else { return Ok(None) };
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let mut hasher = crc32fast::Hasher::new();
    let mut buffer = vec![0; 64 << 10];
    loop {
        match file.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buffer[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    if checksum_text(hasher.finalize()) != expected.trim() {
        return Err("its checksum does not match (a torn write or a disk error)".into());
    }
    // SAFETY: the file was written by `write_artifact` from `Engine::precompile_component` or
    // `Component::serialize` (wasmtime checks the engine's compatibility itself), its checksum
    // matches, and it is never rewritten in place (only replaced by a rename), so the mapping
    // does not change; the directory is the host's own (see `ArtifactCache`).
    unsafe { Component::deserialize_file(engine, path) }.map(Some).map_err(|e| format!("{e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component: its header.
    const COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";

    #[test]
    fn a_stored_artifact_is_mapped_back_and_a_corrupt_one_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let engine = super::super::engine::new_engine(false, false).unwrap();
        let cache = ArtifactCache::new(dir.path(), &engine);
        assert!(cache.load(&engine, "abc").is_none(), "nothing cached yet");
        let component = Component::new(&engine, COMPONENT).unwrap();
        cache.store("abc", &component);
        assert!(cache.load(&engine, "abc").is_some());
        let mut bytes = std::fs::read(cache.path("abc")).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        std::fs::write(cache.path("abc"), bytes).unwrap();
        assert!(cache.load(&engine, "abc").is_none(), "a corrupt artifact is a miss");
        let err = load_artifact(&engine, &cache.path("abc")).err().unwrap();
        assert!(err.contains("checksum does not match"), "{err}");
    }

    #[test]
    fn an_artifact_with_only_an_earlier_checksum_file_is_a_miss_and_its_rewrite_removes_that_file() {
        let dir = tempfile::tempdir().unwrap();
        let engine = super::super::engine::new_engine(false, false).unwrap();
        let cache = ArtifactCache::new(dir.path(), &engine);
        let component = Component::new(&engine, COMPONENT).unwrap();
        let artifact = cache.path("abc");
        std::fs::write(&artifact, component.serialize().unwrap()).unwrap();
        let earlier = dir.path().join(format!("{}.sha256", artifact.file_name().unwrap().to_string_lossy()));
        std::fs::write(&earlier, "0".repeat(64)).unwrap();
        assert!(!cache.contains("abc") && cache.load(&engine, "abc").is_none(), "no checksum of this format: a miss");
        cache.store("abc", &component);
        assert!(cache.contains("abc") && cache.load(&engine, "abc").is_some());
        assert!(!earlier.exists(), "the earlier checksum file is removed when the artifact is written again");
    }

    #[test]
    fn an_artifact_of_another_engine_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let plain = super::super::engine::new_engine(false, false).unwrap();
        let metered = super::super::engine::new_engine(false, true).unwrap();
        let path = dir.path().join("x.cwasm");
        write_artifact(&path, &plain.precompile_component(COMPONENT).unwrap()).unwrap();
        assert!(load_artifact(&plain, &path).unwrap().is_some());
        assert!(load_artifact(&metered, &path).is_err(), "compiled without fuel, refused by a metered engine");
    }
}
