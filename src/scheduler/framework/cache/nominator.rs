//! The nominator: the bounded wait of a starved Pending Run.
//!
//! Owns when a Run counts as starved, which Pod is drained for it, adopting a nomination a
//! Run's status records (a new leader, or `explain`), and dropping nominations that no longer
//! hold. Which Pods could take the Run is read from the cycle's own evaluation (the plugins'
//! verdicts), never recomputed here. It must not reserve.

use jiff::Timestamp;

use super::SchedulerCache;
use crate::api::{Resources, Run};
use crate::scheduler::framework::cycle::{Evaluation, PodEvaluation, evaluate, evaluate_pod};
use crate::scheduler::framework::index::ScopeRef;
use crate::scheduler::framework::nominations::Nomination;
use crate::scheduler::framework::plugin::RunCycleState;
use crate::scheduler::framework::queue::QueuedRun;
use crate::scheduler::framework::registry::Registry;
use crate::scheduler::framework::snapshot::{Adjust, PodView};
use crate::scheduler::framework::types::{Held, Observed, QueueOrder, Requested, RunKey};
use std::sync::Arc;

impl SchedulerCache {
    /// `request` by resource id, the room a nomination holds (see [`Held`]): resolved now,
    /// when the Run is nominated to a Pod that advertises what it requests.
    pub(super) fn held(&self, request: &Resources) -> Held {
        let interner = self.index.interner();
        Held::from_ids(
            request
                .iter()
                .filter_map(|(name, amount)| Some((interner.get(name)?, amount))),
        )
    }

    /// Takes over the nomination a Pending Run's status records, when its Pod is in the Run's
    /// Runtime and nominated for no other Run.
    pub(super) fn adopt(&mut self, key: &RunKey, run: &Run) {
        let Some(pod) = run
            .status
            .as_ref()
            .and_then(|s| s.nominated_pod_name.as_deref())
        else {
            return;
        };
        if self.nominations.get(key).is_some() {
            return;
        }
        match self.index.pod(&key.namespace, pod) {
            // Not seen yet (a new leader's Pod watch may list after its Run watch): adopted
            // by the next cycle of the Runtime once it is.
            None => {
                self.unadopted.insert(key.clone(), run.spec.runtime.clone());
                return;
            }
            Some(p) if p.runtime != run.spec.runtime => {
                self.unadopted.remove(key);
                return;
            }
            Some(_) => {
                self.unadopted.remove(key);
            }
        }
        let Some(queued) = self.queue.get(key) else {
            return;
        };
        if queued.request().is_err() {
            return;
        }
        let nomination = Nomination {
            facts: queued.facts.clone(),
            pod: pod.to_string(),
            order: queued.order.clone(),
            held: self.held(&queued.facts.counted.amounts),
        };
        self.nominations.nominate(key, nomination);
    }

