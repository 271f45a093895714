//! How the children move a WorkflowRun's status on: an ended Run ends its step, an Action's
//! steps its call, a child WorkflowRun its job, steps their job; then what is skipped and how
//! the WorkflowRun ends. Also what an expression of a step may read there. Pure.

use std::collections::BTreeMap;

use kube::ResourceExt;

use crate::api::{
    ANNOTATION_WORKFLOW_OUTPUT, ActionSpec, ActionStepStatus, JobPhase, JobSpec, JobStatus,
    OutputSpec, Run, RunPhase, StepPhase, StepStatus, WorkflowPhase, WorkflowRun, WorkflowRunSpec,
    WorkflowRunStatus,
};

use super::{Children, call_phase, run_phase};
use crate::workflow::expr::{self, Scope};
use crate::workflow::snapshot::Snapshot;
use crate::workflow::template;

/// Brings `status` up to date with the children: each ended Run ends its step (or Action step)
/// with the Run's outputs, an Action call ends with its steps, a reusable call with its child
/// WorkflowRun, a job with its steps; then jobs behind a failed one are skipped, and the
/// WorkflowRun ends when every job has (or, cancelled, when every child has).
pub fn derive(
    spec: &WorkflowRunSpec,
    status: &mut WorkflowRunStatus,
    snapshot: Option<&Snapshot>,
    children: &Children,
) {
    if status.phase.is_terminal() {
        return;
    }
    if let (Some(jobs), Some(snapshot)) = (status.jobs.as_mut(), snapshot) {
        let mut message = None;
        for ((job, step, action_step), run) in &children.runs {
            project_run(jobs, job, step, action_step, run);
        }
        fail_gone(jobs, &children.gone, &mut message);
        for (name, job) in &snapshot.spec.jobs {
            derive_action_calls(snapshot, name, job, jobs, &mut message);
        }
        derive_calls(jobs, children, &mut message);
        derive_jobs(&snapshot.spec.jobs, jobs, &mut message);
        if let Some(message) = message {
            status.message = message;
        }
    }
    if spec.cancel_requested {
        let runs_ended = children.runs.values().all(|r| run_phase(r).is_terminal());
        let calls_ended = children.calls.values().all(|c| call_phase(c).is_terminal());
        if runs_ended && calls_ended {
            status.phase = WorkflowPhase::Cancelled;
        }
        return;
    }
    let Some(jobs) = status.jobs.as_mut() else {
        return;
    };
    skip_behind_failures(jobs);
    if jobs.is_empty() {
        return;
    }
    let mut phase = WorkflowPhase::Succeeded;
    for job in jobs.values() {
        match job.phase {
            JobPhase::Failed => phase = WorkflowPhase::Failed,
            JobPhase::Succeeded | JobPhase::Skipped => {}
            _ => return,
        }
    }
    status.phase = phase;
}

/// An ended Run's phase and outputs onto its step, unless the step already names another Run.
fn project_run(
    jobs: &mut BTreeMap<String, JobStatus>,
    job: &str,
    step: &str,
    action_step: &str,
    run: &Run,
) {
    let phase = match run_phase(run) {
        RunPhase::Succeeded => StepPhase::Succeeded,
        RunPhase::Failed | RunPhase::Timeout | RunPhase::Cancelled => StepPhase::Failed,
        _ => return,
    };
    let outputs = run
        .status
        .as_ref()
        .map(|s| s.outputs.clone())
        .unwrap_or_default();
    let Some(step) = jobs
        .get_mut(job)
        .and_then(|j| j.steps.iter_mut().find(|s| s.name == step))
    else {
        return;
    };
    let name = run.name_any();
    let (run_name, slot_phase, slot_outputs) = if action_step.is_empty() {
        (&mut step.run_name, &mut step.phase, &mut step.outputs)
    } else {
        let Some(inner) = step.action_steps.iter_mut().find(|s| s.name == action_step) else {
            return;
        };
        (&mut inner.run_name, &mut inner.phase, &mut inner.outputs)
    };
    if !run_name.is_empty() && *run_name != name {
        return;
    }
    *run_name = name;
    *slot_phase = phase;
    *slot_outputs = outputs;
}

/// A running step (or Action step) whose Run is gone fails: the Run was deleted before it
/// ended, so nothing will ever end the step otherwise.
fn fail_gone(
    jobs: &mut BTreeMap<String, JobStatus>,
    gone: &std::collections::BTreeSet<String>,
    message: &mut Option<String>,
) {
    for (job, state) in jobs.iter_mut() {
        for step in &mut state.steps {
            let mut fail = |phase: &mut StepPhase, run: &str, what: &str| {
                if *phase == StepPhase::Running && gone.contains(run) {
                    *phase = StepPhase::Failed;
                    *message = Some(format!(
                        "the Run {run} of {what} in job {job:?} was deleted before it ended"
                    ));
                }
            };
            for inner in &mut step.action_steps {
                let what = format!("Action step {:?} of step {:?}", inner.name, step.name);
                fail(&mut inner.phase, &inner.run_name, &what);
            }
            let what = format!("step {:?}", step.name);
            fail(&mut step.phase, &step.run_name, &what);
        }
    }
}

