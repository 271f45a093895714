//! `spec.retryPolicy` on the real control plane with the built binaries (scheduler and
//! runtimed): a failed attempt costs one attempt, not the Run. Ported from the kruntimes
//! project's `TestRunRetry` and `TestCancelRunningRunDoesNotRetry` with stronger assertions,
//! plus the limits (attempts run out, unlisted reasons, cancel during the backoff), the
//! backoff's timing, and healing that retries: a Running Run whose Pod is lost is placed again
//! for its next attempt; a Run deleted while its failed attempt is written leaves no room
//! held. Every scenario keeps an overcommit watch to its end (no Pod over
//! capacity and no attempt of a Run on two Pods at any Run event) and ends with no capacity
//! left held.

use testkit as support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::DeleteParams;

use kruntimes::api::status::{CONDITION_RUNNING, reasons};
use kruntimes::api::{RetryPolicy, Run, RunPhase};
use kruntimes::testing::RunBuilder;
use support::pool::Pool;
use support::world::{
    Create, RunEvent, RunEvents, SchedulerProcess, TestNs, after_the_second_of, count, create_in,
    eventually,
};

/// runtimed renews every second for 5 s, so a lost agent is noticed within seconds; its routine
/// Events (off by default) too, which the retry stories below end with (`RunSucceeded`).
const RUNTIMED_ARGS: [&str; 5] = [
    "--heartbeat-interval",
    "1s",
    "--heartbeat-duration",
    "5s",
    "--routine-events=true",
];

async fn scheduler(ns: &TestNs) -> SchedulerProcess {
    let kubeconfig = support::control_plane().kubeconfig.clone();
    SchedulerProcess::start_with(
        &kubeconfig,
        &ns.name,
        4,
        None,
        &ns.name,
        &["--pod-lost-grace=5s"],
    )
    .await
}

fn policy(max_attempts: i32, backoff: &str, reasons: &[&str]) -> RetryPolicy {
    RetryPolicy {
        max_attempts: Some(max_attempts),
        backoff: Some(backoff.to_string()),
        retryable_reasons: reasons.iter().map(|r| r.to_string()).collect(),
    }
}

/// Creates `run` with `policy`.
async fn create_with(ns: &TestNs, run: RunBuilder, policy: RetryPolicy) -> Run {
    let mut run = run.build();
    run.spec.retry_policy = Some(policy);
    create_in(ns, run).await
}

/// A script that fails until it has run `succeed_at` times, counting its runs in `counter`.
fn fails_until(counter: &std::path::Path, succeed_at: u32) -> String {
    let f = counter.display();
    format!(
        "n=$(cat {f} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {f}; [ $n -ge {succeed_at} ]"
    )
}

/// Waits until the reasons of the Events of `name` that are among `RETRY_REASONS` are exactly
/// `want`, in order; returns every Event as (reason, note).
async fn wait_events(ns: &TestNs, name: &str, want: &[&str]) -> Vec<(String, String)> {
    const RETRY_REASONS: [&str; 7] = [
        "RunFailedRetrying",
        "RunRetrying",
        "RunRetriesExhausted",
        "RunSucceeded",
        "StaleRunRetrying",
        "Failed",
        "Completed",
    ];
    eventually(
        Duration::from_secs(30),
        &format!("Events {want:?} of {name}"),
        async || {
            let events: Vec<(String, String)> = ns
                .events_of(name)
                .await
                .into_iter()
                .map(|(reason, note, _)| (reason, note))
                .collect();
            let reasons: Vec<&str> = events
                .iter()
                .map(|(r, _)| r.as_str())
                .filter(|r| RETRY_REASONS.contains(r))
                .collect();
            if reasons == want {
                Ok(events)
            } else {
                Err(format!("{events:?}"))
            }
        },
    )
    .await
}

fn running_condition(run: &Run) -> Option<(String, String)> {
    run.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_RUNNING)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

/// For each failed attempt of `name` in the recorded history: the seconds between its
/// `Running=False` and the next attempt's `startTime` (both whole seconds, as stored).
fn pauses(events: &[RunEvent], name: &str) -> Vec<i64> {
    let mut pauses = Vec::new();
    let mut failed_at: Option<i64> = None;
    for e in events
        .iter()
        .filter(|e| e.run.name_any() == name && !e.deleted)
    {
        let Some(status) = e.run.status.as_ref() else {
            continue;
        };
        let running = status
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_RUNNING);
        match running {
            Some(c) if c.status == "False" && status.phase == Some(RunPhase::Running) => {
                failed_at.get_or_insert(c.last_transition_time.0.as_second());
            }
            Some(c) if c.status == "True" => {
                if let (Some(at), Some(started)) = (failed_at.take(), &status.start_time) {
                    pauses.push(started.0.as_second() - at);
                }
            }
            _ => {}
        }
    }
    pauses
}

