//! The scheduler cache: the single owner of the index, the assumed cache, the nominations and
//! the scheduling queue, which must change together.
//!
//! Split by seam:
//! - this module: the watch seam ([`Indexed`]) and the lifecycle of a Run in the cache: every
//!   Run event reconciles its assumption and nomination and files it in the queue (queued
//!   while it waits for placement without an assumption, nowhere otherwise);
//! - [`schedule`]: one cycle for the head of the queue (snapshot → evaluate → nominate →
//!   Reserve), and `plan`, the same decision without Reserve for `explain` and `status`;
//! - [`nominator`]: the bounded wait (which starved Run gets which Pod drained for it);
//! - [`preemption`]: priority's bounded wait (which lower-priority Runs make room for a
//!   higher-priority one, and where it is nominated);
//! - [`reserve`]: Reserve, release and the retries of a failed Bind or write;
//! - [`wake`]: which unschedulable Runs an event moves back to the active queue, as the
//!   plugins' queueing hints say;
//! - [`fairness`]: what each fairness group of a Runtime holds, which group goes next, and
//!   where each stands;
//! - [`shared`]: the whole cache behind one `Mutex`.
//!
//! It must not talk to the API server or read a clock: `now` is an argument.

mod fairness;
mod nominator;
mod preemption;
mod reserve;
mod schedule;
mod shared;
mod wake;

#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::ResourceExt;

use super::assumed::{AssumedCache, Reconciled};
use super::facts::RunFacts;
use super::index::{Changes, Index, ObservedLease, ObservedPod, PodRef, RunChange, ScopeRef};
use super::nominations::Nominations;
use super::queue::{QueuedRun, SchedulingQueue};
use super::registry::QueueingHints;
use super::snapshot::Snapshot;
use super::types::{Observed, RunKey};
use crate::api::{PersistentWorkspace, Run, Runtime};

pub use preemption::{LEVEL_RUNNING, LEVEL_SCHEDULED, Preemption, Victim};
pub use reserve::ReserveError;
pub use schedule::{ScheduleOutcome, Scheduled};
pub use shared::SharedCache;
pub use wake::WakeCounts;

/// How long the oldest Pending Run that does not fit may wait while later Runs are placed
/// before a Runtime Pod is nominated for it (`scheduler run --starvation-threshold`).
pub const DEFAULT_STARVATION_THRESHOLD: SignedDuration = SignedDuration::from_secs(30);

/// A watched kind the scheduler cache keeps: the one seam between a watch and the cache.
/// The controller feeds every watched kind through [`SchedulerCache::apply`], `delete` and
/// `reset`, with the instant it observed the event; tests feed objects the same way,
/// synchronously.
pub trait Indexed: Sized {
    fn apply(cache: &mut SchedulerCache, obj: &Self, now: Timestamp) -> Changes;
    fn delete(cache: &mut SchedulerCache, obj: &Self, now: Timestamp) -> Changes;
    fn reset(cache: &mut SchedulerCache, objs: &[Self], now: Timestamp) -> Changes;
}

impl Indexed for Pod {
    fn apply(cache: &mut SchedulerCache, pod: &Pod, _: Timestamp) -> Changes {
        cache.index.apply_pod(pod).into()
    }

    fn delete(cache: &mut SchedulerCache, pod: &Pod, _: Timestamp) -> Changes {
        let (namespace, name) = (pod.namespace().unwrap_or_default(), pod.name_any());
        cache.index.delete_pod(&namespace, &name).into()
    }

    fn reset(cache: &mut SchedulerCache, pods: &[Pod], _: Timestamp) -> Changes {
        cache.index.reset_pods(pods).into()
    }
}

impl Indexed for ObservedPod {
    fn apply(cache: &mut SchedulerCache, pod: &ObservedPod, _: Timestamp) -> Changes {
        cache.index.apply_observed_pod(pod).into()
    }

    fn delete(cache: &mut SchedulerCache, pod: &ObservedPod, _: Timestamp) -> Changes {
        cache.index.delete_pod(&pod.namespace, &pod.name).into()
    }

    fn reset(cache: &mut SchedulerCache, pods: &[ObservedPod], _: Timestamp) -> Changes {
        cache.index.reset_observed_pods(pods).into()
    }
}

impl Indexed for ObservedLease {
    fn apply(cache: &mut SchedulerCache, lease: &ObservedLease, now: Timestamp) -> Changes {
        cache.index.apply_observed_lease(lease, now).into()
    }

