//! The `Run` custom resource: one unit of work placed on a Runtime Pod, its spec (source,
//! mode, workspace, affinity, resources, timeout, retries), phase and status, and the queries
//! the scheduler and runtimed ask of a Run.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::EnvVar;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema::{
    condition_list, no_default, preserve_unknown_array_32, preserve_unknown_object, quantity_map,
    string_enum,
};

/// One unit of work placed on a Runtime Pod.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "kruntimes.io",
    version = "v1alpha1",
    kind = "Run",
    namespaced,
    derive = "Default",
    status = "RunStatus",
    shortname = "rn",
    category = "kruntimes",
    doc = "One unit of work that the kruntimes scheduler places on a Runtime Pod.",
    printcolumn = r#"{"name": "Phase", "type": "string", "jsonPath": ".status.phase"}"#,
    printcolumn = r#"{"name": "Assigned Pod", "type": "string", "jsonPath": ".status.assignedPod"}"#,
    printcolumn = r#"{"name": "Runtime", "type": "string", "jsonPath": ".spec.runtime"}"#,
    printcolumn = r#"{"name": "Reason", "type": "string", "jsonPath": ".status.reason"}"#,
    printcolumn = r#"{"name": "Attempt", "type": "integer", "jsonPath": ".status.attempt"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name": "Priority", "type": "integer", "jsonPath": ".status.priority", "priority": 1}"#,
    printcolumn = r#"{"name": "Nominated Pod", "type": "string", "jsonPath": ".status.nominatedPodName", "priority": 1}"#,
    printcolumn = r#"{"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1}"#,
    selectable = ".spec.runtime",
    selectable = ".status.assignedPod",
    selectable = ".status.phase"
)]
#[serde(rename_all = "camelCase")]
// The spec's rules (exactly one mode, paths, sources, immutable inputs, one-way cancel) are
// deploy/run-policy.yaml's, not the CRD's: the API server evaluates a CRD's rules on every
// status write too (see `crate::policy::run`).
#[schemars(extend("required" = ["runtime"]))]
pub struct RunSpec {
    /// Name of the Runtime in the same namespace.
    #[serde(default)]
    #[schemars(transform = no_default, length(min = 1, max = 63), regex(pattern = r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"))]
    pub runtime: String,
    /// Where the code comes from: `inline` (and a function's `inlinePath`) is written into the
    /// Run's directory before it runs; `repoURL` at `commitSHA` is checked out into its
    /// `repo` directory, the working directory then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<CodeSource>,
    /// What runtimed executes: exactly one of `task` and `function`. Omitted, a task
    /// (`{task: {}}`), so that a Run of only a `source.inline` (the Go project's documented
    /// minimal Run, which its own CRD refuses) runs its script.
    #[serde(default)]
    #[schemars(extend("default" = {"task": {}}))]
    pub mode: RunMode,
    /// A namespace-local PersistentWorkspace the Run uses: the Run runs in its directory, on
    /// the Runtime Pod the workspace is bound to (the first Run that uses it binds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<RunWorkspaceReference>,
    /// Required and preferred co-location with other Runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<RunAffinity>,
    /// kruntimes: the `scheduling.k8s.io/v1` PriorityClass whose value orders this Run among
    /// its Runtime's Pending Runs and decides what it may preempt. Omitted means the cluster's
    /// `globalDefault` class, else priority 0. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub priority_class_name: Option<String>,
    /// Logical resources held for the Run's whole active lifetime. Omitted means `{runs: 1}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<RunResources>,
    /// Environment of the execution.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub env: Vec<EnvVar>,
    /// The longest the Run may run, from `startTime`, a Go duration such as `10m`: runtimed
    /// stops it then and it ends `Timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Set to true to cancel the Run; never back to false. A Pending Run ends `Cancelled` in
    /// the scheduler, a Scheduled one in runtimed without running, a Running one once runtimed
    /// has stopped it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancel_requested: bool,
    /// How often a failed attempt is tried again, and after what pause: `maxAttempts` in all
    /// (default 1), the pause doubling from `backoff` (default 1s) up to 60s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_policy: Option<RetryPolicy>,
    /// Seconds after `completionTime` before the scheduler's leader deletes the terminal Run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,
}

/// Where the code to run comes from.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
// Its rules are deploy/run-policy.yaml's.
pub struct CodeSource {
    /// A standalone script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 262144))]
    pub inline: Option<String>,
    /// Where inline function source is written, relative to the working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub inline_path: Option<String>,
    /// A Git repository to clone.
    #[serde(default, rename = "repoURL", skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub repo_url: Option<String>,
    /// The commit to check out.
    #[serde(default, rename = "commitSHA", skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub commit_sha: Option<String>,
}

