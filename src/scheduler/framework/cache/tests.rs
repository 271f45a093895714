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
        let mut cache = shared.lock();
        cache.apply(&p.build(), NOW);
        cache.apply(&p.build_lease().unwrap(), NOW);
    }
    let handles: Vec<_> = (0..4)
        .map(|w| {
            let shared = shared.clone();
            std::thread::spawn(move || {
                for i in 0..5 {
                    shared.lock().apply(&run(&format!("w{w}-{i}")).build(), NOW);
                }
                std::iter::from_fn(|| shared.lock().schedule_next(shared.registry(), NOW))
                    .filter(|s| matches!(s.outcome, ScheduleOutcome::Reserved { .. }))
                    .count()
            })
        })
        .collect();
    let reserved: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(reserved, 5, "exactly the 3 + 2 runs of capacity");
    assert_eq!(shared.lock().assumed().len(), 5);
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
fn a_pending_write_that_conflicts_keeps_the_runs_place_and_it_looks_again_on_the_version_it_met() {
    let x = run("x").running().on("p1");
    let mut state = World::new()
        .pods([pod("p1").capacity(&[("runs", 1)])])
        .runs([x.clone()])
        .cache();
    let (a, b) = (run("a").created(1), run("b").created(2));
    for r in [&a, &b] {
        assert!(matches!(
            cycle(&mut state, r),
            ScheduleOutcome::Unschedulable(_)
        ));
    }
    // a's "no room" write met a version of it the watch has not brought yet (its own earlier
    // message, say): it stays unschedulable, in its place.
    state.write_conflicted(NS, "uid-a", false, NOW);
    assert!(matches!(
        state.queue().state(&a.key()),
        Some(QueueState::Unschedulable { .. })
    ));
    // x ends: the room goes to the first Run in queue order, not to the one behind it.
    state.apply(&x.clone().succeeded().resource_version("2").build(), NOW);
    let next = state.schedule_next(&registry(), NOW).expect("woken");
    assert_eq!(next.run.metadata.name.as_deref(), Some("a"));
    assert_eq!(reserved_pod(&next.outcome), "p1");

    // The wake left b unschedulable (the room it freed is a's). b's write conflicts too: it
    // looks again once the version it met is observed, though that version changed only its
    // status (what the write said is not lost).
    assert!(matches!(
        state.queue().state(&b.key()),
        Some(QueueState::Unschedulable { .. })
    ));
    state.write_conflicted(NS, "uid-b", false, NOW);
    let mut met = b.clone().resource_version("3").build();
    met.status.get_or_insert_with(Default::default).message = Some("full".into());
    state.apply(&met, NOW);
    assert_eq!(state.queue().state(&b.key()), Some(QueueState::Active));
    // Once: the next status churn is churn again.
    assert!(matches!(
        state.schedule_next(&registry(), NOW).expect("b").outcome,
        ScheduleOutcome::Unschedulable(_)
    ));
    state.apply(&b.clone().resource_version("4").build(), NOW);
    assert!(matches!(
        state.queue().state(&b.key()),
        Some(QueueState::Unschedulable { .. })
    ));
    // A version already observed when the conflict is handled: it looks again at once.
    state.write_conflicted(NS, "uid-b", true, NOW);
    assert_eq!(state.queue().state(&b.key()), Some(QueueState::Active));
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

mod priority;

#[test]
fn one_record_of_a_runs_facts_serves_it_from_the_queue_to_its_pod() {
    let mut state = World::new()
        .pods([pod("p1").capacity(&[("runs", 2)])])
        .cache();
    let a = run("a").labels(&[("app", "x")]);
    state.apply(&a.build(), NOW);
    let queued = state.queue().get(&a.key()).unwrap().facts.clone();
    assert!(
        Arc::ptr_eq(&queued, state.index().facts(&a.key()).unwrap()),
        "the queue holds the record the index built"
    );
    assert_eq!(reserved_pod(&cycle(&mut state, &a)), "p1");
    let assumed = state.assumed().get(&a.key()).unwrap().facts.clone();
    assert!(Arc::ptr_eq(&queued, &assumed), "the assumption holds it");

    // The Bind's version changes nothing the facts hold: the active record is the same one.
    state.apply(&a.clone().on("p1").build(), NOW);
    let active = |state: &SchedulerCache| {
        state.index().active_runs(NS, "p1").unwrap()[&a.key().uid]
            .facts
            .clone()
    };
    assert!(
        Arc::ptr_eq(&queued, &active(&state)),
        "the active record holds it"
    );

    // A change to what the facts hold is a new record, wherever the Run is held.
    state.apply(&a.clone().labels(&[("app", "y")]).on("p1").build(), NOW);
    let relabelled = active(&state);
    assert!(!Arc::ptr_eq(&queued, &relabelled));
    assert_eq!(relabelled.labels["app"], "y");
    assert!(Arc::ptr_eq(
        &relabelled,
        state.index().facts(&a.key()).unwrap()
    ));
}

#[test]
fn a_resource_in_use_but_not_advertised_counts_once_the_pod_advertises_it() {
    const GPU: &str = "example.com/gpu";
    let x = run("x").requests(&[(GPU, 1)]).on("p1");
    let mut state = World::new()
        .pods([pod("p1").capacity(&[("runs", 4)])])
        .runs([x.clone()])
        .cache();
    let a = run("a").requests(&[(GPU, 1)]);
    assert!(
        matches!(cycle(&mut state, &a), ScheduleOutcome::Unschedulable(_)),
        "p1 advertises no GPU"
    );
    // Updated, still without one; then it advertises one, which x, bound by another
    // writer, already uses.
    state.apply(&pod("p1").capacity(&[("runs", 5)]).build(), NOW);
    state.apply(&pod("p1").capacity(&[("runs", 5), (GPU, 1)]).build(), NOW);
    let used = |state: &SchedulerCache| {
        let snapshot = state.snapshot(NS, RUNTIME, NOW);
        let p1 = snapshot.pod("p1").unwrap();
        (p1.used(GPU), p1.loads().count())
    };
    assert_eq!(used(&state), (1, 2));
    let next = state.schedule_next(&registry(), NOW).expect("a was woken");
    assert!(matches!(next.outcome, ScheduleOutcome::Unschedulable(_)));
    state.apply(&x.clone().succeeded().build(), NOW);
    assert_eq!(used(&state), (0, 2));
    let next = state.schedule_next(&registry(), NOW).expect("a was woken");
    assert_eq!(reserved_pod(&next.outcome), "p1");
}
