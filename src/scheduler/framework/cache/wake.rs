//! Wakeups: which unschedulable Runs an event moves back to the active queue.
//!
//! Each event is mapped to a [`ClusterEvent`] and answered with the queueing hints the
//! registered Filters declare for it ([`QueueingHints`]); this module carries the hints out
//! and keeps the per-Runtime wake epoch. It must not decide placement.

use jiff::Timestamp;

use super::SchedulerCache;
use crate::api::Resources;
use std::collections::BTreeSet;

use crate::scheduler::framework::index::{Changes, ScopeRef, WakeSource, WorkspaceRef};
use crate::scheduler::framework::plugin::{ClusterEvent, QueueingHint};
use crate::scheduler::framework::queue::{QueueState, QueuedRun};
use crate::scheduler::framework::snapshot::Adjust;
use crate::scheduler::framework::types::RunKey;
use std::sync::Arc;

/// Runs moved back to the active queue, by wakeup source, since the last
/// [`SchedulerCache::take_wake_counts`]: `kruntimes_scheduler_pending_run_wakeups_total`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WakeCounts {
    pub runtime_pod: u64,
    pub capacity_released: u64,
}

impl WakeCounts {
    pub fn by_source(&self) -> [(WakeSource, u64); 2] {
        [
            (WakeSource::RuntimePod, self.runtime_pod),
            (WakeSource::CapacityReleased, self.capacity_released),
        ]
    }

    fn add(&mut self, source: WakeSource, n: u64) {
        match source {
            WakeSource::RuntimePod => self.runtime_pod += n,
            WakeSource::CapacityReleased => self.capacity_released += n,
        }
    }
}

impl SchedulerCache {
    /// Applies the heartbeat expiries in `(after, until]` (their Pods became unavailable: a
    /// Runtime Pod event) and returns the next expiry after `until`.
    pub fn expire(&mut self, after: Timestamp, until: Timestamp) -> Option<Timestamp> {
        let expired = self.index.expired_between(after, until);
        if !expired.is_empty() {
            self.advance(&expired.into(), until);
        }
        self.index.next_expiry_after(until)
    }

    /// Carries out what `changes` mean for the queue: bumps the wake epoch of every Runtime
    /// they concern and applies the queueing hints of each event.
    pub(super) fn advance(&mut self, changes: &Changes, now: Timestamp) {
        for wakeup in &changes.wakeups {
            self.bump(&ScopeRef::new(&wakeup.namespace, &wakeup.runtime));
        }
        for scope in &changes.rechecks {
            self.bump(scope);
        }
        for wakeup in &changes.wakeups {
            let event = match (wakeup.source, &wakeup.pod) {
                (WakeSource::CapacityReleased, Some(_)) => ClusterEvent::CapacityReleased,
                _ => ClusterEvent::RuntimePodChanged,
            };
            let scope = ScopeRef::new(&wakeup.namespace, &wakeup.runtime);
            let n = self.apply_hints(&scope, wakeup.pod.as_deref(), event, now);
            self.woken.add(wakeup.source, n);
        }
        for scope in &changes.rechecks {
            // Uncounted, as retargets: not a Runtime Pod event.
            self.apply_hints(scope, None, ClusterEvent::RuntimeChanged, now);
        }
        for workspace in &changes.workspaces {
            self.wake_workspace_users(workspace, now);
        }
        for scope in &changes.retargets {
            self.retarget(scope, now);
        }
        for key in &changes.reordered {
            if let Some(scope) = self.queue.get(key).map(|q| q.scope().clone()) {
                self.bump(&scope);
            }
            self.file(key, now);
            self.queue.activate(key, now);
        }
    }

    /// The Runs moved since the last call, by source.
    pub fn take_wake_counts(&mut self) -> WakeCounts {
        std::mem::take(&mut self.woken)
    }

    pub(super) fn epoch(&self, scope: &ScopeRef) -> u64 {
        self.epochs.get(scope).copied().unwrap_or(0)
    }

    pub(super) fn bump(&mut self, scope: &ScopeRef) {
        match self.epochs.get_mut(scope) {
            Some(epoch) => *epoch += 1,
            None => {
                self.epochs.insert(scope.clone(), 1);
            }
        }
    }

