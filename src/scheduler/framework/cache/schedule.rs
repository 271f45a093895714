//! One scheduling cycle: the head of the queue is popped, evaluated on a snapshot, given a
//! nomination when an earlier Run starves, and reserved; `plan` is the same decision without
//! Reserve, for `explain` and `status`.
//!
//! One pop is one cycle for that Run (the spec's "one dequeued Run → one cycle"): order comes
//! from the queue, never from a walk here. It must not talk to the API server.

use std::collections::BTreeSet;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

use super::SchedulerCache;
use super::preemption::Preemption;
use super::reserve::ReserveError;
use crate::api::Run;
use crate::scheduler::framework::assumed::Assumption;
use crate::scheduler::framework::cycle::{
    CycleError, Decision, Evaluation, PluginScore, RejectionCount, Unschedulable, evaluate,
};
use crate::scheduler::framework::queue::{Popped, QueuedRun};
use crate::scheduler::framework::registry::Registry;
use crate::scheduler::framework::types::RunKey;

/// What one scheduling cycle decided, and what the controller must carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleOutcome {
    /// `pod` is reserved for the Run: bind now (status patch carrying the observed
    /// resourceVersion). On any failed patch call `release`; on success do nothing, the
    /// watch event confirms the assumption.
    Reserved {
        pod: String,
        pod_uid: String,
        total: i64,
        scores: Vec<PluginScore>,
        rejections: Vec<RejectionCount>,
    },
    /// Keep the Run Pending: `Scheduled=False`, reason `Unschedulable`, `message()`. The Run
    /// waits in the unschedulable queue.
    Unschedulable(Unschedulable),
    /// Fail the Run through the terminal helper with `reason` and `message`.
    Invalid {
        reason: &'static str,
        message: String,
    },
    /// Reserve found the chosen Pod without room: nothing reserved; count
    /// `reservation_conflicts_total{stage="reserve"}`. The Run is in backoff.
    ReserveConflict {
        error: ReserveError,
        rejections: Vec<RejectionCount>,
    },
    /// A Score plugin failed: nothing reserved. The Run is in backoff.
    Error(CycleError),
}

impl ScheduleOutcome {
    /// Filter rejections of this attempt, for `filter_rejections_total{plugin, reason}`.
    pub fn rejections(&self) -> &[RejectionCount] {
        match self {
            ScheduleOutcome::Reserved { rejections, .. }
            | ScheduleOutcome::ReserveConflict { rejections, .. } => rejections,
            ScheduleOutcome::Unschedulable(u) => &u.histogram,
            _ => &[],
        }
    }

    /// A bounded label for `schedule_attempts_total{result}`.
    pub fn result(&self) -> &'static str {
        match self {
            ScheduleOutcome::Reserved { .. } => "scheduled",
            ScheduleOutcome::Unschedulable(_) => "unschedulable",
            ScheduleOutcome::Invalid { .. } => "invalid",
            ScheduleOutcome::ReserveConflict { .. } => "reserve_conflict",
            ScheduleOutcome::Error(_) => "error",
        }
    }
}

/// One cycle of the scheduling loop: the Run popped, what its cycle decided, and what the
/// controller's status write needs besides.
#[derive(Debug, Clone)]
pub struct Scheduled {
    pub run: Arc<Run>,
    pub outcome: ScheduleOutcome,
    /// The Pod nominated for the Run after its cycle (its status names it while Pending).
    pub nominated: Option<String>,
    /// The Runs to preempt on the nominated Pod for it (level 1: unassign; level 2: ask
    /// runtimed to stop them), when its cycle found it room only that way.
    pub preemption: Option<Preemption>,
    /// Its resolved priority, for `status.priority` (`None` while its class is missing).
    pub priority: Option<i32>,
    /// How long the Run waited in the active queue before this cycle.
    pub waited: SignedDuration,
}

/// A decision with what carrying it out needs (see [`SchedulerCache::decide`]).
#[derive(Debug, Clone)]
struct Decided {
    decision: Decision,
    rejections: Vec<RejectionCount>,
    assumption: Option<Assumption>,
}

