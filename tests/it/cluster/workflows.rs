//! A Workflow on the real single-node cluster: three jobs with a fan-in, each step a Run the
//! deployed scheduler places on a real Runtime Pod (busybox, runtimed injected), the outputs of
//! the two first jobs written to `$KRUNTIME_OUTPUTS` in the container and flowing through the
//! third's environment into its own output.

use std::time::Duration;

use kube::ResourceExt as _;
use kube::api::{ListParams, PostParams};
use serde_json::json;

use kruntimes::api::{JobPhase, LABEL_WORKFLOW_RUN_UID, Run, WorkflowPhase, WorkflowRun};

use super::harness::Cluster;
use super::objects::{
    busybox, create_runtime, delete_runtime, runtime_namespace, wait_runtime_ready,
};
use super::support::world::eventually;

pub async fn a_fan_in_runs_on_real_pods_and_its_outputs_flow(cluster: &Cluster) {
    let ns = &runtime_namespace(cluster, "workflow").await;
    create_runtime(ns, "sh", 2, busybox(), &[("runs", 2)]).await;
    let pods: Vec<String> = wait_runtime_ready(ns, "sh", 2)
        .await
        .iter()
        .map(|p| p.name_any())
        .collect();
    let emit = |value: &str| {
        json!({
            "runs-on": "sh",
            "outputs": {"result": "${{ steps.emit.outputs.result }}"},
            "steps": [{"name": "emit", "run": format!("echo result={value}-on-$POD_NAME >> \"$KRUNTIME_OUTPUTS\"")}],
        })
    };
    let run: WorkflowRun = serde_json::from_value(json!({
        "apiVersion": "kruntimes.io/v1alpha1", "kind": "WorkflowRun", "metadata": {"name": "fan-in"},
        "spec": {"jobs": {
            "left": emit("L"),
            "right": emit("R"),
            "join": {
                "runs-on": "sh",
                "needs": ["left", "right"],
                "outputs": {"both": "${{ steps.join.outputs.both }}"},
                "steps": [{
                    "name": "join",
                    "run": "echo \"both=$LEFT+$RIGHT\" >> \"$KRUNTIME_OUTPUTS\"",
                    "env": {"LEFT": "${{ jobs.left.outputs.result }}", "RIGHT": "${{ jobs.right.outputs.result }}"},
                }],
            },
        }},
    }))
    .expect("a WorkflowRun");
    let runs = ns.api::<WorkflowRun>();
    runs.create(&PostParams::default(), &run)
        .await
        .expect("create the WorkflowRun");
    let done = eventually(
        Duration::from_secs(180),
        "the WorkflowRun to succeed",
        async || {
            let run = runs.get("fan-in").await.map_err(|e| e.to_string())?;
            match run.status.as_ref().map(|s| s.phase) {
                Some(WorkflowPhase::Succeeded) => Ok(run),
                Some(WorkflowPhase::Failed) => panic!("the WorkflowRun failed: {:?}", run.status),
                _ => Err(format!("{:?}", run.status)),
            }
        },
    )
    .await;
    let jobs = done.status.clone().unwrap().jobs.unwrap();
    assert!(
        jobs.values().all(|j| j.phase == JobPhase::Succeeded),
        "{jobs:?}"
    );
    let both = &jobs["join"].outputs["both"];
    let (left, right) = both.split_once('+').expect("LEFT+RIGHT");
    let on_a_pod = |value: &str, prefix: &str| {
        value
            .strip_prefix(prefix)
            .is_some_and(|pod| pods.iter().any(|p| p == pod))
    };
    assert!(
        on_a_pod(left, "L-on-") && on_a_pod(right, "R-on-"),
        "each output written in a real container of the Runtime's Pods {pods:?}: {both}"
    );

    let uid = done.uid().unwrap();
    let children = ns
        .api::<Run>()
        .list(&ListParams::default().labels(&format!("{LABEL_WORKFLOW_RUN_UID}={uid}")))
        .await
        .unwrap()
        .items;
    assert_eq!(children.len(), 3, "one Run per step");
    for child in &children {
        let status = child.status.as_ref().unwrap();
        let pod = status.assigned_pod.as_deref().unwrap_or_default();
        assert!(
            pods.iter().any(|p| p == pod),
            "{} ran on {pod:?}",
            child.name_any()
        );
        assert_eq!(status.exit_code, Some(0), "{}", child.name_any());
    }
    delete_runtime(ns, "sh").await;
}