    /// Adopts the recorded nominations of a Runtime whose Pod was not known when their Run
    /// was seen.
    pub(super) fn adopt_recorded(&mut self, scope: &ScopeRef) {
        if self.unadopted.is_empty() {
            return;
        }
        let keys: Vec<RunKey> = self
            .unadopted
            .iter()
            .filter(|(k, r)| k.namespace == scope.namespace && **r == scope.runtime)
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            let run = self.queue.get(&key).map(|q| q.run.clone());
            match run {
                Some(run) => self.adopt(&key, &run),
                None => {
                    self.unadopted.remove(&key);
                }
            }
        }
    }

    /// Drops the nominations of a Runtime that no longer hold: the Run is not waiting in the
    /// queue any more, or its Pod could not take it even drained (gone, unavailable, too
    /// small), as the Run's own evaluation says. A dropped nomination gives its room back
    /// (a capacity wakeup on that Pod) and the Run looks again, so its status says so.
    pub(super) fn revalidate_nominations(
        &mut self,
        registry: &Registry,
        scope: &ScopeRef,
        now: Timestamp,
    ) {
        let (namespace, runtime) = (scope.namespace.as_str(), scope.runtime.as_str());
        let nominated: Vec<(RunKey, Nomination)> = self
            .nominations
            .in_scope(namespace, runtime)
            .map(|(k, n)| (k.clone(), n.clone()))
            .collect();
        if nominated.is_empty() {
            return;
        }
        let stale: Vec<(RunKey, String)> = {
            let snapshot = self.snapshot(namespace, runtime, now);
            nominated
                .into_iter()
                .filter(|(key, n)| {
                    let waiting = self.index.observed(key) == Observed::Pending
                        && self.assumed.get(key).is_none();
                    let holds = self.queue.get(key).is_some_and(|run| {
                        evaluate_pod(&snapshot, registry, run, &n.pod).is_some_and(|e| {
                            could_take_once_drained(&e, &snapshot.requested(n.request()))
                        })
                    });
                    !(waiting && holds)
                })
                .map(|(key, n)| (key, n.pod))
                .collect()
        };
        for (key, pod) in stale {
            if self.nominations.drop_run(&key).is_some() {
                self.queue.activate(&key, now);
                self.held_room_freed(scope, &pod, now);
            }
        }
    }

    /// The oldest unschedulable Run queued before `order` in its Runtime, when it has waited
    /// longer than the starvation threshold and has no nomination.
    pub(super) fn starved_before(
        &self,
        scope: &ScopeRef,
        order: &QueueOrder,
        now: Timestamp,
    ) -> Option<Arc<QueuedRun>> {
        let oldest = self.queue.oldest_unschedulable_before(scope, order)?;
        let created = oldest.run.metadata.creation_timestamp.as_ref()?;
        let starving = self.nominations.get(oldest.key()).is_none()
            && created
                .0
                .checked_add(self.starvation_threshold)
                .is_ok_and(|deadline| deadline <= now);
        starving.then(|| oldest.clone())
    }

    /// Nominates for the starved Run the Pod where it would fit soonest: among the Pods its
    /// evaluation rejected for room only, nominated for no other Run and large enough for its
    /// request, the one with the fewest Runs to drain, then the least to free, then by name.
    /// The starved Run looks again (its status must name the Pod). Returns whether a
    /// nomination was made.
    pub(super) fn nominate(
        &mut self,
        registry: &Registry,
        starved: &QueuedRun,
        now: Timestamp,
    ) -> bool {
        let key = starved.key().clone();
        let (namespace, runtime) = (key.namespace.as_str(), starved.scope().runtime.as_str());
        let chosen = {
            let snapshot = self.snapshot(namespace, runtime, now);
            let Ok(eval) = evaluate(&snapshot, registry, starved) else {
                return false;
            };
            let Ok(state) = eval.state() else {
                return false;
            };
            drainable(&eval, state)
                .filter(|e| self.nominations.on_pod(namespace, e.pod.name()).is_none())
                .min_by_key(|e| drain_cost(&e.pod, state.request_list()))
                .map(|e| Nomination {
                    facts: state.facts.clone(),
                    pod: e.pod.name().to_string(),
                    order: starved.order.clone(),
                    held: Held::of(state.request_list()),
                })
        };
        let Some(nomination) = chosen else {
            return false;
        };
        let made = self.nominations.nominate(&key, nomination);
        if made {
            self.nominated.0 += 1;
            self.queue.activate(&key, now);
        }
        made
    }
}

/// The Pods of `eval` that rejected the Run but could take it once drained: rejected for
/// room only, large enough, and (a Pod rejected for room first was never asked by
/// WorkspacePlacement) its workspace's own Pod when it names one.
pub(super) fn drainable<'a, 's>(
    eval: &'a Evaluation<'s>,
    state: &'a RunCycleState,
) -> impl Iterator<Item = &'a PodEvaluation<'s>> + 'a {
    eval.pods()
        .iter()
        .filter(|e| e.rejection.is_some())
        .filter(|e| could_take_once_drained(e, state.request_list()))
        .filter(|e| {
            state
                .workspace
                .as_ref()
                .is_none_or(|w| w.admits(e.pod.name()))
        })
}

/// Whether the Pod of `e` could take `request` once drained: the Run's evaluation found it
/// feasible or rejected it for room only (so it is available, and no other filter ran
/// against it), and its capacity is at least the request.
fn could_take_once_drained(e: &PodEvaluation<'_>, request: &[Requested]) -> bool {
    let room_only = e.rejection.as_ref().is_none_or(|r| r.shortfall.is_some());
    let drained = Adjust {
        drained: true,
        ..Adjust::default()
    };
    room_only && e.pod.fits_with(request, drained)
}

/// How far `pod` is from taking `request`: (Runs to drain, amount to free, name). The amount
/// is what the fit rule's shortfalls say must be released (unknown usage: as far as can be).
pub(super) fn drain_cost<'a>(pod: &PodView<'a>, request: &[Requested]) -> (usize, u64, &'a str) {
    let runs = pod.active_runs().count() + pod.assumed_runs().count();
    let to_free = pod
        .shortfalls(request)
        .map(|s| s.to_release().unwrap_or(u64::MAX))
        .fold(0u64, u64::saturating_add);
    (runs, to_free, pod.name())
}
