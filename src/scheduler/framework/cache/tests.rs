use super::*;
use crate::scheduler::framework::cycle::Decision;
use crate::scheduler::framework::queue::QueueState;
use crate::scheduler::framework::registry::Registry;
use crate::testing::*;

fn registry() -> Registry {
    crate::scheduler::plugins::registry()
}

fn reserved_pod(outcome: &ScheduleOutcome) -> &str {
    match outcome {
        ScheduleOutcome::Reserved { pod, .. } => pod,
        other => panic!("expected Reserved, got {other:?}"),
    }
}

/// Queues `run` and runs the next cycle, which must be that Run's.
fn cycle(cache: &mut SchedulerCache, run: &RunBuilder) -> ScheduleOutcome {
    cache.apply(&run.build(), NOW);
    let scheduled = cache
        .schedule_next(&registry(), NOW)
        .expect("the Run is queued");
    assert_eq!(scheduled.run.metadata.name, run.build().metadata.name);
    scheduled.outcome
}

#[test]
fn schedule_reserves_and_the_next_cycle_sees_the_assumption() {
    let mut state = World::new()
        .pods([
            pod("p1").capacity(&[("runs", 1)]),
            pod("p2").capacity(&[("runs", 1)]),
        ])
        .cache();
    let a = run("a");
    assert_eq!(reserved_pod(&cycle(&mut state, &a)), "p1");
    assert_eq!(state.assumed().get(&a.key()).unwrap().pod, "p1");
    assert!(
        !state.queue().contains(&a.key()),
        "out of the queue while bound"
    );
    assert_eq!(reserved_pod(&cycle(&mut state, &run("b"))), "p2");
    let c = run("c");
    let outcome = cycle(&mut state, &c);
    let ScheduleOutcome::Unschedulable(u) = &outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        u.message(),
        "0/2 Runtime Pods are available: 2 Insufficient runs."
    );
    assert_eq!(outcome.result(), "unschedulable");
    assert_eq!(outcome.rejections()[0].reason, "Insufficient resource");
    assert!(matches!(
        state.queue().state(&c.key()),
        Some(QueueState::Unschedulable { .. })
    ));
    assert!(
        state.schedule_next(&registry(), NOW).is_none(),
        "nothing due"
    );
}

#[test]
fn reserve_refuses_a_pod_without_room_after_existing_assumptions() {
    let mut state = World::new()
        .pods([pod("p1").capacity(&[("runs", 2), ("example.com/gpu", 1)])])
        .runs([run("x").on("p1")])
        .cache();
    let a = run("a").requests(&[("example.com/gpu", 1)]);
    state.reserve(&a.key(), a.assumption("p1"), NOW).unwrap();
    let b = run("b")
        .requests(&[("runs", 0)])
        .requests(&[("example.com/gpu", 1)]);
    assert_eq!(
        state.reserve(&b.key(), b.assumption("p1"), NOW),
        Err(ReserveError::Conflict {
            pod: "p1".into(),
            resource: "example.com/gpu".into()
        })
    );
    let c = run("c");
    assert_eq!(
        state.reserve(&c.key(), c.assumption("p1"), NOW),
        Err(ReserveError::Conflict {
            pod: "p1".into(),
            resource: "runs".into()
        }),
        "actual (1) + assumed (1) leave no runs"
    );
    assert_eq!(
        state.reserve(&c.key(), c.assumption("gone"), NOW),
        Err(ReserveError::PodGone { pod: "gone".into() })
    );
    assert_eq!(
        state.reserve(&a.key(), a.assumption("p1"), NOW),
        Err(ReserveError::AlreadyAssumed { pod: "p1".into() })
    );
}

