//! The Runs in the index: their records, the usage and labels they add to their Pod's slot,
//! and the Pending queues of each (namespace, runtime) scope.
//!
//! Owns `Index::apply_run` / `delete_run` / `reset_runs` and the queries on what they keep
//! (how a Run was last observed, the Pending Runs in queue order, a Pod's usage and active
//! Runs). It must not order Runs itself: a Run's place comes from [`Index::order_of`].

use std::collections::{BTreeMap, HashSet};

use kube::ResourceExt;

use super::{ActiveRun, Index, PendingRun, Placement, PodRef, RunChange, RunRecord, Usage};
use crate::api::{Run, RunPhase};
use crate::scheduler::framework::types::{Observed, QueueOrder, RunKey};

impl Index {
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

    /// Replaces the stored object of a Pending Run when anything but its status changed (as
    /// kube-scheduler tells a Pod update from status churn: spec, labels, annotations, or a
    /// deletion, since a Run being deleted no longer waits for placement); returns whether it
    /// did.
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
}
