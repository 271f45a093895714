//! The small HTTP endpoints of the long-running subcommands (the scheduler's and runtimed's
//! metrics and probes): bind-address flags, the `/healthz` + `/readyz` router, and
//! serving in the background. Owns no state of its own: readiness is asked of the caller.

pub mod secure;

use std::net::SocketAddr;

use anyhow::{Context, anyhow};
use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use tracing::{error, info};

/// A bind-address flag: `:8080` binds every interface, `0` disables the endpoint.
pub fn parse_bind(value: &str, flag: &str) -> anyhow::Result<Option<SocketAddr>> {
    if value == "0" {
        return Ok(None);
    }
    let full = if value.starts_with(':') {
        format!("0.0.0.0{value}")
    } else {
        value.to_string()
    };
    full.parse().map(Some).map_err(|_| {
        anyhow!("{flag} {value:?} is not an address; use :8080, 127.0.0.1:8080 or 0 to disable")
    })
}

/// `/healthz` (the process serves) and `/readyz` (200 while `not_ready()` is `None`, else 503
/// with what it says is missing), for the kubelet's probes.
pub fn probes(not_ready: impl Fn() -> Option<String> + Clone + Send + Sync + 'static) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let missing = not_ready();
                async move {
                    match missing {
                        None => (StatusCode::OK, "ok".to_string()),
                        Some(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
                    }
                }
            }),
        )
}

/// `/metrics`: `registry` in the Prometheus text format.
pub fn metrics(registry: prometheus::Registry) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let registry = registry.clone();
            async move { crate::telemetry::metrics::render(&registry) }
        }),
    )
}

/// The bounds of a server whose callers are not trusted (runtimed's API on a Pod address
/// other Pods reach): at most `connections` at once (more wait in the listen backlog), and a
/// connection that has not sent a request's headers within `header_read` (a first request,
/// or the next one on a kept-alive connection) is closed. A response that streams (a log
/// followed) is not cut.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub connections: usize,
    pub header_read: std::time::Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            connections: 128,
            header_read: std::time::Duration::from_secs(10),
        }
    }
}

/// Binds `addr` (failing now if it cannot) and serves `app` over HTTP/1.1 in the background
/// within `bounds`, until the process ends.
pub async fn serve_bounded(addr: SocketAddr, app: Router, bounds: Bounds) -> anyhow::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    info!(%addr, connections = bounds.connections, "serving");
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(bounds.connections));
    tokio::spawn(async move {
        loop {
            // Never closed: a permit always comes, once a connection ends.
            let Ok(permit) = slots.clone().acquire_owned().await else {
                return;
            };
            let stream = match listener.accept().await {
                Ok((stream, _)) => {
                    // As Go sets on every connection: a response written in parts (headers,
                    // then body) must not wait out the peer's delayed ACK (Nagle's algorithm,
                    // 40 ms a call through the aggregation layer).
                    let _ = stream.set_nodelay(true);
                    stream
                }
                Err(e) => {
                    // Out of descriptors, most likely: a moment, then on.
                    error!("http server on {addr}: cannot accept a connection: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let service = hyper_util::service::TowerToHyperService::new(app.clone());
            tokio::spawn(async move {
                let mut builder = hyper::server::conn::http1::Builder::new();
                builder
                    .timer(TokioTimer::new())
                    .header_read_timeout(bounds.header_read);
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                drop(permit);
            });
        }
    });
    Ok(())
}

/// Binds `addr` (failing now if it cannot) and serves `app` in the background until
/// `stopped`.
pub async fn serve(
    addr: SocketAddr,
    app: Router,
    stopped: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    info!(%addr, "serving");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(stopped)
            .await
        {
            error!("http server on {addr}: {e}");
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// A free loopback address (bound and released; the server binds it again).
    fn free_addr() -> SocketAddr {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    }

    /// A connection that sends nothing at all holds the only slot until the header read
    /// timeout closes it, at that timeout and not before; the next caller is served then. On
    /// tokio's paused clock, which moves only when every task waits: the closing is timed
    /// exactly, whatever the machine's load.
    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_is_closed_at_the_header_read_timeout_and_frees_its_slot() {
        let addr = free_addr();
        let header_read = std::time::Duration::from_millis(300);
        let bounds = Bounds {
            connections: 1,
            header_read,
        };
        serve_bounded(addr, probes(|| None), bounds).await.unwrap();
        let mut idle = tokio::net::TcpStream::connect(addr).await.unwrap();
        let connected = tokio::time::Instant::now();
        let mut rest = Vec::new();
        let closed = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            idle.read_to_end(&mut rest),
        )
        .await;
        assert!(closed.is_ok(), "an idle connection was kept");
        assert_eq!(
            connected.elapsed(),
            header_read,
            "closed at the header read timeout"
        );
        let mut next = tokio::net::TcpStream::connect(addr).await.unwrap();
        next.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        next.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
}
