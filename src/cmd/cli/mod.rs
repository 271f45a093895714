//! Command-line definitions: every clap struct of `kubectl-kruntimes`, one per subcommand: the
//! root, the global flags and the other commands here, the long-running commands' flags in
//! [`daemons`], the commands that make, wait for and cancel Runs (and trigger Workflows) in
//! [`runs`].
//!
//! Flags follow kubectl's conventions. Nothing here talks to a cluster.

use std::path::PathBuf;
use std::time::Duration;

pub use crate::telemetry::logging::LogFormat;
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::util::duration::parse_duration;

mod daemons;
mod runs;

pub use crate::runtime::pod::DEFAULT_IMAGE;
pub use crate::runtimed::RuntimedArgs;
pub use daemons::{SchedulerCommand, SchedulerRunArgs};
pub use runs::{
    CancelArgs, DryRun, RunArgs, WaitArgs, WorkflowCancelArgs, WorkflowCommand, WorkflowTriggerArgs,
};

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
    /// Log verbosity, as kubectl's `-v=N` (with `=`): 1-3 info, 4-5 debug, 6 and more trace
    /// (`-v` alone: 2; default: the command's own, warnings for the CLI).
    #[arg(
        short = 'v',
        long = "v",
        visible_alias = "verbose",
        global = true,
        value_name = "N",
        num_args = 0..=1,
        require_equals = true,
        default_value = "0",
        default_missing_value = "2",
        value_parser = clap::value_parser!(u8).range(0..=10)
    )]
    pub verbose: u8,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

impl From<&GlobalArgs> for crate::kubeclient::ConnectOptions {
    fn from(g: &GlobalArgs) -> Self {
        crate::kubeclient::ConnectOptions {
            kubeconfig: g.kubeconfig.clone(),
            context: g.context.clone(),
            namespace: g.namespace.clone(),
            cluster: g.cluster.clone(),
            user: g.user.clone(),
            server: g.server.clone(),
            token: g.token.clone(),
            certificate_authority: g.certificate_authority.clone(),
            insecure_skip_tls_verify: g.insecure_skip_tls_verify,
            as_user: g.as_user.clone(),
            as_group: g.as_group.clone(),
            request_timeout: g.request_timeout,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Install or update kruntimes (server-side apply): the CRDs, the user ClusterRoles, the
    /// admission policies and the scheduler Deployment with its image.
    #[command(
        after_help = "Examples:\n  kubectl kruntimes install --yes\n  kubectl kruntimes install --yes --image registry.example/kubectl-kruntimes:0.1.0\n  kubectl kruntimes install --crds-only --yes\n  kubectl kruntimes install --dry-run=server\n  kubectl kruntimes install --print > kruntimes.yaml"
    )]
    Install(InstallArgs),
    /// Remove the scheduler and the user ClusterRoles; the CRDs, every Run and the admission
    /// policies stay unless --delete-crds.
    #[command(
        after_help = "Examples:\n  kubectl kruntimes uninstall --yes\n  kubectl kruntimes uninstall --delete-crds --yes"
    )]
    Uninstall(UninstallArgs),
    /// The agent inside a Runtime Pod: heartbeat, local admission, execution of Task Runs.
    #[command(
        after_help = "Examples:\n  (in a Runtime Pod; the Runtime controller writes this container)\n  kubectl-kruntimes runtimed --heartbeat-interval 5s --runtime-server 127.0.0.1:9091"
    )]
    Runtimed(Box<RuntimedArgs>),
    /// The scheduler controller manager.
    #[command(subcommand)]
    Scheduler(SchedulerCommand),
    /// Explain why a Run is or is not placed: replays the scheduler's plugins on a live
    /// snapshot of its Runtime Pods (reads only). For a WorkflowRun: its jobs, the Run each
    /// step is, and why each waits.
    #[command(
        after_help = "Examples:\n  kubectl kruntimes explain run/train-6 -n team-a\n  kubectl kruntimes explain run train-6 -o wide\n  kubectl kruntimes explain run/train-6 -o json\n  kubectl kruntimes explain workflowrun/release-42"
    )]
    Explain(ExplainArgs),
    /// The pool at a glance: per Runtime, Pods available, used/capacity per resource, Runs by
    /// phase and the Pending demand by the scheduler's reasons (reads only).
    #[command(
        after_help = "Examples:\n  kubectl kruntimes status\n  kubectl kruntimes status python -n team-a --watch\n  kubectl kruntimes status -A -o yaml"
    )]
    Status(StatusArgs),
    /// Call a Ready function Run once: sends the data to its runtimed through the Run's invoke
    /// subresource (subresources.kruntimes.io; RBAC on runs/invoke decides who may) and prints
    /// the handler's output.
    #[command(
        after_help = "Examples:\n  kubectl kruntimes invoke run/echo --data hello\n  kubectl kruntimes invoke run/resize -n team-a --data @image.png > out.png\n  echo '{\"x\": 1}' | kubectl kruntimes invoke run/handler --data -"
    )]
    Invoke(InvokeArgs),
    /// Print a Run's output (stdout and stderr, as its runtimed keeps them on the Pod's
    /// workspace volume), read through the Run's log subresource (subresources.kruntimes.io)
    /// like invoke.
    #[command(
        after_help = "Examples:\n  kubectl kruntimes logs run/train-1\n  kubectl kruntimes logs run/train-1 -n team-a -f\n  kubectl kruntimes logs run train-1 --tail 20"
    )]
    Logs(LogsArgs),
    /// List a Run's stored artifacts (status.artifactRefs), or download them through the Run's
    /// artifacts subresource (subresources.kruntimes.io) like logs.
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
    /// Workflows: trigger one (a WorkflowRun of its jobs, its inputs bound) and, with --wait,
    /// follow its jobs until it ends.
    #[command(subcommand, visible_alias = "wf")]
    Workflow(WorkflowCommand),
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

