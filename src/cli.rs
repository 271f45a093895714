//! Command-line definitions: every clap struct of `kubectl-kruntimes`, one per subcommand.
//!
//! Flags follow kubectl's conventions. Nothing here talks to a cluster.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::duration::parse_duration;

/// kruntimes: schedule Runs onto Runtime Pods by logical capacity.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl-kruntimes",
    bin_name = "kubectl kruntimes",
    version,
    about
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags shared by every subcommand, spelled like kubectl's.
#[derive(Debug, Clone, Default, Args)]
pub struct GlobalArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// Namespace (default: the context's namespace).
    #[arg(short = 'n', long, global = true, value_name = "NAME")]
    pub namespace: Option<String>,
    /// The kubeconfig cluster to use (instead of the context's).
    #[arg(long, global = true, value_name = "NAME")]
    pub cluster: Option<String>,
    /// The kubeconfig user to use (instead of the context's).
    #[arg(long, global = true, value_name = "NAME")]
    pub user: Option<String>,
    /// The address of the Kubernetes API server (instead of the kubeconfig's; with --token, no
    /// kubeconfig is needed).
    #[arg(short = 's', long, global = true, value_name = "URL")]
    pub server: Option<String>,
    /// Bearer token for authentication to the API server (instead of the kubeconfig user's
    /// credentials).
    #[arg(long, global = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Path to a PEM file of the certificate authority that signed the API server's certificate.
    #[arg(long, global = true, value_name = "PATH")]
    pub certificate_authority: Option<PathBuf>,
    /// Do not verify the API server's certificate (insecure: for test clusters only).
    #[arg(long, global = true)]
    pub insecure_skip_tls_verify: bool,
    /// Username to impersonate for the operation (a user or system:serviceaccount:NS:NAME).
    #[arg(long = "as", global = true, value_name = "USER")]
    pub as_user: Option<String>,
    /// Group to impersonate for the operation; repeat for more groups.
    #[arg(long = "as-group", global = true, value_name = "GROUP")]
    pub as_group: Vec<String>,
    /// How long one request to the API server may take (e.g. 30s, 1m; 0: no limit).
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_duration)]
    pub request_timeout: Option<Duration>,
    /// More log output; repeat for more (-v info, -vv debug, -vvv trace).
    #[arg(short = 'v', long = "verbose", global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Install or update the Runtime and Run CRDs, the user ClusterRoles and the admission
    /// policy that restricts Runtime Pods (server-side apply).
    #[command(
        after_help = "Examples:\n  kubectl kruntimes install --yes\n  kubectl kruntimes install --dry-run=server\n  kubectl kruntimes install --print > kruntimes.yaml"
    )]
    Install(InstallArgs),
    /// The agent inside a Runtime Pod: heartbeat, local admission, execution of Task Runs.
    #[command(
        after_help = "Examples:\n  (in a Runtime Pod; the Runtime controller writes this container)\n  kubectl-kruntimes runtimed --heartbeat-interval 5s --runtime-server 127.0.0.1:9091"
    )]
    Runtimed(Box<RuntimedArgs>),
    /// The scheduler controller manager.
    #[command(subcommand)]
    Scheduler(SchedulerCommand),
    /// Explain why a Run is or is not placed: replays the scheduler's plugins on a live
    /// snapshot of its Runtime Pods (reads only).
    #[command(
        after_help = "Examples:\n  kubectl kruntimes explain run/train-6 -n team-a\n  kubectl kruntimes explain run train-6 -o wide\n  kubectl kruntimes explain run/train-6 -o json"
    )]
    Explain(ExplainArgs),
    /// The pool at a glance: per Runtime, Pods available, used/capacity per resource, Runs by
    /// phase and the Pending demand by the scheduler's reasons (reads only).
    #[command(
        after_help = "Examples:\n  kubectl kruntimes status\n  kubectl kruntimes status python -n team-a --watch\n  kubectl kruntimes status -A -o yaml"
    )]
    Status(StatusArgs),
    /// Call a Ready function Run once: sends the data to its runtimed through the API
    /// server's Pod proxy (RBAC on pods/proxy decides who may) and prints the handler's output.
    #[command(
        after_help = "Examples:\n  kubectl kruntimes invoke run/echo --data hello\n  kubectl kruntimes invoke run/resize -n team-a --data @image.png > out.png\n  echo '{\"x\": 1}' | kubectl kruntimes invoke run/handler --data -"
    )]
    Invoke(InvokeArgs),
    /// Print a Run's output (stdout and stderr, as its runtimed keeps them on the Pod's
    /// workspace volume), read through the API server's Pod proxy like invoke.
    #[command(
        after_help = "Examples:\n  kubectl kruntimes logs run/train-1\n  kubectl kruntimes logs run/train-1 -n team-a -f\n  kubectl kruntimes logs run train-1 --tail 20"
    )]
    Logs(LogsArgs),
    /// List a Run's stored artifacts (status.artifactRefs), or download them through the API
    /// server's Pod proxy like logs.
    #[command(
        after_help = "Examples:\n  kubectl kruntimes artifacts run/train-1\n  kubectl kruntimes artifacts run/train-1 -o wide\n  kubectl kruntimes artifacts run/train-1 -n team-a --download ./out"
    )]
    Artifacts(ArtifactsArgs),
    /// Create a Run (a command, a script or a function on a Runtime) and, with --wait,
    /// stream its log and exit with its task's exit code.
    #[command(
        after_help = "Examples:\n  kubectl kruntimes run --runtime bash -- echo hello\n  kubectl kruntimes run train-1 --runtime python -f train.py --request example.com/gpu=1 --wait\n  kubectl kruntimes run --runtime bash --inline 'exit 3' --retry-attempts 2 --wait; echo $?\n  kubectl kruntimes run --runtime bash -o yaml --dry-run=client -- make test"
    )]
    Run(Box<RunArgs>),
    /// Wait until Runs meet a condition (by default, that they Succeeded); a Run that ended
    /// without meeting it fails the command at once, with its reason.
    #[command(
        after_help = "Examples:\n  kubectl kruntimes wait run/train-1\n  kubectl kruntimes wait run a b --for=condition=Finished --timeout 10m\n  kubectl kruntimes wait run/train-1 --for=phase=Running\n  kubectl kruntimes wait run/old --for=delete"
    )]
    Wait(WaitArgs),
    /// Cancel Runs: sets spec.cancelRequested (one way); a Pending Run ends in the scheduler,
    /// a Scheduled or Running one once runtimed has stopped it.
    #[command(
        after_help = "Examples:\n  kubectl kruntimes cancel run/train-1\n  kubectl kruntimes cancel run train-1 train-2 -n team-a --wait --timeout 2m\n  kubectl kruntimes cancel -l sweep=lr-3 -A"
    )]
    Cancel(CancelArgs),
    /// Run the whole system on this machine: etcd and kube-apiserver, the CRDs, the scheduler,
    /// and a local Pod host that runs a real runtimed for every Runtime Pod.
    #[command(
        after_help = "Examples:\n  kubectl kruntimes dev --demo\n  kubectl kruntimes dev --data-dir /tmp/kruntimes-dev"
    )]
    Dev(DevArgs),
    /// Print a shell completion script (e.g. `source <(kubectl kruntimes completion bash)`),
    /// or with `kubectl` the completion hook for `kubectl kruntimes <TAB>`.
    #[command(
        after_help = "Examples:\n  source <(kubectl kruntimes completion bash)\n  kubectl kruntimes completion kubectl > ~/.local/bin/kubectl_complete-kruntimes && chmod +x ~/.local/bin/kubectl_complete-kruntimes"
    )]
    Completion(CompletionArgs),
    /// Print the version: release, git commit and date, Rust version, and the API versions
    /// this binary speaks.
    #[command(
        after_help = "Examples:\n  kubectl kruntimes version\n  kubectl kruntimes version -o json"
    )]
    Version(VersionArgs),
    /// Regenerate the committed completions/, man/ and deploy/crds/crds.yaml (`cargo xtask gen`).
    #[command(hide = true)]
    Gen(GenArgs),
    /// Completion candidates for the words after `kubectl kruntimes` (called by the hook
    /// `kubectl_complete-kruntimes`).
    #[command(name = "__complete", hide = true)]
    Complete(CompleteArgs),
    /// Copy this executable to a path (the init container of Runtime Pods of any image).
    #[command(hide = true)]
    CopyBinary(CopyBinaryArgs),
}

