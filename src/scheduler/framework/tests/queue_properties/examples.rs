//! Example cases of queue order and nominations, on the simulated Runtime of the properties
//! or a plain cache: who is popped first, who waits behind whom, who gets a nomination and
//! the room held for it, and which release or bind wakes whom.

use super::*;

fn state(cache: &SchedulerCache, r: &RunBuilder) -> Option<QueueState> {
    cache.queue().state(&r.key())
}

fn unschedulable(state: Option<QueueState>) -> bool {
    matches!(state, Some(QueueState::Unschedulable { .. }))
}

#[test]
fn the_loop_pops_the_oldest_waiting_run_first() {
    let mut sim = Sim::new(1);
    let later = run("later").created(EPOCH + 1);
    sim.cache.apply(&later.build(), sim.at());
    let first = sim.arrive(1);
    let popped = sim.step().unwrap().expect("a Run is due");
    assert_eq!(
        popped.run.metadata.name.as_deref(),
        Some(format!("r{first:04}").as_str()),
        "created earlier, queued later: still first"
    );
}

#[test]
fn a_run_that_does_not_fit_does_not_block_the_ones_behind_it() {
    let mut sim = Sim::new(2);
    let big = sim.arrive(3);
    let small = sim.arrive(1);
    sim.cycle_all().unwrap();
    assert!(sim.runs[small].on.is_some(), "best-effort FIFO");
    assert!(sim.runs[big].on.is_none());
    assert!(unschedulable(state(&sim.cache, &sim.runs[big].builder)));
}

#[test]
fn a_starved_run_is_nominated_and_later_runs_leave_its_room() {
    let mut sim = Sim::new(2);
    // Both Pods half full.
    for _ in 0..2 {
        sim.arrive(1);
    }
    sim.cycle_all().unwrap();
    assert!(sim.runs.iter().all(|r| r.on.is_some()));
    let big = sim.arrive(2);
    sim.cycle_all().unwrap();
    assert!(sim.runs[big].on.is_none());
    // Past the threshold, a later small Run is placed: the big one gets a nomination.
    sim.now = THRESHOLD + 1;
    let later = sim.arrive(1);
    let placed = sim.step().unwrap().expect("the later Run's cycle");
    assert!(matches!(placed.outcome, ScheduleOutcome::Reserved { .. }));
    let key = sim.runs[big].builder.key();
    let nominated = sim
        .cache
        .nominated_pod(&key.namespace, &key.uid)
        .map(str::to_string)
        .expect("nominated");
    // The later Run went to the other Pod: the nominated one has room held for the big Run.
    let (later_pod, _) = sim.runs[later]
        .on
        .clone()
        .expect("the later Run was placed");
    assert_ne!(later_pod, nominated);
    // The big Run looks again so its status names the Pod.
    assert_eq!(
        state(&sim.cache, &sim.runs[big].builder),
        Some(QueueState::Active)
    );
    let told = sim.step().unwrap().expect("the big Run's cycle");
    assert!(matches!(told.outcome, ScheduleOutcome::Unschedulable(_)));
    assert_eq!(told.nominated.as_deref(), Some(nominated.as_str()));
    // The nominated Pod drains: the first Run there finishes, and a new small Run arrives
    // at once. The big Run goes first, to the drained Pod.
    let on_nominated = (0..2)
        .find(|&i| {
            sim.runs[i]
                .on
                .as_ref()
                .is_some_and(|(p, _)| *p == nominated)
        })
        .unwrap();
    sim.finish(on_nominated);
    sim.arrive(1);
    sim.cycle_all().unwrap();
    assert_eq!(
        sim.runs[big].on.as_ref().map(|(p, _)| p.clone()),
        Some(nominated)
    );
    assert!(
        sim.cache.nominations().is_empty(),
        "placed: the nomination is gone"
    );
}

