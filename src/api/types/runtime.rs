//! The `Runtime` custom resource: a pool of Runtime Pods, its spec (template, port, replicas,
//! per-Pod capacity) and status.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema::{condition_list, no_default, preserve_unknown_object, quantity_map};

/// The default `spec.port` of a Runtime: where its runtime server serves gRPC.
pub const DEFAULT_RUNTIME_PORT: i32 = 9091;

/// A pool of Runtime Pods that advertise logical capacity.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "kruntimes.io",
    version = "v1alpha1",
    kind = "Runtime",
    namespaced,
    derive = "Default",
    status = "RuntimeStatus",
    shortname = "rt",
    category = "kruntimes",
    doc = "A pool of Runtime Pods that advertise logical capacity to the kruntimes scheduler.",
    printcolumn = r#"{"name": "Image", "type": "string", "jsonPath": ".spec.template.spec.containers[0].image"}"#,
    printcolumn = r#"{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}"#,
    printcolumn = r#"{"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["template"]))]
pub struct RuntimeSpec {
    /// The Runtime Pod template. The Runtime controller adds runtimed to its first container
    /// (see docs/operations/runtime-pods.md, "Runtime Pods from any image").
    #[serde(default)]
    #[schemars(schema_with = "preserve_unknown_object", transform = no_default)]
    pub template: k8s_openapi::api::core::v1::PodTemplateSpec,
    /// The gRPC port of the runtime server in a Runtime Pod (the runtime contract).
    #[serde(default = "default_port")]
    #[schemars(range(min = 1))]
    pub port: i32,
    /// Runtime Pods to keep (kruntimes: 0 is allowed, to scale a pool to nothing).
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 0))]
    pub replicas: i32,
    /// Overrides the runtimed image that Runtime Pods get.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub daemon_image: Option<String>,
    /// Logical capacity of every Runtime Pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<RuntimeCapacity>,
    /// Durable artifact storage for the Runtime's Runs: `driver: filesystem` with
    /// `filesystem.volumeClaimName` (mounted for runtimed), or `driver: s3` with `s3.bucket`
    /// (and `prefix`, `region`, `endpoint`, `forcePathStyle`, `credentialsSecretName`,
    /// `uploadPartSize`, `uploadConcurrency`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub artifact_store: Option<serde_json::Value>,
    /// The workspace volume of a Runtime Pod, mounted at `/workspace` where its
    /// PersistentWorkspaces live: the fields of a core `VolumeSource` (default `emptyDir`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub workspace: Option<serde_json::Value>,
}

/// The API's defaults: port 9091, one replica, nothing else set.
impl Default for RuntimeSpec {
    fn default() -> Self {
        RuntimeSpec {
            template: Default::default(),
            port: DEFAULT_RUNTIME_PORT,
            replicas: default_replicas(),
            daemon_image: None,
            capacity: None,
            artifact_store: None,
            workspace: None,
        }
    }
}

fn default_port() -> i32 {
    DEFAULT_RUNTIME_PORT
}

fn default_replicas() -> i32 {
    1
}

impl RuntimeSpec {
    /// The declared per-Pod capacity (`spec.capacity.resources`), empty when omitted.
    pub fn capacity_resources(&self) -> &BTreeMap<String, Quantity> {
        static EMPTY: BTreeMap<String, Quantity> = BTreeMap::new();
        self.capacity.as_ref().map_or(&EMPTY, |c| &c.resources)
    }
}

/// Per-Pod logical capacity, projected onto Pods as `kruntimes.io/capacity.<resource>`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RuntimeCapacity {
    /// Resource name to whole-number quantity, e.g. `runs: "4"`, `example.com/gpu: "1"`.
    /// Validated by the Runtime controller, which reports a malformed value on the status.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "quantity_map")]
    pub resources: BTreeMap<String, Quantity>,
}

/// Observed state of a Runtime.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStatus {
    /// kruntimes: Runtime Pods that exist.
    #[serde(default)]
    pub replicas: i32,
    #[serde(default)]
    pub ready_replicas: i32,
    /// kruntimes: the generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// kruntimes: Runtime Pods made from the current template (the rest are replaced one at
    /// a time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "condition_list")]
    pub conditions: Vec<Condition>,
    /// kruntimes: the label selector of its Pods, for the `/scale` subresource (what
    /// `kubectl scale`, a HorizontalPodAutoscaler and KEDA read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
}