    fn delete(cache: &mut SchedulerCache, lease: &ObservedLease, now: Timestamp) -> Changes {
        cache
            .index
            .delete_lease(&lease.namespace, &lease.name, now)
            .into()
    }

    fn reset(cache: &mut SchedulerCache, leases: &[ObservedLease], now: Timestamp) -> Changes {
        cache.index.reset_observed_leases(leases, now).into()
    }
}

impl Indexed for Lease {
    fn apply(cache: &mut SchedulerCache, lease: &Lease, now: Timestamp) -> Changes {
        cache.index.apply_lease(lease, now).into()
    }

    fn delete(cache: &mut SchedulerCache, lease: &Lease, now: Timestamp) -> Changes {
        let (namespace, name) = (lease.namespace().unwrap_or_default(), lease.name_any());
        cache.index.delete_lease(&namespace, &name, now).into()
    }

    fn reset(cache: &mut SchedulerCache, leases: &[Lease], now: Timestamp) -> Changes {
        cache.index.reset_leases(leases, now).into()
    }
}

impl Indexed for Run {
    fn apply(cache: &mut SchedulerCache, run: &Run, now: Timestamp) -> Changes {
        cache.apply_run(run, now).into()
    }

    fn delete(cache: &mut SchedulerCache, run: &Run, now: Timestamp) -> Changes {
        let key = RunKey::of(run);
        cache.delete_run(&key.namespace, &key.uid, now).into()
    }

    fn reset(cache: &mut SchedulerCache, runs: &[Run], now: Timestamp) -> Changes {
        cache.reset_runs(runs, now).into_iter().collect()
    }
}

impl Indexed for Runtime {
    fn apply(cache: &mut SchedulerCache, runtime: &Runtime, _: Timestamp) -> Changes {
        let namespace = runtime.namespace().unwrap_or_default();
        cache.set_fair_share(runtime);
        let changed = cache.index.apply_runtime(&namespace, &runtime.name_any());
        changed.into_iter().collect::<Vec<_>>().into()
    }

    fn delete(cache: &mut SchedulerCache, runtime: &Runtime, _: Timestamp) -> Changes {
        let namespace = runtime.namespace().unwrap_or_default();
        let scope = ScopeRef::new(&namespace, &runtime.name_any());
        cache.queue.set_fair_share(&scope, Default::default());
        let changed = cache.index.delete_runtime(&namespace, &runtime.name_any());
        changed.into_iter().collect::<Vec<_>>().into()
    }

    fn reset(cache: &mut SchedulerCache, runtimes: &[Runtime], _: Timestamp) -> Changes {
        for runtime in runtimes {
            cache.set_fair_share(runtime);
        }
        let keys: Vec<(String, String)> = runtimes
            .iter()
            .map(|r| (r.namespace().unwrap_or_default(), r.name_any()))
            .collect();
        cache
            .index
            .reset_runtimes(keys.iter().map(|(ns, name)| (ns.as_str(), name.as_str())))
            .into()
    }
}

impl Indexed for PersistentWorkspace {
    fn apply(cache: &mut SchedulerCache, workspace: &PersistentWorkspace, _: Timestamp) -> Changes {
        Changes::workspaces(cache.index.apply_workspace(workspace))
    }

    fn delete(
        cache: &mut SchedulerCache,
        workspace: &PersistentWorkspace,
        _: Timestamp,
    ) -> Changes {
        let namespace = workspace.namespace().unwrap_or_default();
        Changes::workspaces(
            cache
                .index
                .delete_workspace(&namespace, &workspace.name_any()),
        )
    }

    fn reset(
        cache: &mut SchedulerCache,
        workspaces: &[PersistentWorkspace],
        _: Timestamp,
    ) -> Changes {
        Changes::workspaces(cache.index.reset_workspaces(workspaces))
    }
}

impl Indexed for PriorityClass {
    fn apply(cache: &mut SchedulerCache, class: &PriorityClass, now: Timestamp) -> Changes {
        let changed = cache.index.apply_priority_class(class);
        cache.reorder(changed.then(|| class.name_any()).as_deref(), changed, now)
    }

    fn delete(cache: &mut SchedulerCache, class: &PriorityClass, now: Timestamp) -> Changes {
        let changed = cache.index.delete_priority_class(&class.name_any());
        cache.reorder(Some(&class.name_any()), changed, now)
    }

