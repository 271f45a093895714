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

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

mod layout;
mod record;
mod wakeup;

pub use layout::Load;
pub(in crate::scheduler::framework) use layout::{Interner, NamespaceIndex, Scope, Slot, SlotId};
#[cfg(any(test, feature = "testing"))]
pub(crate) use record::required_anti_affinity;
pub use record::{ActiveRun, CountedRequest, LeaseRecord, PodRecord, Usage};
pub use wakeup::{PodRef, RunChange, WakeSource, Wakeup};

use crate::api::{Run, RunPhase};
use crate::scheduler::framework::types::{Observed, RunKey};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// Phase Pending: indexed for wakeups.
    Pending,
    /// Scheduled or Running with `status.podName`: consumes capacity on that slot.
    Active(SlotId),
    /// Scheduled or Running without `status.podName` (a foreign or broken writer): neither
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
}

/// The index. See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct Index {
    namespaces: HashMap<String, NamespaceIndex>,
    runs: HashMap<RunKey, RunRecord>,
    interner: Interner,
}

impl Index {
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn namespace(&self, namespace: &str) -> Option<&NamespaceIndex> {
        self.namespaces.get(namespace)
    }

    pub(crate) fn interner(&self) -> &Interner {
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
        delete: fn(&mut Self, &str, &str) -> Vec<Wakeup>,
        apply: fn(&mut Self, &K) -> Vec<Wakeup>,
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

    /// Names of the Runtime Pods of (namespace, runtime), in name order.
    pub fn runtime_pods(&self, namespace: &str, runtime: &str) -> Vec<String> {
        self.namespaces
            .get(namespace)
            .and_then(|ns| ns.scopes.get(runtime))
            .map(|s| s.pods.keys().cloned().collect())
            .unwrap_or_default()
    }

    // ----- Leases -----------------------------------------------------------------------

    /// Records a heartbeat Lease. Wakes the Pod's Runtime when availability may have turned
    /// on: a first Lease, a new holder or duration, or a renewal after the previous term had
    /// lapsed. Ordinary renewals wake nobody.
    pub fn apply_lease(&mut self, lease: &Lease) -> Vec<Wakeup> {
        let namespace = lease.namespace().unwrap_or_default();
        let name = lease.name_any();
        let record = LeaseRecord::of(lease);
        let ns = self.namespaces.entry(namespace.clone()).or_default();
        let id = ns.slot_id_or_insert(&name);
        let slot = ns.slot_mut(id);
        let old = slot.lease.replace(record.clone());
        slot.refresh_hot();
        let relevant = match &old {
            None => true,
            Some(old) => {
                old.holder != record.holder
                    || old.duration_seconds != record.duration_seconds
                    || match (old.expires_at, record.renew_time) {
                        (Some(expired), Some(renewed)) => expired <= renewed,
                        (None, Some(_)) => true,
                        _ => false,
                    }
            }
        };
        match ns.runtime_of(id) {
            Some(runtime) if relevant => vec![Wakeup {
                namespace,
                runtime: runtime.to_string(),
                source: WakeSource::RuntimePod,
            }],
            _ => Vec::new(),
        }
    }

    pub fn delete_lease(&mut self, namespace: &str, name: &str) -> Vec<Wakeup> {
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
        slot.refresh_hot();
        let wake = ns.runtime_of(id).map(|runtime| Wakeup {
            namespace: namespace.to_string(),
            runtime: runtime.to_string(),
            source: WakeSource::RuntimePod,
        });
        ns.gc(id);
        self.gc_namespace(namespace);
        wake.into_iter().collect()
    }

    /// Replaces every Lease with `leases` (after a watch relist).
    pub fn reset_leases(&mut self, leases: &[Lease]) -> Vec<Wakeup> {
        self.reset_with(
            leases,
            |s| s.lease.is_some(),
            Self::delete_lease,
            Self::apply_lease,
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
                (Placement::Pending, None) if pending => return RunChange::default(),
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
                        .insert(name.clone(), key.uid.clone());
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
                if let Some(scope) = ns.scopes.get_mut(&old.runtime)
                    && scope.pending.get(&old.name) == Some(&key.uid)
                {
                    scope.pending.remove(&old.name);
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

    /// Names of the Pending Runs of (namespace, runtime), in name order.
    pub fn pending_runs(&self, namespace: &str, runtime: &str) -> Vec<String> {
        self.pending_keys(namespace, runtime)
            .map(|(name, _)| name.to_string())
            .collect()
    }

    /// (name, UID) of the Pending Runs of (namespace, runtime), in name order.
    pub(crate) fn pending_keys<'a>(
        &'a self,
        namespace: &str,
        runtime: &str,
    ) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.namespaces
            .get(namespace)
            .and_then(|ns| ns.scopes.get(runtime))
            .into_iter()
            .flat_map(|s| s.pending.iter().map(|(n, u)| (n.as_str(), u.as_str())))
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

    /// Every Pod name in `namespace` with active usage (for invariant checks).
    pub fn pods_with_usage(&self, namespace: &str) -> Vec<String> {
        self.namespaces
            .get(namespace)
            .map(|ns| {
                ns.slots
                    .iter()
                    .flatten()
                    .filter(|s| !s.active.is_empty())
                    .map(|s| s.name.clone())
                    .collect()
            })
            .unwrap_or_default()
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
                index.apply_lease(&l);
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
            index.apply_lease(&lease("p1", &uid, 0, 40)).len(),
            1,
            "first lease"
        );
        assert!(
            index.apply_lease(&lease("p1", &uid, 10, 40)).is_empty(),
            "renewal in term"
        );
        assert_eq!(
            index.apply_lease(&lease("p1", &uid, 60, 40)).len(),
            1,
            "renewal after lapse"
        );
        assert_eq!(
            index.apply_lease(&lease("p1", "other", 61, 40)).len(),
            1,
            "new holder"
        );
        assert_eq!(index.delete_lease(NS, "p1").len(), 1);
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
}
