use super::*;
use crate::testing::*;
use proptest::prelude::*;

fn target_names(snap: &Snapshot<'_>, set: &PodSet) -> Vec<String> {
    snap.pods()
        .filter(|p| set.contains(p.slot()))
        .map(|p| p.name().to_string())
        .collect()
}

#[test]
fn targets_include_actual_and_assumed_runs_but_never_the_run_itself() {
    let world = World::new()
        .pods([pod("p1"), pod("p2"), pod("p3"), pod("p4")])
        .runs([
            run("a").labels(&[("cohort", "x")]).on("p1"),
            run("b").labels(&[("cohort", "y")]).on("p2"),
            run("self").labels(&[("cohort", "x")]).on("p4"),
        ])
        .assume(run("c").labels(&[("cohort", "x")]), "p3");
    let state = world.cache();
    let snap = state.snapshot(NS, RUNTIME, NOW);
    let uid = run("self").build().metadata.uid.unwrap();
    let set = snap.targets(&Selector::from_labels([("cohort", "x")]), &uid);
    assert_eq!(target_names(&snap, &set), ["p1", "p3"]);
}

#[test]
fn indexed_and_scanned_selectors_find_the_same_targets() {
    let world = World::new().pods([pod("p1"), pod("p2"), pod("p3")]).runs([
        run("a")
            .labels(&[("cohort", "x"), ("tier", "gold")])
            .on("p1"),
        run("b").labels(&[("cohort", "x")]).on("p2"),
        run("c").labels(&[("cohort", "y")]).on("p3"),
    ]);
    let state = world.cache();
    let snap = state.snapshot(NS, RUNTIME, NOW);
    let indexed = Selector::from_labels([("cohort", "x"), ("tier", "gold")]);
    assert_eq!(target_names(&snap, &snap.targets(&indexed, "")), ["p1"]);
    let scanned = selector_expr(&[("cohort", "NotIn", &["y"])]);
    assert_eq!(
        target_names(&snap, &snap.targets(&scanned, "")),
        ["p1", "p2"]
    );
    let missing = Selector::from_labels([("nope", "x")]);
    assert!(snap.targets(&missing, "").is_empty());
}

#[test]
fn a_snapshot_sees_pods_in_name_order_with_effective_usage() {
    let world = World::new()
        .pods([
            pod("p2").capacity(&[("runs", 4)]),
            pod("p1").capacity(&[("runs", 4)]),
        ])
        .runs([run("a").on("p1")])
        .assume(run("b").requests(&[("runs", 2)]), "p1");
    let state = world.cache();
    let snap = state.snapshot(NS, RUNTIME, NOW);
    let names: Vec<_> = snap.pods().map(|p| p.name()).collect();
    assert_eq!(names, ["p1", "p2"]);
    let p1 = snap.pod("p1").unwrap();
    assert_eq!(
        (p1.used("runs"), p1.assumed("runs"), p1.effective("runs")),
        (1, 2, 3)
    );
    assert_eq!(snap.pod("p2").unwrap().effective("runs"), 0);
}

#[derive(Debug, Clone)]
enum Op {
    RunOn {
        run: usize,
        pod: usize,
        cohort: usize,
        tier: bool,
    },
    RunEnds(usize),
    RunDeleted(usize),
    PodMoves {
        pod: usize,
        elsewhere: bool,
    },
    PodDeleted(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..8usize, 0..4usize, 0..3usize, any::<bool>())
            .prop_map(|(run, pod, cohort, tier)| Op::RunOn { run, pod, cohort, tier }),
        1 => (0..8usize).prop_map(Op::RunEnds),
        1 => (0..8usize).prop_map(Op::RunDeleted),
        1 => (0..4usize, any::<bool>()).prop_map(|(pod, elsewhere)| Op::PodMoves { pod, elsewhere }),
        1 => (0..4usize).prop_map(Op::PodDeleted),
    ]
}

const COHORTS: [&str; 3] = ["a", "b", "c"];

proptest! {
    /// The label index stays consistent with the active Runs through any sequence of Run
    /// and Pod events: indexed lookups find exactly what a scan finds.
    #[test]
    fn the_label_index_finds_exactly_the_targets_a_scan_finds(ops in proptest::collection::vec(op(), 0..60)) {
        let mut state = crate::scheduler::framework::SchedulerCache::new();
        for i in 0..4 {
            state.apply(&pod(&format!("p{i}")).build(), NOW);
        }
        for op in ops {
            match op {
                Op::RunOn { run: r, pod: p, cohort, tier } => {
                    let mut b = run(&format!("r{r}")).labels(&[("cohort", COHORTS[cohort])]);
                    if tier {
                        b = b.labels(&[("tier", "gold")]);
                    }
                    state.apply_run(&b.on(&format!("p{p}")).build(), NOW);
                }
                Op::RunEnds(r) => {
                    state.apply_run(&run(&format!("r{r}")).succeeded().build(), NOW);
                }
                Op::RunDeleted(r) => {
                    state.delete_run(NS, &format!("uid-r{r}"), NOW);
                }
                Op::PodMoves { pod: p, elsewhere } => {
                    let runtime = if elsewhere { "other" } else { RUNTIME };
                    state.apply(&pod(&format!("p{p}")).runtime(runtime).build(), NOW);
                }
                Op::PodDeleted(p) => {
                    state.delete(&pod(&format!("p{p}")).build(), NOW);
                }
            }
        }
        let snap = state.snapshot(NS, RUNTIME, NOW);
        let selectors = [
            Selector::from_labels([("cohort", "a")]),
            Selector::from_labels([("cohort", "b"), ("tier", "gold")]),
            selector_expr(&[("cohort", "In", &["a", "c"])]),
            selector_expr(&[("tier", "Exists", &[])]),
            selector_expr(&[("cohort", "NotIn", &["a"])]),
        ];
        for selector in &selectors {
            let scanned: Vec<String> = snap
                .pods()
                .filter(|p| p.active_runs().any(|(_, r)| selector.matches(&r.facts.labels)))
                .map(|p| p.name().to_string())
                .collect();
            prop_assert_eq!(target_names(&snap, &snap.targets(selector, "")), scanned, "{:?}", selector);
        }
    }
}
