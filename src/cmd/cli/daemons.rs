//! The `scheduler` command group. The flags of the two long-running commands are their own
//! rooms' ([`crate::manager::SchedulerRunArgs`], [`crate::runtimed::RuntimedArgs`]), so the
//! daemons never import the CLI. Definitions only: nothing here talks to a cluster.

use clap::Subcommand;

pub use crate::manager::SchedulerRunArgs;

#[derive(Debug, Subcommand)]
pub enum SchedulerCommand {
    /// Run the Runtime controller and the scheduler, with leader election and metrics.
    #[command(
        after_help = "Examples:\n  kubectl kruntimes scheduler run\n  kubectl kruntimes scheduler run --leader-elect=false --workers 8 --log-format json"
    )]
    Run(Box<SchedulerRunArgs>),
}
