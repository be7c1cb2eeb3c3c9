//! [`PullCache`]: the content-addressed store of pulled plugin files, which survives restarts:
//! `blobs/sha256/HEX` (a Wasm layer, checked against its name whenever it is read) and
//! `manifests/sha256/HEX` (the Wasm layer's descriptor of a manifest) and
//! `signatures/sha256/HEX` (a manifest's signatures as pulled), so a pinned source
//! (`@sha256:...`) is installed again after a restart without asking the registry (its
//! signatures checked again against the policy's keys).

use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::artifact::Descriptor;
use super::client::sha256_digest;
use super::error::RegistryError;
use super::signature::Signed;

/// The cache under one directory.
#[derive(Debug, Clone)]
pub struct PullCache {
    dir: PathBuf,
}

impl PullCache {
    /// The cache in `dir` (created when first written).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The default cache of a plugins directory: `PLUGINS.pull-cache` beside it (outside the
    /// directory the reloader follows).
    pub fn beside(plugins_dir: &Path) -> PathBuf {
        let name = plugins_dir.file_name().map_or_else(|| "plugins".into(), |n| n.to_string_lossy().into_owned());
        plugins_dir.with_file_name(format!("{name}.pull-cache"))
    }

    fn path(&self, kind: &str, digest: &str) -> Option<PathBuf> {
        let hex = digest.strip_prefix("sha256:")?;
        (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| self.dir.join(kind).join("sha256").join(hex))
    }

    /// The blob `digest`, if cached and still what its name says (a corrupt one is removed).
    pub fn blob(&self, digest: &str) -> Option<Bytes> {
        let path = self.path("blobs", digest)?;
        let bytes = std::fs::read(&path).ok()?;
        if sha256_digest(&bytes) != digest {
            tracing::warn!(path = %path.display(), "a cached blob is not what its name says; removing it");
            let _ = std::fs::remove_file(&path);
            return None;
        }
        Some(Bytes::from(bytes))
    }

    /// Keep `bytes` as the blob `digest`.
    ///
    /// # Errors
    /// [`RegistryError::Io`] when the cache cannot be written.
    pub fn store_blob(&self, digest: &str, bytes: &[u8]) -> Result<(), RegistryError> {
        let path = self.path("blobs", digest).ok_or_else(|| bad_digest(digest))?;
        write_atomically(&path, bytes)
    }

    /// The Wasm layer of the manifest `digest`, if cached.
    pub fn manifest(&self, digest: &str) -> Option<Descriptor> {
        serde_json::from_slice(&std::fs::read(self.path("manifests", digest)?).ok()?).ok()
    }

    /// Keep `layer` as the Wasm layer of the manifest `digest`.
    ///
    /// # Errors
    /// [`RegistryError::Io`] when the cache cannot be written.
    pub fn store_manifest(&self, digest: &str, layer: &Descriptor) -> Result<(), RegistryError> {
        let path = self.path("manifests", digest).ok_or_else(|| bad_digest(digest))?;
        write_atomically(&path, &serde_json::to_vec(layer).expect("a descriptor serializes"))
    }

    /// The signatures of the manifest `digest` as last pulled, if cached (checked again
    /// against the policy's keys whenever used).
    pub fn signatures(&self, digest: &str) -> Option<Vec<Signed>> {
        serde_json::from_slice(&std::fs::read(self.path("signatures", digest)?).ok()?).ok()
    }

    /// Keep `signed` as the signatures of the manifest `digest`.
    ///
    /// # Errors
    /// [`RegistryError::Io`] when the cache cannot be written.
    pub fn store_signatures(&self, digest: &str, signed: &[Signed]) -> Result<(), RegistryError> {
        let path = self.path("signatures", digest).ok_or_else(|| bad_digest(digest))?;
        write_atomically(&path, &serde_json::to_vec(signed).expect("signatures serialize"))
    }
}

fn bad_digest(digest: &str) -> RegistryError {
    RegistryError::NotWasmArtifact(format!("digest {digest:?} is not sha256"))
}

/// Write `bytes` to `path` through a temporary file beside it and a rename: a reader (the
/// reloader, for a plugins directory) sees the old file or the whole new one, never part.
///
/// # Errors
/// [`RegistryError::Io`] naming the path.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), RegistryError> {
    let io = |what: &str, error| RegistryError::Io { what: format!("{what} {}", path.display()), error };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| io("cannot create the directory of", e))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // Not `*.wasm`: the reloader ignores it.
    let tmp = dir.join(format!(".{name}.{}.pulling", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io("cannot write", e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_reads_back_only_while_it_matches_its_digest() {
        let dir = tempfile::tempdir().unwrap();
        let cache = PullCache::new(dir.path().join("cache"));
        let digest = sha256_digest(b"\0asm\x0d\0\x01\0");
        assert!(cache.blob(&digest).is_none());
        cache.store_blob(&digest, b"\0asm\x0d\0\x01\0").unwrap();
        assert_eq!(cache.blob(&digest).unwrap().as_ref(), b"\0asm\x0d\0\x01\0");
        let path = cache.path("blobs", &digest).unwrap();
        std::fs::write(&path, b"tampered").unwrap();
        assert!(cache.blob(&digest).is_none());
        assert!(!path.exists(), "a corrupt blob is removed");
        assert!(cache.store_blob("sha256:../../x", b"").is_err());
    }

    #[test]
    fn the_default_cache_is_beside_the_plugins_directory() {
        assert_eq!(PullCache::beside(Path::new("/var/lib/wasmop/plugins")), Path::new("/var/lib/wasmop/plugins.pull-cache"));
    }
}
