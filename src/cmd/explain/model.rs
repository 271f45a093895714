//! The explanation of one Run as plain data: the `-o json|yaml` structure (schema in
//! [`super`]) and its parts, shared by [`super::report`] (which fills it), [`super::hints`] and
//! [`super::render`] (which read it).
//!
//! Owns the shapes only: no scheduling rule, no I/O. Facts arrive here already decided by the
//! scheduler's plugins.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::api::resources::Shortfall;
use crate::api::{PersistentWorkspace, Run, RunPhase, Runtime};
use crate::cmd::replay::Objects;
pub use crate::cmd::replay::leader::{Leader, LeaderState};

/// Version of the JSON/YAML structure; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 2;

/// What an explanation is built from: the explained Run and the objects around it, as read by
/// the loader.
#[derive(Debug, Clone)]
pub struct Subject {
    pub namespace: String,
    /// The explained Run.
    pub run: Run,
    /// Its Runtime when it exists (Runtime Pods may exist without one), the Pods labelled
    /// `kruntimes.io/runtime=<spec.runtime>`, the namespace's heartbeat Leases and Runs (the
    /// explained one included), the PersistentWorkspace the Run names when it exists, and
    /// every PriorityClass.
    pub objects: Objects,
}

impl Subject {
    /// The Run's Runtime, when it exists.
    pub fn runtime(&self) -> Option<&Runtime> {
        self.objects.runtimes.first()
    }

    /// The PersistentWorkspace the Run names, when it exists.
    pub fn workspace(&self) -> Option<&PersistentWorkspace> {
        self.objects.workspaces.first()
    }
}

/// The explanation. Field meanings are documented in the module docs of [`super`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub schema_version: u32,
    pub namespace: String,
    pub now: Timestamp,
    pub run: RunInfo,
    pub runtime: RuntimeInfo,
    /// The Run is not Pending: the cycle is replayed as if it were (its own usage left out).
    pub replayed: bool,
    /// The complete request (defaults applied, zeros dropped); empty when PreFilter refused it.
    pub request: BTreeMap<String, u64>,
    pub decision: DecisionKind,
    /// One line, in the scheduler's message form.
    pub verdict: String,
    pub invalid: Option<Invalid>,
    /// The Pod the scheduler would pick.
    pub chosen: Option<String>,
    /// The chosen Pod's weighted total.
    pub score: Option<i64>,
    pub total_pods: usize,
    /// Filter rejections per reason, ordered like the Pending message.
    pub histogram: Vec<HistogramEntry>,
    /// Filter plugins in registry order.
    pub filter_plugins: Vec<String>,
    /// Score plugins in registry order, with their weights.
    pub score_plugins: Vec<ScorePluginInfo>,
    /// Every Runtime Pod, in name order (empty when PreFilter refused the Run).
    pub pods: Vec<PodReport>,
    /// The Run's required affinity and anti-affinity terms with their targets.
    pub affinity: Vec<TermReport>,
    /// Pods hosting Runs whose required anti-affinity matches this Run's labels.
    pub repelled_by: Vec<TargetReport>,
    /// Where the Run stands in its Runtime's queue, while it is Pending.
    pub queue: Option<QueueReport>,
    /// The PersistentWorkspace the Run names, as the cycle bound it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspaceReport>,
    /// What would change the verdict.
    pub hints: Vec<String>,
    /// Who leads the scheduler, or that none runs (added to schema 2; absent in older output).
    #[serde(default)]
    pub scheduler: Leader,
}

/// The Run's PersistentWorkspace, as PreFilter found it for WorkspacePlacement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceReport {
    pub name: String,
    /// Whether the PersistentWorkspace exists.
    pub found: bool,
    /// Its `status.phase` (`Pending` without status); `None` when not found.
    pub phase: Option<String>,
    /// The Pod it holds its data on, by its status, an active Run or an assumption; `None`
    /// while unbound (the Run's Pod will bind it).
    pub bound_pod: Option<String>,
}

/// A Pending Run's place in its Runtime's queue (priority, creation time, then UID).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueReport {
    /// 1 is the Pending Run of the Runtime considered first.
    pub position: usize,
    pub pending: usize,
    /// The Runtime Pod being drained for this Run, if the scheduler nominated one.
    pub nominated: Option<NominationReport>,
    /// Its priority (from `status.priority` or its PriorityClass); left out when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i32,
    /// A dry run of the scheduler's preemption for it: where, and which lower-priority Runs
    /// would be sent back to Pending (or stopped); left out when there are none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<PreemptionReport>,
    /// Its fairness group's standing among the groups with Pending Runs on the Runtime; left
    /// out while only one group waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_share: Option<FairShareReport>,
}

