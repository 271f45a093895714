//! End to end on the real control plane: `scheduler run` keeps a Runtime's Pods and places
//! Runs; one `runtimed` per Pod admits and executes them. No overcommit at any Run event.

use testkit as support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kube::ResourceExt;

use kruntimes::api::{Resources, RunPhase};
use kruntimes::testing::{run, runtime};
use support::world::{Create, OvercommitWatch, RuntimedProcess, SchedulerProcess, TestNs};

#[testkit::test]
async fn twenty_short_runs_on_two_runtime_pods_all_succeed_without_overcommit() {
    let ns = TestNs::new("e2e").await;
    let sh = runtime("sh").replicas(2).capacity(&[("runs", 2)]);
    sh.create(&ns).await;
    let _scheduler = SchedulerProcess::start(&ns.name, 4, None, "e2e").await;

    // The Runtime controller creates the Pods; the test plays the kubelet.
    let runtime_pods = ns.runtime_pods("sh", 2).await;
    let mut agents = Vec::new();
    let mut capacity = HashMap::new();
    let heartbeat = ["--heartbeat-interval", "1s", "--heartbeat-duration", "10s"];
    for pod in &runtime_pods {
        assert_eq!(pod.annotations()["kruntimes.io/capacity.runs"], "2");
        ns.set_ready(&pod.name_any(), true).await;
        agents.push(RuntimedProcess::start(pod, &heartbeat));
        capacity.insert(pod.name_any(), Resources::from_iter([("runs", 2)]));
    }
    let watch = OvercommitWatch::start(&ns, capacity).await;

    let started = Instant::now();
    for i in 0..20 {
        let task = run(&format!("task-{i:02}")).runtime("sh");
        let task = task.labels(&[("batch", "e2e")]);
        task.task(&["sh", "-c", "sleep 0.2"]).create(&ns).await;
    }
    let runs = ns
        .wait_runs(Duration::from_secs(90), "all 20 Runs Succeeded", |runs| {
            (runs.len() == 20 && runs.iter().all(|r| r.phase() == RunPhase::Succeeded))
                .then(|| runs.to_vec())
        })
        .await;
    let events = watch.finish().await;
    let per_pod = runs
        .iter()
        .fold(HashMap::<String, usize>::new(), |mut m, r| {
            *m.entry(r.status.as_ref().unwrap().assigned_pod.clone().unwrap())
                .or_default() += 1;
            m
        });
    assert_eq!(per_pod.len(), 2, "both Pods ran work: {per_pod:?}");
    for r in &runs {
        let status = r.status.as_ref().unwrap();
        assert_eq!(status.exit_code, Some(0));
        assert!(status.start_time.is_some() && status.completion_time.is_some());
    }
    eprintln!(
        "e2e: 20 Runs succeeded in {:.2}s on {per_pod:?}; {events} Run events checked for overcommit",
        started.elapsed().as_secs_f64()
    );
}
