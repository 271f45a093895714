//! The status transitions' tests, on the whole vocabulary.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::*;
use crate::api::resources::Resources;

fn at(secs: i64) -> Time {
    Time(jiff::Timestamp::from_second(secs).unwrap())
}

#[test]
fn set_terminal_sets_phase_condition_and_completion_time_once() {
    let mut status = RunStatus {
        phase: Some(RunPhase::Running),
        ..Default::default()
    };
    assert!(set_terminal(
        &mut status,
        Outcome::Failed,
        reasons::EXIT_CODE,
        "exited with code 3",
        Some(3),
        &at(10)
    ));
    assert_eq!(status.phase, Some(RunPhase::Failed));
    assert_eq!(status.exit_code, Some(3));
    assert_eq!(status.completion_time, Some(at(10)));
    let completed: Vec<_> = status
        .conditions
        .iter()
        .filter(|c| c.type_ == CONDITION_COMPLETED)
        .collect();
    assert_eq!(completed.len(), 1);
    // As the Go project writes it: False with the reason on any end but a success.
    assert_eq!(completed[0].status, "False");
    assert_eq!(completed[0].reason, reasons::EXIT_CODE);
    assert_eq!(completed[0].message, "exited with code 3");

    let before = status.clone();
    assert!(!set_terminal(
        &mut status,
        Outcome::Succeeded,
        reasons::SUCCEEDED,
        "",
        Some(0),
        &at(20)
    ));
    assert_eq!(status, before, "a terminal Run never changes again");
}

#[test]
fn set_condition_moves_transition_time_only_on_status_change() {
    let mut conds = Vec::new();
    assert!(set_condition(
        &mut conds,
        CONDITION_SCHEDULED,
        false,
        "Unschedulable",
        "m1",
        &at(1)
    ));
    assert!(!set_condition(
        &mut conds,
        CONDITION_SCHEDULED,
        false,
        "Unschedulable",
        "m1",
        &at(2)
    ));
    assert!(set_condition(
        &mut conds,
        CONDITION_SCHEDULED,
        false,
        "Unschedulable",
        "m2",
        &at(3)
    ));
    assert_eq!(conds[0].last_transition_time, at(1));
    assert!(set_condition(
        &mut conds,
        CONDITION_SCHEDULED,
        true,
        "Scheduled",
        "",
        &at(4)
    ));
    assert_eq!(conds[0].last_transition_time, at(4));
    assert_eq!(conds.len(), 1);
}

fn condition<'a>(status: &'a RunStatus, type_: &str) -> &'a Condition {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition"))
}

/// Bound to `p1` at t=1 and claimed there at t=2 with `runs: 1`.
fn claimed_on_p1(status: &mut RunStatus) {
    set_bound(status, "p1", "uid-p1", &at(1));
    set_admitted(status, "p1", &Resources::from_iter([("runs", 1)]), &at(2));
}

#[test]
fn set_bound_places_the_run_on_the_pod_and_clears_the_pending_message() {
    let mut status = RunStatus::default();
    assert!(set_pending(
        &mut status,
        "0/1 Runtime Pods are available.",
        Some("p1"),
        &at(1)
    ));
    assert_eq!(status.reason.as_deref(), Some(reasons::NOMINATED));
    assert_eq!(status.nominated_pod_name.as_deref(), Some("p1"));
    set_bound(&mut status, "p1", "uid-p1", &at(2));
    assert_eq!(
        status.nominated_pod_name, None,
        "a placed Run has no nomination"
    );
    assert_eq!(status.phase, Some(RunPhase::Scheduled));
    assert_eq!(
        (
            status.assigned_pod.as_deref(),
            status.assigned_pod_uid.as_deref()
        ),
        (Some("p1"), Some("uid-p1"))
    );
    assert_eq!(status.reason.as_deref(), Some(reasons::SCHEDULED));
    assert_eq!(status.message, None);
    let scheduled = condition(&status, CONDITION_SCHEDULED);
    assert_eq!(
        (scheduled.status.as_str(), scheduled.reason.as_str()),
        ("True", reasons::SCHEDULED)
    );
    assert_eq!(scheduled.last_transition_time, at(2));
}

#[test]
fn set_pending_reports_a_change_only_when_the_message_changes() {
    let mut status = RunStatus::default();
    assert!(set_pending(&mut status, "m1", None, &at(1)));
    assert_eq!(status.phase, Some(RunPhase::Pending));
    assert_eq!(status.reason.as_deref(), Some(reasons::UNSCHEDULABLE));
    assert_eq!(status.message.as_deref(), Some("m1"));
    assert!(
        !set_pending(&mut status, "m1", None, &at(2)),
        "same message: no write"
    );
    assert!(set_pending(&mut status, "m2", None, &at(3)));
    assert_eq!(status.message.as_deref(), Some("m2"));
    let scheduled = condition(&status, CONDITION_SCHEDULED);
    assert_eq!(
        (scheduled.status.as_str(), scheduled.message.as_str()),
        ("False", "m2")
    );
    assert_eq!(
        scheduled.last_transition_time,
        at(1),
        "still False since t=1"
    );
}

