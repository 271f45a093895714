//! One full scheduling cycle (snapshot → PreFilter → Filter → Score → decision) under the
//! same `SharedCache` the controller uses, at 100, 1 000 and 5 000 Runtime Pods with 10 active
//! Runs each, with and without a required-affinity term; plus 20 active Runs per Pod at 1 000
//! Pods to show that the cost does not grow with active Runs, and pop + cycle + Reserve + release
//! at 5 000.
//!
//! Run: `cargo bench --bench cycle -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kruntimes::api::Run;
use kruntimes::scheduler::framework::{Decision, ScheduleOutcome, SharedCache};
use kruntimes::testing::{NOW, NS, pod, run};

/// Distinct cohorts: a required-affinity term finds its targets on 1 Pod in 50.
const COHORTS: usize = 50;
/// What every Run asks for.
const REQUEST: &[(&str, u64)] = &[("runs", 1), ("example.com/gpu", 1)];

/// `pods` Runtime Pods, each with `per_pod` active Runs of {runs: 1, gpu: 1}. Pod i's Runs
/// carry `cohort: c<i % COHORTS>` and an `index` label of their own.
fn cluster(pods: usize, per_pod: usize) -> SharedCache {
    let shared = SharedCache::new(kruntimes::scheduler::plugins::registry());
    let mut cache = shared.lock();
    for i in 0..pods {
        let name = format!("pod-{i:05}");
        let p = pod(&name).capacity(&[("runs", 64), ("example.com/gpu", 32)]);
        cache.apply(&p.build(), NOW);
        cache.apply(&p.build_lease().expect("a fresh heartbeat"), NOW);
        let cohort = format!("c{}", i % COHORTS);
        for j in 0..per_pod {
            let r = run(&format!("active-{i}-{j}"))
                .requests(REQUEST)
                .labels(&[("cohort", &cohort), ("index", &j.to_string())])
                .on(&name)
                .running();
            cache.apply(&r.build(), NOW);
        }
    }
    drop(cache);
    shared
}

/// The Run to place, optionally requiring co-location with cohort c7.
fn pending(affinity: bool) -> Run {
    let r = run("new").requests(REQUEST).labels(&[("cohort", "c7")]);
    let r = if affinity {
        r.requires(&[("cohort", "c7")])
    } else {
        r
    };
    r.build()
}

fn bench_cycle(c: &mut Criterion) {
    let mut group = c.benchmark_group("cycle");
    for pods in [100, 1_000, 5_000] {
        let shared = cluster(pods, 10);
        for (label, affinity) in [("no_affinity", false), ("required_affinity", true)] {
            let r = pending(affinity);
            assert!(matches!(
                shared.lock().plan(shared.registry(), &r, NOW),
                Ok(Decision::Schedule { .. })
            ));
            group.bench_with_input(BenchmarkId::new(label, pods), &r, |b, r| {
                b.iter(|| black_box(shared.lock().plan(shared.registry(), black_box(r), NOW)))
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("cycle_active_runs_per_pod_1000_pods");
    for per_pod in [10, 20] {
        let shared = cluster(1_000, per_pod);
        let r = pending(false);
        group.bench_with_input(BenchmarkId::from_parameter(per_pod), &r, |b, r| {
            b.iter(|| black_box(shared.lock().plan(shared.registry(), black_box(r), NOW)))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("schedule_reserve_release");
    let shared = cluster(5_000, 10);
    shared.lock().apply(&pending(false), NOW);
    group.bench_function("5000", |b| {
        b.iter(|| {
            // The released Run is queued again at once: each pop is its cycle.
            let scheduled = shared
                .lock()
                .schedule_next(shared.registry(), NOW)
                .expect("the Run is queued");
            assert!(matches!(
                scheduled.outcome,
                ScheduleOutcome::Reserved { .. }
            ));
            shared.lock().release(NS, "uid-new", NOW);
        })
    });
    group.finish();
}

criterion_group!(benches, bench_cycle);
criterion_main!(benches);
