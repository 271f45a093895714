//! Builds the explanation of one Run ([`Report`]) from listed objects by replaying the
//! scheduler's own cycle.
//!
//! Owns the translation from the pure core's [`Evaluation`] into the model's named fields. It
//! must not re-implement a scheduling rule: verdicts, rejections and scores come from
//! [`evaluate`] with the scheduler's [`Registry`], per-plugin verdicts from the registry's own
//! filters, shortfalls from RuntimePodAvailability, heartbeat freshness from
//! [`Heartbeat::is_fresh_at`]. It is pure: no client, no clock (`now` comes with the
//! [`Subject`]'s objects), and the cache it replays on is the replay's
//! ([`crate::replay::Objects::cache`]), the same `status` builds.

use std::collections::BTreeMap;

use jiff::Timestamp;
use kube::ResourceExt;

use super::hints;
pub use super::model::*;
use crate::api::{RunPhase, Runtime, retry};
use crate::scheduler::framework::{
    CycleError, Decision, Evaluation, Heartbeat, PodView, Registry, RunCycleState, RunKey,
    SchedulerCache, ScopeRef, Selector, Snapshot, WorkspaceBinding, evaluate,
};
use crate::scheduler::plugins::runtime_pod_availability;

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
            .map(|c| c.request.iter().map(|(k, v)| (k.to_string(), v)).collect())
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

/// The Run's queue position and, when the scheduler nominated a Pod for it (recorded in
/// `status.nominatedPodName`), what is still in use there.
fn queue_report(
    state: &SchedulerCache,
    snapshot: &Snapshot<'_>,
    run: &crate::api::Run,
    cycle: Option<&RunCycleState>,
    registry: &Registry,
) -> Option<QueueReport> {
    let (position, pending) = state.queue_position(run)?;
    let nominated = state
        .nominated_pod(snapshot.namespace(), &run.uid().unwrap_or_default())
        .and_then(|pod| snapshot.pod(pod))
        .map(|pod| NominationReport {
            pod: pod.name().to_string(),
            resources: cycle
                .map(|c| {
                    c.request
                        .iter()
                        .map(|(name, request)| ResourceUse {
                            name: name.to_string(),
                            used: Some(pod.used(name)).filter(|u| *u != u64::MAX),
                            assumed: pod.assumed(name),
                            capacity: pod
                                .capacity()
                                .ok()
                                .filter(|c| c.contains(name))
                                .map(|c| c.get(name)),
                            request,
                        })
                        .collect()
                })
                .unwrap_or_default(),
        });
    // The scheduler's own preemption rule, as a dry run at the snapshot's instant.
    let preemption = state
        .preemption_plan(registry, run, snapshot.now())
        .filter(|p| !p.victims.is_empty())
        .map(|p| PreemptionReport {
            pod: p.pod,
            victims: p
                .victims
                .iter()
                .map(|v| VictimReport {
                    name: v.name.clone(),
                    priority: v.priority,
                    level: v.level().to_string(),
                })
                .collect(),
        });
    Some(QueueReport {
        position,
        pending,
        nominated,
        priority: cycle.map_or(0, |c| c.priority),
        preemption,
        fair_share: fair_share_report(state, snapshot.namespace(), run),
    })
}

