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
use std::time::{Duration, Instant};

use kruntimes::api::{Run, RunPhase};
use kruntimes::testing::{percentile, pod, run};
use kube::ResourceExt as _;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use support::world::{Create, RunEvents, RuntimedProcess, TestNs, eventually};

struct Scenario {
    name: &'static str,
    capacity: u64,
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

/// Started: past Scheduled (Running, or terminal if Running was never observed).
fn started(run: &Run) -> bool {
    !matches!(run.phase(), RunPhase::Pending | RunPhase::Scheduled)
}

async fn measure(runs_n: usize, scenario: &Scenario) -> Figures {
    let ns = TestNs::new("rtd-bench").await;
    // runtimed writes the heartbeat itself.
    let rt_0 = pod("rt-0").capacity(&[("runs", scenario.capacity)]);
    let pod = rt_0.no_lease().create(&ns).await;
    for i in 0..runs_n {
        run(&format!("r-{i:04}")).create(&ns).await;
    }

    let events = RunEvents::start(&ns).await;
    let _runtimed = RuntimedProcess::start(&pod, &[]);
    // Let runtimed finish its initial lists so that start-up is not measured.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let first_bind = Instant::now();
    let mut bound = HashMap::new();
    let runs = ns.runs();
    for i in 0..runs_n {
        let name = format!("r-{i:04}");
        let patch = json!({"status": {"phase": "Scheduled", "assignedPod": "rt-0", "assignedPodUID": pod.uid().unwrap()}});
        runs.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("bind Run");
        bound.insert(name, Instant::now());
        if !scenario.pace.is_zero() {
            tokio::time::sleep(scenario.pace).await;
        }
    }
    let binding = first_bind.elapsed();
    let what = format!("all {runs_n} Runs started");
    let seen = eventually(Duration::from_secs(300), &what, async || {
        let seen = events.first_seen(started);
        if seen.len() == runs_n {
            Ok(seen)
        } else {
            Err(format!("{} started", seen.len()))
        }
    })
    .await;
    let last = seen.values().max().copied().unwrap();
    let mut latencies: Vec<Duration> = bound
        .iter()
        .map(|(name, at)| seen[name].saturating_duration_since(*at))
        .collect();
    latencies.sort();
    Figures {
        latencies,
        wall: last.saturating_duration_since(first_bind),
        binding,
    }
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
        let scenarios = [
            Scenario { name: "paced 20ms, capacity >= runs (no queueing)", capacity: runs_n as u64, pace: Duration::from_millis(20) },
            Scenario { name: "burst, capacity >= runs", capacity: runs_n as u64, pace: Duration::ZERO },
            Scenario { name: "burst, capacity 4 (queueing included)", capacity: 4, pace: Duration::ZERO },
        ];
        println!("Runs/s: Runs started per second from the first bind; binds: time the bench took to write them");
        println!("runtimed claim-to-Running latency, {runs_n} Runs of `true` on one Pod (bind write returned -> Running seen by a watch)");
        println!(
            "{:<46} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "scenario", "p50", "p90", "p99", "max", "Runs/s", "binds"
        );
        for scenario in &scenarios {
            let f = measure(runs_n, scenario).await;
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
