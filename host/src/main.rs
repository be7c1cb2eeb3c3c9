//! The `wasmop` binary: parse arguments, set up logging, run the command.

use clap::Parser;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

fn main() -> std::process::ExitCode {
    wasmop::allocator::tune();
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
    // The audit events only where asked for: `RUST_LOG=...,wasmop::audit=info`, or `--audit-log`.
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,wasmop::audit=off"));
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = match cli.log_format {
        wasmop::cli::LogFormat::Json => logs.json().with_current_span(true).with_span_list(false).boxed(),
        wasmop::cli::LogFormat::Text => logs.compact().boxed(),
    };
    let audit = match cli.audit_log().map(|destination| wasmop::cli::audit_log::layer(&destination)).transpose() {
        Ok(audit) => audit,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    tracing_subscriber::registry().with(logs.with_filter(filter)).with(audit).init();
    match wasmop::cli::run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            // 1, or the kind of a plugin file's rejection (read back by a host running `wasmop compile`).
            std::process::ExitCode::from(wasmop::runtime::exit_code(&e))
        }
    }
}