    fn reset(cache: &mut SchedulerCache, classes: &[PriorityClass], now: Timestamp) -> Changes {
        let changed = cache.index.reset_priority_classes(classes);
        cache.reorder(None, changed, now)
    }
}

/// The index, the assumed cache, the nominations and the queue, updated together.
#[derive(Debug, Clone)]
pub struct SchedulerCache {
    index: Index,
    assumed: AssumedCache,
    nominations: Nominations,
    queue: SchedulingQueue,
    hints: QueueingHints,
    starvation_threshold: SignedDuration,
    /// How long after its Bind an unclaimed Run may have started ([`super::claim_window`]).
    claim_window: SignedDuration,
    /// Per Runtime, bumped by every event that may make a Pending Run fit: an unschedulable
    /// Run evaluated at the current epoch has seen everything a wakeup could offer it.
    epochs: HashMap<ScopeRef, u64>,
    /// Pending Runs whose status records a nomination on a Pod not seen yet, with their
    /// Runtime: adopted once it is.
    unadopted: HashMap<RunKey, String>,
    woken: WakeCounts,
    /// The Pods whose capacity walks counted a filed, active Run's request as taken: where
    /// its cycle does not place it, that room is still free and the walk is made again. Kept
    /// only while the Run is active (see [`wake`]).
    counted: HashMap<RunKey, BTreeSet<String>>,
    /// Nominations made since the last [`Self::take_nomination_counts`]: (starvation,
    /// priority).
    nominated: (u64, u64),
    /// Pending Runs whose last status write met a newer version not observed yet: they look
    /// again once it is (see [`Self::write_conflicted`]).
    rewrite: HashSet<RunKey>,
}

impl Default for SchedulerCache {
    fn default() -> Self {
        SchedulerCache {
            index: Index::default(),
            assumed: AssumedCache::default(),
            nominations: Nominations::default(),
            queue: SchedulingQueue::default(),
            hints: QueueingHints::default(),
            starvation_threshold: DEFAULT_STARVATION_THRESHOLD,
            claim_window: super::claim_window(crate::api::default_claim_delay()),
            epochs: HashMap::new(),
            unadopted: HashMap::new(),
            woken: WakeCounts::default(),
            counted: HashMap::new(),
            nominated: (0, 0),
            rewrite: HashSet::new(),
        }
    }
}

