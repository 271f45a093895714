//! The WorkflowRun planner: from a WorkflowRun, its frozen [`Snapshot`] and the children it
//! owns (Runs, child WorkflowRuns), what its status now is ([`derive`]) and what to do next
//! ([`plan`]); and what each next thing is: the Run a step becomes ([`step_run`]), the child
//! WorkflowRun a reusable call becomes ([`call_run`]), and how the status records it.
//!
//! Pure: no clock, no API. The controller (`super::controller`) reads the objects, calls this,
//! and carries the decision out. A job runs only when every job it `needs` succeeded; a job
//! whose need failed or was skipped is skipped; a job's steps run one after another, each as one
//! Run, and the first that fails fails the job; the WorkflowRun succeeds when every job
//! succeeded or was skipped, and fails when one failed.
//!
//! The rest of it is in rooms of its own: [`status`] (how the children move the status on),
//! [`make`] (the checks before anything starts, and the Run or child WorkflowRun a target
//! becomes) and [`record`] (how the status records each step taken).

mod make;
mod record;
mod status;

pub use make::{
    MAX_OUTPUT_ANNOTATION_BYTES, StepRun, call_run, check_action, check_jobs, step_run,
};
pub use record::{accept, failed_call, failed_step, refuse, started_call, started_step};
pub use status::derive;

use std::collections::BTreeMap;

use kube::ResourceExt;

use crate::api::{
    JobPhase, JobSpec, JobStatus, LABEL_WORKFLOW_ACTION_STEP, LABEL_WORKFLOW_JOB,
    LABEL_WORKFLOW_STEP, Run, RunPhase, StepPhase, WorkflowPhase, WorkflowRun, WorkflowRunSpec,
    WorkflowRunStatus,
};

use super::snapshot::Snapshot;

/// Where a child Run belongs: its job, its step and (in an Action call) the Action's step.
pub type StepKey = (String, String, String);

/// What a WorkflowRun owns, as observed.
#[derive(Default)]
pub struct Children<'a> {
    /// Its Runs by the step they are; of two for one step, the one with the smaller name.
    pub runs: BTreeMap<StepKey, &'a Run>,
    /// Its child WorkflowRuns (reusable calls) by name.
    pub calls: BTreeMap<String, &'a WorkflowRun>,
    /// Runs its status names for a step that has not ended, which the API says are gone
    /// (deleted before they ended): their steps fail.
    pub gone: std::collections::BTreeSet<String>,
}

impl<'a> Children<'a> {
    /// `runs` filed by the step labels they carry.
    pub fn new(runs: impl IntoIterator<Item = &'a Run>, calls: Vec<&'a WorkflowRun>) -> Self {
        let mut by_step: BTreeMap<StepKey, &Run> = BTreeMap::new();
        for run in runs {
            let label = |key: &str| run.labels().get(key).cloned().unwrap_or_default();
            let key = (
                label(LABEL_WORKFLOW_JOB),
                label(LABEL_WORKFLOW_STEP),
                label(LABEL_WORKFLOW_ACTION_STEP),
            );
            match by_step.get(&key) {
                Some(kept) if kept.name_any() <= run.name_any() => {}
                _ => {
                    by_step.insert(key, run);
                }
            }
        }
        Children {
            runs: by_step,
            calls: calls.into_iter().map(|c| (c.name_any(), c)).collect(),
            gone: Default::default(),
        }
    }

    /// The Runs `status` names for a step (or Action step) that has not ended and that are not
    /// among these children: gone, or not seen yet. The controller asks the API which.
    pub fn unseen(&self, status: &WorkflowRunStatus) -> Vec<String> {
        let seen: std::collections::BTreeSet<String> =
            self.runs.values().map(|r| r.name_any()).collect();
        let running = |phase: StepPhase, name: &String| {
            phase == StepPhase::Running && !name.is_empty() && !seen.contains(name)
        };
        let mut unseen = Vec::new();
        for step in status.jobs.iter().flatten().flat_map(|(_, j)| &j.steps) {
            if running(step.phase, &step.run_name) {
                unseen.push(step.run_name.clone());
            }
            for inner in &step.action_steps {
                if running(inner.phase, &inner.run_name) {
                    unseen.push(inner.run_name.clone());
                }
            }
        }
        unseen
    }

