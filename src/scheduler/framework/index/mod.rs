//! In-memory index of Runtime Pods, runtimed heartbeat Leases and Runs, fed by watch events.
//!
//! Owns the scheduler's view of the cluster: synchronous `apply_*` / `delete_*` / `reset_*`
//! per watched kind (linkerd policy-controller style), returning what changed so the
//! controller can wake Pending Runs. It must not talk to the API server, read a clock,
//! make placement decisions or know about assumed reservations (see [`super::assumed`]).
//!
//! Layout, chosen so a scheduling cycle never walks all Runs:
//! - per namespace, a slab of *slots*, one per Pod name that has a Runtime Pod, a Lease or
//!   active Runs. A slot holds the Pod's record, its Lease, and the usage and labels of the
//!   active Runs assigned to that Pod name. Usage is adjusted incrementally by every Run
//!   event, so reading it is O(1).
//! - per (namespace, runtime) a [`Scope`]: its Runtime Pods in name order, a label index
//!   (label key -> value -> Pod -> number of active Runs) over the active Runs on those Pods
//!   for required-affinity lookups, and the Pending Runs whose `spec.runtime` names it.
//!
//! Usage is keyed by Pod name, not by which Runtime the Run names, because capacity belongs
//! to the Pod: every active Run assigned to a Pod name counts against that Pod, even one whose
//! Pod is not (yet, or any more) observed, so a Pod that reappears under the same name never
//! looks emptier than runtimed will find it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

mod layout;
mod record;
mod wakeup;

pub(in crate::scheduler::framework) use layout::{Interner, NamespaceIndex, Scope, Slot, SlotId};
pub use layout::{Load, PendingRun};
#[cfg(any(test, feature = "testing"))]
pub use record::required_anti_affinity;
pub use record::{ActiveRun, CountedRequest, LeaseRecord, PodRecord, Usage};
pub use wakeup::{Changes, PodRef, RunChange, ScopeRef, WakeSource, Wakeup};

use crate::api::{Run, RunPhase};
use crate::scheduler::framework::types::{Heartbeat, Observed, QueueOrder, RunKey};

/// Why a Runtime Pod counts as lost for a Run on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodLoss {
    /// No Pod of that name any more.
    Gone,
    /// A Pod of that name with another UID: the Run's Pod is gone.
    Replaced,
    /// The Pod is being deleted.
    Terminating,
    /// runtimed's heartbeat has been stale or missing for longer than the grace period.
    HeartbeatStale,
}

/// An active Run on a lost Runtime Pod (see [`Index::lost_runs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostRun {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub pod: String,
    /// runtimed had claimed it (Running or Ready): it is failed; otherwise it is placed again.
    pub admitted: bool,
    pub why: PodLoss,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// Phase Pending: indexed for wakeups.
    Pending,
    /// Scheduled, Running or Ready with `status.assignedPod`: consumes capacity on that slot.
    Active(SlotId),
    /// Scheduled, Running or Ready without `status.assignedPod` (a foreign or broken writer): neither
    /// Pending nor consuming capacity, but not over either; recorded so that an assumption
    /// for it is kept.
    Unassigned,
    /// Terminal: nothing is kept.
    Inactive,
}

#[derive(Debug, Clone)]
struct RunRecord {
    name: String,
    runtime: String,
    placement: Placement,
    order: QueueOrder,
}

/// The index. See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct Index {
    namespaces: HashMap<String, NamespaceIndex>,
    runs: HashMap<RunKey, RunRecord>,
    interner: Interner,
    /// Runtime names per namespace: a Run of a missing Runtime is told so.
    runtimes: HashMap<String, BTreeSet<String>>,
}

impl Index {
    pub fn new() -> Self {
        Self::default()
    }

    pub(in crate::scheduler::framework) fn namespace(
        &self,
        namespace: &str,
    ) -> Option<&NamespaceIndex> {
        self.namespaces.get(namespace)
    }

    pub(in crate::scheduler::framework) fn interner(&self) -> &Interner {
        &self.interner
    }

    // ----- Pods -------------------------------------------------------------------------

    /// Records a Pod. A Pod without the `kruntimes.io/runtime` label is not a Runtime Pod and
    /// is treated as deleted (it may have lost the label).
    pub fn apply_pod(&mut self, pod: &Pod) -> Vec<Wakeup> {
        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let Some(record) = PodRecord::of(pod) else {
            return self.delete_pod(&namespace, &name);
        };
        let ns = self.namespaces.entry(namespace.clone()).or_default();
        let id = ns.slot_id_or_insert(&name);
        let old = ns.slot(id).pod.clone();
        if old.as_ref() == Some(&record) {
            return Vec::new();
        }
        let runtime = record.runtime.clone();
        let moved = old.as_ref().is_none_or(|o| o.runtime != runtime);
        if moved && let Some(old) = &old {
            ns.detach(id, &old.runtime);
        }
        let slot = ns.slot_mut(id);
        slot.pod = Some(record);
        slot.rebuild_load(&mut self.interner);
        slot.refresh_hot();
        if moved {
            ns.attach(id, &runtime);
        }
        let mut runtimes = vec![runtime];
        if let Some(old) = old
            && old.runtime != runtimes[0]
        {
            runtimes.push(old.runtime);
        }
        runtimes
            .into_iter()
            .map(|runtime| Wakeup {
                namespace: namespace.clone(),
                runtime,
                source: WakeSource::RuntimePod,
                pod: None,
            })
            .collect()
    }