/// `version`: how to print it.
#[derive(Debug, Clone, Args)]
pub struct VersionArgs {
    /// Output format: `text`, `json`, `yaml`, `jsonpath=TEMPLATE` or
    /// `custom-columns=HEADER:PATH,…`.
    #[arg(short = 'o', long, default_value = "text", value_parser = version_format, value_name = "FORMAT")]
    pub output: OutputFormat,
}

/// `version -o`: `text` (its own form, as `table` elsewhere) or a machine format; it names no
/// object, so no `name`.
fn version_format(value: &str) -> Result<OutputFormat, String> {
    match value {
        "text" => Ok(OutputFormat::Table),
        "json" | "yaml" => OutputFormat::parse(value),
        other if other.starts_with("jsonpath=") || other.starts_with("custom-columns=") => {
            OutputFormat::parse(other)
        }
        other => Err(format!(
            "unknown output format {other:?} for version; use one of: text, json, yaml, jsonpath=TEMPLATE, custom-columns=HEADER:PATH,…"
        )),
    }
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
    /// [`crate::util::process::die_on_closed_stdout`]), rather than serving until stopped.
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
            | Command::Uninstall(_)
            | Command::Explain(_)
            | Command::Invoke(_)
            | Command::Logs(_)
            | Command::Artifacts(_)
            | Command::Cancel(_)
            | Command::Run(_)
            | Command::Wait(_)
            | Command::Workflow(_)
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
    /// How long to wait for the CRDs to become Established and, with --wait, for the
    /// scheduler to roll out (e.g. 60s, 2m).
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Only the cluster-wide part: the CRDs, the user and runtimed ClusterRoles and the
    /// admission policies; no scheduler (run it with `scheduler run`, or deploy it with the
    /// chart or `kubectl apply -k deploy/`).
    #[arg(long)]
    pub crds_only: bool,
    /// The image of the scheduler, and of the runtimed that Runtime Pods copy from it.
    #[arg(long, default_value = DEFAULT_IMAGE, value_name = "IMAGE", conflicts_with = "crds_only")]
    pub image: String,
    /// Wait until the scheduler has rolled out (`--wait=false`: return once it is applied).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub wait: bool,
}

/// `uninstall`: how much to remove.
#[derive(Debug, Clone, Args)]
pub struct UninstallArgs {
    /// Also delete the CRDs: every Run, Runtime and PersistentWorkspace in every namespace
    /// (with their Runtime Pods), runtimed's ClusterRole and the admission policies.
    #[arg(long)]
    pub delete_crds: bool,
    /// Do not ask for confirmation.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// How long to wait for the CRDs and their objects to be gone (with --delete-crds).
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// `explain run/NAME`: which Run to explain and how to print it.
#[derive(Debug, Clone, Args)]
pub struct ExplainArgs {
    /// The Run: `run/NAME`, `runs/NAME`, or `run NAME`; or a WorkflowRun, `workflowrun/NAME`
    /// (`wfr/NAME`): its jobs, the Run each step is, and why each waits.
    #[arg(value_name = "run/NAME")]
    pub target: String,
    /// The Run's (or WorkflowRun's) name, when the first argument is its kind.
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// Output format: `table`, `wide` (every advertised resource), `json`, `yaml` (a
    /// documented structure for scripts), `name`, `jsonpath=TEMPLATE` or
    /// `custom-columns=HEADER:PATH,…` (one row per Run).
    #[arg(short = 'o', long, default_value = "table", value_parser = OutputFormat::parse, value_name = "FORMAT")]
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
    /// Output format of the list: `table`, `wide`, `json`, `yaml`, `name` (artifact names),
    /// `jsonpath=TEMPLATE` or `custom-columns=HEADER:PATH,…` (one row per artifact).
    #[arg(short = 'o', long, default_value = "table", value_parser = OutputFormat::parse, value_name = "FORMAT")]
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
    /// Only the Runtimes this label selector selects (`-l team=a,tier!=batch`, as kubectl).
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Output format: `table` (the pool view; `wide` is the same), `json` or `yaml` (a
    /// documented structure for scripts and dashboards), `name` (the Runtimes),
    /// `jsonpath=TEMPLATE` or `custom-columns=HEADER:PATH,…` (one row per Runtime).
    #[arg(short = 'o', long, default_value = "table", value_parser = OutputFormat::parse, value_name = "FORMAT")]
    pub output: OutputFormat,
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

/// `-o`: how a command prints its result (kubectl's formats).
pub use crate::output::Format as OutputFormat;

pub use crate::output::ColorChoice;

#[cfg(test)]
mod tests;