/// `dev`: a local, persistent kruntimes cluster in the foreground.
#[derive(Debug, Clone, Args)]
pub struct DevArgs {
    /// Where etcd's data, the certificates, the logs and DIR/kubeconfig (context
    /// kruntimes-dev) live; starting again on the same DIR keeps every Runtime and Run
    /// [default: $XDG_STATE_HOME/kruntimes/dev, else ~/.local/state/kruntimes/dev]
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Apply examples/, show the Runs' progress until they finish, explain a Run that had to
    /// wait, then stop everything and exit.
    #[arg(long)]
    pub demo: bool,
    /// How long --demo waits for its Runs to finish.
    #[arg(long, default_value = "5m", value_parser = parse_duration, value_name = "DURATION")]
    pub demo_timeout: Duration,
}

#[derive(Debug, Clone, Args)]
pub struct CompletionArgs {
    /// The shell to complete in, or `kubectl` for the kubectl plugin completion hook.
    #[arg(value_enum)]
    pub shell: CompletionShell,
}

/// `completion SHELL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
    Elvish,
    Powershell,
    /// The executable `kubectl_complete-kruntimes` that kubectl (1.26 and newer) runs to
    /// complete `kubectl kruntimes <TAB>`.
    Kubectl,
}

/// The completion script for `shell`, generated from these definitions.
pub fn completion_script(shell: clap_complete::Shell) -> String {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "kubectl-kruntimes", &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Hidden `gen`: where to write the generated files.
#[derive(Debug, Clone, Args)]
pub struct GenArgs {
    /// The repository root to write completions/, man/ and deploy/crds/crds.yaml into.
    #[arg(long, default_value = ".", value_name = "DIR")]
    pub out: PathBuf,
}

/// Hidden `__complete`: the words typed after `kubectl kruntimes`, the last one being the
/// word to complete (possibly empty).
#[derive(Debug, Clone, Args)]
pub struct CompleteArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub words: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum SchedulerCommand {
    /// Run the Runtime controller and the scheduler, with leader election and metrics.
    #[command(
        after_help = "Examples:\n  kubectl kruntimes scheduler run\n  kubectl kruntimes scheduler run --leader-elect=false --workers 8 --log-format json"
    )]
    Run(SchedulerRunArgs),
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
    /// Address of /healthz and /readyz (`0` disables them).
    #[arg(long, default_value = ":8081")]
    pub health_probe_bind_address: String,
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
    /// Publish the Events of a Run's ordinary life (Scheduled, Admitted, Started, Completed,
    /// RunSucceeded); `--routine-events=false` keeps only the others (every Warning), one API
    /// write per Event saved. Runtime Pods' runtimed gets the same setting.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub routine_events: bool,
    /// How long a routine Event waits for the Run's next one to take it in (`Scheduled` is
    /// published only for a Run not started by then; runtimed's `Started` joins a short task's
    /// end); `0s`: each is published at once. Runtime Pods' runtimed gets the same setting.
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
    pub event_fold_window: Duration,
    /// Their limits (a compute ResourceQuota requires both); `""`: none.
    #[arg(long, value_name = "LIST", default_value = crate::runtime::pod::DEFAULT_LIMITS, value_parser = crate::runtime::pod::parse_resource_list)]
    pub runtimed_limits:
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
}

