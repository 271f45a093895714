//! A standby scheduler runs the Runtime controller's watches before it leads, as
//! kube-controller-manager starts its informers before it wins its Lease: when the leader is
//! killed, the standby reconciles every Runtime from a warm store and lists no Runtime or
//! PersistentWorkspace again. Counted by the API server itself (`apiserver_request_total`,
//! `apiserver_longrunning_requests`), on this suite's own control plane, where only the
//! test's two schedulers watch anything.

use testkit as support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use kruntimes::api::Runtime;
use kruntimes::testing::runtime;
use support::measure::{api_open_requests, api_requests};
use support::world::{Create as _, SchedulerProcess, TestNs, eventually};

/// LIST requests the API server has served for `resource`.
fn lists(resource: &str) -> f64 {
    let key = format!("LIST {resource}/");
    api_requests(support::control_plane())
        .get(&key)
        .copied()
        .unwrap_or(0.0)
}

/// Watches of `resource` open on the API server now.
fn open_watches(resource: &str) -> f64 {
    let key = format!("WATCH {resource}/");
    api_open_requests(support::control_plane())
        .get(&key)
        .copied()
        .unwrap_or(0.0)
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_comes_to_lead_the_runtime_controller_with_its_watches_warm() {
    let ns = TestNs::new("standby").await;
    runtime("python").replicas(1).create(&ns).await;
    let mut first = SchedulerProcess::start(&ns.name, 2, Some(&ns.name), "first").await;
    ns.wait_leader("first", Duration::from_secs(20)).await;
    ns.runtime_pods("python", 1).await;

    // Each scheduler watches Runtimes twice: for the scheduler's cache and for the Runtime
    // controller, the standby's as the leader's.
    let _second = SchedulerProcess::start(&ns.name, 2, Some(&ns.name), "second").await;
    eventually(
        Duration::from_secs(30),
        "four watches of Runtimes, two per scheduler",
        async || match open_watches("runtimes") {
            4.0 => Ok(()),
            n => Err(format!("{n} open")),
        },
    )
    .await;
    let before = (lists("runtimes"), lists("persistentworkspaces"));

    first.kill();
    ns.wait_leader("second", Duration::from_secs(30)).await;
    // The new leader's Runtime controller reconciles: a scale-up and a deleted Pod, each
    // seen through the watches it had before it led.
    let runtimes = ns.api::<Runtime>();
    runtimes
        .patch(
            "python",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    let pods = ns.runtime_pods("python", 2).await;
    let gone = pods[0].metadata.name.clone().unwrap();
    ns.api::<Pod>()
        .delete(&gone, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let replaced = ns.runtime_pods("python", 2).await;
    assert!(
        replaced
            .iter()
            .all(|p| p.metadata.name.as_deref() != Some(gone.as_str())),
        "the deleted Pod {gone} is replaced"
    );

    let after = (lists("runtimes"), lists("persistentworkspaces"));
    assert_eq!(
        after, before,
        "(Runtimes, PersistentWorkspaces) listed since the standby came up"
    );
}
