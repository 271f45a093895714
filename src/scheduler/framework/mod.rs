//! The pure planning core: data in, decision out.
//!
//! - [`index`]: Runtime Pods, heartbeat Leases and Runs, fed by watch events; incremental usage.
//! - [`assumed`]: scheduler-local reservations between Reserve and the observed Bind.
//! - [`snapshot`]: a borrowed view of one (namespace, runtime) at `now`.
//! - [`types`]: the vocabulary (codes, scores, rejections, plugin traits, per-Run state).
//! - [`registry`]: which plugins run, in which order, with which weights.
//! - [`cycle`]: PreFilter → Filter → Score → pick, shared by the scheduler and `explain`.
//! - [`state`]: the single owner of index + assumed cache, and its `Mutex` wrapper.
//!
//! Nothing here may use a `kube::Client`, async, tokio or a clock; time comes in as `now`.
//!
//! The controller's reconcile, in short:
//!
//! ```no_run
//! # use kruntimes::scheduler::framework::{SharedState, ScheduleOutcome};
//! # fn bind(_: &str) -> Result<(), ()> { Ok(()) }
//! # let shared = SharedState::default();
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
//!     ScheduleOutcome::AlreadyPlaced { .. } => { /* wait for the watch */ }
//!     ScheduleOutcome::Error(_) => { /* controller retry */ }
//! }
//! ```

pub mod assumed;
pub mod cycle;
pub mod index;
pub mod registry;
pub mod selector;
pub mod snapshot;
pub mod state;
pub mod types;

#[cfg(test)]
pub(crate) mod testing;

pub use assumed::{AssumedCache, Assumption, Reconciled};
pub use cycle::{
    CycleError, Decision, Evaluation, INVALID_AFFINITY, PluginScore, PodEvaluation, PreFilterError,
    RejectionCount, Unschedulable, evaluate, pre_filter,
};
pub use index::{
    ActiveRun, CountedRequest, Heartbeat, Index, LeaseRecord, Load, Observed, PodRecord, PodRef,
    ResourceId, RunChange, RunKey, Usage, WakeSource, Wakeup,
};
pub use registry::{Registry, RegistryError};
pub use selector::{Selector, SelectorError};
pub use snapshot::{AssumedOnPod, PodSet, PodView, ResourceLoad, Snapshot};
pub use state::{ReserveError, ScheduleOutcome, SharedState, State};
pub use types::{
    Code, FilterPlugin, MAX_SCORE, MIN_SCORE, PreferredTerm, Rejection, Requested, RequiredTerm,
    ResourceName, RunCycleState, ScoreError, ScorePlugin, normalize_min_max,
};
