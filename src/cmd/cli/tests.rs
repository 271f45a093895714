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
    assert!(completion_script(clap_complete::Shell::Zsh).contains("#compdef kubectl-kruntimes"));
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
        "-v=4",
    ])
    .unwrap();
    assert_eq!(cli.global.namespace.as_deref(), Some("team-a"));
    assert_eq!(cli.global.context.as_deref(), Some("c"));
    assert_eq!(cli.global.verbose, 4);
    for (args, level) in [
        (&["k", "status", "-v"][..], 2),
        (&["k", "status", "--v=6"][..], 6),
        (&["k", "status", "-v", "run/x"][..], 2),
        (&["k", "status", "--verbose=1"][..], 1),
        (&["k", "status"][..], 0),
    ] {
        let cli = Cli::try_parse_from(args).unwrap();
        assert_eq!(cli.global.verbose, level, "{args:?}");
    }
    let err = Cli::try_parse_from(["k", "status", "-v=11"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("11"), "{err}");
}
