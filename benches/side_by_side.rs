//! kruntimes against kube-scheduler, side by side on this machine: each system gets a fresh
//! control plane of the same binaries (etcd and kube-apiserver from `tests/controlplane`,
//! kube-scheduler of the same release built beside them), the same shape, and two modes:
//!
//! - drain: every target and object first, then the scheduler started; rate = objects /
//!   (last bind − first bind);
//! - stream: then more objects created 16 at a time while the scheduler runs; rate = objects /
//!   (last bind − first creation), and creation→bound latency p50/p99.
//!
//! Shapes: kube-scheduler places Pods on Nodes (allocatable set through the status
//! subresource, the `node.kubernetes.io/not-ready` taint removed); kruntimes places Runs on
//! Runtime Pods (Ready, with fresh heartbeat Leases). `--shape gpu` (default): every object
//! requests `example.com/gpu: 1` (Runs also `runs: 1`); `--shape native`: Pods request `cpu: 1`,
//! Runs `runs: 1`. Capacity per target fits drain and stream objects.
//!
//! CPU seconds per object of the scheduler, kube-apiserver and etcd come from
//! `/proc/<pid>/stat` (utime + stime) over each mode's interval, which lasts until the
//! objects' `Scheduled` Events are written too (both schedulers write them after the bind).
//! The machine is shared and noisy: compare systems of one run, as ratios.
//!
//! A measurement, not a test. Run:
//! `cargo bench --bench side_by_side -- [--pods 100,1000,5000] [--shape gpu|native]
//!  [--workers 4] [--stream 1000] [--kruntimes LABEL=PATH]... [--no-kube-scheduler]
//!  [--no-self] [--perf DIR] [--pprof DIR] [--requests] [--writes-only] [--priority-class]
//!  [--repeat N] [--objects N]`
//! where `--pods` are the target counts (objects: 2,000 on 100, 3,000 on 1,000, 10,000 on 5,000,
//! else twice the targets, unless `--objects N` says), `--kruntimes` adds another
//! `kubectl-kruntimes` binary (e.g. a base commit's release build), `--no-self` leaves out the
//! one this bench was built with and `--perf DIR` records each kruntimes scheduler's drain with `perf record` (`perf report -i`);
//! `--pprof DIR` saves kube-apiserver's CPU profile of the first seconds of every drain (both
//! systems; `go tool pprof -top DIR/<system>-<pods>.pprof`); `--requests` prints the API
//! requests each drain made, by verb and resource (kube-apiserver's `apiserver_request_total`).
//!
//! `--repeat N` measures every system N times per target count, in the listed order on odd
//! rounds and in reverse on even ones (so no system always runs first on a fresh machine),
//! and ends with one line per system and mode against the first kruntimes system listed
//! (e.g. `--no-self --kruntimes base=… --kruntimes new=…`): each round's ratio, their median,
//! and the ratio of the aggregate rates (all objects over all the time).
//!
//! `--priority-class` creates one PriorityClass, `globalDefault` at 1000, before the Runs of
//! every kruntimes system (throughput with one class; a build from before priority ignores it).
//!
//! `--writes-only` adds two rows per target count that run no scheduler at all: the bench
//! itself makes, for every object, the writes its scheduler must make once it has decided
//! (64 at a time, kruntimes' binding slots), round-robin over the targets. `writes: Pod
//! binding` is kube-scheduler's (a `pods/binding` create and a `Scheduled` Event),
//! `writes: Run status` kruntimes' own code (the guarded status merge patch of
//! `status_patch` and the `Scheduled` Event of `RunEvents`). Their rates bound what any
//! scheduler writing that way can reach on this machine: the API server's share alone.

use testkit as support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use kruntimes::api::{Run, status};
use kruntimes::scheduler::status_patch;
use kruntimes::telemetry::events::RunEvents;
use kruntimes::testing::{percentile, pod, run};
use support::measure::{api_requests, cpu_seconds};
use support::world::{Create, TestNs, eventually};

/// Objects in flight while streaming, as the issue measures.
const STREAM_CONCURRENCY: usize = 16;
const NAMESPACE: &str = "bench";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Gpu,
    Native,
}

