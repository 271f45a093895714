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
//!   for required-affinity lookups. Pending Runs live in the scheduling queue, not here.
//!
//! Usage is keyed by Pod name, not by which Runtime the Run names, because capacity belongs
//! to the Pod: every active Run assigned to a Pod name counts against that Pod, even one whose
//! Pod is not (yet, or any more) observed, so a Pod that reappears under the same name never
//! looks emptier than runtimed will find it.
//!
//! `Index` is one type over several files: Pods, Runtimes, Leases, PriorityClasses and
//! PersistentWorkspaces here, the Runs and their queues in `runs.rs`, lost Runs and heartbeat
//! expiry in `liveness.rs`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

mod layout;
mod liveness;
mod record;
mod runs;
mod wakeup;
mod workspaces;

pub use crate::scheduler::framework::facts::CountedRequest;
pub use crate::scheduler::framework::types::ScopeRef;
pub use layout::Load;
pub(in crate::scheduler::framework) use layout::{Interner, NamespaceIndex, Scope, Slot, SlotId};
pub use liveness::{LostRun, PodLoss};
pub use record::{
    ActiveRun, CLAIM_WINDOW_MARGIN, LeaseRecord, ObservedLease, ObservedPod, PodRecord,
    claim_window,
};
pub use wakeup::{Changes, PodRef, RunChange, WakeSource, Wakeup, WorkspaceRef};
pub use workspaces::{WorkspaceEntry, WorkspaceRecord};

use crate::api::{PersistentWorkspace, Run};
use crate::scheduler::framework::facts::RunFacts;
use crate::scheduler::framework::priority::{MissingClass, PriorityClasses};
use crate::scheduler::framework::types::{QueueOrder, RunKey};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// Phase Pending: waits in the scheduling queue (which stores it); a workspace counts it
    /// as a user.
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

/// A Run the index keeps (every one that is not terminal): its facts, shared with its active
/// record, the queue and the assumed cache, and where it is. A Pending Run counts as a user
/// of the PersistentWorkspace its facts name.
#[derive(Debug, Clone)]
struct RunRecord {
    facts: Arc<RunFacts>,
    placement: Placement,
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

    /// Drops a namespace that no longer holds anything.
    fn gc_namespace(&mut self, namespace: &str) {
        if self.namespaces.get(namespace).is_some_and(|ns| {
            ns.by_name.is_empty() && ns.scopes.is_empty() && ns.workspaces.is_empty()
        }) {
            self.namespaces.remove(namespace);
        }
    }

    // ----- Pods -------------------------------------------------------------------------

    /// Records a Pod. A Pod without the `kruntimes.io/runtime` label is not a Runtime Pod and
    /// is treated as deleted (it may have lost the label).
    pub fn apply_pod(&mut self, pod: &Pod) -> Vec<Wakeup> {
        self.apply_observed_pod(&ObservedPod::of(pod))
    }

    /// [`Self::apply_pod`] of a Pod as the watch keeps it.
    pub fn apply_observed_pod(&mut self, pod: &ObservedPod) -> Vec<Wakeup> {
        let (namespace, name) = (pod.namespace.clone(), pod.name.clone());
        let Some(record) = pod.record.clone() else {
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
        slot.rebuild_load(&mut self.interner);
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
        let pods: Vec<ObservedPod> = pods.iter().map(ObservedPod::of).collect();
        self.reset_observed_pods(&pods)
    }

    /// [`Self::reset_pods`] with Pods as the watch keeps them.
    pub fn reset_observed_pods(&mut self, pods: &[ObservedPod]) -> Vec<Wakeup> {
        let key = |p: &ObservedPod| (p.namespace.clone(), p.name.clone());
        let held = |s: &Slot| s.pod.is_some();
        self.reset_with(pods, key, held, Self::delete_pod, Self::apply_observed_pod)
    }

    /// A relist of one kind of object: deletes what `held` says is recorded but is no longer
    /// listed (by `key`: namespace and name), then applies every listed object, and merges the
    /// wakeups.
    fn reset_with<K>(
        &mut self,
        objects: &[K],
        key: fn(&K) -> (String, String),
        held: fn(&Slot) -> bool,
        delete: impl Fn(&mut Self, &str, &str) -> Vec<Wakeup>,
        apply: impl Fn(&mut Self, &K) -> Vec<Wakeup>,
    ) -> Vec<Wakeup> {
        let keep: HashSet<(String, String)> = objects.iter().map(key).collect();
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

    /// Every (namespace, runtime) with Runtime Pods, in no particular order.
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
        self.apply_observed_lease(&ObservedLease::of(lease), now)
    }

    /// [`Self::apply_lease`] of a Lease as the watch keeps it.
    pub fn apply_observed_lease(&mut self, lease: &ObservedLease, now: Timestamp) -> Vec<Wakeup> {
        let (namespace, name) = (lease.namespace.clone(), lease.name.clone());
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
        let leases: Vec<ObservedLease> = leases.iter().map(ObservedLease::of).collect();
        self.reset_observed_leases(&leases, now)
    }

    /// [`Self::reset_leases`] with Leases as the watch keeps them.
    pub fn reset_observed_leases(
        &mut self,
        leases: &[ObservedLease],
        now: Timestamp,
    ) -> Vec<Wakeup> {
        self.reset_with(
            leases,
            |l| (l.namespace.clone(), l.name.clone()),
            |s| s.lease.is_some(),
            |index, ns, name| index.delete_lease(ns, name, now),
            |index, lease| index.apply_observed_lease(lease, now),
        )
    }

    pub fn lease(&self, namespace: &str, name: &str) -> Option<&LeaseRecord> {
        let ns = self.namespaces.get(namespace)?;
        ns.slot(ns.slot_id(name)?).lease.as_ref()
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

    /// Records a PriorityClass; returns whether the classes changed (the Pending Runs whose
    /// priority follows it are re-keyed by the queue).
    pub fn apply_priority_class(
        &mut self,
        class: &k8s_openapi::api::scheduling::v1::PriorityClass,
    ) -> bool {
        self.classes.apply(class)
    }

    pub fn delete_priority_class(&mut self, name: &str) -> bool {
        self.classes.delete(name)
    }

    pub fn reset_priority_classes(
        &mut self,
        classes: &[k8s_openapi::api::scheduling::v1::PriorityClass],
    ) -> bool {
        self.classes.reset(classes)
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
}

#[cfg(test)]
mod tests;