/// Where a Run's fairness group stands (see `scheduler::framework::fairness`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FairShareReport {
    /// The group (its submitter, or the Runtime's label value); empty when it names none.
    pub group: String,
    /// Its dominant share of the Runtime: active, assumed and nominated requests over
    /// capacity, the largest fraction of any resource.
    pub share: f64,
    pub weight: f64,
    /// 1: the group the next cycle goes to.
    pub rank: usize,
    /// Groups with Pending Runs.
    pub groups: usize,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// What the scheduler's next cycle of the Run would preempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionReport {
    pub pod: String,
    pub victims: Vec<VictimReport>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VictimReport {
    pub name: String,
    pub priority: i32,
    /// `scheduled` (not claimed by runtimed yet) or `running` (of a preemptible class).
    pub level: String,
}

/// The Pod being drained for a starved Run, and how much is still in use there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NominationReport {
    pub pod: String,
    /// Per requested resource: what is still used there (actual + assumed) and capacity.
    pub resources: Vec<ResourceUse>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunInfo {
    pub name: String,
    pub uid: Option<String>,
    pub runtime: String,
    pub phase: RunPhase,
    pub assigned_pod: Option<String>,
    /// `status.reason` and `status.message` as the cluster has them.
    pub reason: Option<String>,
    pub message: Option<String>,
    pub labels: BTreeMap<String, String>,
    /// `metadata.deletionTimestamp` is set: the scheduler no longer places it.
    pub deleting: bool,
    /// Its attempts, when `spec.retryPolicy` allows more than one or it is past its first.
    #[serde(default)]
    pub attempts: Option<Attempts>,
}

/// Where a Run is in `spec.retryPolicy`'s attempts ([`crate::api::retry`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempts {
    /// `status.attempt` (1 before the first claim).
    pub attempt: i32,
    pub max_attempts: i32,
    /// When its next attempt may start, while it waits between two attempts on its Pod.
    #[serde(default)]
    pub next_try_at: Option<jiff::Timestamp>,
}

impl Attempts {
    /// The line shown after the Run's phase, e.g. "Attempt 2 of 3; it starts in 4s on
    /// rt-0 (after a failed attempt's backoff)."
    pub fn line(&self, now: jiff::Timestamp, pod: Option<&str>) -> String {
        let Attempts {
            attempt,
            max_attempts,
            next_try_at,
        } = self;
        match next_try_at {
            Some(at) => {
                let wait = at.duration_since(now).max(jiff::SignedDuration::ZERO);
                let secs = wait.as_secs() + i64::from(wait.subsec_nanos() > 0);
                let on = pod.map(|p| format!(" on {p}")).unwrap_or_default();
                format!(
                    "Attempt {attempt} of {max_attempts}; it starts in {secs}s{on} (a failed attempt's backoff)."
                )
            }
            None if attempt > max_attempts => format!("Attempt {attempt}."),
            None => format!("Attempt {attempt} of {max_attempts}."),
        }
    }
}

