//! Builds the pool view ([`Status`]) from listed objects by replaying the scheduler's own
//! cycle for every Pending Run.
//!
//! It must not re-implement a scheduling rule: one cache from the replay's objects
//! ([`crate::replay::Objects::cache`], as `explain` builds it), [`evaluate`] with the scheduler's [`Registry`] for each Pending Run
//! (once per distinct request shape and place among the nominations in a Runtime), the
//! Pending message from [`crate::scheduler::framework::Unschedulable::message`] and Pod availability from
//! [`runtime_pod_availability::unavailable`]; who leads the scheduler from
//! [`crate::replay::leader::judge`]. It is pure: no client, no clock.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kube::ResourceExt;

pub use super::model::*;
use crate::api::{LABEL_RUNTIME, Run, RunPhase, WorkspacePhase};
use crate::scheduler::framework::{
    CycleError, Decision, Registry, RunKey, SchedulerCache, Snapshot, evaluate,
};
use crate::scheduler::plugins::runtime_pod_availability;

/// The reason of a Pending Run the scheduler would place right now (it has not yet).
pub const FITS_NOW: &str = "fits now";
/// The reason of a Pending Run of a Runtime without any Runtime Pod.
pub const NO_PODS: &str = "no Runtime Pods";
/// The reason of a Pending Run whose Runtime does not exist.
pub const RUNTIME_NOT_FOUND: &str = "Runtime not found";

/// Replays the scheduler for every Pending Run of `pool` and summarizes each Runtime. The only
/// error is a Score plugin failure, which the scheduler would retry.
pub fn build(pool: &Pool, registry: &Registry) -> Result<Status, CycleError> {
    let cache = pool.objects.cache();
    // Every (namespace, runtime) a Runtime, a Runtime Pod or a Run names.
    let mut keys: BTreeSet<(String, String)> = BTreeSet::new();
    for r in &pool.objects.runtimes {
        keys.insert((r.namespace().unwrap_or_default(), r.name_any()));
    }
    for p in &pool.objects.pods {
        if let Some(rt) = p.labels().get(LABEL_RUNTIME) {
            keys.insert((p.namespace().unwrap_or_default(), rt.clone()));
        }
    }
    let mut runs_by_scope: HashMap<(String, String), Vec<&Run>> = HashMap::new();
    for run in &pool.objects.runs {
        let key = (
            run.namespace().unwrap_or_default(),
            run.spec.runtime.clone(),
        );
        keys.insert(key.clone());
        runs_by_scope.entry(key).or_default().push(run);
    }
    if let Some(only) = &pool.runtime {
        keys.retain(|(_, rt)| rt == only);
    }
    let mut runtimes = Vec::with_capacity(keys.len());
    for (namespace, name) in keys {
        let runs = runs_by_scope
            .remove(&(namespace.clone(), name.clone()))
            .unwrap_or_default();
        runtimes.push(runtime_status(
            pool, &cache, registry, &namespace, &name, &runs,
        )?);
    }
    Ok(Status {
        schema_version: SCHEMA_VERSION,
        now: pool.objects.now,
        namespace: pool.namespace.clone(),
        scheduler: crate::replay::leader::judge(
            &pool.objects.scheduler_lease,
            pool.namespace.as_deref(),
            pool.objects.now,
        ),
        runtimes,
    })
}

