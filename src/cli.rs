//! Command-line definitions: every clap struct of `kubectl-kruntimes`, one per subcommand.
//!
//! Flags follow kubectl's conventions. Nothing here talks to a cluster.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// kruntimes: schedule Runs onto Runtime Pods by logical capacity.
#[derive(Debug, Parser)]
#[command(name = "kubectl-kruntimes", bin_name = "kubectl kruntimes", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags shared by every subcommand, spelled like kubectl's.
#[derive(Debug, Clone, Args)]
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
    /// More log output; repeat for more (-v info, -vv debug, -vvv trace).
    #[arg(short = 'v', long = "verbose", global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Install or update the Runtime and Run CRDs (server-side apply).
    Install(InstallArgs),
    /// Print the version.
    Version,
}

impl Command {
    /// Long-running commands log the client library's own errors; one-shot commands report a
    /// single error line instead.
    pub fn is_daemon(&self) -> bool {
        !matches!(self, Command::Install(_) | Command::Version)
    }
}

#[derive(Debug, Clone, Args)]
pub struct InstallArgs {
    /// Write the two CRDs as YAML to stdout and touch no cluster.
    #[arg(long, conflicts_with_all = ["dry_run", "yes"])]
    pub print: bool,
    /// Ask the API server to validate the apply without persisting anything.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// How long to wait for the CRDs to become Established (e.g. 60s, 2m).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// Parses a kubectl-style duration: `30s`, `2m`, `1h30m`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let parsed: jiff::SignedDuration = s
        .parse()
        .map_err(|_| format!("{s:?} is not a duration; use a value such as 30s, 2m or 1h"))?;
    parsed
        .try_into()
        .map_err(|_| format!("{s:?} is negative; use a positive duration such as 30s"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations_accept_kubectl_forms_and_refuse_nonsense() {
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert!(parse_duration("soon").unwrap_err().contains("\"soon\" is not a duration"));
    }

    #[test]
    fn global_flags_work_after_the_subcommand() {
        let cli = Cli::try_parse_from(["k", "install", "--yes", "-n", "team-a", "--context", "c", "-vv"]).unwrap();
        assert_eq!(cli.global.namespace.as_deref(), Some("team-a"));
        assert_eq!(cli.global.context.as_deref(), Some("c"));
        assert_eq!(cli.global.verbose, 2);
    }
}
