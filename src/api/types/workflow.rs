//! The `Workflow` custom resource: a reusable definition of jobs (each a sequence of steps on
//! one Runtime, or a call of another Workflow), its inputs and outputs; and the job and step
//! shapes that `WorkflowRun` and `Action` share with it.
//!
//! A Workflow runs nothing itself: `kubectl kruntimes workflow trigger` (or a job's `uses`)
//! binds its inputs into a `WorkflowRun`, which the workflow controller executes.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema::{condition_list, no_default, string_enum};

/// A Kubernetes label value: job, step and runtime names become labels of child Runs.
pub(super) const LABEL_VALUE: &str = r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$";
/// A DNS subdomain: the name of a Workflow or Action in the same namespace.
pub(super) const SUBDOMAIN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// A reusable definition of jobs that a WorkflowRun executes.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kruntimes.io",
    version = "v1alpha1",
    kind = "Workflow",
    namespaced,
    derive = "Default",
    derive = "PartialEq",
    status = "WorkflowStatus",
    shortname = "wf",
    category = "kruntimes",
    doc = "A reusable definition of jobs and steps; a WorkflowRun executes it.",
    printcolumn = r#"{"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["jobs"], "x-kubernetes-validations" = [{
    "rule": "self.jobs.all(name, !has(self.jobs[name].needs) || self.jobs[name].needs.all(need, need in self.jobs && need != name))",
    "message": "each dependency must name another job in this workflow"
}]))]
pub struct WorkflowSpec {
    /// Parameters this Workflow accepts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub inputs: BTreeMap<String, InputSpec>,
    /// Values this Workflow exposes once its jobs complete.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub outputs: BTreeMap<String, OutputSpec>,
    /// Jobs by name. They run in parallel unless `needs` orders them; job names become label
    /// values of child Runs.
    #[serde(default)]
    #[schemars(transform = no_default, schema_with = "job_map")]
    pub jobs: BTreeMap<String, JobSpec>,
}

/// One input of a Workflow or an Action.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InputSpec {
    /// The input's type: only `string`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "input_type")]
    pub kind: Option<String>,
    /// Whether a caller must pass the input (a non-empty `default` satisfies it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
    /// The value when the caller passes none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 8192))]
    pub default: String,
}

/// One output of a Workflow or an Action: a `${{ }}` expression evaluated after its jobs
/// or steps ran.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutputSpec {
    #[serde(default)]
    #[schemars(transform = no_default, length(min = 1, max = 8192))]
    pub value: String,
}

/// One job: its steps run in order on one Runtime, or (`uses`) it calls a reusable Workflow.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.steps) != has(self.uses)", "message": "exactly one of steps or uses must be set"},
    {"rule": "!has(self.with) || has(self.uses)", "message": "with can only be set when uses is set"}
]))]
pub struct JobSpec {
    /// The Runtime every step of this job runs on.
    #[serde(default, rename = "runs-on", skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 63), regex(pattern = LABEL_VALUE))]
    pub runs_on: String,
    /// Jobs that must succeed before this one starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 63)))]
    pub needs: Vec<String>,
    /// The steps, run one after another.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 128))]
    pub steps: Vec<StepSpec>,
    /// A reusable Workflow in the same namespace that this job runs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 253), regex(pattern = SUBDOMAIN))]
    pub uses: String,
    /// Inputs passed to the Workflow of `uses`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 256))]
    pub with: BTreeMap<String, String>,
    /// Job outputs by name: `${{ }}` expressions over its steps' outputs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub outputs: BTreeMap<String, String>,
}

impl JobSpec {
    /// Whether this job calls a reusable Workflow instead of running steps.
    pub fn calls_workflow(&self) -> bool {
        !self.uses.is_empty()
    }
}

/// One step: an inline script (`run`) that becomes one Run, or a call of an Action (`uses`).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["name"], "x-kubernetes-validations" = [
    {"rule": "has(self.run) != has(self.uses)", "message": "exactly one of run or uses must be set"},
    {"rule": "!has(self.with) || has(self.uses)", "message": "with can only be set when uses is set"},
    {"rule": "!has(self.uses) || (!has(self.args) && !has(self.env))", "message": "args and env can only be set on run steps"}
]))]
pub struct StepSpec {
    /// The step's name, unique in its job; it becomes a label value of its Run.
    #[serde(default)]
    #[schemars(transform = no_default, length(min = 1, max = 63), regex(pattern = LABEL_VALUE))]
    pub name: String,
    /// The inline script to run.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 262144))]
    pub run: String,
    /// Positional arguments of the script.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(max = 8192)))]
    pub args: Vec<String>,
    /// Extra environment of the script.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 256))]
    pub env: BTreeMap<String, String>,
    /// An Action in the same namespace that this step runs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 253), regex(pattern = SUBDOMAIN))]
    pub uses: String,
    /// Inputs passed to the Action of `uses`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 256))]
    pub with: BTreeMap<String, String>,
}

impl StepSpec {
    /// Whether this step calls an Action instead of running a script.
    pub fn calls_action(&self) -> bool {
        !self.uses.is_empty()
    }
}

/// The observed state of a Workflow definition.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "condition_list")]
    pub conditions: Vec<Condition>,
}

/// A map of job name to job: at least one, at most 64, each name a label value.
pub(super) fn job_map(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let job = generator.subschema_for::<JobSpec>();
    schemars::json_schema!({
        "type": "object",
        "minProperties": 1,
        "maxProperties": 64,
        "additionalProperties": job,
        "x-kubernetes-validations": [{
            "rule": "self.all(name, size(name) <= 63 && name.matches('^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'))",
            "message": "job names must be valid Kubernetes label values with at most 63 characters"
        }]
    })
}

pub(super) fn input_type(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    string_enum(&["string"], Some("string"))
}