    /// Applies every hint registered for `event` in `scope` (`pod`: where room was freed);
    /// returns how many Runs moved.
    fn apply_hints(
        &mut self,
        scope: &ScopeRef,
        pod: Option<&str>,
        event: ClusterEvent,
        now: Timestamp,
    ) -> u64 {
        let hints = self.hints.of(event).to_vec();
        hints
            .into_iter()
            .map(|hint| self.apply_hint(scope, pod, hint, now))
            .sum()
    }

    /// Applies one hint in `scope`; returns how many Runs moved. Workspace users are
    /// answered by [`Self::wake_workspace_users`], which knows the workspace.
    fn apply_hint(
        &mut self,
        scope: &ScopeRef,
        pod: Option<&str>,
        hint: QueueingHint,
        now: Timestamp,
    ) -> u64 {
        match (hint, pod) {
            (QueueingHint::QueueIfRoom, Some(pod)) => self.wake_room(scope, pod, now),
            (QueueingHint::QueueIfRoom, None) | (QueueingHint::Queue, _) => {
                let keys = unschedulable(self.queue.members(scope));
                self.activate(&keys, now)
            }
            (QueueingHint::QueueRequiredTerms, _) => {
                let keys = unschedulable(self.queue.members_with_required_terms(scope));
                self.activate(&keys, now)
            }
            (QueueingHint::QueueWorkspaceUsers, _) => 0,
        }
    }

    /// A PersistentWorkspace changed: the hints registered for [`ClusterEvent::WorkspaceChanged`]
    /// in the Runtimes of the Pending Runs that name it (whatever Runtime the workspace
    /// names: a Run of another one is to fail), `QueueWorkspaceUsers` moving those Runs only.
    fn wake_workspace_users(&mut self, workspace: &WorkspaceRef, now: Timestamp) {
        let users: Vec<RunKey> = self
            .index
            .workspace(&workspace.namespace, &workspace.name)
            .map(|e| {
                e.pending
                    .iter()
                    .map(|uid| RunKey::new(&workspace.namespace, uid))
                    .collect()
            })
            .unwrap_or_default();
        let scopes: BTreeSet<ScopeRef> = users
            .iter()
            .filter_map(|k| Some(self.queue.get(k)?.scope().clone()))
            .collect();
        for scope in &scopes {
            self.bump(scope);
        }
        for hint in self.hints.of(ClusterEvent::WorkspaceChanged).to_vec() {
            if hint == QueueingHint::QueueWorkspaceUsers {
                // `activate` moves only the unschedulable ones.
                self.activate(&users, now);
            } else {
                for scope in &scopes {
                    self.apply_hint(scope, None, hint, now);
                }
            }
        }
    }

    /// Moves `keys` back to the active queue; returns how many moved.
    fn activate(&mut self, keys: &[RunKey], now: Timestamp) -> u64 {
        keys.iter().filter(|k| self.queue.activate(k, now)).count() as u64
    }

    /// The hint for room freed on `pod`: walks the queued Runs of the Runtime in order and
    /// moves the unschedulable ones whose request fits the room there, counting each fitting
    /// Run's request (active ones included) as taken, with the room held for a nominated Run
    /// kept for it, until the Pod is full. A Run counted against the room is marked with the
    /// Pod, so that if its cycle does not place it there the walk is made again
    /// ([`SchedulerCache::rewalk`]). Runs an earlier cycle found unschedulable at the current
    /// epoch have seen this room already and are skipped; Runs in backoff wait for their time.
    pub(super) fn wake_room(&mut self, scope: &ScopeRef, pod: &str, now: Timestamp) -> u64 {
        let (namespace, runtime) = (scope.namespace.as_str(), scope.runtime.as_str());
        let epoch = self.epoch(scope);
        let (activate, counted) = {
            let snapshot = self.snapshot(namespace, runtime, now);
            let Some(view) = snapshot.pod(pod) else {
                return 0;
            };
            if view.capacity().is_err() {
                return 0;
            }
            let (mut activate, mut counted) = (Vec::new(), Vec::new());
            let held = self.nominations.on_pod(namespace, pod);
            // With fairness groups each group's Runs are walked on their own, each counting
            // the room for itself: the next cycle goes to whichever group's turn it is, so
            // the room is offered to the head of every group, not only to the oldest Runs.
            let mut walk = |members| {
                walk(
                    &snapshot,
                    &view,
                    held,
                    epoch,
                    members,
                    &mut activate,
                    &mut counted,
                )
            };
            match self.queue.has_groups(scope) {
                false => walk(Box::new(self.queue.members(scope))),
                true => {
                    for members in self.queue.members_by_group(scope) {
                        walk(Box::new(members));
                    }
                }
            }
            (activate, counted)
        };
        let moved = self.activate(&activate, now);
        for key in counted {
            // Marks travel with an active Run only (see `SchedulerCache::counted`).
            if self.queue.state(&key) == Some(QueueState::Active) {
                self.counted.entry(key).or_default().insert(pod.to_string());
            }
        }
        moved
    }