/// The kruntimes image of this version (as `Dockerfile` and deploy/ name it).
pub const DEFAULT_IMAGE: &str = concat!("kubectl-kruntimes:", env!("CARGO_PKG_VERSION"));

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
    /// Publish the Events of a Run's ordinary life (Admitted, Started, Completed,
    /// RunSucceeded); false keeps only the others (every Warning). The scheduler's
    /// `--routine-events` sets it in Runtime Pods.
    #[arg(long, env = "KRUNTIMES_ROUTINE_EVENTS", default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub routine_events: bool,
    /// How long `Started` waits for a short task's end to take it in (one Event, not two);
    /// `0s`: at once. The scheduler's `--event-fold-window` sets it in Runtime Pods.
    #[arg(long, env = "KRUNTIMES_EVENT_FOLD_WINDOW", default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
    pub event_fold_window: Duration,
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

/// `cancel run/NAME…`: which Runs, and whether to wait for their end.
#[derive(Debug, Clone, Args)]
pub struct CancelArgs {
    /// The Runs: `run/NAME…`, `NAME…`, or `run NAME…` (or none, with -l).
    #[arg(value_name = "run/NAME", required_unless_present = "selector")]
    pub targets: Vec<String>,
    /// Every Run whose labels match this selector (`key=value,key!=value,key in (a,b)`, as
    /// kubectl's), instead of names.
    #[arg(short = 'l', long, value_name = "SELECTOR", conflicts_with = "targets")]
    pub selector: Option<String>,
    /// With -l: in every namespace (overrides -n).
    #[arg(short = 'A', long, requires = "selector")]
    pub all_namespaces: bool,
    /// Wait until every cancelled Run has ended.
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits.
    #[arg(long, default_value = "5m", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Duration,
}

