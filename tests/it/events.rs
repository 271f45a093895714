//! Events on Runs and the scheduler's gauges against the real control plane: the scheduler
//! (the built binary) says `FailedScheduling` once per distinct Pending message, however often
//! it retries, then `Scheduled` for a Run not started within the fold window or by its exit;
//! runtimed's `Started` is taken into a short task's end, published alone for a longer one and
//! written before runtimed exits for a task it leaves running; the real `kubectl describe run`
//! tells that story in order; the gauges `kruntimes_scheduler_pending_runs` and
//! `kruntimes_scheduler_runtime_pods` move as the Run waits and is placed. The routine Events
//! (`Scheduled`, `Started`, `Completed`, …) are off by default: the tests that tell them turn
//! them on with `--routine-events=true`, and one proves the default says only the failure.

use testkit as support;

use std::time::Duration;

use kube::ResourceExt as _;
use serde_json::json;

use kruntimes::api::RunPhase;
use kruntimes::testing::{pod, run};
use support::world::{
    self, Create, RuntimeServerProcess, RuntimedProcess, SchedulerProcess, TestNs, WAIT,
    after_the_second_of, eventually, sample,
};

/// Waits until the Events of Run `name` (`TestNs::events_of`) satisfy `check`; returns them.
async fn wait_events(
    ns: &TestNs,
    name: &str,
    what: &str,
    check: impl Fn(&[(String, String, i32)]) -> bool,
) -> Vec<(String, String, i32)> {
    eventually(WAIT, what, async || {
        let events = ns.events_of(name).await;
        if check(&events) {
            Ok(events)
        } else {
            Err(format!("{events:?}"))
        }
    })
    .await
}

/// (reason, note) of each Event, in order.
fn reasons_and_notes(events: &[(String, String, i32)]) -> Vec<(&str, &str)> {
    events
        .iter()
        .map(|(r, n, _)| (r.as_str(), n.as_str()))
        .collect()
}