#[derive(Debug, Clone)]
enum System {
    KubeScheduler,
    Kruntimes {
        label: String,
        binary: PathBuf,
    },
    /// No scheduler: the bench makes kube-scheduler's writes (`--writes-only`).
    PodBindingWrites,
    /// No scheduler: the bench makes kruntimes' writes (`--writes-only`).
    RunStatusWrites,
}

impl System {
    fn places_runs(&self) -> bool {
        matches!(self, System::Kruntimes { .. } | System::RunStatusWrites)
    }

    fn label(&self) -> &str {
        match self {
            System::KubeScheduler => "kube-scheduler",
            System::Kruntimes { label, .. } => label,
            System::PodBindingWrites => "writes: Pod binding",
            System::RunStatusWrites => "writes: Run status",
        }
    }
}

struct Args {
    pods: Vec<usize>,
    shape: Shape,
    workers: u16,
    stream: usize,
    systems: Vec<System>,
    /// Record each kruntimes scheduler's drain with `perf record` into this directory.
    perf: Option<PathBuf>,
    /// Save kube-apiserver's CPU profile of each drain into this directory.
    pprof: Option<PathBuf>,
    /// Print the API requests of each drain.
    requests: bool,
    /// Create one PriorityClass, the global default, before the Runs (throughput with one
    /// class: every Run resolves a priority; builds without priority ignore it).
    priority_class: bool,
    /// Rounds per target count (see `--repeat` at the top).
    repeat: usize,
    /// Objects drained, whatever the target count (`--objects`).
    objects: Option<usize>,
}

fn parse_args() -> Args {
    let mut args = Args {
        pods: vec![100, 1000],
        shape: Shape::Gpu,
        workers: 4,
        stream: 1000,
        systems: Vec::new(),
        perf: None,
        pprof: None,
        requests: false,
        priority_class: false,
        repeat: 1,
        objects: None,
    };
    let (mut kube_scheduler, mut own, mut writes_only) = (true, true, false);
    let mut extra = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--pods" => {
                args.pods = value()
                    .split(',')
                    .map(|n| n.parse().expect("--pods takes numbers, e.g. 100,1000"))
                    .collect()
            }
            "--shape" => {
                args.shape = match value().as_str() {
                    "gpu" => Shape::Gpu,
                    "native" => Shape::Native,
                    other => panic!("--shape gpu|native, not {other}"),
                }
            }
            "--workers" => args.workers = value().parse().expect("--workers N"),
            "--stream" => args.stream = value().parse().expect("--stream N"),
            "--kruntimes" => {
                let v = value();
                let (label, path) = v.split_once('=').expect("--kruntimes LABEL=PATH");
                extra.push(System::Kruntimes {
                    label: label.to_string(),
                    binary: PathBuf::from(path),
                });
            }
            "--perf" => args.perf = Some(PathBuf::from(value())),
            "--pprof" => args.pprof = Some(PathBuf::from(value())),
            "--requests" => args.requests = true,
            "--priority-class" => args.priority_class = true,
            "--objects" => args.objects = Some(value().parse().expect("--objects N")),
            "--repeat" => {
                args.repeat = value().parse().expect("--repeat N");
                assert!(args.repeat > 0, "--repeat takes a count of at least 1");
            }
            "--no-kube-scheduler" => kube_scheduler = false,
            "--no-self" => own = false,
            "--writes-only" => writes_only = true,
            // `cargo bench` passes --bench.
            "--bench" => {}
            other => panic!("unknown argument {other}; see the top of benches/side_by_side.rs"),
        }
    }
    if kube_scheduler {
        args.systems.push(System::KubeScheduler);
    }
    if writes_only {
        args.systems.push(System::PodBindingWrites);
    }
    args.systems.extend(extra);
    if own {
        args.systems.push(System::Kruntimes {
            label: "kruntimes".into(),
            binary: PathBuf::from(env!("CARGO_BIN_EXE_kubectl-kruntimes")),
        });
    }
    if writes_only {
        args.systems.push(System::RunStatusWrites);
    }
    args
}

/// Objects placed on `pods` targets in drain mode.
fn objects_for(pods: usize) -> usize {
    match pods {
        100 => 2000,
        1000 => 3000,
        5000 => 10000,
        n => 2 * n,
    }
}

/// One row of the table.
struct Row {
    system: String,
    pods: usize,
    mode: &'static str,
    objects: usize,
    rate: f64,
    /// The round it was measured in (`--repeat`), from 0.
    round: usize,
    latency: Option<(Duration, Duration)>,
    /// CPU seconds per object: scheduler, kube-apiserver, etcd.
    cpu: [f64; 3],
}

