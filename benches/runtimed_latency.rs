//! Claim-to-Running latency of runtimed on the real control plane: 200 short Runs bound to
//! one Pod, measured from the scheduler's bind write (status `Scheduled` returned by the API
//! server) to the moment a separate watch sees the Run `Running` (runtimed's watch delivery,
//! admission, the claim write and the watch delivery back).
//!
//! A measurement, not a test: it prints p50/p99/max and asserts nothing about time.
//! Run with `cargo bench --bench runtimed_latency` (optionally `-- RUNS`).

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kruntimes::api::{Run, RunPhase};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use serde_json::json;

struct Runtimed(Child);

impl Drop for Runtimed {
    fn drop(&mut self) {
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Scenario {
    name: &'static str,
    capacity: usize,
    /// Pause between binds; zero binds back to back.
    pace: Duration,
}

struct Figures {
    latencies: Vec<Duration>,
    /// First bind to last Run seen started.
    wall: Duration,
    /// How long the bench took to write all binds.
    binding: Duration,
}

async fn measure(client: &Client, runs_n: usize, scenario: &Scenario) -> Figures {
    let ns = support::namespace(client, "rtd-bench").await;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": "rt-0",
            "labels": {"kruntimes.io/runtime": "rt", "kruntimes.io/runtime-pod": "rt-0"},
            "annotations": {"kruntimes.io/capacity.runs": scenario.capacity.to_string()},
        },
        "spec": {"containers": [{"name": "runtimed", "image": "example.invalid/kruntimes:bench"}]}
    }))
    .unwrap();
    let pod = Api::<Pod>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &pod)
        .await
        .expect("create the Runtime Pod");
    let runs = Api::<Run>::namespaced(client.clone(), &ns);

    for i in 0..runs_n {
        let run: Run = serde_json::from_value(json!({
            "apiVersion": "kruntimes.io/v1alpha1", "kind": "Run",
            "metadata": {"name": format!("r-{i:04}")},
            "spec": {"runtime": "rt", "mode": {"task": {"args": ["true"]}}}
        }))
        .unwrap();
        runs.create(&PostParams::default(), &run)
            .await
            .expect("create Run");
    }

    // When each Run was first seen Running (or terminal, if Running was never observed).
    let seen: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let sink = seen.clone();
    let watch = tokio::spawn({
        let runs = runs.clone();
        async move {
            let mut ready = Some(ready_tx);
            let mut stream = watcher(runs, watcher::Config::default()).boxed();
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Apply(run))
                        if run.phase() != RunPhase::Scheduled
                            && run.phase() != RunPhase::Pending =>
                    {
                        sink.lock()
                            .unwrap()
                            .entry(run.name_any())
                            .or_insert_with(Instant::now);
                    }
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = ready.take() {
                            let _ = tx.send(());
                        }
                    }
                    _ => {}
                }
            }
        }
    });
    ready_rx.await.unwrap();

    let _runtimed = Runtimed(
        Command::new(support::binary())
            .arg("runtimed")
            .env("KUBECONFIG", &support::control_plane().kubeconfig)
            .env("POD_NAME", "rt-0")
            .env("POD_NAMESPACE", &ns)
            .env("POD_UID", pod.uid().unwrap())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start runtimed"),
    );
    // Let runtimed finish its initial lists so that start-up is not measured.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let started = Instant::now();
    let mut bound = HashMap::new();
    for i in 0..runs_n {
        let name = format!("r-{i:04}");
        let patch = json!({"status": {"phase": "Scheduled", "podName": "rt-0", "podUID": pod.uid().unwrap()}});
        runs.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("bind Run");
        bound.insert(name, Instant::now());
        if !scenario.pace.is_zero() {
            tokio::time::sleep(scenario.pace).await;
        }
    }
    let binding = started.elapsed();
    let deadline = Instant::now() + Duration::from_secs(300);
    while seen.lock().unwrap().len() < runs_n {
        assert!(
            Instant::now() < deadline,
            "not every Run started within 300s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let wall = started.elapsed();
    watch.abort();
    let seen = seen.lock().unwrap();
    let mut latencies: Vec<Duration> = bound
        .iter()
        .map(|(name, at)| seen[name].saturating_duration_since(*at))
        .collect();
    latencies.sort();
    Figures {
        latencies,
        wall,
        binding,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn main() {
    let runs_n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(200);
    support::control_plane();
    support::install_crds();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = support::client().await;
        let scenarios = [
            Scenario { name: "paced 20ms, capacity >= runs (no queueing)", capacity: runs_n, pace: Duration::from_millis(20) },
            Scenario { name: "burst, capacity >= runs", capacity: runs_n, pace: Duration::ZERO },
            Scenario { name: "burst, capacity 4 (queueing included)", capacity: 4, pace: Duration::ZERO },
        ];
        println!("Runs/s: Runs started per second from the first bind; binds: time the bench took to write them");
        println!("runtimed claim-to-Running latency, {runs_n} Runs of `true` on one Pod (bind write returned -> Running seen by a watch)");
        println!(
            "{:<46} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "scenario", "p50", "p90", "p99", "max", "Runs/s", "binds"
        );
        for scenario in &scenarios {
            let f = measure(&client, runs_n, scenario).await;
            println!(
                "{:<46} {:>9.1?} {:>9.1?} {:>9.1?} {:>9.1?} {:>9.1} {:>9.1?}",
                scenario.name,
                percentile(&f.latencies, 50.0),
                percentile(&f.latencies, 90.0),
                percentile(&f.latencies, 99.0),
                f.latencies.last().unwrap(),
                runs_n as f64 / f.wall.as_secs_f64(),
                f.binding,
            );
        }
    });
}