/// Waits until the scraped `series` has `value`.
async fn gauge(scheduler: &SchedulerProcess, series: &str, value: f64) {
    eventually(WAIT, &format!("{series} = {value}"), async || {
        let body = scheduler.metrics().await;
        match sample(&body, series) {
            Some(v) if v == value => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await
}

#[testkit::test]
async fn a_run_that_waited_tells_its_story_and_the_gauges_follow_it() {
    let ns = TestNs::new("ev-story").await;
    let py_a = pod("py-a").capacity(&[("runs", 1)]).create(&ns).await;
    run("busy")
        .pod_uid(&py_a.uid().unwrap())
        .on("py-a")
        .running()
        .create(&ns)
        .await;
    let kubeconfig = support::control_plane().kubeconfig.clone();
    // The routine Events too (off by default): this story is told by them.
    let mut scheduler = SchedulerProcess::start_with(
        &kubeconfig,
        &ns.name,
        1,
        None,
        "ev-story",
        &["--routine-events=true"],
    )
    .await;
    gauge(
        &scheduler,
        "kruntimes_scheduler_runtime_pods{state=\"available\"}",
        1.0,
    )
    .await;
    gauge(
        &scheduler,
        "kruntimes_scheduler_runtime_pods{state=\"unavailable\"}",
        0.0,
    )
    .await;
    gauge(
        &scheduler,
        "kruntimes_scheduler_pending_runs{state=\"unschedulable\"}",
        0.0,
    )
    .await;

    run("waiter").create(&ns).await;
    let full = "0/1 Runtime Pods are available: 1 Insufficient runs.";
    wait_events(&ns, "waiter", "FailedScheduling on waiter", |events| {
        events == [("FailedScheduling".into(), full.into(), 1)]
    })
    .await;
    gauge(
        &scheduler,
        "kruntimes_scheduler_pending_runs{state=\"unschedulable\"}",
        1.0,
    )
    .await;

    // Every Run event is a new cycle with the same verdict: no new Event, no series growth.
    let attempts = |body: &str| {
        sample(
            body,
            "kruntimes_scheduler_schedule_attempts_total{result=\"unschedulable\"}",
        )
        .unwrap_or(0.0)
    };
    // One at a time: the queue coalesces a key's events while it waits.
    for i in 0..5 {
        let before = attempts(&scheduler.metrics().await);
        ns.merge::<kruntimes::api::Run>(
            "waiter",
            json!({"metadata": {"annotations": {"touched": i.to_string()}}}),
        )
        .await;
        eventually(WAIT, "one more unschedulable cycle", async || {
            let n = attempts(&scheduler.metrics().await);
            if n > before { Ok(()) } else { Err(n) }
        })
        .await;
    }
    assert_eq!(
        ns.events_of("waiter").await,
        [("FailedScheduling".to_string(), full.to_string(), 1)]
    );

    // A different verdict is a new Event with its own message.
    pod("py-b")
        .capacity(&[("runs", 1)])
        .not_ready()
        .create(&ns)
        .await;
    let two = "0/2 Runtime Pods are available: 1 Insufficient runs, 1 Runtime Pod not ready.";
    wait_events(&ns, "waiter", "a second FailedScheduling", |events| {
        events
            == [
                ("FailedScheduling".to_string(), full.to_string(), 1),
                ("FailedScheduling".to_string(), two.to_string(), 1),
            ]
    })
    .await;
    gauge(
        &scheduler,
        "kruntimes_scheduler_runtime_pods{state=\"unavailable\"}",
        1.0,
    )
    .await;

    // busy finishes: waiter is placed. No runtimed serves py-a yet, so the Run is not started
    // within the fold window, and `Scheduled` says so.
    ns.set_phase("busy", RunPhase::Succeeded, Some("py-a"))
        .await;
    wait_events(&ns, "waiter", "Scheduled on waiter", |events| {
        matches!(events.last(), Some((reason, note, 1))
            if reason == "Scheduled" && note == "Assigned to Runtime Pod py-a; not started there yet")
    })
    .await;
    gauge(
        &scheduler,
        "kruntimes_scheduler_pending_runs{state=\"unschedulable\"}",
        0.0,
    )
    .await;
    gauge(
        &scheduler,
        "kruntimes_scheduler_pending_runs{state=\"queued\"}",
        0.0,
    )
    .await;

    // runtimed admits, starts and completes it; a Run bound to the same full Pod by hand waits
    // there until it is done. The scheduler's part is over: stop it, so it cannot take
    // `squeezed` for a Pending Run in the moment between its creation and its status write
    // (two calls) and tell a FailedScheduling story that is not this test's.
    scheduler.kill();
    // Created in a later second than waiter, so runtimed admits waiter first.
    after_the_second_of(&ns.get_run("waiter").await).await;
    let squeezed = run("squeezed")
        .pod_uid(&py_a.uid().unwrap())
        .on("py-a")
        .create(&ns)
        .await;
    // A window far longer than these tasks: each end takes `Started` in, whatever the load.
    let runtimed =
        RuntimedProcess::start(&py_a, &["--routine-events=true", "--event-fold-window=5m"]);
    ns.wait_runs(WAIT, "waiter and squeezed Succeeded", |runs| {
        let done = |name| world::phase_of(runs, name) == Some(RunPhase::Succeeded);
        (done("waiter") && done("squeezed")).then_some(())
    })
    .await;
    let reasons = |events: &[(String, String, i32)]| {
        events.iter().map(|(r, _, _)| r.clone()).collect::<Vec<_>>()
    };
    wait_events(&ns, "waiter", "the whole story of waiter", |events| {
        reasons(events)
            == [
                "FailedScheduling",
                "FailedScheduling",
                "Scheduled",
                "Completed",
            ]
    })
    .await;
    let events = wait_events(&ns, "squeezed", "squeezed waited, then ran", |events| {
        reasons(events) == ["Waiting", "Admitted", "Completed"]
    })
    .await;
    assert_eq!(
        events[2].1,
        "execution completed (exit code 0); before that: started the task on Runtime Pod py-a"
    );
    assert!(
        events[0]
            .1
            .starts_with("does not fit on Runtime Pod py-a now: "),
        "{events:?}\n{}",
        runtimed.log()
    );
    assert_eq!(
        squeezed.status.unwrap().assigned_pod.as_deref(),
        Some("py-a")
    );

    // The real kubectl tells the story, in order.
    let text = support::ok(
        &support::kubectl()
            .args(["describe", "run", "waiter", "-n", &ns.name])
            .output()
            .unwrap(),
        "kubectl describe run waiter",
    );
    let events = text
        .split("Events:")
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"));
    let lines: Vec<&str> = events
        .lines()
        .filter(|l| l.contains("kruntimes-scheduler") || l.contains("kruntimes-runtimed"))
        .collect();
    assert_eq!(lines.len(), 4, "{events}");
    assert!(
        lines[0].contains("Warning")
            && lines[0].contains("FailedScheduling")
            && lines[0].contains(full),
        "{events}"
    );
    assert!(
        lines[1].contains("FailedScheduling") && lines[1].contains(two),
        "{events}"
    );
    assert!(
        lines[2].contains("Normal")
            && lines[2].contains("Scheduled")
            && lines[2].contains("Assigned to Runtime Pod py-a; not started there yet"),
        "{events}"
    );
    // Admitted at once and ended within the window: `Completed` says all three.
    assert!(
        lines[3].contains("Normal")
            && lines[3].contains("Completed")
            && lines[3].contains("kruntimes-runtimed")
            && lines[3].contains(
                "execution completed (exit code 0); before that: admitted with {runs: 1} and started the task on Runtime Pod py-a"
            ),
        "{events}"
    );
}

/// A task that outlasts runtimed's fold window hears `Started` on its own when the window ends,
/// before its end: two Events, each with its own note.
#[testkit::test]
async fn a_task_longer_than_the_fold_window_hears_started_then_completed() {
    let ns = TestNs::new("ev-long").await;
    let py = pod("py").capacity(&[("runs", 1)]).create(&ns).await;
    // Bound by hand: this story is runtimed's alone.
    run("long")
        .task(&["sleep", "2"])
        .pod_uid(&py.uid().unwrap())
        .on("py")
        .create(&ns)
        .await;
    let _runtimed =
        RuntimedProcess::start(&py, &["--routine-events=true", "--event-fold-window=200ms"]);
    let events = wait_events(&ns, "long", "Started, then Completed", |events| {
        events.iter().any(|(reason, _, _)| reason == "Completed")
    })
    .await;
    let told = reasons_and_notes(&events);
    assert_eq!(
        told,
        [
            (
                "Started",
                "admitted with {runs: 1} and started the task on Runtime Pod py"
            ),
            ("Completed", "execution completed (exit code 0)"),
        ]
    );
}

/// runtimed writes what it still holds before it exits. A task on the runtime server is left
/// running there when runtimed shuts down, so no end of it takes its `Started` in, and the
/// 5-minute fold window is far from over at the exit: the `Started` is written by then all the
/// same, not dropped with the process.
#[testkit::test]
async fn runtimed_writes_a_held_started_before_it_exits() {
    let ns = TestNs::new("ev-exit").await;
    let py = pod("py").capacity(&[("runs", 1)]).create(&ns).await;
    let server = RuntimeServerProcess::start().await;
    // Bound by hand: this story is runtimed's alone.
    run("served")
        .task(&["sleep", "300"])
        .pod_uid(&py.uid().unwrap())
        .on("py")
        .create(&ns)
        .await;
    let mut args = vec!["--routine-events=true", "--event-fold-window=5m"];
    args.extend(server.flag());
    let mut runtimed = RuntimedProcess::start(&py, &args);
    ns.wait_phase("served", RunPhase::Running, WAIT).await;
    // Running is the claim; the task starts on the server after it. SIGTERM before that would
    // find no execution to leave there.
    eventually(
        WAIT,
        "the task to run on the server",
        async || match server.executions().await {
            Ok(ids) if ids.len() == 1 => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    runtimed.sigterm();
    let status = runtimed.wait(Duration::from_secs(30)).await;
    assert!(
        status.success(),
        "runtimed exits 0 after SIGTERM: {status}\n{}",
        runtimed.log_tail()
    );
    // Read once, after the exit: what runtimed wrote, it wrote before exiting.
    let events = ns.events_of("served").await;
    assert_eq!(
        reasons_and_notes(&events),
        [(
            "Started",
            "admitted with {runs: 1} and started the task on Runtime Pod py"
        )],
        "{}",
        runtimed.log_tail()
    );
    assert_eq!(ns.get_run("served").await.phase(), RunPhase::Running);
}

/// The scheduler writes what it still holds before it exits: a Run bound to a Pod with no
/// runtimed hears `Scheduled` ("…; not started there yet") when the scheduler is stopped,
/// though its 5-minute fold window is far from over.
#[testkit::test]
async fn the_scheduler_writes_a_held_scheduled_before_it_exits() {
    let ns = TestNs::new("ev-sched-exit").await;
    pod("py").capacity(&[("runs", 1)]).create(&ns).await;
    let kubeconfig = support::control_plane().kubeconfig.clone();
    let args = ["--routine-events=true", "--event-fold-window=5m"];
    let mut scheduler =
        SchedulerProcess::start_with(&kubeconfig, &ns.name, 1, None, "ev-sched-exit", &args).await;
    run("unstarted").task(&["true"]).create(&ns).await;
    ns.wait_phase("unstarted", RunPhase::Scheduled, WAIT).await;
    let status =
        kruntimes::util::process::stop_blocking(&mut scheduler.child, Duration::from_secs(30));
    assert!(
        status.is_some_and(|s| s.success()),
        "the scheduler exits 0 on SIGTERM: {status:?}"
    );
    // Read once, after the exit: what the scheduler wrote, it wrote before exiting.
    let events = ns.events_of("unstarted").await;
    assert_eq!(
        reasons_and_notes(&events),
        [(
            "Scheduled",
            "Assigned to Runtime Pod py; not started there yet"
        )]
    );
}

/// The scheduler and runtimed as they run by default (no `--routine-events`, as the Go project
/// writes no Event on a Run's ordinary path): a Run that fails tells only what a user acts on.
/// Its story is `Failed` alone, with its own note: no `Scheduled` and no `Started`, neither as
/// Events of their own nor folded into the `Failed` note.
#[testkit::test]
async fn by_default_a_failed_run_says_only_that_it_failed() {
    let ns = TestNs::new("ev-routine").await;
    let py = pod("py").capacity(&[("runs", 1)]).create(&ns).await;
    let kubeconfig = support::control_plane().kubeconfig.clone();
    // runtimed with the default fold window, as in production: a `Started` published anyway
    // would be an Event of its own or a note inside `Failed`. The scheduler's `Scheduled`
    // is never folded into runtimed's Events and, with the window, is left out for a Run
    // started in time whatever the flag says: without a window it would be written at once.
    // Either way the exact story below fails.
    let quiet: [&str; 0] = [];
    let scheduler_args = ["--event-fold-window=0s"];
    let _scheduler = SchedulerProcess::start_with(
        &kubeconfig,
        &ns.name,
        1,
        None,
        "ev-routine",
        &scheduler_args,
    )
    .await;
    let _runtimed = RuntimedProcess::start(&py, &quiet);
    run("exit-3")
        .task(&["sh", "-c", "exit 3"])
        .create(&ns)
        .await;
    let events = wait_events(&ns, "exit-3", "the Failed Event", |events| {
        events.iter().any(|(reason, _, _)| reason == "Failed")
    })
    .await;
    assert_eq!(
        ns.get_run("exit-3").await.phase(),
        RunPhase::Failed,
        "{events:?}"
    );
    let told = reasons_and_notes(&events);
    assert_eq!(
        told,
        [("Failed", "the process exited with code 3 (exit code 3)")]
    );
}
