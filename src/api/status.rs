//! Run status transitions: every status change kruntimes makes, as pure functions.
//!
//! Every terminal transition (scheduler, runtimed) goes through [`set_terminal`] so that the
//! phase, the `Completed` condition and `completionTime` stay normalized; Bind, Pending,
//! Invalid and the runtimed claim are [`set_bound`], [`set_pending`], [`set_invalid`] and
//! [`set_admitted`]. I/O code builds no status inline: it calls one of these and writes the
//! result. Time is passed in; nothing here talks to the API server.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::resources::Resources;
use super::types::{RunPhase, RunStatus};

pub const CONDITION_SCHEDULED: &str = "Scheduled";
pub const CONDITION_ADMITTED: &str = "Admitted";
pub const CONDITION_COMPLETED: &str = "Completed";
/// The kruntimes project's condition for an attempt: True (`Claimed`, `Retrying`) while one
/// runs, False with the failure's reason while a retry waits out its backoff and once the
/// Run has ended.
pub const CONDITION_RUNNING: &str = "Running";
/// Kubernetes' condition for a Pod about to be disrupted, here on a Running Run the scheduler
/// preempts: runtimed stops it and sends it back to Pending.
pub const CONDITION_DISRUPTION_TARGET: &str = "DisruptionTarget";

/// Bounded CamelCase reasons written to `status.reason` and conditions.
pub mod reasons {
    pub const UNSCHEDULABLE: &str = "Unschedulable";
    /// Unschedulable, and a Runtime Pod (`status.nominatedPodName`) is being drained for it.
    pub const NOMINATED: &str = "NominatedRuntimePod";
    pub const SCHEDULED: &str = "Scheduled";
    pub const INVALID_RESOURCES: &str = "InvalidResources";
    pub const INVALID_AFFINITY: &str = "InvalidAffinity";
    /// `spec.workspace` names a PersistentWorkspace of another Runtime, or a Released one.
    pub const INVALID_WORKSPACE: &str = "InvalidWorkspace";
    /// `spec.workspace` names a PersistentWorkspace whose Runtime Pod (and data) is gone.
    pub const WORKSPACE_LOST: &str = "WorkspaceLost";
    pub const ADMITTED: &str = "Admitted";
    pub const SUCCEEDED: &str = "Succeeded";
    pub const FAILED: &str = "Failed";
    pub const EXIT_CODE: &str = "NonZeroExitCode";
    pub const START_FAILED: &str = "StartFailed";
    /// `spec.cancelRequested` ended the Run (phase Cancelled).
    pub const CANCELLED: &str = "Cancelled";
    /// `spec.timeout` from `startTime` ran out (phase Timeout).
    pub const TIMEOUT: &str = "Timeout";
    /// A function Run had no invocation for `idleTimeoutSeconds` (phase Timeout).
    pub const IDLE_TIMEOUT: &str = "IdleTimeout";
    pub const RUNTIMED_RESTARTED: &str = "RuntimedRestarted";
    pub const RUNTIME_POD_TERMINATED: &str = "RuntimePodTerminated";
    pub const RUNTIME_POD_LOST: &str = "RuntimePodLost";
    /// Sent back to Pending to make room for a Run of higher priority.
    pub const PREEMPTED: &str = "Preempted";
    /// `DisruptionTarget`'s reason, as on a Pod kube-scheduler preempts.
    pub const PREEMPTION_BY_SCHEDULER: &str = "PreemptionByScheduler";
    /// `spec.priorityClassName` names a PriorityClass that does not exist (yet).
    pub const PRIORITY_CLASS_NOT_FOUND: &str = "PriorityClassNotFound";
    /// `Running=True`: runtimed claimed the Run and its first attempt runs.
    pub const CLAIMED: &str = "Claimed";
    /// `Running=True`: a later attempt runs, after a failed one and its backoff.
    pub const RETRYING: &str = "Retrying";
}

/// How a Run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    Failed,
    /// `spec.timeout` ran out (or a function Run's idle timeout).
    Timeout,
    /// `spec.cancelRequested`.
    Cancelled,
}

/// Sets or replaces the condition of `type_`. `lastTransitionTime` only moves when the
/// condition's status changes. Returns whether anything changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: &Time,
) -> bool {
    let status = if status { "True" } else { "False" };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == status && c.reason == reason && c.message == message => false,
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now.clone();
            }
            c.status = status.to_string();
            c.reason = reason.to_string();
            c.message = message.to_string();
            true
        }
        None => {
            conditions.push(Condition {
                type_: type_.to_string(),
                status: status.to_string(),
                reason: reason.to_string(),
                message: message.to_string(),
                last_transition_time: now.clone(),
                observed_generation: None,
            });
            true
        }
    }
}