impl SchedulerCache {
    /// Pops the head of the next Runtime with work and runs its cycle: PreFilter → Filter →
    /// Score → (nominate a starved earlier Run) → Reserve. `None` when no Run is due. The
    /// popped Run is back in the queue as its outcome says (unschedulable, backoff) or out
    /// of it while its Bind is in flight (reserved).
    pub fn schedule_next(&mut self, registry: &Registry, now: Timestamp) -> Option<Scheduled> {
        loop {
            let (index, assumed, nominations) = (&self.index, &self.assumed, &self.nominations);
            let Popped {
                run: queued,
                waited,
            } = self.queue.pop_fair(now, |queue, scope, contenders| {
                let usage = super::fairness::usage(index, assumed, nominations, queue, scope);
                super::fairness::choose(&usage, queue, scope, contenders)
            })?;
            // Filing keeps the queue to waiting Runs; a stale entry is skipped, not cycled.
            if !queued.waits_for_placement() || self.assumed.get(queued.key()).is_some() {
                continue;
            }
            let counted = self.counted.remove(queued.key()).unwrap_or_default();
            let (outcome, preemption) = self.cycle_popped(registry, &queued, &counted, now);
            if matches!(outcome, ScheduleOutcome::Reserved { .. }) {
                self.queue.served(&queued);
            }
            let key = queued.key();
            return Some(Scheduled {
                nominated: self
                    .nominated_pod(&key.namespace, &key.uid)
                    .map(str::to_string),
                preemption: preemption.filter(|p| !p.victims.is_empty()),
                priority: self.index.priority_of(&queued.run).ok(),
                run: queued.run.clone(),
                outcome,
                waited,
            });
        }
    }

    /// The cycle of a popped Run; `counted`: the Pods whose capacity walks counted it.
    fn cycle_popped(
        &mut self,
        registry: &Registry,
        queued: &QueuedRun,
        counted: &BTreeSet<String>,
        now: Timestamp,
    ) -> (ScheduleOutcome, Option<Preemption>) {
        let (key, scope) = (queued.key(), queued.scope());
        self.adopt(key, &queued.run);
        self.adopt_recorded(scope);
        self.revalidate_nominations(registry, scope, now);
        let starved = self.starved_before(scope, &queued.order, now);
        let epoch = self.epoch(scope);
        let mut outcome = self.cycle(registry, queued, now);
        if let (ScheduleOutcome::Reserved { .. }, Some(starved)) = (&outcome, starved)
            && self.nominate(registry, &starved, now)
        {
            // The new nomination holds room this Run may have been given: decide again.
            self.assumed.forget(key);
            outcome = self.cycle(registry, queued, now);
        }
        // Fits nowhere: priority may take room from lower-priority Runs, or hold it.
        let preemption = match &outcome {
            ScheduleOutcome::Unschedulable(u) if u.missing_class.is_none() => {
                self.preempt(registry, queued, now)
            }
            _ => None,
        };
        match &outcome {
            ScheduleOutcome::Reserved { .. } => {}
            // Room it could take is held by Runs that may have started: no event says when
            // their claim windows end, so it looks again then.
            ScheduleOutcome::Unschedulable(_)
                if let Some(at) = preemption.as_ref().and_then(|p| p.retry_at) =>
            {
                self.queue.retry_at(key, at, now);
            }
            // An invalid Run waits as unschedulable until the watch shows it Failed, so a
            // failed write of that status can back it off.
            ScheduleOutcome::Unschedulable(_) | ScheduleOutcome::Invalid { .. } => {
                self.queue.unschedulable(key, epoch, now);
            }
            ScheduleOutcome::ReserveConflict { .. } | ScheduleOutcome::Error(_) => {
                self.queue.backoff(key, now);
            }
        }
        // Counted against room it did not take: that room is still free for later Runs.
        let placed_on = match &outcome {
            ScheduleOutcome::Reserved { pod, .. } => Some(pod.as_str()),
            _ => None,
        };
        for pod in counted.iter().filter(|p| Some(p.as_str()) != placed_on) {
            self.rewalk(scope, pod, now);
        }
        (outcome, preemption)
    }

