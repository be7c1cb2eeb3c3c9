//! Loading plugin files: formats, bad files, the world check, the artifact cache.

use wasmop::runtime::{LoadError, Runtime};
use wasmop_e2e::fixtures;

fn runtime() -> Runtime {
    Runtime::builder().artifact_dir(None).build().expect("runtime starts")
}

#[tokio::test]
async fn memcached_component_loads_with_its_manifest() {
    let plugin = runtime().load_file(fixtures::memcached()).await.unwrap();
    let m = plugin.manifest();
    assert_eq!(m.name, "memcached");
    assert_eq!(m.parent.to_string(), "cache.example.com/v1alpha1/Memcached");
    assert_eq!(m.children.iter().map(ToString::to_string).collect::<Vec<_>>(), ["apps/v1/Deployment"]);
    assert!(m.prune);
    assert_eq!(plugin.digest().len(), 64);
}

#[tokio::test]
async fn wasip1_core_module_is_componentized() {
    let path = fixtures::plugin("memcached", "wasm32-wasip1");
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(wasmop::runtime::detect(&bytes).unwrap(), wasmop::runtime::WasmFormat::CoreModule);
    let plugin = runtime().load(bytes).await.unwrap();
    assert_eq!(plugin.manifest().name, "memcached");
}

#[tokio::test]
async fn a_text_file_is_not_wasm() {
    let err = runtime().load(b"apiVersion: v1\nkind: Pod\n".to_vec()).await.unwrap_err();
    assert!(matches!(err, LoadError::NotWasm { .. }), "{err}");
}

#[tokio::test]
async fn a_truncated_plugin_is_invalid() {
    let bytes = std::fs::read(fixtures::memcached()).unwrap();
    let err = runtime().load(bytes[..bytes.len() / 2].to_vec()).await.unwrap_err();
    assert!(matches!(err, LoadError::Invalid(_)), "{err}");
}

#[tokio::test]
async fn a_component_of_another_world_is_refused_by_name() {
    let err = runtime().load_file(fixtures::plugin("wrong-world", "wasm32-wasip2")).await.unwrap_err();
    assert!(matches!(err, LoadError::WrongWorld(_)), "{err}");
    assert!(err.to_string().contains("wasmop:plugin/reconciler"), "{err}");
}

#[tokio::test]
async fn a_missing_file_is_an_io_error() {
    let err = runtime().load_file("/nonexistent/plugin.wasm").await.unwrap_err();
    assert!(matches!(err, LoadError::Io { .. }));
    assert!(err.to_string().starts_with("cannot read /nonexistent/plugin.wasm"), "{err}");
}

#[tokio::test]
async fn precompiled_artifacts_are_reused_across_runtimes() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixtures::memcached()).unwrap();
    let first = Runtime::builder().artifact_dir(Some(dir.path().into())).build().unwrap();
    first.load(bytes.clone()).await.unwrap();
    let mut files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert_eq!(files.len(), 2, "the artifact and its checksum: {files:?}");
    assert!(files[1].to_string_lossy().ends_with(".cwasm.crc32"), "{files:?}");
    let artifacts = &files[..1];
    assert!(artifacts[0].extension().is_some_and(|e| e == "cwasm"));
    // A second runtime loads from the artifact; corrupting it falls back to compiling.
    let written = std::fs::metadata(&artifacts[0]).unwrap().modified().unwrap();
    let second = Runtime::builder().artifact_dir(Some(dir.path().into())).build().unwrap();
    assert_eq!(second.load(bytes.clone()).await.unwrap().manifest().name, "memcached");
    assert_eq!(std::fs::metadata(&artifacts[0]).unwrap().modified().unwrap(), written, "a cache hit rewrites nothing");
    std::fs::write(&artifacts[0], b"garbage").unwrap();
    assert_eq!(second.load(bytes).await.unwrap().manifest().name, "memcached");
    assert!(std::fs::read(&artifacts[0]).unwrap().len() > 1000, "a corrupt artifact is recompiled and rewritten");
}
