//! Faults of a node on the single-node cluster: runtimed killed for its memory limit, and a
//! lost node (kubelet killed, the Pod frozen). Moved here from `tests/it/cluster.rs`, whose
//! scenario list runs them.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::ResourceExt as _;

use super::NODE;
use super::harness::Cluster;
use super::objects::{
    assigned_pod, busybox, create_run, create_runtime, delete_runtime, one_long_run_on_two_pods,
    runtime_namespace, wait_failed, wait_phases, wait_runtime_ready,
};
use kruntimes::api::RunPhase;

/// A Run whose task makes runtimed the OOM killer's choice (`oom_score_adj` 1000 on PID 1)
/// and then fills the container's memory limit: the kernel kills runtimed's container
/// (OOMKilled), the kubelet restarts it, and the new runtimed fails the Run it finds Running
/// as RuntimedRestarted.
pub async fn memory_limit(cluster: &Cluster) {
    let ns = &runtime_namespace(cluster, "oom").await;
    let mut template = busybox();
    let memory = [("memory".to_string(), Quantity("128Mi".into()))];
    template.containers[0].resources = Some(ResourceRequirements {
        limits: Some(memory.clone().into()),
        requests: Some(memory.into()),
        ..Default::default()
    });
    create_runtime(ns, "oom", 1, template, &[("runs", 1)]).await;
    let pod = wait_runtime_ready(ns, "oom", 1).await.remove(0);
    create_run(
        ns,
        "hog",
        "oom",
        &[],
        // Many small allocations, each held by a shell that sleeps: the memory cgroup runs
        // out, and runtimed (PID 1, now oom_score_adj 1000, ~30 MB) outscores every one of
        // them (995, 4 MB each; one big allocation would be chosen instead of runtimed).
        r#"echo 1000 > /proc/1/oom_score_adj && for i in $(seq 40); do sh -c 'x=$(head -c 4000000 /dev/zero | tr "\0" a); sleep 600; echo ${#x}' & done; wait"#,
    )
    .await;
    let status = wait_failed(ns, "hog", Duration::from_secs(120)).await;
    assert_eq!(
        status.reason.as_deref(),
        Some("RuntimedRestarted"),
        "{status:?}"
    );
    let now = ns.api::<Pod>().get(&pod.name_any()).await.unwrap();
    let container = &now.status.unwrap().container_statuses.unwrap()[0];
    assert!(container.restart_count >= 1, "{container:?}");
    let last = container
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref());
    assert_eq!(
        last.and_then(|t| t.reason.as_deref()),
        Some("OOMKilled"),
        "{container:?}"
    );
    wait_runtime_ready(ns, "oom", 1).await;
    delete_runtime(ns, "oom").await;
}

/// A lost node, for one Runtime Pod: the kubelet is killed and the Pod's processes are frozen
/// (cgroup freezer), so runtimed's heartbeat stops while the API server and the scheduler
/// live on. The Run Running there ends Failed as RuntimePodLost (the scheduler's
/// `--pod-lost-grace`, 40 s in deploy/). Once the kubelet is back and the Pod thaws, its
/// slot is free again: two Runs run side by side, one on each Pod.
pub async fn node_lost(cluster: &Cluster) {
    let ns = &runtime_namespace(cluster, "lost").await;
    // runtimed flags on a plain image: run the injected binary explicitly.
    let mut template = busybox();
    template.containers[0].command = Some(
        [
            "/kruntimes/kubectl-kruntimes",
            "runtimed",
            "--heartbeat-interval=2s",
            "--heartbeat-duration=6s",
        ]
        .map(String::from)
        .to_vec(),
    );
    let held = one_long_run_on_two_pods(ns, "lost", template, "held").await;
    let lost_pod = held.assigned_pod.clone().unwrap();
    let lost_uid = held.assigned_pod_uid.clone().unwrap();

    cluster.fault(&["kill-kubelet"]);
    cluster.fault(&["freeze-pod", &lost_uid]);
    let status = wait_failed(ns, "held", Duration::from_secs(180)).await;
    assert_eq!(
        status.reason.as_deref(),
        Some("RuntimePodLost"),
        "{status:?}"
    );

    cluster.fault(&["thaw-pod", &lost_uid]);
    cluster.fault(&["start-kubelet"]);
    cluster.kubectl(&[
        "wait",
        "--for=condition=Ready",
        &format!("node/{NODE}"),
        "--timeout=120s",
    ]);
    let pods = wait_runtime_ready(ns, "lost", 2).await;
    assert!(pods.iter().any(|p| p.name_any() == lost_pod));
    let names: Vec<String> = vec!["after-1".into(), "after-2".into()];
    for name in &names {
        create_run(ns, name, "lost", &[], "sleep 5").await;
    }
    wait_phases(ns, &names, RunPhase::Succeeded, Duration::from_secs(120)).await;
    let mut placed = BTreeSet::new();
    for name in &names {
        placed.insert(assigned_pod(ns, name).await);
    }
    assert_eq!(
        placed.len(),
        2,
        "one Run per Pod, so the lost Pod's slot was released: {placed:?}"
    );
    delete_runtime(ns, "lost").await;
}
