//! `kubectl kruntimes runtimed` against the real control plane: the built binary runs as the
//! agent of a Pod object created here (there is no kubelet), and the test plays the scheduler
//! by writing `status.phase: Scheduled` with `assignedPod`/`assignedPodUID` through the status subresource.
//!
//! Every Run event is recorded by a watch of the test's own, so admission is asserted on the
//! API server's history, not on timing. For that history to show every start, runtimed here
//! writes each claim before its task starts (`--claim-delay 0s`) unless a test says otherwise;
//! the burst runs with the default window and counts what actually executes at once. The held
//! claim itself is proven in `tests/it/contract.rs` and runtimed's agent tests.

use testkit as support;

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod};
use kruntimes::api::resources::capacity_annotation;
use kruntimes::api::status::{CONDITION_ADMITTED, reasons};
use kruntimes::api::{Run, RunPhase};
use kruntimes::testing::{RunBuilder, pod, run};
use kube::ResourceExt as _;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use support::world::{Create, RunEvents, RuntimedProcess, TestNs, eventually, replay};

const WAIT: Duration = Duration::from_secs(30);
/// A prefixed resource: advertised as `kruntimes.io/capacity.example.com_gpu` (see
/// `api::resources::capacity_annotation`).
const GPU: &str = "example.com/gpu";

// ---------------------------------------------------------------------------------------------
// Fixture: a namespace, a Runtime Pod object, the runtimed process and a recording watch.

struct Fixture {
    ns: TestNs,
    pod: Pod,
    events: RunEvents,
    dir: tempfile::TempDir,
}

impl Fixture {
    /// A namespace with the Runtime Pod `rt-0` of `capacity`; its heartbeat is runtimed's.
    async fn new(prefix: &str, capacity: &[(&str, u64)]) -> Fixture {
        let ns = TestNs::new(prefix).await;
        let pod = pod("rt-0").capacity(capacity).no_lease().create(&ns).await;
        let events = RunEvents::start(&ns).await;
        Fixture {
            ns,
            pod,
            events,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn pod_uid(&self) -> String {
        self.pod.uid().unwrap()
    }

    /// Starts `kubectl-kruntimes runtimed -v <extra>` as this Pod's agent (with a shutdown
    /// grace of 1s unless `extra` sets one).
    fn runtimed(&self, extra: &[&str]) -> RuntimedProcess {
        let mut args = vec!["-v"];
        args.extend(extra);
        if !args.contains(&"--shutdown-grace") {
            args.extend(["--shutdown-grace", "1s"]);
        }
        if !args.iter().any(|a| a.starts_with("--claim-delay")) {
            args.extend(["--claim-delay", "0s"]);
        }
        RuntimedProcess::start(&self.pod, &args)
    }

    async fn create(&self, run: RunBuilder) -> Run {
        run.create(&self.ns).await
    }

    /// Plays the scheduler: binds `name` to `pod` (this fixture's Pod when `None`) with the
    /// given phase. Returns the resourceVersion of the write.
    async fn bind(&self, name: &str, phase: &str, pod: Option<(&str, &str)>) -> String {
        let uid = self.pod_uid();
        let (pod_name, pod_uid) = pod.unwrap_or(("rt-0", uid.as_str()));
        let patch =
            json!({"status": {"phase": phase, "assignedPod": pod_name, "assignedPodUID": pod_uid}});
        let written = self
            .ns
            .runs()
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("bind Run {name}: {e}"));
        written.resource_version().unwrap()
    }

    /// Creates the Run and binds it to this Pod; returns the resourceVersion of the bind.
    async fn assign(&self, run: RunBuilder) -> String {
        let name = run.name().to_string();
        self.create(run).await;
        self.bind(&name, "Scheduled", None).await
    }

    async fn get(&self, name: &str) -> Run {
        self.ns.get_run(name).await
    }

    /// The recorded history so far.
    fn state(&self) -> State {
        State(self.events.events())
    }

    /// Waits until every Run of `names` has ended; returns the recorded state then.
    async fn until_ended(&self, rtd: &RuntimedProcess, names: &[&str]) -> State {
        let what = format!("{names:?} to end");
        self.wait_until(rtd, &what, |s| s.all_terminal(names)).await;
        self.state()
    }

    /// Polls until `check` holds for the recorded state, or fails with `what` and the log.
    async fn wait_until(&self, rtd: &RuntimedProcess, what: &str, check: impl Fn(&State) -> bool) {
        eventually(WAIT, what, async || {
            let state = self.state();
            if check(&state) {
                Ok(())
            } else {
                Err(Stuck { state, rtd })
            }
        })
        .await
    }
}

/// The last phases and runtimed's log, for a timeout message.
struct Stuck<'a> {
    state: State,
    rtd: &'a RuntimedProcess,
}

