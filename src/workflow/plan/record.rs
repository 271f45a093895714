//! How a WorkflowRun's status records each step the controller takes: accepted (or refused),
//! a step's Run started (or the step failed to become one), a call's child started (or not).
//! Pure.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{
    ActionStepStatus, CONDITION_ACCEPTED, JobPhase, JobStatus, StepPhase, StepStatus,
    WorkflowPhase, WorkflowRunStatus,
};

use crate::workflow::snapshot::Snapshot;

/// Accepts a WorkflowRun: every job Pending (Waiting when it needs others), every step (and
/// Action step) Pending, the snapshot named, `Accepted=True`.
pub fn accept(
    status: &mut WorkflowRunStatus,
    snapshot: &Snapshot,
    snapshot_name: &str,
    generation: Option<i64>,
    now: &Time,
) {
    let jobs = snapshot
        .spec
        .jobs
        .iter()
        .map(|(name, job)| {
            let mut pre = job.needs.clone();
            pre.sort();
            let steps = job
                .steps
                .iter()
                .map(|step| StepStatus {
                    name: step.name.clone(),
                    action_steps: snapshot
                        .action(name, &step.name)
                        .filter(|_| step.calls_action())
                        .map(|a| {
                            let pending = |s: &crate::api::StepSpec| ActionStepStatus {
                                name: s.name.clone(),
                                ..ActionStepStatus::default()
                            };
                            a.spec.steps.iter().map(pending).collect()
                        })
                        .unwrap_or_default(),
                    ..StepStatus::default()
                })
                .collect();
            let phase = if pre.is_empty() {
                JobPhase::Pending
            } else {
                JobPhase::Waiting
            };
            let state = JobStatus {
                phase,
                pre,
                steps,
                ..JobStatus::default()
            };
            (name.clone(), state)
        })
        .collect();
    status.phase = WorkflowPhase::Pending;
    status.message.clear();
    status.jobs = Some(jobs);
    status.snapshot_name = snapshot_name.to_string();
    accepted(
        status,
        true,
        "Accepted",
        "WorkflowRun accepted and initialized",
        generation,
        now,
    );
}

/// Refuses a WorkflowRun: Failed, with `message` and `Accepted=False` for `reason`.
pub fn refuse(
    status: &mut WorkflowRunStatus,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) {
    status.phase = WorkflowPhase::Failed;
    status.message = message.to_string();
    accepted(status, false, reason, message, generation, now);
}

fn accepted(
    status: &mut WorkflowRunStatus,
    value: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) {
    crate::api::status::set_condition(
        &mut status.conditions,
        CONDITION_ACCEPTED,
        value,
        reason,
        message,
        now,
    );
    if let Some(condition) = status
        .conditions
        .iter_mut()
        .find(|c| c.type_ == CONDITION_ACCEPTED)
    {
        condition.observed_generation = generation;
    }
}

/// Records that `target`'s Run is `run_name`: the step (and Action step) Running, its job
/// Running, the WorkflowRun Running.
pub fn started_step(
    status: &mut WorkflowRunStatus,
    job: &str,
    step: usize,
    action_step: Option<usize>,
    run_name: &str,
) {
    let Some(state) = status.jobs.as_mut().and_then(|j| j.get_mut(job)) else {
        return;
    };
    state.phase = JobPhase::Running;
    let step = &mut state.steps[step];
    step.phase = StepPhase::Running;
    match action_step {
        None => step.run_name = run_name.to_string(),
        Some(index) => {
            step.action_steps[index].phase = StepPhase::Running;
            step.action_steps[index].run_name = run_name.to_string();
        }
    }
    status.phase = WorkflowPhase::Running;
}

/// Records that a step could not become a Run: the step Failed (its job fails with it).
pub fn failed_step(status: &mut WorkflowRunStatus, job: &str, step: usize, why: &str) {
    let Some(state) = status.jobs.as_mut().and_then(|j| j.get_mut(job)) else {
        return;
    };
    state.phase = JobPhase::Running;
    state.steps[step].phase = StepPhase::Failed;
    let name = state.steps[step].name.clone();
    status.phase = WorkflowPhase::Running;
    status.message = format!("resolve step {name:?} in job {job:?}: {why}");
}

/// Records that the call of `job` is the child WorkflowRun `name`.
pub fn started_call(status: &mut WorkflowRunStatus, job: &str, name: &str) {
    if let Some(state) = status.jobs.as_mut().and_then(|j| j.get_mut(job)) {
        state.phase = JobPhase::Running;
        state.workflow_run_name = name.to_string();
    }
    status.phase = WorkflowPhase::Running;
}

/// Records that the call of `job` cannot start: the job Failed.
pub fn failed_call(status: &mut WorkflowRunStatus, job: &str, why: &str) {
    if let Some(state) = status.jobs.as_mut().and_then(|j| j.get_mut(job)) {
        state.phase = JobPhase::Failed;
    }
    status.phase = WorkflowPhase::Running;
    status.message = why.to_string();
}
