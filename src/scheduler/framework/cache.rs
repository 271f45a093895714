//! The scheduler cache: the single owner of the index and the assumed cache.
//!
//! Owns the operations that must see both: Run events that reconcile assumptions, Reserve
//! (capacity re-verified after all assumptions), release, and a whole cycle
//! (snapshot → evaluate → reserve). [`SharedCache`] puts it behind one `Mutex` so concurrent
//! queue workers and watch events can never reserve the same capacity twice. It must not
//! talk to the API server or read a clock: `now` is an argument.

use std::sync::{Mutex, MutexGuard};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use thiserror::Error;

use super::assumed::{AssumedCache, Assumption, Reconciled};
use super::cycle::{CycleError, Decision, PluginScore, RejectionCount, Unschedulable, evaluate};
use super::index::{Changes, Index, LostRun, PodRef, RunChange, WakeSource, Wakeup};
use super::registry::Registry;
use super::snapshot::Snapshot;
use super::types::{Observed, RunKey};
use crate::api::{Resources, Run, Runtime};

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
            ScheduleOutcome::Reserved { .. } => "scheduled",
            ScheduleOutcome::Unschedulable(_) => "unschedulable",
            ScheduleOutcome::Invalid { .. } => "invalid",
            ScheduleOutcome::ReserveConflict { .. } => "reserve_conflict",
            ScheduleOutcome::AlreadyPlaced { .. } => "already_placed",
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

/// The index and the assumed cache, updated together.
#[derive(Debug, Clone, Default)]
pub struct SchedulerCache {
    index: Index,
    assumed: AssumedCache,
}

impl SchedulerCache {
    pub fn new() -> Self {
        Self::default()
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

    /// Records a watched object (Runtime, Pod, Lease or Run) observed at `now`.
    pub fn apply<K: Indexed>(&mut self, obj: &K, now: Timestamp) -> Changes {
        K::apply(self, obj, now)
    }

    /// Records the deletion of a watched object observed at `now`.
    pub fn delete<K: Indexed>(&mut self, obj: &K, now: Timestamp) -> Changes {
        K::delete(self, obj, now)
    }

    /// Replaces every object of the kind (a watch's initial list or relist at `now`).
    pub fn reset<K: Indexed>(&mut self, objs: &[K], now: Timestamp) -> Changes {
        K::reset(self, objs, now)
    }

    /// Records a Run event and reconciles the Run's assumption against it.
    pub fn apply_run(&mut self, run: &Run) -> RunChange {
        let mut change = self.index.apply_run(run);
        self.reconcile(&RunKey::of(run), &mut change);
        change
    }

    /// Records a Run deletion; its assumption, if any, is dropped.
    pub fn delete_run(&mut self, namespace: &str, uid: &str) -> RunChange {
        let mut change = self.index.delete_run(namespace, uid);
        self.reconcile(&RunKey::new(namespace, uid), &mut change);
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
        changes
    }

    fn reconcile(&mut self, key: &RunKey, change: &mut RunChange) {
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
        Snapshot::new(&self.index, &self.assumed, namespace, runtime, now)
    }

    /// A cycle without Reserve: what the scheduler would decide for `run` now.
    pub fn plan(
        &self,
        registry: &Registry,
        run: &Run,
        now: Timestamp,
    ) -> Result<Decision, CycleError> {
        let namespace = RunKey::of(run).namespace;
        let snapshot = self.snapshot(&namespace, &run.spec.runtime, now);
        Ok(evaluate(&snapshot, registry, run)?.decision())
    }

    /// One scheduling attempt: snapshot → PreFilter → Filter → Score → Reserve.
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
        let (decision, rejections, assumption) = {
            let snapshot = self.snapshot(&key.namespace, &run.spec.runtime, now);
            let eval = match evaluate(&snapshot, registry, run) {
                Ok(eval) => eval,
                Err(e) => return ScheduleOutcome::Error(e),
            };
            let decision = eval.decision();
            match (&decision, eval.state()) {
                (Decision::Schedule { pod, .. }, Ok(state)) => {
                    let assumption = Assumption {
                        run_name: state.name.clone(),
                        runtime: state.runtime.clone(),
                        pod: pod.clone(),
                        request: state.request.clone(),
                        labels: state.labels.clone(),
                        anti_affinity: state.anti_affinity_selectors(),
                    };
                    (decision, eval.rejections(), Some(assumption))
                }
                _ => (decision, Vec::new(), None),
            }
        };
        match (decision, assumption) {
            (
                Decision::Schedule {
                    pod,
                    pod_uid,
                    total,
                    scores,
                },
                Some(assumption),
            ) => match self.reserve(&key, assumption) {
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
    /// actual usage and every existing assumption, then records the assumption.
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
        let in_use: Resources = assumption
            .request
            .names()
            .map(|r| {
                (
                    r,
                    used.map_or(0, |u| u.get(r)).saturating_add(assumed.get(r)),
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
        Ok(())
    }

    /// Forgets the Run's assumption after a failed Bind. Returns the capacity wakeup for the
    /// Pod's Runtime when there was one.
    pub fn release(&mut self, namespace: &str, uid: &str) -> Option<Wakeup> {
        let assumption = self.assumed.forget(&RunKey::new(namespace, uid))?;
        let pod = self.pod_ref(namespace, &assumption.pod, &assumption.runtime);
        Some(Wakeup {
            namespace: pod.namespace,
            runtime: pod.runtime,
            source: WakeSource::CapacityReleased,
        })
    }

    /// Names of the Pending Runs of (namespace, runtime) to wake, in name order. Runs holding
    /// an assumption are left out: their Bind is in flight or not yet observed.
    pub fn pending_runs(&self, namespace: &str, runtime: &str) -> Vec<String> {
        self.index
            .pending_keys(namespace, runtime)
            .filter(|(_, uid)| self.assumed.get(&RunKey::new(namespace, *uid)).is_none())
            .map(|(name, _)| name.to_string())
            .collect()
    }
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
        SharedCache {
            state: Mutex::new(SchedulerCache::new()),
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
