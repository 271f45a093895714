//! `kubectl kruntimes scheduler run`: the controller manager, with its flags
//! ([`SchedulerRunArgs`]). Wires the Runtime controller,
//! the scheduler controller, the cleanup controller ([`cleanup`], on the scheduler's store of Runs),
//! the Runtime Pod lifecycle controller ([`lifecycle`]) and the PersistentWorkspace lifecycle
//! controller ([`workspaces`]) (both on the scheduler's cache), the
//! workflow controller (WorkflowRuns into Runs; [`crate::workflow`]), the aggregated API's
//! gateway ([`gateway`], on every replica), Lease leader election ([`leader`]), `/metrics`,
//! `/healthz` and
//! `/readyz`, supervises every long-lived task, and shuts down on SIGTERM or SIGINT. It
//! decides nothing itself. It acts only while it leads and no foreign (Go kruntimes)
//! scheduler holds its Lease ([`foreign`]). At start it warns once when Runtime Pods are not
//! restricted by the admission policy.

mod args;
pub mod cleanup;
pub mod foreign;
pub mod gateway;
pub mod leader;
pub mod lifecycle;
pub mod workspaces;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use futures::FutureExt;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::kubeclient;
use crate::kubeclient::ConnectOptions;
use crate::policy::runtimed as runtimed_policy;
use crate::runtime::controller as runtime_controller;
use crate::scheduler::controller::{self, Options, Scheduler};
use crate::scheduler::metrics::SchedulerMetrics;
use crate::telemetry::http::{parse_bind, probes, serve};
use crate::util::signals::shutdown_signal;
pub use args::SchedulerRunArgs;
use cleanup::Cleanup;
use leader::Election;
pub use leader::LEADER_LEASE;
use lifecycle::PodLifecycle;
use workspaces::WorkspaceLifecycle;

pub async fn exec(
    connect: impl Into<ConnectOptions>,
    args: &SchedulerRunArgs,
) -> anyhow::Result<()> {
    // Listen before connecting so that an early SIGTERM is a clean shutdown, not a kill.
    let signal = shutdown_signal()?;
    let target = kubeclient::connect(connect).await?;
    let shutdown = async move {
        let signal = signal.await;
        info!("{signal} received");
    };
    run(target, args.clone(), shutdown).await
}

