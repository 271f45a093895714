//! What [`Index::lost_runs`] and the heartbeat expiries decide: which Runs a lost Runtime
//! Pod loses, and when.

use jiff::SignedDuration;

use super::super::*;
use super::idx;
use crate::testing::*;

const GRACE: SignedDuration = SignedDuration::from_secs(40);
/// runtimed's default claim delay's window: 2.5 s.
const WINDOW: SignedDuration = SignedDuration::from_millis(2500);

fn lost(index: &mut Index, now: Timestamp) -> Vec<(String, bool, PodLoss)> {
    index
        .lost_runs(now, GRACE, WINDOW, NOW)
        .into_iter()
        .map(|l| (l.name, l.admitted, l.why))
        .collect()
}

#[test]
fn runs_on_a_healthy_pod_are_not_lost() {
    let mut index = idx(&[pod("p1").capacity(&[("runs", 4)])], &[]);
    index.apply_run(&run("s").on("p1").build());
    index.apply_run(&run("r").on("p1").running().build());
    assert_eq!(lost(&mut index, NOW), []);
}

#[test]
fn a_gone_or_replaced_pod_loses_every_run_at_once() {
    // Bound to p1's default incarnation, as Bind writes it.
    let runs = [
        run("s").on("p1").pod_uid("pod-uid-p1"),
        run("r").on("p1").pod_uid("pod-uid-p1").running(),
    ];
    let mut gone = idx(&[], &runs);
    assert_eq!(
        lost(&mut gone, NOW),
        [
            ("r".to_string(), true, PodLoss::Gone),
            ("s".to_string(), false, PodLoss::Gone)
        ]
    );
    let mut replaced = idx(&[pod("p1").uid("new-incarnation")], &runs);
    assert_eq!(
        lost(&mut replaced, NOW),
        [
            ("r".to_string(), true, PodLoss::Replaced),
            ("s".to_string(), false, PodLoss::Replaced)
        ]
    );
}

#[test]
fn a_terminating_pod_loses_unclaimed_runs_at_once_and_running_ones_after_the_grace() {
    let runs = [run("s").on("p1"), run("r").on("p1").running()];
    let mut index = idx(&[pod("p1").deleting()], &runs);
    // runtimed reports the Running one itself while its heartbeat lives.
    assert_eq!(
        lost(&mut index, NOW),
        [("s".to_string(), false, PodLoss::Terminating)]
    );
    // The heartbeat (renewed 5 s ago, 40 s) lapses at +35 s; the grace ends at +75 s.
    assert_eq!(lost(&mut index, at(74)).len(), 1);
    assert_eq!(
        lost(&mut index, at(75)),
        [
            ("r".to_string(), true, PodLoss::Terminating),
            ("s".to_string(), false, PodLoss::Terminating)
        ]
    );
}

#[test]
fn a_terminating_pod_loses_an_unclaimed_run_only_once_its_claim_window_has_passed() {
    // Bound at NOW: runtimed may have started its task and hold its claim until NOW + 2.5 s
    // (it writes that claim when it is told to stop), so until then it is not taken for
    // unstarted; one bound long before is.
    let runs = [
        run("fresh").on("p1").bound_at(NOW),
        run("old").on("p1").bound_at(at(-10)),
    ];
    let mut index = idx(&[pod("p1").deleting()], &runs);
    let in_window = NOW + SignedDuration::from_millis(2499);
    assert_eq!(
        lost(&mut index, in_window),
        [("old".to_string(), false, PodLoss::Terminating)]
    );
    assert_eq!(
        lost(&mut index, NOW + WINDOW),
        [
            ("fresh".to_string(), false, PodLoss::Terminating),
            ("old".to_string(), false, PodLoss::Terminating)
        ]
    );
    // Without a claim delay (a zero window) it is unstarted at once, as before.
    assert_eq!(
        index.lost_runs(NOW, GRACE, SignedDuration::ZERO, NOW).len(),
        2
    );
    // A Pod that is gone took any task with it: its Runs are placed again at once.
    let mut gone = idx(&[], &runs);
    assert_eq!(lost(&mut gone, NOW).len(), 2);
}