#[test]
fn set_invalid_fails_the_run_once_through_the_terminal_helper() {
    let mut status = RunStatus::default();
    assert!(set_invalid(
        &mut status,
        reasons::INVALID_RESOURCES,
        "bad",
        &at(1)
    ));
    assert_eq!(status.phase, Some(RunPhase::Failed));
    assert_eq!(status.completion_time, Some(at(1)));
    assert_eq!(
        condition(&status, CONDITION_SCHEDULED).reason,
        reasons::INVALID_RESOURCES
    );
    assert_eq!(condition(&status, CONDITION_COMPLETED).status, "False");
    assert!(!set_invalid(
        &mut status,
        reasons::INVALID_RESOURCES,
        "bad",
        &at(2)
    ));
}

#[test]
fn set_admitted_runs_the_run_and_says_what_was_reserved() {
    let mut status = RunStatus::default();
    set_bound(&mut status, "p1", "uid-p1", &at(1));
    let reserved = Resources::from_iter([("runs", 1), ("example.com/gpu", 1)]);
    set_admitted(&mut status, "p1", &reserved, &at(2));
    assert_eq!(status.phase, Some(RunPhase::Running));
    assert_eq!(status.start_time, Some(at(2)));
    assert_eq!(status.assigned_pod.as_deref(), Some("p1"), "the Pod stays");
    let admitted = condition(&status, CONDITION_ADMITTED);
    assert_eq!(admitted.reason, reasons::ADMITTED);
    assert_eq!(
        admitted.message,
        format!("runtimed on Pod p1 reserved {reserved}")
    );
}

#[test]
fn set_unbound_returns_a_lost_scheduled_run_to_pending_without_a_pod() {
    let mut status = RunStatus::default();
    set_bound(&mut status, "p1", "uid-p1", &at(1));
    assert!(set_unbound(&mut status, "its Runtime Pod was lost", &at(2)));
    assert_eq!(status.phase, Some(RunPhase::Pending));
    assert_eq!(
        (
            status.assigned_pod.as_ref(),
            status.assigned_pod_uid.as_ref()
        ),
        (None, None)
    );
    let scheduled = condition(&status, CONDITION_SCHEDULED);
    assert_eq!(
        (scheduled.status.as_str(), scheduled.reason.as_str()),
        ("False", reasons::RUNTIME_POD_LOST)
    );
    assert!(!set_unbound(
        &mut status,
        "its Runtime Pod was lost",
        &at(3)
    ));
    // Never a terminal Run.
    let mut done = RunStatus::default();
    set_terminal(
        &mut done,
        Outcome::Succeeded,
        reasons::SUCCEEDED,
        "",
        Some(0),
        &at(1),
    );
    let before = done.clone();
    assert!(!set_unbound(&mut done, "lost", &at(2)));
    assert_eq!(done, before);
}

#[test]
fn a_failed_attempt_waits_on_its_pod_then_retries_with_a_new_start_time() {
    let mut status = RunStatus::default();
    claimed_on_p1(&mut status);
    assert_eq!(
        condition(&status, CONDITION_RUNNING).reason,
        reasons::CLAIMED
    );
    assert!(in_backoff(&status).is_none());
    assert!(
        !set_attempt_failed(&mut status, 2, 3, reasons::EXIT_CODE, "m", Some(1), &at(3)),
        "only the attempt that runs"
    );
    assert!(set_attempt_failed(
        &mut status,
        1,
        2,
        reasons::EXIT_CODE,
        "exited with code 1",
        Some(1),
        &at(3)
    ));
    assert_eq!(
        status.phase,
        Some(RunPhase::Running),
        "it keeps its Pod and room"
    );
    assert_eq!(status.assigned_pod.as_deref(), Some("p1"));
    assert_eq!(status.attempt, Some(2));
    assert_eq!(in_backoff(&status), Some(&at(3)));
    assert!(
        !set_retrying(&mut status, 3, "p1", &at(4)),
        "not another attempt"
    );
    assert!(set_retrying(&mut status, 2, "p1", &at(4)));
    assert_eq!(status.start_time, Some(at(4)));
    assert_eq!(status.exit_code, None);
    let running = condition(&status, CONDITION_RUNNING);
    assert_eq!(
        (running.status.as_str(), running.reason.as_str()),
        ("True", reasons::RETRYING)
    );
    assert!(!set_retrying(&mut status, 2, "p1", &at(5)), "once");
    set_terminal(
        &mut status,
        Outcome::Succeeded,
        reasons::SUCCEEDED,
        "",
        Some(0),
        &at(6),
    );
    assert_eq!(condition(&status, CONDITION_RUNNING).status, "False");
}

