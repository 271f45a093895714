//! The Runs in the index: their records, and the usage and labels they add to their Pod's
//! slot.
//!
//! Owns `Index::apply_run` / `delete_run` / `reset_runs` and the queries on what they keep
//! (how a Run was last observed, a Pod's usage and active Runs). It must not keep Pending
//! Runs beyond how they were observed: they live in the scheduling queue.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use super::{ActiveRun, Index, Placement, PodRef, RunChange, RunRecord};
use crate::api::{Run, RunPhase};
use crate::scheduler::framework::facts::RunFacts;
use crate::scheduler::framework::types::{Observed, RunKey};

impl Index {
    /// Records a Run: adjusts the usage and labels of its Pod when it joins, changes or leaves
    /// the active set, and its workspace's users when it becomes or stops being Pending.
    pub fn apply_run(&mut self, run: &Run) -> RunChange {
        let key = RunKey::of(run);
        let (on, phase) = (run.active_pod(), run.phase());
        let pending = on.is_none() && phase == RunPhase::Pending;
        let unassigned = on.is_none() && !pending && !phase.is_terminal();
        // A terminal Run leaves nothing behind: its facts are not read.
        let facts = (on.is_some() || pending || unassigned)
            .then(|| RunFacts::renewed(run, self.runs.get(&key).map(|r| &r.facts)));
        let active = on.zip(facts.clone()).map(|(pod, facts)| {
            let priority = self.priority_of(run).unwrap_or(0);
            (pod, ActiveRun::of(run, facts, priority))
        });

        // Unchanged active or Pending Runs (status churn) cost one lookup and change nothing.
        if let Some(old) = self.runs.get(&key)
            && facts.as_ref().is_some_and(|f| Arc::ptr_eq(&old.facts, f))
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
                    runtime: ns
                        .runtime_of(id)
                        .unwrap_or(&new.facts.scope.runtime)
                        .to_string(),
                    pod: pod.to_string(),
                };
                match &old {
                    Some((old_ref, old_run)) if old_ref.pod == pod => {
                        if old_run.request() != new.request() {
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
                ns.add_active(id, &key.uid, new, &mut self.interner);
                Placement::Active(id)
            }
            None => {
                if let Some((old_ref, _)) = old {
                    change.released.push(old_ref.clone());
                    change.targets_changed = Some(old_ref);
                }
                if pending {
                    let ns = self.namespaces.entry(key.namespace.clone()).or_default();
                    if let Some(workspace) = facts.as_ref().and_then(|f| f.workspace.as_ref()) {
                        ns.workspace_mut(workspace).pending.insert(key.uid.clone());
                    }
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
            let facts = facts.expect("a Run the index keeps has facts");
            self.runs.insert(key, RunRecord { facts, placement });
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
                if let Some(workspace) = &old.facts.workspace {
                    ns.workspace_mut(workspace).pending.remove(&key.uid);
                    ns.gc_workspace(workspace);
                }
                None
            }
            Placement::Active(id) => {
                let run = ns.remove_active(id, &key.uid, &mut self.interner)?;
                let pod_ref = PodRef {
                    namespace: key.namespace.clone(),
                    runtime: ns
                        .runtime_of(id)
                        .unwrap_or(&old.facts.scope.runtime)
                        .to_string(),
                    pod: ns.slot(id).name.clone(),
                };
                ns.gc(id);
                Some((pod_ref, run))
            }
            Placement::Unassigned | Placement::Inactive => None,
        }
    }

    /// The facts of the Run as last observed; `None` once it is terminal or deleted.
    pub fn facts(&self, key: &RunKey) -> Option<&Arc<RunFacts>> {
        self.runs.get(key).map(|r| &r.facts)
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

    /// The active Runs' usage of `resource` on `pod` (`u64::MAX` while one's amount of it is
    /// unknown); `None` when the index knows no such Pod name.
    pub fn used(&self, namespace: &str, pod: &str, resource: &str) -> Option<u64> {
        let ns = self.namespaces.get(namespace)?;
        let slot = ns.slot(ns.slot_id(pod)?);
        let load = self.interner.get(resource).and_then(|id| slot.load(id));
        Some(load.map_or(0, super::Load::used))
    }

    /// Active Runs assigned to `pod`, by UID.
    pub fn active_runs(&self, namespace: &str, pod: &str) -> Option<&BTreeMap<String, ActiveRun>> {
        let ns = self.namespaces.get(namespace)?;
        Some(&ns.slot(ns.slot_id(pod)?).active)
    }
}