/// Runs the controller manager against `target` until `shutdown` resolves (SIGTERM/SIGINT
/// for `scheduler run`; `dev` passes its own stop signal), or until one of its tasks stops.
pub async fn run(
    target: kubeclient::Target,
    args: SchedulerRunArgs,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let args = &args;
    // Informational only: kruntimes works without the policy, Runtime Pods are just not
    // restricted then.
    let presence = runtimed_policy::presence(&target.client).await;
    if let Some(warning) = runtimed_policy::warning(&presence, &target.describe()) {
        warn!("{warning}");
    }
    let registry = prometheus::Registry::new();
    let metrics = SchedulerMetrics::register(&registry).context("cannot register metrics")?;
    let workflow_metrics = crate::workflow::metrics::WorkflowMetrics::register(&registry)
        .context("cannot register the workflow controller's metrics")?;
    let leader_gauge = metrics.leader.clone();
    let scheduler = Scheduler::new(
        target.client.clone(),
        metrics,
        Options {
            workers: args.workers,
            namespace: args.watch_namespace.clone(),
            pod_lost_grace: args.pod_lost_grace,
            starvation_threshold: args.starvation_threshold,
            fair_share_metrics_groups: args.fair_share_metrics_groups,
            routine_events: args.routine_events,
            event_fold_window: args.event_fold_window,
            claim_delay: args.claim_delay,
        },
    );

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = wait_for(stop_rx).shared();
    serve_endpoints(&target, args, &registry, &scheduler, stopped.clone()).await?;
    let gateway_user = match parse_bind(&args.gateway_bind_address, "--gateway-bind-address")? {
        Some(bind) => {
            let options = crate::manager::gateway::Options {
                bind,
                cert_dir: args.gateway_cert_dir.clone(),
                namespace: leader::namespace(&target, args),
                service_account: args.gateway_service_account.clone(),
            };
            let started =
                crate::manager::gateway::start(target.client.clone(), options, stopped.clone());
            Some(started.await.context("cannot start the gateway")?)
        }
        None => None,
    };

    let (elected_tx, elected_rx) = watch::channel(false);
    let election = if args.leader_elect {
        Some(Election::start(&target, args, elected_tx).await?)
    } else {
        let _ = elected_tx.send(true);
        None
    };
    // Elected is not yet leading: not while the Go kruntimes scheduler holds its own Lease.
    let (leading_tx, leading_rx) = watch::channel(false);
    let mut foreign_gate = tokio::spawn(foreign::gate(
        target.client.clone(),
        vec![
            leader::namespace(&target, args),
            foreign::FOREIGN_NAMESPACE.to_string(),
        ],
        elected_rx,
        leading_tx,
    ));

    // kruntimes_scheduler_leader follows leading (a replica that stops leading exits).
    let mut leading_metric = leading_rx.clone();
    tokio::spawn(async move {
        while leading_metric.changed().await.is_ok() {
            leader_gauge.set(i64::from(*leading_metric.borrow()));
        }
    });

    // Every long-lived task is supervised the same way: if one ends (or panics) while we
    // run, the process stops instead of leading with half of its work dead.
    let mut runtime_controller = {
        let (client, namespace) = (target.client.clone(), args.watch_namespace.clone());
        let injection = crate::runtime::pod::Injection {
            image: args.runtime_image.clone(),
            routine_events: args.routine_events,
            event_fold_window: args.event_fold_window,
            claim_delay: args.claim_delay,
            gateway_user,
            resources: crate::runtime::pod::resource_requirements(
                args.runtimed_requests.clone(),
                args.runtimed_limits.clone(),
            ),
        };
        // Its watches start now, its reconciles once this replica leads: a standby's are warm.
        tokio::spawn(runtime_controller::run(
            client,
            namespace,
            injection,
            wait_for(leading_rx.clone()),
            stopped.clone(),
        ))
    };
    // One store of Runs in the process: the scheduler's watch fills it, cleanup reads it.
    let (runs, runs_writer) = kube::runtime::reflector::store();
    let mut cleanup = {
        let (cleanup, leading) = (
            Cleanup::new(target.client.clone()),
            wait_for(leading_rx.clone()),
        );
        let runs = runs.clone();
        tokio::spawn(async move {
            leading.await;
            cleanup.run(runs).await;
        })
    };
    // The Runtime Pod and PersistentWorkspace lifecycles act on what the scheduler's cache
    // decides, so each starts once every one of its watches has listed: a pass on a partial
    // view could take a listed Pod for a lost one.
    let mut lifecycle = {
        let lifecycle = PodLifecycle::new(
            target.client.clone(),
            scheduler.cache(),
            scheduler.heartbeat_sight(),
            scheduler.events(),
            args.pod_lost_grace,
        );
        spawn_on_the_schedulers_view(&scheduler, &leading_rx, lifecycle.run(runs))
    };
    let mut workspace_lifecycle = {
        let workspaces = WorkspaceLifecycle::new(
            target.client.clone(),
            scheduler.cache(),
            scheduler.workspaces(),
        );
        spawn_on_the_schedulers_view(&scheduler, &leading_rx, workspaces.run())
    };
    // Workflows: WorkflowRuns become Runs, which the scheduler then places like any other.
    let mut workflows = {
        let (client, namespace) = (target.client.clone(), args.watch_namespace.clone());
        let (leading, stopped) = (wait_for(leading_rx.clone()), stopped.clone());
        tokio::spawn(async move {
            leading.await;
            use crate::workflow::{controller as workflow_runs, definitions};
            tokio::join!(
                workflow_runs::run(
                    client.clone(),
                    namespace.clone(),
                    workflow_metrics,
                    stopped.clone()
                ),
                definitions::run::<crate::api::Workflow>(
                    client.clone(),
                    namespace.clone(),
                    stopped.clone()
                ),
                definitions::run::<crate::api::Action>(client, namespace, stopped),
            );
        })
    };
    let mut scheduling = tokio::spawn(controller::run(
        scheduler,
        runs_writer,
        wait_for(leading_rx),
        stopped.clone(),
    ));

    let failed = tokio::select! {
        () = shutdown => None,
        ended = &mut scheduling => Some(match ended {
            Ok(Ok(())) => anyhow!("the scheduler stopped unexpectedly"),
            Ok(Err(e)) => anyhow::Error::new(e),
            Err(e) => anyhow!("the scheduler task failed: {e}"),
        }),
        ended = &mut foreign_gate => Some(match ended {
            Ok(err) => err,
            Err(e) => anyhow!("the foreign-scheduler gate failed: {e}"),
        }),
        ended = &mut runtime_controller => Some(match ended {
            Ok(()) => anyhow!("the Runtime controller stopped unexpectedly"),
            Err(e) => anyhow!("the Runtime controller task failed: {e}"),
        }),
        ended = &mut cleanup => Some(match ended {
            Ok(()) => anyhow!("the cleanup controller stopped unexpectedly"),
            Err(e) => anyhow!("the cleanup controller task failed: {e}"),
        }),
        ended = &mut lifecycle => Some(match ended {
            Ok(()) => anyhow!("the Runtime Pod lifecycle controller stopped unexpectedly"),
            Err(e) => anyhow!("the Runtime Pod lifecycle controller task failed: {e}"),
        }),
        ended = &mut workspace_lifecycle => Some(match ended {
            Ok(()) => anyhow!("the PersistentWorkspace lifecycle controller stopped unexpectedly"),
            Err(e) => anyhow!("the PersistentWorkspace lifecycle controller task failed: {e}"),
        }),
        ended = &mut workflows => Some(match ended {
            Ok(()) => anyhow!("the workflow controller stopped unexpectedly"),
            Err(e) => anyhow!("the workflow controller task failed: {e}"),
        }),
    };
    info!("shutting down");
    let _ = stop_tx.send(true);
    if failed.is_none() {
        let _ = tokio::time::timeout(Duration::from_secs(10), scheduling).await;
    }
    runtime_controller.abort();
    cleanup.abort();
    lifecycle.abort();
    workspace_lifecycle.abort();
    workflows.abort();
    foreign_gate.abort();
    if let Some(election) = election {
        election.release().await;
    }
    match failed {
        Some(err) => Err(err),
        None => Ok(()),
    }
}

