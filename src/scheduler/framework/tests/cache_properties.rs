//! Property tests of the scheduler cache: no event sequence overcommits or miscounts a Pod,
//! the assumed→actual handoff is exact, and the decision does not depend on event order.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use proptest::prelude::*;

use crate::api::Run;
use crate::scheduler::framework::*;
use crate::testing::*;

fn registry() -> Registry {
    crate::scheduler::plugins::registry()
}

// ----- properties -----------------------------------------------------------------------

const POD_NAMES: [&str; 3] = ["p1", "p2", "p3"];
const RESOURCES: [&str; 2] = ["runs", "example.com/gpu"];

#[derive(Debug, Clone)]
enum Event {
    /// One pop of the queue: the cycle of whichever Run is due.
    Cycle,
    BindObserved(usize),
    PendingObserved(usize),
    TerminalObserved(usize),
    Deleted(usize),
    Release(usize),
}

fn event() -> impl Strategy<Value = Event> {
    let i = 0usize..6;
    prop_oneof![
        3 => Just(Event::Cycle),
        2 => i.clone().prop_map(Event::BindObserved),
        1 => i.clone().prop_map(Event::PendingObserved),
        1 => i.clone().prop_map(Event::TerminalObserved),
        1 => i.clone().prop_map(Event::Deleted),
        1 => i.prop_map(Event::Release),
    ]
}

#[derive(Debug, Clone, Default)]
struct RunModel {
    assumed: Option<String>,
    active: Option<String>,
    gone: bool,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// (a) no overcommit and (c) exact assumed→actual handoff, over any event sequence.
    #[test]
    fn no_event_sequence_overcommits_or_miscounts_a_pod(
        capacities in proptest::collection::vec((0u64..4, 0u64..3), 3),
        requests in proptest::collection::vec((0u64..3, 0u64..2), 6),
        events in proptest::collection::vec(event(), 0..40),
    ) {
        let pods: Vec<PodBuilder> = POD_NAMES
            .iter()
            .zip(&capacities)
            .map(|(n, (runs, gpu))| pod(n).capacity(&[("runs", *runs), ("example.com/gpu", *gpu)]))
            .collect();
        let runs: Vec<RunBuilder> = requests
            .iter()
            .enumerate()
            .map(|(i, (r, g))| run(&format!("r{i}")).requests(&[("runs", *r), ("example.com/gpu", *g)]))
            .collect();
        let mut state = World::new().pods(pods).runs(runs.clone()).cache();
        let mut model = vec![RunModel::default(); runs.len()];
        let registry = registry();

        for event in events {
            match event {
                Event::Cycle => {
                    // Every event happens at NOW: backoffs never expire, so a pop is always
                    // the cycle of a Run that is due.
                    if let Some(scheduled) = state.schedule_next(&registry, NOW) {
                        let name = scheduled.run.metadata.name.clone().unwrap();
                        let i: usize = name[1..].parse().unwrap();
                        let m = &mut model[i];
                        prop_assert!(m.assumed.is_none() && m.active.is_none() && !m.gone, "{} was cycled while not waiting", name);
                        match &scheduled.outcome {
                            ScheduleOutcome::Reserved { pod, .. } => m.assumed = Some(pod.clone()),
                            ScheduleOutcome::Unschedulable(_) => {}
                            other => prop_assert!(false, "{other:?}"),
                        }
                    }
                }
                Event::BindObserved(i) => {
                    if let Some(p) = model[i].assumed.take() {
                        state.apply_run(&runs[i].clone().on(&p).build(), NOW);
                        model[i].active = Some(p);
                    }
                }
                Event::PendingObserved(i) if !model[i].gone && model[i].active.is_none() => {
                    state.apply_run(&runs[i].build(), NOW);
                }
                Event::TerminalObserved(i) if !model[i].gone => {
                    state.apply_run(&runs[i].clone().succeeded().build(), NOW);
                    model[i] = RunModel { gone: true, ..RunModel::default() };
                }
                Event::Deleted(i) if !model[i].gone => {
                    state.delete_run(NS, &runs[i].key().uid, NOW);
                    model[i] = RunModel { gone: true, ..RunModel::default() };
                }
                Event::Release(i) => {
                    let released = state.release(NS, &runs[i].key().uid, NOW);
                    prop_assert_eq!(released, model[i].assumed.take().is_some());
                }
                _ => {}
            }

            let snapshot = state.snapshot(NS, RUNTIME, NOW);
            for (p, (runs_cap, gpu_cap)) in POD_NAMES.iter().zip(&capacities) {
                let view = snapshot.pod(p).unwrap();
                for (resource, cap) in RESOURCES.iter().zip([runs_cap, gpu_cap]) {
                    let expected: u64 = model
                        .iter()
                        .zip(&runs)
                        .filter(|(m, _)| m.active.as_deref() == Some(p) || m.assumed.as_deref() == Some(p))
                        .map(|(_, r)| r.assumption(p).request().get(resource))
                        .sum();
                    prop_assert_eq!(view.effective(resource), expected, "{} {}", p, resource);
                    prop_assert!(expected <= *cap, "{} {} overcommitted: {} > {}", p, resource, expected, cap);
                }
            }
            for (m, r) in model.iter().zip(&runs) {
                prop_assert_eq!(state.assumed().get(&r.key()).map(|a| a.pod.clone()), m.assumed.clone());
            }
            // The queue holds exactly the Pending Runs without an assumption, in order.
            let waiting: Vec<String> = model
                .iter()
                .enumerate()
                .filter(|(_, m)| !m.gone && m.active.is_none() && m.assumed.is_none())
                .map(|(i, _)| runs[i].key().uid)
                .collect();
            let queued: Vec<String> = state
                .queue()
                .members(&ScopeRef::new(NS, RUNTIME))
                .map(|(o, _)| o.key().uid.clone())
                .collect();
            prop_assert_eq!(queued, waiting);
            prop_assert_eq!(state.queue().invariants(), Ok(()));
        }
    }
}

