//! The `Action` custom resource: a reusable sequence of steps, with inputs and outputs, that a
//! WorkflowRun step calls with `uses`. Each of its steps becomes a Run of the caller's job.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema::no_default;
use super::workflow::{InputSpec, OutputSpec, StepSpec, WorkflowStatus};

/// A reusable sequence of steps.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kruntimes.io",
    version = "v1alpha1",
    kind = "Action",
    namespaced,
    derive = "Default",
    derive = "PartialEq",
    status = "ActionStatus",
    category = "kruntimes",
    doc = "A reusable sequence of steps that a Workflow step calls with uses.",
    printcolumn = r#"{"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["steps"], "x-kubernetes-validations" = [{
    "rule": "self.steps.all(step, has(step.run) && !has(step.uses) && !has(step.with))",
    "message": "Action steps must set run and may not use another Action"
}]))]
pub struct ActionSpec {
    /// Parameters this Action accepts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub inputs: BTreeMap<String, InputSpec>,
    /// Values this Action exposes once its steps ran.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub outputs: BTreeMap<String, OutputSpec>,
    /// The steps, run one after another (`run` steps only).
    #[serde(default)]
    #[schemars(transform = no_default, length(min = 1, max = 128))]
    pub steps: Vec<StepSpec>,
}

/// The observed state of an Action definition (the same shape as a Workflow's).
pub type ActionStatus = WorkflowStatus;
