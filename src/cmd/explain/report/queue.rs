//! The Run's place in its Runtime's queue, as `explain` reports it: its position, the Pod
//! being drained for it, a dry run of the preemption its next cycle would make, and its
//! fairness group's standing. Read from the scheduler cache's own answers (queue position,
//! nomination, preemption plan, standings); nothing here ranks or decides.

use kube::ResourceExt;

use super::*;
use crate::scheduler::framework::{SchedulerCache, ScopeRef};

/// The Run's queue position and, when the scheduler nominated a Pod for it (recorded in
/// `status.nominatedPodName`), what is still in use there.
pub(super) fn queue_report(
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
                    c.request()
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