    fn active(&self) -> bool {
        let run_active = |run: &&Run| !run_phase(run).is_terminal() && !run.spec.cancel_requested;
        let call_active =
            |call: &&WorkflowRun| !call_phase(call).is_terminal() && !call.spec.cancel_requested;
        self.runs.values().any(run_active) || self.calls.values().any(call_active)
    }
}

fn run_phase(run: &Run) -> RunPhase {
    run.status
        .as_ref()
        .and_then(|s| s.phase)
        .unwrap_or_default()
}

fn call_phase(call: &WorkflowRun) -> WorkflowPhase {
    call.status.as_ref().map(|s| s.phase).unwrap_or_default()
}

/// What the controller should do next for one WorkflowRun.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// Nothing: it waits for a child, or it has ended.
    Wait,
    /// Accept it: check its jobs, freeze its snapshot, write every job's status.
    Accept,
    /// Start these steps and calls.
    Start(Vec<Target>),
    /// Ask every active child to cancel.
    CancelChildren,
}

/// One thing to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The step at `step` of `job` (its Action's step at `action_step`, when it calls one).
    Step {
        job: String,
        step: usize,
        action_step: Option<usize>,
    },
    /// The reusable Workflow call of `job`.
    Call { job: String },
}

/// The next thing to do for a WorkflowRun whose status [`derive`] has brought up to date.
pub fn plan(
    spec: &WorkflowRunSpec,
    status: &WorkflowRunStatus,
    snapshot: Option<&Snapshot>,
    children: &Children,
) -> Plan {
    // A cancel reaches every active child, even of a WorkflowRun that has ended.
    if spec.cancel_requested && children.active() {
        return Plan::CancelChildren;
    }
    if status.phase.is_terminal() || spec.cancel_requested {
        return Plan::Wait;
    }
    let (Some(jobs), Some(snapshot)) = (status.jobs.as_ref(), snapshot) else {
        return if status.jobs.is_none() {
            Plan::Accept
        } else {
            Plan::Wait
        };
    };
    let mut targets = Vec::new();
    for (name, job) in &snapshot.spec.jobs {
        let Some(state) = jobs.get(name) else {
            continue;
        };
        if job.calls_workflow() {
            if state.workflow_run_name.is_empty() && ready(state, jobs) {
                targets.push(Target::Call { job: name.clone() });
            }
            continue;
        }
        if job.steps.is_empty() || state.steps.len() != job.steps.len() {
            continue;
        }
        if state.phase != JobPhase::Running && !ready(state, jobs) {
            continue;
        }
        targets.extend(next_step(name, job, state));
    }
    // Steps before calls, each in job name order: the order the Go controller starts them.
    targets.sort_by_key(|t| matches!(t, Target::Call { .. }));
    if targets.is_empty() {
        Plan::Wait
    } else {
        Plan::Start(targets)
    }
}

/// Whether a job that has not started may: every job it needs succeeded.
fn ready(state: &JobStatus, jobs: &BTreeMap<String, JobStatus>) -> bool {
    matches!(state.phase, JobPhase::Pending | JobPhase::Waiting)
        && state
            .pre
            .iter()
            .all(|pre| jobs.get(pre).map(|j| j.phase) == Some(JobPhase::Succeeded))
}

/// The next Run of a job's steps: the first step that has not succeeded, when it has not
/// started (for an Action call, its first Action step that has not). A failed step starts
/// nothing after it.
fn next_step(name: &str, job: &JobSpec, state: &JobStatus) -> Option<Target> {
    let index = state
        .steps
        .iter()
        .position(|s| s.phase != StepPhase::Succeeded)?;
    let step = &state.steps[index];
    if step.phase == StepPhase::Failed {
        return None;
    }
    if !job.steps[index].calls_action() {
        let unstarted = step.phase == StepPhase::Pending && step.run_name.is_empty();
        return unstarted.then(|| Target::Step {
            job: name.to_string(),
            step: index,
            action_step: None,
        });
    }
    let inner = step
        .action_steps
        .iter()
        .position(|s| s.phase != StepPhase::Succeeded)?;
    let action_step = &step.action_steps[inner];
    (action_step.phase == StepPhase::Pending && action_step.run_name.is_empty()).then(|| {
        Target::Step {
            job: name.to_string(),
            step: index,
            action_step: Some(inner),
        }
    })
}