#[test]
fn a_failed_bind_releases_the_reservation_and_queues_the_run_again_with_backoff() {
    let mut state = World::new()
        .pods([pod("p1").capacity(&[("runs", 1)])])
        .cache();
    let a = run("a");
    reserved_pod(&cycle(&mut state, &a));
    assert!(state.release(NS, "uid-a", NOW));
    assert!(state.assumed().is_empty());
    assert_eq!(state.queue().state(&a.key()), Some(QueueState::Active));
    assert!(!state.release(NS, "uid-a", NOW), "released once");
    let delay = state.retry(NS, "uid-a", false, NOW).expect("queued");
    assert_eq!(delay, jiff::SignedDuration::from_millis(200));
    assert!(
        state.schedule_next(&registry(), NOW).is_none(),
        "backing off"
    );
    let later = NOW + delay;
    let again = state.schedule_next(&registry(), later).expect("due");
    assert_eq!(reserved_pod(&again.outcome), "p1");
    // A Bind that met a newer version of the Run looks again soon, failures not counted.
    assert!(state.release(NS, "uid-a", later));
    let soon = state.retry(NS, "uid-a", true, later).unwrap();
    assert_eq!(soon, jiff::SignedDuration::from_millis(50));
    assert!(!state.release(NS, "uid-a", later), "released once");
    let again = state.schedule_next(&registry(), later + soon).expect("due");
    assert_eq!(reserved_pod(&again.outcome), "p1");
    assert!(state.release(NS, "uid-a", later));
    assert_eq!(
        state.retry(NS, "uid-a", false, later),
        Some(jiff::SignedDuration::from_millis(400)),
        "the conflict did not reset or add to the failures"
    );
}

#[test]
fn an_assumption_is_kept_while_pending_and_handed_off_exactly_once_bound() {
    let mut state = World::new()
        .pods([pod("p1").capacity(&[("runs", 2)])])
        .cache();
    let a = run("a");
    reserved_pod(&cycle(&mut state, &a));
    let effective = |s: &SchedulerCache| {
        s.snapshot(NS, RUNTIME, NOW)
            .pod("p1")
            .unwrap()
            .effective("runs")
    };
    assert_eq!(effective(&state), 1);

    // The informer lags the successful Bind: still Pending, and not queued again.
    let change = state.apply_run(&a.build(), NOW);
    assert!(
        state.assumed().get(&a.key()).is_some(),
        "kept while Pending"
    );
    assert!(change.released.is_empty());
    assert!(!state.queue().contains(&a.key()));
    assert_eq!(effective(&state), 1);

    // The Bind is observed: the actual usage owns the request now.
    let change = state.apply_run(&a.clone().on("p1").build(), NOW);
    assert!(change.released.is_empty(), "confirmed, not released");
    assert!(state.assumed().is_empty());
    assert_eq!(effective(&state), 1);
    assert!(state.queue().is_empty());
}

#[test]
fn an_assumption_is_kept_when_its_run_is_seen_running_without_a_pod() {
    let mut state = World::new()
        .pods([pod("p1").capacity(&[("runs", 1)])])
        .cache();
    let a = run("a");
    reserved_pod(&cycle(&mut state, &a));
    // Neither Pending, nor terminal, nor placed elsewhere: keep the capacity held.
    let change = state.apply_run(&a.clone().running().build(), NOW);
    assert!(state.assumed().get(&a.key()).is_some(), "kept");
    assert!(change.released.is_empty());
    let full = cycle(&mut state, &run("b"));
    assert!(
        matches!(full, ScheduleOutcome::Unschedulable(_)),
        "{full:?}"
    );
    // Once it ends, the reservation goes and the waiting Run is woken.
    let changes = state.apply(&a.clone().succeeded().build(), NOW);
    assert!(state.assumed().is_empty(), "dropped");
    assert!(
        changes
            .wakeups
            .iter()
            .any(|w| w.pod.as_deref() == Some("p1"))
    );
    assert_eq!(
        state.queue().state(&run("b").key()),
        Some(QueueState::Active)
    );
    assert_eq!(state.take_wake_counts().capacity_released, 1);
}

