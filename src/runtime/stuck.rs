//! Runtime Pods that were created but cannot run: a container waiting in one of the kubelet's
//! failure states (its image cannot be pulled, it crashes in a loop, its config is broken), or
//! the Pod unschedulable. What the Runtime's `ReplicaFailure` condition says besides a Pod the
//! API server refused. Pure: reads a Pod, returns words.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;

/// Container waiting reasons that do not clear by themselves (the kubelet's own names; a
/// bounded set, so they are the condition's reason as they are).
const STUCK_WAITING: &[&str] = &[
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// Why `pod` cannot run, as (reason, message): the first stuck container (init containers
/// first), else `Unschedulable` with the scheduler's message. `None` for a Pod that is running,
/// starting normally or terminating.
pub fn stuck(pod: &Pod) -> Option<(String, String)> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = pod.status.as_ref()?;
    let containers = status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten());
    for c in containers {
        let Some(waiting) = c.state.as_ref().and_then(|s| s.waiting.as_ref()) else {
            continue;
        };
        let reason = waiting.reason.as_deref().unwrap_or_default();
        if STUCK_WAITING.contains(&reason) {
            let detail = waiting.message.as_deref().unwrap_or_default();
            return Some((
                reason.to_string(),
                format!(
                    "pod {}: container {}: {reason}: {detail}",
                    pod.name_any(),
                    c.name
                ),
            ));
        }
    }
    let unschedulable = status.conditions.iter().flatten().find(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
    })?;
    Some((
        "Unschedulable".to_string(),
        format!(
            "pod {}: Unschedulable: {}",
            pod.name_any(),
            unschedulable.message.as_deref().unwrap_or_default()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "py-abc"},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn a_container_that_cannot_start_or_keeps_crashing_is_stuck() {
        let p = pod(serde_json::json!({"containerStatuses": [
            {"name": "main", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image \"nope\""}}},
        ]}));
        assert_eq!(
            stuck(&p),
            Some((
                "ImagePullBackOff".into(),
                "pod py-abc: container main: ImagePullBackOff: Back-off pulling image \"nope\""
                    .into()
            ))
        );
        let starting = pod(serde_json::json!({"containerStatuses": [
            {"name": "main", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"waiting": {"reason": "ContainerCreating"}}},
        ]}));
        assert_eq!(stuck(&starting), None);
    }

    #[test]
    fn an_unschedulable_pod_is_stuck_with_the_schedulers_message() {
        let p = pod(serde_json::json!({"conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/1 nodes are available: 1 Insufficient cpu."},
        ]}));
        assert_eq!(stuck(&p).map(|(r, _)| r), Some("Unschedulable".to_string()));
        assert!(stuck(&pod(serde_json::json!({}))).is_none());
    }
}
