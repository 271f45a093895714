//! A Pending Run as the scheduler keeps it: built once from the watch event that showed it
//! Pending, and the only representation of a Pending Run anywhere in the scheduler.
//!
//! Owns what every reader of a Pending Run needs without looking at the object again: its
//! request parsed once, its place in the queue, whether required Run terms may refuse it
//! where there is room, the workspace it names and its fairness group. It must not hold state about where the
//! Run waits (see [`super::SchedulingQueue`]).

use std::sync::Arc;

use crate::api::resources::ResourceError;
use crate::api::{Resources, Run};
use crate::scheduler::framework::facts::RunFacts;
use crate::scheduler::framework::fairness::{FairShare, Group};
use crate::scheduler::framework::types::{QueueOrder, RunKey, ScopeRef};

/// See the module documentation.
///
/// The object is the first version seen until the Run itself changes (see
/// [`QueuedRun::changed_by`]): status churn does not replace it, so writes use the watch's
/// newest version, never this one.
#[derive(Debug, Clone)]
pub struct QueuedRun {
    /// What the scheduler reads of the Run (key, name, Runtime, request, labels, workspace),
    /// shared with the index and, once it is placed, with its assumption and active record.
    pub facts: Arc<RunFacts>,
    pub run: Arc<Run>,
    /// Its place in its Runtime's queue, at the priority resolved when it was observed.
    pub order: QueueOrder,
    /// `status.priority` was set when last observed: its order no longer follows its class.
    pub priority_recorded: bool,
    /// It has required Run affinity or anti-affinity terms: a Pod with room may still refuse
    /// it, and new affinity targets may let it fit.
    pub required_terms: bool,
    /// Its fairness group, as its Runtime groups Runs (set once per observation: filing a Run
    /// again, which a drain does many times, costs no lookup).
    pub group: Group,
}

impl QueuedRun {
    /// The Pending Run `run`, whose facts are `facts`, at `order`, in the group `fair` puts it.
    pub fn new(run: &Run, facts: Arc<RunFacts>, order: QueueOrder, fair: &FairShare) -> Self {
        QueuedRun {
            group: fair.group_of(run),
            facts,
            order,
            priority_recorded: recorded_priority(run),
            required_terms: run.has_required_run_terms(),
            run: Arc::new(run.clone()),
        }
    }

    pub fn key(&self) -> &RunKey {
        &self.facts.key
    }

    /// The Runtime it names, in its namespace.
    pub fn scope(&self) -> &ScopeRef {
        &self.facts.scope
    }

    /// The complete request, or why `spec.resources.requests` cannot be read.
    pub fn request(&self) -> Result<&Resources, &ResourceError> {
        self.facts.request()
    }

    /// Whether `run`, a newer version of this Run, changed the Run itself rather than its
    /// status (as kube-scheduler tells a Pod update from status churn): spec, labels,
    /// annotations, or a deletion, since a Run being deleted no longer waits for placement.
    pub fn changed_by(&self, run: &Run) -> bool {
        let old = &self.run;
        old.metadata.generation != run.metadata.generation
            || old.metadata.labels != run.metadata.labels
            || old.metadata.annotations != run.metadata.annotations
            || old.metadata.deletion_timestamp != run.metadata.deletion_timestamp
            || old.spec.affinity != run.spec.affinity
            || old.spec.cancel_requested != run.spec.cancel_requested
    }

    /// Whether the Run waits for placement as last stored (not deleted, not cancelled
    /// elsewhere, not assigned).
    pub fn waits_for_placement(&self) -> bool {
        self.run.waits_for_placement()
    }
}

/// Whether the Run's status records the priority the scheduler resolved for it.
pub fn recorded_priority(run: &Run) -> bool {
    run.status.as_ref().is_some_and(|s| s.priority.is_some())
}