    /// Forgets a Pod. Usage of Runs still assigned to its name is kept (they still hold it).
    pub fn delete_pod(&mut self, namespace: &str, name: &str) -> Vec<Wakeup> {
        let Some(ns) = self.namespaces.get_mut(namespace) else {
            return Vec::new();
        };
        let Some(id) = ns.slot_id(name) else {
            return Vec::new();
        };
        let Some(runtime) = ns.runtime_of(id).map(str::to_string) else {
            return Vec::new();
        };
        ns.detach(id, &runtime);
        let slot = ns.slot_mut(id);
        slot.pod = None;
        slot.hot.load.clear();
        slot.refresh_hot();
        ns.gc(id);
        self.gc_namespace(namespace);
        vec![Wakeup {
            namespace: namespace.to_string(),
            runtime,
            source: WakeSource::RuntimePod,
            pod: None,
        }]
    }

    /// Replaces every Pod with `pods` (after a watch relist): Pods not in the list are deleted.
    pub fn reset_pods(&mut self, pods: &[Pod]) -> Vec<Wakeup> {
        self.reset_with(pods, |s| s.pod.is_some(), Self::delete_pod, Self::apply_pod)
    }

    /// A relist of one kind of object: deletes what `held` says is recorded but is no longer
    /// listed, then applies every listed object, and merges the wakeups.
    fn reset_with<K: ResourceExt>(
        &mut self,
        objects: &[K],
        held: fn(&Slot) -> bool,
        delete: impl Fn(&mut Self, &str, &str) -> Vec<Wakeup>,
        apply: impl Fn(&mut Self, &K) -> Vec<Wakeup>,
    ) -> Vec<Wakeup> {
        let keep: HashSet<(String, String)> = objects
            .iter()
            .map(|o| (o.namespace().unwrap_or_default(), o.name_any()))
            .collect();
        let gone: Vec<(String, String)> = self
            .namespaces
            .iter()
            .flat_map(|(ns, idx)| {
                idx.slots
                    .iter()
                    .flatten()
                    .filter(|s| held(s))
                    .map(move |s| (ns.clone(), s.name.clone()))
            })
            .filter(|k| !keep.contains(k))
            .collect();
        let mut wakeups = BTreeSet::new();
        for (ns, name) in gone {
            wakeups.extend(delete(self, &ns, &name));
        }
        for object in objects {
            wakeups.extend(apply(self, object));
        }
        wakeups.into_iter().collect()
    }

    pub fn pod(&self, namespace: &str, name: &str) -> Option<&PodRecord> {
        let ns = self.namespaces.get(namespace)?;
        ns.slot(ns.slot_id(name)?).pod.as_ref()
    }

    /// Every (namespace, runtime) with Runtime Pods or Pending Runs, in no particular order.
    pub fn scopes(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.namespaces.iter().flat_map(|(ns, index)| {
            index
                .scopes
                .keys()
                .map(move |runtime| (ns.as_str(), runtime.as_str()))
        })
    }

    /// Names of the Runtime Pods of (namespace, runtime), in name order.
    pub fn runtime_pods(&self, namespace: &str, runtime: &str) -> Vec<String> {
        self.namespaces
            .get(namespace)
            .and_then(|ns| ns.scopes.get(runtime))
            .map(|s| s.pods.keys().cloned().collect())
            .unwrap_or_default()
    }

    // ----- Runtimes ---------------------------------------------------------------------

    /// Records a Runtime. Its Pending Runs are rechecked when it appears (their message
    /// changes from "not found").
    pub fn apply_runtime(&mut self, namespace: &str, name: &str) -> Option<ScopeRef> {
        let known = self.runtimes.entry(namespace.to_string()).or_default();
        known
            .insert(name.to_string())
            .then(|| ScopeRef::new(namespace, name))
    }

    /// Forgets a deleted Runtime.
    pub fn delete_runtime(&mut self, namespace: &str, name: &str) -> Option<ScopeRef> {
        let known = self.runtimes.get_mut(namespace)?;
        let removed = known.remove(name);
        if known.is_empty() {
            self.runtimes.remove(namespace);
        }
        removed.then(|| ScopeRef::new(namespace, name))
    }

    /// Replaces every Runtime (after a watch relist); returns the scopes that changed.
    pub fn reset_runtimes<'a>(
        &mut self,
        runtimes: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Vec<ScopeRef> {
        let mut listed: HashMap<String, BTreeSet<String>> = HashMap::new();
        for (namespace, name) in runtimes {
            listed
                .entry(namespace.to_string())
                .or_default()
                .insert(name.to_string());
        }
        let mut changed = Vec::new();
        for (namespace, names) in &self.runtimes {
            let now = listed.get(namespace);
            changed.extend(
                names
                    .iter()
                    .filter(|n| !now.is_some_and(|l| l.contains(*n)))
                    .map(|n| ScopeRef::new(namespace, n)),
            );
        }
        for (namespace, names) in &listed {
            let before = self.runtimes.get(namespace);
            changed.extend(
                names
                    .iter()
                    .filter(|n| !before.is_some_and(|b| b.contains(*n)))
                    .map(|n| ScopeRef::new(namespace, n)),
            );
        }
        self.runtimes = listed;
        changed
    }

    /// Whether a Runtime of that name exists in the namespace.
    pub fn runtime_exists(&self, namespace: &str, name: &str) -> bool {
        self.runtimes
            .get(namespace)
            .is_some_and(|names| names.contains(name))
    }

    // ----- Leases -----------------------------------------------------------------------

