//! The scheduler cache: the single owner of the index, the assumed cache and the nominations.
//!
//! Owns the operations that must see them together: Run events that reconcile assumptions,
//! Reserve (capacity re-verified after all assumptions and nominations), release, which
//! Pending Runs a change wakes, and a whole cycle (order gate → snapshot → evaluate →
//! nominate → reserve). [`SharedCache`] puts it behind one `Mutex` so concurrent queue workers
//! and watch events can never reserve the same capacity twice. It must not talk to the API
//! server or read a clock: `now` is an argument.
//!
//! Queue order (creation time, then UID) is enforced here, not by the work queue, so it holds
//! whatever the order of events, wakeups and workers:
//! - **Order gate.** A Run may be placed only when no Run before it in its Runtime's queue
//!   fits now; otherwise its cycle places the oldest such Run instead (kube-scheduler pops the
//!   head of its queue whatever woke it). A Run that does not fit does not block the ones
//!   behind it (best-effort FIFO). Each Run found not to fit is remembered
//!   with the scope's epoch (bumped by every change that can make a Run fit), so the gate
//!   re-evaluates it only after such a change.
//! - **Bounded wait.** When a Run is placed while an earlier one that does not fit has waited
//!   longer than the starvation threshold, that earlier Run is nominated the Pod where it
//!   would fit soonest, and from then on Runs after it see its request as used there.
//! - **Cheap wakeups.** Capacity released on a Pod wakes, in queue order, only the Pending
//!   Runs whose requests fit the room there (see [`SchedulerCache::woken_by`]).

use std::sync::{Mutex, MutexGuard};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use thiserror::Error;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::assumed::{AssumedCache, Assumption, Reconciled};
use super::cycle::{
    CycleError, Decision, Evaluation, PluginScore, RejectionCount, Unschedulable, evaluate,
};
use super::index::{
    Changes, Index, LostRun, PendingRun, PodRef, RunChange, ScopeRef, WakeSource, Wakeup,
};
use super::nominations::{Nomination, Nominations};
use super::registry::Registry;
use super::snapshot::{PodView, Snapshot};
use super::types::{Heartbeat, Observed, QueueOrder, RunKey};
use crate::api::{Resources, Run, Runtime};

/// How long the oldest Pending Run that does not fit may wait while later Runs are placed
/// before a Runtime Pod is nominated for it (`scheduler run --starvation-threshold`).
pub const DEFAULT_STARVATION_THRESHOLD: SignedDuration = SignedDuration::from_secs(30);

/// Why Reserve refused the chosen Pod. Every variant is a `stage="reserve"` conflict.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReserveError {
    #[error("runtime pod {pod} has no room left for {resource} after existing assumptions")]
    Conflict { pod: String, resource: String },
    #[error("runtime pod {pod} is no longer known or has no readable capacity")]
    PodGone { pod: String },
    #[error("the run already holds an assumption on runtime pod {pod}")]
    AlreadyAssumed { pod: String },
}

/// What one scheduling attempt did, and what the controller must do next.
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
    /// Keep the Run Pending: `Scheduled=False`, reason `Unschedulable`, `message()`.
    Unschedulable(Unschedulable),
    /// Fail the Run through the terminal helper with `reason` and `message`.
    Invalid {
        reason: &'static str,
        message: String,
    },
    /// Reserve found the chosen Pod without room: nothing reserved; count
    /// `reservation_conflicts_total{stage="reserve"}` and requeue.
    ReserveConflict {
        error: ReserveError,
        rejections: Vec<RejectionCount>,
    },
    /// The Run already holds an assumption or is observed active on `pod`; no cycle ran. A
    /// bind is in flight or not yet observed: do nothing, the watch will show it.
    AlreadyPlaced { pod: String },
    /// A Run before this one in its Runtime's queue fit and was reserved on `pod` instead:
    /// bind that Run (`run`, by name) as for `Reserved`, then cycle this one again at once.
    ReservedEarlier {
        run: String,
        uid: String,
        pod: String,
        pod_uid: String,
    },
    /// A Run before this one in its Runtime's queue fits but could not be reserved this
    /// cycle: nothing reserved. Enqueue `to` and try this Run again shortly.
    Yield { to: String },
    /// A Score plugin failed: nothing reserved; return an error for the controller's retry.
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
            ScheduleOutcome::Reserved { .. } | ScheduleOutcome::ReservedEarlier { .. } => {
                "scheduled"
            }
            ScheduleOutcome::Unschedulable(_) => "unschedulable",
            ScheduleOutcome::Invalid { .. } => "invalid",
            ScheduleOutcome::ReserveConflict { .. } => "reserve_conflict",
            ScheduleOutcome::AlreadyPlaced { .. } => "already_placed",
            ScheduleOutcome::Yield { .. } => "yielded",
            ScheduleOutcome::Error(_) => "error",
        }
    }
}

/// A watched kind the scheduler cache keeps: the one seam between a watch and the cache.
/// The controller feeds every watched kind through [`SharedCache::apply`], `delete` and
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
    fn apply(cache: &mut SchedulerCache, run: &Run, _: Timestamp) -> Changes {
        cache.apply_run(run).into()
    }

    fn delete(cache: &mut SchedulerCache, run: &Run, _: Timestamp) -> Changes {
        let key = RunKey::of(run);
        cache.delete_run(&key.namespace, &key.uid).into()
    }

    fn reset(cache: &mut SchedulerCache, runs: &[Run], _: Timestamp) -> Changes {
        cache.reset_runs(runs).into_iter().collect()
    }
}

impl Indexed for Runtime {
    fn apply(cache: &mut SchedulerCache, runtime: &Runtime, _: Timestamp) -> Changes {
        let namespace = runtime.namespace().unwrap_or_default();
        let changed = cache.index.apply_runtime(&namespace, &runtime.name_any());
        changed.into_iter().collect::<Vec<_>>().into()
    }

    fn delete(cache: &mut SchedulerCache, runtime: &Runtime, _: Timestamp) -> Changes {
        let namespace = runtime.namespace().unwrap_or_default();
        let changed = cache.index.delete_runtime(&namespace, &runtime.name_any());
        changed.into_iter().collect::<Vec<_>>().into()
    }

