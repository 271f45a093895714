//! Property tests of priority: whatever the Pods, the Runs on them and their priorities,
//! a preemption only ever takes Runs of strictly lower priority (Running ones only of a
//! preemptible class), and taking exactly its victims lets the preemptor fit where it is
//! nominated; conversely a preemptor that fits nowhere gets victims whenever removing the
//! Runs it may take would make room somewhere, and nothing when it fits now; the plan does
//! not depend on the order the cache learnt the world in (explain = scheduler).
//!
//! [`check`] states all of it against a model of the test world; the mutant tests show it
//! rejects a `preemption_plan` that always says `None` and a victim of equal priority.

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};

use crate::scheduler::framework::{Preemption, Victim};
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

/// One generated case: Pod capacities, the active Runs on those Pods, and the preemptor's
/// `runs` request and recorded priority (0, 100, …, 1100: below, equal to and above the
/// actives' 0..=300).
fn case() -> impl Strategy<Value = (Vec<u64>, Vec<Active>, u64, i32)> {
    (
        proptest::collection::vec(1..5u64, 1..=3),
        proptest::collection::vec(active(), 0..8),
        1..5u64,
        0..12i32,
    )
        .prop_map(|(capacities, actives, request, priority)| {
            let actives = actives
                .into_iter()
                .filter(|a| a.pod < capacities.len())
                .collect();
            (capacities, actives, request, priority * 100)
        })
}

/// The world: classes `batch` (0, preemptible) and `urgent` (1000); a Pod per capacity; Run
/// `a<i>` per active, Scheduled or Running on its Pod with its recorded priority, of class
/// `batch` when preemptible, else of no class (so not preemptible: there is no global
/// default). With `reversed`, the same objects listed in the opposite order.
fn world(capacities: &[u64], actives: &[Active], reversed: bool) -> World {
    let mut pods: Vec<PodBuilder> = capacities
        .iter()
        .enumerate()
        .map(|(i, c)| pod(POD_NAMES[i]).capacity(&[("runs", *c)]))
        .collect();
    let mut runs: Vec<RunBuilder> = actives
        .iter()
        .enumerate()
        .map(|(i, a)| {
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
        })
        .collect();
    if reversed {
        pods.reverse();
        runs.reverse();
    }
    World::new()
        .classes([
            priority_class("batch", 0).preemptible(),
            priority_class("urgent", 1000),
        ])
        .pods(pods)
        .runs(runs)
}

/// The preemptor: Pending, of no class (so `preemptionPolicy` lets it preempt), with a
/// recorded priority. It is not in the cache, so no Pending Run waits in its queue.
fn preemptor(request: u64, priority: i32) -> crate::api::Run {
    run("u")
        .requests(&[("runs", request)])
        .priority(priority)
        .build()
}

fn plan_of(world: &World, request: u64, priority: i32) -> Option<Preemption> {
    world.cache().preemption_plan(
        &crate::scheduler::plugins::registry(),
        &preemptor(request, priority),
        NOW,
    )
}

/// Whether `a` may be a victim of a preemptor of `priority`: strictly lower, and Scheduled
/// (level 1, any class) or Running of a preemptible class (level 2).
fn eligible(a: &Active, priority: i32) -> bool {
    a.priority < priority && (!a.running || a.preemptible)
}