#[test]
fn an_assumption_is_dropped_when_its_run_ends_disappears_or_lands_elsewhere() {
    let world = World::new().pods([
        pod("p1").capacity(&[("runs", 2)]),
        pod("p2").capacity(&[("runs", 2)]),
    ]);
    let a = run("a");
    type Event = Box<dyn Fn(&mut SchedulerCache) -> RunChange>;
    let events: Vec<(&str, Event)> = vec![
        (
            "terminal",
            Box::new(|s| s.apply_run(&run("a").succeeded().build(), NOW)),
        ),
        (
            "failed without a Pod",
            Box::new(|s| s.apply_run(&run("a").failed().build(), NOW)),
        ),
        ("deleted", Box::new(|s| s.delete_run(NS, "uid-a", NOW))),
        (
            "bound elsewhere",
            Box::new(|s| s.apply_run(&run("a").on("p2").build(), NOW)),
        ),
        (
            "missing from a relist",
            Box::new(|s| s.reset_runs(&[], NOW).pop().unwrap_or_default()),
        ),
    ];
    for (case, event) in events {
        let mut state = world.cache();
        assert_eq!(reserved_pod(&cycle(&mut state, &a)), "p1", "{case}");
        let change = event(&mut state);
        assert!(
            change
                .released
                .iter()
                .any(|p| p.pod == "p1" && p.runtime == RUNTIME),
            "{case}: capacity on p1 is released"
        );
        assert!(state.assumed().is_empty(), "{case}");
        assert!(state.queue().is_empty(), "{case}: nothing to schedule");
        assert_eq!(
            state
                .snapshot(NS, RUNTIME, NOW)
                .pod("p1")
                .unwrap()
                .effective("runs"),
            0,
            "{case}"
        );
    }
}

#[test]
fn an_invalid_run_is_reported_nothing_is_reserved_and_it_waits_to_be_seen_failed() {
    let mut state = World::new().pods([pod("p1")]).cache();
    let a = run("a").request_strs(&[("runs", "-1")]);
    let outcome = cycle(&mut state, &a);
    let ScheduleOutcome::Invalid { reason, message } = &outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(*reason, "InvalidResources");
    assert!(message.contains("\"-1\""), "{message}");
    assert!(state.assumed().is_empty());
    assert!(matches!(
        state.queue().state(&a.key()),
        Some(QueueState::Unschedulable { .. })
    ));
    assert_eq!(
        state.retry(NS, "uid-a", false, NOW),
        Some(jiff::SignedDuration::from_millis(200)),
        "a failed write of its Failed status backs it off"
    );
    state.apply(&a.clone().failed().build(), NOW);
    assert!(state.queue().is_empty(), "seen Failed: out of the queue");
}

#[test]
fn plan_is_the_cycles_decision_without_reserving() {
    let mut state = World::new()
        .pods([pod("p1").capacity(&[("runs", 1)])])
        .cache();
    let a = run("a");
    state.apply(&a.build(), NOW);
    let planned = state.plan(&registry(), &a.build(), NOW).unwrap();
    assert!(matches!(&planned, Decision::Schedule { pod, .. } if pod == "p1"));
    assert!(state.assumed().is_empty());
    let scheduled = state.schedule_next(&registry(), NOW).unwrap();
    assert_eq!(reserved_pod(&scheduled.outcome), "p1");
}

#[test]
fn concurrent_callers_never_reserve_the_same_capacity_twice() {
    let shared = std::sync::Arc::new(SharedCache::new(crate::scheduler::plugins::registry()));
    for p in [
        pod("p1").capacity(&[("runs", 3)]),
        pod("p2").capacity(&[("runs", 2)]),
    ] {
        shared.apply(&p.build(), NOW);
        shared.apply(&p.build_lease().unwrap(), NOW);
    }
    let handles: Vec<_> = (0..4)
        .map(|w| {
            let shared = shared.clone();
            std::thread::spawn(move || {
                for i in 0..5 {
                    shared.apply(&run(&format!("w{w}-{i}")).build(), NOW);
                }
                std::iter::from_fn(|| shared.schedule_next(NOW))
                    .filter(|s| matches!(s.outcome, ScheduleOutcome::Reserved { .. }))
                    .count()
            })
        })
        .collect();
    let reserved: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(reserved, 5, "exactly the 3 + 2 runs of capacity");
    shared.with(|s| assert_eq!(s.assumed().len(), 5));
}

