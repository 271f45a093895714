//! A changed template on the single-node cluster: a Runtime of 2 Pods × `runs: 1` gets a new
//! Pod label while Runs keep coming. Its Pods are replaced one at a time (a Pod watch records
//! every event: at every one, at least one Pod is available, Ready and neither draining nor
//! being deleted, and at most one is draining); every Run succeeds, none over capacity at any
//! watch event, and the Runtime ends with 2 updated Pods and no old one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::watcher;

use super::harness::Cluster;
use super::objects::{
    busybox, create_run, create_runtime, delete_runtime, runtime_namespace, wait_phases,
    wait_runtime_ready,
};
use super::support::world::{OvercommitWatch, eventually};
use kruntimes::api::resources::Resources;
use kruntimes::api::{ANNOTATION_SCALE_DOWN, LABEL_RUNTIME, RunPhase, Runtime, pod_is_ready};

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

    // After every Pod event (from the first complete list on): how many Pods are available
    // (Ready, neither draining nor being deleted) and how many are draining.
    let after_each: Arc<Mutex<Vec<(usize, usize)>>> = Arc::default();
    let pods_watch = {
        let config = watcher::Config::default().labels(&format!("{LABEL_RUNTIME}=roll"));
        let mut events = watcher(ns.api::<Pod>(), config).boxed();
        let record = after_each.clone();
        tokio::spawn(async move {
            // Per Pod: (available, draining).
            let mut pods: BTreeMap<String, (bool, bool)> = BTreeMap::new();
            let state = |p: &Pod| {
                let deleting = p.metadata.deletion_timestamp.is_some();
                let draining = p.annotations().contains_key(ANNOTATION_SCALE_DOWN);
                (!deleting && !draining && pod_is_ready(p), draining)
            };
            let mut listing = true;
            while let Some(event) = events.next().await {
                match event {
                    Ok(watcher::Event::Init) => {
                        pods.clear();
                        listing = true;
                    }
                    Ok(watcher::Event::InitApply(p)) => {
                        pods.insert(p.name_any(), state(&p));
                    }
                    Ok(watcher::Event::InitDone) => listing = false,
                    Ok(watcher::Event::Apply(p)) => {
                        pods.insert(p.name_any(), state(&p));
                    }
                    Ok(watcher::Event::Delete(p)) => {
                        pods.remove(&p.name_any());
                    }
                    Err(_) => continue,
                }
                if !listing {
                    let available = pods.values().filter(|(a, _)| *a).count();
                    let draining = pods.values().filter(|(_, d)| *d).count();
                    record.lock().unwrap().push((available, draining));
                }
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
                    let runtime = runtimes.get("roll").await.map_err(|e| e.to_string())?;
                    // A status written before the template changed counts the old Pods as
                    // updated: only one that has seen this generation says anything.
                    let generation = runtime.metadata.generation;
                    let status = runtime.status.unwrap_or_default();
                    let updated = status.updated_replicas.unwrap_or(0);
                    (status.observed_generation == generation && updated >= n)
                        .then_some(())
                        .ok_or(format!(
                            "{updated} updated at observed generation {:?} of {generation:?}",
                            status.observed_generation
                        ))
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
    // The last old Pod may still be shutting down when its replacement is Ready.
    let pods = ns.api::<Pod>();
    let selector = ListParams::default().labels(&format!("{LABEL_RUNTIME}=roll"));
    eventually(
        Duration::from_secs(60),
        "no old Pod left behind",
        async || {
            let listed = pods.list(&selector).await.map_err(|e| e.to_string())?;
            let names: Vec<String> = listed.items.iter().map(|p| p.name_any()).collect();
            if names.len() == 2 {
                Ok(())
            } else {
                Err(format!("{names:?}"))
            }
        },
    )
    .await;
    pods_watch.abort();
    let seen = after_each.lock().unwrap().clone();
    assert!(seen.len() >= 6, "the watch saw the rollout: {seen:?}");
    assert!(
        seen.iter()
            .all(|(available, draining)| *available >= 1 && *draining <= 1),
        "maxUnavailable 1 of 2: at least one Pod available and at most one draining at every event: {seen:?}"
    );
    let checked = overcommit.finish().await;
    eprintln!(
        "rollout: 2 Pods replaced one at a time, 12 Runs succeeded, {} Pod events, {checked} Run events checked",
        seen.len()
    );
    delete_runtime(ns, "roll").await;
}