/// Everything `preemption_plan` promises in the test world for a preemptor asking for
/// `request` runs at `priority`, as a model of the world rather than a second run of the
/// code. In this world several branches of the code cannot be taken, and `check` says
/// nothing about them: there are PriorityClasses (no early `None`), the preemptor may preempt
/// (no `preemptionPolicy: Never`), no Run is already disrupting, no Pending Run waits, no Pod
/// is nominated, and every Pod is available and advertises `runs`.
///
/// With `used(p)` the runs of the actives on Pod `p` and `freeable(p)` those of its eligible
/// ones:
/// - victims: on the planned Pod, distinct, strictly lower, Running only of a preemptible
///   class, `admitted` exactly when Running; removing them makes room
///   (`used - victims + request <= capacity`) and giving any one back leaves none (fewest);
/// - converse: when the preemptor fits on some Pod now (`used + request <= capacity`) there
///   is no plan; otherwise, when some Pod has `used - freeable + request <= capacity`, the
///   plan is `Some` with at least one victim (and so, above, on a Pod where it then fits);
///   otherwise no Pod can be freed and the plan has no victims: it is `Some` (a nomination
///   only) exactly when some Pod is large enough (`capacity >= request`) and holds an active
///   Run of lower priority, and then it is on such a Pod.
fn check(
    capacities: &[u64],
    actives: &[Active],
    request: u64,
    priority: i32,
    plan: &Option<Preemption>,
) -> Result<(), TestCaseError> {
    let pods = 0..capacities.len();
    let on = |p: usize| actives.iter().filter(move |a| a.pod == p);
    let used = |p: usize| -> u64 { on(p).map(|a| a.runs).sum() };
    let freeable = |p: usize| -> u64 {
        on(p)
            .filter(|a| eligible(a, priority))
            .map(|a| a.runs)
            .sum()
    };
    let holds_lower = |p: usize| on(p).any(|a| a.priority < priority);

    let fits_now = pods.clone().any(|p| used(p) + request <= capacities[p]);
    let can_free = pods
        .clone()
        .any(|p| used(p) - freeable(p) + request <= capacities[p]);
    let nominable = |p: usize| capacities[p] >= request && holds_lower(p);

    // The converse: when there must (and must not) be a plan, and with or without victims.
    if fits_now {
        prop_assert!(plan.is_none(), "fits now, yet a plan: {:?}", plan);
        return Ok(());
    }
    if can_free {
        prop_assert!(
            plan.as_ref().is_some_and(|p| !p.victims.is_empty()),
            "fits nowhere, removing the eligible victims makes room, yet the plan is {:?}",
            plan
        );
    } else {
        let any_nominable = pods.clone().any(nominable);
        prop_assert_eq!(
            plan.is_some(),
            any_nominable,
            "nothing can be freed: a nomination only, exactly when a large enough Pod holds a lower-priority Run; plan {:?}",
            plan
        );
        if let Some(plan) = plan {
            prop_assert!(
                plan.victims.is_empty(),
                "nothing can be freed, yet victims: {:?}",
                plan
            );
        }
    }
    let Some(plan) = plan else { return Ok(()) };

    let pod = POD_NAMES[..capacities.len()]
        .iter()
        .position(|p| *p == plan.pod);
    prop_assert!(pod.is_some(), "nominated to an unknown Pod: {:?}", plan);
    let pod = pod.unwrap();
    if plan.victims.is_empty() {
        prop_assert!(
            nominable(pod),
            "nominated to {} without victims, which is too small or holds no lower-priority Run",
            plan.pod
        );
        return Ok(());
    }

    // The victims.
    let mut taken: Vec<usize> = Vec::new();
    for v in &plan.victims {
        let i = v
            .name
            .strip_prefix('a')
            .and_then(|i| i.parse::<usize>().ok());
        prop_assert!(
            i.is_some_and(|i| i < actives.len()),
            "victim {} is no active Run",
            v.name
        );
        let i = i.unwrap();
        let a = &actives[i];
        prop_assert!(!taken.contains(&i), "{} is a victim twice", v.name);
        taken.push(i);
        prop_assert_eq!(a.pod, pod, "victim {} is not on {}", &v.name, &plan.pod);
        prop_assert!(
            a.priority < priority,
            "victim {:?} not lower than {}",
            a,
            priority
        );
        prop_assert!(
            !a.running || a.preemptible,
            "a Running Run of a plain class: {:?}",
            a
        );
        prop_assert_eq!(v.admitted, a.running, "admitted is Running: {}", &v.name);
        prop_assert_eq!(v.priority, a.priority, "the victim's priority: {}", &v.name);
    }
    let left = used(pod) - taken.iter().map(|i| actives[*i].runs).sum::<u64>();
    prop_assert!(
        left + request <= capacities[pod],
        "victims do not make room: {:?}",
        plan
    );
    // Fewest: giving any victim back leaves no room.
    for i in &taken {
        prop_assert!(
            left + actives[*i].runs + request > capacities[pod],
            "a{} was not needed",
            i
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn victims_are_strictly_lower_and_exactly_enough_and_found_whenever_room_can_be_made(
        (capacities, actives, request, priority) in case(),
    ) {
        let plan = plan_of(&world(&capacities, &actives, false), request, priority);
        check(&capacities, &actives, request, priority, &plan)?;
        // `explain` plans in a cache it builds from a fresh list of the objects, the scheduler
        // in the one its watches built up in their own order: the plan must be the same from a
        // cache built again from the same world listed the other way round (fresh hash seeds,
        // other insertion order), or explain would show another plan than the scheduler
        // carries out. A second call on the same cache would prove nothing.
        let relisted = plan_of(&world(&capacities, &actives, true), request, priority);
        prop_assert_eq!(&plan, &relisted, "the plan depends on the order the world was listed in");
    }
}

/// p1 (capacity 4) holds a0 (2 runs, priority 0), a1 (1 run, priority 100) and a2 (1 run,
/// priority 0), all Scheduled; the preemptor asks for 1 run at priority 100. It fits nowhere
/// now; taking a2 alone makes room (a0, as important and earlier by UID, stays); taking a1
/// would make room too, but a1 is of equal priority.
fn needs_preemption() -> (Vec<u64>, Vec<Active>, u64, i32) {
    let a = |runs, priority| Active {
        pod: 0,
        runs,
        priority,
        running: false,
        preemptible: false,
    };
    (vec![4], vec![a(2, 0), a(1, 100), a(1, 0)], 1, 100)
}

fn victim(name: &str, priority: i32) -> Victim {
    Victim {
        name: name.to_string(),
        uid: format!("uid-{name}"),
        priority,
        admitted: false,
    }
}

#[test]
fn check_rejects_no_plan_and_a_victim_of_equal_priority_where_preemption_is_needed() {
    let (capacities, actives, request, priority) = needs_preemption();
    let on_p1 = |victims| {
        Some(Preemption {
            pod: "p1".to_string(),
            victims,
            retry_at: None,
        })
    };

    // The real plan takes a2 and passes.
    let plan = plan_of(&world(&capacities, &actives, false), request, priority);
    assert_eq!(plan, on_p1(vec![victim("a2", 0)]));
    check(&capacities, &actives, request, priority, &plan).expect("the real plan passes");

    // Mutant: `preemption_plan` always `None`.
    let err = check(&capacities, &actives, request, priority, &None)
        .expect_err("no plan where removing a2 makes room must fail");
    assert!(err.to_string().contains("yet the plan is None"), "{err}");

    // Mutant: a victim of equal priority (it would make room, and be the only one needed).
    let err = check(
        &capacities,
        &actives,
        request,
        priority,
        &on_p1(vec![victim("a1", 100)]),
    )
    .expect_err("a victim of equal priority must fail");
    assert!(err.to_string().contains("not lower than 100"), "{err}");

    // Mutant: a needless extra victim (not the fewest).
    let err = check(
        &capacities,
        &actives,
        request,
        priority,
        &on_p1(vec![victim("a0", 0), victim("a2", 0)]),
    )
    .expect_err("more victims than needed must fail");
    assert!(err.to_string().contains("was not needed"), "{err}");

    // Mutant: a nomination without victims although room can be made.
    check(&capacities, &actives, request, priority, &on_p1(vec![]))
        .expect_err("no victims where removing a2 makes room must fail");

    // Mutant: a plan although the preemptor fits now (p1 of capacity 5).
    let err = check(
        &[5],
        &actives,
        request,
        priority,
        &on_p1(vec![victim("a2", 0)]),
    )
    .expect_err("a plan for a Run that fits now must fail");
    assert!(err.to_string().contains("fits now"), "{err}");
}

/// The generated cases themselves catch the always-`None` mutant: run over the property's
/// own strategy with a deterministic seed, `check` fails on `None` in place of the real plan
/// (while the real plan passes on every one of those cases: the property test above).
#[test]
fn the_property_fails_for_a_preemption_plan_that_always_says_none() {
    let mut runner = TestRunner::deterministic();
    let result = runner.run(&case(), |(capacities, actives, request, priority)| {
        check(&capacities, &actives, request, priority, &None)
    });
    let Err(proptest::test_runner::TestError::Fail(
        reason,
        (capacities, actives, request, priority),
    )) = result
    else {
        panic!("the always-None mutant survived: {result:?}");
    };
    assert!(
        reason.to_string().contains("yet the plan is None"),
        "{reason}"
    );
    // The shrunk counterexample really needs preemption, and the real code plans it.
    let plan = plan_of(&world(&capacities, &actives, false), request, priority);
    assert!(
        plan.as_ref().is_some_and(|p| !p.victims.is_empty()),
        "{plan:?}"
    );
    check(&capacities, &actives, request, priority, &plan).expect("the real plan passes");
}
