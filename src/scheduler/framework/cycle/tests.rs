use super::*;
use crate::api::status::reasons::INVALID_AFFINITY;
use crate::testing::*;

fn decide(world: &World, r: &RunBuilder) -> Decision {
    let run = r.build();
    let state = world.cache();
    let snap = state.snapshot(NS, &run.spec.runtime, NOW);
    evaluate(
        &snap,
        &crate::scheduler::plugins::registry(),
        &state.queued(&run),
    )
    .unwrap()
    .decision()
}

fn scheduled_on(d: &Decision) -> &str {
    match d {
        Decision::Schedule { pod, .. } => pod,
        other => panic!("expected Schedule, got {other:?}"),
    }
}

fn message(d: &Decision) -> String {
    match d {
        Decision::Unschedulable(u) => u.message(),
        other => panic!("expected Unschedulable, got {other:?}"),
    }
}

#[test]
fn the_unschedulable_message_counts_reasons_by_count_then_text() {
    let world = World::new().pods([
        pod("p1").capacity(&[("runs", 4), ("example.com/gpu", 1)]),
        pod("p2").capacity(&[("runs", 4)]),
        pod("p3")
            .capacity(&[("runs", 4), ("example.com/gpu", 1)])
            .stale(),
    ]);
    let world = world.runs([run("x").requests(&[("example.com/gpu", 1)]).on("p1")]);
    let d = decide(&world, &run("a").requests(&[("example.com/gpu", 1)]));
    assert_eq!(
        message(&d),
        "0/3 Runtime Pods are available: 2 Insufficient example.com/gpu, 1 runtimed heartbeat stale."
    );
}

#[test]
fn with_no_runtime_pods_the_message_says_zero_of_zero() {
    let d = decide(&World::new(), &run("a"));
    assert_eq!(
        message(&d),
        "0/0 Runtime Pods are available; waiting for available runtime pods."
    );
}

#[test]
fn a_run_of_a_missing_runtime_says_the_runtime_is_not_found() {
    let world = World::new().pods([pod("p1")]);
    let d = decide(&world, &run("a").runtime("nope"));
    assert_eq!(
        message(&d),
        "Runtime \"nope\" not found in this namespace; waiting for available runtime pods."
    );
    // Runtime Pods that name a Runtime without the object are still used as they are.
    let orphans = World::new().pods([pod("o1").runtime("orphan")]);
    let d = decide(&orphans, &run("a").runtime("orphan"));
    assert_eq!(scheduled_on(&d), "o1");
}

#[test]
fn the_message_never_names_pods_runs_or_selectors() {
    let world = World::new()
        .pods([pod("secret-pod-1"), pod("secret-pod-2").not_ready()])
        .runs([run("secret-run")
            .labels(&[("secret-label", "v")])
            .on("secret-pod-1")]);
    let d = decide(
        &world,
        &run("a")
            .anti(&[("secret-label", "v")])
            .requires(&[("other-secret", "z")]),
    );
    let msg = message(&d);
    assert!(!msg.contains("secret"), "{msg}");
}

#[test]
fn a_run_only_sees_the_runtime_pods_of_its_namespace_and_runtime() {
    let world = World::new().pods([
        pod("a-other-ns")
            .ns("elsewhere")
            .capacity(&[("runs", 9)])
            .ready(),
        pod("b-other-runtime")
            .runtime("java")
            .capacity(&[("runs", 9)])
            .ready(),
        pod("c-mine").capacity(&[("runs", 1)]).ready(),
    ]);
    assert_eq!(scheduled_on(&decide(&world, &run("a"))), "c-mine");
    let full = world.runs([run("x").on("c-mine")]);
    assert_eq!(
        message(&decide(&full, &run("a"))),
        "0/1 Runtime Pods are available: 1 Insufficient runs."
    );
}

#[test]
fn the_highest_total_wins_and_ties_go_to_the_smallest_pod_name() {
    let world = World::new().pods([
        pod("p3").capacity(&[("runs", 4)]),
        pod("p1").capacity(&[("runs", 4)]),
        pod("p2").capacity(&[("runs", 4)]),
    ]);
    assert_eq!(scheduled_on(&decide(&world, &run("a"))), "p1");
    let world = world.runs([run("x").on("p1")]);
    assert_eq!(scheduled_on(&decide(&world, &run("a"))), "p2");
}

#[test]
fn preferred_affinity_and_least_loaded_add_up_to_one_total() {
    // p1 hosts the preferred target (weight 50) but is fuller: 50 (affinity) + 50
    // (headroom after 2/4) = 100. p2 and p3 are emptier without a target: 0 + 75 = 75.
    let world = World::new()
        .pods([
            pod("p1").capacity(&[("runs", 4)]),
            pod("p2").capacity(&[("runs", 4)]),
            pod("p3").capacity(&[("runs", 4)]),
        ])
        .runs([run("x").labels(&[("app", "db")]).on("p1")]);
    let d = decide(&world, &run("a").prefers(50, &[("app", "db")]));
    let Decision::Schedule {
        pod, total, scores, ..
    } = &d
    else {
        panic!("{d:?}")
    };
    assert_eq!(pod, "p1");
    assert_eq!(*total, 100);
    assert_eq!(
        scores
            .iter()
            .map(|s| (s.plugin, s.normalized))
            .collect::<Vec<_>>(),
        [("PreferredRunAffinity", 50), ("LeastLoaded", 50)]
    );
}