impl SchedulerCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets how long the oldest unfitting Pending Run may wait while later Runs are placed
    /// before a Pod is nominated for it.
    pub fn with_starvation_threshold(mut self, threshold: SignedDuration) -> Self {
        self.starvation_threshold = threshold;
        self
    }

    /// Sets how long after its Bind an unclaimed Run may have started: the
    /// [`super::claim_window`] of the `--claim-delay` Runtime Pods are given.
    pub fn with_claim_window(mut self, window: SignedDuration) -> Self {
        self.claim_window = window;
        self
    }

    /// The window [`Self::with_claim_window`] set.
    pub fn claim_window(&self) -> SignedDuration {
        self.claim_window
    }

    /// Uses the queueing hints of the registry the cycles run (see [`super::Registry`]);
    /// without them every event moves every unschedulable Run.
    pub fn with_hints(mut self, hints: QueueingHints) -> Self {
        self.hints = hints;
        self
    }

    /// A cache built from objects listed at `now`, as `explain` does; no assumptions.
    pub fn from_objects<'a>(
        classes: &[PriorityClass],
        runtimes: impl IntoIterator<Item = &'a Runtime>,
        pods: impl IntoIterator<Item = &'a Pod>,
        leases: impl IntoIterator<Item = &'a Lease>,
        runs: impl IntoIterator<Item = &'a Run>,
        now: Timestamp,
    ) -> Self {
        let mut cache = SchedulerCache::new();
        cache.reset(classes, now);
        for runtime in runtimes {
            cache.apply(runtime, now);
        }
        for pod in pods {
            cache.apply(pod, now);
        }
        for lease in leases {
            cache.apply(lease, now);
        }
        for run in runs {
            cache.apply(run, now);
        }
        cache
    }

    pub fn index(&self) -> &Index {
        &self.index
    }

    pub fn assumed(&self) -> &AssumedCache {
        &self.assumed
    }

    pub fn nominations(&self) -> &Nominations {
        &self.nominations
    }

    pub fn queue(&self) -> &SchedulingQueue {
        &self.queue
    }

    /// When the scheduling loop has work next: `now` when a Run is active, else the next
    /// backoff expiry or unschedulable flush.
    pub fn next_due(&self, now: Timestamp) -> Option<Timestamp> {
        if self.queue.has_work(now) {
            return Some(now);
        }
        self.queue.next_due()
    }

    /// The active Runs whose Runtime Pod is lost (see [`Index::lost_runs`]), with this cache's
    /// claim window.
    pub fn lost_runs(
        &mut self,
        now: Timestamp,
        grace: SignedDuration,
        since: Timestamp,
    ) -> Vec<crate::scheduler::framework::index::LostRun> {
        self.index.lost_runs(now, grace, self.claim_window, since)
    }

    /// Records a watched object (PriorityClass, Runtime, Pod, Lease, PersistentWorkspace or
    /// Run) observed at `now`, and moves the
    /// unschedulable Runs its changes may help back to the active queue.
    pub fn apply<K: Indexed>(&mut self, obj: &K, now: Timestamp) -> Changes {
        let changes = K::apply(self, obj, now);
        self.advance(&changes, now);
        changes
    }

    /// Records the deletion of a watched object observed at `now`.
    pub fn delete<K: Indexed>(&mut self, obj: &K, now: Timestamp) -> Changes {
        let changes = K::delete(self, obj, now);
        self.advance(&changes, now);
        changes
    }

    /// Replaces every object of the kind (a watch's initial list or relist at `now`).
    pub fn reset<K: Indexed>(&mut self, objs: &[K], now: Timestamp) -> Changes {
        let changes = K::reset(self, objs, now);
        self.advance(&changes, now);
        changes
    }

    /// Records a Run event and reconciles the Run's assumption and nomination against it.
    pub fn apply_run(&mut self, run: &Run, now: Timestamp) -> RunChange {
        let key = RunKey::of(run);
        let mut change = self.index.apply_run(run);
        self.reconcile(&key, &mut change);
        change.updated = self.observe(&key, run, now);
        // A Run whose status write conflicted looks again on the version it met.
        let rewrite = self.rewrite.remove(&key);
        if change.updated || rewrite {
            self.queue.activate(&key, now);
        }
        change
    }

    /// Records a Run deletion; its assumption, if any, is dropped.
    pub fn delete_run(&mut self, namespace: &str, uid: &str, _now: Timestamp) -> RunChange {
        let key = RunKey::new(namespace, uid);
        let mut change = self.index.delete_run(namespace, uid);
        self.reconcile(&key, &mut change);
        self.forget(&key);
        change
    }

    /// Replaces every Run (after a watch relist) and reconciles every assumption.
    pub fn reset_runs(&mut self, runs: &[Run], now: Timestamp) -> Vec<RunChange> {
        let mut changes = self.index.reset_runs(runs);
        for key in self.assumed.keys() {
            let mut change = RunChange::default();
            self.reconcile(&key, &mut change);
            if !change.released.is_empty() {
                changes.push(change);
            }
        }
        for run in runs {
            self.observe(&RunKey::of(run), run, now);
        }
        // The relist is the newest version of every Run a status write conflicted on.
        for key in std::mem::take(&mut self.rewrite) {
            self.queue.activate(&key, now);
        }
        // Runs the relist no longer has leave the queue too.
        let gone: Vec<RunKey> = self
            .queue
            .observed()
            .filter(|q| self.index.observed(q.key()) != Observed::Pending)
            .map(|q| q.key().clone())
            .collect();
        for key in gone {
            self.forget(&key);
        }
        changes
    }

    /// Keeps the queue's copy of the Run as the index now observes it: stored while it is
    /// Pending (its recorded nomination adopted), forgotten otherwise, and filed as it waits.
    /// Returns whether the Run itself changed.
    fn observe(&mut self, key: &RunKey, run: &Run, now: Timestamp) -> bool {
        if self.index.observed(key) != Observed::Pending {
            self.forget(key);
            return false;
        }
        let facts = self
            .index
            .facts(key)
            .expect("the index keeps a Pending Run's facts")
            .clone();
        let updated = self
            .queue
            .observe(run, &facts, self.index.order_of(run), now);
        self.adopt(key, run);
        self.file(key, now);
        updated
    }

    /// Records how `runtime` groups its Runs for fairness (an annotation that cannot be read
    /// keeps its default; the Runtime controller reports it).
    fn set_fair_share(&mut self, runtime: &Runtime) {
        let scope = ScopeRef::new(
            &runtime.namespace().unwrap_or_default(),
            &runtime.name_any(),
        );
        self.queue
            .set_fair_share(&scope, super::fairness::FairShare::of(runtime).0);
    }

    /// A Run that is no longer Pending leaves the queue.
    fn forget(&mut self, key: &RunKey) {
        self.queue.forget(key);
        self.counted.remove(key);
        self.rewrite.remove(key);
    }

    /// Files the Run in the queue as the queue and the assumed cache now have it: in the
    /// three sets while it waits for placement and holds no assumption, out of them
    /// otherwise.
    fn file(&mut self, key: &RunKey, now: Timestamp) {
        let waits = self.queue.get(key).is_some_and(|q| q.waits_for_placement())
            && self.assumed.get(key).is_none();
        if !waits {
            self.counted.remove(key);
        }
        self.queue.file(key, waits, now);
    }

    /// Re-keys the Pending Runs whose priority follows class `changed` (every class when
    /// `None`) after the classes `changed`: they look again.
    fn reorder(&mut self, class: Option<&str>, changed: bool, now: Timestamp) -> Changes {
        if !changed {
            return Changes::default();
        }
        let index = &self.index;
        Changes::reordered(self.queue.reorder(class, |run| index.order_of(run), now))
    }

    /// The Pending Run `run` as the queue keeps it, or as it would be queued now (`explain`
    /// of a Run the queue does not hold, or holds at another version).
    pub fn queued(&self, run: &Run) -> Arc<QueuedRun> {
        let key = RunKey::of(run);
        match self.queue.get(&key) {
            Some(q) if !q.changed_by(run) => q.clone(),
            _ => {
                let facts = RunFacts::renewed(run, self.index.facts(&key));
                Arc::new(self.queue.queued(run, facts, self.index.order_of(run)))
            }
        }
    }

    fn reconcile(&mut self, key: &RunKey, change: &mut RunChange) {
        if self.index.observed(key) != Observed::Pending {
            self.unadopted.remove(key);
            // Placed, finished or deleted: the room held for it is free for everyone.
            if let Some(n) = self.nominations.drop_run(key) {
                change
                    .released
                    .push(self.pod_ref(&key.namespace, &n.pod, &n.facts.scope.runtime));
            }
        }
        let Some(outcome) = self.assumed.reconcile(key, self.index.observed(key)) else {
            return;
        };
        if let Reconciled::Dropped { pod, runtime } = &outcome {
            change
                .released
                .push(self.pod_ref(&key.namespace, pod, runtime));
        }
    }

    /// A Pod reference naming the Pod's own Runtime when known.
    fn pod_ref(&self, namespace: &str, pod: &str, fallback_runtime: &str) -> PodRef {
        PodRef {
            namespace: namespace.to_string(),
            runtime: self
                .index
                .pod(namespace, pod)
                .map_or(fallback_runtime, |p| p.runtime.as_str())
                .to_string(),
            pod: pod.to_string(),
        }
    }

    /// A read-only view of (namespace, runtime) at `now`.
    pub fn snapshot<'a>(
        &'a self,
        namespace: &'a str,
        runtime: &'a str,
        now: Timestamp,
    ) -> Snapshot<'a> {
        Snapshot::new(
            &self.index,
            &self.assumed,
            &self.nominations,
            &self.queue,
            namespace,
            runtime,
            now,
        )
    }

    /// Where the Run stands among the Pending Runs of its Runtime: (1-based position, count),
    /// while it is Pending.
    pub fn queue_position(&self, run: &Run) -> Option<(usize, usize)> {
        self.queue.position(&RunKey::of(run))
    }

    /// Nominations made since the last call, as (starvation, priority), for
    /// `kruntimes_scheduler_nominations_total{cause}`.
    pub fn take_nomination_counts(&mut self) -> (u64, u64) {
        std::mem::take(&mut self.nominated)
    }

    /// The Pod nominated for the Run, if any.
    pub fn nominated_pod(&self, namespace: &str, uid: &str) -> Option<&str> {
        self.nominations
            .get(&RunKey::new(namespace, uid))
            .map(|n| n.pod.as_str())
    }
}
