//! Priority's half of the bounded wait: a Pending Run that does not fit takes room from Runs
//! of strictly lower priority (preemption), or at least has room held for it at once while a
//! lower-priority Run holds or waits for room (nomination by priority, no starvation
//! threshold).
//!
//! Owns which Pod a preemptor is nominated to and which Runs there are its victims:
//! - level 1: Scheduled Runs runtimed has not claimed, of any class, once their claim window
//!   has passed (inside it runtimed may have started the task and hold its claim back: such a
//!   Run is nobody's victim until its claim lands or the window ends, when the preemptor looks
//!   again);
//! - level 2: Running (or Ready) Runs whose PriorityClass an admin annotated
//!   `kruntimes.io/preemptible: "true"`;
//! - never a Run of equal or higher priority, and none at all for a preemptor whose class says
//!   `preemptionPolicy: Never`.
//!
//! On each candidate Pod every possible victim is removed, then victims are given back from
//! the most important down (highest priority, then earliest start) while the Run still fits:
//! the fewest, least important Runs are preempted. Among Pods the choice is kube-scheduler's:
//! the lowest highest victim priority, then the lowest sum of victim priorities, then the
//! fewest victims, then the least work lost (the latest start), then the Pod name. Runs a
//! preemption already asked to stop count as gone, so a preemption in flight is never
//! doubled. The freed room is held by the preemptor's nomination, which lower-priority
//! nominations yield to, so victims cannot take it back.
//!
//! It decides only; the controller writes the victims (guarded by their resourceVersion).

use jiff::Timestamp;

use super::SchedulerCache;
use super::nominator::{drain_cost, drainable};
use crate::api::{Resources, Run};
use crate::scheduler::framework::cycle::evaluate;
use crate::scheduler::framework::index::{ActiveRun, ScopeRef};
use crate::scheduler::framework::nominations::Nomination;
use crate::scheduler::framework::queue::QueuedRun;
use crate::scheduler::framework::registry::Registry;
use crate::scheduler::framework::snapshot::{Adjust, PodView};
use crate::scheduler::framework::types::Requested;

/// A Run sent back to Pending to make room for a higher-priority one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Victim {
    pub name: String,
    pub uid: String,
    pub priority: i32,
    /// runtimed had claimed it (level 2): runtimed stops it; otherwise (level 1) the
    /// scheduler unassigns it.
    pub admitted: bool,
}

/// A victim runtimed had not claimed (level 1), and one it runs (level 2): the bounded
/// labels of `kruntimes_scheduler_preemptions_total{level}`.
pub const LEVEL_SCHEDULED: &str = "scheduled";
pub const LEVEL_RUNNING: &str = "running";

impl Victim {
    pub fn level(&self) -> &'static str {
        if self.admitted {
            LEVEL_RUNNING
        } else {
            LEVEL_SCHEDULED
        }
    }
}

/// Where a Pending Run waits for room held for it, and which Runs there must go first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preemption {
    pub pod: String,
    /// Empty when the room is coming anyway (Runs already asked to stop) or the Run may not
    /// preempt: it is only nominated.
    pub victims: Vec<Victim>,
    /// Without victims: when a Run it could have taken room from, unclaimed but perhaps
    /// started, is known to be claimed or unstarted (the earliest end of such claim windows):
    /// the preemptor is tried again then. `None` when no such Run was passed over.
    pub retry_at: Option<Timestamp>,
}

/// How bad preempting `victims` is, lowest first (see the module documentation).
type Cost<'a> = (i32, i64, usize, std::cmp::Reverse<Timestamp>, &'a str);

impl SchedulerCache {
    /// What priority does for `run`, a Pending Run that fits nowhere now: the Pod to nominate
    /// it to and the victims there, or `None` when it outranks nobody who holds or waits for
    /// room it could use. Pure: `explain` shows it as a dry run.
    pub fn preemption_plan(
        &self,
        registry: &Registry,
        run: &Run,
        now: Timestamp,
    ) -> Option<Preemption> {
        self.plan_preemption(registry, &self.queued(run), now)
    }