fn runtime_status(
    pool: &Pool,
    cache: &SchedulerCache,
    registry: &Registry,
    namespace: &str,
    name: &str,
    runs: &[&Run],
) -> Result<RuntimeStatus, CycleError> {
    let runtime = pool
        .objects
        .runtimes
        .iter()
        .find(|r| r.namespace().as_deref() == Some(namespace) && r.name_any() == name);
    let snapshot = cache.snapshot(namespace, name, pool.objects.now);

    let mut pods = PodCounts::default();
    let mut unavailable: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut resources: BTreeMap<String, (Option<u64>, u64)> = BTreeMap::new();
    for view in snapshot.pods() {
        pods.total += 1;
        pods.ready += usize::from(view.ready());
        match runtime_pod_availability::unavailable(&view, pool.objects.now) {
            None => pods.available += 1,
            Some(reason) => *unavailable.entry(reason).or_default() += 1,
        }
        if view.deleting() {
            continue;
        }
        let Ok(capacity) = view.capacity() else {
            continue;
        };
        for (resource, amount) in capacity.iter() {
            let used = view.used(resource);
            let entry = resources
                .entry(resource.to_string())
                .or_insert((Some(0), 0));
            entry.0 = match (entry.0, used) {
                (_, u64::MAX) | (None, _) => None,
                (Some(total), used) => Some(total.saturating_add(used)),
            };
            entry.1 = entry.1.saturating_add(amount);
        }
    }
    pods.unavailable = sorted_counts(unavailable.into_iter().map(|(r, c)| (r.to_string(), c)));

    let mut phases = PhaseCounts::default();
    for run in runs {
        match run.phase() {
            RunPhase::Pending => phases.pending += 1,
            RunPhase::Scheduled => phases.scheduled += 1,
            RunPhase::Running => phases.running += 1,
            RunPhase::Ready => phases.ready += 1,
            RunPhase::Succeeded => phases.succeeded += 1,
            RunPhase::Failed => phases.failed += 1,
            RunPhase::Timeout => phases.timeout += 1,
            RunPhase::Cancelled => phases.cancelled += 1,
        }
    }

    // One cycle per distinct verdict key: Runs alike in everything the cycle reads of them
    // get the same verdict, so 10,000 identical Pending Runs cost one evaluation, or one per
    // stretch of the queue between nominated Runs.
    let nominated = nominated_pods(cache, namespace, name);
    let mut verdicts: HashMap<VerdictKey<'_>, (Vec<String>, String)> = HashMap::new();
    let mut by_reason: HashMap<String, usize> = HashMap::new();
    let mut by_message: HashMap<String, usize> = HashMap::new();
    let mut by_priority: BTreeMap<i32, usize> = BTreeMap::new();
    let mut pending = PendingDemand::default();
    for run in runs.iter().filter(|r| r.waits_for_placement()) {
        let key = VerdictKey::of(&snapshot, &nominated, run);
        let priority = key.priority;
        let (reasons, message) = match verdicts.get(&key) {
            Some(v) => v.clone(),
            None => {
                let eval = evaluate(&snapshot, registry, &cache.queued(run))?;
                let verdict = match eval.decision() {
                    Decision::Schedule { .. } => (
                        vec![FITS_NOW.to_string()],
                        "Fits: not yet placed.".to_string(),
                    ),
                    Decision::Unschedulable(u) => {
                        // A Run waiting for its PriorityClass was not evaluated: no
                        // histogram, but not for want of Pods.
                        let reasons = if u.missing_class.is_some() {
                            vec![u.reason().to_string()]
                        } else if u.missing_runtime.is_some() {
                            vec![RUNTIME_NOT_FOUND.to_string()]
                        } else if u.histogram.is_empty() {
                            vec![NO_PODS.to_string()]
                        } else {
                            u.histogram.iter().map(|c| c.text()).collect()
                        };
                        (reasons, u.message())
                    }
                    Decision::Invalid { reason, message } => {
                        (vec![reason.to_string()], format!("{reason}: {message}"))
                    }
                };
                verdicts.insert(key, verdict.clone());
                verdict
            }
        };
        pending.runs += 1;
        for reason in reasons {
            *by_reason.entry(reason).or_default() += 1;
        }
        *by_message.entry(message).or_default() += 1;
        if let Some(priority) = priority {
            *by_priority.entry(priority).or_default() += 1;
        }
        if let Some(created) = run.metadata.creation_timestamp.as_ref().map(|t| t.0)
            && pending.oldest_created.is_none_or(|o| created < o)
        {
            pending.oldest_created = Some(created);
        }
    }
    pending.oldest_wait_seconds = pending
        .oldest_created
        .map(|t| pool.objects.now.duration_since(t).as_secs().max(0));
    pending.by_reason = sorted_counts(by_reason);
    pending.by_message = sorted_counts(by_message)
        .into_iter()
        .map(|c| MessageCount {
            message: c.reason,
            runs: c.count,
        })
        .collect();
    let standings = cache.standings(&crate::scheduler::framework::ScopeRef::new(namespace, name));
    if standings.len() > 1 {
        pending.by_group = standings
            .into_iter()
            .map(|s| GroupShare {
                group: s.group.as_str().to_string(),
                share: s.share,
                weight: s.weight,
                runs: s.pending,
            })
            .collect();
    }
    pending.by_priority = by_priority
        .into_iter()
        .rev()
        .map(|(priority, runs)| PriorityCount { priority, runs })
        .collect();

    Ok(RuntimeStatus {
        namespace: namespace.to_string(),
        name: name.to_string(),
        found: runtime.is_some(),
        replicas: runtime.map(|r| r.spec.replicas),
        pods,
        resources: resources
            .into_iter()
            .map(|(name, (used, capacity))| ResourceStatus {
                name,
                used,
                capacity,
            })
            .collect(),
        runs: phases,
        pending,
        workspaces: workspace_counts(pool, namespace, name),
        replica_failure: runtime.and_then(crate::api::replica_failure),
        updated: runtime
            .and_then(|r| r.status.as_ref())
            .and_then(|s| s.updated_replicas.filter(|u| *u < s.replicas)),
    })
}