/// `run`: the Run to create, and whether to wait for it.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The Run's name (default: generated, `run-` and five characters).
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// The Runtime that runs it (spec.runtime).
    #[arg(short = 'r', long, value_name = "RUNTIME")]
    pub runtime: String,
    /// The script to run (spec.source.inline), from FILE, or `-` for stdin.
    #[arg(short = 'f', long, value_name = "FILE", conflicts_with_all = ["inline", "repo_url"])]
    pub file: Option<PathBuf>,
    /// The script to run itself (spec.source.inline).
    #[arg(long, value_name = "SCRIPT", conflicts_with = "repo_url")]
    pub inline: Option<String>,
    /// Fetch the code from this Git repository (spec.source.repoURL, https).
    #[arg(long, value_name = "URL")]
    pub repo_url: Option<String>,
    /// The commit of --repo-url to check out (spec.source.commitSHA).
    #[arg(long, value_name = "SHA", requires = "repo_url")]
    pub commit_sha: Option<String>,
    /// The file of the source to run (spec.mode.task.entrypoint).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["file", "inline", "handler"])]
    pub entrypoint: Option<String>,
    /// Serve a function instead of running a task (spec.mode.function.handler, e.g.
    /// main.handler).
    #[arg(long, value_name = "MODULE.FUNCTION")]
    pub handler: Option<String>,
    /// An environment variable of the task, KEY=VALUE (repeatable).
    #[arg(short = 'e', long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// A resource the Run requests, NAME=QUANTITY (repeatable; default runs=1).
    #[arg(long = "request", value_name = "NAME=QUANTITY")]
    pub requests: Vec<String>,
    /// How long it may run once started (spec.timeout, e.g. 10m).
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Attempts in all, the first included (spec.retryPolicy.maxAttempts).
    #[arg(long, value_name = "N")]
    pub retry_attempts: Option<i32>,
    /// The wait before the second attempt, doubled for each next one
    /// (spec.retryPolicy.backoff; default 1s).
    #[arg(long, value_name = "DURATION", requires = "retry_attempts")]
    pub retry_backoff: Option<String>,
    /// spec.priorityClassName.
    #[arg(long, value_name = "NAME")]
    pub priority_class: Option<String>,
    /// Stream its log until it ends, then exit with its task's exit code (1 when it ended
    /// otherwise than by its task's exit, its reason on stderr).
    #[arg(short = 'w', long)]
    pub wait: bool,
    /// How long --wait waits for the end.
    #[arg(long, default_value = "24h", value_parser = parse_duration, value_name = "DURATION")]
    pub wait_timeout: Duration,
    /// Print the Run: `name`, `yaml` or `json` (default: `run.kruntimes.io/NAME created`).
    #[arg(short = 'o', long, value_enum, value_name = "FORMAT")]
    pub output: Option<ObjectFormat>,
    /// `client`: print it without sending it; `server`: the API server checks it (admission
    /// policies included) and stores nothing; `none`: create it.
    #[arg(long, value_enum, default_value_t = DryRun::None, value_name = "MODE")]
    pub dry_run: DryRun,
    /// The task's command and its arguments (spec.mode.task.args), after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// How an object the command made is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ObjectFormat {
    Name,
    Yaml,
    Json,
}

