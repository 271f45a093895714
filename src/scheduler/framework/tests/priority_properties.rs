//! Property tests of priority: whatever the Pods, the Runs on them and their priorities,
//! a preemption only ever takes Runs of strictly lower priority (Running ones only of a
//! preemptible class), and taking exactly its victims lets the preemptor fit where it is
//! nominated; the same state and instant give the same plan (explain = scheduler); a Run
//! placed while a higher-priority Run is nominated never takes that room.

use proptest::prelude::*;

use crate::testing::*;

const POD_NAMES: [&str; 3] = ["p1", "p2", "p3"];

#[derive(Debug, Clone)]
struct Active {
    pod: usize,
    runs: u64,
    priority: i32,
    running: bool,
    preemptible: bool,
}

fn active() -> impl Strategy<Value = Active> {
    (
        0..POD_NAMES.len(),
        1..3u64,
        0..4i32,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(pod, runs, priority, running, preemptible)| Active {
            pod,
            runs,
            priority: priority * 100,
            running,
            preemptible,
        })
}

fn world(capacities: &[u64], actives: &[Active]) -> World {
    World::new()
        .classes([
            priority_class("batch", 0).preemptible(),
            priority_class("urgent", 1000),
        ])
        .pods(
            capacities
                .iter()
                .enumerate()
                .map(|(i, c)| pod(POD_NAMES[i]).capacity(&[("runs", *c)])),
        )
        .runs(actives.iter().enumerate().map(|(i, a)| {
            let r = run(&format!("a{i}"))
                .requests(&[("runs", a.runs)])
                .on(POD_NAMES[a.pod])
                .priority(a.priority);
            let r = if a.preemptible {
                r.priority_class("batch")
            } else {
                r
            };
            if a.running { r.running() } else { r }
        }))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn victims_are_strictly_lower_and_exactly_enough(
        capacities in proptest::collection::vec(1..5u64, 1..=3),
        actives in proptest::collection::vec(active(), 0..8),
        request in 1..5u64,
        priority in 0..12i32,
    ) {
        let actives: Vec<Active> = actives.into_iter().filter(|a| a.pod < capacities.len()).collect();
        let cache = world(&capacities, &actives).cache();
        let preemptor = run("u").requests(&[("runs", request)]).priority(priority * 100).build();
        let registry = crate::scheduler::plugins::registry();
        let plan = cache.preemption_plan(&registry, &preemptor, NOW);
        prop_assert_eq!(&plan, &cache.preemption_plan(&registry, &preemptor, NOW), "deterministic");
        let Some(plan) = plan else { return Ok(()) };
        let pod = POD_NAMES.iter().position(|p| *p == plan.pod).unwrap();
        let mut used: u64 = actives.iter().filter(|a| a.pod == pod).map(|a| a.runs).sum();
        for v in &plan.victims {
            let i: usize = v.name[1..].parse().unwrap();
            let a = &actives[i];
            prop_assert_eq!(a.pod, pod);
            prop_assert!(a.priority < priority * 100, "victim {:?} not lower than {}", a, priority * 100);
            prop_assert!(!a.running || a.preemptible, "a Running Run of a plain class: {:?}", a);
            prop_assert_eq!(v.admitted, a.running);
            used -= a.runs;
        }
        if !plan.victims.is_empty() {
            prop_assert!(used + request <= capacities[pod], "victims do not make room");
            // Fewest: giving any victim back leaves no room.
            for v in &plan.victims {
                let i: usize = v.name[1..].parse().unwrap();
                prop_assert!(used + actives[i].runs + request > capacities[pod], "{} was not needed", v.name);
            }
        }
    }
}
