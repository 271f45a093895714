//! The pool view as plain data: the `-o json|yaml` structure of `status` (schema in
//! [`super`]), filled by [`super::report`] and printed by [`super::render`].
//!
//! Owns the shapes only: no scheduling rule, no I/O.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::cmd::replay::Objects;
pub use crate::cmd::replay::leader::{Leader, LeaderState};
pub use crate::cmd::replay::workflow_run::WorkflowRunReport;

/// Version of the JSON/YAML structure; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// Everything a pool view is built from, as read by the loader.
#[derive(Debug, Clone, Default)]
pub struct Pool {
    /// The namespace read, `None` with `--all-namespaces`.
    pub namespace: Option<String>,
    /// Only this Runtime, when one was named.
    pub runtime: Option<String>,
    /// Every Runtime, Runtime Pod (of the named Runtime), heartbeat Lease, Run,
    /// PersistentWorkspace and PriorityClass read.
    pub objects: Objects,
}

/// The pool view. Field meanings are documented in the module docs of [`super`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub schema_version: u32,
    pub now: Timestamp,
    /// `None` with `--all-namespaces`.
    pub namespace: Option<String>,
    /// Who leads the scheduler, or that none runs (added to schema 1; absent in older output).
    #[serde(default)]
    pub scheduler: Leader,
    /// One entry per Runtime, by namespace then name.
    pub runtimes: Vec<RuntimeStatus>,
    /// Every WorkflowRun that has not ended, by namespace then name, as `explain
    /// workflowrun/NAME` shows it (added to schema 1; absent in older output, and left empty
    /// when a Runtime is named).
    #[serde(default)]
    pub workflow_runs: Vec<WorkflowRunReport>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStatus {
    pub namespace: String,
    pub name: String,
    /// The Runtime object exists (Pods or Runs may name a missing one).
    pub found: bool,
    pub replicas: Option<i32>,
    pub pods: PodCounts,
    /// Every advertised resource, in name order.
    pub resources: Vec<ResourceStatus>,
    pub runs: PhaseCounts,
    pub pending: PendingDemand,
    /// The Runtime's PersistentWorkspaces by phase (left out when it has none).
    #[serde(default, skip_serializing_if = "WorkspaceCounts::is_empty")]
    pub workspaces: WorkspaceCounts,
    /// Why the Runtime controller cannot create its Pods (its `ReplicaFailure` condition's
    /// message, the API server's), while it cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_failure: Option<String>,
    /// Runtime Pods made from the current template, while some are not (a rollout replaces
    /// them one at a time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated: Option<i32>,
}

/// PersistentWorkspaces by `status.phase`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceCounts {
    pub pending: usize,
    pub bound: usize,
    pub lost: usize,
    pub released: usize,
}

impl WorkspaceCounts {
    pub fn is_empty(&self) -> bool {
        *self == WorkspaceCounts::default()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodCounts {
    pub total: usize,
    /// `Ready` condition True.
    pub ready: usize,
    /// Can take a Run now: RuntimePodAvailability's Pod checks pass (not terminating, ready,
    /// heartbeat held and fresh, capacity readable).
    pub available: usize,
    /// Why the others cannot, with the filter's reason texts.
    pub unavailable: Vec<ReasonCount>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasonCount {
    pub reason: String,
    pub count: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceStatus {
    pub name: String,
    /// Sum over the Runtime Pods that are not terminating; `None` when an active Run's amount
    /// is unreadable.
    pub used: Option<u64>,
    pub capacity: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseCounts {
    pub pending: usize,
    pub scheduled: usize,
    pub running: usize,
    /// Registered function Runs: active, holding capacity until released.
    pub ready: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub timeout: usize,
    pub cancelled: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingDemand {
    /// Pending Runs waiting for a Pod (not assigned, not being deleted).
    pub runs: usize,
    /// Creation time of the oldest of them.
    pub oldest_created: Option<Timestamp>,
    /// `now - oldestCreated`, in whole seconds.
    pub oldest_wait_seconds: Option<i64>,
    /// Per bounded reason, how many of them the scheduler's plugins reject for it on at least
    /// one Pod (a Run whose message lists two reasons counts under both), ordered by count
    /// then text. Also `fits now` (the scheduler has yet to place it), `no Runtime Pods`,
    /// `Runtime not found` and PreFilter's reasons (`InvalidResources`, `InvalidAffinity`).
    pub by_reason: Vec<ReasonCount>,
    /// Per verdict in the scheduler's Pending message form, how many Runs get it.
    pub by_message: Vec<MessageCount>,
    /// Per resolved priority (the scheduler's: the Run's PriorityClass, else the global
    /// default, else 0), how many Runs wait, highest first: the order the queue serves them
    /// in. A Run whose class is missing is not here (it is under its reason).
    pub by_priority: Vec<PriorityCount>,
    /// Per fairness group with Pending Runs, where it stands (the order the queue serves the
    /// groups in within a priority, next first); left out while fewer than two groups wait.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_group: Vec<GroupShare>,
}

/// A fairness group's share of the Runtime and its Pending Runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupShare {
    /// Its submitter (or the Runtime's label value); empty when it names none.
    pub group: String,
    /// Its dominant share: active, assumed and nominated requests over capacity, the largest
    /// fraction of any resource.
    pub share: f64,
    pub weight: f64,
    pub runs: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriorityCount {
    pub priority: i32,
    pub runs: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageCount {
    pub message: String,
    pub runs: usize,
}