/// An Action call's step ends when its Action's steps have: failed with the first that
/// failed, succeeded (with the Action's outputs) when all succeeded.
fn derive_action_calls(
    snapshot: &Snapshot,
    name: &str,
    job: &JobSpec,
    jobs: &mut BTreeMap<String, JobStatus>,
    message: &mut Option<String>,
) {
    let scope = step_scope(jobs, name);
    let Some(state) = jobs.get_mut(name) else {
        return;
    };
    for (spec, step) in job.steps.iter().zip(state.steps.iter_mut()) {
        if !spec.calls_action() || matches!(step.phase, StepPhase::Succeeded | StepPhase::Failed) {
            continue;
        }
        let Some(action) = snapshot
            .action(name, &spec.name)
            .filter(|a| a.spec.steps.len() == step.action_steps.len())
        else {
            step.phase = StepPhase::Failed;
            *message = Some(format!(
                "Action {:?} for step {:?} in job {name:?} is missing from the WorkflowRun's snapshot",
                spec.uses, spec.name
            ));
            continue;
        };
        let phases = step.action_steps.iter().map(|s| s.phase);
        if phases.clone().any(|p| p == StepPhase::Failed) {
            step.phase = StepPhase::Failed;
            continue;
        }
        if phases.clone().any(|p| p != StepPhase::Succeeded) {
            continue;
        }
        match action_outputs(&action.spec, &step.action_steps, &spec.with, &scope) {
            Ok(outputs) => {
                step.phase = StepPhase::Succeeded;
                step.outputs = outputs;
            }
            Err(e) => {
                step.phase = StepPhase::Failed;
                *message = Some(format!(
                    "resolve the outputs of Action step {:?} in job {name:?}: {e}",
                    spec.name
                ));
            }
        }
    }
}

/// A reusable call's job ends with its child WorkflowRun: succeeded with the outputs its frozen
/// output expressions give over the child's jobs, failed when the child failed, was cancelled
/// or is gone.
fn derive_calls(
    jobs: &mut BTreeMap<String, JobStatus>,
    children: &Children,
    message: &mut Option<String>,
) {
    for (name, state) in jobs.iter_mut() {
        if state.workflow_run_name.is_empty() || state.phase != JobPhase::Running {
            continue;
        }
        // The calls are read with a consistent list, after the child was created (its name is
        // recorded only then): one missing from it was deleted.
        let Some(child) = children.calls.get(&state.workflow_run_name) else {
            state.phase = JobPhase::Failed;
            *message = Some(format!(
                "the child WorkflowRun {} of job {name:?} was deleted before it ended",
                state.workflow_run_name
            ));
            continue;
        };
        match call_phase(child) {
            WorkflowPhase::Succeeded => match call_outputs(child) {
                Ok(outputs) => {
                    state.phase = JobPhase::Succeeded;
                    state.outputs = outputs;
                }
                Err(e) => {
                    state.phase = JobPhase::Failed;
                    *message = Some(format!("resolve the outputs of job {name:?}: {e}"));
                }
            },
            WorkflowPhase::Failed | WorkflowPhase::Cancelled => state.phase = JobPhase::Failed,
            _ => {}
        }
    }
}

/// A running job of steps ends with them: failed at the first failed step, succeeded (with
/// its outputs) when all succeeded.
fn derive_jobs(
    specs: &BTreeMap<String, JobSpec>,
    jobs: &mut BTreeMap<String, JobStatus>,
    message: &mut Option<String>,
) {
    for (name, state) in jobs.iter_mut() {
        if state.phase != JobPhase::Running || state.steps.is_empty() {
            continue;
        }
        if state.steps.iter().any(|s| s.phase == StepPhase::Failed) {
            state.phase = JobPhase::Failed;
            continue;
        }
        if state.steps.iter().any(|s| s.phase != StepPhase::Succeeded) {
            continue;
        }
        let expressions = specs.get(name).map(|j| &j.outputs);
        let scope = Scope {
            steps: Some(step_outputs(&state.steps)),
            ..Scope::default()
        };
        let outputs: Result<BTreeMap<_, _>, String> = expressions
            .into_iter()
            .flatten()
            .map(|(key, value)| {
                let resolved =
                    expr::resolve(value, &scope).map_err(|e| format!("output {key:?}: {e}"))?;
                Ok((key.clone(), resolved))
            })
            .collect();
        match outputs {
            Ok(outputs) => {
                state.phase = JobPhase::Succeeded;
                state.outputs = outputs;
            }
            Err(e) => {
                state.phase = JobPhase::Failed;
                *message = Some(format!("resolve the outputs of job {name:?}: {e}"));
            }
        }
    }
}

