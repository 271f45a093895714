//! The `Runtime` and `Run` custom resources (`kruntimes.io/v1alpha1`) and their CRDs.
//!
//! These are plain data: parsing and validation of their quantities lives in
//! [`super::resources`], status transitions in [`super::status`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::EnvVar;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A pool of Runtime Pods that advertise logical capacity.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "kruntimes.io",
    version = "v1alpha1",
    kind = "Runtime",
    namespaced,
    status = "RuntimeStatus",
    shortname = "rt",
    category = "kruntimes",
    doc = "A pool of Runtime Pods that advertise logical capacity to the kruntimes scheduler.",
    printcolumn = r#"{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}"#,
    printcolumn = r#"{"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeSpec {
    /// Runtime Pods to keep.
    #[schemars(range(min = 0))]
    pub replicas: i32,
    /// The Pod template; its main container runs `kubectl-kruntimes runtimed`.
    #[schemars(schema_with = "preserve_unknown_object")]
    pub template: k8s_openapi::api::core::v1::PodTemplateSpec,
    /// Logical capacity of every Runtime Pod.
    #[serde(default)]
    pub capacity: RuntimeCapacity,
}

/// Per-Pod logical capacity, projected onto Pods as `kruntimes.io/capacity.<resource>`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RuntimeCapacity {
    /// Resource name to whole-number quantity, e.g. `runs: "4"`, `example.com/gpu: "1"`.
    /// Validated by the Runtime controller, which reports a malformed value on the status.
    #[serde(default)]
    #[schemars(schema_with = "quantity_map")]
    pub resources: BTreeMap<String, Quantity>,
}

/// Observed state of a Runtime.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStatus {
    #[serde(default)]
    pub replicas: i32,
    #[serde(default)]
    pub ready_replicas: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// One unit of work placed on a Runtime Pod.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "kruntimes.io",
    version = "v1alpha1",
    kind = "Run",
    namespaced,
    status = "RunStatus",
    category = "kruntimes",
    doc = "One unit of work that the kruntimes scheduler places on a Runtime Pod.",
    printcolumn = r#"{"name": "Runtime", "type": "string", "jsonPath": ".spec.runtime"}"#,
    printcolumn = r#"{"name": "Phase", "type": "string", "jsonPath": ".status.phase"}"#,
    printcolumn = r#"{"name": "Pod", "type": "string", "jsonPath": ".status.podName"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    selectable = ".spec.runtime",
    selectable = ".status.podName"
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.resources) == has(oldSelf.resources) && (!has(self.resources) || self.resources == oldSelf.resources)",
    "message": "spec.resources is immutable: delete and recreate the Run to change its requests"
}]))]
pub struct RunSpec {
    /// Name of the Runtime in the same namespace.
    #[schemars(length(min = 1))]
    pub runtime: String,
    /// Logical resources held for the Run's whole active lifetime. Omitted means `{runs: 1}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<RunResources>,
    /// Required and preferred co-location with other Runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<RunAffinity>,
    /// What runtimed executes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<RunMode>,
}

/// Logical resource requests of a Run.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RunResources {
    /// Resource name to whole-number quantity. Validated by the scheduler's PreFilter: a
    /// malformed value fails the Run with reason `InvalidResources`. (A CEL check of the values
    /// is beyond the API server's cost budget for int-or-string fields.)
    #[serde(default)]
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

/// Required and preferred terms of one affinity kind.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct AffinityTerms {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<RunAffinityTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred: Vec<WeightedRunAffinityTerm>,
}

/// Runs matching `labelSelector` in the same `topologyKey` domain.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunAffinityTerm {
    pub label_selector: LabelSelector,
    /// Only `kruntimes.io/runtime-pod` is supported.
    pub topology_key: String,
}

/// A preferred term with its weight.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct WeightedRunAffinityTerm {
    #[schemars(range(min = 1, max = 100))]
    pub weight: i32,
    pub term: RunAffinityTerm,
}

/// Execution mode of a Run.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RunMode {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskMode>,
}

/// A process that runtimed spawns.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskMode {
    #[schemars(length(min = 1))]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "preserve_unknown_array")]
    pub env: Vec<EnvVar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
}

/// Lifecycle phase of a Run.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum RunPhase {
    #[default]
    Pending,
    Scheduled,
    Running,
    Succeeded,
    Failed,
}

impl RunPhase {
    pub fn is_terminal(self) -> bool {
        matches!(self, RunPhase::Succeeded | RunPhase::Failed)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RunPhase::Pending => "Pending",
            RunPhase::Scheduled => "Scheduled",
            RunPhase::Running => "Running",
            RunPhase::Succeeded => "Succeeded",
            RunPhase::Failed => "Failed",
        }
    }
}

/// Observed state of a Run.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<RunPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "podUID")]
    pub pod_uid: Option<String>,
    /// A bounded CamelCase reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The Runtime Pod the scheduler is draining for this Pending Run after it waited longer
    /// than the starvation threshold while later Runs were placed: later Runs leave room for
    /// its request there. Set and cleared by the scheduler only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nominated_pod_name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
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

    /// Whether the scheduler should place this Run: Pending (or without status), not bound to
    /// a Pod, not being deleted.
    pub fn waits_for_placement(&self) -> bool {
        self.metadata.deletion_timestamp.is_none()
            && self.phase() == RunPhase::Pending
            && self
                .status
                .as_ref()
                .and_then(|s| s.pod_name.as_ref())
                .is_none()
    }

    /// The Pod this Run is assigned to, when it is active (Scheduled or Running with a podName).
    pub fn active_pod(&self) -> Option<&str> {
        let status = self.status.as_ref()?;
        match status.phase {
            Some(RunPhase::Scheduled | RunPhase::Running) => status.pod_name.as_deref(),
            _ => None,
        }
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

/// A map of resource name to quantity, without k8s-openapi's kilobyte-long Quantity essay.
fn quantity_map(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "maxProperties": 32,
        "additionalProperties": {"x-kubernetes-int-or-string": true}
    })
}

fn preserve_unknown_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

fn preserve_unknown_array(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn run_crd_declares_selectable_fields_for_runtime_and_pod() {
        let crd = serde_json::to_value(Run::crd()).unwrap();
        let fields = &crd["spec"]["versions"][0]["selectableFields"];
        assert_eq!(
            fields,
            &serde_json::json!([{"jsonPath": ".spec.runtime"}, {"jsonPath": ".status.podName"}])
        );
    }

    #[test]
    fn run_crd_makes_resources_immutable_with_cel() {
        let crd = serde_json::to_value(Run::crd()).unwrap();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        let rule = spec["x-kubernetes-validations"][0]["rule"]
            .as_str()
            .unwrap();
        assert!(
            rule.contains("self.resources == oldSelf.resources"),
            "{rule}"
        );
    }

    #[test]
    fn run_without_status_is_pending_and_inactive() {
        let run = crate::testing::run("a").build();
        assert!(run.status.is_none());
        assert_eq!(run.phase(), RunPhase::Pending);
        assert_eq!(run.active_pod(), None);
    }
}
