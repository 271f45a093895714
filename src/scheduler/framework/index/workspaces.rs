//! PersistentWorkspaces as the index keeps them, with who uses each: the active Runs on each
//! Pod and the Pending Runs that name it.
//!
//! Owns the record of a watched PersistentWorkspace and the per-workspace use counts the
//! index keeps up to date with every Run event, so that WorkspacePlacement reads a binding
//! in O(1) and the workspace lifecycle knows when one is unused. It must not decide where a
//! workspace is bound (that is [`crate::scheduler::framework::Snapshot::workspace`], which
//! also sees the assumed cache) or when it is lost or released.

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;

use crate::api::{CLEANUP_RETAIN, PersistentWorkspace, WorkspacePhase};

/// What the scheduler knows about a PersistentWorkspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceRecord {
    pub uid: String,
    /// The version observed: lifecycle writes are guarded by it.
    pub resource_version: Option<String>,
    /// `spec.runtime`: only Runs of this Runtime may use it.
    pub runtime: String,
    pub phase: WorkspacePhase,
    /// `status.boundPod` (kept when Lost, to name the Pod that was lost).
    pub bound_pod: Option<String>,
    /// `status.lastUsedTime`, else its creation: when the unused TTL counts from.
    pub last_used: Option<Timestamp>,
    /// `spec.ttlSecondsAfterUnused`.
    pub ttl: Option<SignedDuration>,
    /// `spec.cleanupPolicy` is `DeleteAfterTTL` (the default).
    pub delete_after_ttl: bool,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
}

impl WorkspaceRecord {
    /// What a scheduling cycle reads of the workspace.
    pub fn placement(&self) -> (&str, WorkspacePhase, Option<&str>) {
        (&self.runtime, self.phase, self.bound_pod.as_deref())
    }

    pub fn of(workspace: &PersistentWorkspace) -> Self {
        let status = workspace.status.as_ref();
        WorkspaceRecord {
            uid: workspace.uid().unwrap_or_default(),
            resource_version: workspace.resource_version(),
            runtime: workspace.spec.runtime.clone(),
            phase: workspace.phase(),
            bound_pod: status.and_then(|s| s.bound_pod.clone()),
            last_used: status
                .and_then(|s| s.last_used_time.as_ref())
                .or(workspace.metadata.creation_timestamp.as_ref())
                .map(|t| t.0),
            ttl: workspace
                .spec
                .ttl_seconds_after_unused
                .map(|s| SignedDuration::from_secs(i64::from(s.max(0)))),
            delete_after_ttl: workspace.spec.cleanup_policy.as_deref() != Some(CLEANUP_RETAIN),
            deleting: workspace.metadata.deletion_timestamp.is_some(),
        }
    }
}

/// One workspace name in a namespace: its record (when the object is known) and its users
/// (known even before the object is: a Run may name a workspace created later).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkspaceEntry {
    pub record: Option<WorkspaceRecord>,
    /// Pod name -> active Runs there that use the workspace.
    pub active: BTreeMap<String, u32>,
    /// UIDs of the Pending Runs that name it: they are looked at again when it changes.
    pub pending: BTreeSet<String>,
    /// The latest `completionTime` of a Run that used it: when its last use ended, rebuilt
    /// from the Runs' history by every relist (a new leader knows it too).
    pub last_finished: Option<Timestamp>,
}

impl WorkspaceEntry {
    pub(super) fn is_empty(&self) -> bool {
        self.record.is_none() && self.active.is_empty() && self.pending.is_empty()
    }

    /// The Pod that holds its data as the index knows it: `status.boundPod` while Bound, else
    /// the Pod of an active Run that uses it (bound, its status not written yet). The one
    /// place this is decided: the lifecycle reads it, and a snapshot adds the scheduler's
    /// assumptions to it.
    pub fn holder(&self) -> Option<&str> {
        self.record
            .as_ref()
            .filter(|r| r.phase == WorkspacePhase::Bound)
            .and_then(|r| r.bound_pod.as_deref())
            .or_else(|| self.active.keys().next().map(String::as_str))
    }

    /// Whether any Run is active on it or waits for it.
    pub fn in_use(&self) -> bool {
        !self.active.is_empty() || !self.pending.is_empty()
    }

    pub(super) fn finished(&mut self, at: Timestamp) {
        self.last_finished = Some(self.last_finished.map_or(at, |t| t.max(at)));
    }

    pub(super) fn add_active(&mut self, pod: &str) {
        *self.active.entry(pod.to_string()).or_insert(0) += 1;
    }

    pub(super) fn remove_active(&mut self, pod: &str) {
        if let Some(n) = self.active.get_mut(pod) {
            *n -= 1;
            if *n == 0 {
                self.active.remove(pod);
            }
        }
    }
}