    fn plan_preemption(
        &self,
        registry: &Registry,
        queued: &QueuedRun,
        now: Timestamp,
    ) -> Option<Preemption> {
        let (key, run) = (queued.key(), &*queued.run);
        // Without any PriorityClass every Run is of priority 0 (a recorded priority came
        // from a class): nobody to outrank, and no second evaluation per unschedulable cycle.
        if self.index.priority_classes().is_empty() && queued.order.priority == 0 {
            return None;
        }
        let (namespace, runtime) = (key.namespace.as_str(), queued.scope().runtime.as_str());
        let snapshot = self.snapshot(namespace, runtime, now);
        // Priority only acts against a lower-priority Run that holds room (active or assumed
        // on a Pod) or waits for it (the queue's last Pending Run is its lowest): without one
        // there is no victim and nothing to hold room against, so no second evaluation (with
        // one class every unschedulable cycle would pay it).
        let priority = snapshot.priority_of(run).ok()?;
        let waits = self
            .queue
            .pending(queued.scope())
            .next_back()
            .is_some_and(|q| q.order.priority < priority);
        let holds = |pod: &PodView<'_>| pod.active_runs().any(|(_, a)| a.priority < priority);
        if !waits && !snapshot.pods().any(|pod| holds(&pod)) {
            return None;
        }
        let eval = evaluate(&snapshot, registry, queued).ok()?;
        let state = eval.state().ok()?;
        if eval.chosen().is_some() {
            return None;
        }
        let classes = snapshot.priority_classes();
        let candidates: Vec<&PodView<'_>> = drainable(&eval, state)
            // Only a nomination of strictly lower priority yields.
            .filter(|e| match self.nominations.on_pod(namespace, e.pod.name()) {
                None => true,
                Some((k, n)) => k == key || n.order.priority < state.priority,
            })
            .map(|e| &e.pod)
            .collect();

        let mut best: Option<(Cost<'_>, Preemption)> = None;
        let mut retry_at: Option<Timestamp> = None;
        for pod in &candidates {
            let room = victims_on(
                pod,
                state.request_list(),
                state.priority,
                state.preempts,
                |c| classes.preemptible(c),
                (now, self.claim_window),
            );
            if let Some(at) = room.unclaimed_until {
                retry_at = Some(retry_at.map_or(at, |r| r.min(at)));
            }
            let Some(victims) = room.victims else {
                continue;
            };
            let cost = cost(pod.name(), &victims);
            if best.as_ref().is_none_or(|(c, _)| cost < *c) {
                let victims = victims
                    .into_iter()
                    .map(|(uid, active)| Victim {
                        name: active.facts.name.clone(),
                        uid: uid.to_string(),
                        priority: active.priority,
                        admitted: active.admitted,
                    })
                    .collect();
                best = Some((
                    cost,
                    Preemption {
                        pod: pod.name().to_string(),
                        victims,
                        retry_at: None,
                    },
                ));
            }
        }
        if let Some((_, preemption)) = best {
            return Some(preemption);
        }

        // No Pod can be freed for it now: it still has room held at once where it would fit
        // soonest, as long as a lower-priority Run holds or waits for room.
        candidates
            .iter()
            .filter(|pod| waits || holds(pod))
            .min_by_key(|pod| drain_cost(pod, state.request_list()))
            .map(|pod| Preemption {
                pod: pod.name().to_string(),
                victims: Vec::new(),
                retry_at,
            })
    }

    /// Carries [`Self::preemption_plan`] out in the cache: nominates `run` to the planned Pod
    /// (a lower-priority nomination there yields and its Run looks again; the Run's own
    /// nomination elsewhere is given up). Returns the plan; the controller writes its victims.
    pub(super) fn preempt(
        &mut self,
        registry: &Registry,
        queued: &QueuedRun,
        now: Timestamp,
    ) -> Option<Preemption> {
        let plan = self.plan_preemption(registry, queued, now)?;
        let key = queued.key().clone();
        let namespace = key.namespace.clone();
        if self
            .nominations
            .get(&key)
            .is_some_and(|n| n.pod == plan.pod)
        {
            return Some(plan);
        }
        queued.request().ok()?;
        // Room held for it elsewhere is free again.
        if let Some(old) = self.nominations.drop_run(&key) {
            let scope = ScopeRef::new(&namespace, &old.facts.scope.runtime);
            self.held_room_freed(&scope, &old.pod, now);
        }
        let yielding = self
            .nominations
            .on_pod(&namespace, &plan.pod)
            .map(|(k, _)| k.clone());
        if let Some(yielding) = &yielding {
            self.nominations.drop_run(yielding);
            self.queue.activate(yielding, now);
        }
        let nominated = self.nominations.nominate(
            &key,
            Nomination {
                facts: queued.facts.clone(),
                pod: plan.pod.clone(),
                order: queued.order.clone(),
                held: self.held(&queued.facts.counted.amounts),
            },
        );
        debug_assert!(
            nominated,
            "the Run and the Pod were freed of nominations above"
        );
        // What the yielding Run held beyond this Run's request is free again.
        if yielding.is_some() {
            self.held_room_freed(queued.scope(), &plan.pod, now);
        }
        self.nominated.1 += 1;
        Some(plan)
    }
}

/// What preemption can do on one Pod (see [`victims_on`]).
struct Room<'a> {
    /// The victims, or `None` when even all possible ones would not make room.
    victims: Option<Vec<(&'a str, &'a ActiveRun)>>,
    /// The earliest end of the claim window of an unclaimed lower-priority Run passed over
    /// because runtimed may have started it.
    unclaimed_until: Option<Timestamp>,
}

