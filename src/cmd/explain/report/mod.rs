//! Builds the explanation of one Run ([`Report`]) from listed objects by replaying the
//! scheduler's own cycle.
//!
//! Owns the translation from the pure core's [`Evaluation`] into the model's named fields. It
//! must not re-implement a scheduling rule: verdicts, rejections and scores come from
//! [`evaluate`] with the scheduler's [`Registry`], per-plugin verdicts from the registry's own
//! filters, shortfalls from RuntimePodAvailability, heartbeat freshness from
//! [`Heartbeat::is_fresh_at`], who leads the scheduler from [`crate::cmd::replay::leader::judge`].
//! It is pure: no client, no clock (`now` comes with the
//! [`Subject`]'s objects), and the cache it replays on is the replay's
//! ([`crate::cmd::replay::Objects::cache`]), the same `status` builds.

use std::collections::BTreeMap;

use jiff::Timestamp;
use kube::ResourceExt;

use super::hints;
pub use super::model::*;
use crate::api::{RunPhase, Runtime, retry};
use crate::scheduler::framework::{
    CycleError, Decision, Evaluation, Heartbeat, PodView, Registry, RunCycleState, RunKey,
    Selector, Snapshot, WorkspaceBinding, evaluate,
};
use crate::scheduler::plugins::runtime_pod_availability;

mod queue;

use queue::queue_report;

/// Replays the scheduler's cycle for `subject.run` and describes it. The only error is a
/// Score plugin failure, which the scheduler would retry.
pub fn build(subject: &Subject, registry: &Registry) -> Result<Report, CycleError> {
    let objects = &subject.objects;
    let state = objects.cache();
    let run = &subject.run;
    let namespace = run.namespace().unwrap_or_else(|| subject.namespace.clone());
    let snapshot = state.snapshot(&namespace, &run.spec.runtime, objects.now);
    let queued = state.queued(run);
    let eval = evaluate(&snapshot, registry, &queued)?;
    // The scheduler's decision, nomination included: never re-derived here.
    let decision = state.decision(&eval, &RunKey::of(run));

    let (decision_kind, verdict, invalid, chosen, score) = match &decision {
        Decision::Schedule { pod, total, .. } => (
            DecisionKind::Schedule,
            format!("Fits: would be placed on {pod} (score {total})"),
            None,
            Some(pod.clone()),
            Some(*total),
        ),
        Decision::Unschedulable(u) => (DecisionKind::Unschedulable, u.message(), None, None, None),
        Decision::Invalid { reason, message } => (
            DecisionKind::Invalid,
            format!("{reason}: {message}"),
            Some(Invalid {
                reason: reason.to_string(),
                field: eval
                    .state()
                    .err()
                    .map(|e| e.field().to_string())
                    .unwrap_or_default(),
                message: message.clone(),
            }),
            None,
            None,
        ),
    };

    let cycle = eval.state().ok();
    let pods = pod_reports(&snapshot, registry, &eval, cycle, chosen.as_deref());
    let (affinity, repelled_by) = match cycle {
        Some(cycle) => affinity_reports(&eval, cycle),
        None => (Vec::new(), Vec::new()),
    };
    let status = run.status.clone().unwrap_or_default();
    let queue = queue_report(&state, &snapshot, run, cycle, registry);
    let mut report = Report {
        schema_version: SCHEMA_VERSION,
        namespace: namespace.clone(),
        now: objects.now,
        run: RunInfo {
            name: run.name_any(),
            uid: run.uid(),
            runtime: run.spec.runtime.clone(),
            phase: run.phase(),
            assigned_pod: status.assigned_pod,
            reason: status.reason,
            message: status.message,
            labels: run.labels().clone(),
            deleting: run.metadata.deletion_timestamp.is_some(),
            attempts: run
                .retry_policy()
                .ok()
                .filter(|p| p.max_attempts > 1 || run.attempt() > 1)
                .map(|p| Attempts {
                    attempt: run.attempt(),
                    max_attempts: p.max_attempts,
                    next_try_at: retry::retry_due(run),
                }),
        },
        runtime: runtime_info(&run.spec.runtime, subject.runtime()),
        replayed: run.phase() != RunPhase::Pending
            || run
                .status
                .as_ref()
                .is_some_and(|s| s.assigned_pod.is_some()),
        request: cycle
            .map(|c| {
                c.request()
                    .iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect()
            })
            .unwrap_or_default(),
        decision: decision_kind,
        verdict,
        invalid,
        chosen,
        score,
        total_pods: eval.pods().len(),
        histogram: eval
            .rejections()
            .into_iter()
            .map(|c| HistogramEntry {
                reason: c.text(),
                count: c.count,
                plugin: c.plugin.to_string(),
                resource: c.resource.as_deref().map(str::to_string),
            })
            .collect(),
        filter_plugins: registry
            .filters()
            .iter()
            .map(|f| f.name().to_string())
            .collect(),
        score_plugins: registry
            .scores()
            .iter()
            .map(|s| ScorePluginInfo {
                name: s.plugin.name().to_string(),
                weight: s.weight,
            })
            .collect(),
        pods,
        affinity,
        repelled_by,
        queue,
        workspace: workspace_report(run, subject.workspace(), cycle),
        hints: Vec::new(),
        scheduler: crate::cmd::replay::leader::judge(
            &objects.scheduler_lease,
            Some(&namespace),
            objects.now,
        ),
    };
    report.hints = hints::compute(&report);
    Ok(report)
}