#[test]
fn a_run_healed_for_a_retry_goes_back_to_pending_for_its_next_attempt() {
    let mut status = RunStatus::default();
    claimed_on_p1(&mut status);
    assert!(set_lost_retry(
        &mut status,
        2,
        reasons::RUNTIME_POD_LOST,
        "lost",
        &at(3)
    ));
    assert_eq!(status.phase, Some(RunPhase::Pending));
    assert_eq!(
        (status.assigned_pod.as_ref(), status.start_time.as_ref()),
        (None, None)
    );
    assert_eq!(status.attempt, Some(2));
    for type_ in [CONDITION_SCHEDULED, CONDITION_RUNNING, CONDITION_ADMITTED] {
        let c = condition(&status, type_);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", reasons::RUNTIME_POD_LOST)
        );
    }
    assert!(
        in_backoff(&status).is_none(),
        "Pending is not between attempts on a Pod"
    );
    assert!(
        !set_lost_retry(&mut status, 3, reasons::RUNTIME_POD_LOST, "lost", &at(4)),
        "only an admitted Run"
    );
}

#[test]
fn a_success_is_completed_true_and_running_false_as_the_go_project_writes_them() {
    let mut status = RunStatus::default();
    set_condition(
        &mut status.conditions,
        CONDITION_RUNNING,
        true,
        reasons::CLAIMED,
        "claimed",
        &at(1),
    );
    assert!(set_terminal(
        &mut status,
        Outcome::Succeeded,
        reasons::SUCCEEDED,
        SUCCESS_MESSAGE,
        Some(0),
        &at(2)
    ));
    let completed = condition(&status, CONDITION_COMPLETED);
    assert_eq!(
        (
            completed.status.as_str(),
            completed.reason.as_str(),
            completed.message.as_str()
        ),
        ("True", reasons::RUN_COMPLETED, COMPLETED_MESSAGE)
    );
    let running = condition(&status, CONDITION_RUNNING);
    assert_eq!(
        (running.status.as_str(), running.reason.as_str()),
        ("False", reasons::COMPLETED)
    );
    assert_eq!(status.message.as_deref(), Some("execution completed"));
}

#[test]
fn every_end_sets_finished_true_with_the_runs_reason_so_kubectl_wait_returns_on_any_outcome() {
    for (outcome, reason, want) in [
        (Outcome::Succeeded, reasons::SUCCEEDED, reasons::SUCCEEDED),
        (Outcome::Failed, reasons::EXIT_CODE, reasons::EXIT_CODE),
        (Outcome::Timeout, reasons::TIMEOUT, reasons::TIMEOUT),
        (Outcome::Cancelled, reasons::CANCELLED, reasons::CANCELLED),
    ] {
        let mut status = RunStatus {
            phase: Some(RunPhase::Running),
            ..Default::default()
        };
        assert!(set_terminal(
            &mut status,
            outcome,
            reason,
            "why",
            None,
            &at(5)
        ));
        let finished = condition(&status, CONDITION_FINISHED);
        assert_eq!(
            (finished.status.as_str(), finished.reason.as_str()),
            ("True", want),
            "{outcome:?}"
        );
        assert_eq!(finished.last_transition_time, at(5));
    }
}

#[test]
fn observe_generation_stamps_the_conditions_a_write_sets_and_leaves_the_others_alone() {
    let mut status = RunStatus {
        phase: Some(RunPhase::Running),
        ..Default::default()
    };
    set_condition(
        &mut status.conditions,
        CONDITION_SCHEDULED,
        true,
        reasons::SCHEDULED,
        "",
        &at(1),
    );
    observe_generation(&[], &mut status, Some(1));
    assert_eq!(
        condition(&status, CONDITION_SCHEDULED).observed_generation,
        Some(1)
    );
    // The spec changed (generation 2); the end sets Completed, Finished and Running.
    let before = status.conditions.clone();
    set_terminal(
        &mut status,
        Outcome::Cancelled,
        reasons::CANCELLED,
        "cancelled",
        None,
        &at(2),
    );
    observe_generation(&before, &mut status, Some(2));
    for set in [CONDITION_COMPLETED, CONDITION_FINISHED, CONDITION_RUNNING] {
        assert_eq!(
            condition(&status, set).observed_generation,
            Some(2),
            "{set}"
        );
    }
    assert_eq!(
        condition(&status, CONDITION_SCHEDULED).observed_generation,
        Some(1),
        "a condition this write did not touch keeps its generation"
    );
}
