//! The pure planning core: data in, decision out.
//!
//! Layered one way, each module importing only those above it:
//!
//! - [`types`]: the leaf vocabulary (keys, score bounds, rejections, observations).
//! - [`selector`]: compiled label selectors.
//! - [`priority`]: PriorityClasses and the priority of a Run.
//! - [`fairness`]: fairness groups (who submitted a Run), their weights and dominant shares.
//! - [`facts`]: a Run's scheduling facts, one record per observed version, shared by every
//!   holder below.
//! - [`index`]: Runtime Pods, heartbeat Leases and Runs, fed by watch events; incremental usage.
//! - [`assumed`]: scheduler-local reservations between Reserve and the observed Bind.
//! - [`nominations`]: Runtime Pods being drained for starved Pending Runs.
//! - [`snapshot`]: a borrowed view of one (namespace, runtime) at `now`.
//! - [`plugin`]: the Filter and Score traits and the per-Run state PreFilter prepares.
//! - [`registry`]: which plugins run, in which order, with which weights (the list itself is
//!   `scheduler::plugins::registry`).
//! - [`cycle`]: PreFilter → Filter → Score → pick, shared by the scheduler and `explain`.
//! - [`queue`]: the scheduling queue (active, backoff, unschedulable), ordered per Runtime.
//! - [`cache`]: the scheduler cache, single owner of index, assumed cache, nominations and
//!   queue, and its `Mutex` wrapper.
//!
//! Nothing here may use a `kube::Client`, async, tokio or a clock; time comes in as `now`.
//!
//! The controller's scheduling loop, in short:
//!
//! ```no_run
//! # use kruntimes::scheduler::framework::{SharedCache, ScheduleOutcome};
//! # fn bind(_: &str) -> Result<(), ()> { Ok(()) }
//! # let shared = SharedCache::new(kruntimes::scheduler::plugins::registry());
//! # let now = jiff::Timestamp::now();
//! while let Some(scheduled) = shared.lock().schedule_next(shared.registry(), now) {
//!     let (namespace, uid) = (
//!         scheduled.run.metadata.namespace.clone().unwrap(),
//!         scheduled.run.metadata.uid.clone().unwrap(),
//!     );
//!     match scheduled.outcome {
//!         ScheduleOutcome::Reserved { pod, .. } => {
//!             if bind(&pod).is_err() {
//!                 // Bind failed (conflict or API error): the reservation must go, and the
//!                 // Run backs off.
//!                 let mut cache = shared.lock();
//!                 cache.release(&namespace, &uid, now);
//!                 cache.retry(&namespace, &uid, false, now);
//!             }
//!         }
//!         ScheduleOutcome::Unschedulable(u) => { let _message = u.message(); /* Scheduled=False */ }
//!         ScheduleOutcome::Invalid { reason, message } => { /* terminal Failed */ let _ = (reason, message); }
//!         ScheduleOutcome::ReserveConflict { .. } => { /* stage="reserve"; it backs off */ }
//!         ScheduleOutcome::Error(_) => { /* it backs off */ }
//!     }
//! }
//! ```

pub mod assumed;
pub mod cache;
pub mod cycle;
pub mod facts;
pub mod fairness;
pub mod index;
pub mod nominations;
pub mod plugin;
pub mod priority;
pub mod queue;
pub mod registry;
pub mod selector;
pub mod snapshot;
pub mod types;

#[cfg(test)]
mod tests;

pub use assumed::{AssumedCache, AssumedOnPod, Assumption, NamespaceAssumptions, Reconciled};
pub use cache::{
    Indexed, Preemption, ReserveError, ScheduleOutcome, Scheduled, SchedulerCache, SharedCache,
    Victim, WakeCounts,
};
pub use cycle::{
    CycleError, Decision, Evaluation, PluginScore, PodEvaluation, PreFilterError, RejectionCount,
    Unschedulable, evaluate, pre_filter,
};
pub use facts::RunFacts;
pub use index::{
    ActiveRun, CLAIM_WINDOW_MARGIN, Changes, CountedRequest, Index, LeaseRecord, Load, LostRun,
    ObservedLease, ObservedPod, PodLoss, PodRecord, PodRef, RunChange, ScopeRef, WakeSource,
    Wakeup, WorkspaceEntry, WorkspaceRecord, claim_window,
};
pub use nominations::{Nomination, Nominations};
pub use plugin::{
    ClusterEvent, FilterPlugin, PreferredTerm, QueueingHint, RequiredTerm, RunCycleState,
    RunWorkspace, ScoreError, ScorePlugin, WorkspaceBinding, normalize_min_max,
};
pub use priority::{ClassRecord, MissingClass, PriorityClasses};
pub use queue::{Popped, QueueState, QueuedRun, SchedulingQueue};
pub use registry::{QueueingHints, Registry, RegistryError};
pub use selector::{Selector, SelectorError};
pub use snapshot::{Adjust, PodSet, PodView, ResourceLoad, Snapshot, WorkspaceView};
pub use types::{
    Code, Heartbeat, MAX_SCORE, MIN_SCORE, Observed, QueueOrder, Rejection, Requested, ResourceId,
    ResourceName, RunKey,
};
