//! runtimed's whole life under the admission policy, with the scheduler, on the real control
//! plane: the Runtime's Pod runs as the service account the scheduler made for the Runtime
//! (`kubectl-kruntimes-runtimed-python`), with a Pod-bound token, and the scheduler with its
//! own service account (deploy/scheduler.yaml).

use testkit as support;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt as _;

use kruntimes::api::status::reasons;
use kruntimes::api::{Run, RunPhase};
use kruntimes::testing::{run, runtime};
use kruntimes::util::process::Signal;
use support::tokens;
use support::world::{
    self, Create, RuntimedProcess, SchedulerProcess, TestNs, create_in, eventually,
};

use support::policy::*;

// ---------------------------------------------------------------------------------------------
// runtimed's whole life, with the scheduler, under the policy.

/// Kills runtimed outright, with no chance to clean up (as a crash would).
fn sigkill(runtimed: &RuntimedProcess) {
    runtimed.signal(Signal::Kill);
}

#[testkit::test]
async fn runtimed_lives_its_whole_life_under_the_policy_with_the_scheduler() {
    let ns = TestNs::new("policy-life").await;
    let dir = tempfile::tempdir().unwrap();
    let scheduler = tokens::scheduler_kubeconfig(dir.path()).await;
    let python = runtime("python").capacity(&[("runs", 4)]).build();
    create_in(&ns, python).await;
    // The scheduler runs with its own service account: the policy does not apply to it.
    let _scheduler = SchedulerProcess::start_as(&scheduler, &ns.name, 2, None, "policy").await;
    let pod = ns.runtime_pods("python", 1).await.remove(0);
    let (pod_name, pod_uid) = (pod.name_any(), pod.uid().unwrap());
    ns.set_ready(&pod_name, true).await;
    let token =
        tokens::pod_bound_token(&ns.client, &ns.name, &tokens::account_of(&pod), &pod).await;
    let kubeconfig = tokens::token_kubeconfig(dir.path(), "runtimed", &token, &ns.name);
    let as_pod = support::client_for(&kubeconfig).await;
    await_enforced(&ns.name, &[&as_pod]).await;

    // `-v`: info, so that every refusal runtimed meets is in its log.
    // With an artifact store: a terminal write carries the stored artifacts' refs.
    let store = dir.path().join("artifacts").display().to_string();
    let args = [
        "-v",
        "--heartbeat-interval",
        "1s",
        "--shutdown-grace",
        "1s",
        // Every Event on its own, whatever the task's length: the story below is not timing's;
        // the routine ones too (off by default).
        "--routine-events=true",
        "--event-fold-window",
        "0s",
        "--artifact-root",
        store.as_str(),
        "--artifact-volume-claim",
        "arts",
    ];
    let mut runtimed = RuntimedProcess::start_as(&kubeconfig, &pod, &args);

    // Heartbeat: the Lease named after the Pod, held by its UID, renewed.
    let leases = ns.api::<Lease>();
    let mut renewals = Vec::new();
    eventually(WAIT, "a renewed heartbeat", async || {
        let lease = leases.get_opt(&pod_name).await.unwrap();
        if let Some(spec) = lease.and_then(|l| l.spec) {
            assert_eq!(spec.holder_identity.as_deref(), Some(pod_uid.as_str()));
            if renewals.last() != Some(&spec.renew_time) {
                renewals.push(spec.renew_time);
            }
        }
        if renewals.len() >= 2 {
            Ok(())
        } else {
            let log = runtimed.log_tail();
            Err(format!(
                "renewals {renewals:?}\n--- runtimed log ---\n{log}"
            ))
        }
    })
    .await;

    // Claim, run and report: success, an exit code, and a task that cannot start (ended while
    // still Scheduled).
    run("ok").create(&ns).await;
    run("exit-3")
        .task(&["sh", "-c", "exit 3"])
        .create(&ns)
        .await;
    run("artifact")
        .task(&["sh", "-c", "echo a > \"$KRUNTIME_ARTIFACTS_DIR/a\""])
        .create(&ns)
        .await;
    // A function Run: no task for runtimed to start without a runtime server.
    run("no-task").function("main.handler").create(&ns).await;
    let ended = |runs: &[Run], name: &str| {
        runs.iter()
            .find(|r| r.name_any() == name && r.phase().is_terminal())
            .map(|r| r.status.clone().unwrap())
    };
    let (ok, exit3, no_task, artifact) = ns
        .wait_runs(WAIT, "four Runs ended", |runs| {
            Some((
                ended(runs, "ok")?,
                ended(runs, "exit-3")?,
                ended(runs, "no-task")?,
                ended(runs, "artifact")?,
            ))
        })
        .await;
    assert_eq!(
        (artifact.phase, artifact.artifact_refs.len()),
        (Some(RunPhase::Succeeded), 1),
        "{artifact:?}\n--- runtimed log ---\n{}",
        runtimed.log_tail()
    );
    assert_eq!(
        (ok.phase, ok.exit_code, ok.assigned_pod.as_deref()),
        (Some(RunPhase::Succeeded), Some(0), Some(pod_name.as_str()))
    );
    assert_eq!(
        (exit3.phase, exit3.reason.as_deref(), exit3.exit_code),
        (Some(RunPhase::Failed), Some(reasons::EXIT_CODE), Some(3))
    );
    assert_eq!(
        (no_task.phase, no_task.reason.as_deref()),
        (Some(RunPhase::Failed), Some(reasons::START_FAILED))
    );
    assert!(
        no_task.start_time.is_none(),
        "no-task was never claimed: {no_task:?}"
    );

    // Restart: a Run left Running by the killed agent is failed by the next one.
    run("long").task(&["sleep", "30"]).create(&ns).await;
    ns.wait_runs(WAIT, "long Running", |runs| {
        (world::phase_of(runs, "long") == Some(RunPhase::Running)).then_some(())
    })
    .await;
    sigkill(&runtimed);
    runtimed.wait(WAIT).await;
    let first_log = runtimed.log();
    let mut runtimed = RuntimedProcess::start_as(&kubeconfig, &pod, &args);
    let long = ns
        .wait_runs(WAIT, "long failed by the next runtimed", |runs| {
            ended(runs, "long")
        })
        .await;
    assert_eq!(
        (long.phase, long.reason.as_deref()),
        (Some(RunPhase::Failed), Some(reasons::RUNTIMED_RESTARTED))
    );

    // SIGTERM: a Run killed at shutdown is failed and the Lease is deleted.
    run("last").task(&["sleep", "30"]).create(&ns).await;
    ns.wait_runs(WAIT, "last Running", |runs| {
        (world::phase_of(runs, "last") == Some(RunPhase::Running)).then_some(())
    })
    .await;
    runtimed.sigterm();
    let status = runtimed.wait(WAIT).await;
    assert!(
        status.success(),
        "runtimed after SIGTERM: {status}\n{}",
        runtimed.log()
    );
    let last = ns.get_run("last").await.status.unwrap();
    assert_eq!(
        (last.phase, last.reason.as_deref()),
        (
            Some(RunPhase::Failed),
            Some(reasons::RUNTIME_POD_TERMINATED)
        )
    );
    assert!(
        leases.get_opt(&pod_name).await.unwrap().is_none(),
        "the heartbeat Lease was not deleted:\n{}",
        runtimed.log()
    );

    // Its Events tell each Run's story, reported as its own Pod.
    let story = |name: &str| {
        let events = ns.api::<Event>();
        let name = name.to_string();
        let pod_name = pod_name.clone();
        async move {
            let mut events: Vec<Event> = events
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter(|e| {
                    e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str())
                        && e.reporting_controller.as_deref() == Some("kruntimes-runtimed")
                })
                .collect();
            events.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
            for e in &events {
                assert_eq!(e.reporting_instance.as_deref(), Some(pod_name.as_str()));
            }
            events
                .into_iter()
                .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
                .collect::<Vec<_>>()
        }
    };
    let ok_story = story("ok").await;
    let reasons_of = |s: &[(String, String)]| s.iter().map(|(r, _)| r.clone()).collect::<Vec<_>>();
    assert_eq!(
        reasons_of(&ok_story),
        ["Started", "Completed"],
        "{ok_story:?}"
    );
    assert!(
        ok_story[0]
            .1
            .starts_with("admitted with {runs: 1} and started the task on Runtime Pod "),
        "{ok_story:?}"
    );
    assert_eq!(ok_story[1].1, "execution completed (exit code 0)");
    let exit3_story = story("exit-3").await;
    assert_eq!(
        reasons_of(&exit3_story),
        ["Started", "Failed"],
        "{exit3_story:?}"
    );
    assert_eq!(
        exit3_story[1].1,
        "the process exited with code 3 (exit code 3)"
    );

    // Not one of runtimed's requests was refused along the way.
    for log in [first_log, runtimed.log()] {
        assert!(
            !log.contains("denied request") && !log.contains("forbidden"),
            "runtimed was refused something:\n{log}"
        );
    }
}

