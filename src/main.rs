//! `kubectl-kruntimes`: parse, set up logging, dispatch. Errors print as one line.

use std::process::ExitCode;

use clap::Parser;
use kruntimes::cmd::cli::{Cli, Command, CompletionShell, SchedulerCommand};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.command.prints_and_ends() {
        kruntimes::util::process::die_on_closed_stdout();
    }
    kruntimes::telemetry::logging::init(
        cli.global.verbose,
        cli.global.log_format,
        cli.command.default_log_filter(),
    );
    let result = match &cli.command {
        Command::Install(args) => kruntimes::cmd::install::exec(&cli.global, args).await,
        Command::Uninstall(args) => {
            kruntimes::cmd::install::uninstall::exec(&cli.global, args).await
        }
        Command::Runtimed(args) => kruntimes::runtimed::exec(&cli.global, args).await,
        Command::Explain(args) => kruntimes::cmd::explain::exec(&cli.global, args).await,
        Command::Status(args) => kruntimes::cmd::status::exec(&cli.global, args).await,
        Command::Invoke(args) => kruntimes::cmd::invoke::exec(&cli.global, args).await,
        Command::Logs(args) => kruntimes::cmd::logs::exec(&cli.global, args).await,
        Command::Artifacts(args) => kruntimes::cmd::artifacts::exec(&cli.global, args).await,
        Command::Scheduler(SchedulerCommand::Run(args)) => {
            kruntimes::manager::exec(&cli.global, args).await
        }
        Command::Dev(args) => kruntimes::cmd::dev::exec(&cli.global, args).await,
        Command::Completion(args) => {
            completion(args.shell);
            Ok(())
        }
        Command::Cancel(args) => kruntimes::cmd::cancel::exec(&cli.global, args).await,
        Command::Run(args) => kruntimes::cmd::submit::exec(&cli.global, args).await,
        Command::Wait(args) => kruntimes::cmd::wait::exec(&cli.global, args).await,
        Command::Workflow(command) => kruntimes::cmd::workflow::exec(&cli.global, command).await,
        Command::Version(args) => kruntimes::cmd::version::exec(args),
        Command::Gen(args) => kruntimes::cmd::generate::exec(args),
        Command::Complete(args) => kruntimes::cmd::complete::exec(args).await,
        Command::CopyBinary(args) => kruntimes::cmd::copy_binary::exec(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The exit code of a Run's task (`run --wait`), its reason already said.
        Err(err) if err.is::<kruntimes::cmd::submit::ExitWith>() => {
            let exit = err
                .downcast_ref::<kruntimes::cmd::submit::ExitWith>()
                .expect("just checked");
            eprintln!("{exit}");
            ExitCode::from(exit.code)
        }
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn completion(shell: CompletionShell) {
    use clap_complete::Shell;
    let shell = match shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
        CompletionShell::Elvish => Shell::Elvish,
        CompletionShell::Powershell => Shell::PowerShell,
        CompletionShell::Kubectl => {
            use std::io::IsTerminal as _;
            print!("{}", kruntimes::cmd::generate::kubectl_hook());
            let hook = kruntimes::cmd::generate::KUBECTL_HOOK_NAME;
            let how = format!(
                "save this as an executable named {hook} in a directory on your PATH (next to kubectl-kruntimes), e.g.\n  kubectl kruntimes completion kubectl > ~/.local/bin/{hook} && chmod +x ~/.local/bin/{hook}\nthen `kubectl kruntimes <TAB>` completes subcommands, flags and `explain run/<TAB>` (kubectl 1.26 or newer)."
            );
            if std::io::stdout().is_terminal() {
                println!("\n# {}", how.replace('\n', "\n# "));
            } else {
                eprintln!("{how}");
            }
            return;
        }
    };
    print!("{}", kruntimes::cmd::cli::completion_script(shell));
}
