//! The flags of the two long-running commands, `scheduler run` and `runtimed`, and the image
//! they name by default. Definitions only: nothing here talks to a cluster.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::util::duration::parse_duration;

#[derive(Debug, Subcommand)]
pub enum SchedulerCommand {
    /// Run the Runtime controller and the scheduler, with leader election and metrics.
    #[command(
        after_help = "Examples:\n  kubectl kruntimes scheduler run\n  kubectl kruntimes scheduler run --leader-elect=false --workers 8 --log-format json"
    )]
    Run(Box<SchedulerRunArgs>),
}

#[derive(Debug, Clone, Args)]
pub struct SchedulerRunArgs {
    /// Pending and Failed status writes in flight (cycles are serial, one pop of the queue at a
    /// time; Binds have 64 slots of their own).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub workers: u16,
    /// Watch only this namespace (default: all namespaces).
    #[arg(long, value_name = "NAME")]
    pub watch_namespace: Option<String>,
    /// Elect a leader on a Lease so only one replica schedules.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub leader_elect: bool,
    /// Namespace of the leader-election Lease `kruntimes-scheduler` (default: $POD_NAMESPACE,
    /// then the context's namespace).
    #[arg(long, value_name = "NAME")]
    pub leader_election_namespace: Option<String>,
    /// Identity in the leader-election Lease (default: Pod or host name plus process id).
    #[arg(long, value_name = "ID")]
    pub leader_election_identity: Option<String>,
    /// How long a leader's Lease is valid without renewal; a standby takes over after it.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub leader_election_lease_duration: Duration,
    /// Address of the /metrics endpoint (`0` disables it).
    #[arg(long, default_value = ":8080")]
    pub metrics_bind_address: String,
    /// Serve /metrics over TLS, only to callers whose bearer token the API server accepts and
    /// authorises to get /metrics (TokenReview and SubjectAccessReview, as controller-runtime's
    /// secure metrics); `false` serves plain HTTP to anyone.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub metrics_secure: bool,
    /// Directory holding tls.crt and tls.key for /metrics (a mounted Secret, from cert-manager
    /// say); without it a self-signed certificate is made at start.
    #[arg(long, value_name = "DIR")]
    pub metrics_cert_dir: Option<std::path::PathBuf>,
    /// Address of /healthz and /readyz (`0` disables them).
    #[arg(long, default_value = ":8081")]
    pub health_probe_bind_address: String,
    /// Address of the gateway, the aggregated API of Runs' subresources
    /// (subresources.kruntimes.io: runs/log, runs/invoke, runs/artifacts) through which
    /// kubectl kruntimes logs, invoke and artifacts reach runtimed; served over TLS to the API
    /// server's front proxy by every replica; `0` disables it.
    #[arg(long, default_value = "0", value_name = "ADDR")]
    pub gateway_bind_address: String,
    /// Directory holding the gateway's tls.crt and tls.key (cert-manager's, whose CA injector
    /// fills the APIService's caBundle); without it the gateway keeps a CA and a certificate
    /// in Secret kubectl-kruntimes-gateway-tls of its namespace, renews them, and writes the
    /// CA to the APIService.
    #[arg(long, value_name = "DIR")]
    pub gateway_cert_dir: Option<PathBuf>,
    /// The ServiceAccount whose tokens the gateway presents to runtimed (default: the one the
    /// scheduler runs as).
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub gateway_service_account: Option<String>,
    /// How long a Runtime Pod's runtimed heartbeat may be stale (or its Lease missing) before
    /// the Runs running there are failed with reason RuntimePodLost, as on a lost node.
    #[arg(long, default_value = "40s", value_parser = parse_duration)]
    pub pod_lost_grace: Duration,
    /// How long the oldest Pending Run of a Runtime that does not fit may wait while later
    /// Runs are placed before the scheduler nominates a Runtime Pod for it
    /// (status.nominatedPodName) and leaves room there for it.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub starvation_threshold: Duration,
    /// How many fairness groups (those with the most Pending Runs) get series in
    /// kruntimes_scheduler_fair_share and kruntimes_scheduler_fair_share_pending_runs; 0: none.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub fair_share_metrics_groups: usize,
    /// The kruntimes image whose binary the Runtime controller copies into every Runtime Pod
    /// (an init container); deploy/ sets it to the image the scheduler runs from.
    #[arg(long, env = "KRUNTIMES_IMAGE", value_name = "IMAGE", default_value = DEFAULT_IMAGE)]
    pub runtime_image: String,
    /// Requests of the containers kruntimes adds to Runtime Pods (the init container and the
    /// runtimed sidecar), as `kubectl set resources` takes them; `""`: none.
    #[arg(long, value_name = "LIST", default_value = crate::runtime::pod::DEFAULT_REQUESTS, value_parser = crate::runtime::pod::parse_resource_list)]
    pub runtimed_requests:
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    /// Publish the Events of a Run's ordinary life too (Scheduled, Admitted, Started,
    /// Completed, RunSucceeded): off by default, one API write per Run saved, as the Go project
    /// writes none; every other Event (every Warning) is always published. Runtime Pods'
    /// runtimed gets the same setting.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub routine_events: bool,
    /// How long a routine Event waits for the Run's next one to take it in (`Scheduled` is
    /// published only for a Run not started by then; runtimed's `Started` joins a short task's
    /// end); `0s`: each is published at once. Runtime Pods' runtimed gets the same setting.
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
    pub event_fold_window: Duration,
    /// How long runtimed in Runtime Pods holds a started task's claim (its `--claim-delay`):
    /// a task that ends within it costs one status write, not two. An unclaimed Run bound less
    /// than this plus 2 s ago is taken for possibly started: not sent back from a terminating
    /// Pod nor preempted as unstarted until then. `0s`: claims are written before tasks start.
    #[arg(long, default_value = crate::api::DEFAULT_CLAIM_DELAY, value_parser = parse_duration, value_name = "DURATION")]
    pub claim_delay: Duration,
    /// Their limits (a compute ResourceQuota requires both); `""`: none.
    #[arg(long, value_name = "LIST", default_value = crate::runtime::pod::DEFAULT_LIMITS, value_parser = crate::runtime::pod::parse_resource_list)]
    pub runtimed_limits:
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
}

