//! Cost of runtimed's local admission: `try_reserve` + `release` on the pure
//! [`AdmissionCache`], and one [`plan`] pass over a Pod's assigned Runs (what the agent
//! computes on every Run or Pod event). No API server, no processes.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kruntimes::api::{Resources, Run};
use kruntimes::runtimed::Identity;
use kruntimes::runtimed::admission::AdmissionCache;
use kruntimes::runtimed::plan::{Admit, Records, plan};
use kruntimes::testing::{NS, run};

fn request() -> Resources {
    Resources::from_iter([("runs", 1), ("example.com/gpu", 1), ("example.com/fpga", 2)])
}

/// A cache with `held` reservations already in place and room for one more.
fn cache_holding(held: usize) -> AdmissionCache {
    let mut cache = AdmissionCache::new();
    let room = held as u64 + 1;
    cache.set_capacity(Some(Resources::from_iter([
        ("runs", room),
        ("example.com/gpu", room),
        ("example.com/fpga", 2 * room),
    ])));
    for i in 0..held {
        cache.try_reserve(&format!("held-{i}"), &request()).unwrap();
    }
    cache
}

fn reserve_release(c: &mut Criterion) {
    let mut group = c.benchmark_group("admission/reserve_then_release");
    for held in [0usize, 100, 1000] {
        group.bench_with_input(BenchmarkId::from_parameter(held), &held, |b, &held| {
            let mut cache = cache_holding(held);
            let req = request();
            b.iter(|| {
                cache
                    .try_reserve(black_box("uid-new"), black_box(&req))
                    .unwrap();
                black_box(cache.release(black_box("uid-new")));
            });
        });
    }
    group.finish();

    c.bench_function("admission/refused_reserve_on_a_full_pod", |b| {
        let mut cache = cache_holding(100);
        cache.try_reserve("filler", &request()).unwrap();
        let req = request();
        b.iter(|| {
            black_box(
                cache
                    .try_reserve(black_box("uid-new"), black_box(&req))
                    .is_err(),
            )
        });
    });
}

/// `n` Runs of {gpu: 1} bound to `rt-0`, created one second apart.
fn assigned_runs(n: usize) -> Vec<Arc<Run>> {
    (0..n)
        .map(|i| {
            let r = run(&format!("run-{i:04}"))
                .runtime("rt")
                .requests(&[("example.com/gpu", 1)])
                .created(1_767_225_600 + i as i64)
                .on("rt-0")
                .pod_uid("pod-uid");
            Arc::new(r.build())
        })
        .collect()
}

fn planning(c: &mut Criterion) {
    let me = Identity {
        pod_name: "rt-0".into(),
        namespace: NS.into(),
        pod_uid: "pod-uid".into(),
    };
    let mut group = c.benchmark_group("admission/plan_over_queued_runs");
    for n in [10usize, 200, 1000] {
        let runs = assigned_runs(n);
        group.bench_with_input(BenchmarkId::from_parameter(n), &runs, |b, runs| {
            b.iter(|| {
                // Capacity for 4 of them: the rest are checked and left waiting.
                let mut records = Records::new();
                records.set_capacity(Some(Resources::from_iter([
                    ("runs", 4),
                    ("example.com/gpu", 4),
                ])));
                let p = plan(
                    runs,
                    &me,
                    &mut records,
                    Admit {
                        claiming: true,
                        functions: false,
                        now: jiff::Timestamp::now(),
                    },
                );
                black_box(p.claims.len())
            });
        });
    }
    group.finish();
}

criterion_group!(benches, reserve_release, planning);
criterion_main!(benches);
