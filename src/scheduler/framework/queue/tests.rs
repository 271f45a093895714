use super::*;
use crate::testing::{NS, RunBuilder, run};
use kube::ResourceExt;

fn at(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(1_700_000_000_000 + ms).unwrap()
}

/// A Pending Run with UID `uid` of Runtime `runtime`, created `created` seconds after the
/// epoch.
fn pending(uid: &str, created: i64, runtime: &str) -> RunBuilder {
    run(uid).uid(uid).created(created).runtime(runtime)
}

fn facts(run: &Run) -> Arc<RunFacts> {
    Arc::new(RunFacts::of(run))
}

fn key(uid: &str) -> RunKey {
    RunKey::new(NS, uid)
}

fn scope(runtime: &str) -> ScopeRef {
    ScopeRef::new(NS, runtime)
}

/// Observes the Run at priority 0 and files it, as the cache does for a Run that waits.
fn add(q: &mut SchedulingQueue, r: &RunBuilder, now: Timestamp) -> RunKey {
    let run = r.build();
    q.observe(&run, &facts(&run), QueueOrder::of(&run, 0), now);
    q.file(&RunKey::of(&run), true, now);
    RunKey::of(&run)
}

fn popped_uids(q: &mut SchedulingQueue, now: Timestamp) -> Vec<String> {
    std::iter::from_fn(|| q.pop(now).map(|p| p.run.key().uid.clone())).collect()
}

#[test]
fn a_runtime_pops_its_active_runs_in_queue_order_whatever_the_order_they_came_in() {
    let mut q = SchedulingQueue::default();
    for (created, uid) in [(3, "c"), (1, "b"), (1, "a"), (2, "d")] {
        add(&mut q, &pending(uid, created, "rt"), at(0));
    }
    assert_eq!(popped_uids(&mut q, at(0)), ["a", "b", "d", "c"]);
    assert!(q.is_empty());
    assert_eq!(
        q.observed().count(),
        4,
        "popped Runs stay stored while Pending"
    );
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
        add(&mut q, &pending(uid, created, rt), at(0));
    }
    assert_eq!(popped_uids(&mut q, at(0)), ["x1", "y1", "x2", "y2"]);
}

#[test]
fn an_unschedulable_run_waits_for_an_event_or_the_flush() {
    let mut q = SchedulingQueue::default();
    let k = add(&mut q, &pending("a", 1, "rt"), at(0));
    let popped = q.pop(at(0)).unwrap();
    q.unschedulable(popped.run.key(), 0, at(0));
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
    q.unschedulable(&k, 0, at(3_000));
    assert_eq!(q.next_due(), Some(at(3_000) + UNSCHEDULABLE_FLUSH));
    assert!(
        q.pop(at(3_000) + UNSCHEDULABLE_FLUSH - SignedDuration::from_millis(1))
            .is_none()
    );
    assert_eq!(
        q.pop(at(3_000) + UNSCHEDULABLE_FLUSH).unwrap().run.key(),
        &k
    );
}

#[test]
fn failures_back_off_from_200ms_doubling_to_10s_and_a_success_resets_them() {
    let mut q = SchedulingQueue::default();
    let k = add(&mut q, &pending("a", 1, "rt"), at(0));
    let mut delays = Vec::new();
    for _ in 0..10 {
        delays.push(q.backoff(&k, at(0)).as_millis());
        assert_eq!(q.state(&k).map(QueueState::as_str), Some("backoff"));
    }
    assert_eq!(
        delays,
        [
            200, 400, 800, 1600, 3200, 6400, 10_000, 10_000, 10_000, 10_000
        ]
    );
    assert!(q.pop(at(9_999)).is_none());
    assert_eq!(q.pop(at(10_000)).unwrap().run.key(), &k);
    q.forget_failures(&k);
    assert_eq!(q.backoff(&k, at(0)), INITIAL_BACKOFF);
}