#[testkit::test]
async fn a_task_failing_twice_then_succeeding_ends_succeeded_at_attempt_3() {
    let ns = TestNs::new("retry-ok").await;
    let _scheduler = scheduler(&ns).await;
    let pool = Pool::start(&ns, "sh", 1, &[("runs", 1)], &RUNTIMED_ARGS).await;
    let watch = pool.overcommit_watch().await;
    let history = RunEvents::start(&ns).await;
    let dir = tempfile::tempdir().unwrap();
    let script = fails_until(&dir.path().join("count"), 3);
    let run = pool.run("flaky").task(&["sh", "-c", &script]);
    create_with(&ns, run, policy(3, "1s", &[])).await;
    let done = pool.all_done(&["flaky".to_string()]).await;
    let flaky = &done["flaky"];
    let status = flaky.status.as_ref().unwrap();
    assert_eq!(flaky.phase(), RunPhase::Succeeded, "{status:?}");
    assert_eq!(status.attempt, Some(3));
    assert_eq!(status.exit_code, Some(0));
    assert_eq!(
        running_condition(flaky),
        Some(("False".into(), reasons::COMPLETED.into()))
    );
    let events = wait_events(
        &ns,
        "flaky",
        &[
            "RunFailedRetrying",
            "RunRetrying",
            "RunFailedRetrying",
            "RunRetrying",
            "RunSucceeded",
        ],
    )
    .await;
    let notes: Vec<&str> = events.iter().map(|(_, n)| n.as_str()).collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("attempt 1 of 3 failed (NonZeroExitCode")),
        "{notes:?}"
    );
    assert!(
        notes.iter().any(|n| n.starts_with("attempt 3 of 3 starts")),
        "{notes:?}"
    );
    // Backoff: 1 s before attempt 2, 2 s before attempt 3, counted from the end of the whole
    // second the failure is stored with: at least 1 + backoff between the stored seconds.
    history.catch_up().await;
    let recorded = history.events();
    let pauses = pauses(&recorded, "flaky");
    assert_eq!(pauses.len(), 2, "{pauses:?}");
    assert!((2..=5).contains(&pauses[0]), "{pauses:?}");
    assert!((3..=6).contains(&pauses[1]), "{pauses:?}");
    watch.finish().await;
    pool.assert_no_leaked_capacity("probe").await;
}

#[testkit::test]
async fn attempts_run_out_unlisted_reasons_are_not_retried_and_cancel_ends_a_backoff() {
    let ns = TestNs::new("retry-limits").await;
    let _scheduler = scheduler(&ns).await;
    let pool = Pool::start(&ns, "sh", 1, &[("runs", 2)], &RUNTIMED_ARGS).await;
    let watch = pool.overcommit_watch().await;
    let fails = pool.run("fails").task(&["sh", "-c", "exit 1"]);
    create_with(&ns, fails, policy(2, "1s", &[])).await;
    let unlisted = pool.run("unlisted").task(&["sh", "-c", "exit 1"]);
    create_with(&ns, unlisted, policy(3, "1s", &["Timeout", "PodGone"])).await;
    let done = pool
        .all_done(&["fails".to_string(), "unlisted".to_string()])
        .await;
    let fails = &done["fails"];
    assert_eq!(fails.phase(), RunPhase::Failed);
    assert_eq!(fails.attempt(), 2);
    assert_eq!(fails.status.as_ref().unwrap().exit_code, Some(1));
    wait_events(
        &ns,
        "fails",
        &["RunFailedRetrying", "RunRetrying", "RunRetriesExhausted"],
    )
    .await;
    let unlisted = &done["unlisted"];
    assert_eq!(unlisted.phase(), RunPhase::Failed);
    assert_eq!(unlisted.attempt(), 1, "NonZeroExitCode is not in the list");
    wait_events(&ns, "unlisted", &["Failed"]).await;

    // A backoff of 60 s, cancelled: the Run ends Cancelled at once and frees its room.
    const BACKOFF_SECONDS: i64 = 60;
    let waits = pool.run("waits").task(&["sh", "-c", "exit 1"]);
    create_with(&ns, waits, policy(3, &format!("{BACKOFF_SECONDS}s"), &[])).await;
    // When its backoff began, as runtimed stamped it (Running=False).
    let backoff_from = pool
        .until("waits between attempts", |runs| {
            let r = runs
                .iter()
                .find(|r| r.name_any() == "waits" && r.phase() == RunPhase::Running)?;
            r.status
                .as_ref()?
                .conditions
                .iter()
                .find(|c| c.type_ == CONDITION_RUNNING && c.status == "False")
                .map(|c| c.last_transition_time.0)
        })
        .await;
    ns.cancel("waits").await;
    let cancelled = pool.all_done(&["waits".to_string()]).await;
    let waits = &cancelled["waits"];
    assert_eq!(waits.phase(), RunPhase::Cancelled);
    assert_eq!(waits.attempt(), 2, "attempt 2 never started");
    let started = waits.status.as_ref().unwrap().start_time.clone().unwrap();
    let ended = waits
        .status
        .as_ref()
        .unwrap()
        .completion_time
        .clone()
        .unwrap();
    // Read from the Run's own times (startTime, the backoff's Running=False and
    // completionTime, all runtimed's stamps): it ended well within the backoff, not after it.
    let (lived, into_backoff) = (
        ended.0.duration_since(started.0),
        ended.0.duration_since(backoff_from),
    );
    eprintln!(
        "cancelled during a {BACKOFF_SECONDS}s backoff: ended {into_backoff:#} into it, {lived:#} after its attempt started"
    );
    assert!(
        lived.as_secs() < BACKOFF_SECONDS / 2,
        "cancelled at once, not after the {BACKOFF_SECONDS} s backoff: ended {lived:#} after its start"
    );
    watch.finish().await;
    pool.assert_no_leaked_capacity("probe").await;
}