    /// Records a heartbeat Lease observed at `now` (see [`LeaseRecord::observe`]). Wakes the
    /// Pod's Runtime when availability may have turned on: a first Lease, a new holder or
    /// duration, or a renewal seen after the previous term had lapsed. Ordinary renewals wake
    /// nobody.
    pub fn apply_lease(&mut self, lease: &Lease, now: Timestamp) -> Vec<Wakeup> {
        let namespace = lease.namespace().unwrap_or_default();
        let name = lease.name_any();
        let ns = self.namespaces.entry(namespace.clone()).or_default();
        let id = ns.slot_id_or_insert(&name);
        let slot = ns.slot_mut(id);
        let record = LeaseRecord::observe(lease, now, slot.lease.as_ref());
        let old = slot.lease.replace(record.clone());
        slot.lease_gone_at = None;
        slot.refresh_hot();
        let relevant = match &old {
            None => true,
            Some(old) => {
                old.holder != record.holder
                    || old.duration_seconds != record.duration_seconds
                    || (old.renew_time != record.renew_time
                        && old.expires_at.is_none_or(|expired| expired <= now))
            }
        };
        match ns.runtime_of(id) {
            Some(runtime) if relevant => vec![Wakeup {
                namespace,
                runtime: runtime.to_string(),
                source: WakeSource::RuntimePod,
                pod: None,
            }],
            _ => Vec::new(),
        }
    }

    /// Forgets a Lease deleted (or found missing) at `now`.
    pub fn delete_lease(&mut self, namespace: &str, name: &str, now: Timestamp) -> Vec<Wakeup> {
        let Some(ns) = self.namespaces.get_mut(namespace) else {
            return Vec::new();
        };
        let Some(id) = ns.slot_id(name) else {
            return Vec::new();
        };
        let slot = ns.slot_mut(id);
        if slot.lease.take().is_none() {
            return Vec::new();
        }
        slot.lease_gone_at = Some(now);
        slot.refresh_hot();
        let wake = ns.runtime_of(id).map(|runtime| Wakeup {
            namespace: namespace.to_string(),
            runtime: runtime.to_string(),
            source: WakeSource::RuntimePod,
            pod: None,
        });
        ns.gc(id);
        self.gc_namespace(namespace);
        wake.into_iter().collect()
    }

    /// Replaces every Lease with `leases` (after a watch relist at `now`).
    pub fn reset_leases(&mut self, leases: &[Lease], now: Timestamp) -> Vec<Wakeup> {
        self.reset_with(
            leases,
            |s| s.lease.is_some(),
            |index, ns, name| index.delete_lease(ns, name, now),
            |index, lease| index.apply_lease(lease, now),
        )
    }

    pub fn lease(&self, namespace: &str, name: &str) -> Option<&LeaseRecord> {
        let ns = self.namespaces.get(namespace)?;
        ns.slot(ns.slot_id(name)?).lease.as_ref()
    }

    // ----- Runs -------------------------------------------------------------------------

    /// Records a Run: adjusts the usage and labels of its Pod when it joins, changes or leaves
    /// the active set, and the Pending index when it becomes or stops being Pending.
    pub fn apply_run(&mut self, run: &Run) -> RunChange {
        let key = RunKey::of(run);
        let name = run.name_any();
        let runtime = run.spec.runtime.clone();
        let active = run.active_pod().map(|pod| (pod, ActiveRun::of(run)));
        let pending = active.is_none() && run.phase() == RunPhase::Pending;
        let unassigned = active.is_none() && !pending && !run.phase().is_terminal();

        // Unchanged active or Pending Runs (status churn) cost one lookup and change nothing.
        if let Some(old) = self.runs.get(&key)
            && old.name == name
            && old.runtime == runtime
        {
            match (old.placement, &active) {
                (Placement::Active(id), Some((pod, new))) => {
                    let ns = &self.namespaces[&key.namespace];
                    let slot = ns.slot(id);
                    if slot.name == *pod && slot.active.get(&key.uid) == Some(new) {
                        return RunChange::default();
                    }
                }
                (Placement::Pending, None) if pending => {
                    // Status churn: keep the stored object unless what a cycle reads of it
                    // (spec, labels) changed.
                    self.refresh_pending(&key, &runtime, run);
                    return RunChange::default();
                }
                (Placement::Unassigned, None) if unassigned => return RunChange::default(),
                (Placement::Inactive, None) if !pending && !unassigned => {
                    return RunChange::default();
                }
                _ => {}
            }
        }

        let old = self.detach_run(&key);
        let mut change = RunChange::default();
        let placement = match active {
            Some((pod, new)) => {
                let ns = self.namespaces.entry(key.namespace.clone()).or_default();
                let id = ns.slot_id_or_insert(pod);
                let pod_ref = PodRef {
                    namespace: key.namespace.clone(),
                    runtime: ns.runtime_of(id).unwrap_or(&runtime).to_string(),
                    pod: pod.to_string(),
                };
                match &old {
                    Some((old_ref, old_run)) if old_ref.pod == pod => {
                        if old_run.request != new.request {
                            change.released.push(old_ref.clone());
                        }
                        if !old_run.same_targets(&new) {
                            change.targets_changed = Some(pod_ref);
                        }
                    }
                    other => {
                        if let Some((old_ref, _)) = other {
                            change.released.push(old_ref.clone());
                        }
                        change.targets_changed = Some(pod_ref);
                    }
                }
                ns.add_active(id, &key.uid, new, &self.interner);
                Placement::Active(id)
            }
            None => {
                if let Some((old_ref, _)) = old {
                    change.released.push(old_ref.clone());
                    change.targets_changed = Some(old_ref);
                }
                if pending {
                    let ns = self.namespaces.entry(key.namespace.clone()).or_default();
                    ns.scopes
                        .entry(runtime.clone())
                        .or_default()
                        .pending
                        .insert(QueueOrder::of(run), PendingRun::of(run));
                    Placement::Pending
                } else if unassigned {
                    Placement::Unassigned
                } else {
                    Placement::Inactive
                }
            }
        };
        if placement == Placement::Inactive {
            // Terminal Runs are the bulk of history: keep nothing for them.
            self.gc_namespace(&key.namespace);
        } else {
            self.runs.insert(
                key,
                RunRecord {
                    name,
                    runtime,
                    placement,
                    order: QueueOrder::of(run),
                },
            );
        }
        change
    }