#[test]
fn activate_moves_only_unschedulable_runs() {
    let mut q = SchedulingQueue::default();
    add(&mut q, &pending("a", 1, "rt"), at(0));
    let b = add(&mut q, &pending("b", 2, "rt"), at(0));
    q.backoff(&b, at(0));
    assert!(!q.activate(&key("a"), at(0)), "already active");
    assert!(!q.activate(&b, at(0)), "backoff is served by time");
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
    let a = add(&mut q, &pending("a", 1, "rt"), at(0));
    add(
        &mut q,
        &pending("b", 2, "rt").requires(&[("x", "y")]),
        at(0),
    );
    let c = add(&mut q, &pending("c", 3, "rt"), at(0));
    q.unschedulable(&a, 0, at(0));
    q.unschedulable(&c, 0, at(0));
    let states: Vec<(&str, &str)> = q
        .members(&s)
        .map(|(r, st)| (r.key().uid.as_str(), st.as_str()))
        .collect();
    assert_eq!(
        states,
        [
            ("a", "unschedulable"),
            ("b", "queued"),
            ("c", "unschedulable")
        ]
    );
    let d = pending("d", 4, "rt").build();
    assert_eq!(
        q.oldest_unschedulable_before(&s, &QueueOrder::of(&d, 0))
            .map(|r| r.key().uid.as_str()),
        Some("a")
    );
    let first = q.get(&a).unwrap().order.clone();
    assert!(q.oldest_unschedulable_before(&s, &first).is_none());
    let with_terms: Vec<&str> = q
        .members_with_required_terms(&s)
        .map(|(r, _)| r.key().uid.as_str())
        .collect();
    assert_eq!(with_terms, ["b"]);
    let popped = q.pop(at(0)).unwrap();
    q.unschedulable(popped.run.key(), 0, at(0));
    assert_eq!(
        q.members_with_required_terms(&s).count(),
        1,
        "kept across a cycle"
    );
    for uid in ["a", "b", "c"] {
        q.forget(&key(uid));
    }
    assert!(q.is_empty() && q.members(&s).next().is_none() && q.next_due().is_none());
    assert!(q.observed().next().is_none() && q.pending(&s).next().is_none());
}

#[test]
fn a_pending_run_is_stored_once_and_counts_in_its_queue_position_whether_filed_or_not() {
    let mut q = SchedulingQueue::default();
    for (uid, created) in [("a", 1), ("b", 2), ("c", 3)] {
        add(&mut q, &pending(uid, created, "rt"), at(0));
    }
    // b's Bind is in flight: out of the three sets, still Pending.
    q.file(&key("b"), false, at(0));
    assert!(!q.contains(&key("b")));
    assert_eq!(q.position(&key("b")), Some((2, 3)));
    assert_eq!(q.position(&key("c")), Some((3, 3)));
    let stored: Vec<&str> = q
        .pending(&scope("rt"))
        .map(|r| r.key().uid.as_str())
        .collect();
    assert_eq!(stored, ["a", "b", "c"]);
    assert_eq!(popped_uids(&mut q, at(0)), ["a", "c"]);
    q.forget(&key("a"));
    assert_eq!(q.position(&key("c")), Some((2, 2)));
    assert_eq!(q.position(&key("a")), None);
}

#[test]
fn status_churn_keeps_the_stored_run_and_a_change_to_the_run_replaces_it() {
    let mut q = SchedulingQueue::default();
    let b = pending("a", 1, "rt").requests(&[("runs", 2)]);
    let k = add(&mut q, &b, at(0));
    let first = q.get(&k).unwrap().clone();
    assert_eq!(first.request().as_ref().unwrap().get("runs"), 2);
    let churned = b.clone().nominated("p1").build();
    assert!(!q.observe(&churned, &facts(&churned), first.order.clone(), at(1)));
    assert!(Arc::ptr_eq(&first, q.get(&k).unwrap()), "status churn");
    let relabelled = b.clone().labels(&[("team", "a")]).build();
    assert!(q.observe(&relabelled, &facts(&relabelled), first.order.clone(), at(2)));
    let second = q.get(&k).unwrap();
    assert!(!Arc::ptr_eq(&first, second));
    assert_eq!(
        second.run.labels().get("team").map(String::as_str),
        Some("a")
    );
    assert!(q.contains(&k), "still filed");
}

#[test]
fn a_new_order_refiles_the_run_at_its_new_place_active() {
    let mut q = SchedulingQueue::default();
    let a = add(&mut q, &pending("a", 1, "rt"), at(0));
    let b = add(&mut q, &pending("b", 2, "rt").priority_class("high"), at(0));
    q.unschedulable(&b, 0, at(0));
    let high = |r: &Run| {
        let priority = if r.spec.priority_class_name.is_some() {
            10
        } else {
            0
        };
        QueueOrder::of(r, priority)
    };
    let moved = q.reorder(Some("high"), high, at(1));
    assert_eq!(
        moved.len(),
        2,
        "b names the class; a names none and follows the default"
    );
    assert_eq!(q.get(&b).unwrap().order.priority, 10);
    assert_eq!(q.state(&b), Some(QueueState::Active));
    assert_eq!(q.position(&b), Some((1, 2)));
    assert_eq!(q.get(&a).unwrap().order.priority, 0);
    assert_eq!(popped_uids(&mut q, at(1)), ["b", "a"]);
}

