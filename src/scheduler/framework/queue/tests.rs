use super::*;

fn at(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(1_700_000_000_000 + ms).unwrap()
}

fn order(created: i64, uid: &str) -> QueueOrder {
    QueueOrder {
        priority: 0,
        created: Some(at(created * 1000)),
        uid: uid.to_string(),
    }
}

fn key(uid: &str) -> RunKey {
    RunKey::new("ns", uid)
}

fn scope(runtime: &str) -> ScopeRef {
    ScopeRef::new("ns", runtime)
}

fn popped_uids(q: &mut SchedulingQueue, now: Timestamp) -> Vec<String> {
    std::iter::from_fn(|| q.pop(now).map(|p| p.key.uid)).collect()
}

#[test]
fn a_runtime_pops_its_active_runs_in_queue_order_whatever_the_order_they_came_in() {
    let mut q = SchedulingQueue::default();
    for (created, uid) in [(3, "c"), (1, "b"), (1, "a"), (2, "d")] {
        q.add(&key(uid), &scope("rt"), &order(created, uid), false, at(0));
    }
    assert_eq!(popped_uids(&mut q, at(0)), ["a", "b", "d", "c"]);
    assert!(q.is_empty());
}

#[test]
fn runtimes_with_work_take_turns() {
    let mut q = SchedulingQueue::default();
    for (rt, uid, created) in [
        ("x", "x1", 1),
        ("x", "x2", 2),
        ("y", "y1", 3),
        ("y", "y2", 4),
    ] {
        q.add(&key(uid), &scope(rt), &order(created, uid), false, at(0));
    }
    assert_eq!(popped_uids(&mut q, at(0)), ["x1", "y1", "x2", "y2"]);
}

#[test]
fn an_unschedulable_run_waits_for_an_event_or_the_flush() {
    let mut q = SchedulingQueue::default();
    let (k, s, o) = (key("a"), scope("rt"), order(1, "a"));
    q.add(&k, &s, &o, false, at(0));
    let popped = q.pop(at(0)).unwrap();
    q.unschedulable(&popped.key, &s, &o, 0, at(0));
    assert_eq!(
        q.state(&k),
        Some(QueueState::Unschedulable {
            since: at(0),
            epoch: 0
        })
    );
    assert!(q.pop(at(1_000)).is_none(), "nothing made it fit");
    assert!(q.activate(&k, at(2_000)));
    let again = q.pop(at(2_500)).unwrap();
    assert_eq!(again.waited, SignedDuration::from_millis(500));
    q.unschedulable(&k, &s, &o, 0, at(3_000));
    assert_eq!(q.next_due(), Some(at(3_000) + UNSCHEDULABLE_FLUSH));
    assert!(
        q.pop(at(3_000) + UNSCHEDULABLE_FLUSH - SignedDuration::from_millis(1))
            .is_none()
    );
    assert_eq!(q.pop(at(3_000) + UNSCHEDULABLE_FLUSH).unwrap().key, k);
}

#[test]
fn failures_back_off_from_200ms_doubling_to_10s_and_a_success_resets_them() {
    let mut q = SchedulingQueue::default();
    let (k, s, o) = (key("a"), scope("rt"), order(1, "a"));
    let mut delays = Vec::new();
    for _ in 0..10 {
        delays.push(q.backoff(&k, &s, &o, at(0)).as_millis());
        assert_eq!(q.state(&k).map(QueueState::as_str), Some("backoff"));
    }
    assert_eq!(
        delays,
        [
            200, 400, 800, 1600, 3200, 6400, 10_000, 10_000, 10_000, 10_000
        ]
    );
    assert!(q.pop(at(9_999)).is_none());
    assert_eq!(q.pop(at(10_000)).unwrap().key, k);
    q.forget_failures(&k);
    assert_eq!(q.backoff(&k, &s, &o, at(0)), INITIAL_BACKOFF);
}

#[test]
fn activate_moves_only_unschedulable_runs() {
    let mut q = SchedulingQueue::default();
    let s = scope("rt");
    q.add(&key("a"), &s, &order(1, "a"), false, at(0));
    q.backoff(&key("b"), &s, &order(2, "b"), at(0));
    assert!(!q.activate(&key("a"), at(0)), "already active");
    assert!(!q.activate(&key("b"), at(0)), "backoff is served by time");
    assert!(!q.activate(&key("missing"), at(0)));
    assert_eq!(
        q.counts(),
        [("queued", 1), ("backoff", 1), ("unschedulable", 0)]
    );
}

#[test]
fn members_walk_every_state_in_order_and_the_bounded_wait_finds_the_oldest_unschedulable() {
    let mut q = SchedulingQueue::default();
    let s = scope("rt");
    q.unschedulable(&key("a"), &s, &order(1, "a"), 0, at(0));
    q.add(&key("b"), &s, &order(2, "b"), true, at(0));
    q.unschedulable(&key("c"), &s, &order(3, "c"), 0, at(0));
    let states: Vec<(&str, &str)> = q
        .members(&s)
        .map(|(o, st)| (o.uid.as_str(), st.as_str()))
        .collect();
    assert_eq!(
        states,
        [
            ("a", "unschedulable"),
            ("b", "queued"),
            ("c", "unschedulable")
        ]
    );
    assert_eq!(
        q.oldest_unschedulable_before(&s, &order(4, "d"))
            .map(|o| o.uid.as_str()),
        Some("a")
    );
    assert_eq!(q.oldest_unschedulable_before(&s, &order(1, "a")), None);
    let with_terms: Vec<&str> = q
        .members_with_required_terms(&s)
        .map(|(o, _)| o.uid.as_str())
        .collect();
    assert_eq!(with_terms, ["b"]);
    let popped = q.pop(at(0)).unwrap();
    q.unschedulable(&popped.key, &s, &popped.order, 0, at(0));
    assert_eq!(
        q.members_with_required_terms(&s).count(),
        1,
        "kept across a cycle"
    );
    q.remove(&key("a"));
    q.remove(&key("b"));
    q.remove(&key("c"));
    assert!(q.is_empty() && q.members(&s).next().is_none() && q.next_due().is_none());
}

#[test]
fn a_capacity_walk_mark_travels_with_the_pop_and_is_dropped_by_any_other_state() {
    let mut q = SchedulingQueue::default();
    let (s, o) = (scope("rt"), order(1, "a"));
    q.add(&key("a"), &s, &o, false, at(0));
    q.count_on(&key("a"), "p1");
    q.count_on(&key("a"), "p2");
    let marks: Vec<String> = q.pop(at(0)).unwrap().counted_on.into_iter().collect();
    assert_eq!(marks, ["p1", "p2"]);
    q.backoff(&key("a"), &s, &o, at(0));
    assert!(q.pop(at(1_000)).unwrap().counted_on.is_empty());
}
