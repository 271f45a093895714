//! The pure planning core: data in, decision out.
//!
//! Layered one way, each module importing only those above it:
//!
//! - [`types`]: the leaf vocabulary (keys, score bounds, rejections, observations).
//! - [`selector`]: compiled label selectors.
//! - [`index`]: Runtime Pods, heartbeat Leases and Runs, fed by watch events; incremental usage.
//! - [`assumed`]: scheduler-local reservations between Reserve and the observed Bind.
//! - [`nominations`]: Runtime Pods being drained for starved Pending Runs.
//! - [`snapshot`]: a borrowed view of one (namespace, runtime) at `now`.
//! - [`plugin`]: the Filter and Score traits and the per-Run state PreFilter prepares.
//! - [`registry`]: which plugins run, in which order, with which weights (the list itself is
//!   `scheduler::plugins::registry`).
//! - [`cycle`]: PreFilter → Filter → Score → pick, shared by the scheduler and `explain`.
//! - [`cache`]: the scheduler cache, single owner of index + assumed cache, and its `Mutex`
//!   wrapper.
//!
//! Nothing here may use a `kube::Client`, async, tokio or a clock; time comes in as `now`.
//!
//! The controller's reconcile, in short:
//!
//! ```no_run
//! # use kruntimes::scheduler::framework::{SharedCache, ScheduleOutcome};
//! # fn bind(_: &str) -> Result<(), ()> { Ok(()) }
//! # let shared = SharedCache::new(kruntimes::scheduler::plugins::registry());
//! # let run: kruntimes::api::Run = todo!();
//! # let now = jiff::Timestamp::now();
//! match shared.schedule(&run, now) {
//!     ScheduleOutcome::Reserved { pod, .. } => {
//!         if bind(&pod).is_err() {
//!             // Bind failed (conflict or API error): the reservation must go.
//!             shared.release(&run.metadata.namespace.clone().unwrap(), run.metadata.uid.as_deref().unwrap());
//!         }
//!     }
//!     ScheduleOutcome::Unschedulable(u) => { let _message = u.message(); /* Scheduled=False */ }
//!     ScheduleOutcome::Invalid { reason, message } => { /* terminal Failed */ let _ = (reason, message); }
//!     ScheduleOutcome::ReserveConflict { .. } => { /* stage="reserve"; requeue */ }
//!     ScheduleOutcome::ReservedEarlier { run: _earlier, .. } => {
//!         // An earlier Run of the queue fit: bind it as above, then cycle this one again.
//!     }
//!     ScheduleOutcome::Yield { to: _earlier } => { /* enqueue it; requeue this one shortly */ }
//!     ScheduleOutcome::AlreadyPlaced { .. } => { /* wait for the watch */ }
//!     ScheduleOutcome::Error(_) => { /* controller retry */ }
//! }
//! ```

pub mod assumed;
pub mod cache;
pub mod cycle;
pub mod index;
pub mod nominations;
pub mod plugin;
pub mod registry;
pub mod selector;
pub mod snapshot;
pub mod types;

#[cfg(test)]
mod cache_properties;
#[cfg(test)]
mod queue_properties;

pub use assumed::{AssumedCache, AssumedOnPod, Assumption, NamespaceAssumptions, Reconciled};
pub use cache::{Indexed, ReserveError, ScheduleOutcome, SchedulerCache, SharedCache};
pub use cycle::{
    CycleError, Decision, Evaluation, PluginScore, PodEvaluation, PreFilterError, RejectionCount,
    Unschedulable, evaluate, pre_filter,
};
pub use index::{
    ActiveRun, Changes, CountedRequest, Index, LeaseRecord, Load, LostRun, PendingRun, PodLoss,
    PodRecord, PodRef, RunChange, ScopeRef, Usage, WakeSource, Wakeup,
};
pub use nominations::{Nomination, Nominations};
pub use plugin::{
    FilterPlugin, PreferredTerm, Requested, RequiredTerm, RunCycleState, ScoreError, ScorePlugin,
    normalize_min_max,
};
pub use registry::{Registry, RegistryError};
pub use selector::{Selector, SelectorError};
pub use snapshot::{PodSet, PodView, ResourceLoad, Snapshot};
pub use types::{
    Code, Heartbeat, MAX_SCORE, MIN_SCORE, Observed, QueueOrder, Rejection, ResourceId,
    ResourceName, RunKey,
};