impl fmt::Display for Stuck<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let phases = self.state.phases();
        let log = self.rtd.log_tail();
        write!(f, "phases {phases:?}\n--- runtimed log ---\n{log}")
    }
}

/// A Run of `args`.
fn task(name: &str, args: &[&str]) -> RunBuilder {
    run(name).task(args)
}

// ---------------------------------------------------------------------------------------------
// The recorded history of every Run event of the namespace, in the API server's order.

mod history;
use history::*;

// ---------------------------------------------------------------------------------------------

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_assignments_beyond_capacity_wait_untouched_and_all_complete() {
    let fx = Fixture::new("rtd-stale", &[("runs", 2)]).await;
    let names = ["s-1", "s-2", "s-3", "s-4", "s-5"];
    // A Run assigned to another Pod of the namespace is none of this agent's business.
    fx.create(task("elsewhere", &["true"])).await;
    let elsewhere_rv = fx
        .bind("elsewhere", "Scheduled", Some(("rt-1", "uid-of-rt-1")))
        .await;

    let mut scheduled_rv = HashMap::new();
    for name in names {
        scheduled_rv.insert(
            name,
            fx.assign(task(name, &["sh", "-c", "sleep 0.3"])).await,
        );
    }
    // Started once all five are assigned: its first list holds more than its 2 slots, so
    // some must wait however slowly the assignments were written.
    let rtd = fx.runtimed(&[]);
    let state = fx.until_ended(&rtd, &names).await;
    for (i, running) in state.running_after_each_event().iter().enumerate() {
        assert!(
            running.len() <= 2,
            "event {i}: {} Runs Running at once on runs: 2: {running:?}",
            running.len()
        );
    }
    assert!(
        state
            .running_after_each_event()
            .iter()
            .any(|r| r.len() == 2),
        "both slots were used at some point"
    );
    for name in names {
        let latest = &state.latest()[name];
        assert_eq!(
            latest.phase(),
            RunPhase::Succeeded,
            "Run {name}: {:?}",
            latest.status
        );
        assert_eq!(latest.status.as_ref().unwrap().exit_code, Some(0));
        assert_untouched_until_claimed(&state, name, &scheduled_rv[name]);
    }
    let waited = names
        .iter()
        .filter(|n| {
            // Waited: Scheduled at an event where both slots were taken by others.
            let mut waited = false;
            replay(&state.0, |present| {
                let scheduled = present.get(**n).map(|r| r.phase()) == Some(RunPhase::Scheduled);
                waited |= scheduled && running(present).len() == 2;
            });
            waited
        })
        .count();
    assert!(
        waited >= 1,
        "with 5 Runs on 2 slots some Run must have waited"
    );

    let other = fx.get("elsewhere").await;
    assert_eq!(other.phase(), RunPhase::Scheduled);
    assert_eq!(
        other.resource_version().as_deref(),
        Some(elsewhere_rv.as_str()),
        "a Run of another Pod was written to"
    );
    assert!(
        rtd.log()
            .contains("watching Runs with the field selector status.assignedPod=rt-0"),
        "runtimed should watch with the server-side field selector\n{}",
        rtd.log_tail()
    );
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_sharing_one_gpu_run_one_after_the_other() {
    let fx = Fixture::new("rtd-gpu", &[("runs", 4), (GPU, 1)]).await;
    let rtd = fx.runtimed(&[]);
    let gpu_task = |name| task(name, &["sh", "-c", "sleep 0.5"]).requests(&[(GPU, 1)]);
    let a = fx.assign(gpu_task("gpu-a")).await;
    let b = fx.assign(gpu_task("gpu-b")).await;
    let state = fx.until_ended(&rtd, &["gpu-a", "gpu-b"]).await;
    for running in state.running_after_each_event() {
        assert!(
            running.len() <= 1,
            "two Runs held the single GPU at once: {running:?}"
        );
    }
    for (name, rv) in [("gpu-a", &a), ("gpu-b", &b)] {
        assert_eq!(state.phase(name), Some(RunPhase::Succeeded));
        assert_untouched_until_claimed(&state, name, rv);
    }
    let admitted_msg = state
        .history("gpu-a")
        .iter()
        .find(|r| r.phase() == RunPhase::Running)
        .map(|r| {
            r.status
                .as_ref()
                .unwrap()
                .conditions
                .iter()
                .find(|c| c.type_ == CONDITION_ADMITTED)
                .unwrap()
                .message
                .clone()
        });
    assert_eq!(
        admitted_msg.as_deref(),
        Some("runtimed on Pod rt-0 reserved {example.com/gpu: 1, runs: 1}")
    );
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_exits_and_unstartable_programs_are_failed_and_release_capacity() {
    let fx = Fixture::new("rtd-fail", &[("runs", 1)]).await;
    let rtd = fx.runtimed(&[]);
    fx.assign(task("exit-3", &["sh", "-c", "echo about to fail; exit 3"]))
        .await;
    fx.assign(task(
        "missing",
        &["/nonexistent/kruntimes-no-such-program", "--flag"],
    ))
    .await;
    fx.assign(task("after", &["true"])).await;
    let names = ["exit-3", "missing", "after"];
    let state = fx.until_ended(&rtd, &names).await;
    let latest = state.latest();
    let exit3 = latest["exit-3"].status.as_ref().unwrap();
    assert_eq!(exit3.phase, Some(RunPhase::Failed));
    assert_eq!(exit3.exit_code, Some(3));
    assert_eq!(exit3.reason.as_deref(), Some(reasons::EXIT_CODE));
    assert_eq!(
        exit3.message.as_deref(),
        Some("the process exited with code 3")
    );
    assert!(exit3.completion_time.is_some() && exit3.start_time.is_some());

    let missing = &latest["missing"];
    assert_eq!(missing.phase(), RunPhase::Failed);
    assert_eq!(reason(missing), Some(reasons::START_FAILED));
    // Every Run runs in its own directory, which the message names too.
    let dir = format!("{}/", rtd.workspace().display());
    assert!(
        message(missing).starts_with(&format!(
            "cannot start \"/nonexistent/kruntimes-no-such-program\" in working directory \"{dir}"
        )) && message(missing).ends_with("No such file or directory (os error 2)"),
        "{}",
        message(missing)
    );

    assert_eq!(
        latest["after"].phase(),
        RunPhase::Succeeded,
        "capacity was not released"
    );
    for running in state.running_after_each_event() {
        assert!(running.len() <= 1, "{running:?}");
    }
    assert!(
        rtd.log().contains("[exit-3] about to fail"),
        "child output is logged with the Run name\n{}",
        rtd.log_tail()
    );
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_that_cannot_be_run_as_written_fail_without_being_claimed() {
    let fx = Fixture::new("rtd-invalid", &[("runs", 1)]).await;
    let rtd = fx.runtimed(&[]);
    let node = EnvVar {
        name: "NODE".into(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "spec.nodeName".into(),
                api_version: None,
            }),
            ..Default::default()
        }),
    };
    fx.assign(task("value-from", &["true"]).env(node)).await;
    fx.assign(run("no-task").function("main.handler")).await;
    fx.assign(task("after", &["true"])).await;
    let names = ["value-from", "no-task", "after"];
    let state = fx.until_ended(&rtd, &names).await;
    let latest = state.latest();
    for (name, want) in [
        (
            "value-from",
            "spec.env[\"NODE\"] uses valueFrom, which runtimed does not support; set a plain value instead",
        ),
        (
            "no-task",
            "spec.mode.function: a function Run needs a Runtime whose Pods serve the runtime contract (a template whose first container is named runtime); this Pod's runtimed runs tasks as its own processes",
        ),
    ] {
        let run = &latest[name];
        assert_eq!(run.phase(), RunPhase::Failed, "{name}");
        assert_eq!(reason(run), Some(reasons::START_FAILED), "{name}");
        assert_eq!(message(run), want);
        assert!(
            state
                .history(name)
                .iter()
                .all(|r| r.phase() != RunPhase::Running && !admitted(r)),
            "{name} was claimed although it cannot run"
        );
    }
    assert_eq!(latest["after"].phase(), RunPhase::Succeeded);
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn raising_the_capacity_annotation_raises_concurrency_without_a_restart() {
    let fx = Fixture::new("rtd-raise", &[("runs", 1)]).await;
    let mut rtd = fx.runtimed(&[]);
    let pid = rtd.pid();
    let names = ["r-1", "r-2", "r-3"];
    for name in names {
        fx.assign(task(name, &["sleep", "30"])).await;
    }
    // All three assignments seen and one Run admitted: the other two wait as Scheduled
    // (or runtimed admitted too many, which the check below names).
    fx.wait_until(&rtd, "one Run Running and two waiting", |s| {
        s.count(RunPhase::Running) >= 1
            && s.count(RunPhase::Running) + s.count(RunPhase::Scheduled) == 3
    })
    .await;
    // Every event recorded before the raise, not one sample: never more than one Running.
    let before = fx.state();
    let most = before.running_after_each_event().iter().map(Vec::len).max();
    assert_eq!(
        most,
        Some(1),
        "runs: 1 admits one Run: {:?}",
        before.phases()
    );

    let raise = json!({"metadata": {"annotations": {capacity_annotation("runs").unwrap(): "3"}}});
    let _: Pod = fx.ns.merge("rt-0", raise).await;
    fx.wait_until(&rtd, "three Runs Running after the raise", |s| {
        s.count(RunPhase::Running) == 3
    })
    .await;
    assert!(
        rtd.is_running(),
        "runtimed restarted or died\n{}",
        rtd.log_tail()
    );
    assert_eq!(rtd.pid(), pid);
}

/// Waits until runtimed's `/readyz` on `port` answers `code`.
async fn wait_readyz(port: u16, code: u16) {
    eventually(
        WAIT,
        &format!("/readyz {code}"),
        async || match support::world::http_get(port, "/readyz").await {
            Ok((got, _)) if got == code => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_is_renewed_and_sigterm_drains_kills_and_drops_it() {
    let fx = Fixture::new("rtd-lease", &[("runs", 2)]).await;
    let probe_port = support::free_port();
    let probe_address = format!("127.0.0.1:{probe_port}");
    let mut rtd = fx.runtimed(&[
        "--heartbeat-interval",
        "1s",
        "--heartbeat-duration",
        "5s",
        "--shutdown-grace",
        "4s",
        "--health-probe-bind-address",
        &probe_address,
    ]);
    // The readiness probe Runtime Pods get: ready once runtimed watches its Runs and Pod.
    wait_readyz(probe_port, 200).await;
    let leases = fx.ns.api::<Lease>();

    let first = eventually(WAIT, "the Lease rt-0 to appear", async || {
        let lease = leases.get_opt("rt-0").await.unwrap();
        lease.ok_or_else(|| format!("no Lease\n--- runtimed log ---\n{}", rtd.log_tail()))
    })
    .await;
    let spec = first.spec.clone().unwrap();
    assert_eq!(
        spec.holder_identity,
        Some(fx.pod_uid()),
        "held by the Pod UID"
    );
    assert_eq!(spec.lease_duration_seconds, Some(5));
    let owner = &first.owner_references()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Pod", "rt-0"));
    assert_eq!(owner.uid, fx.pod_uid(), "owned by the Pod");
    assert_eq!(
        first
            .labels()
            .get("kruntimes.io/runtime-pod")
            .map(String::as_str),
        Some("rt-0")
    );
    let first_renewal = spec.renew_time.as_ref().unwrap().0;
    eventually(WAIT, "renewTime to advance", async || {
        let later = leases.get("rt-0").await.unwrap().spec.unwrap();
        match later.renew_time {
            Some(t) if t.0 > first_renewal => Ok(()),
            other => Err(format!("renewTime {other:?}, first {first_renewal}")),
        }
    })
    .await;

    fx.assign(task("long", &["sleep", "60"])).await;
    fx.assign(task("short", &["sleep", "2"])).await;
    fx.wait_until(&rtd, "both Runs Running", |s| {
        s.count(RunPhase::Running) == 2
    })
    .await;
    rtd.sigterm();
    // Assigned once shutdown has begun, so a claim of it could only be a drain that is not
    // one: the short Run frees its slot within the grace, while runtimed still runs.
    let queued_rv = fx.assign(task("queued", &["true"])).await;
    // Not ready from the moment shutdown begins, while the long Run still has its grace.
    wait_readyz(probe_port, 503).await;
    let status = rtd.wait(Duration::from_secs(20)).await;
    assert!(
        status.success(),
        "runtimed exits 0 after SIGTERM: {status}\n{}",
        rtd.log_tail()
    );

    let long = fx.get("long").await;
    assert_eq!(long.phase(), RunPhase::Failed);
    assert_eq!(reason(&long), Some(reasons::RUNTIME_POD_TERMINATED));
    assert!(
        message(&long).contains("grace period"),
        "{}",
        message(&long)
    );
    let short = fx.get("short").await;
    assert_eq!(
        short.phase(),
        RunPhase::Succeeded,
        "a Run that ends within the grace period keeps its outcome"
    );
    let queued = fx.get("queued").await;
    assert_eq!(
        queued.phase(),
        RunPhase::Scheduled,
        "nothing is claimed after SIGTERM"
    );
    assert_eq!(
        queued.resource_version(),
        Some(queued_rv),
        "the queued Run was written to"
    );
    fx.events.catch_up().await;
    assert_eq!(fx.state().count(RunPhase::Running), 0);
    assert!(
        leases.get_opt("rt-0").await.unwrap().is_none(),
        "the Lease survived the shutdown"
    );
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_runs_left_by_an_earlier_runtimed_are_failed_on_start() {
    let fx = Fixture::new("rtd-restart", &[("runs", 1)]).await;
    fx.create(task("orphan", &["sleep", "60"])).await;
    fx.bind("orphan", "Running", None).await;
    fx.assign(task("next", &["true"])).await;
    let rtd = fx.runtimed(&[]);
    let latest = fx.until_ended(&rtd, &["orphan", "next"]).await.latest();
    assert_eq!(latest["orphan"].phase(), RunPhase::Failed);
    assert_eq!(reason(&latest["orphan"]), Some(reasons::RUNTIMED_RESTARTED));
    assert_eq!(
        latest["next"].phase(),
        RunPhase::Succeeded,
        "the orphan holds no capacity"
    );
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_running_run_kills_its_process_and_releases_capacity() {
    let fx = Fixture::new("rtd-delete", &[("runs", 1)]).await;
    let rtd = fx.runtimed(&[]);
    let pidfile = fx.dir.path().join("victim.pid");
    let script = format!("echo $$ > {} && exec sleep 60", pidfile.display());
    fx.assign(task("victim", &["sh", "-c", &script])).await;
    // Only once the victim holds the Pod's one slot: assigned together, both could be in
    // runtimed's first list, where creation order within one second is the UIDs' (either
    // could go first; under load the test saw `next` run before the victim).
    fx.wait_until(&rtd, "victim Running", |s| {
        s.phase("victim") == Some(RunPhase::Running)
    })
    .await;
    fx.assign(task("next", &["true"])).await;
    let pid = eventually(WAIT, "the victim to write its pid", async || {
        let text = std::fs::read_to_string(&pidfile).unwrap_or_default();
        text.trim().parse::<u32>().map_err(|_| format!("{text:?}"))
    })
    .await;
    // The recorder may not have seen next's bind yet: wait for it, it must stay Scheduled.
    fx.wait_until(&rtd, "next to be seen Scheduled behind the victim", |s| {
        s.phase("next") == Some(RunPhase::Scheduled)
    })
    .await;

    fx.ns
        .runs()
        .delete("victim", &DeleteParams::default())
        .await
        .unwrap();
    fx.wait_until(&rtd, "next to succeed after the delete", |s| {
        s.phase("next") == Some(RunPhase::Succeeded)
    })
    .await;
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let what = format!("the process of the deleted Run ({pid}) to exit");
    eventually(Duration::from_secs(10), &what, async || {
        if proc.exists() {
            Err("still alive")
        } else {
            Ok(())
        }
    })
    .await;
}

#[testkit::test]
fn runtimed_without_a_pod_identity_fails_with_one_clear_line() {
    let out = Command::new(support::binary())
        .arg("runtimed")
        .env_remove("POD_NAME")
        .env_remove("POD_NAMESPACE")
        .env_remove("POD_UID")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim(),
        "error: runtimed needs the identity of its Pod but POD_NAME, POD_NAMESPACE, POD_UID are not set; set them through the downward API (fieldRef metadata.name, metadata.namespace, metadata.uid) or pass --pod-name --pod-namespace --pod-uid"
    );
}

/// 200 Runs bound at once to a Pod of `runs: 8`, with runtimed's default claim window (most
/// of these short tasks are written once, claim and end together): never more than 8 tasks
/// executing at once (each task marks its start and end in one log, the execution's own
/// record) and never more than 8 Running at any recorded event, every one admitted and
/// succeeded, and `/metrics` counts exactly that.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_200_runs_on_8_slots_never_overcommits_and_metrics_count_it() {
    const N: usize = 200;
    let fx = Fixture::new("rtd-burst", &[("runs", 8)]).await;
    let metrics_port = support::free_port();
    let rtd = fx.runtimed(&[
        &format!("--metrics-bind-address=127.0.0.1:{metrics_port}"),
        "--claim-delay=500ms",
    ]);
    let names: Vec<String> = (0..N).map(|i| format!("b-{i:03}")).collect();
    let log = fx.dir.path().join("executions");
    let marked = format!(
        "echo + >> {log}; sleep 0.05; echo - >> {log}",
        log = log.display()
    );
    futures::future::join_all(
        names
            .iter()
            .map(|n| fx.create(task(n, &["sh", "-c", &marked]))),
    )
    .await;
    // Arriving at once: every bind is written concurrently, as a burst from the scheduler.
    futures::future::join_all(names.iter().map(|n| fx.bind(n, "Scheduled", None))).await;

    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let state = fx.until_ended(&rtd, &refs).await;
    let mut most = 0;
    for (i, running) in state.running_after_each_event().iter().enumerate() {
        assert!(
            running.len() <= 8,
            "event {i}: {} Runs Running at once on runs: 8: {running:?}",
            running.len()
        );
        most = most.max(running.len());
    }
    // What executed, in the order the tasks wrote it (appends of one line are atomic).
    let (mut executing, mut most_executing, mut started) = (0i32, 0i32, 0);
    for line in std::fs::read_to_string(&log).unwrap().lines() {
        match line {
            "+" => {
                executing += 1;
                started += 1;
            }
            "-" => executing -= 1,
            other => panic!("{other:?} in the execution log"),
        }
        assert!(
            executing <= 8,
            "{executing} tasks executing at once on runs: 8"
        );
        most_executing = most_executing.max(executing);
    }
    assert_eq!(started, N, "every task executed once");
    assert!(
        most_executing > 1,
        "the burst ran tasks concurrently (at most {most_executing} at once; {most} Running at an event)"
    );
    assert_eq!(state.count(RunPhase::Succeeded), N, "{:?}", state.phases());

    // Reservations are released once the terminal writes return, just after the watch shows
    // them: awaited, then every series must say what the scenario did.
    let scrape = async || {
        let (code, body) = support::world::http_get(metrics_port, "/metrics")
            .await
            .map_err(|e| e.to_string())?;
        if code != 200 {
            return Err(format!("/metrics answered {code}"));
        }
        let value = |series: &str| support::world::sample(&body, series);
        if value("kruntimes_runtimed_active_runs") != Some(0.0) {
            return Err(format!("Runs still held:\n{body}"));
        }
        Ok(body)
    };
    let body = eventually(WAIT, "runtimed to hold no Run", scrape).await;
    let value = |series: &str| {
        support::world::sample(&body, series).unwrap_or_else(|| panic!("no {series} in\n{body}"))
    };
    let n = N as f64;
    assert_eq!(
        value("kruntimes_runtimed_admissions_total{result=\"admitted\"}"),
        n
    );
    assert_eq!(
        value("kruntimes_runtimed_admissions_total{result=\"rejected\"}"),
        0.0
    );
    assert!(
        value("kruntimes_runtimed_admissions_total{result=\"waiting\"}") >= 1.0,
        "200 Runs on 8 slots: some waited\n{body}"
    );
    assert_eq!(value("kruntimes_runtimed_admission_wait_seconds_count"), n);
    assert_eq!(value("kruntimes_runtimed_dispatch_seconds_count"), n);
    assert_eq!(
        value("kruntimes_runtimed_capacity_resources{resource=\"runs\"}"),
        8.0
    );
    assert_eq!(
        value("kruntimes_runtimed_reserved_resources{resource=\"runs\"}"),
        0.0
    );
    // Nothing else writes these Runs: no claim or terminal write had to be retried.
    assert_eq!(
        value("kruntimes_runtimed_status_write_retries_total{write=\"claim\"}"),
        0.0
    );
    assert_eq!(
        value("kruntimes_runtimed_status_write_retries_total{write=\"terminal\"}"),
        0.0
    );
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        assert!(!line.contains("b-"), "a Run name in a label: {line}");
        assert!(!line.contains("rt-0"), "a Pod name in a label: {line}");
    }
}