fn main() {
    let args = parse_args();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let mut rows = Vec::new();
    for &pods in &args.pods {
        for round in 0..args.repeat {
            // Every other round in reverse, so that no system is always measured first.
            let mut systems: Vec<&System> = args.systems.iter().collect();
            if round % 2 == 1 {
                systems.reverse();
            }
            for system in systems {
                // Started on the main thread, which outlives it (PR_SET_PDEATHSIG).
                let (mut running, cp) = support::start_owned()
                    .unwrap_or_else(|e| panic!("cannot start a control plane: {e}"));
                let pids = running.pids();
                let (etcd, apiserver) = (pids[0], pids[1]);
                let mut measured = rt.block_on(measure(&args, system, pods, &cp, apiserver, etcd));
                running.stop(Duration::ZERO);
                let _ = std::fs::remove_dir_all(&cp.dir);
                for row in &mut measured {
                    row.round = round;
                    print_row(row);
                }
                rows.extend(measured);
            }
        }
    }
    println!();
    println!(
        "shape {:?}, kruntimes --workers {}; CPU ms per object over each mode's interval",
        args.shape, args.workers
    );
    print_header();
    for row in &rows {
        print_row(row);
    }
    if args.repeat > 1 {
        print_ratios(&args, &rows);
    }
}

/// One line per system, target count and mode against the first kruntimes system listed:
/// the rounds' ratios of rates, their median, and the ratio of the aggregate rates.
fn print_ratios(args: &Args, rows: &[Row]) {
    let Some(anchor) = args
        .systems
        .iter()
        .find(|s| matches!(s, System::Kruntimes { .. }))
    else {
        return;
    };
    println!();
    println!("rates against {} ({} rounds)", anchor.label(), args.repeat);
    let of = |system: &str, pods: usize, mode: &str| -> Vec<&Row> {
        rows.iter()
            .filter(|r| r.system == system && r.pods == pods && r.mode == mode)
            .collect()
    };
    // All objects over all the time the rounds took.
    let aggregate = |rows: &[&Row]| -> f64 {
        let objects: usize = rows.iter().map(|r| r.objects).sum();
        let seconds: f64 = rows.iter().map(|r| r.objects as f64 / r.rate).sum();
        objects as f64 / seconds
    };
    for &pods in &args.pods {
        for mode in ["drain", "stream"] {
            let base = of(anchor.label(), pods, mode);
            if base.is_empty() {
                continue;
            }
            for system in args.systems.iter().filter(|s| s.label() != anchor.label()) {
                let measured = of(system.label(), pods, mode);
                // Each round against the anchor's measurement of the same round.
                let mut ratios: Vec<f64> = measured
                    .iter()
                    .filter_map(|m| {
                        let b = base.iter().find(|b| b.round == m.round)?;
                        Some(m.rate / b.rate)
                    })
                    .collect();
                if ratios.is_empty() {
                    continue;
                }
                let listed = ratios
                    .iter()
                    .map(|r| format!("{r:.2}"))
                    .collect::<Vec<_>>()
                    .join(" ");
                ratios.sort_by(f64::total_cmp);
                let mid = ratios.len() / 2;
                let median = if ratios.len().is_multiple_of(2) {
                    (ratios[mid - 1] + ratios[mid]) / 2.0
                } else {
                    ratios[mid]
                };
                println!(
                    "{} on {pods}, {mode}: rounds {listed}; median {median:.3}; aggregate {:.0}/{:.0} = {:.3}",
                    system.label(),
                    aggregate(&measured),
                    aggregate(&base),
                    aggregate(&measured) / aggregate(&base),
                );
            }
        }
    }
}

fn print_header() {
    println!(
        "| {:<16} | {:>5} | {:<6} | {:>7} | {:>9} | {:>8} | {:>8} | {:>9} | {:>9} | {:>9} |",
        "system",
        "pods",
        "mode",
        "objects",
        "objects/s",
        "p50 ms",
        "p99 ms",
        "sched ms",
        "apisrv ms",
        "etcd ms"
    );
    println!(
        "| {:-<16} | {:->5} | {:-<6} | {:->7} | {:->9} | {:->8} | {:->8} | {:->9} | {:->9} | {:->9} |",
        "", "", "", "", "", "", "", "", "", ""
    );
}