/// Jobs that have not started and need a job that failed or was skipped are skipped, to a
/// fixed point (a skip may skip a job before it in name order).
fn skip_behind_failures(jobs: &mut BTreeMap<String, JobStatus>) {
    loop {
        let blocked: Vec<String> = jobs
            .iter()
            .filter(|(_, j)| matches!(j.phase, JobPhase::Pending | JobPhase::Waiting))
            .filter(|(_, j)| {
                j.pre.iter().any(|pre| {
                    matches!(
                        jobs.get(pre).map(|p| p.phase),
                        Some(JobPhase::Failed | JobPhase::Skipped)
                    )
                })
            })
            .map(|(name, _)| name.clone())
            .collect();
        if blocked.is_empty() {
            return;
        }
        for name in blocked {
            if let Some(job) = jobs.get_mut(&name) {
                job.phase = JobPhase::Skipped;
            }
        }
    }
}

fn step_outputs(steps: &[StepStatus]) -> BTreeMap<String, BTreeMap<String, String>> {
    steps
        .iter()
        .filter(|s| !s.outputs.is_empty())
        .map(|s| (s.name.clone(), s.outputs.clone()))
        .collect()
}

/// What an expression of a step of job `name` reads: the outputs of the jobs that succeeded
/// and of the job's own steps that succeeded.
pub(super) fn step_scope(jobs: &BTreeMap<String, JobStatus>, name: &str) -> Scope {
    let mut scope = jobs_scope(jobs);
    let steps = jobs.get(name).map(|j| {
        j.steps
            .iter()
            .filter(|s| s.phase == StepPhase::Succeeded && !s.outputs.is_empty())
            .map(|s| (s.name.clone(), s.outputs.clone()))
            .collect()
    });
    scope.steps = Some(steps.unwrap_or_default());
    scope
}

/// The outputs of the jobs that succeeded.
pub(super) fn jobs_scope(jobs: &BTreeMap<String, JobStatus>) -> Scope {
    let outputs = jobs
        .iter()
        .filter(|(_, j)| j.phase == JobPhase::Succeeded && !j.outputs.is_empty())
        .map(|(name, j)| (name.clone(), j.outputs.clone()))
        .collect();
    Scope {
        jobs: Some(outputs),
        ..Scope::default()
    }
}

/// The inputs an Action call binds: the caller's `with`, resolved, over the Action's declared
/// inputs and their defaults.
pub(super) fn action_inputs(
    action: &ActionSpec,
    with: &BTreeMap<String, String>,
    scope: &Scope,
) -> Result<BTreeMap<String, String>, String> {
    let values = with
        .iter()
        .map(|(name, value)| {
            if !action.inputs.contains_key(name) {
                return Err(format!("unknown input {name:?}"));
            }
            let resolved =
                expr::resolve(value, scope).map_err(|e| format!("input {name:?}: {e}"))?;
            Ok((name.clone(), resolved))
        })
        .collect::<Result<_, _>>()?;
    template::bind(&action.inputs, &values)
}

fn action_outputs(
    action: &ActionSpec,
    steps: &[ActionStepStatus],
    with: &BTreeMap<String, String>,
    scope: &Scope,
) -> Result<BTreeMap<String, String>, String> {
    let inputs = action_inputs(action, with, scope)?;
    let steps = steps
        .iter()
        .filter(|s| s.phase == StepPhase::Succeeded && !s.outputs.is_empty())
        .map(|s| (s.name.clone(), s.outputs.clone()))
        .collect();
    let scope = Scope {
        inputs: Some(inputs),
        steps: Some(steps),
        jobs: scope.jobs.clone(),
    };
    resolve_outputs(&action.outputs, &scope)
}

fn resolve_outputs(
    outputs: &BTreeMap<String, OutputSpec>,
    scope: &Scope,
) -> Result<BTreeMap<String, String>, String> {
    outputs
        .iter()
        .map(|(name, output)| {
            let value =
                expr::resolve(&output.value, scope).map_err(|e| format!("output {name:?}: {e}"))?;
            Ok((name.clone(), value))
        })
        .collect()
}

/// The outputs of a reusable call, from the expressions frozen on its child WorkflowRun.
fn call_outputs(child: &WorkflowRun) -> Result<BTreeMap<String, String>, String> {
    let contract: BTreeMap<String, OutputSpec> = child
        .annotations()
        .iter()
        .filter_map(|(key, value)| {
            let name = key.strip_prefix(ANNOTATION_WORKFLOW_OUTPUT)?;
            Some((
                name.to_string(),
                OutputSpec {
                    value: value.clone(),
                },
            ))
        })
        .collect();
    let jobs = child.status.as_ref().and_then(|s| s.jobs.as_ref());
    let scope = jobs
        .map(jobs_scope)
        .unwrap_or_else(|| jobs_scope(&BTreeMap::new()));
    resolve_outputs(&contract, &scope)
        .map_err(|e| format!("child WorkflowRun {}: {e}", child.name_any()))
}