/// The fewest, least important Runs on `pod` whose leaving lets `request` fit, by UID;
/// `None` when even all of them would not do. Runs already asked
/// to stop count as gone; with `may_preempt` false nothing else may go. An unclaimed Run
/// still inside its claim window (at `now`, of `window`) may have started: it is passed over,
/// and when its window ends is returned.
fn victims_on<'a>(
    pod: &PodView<'a>,
    request: &[Requested],
    priority: i32,
    may_preempt: bool,
    preemptible_class: impl Fn(Option<&str>) -> bool,
    (now, window): (Timestamp, jiff::SignedDuration),
) -> Room<'a> {
    let mut room = Room {
        victims: None,
        unclaimed_until: None,
    };
    // Unreadable capacity: nothing fits, whoever leaves.
    if pod.capacity().is_err() {
        return room;
    }
    let mut freed = Resources::default();
    let mut possible: Vec<(&'a str, &'a ActiveRun)> = Vec::new();
    for (uid, active) in pod.active_runs() {
        if active.disrupting {
            freed.add(&active.request().amounts);
        } else if may_preempt && active.priority < priority && active.request().unknown.is_empty() {
            if active.admitted {
                if preemptible_class(active.class.as_deref()) {
                    possible.push((uid, active));
                }
            } else if active.may_have_started(now, window) {
                if let Some(at) = active.unclaimed_until(window) {
                    room.unclaimed_until = Some(room.unclaimed_until.map_or(at, |u| u.min(at)));
                }
            } else {
                possible.push((uid, active));
            }
        }
    }
    // The Filter's fit rule, with the removed Runs' usage left out.
    let fits = |removed: &Resources| {
        let without = Adjust {
            freed: Some(removed),
            ..Adjust::default()
        };
        pod.fits_with(request, without)
    };
    let mut removed = freed.clone();
    for (_, active) in &possible {
        removed.add(&active.request().amounts);
    }
    if !fits(&removed) {
        return room;
    }
    // Most important first: each one that can stay, stays.
    possible.sort_by_key(|(uid, a)| (std::cmp::Reverse(a.priority), a.started, *uid));
    let mut victims = Vec::new();
    for (uid, active) in possible {
        let mut without = removed.clone();
        without.sub(&active.request().amounts);
        if fits(&without) {
            removed = without;
        } else {
            victims.push((uid, active));
        }
    }
    room.victims = Some(victims);
    room
}

fn cost<'a>(pod: &'a str, victims: &[(&str, &ActiveRun)]) -> Cost<'a> {
    let priorities = victims.iter().map(|(_, a)| a.priority);
    (
        priorities.clone().max().unwrap_or(i32::MIN),
        priorities.map(i64::from).sum(),
        victims.len(),
        // A Run not started yet loses no work.
        std::cmp::Reverse(
            victims
                .iter()
                .map(|(_, a)| a.started.unwrap_or(Timestamp::MAX))
                .min()
                .unwrap_or(Timestamp::MAX),
        ),
        pod,
    )
}