#[test]
fn an_unschedulable_run_looks_again_when_it_changes_but_not_for_status_churn() {
    let mut state = World::new()
        .pods([pod("p1").capacity(&[("runs", 1)])])
        .runs([run("x").on("p1")])
        .cache();
    let a = run("a");
    assert!(matches!(
        cycle(&mut state, &a),
        ScheduleOutcome::Unschedulable(_)
    ));
    let unschedulable = |s: &SchedulerCache| {
        matches!(
            s.queue().state(&a.key()),
            Some(QueueState::Unschedulable { .. })
        )
    };
    // The scheduler's own Pending message: status only.
    let mut told = a.clone().resource_version("2").build();
    told.status.get_or_insert_with(Default::default).message = Some("full".into());
    state.apply(&told, NOW);
    assert!(unschedulable(&state), "status churn");
    // Someone annotates it: an update of the Run itself.
    let mut touched = told.clone();
    touched
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("touched".into(), "1".into());
    state.apply(&touched, NOW);
    assert_eq!(state.queue().state(&a.key()), Some(QueueState::Active));
}

#[test]
fn a_starved_workspace_run_is_nominated_only_its_workspaces_pod() {
    // p2 has fewer Runs to drain, but only p1 holds the workspace's data.
    let world = World::new()
        .pods([
            pod("p1").capacity(&[("runs", 2)]),
            pod("p2").capacity(&[("runs", 1)]),
        ])
        .workspaces([workspace("ws").bound("p1")])
        .runs([
            run("k").workspace("ws").on("p1"),
            run("y").on("p1"),
            run("x").on("p2"),
        ]);
    let mut cache = world.cache();
    let starved = run("s").workspace("ws").build();
    cache.apply(&starved, NOW);
    let queued = cache.queued(&starved);
    assert!(cache.nominate(&crate::scheduler::plugins::registry(), &queued, NOW));
    assert_eq!(cache.nominated_pod(NS, "uid-s"), Some("p1"));

    // A Run whose workspace does not exist yet gets no Pod drained for it.
    let missing = run("m").workspace("later").build();
    cache.apply(&missing, NOW);
    let queued = cache.queued(&missing);
    assert!(!cache.nominate(&crate::scheduler::plugins::registry(), &queued, NOW));
}

#[test]
fn a_workspace_event_wakes_the_runs_that_name_it_and_no_others() {
    let mut cache = World::new()
        .pods([pod("p1").capacity(&[("runs", 1)])])
        .runs([run("busy").on("p1")])
        .cache();
    for r in [
        run("plain"),
        run("waiting").workspace("ws"),
        run("other").runtime("bash").workspace("ws"),
    ] {
        let _ = cycle(&mut cache, &r);
    }
    let state = |cache: &SchedulerCache, name: &str, runtime: &str| {
        cache.queue().state(&run(name).runtime(runtime).key())
    };
    // The workspace appears, of Runtime python: both Runs naming it look again (the bash
    // one to fail), the plain Run stays where it is.
    cache.apply(&workspace("ws").build(), NOW);
    assert_eq!(state(&cache, "waiting", RUNTIME), Some(QueueState::Active));
    assert_eq!(state(&cache, "other", "bash"), Some(QueueState::Active));
    assert!(matches!(
        state(&cache, "plain", RUNTIME),
        Some(QueueState::Unschedulable { .. })
    ));
}

// ----- priority and preemption ----------------------------------------------------------

fn classes() -> [PriorityClassBuilder; 4] {
    [
        priority_class("urgent", 1000),
        priority_class("polite", 1000).preemption_never(),
        priority_class("batch", 0).preemptible(),
        priority_class("low", 10),
    ]
}

/// Runs cycles until none is due; returns the names of the Runs reserved, in order.
fn drain(cache: &mut SchedulerCache) -> Vec<String> {
    let mut placed = Vec::new();
    while let Some(s) = cache.schedule_next(&registry(), NOW) {
        if matches!(s.outcome, ScheduleOutcome::Reserved { .. }) {
            placed.push(s.run.metadata.name.clone().unwrap_or_default());
        }
    }
    placed
}