    /// Forgets a deleted Run.
    pub fn delete_run(&mut self, namespace: &str, uid: &str) -> RunChange {
        let key = RunKey::new(namespace, uid);
        let mut change = RunChange::default();
        if let Some((pod_ref, _)) = self.detach_run(&key) {
            change.released.push(pod_ref.clone());
            change.targets_changed = Some(pod_ref);
        }
        self.gc_namespace(namespace);
        change
    }

    /// Replaces every Run with `runs` (after a watch relist).
    pub fn reset_runs(&mut self, runs: &[Run]) -> Vec<RunChange> {
        let keep: HashSet<RunKey> = runs.iter().map(RunKey::of).collect();
        let gone: Vec<RunKey> = self
            .runs
            .keys()
            .filter(|k| !keep.contains(*k))
            .cloned()
            .collect();
        let mut changes: Vec<RunChange> = gone
            .iter()
            .map(|k| self.delete_run(&k.namespace, &k.uid))
            .collect();
        changes.extend(runs.iter().map(|r| self.apply_run(r)));
        changes.retain(|c| *c != RunChange::default());
        changes
    }

    /// Removes the Run's record and its contributions; returns its old active placement.
    fn detach_run(&mut self, key: &RunKey) -> Option<(PodRef, ActiveRun)> {
        let old = self.runs.remove(key)?;
        let ns = self.namespaces.get_mut(&key.namespace)?;
        match old.placement {
            Placement::Pending => {
                if let Some(scope) = ns.scopes.get_mut(&old.runtime) {
                    scope.pending.remove(&old.order);
                }
                ns.gc_scope(&old.runtime);
                None
            }
            Placement::Active(id) => {
                let run = ns.remove_active(id, &key.uid, &self.interner)?;
                let pod_ref = PodRef {
                    namespace: key.namespace.clone(),
                    runtime: ns.runtime_of(id).unwrap_or(&old.runtime).to_string(),
                    pod: ns.slot(id).name.clone(),
                };
                ns.gc(id);
                Some((pod_ref, run))
            }
            Placement::Unassigned | Placement::Inactive => None,
        }
    }

    fn gc_namespace(&mut self, namespace: &str) {
        if self
            .namespaces
            .get(namespace)
            .is_some_and(|ns| ns.by_name.is_empty() && ns.scopes.is_empty())
        {
            self.namespaces.remove(namespace);
        }
    }

