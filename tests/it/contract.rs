//! The Runtime Server call on the real control plane: runtimed with `--runtime-server` executes
//! task Runs through the tests' runtime server (`tests/runtime_server/server.rs`, written from
//! the contract's proto) instead of as its own processes. Exit codes and `$KRUNTIME_OUTPUTS`
//! reach the Run's status; a `runs: 2` Pod never has more than 2 executions at the server at once; every
//! terminal execution is forgotten; a runtimed killed with SIGKILL and started again re-attaches
//! to the execution that still runs, and the Run succeeds without running twice. Cancellation
//! and `spec.timeout` in every phase, for every backend (the tests' runtime server, the Go
//! project's Bash and Python runtime servers, runtimed's own child processes): each ends the
//! Run in its phase and frees its room at once. Re-attach runs on the Bash and Python runtime
//! servers too (on the Python one, a shell task is Python replacing itself with `sh`).
//! Function Runs and who may call runtimed's API are [`functions`]'; the CLI's `run --wait`
//! and `wait` over the same scenario are [`cli`]'s.

mod cli;
mod functions;
use testkit as support;

use std::collections::BTreeMap;
use std::time::Duration;

use kube::ResourceExt;

use kruntimes::api::status::reasons;
use kruntimes::api::{Run, RunPhase};
use kruntimes::testing::run;
use support::pool::{HEARTBEAT, Pool};
use support::world::{Backend, Create, RuntimeServerProcess, SchedulerProcess, TestNs, eventually};

/// A Runtime of one Pod with `runs: 2` and its runtimed ([`Pool`]), the tests' runtime
/// server, and the scheduler; runtimed drives the server (or, for the child-process backend,
/// runs Runs itself; the server then runs idle).
struct Scenario {
    pool: Pool,
    server: RuntimeServerProcess,
    /// runtimed's API (`/invoke/<run>`), as the gateway calls it.
    api: support::world::RuntimedApi,
    _scheduler: SchedulerProcess,
    /// The Pod's workspace volume for child processes: a restarted runtimed finds it as it
    /// was, as an emptyDir outlives a container's restart.
    _workspace: tempfile::TempDir,
}

impl std::ops::Deref for Scenario {
    type Target = Pool;

    fn deref(&self) -> &Pool {
        &self.pool
    }
}

impl std::ops::DerefMut for Scenario {
    fn deref_mut(&mut self) -> &mut Pool {
        &mut self.pool
    }
}

/// `strings` as the `&str`s a builder takes.
fn strs(strings: &[String]) -> Vec<&str> {
    strings.iter().map(String::as_str).collect()
}

impl Scenario {
    async fn start(prefix: &str) -> Self {
        Self::start_with(prefix, Backend::Ours).await
    }

    async fn start_with(prefix: &str, backend: Backend) -> Self {
        Self::start_with_args(prefix, backend, &[]).await
    }

    /// With more runtimed `flags`.
    async fn start_with_args(prefix: &str, backend: Backend, flags: &[&str]) -> Self {
        let ns = TestNs::new(prefix).await;
        let scheduler = SchedulerProcess::start(&ns.name, 4, None, prefix).await;
        // Child processes run beside an idle server of ours, whose counts show it unused.
        let server = match backend.server().await {
            Some(server) => server,
            None => RuntimeServerProcess::start().await,
        };
        let (probe, api_port) = (support::free_port(), support::free_port());
        let bind = format!("127.0.0.1:{probe}");
        let api_bind = format!("127.0.0.1:{api_port}");
        let workspace = tempfile::tempdir().expect("a workspace volume");
        let workspace_root = workspace.path().display().to_string();
        let mut args: Vec<&str> = HEARTBEAT.to_vec();
        args.extend(["--api-bind-address", api_bind.as_str()]);
        match backend {
            Backend::Ours | Backend::Bash | Backend::Python => {
                args.extend(server.flag());
                args.extend(["--health-probe-bind-address", bind.as_str()]);
            }
            Backend::Child => args.extend([
                "--shutdown-grace",
                "3s",
                "--workspace-root",
                workspace_root.as_str(),
            ]),
        }
        args.extend(flags);
        let pool = Pool::start(&ns, "pool", 1, &[("runs", 2)], &args).await;
        let api = support::world::RuntimedApi::of(&pool.ns, pool.pod(), api_port).await;
        Scenario {
            pool,
            server,
            api,
            _scheduler: scheduler,
            _workspace: workspace,
        }
    }

