//! [`SchedulerCache`] and the [`Registry`] behind one mutex: the object the controller shares
//! between its watch tasks, its scheduling loop and its binding tasks. Every method holds the
//! lock for one whole operation, so pop → snapshot → cycle → Reserve is atomic with respect to
//! every event and every other caller. It adds no logic of its own.

use std::sync::{Mutex, MutexGuard};

use jiff::{SignedDuration, Timestamp};

use super::{Indexed, Scheduled, SchedulerCache, WakeCounts};
use crate::api::Run;
use crate::scheduler::framework::cycle::{CycleError, Decision};
use crate::scheduler::framework::index::{Changes, LostRun};
use crate::scheduler::framework::registry::Registry;

#[derive(Debug)]
pub struct SharedCache {
    state: Mutex<SchedulerCache>,
    registry: Registry,
}

impl SharedCache {
    pub fn new(registry: Registry) -> Self {
        Self::with_cache(registry, SchedulerCache::new())
    }

    /// `cache` with the queueing hints of `registry`, whose plugins the cycles run.
    pub fn with_cache(registry: Registry, cache: SchedulerCache) -> Self {
        SharedCache {
            state: Mutex::new(cache.with_hints(registry.queueing_hints())),
            registry,
        }
    }

    fn lock(&self) -> MutexGuard<'_, SchedulerCache> {
        // A panic while holding the lock may have left counters half-updated; continuing
        // could overcommit, so propagate it and let the process restart from a clean cache
        // (the same recovery as a leader failover).
        self.state
            .lock()
            .expect("scheduler state poisoned by an earlier panic")
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Runs `f` with read access to the state (explain-style inspection, debugging).
    pub fn with<R>(&self, f: impl FnOnce(&SchedulerCache) -> R) -> R {
        f(&self.lock())
    }

    /// See [`SchedulerCache::schedule_next`].
    pub fn schedule_next(&self, now: Timestamp) -> Option<Scheduled> {
        self.lock().schedule_next(&self.registry, now)
    }

    pub fn plan(&self, run: &Run, now: Timestamp) -> Result<Decision, CycleError> {
        self.lock().plan(&self.registry, run, now)
    }

    pub fn release(&self, namespace: &str, uid: &str, now: Timestamp) -> bool {
        self.lock().release(namespace, uid, now)
    }

    pub fn retry(
        &self,
        namespace: &str,
        uid: &str,
        conflict: bool,
        now: Timestamp,
    ) -> Option<SignedDuration> {
        self.lock().retry(namespace, uid, conflict, now)
    }

    /// See [`SchedulerCache::write_conflicted`]. `observed` is asked under the lock: a watch
    /// event for the newer version either came before it, or finds the Run marked.
    pub fn write_conflicted(
        &self,
        namespace: &str,
        uid: &str,
        observed: impl FnOnce() -> bool,
        now: Timestamp,
    ) {
        let mut cache = self.lock();
        cache.write_conflicted(namespace, uid, observed(), now)
    }

    pub fn bound(&self, namespace: &str, uid: &str) {
        self.lock().bound(namespace, uid)
    }

    /// When the scheduling loop has work next: `now` when a Run is active, else the next
    /// backoff expiry or unschedulable flush.
    pub fn next_due(&self, now: Timestamp) -> Option<Timestamp> {
        let cache = self.lock();
        if cache.queue().has_work(now) {
            return Some(now);
        }
        cache.queue().next_due()
    }

    pub fn take_wake_counts(&self) -> WakeCounts {
        self.lock().take_wake_counts()
    }

    /// See [`SchedulerCache::take_nomination_counts`].
    pub fn take_nomination_counts(&self) -> (u64, u64) {
        self.lock().take_nomination_counts()
    }

    pub fn apply<K: Indexed>(&self, obj: &K, now: Timestamp) -> Changes {
        self.lock().apply(obj, now)
    }

    pub fn delete<K: Indexed>(&self, obj: &K, now: Timestamp) -> Changes {
        self.lock().delete(obj, now)
    }

    pub fn reset<K: Indexed>(&self, objs: &[K], now: Timestamp) -> Changes {
        self.lock().reset(objs, now)
    }

    /// The active Runs whose Runtime Pod is lost (see [`crate::scheduler::framework::Index::lost_runs`]).
    pub fn lost_runs(
        &self,
        now: Timestamp,
        grace: SignedDuration,
        since: Timestamp,
    ) -> Vec<LostRun> {
        let mut cache = self.lock();
        let window = cache.claim_window();
        cache.index.lost_runs(now, grace, window, since)
    }

    /// Applies the heartbeat expiries in `(after, until]` (their Pods became unavailable: a
    /// Runtime Pod event) and returns the next expiry after `until`.
    pub fn expire(&self, after: Timestamp, until: Timestamp) -> Option<Timestamp> {
        let mut cache = self.lock();
        let expired = cache.index.expired_between(after, until);
        if !expired.is_empty() {
            cache.advance(&expired.into(), until);
        }
        cache.index.next_expiry_after(until)
    }
}
