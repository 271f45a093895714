//! Runtime Pods on a locked-down namespace of the single-node cluster, with nothing applied by
//! hand: Pod Security `restricted` enforced and a compute ResourceQuota. A Runtime whose own
//! container complies is admitted (the init container and the runtimed kruntimes adds are
//! restricted and carry requests and limits), its Pod runs as the service account the scheduler
//! made for it, and a Run succeeds there; a second Pod that the quota forbids shows as
//! `ReplicaFailure` with the API server's quota message, in the Runtime's status and in
//! `kubectl kruntimes status`.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Capabilities, Namespace, PodSecurityContext, ResourceQuota, ResourceRequirements,
    SeccompProfile, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::ResourceExt as _;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::harness::Cluster;
use super::objects::{
    busybox, create_run, create_runtime, delete_runtime, runtime_namespace, wait_phases,
    wait_runtime_ready,
};
use super::support::world::{create_in, eventually};
use kruntimes::api::{CONDITION_REPLICA_FAILURE, RunPhase, Runtime};

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

pub async fn restricted_namespace_and_quota(cluster: &Cluster) {
    let ns = &runtime_namespace(cluster, "locked").await;
    let labels = json!({"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
    }}});
    kube::Api::<Namespace>::all(ns.client.clone())
        .patch(&ns.name, &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .unwrap();
    // One Pod, and compute quota: every container must state requests and limits.
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "compute"},
        "spec": {"hard": {
            "pods": "1",
            "requests.cpu": "2", "limits.cpu": "4",
            "requests.memory": "2Gi", "limits.memory": "4Gi",
        }},
    }))
    .unwrap();
    create_in(ns, quota).await;

    // The Runtime's own container complies; what kruntimes adds must too.
    let mut template = busybox();
    template.security_context = Some(PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(65532),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            localhost_profile: None,
        }),
        ..Default::default()
    });
    let main = &mut template.containers[0];
    main.security_context = Some(SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            add: None,
        }),
        ..Default::default()
    });
    main.resources = Some(ResourceRequirements {
        requests: Some(quantities(&[("cpu", "100m"), ("memory", "64Mi")])),
        limits: Some(quantities(&[("cpu", "1"), ("memory", "256Mi")])),
        ..Default::default()
    });
    create_runtime(ns, "locked", 1, template, &[("runs", 1)]).await;
    let pod = wait_runtime_ready(ns, "locked", 1).await.remove(0);
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(
        spec.service_account_name.as_deref(),
        Some("kubectl-kruntimes-runtimed-locked")
    );
    let init = &spec.init_containers.as_ref().unwrap()[0];
    assert_eq!(
        init.security_context,
        Some(kruntimes::runtime::pod::restricted_security_context())
    );
    create_run(ns, "whoami", "locked", &[], "test \"$(id -u)\" = 65532").await;
    wait_phases(
        ns,
        &["whoami".into()],
        RunPhase::Succeeded,
        Duration::from_secs(60),
    )
    .await;

    // A second Pod exceeds the quota: the Runtime says so with the API server's words.
    let runtimes = ns.api::<Runtime>();
    runtimes
        .patch(
            "locked",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    let message = eventually(
        Duration::from_secs(60),
        "ReplicaFailure for the quota",
        async || {
            let runtime = runtimes.get("locked").await.map_err(|e| e.to_string())?;
            let conditions = runtime.status.unwrap_or_default().conditions;
            conditions
                .iter()
                .find(|c| c.type_ == CONDITION_REPLICA_FAILURE && c.status == "True")
                .map(|c| c.message.clone())
                .ok_or(format!("{conditions:?}"))
        },
    )
    .await;
    assert!(
        message.contains("exceeded quota: compute") && message.contains("limited: pods=1"),
        "{message}"
    );
    let status = cluster.kruntimes(&["status", "-n", &ns.name]);
    let said = String::from_utf8_lossy(&status.stdout);
    assert!(
        said.contains("Failing:") && said.contains("exceeded quota: compute"),
        "kubectl kruntimes status:\n{said}{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert_eq!(
        pod.name_any(),
        wait_runtime_ready(ns, "locked", 1).await[0].name_any()
    );
    delete_runtime(ns, "locked").await;
}
