//! A changed template on the single-node cluster: a Runtime of 2 Pods × `runs: 1` gets a new
//! Pod label while Runs keep coming. Its Pods are replaced one at a time (a Pod watch records
//! every event: never fewer than one live Pod), each after its Runs ended; every Run succeeds,
//! none over capacity at any watch event, and the Runtime ends with 2 updated Pods.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::watcher;

use crate::harness::Cluster;
use crate::objects::{
    busybox, create_run, create_runtime, delete_runtime, runtime_namespace, wait_phases,
    wait_runtime_ready,
};
use crate::support::world::{OvercommitWatch, eventually};
use kruntimes::api::resources::Resources;
use kruntimes::api::{LABEL_RUNTIME, RunPhase, Runtime};

pub async fn template_change_rolls_one_pod_at_a_time(cluster: &Cluster) {
    let ns = &runtime_namespace(cluster, "roll").await;
    create_runtime(ns, "roll", 2, busybox(), &[("runs", 1)]).await;
    let before: BTreeSet<String> = wait_runtime_ready(ns, "roll", 2)
        .await
        .iter()
        .map(|p| p.name_any())
        .collect();
    let overcommit =
        OvercommitWatch::start_for_runtime(ns, "roll", Resources::from_iter([("runs", 1)])).await;

    // Every Pod event, and after each the number of live (not terminating) Pods.
    let live_after_each: Arc<Mutex<Vec<usize>>> = Arc::default();
    let pods_watch = {
        let config = watcher::Config::default().labels(&format!("{LABEL_RUNTIME}=roll"));
        let mut events = watcher(ns.api::<Pod>(), config).boxed();
        let record = live_after_each.clone();
        tokio::spawn(async move {
            let mut terminating: BTreeMap<String, bool> = BTreeMap::new();
            while let Some(event) = events.next().await {
                match event {
                    Ok(watcher::Event::Apply(p)) | Ok(watcher::Event::InitApply(p)) => {
                        terminating.insert(p.name_any(), p.metadata.deletion_timestamp.is_some());
                    }
                    Ok(watcher::Event::Delete(p)) => {
                        terminating.remove(&p.name_any());
                    }
                    _ => continue,
                }
                let live = terminating.values().filter(|t| !**t).count();
                record.lock().unwrap().push(live);
            }
        })
    };

    let names: Vec<String> = (1..=12).map(|i| format!("r-{i}")).collect();
    for name in &names[..4] {
        create_run(ns, name, "roll", &[], "sleep 2").await;
    }
    let change = serde_json::json!({"spec": {"template": {"metadata": {"labels": {"rev": "2"}}}}});
    ns.api::<Runtime>()
        .patch("roll", &PatchParams::default(), &Patch::Merge(&change))
        .await
        .unwrap();
    for name in &names[4..8] {
        create_run(ns, name, "roll", &[], "sleep 2").await;
    }
    let updated = |n: i32| {
        let runtimes = ns.api::<Runtime>();
        async move {
            eventually(
                Duration::from_secs(180),
                &format!("{n} updated Runtime Pods"),
                async || {
                    let status = runtimes
                        .get("roll")
                        .await
                        .map_err(|e| e.to_string())?
                        .status;
                    let updated = status.and_then(|s| s.updated_replicas).unwrap_or(0);
                    (updated >= n)
                        .then_some(())
                        .ok_or(format!("{updated} updated"))
                },
            )
            .await
        }
    };
    updated(1).await;
    for name in &names[8..] {
        create_run(ns, name, "roll", &[], "sleep 2").await;
    }
    wait_phases(ns, &names, RunPhase::Succeeded, Duration::from_secs(240)).await;
    updated(2).await;
    let after = wait_runtime_ready(ns, "roll", 2).await;
    for pod in &after {
        assert_eq!(
            pod.labels().get("rev").map(String::as_str),
            Some("2"),
            "{}",
            pod.name_any()
        );
        assert!(
            !before.contains(&pod.name_any()),
            "{} was not replaced",
            pod.name_any()
        );
    }
    let listed = ns
        .api::<Pod>()
        .list(&ListParams::default().labels(&format!("{LABEL_RUNTIME}=roll")))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 2, "no old Pod left behind");
    pods_watch.abort();
    let live = live_after_each.lock().unwrap().clone();
    assert!(live.len() >= 6, "the watch saw the rollout: {live:?}");
    assert!(
        live.iter().skip(2).all(|n| *n >= 1),
        "never fewer than one live Pod (maxUnavailable 1 of 2): {live:?}"
    );
    let checked = overcommit.finish().await;
    eprintln!(
        "rollout: 2 Pods replaced one at a time, 12 Runs succeeded, {} Pod events, {checked} Run events checked",
        live.len()
    );
    delete_runtime(ns, "roll").await;
}