#[test]
fn a_recorded_priority_is_not_reordered_by_its_class() {
    let mut q = SchedulingQueue::default();
    let r = pending("a", 1, "rt").priority_class("high").priority(5);
    let k = add(&mut q, &r, at(0));
    assert!(q.get(&k).unwrap().priority_recorded);
    assert!(q.reorder(None, |r| QueueOrder::of(r, 10), at(1)).is_empty());
    assert_eq!(q.get(&k).unwrap().order.priority, 0);
}

#[test]
fn a_run_is_grouped_once_when_observed_and_anew_for_every_stored_run_when_the_runtime_regroups() {
    let mut q = SchedulingQueue::default();
    let team = |uid: &str, t: &str| pending(uid, 1, "rt").labels(&[("team", t)]);
    add(&mut q, &team("a", "x"), at(0));
    add(&mut q, &team("b", "y"), at(0));
    // By submitter (none recorded): both in the unnamed group.
    assert_eq!(q.get(&key("a")).unwrap().group, Group::new(""));
    // One Run is in its cycle (popped, not filed) when the Runtime starts grouping by label.
    let popped = q.pop(at(0)).unwrap().run;
    assert_eq!(popped.key(), &key("a"));
    let by_team = FairShare {
        label: Some("team".into()),
        ..FairShare::default()
    };
    q.set_fair_share(&scope("rt"), by_team);
    assert_eq!(q.get(&key("a")).unwrap().group, Group::new("x"));
    assert_eq!(q.get(&key("b")).unwrap().group, Group::new("y"));
    // Filed again after its cycle, it counts in its new group.
    q.unschedulable(&key("a"), 0, at(1));
    q.activate(&key("a"), at(2));
    let groups: Vec<Vec<String>> = q
        .members_by_group(&scope("rt"))
        .map(|members| members.map(|(r, _)| r.key().uid.clone()).collect())
        .collect();
    assert_eq!(groups, [["a"], ["b"]]);
}

#[test]
fn the_invariant_check_holds_through_filing_and_names_each_index_out_of_step() {
    let mut q = SchedulingQueue::default();
    let a = add(&mut q, &pending("a", 1, "rt"), at(0));
    let b = add(&mut q, &pending("b", 2, "rt"), at(0));
    let c = add(&mut q, &pending("c", 3, "other"), at(0));
    q.backoff(&b, at(0));
    q.unschedulable(&c, 1, at(0));
    assert_eq!(q.invariants(), Ok(()));
    // The check's own power: each index put out of step with the entries is caught.
    let order = |q: &SchedulingQueue, k: &RunKey| q.runs[k].order.clone();
    type Break = fn(&mut SchedulingQueue, &RunKey, QueueOrder);
    let breaks: [(&str, Break); 5] = [
        ("active set", |q, _, o| {
            q.scopes.get_mut(&scope("rt")).unwrap().active.remove(&o);
        }),
        ("group", |q, _, o| {
            for g in q.scopes.get_mut(&scope("rt")).unwrap().groups.values_mut() {
                g.remove(&o);
            }
        }),
        ("terms", |q, _, o| {
            q.scopes.get_mut(&scope("rt")).unwrap().terms.insert(o);
        }),
        ("ready", |q, _, _| {
            q.ready.clear();
        }),
        ("entry", |q, k, _| {
            q.entries.remove(k);
        }),
    ];
    for (what, break_it) in breaks {
        let mut broken = q.clone();
        break_it(&mut broken, &a, order(&q, &a));
        assert!(broken.invariants().is_err(), "{what} out of step passed");
    }
    let mut broken = q.clone();
    let (at_, key) = broken.backoff.pop_first().unwrap();
    broken.unschedulable.insert((at_, key));
    assert!(
        broken.invariants().is_err(),
        "a backoff Run on the wrong timeline passed"
    );
    q.forget(&a);
    q.forget(&b);
    q.forget(&c);
    assert_eq!(q.invariants(), Ok(()));
}
