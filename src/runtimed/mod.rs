//! `kubectl kruntimes runtimed`: the agent inside every Runtime Pod — heartbeat Lease, local
//! admission of assigned Runs, execution of Task Runs and their terminal status.
//!
//! runtimed is the execution-time guard of `spec/run-resource-accounting.txt`: the
//! scheduler's assignment is not an authorization to run. It never picks Pods and never
//! un-assigns a Run. The parts:
//! - [`admission`]: the pure capacity/reservation cache;
//! - [`plan`]: the pure decisions (claim, fail, kill) over the Runs and the agent's one
//!   record of each ([`plan::LocalRun`], its state and its reservation);
//! - [`executor`]: child processes;
//! - [`heartbeat`]: the Lease;
//! - [`metrics`]: what `/metrics` exposes;
//! - [`agent`]: the watch-driven loop that ties them together;
//! - [`proto`]: the runtime server contract's generated gRPC code, [`contract`] its mapping;
//! - its flags, [`RuntimedArgs`] (the CLI names them; runtimed imports no CLI).

pub mod admission;
pub mod agent;
mod args;
mod artifact_server;
pub mod artifacts;
pub mod callers;
mod children;
mod claims;
mod collector;
pub mod contract;
pub mod executor;
pub mod git;
pub mod heartbeat;
pub mod invoke;
pub mod metrics;
pub mod outputs;
pub mod plan;
pub mod proto;
pub mod readiness;
pub mod reaper;
pub mod remote;
mod report;
pub mod rundir;
pub mod runlog;
mod status_writer;
pub mod task_files;
pub mod tls;

use std::time::Duration;

use anyhow::Context as _;
use thiserror::Error;

use crate::kubeclient;
use crate::kubeclient::ConnectOptions;
pub use args::RuntimedArgs;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Failures of the agent.
#[derive(Debug, Error)]
pub enum Error {
    #[error(
        "runtimed needs the identity of its Pod but {} not set; set them through the downward API (fieldRef metadata.name, metadata.namespace, metadata.uid) or pass {}",
        missing_env(.0),
        missing_flags(.0)
    )]
    MissingIdentity(Vec<IdentityField>),
    #[error("--heartbeat-interval must be longer than 0")]
    ZeroInterval,
    #[error(
        "--heartbeat-duration ({duration:?}) must be longer than --heartbeat-interval ({interval:?}), or the Lease expires between renewals"
    )]
    DurationNotAboveInterval {
        interval: Duration,
        duration: Duration,
    },
    #[error("{doing}: {source}")]
    Kube {
        doing: String,
        #[source]
        source: kube::Error,
    },
    #[error("{0}")]
    BadAddress(String),
    #[error("the artifact store cannot be used: {0}")]
    BadArtifactStore(String),
    #[error("the watch of {0} ended unexpectedly")]
    WatchEnded(&'static str),
}

/// One part of the Pod identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentityField {
    Name,
    Namespace,
    Uid,
}

impl IdentityField {
    fn env(self) -> &'static str {
        match self {
            IdentityField::Name => "POD_NAME",
            IdentityField::Namespace => "POD_NAMESPACE",
            IdentityField::Uid => "POD_UID",
        }
    }
    fn flag(self) -> &'static str {
        match self {
            IdentityField::Name => "--pod-name",
            IdentityField::Namespace => "--pod-namespace",
            IdentityField::Uid => "--pod-uid",
        }
    }
}

fn missing_env(fields: &[IdentityField]) -> String {
    let names: Vec<_> = fields.iter().map(|f| f.env()).collect();
    match names.as_slice() {
        [one] => format!("{one} is"),
        _ => format!("{} are", names.join(", ")),
    }
}

fn missing_flags(fields: &[IdentityField]) -> String {
    fields
        .iter()
        .map(|f| f.flag())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Who this agent is: its Runtime Pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub pod_name: String,
    pub namespace: String,
    pub pod_uid: String,
}

impl Identity {
    /// Takes the identity from the flags (which clap fills from `POD_NAME`, `POD_NAMESPACE`
    /// and `POD_UID`); empty values count as missing.
    pub fn from_args(args: &RuntimedArgs) -> Result<Self> {
        let take = |v: &Option<String>| v.clone().filter(|s| !s.trim().is_empty());
        let (name, namespace, uid) = (
            take(&args.pod_name),
            take(&args.pod_namespace),
            take(&args.pod_uid),
        );
        let missing: Vec<IdentityField> = [
            (IdentityField::Name, name.is_none()),
            (IdentityField::Namespace, namespace.is_none()),
            (IdentityField::Uid, uid.is_none()),
        ]
        .into_iter()
        .filter_map(|(f, missing)| missing.then_some(f))
        .collect();
        match (name, namespace, uid) {
            (Some(pod_name), Some(namespace), Some(pod_uid)) => Ok(Identity {
                pod_name,
                namespace,
                pod_uid,
            }),
            _ => Err(Error::MissingIdentity(missing)),
        }
    }
}