/// Everything a cycle reads of a Pending Run: Runs of equal keys get the same verdict, so one
/// evaluation serves them all. (The cycle also leaves the Run's own usage and assumption out,
/// but a Run waiting for placement has neither, and a listed cache holds no assumptions.)
#[derive(Debug, PartialEq, Eq, Hash)]
struct VerdictKey<'a> {
    /// What PreFilter reads of the object: requests, affinity, labels, workspace, class and
    /// `spec.cancelRequested`.
    shape: String,
    /// The nominated Pods whose held room counts against the Run, as the snapshot sees them
    /// for it: only nominations of Runs earlier in the queue hold room, so Runs of one shape
    /// either side of a nominated Run see different Pods.
    held: Vec<&'a str>,
    /// The resolved priority: a recorded `status.priority` stands even when the class is gone,
    /// and only a Run without one waits for a missing class. `None` for that wait.
    priority: Option<i32>,
}

impl<'a> VerdictKey<'a> {
    /// `nominated` is [`nominated_pods`] of the snapshot's scope.
    fn of(snapshot: &Snapshot<'_>, nominated: &[&'a str], run: &Run) -> Self {
        let shape = serde_json::to_string(&(
            &run.spec.resources,
            &run.spec.affinity,
            run.labels(),
            &run.spec.workspace,
            &run.spec.priority_class_name,
            run.spec.cancel_requested,
        ))
        .unwrap_or_default();
        // Ask the snapshot rather than compare queue orders here: whose nomination counts
        // against whom is its rule, and this is what Filter and Score are then given.
        let key = RunKey::of(run);
        let held = nominated
            .iter()
            .copied()
            .filter(|pod| {
                snapshot
                    .pod_seen_by(pod, &key)
                    .is_some_and(|view| view.nomination().is_some())
            })
            .collect();
        VerdictKey {
            shape,
            held,
            priority: snapshot.priority_of(run).ok(),
        }
    }
}

/// The Pods nominated in (namespace, runtime), in name order so keys compare equal: at most
/// one nomination per Pod, and few of them, so a Run's key costs a lookup per nomination.
fn nominated_pods<'a>(
    cache: &'a SchedulerCache,
    namespace: &'a str,
    runtime: &'a str,
) -> Vec<&'a str> {
    let mut pods: Vec<&str> = cache
        .nominations()
        .in_scope(namespace, runtime)
        .map(|(_, n)| n.pod.as_str())
        .collect();
    pods.sort_unstable();
    pods
}

/// The Runtime's PersistentWorkspaces by phase.
fn workspace_counts(pool: &Pool, namespace: &str, runtime: &str) -> WorkspaceCounts {
    let mut counts = WorkspaceCounts::default();
    for w in pool
        .objects
        .workspaces
        .iter()
        .filter(|w| w.namespace().as_deref() == Some(namespace) && w.spec.runtime == runtime)
    {
        *match w.phase() {
            WorkspacePhase::Pending => &mut counts.pending,
            WorkspacePhase::Bound => &mut counts.bound,
            WorkspacePhase::Lost => &mut counts.lost,
            WorkspacePhase::Released => &mut counts.released,
        } += 1;
    }
    counts
}

