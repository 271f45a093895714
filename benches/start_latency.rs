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
//! `--go GIT_DIR` measures the Go kruntimes project's stack (a git copy of it; see
//! [`go`]) on the same shapes in the same run, each shape right after ours, and prints the
//! ratios the API-cost issue asks for: kube-apiserver CPU per Run and Running p50, ours over
//! its.
//!
//! `writes` (as a shape name) then measures kube-apiserver's CPU per kind of write, one write
//! at a time (see [`writes`]); it runs last, as it unbinds the admission policies, and starts
//! the control plane with the `CBORServingAndStorage` gate on (for its CBOR rows).
//!
//! A measurement, not a test: it prints figures and asserts nothing about time. Run with
//! `cargo bench --bench start_latency [-- SHAPE...|writes] [--routine-events] [--go GIT_DIR]`
//! (the second runs the scheduler and runtimed with `--routine-events=true`; by default they
//! publish no routine Event).

use testkit as support;

#[path = "start_latency/go.rs"]
mod go;

#[path = "start_latency/writes.rs"]
mod writes;

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

/// The creates of one shape's Runs, at most `concurrency` under way at once.
struct Burst {
    /// When the first create started.
    first: Instant,
    /// Per Run name: when its create request started.
    created: HashMap<String, Instant>,
    /// Per Run name: when its create request returned.
    returned: HashMap<String, Instant>,
}

impl Burst {
    /// Runs `create(i)` (which creates the i-th Run and returns its name) for every Run of
    /// `shape`, timing each from its first poll.
    async fn create<F, Fut>(shape: &Shape, create: F) -> Self
    where
        F: Fn(usize) -> Fut,
        Fut: std::future::Future<Output = String> + Send + 'static,
    {
        let times: Arc<Mutex<Vec<(String, Instant, Instant)>>> = Arc::default();
        let limit = Arc::new(tokio::sync::Semaphore::new(shape.concurrency));
        let first = Instant::now();
        let mut creates = Vec::new();
        for i in 0..shape.runs {
            let permit = limit.clone().acquire_owned().await.unwrap();
            let (create, times) = (create(i), times.clone());
            creates.push(tokio::spawn(async move {
                let at = Instant::now();
                let name = create.await;
                times.lock().unwrap().push((name, at, Instant::now()));
                drop(permit);
            }));
        }
        for create in creates {
            create.await.unwrap();
        }
        let times = std::mem::take(&mut *times.lock().unwrap());
        Burst {
            first,
            created: times.iter().map(|(n, at, _)| (n.clone(), *at)).collect(),
            returned: times.into_iter().map(|(n, _, at)| (n, at)).collect(),
        }
    }

    /// Waits until `ended()` (per Run name: when it was first seen terminal) holds every Run
    /// of the burst; returns it.
    async fn all_ended(
        &self,
        what: &str,
        ended: impl Fn() -> HashMap<String, Instant>,
    ) -> HashMap<String, Instant> {
        let runs = self.created.len();
        let what = format!("all {runs} {what} terminal");
        eventually(Duration::from_secs(600), &what, async || {
            let done = ended();
            if done.len() == runs {
                Ok(done)
            } else {
                Err(format!("{} terminal", done.len()))
            }
        })
        .await
    }
}

impl Figures {
    /// From the `burst` of creates, when each Run was first seen `[scheduled, started,
    /// done]`, the processes' CPU seconds before the burst and once every Run was done, and the
    /// requests per Run.
    fn from_times(
        burst: Burst,
        [scheduled, started, done]: [HashMap<String, Instant>; 3],
        [before, after]: [[f64; 4]; 2],
        requests: Vec<(String, f64)>,
    ) -> Self {
        let Burst {
            first,
            created,
            returned,
        } = burst;
        let runs = created.len();
        let last = done.values().max().copied().expect("a Run was done");
        let since_created = |seen: HashMap<String, Instant>| {
            let mut out: Vec<Duration> = created
                .iter()
                .map(|(name, at)| seen[name].saturating_duration_since(*at))
                .collect();
            out.sort();
            out
        };
        Figures {
            create: since_created(returned),
            schedule: since_created(scheduled),
            dispatch: since_created(started),
            complete: since_created(done),
            runs_per_second: runs as f64 / last.duration_since(first).as_secs_f64(),
            cpu: [0, 1, 2, 3].map(|i| (after[i] - before[i]) * 1e3 / runs as f64),
            requests,
        }
    }

