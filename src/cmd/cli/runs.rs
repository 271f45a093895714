//! The flags of the commands that make, wait for and cancel Runs: `run`, `wait`, `cancel`,
//! `workflow trigger` (a WorkflowRun's Runs), and the `-o`/`--dry-run` choices of an object a
//! command makes. Definitions only: nothing here
//! talks to a cluster.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use crate::util::duration::parse_duration;

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
    /// Print the Run: `name`, `yaml`, `json`, `jsonpath=TEMPLATE` or
    /// `custom-columns=HEADER:PATH,…` (default: `run.kruntimes.io/NAME created`).
    #[arg(short = 'o', long, value_parser = crate::output::Format::parse_object, value_name = "FORMAT")]
    pub output: Option<crate::output::Format>,
    /// `client`: print it without sending it; `server`: the API server checks it (admission
    /// policies included) and stores nothing; `none`: create it.
    #[arg(long, value_enum, default_value_t = DryRun::None, value_name = "MODE")]
    pub dry_run: DryRun,
    /// The task's command and its arguments (spec.mode.task.args), after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
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
    /// `condition=Finished` is met by every end), `ended` (any end, or deleted) or `delete`.
    #[arg(long = "for", default_value = "phase=Succeeded", value_parser = crate::api::wait::parse_for, value_name = "CONDITION")]
    pub wanted: crate::api::wait::For,
    /// How long to wait.
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Duration,
}

#[derive(Debug, Subcommand)]
pub enum WorkflowCommand {
    /// Trigger a Workflow: create a WorkflowRun of its jobs with its inputs bound (--set), as
    /// the Go kruntimes `krt workflow trigger` does.
    #[command(
        after_help = "Examples:\n  kubectl kruntimes workflow trigger build --set message=hello\n  kubectl kruntimes wf trigger deploy --name deploy-42 --set env=prod --wait --timeout 30m"
    )]
    Trigger(WorkflowTriggerArgs),
    /// Cancel WorkflowRuns: set spec.cancelRequested, which the workflow controller passes to
    /// every Run and nested WorkflowRun still running, as the Go kruntimes
    /// `krt workflowrun cancel` does.
    #[command(
        after_help = "Examples:\n  kubectl kruntimes workflow cancel release-42\n  kubectl kruntimes wf cancel release-42 release-43 --wait"
    )]
    Cancel(WorkflowCancelArgs),
}

/// `workflow cancel NAME…`: which WorkflowRuns, and whether to wait for their end.
#[derive(Debug, Clone, Args)]
pub struct WorkflowCancelArgs {
    /// The WorkflowRuns (in the namespace): `NAME…` or `workflowrun/NAME…`.
    #[arg(value_name = "WORKFLOWRUN", required = true)]
    pub names: Vec<String>,
    /// Wait until every cancelled WorkflowRun has ended.
    #[arg(short = 'w', long)]
    pub wait: bool,
    /// How long --wait waits.
    #[arg(long, default_value = "5m", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Duration,
}

/// `workflow trigger NAME`: the Workflow, its inputs, and whether to follow the run.
#[derive(Debug, Clone, Args)]
pub struct WorkflowTriggerArgs {
    /// The Workflow (in the namespace).
    #[arg(value_name = "WORKFLOW")]
    pub workflow: String,
    /// The WorkflowRun's name (default: generated from the Workflow's).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// An input of the Workflow, KEY=VALUE (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Follow its jobs until it ends; exit non-zero unless it Succeeded.
    #[arg(short = 'w', long)]
    pub wait: bool,
    /// How long --wait waits.
    #[arg(long, default_value = "24h", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Duration,
}
