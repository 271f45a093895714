//! Fairness in the cache: what each group of a Runtime holds (its active Runs from the index,
//! its assumed and nominated Runs), the choice among the groups contending for the next cycle,
//! and where each group stands, for `explain` and `status`. The arithmetic and the groups are
//! [`crate::scheduler::framework::fairness`]'s; the order is the queue's.

use crate::scheduler::framework::assumed::AssumedCache;
use crate::scheduler::framework::fairness::{self, Group, Standing, Usage};
use crate::scheduler::framework::index::{Index, ScopeRef};
use crate::scheduler::framework::nominations::Nominations;
use crate::scheduler::framework::queue::SchedulingQueue;
use crate::scheduler::framework::types::{QueueOrder, RunKey};

use super::SchedulerCache;

/// What each group of the Runtime `scope` holds, and the Runtime's capacity: the active Runs
/// on its Pods, the assumed Runs there (Bind in flight) and the nominated Runs (room being
/// made). O(active Runs of the Runtime): computed only when groups contend.
pub(super) fn usage(
    index: &Index,
    assumed: &AssumedCache,
    nominations: &Nominations,
    queue: &SchedulingQueue,
    scope: &ScopeRef,
) -> Usage {
    let fair = queue.fair_share(scope);
    let ns = scope.namespace.as_str();
    let group_of_pending = |key: &RunKey| queue.get(key).map(|q| q.group.clone());
    let mut usage = Usage::default();
    let assumptions = assumed.namespace(ns);
    for pod in index.runtime_pods(ns, &scope.runtime) {
        if let Some(Ok(capacity)) = index.pod(ns, &pod).map(|p| &p.capacity) {
            usage.capacity.add(capacity);
        }
        for run in index
            .active_runs(ns, &pod)
            .into_iter()
            .flat_map(|a| a.values())
        {
            let group = fair.group(&run.facts.labels, run.facts.submitter.as_deref());
            usage.add(group, &run.request().amounts);
        }
        if let Some(on_pod) = assumptions.and_then(|a| a.on_pod(&pod).map(|on| (a, on))) {
            let (assumptions, on_pod) = on_pod;
            for (uid, assumption) in assumptions.runs_on(on_pod) {
                if let Some(group) = group_of_pending(&RunKey::new(ns, uid)) {
                    usage.add(group, assumption.request());
                }
            }
        }
    }
    for (key, nomination) in nominations.in_scope(ns, &scope.runtime) {
        if let Some(group) = group_of_pending(key) {
            usage.add(group, nomination.request());
        }
    }
    usage
}

/// Among `contenders` (groups with their first active Run, in queue order), the group with
/// the lowest share divided by weight; among equal ones the group served longest ago, then
/// the one with the earlier Run.
pub(super) fn choose(
    usage: &Usage,
    queue: &SchedulingQueue,
    scope: &ScopeRef,
    contenders: &[(Group, QueueOrder)],
) -> Group {
    let fair = queue.fair_share(scope);
    let mut ranked: Vec<(f64, (u64, &QueueOrder, &Group))> = contenders
        .iter()
        .map(|(group, first)| {
            let share = usage.dominant_share(group) / fair.weight(group);
            (share, (queue.last_served(scope, group), first, group))
        })
        .collect();
    fairness::rank(&mut ranked);
    ranked[0].1.2.clone()
}

impl SchedulerCache {
    /// Where each group with Pending Runs on the Runtime `scope` stands, 1st first: the order
    /// the next cycles would give them (the queue's choice, over all their Pending Runs at
    /// any priority).
    pub fn standings(&self, scope: &ScopeRef) -> Vec<Standing> {
        let fair = self.queue.fair_share(scope);
        let mut pending: std::collections::BTreeMap<Group, (usize, QueueOrder)> =
            Default::default();
        for run in self
            .queue
            .pending(scope)
            .filter(|q| q.waits_for_placement())
        {
            let entry = pending
                .entry(run.group.clone())
                .or_insert((0, run.order.clone()));
            entry.0 += 1;
        }
        let usage = usage(
            &self.index,
            &self.assumed,
            &self.nominations,
            &self.queue,
            scope,
        );
        let mut ranked: Vec<(f64, (u64, QueueOrder, Group))> = pending
            .iter()
            .map(|(group, (_, first))| {
                let share = usage.dominant_share(group) / fair.weight(group);
                let served = self.queue.last_served(scope, group);
                (share, (served, first.clone(), group.clone()))
            })
            .collect();
        fairness::rank(&mut ranked);
        ranked
            .into_iter()
            .enumerate()
            .map(|(i, (_, (_, _, group)))| Standing {
                share: usage.dominant_share(&group),
                weight: fair.weight(&group),
                pending: pending[&group].0,
                rank: i + 1,
                group,
            })
            .collect()
    }
}
