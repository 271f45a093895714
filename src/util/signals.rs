//! The one shutdown signal of every long-running subcommand (`scheduler run`, `runtimed`).
//!
//! Owns listening for SIGTERM and SIGINT. Listening starts when [`shutdown_signal`] is called,
//! so a signal that arrives while the process is still connecting is not lost.

use std::future::Future;

use thiserror::Error;

/// A signal handler could not be installed.
#[derive(Debug, Error)]
#[error("cannot listen for {signal}: {source}")]
pub struct SignalError {
    pub signal: &'static str,
    #[source]
    pub source: std::io::Error,
}

/// Starts listening for SIGTERM and SIGINT; the future resolves with the name of the first
/// one received.
pub fn shutdown_signal() -> Result<impl Future<Output = &'static str> + Send + 'static, SignalError>
{
    use tokio::signal::unix::{SignalKind, signal};
    let listen = |kind, name| {
        signal(kind).map_err(|source| SignalError {
            signal: name,
            source,
        })
    };
    let mut term = listen(SignalKind::terminate(), "SIGTERM")?;
    let mut int = listen(SignalKind::interrupt(), "SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        }
    })
}