/// The Run's workspace: its binding as PreFilter found it for WorkspacePlacement (when
/// PreFilter refused the Run, as its status says).
fn workspace_report(
    run: &crate::api::Run,
    object: Option<&crate::api::PersistentWorkspace>,
    cycle: Option<&RunCycleState>,
) -> Option<WorkspaceReport> {
    let name = run.workspace_name()?;
    let bound_pod = match cycle.and_then(|c| c.workspace.as_ref()) {
        Some(w) => match &w.binding {
            WorkspaceBinding::Bound { pod } => Some(pod.clone()),
            WorkspaceBinding::Unbound | WorkspaceBinding::Missing => None,
        },
        None => object.and_then(|w| w.status.as_ref()?.bound_pod.clone()),
    };
    Some(WorkspaceReport {
        name: name.to_string(),
        found: object.is_some(),
        phase: object.map(|w| w.phase().as_str().to_string()),
        bound_pod,
    })
}

fn runtime_info(name: &str, runtime: Option<&Runtime>) -> RuntimeInfo {
    RuntimeInfo {
        name: name.to_string(),
        found: runtime.is_some(),
        replicas: runtime.map(|r| r.spec.replicas),
        capacity: runtime
            .map(|r| {
                r.spec
                    .capacity_resources()
                    .iter()
                    .map(|(k, q)| (k.clone(), q.0.clone()))
                    .collect()
            })
            .unwrap_or_default(),
        replica_failure: runtime.and_then(crate::api::replica_failure),
    }
}

fn pod_reports(
    snapshot: &Snapshot<'_>,
    registry: &Registry,
    eval: &Evaluation<'_>,
    cycle: Option<&RunCycleState>,
    chosen: Option<&str>,
) -> Vec<PodReport> {
    eval.pods()
        .iter()
        .enumerate()
        .map(|(i, pe)| {
            let view = &pe.pod;
            let filters = cycle
                .map(|cycle| {
                    registry
                        .filters()
                        .iter()
                        .map(|f| match f.filter(snapshot, cycle, view) {
                            Ok(()) => FilterResult {
                                plugin: f.name().to_string(),
                                passed: true,
                                reason: None,
                                resource: None,
                                code: None,
                            },
                            Err(r) => FilterResult {
                                plugin: f.name().to_string(),
                                passed: false,
                                reason: Some(r.message().into_owned()),
                                resource: r.resource().map(|s| s.to_string()),
                                code: Some(r.reason),
                            },
                        })
                        .collect()
                })
                .unwrap_or_default();
            PodReport {
                name: view.name().to_string(),
                ready: view.ready(),
                terminating: view.deleting(),
                heartbeat: heartbeat(view, snapshot.now()),
                capacity_error: view.capacity().err().map(str::to_string),
                resources: resources(view, cycle),
                shortfalls: cycle
                    .map(|cycle| {
                        runtime_pod_availability::shortfalls(cycle, view)
                            .map(|s| ShortfallReport::from(&s))
                            .collect()
                    })
                    .unwrap_or_default(),
                filters,
                rejection: pe.rejection.as_ref().map(|r| RejectionReport {
                    plugin: r.plugin.to_string(),
                    reason: r.message().into_owned(),
                    resource: r.resource().map(|s| s.to_string()),
                    code: r.reason,
                }),
                scores: eval
                    .scores(i)
                    .into_iter()
                    .map(|s| ScoreReport {
                        plugin: s.plugin.to_string(),
                        weight: s.weight,
                        raw: s.raw,
                        normalized: s.normalized,
                        weighted: s.weighted(),
                    })
                    .collect(),
                total: eval.total(i),
                chosen: chosen == Some(pe.pod.name()),
            }
        })
        .collect()
}

fn heartbeat(view: &PodView<'_>, now: Timestamp) -> HeartbeatReport {
    let lease = view.lease();
    let state = match view.heartbeat() {
        Heartbeat::Missing => HeartbeatState::Missing,
        Heartbeat::NotHeld => HeartbeatState::HeldByOther,
        hb if hb.is_fresh_at(now) => HeartbeatState::Fresh,
        Heartbeat::Expires(_) => HeartbeatState::Stale,
    };
    HeartbeatReport {
        state,
        holder: lease.and_then(|l| l.holder.clone()),
        renew_time: lease.and_then(|l| l.renew_time),
        expires_at: lease.and_then(|l| l.expires_at),
        duration_seconds: lease.and_then(|l| l.duration_seconds),
    }
}