fn print_row(row: &Row) {
    let (p50, p99) = match row.latency {
        Some((p50, p99)) => (
            format!("{:.1}", p50.as_secs_f64() * 1e3),
            format!("{:.1}", p99.as_secs_f64() * 1e3),
        ),
        None => ("-".into(), "-".into()),
    };
    println!(
        "| {:<16} | {:>5} | {:<6} | {:>7} | {:>9.0} | {:>8} | {:>8} | {:>9.3} | {:>9.3} | {:>9.3} |",
        row.system,
        row.pods,
        row.mode,
        row.objects,
        row.rate,
        p50,
        p99,
        row.cpu[0] * 1e3,
        row.cpu[1] * 1e3,
        row.cpu[2] * 1e3,
    );
}

/// CPU seconds of the scheduler, kube-apiserver and etcd.
#[derive(Clone, Copy)]
struct Pids {
    scheduler: u32,
    apiserver: u32,
    etcd: u32,
}

impl Pids {
    fn cpu(&self) -> [f64; 3] {
        [self.scheduler, self.apiserver, self.etcd].map(cpu_seconds)
    }
}

/// When each object was first seen bound, by a watch of the bench's own.
#[derive(Clone, Default)]
struct Bound(Arc<(Mutex<HashMap<String, Instant>>, tokio::sync::Notify)>);

impl Bound {
    fn start<K>(api: Api<K>, is_bound: fn(&K) -> bool) -> (Self, tokio::task::JoinHandle<()>)
    where
        K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
        K: Send + Sync + 'static,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    {
        let bound = Bound::default();
        let sink = bound.clone();
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = stream.next().await {
                let obj = match event {
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => o,
                    _ => continue,
                };
                if is_bound(&obj) {
                    let at = Instant::now();
                    sink.0.0.lock().unwrap().entry(obj.name_any()).or_insert(at);
                    sink.0.1.notify_waiters();
                }
            }
        });
        (bound, task)
    }

    fn len(&self) -> usize {
        self.0.0.lock().unwrap().len()
    }

    /// Resolves at the next object seen bound.
    async fn changed(&self) {
        self.0.1.notified().await
    }

    fn times(&self) -> HashMap<String, Instant> {
        self.0.0.lock().unwrap().clone()
    }
}

/// Waits until `n` objects are bound, then until their `n` `Scheduled` Events are written
/// (both schedulers write them in the background, after the bind, so their cost would
/// otherwise fall outside the interval), then samples the CPU of `pids`. kube-scheduler's
/// event broadcaster may drop Events under load: after [`EVENTS_SETTLE`] without a new one,
/// the count so far is taken and reported.
async fn wait_bound(bound: &Bound, events: &Bound, n: usize, pids: Pids, what: &str) -> [f64; 3] {
    eventually(Duration::from_secs(900), what, async || {
        let seen = bound.len();
        if seen >= n {
            Ok(())
        } else {
            Err(format!("{seen} of {n} bound"))
        }
    })
    .await;
    let mut seen = events.len();
    while seen < n {
        let _ = tokio::time::timeout(EVENTS_SETTLE, events.changed()).await;
        match events.len() {
            now if now == seen => {
                eprintln!("{what}: {seen} of {n} Scheduled Events written");
                break;
            }
            now => seen = now,
        }
    }
    pids.cpu()
}

/// How long without a new `Scheduled` Event before the count so far is taken.
const EVENTS_SETTLE: Duration = Duration::from_secs(5);

fn per_object(before: [f64; 3], after: [f64; 3], n: usize) -> [f64; 3] {
    [0, 1, 2].map(|i| (after[i] - before[i]).max(0.0) / n as f64)
}

/// Capacity per target: drain and stream objects, spread evenly.
fn capacity(pods: usize, objects: usize) -> u64 {
    (objects.div_ceil(pods) as u64) * 2
}

