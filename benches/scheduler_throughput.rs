//! End-to-end scheduler throughput on the real control plane: 2,000 Runs created (16 at a
//! time) onto 100 ready Runtime Pods of `runs: 21` (room for every Run and one more), with 1
//! and then 4 queue workers. Reports Runs/s from the first creation to the last Scheduled,
//! per-Run latency (creation returned → a watch sees Scheduled) p50/p99, and where the time
//! goes: the scheduler's own cycle time (from its histogram) against the wall time, the rest
//! being API writes and watch delivery; and the scheduler's resident memory per Run (its RSS
//! with every Run placed, less its RSS with the Pods alone).
//!
//! Then, at that size, how long the commands and a failover take: `status -A`, `explain` of one
//! Run, and a new scheduler started after the old one is killed (as a standby takes over once
//! the Lease is free) until a Run created meanwhile is Scheduled: its lists and caches rebuilt.
//!
//! A measurement, not a test: it prints figures and asserts only that every Run was placed and
//! each command succeeded. Run with `cargo bench --bench scheduler_throughput` (optionally
//! `-- RUNS PODS [WORKERS]`: with WORKERS, that many queue workers only).

use testkit as support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;

use kruntimes::api::RunPhase;
use kruntimes::testing::{percentile, pod, run};
use support::world::{self, Create, RunEvents, SchedulerProcess, TestNs, eventually};

#[tokio::main]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let runs = args.first().copied().unwrap_or(2000);
    let pods = args.get(1).copied().unwrap_or(100);
    let workers: Vec<u16> = match args.get(2) {
        Some(&w) => vec![u16::try_from(w).expect("WORKERS fits in 16 bits")],
        None => vec![1, 4],
    };
    for workers in workers {
        measure(runs, pods, workers).await;
    }
}

async fn measure(runs: usize, pods: usize, workers: u16) {
    let ns = TestNs::new(&format!("bench-w{workers}")).await;
    // Room for every Run, and one more per Pod for the Run created during the failover.
    let per_pod = runs.div_ceil(pods) as u64 + 1;
    for i in 0..pods {
        let p = pod(&format!("py-{i:03}")).capacity(&[("runs", per_pod)]);
        p.create(&ns).await;
    }
    let identity = format!("bench-{workers}");
    let mut scheduler = SchedulerProcess::start(&ns.name, workers, None, &identity).await;
    let events = RunEvents::start(&ns).await;
    // The scheduler's resident memory with its Pods and no Run: the base the Runs add to.
    let rss =
        |metrics: &str| world::sample(metrics, "process_resident_memory_bytes").unwrap_or(0.0);
    let base = rss(&scheduler.metrics().await);

    let created_at: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let start = Instant::now();
    let (ns, created) = (&ns, &created_at);
    futures::stream::iter(0..runs)
        .for_each_concurrent(16, |i| async move {
            let name = format!("r-{i:05}");
            run(&name).create(ns).await;
            created.lock().unwrap().insert(name, Instant::now());
        })
        .await;
    let creating = start.elapsed();
    let scheduled_at = |r: &kruntimes::api::Run| r.phase() == RunPhase::Scheduled;
    let what = "every Run scheduled";
    let scheduled = eventually(Duration::from_secs(600), what, async || {
        let scheduled = events.first_seen(scheduled_at);
        if scheduled.len() >= runs {
            Ok(scheduled)
        } else {
            Err(format!("{} scheduled", scheduled.len()))
        }
    })
    .await;
    drop(events);
    let created_map = created_at.lock().unwrap().clone();
    let last = scheduled.values().max().copied().unwrap();
    let wall = last - start;
    let mut latency: Vec<Duration> = scheduled
        .iter()
        .map(|(name, at)| at.saturating_duration_since(created_map[name]))
        .collect();
    latency.sort();
    let metrics = scheduler.metrics().await;
    let sample = |series: &str| world::sample(&metrics, series).unwrap_or(0.0);
    let cycle_sum = sample("kruntimes_scheduler_scheduling_cycle_duration_seconds_sum");
    let cycle_count = sample("kruntimes_scheduler_scheduling_cycle_duration_seconds_count");
    let queue_sum = sample("kruntimes_scheduler_queue_duration_seconds_sum");
    let attempts = sample("kruntimes_scheduler_schedule_attempts_total{result=\"scheduled\"}");
    let held = rss(&metrics);
    println!(
        "workers={workers}: scheduler resident memory {:.1} MiB with {pods} Pods, {:.1} MiB with {runs} Runs too: {:.1} KiB per Run",
        base / 1048576.0,
        held / 1048576.0,
        (held - base) / runs as f64 / 1024.0
    );
    println!(
        "workers={workers}: {runs} Runs on {pods} Pods in {:.2}s = {:.0} Runs/s (creating them took {:.2}s); \
         latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; {cycle_count:.0} cycles, mean cycle {:.3} ms, \
         cycle time {:.2}s of {:.2}s wall ({:.1}%); mean queue wait {:.1} ms; {attempts:.0} scheduled attempts",
        wall.as_secs_f64(),
        runs as f64 / wall.as_secs_f64(),
        creating.as_secs_f64(),
        percentile(&latency, 50.0).as_secs_f64() * 1e3,
        percentile(&latency, 99.0).as_secs_f64() * 1e3,
        latency.last().unwrap().as_secs_f64() * 1e3,
        cycle_sum / cycle_count.max(1.0) * 1e3,
        cycle_sum,
        wall.as_secs_f64(),
        cycle_sum / wall.as_secs_f64() * 100.0,
        queue_sum / cycle_count.max(1.0) * 1e3,
    );
    at_scale(ns, &mut scheduler, workers, runs, pods).await;
}

/// How long `status -A`, `explain` and a failover take with every Run placed.
async fn at_scale(
    ns: &TestNs,
    scheduler: &mut SchedulerProcess,
    workers: u16,
    runs: usize,
    pods: usize,
) {
    let timed = |args: &[&str]| {
        let started = Instant::now();
        let out = support::kruntimes()
            .args(args)
            .output()
            .expect("run kubectl-kruntimes");
        assert!(
            out.status.success(),
            "kubectl-kruntimes {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        (started.elapsed(), out.stdout.len())
    };
    let (status, status_bytes) = timed(&["status", "-A"]);
    let (explain, _) = timed(&["explain", "run/r-00000", "-n", &ns.name]);
    // The old scheduler killed; a new one lists every Run and Pod again before it places the
    // Run created meanwhile.
    scheduler.kill();
    run("after-failover").create(ns).await;
    let started = Instant::now();
    let identity = format!("bench-{workers}-new");
    let _new = SchedulerProcess::start(&ns.name, workers, None, &identity).await;
    let ready = started.elapsed();
    eventually(
        Duration::from_secs(300),
        "the Run created during the failover to be Scheduled",
        async || match ns.get_run("after-failover").await.phase() {
            RunPhase::Scheduled => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    let failover = started.elapsed();
    println!(
        "workers={workers}: with {runs} Runs on {pods} Pods: status -A {:.2}s ({status_bytes} bytes), \
         explain {:.2}s; a new scheduler ready in {:.2}s and placing a new Run {:.2}s after its start",
        status.as_secs_f64(),
        explain.as_secs_f64(),
        ready.as_secs_f64(),
        failover.as_secs_f64(),
    );
}
