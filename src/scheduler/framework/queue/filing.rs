//! Filing: the one place a stored Run is put into, and taken out of, the queue's indexes
//! (its Runtime's members, active set, terms and groups, the backoff and unschedulable
//! timelines, the round robin's ready set), and [`SchedulingQueue::invariants`], which says
//! whether they all agree. Every filing goes through here; only a Runtime's new fairness
//! (`set_fair_share`) regroups its filed Runs in place.

use std::sync::Arc;

use jiff::Timestamp;

use super::{Entry, QueueState, QueuedRun, SchedulingQueue, UNSCHEDULABLE_FLUSH};
use crate::scheduler::framework::index::ScopeRef;
use crate::scheduler::framework::types::RunKey;

impl SchedulingQueue {
    pub(super) fn flush(&mut self, now: Timestamp) {
        while let Some((at, key)) = self.backoff.first().cloned()
            && at <= now
        {
            self.put(&key, QueueState::Active, now);
        }
        while let Some((since, key)) = self.unschedulable.first().cloned()
            && since + UNSCHEDULABLE_FLUSH <= now
        {
            self.put(&key, QueueState::Active, now);
        }
    }

    /// Stores a Run observed Pending for the first time.
    pub(super) fn store(&mut self, run: Arc<QueuedRun>) {
        let scope = self.scopes.entry(run.scope().clone()).or_default();
        scope.pending.insert(run.order.clone(), run.clone());
        self.runs.insert(run.key().clone(), run);
    }

    /// Replaces a stored Run with a new version of it; a filed one keeps its state unless
    /// its place changed, when it is filed again, active.
    pub(super) fn replace(&mut self, run: Arc<QueuedRun>, now: Timestamp) {
        let key = run.key().clone();
        let old = self.runs.get(&key).expect("replaces a stored Run").clone();
        if old.order == run.order && old.scope() == run.scope() {
            let scope = self
                .scopes
                .get_mut(run.scope())
                .expect("a stored Run's scope");
            scope.pending.insert(run.order.clone(), run.clone());
            self.runs.insert(key, run);
            return;
        }
        let filed = self.unfile(&key).is_some();
        let scope = self
            .scopes
            .get_mut(old.scope())
            .expect("a stored Run's scope");
        scope.pending.remove(&old.order);
        self.gc_scope(old.scope());
        self.store(run);
        if filed {
            self.insert(&key, QueueState::Active, now);
        }
    }

    /// Files a stored Run at `state` (out of any state it was in).
    pub(super) fn put(&mut self, key: &RunKey, state: QueueState, now: Timestamp) {
        if !self.runs.contains_key(key) {
            return;
        }
        self.unfile(key);
        self.insert(key, state, now);
    }

    /// Files a stored Run in every index of `state`.
    pub(super) fn insert(&mut self, key: &RunKey, state: QueueState, since: Timestamp) {
        let run = &self.runs[key];
        let scope = self
            .scopes
            .get_mut(run.scope())
            .expect("a stored Run's scope");
        scope.members.insert(run.order.clone(), state);
        if run.required_terms {
            scope.terms.insert(run.order.clone());
        }
        let group = run.group.clone();
        scope
            .member_groups
            .entry(group.clone())
            .or_default()
            .insert(run.order.clone());
        match state {
            QueueState::Active => {
                scope.active.insert(run.order.clone());
                scope
                    .groups
                    .entry(group.clone())
                    .or_default()
                    .insert(run.order.clone());
                self.ready.insert(run.scope().clone());
            }
            QueueState::Backoff(at) => {
                self.backoff.insert((at, key.clone()));
            }
            QueueState::Unschedulable { since, .. } => {
                self.unschedulable.insert((since, key.clone()));
            }
        }
        self.grouped.insert(key.clone(), group);
        self.entries.insert(key.clone(), Entry { state, since });
    }

