//! `kubectl kruntimes status [RUNTIME]`: the pool view, as `ray status` is for Ray.
//!
//! Owns the status command: [`crate::cmd::replay::load`] lists the Runtimes, Runtime Pods,
//! heartbeat Leases and Runs of a namespace (or all, `-A`), as `explain` reads them — LIST
//! only, never a write; [`report`] replays the scheduler's own cycle
//! ([`crate::scheduler::framework::evaluate`] with [`crate::scheduler::plugins::registry`])
//! for every Pending Run on one cache of those objects ([`crate::cmd::replay::Objects::cache`]),
//! exactly as `explain` does for one Run, into the [`model`]; [`render`] prints it.
//! It must never re-implement a scheduling rule: Pod availability, every Pending reason and
//! message come from the scheduler's plugins.
//!
//! First it says who leads the scheduler ([`crate::cmd::replay::leader`], from the leader-election
//! Lease `kruntimes-scheduler`): `Scheduler: X leads in kubectl-kruntimes for 3m, version
//! 0.1.0 (abc1234)`, or `Scheduler: none leads, Pending Runs wait unless one runs without leader election — …` (a lapsed Lease), or
//! `Scheduler: none found — …` (no Lease)
//! (the replay says where a Run would go; without a leader nothing takes it there), or
//! `Scheduler: unknown — …` when the Lease may not be read (not an error of the command).
//!
//! Per Runtime it shows: Pods total / ready / available (RuntimePodAvailability's Pod checks:
//! not terminating, Ready, heartbeat held and fresh, capacity readable) and why the others are
//! not; per advertised resource the used/capacity sum over the Pods that are not terminating,
//! with a bar (`example.com/gpu   ████████░░   8/10`); Runs by phase; and the Pending demand:
//! how many Runs wait, the oldest wait, and per bounded reason of the scheduler's Pending
//! message how many of them it holds back.
//!
//! Last come the WorkflowRuns that have not ended: per job and step, the Run it is, its phase
//! and why it waits (as `explain workflowrun/NAME`, at most 20 in the text).
//!
//! `--watch` prints a new frame every `--interval` (default 2s) until Ctrl-C, which ends it
//! cleanly (exit code 0). On a terminal each frame redraws the screen in place, as `watch`
//! does; otherwise frames follow one another, each starting with an `Every …` header line (a
//! JSON document per frame with `-o json`, a `---` separated YAML document with `-o yaml`). An
//! API error during a watch is shown in the frame and retried at the next one.
//!
//! # `-o json` / `-o yaml`
//!
//! A stable structure for scripts and dashboards ([`model::Status`]); fields are camelCase and
//! never omitted (absent values are `null`, empty lists `[]`). `schemaVersion` changes on any
//! incompatible change.
//!
//! ```text
//! schemaVersion: 1
//! now:           RFC 3339 timestamp the snapshot was judged at
//! namespace:     string|null — null with --all-namespaces
//! scheduler:     {state: "Leading"|"Expired"|"None"|"Unknown", holder, version, namespace,
//!                 since, renewed, expires, message}
//!                  — who leads the scheduler, from its leader-election Lease
//!                  kruntimes-scheduler: looked for in namespace kubectl-kruntimes and the shown
//!                  one, else in any (a held one speaks first, then the shown namespace's, the
//!                  install's, the freshest). Leading: renewed within its duration; Expired:
//!                  lapsed or released; None: no Lease; Unknown: a look was refused and no held
//!                  Lease was found. holder (spec.holderIdentity), version (annotation
//!                  kruntimes.io/scheduler-version, the leader's release), namespace (the
//!                  Lease's), since (acquireTime), renewed (renewTime), expires (renewTime +
//!                  leaseDurationSeconds): null when unknown; message: the line status prints
//! runtimes: [{                   — by namespace, then name; every Runtime that exists or
//!                                  that a Runtime Pod or Run names
//!   namespace, name, found: bool, replicas: int|null,
//!   replicaFailure: string (why its Pods cannot be created or run; left out when they can),
//!   updated: int (Pods on the current template, while a rollout replaces the rest; left out
//!            otherwise),
//!   pods:      {total, ready, available, unavailable: [{reason, count}]}
//!                (reason: the filter's text, e.g. "runtimed heartbeat stale")
//!   resources: [{name, used: int|null (null: an active Run's amount is unreadable),
//!                capacity: int}]      — every advertised resource, in name order
//!   runs:      {pending, scheduled, running, ready, succeeded, failed, timeout, cancelled}
//!   pending:   {runs: int, oldestCreated: timestamp|null, oldestWaitSeconds: int|null,
//!               byReason:  [{reason, count}] — Runs per reason of their Pending message
//!                          (e.g. "Insufficient example.com/gpu"), also "fits now",
//!                          "no Runtime Pods", "Runtime not found", "InvalidResources",
//!                          "InvalidAffinity"; by count, then text
//!               byMessage: [{message, runs}] — Runs per verdict, in the scheduler's message
//!                          form (what it writes in status.message)
//!               byPriority: [{priority, runs}] — Runs per resolved priority, highest first
//!                          (the queue's order); a Run of a missing class is not counted
//!               byGroup: [{group, share, weight, runs}] — per fairness group with Pending
//!                          Runs, its dominant share of the Runtime, next served first; left
//!                          out while fewer than two groups wait}
//! }]
//! workflowRuns: [{namespace, name, phase, message, snapshot,
//!                 rows: [{job, jobPhase, step, stepPhase, run, runPhase, why}]}]
//!                — every WorkflowRun that has not ended, by namespace then name, in the
//!                  shape of `explain workflowrun/NAME -o json` (a Pending step Run's why is
//!                  the verdict replayed here: the message the scheduler writes, `Fits: not
//!                  yet placed.` for one that fits); empty when a RUNTIME is named, or when
//!                  WorkflowRuns may not be listed
//! ```
//!
//! Errors (one line each, non-zero exit): no cluster or kubeconfig, a missing namespace, the
//! CRDs not installed, a named Runtime that nothing in the namespace knows. A leader-election
//! Lease that may not be read is not one: the scheduler's state is then `Unknown`.