/// Where a Runtime's Runs' artifacts go.
#[derive(Debug, Clone)]
pub enum Artifacts {
    /// The Runtime has no `spec.artifactStore`: no `$KRUNTIME_ARTIFACTS_DIR`.
    None,
    /// Its filesystem or S3 store.
    Store(artifacts::Store),
    /// A store of a driver this runtimed does not write: artifacts are refused.
    Unsupported(String),
}

/// `--state-dir`, else `.kruntimes` of the workspace (a runtimed started by hand).
fn state_dir(args: &RuntimedArgs) -> std::path::PathBuf {
    args.state_dir
        .clone()
        .unwrap_or_else(|| args.workspace_root.join(".kruntimes"))
}

impl Artifacts {
    fn from_args(args: &RuntimedArgs) -> Result<Self> {
        let limits = artifacts::Limits {
            max_artifact_bytes: args.artifact_max_bytes,
            max_total_bytes: args.artifacts_max_bytes,
        };
        let backend = match (
            &args.artifact_root,
            &args.artifact_volume_claim,
            &args.artifact_s3_bucket,
        ) {
            (Some(root), Some(claim), _) => {
                artifacts::Backend::Filesystem(artifacts::filesystem::Filesystem {
                    root: root.clone(),
                    volume_claim: claim.clone(),
                })
            }
            (_, _, Some(bucket)) => artifacts::Backend::S3({
                let credentials = args
                    .artifact_s3_credentials_dir
                    .as_deref()
                    .map(artifacts::s3::CredentialFiles::read)
                    .transpose()
                    .map_err(Error::BadArtifactStore)?;
                artifacts::s3::S3::new(
                    artifacts::s3::Config {
                        bucket: bucket.clone(),
                        prefix: args.artifact_s3_prefix.clone(),
                        region: args.artifact_s3_region.clone(),
                        endpoint: args.artifact_s3_endpoint.clone(),
                        force_path_style: args.artifact_s3_force_path_style,
                        credentials_secret: args.artifact_s3_credentials_secret.clone(),
                        upload_part_size: args.artifact_s3_upload_part_size,
                        upload_concurrency: args.artifact_s3_upload_concurrency,
                    },
                    credentials.as_ref(),
                )
                .map_err(Error::BadArtifactStore)?
            }),
            _ => {
                return Ok(match &args.artifact_driver {
                    Some(driver) => Artifacts::Unsupported(driver.clone()),
                    None => Artifacts::None,
                });
            }
        };
        Ok(Artifacts::Store(artifacts::Store {
            backend,
            limits,
            scratch: state_dir(args).join("staging"),
        }))
    }

    /// Whether Runs get `$KRUNTIME_ARTIFACTS_DIR`.
    pub fn any(&self) -> bool {
        !matches!(self, Artifacts::None)
    }
}

/// The agent's settings, validated.
#[derive(Debug, Clone)]
pub struct Settings {
    pub identity: Identity,
    /// `--routine-events`: whether the Events of a Run's ordinary life are published.
    pub routine_events: bool,
    /// `--event-fold-window`: how long `Started` waits for the task's end to take it in.
    pub event_fold_window: Duration,
    /// `--claim-delay`: how long the claim of a started task waits to be written.
    pub claim_delay: Duration,
    pub heartbeat: heartbeat::Config,
    pub shutdown_grace: Duration,
    /// Where `/healthz` and `/readyz` are served, if anywhere.
    pub health_probe: Option<std::net::SocketAddr>,
    /// Where `/metrics` is served, if anywhere.
    pub metrics_address: Option<std::net::SocketAddr>,
    /// Where the API (`/invoke`, `/logs`, `/artifacts`) is served over TLS, if anywhere.
    pub api_address: Option<std::net::SocketAddr>,
    /// The accounts the API takes tokens of (`--gateway-user`).
    pub gateway_users: Vec<String>,
    /// What `/readyz` reports ([`readiness`]): `None` when ready, else what is missing.
    pub ready: readiness::Published,
    /// The Pod's workspace volume (`--workspace-root`).
    pub workspace_root: std::path::PathBuf,
    /// runtimed's own files (`--state-dir`): the Runs' logs, staged S3 artifacts.
    pub state_dir: std::path::PathBuf,
    /// The Pod's runtime server (`--runtime-server`), when Runs execute there.
    pub runtime_server: Option<remote::RuntimeServer>,
    /// How Git sources are fetched (`--git-*`).
    pub git: git::FetchOptions,
    /// Where Runs' artifacts go (`--artifact-*`).
    pub artifacts: Artifacts,
    /// How often the artifacts of deleted Runs are removed (`--artifact-gc-interval`).
    pub artifact_gc_interval: Duration,
    /// The registrations of this Pod's Ready function Runs, by Run name: the agent keeps
    /// them, the invoke endpoint reads them.
    pub registrations: std::sync::Arc<
        std::sync::Mutex<
            std::collections::HashMap<String, crate::runtimed::proto::FunctionRegistration>,
        >,
    >,
}