impl RunInfo {
    /// The line shown before the verdict when the Run is not Pending.
    pub fn replay_line(&self) -> Option<String> {
        let run = self;
        let where_ = match (&run.assigned_pod, run.phase) {
            (None, RunPhase::Pending) => return None,
            (Some(pod), _) => format!(" on {pod}"),
            (None, phase) if phase.is_active() => " without a Pod".to_string(),
            (None, _) => String::new(),
        };
        // Why it ended, unless it succeeded: the reason of Succeeded says nothing new.
        let reason = match &run.reason {
            Some(reason) if run.phase.is_terminal() && run.phase != RunPhase::Succeeded => {
                format!(" ({reason})")
            }
            _ => String::new(),
        };
        Some(format!(
            "Run {} is {}{}{}; replaying the scheduler as if it were Pending:",
            run.name,
            run.phase.as_str(),
            reason,
            where_
        ))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeInfo {
    pub name: String,
    pub found: bool,
    pub replicas: Option<i32>,
    /// `spec.capacity.resources` as declared (quantity strings).
    pub capacity: BTreeMap<String, String>,
    /// Why its Pods cannot be created or cannot run (its `ReplicaFailure` condition's
    /// message), while they cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_failure: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DecisionKind {
    Schedule,
    Unschedulable,
    Invalid,
}

/// PreFilter refused the Run: the scheduler fails it with this reason and message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Invalid {
    pub reason: String,
    /// The field PreFilter refused, e.g. `spec.resources.requests["example.com/gpu"]`.
    pub field: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistogramEntry {
    /// The text in the Pending message, e.g. `Insufficient example.com/gpu`.
    pub reason: String,
    pub count: usize,
    pub plugin: String,
    /// The resource of an `Insufficient <resource>` reason.
    pub resource: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScorePluginInfo {
    pub name: String,
    pub weight: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodReport {
    pub name: String,
    pub ready: bool,
    pub terminating: bool,
    pub heartbeat: HeartbeatReport,
    /// Why the capacity annotations could not be read.
    pub capacity_error: Option<String>,
    /// Requested resources first-class, plus every advertised one, in name order.
    pub resources: Vec<ResourceUse>,
    /// The requested resources that do not fit here, as RuntimePodAvailability decided
    /// (computed for every Pod, whatever its first rejection).
    pub shortfalls: Vec<ShortfallReport>,
    /// Every filter's own verdict on this Pod (all of them run, unlike the cycle).
    pub filters: Vec<FilterResult>,
    /// The cycle's first rejection; `None` when the Pod is feasible.
    pub rejection: Option<RejectionReport>,
    /// Per-plugin scores, when feasible.
    pub scores: Vec<ScoreReport>,
    pub total: Option<i64>,
    pub chosen: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatReport {
    pub state: HeartbeatState,
    pub holder: Option<String>,
    pub renew_time: Option<Timestamp>,
    pub expires_at: Option<Timestamp>,
    pub duration_seconds: Option<i32>,
}

/// The heartbeat Lease as shown to the user; the verdict itself is the filter's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HeartbeatState {
    Fresh,
    Stale,
    Missing,
    HeldByOther,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceUse {
    pub name: String,
    /// Active Runs' usage, without the explained Run; `None` when an active Run's amount is
    /// unreadable (the Pod then has none of it left).
    pub used: Option<u64>,
    /// Scheduler-local reservations: always 0 here, explain has no such cache.
    pub assumed: u64,
    /// `None` when the Pod does not advertise the resource.
    pub capacity: Option<u64>,
    /// The explained Run's request (0 when it does not request the resource).
    pub request: u64,
}

/// One requested resource that does not fit a Pod: the plugin's [`Shortfall`], as shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShortfallReport {
    pub resource: String,
    pub requested: u64,
    /// Actual plus assumed usage; `None` when an active Run's amount is unreadable.
    pub used: Option<u64>,
    /// `None` when the Pod does not advertise the resource.
    pub capacity: Option<u64>,
    /// What would have to be released for the Run to fit; `None` when releasing cannot help.
    pub to_release: Option<u64>,
}

impl From<&Shortfall> for ShortfallReport {
    fn from(s: &Shortfall) -> Self {
        ShortfallReport {
            resource: s.resource.to_string(),
            requested: s.requested,
            used: (s.used != u64::MAX).then_some(s.used),
            capacity: s.capacity,
            to_release: s.to_release(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilterResult {
    pub plugin: String,
    pub passed: bool,
    /// The text in the Pending message.
    pub reason: Option<String>,
    pub resource: Option<String>,
    /// The plugin's bounded reason constant (not serialized: `reason` is its text).
    #[serde(skip)]
    pub code: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RejectionReport {
    pub plugin: String,
    /// The text in the Pending message.
    pub reason: String,
    pub resource: Option<String>,
    /// The plugin's bounded reason constant (not serialized: `reason` is its text).
    #[serde(skip)]
    pub code: &'static str,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreReport {
    pub plugin: String,
    pub weight: i64,
    pub raw: i64,
    /// In 0..=100.
    pub normalized: i64,
    /// `normalized * weight`.
    pub weighted: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TermReport {
    pub kind: TermKind,
    /// Path of the term in the Run, e.g. `spec.affinity.runAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]`.
    pub field: String,
    /// The label selector in kubectl's syntax, e.g. `cohort=a`.
    pub selector: String,
    /// Whether the Run's own labels match (it may seed an empty affinity group).
    pub matches_self: bool,
    /// The selector only asks for label values (`a=x`), so "labelled" reads right.
    #[serde(skip)]
    pub labels_only: bool,
    /// Pods hosting matching Runs (other than the explained one).
    pub targets: Vec<TargetReport>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TermKind {
    Affinity,
    AntiAffinity,
}

/// A Pod and the Runs on it that a term is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetReport {
    pub pod: String,
    pub runs: Vec<String>,
}
