//! The cluster scenarios' objects, on the cluster's API server through the shared test
//! vocabulary: namespaces with runtimed's RBAC, busybox Runtimes, shell Runs, and the waits on
//! their Pods and phases. The scenarios themselves are in `tests/it/cluster.rs`.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kube::ResourceExt as _;
use kube::api::{DeleteParams, ListParams};

use super::BUSYBOX;
use super::harness::Cluster;
use super::support;
use super::support::world::{Create, TestNs, create_in, eventually, phase_of};
use kruntimes::api::{LABEL_RUNTIME, RunPhase, RunStatus, Runtime, pod_is_ready};
use kruntimes::testing::{run, runtime};

/// The scheduler replicas of `deploy/`.
pub const SCHEDULER_PODS: &str = "app.kubernetes.io/name=kubectl-kruntimes-scheduler";

/// A fresh namespace with nothing applied in it: the Runtime controller makes runtimed's
/// service account and its RoleBinding for each Runtime.
pub async fn runtime_namespace(cluster: &Cluster, prefix: &str) -> TestNs {
    let client = cluster.client().await;
    let name = support::namespace(&client, prefix).await;
    TestNs::on(client, &name)
}

/// The Runtime Pod template of these scenarios: the plain busybox image (no kruntimes inside),
/// no service account named; the Runtime controller injects runtimed.
pub fn busybox() -> PodSpec {
    PodSpec {
        containers: vec![Container {
            name: "main".into(),
            image: Some(BUSYBOX.into()),
            ..Default::default()
        }],
        ..Default::default()
    }
}

pub async fn create_runtime(
    ns: &TestNs,
    name: &str,
    replicas: i32,
    template: PodSpec,
    capacity: &[(&str, u64)],
) {
    let mut object = runtime(name).replicas(replicas).capacity(capacity).build();
    object.spec.template.spec = Some(template);
    create_in(ns, object).await;
}

pub async fn delete_runtime(ns: &TestNs, name: &str) {
    let _ = ns
        .api::<Runtime>()
        .delete(name, &DeleteParams::default())
        .await;
}

/// A Run of `runtime` whose task is `sh -c script`.
pub async fn create_run(
    ns: &TestNs,
    name: &str,
    runtime: &str,
    requests: &[(&str, u64)],
    script: &str,
) {
    run(name)
        .runtime(runtime)
        .requests(requests)
        .task(&["sh", "-c", script])
        .create(ns)
        .await;
}

/// Waits until the Runtime has `n` live Pods, all Ready by the kubelet, and returns them.
pub async fn wait_runtime_ready(ns: &TestNs, runtime: &str, n: usize) -> Vec<Pod> {
    let selector = format!("{LABEL_RUNTIME}={runtime}");
    ready_pods(ns, &selector, n, Duration::from_secs(120)).await
}

/// Waits until exactly `n` live Pods match `selector`, all Ready, and returns them.
pub async fn ready_pods(ns: &TestNs, selector: &str, n: usize, timeout: Duration) -> Vec<Pod> {
    let pods = ns.api::<Pod>();
    let what = format!("{n} ready Pods {selector} in {ns}");
    eventually(timeout, &what, async || {
        let list = pods
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(|e| e.to_string())?
            .items;
        let live: Vec<Pod> = list
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let ready = live.iter().filter(|p| pod_is_ready(p)).count();
        if live.len() == n && ready == n {
            Ok(live)
        } else {
            Err(format!("{} live, {ready} ready", live.len()))
        }
    })
    .await
}

/// The Pod the Run `name` was assigned (it must have been).
pub async fn assigned_pod(ns: &TestNs, name: &str) -> String {
    let run = ns.runs().get(name).await.unwrap();
    run.status
        .and_then(|s| s.assigned_pod)
        .unwrap_or_else(|| panic!("Run {name} was never assigned a Pod"))
}

pub async fn wait_phases(ns: &TestNs, names: &[String], phase: RunPhase, timeout: Duration) {
    let what = format!("{} Runs {phase:?}", names.len());
    ns.wait_runs(timeout, &what, |runs| {
        names
            .iter()
            .all(|n| phase_of(runs, n) == Some(phase))
            .then_some(())
    })
    .await
}

/// A Runtime of 2 Pods of `runs: 1` from `template`, with the Run `name` (`sleep 600`)
/// Running on one of them; returns the Run's status then.
pub async fn one_long_run_on_two_pods(
    ns: &TestNs,
    runtime: &str,
    template: PodSpec,
    name: &str,
) -> RunStatus {
    create_runtime(ns, runtime, 2, template, &[("runs", 1)]).await;
    wait_runtime_ready(ns, runtime, 2).await;
    create_run(ns, name, runtime, &[], "sleep 600").await;
    let what = format!("Run {name} Running");
    ns.wait_runs(Duration::from_secs(60), &what, |runs| {
        let run = runs.iter().find(|r| r.name_any() == name)?;
        (run.phase() == RunPhase::Running).then(|| run.status.clone().unwrap_or_default())
    })
    .await
}

/// Waits until the Run `name` is Failed and returns its status.
pub async fn wait_failed(ns: &TestNs, name: &str, timeout: Duration) -> RunStatus {
    ns.wait_runs(timeout, &format!("Run {name} Failed"), |runs| {
        let run = runs.iter().find(|r| r.name_any() == name)?;
        (run.phase() == RunPhase::Failed).then(|| run.status.clone().unwrap_or_default())
    })
    .await
}