impl Settings {
    pub fn from_args(args: &RuntimedArgs) -> Result<Self> {
        let identity = Identity::from_args(args)?;
        let (interval, duration) = (args.heartbeat_interval, args.heartbeat_duration);
        if interval.is_zero() {
            return Err(Error::ZeroInterval);
        }
        if duration <= interval {
            return Err(Error::DurationNotAboveInterval { interval, duration });
        }
        let health_probe = crate::telemetry::http::parse_bind(
            &args.health_probe_bind_address,
            "--health-probe-bind-address",
        )
        .map_err(|e| Error::BadAddress(e.to_string()))?;
        let metrics_address = crate::telemetry::http::parse_bind(
            &args.metrics_bind_address,
            "--metrics-bind-address",
        )
        .map_err(|e| Error::BadAddress(e.to_string()))?;
        let api_address =
            crate::telemetry::http::parse_bind(&args.api_bind_address, "--api-bind-address")
                .map_err(|e| Error::BadAddress(e.to_string()))?;
        Ok(Settings {
            metrics_address,
            api_address,
            gateway_users: args.gateway_user.clone(),
            identity,
            heartbeat: heartbeat::Config { interval, duration },
            shutdown_grace: args.shutdown_grace,
            health_probe,
            ready: readiness::unpublished(),
            workspace_root: args.workspace_root.clone(),
            state_dir: state_dir(args),
            git: git::FetchOptions {
                timeout: args.git_timeout,
                max_bytes: args.git_max_bytes,
                ca_file: args.git_ca_file.clone(),
            },
            artifacts: Artifacts::from_args(args)?,
            artifact_gc_interval: args.artifact_gc_interval,
            runtime_server: args
                .runtime_server
                .as_deref()
                .map(remote::RuntimeServer::new)
                .transpose()
                .map_err(Error::BadAddress)?,
            registrations: Default::default(),
            routine_events: args.routine_events,
            event_fold_window: args.event_fold_window,
            claim_delay: args.claim_delay,
        })
    }
}

/// Runs the agent until SIGTERM or SIGINT, then shuts down gracefully and returns `Ok`.
pub async fn exec(connect: impl Into<ConnectOptions>, args: &RuntimedArgs) -> anyhow::Result<()> {
    let settings = Settings::from_args(args)?;
    // Before any task starts: its orphans come back to runtimed, which reaps them.
    reaper::start();
    // Listen before connecting so that an early SIGTERM is a clean shutdown, not a kill.
    let shutdown = crate::util::signals::shutdown_signal()?;
    let target = kubeclient::connect(connect).await?;
    if let Some(addr) = settings.health_probe {
        serve_probes(addr, settings.ready.clone()).await?;
    }
    if let Some(addr) = settings.api_address {
        let mut routes = runlog::routes(runlog::RunLogs::new(&settings.state_dir));
        if let Some(server) = settings.runtime_server.clone() {
            routes = routes.merge(invoke::routes(server, settings.registrations.clone()));
        }
        if let Artifacts::Store(store) = &settings.artifacts {
            let namespace = settings.identity.namespace.clone();
            let runs = kube::Api::namespaced(target.client.clone(), &namespace);
            routes = routes.merge(artifact_server::routes(store.clone(), runs, namespace));
        }
        // Invoke, logs and artifacts answer only the gateway, and any other path is a 404 for
        // it only.
        let gate = callers::Gate::new(
            target.client.clone(),
            &settings.identity.pod_uid,
            settings.gateway_users.clone(),
        );
        let routes = routes
            .fallback(|| async {
                (
                    axum::http::StatusCode::NOT_FOUND,
                    "runtimed serves no such path: its API is /invoke/RUN, /logs/RUN and /artifacts/RUN/UID/NAME\n",
                )
            })
            .layer(axum::middleware::from_fn_with_state(gate, callers::guard));
        serve_api(addr, &settings.identity, routes).await?;
    }
    let registry = prometheus::Registry::new();
    let metrics = metrics::RuntimedMetrics::register(&registry)
        .context("cannot register runtimed's metrics")?;
    if let Some(addr) = settings.metrics_address {
        crate::telemetry::http::serve(
            addr,
            crate::telemetry::http::metrics(registry),
            std::future::pending(),
        )
        .await?;
    }
    let me = &settings.identity;
    tracing::info!(
        pod = %me.pod_name,
        namespace = %me.namespace,
        uid = %me.pod_uid,
        "runtimed starting against {}",
        target.describe()
    );
    agent::run(target.client.clone(), settings, metrics, shutdown)
        .await
        .map_err(|e| match e {
            Error::Kube { doing, source } => target.explain_error(source, &doing),
            other => anyhow::Error::new(other),
        })
        .context("runtimed stopped")
}

