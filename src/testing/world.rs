//! A [`World`] of Pods (with their Leases), Runs and assumptions, turned into a
//! [`SchedulerCache`], and the per-Pod verdicts of one plugin over it.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::{NOW, PodBuilder, PriorityClassBuilder, RUNTIME, RunBuilder, WorkspaceBuilder};
use crate::api::Run;
use crate::scheduler::framework::{
    FilterPlugin, RunCycleState, ScheduleOutcome, SchedulerCache, ScorePlugin, Snapshot, pre_filter,
};

/// Pods (with their Leases), Runs and assumptions, turned into a [`SchedulerCache`] on demand.
#[derive(Debug, Clone, Default)]
pub struct World {
    pods: Vec<PodBuilder>,
    runs: Vec<RunBuilder>,
    assumptions: Vec<(RunBuilder, String)>,
    workspaces: Vec<WorkspaceBuilder>,
    classes: Vec<PriorityClassBuilder>,
}

impl World {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn pods(mut self, pods: impl IntoIterator<Item = PodBuilder>) -> Self {
        self.pods.extend(pods);
        self
    }

    pub fn runs(mut self, runs: impl IntoIterator<Item = RunBuilder>) -> Self {
        self.runs.extend(runs);
        self
    }

    pub fn workspaces(mut self, workspaces: impl IntoIterator<Item = WorkspaceBuilder>) -> Self {
        self.workspaces.extend(workspaces);
        self
    }

    pub fn classes(mut self, classes: impl IntoIterator<Item = PriorityClassBuilder>) -> Self {
        self.classes.extend(classes);
        self
    }

    /// A Pending Run with a scheduler-local assumption on `pod`.
    pub fn assume(mut self, run: RunBuilder, pod: &str) -> Self {
        self.assumptions.push((run, pod.to_string()));
        self
    }

    pub fn cache(&self) -> SchedulerCache {
        let pods: Vec<Pod> = self.pods.iter().map(PodBuilder::build).collect();
        let leases: Vec<Lease> = self
            .pods
            .iter()
            .filter_map(PodBuilder::build_lease)
            .collect();
        let runs: Vec<Run> = self.runs.iter().map(RunBuilder::build).collect();
        // The world's Runtime exists; its Pods are the world's Pods.
        let runtime = super::runtime(RUNTIME).build();
        let classes: Vec<_> = self
            .classes
            .iter()
            .map(PriorityClassBuilder::build)
            .collect();
        let mut cache =
            SchedulerCache::from_objects(&classes, [&runtime], &pods, &leases, &runs, NOW)
                .with_hints(crate::scheduler::plugins::registry().queueing_hints());
        for w in &self.workspaces {
            cache.apply(&w.build(), NOW);
        }
        for (r, pod) in &self.assumptions {
            cache.apply_run(&r.clone().pending().build(), NOW);
            cache
                .reserve(&r.key(), r.assumption(pod), NOW)
                .expect("test assumptions fit");
        }
        cache
    }
}

/// Queues `r` in `cache` (as its watch event would) and runs the next cycle with the default
/// plugins, which must be `r`'s own: it is the head of its Runtime's active queue.
pub fn schedule_one(cache: &mut SchedulerCache, r: &RunBuilder) -> ScheduleOutcome {
    let run = r.build();
    cache.apply(&run, NOW);
    let scheduled = cache
        .schedule_next(&crate::scheduler::plugins::registry(), NOW)
        .expect("the Run is queued");
    assert_eq!(
        scheduled.run.metadata.name, run.metadata.name,
        "the head of the queue is another Run"
    );
    scheduled.outcome
}

/// Calls `f` with the snapshot of the Run's scope at [`NOW`] and its PreFilter state.
fn with_cycle<T>(
    world: &World,
    r: &RunBuilder,
    f: impl FnOnce(&Snapshot<'_>, &RunCycleState) -> T,
) -> T {
    let cache = world.cache();
    let run = r.build();
    let namespace = run.namespace().unwrap_or_default();
    let snap = cache.snapshot(&namespace, &run.spec.runtime, NOW);
    let cycle = pre_filter(&snap, &cache.queued(&run)).expect("valid test run");
    f(&snap, &cycle)
}

/// Each Pod of the Run's scope with the plugin's verdict (the rejection's message).
pub fn filter_verdicts(
    plugin: &dyn FilterPlugin,
    world: &World,
    r: &RunBuilder,
) -> Vec<(String, Result<(), String>)> {
    with_cycle(world, r, |snap, cycle| {
        snap.pods_seen_by(cycle.key())
            .map(|p| {
                let verdict = plugin
                    .filter(snap, cycle, &p)
                    .map_err(|rej| rej.message().into_owned());
                (p.name().to_string(), verdict)
            })
            .collect()
    })
}

/// Each Pod of the Run's scope (all treated as feasible) with (raw, normalized) scores.
pub fn score_table(
    plugin: &dyn ScorePlugin,
    world: &World,
    r: &RunBuilder,
) -> Vec<(String, i64, i64)> {
    with_cycle(world, r, |snap, cycle| {
        let pods: Vec<_> = snap.pods_seen_by(cycle.key()).collect();
        let raw: Vec<i64> = pods
            .iter()
            .map(|p| plugin.score(snap, cycle, p).expect("score"))
            .collect();
        let mut normalized = raw.clone();
        plugin.normalize(&mut normalized);
        pods.iter()
            .zip(raw.into_iter().zip(normalized))
            .map(|(p, (raw, norm))| (p.name().to_string(), raw, norm))
            .collect()
    })
}
