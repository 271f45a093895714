//! Prints the pool view ([`Status`]) as text: first who leads the scheduler (or that none
//! runs, so nothing below will be placed), then one block per Runtime with its Pods, a usage
//! bar per resource, Runs by phase and the Pending demand by the scheduler's reasons; last the
//! WorkflowRuns that have not ended, each job's steps and the Run each is (at most
//! [`MAX_WORKFLOW_RUNS`] of them: `explain workflowrun/NAME` shows any one whole).
//!
//! Presentation only: every number arrives decided by [`super::report`].

use super::model::{ResourceStatus, RuntimeStatus, Status};
use crate::output::{Palette, Table, Tone};

/// Cells of a usage bar.
const BAR_WIDTH: u64 = 10;

/// The most WorkflowRuns the text shows (the JSON and YAML have every one).
pub const MAX_WORKFLOW_RUNS: usize = 20;

/// The whole view: the scheduler line, then the Runtimes (or where none were found), then the
/// active WorkflowRuns.
pub fn text(status: &Status, palette: &Palette) -> String {
    let mut out = status.scheduler.line(palette);
    out.push_str("\n\n");
    if status.runtimes.is_empty() {
        out.push_str(&match &status.namespace {
            Some(ns) => format!("No Runtimes, Runtime Pods or Runs in namespace {ns}.\n"),
            None => "No Runtimes, Runtime Pods or Runs in any namespace.\n".to_string(),
        });
    } else {
        let blocks: Vec<String> = status
            .runtimes
            .iter()
            .map(|rt| runtime_block(rt, palette))
            .collect();
        out.push_str(&blocks.join("\n"));
    }
    if !status.workflow_runs.is_empty() {
        out.push('\n');
        out.push_str(&workflow_runs_block(status, palette));
    }
    out
}

