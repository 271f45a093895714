//! `kubectl kruntimes scheduler run`: the controller manager. Wires the Runtime controller,
//! the scheduler controller, Lease leader election, `/metrics`, `/healthz` and `/readyz`, and
//! shuts down on SIGTERM.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use futures::FutureExt;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::cli::{GlobalArgs, SchedulerRunArgs};
use crate::kubeclient;
use crate::metrics::{self, SchedulerMetrics};
use crate::runtime_controller;
use crate::scheduler::controller::{self, Options, Scheduler};

/// Name of the leader-election Lease.
pub const LEADER_LEASE: &str = "kruntimes-scheduler";

pub async fn exec(global: &GlobalArgs, args: &SchedulerRunArgs) -> anyhow::Result<()> {
    let target = kubeclient::connect(global).await?;
    run(target, args.clone(), shutdown_signal()).await
}

/// Runs the controller manager against `target` until `shutdown` resolves (SIGTERM/SIGINT
/// for `scheduler run`; `dev` passes its own stop signal), or until the scheduler stops.
pub async fn run(
    target: kubeclient::Target,
    args: SchedulerRunArgs,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let args = &args;
    let registry = prometheus::Registry::new();
    let metrics = SchedulerMetrics::register(&registry).context("cannot register metrics")?;
    let scheduler = Scheduler::new(
        target.client.clone(),
        metrics,
        Options {
            workers: args.workers,
            namespace: args.watch_namespace.clone(),
        },
    );

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
        .shared()
    };

    if let Some(addr) = parse_bind(&args.metrics_bind_address, "--metrics-bind-address")? {
        let registry = registry.clone();
        let app = Router::new().route(
            "/metrics",
            get(move || {
                let registry = registry.clone();
                async move { metrics::render(&registry) }
            }),
        );
        serve(addr, app, stopped.clone()).await?;
    }
    if let Some(addr) = parse_bind(
        &args.health_probe_bind_address,
        "--health-probe-bind-address",
    )? {
        let ready = scheduler.clone();
        let app = Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route(
                "/readyz",
                get(move || {
                    let ready = ready.caches_synced();
                    async move {
                        if ready {
                            (StatusCode::OK, "ok")
                        } else {
                            (StatusCode::SERVICE_UNAVAILABLE, "caches not synced")
                        }
                    }
                }),
            );
        serve(addr, app, stopped.clone()).await?;
    }

    let (leading_tx, leading_rx) = watch::channel(false);
    let mut lease_task = None;
    let mut lease_manager = None;
    if args.leader_elect {
        let namespace = args
            .leader_election_namespace
            .clone()
            .or_else(|| std::env::var("POD_NAMESPACE").ok())
            .unwrap_or_else(|| target.namespace.clone());
        let identity = args
            .leader_election_identity
            .clone()
            .unwrap_or_else(default_identity);
        let duration = args.leader_election_lease_duration.as_secs().max(3);
        let grace = (duration / 3).max(1);
        // The lease is renewed `grace` before it expires. A renewal that hangs longer than
        // that must fail (and stop us) before the Lease lapses, not after: so leader election
        // gets its own client whose requests time out within `grace`.
        let mut config = target.config.clone();
        let timeout = Some(Duration::from_secs(grace));
        (
            config.connect_timeout,
            config.read_timeout,
            config.write_timeout,
        ) = (timeout, timeout, timeout);
        let client =
            kube::Client::try_from(config).context("cannot build the leader-election client")?;
        let manager = LeaseManagerBuilder::new(client, LEADER_LEASE)
            .with_namespace(&namespace)
            .with_identity(&identity)
            .with_duration(duration)
            .with_grace(grace)
            .build()
            .await
            .map_err(|e| {
                anyhow!(
                    "cannot set up leader election on Lease {namespace}/{LEADER_LEASE} in {}: {e}",
                    target.describe()
                )
            })?;
        info!(%identity, lease = %format!("{namespace}/{LEADER_LEASE}"), "waiting for leadership");
        let manager = Arc::new(manager);
        lease_manager = Some(manager.clone());
        let leading_tx = leading_tx.clone();
        lease_task = Some(tokio::spawn(async move {
            let mut leader = false;
            loop {
                // `changed` must keep running: it is what renews the lease while we hold it.
                match manager.changed().await {
                    Ok(true) if !leader => {
                        leader = true;
                        let _ = leading_tx.send(true);
                    }
                    Ok(false) if leader => {
                        // Another replica may schedule now: stop at once, nothing in flight.
                        error!(
                            "lost the leader-election lease; exiting so scheduling stops at once"
                        );
                        std::process::exit(1);
                    }
                    Ok(_) => {}
                    Err(e) if leader => {
                        // A failed renewal may already have let the Lease lapse: we can no
                        // longer prove we lead, so stop before another replica starts.
                        error!(
                            "renewing the leader-election lease failed: {e}; exiting so scheduling stops at once"
                        );
                        std::process::exit(1);
                    }
                    Err(e) => {
                        warn!("leader election: {e}; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        }));
    } else {
        let _ = leading_tx.send(true);
    }

    let leading = {
        let mut rx = leading_rx.clone();
        async move {
            let _ = rx.wait_for(|l| *l).await;
        }
    };
    let runtime_controller = {
        let client = target.client.clone();
        let namespace = args.watch_namespace.clone();
        let stopped = stopped.clone();
        let mut rx = leading_rx.clone();
        tokio::spawn(async move {
            let _ = rx.wait_for(|l| *l).await;
            runtime_controller::run(client, namespace, stopped).await;
        })
    };
    let mut scheduling = tokio::spawn(controller::run(scheduler, leading, stopped.clone()));

    let failed = tokio::select! {
        _ = shutdown => None,
        ended = &mut scheduling => Some(match ended {
            Ok(Ok(())) => anyhow!("the scheduler stopped unexpectedly"),
            Ok(Err(e)) => anyhow::Error::new(e),
            Err(e) => anyhow!("the scheduler task failed: {e}"),
        }),
    };
    info!("shutting down");
    let _ = stop_tx.send(true);
    if failed.is_none() {
        let _ = tokio::time::timeout(Duration::from_secs(10), scheduling).await;
    }
    runtime_controller.abort();
    if let (Some(task), Some(manager)) = (lease_task, lease_manager) {
        // Hand the lease over at once instead of letting it expire.
        task.abort();
        let _ = tokio::time::timeout(Duration::from_secs(2), manager.release()).await;
    }
    if let Some(err) = failed {
        return Err(err);
    }
    Ok(())
}

fn default_identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "kruntimes-scheduler".into());
    format!("{host}-{}", std::process::id())
}

/// `:8080` binds every interface, `0` disables the endpoint.
fn parse_bind(value: &str, flag: &str) -> anyhow::Result<Option<SocketAddr>> {
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

async fn serve(
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

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = ctrl_c => {},
                _ = term.recv() => {},
            }
        }
        Err(_) => {
            let _ = ctrl_c.await;
        }
    }
}