/// The standing of the Run's fairness group, as the scheduler's queue ranks the groups with
/// Pending Runs; `None` while only one group waits.
fn fair_share_report(
    state: &SchedulerCache,
    namespace: &str,
    run: &crate::api::Run,
) -> Option<FairShareReport> {
    let scope = ScopeRef::new(namespace, &run.spec.runtime);
    let standings = state.standings(&scope);
    if standings.len() < 2 {
        return None;
    }
    let group = state.queue().fair_share(&scope).group_of(run);
    let standing = standings.iter().find(|s| s.group == group)?;
    Some(FairShareReport {
        group: group.as_str().to_string(),
        share: standing.share,
        weight: standing.weight,
        rank: standing.rank,
        groups: standings.len(),
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
        names.extend(cycle.request.names());
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
                request: cycle.map_or(0, |c| c.request.get(name)),
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
                anti.iter().any(|s| s.matches(&cycle.labels))
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
        .filter(|(_, r)| pick(&r.labels, &r.anti_affinity))
        .map(|(_, r)| r.name.clone())
        .chain(
            view.assumed_runs()
                .filter(|(_, a)| pick(&a.labels, &a.anti_affinity))
                .map(|(_, a)| a.run_name.clone()),
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
        objects: crate::replay::Objects {
            runtimes: vec![runtime(RUNTIME).replicas(replicas).build()],
            pods: pods.iter().map(PodBuilder::build).collect(),
            leases: pods.iter().filter_map(PodBuilder::build_lease).collect(),
            runs: runs.iter().map(RunBuilder::build).collect(),
            workspaces: Vec::new(),
            classes: Vec::new(),
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
mod tests {
    use super::*;
    use crate::scheduler::framework::ScheduleOutcome;
    use crate::testing::*;

    use super::test_report as report;

    #[test]
    fn the_verdict_is_exactly_the_schedulers_pending_message() {
        let pods = [
            pod("p1").capacity(&[("runs", 4), ("example.com/gpu", 1)]),
            pod("p2").capacity(&[("runs", 4)]),
            pod("p3")
                .capacity(&[("runs", 4), ("example.com/gpu", 1)])
                .stale(),
        ];
        let busy = [run("x").requests(&[("example.com/gpu", 1)]).on("p1")];
        let r = run("a").requests(&[("example.com/gpu", 1)]);
        let report = report(&pods, &busy, &r);
        let world = World::new().pods(pods).runs(busy);
        let Decision::Unschedulable(u) = world
            .cache()
            .plan(&crate::scheduler::plugins::registry(), &r.build(), NOW)
            .unwrap()
        else {
            panic!("expected Unschedulable")
        };
        assert_eq!(report.verdict, u.message());
        assert_eq!(
            report.verdict,
            "0/3 Runtime Pods are available: 2 Insufficient example.com/gpu, 1 runtimed heartbeat stale."
        );
        assert_eq!(report.decision, DecisionKind::Unschedulable);
        assert_eq!(
            report
                .histogram
                .iter()
                .map(|h| (h.reason.as_str(), h.count))
                .collect::<Vec<_>>(),
            [
                ("Insufficient example.com/gpu", 2),
                ("runtimed heartbeat stale", 1)
            ]
        );
        let p1 = &report.pods[0];
        assert_eq!(
            p1.rejection.as_ref().map(|r| r.reason.as_str()),
            Some("Insufficient example.com/gpu")
        );
        let gpu = p1
            .resources
            .iter()
            .find(|r| r.name == "example.com/gpu")
            .unwrap();
        assert_eq!(
            (gpu.used, gpu.assumed, gpu.capacity, gpu.request),
            (Some(1), 0, Some(1), 1)
        );
        let p2_gpu = report.pods[1]
            .resources
            .iter()
            .find(|r| r.name == "example.com/gpu")
            .unwrap();
        assert_eq!(p2_gpu.capacity, None, "p2 does not advertise gpu");
        assert_eq!(report.pods[2].heartbeat.state, HeartbeatState::Stale);
    }

    #[test]
    fn a_fitting_run_names_the_pod_and_total_the_scheduler_picks() {
        let pods = [
            pod("p1").capacity(&[("runs", 4)]),
            pod("p2").capacity(&[("runs", 4)]),
        ];
        let busy = [run("x").on("p1")];
        let r = run("a");
        let report = report(&pods, &busy, &r);
        // Against the scheduler's own cycle, Reserve included: not another reading of the
        // same evaluation.
        let (pod, total) = scheduled(World::new().pods(pods).runs(busy), &r);
        assert_eq!(pod, "p2");
        assert_names_the_pod(&report, &pod, total);
        let p2 = &report.pods[1];
        assert_eq!(
            p2.scores
                .iter()
                .map(|s| (s.plugin.as_str(), s.normalized))
                .collect::<Vec<_>>(),
            [("PreferredRunAffinity", 0), ("LeastLoaded", 75)]
        );
        assert_eq!(p2.total, Some(75));
        assert!(!report.replayed);
    }

    /// The report names `pod` (and only it) with `total`, everywhere it says which Pod.
    fn assert_names_the_pod(report: &Report, pod: &str, total: i64) {
        assert_eq!(report.chosen.as_deref(), Some(pod));
        assert_eq!(report.score, Some(total));
        assert_eq!(
            report.verdict,
            format!("Fits: would be placed on {pod} (score {total})")
        );
        let chosen: Vec<_> = report
            .pods
            .iter()
            .filter(|p| p.chosen)
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(chosen, [pod]);
    }

    /// Where the scheduler's cycle reserves `r` in `world`, and the total it scored there.
    fn scheduled(world: World, r: &RunBuilder) -> (String, i64) {
        let outcome = schedule_one(&mut world.cache(), r);
        match outcome {
            ScheduleOutcome::Reserved { pod, total, .. } => (pod, total),
            other => panic!("expected Reserved, got {other:?}"),
        }
    }

    #[test]
    fn explain_shows_the_runs_fairness_group_its_share_and_its_turn() {
        let pods = [pod("p1").capacity(&[("runs", 2)])];
        let r = run("a3").submitted_by("alice").created(3);
        let runs = [
            run("a1").submitted_by("alice").on("p1"),
            run("a2").submitted_by("alice").on("p1"),
            r.clone(),
            run("b1").submitted_by("bob").created(4),
        ];
        let report = report(&pods, &runs, &r);
        let fair = report.queue.clone().expect("Pending").fair_share;
        assert_eq!(
            fair,
            Some(FairShareReport {
                group: "alice".into(),
                share: 1.0,
                weight: 1.0,
                rank: 2,
                groups: 2,
            })
        );
        let text = crate::explain::render::text(&report, false, &crate::output::Palette::plain());
        assert!(
            text.contains("Fair share: group alice holds 1.00 of the Runtime (weight 1), 2nd of 2 groups waiting."),
            "{text}"
        );
        // Alone in the queue, nothing is said of fairness.
        let report = super::test_report(&pods, &runs[..3], &r);
        assert_eq!(report.queue.expect("Pending").fair_share, None);
    }

    #[test]
    fn explain_shows_the_priority_and_the_scheduler_s_preemption_as_a_dry_run() {
        let pods = [pod("p1").capacity(&[("runs", 1)])];
        let r = run("urgent").priority(1000);
        let runs = [run("low").on("p1").priority(0), r.clone()];
        let report = report(&pods, &runs, &r);
        let queue = report.queue.clone().expect("Pending");
        assert_eq!(queue.priority, 1000);
        let preemption = queue.preemption.clone().expect("a preemption");
        assert_eq!(preemption.pod, "p1");
        assert_eq!(
            preemption.victims,
            [VictimReport {
                name: "low".into(),
                priority: 0,
                level: "scheduled".into()
            }]
        );
        let text = crate::explain::render::text(&report, false, &crate::output::Palette::plain());
        assert!(
            text.contains("Priority 1000. Its next cycle preempts on Runtime Pod p1: low (priority 0, scheduled)."),
            "{text}"
        );
    }

    #[test]
    fn a_nominated_run_is_explained_on_its_nominated_pod_not_the_emptier_one() {
        // LeastLoaded prefers the empty p2, but the scheduler held p1 for this Run: it goes
        // there, and explain must name p1 too.
        let pods = [
            pod("p1").capacity(&[("runs", 4)]),
            pod("p2").capacity(&[("runs", 4)]),
        ];
        let busy = [run("x").on("p1")];
        let r = run("a").nominated("p1");
        let mut with_me = busy.to_vec();
        with_me.push(r.clone());
        let report = report(&pods, &with_me, &r);
        let (pod, total) = scheduled(World::new().pods(pods).runs(busy), &r);
        assert_eq!(pod, "p1", "the scheduler binds the nominated Pod");
        assert_names_the_pod(&report, "p1", total);
        assert_eq!(
            report
                .queue
                .as_ref()
                .and_then(|q| q.nominated.as_ref())
                .map(|n| n.pod.as_str()),
            Some("p1")
        );
    }

    #[test]
    fn a_placed_run_is_replayed_without_its_own_usage() {
        let pods = [pod("p1").capacity(&[("runs", 1)])];
        let me = run("a").on("p1");
        let report = report(&pods, std::slice::from_ref(&me), &me);
        assert!(report.replayed);
        assert_eq!(
            report.verdict, "Fits: would be placed on p1 (score 0)",
            "its own run must not count against p1 (it would not fit at all)"
        );
        assert_eq!(report.pods[0].resources[0].used, Some(0));
        assert_eq!(
            report.run.replay_line().unwrap(),
            "Run a is Scheduled on p1; replaying the scheduler as if it were Pending:"
        );
    }

    #[test]
    fn every_filter_gives_its_own_verdict_even_after_the_first_rejection() {
        let pods = [pod("p1").capacity(&[("runs", 4)]).not_ready()];
        let others = [run("x").labels(&[("app", "db")]).on("p1")];
        let r = run("a").anti(&[("app", "db")]);
        let report = report(&pods, &others, &r);
        let p1 = &report.pods[0];
        assert_eq!(
            p1.rejection.as_ref().unwrap().reason,
            "Runtime Pod not ready"
        );
        assert_eq!(
            p1.filters
                .iter()
                .map(|f| (f.plugin.as_str(), f.reason.as_deref()))
                .collect::<Vec<_>>(),
            [
                ("RuntimePodAvailability", Some("Runtime Pod not ready")),
                ("WorkspacePlacement", None),
                ("RunAffinity", Some("didn't match Run anti-affinity rules"))
            ]
        );
        assert_eq!(
            report.affinity,
            [TermReport {
                kind: TermKind::AntiAffinity,
                field: "spec.affinity.runAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]".into(),
                selector: "app=db".into(),
                matches_self: false,
                labels_only: true,
                targets: vec![TargetReport {
                    pod: "p1".into(),
                    runs: vec!["x".into()]
                }],
            }]
        );
    }

    #[test]
    fn an_invalid_run_reports_the_prefilter_reason_naming_field_and_value() {
        let pods = [pod("p1")];
        let r = run("a").request_strs(&[("example.com/gpu", "1.5")]);
        let report = report(&pods, &[], &r);
        assert_eq!(report.decision, DecisionKind::Invalid);
        let invalid = report.invalid.as_ref().unwrap();
        assert_eq!(invalid.reason, "InvalidResources");
        assert!(
            report.verdict.starts_with(
                "InvalidResources: spec.resources.requests[\"example.com/gpu\"]: \"1.5\""
            ),
            "{}",
            report.verdict
        );
        assert!(report.pods.is_empty());
    }

    #[test]
    fn heartbeat_states_agree_with_the_availability_filter() {
        let pods = [
            pod("p1").foreign_lease(),
            pod("p2").no_lease(),
            pod("p3").stale(),
            pod("p4"),
        ];
        let report = report(&pods, &[], &run("a"));
        let got: Vec<_> = report
            .pods
            .iter()
            .map(|p| {
                (
                    p.heartbeat.state,
                    p.rejection.as_ref().map(|r| r.reason.as_str()),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    HeartbeatState::HeldByOther,
                    Some("runtimed heartbeat not held by the Pod")
                ),
                (HeartbeatState::Missing, Some("runtimed heartbeat missing")),
                (HeartbeatState::Stale, Some("runtimed heartbeat stale")),
                (HeartbeatState::Fresh, None),
            ]
        );
    }

    #[test]
    fn a_run_between_attempts_says_which_attempt_waits_and_for_how_long() {
        let since = crate::testing::NOW - jiff::SignedDuration::from_secs(1);
        let waiting = run("flaky")
            .on("p1")
            .retry_policy(3, "4s")
            .between_attempts(2, since);
        let pods = [pod("p1").capacity(&[("runs", 1)])];
        let report = test_report(&pods, std::slice::from_ref(&waiting), &waiting);
        let attempts = report.run.attempts.clone().expect("attempts");
        assert_eq!((attempts.attempt, attempts.max_attempts), (2, 3));
        let line = attempts.line(report.now, Some("p1"));
        // Failed within the second before NOW: due at the end of that second plus 4 s.
        assert!(
            line.starts_with("Attempt 2 of 3; it starts in 4s on p1")
                || line.starts_with("Attempt 2 of 3; it starts in 5s on p1"),
            "{line}"
        );
        // Without a policy there is nothing to say.
        let plain = test_report(&pods, &[], &run("plain"));
        assert_eq!(plain.run.attempts, None);
    }
}
