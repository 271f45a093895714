//! The read-side view of a WorkflowRun that `explain workflowrun/NAME` and `status` show: its
//! jobs, each step and the Run it is, and why each waits or how it ended.
//!
//! Owns the view's shape and [`report`], which reads it off the WorkflowRun's status as the
//! workflow controller wrote it (phases, needs, each step's Run), its Runs, and the verdicts
//! the caller replayed with the scheduler's own plugins for the Pending ones. Pure: it decides
//! nothing, and never re-plans the workflow or re-derives a scheduling rule.

use std::collections::BTreeMap;

use kube::ResourceExt;
use serde::{Deserialize, Serialize};

use crate::api::{
    JobPhase, JobStatus, LABEL_WORKFLOW_ACTION_STEP, LABEL_WORKFLOW_JOB, LABEL_WORKFLOW_RUN_UID,
    LABEL_WORKFLOW_STEP, Run, RunPhase, StepPhase, WorkflowRun,
};

/// Whether `run` is the Run of a step (or an Action's step) of the WorkflowRun of UID `uid`.
pub fn is_step_run_of(run: &Run, uid: &str) -> bool {
    let labels = run.labels();
    labels.get(LABEL_WORKFLOW_RUN_UID).map(String::as_str) == Some(uid)
        && labels.contains_key(LABEL_WORKFLOW_JOB)
        && (labels.contains_key(LABEL_WORKFLOW_STEP)
            || labels.contains_key(LABEL_WORKFLOW_ACTION_STEP))
}

/// The explanation of one WorkflowRun.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowRunReport {
    pub namespace: String,
    pub name: String,
    pub phase: String,
    pub message: String,
    pub snapshot: String,
    pub rows: Vec<StepRow>,
}

/// One step (or an Action's step) of one job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepRow {
    pub job: String,
    pub job_phase: String,
    pub step: String,
    pub step_phase: String,
    /// The Run it is (`workflowrun/NAME` for a reusable call's child).
    pub run: String,
    pub run_phase: String,
    /// Why it waits, or how it ended.
    pub why: String,
}

/// The report of `workflow_run` from its Runs (by name) and the replayed verdict of each that is
/// Pending (by name). Pure.
pub fn report(
    workflow_run: &WorkflowRun,
    runs: &BTreeMap<String, Run>,
    verdicts: &BTreeMap<String, String>,
) -> WorkflowRunReport {
    let status = workflow_run.status.clone().unwrap_or_default();
    let jobs = status.jobs.clone().unwrap_or_default();
    let mut rows = Vec::new();
    for (name, job) in &jobs {
        let waiting_for = job_waits_for(job, &jobs);
        if !job.workflow_run_name.is_empty() || job.steps.is_empty() {
            rows.push(StepRow {
                job: name.clone(),
                job_phase: format!("{:?}", job.phase),
                step: String::new(),
                step_phase: String::new(),
                run: if job.workflow_run_name.is_empty() {
                    String::new()
                } else {
                    format!("workflowrun/{}", job.workflow_run_name)
                },
                run_phase: String::new(),
                why: waiting_for.clone().unwrap_or_default(),
            });
            continue;
        }
        let mut before_ended = true;
        for step in &job.steps {
            let inner: Vec<(String, StepPhase, String)> = if step.action_steps.is_empty() {
                vec![(step.name.clone(), step.phase, step.run_name.clone())]
            } else {
                step.action_steps
                    .iter()
                    .map(|a| {
                        (
                            format!("{}/{}", step.name, a.name),
                            a.phase,
                            a.run_name.clone(),
                        )
                    })
                    .collect()
            };
            for (label, phase, run_name) in inner {
                let run = runs.get(&run_name);
                // A Run with no status yet is Pending, as `kubectl get runs` shows it.
                let run_phase = run.map(Run::phase);
                let why = match (run_phase, &waiting_for) {
                    (_, Some(waits)) => waits.clone(),
                    (Some(RunPhase::Pending) | None, _) if run.is_some() => verdicts
                        .get(&run_name)
                        .cloned()
                        .unwrap_or_else(|| "waits for the scheduler".into()),
                    (Some(p), _)
                        if p.is_terminal()
                            || p == RunPhase::Scheduled
                            || p == RunPhase::Running =>
                    {
                        run_said(run.unwrap())
                    }
                    _ if phase == StepPhase::Pending && !before_ended => {
                        "waits for the step before it".into()
                    }
                    _ => String::new(),
                };
                before_ended = phase == StepPhase::Succeeded;
                rows.push(StepRow {
                    job: name.clone(),
                    job_phase: format!("{:?}", job.phase),
                    step: label,
                    step_phase: format!("{phase:?}"),
                    run: run_name,
                    run_phase: run_phase.map(|p| format!("{p:?}")).unwrap_or_default(),
                    why,
                });
            }
        }
    }
    WorkflowRunReport {
        namespace: workflow_run.namespace().unwrap_or_default(),
        name: workflow_run.name_any(),
        phase: format!("{:?}", status.phase),
        message: status.message,
        snapshot: status.snapshot_name,
        rows,
    }
}

/// Why a job that has not started waits, or was skipped: read off its needs' phases.
fn job_waits_for(job: &JobStatus, jobs: &BTreeMap<String, JobStatus>) -> Option<String> {
    let phase_of = |n: &String| jobs.get(n).map(|j| j.phase).unwrap_or_default();
    match job.phase {
        JobPhase::Waiting | JobPhase::Pending => {
            let open: Vec<String> = job
                .pre
                .iter()
                .filter(|n| phase_of(n) != JobPhase::Succeeded)
                .map(|n| format!("{n} ({:?})", phase_of(n)))
                .collect();
            (!open.is_empty()).then(|| format!("needs {}", open.join(", ")))
        }
        JobPhase::Skipped => {
            let blocking: Vec<String> = job
                .pre
                .iter()
                .filter(|n| matches!(phase_of(n), JobPhase::Failed | JobPhase::Skipped))
                .map(|n| format!("{n} {:?}", phase_of(n)))
                .collect();
            Some(format!("skipped: {}", blocking.join(", ")))
        }
        _ => None,
    }
}

/// What a placed or ended Run's status says: its Pod, or its reason and message.
fn run_said(run: &Run) -> String {
    let status = run.status.clone().unwrap_or_default();
    match status.phase.unwrap_or_default() {
        RunPhase::Scheduled | RunPhase::Running => {
            format!("on {}", status.assigned_pod.unwrap_or_default())
        }
        RunPhase::Succeeded => String::new(),
        _ => [
            status.reason.unwrap_or_default(),
            status.message.unwrap_or_default(),
        ]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(": "),
    }
}
