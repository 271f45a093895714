//! `kubectl kruntimes explain run/NAME`: why a Run is (or is not) placed, and what would
//! change it. (`explain workflowrun/NAME`, a WorkflowRun's jobs and the Run each step is, is
//! [`workflow_run`]'s.)
//!
//! Owns the explain command: [`load`] reads a live snapshot (the Run, its Runtime, the Pods
//! labelled `kruntimes.io/runtime=<spec.runtime>`, the heartbeat Leases, the namespace's
//! Runs and the scheduler's leader-election Lease — GET and LIST only, never a write), [`report`] replays the scheduler's own cycle on
//! it ([`crate::scheduler::framework::evaluate`] with
//! [`crate::scheduler::plugins::registry`]) into the [`model`], [`hints`] derives advice from
//! the model and [`render`] prints it (`report` → `hints` → `render`, one way). It must never
//! re-implement a scheduling rule: every verdict, rejection, shortfall and score comes from
//! the scheduler's plugins.
//!
//! What it shows:
//! - the verdict, exactly in the scheduler's Pending message form (`0/3 Runtime Pods are
//!   available: 2 Insufficient example.com/gpu, 1 runtimed heartbeat stale.`), or `Fits:
//!   would be placed on <pod> (score <total>)`, or `<Reason>: <PreFilter message>` for an
//!   invalid Run (exit code 0: that is a verdict, not a failure);
//! - for a Run that is not Pending, a line such as `Run train-1 is Scheduled on py-a;
//!   replaying the scheduler as if it were Pending:` first. The replay leaves the Run's own
//!   usage and affinity targets out, so it answers "where would it go now";
//! - a row per Runtime Pod: readiness, heartbeat, `used+assumed/capacity (+request)` per
//!   requested resource (`-o wide`: every advertised resource), the RunAffinity verdict, the
//!   first rejecting plugin and reason, and for feasible Pods each score plugin's normalized
//!   score and the weighted total; `*` in the PICK column marks the Pod the scheduler would pick;
//! - who leads the scheduler ([`crate::cmd::replay::leader`], from its leader-election Lease), or
//!   that none runs; then a Pending Run that fits has `, but no scheduler is running: nothing
//!   places it until one runs` added to its verdict line (the plugins' verdict is unchanged);
//! - what would change the verdict (see [`hints`]).
//!
//! `assumed` is always 0: explain reads only the API and cannot see the scheduler's in-memory
//! reservations (Runs reserved but not yet bound). A Run the scheduler has just reserved
//! capacity for is therefore counted only once its binding is visible.
//!
//! # `-o json` / `-o yaml`
//!
//! A stable structure for scripts ([`report::Report`]); fields are camelCase and never
//! omitted (absent values are `null`, empty lists `[]`). `schemaVersion` changes on any
//! incompatible change.
//!
//! ```text
//! schemaVersion: 2
//! namespace:     string
//! now:           RFC 3339 timestamp the snapshot was judged at (heartbeat expiry)
//! run:           {name, uid, runtime, phase, assignedPod, reason, message, labels, deleting,
//!                 attempts: {attempt, maxAttempts, nextTryAt: timestamp|null}|null}
//!                  (status.reason / status.message as the cluster has them; attempts when
//!                  spec.retryPolicy allows more than one or the Run is past its first;
//!                  nextTryAt while it waits out a failed attempt's backoff on its Pod)
//! runtime:       {name, found: bool, replicas: int|null, capacity: {resource: quantity},
//!                replicaFailure: string (why its Pods cannot be created or run; left out when they can)}
//! replayed:      bool — the Run is not Pending and was evaluated as if it were
//! request:       {resource: int} — complete request, defaults applied ({} when invalid)
//! decision:      "Schedule" | "Unschedulable" | "Invalid"
//! verdict:       string — the one-line verdict above
//! invalid:       {reason, field, message} | null — PreFilter's refusal (reason
//!                  InvalidResources or InvalidAffinity; field is the refused path; message
//!                  names the field and the value)
//! chosen:        string|null — the Pod the scheduler would pick
//! score:         int|null — its weighted total
//! totalPods:     int
//! histogram:     [{reason, count, plugin, resource}] — exactly the Pending message's
//!                  entries, in its order (reason is the text, e.g. "Insufficient runs")
//! filterPlugins: [string] — registry order
//! scorePlugins:  [{name, weight}] — registry order
//! pods: [{                       — every Runtime Pod, in name order
//!   name, ready: bool, terminating: bool,
//!   heartbeat: {state: "fresh"|"stale"|"missing"|"heldByOther", holder, renewTime,
//!               expiresAt, durationSeconds},
//!   capacityError: string|null,
//!   resources: [{name, used: int|null (null: an active Run's amount is unreadable),
//!                assumed: int (always 0), capacity: int|null (null: not advertised),
//!                request: int}],            — requested and advertised, in name order
//!   shortfalls: [{resource, requested, used: int|null, capacity: int|null,
//!                 toRelease: int|null}] — requested resources that do not fit here, as
//!                 RuntimePodAvailability decided (toRelease null: releasing cannot help)
//!   filters:   [{plugin, passed: bool, reason, resource}] — every filter's own verdict
//!   rejection: {plugin, reason, resource}|null — the cycle's first rejection
//!   scores:    [{plugin, weight, raw, normalized (0..100), weighted}] — feasible Pods only
//!   total:     int|null, chosen: bool }]
//! affinity: [{kind: "affinity"|"antiAffinity", field (e.g.
//!             spec.affinity.runAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]), selector (kubectl syntax),
//!             matchesSelf: bool, targets: [{pod, runs: [string]}]}]
//! repelledBy: [{pod, runs}] — Runs whose required anti-affinity matches this Run
//! queue:      {position (1 = oldest), pending, nominated: {pod, resources: [{name, used,
//!              assumed, capacity, request}]}|null}|null — the Run's place among its
//!              Runtime's Pending Runs (creation time, then UID), and the Runtime Pod being
//!              drained for it (status.nominatedPodName); null when the Run is not Pending;
//!              fairShare: {group, share, weight, rank, groups} when two or more fairness
//!              groups wait (its group's dominant share of the Runtime, and its turn)
//! hints:      [string] — what would change the verdict
//! scheduler:  {state: "Leading"|"Expired"|"None"|"Unknown", holder, version, namespace,
//!              since, renewed, expires, message} — who leads the scheduler, from its
//!              leader-election Lease kruntimes-scheduler (looked for in kubectl-kruntimes and
//!              the Run's namespace, else in any); as in `status -o json` (src/cmd/status/mod.rs)
//! ```
//!
//! Errors (one line each, non-zero exit): a malformed argument, no cluster or kubeconfig,
//! a missing namespace, a missing Run, the CRDs not installed. A leader-election Lease that
//! may not be read is not one: the scheduler's state is then `Unknown`.

