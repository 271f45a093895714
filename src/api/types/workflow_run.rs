//! The `WorkflowRun` custom resource: one execution of jobs (inline, or bound from a Workflow
//! at trigger time), its cancel request, and the status of every job, step and Action step,
//! with the Run each one became.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema::{condition_list, no_default, string_enum};
use super::workflow::{JobSpec, LABEL_VALUE, job_map};

/// The label on a WorkflowRun's children (Runs, child WorkflowRuns, its snapshot): its UID.
pub const LABEL_WORKFLOW_RUN_UID: &str = "kruntimes.io/workflowrun-uid";
/// The label on a child Run: the job it is a step of.
pub const LABEL_WORKFLOW_JOB: &str = "kruntimes.io/workflow-job";
/// The label on a child Run: the step it is.
pub const LABEL_WORKFLOW_STEP: &str = "kruntimes.io/workflow-step";
/// The label on a child Run of an Action call: the Action's own step it is.
pub const LABEL_WORKFLOW_ACTION_STEP: &str = "kruntimes.io/workflow-action-step";
/// The annotation prefix on a child WorkflowRun of a reusable Workflow call: the Workflow's
/// output expressions, frozen when the call started (the suffix is the output's name).
pub const ANNOTATION_WORKFLOW_OUTPUT: &str = "kruntimes.io/workflow-output.";
/// The condition a WorkflowRun is accepted (or refused) by.
pub const CONDITION_ACCEPTED: &str = "Accepted";

/// One execution of a set of jobs.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kruntimes.io",
    version = "v1alpha1",
    kind = "WorkflowRun",
    namespaced,
    derive = "Default",
    derive = "PartialEq",
    status = "WorkflowRunStatus",
    shortname = "wfr",
    category = "kruntimes",
    doc = "One execution of jobs; each step becomes a Run that the kruntimes scheduler places.",
    printcolumn = r#"{"name": "Phase", "type": "string", "jsonPath": ".status.phase"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["jobs"], "x-kubernetes-validations" = [
    {
        "rule": "self.jobs.all(name, !has(self.jobs[name].needs) || self.jobs[name].needs.all(need, need in self.jobs && need != name))",
        "message": "each dependency must name another job in this WorkflowRun"
    },
    {"rule": "self.jobs == oldSelf.jobs", "message": "jobs are immutable after WorkflowRun creation"},
    {
        "rule": "!has(oldSelf.cancelRequested) || !oldSelf.cancelRequested || (has(self.cancelRequested) && self.cancelRequested)",
        "message": "cancelRequested may not transition from true to false"
    }
]))]
pub struct WorkflowRunSpec {
    /// Jobs by name. They run in parallel unless `needs` orders them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(transform = no_default, schema_with = "job_map")]
    pub jobs: BTreeMap<String, JobSpec>,
    /// Cancels the WorkflowRun: no Run is created any more and active ones are cancelled.
    /// One way: it may not go back to false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancel_requested: bool,
}

/// The lifecycle phase of a WorkflowRun.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum WorkflowPhase {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl WorkflowPhase {
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }
}

/// The lifecycle phase of a job.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum JobPhase {
    #[default]
    Pending,
    /// Waiting for the jobs it needs.
    Waiting,
    Running,
    Succeeded,
    Failed,
    /// Not run: a job it needs failed or was skipped.
    Skipped,
}

/// The lifecycle phase of a step.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum StepPhase {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
}

/// The observed state of a WorkflowRun.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["phase"]))]
pub struct WorkflowRunStatus {
    #[serde(default)]
    #[schemars(schema_with = "workflow_phase")]
    pub phase: WorkflowPhase,
    /// Every job's status by name; absent until the WorkflowRun is accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 64))]
    pub jobs: Option<BTreeMap<String, JobStatus>>,
    /// The ControllerRevision that holds what this WorkflowRun executes, frozen when it was
    /// accepted (its jobs and the Actions they call).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 253))]
    pub snapshot_name: String,
    /// Why the WorkflowRun failed or was refused.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 4096))]
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "condition_list")]
    pub conditions: Vec<Condition>,
}

/// The status of one job.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["phase"]))]
pub struct JobStatus {
    #[serde(default)]
    #[schemars(schema_with = "job_phase")]
    pub phase: JobPhase,
    /// The jobs this one needs, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 63)))]
    pub pre: Vec<String>,
    /// The child WorkflowRun of a reusable Workflow call.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 253))]
    pub workflow_run_name: String,
    /// The job's outputs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub outputs: BTreeMap<String, String>,
    /// Every step, in the job's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128))]
    pub steps: Vec<StepStatus>,
}

/// The status of one step of a job.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["name", "phase"]))]
pub struct StepStatus {
    #[serde(default)]
    #[schemars(transform = no_default, length(min = 1, max = 63), regex(pattern = LABEL_VALUE))]
    pub name: String,
    #[serde(default)]
    #[schemars(schema_with = "step_phase")]
    pub phase: StepPhase,
    /// The Run this step became (an inline step).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub run_name: String,
    /// The step's outputs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub outputs: BTreeMap<String, String>,
    /// The Action's own steps, each its own Run (an Action call).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128))]
    pub action_steps: Vec<ActionStepStatus>,
}

/// The status of one step of a called Action.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["name", "phase"]))]
pub struct ActionStepStatus {
    #[serde(default)]
    #[schemars(transform = no_default, length(min = 1, max = 63), regex(pattern = LABEL_VALUE))]
    pub name: String,
    #[serde(default)]
    #[schemars(schema_with = "step_phase")]
    pub phase: StepPhase,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub run_name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub outputs: BTreeMap<String, String>,
}

fn workflow_phase(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let phases = ["Pending", "Running", "Succeeded", "Failed", "Cancelled"];
    string_enum(&phases, Some("Pending"))
}

fn job_phase(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let phases = [
        "Pending",
        "Waiting",
        "Running",
        "Succeeded",
        "Failed",
        "Skipped",
    ];
    string_enum(&phases, None)
}

fn step_phase(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    string_enum(&["Pending", "Running", "Succeeded", "Failed"], None)
}
