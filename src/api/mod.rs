//! The kruntimes API: custom resource types, logical resource parsing and status helpers.

pub mod build;
pub mod lenient;
pub mod order;
pub mod resources;
pub mod retry;
pub mod status;
pub mod types;
pub mod wait;

pub use order::QueueOrder;
pub use resources::{ResourceError, Resources};
pub use types::*;

/// Label on Runtime Pods naming their Runtime.
pub const LABEL_RUNTIME: &str = "kruntimes.io/runtime";
/// The namespace the shipped scheduler runs in (`deploy/scheduler.yaml`, `install`).
pub const INSTALL_NAMESPACE: &str = "kubectl-kruntimes";
/// Label on Runtime Pods naming the Pod itself; the only affinity topology key.
pub const LABEL_RUNTIME_POD: &str = "kruntimes.io/runtime-pod";
/// Annotation the Runtime controller puts on a Runtime Pod it has chosen to remove, before
/// deleting it: the scheduler treats the Pod as terminating from then on.
pub const ANNOTATION_SCALE_DOWN: &str = "kruntimes.io/scale-down";
/// Annotation an admin sets to `"true"` on a `scheduling.k8s.io/v1` PriorityClass whose Running
/// Runs may be stopped and sent back to Pending for a higher-priority Run (level-2
/// preemption); without it only Scheduled Runs runtimed has not claimed are preempted.
pub const ANNOTATION_PREEMPTIBLE: &str = "kruntimes.io/preemptible";
/// The finalizer a function Run carries while it may hold a registration on a runtime server
/// (the kruntimes project's name for it): its deletion waits for runtimed to unregister it.
pub const FINALIZER_FUNCTION_CLEANUP: &str = "kruntimes.io/function-cleanup";
/// Annotation on a Run naming the identity that created it, written by the mutating admission
/// policy `deploy/submitter-mutation/` where the cluster serves it, and guarded by
/// `deploy/submitter-policy.yaml` (never written by its user): its fairness group by default.
pub const ANNOTATION_SUBMITTED_BY: &str = "kruntimes.io/submitted-by";
/// Annotation on a Runtime naming a Run label whose value is a Run's fairness group instead of
/// its submitter (our extension; the Go project has no fairness).
pub const ANNOTATION_FAIR_SHARE_LABEL: &str = "kruntimes.io/fair-share-label";
/// Annotation on a Runtime giving fairness groups weights other than 1: `alice=2,team-b=0.5`,
/// with `*=W` for the default.
pub const ANNOTATION_FAIR_SHARE_WEIGHTS: &str = "kruntimes.io/fair-share-weights";
/// The Runtime condition set while its controller cannot create Runtime Pods (a ReplicaSet's
/// name for it), with the API server's message.
pub const CONDITION_REPLICA_FAILURE: &str = "ReplicaFailure";
/// The media type of an invocation's input when the caller names none: JSON, the one the Go
/// project's runtime servers take.
pub const DEFAULT_INVOKE_CONTENT_TYPE: &str = "application/json";
/// The API group of a Run's subresources served through the aggregation layer by the gateway
/// (`scheduler run --gateway-bind-address`): `runs/log`, `runs/invoke`, `runs/artifacts`.
pub const SUBRESOURCES_GROUP: &str = "subresources.kruntimes.io";
/// Its one version.
pub const SUBRESOURCES_VERSION: &str = "v1alpha1";
/// The audience of the tokens the gateway presents to runtimed: never the API server's, so a
/// token runtimed sees opens nothing there. Each token is narrowed to one Pod
/// ([`runtimed_audience`]).
pub const RUNTIMED_AUDIENCE: &str = "kruntimes-runtimed";
/// The audience of a token for the runtimed of the Pod whose UID is `pod_uid`: that runtimed
/// accepts it, no other does, so a token one Pod sees cannot be replayed against another.
pub fn runtimed_audience(pod_uid: &str) -> String {
    format!("{RUNTIMED_AUDIENCE}:{pod_uid}")
}
/// The gateway's account as `deploy/` and `install` run it: the user runtimed's API takes by
/// default (`runtimed --gateway-user`).
pub const DEFAULT_GATEWAY_USER: &str =
    "system:serviceaccount:kubectl-kruntimes:kubectl-kruntimes-scheduler";
/// How long runtimed holds a started task's claim by default (`runtimed --claim-delay`, which
/// `scheduler run --claim-delay` sets in Runtime Pods): a task that ends within it is written
/// once after its Bind. Below the scheduler's 1 s Event fold window, so a Run that started is
/// never told "not started there yet". The scheduler takes an unclaimed Run for possibly
/// started until the window has passed (`scheduler::framework::claim_window`).
pub const DEFAULT_CLAIM_DELAY: &str = "500ms";

/// [`DEFAULT_CLAIM_DELAY`], parsed.
pub fn default_claim_delay() -> std::time::Duration {
    crate::util::duration::parse_duration(DEFAULT_CLAIM_DELAY).expect("the default parses")
}
/// The name of runtimed's API port (TLS) in a Runtime Pod's container that runs it.
pub const RUNTIMED_API_PORT_NAME: &str = "kruntimes-api";
/// Why a Runtime's Pods cannot be created or cannot run: its `ReplicaFailure` condition's
/// message, while the condition is True.
pub fn replica_failure(runtime: &Runtime) -> Option<String> {
    let status = runtime.status.as_ref()?;
    status
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_REPLICA_FAILURE && c.status == "True")
        .map(|c| c.message.clone())
}

/// Whether a Pod's `Ready` condition is True.
pub fn pod_is_ready(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether `pod` claims to be made by the Runtime controller for the Runtime whose UID is
/// `runtime_uid`: its controller reference names that Runtime. A label is written by anyone
/// who may create Pods; the reference needs the Runtime's UID too, but the API server does not
/// check who wrote it, so whoever may create Pods and read the Runtime can copy it. Where a
/// Run records the UID of its Pod (`status.assignedPodUID`, written only by the scheduler and
/// that Pod's runtimed), that is the stronger check; this one rules out Pods found by label.
pub fn made_for_runtime(pod: &k8s_openapi::api::core::v1::Pod, runtime_uid: &str) -> bool {
    !runtime_uid.is_empty()
        && pod.metadata.owner_references.iter().flatten().any(|r| {
            r.controller == Some(true)
                && r.kind == "Runtime"
                && r.api_version.starts_with("kruntimes.io/")
                && r.uid == runtime_uid
        })
}

/// Field manager for every write kruntimes makes.
pub const FIELD_MANAGER: &str = "kubectl-kruntimes";

/// Parameters of every create/replace kruntimes makes: its field manager.
/// Whether `name` is a DNS-1123 subdomain: what Kubernetes takes as an object's name.
pub fn is_object_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

pub fn post_params() -> kube::api::PostParams {
    kube::api::PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..Default::default()
    }
}

/// Parameters of every merge patch kruntimes makes: its field manager.
pub fn patch_params() -> kube::api::PatchParams {
    kube::api::PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..Default::default()
    }
}