/// By count (descending), then text.
fn sorted_counts(counts: impl IntoIterator<Item = (String, usize)>) -> Vec<ReasonCount> {
    let mut v: Vec<ReasonCount> = counts
        .into_iter()
        .map(|(reason, count)| ReasonCount { reason, count })
        .collect();
    v.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.reason.cmp(&b.reason)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::framework::MissingClass;
    use crate::scheduler::plugins::registry;
    use crate::testing::*;

    const GPU: &str = "example.com/gpu";

    fn pool(pods: Vec<PodBuilder>, runs: Vec<RunBuilder>) -> Pool {
        Pool {
            namespace: Some("default".into()),
            runtime: None,
            objects: crate::replay::Objects {
                runtimes: vec![runtime("python").build()],
                pods: pods.iter().map(PodBuilder::build).collect(),
                leases: pods.iter().filter_map(PodBuilder::build_lease).collect(),
                runs: runs.iter().map(RunBuilder::build).collect(),
                workspaces: Vec::new(),
                classes: Vec::new(),
                scheduler_lease: Default::default(),
                now: at(0),
            },
        }
    }

    #[test]
    fn pending_demand_counts_the_scheduler_verdicts_per_reason() {
        let p = pool(
            vec![
                pod("py-a").capacity(&[("runs", 4), (GPU, 1)]),
                pod("py-b").capacity(&[("runs", 4), (GPU, 1)]),
                pod("py-c").capacity(&[("runs", 4), (GPU, 1)]).stale(),
            ],
            vec![
                run("a").requests(&[(GPU, 1)]).on("py-a").running(),
                run("b").requests(&[(GPU, 1)]).on("py-b").running(),
                run("w1").requests(&[(GPU, 1)]).created(10),
                run("w2").requests(&[(GPU, 1)]).created(20),
                run("w3").requests(&[(GPU, 2)]).created(30),
                run("done").succeeded(),
            ],
        );
        let s = build(&p, &registry()).unwrap();
        assert_eq!(s.runtimes.len(), 1);
        let rt = &s.runtimes[0];
        assert_eq!((rt.pods.total, rt.pods.ready, rt.pods.available), (3, 3, 2));
        assert_eq!(
            rt.pods.unavailable,
            vec![ReasonCount {
                reason: "runtimed heartbeat stale".into(),
                count: 1
            }]
        );
        let gpu = rt.resources.iter().find(|r| r.name == GPU).unwrap();
        assert_eq!((gpu.used, gpu.capacity), (Some(2), 3));
        assert_eq!(
            (rt.runs.pending, rt.runs.running, rt.runs.succeeded),
            (3, 2, 1)
        );
        assert_eq!(rt.pending.runs, 3);
        let oldest = jiff::Timestamp::from_second(10).unwrap();
        assert_eq!(rt.pending.oldest_created, Some(oldest));
        assert_eq!(rt.pending.oldest_wait_seconds, Some(at(0).as_second() - 10));
        let reasons: Vec<(&str, usize)> = rt
            .pending
            .by_reason
            .iter()
            .map(|c| (c.reason.as_str(), c.count))
            .collect();
        assert_eq!(
            reasons,
            vec![
                ("Insufficient example.com/gpu", 3),
                ("runtimed heartbeat stale", 3)
            ]
        );
        let messages: Vec<(&str, usize)> = rt
            .pending
            .by_message
            .iter()
            .map(|c| (c.message.as_str(), c.runs))
            .collect();
        assert_eq!(
            messages,
            vec![(
                "0/3 Runtime Pods are available: 2 Insufficient example.com/gpu, 1 runtimed heartbeat stale.",
                3
            )]
        );
    }

    #[test]
    fn a_named_runtime_filters_and_a_run_of_a_missing_runtime_says_so() {
        let mut p = pool(
            vec![pod("py-a")],
            vec![run("lost").runtime("nope"), run("fits")],
        );
        let s = build(&p, &registry()).unwrap();
        let names: Vec<&str> = s.runtimes.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, vec!["nope", "python"]);
        assert_eq!(s.runtimes[0].pending.by_reason[0].reason, RUNTIME_NOT_FOUND);
        assert!(!s.runtimes[0].found);
        assert_eq!(s.runtimes[1].pending.by_reason[0].reason, FITS_NOW);
        p.runtime = Some("python".into());
        let s = build(&p, &registry()).unwrap();
        assert_eq!(s.runtimes.len(), 1);
    }

    fn messages(rt: &RuntimeStatus) -> Vec<(&str, usize)> {
        rt.pending
            .by_message
            .iter()
            .map(|c| (c.message.as_str(), c.runs))
            .collect()
    }

    #[test]
    fn runs_of_one_shape_either_side_of_a_nominated_run_get_their_own_verdicts() {
        // py-a holds its one GPU for `nominated`: `early`, ahead of it in the queue, may still
        // take it; `late`, behind it, may not. All three ask for the same thing.
        let p = pool(
            vec![pod("py-a").capacity(&[("runs", 4), (GPU, 1)])],
            vec![
                run("early").requests(&[(GPU, 1)]).created(10),
                run("nominated")
                    .requests(&[(GPU, 1)])
                    .created(20)
                    .nominated("py-a"),
                run("late").requests(&[(GPU, 1)]).created(30),
            ],
        );
        let s = build(&p, &registry()).unwrap();
        let rt = &s.runtimes[0];
        assert_eq!(
            messages(rt),
            vec![
                ("Fits: not yet placed.", 2),
                (
                    "0/1 Runtime Pods are available: 1 reserved for an earlier Run.",
                    1
                ),
            ]
        );
        let reasons: Vec<(&str, usize)> = rt
            .pending
            .by_reason
            .iter()
            .map(|c| (c.reason.as_str(), c.count))
            .collect();
        assert_eq!(
            reasons,
            vec![(FITS_NOW, 2), ("reserved for an earlier Run", 1)]
        );
    }

    #[test]
    fn a_cancelled_run_and_a_recorded_priority_are_not_shared_with_their_shape() {
        let p = pool(
            vec![pod("py-a").capacity(&[("runs", 4)])],
            vec![
                run("waits").priority_class("gone"),
                // Its recorded priority stands although the class is gone: it is evaluated.
                run("recorded").priority_class("gone").priority(5),
                run("plain"),
                run("cancelled").cancel_requested(),
            ],
        );
        let s = build(&p, &registry()).unwrap();
        let mut got = messages(&s.runtimes[0]);
        got.sort();
        let missing = MissingClass("gone".into()).to_string();
        assert_eq!(
            got,
            vec![
                (
                    "Cancelled: spec.cancelRequested: the Run was cancelled before it was placed",
                    1
                ),
                ("Fits: not yet placed.", 2),
                (missing.as_str(), 1),
            ]
        );
        // Counted under the condition's reason, not as a Runtime without Pods.
        let reasons: Vec<(&str, usize)> = s.runtimes[0]
            .pending
            .by_reason
            .iter()
            .map(|c| (c.reason.as_str(), c.count))
            .collect();
        assert!(
            reasons.contains(&(crate::api::status::reasons::PRIORITY_CLASS_NOT_FOUND, 1)),
            "{reasons:?}"
        );
        assert!(!reasons.iter().any(|(r, _)| *r == NO_PODS), "{reasons:?}");
    }

    #[test]
    fn pending_demand_by_priority_is_the_schedulers_resolved_priority_highest_first() {
        let mut p = pool(
            vec![pod("py-a").capacity(&[("runs", 1)])],
            vec![
                run("busy").on("py-a").running(),
                run("urgent").priority_class("urgent"),
                run("batch-1"),
                run("batch-2").priority_class("batch"),
                run("lost").priority_class("nope"),
            ],
        );
        p.objects.classes = vec![
            priority_class("urgent", 1000).build(),
            priority_class("batch", -5).build(),
            priority_class("standard", 10).global_default().build(),
        ];
        let s = build(&p, &registry()).unwrap();
        let levels: Vec<(i32, usize)> = s.runtimes[0]
            .pending
            .by_priority
            .iter()
            .map(|c| (c.priority, c.runs))
            .collect();
        // batch-1 names no class: the global default's 10; the missing class is not counted.
        assert_eq!(levels, vec![(1000, 1), (10, 1), (-5, 1)]);
        assert_eq!(s.runtimes[0].pending.runs, 4);
        let text = super::super::render::text(&s, &crate::output::Palette::plain());
        assert!(
            text.contains("  Priority:  1 at 1000, 1 at 10, 1 at -5 (served highest first)\n"),
            "{text}"
        );
    }

    #[test]
    fn shares_per_group_show_who_holds_the_runtime_and_who_goes_next() {
        let mut p = pool(
            vec![pod("py-a").capacity(&[("runs", 4)])],
            vec![
                run("a1").submitted_by("alice").on("py-a").running(),
                run("a2").submitted_by("alice").on("py-a").running(),
                run("a3").submitted_by("alice").on("py-a").running(),
                run("a4").submitted_by("alice").on("py-a").running(),
                run("a5").submitted_by("alice").created(1),
                run("a6").submitted_by("alice").created(2),
                run("b1").submitted_by("bob").created(3),
            ],
        );
        p.objects.runtimes[0].metadata.annotations = Some(
            [(
                crate::api::ANNOTATION_FAIR_SHARE_WEIGHTS.to_string(),
                "alice=2".to_string(),
            )]
            .into(),
        );
        let s = build(&p, &registry()).unwrap();
        let groups: Vec<(&str, f64, f64, usize)> = s.runtimes[0]
            .pending
            .by_group
            .iter()
            .map(|g| (g.group.as_str(), g.share, g.weight, g.runs))
            .collect();
        assert_eq!(groups, vec![("bob", 0.0, 1.0, 1), ("alice", 1.0, 2.0, 2)]);
        let text = super::super::render::text(&s, &crate::output::Palette::plain());
        assert!(
            text.contains(
                "  Shares:    bob 0.00 (1 waiting), alice 1.00, weight 2 (2 waiting) (next first)\n"
            ),
            "{text}"
        );
        // One group waiting: nothing to share.
        p.objects
            .runs
            .retain(|r| r.metadata.name.as_deref() != Some("b1"));
        let s = build(&p, &registry()).unwrap();
        assert!(s.runtimes[0].pending.by_group.is_empty());
    }
}