fn resources(view: &PodView<'_>, cycle: Option<&RunCycleState>) -> Vec<ResourceUse> {
    let capacity = view.capacity().ok();
    let mut names: Vec<&str> = capacity.map(|c| c.names().collect()).unwrap_or_default();
    if let Some(cycle) = cycle {
        names.extend(cycle.request().names());
    }
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let used = view.used(name);
            ResourceUse {
                name: name.to_string(),
                used: (used != u64::MAX).then_some(used),
                assumed: view.assumed(name),
                capacity: capacity.filter(|c| c.contains(name)).map(|c| c.get(name)),
                request: cycle.map_or(0, |c| c.request().get(name)),
            }
        })
        .collect()
}

fn affinity_reports(
    eval: &Evaluation<'_>,
    cycle: &RunCycleState,
) -> (Vec<TermReport>, Vec<TargetReport>) {
    let mut terms = Vec::new();
    let kinds = [
        (
            TermKind::Affinity,
            &cycle.required_affinity,
            "spec.affinity.runAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        ),
        (
            TermKind::AntiAffinity,
            &cycle.required_anti_affinity,
            "spec.affinity.runAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        ),
    ];
    for (kind, list, base) in kinds {
        for (i, term) in list.iter().enumerate() {
            let targets = eval
                .pods()
                .iter()
                .filter(|pe| term.targets.holds(&pe.pod))
                .map(|pe| TargetReport {
                    pod: pe.pod.name().to_string(),
                    runs: runs_on(&pe.pod, |labels, _| term.selector.matches(labels)),
                })
                .collect();
            terms.push(TermReport {
                kind,
                field: format!("{base}[{i}]"),
                selector: term.selector.to_string(),
                matches_self: term.matches_self,
                labels_only: term.selector.labels_only(),
                targets,
            });
        }
    }
    let repelled = eval
        .pods()
        .iter()
        .filter(|pe| cycle.repelled_by.holds(&pe.pod))
        .map(|pe| TargetReport {
            pod: pe.pod.name().to_string(),
            runs: runs_on(&pe.pod, |_, anti| {
                anti.iter().any(|s| s.matches(cycle.labels()))
            }),
        })
        .collect();
    (terms, repelled)
}

/// Names of the active and assumed Runs on a Pod (the explained Run left out) for which
/// `pick(labels, anti_affinity_selectors)` holds, in name order.
fn runs_on(
    view: &PodView<'_>,
    pick: impl Fn(&BTreeMap<String, String>, &[Selector]) -> bool,
) -> Vec<String> {
    let mut names: Vec<String> = view
        .active_runs()
        .filter(|(_, r)| pick(&r.facts.labels, &r.facts.anti_affinity))
        .map(|(_, r)| r.facts.name.clone())
        .chain(
            view.assumed_runs()
                .filter(|(_, a)| pick(&a.facts.labels, &a.facts.anti_affinity))
                .map(|(_, a)| a.facts.name.clone()),
        )
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The subject `run` among test Pods (with their Leases) and Runs, with a Runtime `python` of
/// as many replicas as Pods and no declared capacity.
#[cfg(test)]
pub(crate) fn test_subject(
    pods: &[crate::testing::PodBuilder],
    runs: &[crate::testing::RunBuilder],
    run: &crate::testing::RunBuilder,
) -> Subject {
    use crate::testing::{NOW, NS, PodBuilder, RUNTIME, RunBuilder, runtime};
    let replicas = i32::try_from(pods.len()).unwrap_or(i32::MAX);
    Subject {
        namespace: NS.to_string(),
        run: run.build(),
        objects: crate::cmd::replay::Objects {
            runtimes: vec![runtime(RUNTIME).replicas(replicas).build()],
            pods: pods.iter().map(PodBuilder::build).collect(),
            leases: pods.iter().filter_map(PodBuilder::build_lease).collect(),
            runs: runs.iter().map(RunBuilder::build).collect(),
            workspaces: Vec::new(),
            workflow_runs: Vec::new(),
            classes: Vec::new(),
            // The usual case: the shipped scheduler leads.
            scheduler_lease: crate::cmd::replay::leader::LeaseRead {
                leases: vec![crate::cmd::replay::leader::test_lease(
                    crate::cmd::replay::leader::INSTALL_NAMESPACE,
                    Some("kubectl-kruntimes-scheduler-7d9c-1"),
                    180,
                    2,
                    15,
                )],
                unreadable: Vec::new(),
            },
            now: NOW,
        },
    }
}

/// The report on `run` among `pods` and `runs` (see [`test_subject`]).
#[cfg(test)]
pub(crate) fn test_report(
    pods: &[crate::testing::PodBuilder],
    runs: &[crate::testing::RunBuilder],
    run: &crate::testing::RunBuilder,
) -> Report {
    build(
        &test_subject(pods, runs, run),
        &crate::scheduler::plugins::registry(),
    )
    .expect("a report on test objects")
}

#[cfg(test)]
mod tests;
