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

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::EnvVar;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::{Resource, ResourceExt};

use crate::api::{
    ANNOTATION_WORKFLOW_OUTPUT, ActionSpec, ActionStepStatus, CONDITION_ACCEPTED, CodeSource,
    JobPhase, JobSpec, JobStatus, LABEL_WORKFLOW_ACTION_STEP, LABEL_WORKFLOW_JOB,
    LABEL_WORKFLOW_RUN_UID, LABEL_WORKFLOW_STEP, OutputSpec, Run, RunMode, RunPhase, RunSpec,
    StepPhase, StepStatus, TaskMode, WorkflowPhase, WorkflowRun, WorkflowRunSpec,
    WorkflowRunStatus, WorkflowSpec,
};

use super::expr::{self, Scope};
use super::snapshot::{self, Snapshot};
use super::template;

/// Where a child Run belongs: its job, its step and (in an Action call) the Action's step.
pub type StepKey = (String, String, String);

/// The largest total of a reusable call's frozen output expressions, stored as annotations of
/// its child WorkflowRun (the API server allows 256 KiB of annotations).
pub const MAX_OUTPUT_ANNOTATION_BYTES: usize = 240 * 1024;

/// What a WorkflowRun owns, as observed.
#[derive(Default)]
pub struct Children<'a> {
    /// Its Runs by the step they are; of two for one step, the one with the smaller name.
    pub runs: BTreeMap<StepKey, &'a Run>,
    /// Its child WorkflowRuns (reusable calls) by name.
    pub calls: BTreeMap<String, &'a WorkflowRun>,
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
        }
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
/// output expressions give over the child's jobs, failed when the child failed or was cancelled.
fn derive_calls(
    jobs: &mut BTreeMap<String, JobStatus>,
    children: &Children,
    message: &mut Option<String>,
) {
    for (name, state) in jobs.iter_mut() {
        if state.workflow_run_name.is_empty() || state.phase != JobPhase::Running {
            continue;
        }
        let Some(child) = children.calls.get(&state.workflow_run_name) else {
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
fn step_scope(jobs: &BTreeMap<String, JobStatus>, name: &str) -> Scope {
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
fn jobs_scope(jobs: &BTreeMap<String, JobStatus>) -> Scope {
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
fn action_inputs(
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

/// Checks what a WorkflowRun's jobs must be before any of them runs: a call sets neither
/// `runs-on` nor steps, a job of steps sets `runs-on` and has steps, and `needs` forms no cycle.
pub fn check_jobs(jobs: &BTreeMap<String, JobSpec>) -> Result<(), String> {
    for (name, job) in jobs {
        if job.calls_workflow() {
            if !job.runs_on.is_empty() || !job.steps.is_empty() {
                return Err(format!(
                    "job {name:?} calls the Workflow {:?} and may not set runs-on or steps",
                    job.uses
                ));
            }
            continue;
        }
        if job.runs_on.is_empty() {
            return Err(format!(
                "job {name:?} must set runs-on: the Runtime its steps run on"
            ));
        }
        if job.steps.is_empty() {
            return Err(format!("job {name:?} must have at least one step"));
        }
    }
    // Depth-first, names and needs in order, so the cycle reported is stable.
    fn visit(
        name: &str,
        jobs: &BTreeMap<String, JobSpec>,
        done: &mut std::collections::BTreeSet<String>,
        stack: &mut Vec<String>,
    ) -> Result<(), String> {
        if done.contains(name) {
            return Ok(());
        }
        if let Some(from) = stack.iter().position(|n| n == name) {
            let mut cycle = stack[from..].to_vec();
            cycle.push(name.to_string());
            return Err(format!(
                "the jobs' needs form a cycle: {}",
                cycle.join(" -> ")
            ));
        }
        stack.push(name.to_string());
        let mut needs = jobs[name].needs.clone();
        needs.sort();
        for need in &needs {
            if !jobs.contains_key(need) {
                return Err(format!(
                    "job {name:?} needs {need:?}, which is not a job of this WorkflowRun"
                ));
            }
            visit(need, jobs, done, stack)?;
        }
        stack.pop();
        done.insert(name.to_string());
        Ok(())
    }
    let mut done = std::collections::BTreeSet::new();
    for name in jobs.keys() {
        visit(name, jobs, &mut done, &mut Vec::new())?;
    }
    Ok(())
}

/// Checks an Action before a WorkflowRun freezes it: at least one step, each a `run` step with
/// a name of its own.
pub fn check_action(spec: &ActionSpec) -> Result<(), String> {
    if spec.steps.is_empty() {
        return Err("an Action must have at least one step".into());
    }
    let mut names = std::collections::BTreeSet::new();
    for step in &spec.steps {
        if step.run.is_empty() || step.calls_action() || !step.with.is_empty() {
            return Err(format!(
                "Action step {:?} must set run and may not call another Action",
                step.name
            ));
        }
        if !names.insert(step.name.as_str()) {
            return Err(format!("Action step name {:?} is used twice", step.name));
        }
    }
    Ok(())
}

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

/// What starting a step needs: its Run exists already, or this Run is to be created.
#[derive(Debug)]
pub enum StepRun {
    Exists(String),
    Create(Box<Run>),
}

/// The Run that `target` (a [`Target::Step`]) becomes, with its expressions resolved from the
/// outputs known now, or why it cannot be made (a failure of the step).
pub fn step_run(
    workflow_run: &WorkflowRun,
    status: &WorkflowRunStatus,
    snapshot: &Snapshot,
    children: &Children,
    job_name: &str,
    step: usize,
    action_step: Option<usize>,
) -> Result<StepRun, String> {
    let job = &snapshot.spec.jobs[job_name];
    let caller = &job.steps[step];
    let jobs = status.jobs.clone().unwrap_or_default();
    let mut scope = step_scope(&jobs, job_name);
    let (executed, action_step_name) = match action_step {
        None => (caller.clone(), String::new()),
        Some(index) => {
            let action = snapshot.action(job_name, &caller.name).ok_or_else(|| {
                format!(
                    "Action {:?} for step {:?} in job {job_name:?} is missing from the WorkflowRun's snapshot",
                    caller.uses, caller.name
                )
            })?;
            let inner = action
                .spec
                .steps
                .get(index)
                .ok_or_else(|| format!("Action {:?} has no step {index}", action.name))?;
            let inputs = action_inputs(&action.spec, &caller.with, &scope)
                .map_err(|e| format!("resolve the inputs of Action {:?}: {e}", action.name))?;
            scope.inputs = Some(inputs);
            (inner.clone(), inner.name.clone())
        }
    };
    let key = (
        job_name.to_string(),
        caller.name.clone(),
        action_step_name.clone(),
    );
    if let Some(run) = children.runs.get(&key) {
        return Ok(StepRun::Exists(run.name_any()));
    }
    let resolve =
        |what: &str, text: &str| expr::resolve(text, &scope).map_err(|e| format!("{what}: {e}"));
    let inline = resolve("run", &executed.run)?;
    let args = executed
        .args
        .iter()
        .enumerate()
        .map(|(i, a)| resolve(&format!("arg[{i}]"), a))
        .collect::<Result<Vec<_>, _>>()?;
    let env = executed
        .env
        .iter()
        .map(|(name, value)| {
            Ok(EnvVar {
                name: name.clone(),
                value: Some(resolve(&format!("env[{name}]"), value)?),
                value_from: None,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut labels = BTreeMap::from([
        (
            LABEL_WORKFLOW_RUN_UID.to_string(),
            workflow_run.uid().unwrap_or_default(),
        ),
        (LABEL_WORKFLOW_JOB.to_string(), job_name.to_string()),
        (LABEL_WORKFLOW_STEP.to_string(), caller.name.clone()),
    ]);
    if !action_step_name.is_empty() {
        labels.insert(
            LABEL_WORKFLOW_ACTION_STEP.to_string(),
            action_step_name.clone(),
        );
    }
    let run = Run {
        metadata: ObjectMeta {
            name: Some(snapshot::step_run_name(
                &workflow_run.name_any(),
                job_name,
                &caller.name,
                &action_step_name,
            )),
            namespace: workflow_run.namespace(),
            labels: Some(labels),
            owner_references: workflow_run.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: RunSpec {
            runtime: job.runs_on.clone(),
            source: Some(CodeSource {
                inline: Some(inline),
                ..CodeSource::default()
            }),
            mode: RunMode {
                task: Some(TaskMode {
                    args,
                    ..TaskMode::default()
                }),
                function: None,
            },
            env,
            ..RunSpec::default()
        },
        status: None,
    };
    Ok(StepRun::Create(Box::new(run)))
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

/// The child WorkflowRun that the reusable call of `job_name` becomes: `workflow` (named
/// `uses`) with its inputs bound from the job's `with`, its output expressions frozen as
/// annotations; or why the call cannot start.
pub fn call_run(
    parent: &WorkflowRun,
    status: &WorkflowRunStatus,
    job_name: &str,
    job: &JobSpec,
    workflow: &WorkflowSpec,
) -> Result<WorkflowRun, String> {
    let jobs = status.jobs.clone().unwrap_or_default();
    let scope = jobs_scope(&jobs);
    let values = job
        .with
        .iter()
        .map(|(name, value)| {
            let resolved =
                expr::resolve(value, &scope).map_err(|e| format!("input {name:?}: {e}"))?;
            Ok((name.clone(), resolved))
        })
        .collect::<Result<BTreeMap<_, _>, String>>()
        .map_err(|e| format!("resolve the inputs of job {job_name:?}: {e}"))?;
    let bound = template::materialize(workflow, &values).map_err(|e| {
        format!(
            "bind the reusable Workflow {:?} for job {job_name:?}: {e}",
            job.uses
        )
    })?;
    let mut annotations = BTreeMap::new();
    let mut bytes = 0;
    for (name, output) in &workflow.outputs {
        let key = format!("{ANNOTATION_WORKFLOW_OUTPUT}{name}");
        if !qualified_name(&key) {
            return Err(format!(
                "the output {name:?} of the reusable Workflow {:?} cannot be an annotation name",
                job.uses
            ));
        }
        bytes += key.len() + output.value.len();
        if bytes > MAX_OUTPUT_ANNOTATION_BYTES {
            return Err(format!(
                "the outputs of the reusable Workflow {:?} are more than {MAX_OUTPUT_ANNOTATION_BYTES} bytes",
                job.uses
            ));
        }
        annotations.insert(key, output.value.clone());
    }
    Ok(WorkflowRun {
        metadata: ObjectMeta {
            name: Some(snapshot::call_run_name(&parent.name_any(), job_name)),
            namespace: parent.namespace(),
            labels: Some(BTreeMap::from([(
                LABEL_WORKFLOW_RUN_UID.to_string(),
                parent.uid().unwrap_or_default(),
            )])),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: parent.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: WorkflowRunSpec {
            jobs: bound,
            cancel_requested: false,
        },
        status: None,
    })
}

/// Whether `key` is a valid annotation key: `prefix/name`, the name at most 63 characters of
/// alphanumerics, `-`, `_` and `.`, starting and ending alphanumeric.
fn qualified_name(key: &str) -> bool {
    let name = key.rsplit_once('/').map_or(key, |(_, n)| n);
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    !name.is_empty()
        && name.len() <= 63
        && edge(name.chars().next())
        && edge(name.chars().last())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
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