/// The active WorkflowRuns: one row per step (or per job that is a reusable call or has not
/// started), with the Run it is and why it waits.
fn workflow_runs_block(status: &Status, palette: &Palette) -> String {
    let all = &status.workflow_runs;
    let mut out = format!(
        "{} ({} not ended)\n",
        palette.paint("WorkflowRuns", Tone::Strong),
        all.len()
    );
    let header = [
        "WORKFLOWRUN",
        "PHASE",
        "JOB",
        "JOB PHASE",
        "STEP",
        "RUN",
        "RUN PHASE",
        "WHY",
    ];
    let mut table = Table::new(header.iter().map(|h| h.to_string()).collect());
    for report in all.iter().take(MAX_WORKFLOW_RUNS) {
        let name = match status.namespace {
            Some(_) => report.name.clone(),
            None => format!("{}/{}", report.namespace, report.name),
        };
        if report.rows.is_empty() {
            let not_accepted = "not accepted yet".to_string();
            table.row(vec![
                name,
                report.phase.clone(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                not_accepted,
            ]);
            continue;
        }
        for row in &report.rows {
            table.row(vec![
                name.clone(),
                report.phase.clone(),
                row.job.clone(),
                row.job_phase.clone(),
                row.step.clone(),
                row.run.clone(),
                row.run_phase.clone(),
                row.why.clone(),
            ]);
        }
    }
    out.push_str(&table.render(palette));
    if all.len() > MAX_WORKFLOW_RUNS {
        out.push_str(&format!(
            "… and {} more; `kubectl kruntimes explain workflowrun/NAME` shows one, `-o json` all\n",
            all.len() - MAX_WORKFLOW_RUNS
        ));
    }
    out
}

fn runtime_block(rt: &RuntimeStatus, palette: &Palette) -> String {
    let mut out = String::new();
    let found = match (rt.found, rt.replicas) {
        (false, _) => format!(" ({})", palette.paint("Runtime not found", Tone::Bad)),
        (true, Some(replicas)) => format!(" (replicas {replicas})"),
        (true, None) => String::new(),
    };
    out.push_str(&format!(
        "{} {} in namespace {}{found}\n",
        palette.paint("Runtime", Tone::Strong),
        palette.paint(&rt.name, Tone::Strong),
        rt.namespace
    ));

    let pods = &rt.pods;
    let available = format!("{} available", pods.available);
    let available = if pods.available < pods.total || pods.total == 0 {
        palette.paint(&available, Tone::Warn)
    } else {
        palette.paint(&available, Tone::Good)
    };
    let why: Vec<String> = pods
        .unavailable
        .iter()
        .map(|c| format!("{} {}", c.count, c.reason))
        .collect();
    let why = if why.is_empty() {
        String::new()
    } else {
        format!(" ({})", why.join(", "))
    };
    out.push_str(&format!(
        "  Pods:      {} total, {} ready, {available}{why}\n",
        pods.total, pods.ready
    ));
    if let Some(failure) = &rt.replica_failure {
        out.push_str(&format!(
            "  {}  {}/{} Runtime Pods: {failure}\n",
            palette.paint("Failing:", Tone::Bad),
            pods.total,
            rt.replicas.unwrap_or_default()
        ));
    }

    if let Some(updated) = rt.updated {
        out.push_str(&format!(
            "  Rollout:   {updated}/{} Runtime Pods on the current template (the rest are drained and replaced one at a time)\n",
            pods.total
        ));
    }

    let w = &rt.workspaces;
    if !w.is_empty() {
        let parts: Vec<String> = [
            (w.bound, "Bound"),
            (w.pending, "Pending"),
            (w.lost, "Lost"),
            (w.released, "Released"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, phase)| format!("{n} {phase}"))
        .collect();
        out.push_str(&format!("  Workspaces: {}\n", parts.join(", ")));
    }

    let r = &rt.runs;
    // Ready (function Runs), Timeout and Cancelled only when there are any: most pools have
    // task Runs alone, and the line stays the one they know.
    let optional = |count: usize, phase: &str| {
        if count > 0 {
            format!(", {count} {phase}")
        } else {
            String::new()
        }
    };
    out.push_str(&format!(
        "  Runs:      {} Pending, {} Scheduled, {} Running{}, {} Succeeded, {}{}{}\n",
        r.pending,
        r.scheduled,
        r.running,
        optional(r.ready, "Ready"),
        r.succeeded,
        if r.failed > 0 {
            palette.paint(&format!("{} Failed", r.failed), Tone::Bad)
        } else {
            "0 Failed".to_string()
        },
        optional(r.timeout, "Timeout"),
        optional(r.cancelled, "Cancelled"),
    ));

    if rt.resources.is_empty() {
        out.push_str("  Resources: none advertised\n");
    } else {
        let mut table = Table::new(vec!["RESOURCE".into(), "USAGE".into(), "USED".into()]);
        for res in &rt.resources {
            let (bar, tone) = bar(res);
            let row = table.row(vec![res.name.clone(), bar, used_text(res)]);
            table.tone(row, 1, tone);
        }
        out.push('\n');
        indent(&mut out, &table.render(palette));
    }

    let p = &rt.pending;
    out.push('\n');
    if p.runs == 0 {
        out.push_str("  Pending:   no Run is waiting\n");
    } else {
        let oldest = p
            .oldest_wait_seconds
            .map(|s| format!(", the oldest for {}", age(s)))
            .unwrap_or_default();
        let runs = if p.runs == 1 { "Run" } else { "Runs" };
        out.push_str(&format!(
            "  Pending:   {} {runs} waiting{oldest}\n",
            palette.paint(&p.runs.to_string(), Tone::Warn)
        ));
        // Only where priority orders the queue: with every Run at 0 it says nothing.
        if p.by_priority.iter().any(|c| c.priority != 0) {
            let levels: Vec<String> = p
                .by_priority
                .iter()
                .map(|c| format!("{} at {}", c.runs, c.priority))
                .collect();
            out.push_str(&format!(
                "  Priority:  {} (served highest first)\n",
                levels.join(", ")
            ));
        }
        // Only where fairness orders the queue: two or more groups waiting.
        if !p.by_group.is_empty() {
            const SHOWN: usize = 8;
            let mut groups: Vec<String> = p
                .by_group
                .iter()
                .take(SHOWN)
                .map(|g| {
                    let name = if g.group.is_empty() {
                        "(none)"
                    } else {
                        &g.group
                    };
                    let weight = match g.weight {
                        1.0 => String::new(),
                        w => format!(", weight {w}"),
                    };
                    format!("{name} {:.2}{weight} ({} waiting)", g.share, g.runs)
                })
                .collect();
            if p.by_group.len() > SHOWN {
                groups.push(format!("{} more", p.by_group.len() - SHOWN));
            }
            out.push_str(&format!(
                "  Shares:    {} (next first)\n",
                groups.join(", ")
            ));
        }
        let mut table = Table::new(vec!["RUNS".into(), "REASON (the scheduler's)".into()]);
        for c in &p.by_reason {
            let row = table.row(vec![c.count.to_string(), c.reason.clone()]);
            table.tone(row, 1, Tone::Warn);
        }
        indent(&mut out, &table.render(palette));
    }
    out
}

/// `████████░░` and its tone: full is bad, 80% or more needs attention.
fn bar(res: &ResourceStatus) -> (String, Tone) {
    let Some(used) = res.used else {
        return ("?".repeat(BAR_WIDTH as usize), Tone::Warn);
    };
    let filled = if res.capacity == 0 {
        BAR_WIDTH
    } else {
        (used.min(res.capacity) * BAR_WIDTH).div_ceil(res.capacity)
    };
    let tone = if used >= res.capacity {
        Tone::Bad
    } else if used * 10 >= res.capacity * 8 {
        Tone::Warn
    } else {
        Tone::Good
    };
    let text = "█".repeat(filled as usize) + &"░".repeat((BAR_WIDTH - filled) as usize);
    (text, tone)
}

fn used_text(res: &ResourceStatus) -> String {
    match res.used {
        Some(used) => format!("{used}/{}", res.capacity),
        None => format!("?/{}", res.capacity),
    }
}

fn indent(out: &mut String, text: &str) {
    for line in text.lines() {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
}

/// A wait in seconds as kubectl prints ages ([`crate::output::age`]).
pub fn age(seconds: i64) -> String {
    crate::output::age(jiff::SignedDuration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::status::model::*;

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(age(45), "45s");
        assert_eq!(age(130), "2m10s");
        assert_eq!(age(3 * 3600 + 300), "3h5m");
        assert_eq!(age(2 * 86400 + 3 * 3600), "2d3h");
    }

    #[test]
    fn bars_fill_by_usage_and_round_up() {
        let r = |used, capacity| ResourceStatus {
            name: "x".into(),
            used,
            capacity,
        };
        assert_eq!(bar(&r(Some(8), 10)), ("████████░░".into(), Tone::Warn));
        assert_eq!(bar(&r(Some(0), 4)), ("░░░░░░░░░░".into(), Tone::Good));
        assert_eq!(bar(&r(Some(1), 40)).0, "█░░░░░░░░░");
        assert_eq!(bar(&r(Some(3), 3)), ("██████████".into(), Tone::Bad));
        assert_eq!(bar(&r(None, 3)).0, "??????????");
    }

    #[test]
    fn an_empty_view_says_where_it_looked() {
        let s = Status {
            schema_version: SCHEMA_VERSION,
            now: jiff::Timestamp::UNIX_EPOCH,
            namespace: Some("team-a".into()),
            scheduler: Leader {
                state: LeaderState::Leading,
                message: "sched-1 leads in kubectl-kruntimes".into(),
                ..Leader::default()
            },
            runtimes: vec![],
            workflow_runs: vec![],
        };
        assert_eq!(
            text(&s, &Palette::plain()),
            "Scheduler: sched-1 leads in kubectl-kruntimes\n\nNo Runtimes, Runtime Pods or Runs in namespace team-a.\n"
        );
    }
}
