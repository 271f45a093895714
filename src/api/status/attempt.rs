//! An attempt's life, runtimed's writes and the healing's: the claim, a function Run's Ready,
//! a failed attempt that waits out its backoff on its Pod and its retry, the answer to a
//! preemption, and the retry after a lost Pod (both back to Pending for the next attempt).
//! Pure; whether a failure is retried is [`crate::api::retry`]'s.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::placement::unassign;
use super::{
    CONDITION_ADMITTED, CONDITION_DISRUPTION_TARGET, CONDITION_RUNNING, reasons, set_condition,
};
use crate::api::resources::Resources;
use crate::api::types::{RunPhase, RunStatus};

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

/// runtimed's claim of a Run whose task it has already started (the claim held for its
/// window, [`crate::runtimed`]'s `--claim-delay`): what [`set_admitted`] sets, with the time
/// the task started, when the Run is still Scheduled at `attempt`. Written alone once the
/// window has passed, or in the one write of a short task's end. Returns whether anything
/// changed (nothing once the claim has landed, or on a Run that moved on).
pub fn claim_started(
    status: &mut RunStatus,
    attempt: i32,
    pod: &str,
    reserved: &Resources,
    started: &Time,
) -> bool {
    if status.phase != Some(RunPhase::Scheduled) || status.attempt.unwrap_or(1) != attempt {
        return false;
    }
    set_admitted(status, pod, reserved, started);
    true
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
