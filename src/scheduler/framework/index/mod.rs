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
mod workspaces;

pub(in crate::scheduler::framework) use layout::{Interner, NamespaceIndex, Scope, Slot, SlotId};
pub use layout::{Load, PendingRun};
#[cfg(any(test, feature = "testing"))]
pub use record::required_anti_affinity;
pub use record::{ActiveRun, CountedRequest, LeaseRecord, PodRecord, Usage};
pub use wakeup::{Changes, PodRef, RunChange, ScopeRef, WakeSource, Wakeup, WorkspaceRef};
pub use workspaces::{WorkspaceEntry, WorkspaceRecord};

use crate::api::{PersistentWorkspace, Run, RunPhase};
use crate::scheduler::framework::priority::{MissingClass, PriorityClasses};
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
    /// `status.priority` was set when last observed: its order no longer follows its class.
    priority_recorded: bool,
    /// The PersistentWorkspace it names: a Pending Run counts as one of its users.
    workspace: Option<String>,
}

/// The index. See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct Index {
    namespaces: HashMap<String, NamespaceIndex>,
    runs: HashMap<RunKey, RunRecord>,
    interner: Interner,
    /// Runtime names per namespace: a Run of a missing Runtime is told so.
    runtimes: HashMap<String, BTreeSet<String>>,
    /// The cluster's PriorityClasses, which give Runs their priority.
    classes: PriorityClasses,
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
        let order = self.order_of(run);
        let active = run
            .active_pod()
            .map(|pod| (pod, ActiveRun::of(run, order.priority)));
        let pending = active.is_none() && run.phase() == RunPhase::Pending;
        let unassigned = active.is_none() && !pending && !run.phase().is_terminal();

        // Unchanged active or Pending Runs (status churn) cost one lookup and change nothing.
        if let Some(old) = self.runs.get(&key)
            && old.name == name
            && old.runtime == runtime
            && old.order == order
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
                    // Once recorded, status.priority orders it, not its class.
                    let recorded = run.status.as_ref().is_some_and(|s| s.priority.is_some());
                    if let Some(record) = self.runs.get_mut(&key) {
                        record.priority_recorded = recorded;
                    }
                    // Status churn: keep the stored object unless the Run itself (spec,
                    // metadata) changed.
                    return RunChange {
                        updated: self.refresh_pending(&key, &runtime, run),
                        ..RunChange::default()
                    };
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
                    if let Some(workspace) = run.workspace_name() {
                        ns.workspace_mut(workspace).pending.insert(key.uid.clone());
                    }
                    ns.scopes
                        .entry(runtime.clone())
                        .or_default()
                        .pending
                        .insert(order.clone(), PendingRun::of(run));
                    Placement::Pending
                } else if unassigned {
                    Placement::Unassigned
                } else {
                    Placement::Inactive
                }
            }
        };
        if placement == Placement::Inactive {
            // Terminal Runs are the bulk of history: keep nothing for them but, for a
            // workspace, when its last use ended.
            if let Some(workspace) = run.workspace_name()
                && let Some(at) = run.status.as_ref().and_then(|s| s.completion_time.as_ref())
            {
                let ns = self.namespaces.entry(key.namespace.clone()).or_default();
                ns.workspace_mut(workspace).finished(at.0);
            }
            self.gc_namespace(&key.namespace);
        } else {
            self.runs.insert(
                key,
                RunRecord {
                    name,
                    runtime,
                    placement,
                    order,
                    priority_recorded: run.status.as_ref().is_some_and(|s| s.priority.is_some()),
                    workspace: run.workspace_name().map(str::to_string),
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
                if let Some(workspace) = &old.workspace {
                    ns.workspace_mut(workspace).pending.remove(&key.uid);
                    ns.gc_workspace(workspace);
                }
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
        if self.namespaces.get(namespace).is_some_and(|ns| {
            ns.by_name.is_empty() && ns.scopes.is_empty() && ns.workspaces.is_empty()
        }) {
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
    /// Replaces the stored object of a Pending Run when anything but its status changed (as
    /// kube-scheduler tells a Pod update from status churn); returns whether it did.
    fn refresh_pending(&mut self, key: &RunKey, runtime: &str, run: &Run) -> bool {
        let Some(record) = self.runs.get(key) else {
            return false;
        };
        let Some(entry) = self
            .namespaces
            .get_mut(&key.namespace)
            .and_then(|ns| ns.scopes.get_mut(runtime))
            .and_then(|s| s.pending.get_mut(&record.order))
        else {
            return false;
        };
        let old = &entry.run;
        let updated = old.metadata.generation != run.metadata.generation
            || old.metadata.labels != run.metadata.labels
            || old.metadata.annotations != run.metadata.annotations
            || old.metadata.deletion_timestamp != run.metadata.deletion_timestamp
            || old.spec.affinity != run.spec.affinity;
        if updated {
            *entry = PendingRun::of(run);
        }
        updated
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
    // ----- Priority ---------------------------------------------------------------------

    /// The Run's place in its queue under the classes known now; a Run whose class is
    /// missing orders at priority 0 (its cycle tells it the class is missing).
    pub fn order_of(&self, run: &Run) -> QueueOrder {
        QueueOrder::of(run, self.classes.priority_of(run).unwrap_or(0))
    }

    /// The Run's priority, or the class it names that does not exist.
    pub fn priority_of(&self, run: &Run) -> Result<i32, MissingClass> {
        self.classes.priority_of(run)
    }

    pub fn priority_classes(&self) -> &PriorityClasses {
        &self.classes
    }

    /// Records a PriorityClass; returns the Pending Runs whose priority follows it (no
    /// recorded `status.priority`, and naming it or no class), each re-keyed to its new
    /// order: they look again (a Run that waited for the class finds it).
    pub fn apply_priority_class(
        &mut self,
        class: &k8s_openapi::api::scheduling::v1::PriorityClass,
    ) -> Vec<RunKey> {
        if !self.classes.apply(class) {
            return Vec::new();
        }
        self.reorder(Some(&class.name_any()))
    }

    pub fn delete_priority_class(&mut self, name: &str) -> Vec<RunKey> {
        if !self.classes.delete(name) {
            return Vec::new();
        }
        self.reorder(Some(name))
    }

    pub fn reset_priority_classes(
        &mut self,
        classes: &[k8s_openapi::api::scheduling::v1::PriorityClass],
    ) -> Vec<RunKey> {
        if !self.classes.reset(classes) {
            return Vec::new();
        }
        self.reorder(None)
    }

    /// Re-keys the Pending Runs whose priority follows class `changed` (every class when
    /// `None`; the global default may have moved, so Runs naming no class always count).
    fn reorder(&mut self, changed: Option<&str>) -> Vec<RunKey> {
        let affected: Vec<(RunKey, QueueOrder)> = self
            .runs
            .iter()
            .filter(|(_, r)| r.placement == Placement::Pending && !r.priority_recorded)
            .filter_map(|(key, r)| {
                let pending = self.namespaces[&key.namespace].scopes[&r.runtime]
                    .pending
                    .get(&r.order)?;
                let class = pending.run.spec.priority_class_name.as_deref();
                (changed.is_none() || class.is_none() || class == changed)
                    .then(|| (key.clone(), self.order_of(&pending.run)))
            })
            .collect();
        for (key, order) in &affected {
            let Some(record) = self.runs.get_mut(key) else {
                continue;
            };
            if record.order == *order {
                continue;
            }
            let old = std::mem::replace(&mut record.order, order.clone());
            let scope = self
                .namespaces
                .get_mut(&key.namespace)
                .and_then(|ns| ns.scopes.get_mut(&record.runtime))
                .expect("a Pending Run's scope exists");
            if let Some(entry) = scope.pending.remove(&old) {
                scope.pending.insert(order.clone(), entry);
            }
        }
        affected.into_iter().map(|(k, _)| k).collect()
    }

    // ----- PersistentWorkspaces ---------------------------------------------------------

    /// Records a PersistentWorkspace. Returns it when what a cycle reads of it changed (it
    /// appeared, or its Runtime, phase or bound Pod changed): the Runs that name it look
    /// again, whatever their Runtime.
    pub fn apply_workspace(&mut self, workspace: &PersistentWorkspace) -> Vec<WorkspaceRef> {
        let namespace = workspace.namespace().unwrap_or_default();
        let record = WorkspaceRecord::of(workspace);
        let ns = self.namespaces.entry(namespace.clone()).or_default();
        let entry = ns.workspace_mut(&workspace.name_any());
        let old = entry.record.replace(record.clone());
        // lastUsedTime, path and TTL are the lifecycle's: a cycle reads none of them, so
        // their writes (one per use) must not requeue the Runs that name it.
        if old
            .as_ref()
            .is_some_and(|o| o.placement() == record.placement())
        {
            return Vec::new();
        }
        vec![WorkspaceRef::new(&namespace, &workspace.name_any())]
    }

    /// Forgets a deleted PersistentWorkspace (its users stay counted).
    pub fn delete_workspace(&mut self, namespace: &str, name: &str) -> Vec<WorkspaceRef> {
        let Some(ns) = self.namespaces.get_mut(namespace) else {
            return Vec::new();
        };
        if ns
            .workspaces
            .get_mut(name)
            .and_then(|e| e.record.take())
            .is_none()
        {
            return Vec::new();
        }
        ns.gc_workspace(name);
        self.gc_namespace(namespace);
        vec![WorkspaceRef::new(namespace, name)]
    }

    /// Replaces every PersistentWorkspace with `workspaces` (after a watch relist).
    pub fn reset_workspaces(&mut self, workspaces: &[PersistentWorkspace]) -> Vec<WorkspaceRef> {
        let keep: HashSet<(String, String)> = workspaces
            .iter()
            .map(|w| (w.namespace().unwrap_or_default(), w.name_any()))
            .collect();
        let gone: Vec<(String, String)> = self
            .workspaces()
            .filter(|(ns, name, e)| {
                e.record.is_some() && !keep.contains(&(ns.to_string(), name.to_string()))
            })
            .map(|(ns, name, _)| (ns.to_string(), name.to_string()))
            .collect();
        let mut scopes = BTreeSet::new();
        for (ns, name) in gone {
            scopes.extend(self.delete_workspace(&ns, &name));
        }
        for workspace in workspaces {
            scopes.extend(self.apply_workspace(workspace));
        }
        scopes.into_iter().collect()
    }

    /// The workspace `name` of `namespace`: its record and users.
    pub fn workspace(&self, namespace: &str, name: &str) -> Option<&WorkspaceEntry> {
        self.namespaces.get(namespace)?.workspaces.get(name)
    }

    /// Every workspace name known (by object or by a Run using it), as (namespace, name).
    pub fn workspaces(&self) -> impl Iterator<Item = (&str, &str, &WorkspaceEntry)> + '_ {
        self.namespaces.iter().flat_map(|(ns, index)| {
            index
                .workspaces
                .iter()
                .map(move |(name, e)| (ns.as_str(), name.as_str(), e))
        })
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
mod tests;
