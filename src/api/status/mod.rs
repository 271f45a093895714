//! Run status transitions: every status change kruntimes makes, as pure functions.
//!
//! Every terminal transition (scheduler, runtimed) goes through [`set_terminal`] so that the
//! phase, the `Completed` condition and `completionTime` stay normalized; Bind, Pending,
//! Invalid and the runtimed claim are [`set_bound`], [`set_pending`], [`set_invalid`] and
//! [`set_admitted`]. I/O code builds no status inline: it calls one of these and writes the
//! result. Time is passed in; nothing here talks to the API server.
//!
//! This module owns the vocabulary (conditions, reasons, [`Outcome`]) and the terminal
//! transition; [`placement`] holds the scheduler's writes (where a Run is, or why it waits)
//! and [`attempt`] runtimed's and the healing's (an attempt's claim, failure, retry, requeue).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::types::{RunPhase, RunStatus};

pub const CONDITION_SCHEDULED: &str = "Scheduled";
pub const CONDITION_ADMITTED: &str = "Admitted";
pub const CONDITION_COMPLETED: &str = "Completed";
/// True on every end, with the Run's reason (`Succeeded` for a success): what `kubectl wait
/// --for=condition=Finished` waits for whatever the outcome, as Kueue's `Finished` on a
/// Workload. The Go project's `Completed` is False on any end but a success, so it cannot.
pub const CONDITION_FINISHED: &str = "Finished";
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
    /// `Completed=True` of a Succeeded Run.
    pub const RUN_COMPLETED: &str = "RunCompleted";
    /// `Running=False` of a Succeeded Run.
    pub const COMPLETED: &str = "Completed";
    /// Failed: the execution succeeded but its `$KRUNTIME_OUTPUTS` file is not `KEY=VALUE`.
    pub const OUTPUTS_INVALID: &str = "OutputsInvalid";
    /// Failed: the execution's `$KRUNTIME_OUTPUTS` file is over a bound.
    pub const OUTPUTS_TOO_LARGE: &str = "OutputsTooLarge";
    /// Failed: what the execution left in `$KRUNTIME_ARTIFACTS_DIR` breaks a rule of the
    /// artifact store (a name, a bound, a link).
    pub const ARTIFACT_INVALID: &str = "ArtifactInvalid";
}

/// A Succeeded Run's message (the Go project's, which its users and tests read).
pub const SUCCESS_MESSAGE: &str = "execution completed";
/// The message of a Succeeded Run's `Completed=True` condition (the Go project's).
pub const COMPLETED_MESSAGE: &str = "Completed successfully";

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

/// Stamps `generation` (the Run's `metadata.generation` as the writer observed it) as the
/// `observedGeneration` of every condition of `status` that this write sets or changes, that
/// is, that differs from `before` (the conditions as observed). Conditions the write leaves
/// alone keep the generation they were set at. Every status write calls it on the status it
/// sends.
pub fn observe_generation(before: &[Condition], status: &mut RunStatus, generation: Option<i64>) {
    for condition in &mut status.conditions {
        let unchanged = before.iter().any(|b| {
            b.type_ == condition.type_
                && b.status == condition.status
                && b.reason == condition.reason
                && b.message == condition.message
        });
        if !unchanged {
            condition.observed_generation = generation;
        }
    }
}

/// The single terminal transition: phase, reason, message, the `Completed` and `Finished`
/// conditions, `exitCode` and `completionTime`, all at once and exactly once. A Run that is already
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
    // As the Go project writes them (its users and tests read them): a success is
    // Completed=True/RunCompleted and Running=False/Completed; any other end is False in both
    // with the Run's reason and message, Running too when the Run never ran (a Run cancelled
    // or refused while Pending says `Running=False/Cancelled`, as that project's ends do).
    let succeeded = outcome == Outcome::Succeeded;
    let (running_reason, running_message) = match succeeded {
        true => (reasons::COMPLETED, ""),
        false => (reason, message),
    };
    if !succeeded
        || status
            .conditions
            .iter()
            .any(|c| c.type_ == CONDITION_RUNNING)
    {
        set_condition(
            &mut status.conditions,
            CONDITION_RUNNING,
            false,
            running_reason,
            running_message,
            now,
        );
    }
    let (completed_reason, completed_message) = match succeeded {
        true => (reasons::RUN_COMPLETED, COMPLETED_MESSAGE),
        false => (reason, message),
    };
    set_condition(
        &mut status.conditions,
        CONDITION_COMPLETED,
        succeeded,
        completed_reason,
        completed_message,
        now,
    );
    let finished_reason = match succeeded {
        true => reasons::SUCCEEDED,
        false => reason,
    };
    set_condition(
        &mut status.conditions,
        CONDITION_FINISHED,
        true,
        finished_reason,
        message,
        now,
    );
    if status.completion_time.is_none() {
        status.completion_time = Some(now.clone());
    }
    true
}

mod attempt;
mod placement;
#[cfg(test)]
mod tests;

pub use attempt::*;
pub use placement::*;