    /// One cycle for `run` against the current state: evaluate, then Reserve.
    fn cycle(&mut self, registry: &Registry, run: &QueuedRun, now: Timestamp) -> ScheduleOutcome {
        match self.decide(registry, run, now) {
            Ok(decided) => self.commit(run.key(), decided, now),
            Err(e) => ScheduleOutcome::Error(e),
        }
    }

    /// A cycle without Reserve: what the scheduler would decide for `run` now, its
    /// nomination included.
    pub fn plan(
        &self,
        registry: &Registry,
        run: &Run,
        now: Timestamp,
    ) -> Result<Decision, CycleError> {
        Ok(self.decide(registry, &self.queued(run), now)?.decision)
    }

    /// The scheduler's decision on `eval` (an evaluation of the Run `key` on this cache's
    /// snapshot): the plugins' choice, except that a Run nominated to a Pod that is feasible
    /// for it goes there, since that room was held for it (as kube-scheduler tries a Pod's
    /// nominated node first). The cycle, `plan` and `explain` all take their decision here.
    pub fn decision(&self, eval: &Evaluation<'_>, key: &RunKey) -> Decision {
        let decision = eval.decision();
        let nominated = self.nominations.get(key).map(|n| n.pod.as_str());
        if let (Decision::Schedule { .. }, Some(nominated)) = (&decision, nominated)
            && let Some(i) = eval
                .pods()
                .iter()
                .position(|e| e.rejection.is_none() && e.pod.name() == nominated)
        {
            return Decision::Schedule {
                pod: nominated.to_string(),
                pod_uid: eval.pods()[i].pod.uid().to_string(),
                total: eval.total(i).expect("a feasible Pod has a total"),
                scores: eval.scores(i),
            };
        }
        decision
    }

    /// The evaluation of `run` against the current state, as owned data: the decision, the
    /// rejections, and the assumption to reserve.
    fn decide(
        &self,
        registry: &Registry,
        run: &QueuedRun,
        now: Timestamp,
    ) -> Result<Decided, CycleError> {
        let (key, scope) = (run.key(), run.scope());
        let snapshot = self.snapshot(&scope.namespace, &scope.runtime, now);
        let eval = evaluate(&snapshot, registry, run)?;
        let decision = self.decision(&eval, key);
        Ok(match (&decision, eval.state()) {
            (Decision::Schedule { pod, .. }, Ok(state)) => {
                let assumption = Assumption {
                    facts: state.facts.clone(),
                    pod: pod.clone(),
                    // Reserve resolves it, against the view it checks the fit on.
                    held: Default::default(),
                };
                Decided {
                    rejections: eval.rejections(),
                    decision,
                    assumption: Some(assumption),
                }
            }
            _ => Decided {
                decision,
                rejections: Vec::new(),
                assumption: None,
            },
        })
    }

    /// Carries a decision out: Reserve for a Schedule decision, the outcome otherwise.
    fn commit(&mut self, key: &RunKey, decided: Decided, now: Timestamp) -> ScheduleOutcome {
        let Decided {
            decision,
            rejections,
            assumption,
        } = decided;
        match (decision, assumption) {
            (
                Decision::Schedule {
                    pod,
                    pod_uid,
                    total,
                    scores,
                },
                Some(assumption),
            ) => match self.reserve(key, assumption, now) {
                Ok(()) => ScheduleOutcome::Reserved {
                    pod,
                    pod_uid,
                    total,
                    scores,
                    rejections,
                },
                Err(error) => {
                    // The Filter just found this room in the same state by the same fit rule
                    // (`PodView::shortfalls`): a conflict here is a bug. Release builds back
                    // the Run off and count it (`kruntimes_scheduler_reservation_conflicts_total`
                    // with stage="reserve").
                    debug_assert!(
                        !matches!(error, ReserveError::Conflict { .. }),
                        "Reserve contradicts the Filter: {error}"
                    );
                    ScheduleOutcome::ReserveConflict { error, rejections }
                }
            },
            (Decision::Unschedulable(u), _) => ScheduleOutcome::Unschedulable(u),
            (Decision::Invalid { reason, message }, _) => {
                ScheduleOutcome::Invalid { reason, message }
            }
            (Decision::Schedule { .. }, None) => {
                unreachable!("a Schedule decision always comes with a prepared state")
            }
        }
    }
}
