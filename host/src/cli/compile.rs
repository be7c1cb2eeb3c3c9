//! `wasmop compile IN OUT` (hidden): the compiler process of a running host
//! ([`crate::runtime::Compiler::Subprocess`]). It compiles one plugin file for the host's
//! engine, writes the artifact atomically (with its checksum) and exits, taking with it the
//! memory Cranelift used.

use std::io::Read;
use std::path::PathBuf;

use anyhow::Context;

use crate::runtime;

/// Arguments of `wasmop compile`.
#[derive(Debug, clap::Args)]
pub struct CompileArgs {
    /// The plugin file (`-`: read it from stdin).
    input: PathBuf,
    /// Where to write the artifact (and its `.crc32`), through temporary files renamed into place.
    output: PathBuf,
    /// Compile for a host whose engine counts fuel (its policy sets a fuel limit).
    #[arg(long)]
    fuel: bool,
    /// Cap this process's address space at this many bytes (`RLIMIT_AS`).
    #[arg(long, value_name = "BYTES")]
    max_memory: Option<u64>,
}

/// Compile `args.input` into `args.output`.
///
/// # Errors
/// A [`runtime::LoadError`] for bytes that are not a plugin (its kind sets the exit status,
/// [`runtime::exit_code`]), or an I/O error.
pub fn run(args: CompileArgs) -> anyhow::Result<()> {
    if let Some(bytes) = args.max_memory {
        limit_address_space(bytes)?;
    }
    let wasm = if args.input.as_os_str() == "-" {
        let mut wasm = Vec::new();
        std::io::stdin().read_to_end(&mut wasm).context("cannot read the plugin from stdin")?;
        wasm
    } else {
        std::fs::read(&args.input).with_context(|| format!("cannot read {}", args.input.display()))?
    };
    let artifact = runtime::precompile(&wasm, args.fuel)?;
    drop(wasm);
    runtime::write_artifact(&args.output, &artifact).with_context(|| format!("cannot write {}", args.output.display()))?;
    tracing::debug!(output = %args.output.display(), bytes = artifact.len(), "compiled");
    Ok(())
}

/// Set `RLIMIT_AS` of this process: an allocation beyond it fails, and the process ends with
/// the allocator's message as its last line on stderr.
fn limit_address_space(bytes: u64) -> anyhow::Result<()> {
    let limit = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
    // SAFETY: `setrlimit` reads the struct passed by reference and changes only this process.
    if unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) } != 0 {
        return Err(std::io::Error::last_os_error()).context("cannot limit the compiler's memory");
    }
    Ok(())
}
