//! Logging setup: `tracing` to stderr, human text or JSON, verbosity from kubectl's `-v=N` or `RUST_LOG`.

use tracing_subscriber::EnvFilter;

/// The format of the log lines (`--log-format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Installs the global subscriber once. `RUST_LOG` wins over `-v`; without either the
/// command's `default` filter applies (see `Command::default_log_filter`).
pub fn init(verbose: u8, format: LogFormat, default: &str) {
    // kubectl's levels: 1-3 informational, 4-5 debug, 6 and more every request.
    let default = match verbose {
        0 => default,
        1..=3 => "info",
        4 | 5 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    // Colors only on a terminal: a container's log (kubectl logs) must not carry escape codes.
    use std::io::IsTerminal as _;
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
