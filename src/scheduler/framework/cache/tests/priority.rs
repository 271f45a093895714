//! Priority in the cache: queue order by priority, recorded and missing classes, preemption
//! and nominations.

use super::*;

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
fn an_unclaimed_run_inside_its_claim_window_is_nobodys_victim_until_the_window_ends() {
    // `fresh` was bound at NOW: runtimed may have started it with its claim held back, so it
    // is not preempted as unstarted (its class is not preemptible); the urgent Run has room
    // held and looks again when the window ends, when `fresh` is a level-1 victim.
    let window = jiff::SignedDuration::from_millis(2500);
    let mut cache = World::new()
        .classes(classes())
        .pods([pod("p1").capacity(&[("runs", 1)])])
        .runs([run("fresh").on("p1").bound_at(NOW).priority(0)])
        .cache()
        .with_claim_window(window);
    let urgent = run("u").priority_class("urgent");
    cache.apply(&urgent.build(), NOW);
    let s = cache.schedule_next(&registry(), NOW).unwrap();
    assert!(matches!(s.outcome, ScheduleOutcome::Unschedulable(_)));
    assert!(s.preemption.is_none(), "{:?}", s.preemption);
    assert_eq!(
        s.nominated.as_deref(),
        Some("p1"),
        "the room is held for it"
    );
    let plan = cache
        .preemption_plan(&registry(), &urgent.build(), NOW)
        .expect("a nomination");
    assert_eq!((plan.victims.len(), plan.retry_at), (0, Some(NOW + window)));
    assert_eq!(
        cache.queue().state(&urgent.key()),
        Some(QueueState::Backoff(NOW + window)),
        "tried again when the window ends, with no event to wake it"
    );

    let after = NOW + window;
    let s = cache
        .schedule_next(&registry(), after)
        .expect("the urgent Run is tried again");
    let victims = s.preemption.expect("a preemption").victims;
    assert_eq!(
        victims
            .iter()
            .map(|v| (v.name.as_str(), v.level()))
            .collect::<Vec<_>>(),
        [("fresh", "scheduled")]
    );

    // Without a window (no claim delay) it is a victim at once, as before.
    let mut cache = World::new()
        .classes(classes())
        .pods([pod("p1").capacity(&[("runs", 1)])])
        .runs([run("fresh").on("p1").bound_at(NOW).priority(0)])
        .cache()
        .with_claim_window(jiff::SignedDuration::ZERO);
    cache.apply(&urgent.build(), NOW);
    let s = cache.schedule_next(&registry(), NOW).unwrap();
    assert_eq!(s.preemption.expect("a preemption").victims.len(), 1);
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
