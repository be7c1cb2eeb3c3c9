//! The `wasmop` binary: parse arguments, set up logging, run the command.

use clap::Parser;
use tracing_subscriber::EnvFilter;

/// Arenas glibc's `malloc` may create at least; else one per core, as many as tokio has workers
/// (glibc's default is eight per core: one more for each thread that allocates while the
/// others hold theirs, each keeping its own freed memory).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MIN_ARENAS: usize = 2;

/// Allocations from this size on are mapped on their own and unmapped when freed (glibc's
/// default, 128 KiB, but fixed: glibc otherwise raises it to the largest block freed so far, up
/// to 32 MiB, after which a decoded LIST page or a plugin's large answer is carved from an arena
/// that keeps it resident after it is freed).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: usize = 128 << 10;

/// Set glibc's `malloc` up for a long-running host: one arena per core (at least
/// [`MIN_ARENAS`]) and a fixed [`MMAP_THRESHOLD`] (setting it turns glibc's dynamic thresholds
/// off, so the trim threshold stays at its 128 KiB too: freed memory at the top of an arena
/// goes back to the kernel). Measured in BENCHMARKS.md, section "Resident
/// memory against the native controller". Runs before any other thread exists.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tune_allocator() {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let arenas = i32::try_from(cores.max(MIN_ARENAS)).unwrap_or(i32::MAX);
    let threshold = i32::try_from(MMAP_THRESHOLD).unwrap_or(i32::MAX);
    // SAFETY: mallopt only changes malloc's parameters; no other thread allocates yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
        libc::mallopt(libc::M_MMAP_THRESHOLD, threshold);
    }
}

/// Other C libraries keep their own allocator's defaults.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune_allocator() {}

fn main() -> std::process::ExitCode {
    tune_allocator();
    match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime.block_on(run()),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> std::process::ExitCode {
    let cli = wasmop::cli::Cli::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match cli.log_format {
        wasmop::cli::LogFormat::Json => logs.json().with_current_span(true).with_span_list(false).init(),
        wasmop::cli::LogFormat::Text => logs.compact().init(),
    }
    match wasmop::cli::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            // 1, or the kind of a plugin file's rejection (read back by a host running `wasmop compile`).
            std::process::ExitCode::from(wasmop::runtime::exit_code(&e))
        }
    }
}