    fn reset(cache: &mut SchedulerCache, runtimes: &[Runtime], _: Timestamp) -> Changes {
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

/// The index, the assumed cache and the nominations, updated together.
#[derive(Debug, Clone)]
pub struct SchedulerCache {
    index: Index,
    assumed: AssumedCache,
    nominations: Nominations,
    starvation_threshold: SignedDuration,
    /// Per (namespace, runtime), bumped by every change that can make a Pending Run fit.
    epochs: HashMap<String, HashMap<String, u64>>,
    /// Bumped by every Reserve: a new assumed target can satisfy required affinity.
    targets: u64,
    /// Pending Runs found not to fit, with the epochs they were evaluated at.
    unfit: HashMap<RunKey, (u64, u64)>,
    /// Per namespace and runtime, the Pending Runs without an assumption, in queue order:
    /// what the order gate, wakeups and sweeps walk (an assumed Run only waits for its Bind to
    /// be observed, and a drain holds hundreds of those).
    waiting: HashMap<String, HashMap<String, Waiting>>,
    /// Where each Run of `waiting` is filed (runtime, order, required affinity).
    waiting_keys: HashMap<RunKey, (String, QueueOrder, bool)>,
    /// Pending Runs whose status records a nomination on a Pod not seen yet, with their
    /// Runtime: adopted once it is.
    unadopted: HashMap<RunKey, String>,
    /// Runs (their Runtime, and name) whose nomination was made or dropped since the last
    /// [`SchedulerCache::take_nomination_changes`]: their status must say so.
    nomination_changes: Vec<(ScopeRef, String)>,
}

impl Default for SchedulerCache {
    fn default() -> Self {
        SchedulerCache {
            index: Index::default(),
            assumed: AssumedCache::default(),
            nominations: Nominations::default(),
            starvation_threshold: DEFAULT_STARVATION_THRESHOLD,
            epochs: HashMap::new(),
            targets: 0,
            unfit: HashMap::new(),
            waiting: HashMap::new(),
            waiting_keys: HashMap::new(),
            unadopted: HashMap::new(),
            nomination_changes: Vec::new(),
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

    /// A cache built from objects listed at `now`, as `explain` does; no assumptions.
    pub fn from_objects<'a>(
        runtimes: impl IntoIterator<Item = &'a Runtime>,
        pods: impl IntoIterator<Item = &'a Pod>,
        leases: impl IntoIterator<Item = &'a Lease>,
        runs: impl IntoIterator<Item = &'a Run>,
        now: Timestamp,
    ) -> Self {
        let mut cache = SchedulerCache::new();
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

    /// Records a watched object (Runtime, Pod, Lease or Run) observed at `now`.
    pub fn apply<K: Indexed>(&mut self, obj: &K, now: Timestamp) -> Changes {
        let changes = K::apply(self, obj, now);
        self.advance(&changes);
        changes
    }

    /// Records the deletion of a watched object observed at `now`.
    pub fn delete<K: Indexed>(&mut self, obj: &K, now: Timestamp) -> Changes {
        let changes = K::delete(self, obj, now);
        self.advance(&changes);
        changes
    }

    /// Replaces every object of the kind (a watch's initial list or relist at `now`).
    pub fn reset<K: Indexed>(&mut self, objs: &[K], now: Timestamp) -> Changes {
        let changes = K::reset(self, objs, now);
        self.advance(&changes);
        changes
    }

    /// Bumps the epoch of every scope `changes` may have made a Pending Run fit in.
    fn advance(&mut self, changes: &Changes) {
        let scopes = changes
            .wakeups
            .iter()
            .map(|w| (&w.namespace, &w.runtime))
            .chain(changes.rechecks.iter().map(|s| (&s.namespace, &s.runtime)));
        if !changes.retargets.is_empty() {
            // New targets can satisfy only required affinity: Runs with it look again.
            self.targets += 1;
        }
        for (namespace, runtime) in scopes {
            self.bump(namespace, runtime);
        }
    }

    fn epoch(&self, namespace: &str, runtime: &str) -> u64 {
        self.epochs
            .get(namespace)
            .and_then(|m| m.get(runtime))
            .copied()
            .unwrap_or(0)
    }

    fn bump(&mut self, namespace: &str, runtime: &str) {
        let scopes = match self.epochs.get_mut(namespace) {
            Some(scopes) => scopes,
            None => self.epochs.entry(namespace.to_string()).or_default(),
        };
        match scopes.get_mut(runtime) {
            Some(epoch) => *epoch += 1,
            None => {
                scopes.insert(runtime.to_string(), 1);
            }
        }
    }

    /// Records a Run event and reconciles the Run's assumption and nomination against it.
    pub fn apply_run(&mut self, run: &Run) -> RunChange {
        let key = RunKey::of(run);
        let mut change = self.index.apply_run(run);
        self.reconcile(&key, &mut change);
        if self.index.observed(&key) == Observed::Pending {
            self.adopt(&key, run);
        }
        self.file(&key);
        change
    }

    /// Records a Run deletion; its assumption, if any, is dropped.
    pub fn delete_run(&mut self, namespace: &str, uid: &str) -> RunChange {
        let key = RunKey::new(namespace, uid);
        let mut change = self.index.delete_run(namespace, uid);
        self.reconcile(&key, &mut change);
        self.file(&key);
        change
    }

    /// Replaces every Run (after a watch relist) and reconciles every assumption.
    pub fn reset_runs(&mut self, runs: &[Run]) -> Vec<RunChange> {
        let mut changes = self.index.reset_runs(runs);
        for key in self.assumed.keys() {
            let mut change = RunChange::default();
            self.reconcile(&key, &mut change);
            if !change.released.is_empty() {
                changes.push(change);
            }
        }
        self.refile_all();
        changes
    }

    /// Files the Run in `waiting` as the index and the assumed cache now have it: there while
    /// it is observed Pending without an assumption, nowhere otherwise.
    fn file(&mut self, key: &RunKey) {
        let want = match self.index.queued(key) {
            Some(_) if self.assumed.get(key).is_some() => None,
            Some((runtime, order)) => {
                let affinity = self
                    .index
                    .pending_entry(&key.namespace, runtime, order)
                    .is_some_and(|p| p.requires_affinity);
                Some((runtime, order, affinity))
            }
            None => None,
        };
        let have = self.waiting_keys.get(key);
        if have.map(|(r, o, a)| (r.as_str(), o, *a)) == want {
            return;
        }
        let want = want.map(|(r, o, a)| (r.to_string(), o.clone(), a));
        if let Some((runtime, order, _)) = self.waiting_keys.remove(key)
            && let Some(scopes) = self.waiting.get_mut(&key.namespace)
        {
            if let Some(queue) = scopes.get_mut(&runtime) {
                queue.all.remove(&order);
                queue.affinity.remove(&order);
                if queue.all.is_empty() {
                    scopes.remove(&runtime);
                }
            }
            if scopes.is_empty() {
                self.waiting.remove(&key.namespace);
            }
        }
        if let Some((runtime, order, affinity)) = want {
            let queue = self
                .waiting
                .entry(key.namespace.clone())
                .or_default()
                .entry(runtime.clone())
                .or_default();
            queue.all.insert(order.clone());
            if affinity {
                queue.affinity.insert(order.clone());
            }
            self.waiting_keys
                .insert(key.clone(), (runtime, order, affinity));
        }
    }

    /// Rebuilds `waiting` from the index and the assumed cache (after a relist).
    fn refile_all(&mut self) {
        self.waiting.clear();
        self.waiting_keys.clear();
        let scopes: Vec<(String, String)> = self
            .index
            .scopes()
            .map(|(ns, rt)| (ns.to_string(), rt.to_string()))
            .collect();
        for (namespace, runtime) in scopes {
            let keys: Vec<RunKey> = self
                .index
                .pending(&namespace, &runtime)
                .map(|(order, _)| RunKey::new(namespace.as_str(), order.uid.as_str()))
                .collect();
            for key in keys {
                self.file(&key);
            }
        }
    }

    /// The Pending Runs of (namespace, runtime) without an assumption, in queue order.
    fn waiting_in<'a>(
        &'a self,
        namespace: &str,
        runtime: &str,
    ) -> impl DoubleEndedIterator<Item = (&'a QueueOrder, &'a PendingRun)> + 'a {
        self.waiting_range(namespace, runtime, ..)
    }

    /// [`SchedulerCache::waiting_in`] before `order`.
    fn waiting_before<'a>(
        &'a self,
        namespace: &str,
        runtime: &str,
        order: &QueueOrder,
    ) -> impl DoubleEndedIterator<Item = (&'a QueueOrder, &'a PendingRun)> + 'a {
        self.waiting_range(namespace, runtime, ..order.clone())
    }