    /// API writes per Run to Runs and Events (creates, updates, patches, deletes): what a Run
    /// costs, without the heartbeats that cost per second.
    fn writes_per_run(&self) -> f64 {
        self.requests
            .iter()
            .filter(|(k, _)| {
                let (verb, resource) = k.split_once(' ').unwrap_or_default();
                ["POST", "PUT", "PATCH", "APPLY", "DELETE"].contains(&verb)
                    && (resource.starts_with("runs/") || resource.starts_with("events/"))
            })
            .map(|(_, v)| v)
            .sum()
    }
}

/// The requests counted between `before` and `after`, per Run (the rarer ones left out).
fn per_run(
    before: std::collections::BTreeMap<String, f64>,
    after: std::collections::BTreeMap<String, f64>,
    runs: usize,
) -> Vec<(String, f64)> {
    after
        .into_iter()
        .map(|(k, v)| {
            let per_run = (v - before.get(&k).copied().unwrap_or(0.0)) / runs as f64;
            (k, per_run)
        })
        .filter(|(_, per_run)| *per_run >= 0.05)
        .collect()
}

/// CPU seconds so far: the scheduler, the runtimeds together, kube-apiserver, etcd. A process
/// that has gone would read as zero: that fails the bench instead.
fn cpu(scheduler: u32, runtimed: &[u32], control_plane: &[u32]) -> [f64; 4] {
    let (etcd, apiserver) = (control_plane[0], control_plane[1]);
    for pid in [scheduler, etcd, apiserver].iter().chain(runtimed) {
        assert!(
            std::path::Path::new(&format!("/proc/{pid}/stat")).exists(),
            "process {pid} exited during the measurement"
        );
    }
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
    // Scraped before the CPU is read: rendering /metrics is not the Runs' cost.
    let requests_before = api_requests(support::control_plane());
    let before = cpu(scheduler.child.id(), &runtimed_pids, &control_plane);

    let burst = Burst::create(shape, |i| {
        let runs = ns.runs();
        let mut object = run(&format!("r-{i:04}")).task(shape.task).build();
        object.metadata.namespace = None;
        object.metadata.uid = None;
        async move {
            let name = kube::ResourceExt::name_any(&object);
            runs.create(&kruntimes::api::post_params(), &object)
                .await
                .unwrap_or_else(|e| panic!("create Run {name}: {e}"));
            name
        }
    })
    .await;
    let done = burst
        .all_ended("Runs", || events.first_seen(|r| r.phase().is_terminal()))
        .await;
    let after = cpu(scheduler.child.id(), &runtimed_pids, &control_plane);
    let requests = per_run(
        requests_before,
        api_requests(support::control_plane()),
        shape.runs,
    );
    let unsucceeded =
        events.first_seen(|r| r.phase().is_terminal() && r.phase() != RunPhase::Succeeded);
    assert!(
        unsucceeded.is_empty(),
        "Runs that did not succeed: {:?}",
        unsucceeded.keys().collect::<Vec<_>>()
    );

    let scheduled = events.first_seen(|r: &Run| r.phase() != RunPhase::Pending);
    let started =
        events.first_seen(|r: &Run| !matches!(r.phase(), RunPhase::Pending | RunPhase::Scheduled));
    dump_one(&ns.runs(), "r-0000").await;
    drop(runtimeds);
    Figures::from_times(burst, [scheduled, started, done], [before, after], requests)
}

