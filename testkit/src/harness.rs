//! The harness of the one integration test binary (`tests/it/main.rs`, `harness = false`): every
//! test is registered by `#[testkit::test]`, and each suite (a module of `tests/it/`) runs in a
//! process of its own, one suite after another, as separate test binaries would.
//!
//! A suite owns a control plane ([`crate::control_plane`] is one per process), and eleven of
//! them change what is cluster-wide on theirs (faults, feature gates, the oldest
//! kube-apiserver, CRDs and admission policies installed and removed); a process per suite
//! keeps each alone on its own, while the harness and every suite are compiled and linked
//! once. The binary re-runs itself for a suite (`KRUNTIMES_TEST_SUITE=NAME`, the same
//! arguments), and that child runs the suite's tests with libtest's arguments, output and exit
//! code (`libtest-mimic`), or the suite's own `main` when it registers one (the single-node
//! cluster's, which runs its scenarios in order on one cluster).
//!
//! It owns registration, selection and the processes; it knows nothing of what a test does.

use std::collections::BTreeMap;
use std::future::Future;
use std::process::{Command, ExitCode};

#[doc(hidden)]
pub use inventory;
use libtest_mimic::{Arguments, Trial};

/// Names the suite a child process runs.
const SUITE: &str = "KRUNTIMES_TEST_SUITE";

/// A test, as `#[testkit::test]` registers it.
pub struct Test {
    /// `module_path!()` where it is written: the crate, then the suite.
    pub module: &'static str,
    pub name: &'static str,
    pub run: fn(),
}
inventory::collect!(Test);

/// A suite that runs itself: the harness only chooses it and gives it a process.
pub struct Suite {
    /// `module_path!()` of the suite's module.
    pub module: &'static str,
    /// The names of its tests, for `--list` and for filters.
    pub tests: fn() -> Vec<&'static str>,
    /// Runs the tests the process's arguments choose (libtest's, as [`Arguments`] reads them).
    pub main: fn() -> ExitCode,
}
inventory::collect!(Suite);

/// The Tokio runtime an `async` test runs on, one per test as under `#[tokio::test]`.
pub enum Flavor {
    CurrentThread,
    MultiThread(Option<usize>),
}

/// Runs an `async` test to its end on a runtime of its own.
pub fn block_on(flavor: Flavor, test: impl Future<Output = ()>) {
    let mut builder = match flavor {
        Flavor::CurrentThread => tokio::runtime::Builder::new_current_thread(),
        Flavor::MultiThread(workers) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            if let Some(workers) = workers {
                builder.worker_threads(workers);
            }
            builder
        }
    };
    let runtime = builder
        .enable_all()
        .build()
        .expect("the test's Tokio runtime");
    // On the heap: a test's future can be larger than a test thread's stack wants to hold.
    runtime.block_on(Box::pin(test));
}

/// The binary's `main`: runs every chosen suite in a process of its own, or, in such a
/// process, the suite it was started for.
pub fn main() -> ExitCode {
    let args = Arguments::from_args();
    let suites = suites();
    match std::env::var(SUITE) {
        Ok(name) => match suites.get(name.as_str()) {
            Some(suite) => suite.run(&args),
            None => {
                eprintln!("error: {SUITE}={name} names no suite of this binary");
                ExitCode::FAILURE
            }
        },
        Err(_) if args.list => {
            let mut count = 0;
            for name in suites.values().flat_map(|s| s.tests()) {
                if chosen(&args, &name) {
                    println!("{name}: test");
                    count += 1;
                }
            }
            println!("\n{count} tests, 0 benchmarks");
            ExitCode::SUCCESS
        }
        Err(_) => run_all(&args, &suites),
    }
}