pub mod hints;
pub mod load;
pub mod model;
pub mod render;
pub mod report;
pub mod workflow_run;

use anyhow::{Context as _, anyhow};
use thiserror::Error;

use crate::cmd::cli::{ExplainArgs, GlobalArgs};
use crate::output::{self, Palette};

pub use model::{Report, Subject};

/// Why the command line does not name a Run. It reads as `explain` says it; other commands
/// that take one Run (`invoke`, `logs`) say it in their own name with [`Self::said_by`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TargetError {
    #[error("{}", self.said_by("explain"))]
    Missing,
    #[error("{}", self.said_by("explain"))]
    NotARun(String),
    #[error("{}", self.said_by("explain"))]
    Extra(String),
}

impl TargetError {
    /// The error as the command `command` reports it.
    pub fn said_by(&self, command: &str) -> String {
        match self {
            Self::Missing => format!("{command} needs a Run: use run/NAME or run NAME"),
            Self::NotARun(t) => {
                format!(
                    "{t:?} is not a Run: {command} supports NAME, run/NAME, rn/NAME or run NAME"
                )
            }
            Self::Extra(a) => format!("unexpected argument {a:?} after run/NAME"),
        }
    }
}

/// Whether `kind` names the Run kind as kubectl spells kinds (`run`, `runs`, the short name
/// `rn`, or any of them qualified with the group): what `run/NAME` and `run NAME` accept.
pub fn is_run_kind(kind: &str) -> bool {
    let kind = kind.strip_suffix(".kruntimes.io").unwrap_or(kind);
    matches!(kind, "run" | "runs" | "rn")
}

/// The Run name from `NAME`, `run/NAME`, `runs/NAME`, `rn/NAME` (also `run.kruntimes.io/NAME`)
/// or `run NAME`, as kubectl takes a name of a command's own kind.
pub fn parse_target(target: &str, name: Option<&str>) -> Result<String, TargetError> {
    let is_run = is_run_kind;
    let is_name = crate::api::is_object_name;
    match (target.split_once('/'), name) {
        (Some((kind, n)), None) if is_run(kind) && is_name(n) => Ok(n.to_string()),
        (Some((kind, _)), Some(extra)) if is_run(kind) => Err(TargetError::Extra(extra.into())),
        (Some(_), _) => Err(TargetError::NotARun(target.into())),
        (None, Some(n)) if is_run(target) && is_name(n) => Ok(n.to_string()),
        (None, None) if is_run(target) => Err(TargetError::Missing),
        (None, None) if is_name(target) => Ok(target.to_string()),
        (None, _) => Err(TargetError::NotARun(target.into())),
    }
}

