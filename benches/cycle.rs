//! One full scheduling cycle (snapshot → PreFilter → Filter → Score → decision) under the
//! same `SharedCache` the controller uses, at 100, 1 000 and 5 000 Runtime Pods with 10 active
//! Runs each, with and without a required-affinity term; plus 20 active Runs per Pod at 1 000
//! Pods to show that the cost does not grow with active Runs, and Reserve + release at 5 000.
//!
//! Run: `cargo bench --bench cycle -- --warm-up-time 1 --measurement-time 3`

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, MicroTime, ObjectMeta};
use kruntimes::api::{
    AffinityTerms, LABEL_RUNTIME, LABEL_RUNTIME_POD, Run, RunAffinity, RunAffinityTerm, RunPhase,
    RunResources, RunSpec, RunStatus,
};
use kruntimes::scheduler::framework::{Decision, ScheduleOutcome, SharedCache};

const NS: &str = "bench";
const RUNTIME: &str = "python";
const NOW: Timestamp = Timestamp::constant(1_700_000_000, 0);
/// Distinct cohorts: a required-affinity term finds its targets on 1 Pod in 50.
const COHORTS: usize = 50;

fn map(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            uid: Some(format!("uid-{name}")),
            labels: Some(map(&[
                (LABEL_RUNTIME, RUNTIME.into()),
                (LABEL_RUNTIME_POD, name.into()),
            ])),
            annotations: Some(map(&[
                ("kruntimes.io/capacity.runs", "64".into()),
                ("kruntimes.io/capacity.example.com/gpu", "32".into()),
            ])),
            ..Default::default()
        },
        spec: None,
        status: Some(PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

fn lease(name: &str) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(format!("uid-{name}")),
            renew_time: Some(MicroTime(NOW - SignedDuration::from_secs(5))),
            lease_duration_seconds: Some(40),
            ..Default::default()
        }),
    }
}

fn run(name: &str, labels: BTreeMap<String, String>, affinity: Option<RunAffinity>) -> Run {
    let mut run = Run::new(
        name,
        RunSpec {
            runtime: RUNTIME.into(),
            resources: Some(RunResources {
                requests: BTreeMap::from([
                    ("runs".to_string(), Quantity("1".into())),
                    ("example.com/gpu".to_string(), Quantity("1".into())),
                ]),
            }),
            affinity,
            mode: None,
        },
    );
    run.metadata.namespace = Some(NS.into());
    run.metadata.uid = Some(format!("uid-{name}"));
    run.metadata.labels = Some(labels);
    run
}

/// `pods` Runtime Pods, each with `per_pod` active Runs of {runs: 1, gpu: 1}. Pod i's Runs
/// carry `cohort: c<i % COHORTS>` and an `index` label of their own.
fn cluster(pods: usize, per_pod: usize) -> SharedCache {
    let shared = SharedCache::new(kruntimes::scheduler::plugins::registry());
    for i in 0..pods {
        let name = format!("pod-{i:05}");
        shared.apply(&pod(&name), NOW);
        shared.apply(&lease(&name), NOW);
        for j in 0..per_pod {
            let labels = map(&[
                ("cohort", format!("c{}", i % COHORTS)),
                ("index", format!("{j}")),
            ]);
            let mut r = run(&format!("active-{i}-{j}"), labels, None);
            r.status = Some(RunStatus {
                phase: Some(RunPhase::Running),
                pod_name: Some(name.clone()),
                ..Default::default()
            });
            shared.apply(&r, NOW);
        }
    }
    shared
}

/// The Run to place, optionally requiring co-location with cohort c7.
fn pending(affinity: bool) -> Run {
    let affinity = affinity.then(|| RunAffinity {
        run_affinity: Some(AffinityTerms {
            required: vec![RunAffinityTerm {
                label_selector: LabelSelector {
                    match_labels: Some(map(&[("cohort", "c7".into())])),
                    match_expressions: None,
                },
                topology_key: LABEL_RUNTIME_POD.into(),
            }],
            preferred: Vec::new(),
        }),
        run_anti_affinity: None,
    });
    run("new", map(&[("cohort", "c7".into())]), affinity)
}

fn bench_cycle(c: &mut Criterion) {
    let mut group = c.benchmark_group("cycle");
    for pods in [100, 1_000, 5_000] {
        let shared = cluster(pods, 10);
        for (label, affinity) in [("no_affinity", false), ("required_affinity", true)] {
            let r = pending(affinity);
            assert!(matches!(
                shared.plan(&r, NOW),
                Ok(Decision::Schedule { .. })
            ));
            group.bench_with_input(BenchmarkId::new(label, pods), &r, |b, r| {
                b.iter(|| black_box(shared.plan(black_box(r), NOW)))
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("cycle_active_runs_per_pod_1000_pods");
    for per_pod in [10, 20] {
        let shared = cluster(1_000, per_pod);
        let r = pending(false);
        group.bench_with_input(BenchmarkId::from_parameter(per_pod), &r, |b, r| {
            b.iter(|| black_box(shared.plan(black_box(r), NOW)))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("schedule_reserve_release");
    let shared = cluster(5_000, 10);
    let r = pending(false);
    group.bench_function("5000", |b| {
        b.iter(|| {
            let outcome = shared.schedule(black_box(&r), NOW);
            assert!(matches!(outcome, ScheduleOutcome::Reserved { .. }));
            shared.release(NS, "uid-new");
        })
    });
    group.finish();
}

criterion_group!(benches, bench_cycle);
criterion_main!(benches);