/// How a failed Run is retried.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetryPolicy {
    /// Attempts including the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub max_attempts: Option<i32>,
    /// The first backoff, a Go duration; it doubles per retry, capped at 60 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<String>,
    /// The failure reasons that are retried; empty means all but `Cancelled`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(max = 128)))]
    pub retryable_reasons: Vec<String>,
}

/// Identifies a namespace-local PersistentWorkspace.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunWorkspaceReference {
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "workspace_kind")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "workspace_api_group")]
    pub api_group: Option<String>,
}

/// Logical resource requests of a Run.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RunResources {
    /// Resource name to whole-number quantity. Validated by the scheduler's PreFilter: a
    /// malformed value fails the Run with reason `InvalidResources`. (A CEL check of the values
    /// is beyond the API server's cost budget for int-or-string fields.)
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "quantity_map")]
    pub requests: BTreeMap<String, Quantity>,
}

/// Run affinity and anti-affinity.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunAffinity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_affinity: Option<AffinityTerms>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_anti_affinity: Option<AffinityTerms>,
}

/// Required and preferred terms of one affinity kind (`RunAffinityRules`).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct AffinityTerms {
    /// Hard constraints.
    #[serde(
        default,
        rename = "requiredDuringSchedulingIgnoredDuringExecution",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(length(max = 32))]
    pub required: Vec<RunAffinityTerm>,
    /// Soft preferences.
    #[serde(
        default,
        rename = "preferredDuringSchedulingIgnoredDuringExecution",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(length(max = 32))]
    pub preferred: Vec<WeightedRunAffinityTerm>,
}

/// Runs matching `labelSelector` in the same `topologyKey` domain.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["labelSelector", "topologyKey"]))]
pub struct RunAffinityTerm {
    #[serde(default)]
    #[schemars(transform = no_default)]
    pub label_selector: LabelSelector,
    /// Only `kruntimes.io/runtime-pod`.
    #[serde(default)]
    #[schemars(schema_with = "topology_key", transform = no_default)]
    pub topology_key: String,
}

/// A preferred term with its weight.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WeightedRunAffinityTerm {
    #[schemars(range(min = 1, max = 100))]
    pub weight: i32,
    #[serde(rename = "runAffinityTerm")]
    pub term: RunAffinityTerm,
}

/// Execution mode of a Run: exactly one of `task` and `function`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
// deploy/run-policy.yaml holds the rule.
pub struct RunMode {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<FunctionMode>,
}

/// One-shot execution.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskMode {
    /// A relative script file to execute. Without a runtime server runtimed runs it as the
    /// program, with `args` as its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub entrypoint: Option<String>,
    /// Arguments passed to the runtime. Without a runtime server and without `entrypoint`,
    /// the first is the program runtimed runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(max = 8192)))]
    pub args: Vec<String>,
    /// kruntimes: the working directory of the process runtimed spawns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
}

/// Callable function execution: registered on the Runtime Pod's runtime server.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FunctionMode {
    /// The `module.function` to call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    pub handler: Option<String>,
    /// Seconds after the last invocation before the function's capacity may be released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub idle_timeout_seconds: Option<i32>,
}

/// Lifecycle phase of a Run.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum RunPhase {
    #[default]
    Pending,
    Scheduled,
    Running,
    /// An active function Run that accepts invocations: it holds its capacity until released.
    Ready,
    Succeeded,
    Failed,
    Timeout,
    Cancelled,
}

impl RunPhase {
    /// Every phase, in lifecycle order.
    pub const ALL: [RunPhase; 8] = [
        RunPhase::Pending,
        RunPhase::Scheduled,
        RunPhase::Running,
        RunPhase::Ready,
        RunPhase::Succeeded,
        RunPhase::Failed,
        RunPhase::Timeout,
        RunPhase::Cancelled,
    ];

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunPhase::Succeeded | RunPhase::Failed | RunPhase::Timeout | RunPhase::Cancelled
        )
    }

    /// Whether a Run in this phase holds capacity on its assigned Pod.
    pub fn is_active(self) -> bool {
        matches!(
            self,
            RunPhase::Scheduled | RunPhase::Running | RunPhase::Ready
        )
    }

    /// Whether runtimed has claimed a Run in this phase (Running, or Ready for a registered
    /// function): a lost Pod fails it instead of placing it again.
    pub fn is_admitted(self) -> bool {
        matches!(self, RunPhase::Running | RunPhase::Ready)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RunPhase::Pending => "Pending",
            RunPhase::Scheduled => "Scheduled",
            RunPhase::Running => "Running",
            RunPhase::Ready => "Ready",
            RunPhase::Succeeded => "Succeeded",
            RunPhase::Failed => "Failed",
            RunPhase::Timeout => "Timeout",
            RunPhase::Cancelled => "Cancelled",
        }
    }
}

