//! The `PersistentWorkspace` custom resource: a workspace on one Runtime Pod's local disk, its
//! spec, status and phase, the cleanup policies and where the workspace lives on the Pod.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema::{condition_list, no_default, string_enum};

/// A workspace bound to one Runtime Pod's local disk, shared by the Runs that name it.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[kube(
    group = "kruntimes.io",
    version = "v1alpha1",
    kind = "PersistentWorkspace",
    namespaced,
    derive = "Default",
    status = "PersistentWorkspaceStatus",
    shortname = "pw",
    category = "kruntimes",
    doc = "A workspace on one Runtime Pod's local disk that Runs naming it share.",
    printcolumn = r#"{"name": "Phase", "type": "string", "jsonPath": ".status.phase"}"#,
    printcolumn = r#"{"name": "Runtime", "type": "string", "jsonPath": ".spec.runtime"}"#,
    printcolumn = r#"{"name": "Bound Pod", "type": "string", "jsonPath": ".status.boundPod"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["runtime"]))]
pub struct PersistentWorkspaceSpec {
    /// The Runtime whose Pod holds the workspace.
    #[serde(default)]
    #[schemars(transform = no_default, length(min = 1, max = 63), regex(pattern = r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"))]
    pub runtime: String,
    /// How the workspace is bound: `RuntimePodLocal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "workspace_mode")]
    pub mode: Option<String>,
    /// Seconds to keep the data after the workspace becomes unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_unused: Option<i32>,
    /// `DeleteAfterTTL` or `Retain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "workspace_cleanup_policy")]
    pub cleanup_policy: Option<String>,
}

/// Observed state of a PersistentWorkspace.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PersistentWorkspaceStatus {
    /// `Pending`, `Bound`, `Lost` or `Released`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "workspace_phase")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The Runtime Pod that holds the workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_pod: Option<String>,
    /// The workspace's path on that Pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "condition_list")]
    pub conditions: Vec<Condition>,
}

/// The phase of a PersistentWorkspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkspacePhase {
    /// Not bound yet: the first Run that uses it binds it.
    Pending,
    /// Bound to `status.boundPod`: Runs that use it go there only.
    Bound,
    /// Its Runtime Pod is gone, and its data with it.
    Lost,
    /// Released after `ttlSecondsAfterUnused` without use.
    Released,
}

impl WorkspacePhase {
    pub const ALL: [WorkspacePhase; 4] = [
        WorkspacePhase::Pending,
        WorkspacePhase::Bound,
        WorkspacePhase::Lost,
        WorkspacePhase::Released,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WorkspacePhase::Pending => "Pending",
            WorkspacePhase::Bound => "Bound",
            WorkspacePhase::Lost => "Lost",
            WorkspacePhase::Released => "Released",
        }
    }

    /// The phase a status string names; an empty or unknown one is `Pending`.
    pub fn parse(value: Option<&str>) -> Self {
        WorkspacePhase::ALL
            .into_iter()
            .find(|p| Some(p.as_str()) == value)
            .unwrap_or(WorkspacePhase::Pending)
    }
}

/// `spec.cleanupPolicy` (the default): once `ttlSecondsAfterUnused` has passed the workspace
/// is Released and deleted.
pub const CLEANUP_DELETE_AFTER_TTL: &str = "DeleteAfterTTL";
/// `spec.cleanupPolicy`: the workspace is Released but its object kept.
pub const CLEANUP_RETAIN: &str = "Retain";

impl PersistentWorkspace {
    /// The observed phase; a workspace without status is Pending.
    pub fn phase(&self) -> WorkspacePhase {
        WorkspacePhase::parse(self.status.as_ref().and_then(|s| s.phase.as_deref()))
    }

    /// The Runtime Pod it is bound to: `status.boundPod` while Bound.
    pub fn bound_pod(&self) -> Option<&str> {
        let status = self.status.as_ref()?;
        (self.phase() == WorkspacePhase::Bound)
            .then_some(status.bound_pod.as_deref())
            .flatten()
    }

    /// The workspace's directory on its Runtime Pod: `/workspace/persistent/<name>`, under
    /// the Pod's workspace volume (runtimed maps `/workspace` to its `--workspace-root`).
    pub fn path_for(name: &str) -> String {
        format!("{WORKSPACE_MOUNT}/persistent/{name}")
    }
}

/// Where a Runtime Pod's workspace volume is mounted, as upstream lays it out.
pub const WORKSPACE_MOUNT: &str = "/workspace";

fn workspace_mode(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    string_enum(&["RuntimePodLocal"], Some("RuntimePodLocal"))
}

fn workspace_cleanup_policy(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    string_enum(
        &[CLEANUP_DELETE_AFTER_TTL, CLEANUP_RETAIN],
        Some(CLEANUP_DELETE_AFTER_TTL),
    )
}

fn workspace_phase(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let phases: Vec<&str> = WorkspacePhase::ALL.iter().map(|p| p.as_str()).collect();
    string_enum(&phases, Some("Pending"))
}