    /// Crashes runtimed (no shutdown, no status write) and starts it again.
    fn crash_and_restart(&mut self) {
        let pod = self.pod().to_string();
        self.pool.agents.get_mut(&pod).expect("a runtimed").crash();
        self.pool.restart(&pod);
    }

    /// Waits until every Run named in `names` is terminal; returns them by name.
    async fn terminal(&self, names: &[&str]) -> BTreeMap<String, Run> {
        self.ns.runs_ended(Duration::from_secs(90), names).await
    }
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_runs_execute_through_the_runtime_server_with_exit_codes_outputs_and_capacity() {
    let pool = Scenario::start("contract-tasks").await;
    let ns = &pool.ns;
    let watch = pool.overcommit_watch().await;

    run("hello")
        .runtime("pool")
        .task(&[
            "sh",
            "-c",
            "echo hello; echo greeting=hello > \"$KRUNTIME_OUTPUTS\"",
        ])
        .create(ns)
        .await;
    run("fails")
        .runtime("pool")
        .task(&["sh", "-c", "echo oops >&2; exit 3"])
        .create(ns)
        .await;
    // Both end before the held Runs come: made in the same second, Runs go in UID order, and
    // two held Runs placed first (a Pod that becomes available only after every Run was made)
    // would hold both slots at their gates while these waited behind them.
    pool.terminal(&["hello", "fails"]).await;
    // Six Runs that all want to run at once: each is held at its gate until the test opens
    // them, so however slowly they land, two fill the Pod's `runs: 2` while four wait.
    let held: Vec<String> = (0..6).map(|i| format!("held-{i}")).collect();
    for name in &held {
        pool.held(name).create(ns).await;
    }
    ns.wait_runs(
        Duration::from_secs(60),
        "two held Runs running and four waiting for room",
        |runs| {
            let of = |name: &str| runs.iter().find(|r| r.name_any() == name);
            let first_ended = ["hello", "fails"]
                .iter()
                .all(|name| of(name).is_some_and(|r| r.phase().is_terminal()));
            let in_phase = |phase: RunPhase| {
                held.iter()
                    .filter(|name| of(name).is_some_and(|r| r.phase() == phase))
                    .count()
            };
            // Pending because the scheduler found no room, not because it has not looked.
            let refused = held
                .iter()
                .filter_map(|name| of(name)?.status.as_ref()?.message.as_deref())
                .filter(|message| message.contains("Insufficient runs"))
                .count();
            (first_ended && in_phase(RunPhase::Running) == 2 && refused == 4).then_some(())
        },
    )
    .await;
    eventually(
        Duration::from_secs(30),
        "the two held Runs to execute at the server",
        async || match pool.server.counts().await {
            Ok(counts) if counts.running == 2 => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    pool.open("all");
    let mut names: Vec<&str> = vec!["hello", "fails"];
    names.extend(held.iter().map(String::as_str));
    let ended = pool.terminal(&names).await;
    let checked = watch.finish().await;

    let hello = &ended["hello"];
    let status = hello.status.as_ref().unwrap();
    assert_eq!(hello.phase(), RunPhase::Succeeded, "{status:?}");
    assert_eq!(status.exit_code, Some(0));
    assert_eq!(
        status.outputs,
        [("greeting".to_string(), "hello".to_string())].into(),
        "the outputs file's pairs, not stdout"
    );

    let fails = &ended["fails"];
    let status = fails.status.as_ref().unwrap();
    assert_eq!(fails.phase(), RunPhase::Failed, "{status:?}");
    assert_eq!(
        (status.exit_code, status.reason.as_deref()),
        (Some(3), Some(reasons::EXIT_CODE))
    );
    assert!(status.outputs.is_empty(), "{status:?}");
    for name in &held {
        assert_eq!(ended[name].phase(), RunPhase::Succeeded);
    }

    // The server's own view: every Run executed there exactly once, never more than the
    // Pod's `runs: 2` at once though six wanted to (two were held there side by side while
    // four waited), and each terminal execution was forgotten after its write.
    let counts = pool.server.counts().await.unwrap();
    assert_eq!(counts.started, names.len(), "{counts:?}");
    assert_eq!(counts.most_at_once, 2, "{counts:?}");
    eventually(
        Duration::from_secs(30),
        "every execution to be forgotten",
        async || match pool.server.executions().await {
            Ok(ids) if ids.is_empty() => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    eprintln!("contract-tasks: {counts:?}; {checked} Run events checked for overcommit");
}

/// A runtimed killed with SIGKILL and started again re-attaches to the execution that still
/// runs at `backend`'s server; the Run succeeds with its outputs, executed once.
async fn re_attaches_and_the_run_succeeds_once(prefix: &str, backend: Backend) {
    let mut pool = Scenario::start_with(prefix, backend).await;
    let ns = &pool.ns;
    // Held until the new runtimed has re-attached: the execution is still running at the
    // server however long the restart takes. Each start leaves a line in `starts`.
    let hold = pool.gates.hold("long");
    let starts = tempfile::tempdir().unwrap();
    let starts = starts.path().join("starts");
    let task = backend.shell(&format!(
        "echo start >> {}; {hold}; echo done; echo result=done > \"$KRUNTIME_OUTPUTS\"",
        starts.display()
    ));
    run("long")
        .runtime("pool")
        .task(&strs(&task))
        .create(ns)
        .await;
    ns.wait_runs(Duration::from_secs(60), "the Run to be Running", |runs| {
        runs.iter()
            .find(|r| r.name_any() == "long" && r.phase() == RunPhase::Running)
            .map(|_| ())
    })
    .await;
    eventually(
        Duration::from_secs(30),
        "the execution to run at the server",
        async || match starts.exists() {
            true => Ok(()),
            false => Err(format!("{} does not exist yet", starts.display())),
        },
    )
    .await;

    // A crash: no shutdown, no status write; the execution goes on at the server.
    pool.crash_and_restart();
    eventually(
        Duration::from_secs(30),
        "the new runtimed to re-attach to the execution",
        async || match pool.agent().log().contains("re-attached to execution") {
            true => Ok(()),
            false => Err(pool.agent().log_tail()),
        },
    )
    .await;
    pool.open("long");

    let ended = pool.terminal(&["long"]).await;
    let long = &ended["long"];
    let status = long.status.as_ref().unwrap();
    assert_eq!(
        long.phase(),
        RunPhase::Succeeded,
        "the Run was not re-attached: {status:?}\n{}",
        pool.agent().log_tail()
    );
    assert_eq!(
        status.outputs.get("result").map(String::as_str),
        Some("done"),
        "the re-attached runtimed read the outputs file: {status:?}"
    );
    let started = std::fs::read_to_string(&starts).unwrap();
    assert_eq!(started, "start\n", "the Run executed more than once");
    if backend == Backend::Ours {
        let counts = pool.server.counts().await.unwrap();
        assert_eq!(counts.started, 1, "the Run executed twice: {counts:?}");
    }
}

/// A runtimed killed with SIGKILL inside a claim's window (`--claim-delay 1h`: the task
/// runs, its Run is still Scheduled) and started again: an execution that still runs at
/// `backend`'s server is re-attached, never started twice; a process died with runtimed in a
/// real Pod (here it is left running as an orphan, outside any runtimed), so its attempt runs
/// again, at least once, claimed first. Either way the Run ends Succeeded once at attempt 1, its claim
/// (startTime) in that end, and no watch event shows the Pod over its `runs: 2`.
async fn a_crash_inside_the_claims_window(prefix: &str, backend: Backend) {
    let mut pool = Scenario::start_with_args(prefix, backend, &["--claim-delay", "1h"]).await;
    let ns = pool.ns.clone();
    let ns = &ns;
    let watch = pool.overcommit_watch().await;
    let hold = pool.gates.hold("held");
    let starts = tempfile::tempdir().unwrap();
    let starts = starts.path().join("starts");
    let task = backend.shell(&format!(
        "echo start >> {}; {hold}; echo result=done > \"$KRUNTIME_OUTPUTS\"",
        starts.display()
    ));
    run("held")
        .runtime("pool")
        .task(&strs(&task))
        .create(ns)
        .await;
    eventually(
        Duration::from_secs(60),
        "the task to start",
        async || match starts.exists() {
            true => Ok(()),
            false => Err(format!("{} does not exist yet", starts.display())),
        },
    )
    .await;
    assert_eq!(
        ns.get_run("held").await.phase(),
        RunPhase::Scheduled,
        "its claim is held: nothing written yet"
    );

    pool.crash_and_restart();
    let again = backend == Backend::Child;
    if again {
        eventually(
            Duration::from_secs(60),
            "the new runtimed to start the task again",
            async || match std::fs::read_to_string(&starts).unwrap().lines().count() {
                2 => Ok(()),
                n => Err(format!("{n} start(s)\n{}", pool.agent().log_tail())),
            },
        )
        .await;
    } else {
        eventually(
            Duration::from_secs(30),
            "the new runtimed to re-attach to the execution",
            async || match pool.agent().log().contains("re-attached to execution") {
                true => Ok(()),
                false => Err(pool.agent().log_tail()),
            },
        )
        .await;
    }
    // A process started again is claimed first (so a task that kills runtimed cannot hold
    // its Pod in a crash loop); an execution followed again has its claim held again.
    let expected = if again {
        RunPhase::Running
    } else {
        RunPhase::Scheduled
    };
    assert_eq!(ns.get_run("held").await.phase(), expected);
    pool.open("held");

    let ended = pool.terminal(&["held"]).await;
    let held = &ended["held"];
    let status = held.status.as_ref().unwrap();
    assert_eq!(
        (held.phase(), held.attempt()),
        (RunPhase::Succeeded, 1),
        "{status:?}\n{}",
        pool.agent().log_tail()
    );
    assert!(
        status.start_time.is_some(),
        "the claim came with the end: {status:?}"
    );
    assert_eq!(
        status.outputs.get("result").map(String::as_str),
        Some("done")
    );
    let started = std::fs::read_to_string(&starts).unwrap();
    let expected = if again { "start\nstart\n" } else { "start\n" };
    assert_eq!(started, expected, "how many times the task started");
    if backend == Backend::Ours {
        let counts = pool.server.counts().await.unwrap();
        assert_eq!(counts.started, 1, "the Run executed twice: {counts:?}");
    }
    let checked = watch.finish().await;
    eprintln!("{prefix}: {checked} Run events checked for overcommit");
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtimed_killed_inside_a_claims_window_re_attaches_and_the_run_succeeds_once() {
    a_crash_inside_the_claims_window("contract-window", Backend::Ours).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtimed_killed_inside_a_claims_window_re_attaches_on_the_go_projects_bash_runtime_server()
 {
    a_crash_inside_the_claims_window("contract-window-bash", Backend::Bash).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtimed_killed_inside_a_claims_window_runs_a_process_again_and_the_run_succeeds_once() {
    a_crash_inside_the_claims_window("contract-window-child", Backend::Child).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtimed_killed_and_started_again_re_attaches_and_the_run_succeeds_once() {
    re_attaches_and_the_run_succeeds_once("contract-restart", Backend::Ours).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtimed_killed_and_started_again_re_attaches_on_the_go_projects_bash_runtime_server() {
    re_attaches_and_the_run_succeeds_once("contract-restart-bash", Backend::Bash).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtimed_killed_and_started_again_re_attaches_on_the_go_projects_python_runtime_server()
{
    re_attaches_and_the_run_succeeds_once("contract-restart-py", Backend::Python).await;
}

/// What `kubectl kruntimes status` (the scheduler's own accounting, replayed) says the pool
/// `pool` holds now, per resource: nothing may be left held once every Run has ended.
fn held_by_status(ns: &TestNs) -> Vec<(String, Option<u64>)> {
    let out = support::kruntimes()
        .args(["status", "pool", "-n", &ns.name, "-o", "json"])
        .output()
        .expect("run kubectl-kruntimes status");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    report["runtimes"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap().to_string(), r["used"].as_u64()))
        .collect()
}

/// Cancel and timeout in every phase: a Pending Run is cancelled by the scheduler, a
/// Scheduled one by runtimed without ever executing, a Running one is stopped (the server's
/// Cancel, or SIGTERM for a child) and ends Cancelled; a Running one past its spec.timeout ends
/// Timeout. Each frees its room at once: the Run waiting behind it is placed, and at the end
/// a Run of the Pod's whole capacity runs, with no overcommit at any event.
async fn cancel_and_timeout_in_every_phase(prefix: &str, backend: Backend) {
    // Each claim written before its task starts: "Scheduled, not started" is a phase of its
    // own only then (a claim held back starts the task on the version runtimed sees, and the
    // thawed runtimed below sees the Scheduled one before the cancel). A held claim's cancel
    // is `a_task_cancelled_inside_its_claims_window_is_stopped_and_ends_cancelled_once`.
    let pool = Scenario::start_with_args(prefix, backend, &["--claim-delay", "0s"]).await;
    let ns = &pool.ns;
    let watch = pool.overcommit_watch().await;
    let sleep = backend.shell("sleep 60");
    let long = |name: &str| run(name).runtime("pool").task(&strs(&sleep));

    // Running: the Pod full with two long Runs, one of them with a 3 s timeout.
    long("to-cancel").create(ns).await;
    long("to-time-out").timeout("3s").create(ns).await;
    ns.wait_phase("to-cancel", RunPhase::Running, Duration::from_secs(60))
        .await;
    ns.wait_phase("to-time-out", RunPhase::Running, Duration::from_secs(60))
        .await;
    // Pending: no room for it.
    long("pending").create(ns).await;
    ns.cancel("pending").await;
    let pending = ns
        .wait_phase("pending", RunPhase::Cancelled, Duration::from_secs(30))
        .await;
    let status = pending.status.as_ref().unwrap();
    assert_eq!(
        status.reason.as_deref(),
        Some(reasons::CANCELLED),
        "{status:?}"
    );
    assert!(
        status.assigned_pod.is_none(),
        "a cancelled Pending Run was placed: {status:?}"
    );
    // As the Go project's e2e suite checks every cancelled Run (`assertCancelledRun`): both
    // Running and Completed are False with reason Cancelled, for a Run that never ran too.
    for type_ in ["Running", "Completed"] {
        let condition = status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .unwrap_or_else(|| panic!("no {type_} condition: {status:?}"));
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", reasons::CANCELLED),
            "{type_}"
        );
    }
    // Finished is True on every end, and every condition the end set names the generation
    // it was set at: the cancel changed the spec, so 2.
    let finished = status.conditions.iter().find(|c| c.type_ == "Finished");
    let finished = finished.unwrap_or_else(|| panic!("no Finished condition: {status:?}"));
    assert_eq!(
        (finished.status.as_str(), finished.reason.as_str()),
        ("True", reasons::CANCELLED)
    );
    assert_eq!(pending.metadata.generation, Some(2));
    for type_ in ["Running", "Completed", "Finished"] {
        let condition = status.conditions.iter().find(|c| c.type_ == type_).unwrap();
        assert_eq!(
            condition.observed_generation,
            Some(2),
            "{type_}: {status:?}"
        );
    }

    // Timeout: stopped after 3 s from its start, the room goes to the Run waiting for it.
    long("after-timeout").create(ns).await;
    let timed = ns
        .wait_phase("to-time-out", RunPhase::Timeout, Duration::from_secs(30))
        .await;
    let status = timed.status.as_ref().unwrap();
    assert_eq!(
        status.reason.as_deref(),
        Some(reasons::TIMEOUT),
        "{status:?}"
    );
    ns.wait_phase("after-timeout", RunPhase::Running, Duration::from_secs(30))
        .await;

    // Running, cancelled: stopped, and its room goes to the next Run.
    long("after-cancel").create(ns).await;
    ns.cancel("to-cancel").await;
    let cancelled = ns
        .wait_phase("to-cancel", RunPhase::Cancelled, Duration::from_secs(30))
        .await;
    assert_eq!(
        cancelled.status.as_ref().unwrap().reason.as_deref(),
        Some(reasons::CANCELLED)
    );
    ns.wait_phase("after-cancel", RunPhase::Running, Duration::from_secs(30))
        .await;

    // Scheduled, cancelled before runtimed claims it: runtimed is frozen while the scheduler
    // places it, so it is seen Scheduled and cancelled there.
    ns.cancel("after-timeout").await;
    ns.wait_phase(
        "after-timeout",
        RunPhase::Cancelled,
        Duration::from_secs(30),
    )
    .await;
    pool.agent().signal(kruntimes::util::process::Signal::Stop);
    long("scheduled").create(ns).await;
    ns.wait_phase("scheduled", RunPhase::Scheduled, Duration::from_secs(30))
        .await;
    ns.cancel("scheduled").await;
    pool.agent().signal(kruntimes::util::process::Signal::Cont);
    let scheduled = ns
        .wait_phase("scheduled", RunPhase::Cancelled, Duration::from_secs(30))
        .await;
    let status = scheduled.status.as_ref().unwrap();
    assert!(
        status.start_time.is_none(),
        "a cancelled Scheduled Run was started: {status:?}"
    );

    // Nothing leaked: once the last long Run is cancelled, a Run of the Pod's whole
    // capacity runs.
    ns.cancel("after-cancel").await;
    run("whole-pod")
        .runtime("pool")
        .requests(&[("runs", 2)])
        .task(&strs(&backend.shell("exit 0")))
        .create(ns)
        .await;
    ns.wait_phase("whole-pod", RunPhase::Succeeded, Duration::from_secs(60))
        .await;
    // `kubectl wait` returns on every end, a success and a failure alike, through Finished.
    for ended in ["whole-pod", "to-time-out", "to-cancel", "pending"] {
        let out = support::kubectl()
            .args([
                "wait",
                "--for=condition=Finished",
                "--timeout=10s",
                "-n",
                &ns.name,
            ])
            .arg(format!("runs.kruntimes.io/{ended}"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "kubectl wait for {ended}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let checked = watch.finish().await;
    assert_eq!(held_by_status(ns), [("runs".to_string(), Some(0))]);
    if backend == Backend::Ours {
        // Never executed: the Pending and the Scheduled Run; every other one once.
        let counts = pool.server.counts().await.unwrap();
        assert_eq!(counts.started, 5, "{counts:?}");
        assert_eq!(
            counts.running, 0,
            "an execution was left running: {counts:?}"
        );
    }
    eprintln!("{prefix}: {checked} Run events checked for overcommit");
}

/// A task that runs while its claim is held back (its Run still Scheduled), cancelled: stopped
/// at the server, it ends Cancelled with its claim in that one write (startTime, Admitted),
/// executed once, and its room is free.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_cancelled_inside_its_claims_window_is_stopped_and_ends_cancelled_once() {
    let pool = Scenario::start_with_args(
        "contract-window-cancel",
        Backend::Ours,
        &["--claim-delay", "1h"],
    )
    .await;
    let ns = &pool.ns;
    let watch = pool.overcommit_watch().await;
    run("long")
        .runtime("pool")
        .task(&strs(&Backend::Ours.shell("sleep 60")))
        .create(ns)
        .await;
    eventually(
        Duration::from_secs(60),
        "the task to execute at the server",
        async || match pool.server.counts().await {
            Ok(counts) if counts.running == 1 => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    assert_eq!(ns.get_run("long").await.phase(), RunPhase::Scheduled);
    ns.cancel("long").await;
    let cancelled = ns
        .wait_phase("long", RunPhase::Cancelled, Duration::from_secs(30))
        .await;
    let status = cancelled.status.as_ref().unwrap();
    assert_eq!(
        status.reason.as_deref(),
        Some(reasons::CANCELLED),
        "{status:?}"
    );
    assert!(
        status.start_time.is_some(),
        "its claim came with the end: {status:?}"
    );
    let checked = watch.finish().await;
    assert_eq!(held_by_status(ns), [("runs".to_string(), Some(0))]);
    let counts = pool.server.counts().await.unwrap();
    assert_eq!((counts.started, counts.running), (1, 0), "{counts:?}");
    eprintln!("contract-window-cancel: {checked} Run events checked for overcommit");
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_and_timeout_in_every_phase_free_the_room_at_once_on_the_runtime_server() {
    cancel_and_timeout_in_every_phase("contract-cancel", Backend::Ours).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_and_timeout_in_every_phase_free_the_room_at_once_on_the_go_projects_bash_runtime_server()
 {
    cancel_and_timeout_in_every_phase("contract-cancel-bash", Backend::Bash).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_and_timeout_in_every_phase_free_the_room_at_once_on_the_go_projects_python_runtime_server()
 {
    cancel_and_timeout_in_every_phase("contract-cancel-py", Backend::Python).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_and_timeout_in_every_phase_free_the_room_at_once_for_child_processes() {
    cancel_and_timeout_in_every_phase("contract-cancel-child", Backend::Child).await;
}

/// `ttlSecondsAfterFinished`: the leader deletes a terminal Run once its TTL has passed since
/// `completionTime`; a Run without one is kept.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_deletes_a_finished_run_after_its_ttl_and_keeps_one_without() {
    let pool = Scenario::start_with("contract-ttl", Backend::Child).await;
    let ns = &pool.ns;
    let quick = |name: &str| run(name).runtime("pool").task(&["sh", "-c", "exit 0"]);
    quick("kept").create(ns).await;
    quick("short-lived").ttl_after_finished(2).create(ns).await;
    let done = ns
        .wait_phase("short-lived", RunPhase::Succeeded, Duration::from_secs(60))
        .await;
    let completed = done
        .status
        .as_ref()
        .unwrap()
        .completion_time
        .clone()
        .unwrap()
        .0;
    ns.wait_runs(
        Duration::from_secs(30),
        "the Run past its TTL to be deleted",
        |runs| (!runs.iter().any(|r| r.name_any() == "short-lived")).then_some(()),
    )
    .await;
    let gone_after = jiff::Timestamp::now().duration_since(completed);
    assert!(
        gone_after >= jiff::SignedDuration::from_secs(1),
        "deleted {gone_after:?} after completion, before its 2 s TTL"
    );
    let kept = ns
        .wait_phase("kept", RunPhase::Succeeded, Duration::from_secs(30))
        .await;
    assert!(kept.metadata.deletion_timestamp.is_none());
}
