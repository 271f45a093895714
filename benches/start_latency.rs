//! Start latency under a burst, end to end, on the project's own control plane with the real
//! scheduler and one real runtimed per Runtime Pod (the built binary, as processes).
//!
//! The shapes are those of the Go kruntimes project's benchmark (`hack/benchmark`):
//! - `hot`: 50 Runs created at most 25 at a time, 2 Pods × `runs: 64`, a task that does
//!   nothing (`true`);
//! - `backlog`: 50 Runs created at most 10 at a time, 2 Pods × `runs: 4`, tasks of 0.5 s (the
//!   slots allow 16 Runs/s);
//! - `hot-500` and `backlog-500`: the same with 500 Runs.
//!
//! Times run from the start of each Run's create request: `create` until the request
//! returned, and until the first version of the Run that a watch of the bench's own
//! delivers: `schedule` (past Pending), `dispatch` (past Scheduled:
//! Running or later), `complete` (terminal). Runs/s is Runs completed per second from the
//! first create to the last terminal. CPU is milliseconds per Run of each process over the
//! same interval (utime + stime from `/proc/<pid>/stat`).
//!
//! A measurement, not a test: it prints figures and asserts nothing about time. Run with
//! `cargo bench --bench start_latency [-- SHAPE...] [--no-routine-events]` (the latter runs the
//! scheduler and runtimed with `--routine-events=false`).

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kruntimes::api::{Run, RunPhase};
use kruntimes::testing::{percentile, pod, run};
use support::measure::{api_requests, cpu_seconds};
use support::world::{
    Create, RunEvents, RuntimedProcess, SchedulerProcess, TestNs, eventually, http_get,
};

struct Shape {
    name: &'static str,
    runs: usize,
    concurrency: usize,
    pods: usize,
    capacity: u64,
    task: &'static [&'static str],
}

const SHAPES: [Shape; 4] = [
    Shape {
        name: "hot",
        runs: 50,
        concurrency: 25,
        pods: 2,
        capacity: 64,
        task: &["true"],
    },
    Shape {
        name: "backlog",
        runs: 50,
        concurrency: 10,
        pods: 2,
        capacity: 4,
        task: &["sleep", "0.5"],
    },
    Shape {
        name: "hot-500",
        runs: 500,
        concurrency: 25,
        pods: 2,
        capacity: 64,
        task: &["true"],
    },
    Shape {
        name: "backlog-500",
        runs: 500,
        concurrency: 10,
        pods: 2,
        capacity: 4,
        task: &["sleep", "0.5"],
    },
];

struct Figures {
    /// Until the create request returned.
    create: Vec<Duration>,
    schedule: Vec<Duration>,
    dispatch: Vec<Duration>,
    complete: Vec<Duration>,
    runs_per_second: f64,
    /// CPU ms per Run: scheduler, runtimed (all Pods), kube-apiserver, etcd.
    cpu: [f64; 4],
    /// API requests per Run over the same interval, by "verb resource/subresource".
    requests: Vec<(String, f64)>,
}

fn cpu(scheduler: u32, runtimed: &[u32], control_plane: &[u32]) -> [f64; 4] {
    let (etcd, apiserver) = (control_plane[0], control_plane[1]);
    [
        cpu_seconds(scheduler),
        runtimed.iter().copied().map(cpu_seconds).sum(),
        cpu_seconds(apiserver),
        cpu_seconds(etcd),
    ]
}