/// Spawns `work` to start once this replica leads and every watch of `scheduler` has listed.
fn spawn_on_the_schedulers_view(
    scheduler: &Arc<Scheduler>,
    leading: &watch::Receiver<bool>,
    work: impl std::future::Future<Output = ()> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    let (scheduler, leading) = (scheduler.clone(), wait_for(leading.clone()));
    tokio::spawn(async move {
        leading.await;
        scheduler.synced().await;
        work.await;
    })
}

/// Resolves once the flag is `true`.
async fn wait_for(mut flag: watch::Receiver<bool>) {
    let _ = flag.wait_for(|set| *set).await;
}

/// `/metrics` and the `/healthz`, `/readyz` probes, each on its own address unless disabled.
/// `/metrics` is served over TLS to callers the API server authorises (`--metrics-secure`, on by
/// default: [`crate::telemetry::http::secure`]), or as plain HTTP to anyone with `--metrics-secure=false`.
async fn serve_endpoints(
    target: &kubeclient::Target,
    args: &SchedulerRunArgs,
    registry: &prometheus::Registry,
    scheduler: &Arc<Scheduler>,
    stopped: impl std::future::Future<Output = ()> + Clone + Send + 'static,
) -> anyhow::Result<()> {
    if let Some(addr) = parse_bind(&args.metrics_bind_address, "--metrics-bind-address")? {
        let app = crate::telemetry::http::metrics(registry.clone());
        if args.metrics_secure {
            use crate::telemetry::http::secure;
            let mut names = vec!["localhost".to_string()];
            if let Ok(ns) = std::env::var("POD_NAMESPACE") {
                names.push(format!("kubectl-kruntimes-scheduler-metrics.{ns}.svc"));
            }
            let tls = secure::server_config(args.metrics_cert_dir.as_deref(), &names)?;
            let app = secure::guarded(app, secure::Gate::new(target.client.clone()));
            let bounds = crate::telemetry::http::Bounds::default();
            let tls = Arc::new(tls);
            secure::serve_tls(addr, app, move || tls.clone(), bounds, stopped.clone()).await?;
        } else {
            serve(addr, app, stopped.clone()).await?;
        }
    }
    if let Some(addr) = parse_bind(
        &args.health_probe_bind_address,
        "--health-probe-bind-address",
    )? {
        let scheduler = scheduler.clone();
        let app =
            probes(move || (!scheduler.caches_synced()).then(|| "caches not synced".to_string()));
        serve(addr, app, stopped).await?;
    }
    Ok(())
}