/// The attempt fences the old one (the retry issue's partition scenario): runtimed of the Pod
/// running attempt 1 is frozen (SIGSTOP) until its heartbeat is stale, the scheduler sends the
/// Run back to Pending for attempt 2, which succeeds on the other Pod; then attempt 1's task
/// ends with exit code 7 and its runtimed thaws (SIGCONT). Its stale write cannot land: the
/// Run stays Succeeded at attempt 2 with the other Pod's result, and the same write made
/// directly with the frozen Pod's token is refused by the policy.
#[testkit::test]
async fn a_partitioned_runtimed_cannot_write_its_old_attempts_result() {
    let ns = TestNs::new("policy-fence").await;
    let dir = tempfile::tempdir().unwrap();
    let scheduler = tokens::scheduler_kubeconfig(dir.path()).await;
    let python = runtime("python")
        .replicas(2)
        .capacity(&[("runs", 1)])
        .build();
    create_in(&ns, python).await;
    let _scheduler = SchedulerProcess::start_with(
        &scheduler,
        &ns.name,
        2,
        None,
        "fence",
        &["--pod-lost-grace=3s"],
    )
    .await;
    let args = [
        "-v",
        "--heartbeat-interval",
        "1s",
        "--heartbeat-duration",
        "3s",
        "--shutdown-grace",
        "1s",
    ];
    let mut agents = std::collections::BTreeMap::new();
    let mut clients = std::collections::BTreeMap::new();
    for pod in ns.runtime_pods("python", 2).await {
        ns.set_ready(&pod.name_any(), true).await;
        let token =
            tokens::pod_bound_token(&ns.client, &ns.name, &tokens::account_of(&pod), &pod).await;
        let kubeconfig = tokens::token_kubeconfig(dir.path(), &pod.name_any(), &token, &ns.name);
        let client = support::client_for(&kubeconfig).await;
        await_enforced(&ns.name, &[&client]).await;
        agents.insert(
            pod.name_any(),
            RuntimedProcess::start_as(&kubeconfig, &pod, &args),
        );
        clients.insert(pod.name_any(), client);
    }
    // Attempt 1 waits at its gate, then exits 7; any later attempt exits 0 at once.
    let gates = support::gates::Gates::new(&ns.name);
    let script = format!("{}; exit 7", gates.hold_first_attempt("job"));
    let mut job = run("job").task(&["sh", "-c", &script]).build();
    job.spec.retry_policy = Some(kruntimes::api::RetryPolicy {
        max_attempts: Some(2),
        backoff: Some("1s".into()),
        retryable_reasons: Vec::new(),
    });
    create_in(&ns, job).await;
    let first = ns
        .wait_runs(WAIT, "job Running (attempt 1)", |runs| {
            runs.iter()
                .find(|r| r.name_any() == "job" && r.phase() == RunPhase::Running)
                .and_then(|r| r.status.as_ref()?.assigned_pod.clone())
        })
        .await;
    gates.reached_first_attempt("job").await;
    agents[&first].signal(Signal::Stop);
    let done = ns
        .wait_runs(WAIT, "job Succeeded at attempt 2 elsewhere", |runs| {
            runs.iter()
                .find(|r| r.name_any() == "job" && r.phase().is_terminal())
                .cloned()
        })
        .await;
    let status = done.status.clone().unwrap();
    assert_eq!(
        (status.phase, status.attempt, status.exit_code),
        (Some(RunPhase::Succeeded), Some(2), Some(0)),
        "{status:?}"
    );
    assert_ne!(status.assigned_pod.as_deref(), Some(first.as_str()));
    // Attempt 1 ends (exit 7) and its runtimed thaws and sees it end.
    gates.open("job");
    agents[&first].signal(Signal::Cont);
    eventually(
        WAIT,
        "the thawed runtimed to see attempt 1 end",
        async || {
            let log = agents[&first].log();
            if log.contains("Run job ended: the process exited with code 7")
                || log.contains("process of Run job is gone")
            {
                Ok(())
            } else {
                Err(agents[&first].log_tail())
            }
        },
    )
    .await;
    // Its old attempt changed nothing.
    let after = ns.get_run("job").await;
    assert_eq!(
        after.status, done.status,
        "the old attempt's runtimed wrote over attempt 2"
    );
    // The write it would make, made directly with its Pod's token, is refused by the policy.
    let f_runs: kube::Api<Run> = kube::Api::namespaced(clients[&first].clone(), &ns.name);
    let mut stale = after.clone();
    let s = stale.status.as_mut().unwrap();
    s.phase = Some(RunPhase::Failed);
    s.exit_code = Some(7);
    s.reason = Some(reasons::EXIT_CODE.into());
    assert_refused(
        f_runs.replace_status("job", &write_params(), &stale).await,
        "may update only Runs assigned to its Pod",
    );
}