#[test]
fn the_queue_orders_by_priority_then_creation_then_uid() {
    let mut cache = World::new()
        .classes(classes())
        .pods([pod("p1").capacity(&[("runs", 10)])])
        .cache();
    for r in [
        run("old").created(1),
        run("low").created(3).priority_class("low"),
        run("urgent-late").created(9).priority_class("urgent"),
        run("urgent-early").created(2).priority_class("urgent"),
    ] {
        cache.apply(&r.build(), NOW);
    }
    assert_eq!(
        drain(&mut cache),
        ["urgent-early", "urgent-late", "low", "old"]
    );
}

#[test]
fn a_recorded_priority_orders_the_run_even_after_its_class_changes() {
    let mut cache = World::new()
        .classes([priority_class("c", 5)])
        .pods([pod("p1").capacity(&[("runs", 10)])])
        .cache();
    cache.apply(
        &run("a")
            .created(1)
            .priority_class("c")
            .priority(100)
            .build(),
        NOW,
    );
    cache.apply(&run("b").created(2).priority_class("c").build(), NOW);
    cache.apply(&run("z").created(0).build(), NOW);
    assert_eq!(drain(&mut cache), ["a", "b", "z"]);
}

#[test]
fn a_run_of_a_missing_class_waits_naming_it_and_the_class_wakes_and_reorders_it() {
    let mut cache = World::new()
        .pods([pod("p1").capacity(&[("runs", 1)])])
        .cache();
    let r = run("a").priority_class("urgent");
    let outcome = cycle(&mut cache, &r);
    let ScheduleOutcome::Unschedulable(u) = &outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        u.reason(),
        crate::api::status::reasons::PRIORITY_CLASS_NOT_FOUND
    );
    assert!(u.message().contains("\"urgent\""), "{}", u.message());
    assert!(cache.schedule_next(&registry(), NOW).is_none(), "it waits");
    // Another Run queued first at priority 0; the class makes `a` the head.
    cache.apply(&run("b").created(0).build(), NOW);
    cache.apply(&priority_class("urgent", 1000).build(), NOW);
    assert_eq!(cache.queue().get(&r.key()).unwrap().order.priority, 1000);
    assert_eq!(drain(&mut cache), ["a"]);
}

#[test]
fn a_higher_priority_run_preempts_the_fewest_least_important_scheduled_runs() {
    let mut cache = World::new()
        .classes(classes())
        .pods([
            pod("p1").capacity(&[("runs", 2)]),
            pod("p2").capacity(&[("runs", 2)]),
        ])
        .runs([
            run("p1-low").on("p1").priority(10),
            run("p1-zero").on("p1").priority(0),
            run("p2-mid").on("p2").priority(500),
            run("p2-zero").on("p2").priority(0),
        ])
        .cache();
    let urgent = run("u").priority_class("urgent");
    cache.apply(&urgent.build(), NOW);
    let s = cache.schedule_next(&registry(), NOW).unwrap();
    assert!(matches!(s.outcome, ScheduleOutcome::Unschedulable(_)));
    let preemption = s.preemption.expect("a preemption");
    // One victim is enough on either Pod, the priority-0 one (p1-low and p2-mid are given
    // back); the victims cost the same, so the Pod name decides.
    assert_eq!(preemption.pod, "p1");
    assert_eq!(
        preemption
            .victims
            .iter()
            .map(|v| (v.name.as_str(), v.admitted))
            .collect::<Vec<_>>(),
        [("p1-zero", false)]
    );
    assert_eq!(
        s.nominated.as_deref(),
        Some("p1"),
        "the room is held for it"
    );
    assert_eq!(s.priority, Some(1000));
    // The victim's write lands: it is Pending again, and the room on p1 goes to `u`, not
    // back to the victim.
    cache.apply(&run("p1-zero").priority(0).build(), NOW);
    assert_eq!(drain(&mut cache), ["u"]);
    assert_eq!(cache.assumed().get(&urgent.key()).unwrap().pod, "p1");
}