/// The kruntimes project's `TestCancelRunningRunDoesNotRetry`: a Running Run with a retry
/// policy, cancelled, ends Cancelled at attempt 1 with `Running=False/Cancelled`.
#[testkit::test]
async fn cancelling_a_running_run_does_not_retry_it() {
    let ns = TestNs::new("retry-cancel").await;
    let _scheduler = scheduler(&ns).await;
    let pool = Pool::start(&ns, "sh", 1, &[("runs", 1)], &RUNTIMED_ARGS).await;
    let watch = pool.overcommit_watch().await;
    create_with(&ns, pool.held("held"), policy(3, "1s", &[])).await;
    pool.until("held Running", |runs| {
        (count(runs, RunPhase::Running) == 1).then_some(())
    })
    .await;
    ns.cancel("held").await;
    let done = pool.all_done(&["held".to_string()]).await;
    let held = &done["held"];
    assert_eq!(held.phase(), RunPhase::Cancelled);
    assert!(held.status.as_ref().unwrap().completion_time.is_some());
    assert_eq!(held.attempt(), 1);
    assert_eq!(
        running_condition(held),
        Some(("False".into(), reasons::CANCELLED.into()))
    );
    watch.finish().await;
    pool.assert_no_leaked_capacity("probe").await;
}

/// A Run deleted while runtimed writes its failed attempt leaves no room held: the write is
/// refused (a ValidatingAdmissionPolicy of this test's own, on this namespace's Runs labelled
/// for it, refuses the backoff `Running=False`), so runtimed is still writing it when the Run
/// is deleted and the watch never shows it between attempts; once it is gone, the Pod's whole
/// capacity runs again (runtimed once kept such a reservation until it restarted).
#[testkit::test]
async fn a_run_deleted_while_its_failed_attempt_is_written_leaves_no_room_held() {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    let ns = TestNs::new("retry-deleted").await;
    let _scheduler = scheduler(&ns).await;
    let pool = Pool::start(&ns, "sh", 1, &[("runs", 1)], &RUNTIMED_ARGS).await;
    let watch = pool.overcommit_watch().await;
    let label = "kruntimes-test/refuse-failed-attempts";
    let name = format!("{}-refuse-failed-attempts", ns.name);
    let refuse: ValidatingAdmissionPolicy = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["kruntimes.io"],
                "apiVersions": ["*"], "operations": ["UPDATE"], "resources": ["runs/status"]}]},
            "matchConditions": [{"name": "labelled",
                "expression": format!("has(object.metadata.labels) && '{label}' in object.metadata.labels")}],
            "validations": [{
                "expression": "!(has(object.status.phase) && object.status.phase == 'Running' && has(object.status.conditions) && object.status.conditions.exists(c, c.type == 'Running' && c.status == 'False'))",
                "message": "this test refuses failed attempts"}],
        },
    }))
    .unwrap();
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels":
                {"kubernetes.io/metadata.name": ns.name}}}},
    }))
    .unwrap();
    let policies = kube::Api::<ValidatingAdmissionPolicy>::all(ns.client.clone());
    let bindings = kube::Api::<ValidatingAdmissionPolicyBinding>::all(ns.client.clone());
    let pp = kube::api::PostParams::default();
    policies.create(&pp, &refuse).await.unwrap();
    bindings.create(&pp, &binding).await.unwrap();

    let mut doomed = pool.run("doomed").task(&["sh", "-c", "exit 1"]).build();
    doomed
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(label.into(), "true".into());
    doomed.spec.retry_policy = Some(policy(3, "1s", &[]));
    create_in(&ns, doomed).await;
    // Refused, and retried: runtimed is writing it still.
    eventually(
        Duration::from_secs(60),
        "runtimed's failed-attempt write to be refused",
        async || match pool
            .agent()
            .log()
            .contains("this test refuses failed attempts")
        {
            true => Ok(()),
            false => Err(pool.agent().log_tail()),
        },
    )
    .await;
    ns.runs()
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    watch.finish().await;
    pool.assert_no_leaked_capacity("probe").await;
    let _ = bindings.delete(&name, &Default::default()).await;
    let _ = policies.delete(&name, &Default::default()).await;
}