    fn waiting_range<'a>(
        &'a self,
        namespace: &str,
        runtime: &str,
        range: impl std::ops::RangeBounds<QueueOrder> + 'a,
    ) -> impl DoubleEndedIterator<Item = (&'a QueueOrder, &'a PendingRun)> + 'a {
        let set = self
            .waiting
            .get(namespace)
            .and_then(|s| s.get(runtime))
            .map(|q| &q.all);
        let (namespace, runtime) = (namespace.to_string(), runtime.to_string());
        set.map(|s| s.range(range))
            .into_iter()
            .flatten()
            .filter_map(move |order| {
                let pending = self.index.pending_entry(&namespace, &runtime, order)?;
                Some((order, pending))
            })
    }

    fn reconcile(&mut self, key: &RunKey, change: &mut RunChange) {
        if self.index.observed(key) != Observed::Pending {
            self.unfit.remove(key);
            self.unadopted.remove(key);
            // Placed, finished or deleted: the room held for it is free for everyone.
            if let Some(n) = self.nominations.drop_run(key) {
                change
                    .released
                    .push(self.pod_ref(&key.namespace, &n.pod, &n.runtime));
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
            namespace,
            runtime,
            now,
        )
    }

    /// Where the Run stands among the Pending Runs of its Runtime: (1-based position, count),
    /// while it is Pending.
    pub fn queue_position(&self, run: &Run) -> Option<(usize, usize)> {
        let key = RunKey::of(run);
        let order = self.index.queue_order(&key)?;
        if self.index.observed(&key) != Observed::Pending {
            return None;
        }
        let namespace = &key.namespace;
        let total = self.index.pending(namespace, &run.spec.runtime).count();
        let before = self
            .index
            .pending_before(namespace, &run.spec.runtime, order)
            .count();
        Some((before + 1, total))
    }

    /// The Pod nominated for the Run, if any.
    pub fn nominated_pod(&self, namespace: &str, uid: &str) -> Option<&str> {
        self.nominations
            .get(&RunKey::new(namespace, uid))
            .map(|n| n.pod.as_str())
    }

    /// The Runs (their Runtime, and name) whose nomination was made or dropped since the last
    /// call: the controller rewrites their status, and sweeps the Runtime's queue (a dropped
    /// nomination frees room for later Runs).
    pub fn take_nomination_changes(&mut self) -> Vec<(ScopeRef, String)> {
        std::mem::take(&mut self.nomination_changes)
    }

    /// The sweeper of a Runtime's queue: its latest Pending Run without an assumption. Its
    /// cycle places the oldest Run of the queue that fits (the order gate), so enqueueing it
    /// after a placement keeps placing, in order, until nothing fits: a release's wakeups
    /// need not guess every Run its room could help.
    pub fn sweeper(&self, namespace: &str, runtime: &str) -> Option<String> {
        self.waiting_in(namespace, runtime)
            .rev()
            .find(|(_, p)| p.run.waits_for_placement())
            .map(|(_, p)| p.name.clone())
    }

    /// Takes over the nomination a Pending Run's status records (a new leader, or `explain`),
    /// when its Pod is in the Run's Runtime and nominated for no other Run.
    fn adopt(&mut self, key: &RunKey, run: &Run) {
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
        let Ok(request) =
            crate::api::resources::parse_requests(run.spec.resources.as_ref().map(|r| &r.requests))
        else {
            return;
        };
        self.nominations.nominate(
            key,
            Nomination {
                run_name: run.metadata.name.clone().unwrap_or_default(),
                runtime: run.spec.runtime.clone(),
                pod: pod.to_string(),
                request,
                order: QueueOrder::of(run),
            },
        );
    }

    /// Adopts the recorded nominations of (namespace, runtime) whose Pod was not known when
    /// their Run was seen.
    fn adopt_recorded(&mut self, namespace: &str, runtime: &str) {
        if self.unadopted.is_empty() {
            return;
        }
        let keys: Vec<RunKey> = self
            .unadopted
            .iter()
            .filter(|(k, r)| k.namespace == namespace && *r == runtime)
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            let run = self
                .index
                .queued(&key)
                .and_then(|(rt, order)| self.index.pending_entry(namespace, rt, order))
                .map(|p| p.run.clone());
            match run {
                Some(run) => self.adopt(&key, &run),
                None => {
                    self.unadopted.remove(&key);
                }
            }
        }
    }

    /// Drops the nominations of (namespace, runtime) that no longer hold: the Run is not
    /// waiting in the queue any more, or its Pod is gone, unavailable or too small for it.
    fn revalidate_nominations(&mut self, namespace: &str, runtime: &str, now: Timestamp) {
        if self
            .nominations
            .in_scope(namespace, runtime)
            .next()
            .is_none()
        {
            return;
        }
        let stale: Vec<RunKey> = {
            let snapshot = self.snapshot(namespace, runtime, now);
            self.nominations
                .in_scope(namespace, runtime)
                .filter(|(key, n)| {
                    self.index.observed(key) != Observed::Pending
                        || self.assumed.get(key).is_some()
                        || snapshot
                            .pod(&n.pod)
                            .is_none_or(|p| !can_ever_take(&p, n, now))
                })
                .map(|(key, _)| key.clone())
                .collect()
        };
        for key in stale {
            if let Some(n) = self.nominations.drop_run(&key) {
                self.nomination_changes
                    .push((ScopeRef::new(namespace, runtime), n.run_name.clone()));
                self.bump(namespace, runtime);
            }
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
        Ok(self.decide(registry, run, now)?.decision)
    }

    /// The scheduler's decision on `eval` (an evaluation of the Run `key` on this cache's
    /// snapshot): the plugins' choice, except that a Run nominated to a Pod that is feasible
    /// for it goes there, since that room was held for it. The cycle and `explain` both take
    /// their decision from here.
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

    /// One scheduling attempt: order gate → snapshot → PreFilter → Filter → Score →
    /// (nominate) → Reserve.
    pub fn schedule(&mut self, registry: &Registry, run: &Run, now: Timestamp) -> ScheduleOutcome {
        let key = RunKey::of(run);
        if let Some(a) = self.assumed.get(&key) {
            return ScheduleOutcome::AlreadyPlaced { pod: a.pod.clone() };
        }
        if let Observed::Active(pod) = self.index.observed(&key) {
            return ScheduleOutcome::AlreadyPlaced {
                pod: pod.to_string(),
            };
        }
        let runtime = run.spec.runtime.as_str();
        self.adopt(&key, run);
        self.revalidate_nominations(&key.namespace, runtime, now);
        let (earlier, starved) = self.gate(registry, run, now);
        // The oldest Run that fits goes first: when an earlier one fits, this cycle places it
        // (kube-scheduler pops the head of its queue whatever woke it), with the decision the
        // gate already made for it.
        let target: &Run = earlier.as_ref().map_or(run, |(r, _)| r.as_ref());
        let target_key = RunKey::of(target);
        let mut outcome = match &earlier {
            Some((_, decided)) => self.commit(&target_key, decided.clone()),
            None => self.cycle(registry, target, now),
        };
        if let (ScheduleOutcome::Reserved { .. }, Some(starved)) = (&outcome, starved)
            && self.nominate(registry, &starved, now)
        {
            // The new nomination holds room this Run may have been given: decide again.
            self.assumed.forget(&target_key);
            self.file(&target_key);
            outcome = self.cycle(registry, target, now);
        }
        if let ScheduleOutcome::Unschedulable(_) = outcome {
            self.mark_unfit(&target_key, target);
        }
        match (earlier.map(|(r, _)| r), outcome) {
            (None, outcome) => outcome,
            (Some(earlier), ScheduleOutcome::Reserved { pod, pod_uid, .. }) => {
                ScheduleOutcome::ReservedEarlier {
                    run: earlier.metadata.name.clone().unwrap_or_default(),
                    uid: target_key.uid,
                    pod,
                    pod_uid,
                }
            }
            // It fit a moment ago; let it and this Run look again.
            (Some(earlier), _) => ScheduleOutcome::Yield {
                to: earlier.metadata.name.clone().unwrap_or_default(),
            },
        }
    }

    /// The order gate: the oldest Run before `run` in its Runtime's queue that fits now, if
    /// any, and the oldest Run before that one (or before `run`) that does not fit and has
    /// waited longer than the starvation threshold without a nomination.
    fn gate(
        &mut self,
        registry: &Registry,
        run: &Run,
        now: Timestamp,
    ) -> (Option<Fitting>, Option<Arc<Run>>) {
        let key = RunKey::of(run);
        let order = self
            .index
            .queue_order(&key)
            .cloned()
            .unwrap_or_else(|| QueueOrder::of(run));
        let (namespace, runtime) = (key.namespace.as_str(), run.spec.runtime.as_str());
        self.adopt_recorded(namespace, runtime);
        let epoch = self.epoch(namespace, runtime);
        // Earlier Runs in order, not placed yet (no assumption) and still wanting placement:
        // skip those known to be unfit since the last change that could make them fit,
        // evaluate the others, and stop at the first that fits.
        let mut starved: Option<Arc<Run>> = None;
        let mut unfit = Vec::new();
        let mut fits = None;
        for (earlier, pending) in self.waiting_before(namespace, runtime, &order) {
            if !pending.run.waits_for_placement() {
                continue;
            }
            let earlier_key = RunKey::new(namespace, earlier.uid.as_str());
            if self.unfit.get(&earlier_key) == Some(&epochs_for(&pending.run, epoch, self.targets))
            {
                starved.get_or_insert_with(|| pending.run.clone());
                continue;
            }
            match self.decide(registry, &pending.run, now) {
                Ok(
                    decided @ Decided {
                        decision: Decision::Schedule { .. },
                        ..
                    },
                ) => {
                    fits = Some((pending.run.clone(), decided));
                    break;
                }
                // An invalid Run is failed by its own cycle and blocks nobody.
                Ok(_) | Err(_) => {
                    starved.get_or_insert_with(|| pending.run.clone());
                    unfit.push(pending.run.clone());
                }
            }
        }
        for earlier in &unfit {
            self.mark_unfit(&RunKey::of(earlier), earlier);
        }
        // The walk is in order: the first unfitting Run met is the oldest.
        (fits, starved.filter(|r| self.starving(r, now)))
    }

    /// Whether an earlier Run that does not fit has waited too long and has no nomination.
    fn starving(&self, run: &Run, now: Timestamp) -> bool {
        let Some(created) = run.metadata.creation_timestamp.as_ref() else {
            return false;
        };
        self.nominations.get(&RunKey::of(run)).is_none()
            && created
                .0
                .checked_add(self.starvation_threshold)
                .is_ok_and(|deadline| deadline <= now)
    }

    fn mark_unfit(&mut self, key: &RunKey, run: &Run) {
        let epoch = self.epoch(&key.namespace, &run.spec.runtime);
        self.unfit
            .insert(key.clone(), epochs_for(run, epoch, self.targets));
    }

    /// Nominates for the starved Run the Pod where it would fit soonest: among the Pods that
    /// are available, nominated for no other Run, and large enough for its request, the one
    /// with the fewest Runs to drain, then the least to free, then by name. Returns whether a
    /// nomination was made.
    fn nominate(&mut self, registry: &Registry, starved: &Run, now: Timestamp) -> bool {
        let key = RunKey::of(starved);
        let (namespace, runtime) = (key.namespace.as_str(), starved.spec.runtime.as_str());
        let chosen = {
            let snapshot = self.snapshot(namespace, runtime, now);
            let Ok(eval) = evaluate(&snapshot, registry, starved) else {
                return false;
            };
            let Ok(state) = eval.state() else {
                return false;
            };
            let nomination = |p: &PodView<'_>| Nomination {
                run_name: state.name.clone(),
                runtime: state.runtime.clone(),
                pod: p.name().to_string(),
                request: state.request.clone(),
                order: QueueOrder::of(starved),
            };
            eval.pods()
                .iter()
                // Rejected for room only: available, and no other filter ran against it.
                .filter(|e| e.rejection.as_ref().is_some_and(|r| r.shortfall.is_some()))
                .filter(|e| self.nominations.on_pod(namespace, e.pod.name()).is_none())
                .map(|e| (e.pod, nomination(&e.pod)))
                .filter(|(p, n)| can_ever_take(p, n, now))
                .min_by_key(|(p, n)| {
                    let runs = p.active_runs().count() + p.assumed_runs().count();
                    let to_free: u64 = n
                        .request
                        .iter()
                        .map(|(r, amount)| {
                            p.effective(r)
                                .saturating_add(amount)
                                .saturating_sub(p.capacity().map_or(0, |c| c.get(r)))
                        })
                        .sum();
                    (runs, to_free, p.name())
                })
                .map(|(_, n)| n)
        };
        let Some(nomination) = chosen else {
            return false;
        };
        let name = nomination.run_name.clone();
        if self.nominations.nominate(&key, nomination) {
            self.nomination_changes
                .push((ScopeRef::new(namespace, runtime), name));
            return true;
        }
        false
    }

    /// One cycle for `run` against the current state: evaluate, then Reserve.
    fn cycle(&mut self, registry: &Registry, run: &Run, now: Timestamp) -> ScheduleOutcome {
        match self.decide(registry, run, now) {
            Ok(decided) => self.commit(&RunKey::of(run), decided),
            Err(e) => ScheduleOutcome::Error(e),
        }
    }

    /// The evaluation of `run` against the current state, as owned data: the decision (a
    /// nominated Run goes to the Pod drained for it when it fits there, as kube-scheduler
    /// tries a Pod's nominated node first), the rejections, and the assumption to reserve.
    fn decide(
        &self,
        registry: &Registry,
        run: &Run,
        now: Timestamp,
    ) -> Result<Decided, CycleError> {
        let key = RunKey::of(run);
        let snapshot = self.snapshot(&key.namespace, &run.spec.runtime, now);
        let eval = evaluate(&snapshot, registry, run)?;
        let decision = self.decision(&eval, &key);
        Ok(match (&decision, eval.state()) {
            (Decision::Schedule { pod, .. }, Ok(state)) => {
                let assumption = Assumption {
                    run_name: state.name.clone(),
                    runtime: state.runtime.clone(),
                    pod: pod.clone(),
                    request: state.request.clone(),
                    labels: state.labels.clone(),
                    anti_affinity: state.anti_affinity_selectors(),
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
    fn commit(&mut self, key: &RunKey, decided: Decided) -> ScheduleOutcome {
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
            ) => match self.reserve(key, assumption) {
                Ok(()) => ScheduleOutcome::Reserved {
                    pod,
                    pod_uid,
                    total,
                    scores,
                    rejections,
                },
                Err(error) => ScheduleOutcome::ReserveConflict { error, rejections },
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

    /// Reserve: verifies that the Pod still has room for the complete request on top of the
    /// actual usage, every existing assumption and the room held for an earlier nominated Run,
    /// then records the assumption.
    pub fn reserve(&mut self, key: &RunKey, assumption: Assumption) -> Result<(), ReserveError> {
        if let Some(a) = self.assumed.get(key) {
            return Err(ReserveError::AlreadyAssumed { pod: a.pod.clone() });
        }
        let pod = assumption.pod.clone();
        let capacity = self
            .index
            .pod(&key.namespace, &pod)
            .and_then(|p| p.capacity.as_ref().ok())
            .ok_or_else(|| ReserveError::PodGone { pod: pod.clone() })?;
        let used = self.index.usage(&key.namespace, &pod);
        let assumed = self.assumed.usage_on(&key.namespace, &pod);
        let order = self.index.queue_order(key);
        let held = self
            .nominations
            .on_pod(&key.namespace, &pod)
            .filter(|(k, n)| *k != key && order.is_none_or(|o| n.order < *o))
            .map(|(_, n)| &n.request);
        let in_use: Resources = assumption
            .request
            .names()
            .map(|r| {
                (
                    r,
                    used.map_or(0, |u| u.get(r))
                        .saturating_add(assumed.get(r))
                        .saturating_add(held.map_or(0, |h| h.get(r))),
                )
            })
            .collect();
        if let Some(shortfall) =
            Resources::shortfalls(&assumption.request, &in_use, capacity).next()
        {
            return Err(ReserveError::Conflict {
                pod,
                resource: shortfall.resource.to_string(),
            });
        }
        self.assumed.assume(key, assumption);
        self.file(key);
        self.targets += 1;
        // Placed: whatever was held for it is its own now (Bind clears the status field).
        self.nominations.drop_run(key);
        Ok(())
    }

    /// Forgets the Run's assumption after a failed Bind. Returns the capacity wakeup for the
    /// Pod's Runtime when there was one.
    pub fn release(&mut self, namespace: &str, uid: &str) -> Option<Wakeup> {
        let key = RunKey::new(namespace, uid);
        let assumption = self.assumed.forget(&key)?;
        self.file(&key);
        let pod = self.pod_ref(namespace, &assumption.pod, &assumption.runtime);
        let wakeup = Wakeup {
            namespace: pod.namespace,
            runtime: pod.runtime,
            source: WakeSource::CapacityReleased,
            pod: Some(pod.pod),
        };
        self.advance(&vec![wakeup.clone()].into());
        Some(wakeup)
    }

    /// The Pending Runs (by name, in queue order) that `wakeup` should enqueue. Capacity
    /// released on a Pod wakes only the Runs whose requests fit the room now free there,
    /// walking the queue in order and counting each woken Run's request as taken, with the
    /// room held for a nominated Run kept for it; every other wakeup wakes every Pending Run
    /// of the Runtime. Runs holding an assumption are left out: their Bind is in flight.
    pub fn woken_by(&self, wakeup: &Wakeup, now: Timestamp) -> Vec<String> {
        let (WakeSource::CapacityReleased, Some(pod)) = (wakeup.source, &wakeup.pod) else {
            return self.pending_runs(&wakeup.namespace, &wakeup.runtime);
        };
        let (namespace, runtime) = (wakeup.namespace.as_str(), wakeup.runtime.as_str());
        let snapshot = self.snapshot(namespace, runtime, now);
        let Some(view) = snapshot.pod(pod) else {
            return Vec::new();
        };
        let Ok(capacity) = view.capacity() else {
            return Vec::new();
        };
        // What is taken by resource, before what is held for a nomination; each woken Run's
        // request is added as the walk goes.
        let mut taken: Resources = capacity
            .iter()
            .map(|(r, _)| (r, view.used(r).saturating_add(view.assumed(r))))
            .collect();
        let mut held = self.nominations.on_pod(namespace, pod);
        let mut woken = Vec::new();
        for (order, pending) in self.waiting_in(namespace, runtime) {
            if capacity.iter().all(|(r, cap)| taken.get(r) >= cap) {
                break;
            }
            let key = RunKey::new(namespace, order.uid.as_str());
            let Some(request) = &pending.request else {
                // Invalid: its own cycle fails it.
                woken.push(pending.name.clone());
                continue;
            };
            let nominated_here = held.is_some_and(|(k, _)| *k == key);
            // Room held for an earlier nominated Run is not this Run's to take.
            let mut seen = taken.clone();
            if let Some((_, n)) = held.filter(|(k, n)| **k != key && n.order < *order) {
                seen.add(&n.request);
            }
            let fits = Resources::fits(request, &seen, capacity);
            if fits {
                woken.push(pending.name.clone());
            }
            // A Run with required (anti-)affinity may be refused for another reason than room:
            // it is woken, but its request is not counted as taken, so the Runs after it are
            // woken as if it were not there (waking too many is cheap, too few strands Runs).
            if fits && pending.run.has_required_run_terms() && !nominated_here {
                continue;
            }
            if fits || nominated_here {
                // A nominated Run passed in the queue keeps its room whether it fits yet or
                // not: later Runs must not count on it.
                taken.add(request);
                if nominated_here {
                    held = None;
                }
            }
        }
        woken
    }

    /// Names of the Pending Runs of (namespace, runtime) with required Run affinity, in queue
    /// order: the ones new affinity targets can help.
    pub fn retargeted(&self, namespace: &str, runtime: &str) -> Vec<String> {
        let Some(queue) = self.waiting.get(namespace).and_then(|s| s.get(runtime)) else {
            return Vec::new();
        };
        queue
            .affinity
            .iter()
            .filter_map(|order| self.index.pending_entry(namespace, runtime, order))
            .map(|p| p.name.clone())
            .collect()
    }

    /// Names of the Pending Runs of (namespace, runtime) to wake, in queue order. Runs
    /// holding an assumption are left out: their Bind is in flight or not yet observed.
    pub fn pending_runs(&self, namespace: &str, runtime: &str) -> Vec<String> {
        self.waiting_in(namespace, runtime)
            .map(|(_, p)| p.name.clone())
            .collect()
    }
}

/// One Runtime's Pending Runs without an assumption, in queue order; those with required Run
/// affinity also on their own.
#[derive(Debug, Clone, Default)]
struct Waiting {
    all: BTreeSet<QueueOrder>,
    affinity: BTreeSet<QueueOrder>,
}

/// An earlier Run that fits now, with the decision made for it.
type Fitting = (Arc<Run>, Decided);

/// A decision with what carrying it out needs (see [`SchedulerCache::decide`]).
#[derive(Debug, Clone)]
struct Decided {
    decision: Decision,
    rejections: Vec<RejectionCount>,
    assumption: Option<Assumption>,
}

/// The epochs at which a Run found unfit stays unfit: the scope's, and for a Run with
/// required affinity also the targets epoch (a new assumed or active target can satisfy it).
fn epochs_for(run: &Run, epoch: u64, targets: u64) -> (u64, u64) {
    (
        epoch,
        if run.requires_run_affinity() {
            targets
        } else {
            0
        },
    )
}

/// Whether `pod` could take the nominated request once drained: available now (not
/// terminating, Ready, heartbeat fresh, capacity readable) and large enough.
fn can_ever_take(pod: &PodView<'_>, n: &Nomination, now: Timestamp) -> bool {
    let Ok(capacity) = pod.capacity() else {
        return false;
    };
    !pod.deleting()
        && pod.ready()
        && matches!(pod.heartbeat(), hb @ Heartbeat::Expires(_) if hb.is_fresh_at(now))
        && n.request
            .iter()
            .all(|(r, amount)| amount == 0 || capacity.get(r) >= amount)
}

/// [`SchedulerCache`] and the [`Registry`] behind one mutex: the object the controller shares between
/// its watch tasks and queue workers. Every method holds the lock for one whole operation, so
/// snapshot → cycle → reserve is atomic with respect to every other worker and event.
#[derive(Debug)]
pub struct SharedCache {
    state: Mutex<SchedulerCache>,
    registry: Registry,
}

impl SharedCache {
    pub fn new(registry: Registry) -> Self {
        Self::with_cache(registry, SchedulerCache::new())
    }

    pub fn with_cache(registry: Registry, cache: SchedulerCache) -> Self {
        SharedCache {
            state: Mutex::new(cache),
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

    pub fn schedule(&self, run: &Run, now: Timestamp) -> ScheduleOutcome {
        self.lock().schedule(&self.registry, run, now)
    }

    pub fn plan(&self, run: &Run, now: Timestamp) -> Result<Decision, CycleError> {
        self.lock().plan(&self.registry, run, now)
    }

    pub fn release(&self, namespace: &str, uid: &str) -> Option<Wakeup> {
        self.lock().release(namespace, uid)
    }

    pub fn pending_runs(&self, namespace: &str, runtime: &str) -> Vec<String> {
        self.lock().pending_runs(namespace, runtime)
    }

    pub fn retargeted(&self, namespace: &str, runtime: &str) -> Vec<String> {
        self.lock().retargeted(namespace, runtime)
    }

    pub fn woken_by(&self, wakeup: &Wakeup, now: Timestamp) -> Vec<String> {
        self.lock().woken_by(wakeup, now)
    }

    pub fn nominated_pod(&self, namespace: &str, uid: &str) -> Option<String> {
        self.lock()
            .nominated_pod(namespace, uid)
            .map(str::to_string)
    }

    pub fn take_nomination_changes(&self) -> Vec<(ScopeRef, String)> {
        self.lock().take_nomination_changes()
    }

    pub fn sweeper(&self, namespace: &str, runtime: &str) -> Option<String> {
        self.lock().sweeper(namespace, runtime)
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

    /// The active Runs whose Runtime Pod is lost (see [`Index::lost_runs`]).
    pub fn lost_runs(
        &self,
        now: Timestamp,
        grace: SignedDuration,
        since: Timestamp,
    ) -> Vec<LostRun> {
        self.lock().index.lost_runs(now, grace, since)
    }

    /// Heartbeat-expiry wakeups in `(after, until]` and the next expiry after `until`.
    pub fn expiries(&self, after: Timestamp, until: Timestamp) -> (Vec<Wakeup>, Option<Timestamp>) {
        let cache = self.lock();
        (
            cache.index.expired_between(after, until),
            cache.index.next_expiry_after(until),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    fn registry() -> Registry {
        crate::scheduler::plugins::registry()
    }

    fn reserved_pod(outcome: &ScheduleOutcome) -> &str {
        match outcome {
            ScheduleOutcome::Reserved { pod, .. } => pod,
            other => panic!("expected Reserved, got {other:?}"),
        }
    }

    #[test]
    fn schedule_reserves_and_the_next_cycle_sees_the_assumption() {
        let mut state = World::new()
            .pods([
                pod("p1").capacity(&[("runs", 1)]),
                pod("p2").capacity(&[("runs", 1)]),
            ])
            .cache();
        let a = run("a");
        assert_eq!(
            reserved_pod(&state.schedule(&registry(), &a.build(), NOW)),
            "p1"
        );
        assert_eq!(state.assumed().get(&a.key()).unwrap().pod, "p1");
        assert_eq!(
            reserved_pod(&state.schedule(&registry(), &run("b").build(), NOW)),
            "p2"
        );
        let outcome = state.schedule(&registry(), &run("c").build(), NOW);
        let ScheduleOutcome::Unschedulable(u) = &outcome else {
            panic!("{outcome:?}")
        };
        assert_eq!(
            u.message(),
            "0/2 Runtime Pods are available: 2 Insufficient runs."
        );
        assert_eq!(outcome.result(), "unschedulable");
        assert_eq!(outcome.rejections()[0].reason, "Insufficient resource");
    }

    #[test]
    fn reserve_refuses_a_pod_without_room_after_existing_assumptions() {
        let mut state = World::new()
            .pods([pod("p1").capacity(&[("runs", 2), ("example.com/gpu", 1)])])
            .runs([run("x").on("p1")])
            .cache();
        let a = run("a").requests(&[("example.com/gpu", 1)]);
        state.reserve(&a.key(), a.assumption("p1")).unwrap();
        let b = run("b")
            .requests(&[("runs", 0)])
            .requests(&[("example.com/gpu", 1)]);
        assert_eq!(
            state.reserve(&b.key(), b.assumption("p1")),
            Err(ReserveError::Conflict {
                pod: "p1".into(),
                resource: "example.com/gpu".into()
            })
        );
        let c = run("c");
        assert_eq!(
            state.reserve(&c.key(), c.assumption("p1")),
            Err(ReserveError::Conflict {
                pod: "p1".into(),
                resource: "runs".into()
            }),
            "actual (1) + assumed (1) leave no runs"
        );
        assert_eq!(
            state.reserve(&c.key(), c.assumption("gone")),
            Err(ReserveError::PodGone { pod: "gone".into() })
        );
        assert_eq!(
            state.reserve(&a.key(), a.assumption("p1")),
            Err(ReserveError::AlreadyAssumed { pod: "p1".into() })
        );
    }

    #[test]
    fn a_failed_bind_releases_the_reservation_and_wakes_the_runtime() {
        let mut state = World::new()
            .pods([pod("p1").capacity(&[("runs", 1)])])
            .cache();
        let a = run("a");
        state.apply_run(&a.build());
        reserved_pod(&state.schedule(&registry(), &a.build(), NOW));
        assert!(
            state.pending_runs(NS, RUNTIME).is_empty(),
            "assumed Runs are not woken"
        );
        let wake = state.release(NS, "uid-a").unwrap();
        assert_eq!(wake.source, WakeSource::CapacityReleased);
        assert_eq!(
            (wake.namespace.as_str(), wake.runtime.as_str()),
            (NS, RUNTIME)
        );
        assert!(state.assumed().is_empty());
        assert_eq!(state.pending_runs(NS, RUNTIME), ["a"]);
        assert_eq!(state.release(NS, "uid-a"), None);
        assert_eq!(
            reserved_pod(&state.schedule(&registry(), &a.build(), NOW)),
            "p1"
        );
    }

    #[test]
    fn an_assumption_is_kept_while_pending_and_handed_off_exactly_once_bound() {
        let mut state = World::new()
            .pods([pod("p1").capacity(&[("runs", 2)])])
            .cache();
        let a = run("a");
        reserved_pod(&state.schedule(&registry(), &a.build(), NOW));
        let effective = |s: &SchedulerCache| {
            s.snapshot(NS, RUNTIME, NOW)
                .pod("p1")
                .unwrap()
                .effective("runs")
        };
        assert_eq!(effective(&state), 1);

        // The informer lags the successful Bind: still Pending.
        let change = state.apply_run(&a.build());
        assert!(
            state.assumed().get(&a.key()).is_some(),
            "kept while Pending"
        );
        assert!(change.released.is_empty());
        assert_eq!(effective(&state), 1);

        // The Bind is observed: the actual usage owns the request now.
        let change = state.apply_run(&a.clone().on("p1").build());
        assert!(change.released.is_empty(), "confirmed, not released");
        assert!(state.assumed().is_empty());
        assert_eq!(effective(&state), 1);
        let again = state.schedule(&registry(), &a.build(), NOW);
        assert_eq!(again, ScheduleOutcome::AlreadyPlaced { pod: "p1".into() });
    }

    #[test]
    fn an_assumption_is_kept_when_its_run_is_seen_running_without_a_pod() {
        let mut state = World::new()
            .pods([pod("p1").capacity(&[("runs", 1)])])
            .cache();
        let a = run("a");
        reserved_pod(&state.schedule(&registry(), &a.build(), NOW));
        // Neither Pending, nor terminal, nor placed elsewhere: keep the capacity held.
        let change = state.apply_run(&a.clone().running().build());
        assert!(state.assumed().get(&a.key()).is_some(), "kept");
        assert!(change.released.is_empty());
        let full = state.schedule(&registry(), &run("b").build(), NOW);
        assert!(
            matches!(full, ScheduleOutcome::Unschedulable(_)),
            "{full:?}"
        );
        // Once it ends, the reservation goes.
        let change = state.apply_run(&a.clone().succeeded().build());
        assert!(state.assumed().is_empty(), "dropped");
        assert!(change.released.iter().any(|p| p.pod == "p1"));
    }

    #[test]
    fn an_assumption_is_dropped_when_its_run_ends_disappears_or_lands_elsewhere() {
        let world = World::new().pods([
            pod("p1").capacity(&[("runs", 2)]),
            pod("p2").capacity(&[("runs", 2)]),
        ]);
        let a = run("a");
        type Event = Box<dyn Fn(&mut SchedulerCache) -> RunChange>;
        let events: Vec<(&str, Event)> = vec![
            (
                "terminal",
                Box::new(|s| s.apply_run(&run("a").succeeded().build())),
            ),
            (
                "failed without a Pod",
                Box::new(|s| s.apply_run(&run("a").failed().build())),
            ),
            ("deleted", Box::new(|s| s.delete_run(NS, "uid-a"))),
            (
                "bound elsewhere",
                Box::new(|s| s.apply_run(&run("a").on("p2").build())),
            ),
            (
                "missing from a relist",
                Box::new(|s| s.reset_runs(&[]).pop().unwrap_or_default()),
            ),
        ];
        for (case, event) in events {
            let mut state = world.cache();
            assert_eq!(
                reserved_pod(&state.schedule(&registry(), &a.build(), NOW)),
                "p1",
                "{case}"
            );
            let change = event(&mut state);
            assert!(
                change
                    .released
                    .iter()
                    .any(|p| p.pod == "p1" && p.runtime == RUNTIME),
                "{case}: capacity on p1 is released"
            );
            assert!(state.assumed().is_empty(), "{case}");
            assert_eq!(
                state
                    .snapshot(NS, RUNTIME, NOW)
                    .pod("p1")
                    .unwrap()
                    .effective("runs"),
                0,
                "{case}"
            );
        }
    }

    #[test]
    fn an_invalid_run_is_reported_and_nothing_is_reserved() {
        let mut state = World::new().pods([pod("p1")]).cache();
        let outcome = state.schedule(
            &registry(),
            &run("a").request_strs(&[("runs", "-1")]).build(),
            NOW,
        );
        let ScheduleOutcome::Invalid { reason, message } = &outcome else {
            panic!("{outcome:?}")
        };
        assert_eq!(*reason, "InvalidResources");
        assert!(message.contains("\"-1\""), "{message}");
        assert!(state.assumed().is_empty());
    }

    #[test]
    fn concurrent_workers_never_reserve_the_same_capacity_twice() {
        let shared = std::sync::Arc::new(SharedCache::new(crate::scheduler::plugins::registry()));
        for p in [
            pod("p1").capacity(&[("runs", 3)]),
            pod("p2").capacity(&[("runs", 2)]),
        ] {
            shared.apply(&p.build(), NOW);
            shared.apply(&p.build_lease().unwrap(), NOW);
        }
        let handles: Vec<_> = (0..4)
            .map(|w| {
                let shared = shared.clone();
                std::thread::spawn(move || {
                    (0..5)
                        .filter(|i| {
                            let r = run(&format!("w{w}-{i}")).build();
                            matches!(shared.schedule(&r, NOW), ScheduleOutcome::Reserved { .. })
                        })
                        .count()
                })
            })
            .collect();
        let reserved: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(reserved, 5, "exactly the 3 + 2 runs of capacity");
        shared.with(|s| assert_eq!(s.assumed().len(), 5));
    }
}
