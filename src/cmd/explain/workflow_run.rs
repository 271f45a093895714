//! `kubectl kruntimes explain workflowrun/NAME`: a WorkflowRun's jobs, each step and the Run it
//! is, and why each waits. Reads only.
//!
//! Owns the view: the WorkflowRun's status as the workflow controller wrote it (phases, needs,
//! each step's Run) and, for every step whose Run is Pending, the verdict of the scheduler's
//! own plugins replayed on it ([`super::report::build`], as `explain run/NAME` does). It decides
//! nothing: why a job waits is read off its `pre` and its needs' phases, never re-planned.

use std::collections::BTreeMap;

use anyhow::{Context as _, anyhow};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde::Serialize;

use crate::api::{
    JobPhase, JobStatus, LABEL_WORKFLOW_ACTION_STEP, LABEL_WORKFLOW_JOB, LABEL_WORKFLOW_RUN_UID,
    LABEL_WORKFLOW_STEP, Run, RunPhase, StepPhase, WorkflowRun,
};
use crate::cli::{ExplainArgs, GlobalArgs};
use crate::output::{self, Palette, Table};

/// Whether `kind` names the WorkflowRun kind as kubectl spells it.
pub fn is_workflow_run_kind(kind: &str) -> bool {
    let kind = kind.strip_suffix(".kruntimes.io").unwrap_or(kind);
    matches!(kind, "workflowrun" | "workflowruns" | "wfr")
}

/// The WorkflowRun `explain` was asked about, when it was asked about one.
pub fn target(args: &ExplainArgs) -> Option<Result<String, String>> {
    let name = match (args.target.split_once('/'), args.name.as_deref()) {
        (Some((kind, n)), None) if is_workflow_run_kind(kind) => n,
        (None, Some(n)) if is_workflow_run_kind(&args.target) => n,
        (Some((kind, _)), Some(extra)) if is_workflow_run_kind(kind) => {
            return Some(Err(format!(
                "unexpected argument {extra:?} after workflowrun/NAME"
            )));
        }
        (None, None) if is_workflow_run_kind(&args.target) => {
            return Some(Err(
                "explain needs a WorkflowRun's name: workflowrun/NAME".into()
            ));
        }
        _ => return None,
    };
    Some(if crate::api::is_object_name(name) {
        Ok(name.to_string())
    } else {
        Err(format!("{name:?} is not a WorkflowRun name"))
    })
}

/// The explanation of one WorkflowRun.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
                let run_phase = run.and_then(|r| r.status.as_ref()?.phase);
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

pub fn render(report: &WorkflowRunReport, palette: &Palette) -> String {
    let mut out = format!(
        "WorkflowRun {}/{}: {}{}\n",
        report.namespace,
        report.name,
        report.phase,
        if report.message.is_empty() {
            String::new()
        } else {
            format!(": {}", report.message)
        }
    );
    if report.rows.is_empty() {
        out.push_str("not accepted yet: no job has a status\n");
        return out;
    }
    let header = [
        "JOB",
        "JOB PHASE",
        "STEP",
        "STEP PHASE",
        "RUN",
        "RUN PHASE",
        "WHY",
    ];
    let mut table = Table::new(header.iter().map(|h| h.to_string()).collect());
    for row in &report.rows {
        table.row(vec![
            row.job.clone(),
            row.job_phase.clone(),
            row.step.clone(),
            row.step_phase.clone(),
            row.run.clone(),
            row.run_phase.clone(),
            row.why.clone(),
        ]);
    }
    out.push_str(&table.render(palette));
    out
}

/// Runs `explain workflowrun/NAME`.
pub async fn exec(global: &GlobalArgs, args: &ExplainArgs, name: &str) -> anyhow::Result<()> {
    let target = crate::kubeclient::connect(global).await?;
    let api: Api<WorkflowRun> = Api::namespaced(target.client.clone(), &target.namespace);
    let workflow_run = match api.get_opt(name).await {
        Ok(Some(w)) => w,
        Ok(None) => {
            return Err(anyhow!(
                "workflowrun/{name} not found in namespace {}",
                target.namespace
            ));
        }
        Err(e) => return Err(target.explain_error(e, &format!("reading workflowrun/{name}"))),
    };
    let uid = workflow_run.uid().unwrap_or_default();
    let runs: Api<Run> = Api::namespaced(target.client.clone(), &target.namespace);
    let listed = runs
        .list(&ListParams::default().labels(&format!("{LABEL_WORKFLOW_RUN_UID}={uid}")))
        .await
        .map_err(|e| target.explain_error(e, "listing the WorkflowRun's Runs"))?;
    let runs: BTreeMap<String, Run> = listed
        .items
        .into_iter()
        .filter(|r| r.labels().contains_key(LABEL_WORKFLOW_JOB))
        .filter(|r| {
            r.labels().contains_key(LABEL_WORKFLOW_STEP)
                || r.labels().contains_key(LABEL_WORKFLOW_ACTION_STEP)
        })
        .map(|r| (r.name_any(), r))
        .collect();
    let mut verdicts = BTreeMap::new();
    let registry = crate::scheduler::plugins::registry();
    for (name, run) in &runs {
        let pending = run
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .unwrap_or_default()
            == RunPhase::Pending;
        if pending {
            let subject = super::load::load(&target, name).await?;
            let replayed = super::report::build(&subject, &registry)
                .map_err(|e| anyhow!("replaying the scheduler for run {name}: {e}"))?;
            verdicts.insert(name.clone(), replayed.verdict);
        }
    }
    let report = report(&workflow_run, &runs, &verdicts);
    let printed = output::Printed {
        value: &report,
        names: vec![format!("workflowrun.kruntimes.io/{name}")],
        rows: "/rows",
    };
    let text = match output::render(&args.output, &printed)? {
        Some(text) => text,
        None => render(&report, &Palette::new(output::color_enabled(args.color))),
    };
    output::write_stdout(&text).context("writing to stdout")
}