async fn measure(
    args: &Args,
    system: &System,
    pods: usize,
    cp: &support::ControlPlane,
    apiserver: u32,
    etcd: u32,
) -> Vec<Row> {
    let client = support::client_for(&cp.kubeconfig).await;
    let ns = NAMESPACE.to_string();
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create the bench namespace");
    let test_ns = TestNs {
        client: client.clone(),
        name: ns.clone(),
    };
    let objects = args.objects.unwrap_or_else(|| objects_for(pods));
    let cap = capacity(pods, objects + args.stream);
    let started = Instant::now();
    let (bound, watch) = if !system.places_runs() {
        create_nodes(&client, pods, cap, args.shape).await;
        create_concurrently(objects, |i| create_pod(&client, &ns, i, args.shape)).await;
        Bound::start(Api::<Pod>::namespaced(client.clone(), &ns), |p| {
            p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()
        })
    } else {
        let binary = match system {
            System::Kruntimes { binary, .. } => binary.as_path(),
            _ => Path::new(env!("CARGO_BIN_EXE_kubectl-kruntimes")),
        };
        support::install_crds_with(binary, &cp.kubeconfig);
        if args.priority_class {
            let mut class = kruntimes::testing::priority_class("bench-default", 1000)
                .global_default()
                .build();
            class.metadata.uid = None;
            Api::<k8s_openapi::api::scheduling::v1::PriorityClass>::all(client.clone())
                .create(&PostParams::default(), &class)
                .await
                .expect("create the bench's PriorityClass");
        }
        let resources = shape_resources(args.shape, cap);
        create_concurrently(pods, |i| {
            let p = pod(&format!("py-{i:05}")).capacity(&resources);
            let test_ns = &test_ns;
            async move {
                p.create(test_ns).await;
            }
        })
        .await;
        let request = run_request(args.shape);
        create_concurrently(objects, |i| {
            let r = run(&format!("r-{i:05}")).requests(&request);
            let test_ns = &test_ns;
            async move {
                r.create(test_ns).await;
            }
        })
        .await;
        // Bound = out of Pending, by phase: a build from before the v1alpha1 rename writes the
        // Pod as status.podName, which this build's types do not read.
        Bound::start(Api::<Run>::namespaced(client.clone(), &ns), |r| {
            r.phase() != kruntimes::api::RunPhase::Pending
        })
    };
    let (events, events_watch) = Bound::start(
        Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), &ns),
        |e| e.reason.as_deref() == Some("Scheduled"),
    );
    eprintln!(
        "{} on {pods}: {pods} targets and {objects} objects created in {:.1}s",
        system.label(),
        started.elapsed().as_secs_f64()
    );
    // Let the bench's watch list everything before the scheduler starts.
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Drain.
    let requests_before = args.requests.then(|| api_requests(cp));
    let before_cp = [0.0, cpu_seconds(apiserver), cpu_seconds(etcd)];
    let scheduler = match system {
        System::KubeScheduler => Some(start_kube_scheduler(cp)),
        System::Kruntimes { binary, .. } => Some(start_kruntimes(binary, cp, &ns, args.workers)),
        System::PodBindingWrites | System::RunStatusWrites => None,
    };
    let writer = scheduler.is_none().then(|| {
        tokio::spawn(write_bindings(
            system.clone(),
            client.clone(),
            ns.clone(),
            pods,
        ))
    });
    let pids = Pids {
        // Without a scheduler, the bench: the writer and its watch together.
        scheduler: scheduler.as_ref().map_or(std::process::id(), Child::id),
        apiserver,
        etcd,
    };
    let perf = match (&args.perf, system) {
        (Some(dir), System::Kruntimes { label, .. }) => {
            Some(start_perf(dir, &format!("{label}-{pods}"), pids.scheduler))
        }
        _ => None,
    };
    let pprof = args
        .pprof
        .as_ref()
        .map(|dir| start_pprof(dir, &format!("{}-{pods}", system.label()), cp));
    let after = wait_bound(&bound, &events, objects, pids, "the drain").await;
    if let Some(writer) = writer {
        writer.await.expect("the writes");
    }
    if let Some(before) = requests_before {
        let after = api_requests(cp);
        eprintln!(
            "{} on {pods}: API requests per object during the drain",
            system.label()
        );
        for (key, n) in &after {
            let delta = n - before.get(key).copied().unwrap_or(0.0);
            if delta > 0.0 {
                eprintln!("  {:>8.3}  {key}", delta / objects as f64);
            }
        }
    }
    if let Some(perf) = perf {
        stop_perf(perf);
    }
    if let Some(mut pprof) = pprof {
        let status = pprof
            .wait()
            .expect("wait for kubectl get --raw /debug/pprof/profile");
        assert!(
            status.success(),
            "kubectl get --raw /debug/pprof/profile: {status}"
        );
    }
    let times = bound.times();
    let first = times.values().min().copied().unwrap();
    let last = times.values().max().copied().unwrap();
    let drain_wall = (last - first).as_secs_f64().max(1e-3);
    let mut rows = vec![Row {
        system: system.label().to_string(),
        pods,
        mode: "drain",
        objects,
        rate: objects as f64 / drain_wall,
        round: 0,
        latency: None,
        cpu: per_object(before_cp, after, objects),
    }];

    // Stream.
    if args.stream > 0 && scheduler.is_some() {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = pids.cpu();
        let created: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
        let start = Instant::now();
        let created_ref = &created;
        let (client, ns, test_ns) = (&client, &ns, &test_ns);
        let request = run_request(args.shape);
        futures::stream::iter(objects..objects + args.stream)
            .for_each_concurrent(STREAM_CONCURRENCY, |i| {
                let request = request.clone();
                async move {
                    let name = if system.places_runs() {
                        let r = run(&format!("r-{i:05}")).requests(&request);
                        r.create(test_ns).await.name_any()
                    } else {
                        create_pod(client, ns, i, args.shape).await
                    };
                    created_ref.lock().unwrap().insert(name, Instant::now());
                }
            })
            .await;
        let after = wait_bound(&bound, &events, objects + args.stream, pids, "the stream").await;
        let times = bound.times();
        let created = created.lock().unwrap().clone();
        let mut latency: Vec<Duration> = created
            .iter()
            .map(|(name, at)| times[name].saturating_duration_since(*at))
            .collect();
        latency.sort();
        let last = created.keys().map(|n| times[n]).max().unwrap();
        rows.push(Row {
            system: system.label().to_string(),
            pods,
            mode: "stream",
            objects: args.stream,
            rate: args.stream as f64 / (last - start).as_secs_f64().max(1e-3),
            round: 0,
            latency: Some((percentile(&latency, 50.0), percentile(&latency, 99.0))),
            cpu: per_object(before, after, args.stream),
        });
    }
    watch.abort();
    events_watch.abort();
    if let Some(mut scheduler) = scheduler {
        if let Ok(Some(status)) = scheduler.try_wait() {
            panic!("{} exited during the measurement: {status}", system.label());
        }
        let _ = scheduler.kill();
        let _ = scheduler.wait();
    }
    rows
}

