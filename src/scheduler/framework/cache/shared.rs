//! [`SchedulerCache`] and the [`Registry`] behind one mutex: the object the controller shares
//! between its watch tasks, its scheduling loop, its binding tasks and the lifecycle
//! controllers. A caller locks for one whole operation (pop → snapshot → cycle → Reserve, one
//! event, one heal pass), so each is atomic with respect to every other; the operations are
//! the cache's own. It adds no logic of its own, and a guard is never held across an `.await`
//! (clippy's `await_holding_lock` keeps that).

use std::sync::{Mutex, MutexGuard};

use super::SchedulerCache;
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

    /// The cache, for one operation.
    pub fn lock(&self) -> MutexGuard<'_, SchedulerCache> {
        // A panic while holding the lock may have left counters half-updated; continuing
        // could overcommit, so propagate it and let the process restart from a clean cache
        // (the same recovery as a leader failover).
        self.state
            .lock()
            .expect("scheduler state poisoned by an earlier panic")
    }

    /// The plugins every cycle runs ([`SchedulerCache::schedule_next`], `plan`).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}