/// The single terminal transition: phase, reason, message, the `Completed` condition,
/// `exitCode` and `completionTime`, all at once and exactly once. A Run that is already
/// terminal is left unchanged and `false` is returned.
pub fn set_terminal(
    status: &mut RunStatus,
    outcome: Outcome,
    reason: &str,
    message: &str,
    exit_code: Option<i32>,
    now: &Time,
) -> bool {
    if status.phase.is_some_and(RunPhase::is_terminal) {
        return false;
    }
    status.phase = Some(match outcome {
        Outcome::Succeeded => RunPhase::Succeeded,
        Outcome::Failed => RunPhase::Failed,
        Outcome::Timeout => RunPhase::Timeout,
        Outcome::Cancelled => RunPhase::Cancelled,
    });
    status.reason = Some(reason.to_string());
    status.message = Some(message.to_string());
    status.exit_code = exit_code;
    status.nominated_pod_name = None;
    if status
        .conditions
        .iter()
        .any(|c| c.type_ == CONDITION_RUNNING)
    {
        set_condition(
            &mut status.conditions,
            CONDITION_RUNNING,
            false,
            reason,
            message,
            now,
        );
    }
    set_condition(
        &mut status.conditions,
        CONDITION_COMPLETED,
        true,
        reason,
        message,
        now,
    );
    if status.completion_time.is_none() {
        status.completion_time = Some(now.clone());
    }
    true
}

/// Bind: phase Scheduled on `pod` (name and UID), `Scheduled=True`, no message.
pub fn set_bound(status: &mut RunStatus, pod: &str, pod_uid: &str, now: &Time) {
    status.phase = Some(RunPhase::Scheduled);
    status.assigned_pod = Some(pod.to_string());
    status.assigned_pod_uid = Some(pod_uid.to_string());
    status.nominated_pod_name = None;
    status.reason = Some(reasons::SCHEDULED.into());
    status.message = None;
    set_condition(
        &mut status.conditions,
        CONDITION_SCHEDULED,
        true,
        reasons::SCHEDULED,
        "placed by the kruntimes scheduler",
        now,
    );
}

/// Pending: `Scheduled=False/Unschedulable` with the bounded `message`, mirrored in
/// `status.reason`/`status.message`, phase Pending if unset; with a `nominated` Pod,
/// `status.nominatedPodName` names it and the reason is `NominatedRuntimePod`. Returns whether
/// anything changed, so an unchanged message is never written again.
pub fn set_pending(
    status: &mut RunStatus,
    message: &str,
    nominated: Option<&str>,
    now: &Time,
) -> bool {
    set_waiting(status, reasons::UNSCHEDULABLE, message, nominated, now)
}

/// [`set_pending`] with the reason a nomination does not override: `Unschedulable`, or
/// `PriorityClassNotFound` while the Run's class does not exist.
pub fn set_waiting(
    status: &mut RunStatus,
    reason: &str,
    message: &str,
    nominated: Option<&str>,
    now: &Time,
) -> bool {
    let reason = match nominated {
        Some(_) => reasons::NOMINATED,
        None => reason,
    };
    let mut changed = set_condition(
        &mut status.conditions,
        CONDITION_SCHEDULED,
        false,
        reason,
        message,
        now,
    );
    if status.nominated_pod_name.as_deref() != nominated {
        status.nominated_pod_name = nominated.map(str::to_string);
        changed = true;
    }
    for (field, value) in [(&mut status.reason, reason), (&mut status.message, message)] {
        if field.as_deref() != Some(value) {
            *field = Some(value.to_string());
            changed = true;
        }
    }
    if status.phase.is_none() {
        status.phase = Some(RunPhase::Pending);
        changed = true;
    }
    changed
}

/// A permanent configuration error found by PreFilter: `Scheduled=False` with `reason`, then
/// Failed through [`set_terminal`] (Cancelled for PreFilter's refusal of a cancelled Run). Returns whether anything changed.
pub fn set_invalid(status: &mut RunStatus, reason: &str, message: &str, now: &Time) -> bool {
    let scheduled = set_condition(
        &mut status.conditions,
        CONDITION_SCHEDULED,
        false,
        reason,
        message,
        now,
    );
    // A cancel request is PreFilter's refusal too, but not a failure.
    let outcome = match reason {
        reasons::CANCELLED => Outcome::Cancelled,
        _ => Outcome::Failed,
    };
    set_terminal(status, outcome, reason, message, None, now) || scheduled
}