    /// New affinity targets in `scope` (a Reserve): the queueing hints for targets, uncounted.
    pub(super) fn retarget(&mut self, scope: &ScopeRef, now: Timestamp) {
        self.apply_hints(scope, None, ClusterEvent::TargetsChanged, now);
    }

    /// A Run counted against the room on `pod` was cycled without taking it: the room is
    /// still free for the Runs after it (counted as a capacity wakeup).
    pub(super) fn rewalk(&mut self, scope: &ScopeRef, pod: &str, now: Timestamp) {
        let n = self.wake_room(scope, pod, now);
        self.woken.add(WakeSource::CapacityReleased, n);
    }

    /// Room a nomination held on `pod` is free again outside any watch event (the
    /// nomination went stale, moved, was placed elsewhere, or was replaced by one needing
    /// less): the epoch moves on, since Runs found unschedulable in this one have not seen
    /// that room, and the room is walked.
    pub(super) fn held_room_freed(&mut self, scope: &ScopeRef, pod: &str, now: Timestamp) {
        self.bump(scope);
        self.rewalk(scope, pod, now);
    }
}

/// One walk of [`SchedulerCache::wake_room`] over `members` (in queue order): the
/// unschedulable Runs to move and the Runs counted against the room.
fn walk(
    snapshot: &crate::scheduler::framework::snapshot::Snapshot<'_>,
    view: &crate::scheduler::framework::snapshot::PodView<'_>,
    mut held: Option<(
        &RunKey,
        &crate::scheduler::framework::nominations::Nomination,
    )>,
    epoch: u64,
    members: Box<dyn Iterator<Item = (&Arc<QueuedRun>, QueueState)> + '_>,
    activate: &mut Vec<RunKey>,
    counted: &mut Vec<RunKey>,
) {
    // What the Runs passed in the walk were counted to take, on top of the Pod's usage.
    let mut taken = Resources::default();
    for (queued, state) in members {
        // Full by actual, assumed and taken usage only: room held for a nominated Run
        // not passed yet is still there for that Run, so the walk goes on to reach it.
        let room = Adjust {
            taken: Some(&taken),
            without_nomination: true,
            ..Adjust::default()
        };
        if view.is_full(room) {
            break;
        }
        match state {
            QueueState::Backoff(_) => continue,
            QueueState::Unschedulable { epoch: e, .. } if e >= epoch => continue,
            _ => {}
        }
        let key = queued.key();
        let unschedulable = matches!(state, QueueState::Unschedulable { .. });
        let Ok(request) = queued.request() else {
            // Invalid: its own cycle fails it.
            if unschedulable {
                activate.push(key.clone());
            }
            continue;
        };
        let nominated_here = held.is_some_and(|(k, _)| k == key);
        // Room held for an earlier nominated Run is not this Run's to take.
        let held_for_earlier = held.is_some_and(|(k, n)| k != key && n.order < queued.order);
        let seen = Adjust {
            without_nomination: !held_for_earlier,
            ..room
        };
        let fits = view.fits_with(&snapshot.requested(request), seen);
        if fits && unschedulable {
            activate.push(key.clone());
        }
        // A Run with required (anti-)affinity may be refused for another reason than
        // room: it is moved, but its request is not counted as taken.
        if fits && queued.required_terms && !nominated_here {
            continue;
        }
        if fits || nominated_here {
            // A nominated Run passed in the queue keeps its room whether it fits yet
            // or not: later Runs must not count on it.
            taken.add(request);
            if fits {
                counted.push(key.clone());
            }
            if nominated_here {
                held = None;
            }
        }
    }
}

/// The unschedulable Runs among `members`.
fn unschedulable<'a>(
    members: impl Iterator<Item = (&'a Arc<QueuedRun>, QueueState)>,
) -> Vec<RunKey> {
    members
        .filter(|(_, s)| matches!(s, QueueState::Unschedulable { .. }))
        .map(|(q, _)| q.key().clone())
        .collect()
}
