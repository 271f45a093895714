//! The execution contract as the Go project defines it, on every backend runtimed has: that
//! project's own Bash and Python runtime servers (unchanged, `../shared/runtimes`; the Python
//! one runs an inline script with Python), the tests' runtime server and runtimed's own child
//! processes. A Run written for that project (an empty
//! `mode.task` with `source.inline`) runs its script in its own directory `<workspace>/<uid>`;
//! the `KEY=VALUE` lines it leaves in `$KRUNTIME_OUTPUTS` become `status.outputs` (never its
//! stdout); invalid or too large outputs end it Failed with `OutputsInvalid` or
//! `OutputsTooLarge`, not retried; and its directory is gone once its status is written. A
//! function Run's inline source registers on the Bash server and, as a Python module, on the
//! Python server (with the attempt and digest each requires), is invoked, and registers again
//! after a runtimed restart. A Run's stdout and
//! stderr are its log at runtimed's `/logs/<run>` (what `kubectl kruntimes logs` reads), live
//! for a child, at the end for a server, and after the Run's directory is gone. The Go
//! project's own e2e assertions (lifecycle, outputs, timeout, cancel) are ported as ours. A
//! Git source is checked out at its commit from the tests' Git server (Git's own
//! `http-backend` over https), within runtimed's bounds of size, trust and time.

mod git;
use testkit as support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use kube::ResourceExt;

use kruntimes::api::status::{self, reasons};
use kruntimes::api::{Run, RunPhase};
use kruntimes::testing::run;
use support::pool::{HEARTBEAT, Pool};
use support::world::{
    Backend, Create, RuntimeServerProcess, RuntimedApi, SchedulerProcess, TestNs, eventually,
};

/// A Runtime of one Pod with `runs: 2`, its runtimed, its runtime server (none for
/// [`Backend::Child`]) and the scheduler.
struct Scenario {
    pool: Pool,
    server: Option<RuntimeServerProcess>,
    /// runtimed's API (`/invoke/<run>`, `/logs/<run>`), as the gateway calls it.
    api: RuntimedApi,
    _scheduler: SchedulerProcess,
}

impl Scenario {
    async fn start(prefix: &str, backend: Backend) -> Self {
        Self::start_named(prefix, backend, "pool").await
    }

    /// [`Self::start`] with the Runtime named `runtime`.
    async fn start_named(prefix: &str, backend: Backend, runtime: &str) -> Self {
        Self::start_with(prefix, backend, runtime, &[]).await
    }

    /// [`Self::start_named`] with more runtimed flags.
    async fn start_with(prefix: &str, backend: Backend, runtime: &str, extra: &[&str]) -> Self {
        let ns = TestNs::new(prefix).await;
        let scheduler = SchedulerProcess::start(&ns.name, 2, None, prefix).await;
        let server = backend.server().await;
        let (probe, api_port) = (support::free_port(), support::free_port());
        let bind = format!("127.0.0.1:{probe}");
        let api_bind = format!("127.0.0.1:{api_port}");
        let mut args: Vec<&str> = HEARTBEAT.to_vec();
        args.extend(["--health-probe-bind-address", bind.as_str()]);
        args.extend(["--api-bind-address", api_bind.as_str()]);
        if let Some(server) = &server {
            args.extend(server.flag());
        }
        args.extend(extra);
        let pool = Pool::start(&ns, runtime, 1, &[("runs", 2)], &args).await;
        support::world::wait_ready(probe).await;
        let api = RuntimedApi::of(&pool.ns, pool.pod(), api_port).await;
        Scenario {
            pool,
            server,
            api,
            _scheduler: scheduler,
        }
    }

    fn ns(&self) -> &TestNs {
        &self.pool.ns
    }

    /// The workspace volume runtimed (and its server) work in.
    fn workspace(&self) -> PathBuf {
        match &self.server {
            Some(server) => server.workspace().to_path_buf(),
            None => self.pool.agent().workspace(),
        }
    }

    /// Waits until every Run named in `names` is terminal; returns them by name.
    async fn terminal(&self, names: &[&str]) -> BTreeMap<String, Run> {
        self.ns().runs_ended(Duration::from_secs(90), names).await
    }

    /// Waits until no Run of `runs` has a directory in the workspace any more.
    async fn directories_removed(&self, runs: impl IntoIterator<Item = &Run>) {
        let dirs: Vec<PathBuf> = runs
            .into_iter()
            .map(|r| self.workspace().join(r.uid().expect("a stored Run")))
            .collect();
        support::world::gone(
            Duration::from_secs(30),
            "the Runs' directories to be removed",
            &dirs,
        )
        .await;
    }
}