#[derive(Debug, Clone)]
struct PodCase {
    runs: u64,
    gpu: Option<u64>,
    ready: bool,
    stale: bool,
}

#[derive(Debug, Clone)]
struct ActiveCase {
    pod: usize,
    runs: u64,
    gpu: u64,
    label: usize,
    anti: Option<usize>,
}

#[derive(Debug, Clone)]
struct PendingCase {
    runs: u64,
    gpu: u64,
    label: usize,
    requires: Option<usize>,
    anti: Option<usize>,
    prefers: Option<(i32, usize)>,
    avoids: Option<(i32, usize)>,
}

const LABELS: [&str; 3] = ["a", "b", "c"];

fn pod_case() -> impl Strategy<Value = PodCase> {
    (
        0u64..6,
        proptest::option::of(0u64..3),
        proptest::bool::weighted(0.8),
        proptest::bool::weighted(0.1),
    )
        .prop_map(|(runs, gpu, ready, stale)| PodCase {
            runs,
            gpu,
            ready,
            stale,
        })
}

fn active_case(pods: usize) -> impl Strategy<Value = ActiveCase> {
    (
        0..pods,
        0u64..2,
        0u64..2,
        0..3usize,
        proptest::option::weighted(0.2, 0..3usize),
    )
        .prop_map(|(pod, runs, gpu, label, anti)| ActiveCase {
            pod,
            runs,
            gpu,
            label,
            anti,
        })
}

fn pending_case() -> impl Strategy<Value = PendingCase> {
    (
        0u64..3,
        0u64..2,
        0..3usize,
        proptest::option::weighted(0.3, 0..3usize),
        proptest::option::weighted(0.2, 0..3usize),
        proptest::option::weighted(0.4, (1i32..=100, 0..3usize)),
        proptest::option::weighted(0.3, (1i32..=100, 0..3usize)),
    )
        .prop_map(
            |(runs, gpu, label, requires, anti, prefers, avoids)| PendingCase {
                runs,
                gpu,
                label,
                requires,
                anti,
                prefers,
                avoids,
            },
        )
}

fn world_case() -> impl Strategy<Value = (Vec<PodCase>, Vec<ActiveCase>, PendingCase)> {
    (1usize..7).prop_flat_map(|n| {
        (
            proptest::collection::vec(pod_case(), n),
            proptest::collection::vec(active_case(n), 0..12),
            pending_case(),
        )
    })
}

