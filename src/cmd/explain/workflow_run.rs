//! `kubectl kruntimes explain workflowrun/NAME`: a WorkflowRun's jobs, each step and the Run it
//! is, and why each waits. Reads only.
//!
//! Owns the command: it reads the WorkflowRun and its Runs, replays the scheduler's own plugins
//! on each Pending one ([`super::report::build`], as `explain run/NAME` does), and prints the
//! view [`crate::cmd::replay::workflow_run::report`] builds. It decides nothing.

use std::collections::BTreeMap;

use anyhow::{Context as _, anyhow};
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use crate::api::{LABEL_WORKFLOW_RUN_UID, Run, RunPhase, WorkflowRun};
use crate::cmd::cli::{ExplainArgs, GlobalArgs};
use crate::cmd::replay::workflow_run::is_step_run_of;
pub use crate::cmd::replay::workflow_run::{StepRow, WorkflowRunReport, report};
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
        .filter(|r| is_step_run_of(r, &uid))
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
