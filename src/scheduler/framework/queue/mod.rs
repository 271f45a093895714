//! The scheduling queue: which Pending Run gets the next cycle.
//!
//! Modelled on kube-scheduler's scheduling queue. Every Pending Run that waits for placement
//! and holds no assumption is in exactly one of three sets of its Runtime's queue:
//! - **active**: ready for a cycle, in queue order ([`QueueOrder`]: priority, creation time,
//!   then UID);
//! - **backoff**: a cycle or a Bind failed; it becomes active again when its per-Run capped
//!   backoff expires;
//! - **unschedulable**: its last cycle found no Pod; it becomes active again when an event
//!   that may make it fit arrives (the plugins' queueing hints, applied by the cache) or,
//!   as a safety net, after [`UNSCHEDULABLE_FLUSH`].
//!
//! [`SchedulingQueue::pop_fair`] takes the next active Run of the next Runtime with work
//! (round robin across Runtimes): one pop is one cycle for that Run. Within a Runtime the
//! highest priority goes first; within a priority, when Runs of several fairness groups are
//! active, the caller's chooser picks the group (the lowest weighted share, see
//! [`super::fairness`]), and within a group the oldest Run goes first. With one group this is
//! queue order: a Run is never cycled while an earlier active Run of its Runtime waits.
//!
//! The queue is also where a Pending Run lives: every Run observed Pending is stored here
//! once, as a [`QueuedRun`] (its request parsed once, its order, its terms), whether it is
//! filed in one of the three sets or not (its Bind is in flight, or it no longer waits for
//! placement). Cycles, the nominator, preemption, the wake walk and `explain`'s queue
//! position all read it from here. It must not look at Pods or plugins, talk to the API
//! server or read a clock (`now` is an argument).
//!
//! A Run is filed into, and taken out of, the indexes in one place, [`filing`], which also
//! checks that they agree ([`SchedulingQueue::invariants`], run by the property tests).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

use super::facts::RunFacts;
use super::fairness::{FairShare, Group};
use super::index::ScopeRef;
use super::types::{QueueOrder, RunKey};
use crate::api::Run;

mod filing;
mod queued;

pub use queued::{QueuedRun, recorded_priority};

/// How long a Run stays unschedulable without an event before it is tried again anyway (a
/// lost or missing hint must not strand it; kube-scheduler flushes after 5 minutes).
pub const UNSCHEDULABLE_FLUSH: SignedDuration = SignedDuration::from_secs(60);

/// The first backoff after a failure; it doubles per consecutive failure.
pub const INITIAL_BACKOFF: SignedDuration = SignedDuration::from_millis(200);

/// How soon a Run whose write met a newer version of it (a 409 conflict) is cycled again:
/// the watch is about to deliver that version, so this is not counted as a failure.
pub const CONFLICT_RETRY: SignedDuration = SignedDuration::from_millis(50);

/// The longest backoff (kube-scheduler's longest Pod backoff), so after an API-server outage
/// every Run is tried again within 10 s of its return.
pub const MAX_BACKOFF: SignedDuration = SignedDuration::from_secs(10);

/// Where a queued Run waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueState {
    Active,
    /// Active again at this instant.
    Backoff(Timestamp),
    /// Since `since`, found so by a cycle at its Runtime's wake `epoch` (see the cache): an
    /// event of a later epoch may make it fit.
    Unschedulable {
        since: Timestamp,
        epoch: u64,
    },
}

impl QueueState {
    /// A bounded label for `kruntimes_scheduler_pending_runs{state}`.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueState::Active => "queued",
            QueueState::Backoff(_) => "backoff",
            QueueState::Unschedulable { .. } => "unschedulable",
        }
    }
}

/// One popped Run: its cycle is the next thing that happens to it.
#[derive(Debug, Clone)]
pub struct Popped {
    pub run: Arc<QueuedRun>,
    /// How long it had been waiting since it was last made active.
    pub waited: SignedDuration,
}

/// Where a filed Run waits.
#[derive(Debug, Clone, Copy)]
struct Entry {
    state: QueueState,
    /// When it was last made active, for the queue-duration histogram.
    since: Timestamp,
}