/// Writes in flight at once without a scheduler: kruntimes' binding slots.
const WRITES_IN_FLIGHT: usize = 64;

/// What a scheduler writes once it has placed each object (see `--writes-only` at the top),
/// round-robin over the `targets`, [`WRITES_IN_FLIGHT`] at a time.
async fn write_bindings(system: System, client: Client, ns: String, targets: usize) {
    let node = |i: usize| format!("node-{:05}", i % targets);
    match system {
        System::PodBindingWrites => {
            let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
            let list = pods.list(&Default::default()).await.expect("list the Pods");
            let recorder = Recorder::new(
                client.clone(),
                Reporter {
                    controller: "default-scheduler".into(),
                    instance: Some("default-scheduler-bench".into()),
                },
            );
            let (pods, recorder, ns, node) = (&pods, &recorder, &ns, &node);
            futures::stream::iter(list.items.into_iter().enumerate())
                .for_each_concurrent(WRITES_IN_FLIGHT, |(i, p)| async move {
                    let (name, node) = (p.name_any(), node(i));
                    let binding = json!({
                        "apiVersion": "v1", "kind": "Binding",
                        "metadata": {"name": name},
                        "target": {"kind": "Node", "name": node},
                    });
                    pods.create_subresource::<_, serde_json::Value>(
                        "binding",
                        &name,
                        &PostParams::default(),
                        &binding,
                    )
                    .await
                    .unwrap_or_else(|e| panic!("bind Pod {name}: {e}"));
                    let scheduled = Event {
                        type_: EventType::Normal,
                        reason: "Scheduled".into(),
                        action: "Binding".into(),
                        note: Some(format!("Successfully assigned {ns}/{name} to {node}")),
                        secondary: None,
                    };
                    recorder
                        .publish(&scheduled, &p.object_ref(&()))
                        .await
                        .unwrap_or_else(|e| panic!("the Scheduled Event of Pod {name}: {e}"));
                })
                .await;
        }
        System::RunStatusWrites => {
            let runs: Api<Run> = Api::namespaced(client.clone(), &ns);
            let list = runs.list(&Default::default()).await.expect("list the Runs");
            let mut pods: Vec<(String, String)> = Api::<Pod>::namespaced(client.clone(), &ns)
                .list(&Default::default())
                .await
                .expect("list the Runtime Pods")
                .items
                .iter()
                .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
                .collect();
            pods.sort();
            let events = RunEvents::new(
                client.clone(),
                kruntimes::telemetry::events::SCHEDULER,
                None,
            );
            let (client, ns, pods, events) = (&client, &ns, &pods, &events);
            futures::stream::iter(list.items.into_iter().enumerate())
                .for_each_concurrent(WRITES_IN_FLIGHT, |(i, run)| async move {
                    let (pod, pod_uid) = &pods[i % pods.len()];
                    let mut status = run.status.clone().unwrap_or_default();
                    status::set_bound(&mut status, pod, pod_uid, &Time(jiff::Timestamp::now()));
                    let patch = status_patch::status_patch(&run, &status)
                        .expect("binding a Pending Run changes its status");
                    status_patch::send(client, ns, &run.name_any(), &patch)
                        .await
                        .unwrap_or_else(|e| panic!("bind Run {}: {e}", run.name_any()));
                    events.emit_once(
                        &run,
                        EventType::Normal,
                        kruntimes::telemetry::events::reasons::SCHEDULED,
                        "Binding",
                        format!("Assigned to Runtime Pod {pod}"),
                    );
                })
                .await;
        }
        System::KubeScheduler | System::Kruntimes { .. } => {
            unreachable!("a scheduler makes its own writes")
        }
    }
}