/// With `KRUNTIMES_BENCH_DUMP=1`, prints Run `name` as stored (JSON, with its managed
/// fields) and its size: what every write and watch event of it carries.
async fn dump_one<K>(api: &kube::Api<K>, name: &str)
where
    K: Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    if std::env::var("KRUNTIMES_BENCH_DUMP").as_deref() != Ok("1") {
        return;
    }
    let object = api.get(name).await.expect("get the dumped Run");
    let json = serde_json::to_string(&object).unwrap();
    println!("{name}: {} bytes as stored\n{json}", json.len());
}

fn ms(d: Duration) -> String {
    format!("{}", d.as_millis())
}

/// `--routine-events`: the scheduler and runtimed run with `--routine-events=true`.
fn routine_events() -> &'static [&'static str] {
    match std::env::args().any(|a| a == "--routine-events") {
        true => &["--routine-events=true"],
        false => &[],
    }
}

/// The row of one measurement.
fn print_row(name: &str, f: &Figures) {
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
        name,
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
    println!(
        "{:<12} API requests per Run ({:.2} writes to Runs and Events): {}",
        "",
        f.writes_per_run(),
        requests.join(", ")
    );
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let go_dir = argv
        .iter()
        .position(|a| a == "--go")
        .map(|i| std::path::PathBuf::from(argv.get(i + 1).expect("--go GIT_DIR")));
    let wanted: Vec<String> = argv
        .iter()
        .enumerate()
        .filter(|(i, a)| !a.starts_with('-') && (*i == 0 || argv[i - 1] != "--go"))
        .map(|(_, a)| a.clone())
        .collect();
    let go_stack = go_dir.as_deref().map(go::GoStack::prepare);
    let shapes: Vec<&Shape> = SHAPES
        .iter()
        .filter(|s| wanted.is_empty() || wanted.iter().any(|w| w == s.name))
        .collect();
    if wanted.iter().any(|w| w == "writes") {
        // The CBOR rows (KEP-4222, alpha in kube-apiserver 1.36): JSON stays the default.
        support::with_feature_gates(&["CBORServingAndStorage=true"]);
    }
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
    let mut ratios = Vec::new();
    let writes_too = wanted.iter().any(|w| w == "writes");
    for shape in shapes {
        let ours = rt.block_on(measure(shape));
        print_row(shape.name, &ours);
        let Some(go_stack) = &go_stack else {
            continue;
        };
        // Its own control plane (the projects' CRDs share a group), started on the main
        // thread, which outlives it.
        let (mut running, cp) = support::start_owned()
            .unwrap_or_else(|e| panic!("cannot start a control plane for the Go stack: {e}"));
        let theirs = rt.block_on(go_stack.measure(shape, &cp, &running.pids()));
        running.stop(Duration::ZERO);
        let _ = std::fs::remove_dir_all(&cp.dir);
        print_row(&format!("go {}", go_stack.commit), &theirs);
        let p50 = |v: &[Duration]| percentile(v, 50.0).as_secs_f64();
        ratios.push(format!(
            "{:<12} ours / Go: kube-apiserver CPU per Run {:.2}, Running p50 {:.2}, terminal p50 {:.2}, Runs/s {:.2}; writes per Run {:.2} / {:.2}",
            shape.name,
            ours.cpu[2] / theirs.cpu[2],
            p50(&ours.dispatch) / p50(&theirs.dispatch),
            p50(&ours.complete) / p50(&theirs.complete),
            ours.runs_per_second / theirs.runs_per_second,
            ours.writes_per_run(),
            theirs.writes_per_run(),
        ));
    }
    for line in ratios {
        println!("{line}");
    }
    // Last: it unbinds the admission policies of this control plane.
    if writes_too {
        rt.block_on(writes::measure(support::control_plane_pids()[1]));
    }
}
