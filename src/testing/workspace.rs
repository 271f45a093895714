//! The PersistentWorkspace builder: [`workspace`] and [`WorkspaceBuilder`], a workspace of
//! a Runtime, Pending or bound to a Pod.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::objects::{NS, RUNTIME, setters};
use crate::api::{
    PersistentWorkspace, PersistentWorkspaceSpec, PersistentWorkspaceStatus, WorkspacePhase,
};

#[derive(Debug, Clone)]
pub struct WorkspaceBuilder {
    name: String,
    namespace: String,
    runtime: String,
    phase: Option<WorkspacePhase>,
    bound_pod: Option<String>,
    ttl: Option<i32>,
    cleanup_policy: Option<String>,
    last_used: Option<Timestamp>,
}

/// A PersistentWorkspace in [`NS`] of [`RUNTIME`], `RuntimePodLocal`, without status (Pending)
/// and UID `workspace-uid-<name>`.
pub fn workspace(name: &str) -> WorkspaceBuilder {
    WorkspaceBuilder {
        name: name.to_string(),
        namespace: NS.to_string(),
        runtime: RUNTIME.to_string(),
        phase: None,
        bound_pod: None,
        ttl: None,
        cleanup_policy: None,
        last_used: None,
    }
}

impl WorkspaceBuilder {
    setters! {
        ns(namespace: &str) => namespace = namespace.to_string();
        runtime(runtime: &str) => runtime = runtime.to_string();
        /// `spec.ttlSecondsAfterUnused`.
        ttl(seconds: i32) => ttl = Some(seconds);
        /// `spec.cleanupPolicy`.
        cleanup_policy(policy: &str) => cleanup_policy = Some(policy.to_string());
        /// `status.lastUsedTime`.
        last_used(at: Timestamp) => last_used = Some(at);
        /// `status.phase: Lost`, its Pod still named.
        lost() => phase = Some(WorkspacePhase::Lost);
        /// `status.phase: Released`.
        released() => phase = Some(WorkspacePhase::Released);
    }

    /// `status.phase: Bound` to `pod`.
    pub fn bound(mut self, pod: &str) -> Self {
        self.phase = Some(WorkspacePhase::Bound);
        self.bound_pod = Some(pod.to_string());
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn build(&self) -> PersistentWorkspace {
        let mut workspace = PersistentWorkspace::new(
            &self.name,
            PersistentWorkspaceSpec {
                runtime: self.runtime.clone(),
                mode: Some("RuntimePodLocal".to_string()),
                ttl_seconds_after_unused: self.ttl,
                cleanup_policy: self.cleanup_policy.clone(),
            },
        );
        let meta = &mut workspace.metadata;
        meta.namespace = Some(self.namespace.clone());
        meta.uid = Some(format!("workspace-uid-{}", self.name));
        workspace.status =
            (self.phase.is_some() || self.last_used.is_some()).then(|| PersistentWorkspaceStatus {
                phase: self.phase.map(|p| p.as_str().to_string()),
                runtime: Some(self.runtime.clone()),
                bound_pod: self.bound_pod.clone(),
                path: self
                    .bound_pod
                    .as_ref()
                    .map(|_| PersistentWorkspace::path_for(&self.name)),
                last_used_time: self.last_used.map(Time),
                conditions: Vec::new(),
            });
        workspace
    }
}
