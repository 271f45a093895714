//! What a cycle concludes: the [`Decision`] for the scheduler, why PreFilter refused a Run
//! ([`PreFilterError`]), and the counted reasons no Pod was feasible ([`Unschedulable`], whose
//! Pending message `explain` and the Run's status show). Pure data and its wording; the cycle
//! itself is [`super::evaluate`].

use thiserror::Error;

use super::super::plugin::ScoreError;
use super::super::priority::MissingClass;
use super::super::selector::SelectorError;
use super::super::types::{Code, ResourceName, rejection_text};
use crate::api::resources::ResourceError;
use crate::api::status::reasons::{
    INVALID_AFFINITY, INVALID_RESOURCES, PRIORITY_CLASS_NOT_FOUND, UNSCHEDULABLE,
};

/// Why PreFilter refused a Run. Messages name the field and the offending value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PreFilterError {
    #[error(transparent)]
    Resources(#[from] ResourceError),
    #[error(transparent)]
    Selector(#[from] SelectorError),
    #[error(
        "{field}: {value:?} is not a supported topology key: the only one is kruntimes.io/runtime-pod"
    )]
    TopologyKey { field: String, value: String },
    #[error("{field}: {value} is not a valid weight: use 1 to 100")]
    Weight { field: String, value: i32 },
    /// The PersistentWorkspace exists but this Run cannot use it.
    #[error("{field}: {message}")]
    Workspace {
        field: String,
        reason: &'static str,
        message: String,
    },
    /// `spec.cancelRequested` is set: the Run ends Cancelled instead of being placed.
    #[error("spec.cancelRequested: the Run was cancelled before it was placed")]
    Cancelled,
}

impl PreFilterError {
    /// The path of the refused field.
    pub fn field(&self) -> &str {
        match self {
            PreFilterError::Resources(e) => e.field(),
            PreFilterError::Selector(e) => e.field(),
            PreFilterError::TopologyKey { field, .. }
            | PreFilterError::Weight { field, .. }
            | PreFilterError::Workspace { field, .. } => field,
            PreFilterError::Cancelled => "spec.cancelRequested",
        }
    }

    /// The bounded CamelCase status reason for this error.
    pub fn reason(&self) -> &'static str {
        match self {
            PreFilterError::Resources(_) => INVALID_RESOURCES,
            PreFilterError::Workspace { reason, .. } => reason,
            PreFilterError::Cancelled => crate::api::status::reasons::CANCELLED,
            _ => INVALID_AFFINITY,
        }
    }
}

/// A cycle that could not complete (a Score plugin failed or broke the score range).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CycleError {
    #[error(transparent)]
    Score(#[from] ScoreError),
    #[error("score plugin {plugin} normalized a score to {score}, outside 0..=100")]
    ScoreOutOfRange { plugin: &'static str, score: i64 },
}

/// One plugin's contribution to a Pod's total.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PluginScore {
    pub plugin: &'static str,
    pub weight: i64,
    pub raw: i64,
    /// In `MIN_SCORE..=MAX_SCORE`.
    pub normalized: i64,
}

impl PluginScore {
    pub fn weighted(&self) -> i64 {
        self.normalized * self.weight
    }
}

/// How many Pods a (plugin, reason, resource) rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectionCount {
    /// Metric label `plugin`.
    pub plugin: &'static str,
    /// Metric label `reason`.
    pub reason: &'static str,
    /// The resource named in the message, for `Insufficient <resource>`.
    pub resource: Option<ResourceName>,
    pub count: usize,
}

impl RejectionCount {
    /// The text shown in the Pending message.
    pub fn text(&self) -> String {
        rejection_text(self.reason, self.resource.as_deref()).into_owned()
    }
}

/// The Go project's words for a Run that waits with no Runtime Pod to go to (its scheduler's
/// `waiting for available runtime pods for runtime "…"`, which its users and end-to-end tests
/// look for), said after our own reason.
pub const NO_PODS_WAIT: &str = "waiting for available runtime pods";

/// No Runtime Pod is feasible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unschedulable {
    pub total_pods: usize,
    /// Ordered by count (descending), then text.
    pub histogram: Vec<RejectionCount>,
    /// The Run's Runtime, when it does not exist and no Runtime Pod names it.
    pub missing_runtime: Option<String>,
    /// The Run's PriorityClass does not exist: it waits for it, without being evaluated.
    pub missing_class: Option<MissingClass>,
}

impl Unschedulable {
    /// The bounded Pending message, e.g. `0/3 Runtime Pods are available: 2 Insufficient
    /// example.com/gpu, 1 runtimed heartbeat stale.` It names resources the Run requested but
    /// never Pods, Runs or selectors. With no Runtime Pod at all (or no Runtime) it ends with
    /// the Go project's `waiting for available runtime pods`.
    pub fn message(&self) -> String {
        if let Some(missing) = &self.missing_class {
            return missing.to_string();
        }
        if let Some(runtime) = &self.missing_runtime {
            return format!("Runtime {runtime:?} not found in this namespace; {NO_PODS_WAIT}.");
        }
        if self.total_pods == 0 {
            return format!("0/0 Runtime Pods are available; {NO_PODS_WAIT}.");
        }
        if self.histogram.is_empty() {
            return format!("0/{} Runtime Pods are available.", self.total_pods);
        }
        let parts: Vec<String> = self
            .histogram
            .iter()
            .map(|c| format!("{} {}", c.count, c.text()))
            .collect();
        format!(
            "0/{} Runtime Pods are available: {}.",
            self.total_pods,
            parts.join(", ")
        )
    }
}

impl Unschedulable {
    /// The bounded reason of the `Scheduled=False` condition.
    pub fn reason(&self) -> &'static str {
        match self.missing_class {
            Some(_) => PRIORITY_CLASS_NOT_FOUND,
            None => UNSCHEDULABLE,
        }
    }
}

/// What the scheduler should do with the Run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Reserve this Pod, then bind.
    Schedule {
        pod: String,
        pod_uid: String,
        total: i64,
        scores: Vec<PluginScore>,
    },
    /// Keep the Run Pending with `Unschedulable::message`.
    Unschedulable(Unschedulable),
    /// Fail the Run permanently with `reason` (`InvalidResources` or `InvalidAffinity`).
    Invalid {
        reason: &'static str,
        message: String,
    },
}

impl Decision {
    pub fn code(&self) -> Code {
        match self {
            Decision::Schedule { .. } => Code::Success,
            Decision::Unschedulable(_) => Code::Unschedulable,
            Decision::Invalid { .. } => Code::Invalid,
        }
    }
}
