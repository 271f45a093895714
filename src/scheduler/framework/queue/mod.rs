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
//! [`SchedulingQueue::pop`] takes the head of the active set of the next Runtime with work
//! (round robin across Runtimes): one pop is one cycle for that Run, and a Run is never
//! cycled while an earlier active Run of its Runtime waits. It owns only keys, order and
//! state; it must not look at Runs, Pods or plugins, talk to the API server or read a clock
//! (`now` is an argument).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use jiff::{SignedDuration, Timestamp};

use super::index::ScopeRef;
use super::types::{QueueOrder, RunKey};

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Popped {
    pub key: RunKey,
    pub scope: ScopeRef,
    pub order: QueueOrder,
    /// How long it had been waiting since it was last made active.
    pub waited: SignedDuration,
    /// The Pods whose capacity walks counted this Run's request as taken: where its cycle
    /// does not place it, that room is still free and the walk is made again.
    pub counted_on: BTreeSet<String>,
}

#[derive(Debug, Clone)]
struct Entry {
    scope: ScopeRef,
    order: QueueOrder,
    state: QueueState,
    /// When it was last made active, for the queue-duration histogram.
    since: Timestamp,
    /// The Pods whose capacity walks counted this Run's request as taken (see [`Popped`]).
    counted_on: BTreeSet<String>,
}

/// One Runtime's queued Runs.
#[derive(Debug, Clone, Default)]
struct Scope {
    /// Every queued Run, in queue order, with its state: what wakeups walk.
    members: BTreeMap<QueueOrder, QueueState>,
    active: BTreeSet<QueueOrder>,
    /// The members with required Run affinity or anti-affinity terms.
    terms: BTreeSet<QueueOrder>,
}

/// See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct SchedulingQueue {
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
    /// Queued Runs with required Run (anti-)affinity terms: new affinity targets concern only
    /// them, and a drain must not walk every Run at every Bind.
    required_terms: HashSet<RunKey>,
}

impl SchedulingQueue {
    /// Queues a Run that waits for placement (active), unless it is queued already at this
    /// place; a Run whose order changed (its priority was resolved anew) is queued again at
    /// its new place, active. `required_terms`: it has required Run affinity or
    /// anti-affinity terms.
    pub fn add(
        &mut self,
        key: &RunKey,
        scope: &ScopeRef,
        order: &QueueOrder,
        required_terms: bool,
        now: Timestamp,
    ) {
        if let Some(entry) = self.entries.get(key) {
            if entry.order == *order && entry.scope == *scope {
                return;
            }
            self.remove(key);
        }
        if required_terms {
            self.required_terms.insert(key.clone());
        }
        self.insert(key, scope, order, QueueState::Active, now);
    }

    /// Takes a Run out of the queue: placed, assumed, finished, deleted or no longer waiting.
    pub fn remove(&mut self, key: &RunKey) {
        self.required_terms.remove(key);
        if let Some(entry) = self.entries.remove(key) {
            self.unindex(key, &entry);
        }
    }

    /// Forgets the Run's failure count: it left Pending, or a Bind succeeded.
    pub fn forget_failures(&mut self, key: &RunKey) {
        self.failures.remove(key);
    }

    pub fn state(&self, key: &RunKey) -> Option<QueueState> {
        self.entries.get(key).map(|e| e.state)
    }

    pub fn keys(&self) -> impl Iterator<Item = &RunKey> {
        self.entries.keys()
    }

