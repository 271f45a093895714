//! The one queue order of Runs, shared by the scheduler (which places in it) and runtimed
//! (which claims in it), so both break every tie the same way. Owns the comparator only: it
//! does not resolve priorities (the scheduler's index does, from PriorityClasses).

use jiff::Timestamp;
use kube::ResourceExt;

use super::Run;

/// Where a Pending Run stands in its Runtime's queue: priority (highest first), creation time,
/// then UID, so the order is the same on every replica whatever the order of events,
/// wakeups and workers (kube-scheduler's PrioritySort, Kueue's workload order). A Run
/// without a creation time (only in tests) sorts first among its priority.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QueueOrder {
    /// The resolved priority (the scheduler's index resolves it from the Run's class).
    pub priority: i32,
    pub created: Option<Timestamp>,
    pub uid: String,
}

impl QueueOrder {
    /// The order of `run` at `priority` (which the index resolves).
    pub fn of(run: &Run, priority: i32) -> Self {
        QueueOrder {
            priority,
            created: run.metadata.creation_timestamp.as_ref().map(|t| t.0),
            uid: run.uid().unwrap_or_default(),
        }
    }

    /// The order of a Run the scheduler has placed, at the priority it recorded with the
    /// Bind (`status.priority`; 0 before any class existed): the order runtimed claims in.
    pub fn recorded(run: &Run) -> Self {
        let priority = run.status.as_ref().and_then(|s| s.priority).unwrap_or(0);
        Self::of(run, priority)
    }

    /// The first possible order of a Run of `priority`: every Run of higher priority sorts
    /// before it, every Run of this priority or lower after it.
    pub fn first_of(priority: i32) -> Self {
        QueueOrder {
            priority,
            created: None,
            uid: String::new(),
        }
    }
}

impl Ord for QueueOrder {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other
            .priority
            .cmp(&self.priority)
            .then_with(|| self.created.cmp(&other.created))
            .then_with(|| self.uid.cmp(&other.uid))
    }
}

impl PartialOrd for QueueOrder {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