/// Observed state of a Run.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "run_phase")]
    pub phase: Option<RunPhase>,
    /// The Runtime Pod the scheduler assigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assigned_pod: Option<String>,
    /// The UID of `assignedPod`, set and cleared with it.
    #[serde(
        default,
        rename = "assignedPodUID",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(max = 253))]
    pub assigned_pod_uid: Option<String>,
    /// The invoke endpoint of a ready function Run (kept, not acted on yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub endpoint: Option<serde_json::Value>,
    /// kruntimes: a bounded CamelCase reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub message: Option<String>,
    /// kruntimes: the Runtime Pod the scheduler is draining for this Pending Run after it
    /// waited longer than the starvation threshold while later Runs were placed: later Runs
    /// leave room for its request there. Set and cleared by the scheduler only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nominated_pod_name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "condition_list")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Key-value outputs of the Run.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub outputs: BTreeMap<String, String>,
    /// The artifacts runtimed stored for the Run (the Runtime's artifact store).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "preserve_unknown_array_32")]
    pub artifact_refs: Vec<serde_json::Value>,
    /// The artifact store the Run's artifacts are in, as it was when they were stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub artifact_store: Option<serde_json::Value>,
    /// The current execution attempt (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<i32>,
    /// kruntimes: the priority the scheduler resolved from `spec.priorityClassName` (or the
    /// global default), recorded with its first status write; it orders the Run from then on,
    /// whatever later happens to the class. Set by the scheduler only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// kruntimes: the exit code of the Run's process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

impl Run {
    /// The observed phase; a Run without status is Pending.
    pub fn phase(&self) -> RunPhase {
        self.status
            .as_ref()
            .and_then(|s| s.phase)
            .unwrap_or_default()
    }

    /// `spec.timeout` as a duration (`None`: no limit), or why it is not one.
    pub fn timeout(&self) -> Result<Option<std::time::Duration>, String> {
        let Some(text) = self.spec.timeout.as_deref().filter(|t| !t.is_empty()) else {
            return Ok(None);
        };
        let bad = || {
            format!(
                "spec.timeout: {text:?} is not a duration; use a positive value such as 30s, 10m or 1h30m"
            )
        };
        let parsed: jiff::SignedDuration = text.parse().map_err(|_| bad())?;
        match std::time::Duration::try_from(parsed) {
            Ok(d) if !d.is_zero() => Ok(Some(d)),
            _ => Err(bad()),
        }
    }

    /// Whether the scheduler should place this Run: Pending (or without status), not bound to
    /// a Pod, not being deleted.
    pub fn waits_for_placement(&self) -> bool {
        self.metadata.deletion_timestamp.is_none()
            && self.phase() == RunPhase::Pending
            && self
                .status
                .as_ref()
                .and_then(|s| s.assigned_pod.as_ref())
                .is_none()
    }

    /// The Pod this Run is assigned to, when it is active (Scheduled, Running or Ready with an
    /// `assignedPod`).
    pub fn active_pod(&self) -> Option<&str> {
        let status = self.status.as_ref()?;
        status
            .phase
            .is_some_and(RunPhase::is_active)
            .then_some(status.assigned_pod.as_deref())
            .flatten()
    }

    /// The name of the PersistentWorkspace the Run uses, if any.
    pub fn workspace_name(&self) -> Option<&str> {
        self.spec.workspace.as_ref().map(|w| w.name.as_str())
    }

    /// Whether the Run has required Run affinity terms: it waits for target Runs, so new
    /// targets may let it fit.
    pub fn requires_run_affinity(&self) -> bool {
        self.spec
            .affinity
            .as_ref()
            .and_then(|a| a.run_affinity.as_ref())
            .is_some_and(|t| !t.required.is_empty())
    }

    /// Whether the Run has required Run affinity or anti-affinity terms: a Pod with room may
    /// still refuse it.
    pub fn has_required_run_terms(&self) -> bool {
        self.spec.affinity.as_ref().is_some_and(|a| {
            [&a.run_affinity, &a.run_anti_affinity]
                .iter()
                .any(|t| t.as_ref().is_some_and(|t| !t.required.is_empty()))
        })
    }
}

fn run_phase(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let phases: Vec<&str> = RunPhase::ALL.iter().map(|p| p.as_str()).collect();
    string_enum(&phases, Some("Pending"))
}

fn topology_key(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    string_enum(&[crate::api::LABEL_RUNTIME_POD], None)
}

fn workspace_kind(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    string_enum(&["PersistentWorkspace"], Some("PersistentWorkspace"))
}

fn workspace_api_group(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    string_enum(&["kruntimes.io/v1alpha1"], Some("kruntimes.io/v1alpha1"))
}

#[cfg(test)]
mod tests;
