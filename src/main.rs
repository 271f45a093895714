//! `kubectl-kruntimes`: parse, set up logging, dispatch. Errors print as one line.

use std::process::ExitCode;

use clap::Parser;
use kruntimes::cli::{Cli, Command, SchedulerCommand};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    kruntimes::logging::init(
        cli.global.verbose,
        cli.global.log_format,
        cli.command.default_log_filter(),
    );
    let result = match &cli.command {
        Command::Install(args) => kruntimes::install::exec(&cli.global, args).await,
        Command::Runtimed(args) => kruntimes::runtimed::exec(&cli.global, args).await,
        Command::Explain(args) => kruntimes::explain::exec(&cli.global, args).await,
        Command::Scheduler(SchedulerCommand::Run(args)) => {
            kruntimes::scheduler::run::exec(&cli.global, args).await
        }
        Command::Dev(args) => kruntimes::dev::exec(&cli.global, args).await,
        Command::Completion(args) => {
            print!("{}", kruntimes::cli::completion_script(args.shell));
            Ok(())
        }
        Command::Version => {
            println!("kubectl-kruntimes {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