/// The Run's Runtime Pod was lost before runtimed admitted it: back to Pending, unassigned,
/// with `Scheduled=False/RuntimePodLost`, so the scheduler places it again. Returns whether
/// anything changed.
pub fn set_unbound(status: &mut RunStatus, message: &str, now: &Time) -> bool {
    if status.phase.is_some_and(RunPhase::is_terminal) {
        return false;
    }
    let before = status.clone();
    unassign(status, reasons::RUNTIME_POD_LOST, message, now);
    *status != before
}

/// Preemption, level 1: a Scheduled Run runtimed has not claimed goes back to Pending,
/// unassigned, with `Scheduled=False/Preempted`, and keeps its place in the order (its
/// priority and creation time do not change). Returns whether anything changed.
pub fn set_preempted(status: &mut RunStatus, message: &str, now: &Time) -> bool {
    if status.phase != Some(RunPhase::Scheduled) {
        return false;
    }
    unassign(status, reasons::PREEMPTED, message, now);
    true
}

/// Preemption, level 2, the scheduler's half: asks runtimed to stop a Running Run of a
/// preemptible class (`DisruptionTarget=True/PreemptionByScheduler`). Its capacity stays
/// held until runtimed has stopped it and written [`set_requeued`]. Returns whether anything
/// changed.
pub fn request_disruption(status: &mut RunStatus, message: &str, now: &Time) -> bool {
    if !status.phase.is_some_and(RunPhase::is_admitted) {
        return false;
    }
    set_condition(
        &mut status.conditions,
        CONDITION_DISRUPTION_TARGET,
        true,
        reasons::PREEMPTION_BY_SCHEDULER,
        message,
        now,
    )
}

/// Whether the scheduler asked runtimed to stop this Run for a preemption.
pub fn disruption_requested(status: &RunStatus) -> bool {
    status.conditions.iter().any(|c| {
        c.type_ == CONDITION_DISRUPTION_TARGET
            && c.status == "True"
            && c.reason == reasons::PREEMPTION_BY_SCHEDULER
    })
}

/// Preemption, level 2, runtimed's half: the stopped Run goes back to Pending for its next
/// attempt (`attempt + 1`), unassigned, `Scheduled=False/Preempted`, `Admitted=False`; the
/// `DisruptionTarget` request is answered and removed. Returns whether anything changed.
pub fn set_requeued(status: &mut RunStatus, message: &str, now: &Time) -> bool {
    if !status.phase.is_some_and(RunPhase::is_admitted) {
        return false;
    }
    unassign(status, reasons::PREEMPTED, message, now);
    status.attempt = Some(status.attempt.unwrap_or(1).saturating_add(1));
    status.start_time = None;
    status
        .conditions
        .retain(|c| c.type_ != CONDITION_DISRUPTION_TARGET);
    for type_ in [CONDITION_RUNNING, CONDITION_ADMITTED] {
        set_condition(
            &mut status.conditions,
            type_,
            false,
            reasons::PREEMPTED,
            message,
            now,
        );
    }
    true
}

/// Back to Pending without a Pod, `Scheduled=False/reason`.
fn unassign(status: &mut RunStatus, reason: &str, message: &str, now: &Time) {
    status.phase = Some(RunPhase::Pending);
    status.assigned_pod = None;
    status.assigned_pod_uid = None;
    status.nominated_pod_name = None;
    status.reason = Some(reason.to_string());
    status.message = Some(message.to_string());
    set_condition(
        &mut status.conditions,
        CONDITION_SCHEDULED,
        false,
        reason,
        message,
        now,
    );
}

/// runtimed's claim: phase Running, `startTime`, `attempt` (1 unless a preemption sent it
/// back), `Admitted=True` naming the Pod and what it reserved.
pub fn set_admitted(status: &mut RunStatus, pod: &str, reserved: &Resources, now: &Time) {
    status.phase = Some(RunPhase::Running);
    status.start_time = Some(now.clone());
    status.attempt.get_or_insert(1);
    set_condition(
        &mut status.conditions,
        CONDITION_ADMITTED,
        true,
        reasons::ADMITTED,
        &format!("runtimed on Pod {pod} reserved {reserved}"),
        now,
    );
    set_condition(
        &mut status.conditions,
        CONDITION_RUNNING,
        true,
        reasons::CLAIMED,
        &format!("attempt {} runs on Pod {pod}", status.attempt.unwrap_or(1)),
        now,
    );
}