async fn measure(shape: &Shape) -> Figures {
    let ns = TestNs::new(&format!("start-{}", shape.name)).await;
    let mut pods = Vec::new();
    for i in 0..shape.pods {
        // runtimed writes the heartbeat itself.
        let p = pod(&format!("rt-{i}"))
            .capacity(&[("runs", shape.capacity)])
            .no_lease();
        pods.push(p.create(&ns).await);
    }
    let mut runtimeds = Vec::new();
    for p in &pods {
        let health = support::free_port();
        let flag = format!("--health-probe-bind-address=127.0.0.1:{health}");
        let mut args = vec![flag.as_str()];
        args.extend(routine_events());
        runtimeds.push(RuntimedProcess::start(p, &args));
        // Ready: its watches have listed, so start-up is not measured.
        eventually(
            Duration::from_secs(30),
            "runtimed to answer /readyz with 200",
            async || match http_get(health, "/readyz").await {
                Ok((200, _)) => Ok(()),
                other => Err(format!("{other:?}")),
            },
        )
        .await;
    }
    let kubeconfig = support::control_plane().kubeconfig.clone();
    let scheduler = SchedulerProcess::start_with(
        &kubeconfig,
        &ns.name,
        4,
        None,
        "start-latency",
        routine_events(),
    )
    .await;
    let events = RunEvents::start(&ns).await;
    let control_plane = support::control_plane_pids();
    let runtimed_pids: Vec<u32> = runtimeds.iter().map(RuntimedProcess::pid).collect();
    let before = cpu(scheduler.child.id(), &runtimed_pids, &control_plane);
    let requests_before = api_requests(support::control_plane());

    let created: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let returned: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let first_create = Instant::now();
    let limit = Arc::new(tokio::sync::Semaphore::new(shape.concurrency));
    let mut creates = Vec::new();
    for i in 0..shape.runs {
        let permit = limit.clone().acquire_owned().await.unwrap();
        let (runs, created, returned) = (ns.runs(), created.clone(), returned.clone());
        let mut object = run(&format!("r-{i:04}")).task(shape.task).build();
        object.metadata.namespace = None;
        object.metadata.uid = None;
        creates.push(tokio::spawn(async move {
            let name = kube::ResourceExt::name_any(&object);
            let at = Instant::now();
            runs.create(&kruntimes::api::post_params(), &object)
                .await
                .unwrap_or_else(|e| panic!("create Run {name}: {e}"));
            created.lock().unwrap().insert(name.clone(), at);
            returned.lock().unwrap().insert(name, Instant::now());
            drop(permit);
        }));
    }
    for create in creates {
        create.await.unwrap();
    }
    let what = format!("all {} Runs terminal", shape.runs);
    let done = eventually(Duration::from_secs(600), &what, async || {
        let done = events.first_seen(|r| r.phase().is_terminal());
        if done.len() == shape.runs {
            Ok(done)
        } else {
            Err(format!("{} terminal", done.len()))
        }
    })
    .await;
    let after = cpu(scheduler.child.id(), &runtimed_pids, &control_plane);
    let requests = api_requests(support::control_plane())
        .into_iter()
        .map(|(k, v)| {
            let per_run = (v - requests_before.get(&k).copied().unwrap_or(0.0)) / shape.runs as f64;
            (k, per_run)
        })
        .filter(|(_, per_run)| *per_run >= 0.05)
        .collect();
    let last = done.values().max().copied().unwrap();
    let failed = events
        .events()
        .iter()
        .filter(|e| e.run.phase() == RunPhase::Failed)
        .count();
    assert_eq!(failed, 0, "no Run of the bench may fail");

    let created = created.lock().unwrap().clone();
    let since_created = |seen: HashMap<String, Instant>| {
        let mut out: Vec<Duration> = created
            .iter()
            .map(|(name, at)| seen[name].saturating_duration_since(*at))
            .collect();
        out.sort();
        out
    };
    let scheduled = events.first_seen(|r: &Run| r.phase() != RunPhase::Pending);
    let started =
        events.first_seen(|r: &Run| !matches!(r.phase(), RunPhase::Pending | RunPhase::Scheduled));
    drop(runtimeds);
    let returned = returned.lock().unwrap().clone();
    Figures {
        create: since_created(returned),
        schedule: since_created(scheduled),
        dispatch: since_created(started),
        complete: since_created(done),
        runs_per_second: shape.runs as f64 / last.duration_since(first_create).as_secs_f64(),
        cpu: [0, 1, 2, 3].map(|i| (after[i] - before[i]).max(0.0) * 1e3 / shape.runs as f64),
        requests,
    }
}

fn ms(d: Duration) -> String {
    format!("{}", d.as_millis())
}

/// `--no-routine-events`: the scheduler and runtimed run with `--routine-events=false`.
fn routine_events() -> &'static [&'static str] {
    match std::env::args().any(|a| a == "--no-routine-events") {
        true => &["--routine-events=false"],
        false => &[],
    }
}

fn main() {
    let wanted: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let shapes: Vec<&Shape> = SHAPES
        .iter()
        .filter(|s| wanted.is_empty() || wanted.iter().any(|w| w == s.name))
        .collect();
    support::control_plane();
    support::install_crds();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "{:<12} {:>14} {:>16} {:>16} {:>16} {:>9} {:>7} {:>9} {:>9} {:>7}",
        "shape",
        "create ms",
        "schedule ms",
        "dispatch ms",
        "complete ms",
        "Runs/s",
        "sched",
        "runtimed",
        "apiserver",
        "etcd"
    );
    println!(
        "{:<12} {:>14} {:>16} {:>16} {:>16} {:>9} {:>7} {:>9} {:>9} {:>7}",
        "",
        "p50/p95/p99",
        "p50/p95/p99",
        "p50/p95/p99",
        "p50/p95/p99",
        "",
        "CPU ms per Run",
        "",
        "",
        ""
    );
    rt.block_on(async {
        for shape in shapes {
            let f = measure(shape).await;
            let triple = |v: &[Duration]| {
                format!(
                    "{}/{}/{}",
                    ms(percentile(v, 50.0)),
                    ms(percentile(v, 95.0)),
                    ms(percentile(v, 99.0))
                )
            };
            println!(
                "{:<12} {:>14} {:>16} {:>16} {:>16} {:>9.1} {:>7.2} {:>9.2} {:>9.2} {:>7.2}",
                shape.name,
                triple(&f.create),
                triple(&f.schedule),
                triple(&f.dispatch),
                triple(&f.complete),
                f.runs_per_second,
                f.cpu[0],
                f.cpu[1],
                f.cpu[2],
                f.cpu[3],
            );
            let requests: Vec<String> = f
                .requests
                .iter()
                .map(|(k, v)| format!("{k} {v:.2}"))
                .collect();
            println!("{:<12} API requests per Run: {}", "", requests.join(", "));
        }
    });
}
