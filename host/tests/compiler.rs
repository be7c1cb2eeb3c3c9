//! Compiling in a child process (`wasmop compile`, the compiler of `wasmop run`): the artifact
//! it writes is what the host loads, it behaves as one compiled in the host, and a file it
//! cannot compile is rejected with the same kind of error.

use std::sync::Arc;

use wasmop::contract::Request;
use wasmop::objects::MemoryCache;
use wasmop::policy::Limits;
use wasmop::runtime::{Compiler, LoadError, Runtime, Subprocess};
use wasmop_e2e::fixtures;

/// The tests whose child writes its artifact into the temporary directory run one at a time,
/// so that one's look for leftovers never sees another's artifact in flight.
static TEMPORARY_DIR: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn child() -> Compiler {
    Compiler::Subprocess(Subprocess::new(env!("CARGO_BIN_EXE_wasmop")))
}

fn runtime(compiler: Compiler, artifacts: Option<&std::path::Path>) -> Runtime {
    Runtime::builder().artifact_dir(artifacts.map(Into::into)).compiler(compiler).build().expect("runtime starts")
}

async fn plan(runtime: &Runtime, bytes: Vec<u8>) -> serde_json::Value {
    let plugin = runtime.load(bytes).await.expect("loads");
    let request = Request::new(fixtures::memcached_cr("m", 3));
    let (response, _) = plugin.reconcile(&request, Arc::new(MemoryCache::default())).await.expect("reconciles");
    serde_json::to_value(response).unwrap()
}

#[tokio::test]
async fn a_plugin_compiled_by_a_child_process_answers_as_one_compiled_in_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixtures::memcached()).unwrap();
    let in_process = plan(&runtime(Compiler::InProcess, None), bytes.clone()).await;
    let by_child = plan(&runtime(child(), Some(dir.path())), bytes).await;
    assert_eq!(by_child, in_process);
    let mut cached: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    cached.sort();
    assert_eq!(cached.len(), 2, "the artifact the child wrote, and its checksum: {cached:?}");
    assert!(cached[0].ends_with(".cwasm") && cached[1].ends_with(".cwasm.crc32"), "{cached:?}");
}

#[tokio::test]
async fn without_a_cache_the_child_artifact_is_mapped_and_its_file_removed() {
    let _one_at_a_time = TEMPORARY_DIR.lock().await;
    let before = leftovers();
    let bytes = std::fs::read(fixtures::memcached()).unwrap();
    assert_eq!(runtime(child(), None).load(bytes).await.unwrap().manifest().name, "memcached");
    assert_eq!(leftovers(), before, "no artifact left in the temporary directory");
}

/// This process's temporary artifacts.
fn leftovers() -> Vec<std::path::PathBuf> {
    let prefix = format!("wasmop-compile-{}-", std::process::id());
    let entries = std::fs::read_dir(std::env::temp_dir()).unwrap();
    entries.map(|e| e.unwrap().path()).filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(&prefix)).collect()
}

#[tokio::test]
async fn a_core_module_and_a_metered_engine_compile_in_the_child_too() {
    let _one_at_a_time = TEMPORARY_DIR.lock().await;
    let module = std::fs::read(fixtures::plugin("memcached", "wasm32-wasip1")).unwrap();
    assert_eq!(runtime(child(), None).load(module).await.unwrap().manifest().name, "memcached");
    let metered = Runtime::builder()
        .limits(Limits { fuel: Some(1 << 40), ..Limits::default() })
        .artifact_dir(None)
        .compiler(child())
        .build()
        .unwrap();
    let bytes = std::fs::read(fixtures::memcached()).unwrap();
    let plugin = metered.load(bytes).await.expect("the child compiles for a metered engine");
    let request = Request::new(fixtures::memcached_cr("m", 1));
    plugin.reconcile(&request, Arc::new(MemoryCache::default())).await.expect("runs on fuel");
}

#[tokio::test]
async fn a_file_the_child_cannot_compile_is_rejected_as_in_the_host() {
    let _one_at_a_time = TEMPORARY_DIR.lock().await;
    let bytes = std::fs::read(fixtures::memcached()).unwrap();
    let truncated = bytes[..bytes.len() / 2].to_vec();
    let err = runtime(child(), None).load(truncated.clone()).await.unwrap_err();
    let in_host = runtime(Compiler::InProcess, None).load(truncated).await.unwrap_err();
    assert!(matches!(err, LoadError::Invalid(_)), "{err:?}");
    assert_eq!(err.to_string(), in_host.to_string());
    let err = runtime(child(), None).load(b"not wasm at all".to_vec()).await.unwrap_err();
    assert!(matches!(err, LoadError::NotWasm { .. }), "{err:?}");
}

#[tokio::test]
async fn a_child_that_runs_out_of_memory_is_reported_with_its_last_words() {
    let _one_at_a_time = TEMPORARY_DIR.lock().await;
    let tiny = Compiler::Subprocess(Subprocess { max_memory: 64 << 20, ..Subprocess::new(env!("CARGO_BIN_EXE_wasmop")) });
    let bytes = std::fs::read(fixtures::memcached()).unwrap();
    let err = runtime(tiny, None).load(bytes).await.unwrap_err();
    assert!(matches!(err, LoadError::Compiler(_)), "{err:?}");
    assert!(err.to_string().starts_with("compiling failed: the compiler process failed"), "{err}");
}
