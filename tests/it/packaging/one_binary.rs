//! The integration tests are one binary (`tests/it/main.rs`): no other test target for cargo
//! to find, every suite file declared in it, and no test written with an attribute that
//! `harness = false` compiles to nothing (`#[test]`, `#[tokio::test]`: such a test would never
//! run, and nothing would say so). The harness itself is run as `cargo test` runs it: each
//! suite in a process of its own, chosen by libtest's filters.

use std::path::PathBuf;
use std::process::Command;

use super::{files_under, repo};

/// What keeps a test of `tests/it/` from running: a suite file `main.rs` does not declare, a
/// test target of its own, or a test attribute libtest would need. `files` are the files under
/// `tests/` (relative to it) with their code.
fn unrun(main_rs: &str, files: &[(PathBuf, String)]) -> Vec<String> {
    let declared = |suite: &str| {
        main_rs
            .lines()
            .any(|line| line.trim() == format!("mod {suite};"))
    };
    let mut found = Vec::new();
    for (path, code) in files {
        let parts: Vec<&str> = path.iter().filter_map(|p| p.to_str()).collect();
        match parts.as_slice() {
            [file] if file.ends_with(".rs") => {
                found.push(format!("tests/{file}: a test binary of its own"));
            }
            [dir, "main.rs"] if *dir != "it" => {
                found.push(format!("tests/{dir}/main.rs: a test binary of its own"));
            }
            ["it", file] if file.ends_with(".rs") && *file != "main.rs" => {
                let suite = file.trim_end_matches(".rs");
                if !declared(suite) {
                    found.push(format!("tests/it/{file}: not declared in tests/it/main.rs"));
                }
            }
            _ => {}
        }
        if parts.first() == Some(&"it") && path.extension().is_some_and(|e| e == "rs") {
            for (n, line) in code.lines().enumerate() {
                let line = line.trim();
                if line == "#[test]" || line.starts_with("#[tokio::test") {
                    found.push(format!(
                        "tests/{}:{}: `{line}` never runs here; write #[testkit::test]",
                        path.display(),
                        n + 1
                    ));
                }
            }
        }
    }
    found
}

fn tests_files() -> Vec<(PathBuf, String)> {
    let tests = repo().join("tests");
    files_under(&tests)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| {
            let code = std::fs::read_to_string(tests.join(&p)).unwrap();
            (p, code)
        })
        .collect()
}

#[testkit::test]
fn every_integration_test_is_in_the_one_binary_and_runs() {
    let main_rs = std::fs::read_to_string(repo().join("tests/it/main.rs")).unwrap();
    let files = tests_files();
    assert!(files.len() > 40, "read {} files of tests/", files.len());
    assert_eq!(unrun(&main_rs, &files), Vec::<String>::new());
    let manifest = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    assert_eq!(
        manifest.matches("[[test]]").count(),
        1,
        "Cargo.toml declares one test target"
    );
}

#[testkit::test]
fn the_check_finds_a_stray_binary_an_undeclared_suite_and_a_test_that_never_runs() {
    let file = |p: &str, code: &str| (PathBuf::from(p), code.to_string());
    let main_rs = "mod faults;\nmod queue;\n";
    let files = [
        file("it/main.rs", main_rs),
        file("it/faults.rs", "#[testkit::test]\nfn a() {}\n"),
        file(
            "it/queue.rs",
            "  #[tokio::test(flavor = \"multi_thread\")]\nasync fn b() {}\n",
        ),
        file("it/fairness.rs", "#[testkit::test]\nfn c() {}\n"),
        file("it/faults/kill.rs", "    #[test]\n    fn d() {}\n"),
        file("stray.rs", "fn main() {}\n"),
        file("other/main.rs", "fn main() {}\n"),
        file("runtime_server/server.rs", "#[test]\nfn not_a_suite() {}\n"),
    ];
    assert_eq!(
        unrun(main_rs, &files),
        [
            "tests/it/queue.rs:1: `#[tokio::test(flavor = \"multi_thread\")]` never runs here; write #[testkit::test]",
            "tests/it/fairness.rs: not declared in tests/it/main.rs",
            "tests/it/faults/kill.rs:1: `#[test]` never runs here; write #[testkit::test]",
            "tests/stray.rs: a test binary of its own",
            "tests/other/main.rs: a test binary of its own",
        ]
    );
}

/// The binary this test runs in, as cargo runs it, with `args`; its stdout and exit status.
fn itself(args: &[&str]) -> (String, std::process::ExitStatus) {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(&exe)
        .args(args)
        .env_remove("KRUNTIMES_TEST_SUITE")
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status,
    )
}

fn listed(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .collect()
}

#[testkit::test]
fn the_harness_lists_every_suite_and_runs_a_chosen_test_in_its_suites_process() {
    let main_rs = std::fs::read_to_string(repo().join("tests/it/main.rs")).unwrap();
    let suites: Vec<&str> = main_rs
        .lines()
        .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
        .collect();

    // Every test, each under a declared suite, every suite with tests (the cluster's scenarios
    // too, though that suite runs itself).
    let (all, status) = itself(&["--list"]);
    assert!(status.success());
    let all = listed(&all);
    for suite in &suites {
        assert!(
            all.iter().any(|t| t.starts_with(&format!("{suite}::"))),
            "no test of the suite {suite} is listed"
        );
    }
    assert!(
        all.iter()
            .all(|t| suites.contains(&t.split("::").next().unwrap()))
    );
    assert!(all.contains(
        &"cluster::deploy_runs_two_scheduler_replicas_with_one_leader_and_metrics_for_authorised_scrapers"
    ));

    // A filter chooses by `suite::test`, as libtest's does.
    let (faults, _) = itself(&["--list", "faults::"]);
    let faults = listed(&faults);
    assert!(!faults.is_empty() && faults.iter().all(|t| t.starts_with("faults::")));
    assert_eq!(
        faults.len(),
        all.iter().filter(|t| t.contains("faults::")).count()
    );

    // One test of another suite, run as `cargo test` runs the binary: in that suite's process,
    // alone.
    let chosen = "packaging::layering::no_file_of_src_is_over_600_lines";
    let (out, status) = itself(&["--exact", chosen]);
    assert!(status.success(), "{out}");
    assert!(
        out.contains("suite packaging (a process of its own)"),
        "{out}"
    );
    assert!(out.contains(&format!("test {chosen} ... ok")), "{out}");
    assert!(out.contains("test result: ok. 1 passed;"), "{out}");
    assert!(out.contains("suites: 1 passed; 0 failed"), "{out}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("suite ")).count(),
        1,
        "one suite's process started: {out}"
    );

    // A process started for a suite the binary does not have fails, saying so.
    let out = Command::new(std::env::current_exe().unwrap())
        .env("KRUNTIMES_TEST_SUITE", "nosuch")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("KRUNTIMES_TEST_SUITE=nosuch names no suite"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
