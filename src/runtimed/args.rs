//! `runtimed`'s flags: the agent's own options, defined here so that runtimed never imports
//! the CLI (the root command names them). Definitions only.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::util::duration::parse_duration;

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