fn status_of(run: &Run) -> &kruntimes::api::RunStatus {
    run.status.as_ref().expect("a terminal Run has a status")
}

fn outputs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The scripts of [`inline_scripts_report_their_outputs`], in the language `backend` runs an
/// inline script in: the shell's, or Python on the Python server (where `args` go to Python).
struct Scripts {
    /// Prints `hello`; outputs `answer=42` and `dir=` its working directory.
    answer: &'static str,
    /// A task of args alone that outputs `x = 1`.
    args: &'static [&'static str],
    /// Outputs a line that is not `KEY=VALUE`.
    invalid: &'static str,
    /// Outputs 65 keys.
    too_large: &'static str,
    /// Says `oops` on stderr and exits 3.
    fails: &'static str,
}

impl Scripts {
    fn of(backend: Backend) -> Self {
        match backend {
            Backend::Python => Scripts {
                answer: "import os\nprint('hello')\nwith open(os.environ['KRUNTIME_OUTPUTS'], 'a') as f:\n    f.write('answer=%d\\n' % (6 * 7))\n    f.write('dir=%s\\n' % os.getcwd())\n",
                args: &[
                    "-c",
                    "import os; open(os.environ['KRUNTIME_OUTPUTS'], 'w').write('x = 1\\n')",
                ],
                invalid: "import os\nopen(os.environ['KRUNTIME_OUTPUTS'], 'w').write('not key value\\n')\n",
                too_large: "import os\nwith open(os.environ['KRUNTIME_OUTPUTS'], 'a') as f:\n    for i in range(1, 66):\n        f.write('k%d=v\\n' % i)\n",
                fails: "import sys\nprint('oops', file=sys.stderr)\nsys.exit(3)\n",
            },
            Backend::Bash | Backend::Ours | Backend::Child => Scripts {
                answer: "echo hello\necho \"answer=$((6*7))\" >> \"$KRUNTIME_OUTPUTS\"\necho \"dir=$(pwd)\" >> \"$KRUNTIME_OUTPUTS\"\n",
                args: &["sh", "-c", "echo 'x = 1' > \"$KRUNTIME_OUTPUTS\""],
                invalid: "echo 'not key value' > \"$KRUNTIME_OUTPUTS\"",
                too_large: "for i in $(seq 1 65); do echo \"k$i=v\" >> \"$KRUNTIME_OUTPUTS\"; done",
                fails: "echo oops >&2\nexit 3",
            },
        }
    }
}