/// Healing that retries (the kruntimes project's `TestStaleRunWithRetry`, stronger): the Pod
/// of a Running Run is force-deleted and its runtimed killed; the Run goes back to Pending
/// for attempt 2 in its place in the order (ahead of a later Run), is placed on the other
/// Pod and succeeds there (without a policy the same
/// loss ends a Run Failed/RuntimePodLost: `tests/it/faults.rs`).
#[testkit::test]
async fn a_running_run_whose_pod_is_lost_is_placed_again_for_its_next_attempt() {
    let ns = TestNs::new("retry-heal").await;
    let _scheduler = scheduler(&ns).await;
    let mut pool = Pool::start(&ns, "sh", 2, &[("runs", 1)], &RUNTIMED_ARGS).await;
    let watch = pool.overcommit_watch().await;
    create_with(&ns, pool.held("again"), policy(3, "1s", &[])).await;
    pool.held("once").create(&ns).await;
    let placed = pool
        .until("both Running", |runs| {
            (count(runs, RunPhase::Running) == 2).then(|| {
                runs.iter()
                    .find(|r| r.name_any() == "again")
                    .and_then(|r| r.status.as_ref()?.assigned_pod.clone())
            })?
        })
        .await;
    // `later` waits behind both (created in a later second: creation times have whole
    // seconds); `again` keeps its place ahead of it once healed.
    after_the_second_of(&ns.get_run("again").await).await;
    pool.run("later").task(&["true"]).create(&ns).await;
    pool.until("later waiting", |runs| {
        runs.iter()
            .find(|r| r.name_any() == "later" && r.phase() == RunPhase::Pending)
            .map(|_| ())
    })
    .await;
    pool.agents.get_mut(&placed).unwrap().crash();
    pool.agents.remove(&placed);
    ns.api::<Pod>()
        .delete(&placed, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    pool.capacity.remove(&placed);
    pool.until("again back in Pending for attempt 2", |runs| {
        runs.iter()
            .find(|r| r.name_any() == "again" && r.attempt() == 2)
            .map(|_| ())
    })
    .await;
    // The one Pod left frees up: `again` (created first) takes it, `later` still waits.
    pool.open("once");
    let (retried, later) = pool
        .until("again Running at attempt 2", |runs| {
            let find = |name: &str| runs.iter().find(|r| r.name_any() == name);
            let again = find("again")?;
            (again.phase() == RunPhase::Running && again.attempt() == 2)
                .then(|| (again.clone(), find("later").cloned()))
        })
        .await;
    assert_ne!(
        retried.status.as_ref().unwrap().assigned_pod.as_deref(),
        Some(placed.as_str())
    );
    assert_eq!(
        later.map(|r| r.phase()),
        Some(RunPhase::Pending),
        "the healed Run kept its place in the order"
    );
    pool.open("again");
    let done = pool
        .all_done(&["again".to_string(), "once".to_string(), "later".to_string()])
        .await;
    let again = &done["again"];
    assert_eq!(again.phase(), RunPhase::Succeeded, "{:?}", again.status);
    assert_eq!(again.attempt(), 2);
    wait_events(&ns, "again", &["StaleRunRetrying", "RunSucceeded"]).await;
    for name in ["once", "later"] {
        assert_eq!(done[name].phase(), RunPhase::Succeeded, "{name}");
    }
    // The watch also holds every attempt to one Pod.
    watch.finish().await;
    pool.assert_no_leaked_capacity("probe").await;
}