/// `perf record` of `pid` (sampled on CPU time, with frame-pointer call graphs: give
/// `--kruntimes` a build made with `RUSTFLAGS="-C force-frame-pointers=yes"` to get whole
/// stacks) into `dir/<name>.data`, until [`stop_perf`].
fn start_perf(dir: &Path, name: &str, pid: u32) -> Child {
    std::fs::create_dir_all(dir).expect("create the perf directory");
    let out = dir.join(format!("{name}.data"));
    Command::new("perf")
        .args([
            "record",
            "-e",
            "cpu-clock",
            "-F",
            "999",
            "--call-graph=fp",
            "-p",
            &pid.to_string(),
            "-o",
        ])
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start perf record (apt-get install linux-perf)")
}

/// kube-apiserver's CPU profile (`/debug/pprof/profile`, on by default) of the next
/// [`PPROF_SECONDS`], written to `dir/<name>.pprof` by the control plane's kubectl.
fn start_pprof(dir: &Path, name: &str, cp: &support::ControlPlane) -> Child {
    std::fs::create_dir_all(dir).expect("create the pprof directory");
    let out = std::fs::File::create(dir.join(format!("{name}.pprof"))).expect("create the profile");
    Command::new(cp.bin_dir.join("kubectl"))
        .env("KUBECONFIG", &cp.kubeconfig)
        .args([
            "get",
            "--raw",
            &format!("/debug/pprof/profile?seconds={PPROF_SECONDS}"),
        ])
        .stdin(Stdio::null())
        .stdout(out)
        .spawn()
        .expect("start kubectl get --raw /debug/pprof/profile")
}

/// Shorter than the shortest drain measured (2,000 Runs at about 700/s), so every profile
/// sees only binding.
const PPROF_SECONDS: u32 = 2;

fn stop_perf(mut perf: Child) {
    // SIGINT makes perf write its data.
    let _ = kruntimes::util::process::signal(perf.id(), kruntimes::util::process::Signal::Int);
    let _ = perf.wait();
}

/// Runs `create(i)` for `0..n`, 16 at a time.
async fn create_concurrently<F, Fut, T>(n: usize, create: F)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = T>,
{
    futures::stream::iter(0..n)
        .for_each_concurrent(STREAM_CONCURRENCY, |i| {
            let fut = create(i);
            async move {
                fut.await;
            }
        })
        .await;
}