/// The suites of this binary by name, each with its tests or its own `main`.
enum Registered {
    Tests(Vec<&'static Test>),
    Main(&'static Suite),
}

impl Registered {
    /// The full names of its tests: `suite::…::test`.
    fn tests(&self) -> Vec<String> {
        match self {
            Registered::Tests(tests) => tests.iter().map(|t| full_name(t)).collect(),
            Registered::Main(suite) => {
                let suite_name = suite_of(suite.module);
                (suite.tests)()
                    .into_iter()
                    .map(|t| format!("{suite_name}::{t}"))
                    .collect()
            }
        }
    }

    fn run(&self, args: &Arguments) -> ExitCode {
        match self {
            Registered::Main(suite) => (suite.main)(),
            Registered::Tests(tests) => {
                let trials = tests
                    .iter()
                    .map(|test| {
                        let run = test.run;
                        Trial::test(full_name(test), move || {
                            run();
                            Ok(())
                        })
                    })
                    .collect();
                libtest_mimic::run(args, trials).exit_code()
            }
        }
    }
}

fn suites() -> BTreeMap<&'static str, Registered> {
    let mut suites = BTreeMap::new();
    for test in inventory::iter::<Test> {
        match suites
            .entry(suite_of(test.module))
            .or_insert_with(|| Registered::Tests(Vec::new()))
        {
            Registered::Tests(tests) => tests.push(test),
            Registered::Main(suite) => panic!(
                "{}: the suite {} runs itself; register its tests with it",
                test.name, suite.module
            ),
        }
    }
    for suite in inventory::iter::<Suite> {
        let name = suite_of(suite.module);
        if suites.insert(name, Registered::Main(suite)).is_some() {
            panic!("the suite {name} registers both tests and a main of its own");
        }
    }
    for registered in suites.values_mut() {
        if let Registered::Tests(tests) = registered {
            tests.sort_by_key(|t| full_name(t));
        }
    }
    suites
}

fn run_all(args: &Arguments, suites: &BTreeMap<&'static str, Registered>) -> ExitCode {
    let exe = std::env::current_exe().expect("the test binary's own path");
    let mut failed = Vec::new();
    let mut ran = 0;
    for (name, suite) in suites {
        if !suite.tests().iter().any(|t| chosen(args, t)) {
            continue;
        }
        println!("\nsuite {name} (a process of its own)");
        ran += 1;
        let status = Command::new(&exe)
            .args(std::env::args_os().skip(1))
            .env(SUITE, name)
            .status();
        match status {
            Ok(status) if status.success() => {}
            Ok(status) => failed.push(format!("{name} ({status})")),
            Err(e) => failed.push(format!("{name} (not started: {e})")),
        }
    }
    println!(
        "\nsuites: {} passed; {} failed{}",
        ran - failed.len(),
        failed.len(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(": {}", failed.join(", "))
        }
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(101)
    }
}

/// Whether libtest's arguments choose the test of this full name: the filter, `--exact` and
/// `--skip` as libtest reads them (no test here is `#[ignore]`d, so `--ignored` chooses none).
fn chosen(args: &Arguments, name: &str) -> bool {
    let matches = |pattern: &str| {
        if args.exact {
            name == pattern
        } else {
            name.contains(pattern)
        }
    };
    !args.ignored
        && args.filter.as_deref().is_none_or(matches)
        && !args.skip.iter().any(|s| matches(s))
}

/// `it::contract::cli` → `contract::cli` (the crate's name is not part of a test's name).
fn in_crate(module: &str) -> &str {
    module.split_once("::").map_or("", |(_, rest)| rest)
}

/// The suite of a module: its first segment below the crate.
fn suite_of(module: &str) -> &str {
    let module = in_crate(module);
    module.split_once("::").map_or(module, |(suite, _)| suite)
}

fn full_name(test: &Test) -> String {
    format!("{}::{}", in_crate(test.module), test.name)
}

/// Whether the process's arguments choose the test `name` of the suite whose module is
/// `module`: for a suite that runs itself, so that it reads a filter as the harness does.
pub fn is_chosen(module: &str, name: &str) -> bool {
    chosen(
        &Arguments::from_args(),
        &format!("{}::{name}", suite_of(module)),
    )
}
