//! What is checked before anything of a WorkflowRun starts (its jobs, the Actions it calls),
//! and what a target becomes: the Run of a step, the child WorkflowRun of a reusable call. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::EnvVar;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Resource, ResourceExt};

use crate::api::{
    ANNOTATION_SUBMITTED_BY, ANNOTATION_WORKFLOW_OUTPUT, ActionSpec, CodeSource, JobSpec,
    LABEL_WORKFLOW_ACTION_STEP, LABEL_WORKFLOW_JOB, LABEL_WORKFLOW_RUN_UID, LABEL_WORKFLOW_STEP,
    Run, RunMode, RunSpec, TaskMode, WorkflowRun, WorkflowRunSpec, WorkflowRunStatus, WorkflowSpec,
};

use super::Children;
use super::status::{action_inputs, jobs_scope, step_scope};
use crate::workflow::expr;
use crate::workflow::snapshot::{self, Snapshot};
use crate::workflow::template;

/// The largest total of a reusable call's frozen output expressions, stored as annotations of
/// its child WorkflowRun (the API server allows 256 KiB of annotations).
pub const MAX_OUTPUT_ANNOTATION_BYTES: usize = 240 * 1024;

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

/// The labels a WorkflowRun's children carry of its own: all but the `kruntimes.io/` ones
/// (which say whose child it is). So a Runtime that groups fair sharing by a label
/// (`kruntimes.io/fair-share-label`) groups a WorkflowRun's Runs as the WorkflowRun is
/// labelled, as a label selector over Runs finds them.
fn inherited_labels(workflow_run: &WorkflowRun) -> BTreeMap<String, String> {
    workflow_run
        .labels()
        .iter()
        .filter(|(key, _)| !key.starts_with("kruntimes.io/"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The annotations a WorkflowRun's children carry of it: who submitted it
/// (`kruntimes.io/submitted-by`, which the admission policies wrote and keep), so that fair
/// sharing groups its Runs under its submitter, not under the scheduler that creates them. The
/// policies take that value only from the scheduler's own account and only on an object a
/// WorkflowRun controls (`deploy/submitter-policy.yaml`).
fn delegated_annotations(workflow_run: &WorkflowRun) -> BTreeMap<String, String> {
    workflow_run
        .annotations()
        .get_key_value(ANNOTATION_SUBMITTED_BY)
        .map(|(k, v)| (k.clone(), v.clone()))
        .into_iter()
        .collect()
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
    let mut labels = inherited_labels(workflow_run);
    labels.extend([
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
            annotations: Some(delegated_annotations(workflow_run)).filter(|a| !a.is_empty()),
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
    let mut annotations = delegated_annotations(parent);
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
            labels: Some({
                let mut labels = inherited_labels(parent);
                labels.insert(
                    LABEL_WORKFLOW_RUN_UID.to_string(),
                    parent.uid().unwrap_or_default(),
                );
                labels
            }),
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