/// The Run names of the arguments of `command` (`cancel`, `wait`), which takes several:
/// `run/A rn/B C…`, or `run A B…` (as `kubectl delete` takes them), or why they are not Runs.
pub fn parse_targets(command: &str, args: &[String]) -> Result<Vec<String>, String> {
    let is_kind = is_run_kind;
    let valid = crate::api::is_object_name;
    match args {
        [] => Err(format!(
            "{command} needs at least one Run: use run/NAME… or run NAME…"
        )),
        [kind, names @ ..] if is_kind(kind) => {
            if names.is_empty() {
                return Err(format!("{kind} needs at least one NAME after it"));
            }
            names
                .iter()
                .map(|n| {
                    valid(n)
                        .then(|| n.clone())
                        .ok_or_else(|| format!("{n:?} is not a Run name"))
                })
                .collect()
        }
        _ => args
            .iter()
            .map(|a| match a.split_once('/') {
                Some((kind, n)) if is_kind(kind) && valid(n) => Ok(n.to_string()),
                None if valid(a) => Ok(a.clone()),
                _ => Err(format!(
                    "{a:?} is not a Run: {command} takes NAME, run/NAME or rn/NAME (or run NAME…)"
                )),
            })
            .collect(),
    }
}

/// Runs the command: parse, load, replay, print.
pub async fn exec(global: &GlobalArgs, args: &ExplainArgs) -> anyhow::Result<()> {
    if let Some(name) = workflow_run::target(args) {
        let name = name.map_err(|e| anyhow!(e))?;
        return workflow_run::exec(global, args, &name).await;
    }
    let name = parse_target(&args.target, args.name.as_deref())?;
    let target = crate::kubeclient::connect(global).await?;
    let subject = output::progress::while_reading(
        "reading the Run's Runtime, its Pods and Runs",
        crate::cmd::replay::load::read_so_far,
        load::load(&target, &name),
    )
    .await?;
    let report = report::build(&subject, &crate::scheduler::plugins::registry())
        .map_err(|e| anyhow!("replaying the scheduler for run {name}: {e}"))?;
    let printed = output::Printed {
        value: &report,
        names: vec![format!("run.kruntimes.io/{name}")],
        rows: "",
    };
    let text = match output::render(&args.output, &printed)? {
        Some(text) => text,
        None => render::text(
            &report,
            args.output.is_wide(),
            &Palette::new(output::color_enabled(args.color)),
        ),
    };
    output::write_stdout(&text).context("writing to stdout")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_named_like_kubectl_does() {
        let ok = [
            ("run/train-1", None, "train-1"),
            ("runs/train-1", None, "train-1"),
            ("run.kruntimes.io/train-1", None, "train-1"),
            ("run", Some("train-1"), "train-1"),
            ("runs", Some("train-1"), "train-1"),
            // The short name, and a bare name, as kubectl takes a name of its command's kind.
            ("rn/train-1", None, "train-1"),
            ("rn", Some("train-1"), "train-1"),
            ("train-1", None, "train-1"),
        ];
        for (target, name, want) in ok {
            assert_eq!(
                parse_target(target, name).as_deref(),
                Ok(want),
                "{target} {name:?}"
            );
        }
        let bad = [
            ("run", None, TargetError::Missing),
            ("run/", None, TargetError::NotARun("run/".into())),
            ("pod/x", None, TargetError::NotARun("pod/x".into())),
            ("Train_1", None, TargetError::NotARun("Train_1".into())),
            ("run/x", Some("y"), TargetError::Extra("y".into())),
        ];
        for (target, name, want) in bad {
            assert_eq!(parse_target(target, name), Err(want), "{target} {name:?}");
        }
    }

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn several_runs_are_run_slash_names_or_a_kind_then_names() {
        assert_eq!(
            parse_targets("cancel", &args(&["run/a", "runs/b"])),
            Ok(args(&["a", "b"]))
        );
        assert_eq!(
            parse_targets("cancel", &args(&["run", "a", "b"])),
            Ok(args(&["a", "b"]))
        );
        assert!(
            parse_targets("cancel", &[])
                .unwrap_err()
                .contains("at least one Run")
        );
        assert!(
            parse_targets("cancel", &args(&["run"]))
                .unwrap_err()
                .contains("NAME")
        );
        assert_eq!(
            parse_targets("cancel", &args(&["pod/a"])).unwrap_err(),
            "\"pod/a\" is not a Run: cancel takes NAME, run/NAME or rn/NAME (or run NAME…)"
        );
        assert_eq!(
            parse_targets("cancel", &args(&["a", "rn/b", "run.kruntimes.io/c"])),
            Ok(args(&["a", "b", "c"]))
        );
        assert!(parse_targets("cancel", &args(&["Not_A_Name"])).is_err());
        assert!(parse_targets("cancel", &args(&["run", "a/b"])).is_err());
    }
}
