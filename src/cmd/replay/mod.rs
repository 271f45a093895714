//! The read-only replays' one object set: what `explain` and `status` read from the API server
//! ([`load`]), and the scheduler's cache built from it exactly as the scheduler's watches
//! would build theirs ([`Objects::cache`]).
//!
//! Owns the object set and the reads; it must not decide anything. `explain` and `status`
//! replay the scheduler's own plugins on the cache this returns, so neither re-derives a rule.
//! Whether a scheduler runs at all is [`leader`]'s to judge, from the Lease read with them; what
//! a WorkflowRun's jobs and steps are doing is [`workflow_run`]'s view.

pub mod leader;
pub mod load;
pub mod workflow_run;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;

use crate::api::{PersistentWorkspace, Run, Runtime, WorkflowRun};
use crate::scheduler::framework::SchedulerCache;

/// Everything a replay is built from, as the loader read it.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    pub runtimes: Vec<Runtime>,
    /// The Pods labelled `kruntimes.io/runtime`.
    pub pods: Vec<Pod>,
    /// The heartbeat Leases (label `kruntimes.io/runtime-pod`).
    pub leases: Vec<Lease>,
    /// Every Run read (usage, affinity targets and the Pending demand).
    pub runs: Vec<Run>,
    /// The PersistentWorkspaces read (bound workspace placement).
    pub workspaces: Vec<PersistentWorkspace>,
    /// The WorkflowRuns read (`status`'s workflow view; none when their CRD is not installed).
    pub workflow_runs: Vec<WorkflowRun>,
    /// Every PriorityClass (empty when the user may not list them).
    pub classes: Vec<PriorityClass>,
    /// The scheduler's leader-election Lease, for [`leader::judge`].
    pub scheduler_lease: leader::LeaseRead,
    /// When the objects were read; heartbeats and waits are judged at this instant.
    pub now: Timestamp,
}

impl Objects {
    /// The scheduler's cache over these objects, as its watches would have built it.
    pub fn cache(&self) -> SchedulerCache {
        let mut cache = SchedulerCache::from_objects(
            &self.classes,
            &self.runtimes,
            &self.pods,
            &self.leases,
            &self.runs,
            self.now,
        );
        for workspace in &self.workspaces {
            cache.apply(workspace, self.now);
        }
        cache
    }
}