/// The kruntimes image of this version (as `Dockerfile` and deploy/ name it).
pub const DEFAULT_IMAGE: &str = concat!(
    "ghcr.io/kruntimes/kubectl-kruntimes:",
    env!("CARGO_PKG_VERSION")
);

/// `runtimed`: the Pod identity comes from the downward API (`POD_NAME`, `POD_NAMESPACE`,
/// `POD_UID`); the flags override it.
#[derive(Debug, Clone, Args)]
pub struct RuntimedArgs {
    /// Name of the Runtime Pod this agent runs in.
    #[arg(long, env = "POD_NAME", value_name = "NAME")]
    pub pod_name: Option<String>,
    /// Namespace of the Runtime Pod.
    #[arg(long, env = "POD_NAMESPACE", value_name = "NAME")]
    pub pod_namespace: Option<String>,
    /// UID of the Runtime Pod; the heartbeat Lease is held by it.
    #[arg(long, env = "POD_UID", value_name = "UID")]
    pub pod_uid: Option<String>,
    /// How often the heartbeat Lease is renewed.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub heartbeat_interval: Duration,
    /// Publish the Events of a Run's ordinary life too (Admitted, Started, Completed,
    /// RunSucceeded): off by default; every other Event (every Warning) is always published.
    /// The scheduler's `--routine-events` sets it in Runtime Pods.
    #[arg(long, env = "KRUNTIMES_ROUTINE_EVENTS", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub routine_events: bool,
    /// How long `Started` waits for a short task's end to take it in (one Event, not two);
    /// `0s`: at once. The scheduler's `--event-fold-window` sets it in Runtime Pods.
    #[arg(long, env = "KRUNTIMES_EVENT_FOLD_WINDOW", default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
    pub event_fold_window: Duration,
    /// How long the claim of a started task waits before it is written (phase Running,
    /// startTime, Admitted=True): a task that ends within it is written once, claim and end
    /// together, as the kubelet writes a container that starts and ends within one sync.
    /// `0s`: each claim is written before its task starts. On SIGTERM every held claim is
    /// written at once. A runtimed
    /// that dies inside the window leaves its Run Scheduled: a process runs again once,
    /// claimed first; an execution its runtime server still holds is re-attached. Function
    /// Runs and retries always claim first.
    #[arg(long, env = "KRUNTIMES_CLAIM_DELAY", default_value = crate::api::DEFAULT_CLAIM_DELAY, value_parser = parse_duration, value_name = "DURATION")]
    pub claim_delay: Duration,
    /// How long one renewal holds (the Lease's leaseDurationSeconds).
    #[arg(long, default_value = "40s", value_parser = parse_duration)]
    pub heartbeat_duration: Duration,
    /// On SIGTERM/SIGINT, how long running Runs may take to finish before they are killed
    /// (keep it below the Pod's terminationGracePeriodSeconds; the Runtime controller sets it).
    #[arg(long, env = "KRUNTIMES_SHUTDOWN_GRACE", default_value = "25s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    /// Address of /healthz and /readyz (ready once the Runs and the Pod are watched, until
    /// shutdown begins); `0` disables them.
    #[arg(long, env = "KRUNTIMES_HEALTH_PROBE_BIND_ADDRESS", default_value = "0")]
    pub health_probe_bind_address: String,
    /// Address of /metrics (admissions, admission wait, dispatch latency, reservations,
    /// status-write retries); `0` disables it.
    #[arg(long, env = "KRUNTIMES_METRICS_BIND_ADDRESS", default_value = "0")]
    pub metrics_bind_address: String,
    /// Address of runtimed's API (TLS: /invoke, /logs, /artifacts), which answers only the
    /// kruntimes gateway; `0` disables it.
    #[arg(long, env = "KRUNTIMES_API_BIND_ADDRESS", default_value = "0")]
    pub api_bind_address: String,
    /// The account whose tokens runtimed's API takes: the gateway's (comma-separated for more).
    #[arg(
        long,
        env = "KRUNTIMES_GATEWAY_USER",
        value_delimiter = ',',
        default_value = crate::api::DEFAULT_GATEWAY_USER
    )]
    pub gateway_user: Vec<String>,
    /// The Pod's workspace volume: a Run that names a PersistentWorkspace runs in
    /// DIR/persistent/<workspace>, created on first use (its status.path is
    /// /workspace/persistent/<workspace>).
    #[arg(
        long,
        env = "KRUNTIMES_WORKSPACE_ROOT",
        default_value = "/workspace",
        value_name = "DIR"
    )]
    pub workspace_root: PathBuf,
    /// Where runtimed keeps its own files: the Runs' logs and their end markers, and the
    /// staged copies of S3 artifacts (default: WORKSPACE_ROOT/.kruntimes). The Runtime
    /// controller mounts a volume of runtimed's alone here, so that no task writes them.
    #[arg(long, env = "KRUNTIMES_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The Pod's runtime server (HOST:PORT of its `runtime` container, gRPC on the Runtime's
    /// spec.port): Runs execute there through the runtime contract instead of as runtimed's
    /// own processes, survive a runtimed restart, and the server's Health is part of
    /// runtimed's readiness. Unset: runtimed runs each Run's task itself.
    #[arg(long, env = "KRUNTIMES_RUNTIME_SERVER", value_name = "HOST:PORT")]
    pub runtime_server: Option<String>,
    /// How long a Run's Git source (spec.source.repoURL) may take to fetch and check out;
    /// then the Run fails StartFailed.
    #[arg(long, env = "KRUNTIMES_GIT_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub git_timeout: Duration,
    /// The most bytes a Run's Git checkout may hold (.git included); a larger one fails the
    /// Run StartFailed.
    #[arg(
        long,
        env = "KRUNTIMES_GIT_MAX_BYTES",
        default_value_t = 100 << 20,
        value_name = "BYTES"
    )]
    pub git_max_bytes: u64,
    /// PEM CA certificates to trust for Git over https, besides Mozilla's roots and the
    /// system's (a Git server with a private CA).
    #[arg(long, env = "KRUNTIMES_GIT_CA_FILE", value_name = "FILE")]
    pub git_ca_file: Option<PathBuf>,
    /// Where the Runtime's filesystem artifact store (its spec.artifactStore claim) is mounted;
    /// with --artifact-volume-claim, Runs get $KRUNTIME_ARTIFACTS_DIR and what a successful
    /// one leaves there is stored (the Runtime controller sets both).
    #[arg(
        long,
        env = "KRUNTIMES_ARTIFACT_ROOT",
        value_name = "DIR",
        requires = "artifact_volume_claim"
    )]
    pub artifact_root: Option<PathBuf>,
    /// The PersistentVolumeClaim of the artifact store (recorded in each artifact's ref).
    #[arg(
        long,
        env = "KRUNTIMES_ARTIFACT_VOLUME_CLAIM",
        value_name = "NAME",
        requires = "artifact_root"
    )]
    pub artifact_volume_claim: Option<String>,
    /// The bucket of the Runtime's S3 artifact store (spec.artifactStore.s3): Runs get
    /// $KRUNTIME_ARTIFACTS_DIR and what a successful one leaves there is uploaded, with the
    /// credentials of --artifact-s3-credentials-dir (else web identity, container or instance
    /// credentials).
    #[arg(
        long,
        env = "KRUNTIMES_ARTIFACT_S3_BUCKET",
        value_name = "BUCKET",
        conflicts_with = "artifact_root"
    )]
    pub artifact_s3_bucket: Option<String>,
    /// Prepended to the S3 store's keys.
    #[arg(
        long,
        env = "KRUNTIMES_ARTIFACT_S3_PREFIX",
        value_name = "PREFIX",
        default_value = "",
        hide_default_value = true
    )]
    pub artifact_s3_prefix: String,
    /// The S3 store's region (default: AWS_REGION, else us-east-1).
    #[arg(long, env = "KRUNTIMES_ARTIFACT_S3_REGION", value_name = "REGION")]
    pub artifact_s3_region: Option<String>,
    /// An S3-compatible service's URL instead of AWS's (MinIO, Ceph RGW, …).
    #[arg(long, env = "KRUNTIMES_ARTIFACT_S3_ENDPOINT", value_name = "URL")]
    pub artifact_s3_endpoint: Option<String>,
    /// Address the S3 store's bucket in the path, not in the host name.
    #[arg(long, env = "KRUNTIMES_ARTIFACT_S3_FORCE_PATH_STYLE")]
    pub artifact_s3_force_path_style: bool,
    /// The Secret that holds the S3 store's credentials (recorded in status.artifactStore;
    /// the credentials themselves are read from --artifact-s3-credentials-dir).
    #[arg(
        long,
        env = "KRUNTIMES_ARTIFACT_S3_CREDENTIALS_SECRET",
        value_name = "NAME"
    )]
    pub artifact_s3_credentials_secret: Option<String>,
    /// A directory of the S3 store's credentials as files named AWS_ACCESS_KEY_ID,
    /// AWS_SECRET_ACCESS_KEY and optionally AWS_SESSION_TOKEN (the credentialsSecretName
    /// Secret mounted as a volume, in runtimed's container only), read once at start: runtimed
    /// keeps no secret in its environment, where a task running as its user could read it.
    #[arg(
        long,
        env = "KRUNTIMES_ARTIFACT_S3_CREDENTIALS_DIR",
        value_name = "DIR",
        requires = "artifact_s3_bucket"
    )]
    pub artifact_s3_credentials_dir: Option<std::path::PathBuf>,
    /// Artifacts larger than this are uploaded in parts of this size (at least 5 MiB).
    #[arg(long, env = "KRUNTIMES_ARTIFACT_S3_UPLOAD_PART_SIZE", default_value_t = 5 << 20, value_name = "BYTES")]
    pub artifact_s3_upload_part_size: u64,
    /// Parts of one artifact uploaded at once.
    #[arg(
        long,
        env = "KRUNTIMES_ARTIFACT_S3_UPLOAD_CONCURRENCY",
        default_value_t = 5,
        value_name = "N"
    )]
    pub artifact_s3_upload_concurrency: usize,
    /// The Runtime's artifact store driver when it is neither `filesystem` nor `s3`: Runs get
    /// $KRUNTIME_ARTIFACTS_DIR, and one that leaves artifacts fails ArtifactInvalid saying this
    /// runtimed cannot store them (none is dropped silently).
    #[arg(
        long,
        env = "KRUNTIMES_ARTIFACT_DRIVER",
        value_name = "DRIVER",
        conflicts_with_all = ["artifact_root", "artifact_s3_bucket"]
    )]
    pub artifact_driver: Option<String>,
    /// The largest artifact, in bytes (a directory: its tar.gz).
    #[arg(long, default_value_t = 1 << 30, value_name = "BYTES")]
    pub artifact_max_bytes: u64,
    /// All of one Run's artifacts together, in bytes.
    #[arg(long, default_value_t = 10 << 30, value_name = "BYTES")]
    pub artifacts_max_bytes: u64,
    /// How often the artifacts of deleted Runs are removed from the store.
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    pub artifact_gc_interval: Duration,
}