#[test]
fn a_nominated_run_placed_on_another_pod_frees_the_room_held_for_it() {
    // p1 has one slot free, held for the large Run nominated there; p2 is full.
    let world = World::new().pods(pods(&PODS, &[("runs", 2)])).runs([
        run("x").on("p1").running(),
        run("w").requests(&[("runs", 2)]).on("p2").running(),
    ]);
    let mut cache = world.cache();
    let big = run("big")
        .requests(&[("runs", 2)])
        .created(EPOCH)
        .nominated("p1");
    assert!(matches!(
        schedule_one(&mut cache, &big),
        ScheduleOutcome::Unschedulable(_)
    ));
    assert_eq!(cache.nominated_pod(NS, &big.key().uid), Some("p1"));
    let later = run("later").created(EPOCH + 1);
    assert!(matches!(
        schedule_one(&mut cache, &later),
        ScheduleOutcome::Unschedulable(_)
    ));
    // p2 frees: its walk wakes the large Run, which takes all of p2's room.
    cache.apply(
        &run("w")
            .requests(&[("runs", 2)])
            .on("p2")
            .succeeded()
            .build(),
        NOW,
    );
    assert!(unschedulable(state(&cache, &later)));
    let placed = cache
        .schedule_next(&registry(), NOW)
        .expect("the large Run");
    assert!(
        matches!(&placed.outcome, ScheduleOutcome::Reserved { pod, .. } if pod == "p2"),
        "{:?}",
        placed.outcome
    );
    // The slot held for it on p1 is free again: the Run it kept waiting looks again.
    assert_eq!(
        state(&cache, &later),
        Some(QueueState::Active),
        "the room held on p1 was freed without waking the Run it kept waiting"
    );
    match cache.schedule_next(&registry(), NOW).map(|s| s.outcome) {
        Some(ScheduleOutcome::Reserved { pod, .. }) => assert_eq!(pod, "p1"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn room_held_for_a_nominated_run_in_backoff_is_not_offered_to_a_later_run() {
    // p1 is full; the large Run is nominated there and then backs off (a failed write). A
    // slot frees on p1: the walk passes the large Run by (backoff), but the room it holds is
    // still not the later Run's to take, so the later Run is not woken for it.
    let world = World::new()
        .pods([pod("p1").capacity(&[("runs", 2)])])
        .runs([run("x").on("p1").running(), run("y").on("p1").running()]);
    let mut cache = world.cache();
    let big = run("big")
        .requests(&[("runs", 2)])
        .created(EPOCH)
        .nominated("p1");
    let later = run("later").created(EPOCH + 1);
    for r in [&big, &later] {
        assert!(matches!(
            schedule_one(&mut cache, r),
            ScheduleOutcome::Unschedulable(_)
        ));
    }
    assert_eq!(cache.nominated_pod(NS, &big.key().uid), Some("p1"));
    assert!(cache.retry(NS, &big.key().uid, false, NOW).is_some());
    assert!(matches!(state(&cache, &big), Some(QueueState::Backoff(_))));
    cache.apply(&run("x").on("p1").succeeded().build(), NOW);
    assert!(
        unschedulable(state(&cache, &later)),
        "the later Run was offered the room held for the nominated Run"
    );
    assert_eq!(cache.nominated_pod(NS, &big.key().uid), Some("p1"));
}

#[test]
fn a_release_wakes_only_the_runs_its_room_can_help_in_order() {
    let mut sim = Sim::new(2);
    for _ in 0..4 {
        sim.arrive(1);
    }
    sim.cycle_all().unwrap();
    let big = sim.arrive(2);
    let small: Vec<usize> = (0..3).map(|_| sim.arrive(1)).collect();
    sim.cycle_all().unwrap();
    sim.cache.take_wake_counts();
    sim.finish(0);
    // One slot free: the big Run does not fit it, the oldest small one does, and nothing
    // after it (the slot is taken in the walk).
    let states: Vec<bool> = std::iter::once(big)
        .chain(small.iter().copied())
        .map(|i| unschedulable(state(&sim.cache, &sim.runs[i].builder)))
        .collect();
    assert_eq!(states, [true, false, true, true]);
    assert_eq!(sim.cache.take_wake_counts().capacity_released, 1);
}

#[test]
fn room_a_woken_run_did_not_take_is_offered_to_the_next() {
    // Both Pods full; then one slot frees on each. Each release's walk counts the oldest
    // Pending Run against its room (it fits either), so the second Run is woken by neither;
    // once the first is placed on one Pod, the other Pod's room goes to the second.
    let mut sim = Sim::new(1);
    for _ in 0..2 {
        sim.arrive(1);
    }
    sim.cycle_all().unwrap();
    let (first, second) = (sim.arrive(1), sim.arrive(1));
    sim.cycle_all().unwrap();
    sim.finish(0);
    sim.finish(1);
    assert_eq!(
        state(&sim.cache, &sim.runs[first].builder),
        Some(QueueState::Active)
    );
    assert!(unschedulable(state(&sim.cache, &sim.runs[second].builder)));
    sim.step().unwrap().expect("the first Run's cycle");
    assert!(sim.runs[first].on.is_some());
    assert_eq!(
        state(&sim.cache, &sim.runs[second].builder),
        Some(QueueState::Active),
        "the other Pod's room is walked again"
    );
    sim.cycle_all().unwrap();
    assert!(sim.runs[second].on.is_some());
    assert!(sim.cache.queue().is_empty());
}

#[test]
fn a_new_leader_adopts_the_nomination_recorded_in_status() {
    // Both Pods half full: the large Run fits on neither.
    let world = World::new()
        .pods([
            pod("p1").capacity(&[("runs", 2)]),
            pod("p2").capacity(&[("runs", 2)]),
        ])
        .runs([run("x").on("p1"), run("y").on("p2")]);
    let mut cache = world.cache();
    let mut big: Run = run("big").requests(&[("runs", 2)]).created(EPOCH).build();
    big.status
        .get_or_insert_with(Default::default)
        .nominated_pod_name = Some("p2".into());
    cache.apply(&big, NOW);
    assert_eq!(
        cache.nominated_pod(NS, &RunKey::of(&big).uid),
        Some("p2"),
        "adopted from status"
    );
    let told = cache.schedule_next(&registry(), NOW).unwrap();
    assert!(matches!(told.outcome, ScheduleOutcome::Unschedulable(_)));
    assert_eq!(
        told.nominated.as_deref(),
        Some("p2"),
        "kept: p2 can take it"
    );
    // Later Runs see p2 as full: the first goes to p1, the second waits and is told why.
    let later = run("later").created(EPOCH + 1);
    match schedule_one(&mut cache, &later) {
        ScheduleOutcome::Reserved { pod, .. } => assert_eq!(pod, "p1"),
        other => panic!("{other:?}"),
    }
    match schedule_one(&mut cache, &run("last").created(EPOCH + 2)) {
        ScheduleOutcome::Unschedulable(u) => assert_eq!(
            u.message(),
            "0/2 Runtime Pods are available: 1 Insufficient runs, 1 reserved for an earlier Run."
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_nominated_run_goes_to_its_nominated_pod_when_it_fits_there() {
    // Two empty Pods score alike; without the nomination p1 (the first name) would win.
    let mut cache = World::new()
        .pods([
            pod("p1").capacity(&[("runs", 2)]),
            pod("p2").capacity(&[("runs", 2)]),
        ])
        .cache();
    let mut big: Run = run("big").requests(&[("runs", 2)]).created(EPOCH).build();
    big.status
        .get_or_insert_with(Default::default)
        .nominated_pod_name = Some("p2".into());
    cache.apply(&big, NOW);
    let scheduled = cache.schedule_next(&registry(), NOW).unwrap();
    match scheduled.outcome {
        ScheduleOutcome::Reserved { pod, .. } => assert_eq!(pod, "p2"),
        other => panic!("{other:?}"),
    }
    assert!(cache.nominations().is_empty());
}

#[test]
fn a_release_wakes_past_a_run_that_affinity_may_refuse() {
    let mut cache = World::new()
        .pods([pod("p1").capacity(&[("runs", 1)])])
        .runs([run("x").on("p1")])
        .cache();
    let picky = run("picky").requires(&[("cohort", "a")]).created(EPOCH);
    let plain = run("plain").created(EPOCH + 1);
    for r in [&picky, &plain] {
        assert!(matches!(
            schedule_one(&mut cache, r),
            ScheduleOutcome::Unschedulable(_)
        ));
    }
    cache.apply(&run("x").on("p1").succeeded().build(), NOW);
    // The picky Run fits the room but may be refused for its terms: it is woken without
    // taking the room, so the plain one is woken too.
    assert_eq!(state(&cache, &picky), Some(QueueState::Active));
    assert_eq!(state(&cache, &plain), Some(QueueState::Active));
}

#[test]
fn a_bind_looks_again_only_at_runs_waiting_for_affinity_targets() {
    let mut cache = World::new()
        .pods([pod("p1").capacity(&[("runs", 4)])])
        .cache();
    let picky = run("picky").requires(&[("cohort", "a")]).created(EPOCH);
    let huge = run("huge").requests(&[("runs", 5)]).created(EPOCH + 1);
    for r in [&picky, &huge] {
        assert!(matches!(
            schedule_one(&mut cache, r),
            ScheduleOutcome::Unschedulable(_)
        ));
    }
    // A Run of the cohort is observed bound: new targets, no new room.
    let changes = cache.apply(
        &run("seed").labels(&[("cohort", "a")]).on("p1").build(),
        NOW,
    );
    assert_eq!(changes.retargets, [ScopeRef::new(NS, RUNTIME)]);
    assert!(changes.rechecks.is_empty() && changes.wakeups.is_empty());
    assert_eq!(state(&cache, &picky), Some(QueueState::Active));
    assert!(unschedulable(state(&cache, &huge)));
}

#[test]
fn a_run_being_deleted_leaves_the_queue_and_is_not_placed_ahead_of_later_ones() {
    let mut cache = World::new()
        .pods([pod("p1").capacity(&[("runs", 1)])])
        .cache();
    let first = run("first").created(EPOCH);
    let later = run("later").created(EPOCH + 1);
    cache.apply(&first.build(), NOW);
    cache.apply(&later.build(), NOW);
    // The earlier Run is being deleted (its finalizers hold it): it waits for nothing.
    cache.apply(&first.clone().deleting().build(), NOW);
    assert_eq!(state(&cache, &first), None);
    match cache.schedule_next(&registry(), NOW).unwrap().outcome {
        ScheduleOutcome::Reserved { pod, .. } => assert_eq!(pod, "p1"),
        other => panic!("{other:?}"),
    }
}