#[test]
fn a_heartbeat_stale_longer_than_the_grace_loses_the_pods_runs() {
    let mut index = idx(&[pod("p1")], &[run("r").on("p1").running()]);
    assert_eq!(lost(&mut index, at(74)), [], "within lease + grace");
    assert_eq!(
        lost(&mut index, at(75)),
        [("r".to_string(), true, PodLoss::HeartbeatStale)]
    );
    // A renewal observed in time keeps it: the term restarts at the observation.
    let uid = pod("p1").build().uid().unwrap();
    index.apply_lease(&lease("p1", &uid, 70, 40), at(70));
    assert_eq!(lost(&mut index, at(149)), []);
}

#[test]
fn a_missing_lease_counts_from_when_it_was_first_seen_missing() {
    let mut index = idx(&[pod("p1").no_lease()], &[run("r").on("p1").running()]);
    assert_eq!(
        lost(&mut index, at(10)),
        [],
        "first seen without a Lease at +10 s"
    );
    assert_eq!(lost(&mut index, at(49)), []);
    assert_eq!(
        lost(&mut index, at(50)),
        [("r".to_string(), true, PodLoss::HeartbeatStale)]
    );
    // A deleted Lease counts from the deletion.
    let mut index = idx(&[pod("p1")], &[run("r").on("p1").running()]);
    index.delete_lease(NS, "p1", at(5));
    assert_eq!(lost(&mut index, at(44)), []);
    assert_eq!(lost(&mut index, at(45)).len(), 1);
}

#[test]
fn freshness_is_judged_by_the_observers_clock() {
    let uid = pod("p1").build().uid().unwrap();
    let mut index = idx(&[pod("p1").no_lease()], &[]);
    // runtimed's clock is 120 s behind: its renewTime is already "expired" when seen.
    index.apply_lease(&lease("p1", &uid, -120, 40), at(0));
    index.apply_lease(&lease("p1", &uid, -110, 40), at(10));
    assert_eq!(
        index.lease(NS, "p1").unwrap().expires_at,
        Some(at(50)),
        "a renewal seen at +10 s lasts 40 s from then, whatever its renewTime says"
    );
    // Ahead by 120 s: a renewal cannot last longer than 40 s from when it was seen.
    let mut index = idx(&[pod("p1").no_lease()], &[]);
    index.apply_lease(&lease("p1", &uid, 120, 40), at(0));
    assert_eq!(index.lease(NS, "p1").unwrap().expires_at, Some(at(40)));
    // An unchanged Lease (a relist) keeps its expiry.
    index.apply_lease(&lease("p1", &uid, 120, 40), at(30));
    assert_eq!(index.lease(NS, "p1").unwrap().expires_at, Some(at(40)));
}

#[test]
fn expiries_wake_the_runtime_at_the_instant_and_name_the_next_one() {
    let index = idx(&[pod("p1"), pod("p2").lease_renewed_ago(20)], &[]);
    // p2 expires at +20 s, p1 (renewed 5 s ago) at +35 s.
    assert_eq!(index.next_expiry_after(NOW), Some(at(20)));
    assert_eq!(index.expired_between(NOW, at(19)), []);
    assert_eq!(
        index.expired_between(NOW, at(20)),
        [Wakeup {
            namespace: NS.into(),
            runtime: RUNTIME.into(),
            source: WakeSource::RuntimePod,
            pod: None,
        }]
    );
    assert_eq!(index.next_expiry_after(at(20)), Some(at(35)));
    assert_eq!(index.next_expiry_after(at(35)), None);
}

#[test]
fn a_pod_chosen_for_scale_down_counts_as_terminating() {
    let mut marked = pod("p1").build();
    marked
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(crate::api::ANNOTATION_SCALE_DOWN.into(), "true".into());
    let mut index = Index::new();
    index.apply_pod(&marked);
    assert!(index.pod(NS, "p1").unwrap().deleting);
}

#[test]
fn staleness_counts_only_from_when_the_watches_could_be_trusted() {
    let mut index = idx(&[pod("p1")], &[run("r").on("p1").running()]);
    // The heartbeat lapsed at +35 s, but the watches were broken until +60 s (an API
    // server outage hides renewals): the grace runs from +60 s.
    let lost = |index: &mut Index, now| index.lost_runs(now, GRACE, WINDOW, at(60)).len();
    assert_eq!(lost(&mut index, at(99)), 0);
    assert_eq!(lost(&mut index, at(100)), 1);
    // A Pod that is gone is lost at once, whatever the watches.
    let mut gone = idx(&[], &[run("r").on("p1").running()]);
    assert_eq!(gone.lost_runs(NOW, GRACE, WINDOW, at(60)).len(), 1);
}
