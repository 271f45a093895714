//! End-to-end scheduler throughput on the real control plane: 2,000 Runs created (16 at a
//! time) onto 100 ready Runtime Pods of `runs: 20`, with 1 and then 4 queue workers. Reports
//! Runs/s from the first creation to the last Scheduled, per-Run latency (creation returned →
//! a watch sees Scheduled) p50/p99, and where the time goes: the scheduler's own cycle time
//! (from its histogram) against the wall time, the rest being API writes and watch delivery.
//!
//! A measurement, not a test: it prints figures and asserts only that every Run was placed.
//! Run with `cargo bench --bench scheduler_throughput` (optionally `-- RUNS PODS`).

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::watcher;

use kruntimes::api::{Run, RunPhase};
use support::world::{self, SchedulerProcess};

#[tokio::main]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let runs = args.first().copied().unwrap_or(2000);
    let pods = args.get(1).copied().unwrap_or(100);
    support::install_crds();
    for workers in [1u16, 4] {
        measure(runs, pods, workers).await;
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn measure(runs: usize, pods: usize, workers: u16) {
    let client = support::client().await;
    let ns = support::namespace(&client, &format!("bench-w{workers}")).await;
    let per_pod = runs.div_ceil(pods) as u64;
    for i in 0..pods {
        world::ready_pod(
            &client,
            &ns,
            "python",
            &format!("py-{i:03}"),
            &[("runs", per_pod)],
        )
        .await;
    }
    let scheduler = SchedulerProcess::start(&ns, workers, None, &format!("bench-{workers}")).await;

    let scheduled_at: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let watch = {
        let api: Api<Run> = Api::namespaced(client.clone(), &ns);
        let scheduled_at = scheduled_at.clone();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()));
            while let Some(Ok(event)) = stream.next().await {
                if let watcher::Event::Apply(run) | watcher::Event::InitApply(run) = event
                    && run.phase() == RunPhase::Scheduled
                {
                    scheduled_at
                        .lock()
                        .unwrap()
                        .entry(run.name_any())
                        .or_insert_with(Instant::now);
                }
            }
        })
    };

    let created_at: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let start = Instant::now();
    futures::stream::iter(0..runs)
        .for_each_concurrent(16, |i| {
            let (client, ns, created_at) = (client.clone(), ns.clone(), created_at.clone());
            async move {
                let name = format!("r-{i:05}");
                world::run(&name, "python").create(&client, &ns).await;
                created_at.lock().unwrap().insert(name, Instant::now());
            }
        })
        .await;
    let created = start.elapsed();
    let deadline = Instant::now() + Duration::from_secs(600);
    while scheduled_at.lock().unwrap().len() < runs {
        assert!(Instant::now() < deadline, "not every Run was scheduled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    watch.abort();
    let scheduled = scheduled_at.lock().unwrap().clone();
    let created_map = created_at.lock().unwrap().clone();
    let last = scheduled.values().max().copied().unwrap();
    let wall = last - start;
    let mut latency: Vec<Duration> = scheduled
        .iter()
        .map(|(name, at)| at.saturating_duration_since(created_map[name]))
        .collect();
    latency.sort();
    let metrics = scheduler.metrics().await;
    let cycle_sum = world::sample(
        &metrics,
        "kruntimes_scheduler_scheduling_cycle_duration_seconds_sum",
    )
    .unwrap_or(0.0);
    let cycle_count = world::sample(
        &metrics,
        "kruntimes_scheduler_scheduling_cycle_duration_seconds_count",
    )
    .unwrap_or(0.0);
    let queue_sum =
        world::sample(&metrics, "kruntimes_scheduler_queue_duration_seconds_sum").unwrap_or(0.0);
    let attempts = world::sample(
        &metrics,
        "kruntimes_scheduler_schedule_attempts_total{result=\"scheduled\"}",
    )
    .unwrap_or(0.0);
    println!(
        "workers={workers}: {runs} Runs on {pods} Pods in {:.2}s = {:.0} Runs/s (creating them took {:.2}s); \
         latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; {cycle_count:.0} cycles, mean cycle {:.3} ms, \
         cycle time {:.2}s of {:.2}s wall ({:.1}%); mean queue wait {:.1} ms; {attempts:.0} scheduled attempts",
        wall.as_secs_f64(),
        runs as f64 / wall.as_secs_f64(),
        created.as_secs_f64(),
        percentile(&latency, 0.5).as_secs_f64() * 1e3,
        percentile(&latency, 0.99).as_secs_f64() * 1e3,
        latency.last().unwrap().as_secs_f64() * 1e3,
        cycle_sum / cycle_count.max(1.0) * 1e3,
        cycle_sum,
        wall.as_secs_f64(),
        cycle_sum / wall.as_secs_f64() * 100.0,
        queue_sum / cycle_count.max(1.0) * 1e3,
    );
}