#[test]
fn invalid_requests_fail_prefilter_with_the_field_and_value() {
    let world = World::new().pods([pod("p1")]);
    let d = decide(
        &world,
        &run("a").request_strs(&[("example.com/gpu", "1.5")]),
    );
    let Decision::Invalid { reason, message } = d else {
        panic!("{d:?}")
    };
    assert_eq!(reason, "InvalidResources");
    assert!(
        message.starts_with(
            "spec.resources.requests[\"example.com/gpu\"]: \"1.5\" is not a valid quantity: "
        ),
        "{message}"
    );
}

#[test]
fn invalid_affinity_terms_fail_prefilter_with_the_field_and_value() {
    let table: Vec<(RunBuilder, &str)> = vec![
        (
            run("a").affinity_term(false, "zone", label_selector(&[])),
            "spec.affinity.runAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: \"zone\" is not a supported topology key: the only one is kruntimes.io/runtime-pod",
        ),
        (
            run("a").affinity_term(
                true,
                "kruntimes.io/runtime-pod",
                expr_selector("k", "Near", &["v"]),
            ),
            "spec.affinity.runAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator: \"Near\" is not a valid operator: use In, NotIn, Exists or DoesNotExist",
        ),
        (
            run("a").prefers(0, &[("app", "db")]),
            "spec.affinity.runAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: 0 is not a valid weight: use 1 to 100",
        ),
        (
            run("a").avoids(101, &[("app", "db")]),
            "spec.affinity.runAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: 101 is not a valid weight: use 1 to 100",
        ),
    ];
    let world = World::new().pods([pod("p1")]);
    for (r, want) in table {
        let d = decide(&world, &r);
        assert_eq!(
            d,
            Decision::Invalid {
                reason: INVALID_AFFINITY,
                message: want.to_string()
            }
        );
        // The path names the field as the user wrote it (the API's JSON names).
        let path = want.split(':').next().unwrap();
        assert!(
            resolves(&serde_json::to_value(r.build()).unwrap(), path),
            "{path} is not a field of the Run as written"
        );
    }
}

/// Whether a `a.b[0].c` path leads to a value in `json`.
fn resolves(json: &serde_json::Value, path: &str) -> bool {
    let mut at = json;
    for part in path.split('.') {
        let (name, index) = match part.split_once('[') {
            Some((name, rest)) => (name, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        let Some(next) = at.get(name) else {
            return false;
        };
        at = match index {
            Some(i) => match next.get(i) {
                Some(v) => v,
                None => return false,
            },
            None => next,
        };
    }
    true
}

#[test]
fn an_evaluation_explains_every_pod_with_its_first_rejection_or_its_scores() {
    let world = World::new()
        .pods([
            pod("p1").capacity(&[("runs", 2)]).not_ready().stale(),
            pod("p2").capacity(&[("runs", 2)]),
            pod("p3").capacity(&[("runs", 2)]),
        ])
        .runs([run("x").on("p2")]);
    let state = world.cache();
    let snap = state.snapshot(NS, RUNTIME, NOW);
    let eval = evaluate(
        &snap,
        &crate::scheduler::plugins::registry(),
        &state.queued(&run("a").build()),
    )
    .unwrap();
    let pods = eval.pods();
    assert_eq!(pods.len(), 3);
    let first = pods[0].rejection.as_ref().unwrap();
    assert_eq!(
        (first.plugin, first.reason),
        ("RuntimePodAvailability", "Runtime Pod not ready"),
        "the first rejection stops the Pod's evaluation"
    );
    assert!(eval.scores(0).is_empty());
    assert_eq!(eval.scores(1).len(), 2);
    assert_eq!(
        eval.total(2),
        Some(50),
        "0 (no preference) + 50 (headroom after 1/2)"
    );
    assert_eq!(eval.chosen().unwrap().pod.name(), "p3");
    assert_eq!(pods[1].pod.used("runs"), 1);
    let rejections = eval.rejections();
    assert_eq!(rejections.len(), 1);
    assert_eq!(rejections[0].count, 1);
}

#[test]
fn explaining_a_placed_run_leaves_out_its_own_usage_and_assumption() {
    let world = World::new()
        .pods([
            pod("p1").capacity(&[("runs", 1)]),
            pod("p2").capacity(&[("runs", 1)]),
        ])
        .runs([run("a").on("p1")])
        .assume(run("b"), "p2");
    let state = world.cache();
    let snap = state.snapshot(NS, RUNTIME, NOW);
    for name in ["a", "b"] {
        let eval = evaluate(
            &snap,
            &crate::scheduler::plugins::registry(),
            &state.queued(&run(name).build()),
        )
        .unwrap();
        let feasible: Vec<_> = eval
            .pods()
            .iter()
            .filter(|p| p.rejection.is_none())
            .map(|p| p.pod.name())
            .collect();
        let want = if name == "a" { "p1" } else { "p2" };
        assert_eq!(feasible, [want], "run {name} only fits where it already is");
    }
}