/// One Runtime's Pending Runs.
#[derive(Debug, Clone, Default)]
struct Scope {
    /// Every Pending Run of the Runtime, filed or not, in queue order.
    pending: BTreeMap<QueueOrder, Arc<QueuedRun>>,
    /// The filed ones, with their state: what wakeups walk.
    members: BTreeMap<QueueOrder, QueueState>,
    active: BTreeSet<QueueOrder>,
    /// The filed ones with required Run affinity or anti-affinity terms: new affinity
    /// targets concern only them, and a drain must not walk every Run at every Bind.
    terms: BTreeSet<QueueOrder>,
    /// The active ones by fairness group, in queue order.
    groups: BTreeMap<Group, BTreeSet<QueueOrder>>,
    /// The filed ones by fairness group, in queue order: a capacity wakeup walks each group
    /// on its own, so that room goes to the head of every group, not only to the oldest Runs.
    member_groups: BTreeMap<Group, BTreeSet<QueueOrder>>,
    /// The placement that last served each group: among groups of equal share the one served
    /// longest ago goes first, so a group is never passed over for ever because another's
    /// share drops back to its own each time a slot frees (a Runtime of one slot).
    served: HashMap<Group, u64>,
}

/// See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct SchedulingQueue {
    /// Every Run observed Pending.
    runs: HashMap<RunKey, Arc<QueuedRun>>,
    /// The filed ones (waiting for placement without an assumption).
    entries: HashMap<RunKey, Entry>,
    scopes: BTreeMap<ScopeRef, Scope>,
    /// Runtimes with active Runs, for the round robin.
    ready: BTreeSet<ScopeRef>,
    /// The Runtime popped last: the next pop starts after it.
    cursor: Option<ScopeRef>,
    backoff: BTreeSet<(Timestamp, RunKey)>,
    unschedulable: BTreeSet<(Timestamp, RunKey)>,
    /// Consecutive failures per Run, kept across a Bind so a failing Bind backs off further;
    /// forgotten when the Run leaves Pending.
    failures: HashMap<RunKey, u32>,
    /// How each Runtime groups its Runs, where it is not the default.
    fairness: HashMap<ScopeRef, FairShare>,
    /// The group each filed Run was filed under (a label change of a filed Run moves it
    /// when it is filed next).
    grouped: HashMap<RunKey, Group>,
    /// Placements so far: the clock of [`Scope::served`].
    pops: u64,
}

/// The default fairness, for Runtimes that set none.
static DEFAULT_FAIRNESS: std::sync::LazyLock<FairShare> =
    std::sync::LazyLock::new(FairShare::default);

impl SchedulingQueue {
    /// Records a Run observed Pending, at `order`. The stored [`QueuedRun`] is replaced when
    /// the Run itself changed or its place did (status churn keeps it); a filed Run whose
    /// place changed (its priority was resolved anew) is filed again at its new place,
    /// active. Returns whether the Run itself changed, so that it looks again.
    pub fn observe(
        &mut self,
        run: &Run,
        facts: &Arc<RunFacts>,
        order: QueueOrder,
        now: Timestamp,
    ) -> bool {
        let Some(old) = self.runs.get(&facts.key) else {
            self.store(Arc::new(self.queued(run, facts.clone(), order)));
            return false;
        };
        let changed = old.changed_by(run);
        let moved = old.order != order || old.scope().runtime != run.spec.runtime;
        if !changed && !moved {
            let recorded = recorded_priority(run);
            if old.priority_recorded != recorded {
                let mut updated = (**old).clone();
                updated.priority_recorded = recorded;
                self.replace(Arc::new(updated), now);
            }
            return false;
        }
        let mut queued = if changed {
            self.queued(run, facts.clone(), order)
        } else {
            QueuedRun {
                order,
                ..(**old).clone()
            }
        };
        queued.priority_recorded = recorded_priority(run);
        self.replace(Arc::new(queued), now);
        changed
    }

    /// Forgets a Run that is no longer Pending (placed, finished or deleted), with its
    /// failures.
    pub fn forget(&mut self, key: &RunKey) {
        self.unfile(key);
        self.failures.remove(key);
        if let Some(run) = self.runs.remove(key) {
            let scope = self
                .scopes
                .get_mut(run.scope())
                .expect("a stored Run's scope");
            scope.pending.remove(&run.order);
            self.gc_scope(run.scope());
        }
    }

    /// Files an observed Pending Run as active when it `waits` for placement (it is not
    /// deleted or assigned, and holds no assumption) and is not filed yet; takes it out of
    /// the three sets otherwise (it stays stored while it is Pending).
    pub fn file(&mut self, key: &RunKey, waits: bool, now: Timestamp) {
        if !waits {
            self.unfile(key);
        } else if self.runs.contains_key(key) && !self.entries.contains_key(key) {
            self.insert(key, QueueState::Active, now);
        }
    }

