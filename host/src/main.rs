//! The `wasmop` binary: parse arguments, set up logging, run the command.

use clap::Parser;
use tracing_subscriber::EnvFilter;

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
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match cli.log_format {
        wasmop::cli::LogFormat::Json => logs.json().with_current_span(true).with_span_list(false).init(),
        wasmop::cli::LogFormat::Text => logs.compact().init(),
    }
    match wasmop::cli::run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            // 1, or the kind of a plugin file's rejection (read back by a host running `wasmop compile`).
            std::process::ExitCode::from(wasmop::runtime::exit_code(&e))
        }
    }
}