/// Pods, Leases and Runs as objects, plus the pending Run.
fn objects(pods: &[PodCase], active: &[ActiveCase], pending: &PendingCase) -> (Vec<Obj>, Run) {
    let mut objs = Vec::new();
    for (i, p) in pods.iter().enumerate() {
        let mut caps = vec![("runs", p.runs)];
        if let Some(g) = p.gpu {
            caps.push(("example.com/gpu", g));
        }
        let mut b = pod(&format!("p{i}")).capacity(&caps);
        if !p.ready {
            b = b.not_ready();
        }
        if p.stale {
            b = b.stale();
        }
        objs.push(Obj::Pod(Box::new(b.build())));
        objs.push(Obj::Lease(Box::new(b.build_lease().unwrap())));
    }
    for (i, a) in active.iter().enumerate() {
        let mut r = run(&format!("x{i}"))
            .requests(&[("runs", a.runs), ("example.com/gpu", a.gpu)])
            .labels(&[("cohort", LABELS[a.label])]);
        if let Some(l) = a.anti {
            r = r.anti(&[("cohort", LABELS[l])]);
        }
        objs.push(Obj::Run(Box::new(r.on(&format!("p{}", a.pod)).build())));
    }
    let mut r = run("new")
        .requests(&[("runs", pending.runs), ("example.com/gpu", pending.gpu)])
        .labels(&[("cohort", LABELS[pending.label])]);
    if let Some(l) = pending.requires {
        r = r.requires(&[("cohort", LABELS[l])]);
    }
    if let Some(l) = pending.anti {
        r = r.anti(&[("cohort", LABELS[l])]);
    }
    if let Some((w, l)) = pending.prefers {
        r = r.prefers(w, &[("cohort", LABELS[l])]);
    }
    if let Some((w, l)) = pending.avoids {
        r = r.avoids(w, &[("cohort", LABELS[l])]);
    }
    let pending_run = r.build();
    objs.push(Obj::Run(Box::new(pending_run.clone())));
    (objs, pending_run)
}

#[derive(Debug, Clone)]
enum Obj {
    Pod(Box<Pod>),
    Lease(Box<Lease>),
    Run(Box<Run>),
}

fn state_of(objs: &[Obj]) -> SchedulerCache {
    let mut state = SchedulerCache::new();
    for o in objs {
        match o {
            Obj::Pod(p) => {
                state.apply(p.as_ref(), NOW);
            }
            Obj::Lease(l) => {
                state.apply(l.as_ref(), NOW);
            }
            Obj::Run(r) => {
                state.apply_run(r, NOW);
            }
        }
    }
    state
}

fn shuffled() -> impl Strategy<Value = (Vec<Obj>, Vec<Obj>, Run)> {
    world_case().prop_flat_map(|(pods, active, pending)| {
        let (objs, run) = objects(&pods, &active, &pending);
        (
            Just(objs.clone()).prop_shuffle(),
            Just(objs).prop_shuffle(),
            Just(run),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// (b) the decision does not depend on the order Pods, Leases and Runs were applied.
    #[test]
    fn the_decision_does_not_depend_on_event_order((first, second, pending) in shuffled()) {
        let registry = registry();
        let a = state_of(&first).plan(&registry, &pending, NOW).unwrap();
        let b = state_of(&second).plan(&registry, &pending, NOW).unwrap();
        prop_assert_eq!(a, b);
    }

    /// (d) every normalized score is within 0..=100 and the pick has the highest total.
    #[test]
    fn every_normalized_score_is_within_bounds((objs, _, pending) in shuffled()) {
        let state = state_of(&objs);
        let snapshot = state.snapshot(NS, RUNTIME, NOW);
        let eval = crate::scheduler::framework::evaluate(&snapshot, &registry(), &state.queued(&pending)).unwrap();
        let mut best = None;
        for i in 0..eval.pods().len() {
            for s in eval.scores(i) {
                prop_assert!((0..=100).contains(&s.normalized), "{:?}", s);
            }
            if let Some(total) = eval.total(i) {
                prop_assert_eq!(total, eval.scores(i).iter().map(|s| s.weighted()).sum::<i64>());
                best = best.max(Some(total));
            }
        }
        match eval.chosen_index() {
            Some(i) => prop_assert_eq!(eval.total(i), best),
            None => prop_assert!(best.is_none()),
        }
    }
}