/// `--dry-run`, as kubectl's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DryRun {
    None,
    Client,
    Server,
}

/// `wait run/NAME…`: which Runs, for what, and how long.
#[derive(Debug, Clone, Args)]
pub struct WaitArgs {
    /// The Runs: `run/NAME…`, or `run NAME…`.
    #[arg(value_name = "run/NAME", required = true)]
    pub targets: Vec<String>,
    /// What to wait for: `phase=PHASE`, `condition=TYPE[=STATUS]` (STATUS defaults to True;
    /// `condition=Finished` is met by every end) or `delete`.
    #[arg(long = "for", default_value = "phase=Succeeded", value_parser = crate::api::wait::parse_for, value_name = "CONDITION")]
    pub wanted: crate::api::wait::For,
    /// How long to wait.
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Duration,
}

/// `version`: how to print it.
#[derive(Debug, Clone, Args)]
pub struct VersionArgs {
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = VersionFormat::Text)]
    pub output: VersionFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VersionFormat {
    Text,
    Json,
    Yaml,
}

/// `copy-binary`: the init container of a Runtime Pod copies this binary into the Pod.
#[derive(Debug, Clone, Args)]
pub struct CopyBinaryArgs {
    /// Where to write the executable.
    pub to: PathBuf,
}

impl Command {
    /// The log filter when neither `-v` nor `RUST_LOG` says otherwise. Daemons (`scheduler
    /// run`, `runtimed`) log at info, as controllers do. `dev` logs warnings of its own parts
    /// but not the client library's retries while the API server starts (its runtimed
    /// children log into files and it prints its own progress). One-shot commands log
    /// warnings only and keep the client library quiet: their failures are reported once, as
    /// the command's own error line.
    /// Whether the command prints and ends (SIGPIPE ends it quietly, see
    /// [`crate::process::die_on_closed_stdout`]), rather than serving until stopped.
    pub fn prints_and_ends(&self) -> bool {
        !matches!(
            self,
            Command::Runtimed(_) | Command::Scheduler(_) | Command::Dev(_)
        )
    }

