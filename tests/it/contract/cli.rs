//! The CLI over the contract: `run --wait` ends as the task did and `wait` as the Runs did.

use super::*;

/// `kubectl kruntimes run --wait` ends as the task did (its exit code, the reason on stderr);
/// `wait` fails at once on a Run that ended without meeting `--for`, and `--for=condition=Finished`
/// is met by every end; `--dry-run=server` stores nothing.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_and_wait_from_the_cli_end_as_the_runs_did() {
    let pool = Scenario::start_with("contract-cli", Backend::Child).await;
    let ns = &pool.ns;
    let cli = |args: &[&str]| {
        // The namespace first: after `--` it would be the task's.
        let out = support::kruntimes()
            .args(["-n", &ns.name])
            .args(args)
            .output()
            .expect("run kubectl-kruntimes");
        let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };

    let (code, stdout, stderr) = cli(&[
        "run", "ok", "-r", "pool", "--wait", "--", "sh", "-c", "exit 0",
    ]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.starts_with("run.kruntimes.io/ok created\n"),
        "{stdout}"
    );

    let (code, stdout, stderr) = cli(&[
        "run", "fails", "-r", "pool", "-w", "--", "sh", "-c", "exit 3",
    ]);
    assert_eq!(code, Some(3), "the task's exit code: {stdout}{stderr}");
    assert!(
        stderr.contains("error: run/fails: it ended Failed (NonZeroExitCode)"),
        "{stderr}"
    );

    let (code, stdout, stderr) = cli(&["wait", "run/ok", "run/fails", "--timeout", "5s"]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert_eq!(stdout, "run.kruntimes.io/ok condition met\n");
    assert!(
        stderr.contains("run/fails will never meet --for: it ended Failed"),
        "{stderr}"
    );
    let (code, stdout, stderr) = cli(&["wait", "run", "ok", "fails", "--for=condition=Finished"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(
        stdout,
        "run.kruntimes.io/ok condition met\nrun.kruntimes.io/fails condition met\n"
    );

    let (code, stdout, stderr) = cli(&[
        "run",
        "dry",
        "-r",
        "pool",
        "--dry-run=server",
        "-o",
        "name",
        "--",
        "true",
    ]);
    assert_eq!(
        (code, stdout.as_str()),
        (Some(0), "run.kruntimes.io/dry\n"),
        "{stderr}"
    );
    let (code, _, stderr) = cli(&["wait", "run/dry"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("run/dry not found"), "{stderr}");
}