    /// Takes a filed Run out of every index; returns its entry.
    pub(super) fn unfile(&mut self, key: &RunKey) -> Option<Entry> {
        let entry = self.entries.remove(key)?;
        let run = &self.runs[key];
        if let Some(scope) = self.scopes.get_mut(run.scope()) {
            scope.members.remove(&run.order);
            let active = scope.active.remove(&run.order);
            if let Some(group) = self.grouped.remove(key) {
                for (groups, filed) in [
                    (&mut scope.groups, active),
                    (&mut scope.member_groups, true),
                ] {
                    if let Some(orders) = groups.get_mut(&group).filter(|_| filed) {
                        orders.remove(&run.order);
                        if orders.is_empty() {
                            groups.remove(&group);
                        }
                    }
                }
            }
            scope.terms.remove(&run.order);
            if scope.active.is_empty() {
                self.ready.remove(run.scope());
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
        Some(entry)
    }

    pub(super) fn gc_scope(&mut self, scope: &ScopeRef) {
        if self.scopes.get(scope).is_some_and(|s| s.pending.is_empty()) {
            self.scopes.remove(scope);
        }
    }

    /// Whether every index agrees with the filed entries: each filed Run is stored, sits in
    /// its Runtime's members under its state, in the active set and its group's exactly when
    /// active, on the backoff or unschedulable timeline exactly when it waits there, in the
    /// terms exactly when it has required terms; a Runtime is ready exactly when it has an
    /// active Run; every stored Run is its Runtime's pending. The property tests call it after
    /// every step; `Err` names the first disagreement.
    pub fn invariants(&self) -> Result<(), String> {
        let mut members = 0;
        let mut active = 0;
        for (key, entry) in &self.entries {
            let run = self
                .runs
                .get(key)
                .ok_or(format!("{key:?} filed, not stored"))?;
            let scope = self
                .scopes
                .get(run.scope())
                .ok_or(format!("{key:?} filed in no scope"))?;
            if scope.members.get(&run.order) != Some(&entry.state) {
                return Err(format!("{key:?} is not a member as {:?}", entry.state));
            }
            let is_active = entry.state == QueueState::Active;
            let group = self
                .grouped
                .get(key)
                .ok_or(format!("{key:?} has no group"))?;
            let in_group = scope
                .groups
                .get(group)
                .is_some_and(|g| g.contains(&run.order));
            if scope.active.contains(&run.order) != is_active || in_group != is_active {
                return Err(format!(
                    "{key:?} active set or group disagrees with {:?}",
                    entry.state
                ));
            }
            if !scope
                .member_groups
                .get(group)
                .is_some_and(|g| g.contains(&run.order))
            {
                return Err(format!("{key:?} missing from its group's members"));
            }
            if scope.terms.contains(&run.order) != run.required_terms {
                return Err(format!("{key:?} terms index disagrees"));
            }
            let timeline = match entry.state {
                QueueState::Active => true,
                QueueState::Backoff(at) => self.backoff.contains(&(at, key.clone())),
                QueueState::Unschedulable { since, .. } => {
                    self.unschedulable.contains(&(since, key.clone()))
                }
            };
            if !timeline {
                return Err(format!(
                    "{key:?} missing from its {:?} timeline",
                    entry.state
                ));
            }
            members += 1;
            active += usize::from(is_active);
        }
        for (key, run) in &self.runs {
            let stored = self
                .scopes
                .get(run.scope())
                .and_then(|scope| scope.pending.get(&run.order));
            if stored.is_none_or(|stored| stored.key() != key) {
                return Err(format!("{key:?} stored, not its Runtime's pending"));
            }
        }
        let scoped = |f: fn(&super::Scope) -> usize| self.scopes.values().map(f).sum::<usize>();
        let counts = [
            ("members", scoped(|s| s.members.len()), members),
            ("active", scoped(|s| s.active.len()), active),
            (
                "groups",
                scoped(|s| s.groups.values().map(|g| g.len()).sum()),
                active,
            ),
            (
                "member groups",
                scoped(|s| s.member_groups.values().map(|g| g.len()).sum()),
                members,
            ),
            (
                "timelines",
                self.backoff.len() + self.unschedulable.len() + active,
                members,
            ),
            ("grouped", self.grouped.len(), members),
            ("pending", scoped(|s| s.pending.len()), self.runs.len()),
        ];
        for (what, indexed, filed) in counts {
            if indexed != filed {
                return Err(format!("{indexed} {what} indexed for {filed} Runs"));
            }
        }
        if let Some(gone) = self.ready.iter().find(|r| !self.scopes.contains_key(*r)) {
            return Err(format!("{gone:?} is ready without Runs"));
        }
        for (scope_ref, scope) in &self.scopes {
            if self.ready.contains(scope_ref) == scope.active.is_empty() {
                return Err(format!("{scope_ref:?} ready disagrees with its active set"));
            }
        }
        Ok(())
    }
}