    /// Re-keys the stored Runs whose priority follows class `changed` (every class when
    /// `None`; the global default may have moved, so Runs naming no class always count) to
    /// the order `order_of` gives them now. Returns them all, moved or not: they look again
    /// (a Run that waited for its class finds it).
    pub fn reorder(
        &mut self,
        changed: Option<&str>,
        order_of: impl Fn(&Run) -> QueueOrder,
        now: Timestamp,
    ) -> Vec<RunKey> {
        let affected: Vec<(Arc<QueuedRun>, QueueOrder)> = self
            .runs
            .values()
            .filter(|q| !q.priority_recorded)
            .filter(|q| {
                let class = q.run.spec.priority_class_name.as_deref();
                changed.is_none() || class.is_none() || class == changed
            })
            .map(|q| (q.clone(), order_of(&q.run)))
            .collect();
        let mut keys = Vec::with_capacity(affected.len());
        for (queued, order) in affected {
            keys.push(queued.key().clone());
            if queued.order != order {
                let moved = QueuedRun {
                    order,
                    ..(*queued).clone()
                };
                self.replace(Arc::new(moved), now);
            }
        }
        keys
    }

    /// The stored Pending Run `key`.
    pub fn get(&self, key: &RunKey) -> Option<&Arc<QueuedRun>> {
        self.runs.get(key)
    }

    /// Every stored Pending Run, in no particular order.
    pub fn observed(&self) -> impl Iterator<Item = &Arc<QueuedRun>> {
        self.runs.values()
    }

