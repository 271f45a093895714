//! End to end on the real control plane: `scheduler run` keeps a Runtime's Pods and places
//! Runs; one `runtimed` per Pod admits and executes them. No overcommit at any Run event.

mod support;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::Api;
use serde_json::json;

use kruntimes::api::{RunPhase, Runtime};
use support::world::{self, OvercommitWatch, SchedulerProcess, run, wait_runs};

/// A runtimed process for one Pod; killed on drop.
struct Runtimed(Child);

impl Runtimed {
    fn start(pod: &Pod) -> Self {
        let cp = support::control_plane();
        let child = Command::new(support::binary())
            .arg("runtimed")
            .args(["--heartbeat-interval", "1s", "--heartbeat-duration", "10s"])
            .env("KUBECONFIG", &cp.kubeconfig)
            .env("RUST_LOG", "warn")
            .env("POD_NAME", pod.name_any())
            .env("POD_NAMESPACE", pod.namespace().unwrap())
            .env("POD_UID", pod.uid().unwrap())
            .stdin(Stdio::null())
            .spawn()
            .expect("start runtimed");
        Runtimed(child)
    }
}

impl Drop for Runtimed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn twenty_short_runs_on_two_runtime_pods_all_succeed_without_overcommit() {
    let client = support::client().await;
    support::install_crds();
    let ns = support::namespace(&client, "e2e").await;
    let runtimes: Api<Runtime> = Api::namespaced(client.clone(), &ns);
    let runtime: Runtime = serde_json::from_value(json!({
        "apiVersion": "kruntimes.io/v1alpha1", "kind": "Runtime",
        "metadata": {"name": "sh"},
        "spec": {"replicas": 2, "capacity": {"resources": {"runs": "2"}},
                 "template": {"spec": {"containers": [{"name": "runtimed", "image": "kruntimes.invalid/runtimed", "args": ["runtimed"]}]}}}
    }))
    .unwrap();
    runtimes
        .create(&Default::default(), &runtime)
        .await
        .unwrap();
    let _scheduler = SchedulerProcess::start(&ns, 4, None, "e2e").await;

    // The Runtime controller creates the Pods; the test plays the kubelet.
    let runtime_pods = world::runtime_pods(&client, &ns, "sh", 2).await;
    let mut agents = Vec::new();
    let mut capacity = HashMap::new();
    for pod in &runtime_pods {
        assert_eq!(pod.annotations()["kruntimes.io/capacity.runs"], "2");
        world::set_ready(&client, &ns, &pod.name_any(), true).await;
        agents.push(Runtimed::start(pod));
        capacity.insert(pod.name_any(), HashMap::from([("runs".to_string(), 2u64)]));
    }
    let watch = OvercommitWatch::start(&client, &ns, capacity).await;

    let started = Instant::now();
    for i in 0..20 {
        let mut b = run(&format!("task-{i:02}"), "sh");
        b = b.labels(&[("batch", "e2e")]);
        let mut r = b.build();
        r.spec.mode.as_mut().unwrap().task.as_mut().unwrap().args =
            vec!["sh".into(), "-c".into(), "sleep 0.2".into()];
        Api::<kruntimes::api::Run>::namespaced(client.clone(), &ns)
            .create(&Default::default(), &r)
            .await
            .unwrap();
    }
    let runs = wait_runs(
        &client,
        &ns,
        Duration::from_secs(90),
        "all 20 Runs Succeeded",
        |runs| {
            (runs.len() == 20 && runs.iter().all(|r| r.phase() == RunPhase::Succeeded))
                .then(|| runs.to_vec())
        },
    )
    .await;
    let events = watch.finish().await;
    let per_pod = runs
        .iter()
        .fold(HashMap::<String, usize>::new(), |mut m, r| {
            *m.entry(r.status.as_ref().unwrap().pod_name.clone().unwrap())
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
