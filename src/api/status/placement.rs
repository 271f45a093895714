//! Where a Run is placed, the scheduler's writes: Bind, Pending with its message, Invalid,
//! the way back to Pending when its Pod is lost before the claim or it is preempted before
//! the claim, and the request that runtimed stop a preempted Running Run. Pure.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{
    CONDITION_DISRUPTION_TARGET, CONDITION_SCHEDULED, Outcome, reasons, set_condition, set_terminal,
};
use crate::api::types::{RunPhase, RunStatus};

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

/// Back to Pending without a Pod, `Scheduled=False/reason`.
pub(super) fn unassign(status: &mut RunStatus, reason: &str, message: &str, now: &Time) {
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