    /// The Pending Runs of a Runtime, filed or not, in queue order.
    pub fn pending<'a>(
        &'a self,
        scope: &ScopeRef,
    ) -> impl DoubleEndedIterator<Item = &'a Arc<QueuedRun>> + 'a {
        self.scopes
            .get(scope)
            .into_iter()
            .flat_map(|s| s.pending.values())
    }

    /// Where a Pending Run stands among the Pending Runs of its Runtime: (1-based position,
    /// count).
    pub fn position(&self, key: &RunKey) -> Option<(usize, usize)> {
        let run = self.runs.get(key)?;
        let pending = &self.scopes.get(run.scope())?.pending;
        Some((
            pending.range(..run.order.clone()).count() + 1,
            pending.len(),
        ))
    }

    /// Forgets the Run's failure count: a Bind succeeded.
    pub fn forget_failures(&mut self, key: &RunKey) {
        self.failures.remove(key);
    }

    /// Where a filed Run waits; `None` when it is not filed.
    pub fn state(&self, key: &RunKey) -> Option<QueueState> {
        self.entries.get(key).map(|e| e.state)
    }

    /// Whether the Run is filed in one of the three sets.
    pub fn contains(&self, key: &RunKey) -> bool {
        self.entries.contains_key(key)
    }

    /// Whether no Run is filed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How the Runtime `scope` groups its Runs.
    pub fn fair_share(&self, scope: &ScopeRef) -> &FairShare {
        self.fairness.get(scope).unwrap_or(&DEFAULT_FAIRNESS)
    }

    /// Sets how the Runtime `scope` groups its Runs (from its annotations); its active Runs
    /// are grouped anew when that changed.
    pub fn set_fair_share(&mut self, scope: &ScopeRef, fair: FairShare) {
        if *self.fair_share(scope) == fair {
            return;
        }
        match fair == FairShare::default() {
            true => self.fairness.remove(scope),
            false => self.fairness.insert(scope.clone(), fair.clone()),
        };
        if let Some(s) = self.scopes.get_mut(scope) {
            // Every stored Run of the Runtime, filed or in a cycle, takes its new group.
            for queued in s.pending.values_mut() {
                let mut regrouped = (**queued).clone();
                regrouped.group = fair.group_of(&queued.run);
                *queued = Arc::new(regrouped);
                self.runs.insert(queued.key().clone(), queued.clone());
            }
            s.groups.clear();
            s.member_groups.clear();
            for order in s.members.keys() {
                let run = &s.pending[order];
                let group = run.group.clone();
                if s.active.contains(order) {
                    s.groups
                        .entry(group.clone())
                        .or_default()
                        .insert(order.clone());
                }
                s.member_groups
                    .entry(group.clone())
                    .or_default()
                    .insert(order.clone());
                self.grouped.insert(run.key().clone(), group);
            }
        }
    }

    /// `run` at `order` as this queue would store it: grouped as its Runtime groups Runs now.
    pub fn queued(&self, run: &Run, facts: Arc<RunFacts>, order: QueueOrder) -> QueuedRun {
        let fair = self.fair_share(&facts.scope);
        QueuedRun::new(run, facts, order, fair)
    }

    /// Records that `run`'s cycle placed it: its group was served now. (A cycle that does not
    /// place its Run is no service: a group whose head does not fit keeps its turn.)
    pub fn served(&mut self, run: &QueuedRun) {
        self.pops += 1;
        let (pops, group) = (self.pops, run.group.clone());
        if let Some(s) = self.scopes.get_mut(run.scope()) {
            s.served.insert(group, pops);
            if s.served.len() > 2 * s.groups.len() + 16 {
                let groups = &s.groups;
                s.served.retain(|g, _| groups.contains_key(g));
            }
        }
    }

    /// When the group was last served on the Runtime `scope` (0: not while it had Pending
    /// Runs): among groups of equal share the lowest goes first.
    pub fn last_served(&self, scope: &ScopeRef, group: &Group) -> u64 {
        self.scopes
            .get(scope)
            .and_then(|s| s.served.get(group).copied())
            .unwrap_or(0)
    }

    /// [`Self::pop_fair`] in plain queue order (the oldest of the highest priority), as
    /// without fairness: for tests and callers with one group.
    pub fn pop(&mut self, now: Timestamp) -> Option<Popped> {
        self.pop_fair(now, |_, _, contenders| contenders[0].0.clone())
    }

    /// The next active Run of the next Runtime with active Runs, taken out of the three sets
    /// (its cycle files it again if it is not placed; it stays stored). Backoffs and
    /// unschedulable flushes due at `now` are made active first. When Runs of two or more
    /// groups are active at the Runtime's highest active priority, `choose` picks the group
    /// among those contenders (each with its first Run, in queue order); it is not called
    /// otherwise.
    pub fn pop_fair(
        &mut self,
        now: Timestamp,
        choose: impl FnOnce(&SchedulingQueue, &ScopeRef, &[(Group, QueueOrder)]) -> Group,
    ) -> Option<Popped> {
        self.flush(now);
        let scope = {
            let after = self.cursor.as_ref();
            let next = after.and_then(|c| {
                self.ready
                    .range((std::ops::Bound::Excluded(c), std::ops::Bound::Unbounded))
                    .next()
            });
            next.or_else(|| self.ready.iter().next())?.clone()
        };
        let head = &self.scopes[&scope];
        let first = head
            .active
            .first()
            .expect("a ready scope has an active Run");
        let order = match head.groups.len() {
            0 | 1 => first,
            _ => {
                let mut contenders: Vec<(Group, QueueOrder)> = head
                    .groups
                    .iter()
                    .filter_map(|(g, orders)| orders.first().map(|o| (g.clone(), o.clone())))
                    .filter(|(_, o)| o.priority == first.priority)
                    .collect();
                match contenders.len() {
                    0 | 1 => first,
                    _ => {
                        contenders.sort_by(|a, b| a.1.cmp(&b.1));
                        let group = choose(self, &scope, &contenders);
                        let head = &self.scopes[&scope];
                        head.groups
                            .get(&group)
                            .and_then(|orders| orders.first())
                            .unwrap_or(first)
                    }
                }
            }
        };
        let run = head.pending[order].clone();
        let entry = self.unfile(run.key()).expect("an active Run is filed");
        self.cursor = Some(scope);
        Some(Popped {
            waited: now.duration_since(entry.since),
            run,
        })
    }

    /// Files a popped Run as unschedulable: its cycle, at wake `epoch`, found no Pod.
    pub fn unschedulable(&mut self, key: &RunKey, epoch: u64, now: Timestamp) {
        self.failures.remove(key);
        self.put(key, QueueState::Unschedulable { since: now, epoch }, now);
    }

    /// Files a Run in backoff after a failed cycle or Bind: 200 ms, doubling per consecutive
    /// failure, at most [`MAX_BACKOFF`]. Returns the delay.
    pub fn backoff(&mut self, key: &RunKey, now: Timestamp) -> SignedDuration {
        let failures = self.failures.entry(key.clone()).or_insert(0);
        *failures = failures.saturating_add(1);
        let delay = backoff_delay(*failures);
        self.put(key, QueueState::Backoff(now + delay), now);
        delay
    }

    /// Files a Run in backoff for [`CONFLICT_RETRY`] after a write conflict, without
    /// counting a failure.
    pub fn conflicted(&mut self, key: &RunKey, now: Timestamp) {
        self.put(key, QueueState::Backoff(now + CONFLICT_RETRY), now);
    }

    /// Files a Run to be tried again at `at`, without counting a failure: what it waits for
    /// is a time, not an event.
    pub fn retry_at(&mut self, key: &RunKey, at: Timestamp, now: Timestamp) {
        self.put(key, QueueState::Backoff(at.max(now)), now);
    }

    /// Makes an unschedulable Run active (an event may make it fit). Returns whether it moved.
    pub fn activate(&mut self, key: &RunKey, now: Timestamp) -> bool {
        match self.entries.get(key) {
            Some(entry) if matches!(entry.state, QueueState::Unschedulable { .. }) => {
                self.put(key, QueueState::Active, now);
                true
            }
            _ => false,
        }
    }

    /// The filed Runs of a Runtime in queue order, with their state.
    pub fn members<'a>(
        &'a self,
        scope: &ScopeRef,
    ) -> impl DoubleEndedIterator<Item = (&'a Arc<QueuedRun>, QueueState)> + 'a {
        self.scopes
            .get(scope)
            .into_iter()
            .flat_map(|s| s.members.iter().map(|(o, state)| (&s.pending[o], *state)))
    }

    /// The filed Runs of a Runtime by fairness group, each group's in queue order; one group
    /// (whatever its name) when all are in one.
    pub fn members_by_group<'a>(
        &'a self,
        scope: &ScopeRef,
    ) -> impl Iterator<Item = impl Iterator<Item = (&'a Arc<QueuedRun>, QueueState)> + 'a> + 'a
    {
        self.scopes.get(scope).into_iter().flat_map(|s| {
            s.member_groups
                .values()
                .map(move |orders| orders.iter().map(move |o| (&s.pending[o], s.members[o])))
        })
    }

    /// Whether the filed Runs of a Runtime are in more than one fairness group.
    pub fn has_groups(&self, scope: &ScopeRef) -> bool {
        self.scopes
            .get(scope)
            .is_some_and(|s| s.member_groups.len() > 1)
    }

    /// The filed Runs of a Runtime with required Run (anti-)affinity terms, in queue order.
    pub fn members_with_required_terms<'a>(
        &'a self,
        scope: &ScopeRef,
    ) -> impl Iterator<Item = (&'a Arc<QueuedRun>, QueueState)> + 'a {
        self.scopes
            .get(scope)
            .into_iter()
            .flat_map(|s| s.terms.iter().map(|o| (&s.pending[o], s.members[o])))
    }

    /// The first unschedulable Run of a Runtime before `order`: the oldest Run that does not
    /// fit and waits behind nothing (the bounded wait's candidate).
    pub fn oldest_unschedulable_before(
        &self,
        scope: &ScopeRef,
        order: &QueueOrder,
    ) -> Option<&Arc<QueuedRun>> {
        let s = self.scopes.get(scope)?;
        s.members
            .range(..order.clone())
            .find(|(_, state)| matches!(state, QueueState::Unschedulable { .. }))
            .map(|(o, _)| &s.pending[o])
    }

    /// Filed Runs by state label, for the pending-Runs gauge.
    pub fn counts(&self) -> [(&'static str, i64); 3] {
        let mut counts = [
            (QueueState::Active.as_str(), 0),
            ("backoff", 0),
            ("unschedulable", 0),
        ];
        for entry in self.entries.values() {
            let i = match entry.state {
                QueueState::Active => 0,
                QueueState::Backoff(_) => 1,
                QueueState::Unschedulable { .. } => 2,
            };
            counts[i].1 += 1;
        }
        counts
    }

    /// Whether a pop at `now` would return a Run.
    pub fn has_work(&self, now: Timestamp) -> bool {
        !self.ready.is_empty() || self.next_due().is_some_and(|at| at <= now)
    }

    /// When the next backoff expires or unschedulable flush is due, if any.
    pub fn next_due(&self) -> Option<Timestamp> {
        let backoff = self.backoff.first().map(|(at, _)| *at);
        let flush = self
            .unschedulable
            .first()
            .map(|(since, _)| *since + UNSCHEDULABLE_FLUSH);
        backoff.into_iter().chain(flush).min()
    }
}

/// The backoff after `failures` consecutive failures: 200 ms, 400 ms, … at most 10 s.
pub fn backoff_delay(failures: u32) -> SignedDuration {
    let exp = failures.saturating_sub(1).min(8);
    (INITIAL_BACKOFF * (1i32 << exp)).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests;