/// Inline scripts and their outputs on `backend`: see the module's doc.
async fn inline_scripts_report_their_outputs(prefix: &str, backend: Backend) {
    let scenario = Scenario::start(prefix, backend).await;
    let ns = scenario.ns();
    let scripts = Scripts::of(backend);
    run("answer")
        .runtime("pool")
        .inline(scripts.answer)
        .create(ns)
        .await;
    run("args")
        .runtime("pool")
        .task(scripts.args)
        .create(ns)
        .await;
    // Retries allowed, and still one attempt: the same script writes the same file again.
    run("invalid")
        .runtime("pool")
        .inline(scripts.invalid)
        .retry_policy(3, "1s")
        .create(ns)
        .await;
    run("too-large")
        .runtime("pool")
        .inline(scripts.too_large)
        .create(ns)
        .await;
    run("fails")
        .runtime("pool")
        .inline(scripts.fails)
        .create(ns)
        .await;
    let ended = scenario
        .terminal(&["answer", "args", "invalid", "too-large", "fails"])
        .await;

    let answer = &ended["answer"];
    let s = status_of(answer);
    assert_eq!(answer.phase(), RunPhase::Succeeded, "{s:?}");
    assert_eq!(s.message.as_deref(), Some(status::SUCCESS_MESSAGE));
    let dir = scenario.workspace().join(answer.uid().unwrap());
    assert_eq!(
        s.outputs,
        outputs(&[("answer", "42"), ("dir", &dir.display().to_string())]),
        "the outputs file's pairs, run in the Run's own directory, and no stdout"
    );
    assert_eq!(status_of(&ended["args"]).outputs, outputs(&[("x", "1")]));

    for (name, reason, message) in [
        (
            "invalid",
            reasons::OUTPUTS_INVALID,
            "$KRUNTIME_OUTPUTS line 1 is not KEY=VALUE",
        ),
        (
            "too-large",
            reasons::OUTPUTS_TOO_LARGE,
            "$KRUNTIME_OUTPUTS has more than 64 keys",
        ),
    ] {
        let r = &ended[name];
        let s = status_of(r);
        assert_eq!(
            (r.phase(), s.reason.as_deref(), s.message.as_deref()),
            (RunPhase::Failed, Some(reason), Some(message)),
            "{name}: {s:?}"
        );
        assert_eq!(s.attempt, Some(1), "{name} was retried: {s:?}");
        assert!(s.outputs.is_empty(), "{name}: {s:?}");
    }
    let fails = status_of(&ended["fails"]);
    assert_eq!(
        (fails.exit_code, fails.reason.as_deref()),
        (Some(3), Some(reasons::EXIT_CODE)),
        "{fails:?}"
    );
    assert!(fails.outputs.is_empty(), "{fails:?}");

    scenario.directories_removed(ended.values()).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_scripts_report_their_outputs_on_the_go_projects_bash_runtime_server() {
    inline_scripts_report_their_outputs("exec-bash", Backend::Bash).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_python_scripts_report_their_outputs_on_the_go_projects_python_runtime_server() {
    inline_scripts_report_their_outputs("exec-python", Backend::Python).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_scripts_report_their_outputs_on_the_tests_runtime_server() {
    inline_scripts_report_their_outputs("exec-ours", Backend::Ours).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_scripts_report_their_outputs_as_runtimeds_own_processes() {
    inline_scripts_report_their_outputs("exec-child", Backend::Child).await;
}

/// A function Run's inline source on one of the Go project's runtime servers: written to its
/// `inlinePath`, registered (attempt and digest), Ready, invoked through runtimed; a runtimed
/// that crashes and starts again registers it again (the same attempt and digest, so the
/// server keeps it) and serves it, and removes the directory of a Run that is no longer its
/// Pod's; cancel unregisters it and its directory goes. `function` is the handler, its file
/// and its source in the server's language; `says` what it answers to `"world"`, `"again"`.
async fn an_inline_function_registers_and_again_after_a_restart(
    prefix: &str,
    backend: Backend,
    function: [&str; 3],
    says: [&str; 2],
) {
    let [handler, path, source] = function;
    let mut scenario = Scenario::start(prefix, backend).await;
    let ns = scenario.ns().clone();
    run("greet")
        .runtime("pool")
        .inline_function(handler, path, source)
        .create(&ns)
        .await;
    let within = Duration::from_secs(60);
    let ready = ns
        .wait_runs(within, "greet Ready", |runs| {
            runs.iter()
                .find(|r| r.name_any() == "greet")
                .filter(|r| r.phase() == RunPhase::Ready || r.phase().is_terminal())
                .cloned()
        })
        .await;
    assert_eq!(
        ready.phase(),
        RunPhase::Ready,
        "{:?}\n{}",
        ready.status,
        scenario.pool.agent().log_tail()
    );
    let api = scenario.api.clone();
    let invoke = async |input: &'static [u8]| {
        eventually(
            Duration::from_secs(30),
            "runtimed to serve the Ready Run",
            async || match api.post("/invoke/greet", input).await {
                (200, body) => Ok(body),
                other => Err(format!("{other:?}")),
            },
        )
        .await
    };
    assert_eq!(invoke(b"\"world\"").await.trim_end(), says[0]);

    let pod = scenario.pool.pod().to_string();
    scenario
        .pool
        .agents
        .get_mut(&pod)
        .expect("a runtimed")
        .crash();
    // The directory of a Run deleted while no runtimed watched: the next one removes it, and
    // keeps the Ready Run's.
    let stale = scenario
        .workspace()
        .join("0badc0de-0000-4000-8000-000000000000");
    std::fs::create_dir_all(&stale).unwrap();
    scenario.pool.restart(&pod);
    assert_eq!(invoke(b"\"again\"").await.trim_end(), says[1]);
    eventually(
        Duration::from_secs(30),
        "the stale directory to go",
        async || match stale.exists() {
            false => Ok(()),
            true => Err(scenario.pool.agent().log_tail()),
        },
    )
    .await;
    let live = scenario.workspace().join(ready.uid().unwrap());
    assert!(live.join(path).is_file(), "the Ready Run's source is kept");
    let run_now = ns.get_run("greet").await;
    assert_eq!(run_now.phase(), RunPhase::Ready);
    assert_eq!(run_now.status.as_ref().and_then(|s| s.attempt), Some(1));

    ns.cancel("greet").await;
    let ended = scenario.terminal(&["greet"]).await;
    assert_eq!(ended["greet"].phase(), RunPhase::Cancelled);
    scenario.directories_removed(ended.values()).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inline_function_registers_on_the_bash_runtime_server_and_again_after_a_restart() {
    an_inline_function_registers_and_again_after_a_restart(
        "exec-function",
        Backend::Bash,
        [
            "lib/hello.greet",
            "lib/hello.sh",
            "greet() { echo \"hello $1\"; }\n",
        ],
        ["hello \"world\"", "hello \"again\""],
    )
    .await;
}

/// The same Python function on the Python server: a module path as its handler, its JSON
/// input as the argument, its return value as JSON.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inline_python_function_registers_on_the_python_runtime_server_and_again_after_a_restart()
 {
    an_inline_function_registers_and_again_after_a_restart(
        "exec-function-py",
        Backend::Python,
        [
            "lib.hello.greet",
            "lib/hello.py",
            "def greet(name):\n    return 'hello ' + name\n",
        ],
        ["\"hello world\"", "\"hello again\""],
    )
    .await;
}

/// Reads from `stream` until what was read contains `want`; returns all of it.
async fn read_until_contains(stream: &mut reqwest::Response, read: &mut Vec<u8>, want: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !String::from_utf8_lossy(read).contains(want) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match tokio::time::timeout(left, stream.chunk()).await {
            Ok(Ok(None)) => break,
            Ok(Ok(Some(bytes))) => read.extend_from_slice(&bytes),
            Ok(Err(e)) => panic!("reading the log: {e}"),
            Err(_) => break,
        }
    }
    assert!(
        String::from_utf8_lossy(read).contains(want),
        "{want:?} never came: {}",
        String::from_utf8_lossy(read)
    );
}

/// A Run's log at runtimed's `/logs/<run>` (what `kubectl kruntimes logs` reads through the
/// Pod proxy), for runtimed's own processes and for the Bash runtime server: its stdout and
/// stderr while it runs, `follow=true` streaming the lines written later and ending with the
/// execution, `tailLines`, and the log of a finished Run still readable after its directory
/// is gone; an unknown Run is a 404 that says so.
async fn a_runs_log(prefix: &str, backend: Backend) {
    let scenario = Scenario::start(prefix, backend).await;
    let ns = scenario.ns();
    let hold = scenario.pool.gates.hold("talk");
    run("talk")
        .runtime("pool")
        .task(&["sh", "-c", &format!("echo first; {hold}; echo second >&2")])
        .create(ns)
        .await;
    let api = scenario.api.clone();
    let mut follow = None;
    let mut read = Vec::new();
    if backend == Backend::Child {
        // A child's lines are in its log as it writes them: follow gets "first" while it
        // still runs, then "second" once the gate opens, then the end.
        eventually(
            Duration::from_secs(30),
            "talk's first line",
            async || match api.get("/logs/talk").await {
                (200, body) if body == "first\n" => Ok(()),
                other => Err(format!("{other:?}")),
            },
        )
        .await;
        let token = support::tokens::gateway_token(&api.pod_uid).await;
        let stream = follow.insert(
            api.send("GET", "/logs/talk?follow=true", b"", Some(&token))
                .await,
        );
        assert_eq!(stream.status().as_u16(), 200);
        read_until_contains(stream, &mut read, "first\n").await;
        assert!(!String::from_utf8_lossy(&read).contains("second"));
    }
    scenario.pool.open("talk");
    let ended = scenario.terminal(&["talk"]).await;
    assert_eq!(ended["talk"].phase(), RunPhase::Succeeded);
    if let Some(stream) = follow.as_mut() {
        read_until_contains(stream, &mut read, "first\nsecond\n").await;
        loop {
            let next = tokio::time::timeout(Duration::from_secs(30), stream.chunk())
                .await
                .expect("follow ends with the execution")
                .unwrap();
            match next {
                Some(bytes) => read.extend_from_slice(&bytes),
                None => break,
            }
        }
        assert_eq!(String::from_utf8_lossy(&read), "first\nsecond\n");
    }
    // After the end, and after the Run's directory is gone.
    scenario.directories_removed(ended.values()).await;
    let log = api.get("/logs/talk").await;
    assert_eq!(log, (200, "first\nsecond\n".to_string()));
    let tail = api.get("/logs/talk?tailLines=1").await;
    assert_eq!(tail, (200, "second\n".to_string()));
    let follow_ended = api.get("/logs/talk?follow=true").await;
    assert_eq!(follow_ended, (200, "first\nsecond\n".to_string()));
    let (code, body) = api.get("/logs/nobody").await;
    assert_eq!(code, 404, "{body}");
    assert!(
        body.starts_with("Run nobody has no log on this Runtime Pod"),
        "{body}"
    );
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_log_as_runtimeds_own_process() {
    a_runs_log("logs-child", Backend::Child).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_log_on_the_go_projects_bash_runtime_server() {
    a_runs_log("logs-bash", Backend::Bash).await;
}

/// A newcomer's first Run: the Go project's documented minimal Run (no `spec.mode`, only an
/// inline script), applied unchanged with kubectl, is a task (the API defaults its mode),
/// succeeds, and its log holds what it printed.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_go_projects_minimal_run_applied_unchanged_succeeds_and_logs_its_output() {
    let scenario = Scenario::start_named("exec-minimal", Backend::Child, "bash").await;
    let ns = scenario.ns();
    support::kubectl_apply("tests/fixtures/go-minimal-run.yaml", Some(&ns.name));
    let ended = scenario.terminal(&["hello"]).await;
    let hello = &ended["hello"];
    assert!(
        hello.spec.mode.task.is_some() && hello.spec.mode.function.is_none(),
        "{:?}",
        hello.spec.mode
    );
    let s = status_of(hello);
    assert_eq!(hello.phase(), RunPhase::Succeeded, "{s:?}");
    assert_eq!(s.message.as_deref(), Some(status::SUCCESS_MESSAGE));
    let log = scenario.api.get("/logs/hello").await;
    assert_eq!(log, (200, "hello\n".to_string()));
}

/// The status of `run`'s condition `type_`: (status, reason).
fn condition(run: &Run, type_: &str) -> Option<(String, String)> {
    status_of(run)
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

/// The Go project's e2e assertions (`test/e2e`: full lifecycle, invalid and oversized outputs,
/// timeout, cancel of a running Run), ported as ours and run on its own Bash runtime server:
/// the same phases, attempts, messages and `Running`/`Completed` conditions.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_go_projects_e2e_assertions_hold_on_its_bash_runtime_server() {
    let scenario = Scenario::start("exec-e2e", Backend::Bash).await;
    let ns = scenario.ns();
    run("lifecycle")
        .runtime("pool")
        .inline("echo visible-stdout")
        .create(ns)
        .await;
    run("invalid")
        .runtime("pool")
        .inline("echo 'no equals sign' > \"$KRUNTIME_OUTPUTS\"")
        .create(ns)
        .await;
    run("oversized")
        .runtime("pool")
        .inline("head -c 9000 /dev/zero | tr '\\0' x | sed 's/^/big=/' > \"$KRUNTIME_OUTPUTS\"")
        .create(ns)
        .await;
    run("slow")
        .runtime("pool")
        .task(&["sh", "-c", "sleep 60"])
        .timeout("2s")
        .create(ns)
        .await;
    let hold = scenario.pool.gates.hold("held");
    run("held")
        .runtime("pool")
        .task(&["sh", "-c", &hold])
        .create(ns)
        .await;
    ns.wait_phase("held", RunPhase::Running, Duration::from_secs(60))
        .await;
    ns.cancel("held").await;
    let ended = scenario
        .terminal(&["lifecycle", "invalid", "oversized", "slow", "held"])
        .await;

    // TestFullRunLifecycle: Succeeded, "execution completed", stdout not in the message.
    let lifecycle = &ended["lifecycle"];
    let message = status_of(lifecycle).message.clone().unwrap_or_default();
    assert_eq!(lifecycle.phase(), RunPhase::Succeeded);
    assert_eq!(message, "execution completed");
    assert!(!message.contains("visible-stdout"));
    assert_eq!(
        condition(lifecycle, "Completed"),
        Some(("True".into(), "RunCompleted".into()))
    );
    // Invalid and oversized outputs, timeout and cancel: the phase, attempt 1, a completion
    // time, and Running=False and Completed=False with the reason.
    for (name, phase, reason) in [
        ("invalid", RunPhase::Failed, "OutputsInvalid"),
        ("oversized", RunPhase::Failed, "OutputsTooLarge"),
        ("slow", RunPhase::Timeout, "Timeout"),
        ("held", RunPhase::Cancelled, "Cancelled"),
    ] {
        let r = &ended[name];
        let s = status_of(r);
        assert_eq!(r.phase(), phase, "{name}: {s:?}");
        assert_eq!(s.attempt, Some(1), "{name}: {s:?}");
        assert!(s.completion_time.is_some(), "{name}: {s:?}");
        let want = Some(("False".to_string(), reason.to_string()));
        assert_eq!(condition(r, "Running"), want, "{name}: {s:?}");
        assert_eq!(condition(r, "Completed"), want, "{name}: {s:?}");
    }
    let slow = status_of(&ended["slow"])
        .message
        .clone()
        .unwrap_or_default();
    assert!(slow.contains("timeout"), "{slow}");
}