#[test]
fn running_runs_are_preempted_only_when_their_class_is_preemptible() {
    let world = World::new()
        .classes(classes())
        .pods([pod("p1").capacity(&[("runs", 1)])]);
    // A plain Running Run of priority 0: never a victim, but the urgent Run has room held.
    let mut cache = world
        .clone()
        .runs([run("plain").on("p1").running().priority(0)])
        .cache();
    cache.apply(&run("u").priority_class("urgent").build(), NOW);
    let s = cache.schedule_next(&registry(), NOW).unwrap();
    assert!(s.preemption.is_none(), "{:?}", s.preemption);
    assert_eq!(
        s.nominated.as_deref(),
        Some("p1"),
        "nominated at once by priority"
    );

    let mut cache = world
        .runs([run("batch")
            .on("p1")
            .running()
            .priority_class("batch")
            .priority(0)])
        .cache();
    cache.apply(&run("u").priority_class("urgent").build(), NOW);
    let s = cache.schedule_next(&registry(), NOW).unwrap();
    let victims = s.preemption.expect("a preemption").victims;
    assert_eq!(victims.len(), 1);
    assert!(victims[0].admitted && victims[0].level() == "running");
    // Asked to stop: the next cycle counts its room as leaving and preempts nothing more.
    cache.apply(
        &run("batch")
            .on("p1")
            .running()
            .priority_class("batch")
            .priority(0)
            .disruption_requested()
            .build(),
        NOW,
    );
    // The urgent Run looks again (a new version re-keys and activates it).
    cache.apply(&run("u").priority_class("urgent").created(5).build(), NOW);
    let s = cache
        .schedule_next(&registry(), NOW)
        .expect("the urgent Run is cycled");
    assert_eq!(s.run.metadata.name.as_deref(), Some("u"));
    assert!(
        s.preemption.is_none(),
        "no second preemption: {:?}",
        s.preemption
    );
    assert_eq!(s.nominated.as_deref(), Some("p1"), "still held for it");
}

#[test]
fn equal_priority_and_preemption_policy_never_preempt_nothing() {
    let mut cache = World::new()
        .classes(classes())
        .pods([pod("p1").capacity(&[("runs", 1)])])
        .runs([run("peer").on("p1").priority(1000)])
        .cache();
    cache.apply(&run("u").priority_class("urgent").build(), NOW);
    let s = cache.schedule_next(&registry(), NOW).unwrap();
    assert!(
        s.preemption.is_none(),
        "an equal priority is never a victim"
    );

    let mut cache = World::new()
        .classes(classes())
        .pods([pod("p1").capacity(&[("runs", 1)])])
        .runs([run("low").on("p1").priority(0)])
        .cache();
    cache.apply(&run("p").priority_class("polite").build(), NOW);
    let s = cache.schedule_next(&registry(), NOW).unwrap();
    assert!(s.preemption.is_none(), "preemptionPolicy: Never");
    assert_eq!(
        s.nominated.as_deref(),
        Some("p1"),
        "but room is held for it"
    );
}

#[test]
fn a_lower_priority_nomination_yields_to_a_higher_priority_run() {
    let mut cache = World::new()
        .classes(classes())
        .pods([pod("p1").capacity(&[("runs", 1)])])
        .runs([run("busy").on("p1").running().priority(2000)])
        .cache();
    cache.apply(&run("low").priority_class("low").build(), NOW);
    cache.apply(&run("zero").build(), NOW);
    // `low` outranks the waiting `zero`: nominated at once.
    let s = cache.schedule_next(&registry(), NOW).unwrap();
    assert_eq!(s.run.metadata.name.as_deref(), Some("low"));
    assert_eq!(s.nominated.as_deref(), Some("p1"));
    let u = run("u").priority_class("urgent");
    cache.apply(&u.build(), NOW);
    let s = drain_until(&mut cache, "u");
    assert_eq!(s.nominated.as_deref(), Some("p1"));
    assert_eq!(cache.nominated_pod(NS, "uid-low"), None, "low yielded");
    assert_eq!(cache.nominations().len(), 1);
}

fn drain_until(cache: &mut SchedulerCache, name: &str) -> Scheduled {
    while let Some(s) = cache.schedule_next(&registry(), NOW) {
        if s.run.metadata.name.as_deref() == Some(name) {
            return s;
        }
    }
    panic!("{name} was not cycled");
}