pub mod model;
pub mod render;
pub mod report;

use std::io::IsTerminal as _;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};

use crate::cmd::cli::{GlobalArgs, OutputFormat, StatusArgs};
use crate::kubeclient::Target;
use crate::output::{self, Palette};

pub use model::{Pool, Status};

/// Runs the command: load, replay, print; with `--watch`, again every interval until Ctrl-C.
pub async fn exec(global: &GlobalArgs, args: &StatusArgs) -> anyhow::Result<()> {
    let target = crate::kubeclient::connect(global).await?;
    let palette = Palette::new(args.output.is_table() && output::color_enabled(args.color));
    if !args.watch {
        let text = frame(&target, args, &palette).await?;
        return write_out(&text);
    }
    let tty = std::io::stdout().is_terminal();
    let mut ctrl_c = std::pin::pin!(tokio::signal::ctrl_c());
    let mut first = true;
    loop {
        let text = tokio::select! {
            _ = &mut ctrl_c => return Ok(()),
            text = frame(&target, args, &palette) => text,
        };
        let text = match text {
            Ok(text) => text,
            // A bad namespace or a missing Runtime will not fix itself: say so and stop.
            Err(e) if first => return Err(e),
            Err(e) => format!("error: {e:#}\n"),
        };
        first = false;
        let mut out = String::new();
        if tty && args.output.is_table() {
            // Home and clear: redraw in place, as `watch` does.
            out.push_str("\u{1b}[H\u{1b}[2J");
        }
        match args.output {
            OutputFormat::Table | OutputFormat::Wide => out.push_str(&format!(
                "Every {}: kubectl kruntimes status   {}\n\n",
                humantime(args.interval),
                jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ")
            )),
            OutputFormat::Yaml => out.push_str("---\n"),
            _ => {}
        }
        out.push_str(&text);
        if !tty && args.output.is_table() {
            out.push('\n');
        }
        write_out(&out)?;
        tokio::select! {
            _ = &mut ctrl_c => return Ok(()),
            () = tokio::time::sleep(args.interval) => {}
        }
    }
}

/// One frame: the whole view as the requested format.
async fn frame(target: &Target, args: &StatusArgs, palette: &Palette) -> anyhow::Result<String> {
    let namespace = (!args.all_namespaces).then_some(target.namespace.as_str());
    let pool = Pool {
        namespace: namespace.map(str::to_string),
        runtime: args.runtime.clone(),
        objects: output::progress::while_reading(
            "reading Runtimes, their Pods and Runs",
            crate::cmd::replay::load::read_so_far,
            crate::cmd::replay::load::load(target, namespace, args.runtime.as_deref()),
        )
        .await?,
    };
    let mut status = report::build(&pool, &crate::scheduler::plugins::registry())
        .map_err(|e| anyhow!("replaying the scheduler for the Pending Runs: {e}"))?;
    if let Some(rt) = &args.runtime
        && status.runtimes.is_empty()
    {
        let where_ = match namespace {
            Some(ns) => format!(
                "in namespace {ns:?}; list the Runtimes there with `kubectl get runtimes -n {ns}`"
            ),
            None => "in any namespace; list them with `kubectl get runtimes -A`".to_string(),
        };
        bail!("runtime {rt:?} not found {where_}");
    }
    if let Some(selector) = &args.selector {
        let chosen = selected_runtimes(target, namespace, selector).await?;
        status
            .runtimes
            .retain(|r| chosen.contains(&(r.namespace.clone(), r.name.clone())));
        if status.runtimes.is_empty() && args.output.is_table() {
            let where_ =
                namespace.map_or("any namespace".to_string(), |ns| format!("namespace {ns}"));
            let mut out = status.scheduler.line(palette);
            out.push_str(&format!(
                "\n\nNo Runtime in {where_} matches -l {selector}.\n"
            ));
            return Ok(out);
        }
    }
    let printed = output::Printed {
        value: &status,
        names: status
            .runtimes
            .iter()
            .map(|r| format!("runtime.kruntimes.io/{}", r.name))
            .collect(),
        rows: "/runtimes",
    };
    Ok(match output::render(&args.output, &printed)? {
        Some(text) => text,
        None => render::text(&status, palette),
    })
}

/// The Runtimes `-l` selects, as (namespace, name); the API server parses the selector, so it
/// means what it means to kubectl.
async fn selected_runtimes(
    target: &Target,
    namespace: Option<&str>,
    selector: &str,
) -> anyhow::Result<std::collections::BTreeSet<(String, String)>> {
    use kube::ResourceExt as _;
    let api: kube::Api<crate::api::Runtime> = match namespace {
        Some(ns) => kube::Api::namespaced(target.client.clone(), ns),
        None => kube::Api::all(target.client.clone()),
    };
    let list = api
        .list(&kube::api::ListParams::default().labels(selector))
        .await
        .map_err(|e| anyhow!("listing Runtimes with -l {selector:?}: {e}"))?;
    Ok(list
        .items
        .iter()
        .map(|r| (r.namespace().unwrap_or_default(), r.name_any()))
        .collect())
}

fn humantime(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

fn write_out(text: &str) -> anyhow::Result<()> {
    output::write_stdout(text).context("writing to stdout")
}