    pub fn default_log_filter(&self) -> &'static str {
        match self {
            Command::Runtimed(_) | Command::Scheduler(_) => "info",
            Command::Dev(_)
            | Command::Install(_)
            | Command::Explain(_)
            | Command::Invoke(_)
            | Command::Logs(_)
            | Command::Artifacts(_)
            | Command::Cancel(_)
            | Command::Run(_)
            | Command::Wait(_)
            | Command::Status(_)
            | Command::Completion(_)
            | Command::Version(_)
            | Command::Gen(_)
            | Command::Complete(_)
            | Command::CopyBinary(_) => "warn,kube_client=off",
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct InstallArgs {
    /// Write everything install applies as YAML to stdout and touch no cluster.
    #[arg(long, conflicts_with_all = ["dry_run", "yes"])]
    pub print: bool,
    /// `server` (also a bare `--dry-run`): the API server validates the apply and persists
    /// nothing; `client`: print what would be applied, as --print, touching no cluster;
    /// `none`: apply.
    #[arg(
        long,
        value_enum,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "server",
        default_value_t = DryRun::None,
        value_name = "MODE"
    )]
    pub dry_run: DryRun,
    /// Do not ask for confirmation.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// How long to wait for the CRDs to become Established (e.g. 60s, 2m).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// `explain run/NAME`: which Run to explain and how to print it.
#[derive(Debug, Clone, Args)]
pub struct ExplainArgs {
    /// The Run: `run/NAME`, `runs/NAME`, or `run NAME`.
    #[arg(value_name = "run/NAME")]
    pub target: String,
    /// The Run's name, when the first argument is `run` or `runs`.
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// Output format: a table, a table with every advertised resource, or a documented
    /// structure for scripts.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    /// When to color the table (auto: only on a terminal and when NO_COLOR is unset).
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,
}

/// `invoke run/NAME`: which function Run, with what.
#[derive(Debug, Clone, Args)]
pub struct InvokeArgs {
    /// The Run: `run/NAME`, `runs/NAME`, or `run NAME`.
    #[arg(value_name = "run/NAME")]
    pub target: String,
    /// The Run's name, when the first argument is `run` or `runs`.
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// The invocation's input: `@FILE`, `-` for stdin, or the text itself (at most 1 MiB;
    /// none: empty).
    #[arg(short = 'd', long, value_name = "@FILE|-|TEXT")]
    pub data: Option<String>,
    /// The input's media type, passed to the runtime server (the Go project's Bash runtime
    /// takes only application/json).
    #[arg(long, default_value = crate::api::DEFAULT_INVOKE_CONTENT_TYPE, value_name = "TYPE")]
    pub content_type: String,
}

/// `logs run/NAME`: which Run's output, and how much.
#[derive(Debug, Clone, Args)]
pub struct LogsArgs {
    /// The Run: `run/NAME`, `runs/NAME`, or `run NAME`.
    #[arg(value_name = "run/NAME")]
    pub target: String,
    /// The Run's name, when the first argument is `run` or `runs`.
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// Keep printing what the Run writes until its execution ends.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// Only the last N lines (-1: all).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true, value_name = "N")]
    pub tail: i64,
}

/// `artifacts run/NAME`: which Run, and whether to download.
#[derive(Debug, Clone, Args)]
pub struct ArtifactsArgs {
    /// The Run: `run/NAME`, `runs/NAME`, or `run NAME`.
    #[arg(value_name = "run/NAME")]
    pub target: String,
    /// The Run's name, when the first argument is `run` or `runs`.
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// Write every artifact into DIR (a directory artifact as NAME.tar.gz), each checked
    /// against its digest.
    #[arg(long, value_name = "DIR")]
    pub download: Option<PathBuf>,
    /// Output format of the list.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
}

/// `status [RUNTIME]`: which pool to show and how.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// Only this Runtime.
    #[arg(value_name = "RUNTIME")]
    pub runtime: Option<String>,
    /// Every namespace (overrides -n).
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Output format: the pool view, or a documented structure for scripts and dashboards.
    #[arg(short = 'o', long, value_enum, default_value_t = StatusFormat::Table)]
    pub output: StatusFormat,
    /// Print a new view every --interval until Ctrl-C (in place on a terminal).
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// How often --watch refreshes.
    #[arg(long, default_value = "2s", value_parser = parse_duration, value_name = "DURATION")]
    pub interval: Duration,
    /// When to color the view (auto: only on a terminal and when NO_COLOR is unset).
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,
}

/// `status -o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusFormat {
    Table,
    Json,
    Yaml,
}

/// `-o`: how a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Table,
    Wide,
    Json,
    Yaml,
}

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn completion_scripts_cover_every_subcommand() {
        let bash = completion_script(clap_complete::Shell::Bash);
        for sub in [
            "install",
            "scheduler",
            "runtimed",
            "explain",
            "status",
            "completion",
            "version",
        ] {
            assert!(bash.contains(sub), "bash completion lacks {sub}");
        }
        assert!(
            completion_script(clap_complete::Shell::Zsh).contains("#compdef kubectl-kruntimes")
        );
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_flags_work_after_the_subcommand() {
        let cli = Cli::try_parse_from([
            "k",
            "install",
            "--yes",
            "-n",
            "team-a",
            "--context",
            "c",
            "-vv",
        ])
        .unwrap();
        assert_eq!(cli.global.namespace.as_deref(), Some("team-a"));
        assert_eq!(cli.global.context.as_deref(), Some("c"));
        assert_eq!(cli.global.verbose, 2);
    }
}