/// `/healthz` (the process runs) and `/readyz` (see [`Settings::ready`]) for the kubelet's
/// probes; the Runtime controller points the readiness probe of Runtime Pods here.
async fn serve_probes(
    addr: std::net::SocketAddr,
    ready: readiness::Published,
) -> anyhow::Result<()> {
    let app = crate::telemetry::http::probes(move || ready.lock().expect("readiness").clone());
    // Other Pods reach this address: a flood of connections, or one that never finishes its
    // headers, must not take the probes down for good.
    crate::telemetry::http::serve_bounded(addr, app, crate::telemetry::http::Bounds::default())
        .await
}

/// The API over TLS, with a certificate made now for the Pod's name (the gateway keys the
/// connection to it; nothing of it is on disk for a task to read).
async fn serve_api(
    addr: std::net::SocketAddr,
    me: &Identity,
    routes: axum::Router,
) -> anyhow::Result<()> {
    use crate::telemetry::http::secure;
    let tls = std::sync::Arc::new(secure::server_config(
        None,
        std::slice::from_ref(&me.pod_name),
    )?);
    let bounds = crate::telemetry::http::Bounds::default();
    secure::serve_tls(
        addr,
        routes,
        move || tls.clone(),
        bounds,
        std::future::pending(),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn parse(args: &[&str]) -> RuntimedArgs {
        let cli =
            crate::cmd::cli::Cli::try_parse_from(["k", "runtimed"].iter().chain(args)).unwrap();
        match cli.command {
            crate::cmd::cli::Command::Runtimed(a) => *a,
            other => panic!("parsed {other:?}"),
        }
    }

    #[test]
    fn identity_comes_from_flags_and_missing_parts_are_named_once() {
        let ok = parse(&["--pod-name", "p", "--pod-namespace", "ns", "--pod-uid", "u"]);
        assert_eq!(
            Identity::from_args(&ok).unwrap(),
            Identity {
                pod_name: "p".into(),
                namespace: "ns".into(),
                pod_uid: "u".into()
            }
        );
        let mut missing = ok.clone();
        missing.pod_name = None;
        missing.pod_uid = Some("  ".into());
        let err = Identity::from_args(&missing).unwrap_err().to_string();
        assert_eq!(
            err,
            "runtimed needs the identity of its Pod but POD_NAME, POD_UID are not set; set them through the downward API (fieldRef metadata.name, metadata.namespace, metadata.uid) or pass --pod-name --pod-uid"
        );
    }

    #[test]
    fn heartbeat_settings_default_to_10s_and_40s_and_must_be_coherent() {
        let mut args = parse(&["--pod-name", "p", "--pod-namespace", "ns", "--pod-uid", "u"]);
        let s = Settings::from_args(&args).unwrap();
        assert_eq!(s.heartbeat.interval, Duration::from_secs(10));
        assert_eq!(s.heartbeat.duration, Duration::from_secs(40));
        assert_eq!(s.shutdown_grace, Duration::from_secs(25));
        args.heartbeat_duration = Duration::from_secs(10);
        assert!(matches!(
            Settings::from_args(&args),
            Err(Error::DurationNotAboveInterval { .. })
        ));
        args.heartbeat_interval = Duration::ZERO;
        assert!(matches!(
            Settings::from_args(&args),
            Err(Error::ZeroInterval)
        ));
    }
}