    pub fn contains(&self, key: &RunKey) -> bool {
        self.entries.contains_key(key)
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The head of the next Runtime with active Runs, taken out of the queue (its cycle puts
    /// it back if it is not placed). Backoffs and unschedulable flushes due at `now` are made
    /// active first.
    pub fn pop(&mut self, now: Timestamp) -> Option<Popped> {
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
        let order = self.scopes[&scope]
            .active
            .first()
            .expect("a ready scope has an active Run")
            .clone();
        let key = RunKey::new(&scope.namespace, &order.uid);
        let entry = self.entries.remove(&key).expect("an active Run is queued");
        self.unindex(&key, &entry);
        self.cursor = Some(scope.clone());
        Some(Popped {
            key,
            scope,
            order,
            waited: now.duration_since(entry.since),
            counted_on: entry.counted_on,
        })
    }

    /// Puts a popped Run back as unschedulable: its cycle, at wake `epoch`, found no Pod.
    pub fn unschedulable(
        &mut self,
        key: &RunKey,
        scope: &ScopeRef,
        order: &QueueOrder,
        epoch: u64,
        now: Timestamp,
    ) {
        self.failures.remove(key);
        let state = QueueState::Unschedulable { since: now, epoch };
        self.put(key, scope, order, state, now);
    }

    /// Puts a Run back in backoff after a failed cycle or Bind: 200 ms, doubling per
    /// consecutive failure, at most [`MAX_BACKOFF`]. Returns the delay.
    pub fn backoff(
        &mut self,
        key: &RunKey,
        scope: &ScopeRef,
        order: &QueueOrder,
        now: Timestamp,
    ) -> SignedDuration {
        let failures = self.failures.entry(key.clone()).or_insert(0);
        *failures = failures.saturating_add(1);
        let delay = backoff_delay(*failures);
        self.put(key, scope, order, QueueState::Backoff(now + delay), now);
        delay
    }

    /// Puts a Run back in backoff for [`CONFLICT_RETRY`] after a write conflict, without
    /// counting a failure.
    pub fn conflicted(
        &mut self,
        key: &RunKey,
        scope: &ScopeRef,
        order: &QueueOrder,
        now: Timestamp,
    ) {
        self.put(
            key,
            scope,
            order,
            QueueState::Backoff(now + CONFLICT_RETRY),
            now,
        );
    }

    /// Makes an unschedulable Run active (an event may make it fit). Returns whether it moved.
    pub fn activate(&mut self, key: &RunKey, now: Timestamp) -> bool {
        match self.entries.get_mut(key) {
            Some(entry) if matches!(entry.state, QueueState::Unschedulable { .. }) => {
                entry.since = now;
                self.set_state(key, QueueState::Active);
                true
            }
            _ => false,
        }
    }

    /// Records that a capacity walk on `pod` counted this queued Run's request as taken.
    pub fn count_on(&mut self, key: &RunKey, pod: &str) {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.counted_on.insert(pod.to_string());
        }
    }

    /// The queued Runs of a Runtime in queue order, with their state.
    pub fn members<'a>(
        &'a self,
        scope: &ScopeRef,
    ) -> impl DoubleEndedIterator<Item = (&'a QueueOrder, QueueState)> + 'a {
        self.scopes
            .get(scope)
            .into_iter()
            .flat_map(|s| s.members.iter().map(|(o, s)| (o, *s)))
    }

    /// The queued Runs of a Runtime with required Run (anti-)affinity terms, in queue order.
    pub fn members_with_required_terms<'a>(
        &'a self,
        scope: &ScopeRef,
    ) -> impl Iterator<Item = (&'a QueueOrder, QueueState)> + 'a {
        self.scopes
            .get(scope)
            .into_iter()
            .flat_map(|s| s.terms.iter().map(|o| (o, s.members[o])))
    }

    /// The first unschedulable Run of a Runtime before `order`: the oldest Run that does not
    /// fit and waits behind nothing (the bounded wait's candidate).
    pub fn oldest_unschedulable_before(
        &self,
        scope: &ScopeRef,
        order: &QueueOrder,
    ) -> Option<&QueueOrder> {
        self.scopes
            .get(scope)?
            .members
            .range(..order.clone())
            .find(|(_, s)| matches!(s, QueueState::Unschedulable { .. }))
            .map(|(o, _)| o)
    }

    /// Queued Runs by state label, for the pending-Runs gauge.
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

    fn flush(&mut self, now: Timestamp) {
        while let Some((at, key)) = self.backoff.first().cloned()
            && at <= now
        {
            self.backoff.pop_first();
            if let Some(entry) = self.entries.get_mut(&key) {
                entry.since = now;
            }
            self.set_state(&key, QueueState::Active);
        }
        while let Some((since, key)) = self.unschedulable.first().cloned()
            && since + UNSCHEDULABLE_FLUSH <= now
        {
            self.unschedulable.pop_first();
            if let Some(entry) = self.entries.get_mut(&key) {
                entry.since = now;
            }
            self.set_state(&key, QueueState::Active);
        }
    }

    fn put(
        &mut self,
        key: &RunKey,
        scope: &ScopeRef,
        order: &QueueOrder,
        state: QueueState,
        now: Timestamp,
    ) {
        if let Some(entry) = self.entries.remove(key) {
            self.unindex(key, &entry);
        }
        self.insert(key, scope, order, state, now);
    }

    /// Files a new entry in every index.
    fn insert(
        &mut self,
        key: &RunKey,
        scope: &ScopeRef,
        order: &QueueOrder,
        state: QueueState,
        now: Timestamp,
    ) {
        let entry = Entry {
            scope: scope.clone(),
            order: order.clone(),
            state,
            since: now,
            counted_on: BTreeSet::new(),
        };
        self.index(key, &entry);
        self.entries.insert(key.clone(), entry);
    }

    /// Moves a queued entry to `state` in every index (the entry itself included); a marked
    /// capacity walk stays only with an active entry.
    fn set_state(&mut self, key: &RunKey, state: QueueState) {
        let Some(mut entry) = self.entries.remove(key) else {
            return;
        };
        self.unindex(key, &entry);
        entry.state = state;
        if state != QueueState::Active {
            entry.counted_on.clear();
        }
        self.index(key, &entry);
        self.entries.insert(key.clone(), entry);
    }

    /// Adds an entry to the per-scope and timed indexes of its state (not to `entries`).
    fn index(&mut self, key: &RunKey, entry: &Entry) {
        let state = entry.state;
        let scope = self.scopes.entry(entry.scope.clone()).or_default();
        scope.members.insert(entry.order.clone(), state);
        if self.required_terms.contains(key) {
            scope.terms.insert(entry.order.clone());
        }
        match state {
            QueueState::Active => {
                scope.active.insert(entry.order.clone());
                self.ready.insert(entry.scope.clone());
            }
            QueueState::Backoff(at) => {
                self.backoff.insert((at, key.clone()));
            }
            QueueState::Unschedulable { since, .. } => {
                self.unschedulable.insert((since, key.clone()));
            }
        }
    }

    /// Removes an entry from the per-scope and timed indexes (not from `entries`).
    fn unindex(&mut self, key: &RunKey, entry: &Entry) {
        if let Some(scope) = self.scopes.get_mut(&entry.scope) {
            scope.members.remove(&entry.order);
            scope.active.remove(&entry.order);
            scope.terms.remove(&entry.order);
            if scope.active.is_empty() {
                self.ready.remove(&entry.scope);
            }
            if scope.members.is_empty() {
                self.scopes.remove(&entry.scope);
            }
        }
        match entry.state {
            QueueState::Active => {}
            QueueState::Backoff(at) => {
                self.backoff.remove(&(at, key.clone()));
            }
            QueueState::Unschedulable { since, .. } => {
                self.unschedulable.remove(&(since, key.clone()));
            }
        }
    }
}

/// The backoff after `failures` consecutive failures: 200 ms, 400 ms, … at most 10 s.
pub fn backoff_delay(failures: u32) -> SignedDuration {
    let exp = failures.saturating_sub(1).min(8);
    (INITIAL_BACKOFF * (1i32 << exp)).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests;