/// A Runtime Pod's capacity annotations.
fn shape_resources(shape: Shape, cap: u64) -> Vec<(&'static str, u64)> {
    match shape {
        Shape::Gpu => vec![("runs", cap), ("example.com/gpu", cap)],
        Shape::Native => vec![("runs", cap)],
    }
}

fn run_request(shape: Shape) -> Vec<(&'static str, u64)> {
    match shape {
        Shape::Gpu => vec![("runs", 1), ("example.com/gpu", 1)],
        Shape::Native => vec![("runs", 1)],
    }
}

/// Ready Nodes with room for `cap` Pods of the shape each, untainted.
async fn create_nodes(client: &Client, n: usize, cap: u64, shape: Shape) {
    let nodes: Api<Node> = Api::all(client.clone());
    create_concurrently(n, |i| {
        let nodes = nodes.clone();
        async move {
            let name = format!("node-{i:05}");
            let node: Node = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            }))
            .unwrap();
            nodes
                .create(&PostParams::default(), &node)
                .await
                .unwrap_or_else(|e| panic!("create node {name}: {e}"));
            let (cpu, gpu) = match shape {
                Shape::Gpu => (1000, cap),
                Shape::Native => (cap, 0),
            };
            let resources = json!({
                "cpu": cpu.to_string(),
                "memory": "1000Gi",
                "pods": (cap + 10).max(110).to_string(),
                "example.com/gpu": gpu.to_string(),
            });
            let now = jiff::Timestamp::now().to_string();
            let status = json!({"status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [{
                    "type": "Ready", "status": "True", "reason": "KubeletReady",
                    "lastHeartbeatTime": now, "lastTransitionTime": now,
                }],
            }});
            nodes
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .unwrap_or_else(|e| panic!("status of node {name}: {e}"));
            // The TaintNodesByCondition admission adds node.kubernetes.io/not-ready at
            // creation; no node lifecycle controller runs here to take it away.
            nodes
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(&json!({"spec": {"taints": null}})),
                )
                .await
                .unwrap_or_else(|e| panic!("untaint node {name}: {e}"));
        }
    })
    .await;
}

/// Creates Pod `p-<i>` with the shape's requests for the default scheduler; returns its name.
async fn create_pod(client: &Client, ns: &str, i: usize, shape: Shape) -> String {
    let name = format!("p-{i:05}");
    let resources = match shape {
        Shape::Gpu => json!({
            "requests": {"example.com/gpu": "1"},
            "limits": {"example.com/gpu": "1"},
        }),
        Shape::Native => json!({"requests": {"cpu": "1"}}),
    };
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "bench.invalid/c", "resources": resources}]},
    }))
    .unwrap();
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("create pod {name}: {e}"));
    name
}

fn log_file(cp: &support::ControlPlane, name: &str) -> std::fs::File {
    std::fs::File::create(cp.dir.join(name)).expect("a scheduler log file")
}

/// kube-scheduler of the same release with the admin kubeconfig, no leader election, and
/// client-side rate limits raised out of the way (kruntimes has none).
fn start_kube_scheduler(cp: &support::ControlPlane) -> Child {
    let config = cp.dir.join("kube-scheduler.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\n\
             kind: KubeSchedulerConfiguration\n\
             clientConnection:\n  kubeconfig: {}\n  qps: 5000\n  burst: 10000\n\
             leaderElection:\n  leaderElect: false\n",
            cp.kubeconfig.display()
        ),
    )
    .expect("write the kube-scheduler config");
    let log = log_file(cp, "kube-scheduler.log");
    Command::new(cp.bin_dir.join("kube-scheduler"))
        .arg(format!("--config={}", config.display()))
        .arg("--secure-port=0")
        .arg("--v=0")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start kube-scheduler")
}

/// `scheduler run` of `binary` watching `ns`, no leader election, logging as a user's would
/// (the default level).
fn start_kruntimes(binary: &Path, cp: &support::ControlPlane, ns: &str, workers: u16) -> Child {
    let log = log_file(cp, "kruntimes.log");
    Command::new(binary)
        .env("KUBECONFIG", &cp.kubeconfig)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .args(["scheduler", "run", "--watch-namespace", ns])
        .arg(format!("--workers={workers}"))
        .arg("--metrics-bind-address=0")
        .arg("--health-probe-bind-address=0")
        .arg("--leader-elect=false")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start kubectl-kruntimes scheduler run")
}
