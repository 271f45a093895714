//! The wakeup vocabulary: what an index change means for the Pending Runs of a Runtime.
//!
//! Owns the bounded `source` values of `kruntimes_scheduler_pending_run_wakeups_total` and
//! the per-event change records the controller turns into queue activations. It must not
//! decide which Runs to wake: that is the cache's `wake` module, applying the plugins'
//! queueing hints.

use crate::scheduler::framework::types::{RunKey, ScopeRef};
use std::collections::BTreeSet;

/// Why the Pending Runs of a Runtime are being woken; values are the bounded `source` label
/// of `kruntimes_scheduler_pending_run_wakeups_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WakeSource {
    /// A Runtime Pod became ready or unavailable, or changed capacity or heartbeat.
    RuntimePod,
    /// Active or assumed usage was released on a Pod.
    CapacityReleased,
}

impl WakeSource {
    pub fn as_str(self) -> &'static str {
        match self {
            WakeSource::RuntimePod => "runtime_pod",
            WakeSource::CapacityReleased => "capacity_released",
        }
    }
}

/// "Wake the Pending Runs of this (namespace, runtime)": the queueing hints say which.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Wakeup {
    pub namespace: String,
    pub runtime: String,
    pub source: WakeSource,
    /// For released capacity, the Pod it was released on: only the Pending Runs that room
    /// there could help are woken. `None`: every Pending Run of the Runtime.
    pub pod: Option<String>,
}

/// A Pod named by a Run change, with the Runtime whose Pending Runs it concerns (the Pod's
/// Runtime when the Pod is known, else the Run's `spec.runtime`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodRef {
    pub namespace: String,
    pub runtime: String,
    pub pod: String,
}

/// What a Run event changed, for wakeups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunChange {
    /// Pods on which this Run's capacity was released: it left the active set there, or (from
    /// the scheduler cache) its assumption on that Pod was dropped.
    pub released: Vec<PodRef>,
    /// The Pod whose affinity targets this Run changed: it joined or left the active set
    /// there, or changed its labels or anti-affinity while active. Pending Runs waiting for
    /// required Run affinity may now fit; this is not a capacity wakeup.
    pub targets_changed: Option<PodRef>,
    /// A Pending Run's own spec or metadata changed (not only its status): an unschedulable
    /// Run looks again, as kube-scheduler re-queues a Pod on any update but its status.
    pub updated: bool,
}

impl RunChange {
    /// One `capacity_released` wakeup per distinct Pod that got capacity back.
    pub fn wakeups(&self) -> Vec<Wakeup> {
        let set: BTreeSet<Wakeup> = self
            .released
            .iter()
            .map(|p| Wakeup {
                namespace: p.namespace.clone(),
                runtime: p.runtime.clone(),
                source: WakeSource::CapacityReleased,
                pod: Some(p.pod.clone()),
            })
            .collect();
        set.into_iter().collect()
    }
}

/// One PersistentWorkspace, by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkspaceRef {
    pub namespace: String,
    pub name: String,
}

impl WorkspaceRef {
    pub fn new(namespace: &str, name: &str) -> Self {
        WorkspaceRef {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

/// What one watch event changed, whatever its kind: the wakeups to count and enqueue; the
/// scopes whose Pending Runs must all be looked at again for another reason (the Runtime
/// appeared or went away); and the scopes whose affinity targets changed, where only the
/// Pending Runs with required Run affinity can gain anything (a Run joining a Pod never makes
/// room, and one leaving releases capacity, a wakeup of its own). Rechecks and retargets are
/// enqueued uncounted: they are neither a Runtime Pod nor a released-capacity event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    pub wakeups: Vec<Wakeup>,
    pub rechecks: Vec<ScopeRef>,
    pub retargets: Vec<ScopeRef>,
    /// PersistentWorkspaces that appeared, went away or changed phase or binding: the
    /// Pending Runs that name one read it again.
    pub workspaces: Vec<WorkspaceRef>,
    /// Pending Runs whose priority follows a PriorityClass that appeared, changed or went
    /// away: each is filed at its new place and looks again.
    pub reordered: Vec<RunKey>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.wakeups.is_empty()
            && self.rechecks.is_empty()
            && self.retargets.is_empty()
            && self.workspaces.is_empty()
            && self.reordered.is_empty()
    }

    /// What a PriorityClass event changed.
    pub fn reordered(reordered: Vec<RunKey>) -> Self {
        Changes {
            reordered,
            ..Changes::default()
        }
    }

    /// What a PersistentWorkspace event changed.
    pub fn workspaces(workspaces: Vec<WorkspaceRef>) -> Self {
        Changes {
            workspaces,
            ..Changes::default()
        }
    }

    /// Adds what a Run event changed.
    pub fn add_run(&mut self, change: RunChange) {
        self.wakeups.extend(change.wakeups());
        self.retargets.extend(
            change
                .targets_changed
                .map(|p| ScopeRef::new(&p.namespace, &p.runtime)),
        );
    }
}

impl From<Vec<Wakeup>> for Changes {
    fn from(wakeups: Vec<Wakeup>) -> Self {
        Changes {
            wakeups,
            ..Changes::default()
        }
    }
}

impl From<Vec<ScopeRef>> for Changes {
    fn from(rechecks: Vec<ScopeRef>) -> Self {
        Changes {
            rechecks,
            ..Changes::default()
        }
    }
}

impl From<RunChange> for Changes {
    fn from(change: RunChange) -> Self {
        let mut changes = Changes::default();
        changes.add_run(change);
        changes
    }
}

impl FromIterator<RunChange> for Changes {
    fn from_iter<I: IntoIterator<Item = RunChange>>(iter: I) -> Self {
        let mut changes = Changes::default();
        for change in iter {
            changes.add_run(change);
        }
        changes
    }
}