    /// How the index last observed the Run.
    pub fn observed(&self, key: &RunKey) -> Observed<'_> {
        let Some(record) = self.runs.get(key) else {
            return Observed::Absent;
        };
        match record.placement {
            Placement::Pending => Observed::Pending,
            Placement::Active(id) => {
                Observed::Active(&self.namespaces[&key.namespace].slot(id).name)
            }
            Placement::Unassigned => Observed::Unassigned,
            Placement::Inactive => Observed::Inactive,
        }
    }

    /// Names of the Pending Runs of (namespace, runtime), in queue order.
    pub fn pending_runs(&self, namespace: &str, runtime: &str) -> Vec<String> {
        self.pending(namespace, runtime)
            .map(|(_, p)| p.name.clone())
            .collect()
    }

    /// The Pending Runs of (namespace, runtime), in queue order (creation time, then UID).
    pub fn pending<'a>(
        &'a self,
        namespace: &str,
        runtime: &str,
    ) -> impl DoubleEndedIterator<Item = (&'a QueueOrder, &'a PendingRun)> + 'a {
        self.namespaces
            .get(namespace)
            .and_then(|ns| ns.scopes.get(runtime))
            .into_iter()
            .flat_map(|s| s.pending.iter())
    }

    /// The Pending Runs of (namespace, runtime) that come before `order` in its queue, oldest
    /// first.
    pub fn pending_before<'a>(
        &'a self,
        namespace: &str,
        runtime: &str,
        order: &QueueOrder,
    ) -> impl Iterator<Item = (&'a QueueOrder, &'a PendingRun)> + 'a {
        let order = order.clone();
        self.namespaces
            .get(namespace)
            .and_then(|ns| ns.scopes.get(runtime))
            .into_iter()
            .flat_map(move |s| s.pending.range(..order.clone()))
    }

    /// The Pending Run at `order` in (namespace, runtime)'s queue.
    pub fn pending_entry(
        &self,
        namespace: &str,
        runtime: &str,
        order: &QueueOrder,
    ) -> Option<&PendingRun> {
        self.namespaces
            .get(namespace)?
            .scopes
            .get(runtime)?
            .pending
            .get(order)
    }

    /// The Runtime and queue place of a Run observed Pending; `None` otherwise.
    pub fn queued(&self, key: &RunKey) -> Option<(&str, &QueueOrder)> {
        let record = self.runs.get(key)?;
        (record.placement == Placement::Pending).then_some((record.runtime.as_str(), &record.order))
    }

    /// Where the Run stands in the queue: its order key, while it is indexed.
    pub fn queue_order(&self, key: &RunKey) -> Option<&QueueOrder> {
        self.runs.get(key).map(|r| &r.order)
    }

    /// Replaces the stored object of a Pending Run when what a cycle reads of it changed
    /// (spec, labels, or a deletion: a Run being deleted no longer waits for placement).
    fn refresh_pending(&mut self, key: &RunKey, runtime: &str, run: &Run) {
        let Some(record) = self.runs.get(key) else {
            return;
        };
        let Some(entry) = self
            .namespaces
            .get_mut(&key.namespace)
            .and_then(|ns| ns.scopes.get_mut(runtime))
            .and_then(|s| s.pending.get_mut(&record.order))
        else {
            return;
        };
        let old = &entry.run;
        if old.metadata.generation != run.metadata.generation
            || old.metadata.labels != run.metadata.labels
            || old.metadata.deletion_timestamp != run.metadata.deletion_timestamp
            || old.spec.affinity != run.spec.affinity
        {
            *entry = PendingRun::of(run);
        }
    }

    /// Usage of the active Runs assigned to `pod`.
    pub fn usage(&self, namespace: &str, pod: &str) -> Option<&Usage> {
        let ns = self.namespaces.get(namespace)?;
        Some(&ns.slot(ns.slot_id(pod)?).usage)
    }

    /// Active Runs assigned to `pod`, by UID.
    pub fn active_runs(&self, namespace: &str, pod: &str) -> Option<&BTreeMap<String, ActiveRun>> {
        let ns = self.namespaces.get(namespace)?;
        Some(&ns.slot(ns.slot_id(pod)?).active)
    }
    // ----- Lifecycle --------------------------------------------------------------------

    /// The active Runs whose Runtime Pod is lost at `now`, with why (see [`PodLoss`]):
    /// - the Pod is gone, or replaced by another of the same name (other UID): every Run;
    /// - the Pod is terminating: unclaimed Runs at once (runtimed stops claiming on SIGTERM);
    ///   claimed ones only once its heartbeat has been stale for longer than `grace`, since
    ///   runtimed reports those itself while it lives;
    /// - the Pod's heartbeat has been stale, or its Lease missing, for longer than `grace` (a
    ///   lost node): every Run.
    ///
    /// How long a Pod has been without a Lease is counted from when this index first saw it
    /// without one, so the call records that instant; otherwise it changes nothing. Staleness
    /// counts only from `observed_since` on: the instant from which the caller's watches of
    /// Pods and Leases could be trusted (an API-server outage hides renewals; a Pod gone or
    /// replaced is a definite event and does not wait).
    pub fn lost_runs(
        &mut self,
        now: Timestamp,
        grace: SignedDuration,
        observed_since: Timestamp,
    ) -> Vec<LostRun> {
        let mut lost = Vec::new();
        for (namespace, ns) in &mut self.namespaces {
            for slot in ns.slots.iter_mut().flatten() {
                if slot.active.is_empty() {
                    continue;
                }
                let stale_since = match slot.lease.as_ref().and_then(|l| l.expires_at) {
                    Some(at) => at,
                    None => *slot.lease_gone_at.get_or_insert(now),
                }
                .max(observed_since);
                let stale_too_long = stale_since
                    .checked_add(grace)
                    .is_ok_and(|deadline| deadline <= now);
                for (uid, run) in &slot.active {
                    let why = match &slot.pod {
                        None => Some(PodLoss::Gone),
                        Some(pod) if run.pod_uid.as_ref().is_some_and(|u| *u != pod.uid) => {
                            Some(PodLoss::Replaced)
                        }
                        Some(pod) if pod.deleting && (!run.admitted || stale_too_long) => {
                            Some(PodLoss::Terminating)
                        }
                        Some(_) if stale_too_long => Some(PodLoss::HeartbeatStale),
                        Some(_) => None,
                    };
                    if let Some(why) = why {
                        lost.push(LostRun {
                            namespace: namespace.clone(),
                            name: run.name.clone(),
                            uid: uid.clone(),
                            pod: slot.name.clone(),
                            admitted: run.admitted,
                            why,
                        });
                    }
                }
            }
        }
        lost.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        lost
    }

    /// Runtimes whose Pods' heartbeats expired in `(after, until]`: their Pending Runs are
    /// woken at the expiry instant, not at the next safety requeue.
    pub fn expired_between(&self, after: Timestamp, until: Timestamp) -> Vec<Wakeup> {
        let mut wakeups = BTreeSet::new();
        for (namespace, ns) in &self.namespaces {
            for slot in ns.slots.iter().flatten() {
                if let (Some(pod), Heartbeat::Expires(at)) = (&slot.pod, slot.hot.heartbeat)
                    && after < at
                    && at <= until
                {
                    wakeups.insert(Wakeup {
                        namespace: namespace.clone(),
                        runtime: pod.runtime.clone(),
                        source: WakeSource::RuntimePod,
                        pod: None,
                    });
                }
            }
        }
        wakeups.into_iter().collect()
    }

    /// The earliest heartbeat expiry after `now`, for the expiry timer.
    pub fn next_expiry_after(&self, now: Timestamp) -> Option<Timestamp> {
        self.namespaces
            .values()
            .flat_map(|ns| ns.slots.iter().flatten())
            .filter(|slot| slot.pod.is_some())
            .filter_map(|slot| match slot.hot.heartbeat {
                Heartbeat::Expires(at) if at > now => Some(at),
                _ => None,
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    fn idx(pods: &[PodBuilder], runs: &[RunBuilder]) -> Index {
        let mut index = Index::new();
        for p in pods {
            index.apply_pod(&p.build());
            if let Some(l) = p.build_lease() {
                index.apply_lease(&l, NOW);
            }
        }
        for r in runs {
            index.apply_run(&r.build());
        }
        index
    }

    #[test]
    fn only_pods_with_the_runtime_label_are_runtime_pods() {
        let mut index = Index::new();
        let mut plain = pod("web").build();
        plain.metadata.labels = None;
        assert!(index.apply_pod(&plain).is_empty());
        assert!(index.pod(NS, "web").is_none());
        index.apply_pod(&pod("p1").build());
        assert_eq!(index.runtime_pods(NS, RUNTIME), ["p1"]);
        // Losing the label makes it a non-Runtime Pod again.
        let mut unlabelled = pod("p1").build();
        unlabelled.metadata.labels = None;
        let wake = index.apply_pod(&unlabelled);
        assert_eq!(wake.len(), 1);
        assert!(index.runtime_pods(NS, RUNTIME).is_empty());
    }

    #[test]
    fn a_malformed_capacity_annotation_is_recorded_not_fatal() {
        let index = idx(&[pod("p1").capacity_strs(&[("runs", "two")])], &[]);
        let record = index.pod(NS, "p1").unwrap();
        let err = record.capacity.as_ref().unwrap_err();
        assert!(
            err.contains("annotation kruntimes.io/capacity.runs"),
            "{err}"
        );
    }

    #[test]
    fn active_runs_adjust_usage_incrementally_and_release_it_when_they_leave() {
        let mut index = idx(&[pod("p1").capacity(&[("runs", 4)])], &[]);
        let a = run("a").requests(&[("example.com/gpu", 1)]).on("p1");
        let b = run("b").on("p1");
        index.apply_run(&a.build());
        index.apply_run(&b.build());
        let usage = index.usage(NS, "p1").unwrap();
        assert_eq!(usage.get("runs"), 2);
        assert_eq!(usage.get("example.com/gpu"), 1);

        let change = index.apply_run(&a.clone().succeeded().build());
        assert_eq!(
            change.released,
            [PodRef {
                namespace: NS.into(),
                runtime: RUNTIME.into(),
                pod: "p1".into()
            }]
        );
        assert_eq!(change.wakeups().len(), 1);
        assert_eq!(change.wakeups()[0].source.as_str(), "capacity_released");
        let usage = index.usage(NS, "p1").unwrap();
        assert_eq!(usage.get("runs"), 1);
        assert_eq!(usage.get("example.com/gpu"), 0);

        let change = index.delete_run(NS, &b.build().uid().unwrap());
        assert_eq!(change.released.len(), 1);
        assert_eq!(index.usage(NS, "p1").unwrap().get("runs"), 0);
    }

    #[test]
    fn repeated_status_updates_of_an_active_run_change_nothing() {
        let mut index = idx(&[pod("p1")], &[]);
        let a = run("a").labels(&[("cohort", "x")]).on("p1");
        let first = index.apply_run(&a.build());
        assert!(first.targets_changed.is_some());
        assert_eq!(index.apply_run(&a.build()), RunChange::default());
        assert_eq!(
            index.apply_run(&a.clone().running().build()),
            RunChange::default()
        );
        assert_eq!(index.usage(NS, "p1").unwrap().get("runs"), 1);
    }

    #[test]
    fn an_active_run_with_an_unparseable_request_exhausts_that_resource() {
        let mut index = idx(
            &[pod("p1").capacity(&[("runs", 4), ("example.com/gpu", 8)])],
            &[],
        );
        let bad = run("bad")
            .request_strs(&[("example.com/gpu", "1.5")])
            .on("p1");
        index.apply_run(&bad.build());
        let usage = index.usage(NS, "p1").unwrap();
        assert_eq!(usage.get("example.com/gpu"), u64::MAX);
        assert_eq!(usage.get("runs"), 1, "runs still defaults to 1");
        index.apply_run(&bad.succeeded().build());
        assert_eq!(index.usage(NS, "p1").unwrap().get("example.com/gpu"), 0);
    }

    #[test]
    fn a_run_recreated_under_the_same_name_is_a_different_run() {
        let mut index = idx(&[pod("p1").capacity(&[("runs", 4)])], &[run("a").on("p1")]);
        index.apply_run(&run("a").uid("uid-a-2").build());
        assert_eq!(
            index.usage(NS, "p1").unwrap().get("runs"),
            1,
            "the old Run still holds p1"
        );
        assert_eq!(index.pending_runs(NS, RUNTIME), ["a"]);
        index.delete_run(NS, "uid-a");
        assert_eq!(index.usage(NS, "p1").unwrap().get("runs"), 0);
        assert_eq!(
            index.pending_runs(NS, RUNTIME),
            ["a"],
            "the new Run is still Pending"
        );
    }

    #[test]
    fn pending_runs_are_indexed_by_namespace_and_runtime() {
        let mut index = idx(
            &[],
            &[
                run("b"),
                run("a"),
                run("c").runtime("other"),
                run("d").on("p1"),
                run("e").ns("elsewhere"),
            ],
        );
        assert_eq!(index.pending_runs(NS, RUNTIME), ["a", "b"]);
        assert_eq!(index.pending_runs(NS, "other"), ["c"]);
        assert_eq!(index.pending_runs("elsewhere", RUNTIME), ["e"]);
        index.apply_run(&run("a").on("p1").build());
        assert_eq!(index.pending_runs(NS, RUNTIME), ["b"]);
        index.delete_run(NS, &run("b").build().uid().unwrap());
        assert!(index.pending_runs(NS, RUNTIME).is_empty());
    }

    #[test]
    fn pod_events_wake_only_on_scheduling_relevant_changes() {
        let mut index = Index::new();
        let p = pod("p1").capacity(&[("runs", 2)]);
        assert_eq!(index.apply_pod(&p.build()).len(), 1, "a new Pod wakes");
        assert!(
            index.apply_pod(&p.build()).is_empty(),
            "an identical Pod does not"
        );
        let wake = index.apply_pod(&p.clone().not_ready().build());
        assert_eq!(wake[0].source, WakeSource::RuntimePod);
        assert_eq!(
            index
                .apply_pod(&p.clone().capacity(&[("runs", 3)]).build())
                .len(),
            1
        );
        assert_eq!(index.delete_pod(NS, "p1").len(), 1);
        assert!(index.delete_pod(NS, "p1").is_empty());
    }

    #[test]
    fn lease_renewals_wake_only_when_the_heartbeat_may_have_come_back() {
        let mut index = Index::new();
        let p = pod("p1");
        index.apply_pod(&p.build());
        let uid = p.build().uid().unwrap();
        assert_eq!(
            index.apply_lease(&lease("p1", &uid, 0, 40), at(0)).len(),
            1,
            "first lease"
        );
        assert!(
            index
                .apply_lease(&lease("p1", &uid, 10, 40), at(10))
                .is_empty(),
            "renewal in term"
        );
        assert_eq!(
            index.apply_lease(&lease("p1", &uid, 60, 40), at(60)).len(),
            1,
            "renewal after lapse"
        );
        assert_eq!(
            index
                .apply_lease(&lease("p1", "other", 61, 40), at(61))
                .len(),
            1,
            "new holder"
        );
        assert_eq!(index.delete_lease(NS, "p1", at(62)).len(), 1);
    }

    #[test]
    fn usage_survives_its_pod_being_deleted_and_recreated() {
        let mut index = idx(&[pod("p1")], &[run("a").on("p1")]);
        index.delete_pod(NS, "p1");
        assert_eq!(index.usage(NS, "p1").unwrap().get("runs"), 1);
        index.apply_pod(&pod("p1").uid("new").build());
        assert_eq!(index.usage(NS, "p1").unwrap().get("runs"), 1);
        let labels = &index.namespace(NS).unwrap().scopes[RUNTIME].labels;
        assert!(labels.is_empty(), "run a has no labels");
    }

    #[test]
    fn the_label_index_follows_runs_and_pods_between_runtimes() {
        let mut index = idx(
            &[pod("p1"), pod("p2")],
            &[run("a").labels(&[("cohort", "x")]).on("p1")],
        );
        let count = |index: &Index, runtime: &str| {
            index
                .namespace(NS)
                .and_then(|ns| ns.scopes.get(runtime))
                .and_then(|s| s.labels.get("cohort"))
                .and_then(|v| v.get("x"))
                .map(|slots| slots.values().sum::<u32>())
                .unwrap_or(0)
        };
        assert_eq!(count(&index, RUNTIME), 1);
        // The Pod moves to another runtime: its Runs' labels move with it.
        index.apply_pod(&pod("p1").runtime("other").build());
        assert_eq!(count(&index, RUNTIME), 0);
        assert_eq!(count(&index, "other"), 1);
        // Labels change while active.
        let change = index.apply_run(&run("a").labels(&[("cohort", "y")]).on("p1").build());
        assert!(change.targets_changed.is_some());
        assert!(change.released.is_empty());
        assert_eq!(count(&index, "other"), 0);
        index.apply_run(&run("a").succeeded().build());
        let scope = &index.namespace(NS).unwrap().scopes["other"];
        assert!(scope.labels.is_empty());
    }

    #[test]
    fn reset_runs_deletes_runs_missing_from_the_relist() {
        let mut index = idx(&[pod("p1")], &[run("a").on("p1"), run("b")]);
        let changes = index.reset_runs(&[run("c").build()]);
        assert_eq!(changes.iter().map(|c| c.released.len()).sum::<usize>(), 1);
        assert_eq!(index.pending_runs(NS, RUNTIME), ["c"]);
        assert_eq!(index.usage(NS, "p1").unwrap().get("runs"), 0);
    }

    // ----- lifecycle ------------------------------------------------------------------------

    const GRACE: SignedDuration = SignedDuration::from_secs(40);

    fn lost(index: &mut Index, now: Timestamp) -> Vec<(String, bool, PodLoss)> {
        index
            .lost_runs(now, GRACE, NOW)
            .into_iter()
            .map(|l| (l.name, l.admitted, l.why))
            .collect()
    }

    #[test]
    fn runs_on_a_healthy_pod_are_not_lost() {
        let mut index = idx(&[pod("p1").capacity(&[("runs", 4)])], &[]);
        index.apply_run(&run("s").on("p1").build());
        index.apply_run(&run("r").on("p1").running().build());
        assert_eq!(lost(&mut index, NOW), []);
    }

    #[test]
    fn a_gone_or_replaced_pod_loses_every_run_at_once() {
        // Bound to p1's default incarnation, as Bind writes it.
        let runs = [
            run("s").on("p1").pod_uid("pod-uid-p1"),
            run("r").on("p1").pod_uid("pod-uid-p1").running(),
        ];
        let mut gone = idx(&[], &runs);
        assert_eq!(
            lost(&mut gone, NOW),
            [
                ("r".to_string(), true, PodLoss::Gone),
                ("s".to_string(), false, PodLoss::Gone)
            ]
        );
        let mut replaced = idx(&[pod("p1").uid("new-incarnation")], &runs);
        assert_eq!(
            lost(&mut replaced, NOW),
            [
                ("r".to_string(), true, PodLoss::Replaced),
                ("s".to_string(), false, PodLoss::Replaced)
            ]
        );
    }

    #[test]
    fn a_terminating_pod_loses_unclaimed_runs_at_once_and_running_ones_after_the_grace() {
        let runs = [run("s").on("p1"), run("r").on("p1").running()];
        let mut index = idx(&[pod("p1").deleting()], &runs);
        // runtimed reports the Running one itself while its heartbeat lives.
        assert_eq!(
            lost(&mut index, NOW),
            [("s".to_string(), false, PodLoss::Terminating)]
        );
        // The heartbeat (renewed 5 s ago, 40 s) lapses at +35 s; the grace ends at +75 s.
        assert_eq!(lost(&mut index, at(74)).len(), 1);
        assert_eq!(
            lost(&mut index, at(75)),
            [
                ("r".to_string(), true, PodLoss::Terminating),
                ("s".to_string(), false, PodLoss::Terminating)
            ]
        );
    }

    #[test]
    fn a_heartbeat_stale_longer_than_the_grace_loses_the_pods_runs() {
        let mut index = idx(&[pod("p1")], &[run("r").on("p1").running()]);
        assert_eq!(lost(&mut index, at(74)), [], "within lease + grace");
        assert_eq!(
            lost(&mut index, at(75)),
            [("r".to_string(), true, PodLoss::HeartbeatStale)]
        );
        // A renewal observed in time keeps it: the term restarts at the observation.
        let uid = pod("p1").build().uid().unwrap();
        index.apply_lease(&lease("p1", &uid, 70, 40), at(70));
        assert_eq!(lost(&mut index, at(149)), []);
    }

    #[test]
    fn a_missing_lease_counts_from_when_it_was_first_seen_missing() {
        let mut index = idx(&[pod("p1").no_lease()], &[run("r").on("p1").running()]);
        assert_eq!(
            lost(&mut index, at(10)),
            [],
            "first seen without a Lease at +10 s"
        );
        assert_eq!(lost(&mut index, at(49)), []);
        assert_eq!(
            lost(&mut index, at(50)),
            [("r".to_string(), true, PodLoss::HeartbeatStale)]
        );
        // A deleted Lease counts from the deletion.
        let mut index = idx(&[pod("p1")], &[run("r").on("p1").running()]);
        index.delete_lease(NS, "p1", at(5));
        assert_eq!(lost(&mut index, at(44)), []);
        assert_eq!(lost(&mut index, at(45)).len(), 1);
    }

    #[test]
    fn freshness_is_judged_by_the_observers_clock() {
        let uid = pod("p1").build().uid().unwrap();
        let mut index = idx(&[pod("p1").no_lease()], &[]);
        // runtimed's clock is 120 s behind: its renewTime is already "expired" when seen.
        index.apply_lease(&lease("p1", &uid, -120, 40), at(0));
        index.apply_lease(&lease("p1", &uid, -110, 40), at(10));
        assert_eq!(
            index.lease(NS, "p1").unwrap().expires_at,
            Some(at(50)),
            "a renewal seen at +10 s lasts 40 s from then, whatever its renewTime says"
        );
        // Ahead by 120 s: a renewal cannot last longer than 40 s from when it was seen.
        let mut index = idx(&[pod("p1").no_lease()], &[]);
        index.apply_lease(&lease("p1", &uid, 120, 40), at(0));
        assert_eq!(index.lease(NS, "p1").unwrap().expires_at, Some(at(40)));
        // An unchanged Lease (a relist) keeps its expiry.
        index.apply_lease(&lease("p1", &uid, 120, 40), at(30));
        assert_eq!(index.lease(NS, "p1").unwrap().expires_at, Some(at(40)));
    }

    #[test]
    fn expiries_wake_the_runtime_at_the_instant_and_name_the_next_one() {
        let index = idx(&[pod("p1"), pod("p2").lease_renewed_ago(20)], &[]);
        // p2 expires at +20 s, p1 (renewed 5 s ago) at +35 s.
        assert_eq!(index.next_expiry_after(NOW), Some(at(20)));
        assert_eq!(index.expired_between(NOW, at(19)), []);
        assert_eq!(
            index.expired_between(NOW, at(20)),
            [Wakeup {
                namespace: NS.into(),
                runtime: RUNTIME.into(),
                source: WakeSource::RuntimePod,
                pod: None,
            }]
        );
        assert_eq!(index.next_expiry_after(at(20)), Some(at(35)));
        assert_eq!(index.next_expiry_after(at(35)), None);
    }

    #[test]
    fn a_pod_chosen_for_scale_down_counts_as_terminating() {
        let mut marked = pod("p1").build();
        marked
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(crate::api::ANNOTATION_SCALE_DOWN.into(), "true".into());
        let mut index = Index::new();
        index.apply_pod(&marked);
        assert!(index.pod(NS, "p1").unwrap().deleting);
    }

    #[test]
    fn staleness_counts_only_from_when_the_watches_could_be_trusted() {
        let mut index = idx(&[pod("p1")], &[run("r").on("p1").running()]);
        // The heartbeat lapsed at +35 s, but the watches were broken until +60 s (an API
        // server outage hides renewals): the grace runs from +60 s.
        let lost = |index: &mut Index, now| index.lost_runs(now, GRACE, at(60)).len();
        assert_eq!(lost(&mut index, at(99)), 0);
        assert_eq!(lost(&mut index, at(100)), 1);
        // A Pod that is gone is lost at once, whatever the watches.
        let mut gone = idx(&[], &[run("r").on("p1").running()]);
        assert_eq!(gone.lost_runs(NOW, GRACE, at(60)).len(), 1);
    }
}