/// An attempt failed and the Run's retry policy allows `next`: the Run stays Running on its
/// Pod (it keeps its reservation), `Running=False` with the failure's reason and message
/// marks the backoff from now, `attempt` is the next one, and the reason, message and exit
/// code of the failure are recorded. Returns whether anything changed (nothing on a terminal
/// Run, or one whose attempt is not `failed`).
pub fn set_attempt_failed(
    status: &mut RunStatus,
    failed: i32,
    next: i32,
    reason: &str,
    message: &str,
    exit_code: Option<i32>,
    now: &Time,
) -> bool {
    if status.phase != Some(RunPhase::Running) || status.attempt.unwrap_or(1) != failed {
        return false;
    }
    status.attempt = Some(next);
    status.reason = Some(reason.to_string());
    status.message = Some(message.to_string());
    status.exit_code = exit_code;
    set_condition(
        &mut status.conditions,
        CONDITION_RUNNING,
        false,
        reason,
        message,
        now,
    );
    true
}

/// Whether the Run is Running between two attempts: a failed attempt's `Running=False` and
/// the backoff since its `lastTransitionTime`.
pub fn in_backoff(status: &RunStatus) -> Option<&Time> {
    if status.phase != Some(RunPhase::Running) {
        return None;
    }
    status
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_RUNNING && c.status == "False")
        .map(|c| &c.last_transition_time)
}

/// The retry starts on the same Pod: `Running=True/Retrying`, a new `startTime` (so
/// `spec.timeout` bounds each attempt), the failure's reason and message cleared. Returns
/// whether anything changed (nothing unless the Run is in its backoff at `attempt`).
pub fn set_retrying(status: &mut RunStatus, attempt: i32, pod: &str, now: &Time) -> bool {
    if in_backoff(status).is_none() || status.attempt.unwrap_or(1) != attempt {
        return false;
    }
    status.start_time = Some(now.clone());
    status.reason = Some(reasons::RETRYING.to_string());
    status.message = Some(format!("attempt {attempt} runs on Pod {pod}"));
    status.exit_code = None;
    set_condition(
        &mut status.conditions,
        CONDITION_RUNNING,
        true,
        reasons::RETRYING,
        &format!("attempt {attempt} runs on Pod {pod} after a failed attempt"),
        now,
    );
    true
}

/// The scheduler's healing, when the retry policy allows another attempt: a Run whose Runtime
/// Pod was lost goes back to Pending, unassigned, for attempt `next` on any Pod, keeping its
/// place in the order; `Scheduled=False`, `Running=False` and `Admitted=False` say why.
/// Returns whether anything changed.
pub fn set_lost_retry(
    status: &mut RunStatus,
    next: i32,
    reason: &str,
    message: &str,
    now: &Time,
) -> bool {
    if !status.phase.is_some_and(RunPhase::is_admitted) {
        return false;
    }
    unassign(status, reason, message, now);
    status.attempt = Some(next);
    status.start_time = None;
    status.exit_code = None;
    status
        .conditions
        .retain(|c| c.type_ != CONDITION_DISRUPTION_TARGET);
    for type_ in [CONDITION_RUNNING, CONDITION_ADMITTED] {
        set_condition(&mut status.conditions, type_, false, reason, message, now);
    }
    true
}

/// A function Run's registration is ready on the runtime server: Running → Ready, which is
/// active (it keeps its whole request) until it is released. Only the phase and the message
/// change. Returns whether anything changed.
pub fn set_function_ready(status: &mut RunStatus, message: &str) -> bool {
    if status.phase != Some(RunPhase::Running) {
        return false;
    }
    status.phase = Some(RunPhase::Ready);
    status.message = Some(message.to_string());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(completed[0].status, "True");
        assert_eq!(completed[0].reason, reasons::EXIT_CODE);

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
        assert_eq!(condition(&status, CONDITION_COMPLETED).status, "True");
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
        set_bound(&mut status, "p1", "uid-p1", &at(1));
        set_admitted(
            &mut status,
            "p1",
            &Resources::from_iter([("runs", 1)]),
            &at(2),
        );
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
        set_bound(&mut status, "p1", "uid-p1", &at(1));
        set_admitted(
            &mut status,
            "p1",
            &Resources::from_iter([("runs", 1)]),
            &at(2),
        );
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
}
