//! From bytes to a compiled [`Component`]: format detection, wasip1 componentization, digest.

use sha2::{Digest, Sha256};
use wasi_preview1_component_adapter_provider::{WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::artifact_cache::ArtifactCache;
use super::error::LoadError;

/// The two binary formats a plugin file may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WasmFormat {
    /// A component (wasm32-wasip2, or any component toolchain).
    Component,
    /// A core module (wasm32-wasip1); componentized with the WASI preview1 adapter.
    CoreModule,
}

/// Tell a component from a core module by the header, or say why it is neither.
///
/// # Errors
/// [`LoadError::NotWasm`] when the magic is missing, [`LoadError::Invalid`] for an unknown
/// version.
pub fn detect(bytes: &[u8]) -> Result<WasmFormat, LoadError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        let head: Vec<String> = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
        let found = if head.is_empty() { "an empty file".into() } else { head.join(" ") };
        return Err(LoadError::NotWasm { found });
    }
    match bytes[4..8] {
        [1, 0, 0, 0] => Ok(WasmFormat::CoreModule),
        [0x0d, 0, 1, 0] => Ok(WasmFormat::Component),
        ref v => Err(LoadError::Invalid(format!("unsupported binary version {v:02x?}"))),
    }
}

/// The sha256 of a plugin file, hex: its identity in logs, metrics and the artifact cache.
pub fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Wrap a wasm32-wasip1 core module built with wit-bindgen into a component.
///
/// # Errors
/// [`LoadError::Componentize`] when the module carries no component type or the adapter
/// cannot satisfy its imports.
pub fn componentize(module: &[u8]) -> Result<Vec<u8>, LoadError> {
    let err = |e: anyhow::Error| LoadError::Componentize(format!("{e:#}"));
    wit_component::ComponentEncoder::default()
        .module(module)
        .map_err(err)?
        .adapter(WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER)
        .map_err(err)?
        .validate(true)
        .encode()
        .map_err(err)
}

/// Compile a plugin file, using and filling the artifact cache when given. CPU-heavy: call it
/// off the async executor.
///
/// # Errors
/// [`LoadError`] for anything that is not a valid component or componentizable module.
pub fn compile(engine: &Engine, bytes: &[u8], digest: &str, cache: Option<&ArtifactCache>) -> Result<Component, LoadError> {
    let format = detect(bytes)?;
    if let Some(component) = cache.and_then(|c| c.load(engine, digest)) {
        return Ok(component);
    }
    let component_bytes = as_component(engine, bytes, format)?;
    let component = Component::from_binary(engine, &component_bytes).map_err(|e| LoadError::Invalid(first_line(&e)))?;
    if let Some(cache) = cache {
        cache.store(digest, &component);
    }
    Ok(component)
}

/// The artifact of a plugin file for `engine` ([`Engine::precompile_component`]), which an
/// engine of the same configuration loads with `Component::deserialize_file`. CPU-heavy.
///
/// # Errors
/// [`LoadError`] for anything that is not a valid component or componentizable module.
pub fn precompile(engine: &Engine, bytes: &[u8]) -> Result<Vec<u8>, LoadError> {
    let component_bytes = as_component(engine, bytes, detect(bytes)?)?;
    engine.precompile_component(&component_bytes).map_err(|e| LoadError::Invalid(first_line(&e)))
}

/// The component of a plugin file: itself, or the core module componentized.
fn as_component<'a>(engine: &Engine, bytes: &'a [u8], format: WasmFormat) -> Result<std::borrow::Cow<'a, [u8]>, LoadError> {
    Ok(match format {
        WasmFormat::Component => std::borrow::Cow::Borrowed(bytes),
        WasmFormat::CoreModule => {
            // Validate first so a corrupt module says "invalid", not "cannot componentize".
            wasmtime::Module::validate(engine, bytes).map_err(|e| LoadError::Invalid(first_line(&e)))?;
            std::borrow::Cow::Owned(componentize(bytes)?)
        }
    })
}

/// The error's message and its causes on one line.
fn first_line(e: &wasmtime::Error) -> String {
    format!("{e:#}").lines().next().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_not_wasm() {
        let err = detect(b"hello world").unwrap_err();
        assert_eq!(err.to_string(), "not a WebAssembly file (expected the `\\0asm` magic, found 68 65 6c 6c 6f 20 77 6f)");
        assert!(matches!(detect(b""), Err(LoadError::NotWasm { .. })));
    }

    #[test]
    fn header_tells_component_from_module() {
        assert_eq!(detect(b"\0asm\x01\0\0\0").unwrap(), WasmFormat::CoreModule);
        assert_eq!(detect(b"\0asm\x0d\0\x01\0").unwrap(), WasmFormat::Component);
        assert!(matches!(detect(b"\0asm\x02\0\0\0"), Err(LoadError::Invalid(_))));
    }

    #[test]
    fn digest_is_sha256_hex() {
        assert_eq!(digest(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
