//! `plan`'s tests, and the vocabulary of this agent's Pod they share with [`super::between`]'s.

use std::sync::Arc;

use kube::ResourceExt as _;

use super::*;
use crate::api::resources::RUNS;
use crate::testing::{NS, RunBuilder, run};

const GPU: &str = "example.com/gpu";
const T0: jiff::Timestamp = jiff::Timestamp::UNIX_EPOCH;

pub(super) fn me() -> Identity {
    Identity {
        pod_name: "pod-1".into(),
        namespace: NS.into(),
        pod_uid: "pod-uid-1".into(),
    }
}

/// The vocabulary of this agent's Pod on top of the shared builders.
pub(super) trait OnThisPod {
    /// Scheduled on this agent's Pod (`pod-1`, incarnation `pod-uid-1`).
    fn here(self) -> Self;
    fn arc(self) -> Arc<Run>;
}

impl OnThisPod for RunBuilder {
    fn here(self) -> Self {
        self.on("pod-1").pod_uid("pod-uid-1")
    }
    fn arc(self) -> Arc<Run> {
        Arc::new(self.build())
    }
}

/// No record yet, on a Pod of `capacity`.
pub(super) fn records(capacity: &[(&str, u64)]) -> Records {
    let mut r = Records::new();
    r.set_capacity(Some(capacity.iter().map(|&(k, v)| (k, v)).collect()));
    r
}

/// `records` with each of `runs` in `state`.
pub(super) fn with(mut records: Records, runs: &[&str], state: State) -> Records {
    for name in runs {
        records.set(&run(name).build(), state.clone());
    }
    records
}

pub(super) fn names(claims: &[Claim]) -> Vec<String> {
    claims.iter().map(|c| c.run.name_any()).collect()
}

/// The admission of a plan at [`T0`] (claiming, or draining: `claiming` false), no functions.
pub(super) fn admit(claiming: bool) -> Admit {
    admit_at(T0, claiming)
}

/// The admission of a plan at `now`.
pub(super) fn admit_at(now: jiff::Timestamp, claiming: bool) -> Admit {
    Admit {
        claiming,
        functions: false,
        now,
    }
}

/// `plan` for this agent's Pod.
pub(super) fn plan_here(runs: &[Arc<Run>], records: &mut Records, admit: Admit) -> Plan {
    plan(runs, &me(), records, admit)
}

/// What waits, by name and why.
fn waiting(p: &Plan) -> Vec<(String, String)> {
    p.waiting
        .iter()
        .map(|w| (w.run.name_any(), w.why.clone()))
        .collect()
}

#[test]
fn plan_claims_in_creation_order_up_to_capacity_and_leaves_the_rest_waiting() {
    let runs = vec![
        run("c").here().created(3).arc(),
        run("a").here().created(1).arc(),
        run("b").here().created(2).arc(),
    ];
    let mut c = records(&[(RUNS, 2)]);
    let p = plan_here(&runs, &mut c, admit(true));
    assert_eq!(names(&p.claims), ["a", "b"]);
    assert_eq!(
        waiting(&p),
        [(
            "c".to_string(),
            "insufficient runs: requested 1, 2 of 2 in use".to_string()
        )]
    );
    assert!(p.failures.is_empty() && p.kills.is_empty());
    assert_eq!(
        c.cache().used().get(RUNS),
        2,
        "claims hold their reservations"
    );
    assert_eq!(c.state("uid-a"), Some(&State::Claiming));
    assert!(matches!(c.state("uid-c"), Some(State::Waiting { .. })));
    c.check().unwrap();
}

#[test]
fn plan_breaks_a_creation_tie_by_uid_as_the_scheduler_places() {
    // Same priority and creation second: the scheduler's QueueOrder puts the smaller UID
    // first, whatever the names; a claim by name would take "a" first here.
    let runs = vec![
        run("a").uid("uid-2").here().created(1).arc(),
        run("b").uid("uid-1").here().created(1).arc(),
    ];
    let mut c = records(&[(RUNS, 1)]);
    let p = plan_here(&runs, &mut c, admit(true));
    assert_eq!(names(&p.claims), ["b"]);
}

#[test]
fn plan_does_not_let_a_big_run_block_a_smaller_one() {
    let runs = vec![
        run("big").here().created(1).requests(&[(GPU, 2)]).arc(),
        run("small").here().created(2).requests(&[(GPU, 1)]).arc(),
    ];
    let mut c = records(&[(RUNS, 4), (GPU, 1)]);
    let p = plan_here(&runs, &mut c, admit(true));
    assert_eq!(names(&p.claims), ["small"]);
    assert_eq!(p.waiting[0].run.name_any(), "big");
}

#[test]
fn plan_ignores_runs_of_other_pods_other_incarnations_and_owned_or_finished_runs() {
    let runs = vec![
        run("other-pod").on("pod-2").arc(),
        run("old-incarnation").on("pod-1").pod_uid("old-uid").arc(),
        run("no-uid-yet").on("pod-1").created(1).arc(),
        run("owned").here().arc(),
        run("finished").here().running().arc(),
        run("pending").arc(),
    ];
    let c = with(records(&[(RUNS, 10)]), &["owned"], State::Running);
    let mut c = with(c, &["finished"], State::Writing { next_attempt: None });
    let p = plan_here(&runs, &mut c, admit(true));
    assert_eq!(names(&p.claims), ["no-uid-yet"]);
    assert!(p.failures.is_empty(), "{:?}", p.failures);
    assert!(p.kills.is_empty());
}

#[test]
fn plan_claims_nothing_while_draining_or_before_capacity_is_known() {
    let runs = vec![run("a").here().arc()];
    let mut c = records(&[(RUNS, 1)]);
    assert!(plan_here(&runs, &mut c, admit(false),).claims.is_empty());
    assert!(c.cache().is_empty());
    let mut unknown = Records::new();
    let p = plan_here(&runs, &mut unknown, admit(true));
    assert!(p.claims.is_empty());
    assert_eq!(
        p.waiting[0].why,
        "the capacity of the Runtime Pod is not known yet"
    );
}

#[test]
fn plan_fails_invalid_requests_and_tasks_without_reserving() {
    let runs = vec![
        run("frac").here().request_strs(&[(GPU, "1.5")]).arc(),
        run("no-task").here().function("main.handler").arc(),
    ];
    let mut c = records(&[(RUNS, 4), (GPU, 4)]);
    let p = plan_here(&runs, &mut c, admit(true));
    let got: Vec<_> = p
        .failures
        .iter()
        .map(|f| (f.run.name_any(), f.reason))
        .collect();
    assert_eq!(
        got,
        [
            ("frac".to_string(), reasons::INVALID_RESOURCES),
            ("no-task".to_string(), reasons::START_FAILED)
        ]
    );
    assert!(
        p.failures[0]
            .message
            .contains("spec.resources.requests[\"example.com/gpu\"]: \"1.5\"")
    );
    assert!(p.failures[1].message.starts_with(
        "spec.mode.function: a function Run needs a Runtime whose Pods serve the runtime contract"
    ));
    assert!(c.cache().is_empty());
}

#[test]
fn plan_fails_running_runs_that_no_child_owns() {
    let runs = vec![
        run("left-over").here().running().arc(),
        run("mine").here().running().arc(),
    ];
    let mut c = with(records(&[(RUNS, 4)]), &["mine"], State::Running);
    let p = plan_here(&runs, &mut c, admit(false));
    assert_eq!(p.failures.len(), 1);
    assert_eq!(p.failures[0].run.name_any(), "left-over");
    assert_eq!(p.failures[0].reason, reasons::RUNTIMED_RESTARTED);
}

#[test]
fn plan_attaches_running_runs_the_runtime_server_still_runs_before_any_claim() {
    let runs = vec![
        run("still-runs").here().running().created(20).arc(),
        run("gone").here().running().created(30).arc(),
        // Earlier in the scheduler's order than the attached Run, and it would fit alone.
        run("next").here().created(10).arc(),
    ];
    let mut c = with(records(&[(RUNS, 1)]), &["still-runs"], State::Found);
    let p = plan_here(&runs, &mut c, admit(true));
    let attached: Vec<String> = p.attaches.iter().map(|a| a.run.name_any()).collect();
    assert_eq!(attached, ["still-runs"]);
    assert_eq!(
        c.reservation("uid-still-runs"),
        Some(&Resources::from_iter([(RUNS, 1)]))
    );
    assert_eq!(c.state("uid-still-runs"), Some(&State::Running));
    assert_eq!(p.failures.len(), 1);
    assert_eq!(
        (p.failures[0].run.name_any().as_str(), p.failures[0].reason),
        ("gone", reasons::RUNTIMED_RESTARTED)
    );
    assert!(p.claims.is_empty(), "the attached Run's room was taken");
    assert_eq!(p.waiting.len(), 1);

    // Held even when the Pod's capacity no longer has room for it.
    let mut full = with(records(&[(RUNS, 0)]), &["still-runs"], State::Found);
    let p = plan_here(&runs, &mut full, admit(false));
    assert_eq!(p.attaches.len(), 1);
    assert_eq!(full.cache().used(), &Resources::from_iter([(RUNS, 1)]));
}

/// An earlier runtimed started `started-here` and died before its held claim was written:
/// the Run is still Scheduled, and its execution is followed again, never claimed and started
/// a second time, ahead of a Run earlier in the order.
#[test]
fn plan_attaches_a_scheduled_run_whose_execution_was_found_and_never_claims_it_again() {
    let runs = vec![
        run("started-here").here().created(20).arc(),
        run("next").here().created(10).arc(),
    ];
    let mut c = with(records(&[(RUNS, 1)]), &["started-here"], State::Found);
    let p = plan_here(&runs, &mut c, admit(true));
    let attached: Vec<String> = p.attaches.iter().map(|a| a.run.name_any()).collect();
    assert_eq!(attached, ["started-here"]);
    assert_eq!(c.state("uid-started-here"), Some(&State::Running));
    assert!(
        p.claims.is_empty(),
        "neither claimed again nor given its room"
    );
    assert_eq!(p.waiting.len(), 1);
    assert!(p.failures.is_empty(), "never failed as RuntimedRestarted");
    c.check().unwrap();
}

#[test]
fn plan_cancels_a_scheduled_run_without_claiming_and_stops_a_running_one() {
    let runs = vec![
        run("cancelled-early").here().cancel_requested().arc(),
        run("cancelled-running")
            .here()
            .running()
            .cancel_requested()
            .arc(),
        run("bad-timeout").here().timeout("soon").arc(),
    ];
    let mut c = with(
        records(&[(RUNS, 4)]),
        &["cancelled-running"],
        State::Running,
    );
    // Also while draining: a cancel is not a claim.
    let p = plan_here(&runs, &mut c, admit(false));
    assert_eq!(p.failures.len(), 1);
    let f = &p.failures[0];
    assert_eq!(
        (f.run.name_any().as_str(), f.outcome, f.reason),
        ("cancelled-early", Outcome::Cancelled, reasons::CANCELLED)
    );
    assert_eq!(p.cancels, ["uid-cancelled-running"]);
    assert!(p.claims.is_empty());
    assert_eq!(c.reservation("uid-cancelled-early"), None);

    // An invalid spec.timeout fails the claim with the field and the value.
    let p = plan_here(&runs, &mut c, admit(true));
    let bad = p
        .failures
        .iter()
        .find(|f| f.run.name_any() == "bad-timeout");
    let bad = bad.expect("the Run with an invalid timeout fails");
    assert_eq!(bad.reason, reasons::START_FAILED);
    assert!(
        bad.message
            .starts_with("spec.timeout: \"soon\" is not a duration"),
        "{}",
        bad.message
    );
}

#[test]
fn plan_kills_children_whose_run_is_gone_deleting_reassigned_or_terminal() {
    let runs = vec![
        run("alive").here().running().arc(),
        run("deleting").here().running().deleting().arc(),
        run("moved").on("pod-2").running().arc(),
        run("done").on("pod-1").failed().arc(),
    ];
    let mut c = with(
        records(&[(RUNS, 4)]),
        &["alive", "deleting", "moved", "done", "gone"],
        State::Running,
    );
    let p = plan_here(&runs, &mut c, admit(true));
    assert_eq!(
        p.kills,
        ["uid-deleting", "uid-done", "uid-gone", "uid-moved"]
    );
}

#[test]
fn plan_never_claims_a_run_being_deleted() {
    let runs = vec![run("a").here().deleting().arc()];
    let mut c = records(&[(RUNS, 1)]);
    let p = plan_here(&runs, &mut c, admit(true));
    assert!(p.claims.is_empty() && p.failures.is_empty());
}

#[test]
fn plan_lets_go_of_records_it_no_longer_finds_a_use_for_with_their_room() {
    let one = Resources::from_iter([(RUNS, 1)]);
    let mut c = records(&[(RUNS, 4)]);
    // Held between attempts, then healed away (back in Pending): its room is freed.
    c.hold(&run("healed").build(), &one, State::BetweenAttempts);
    // Found on the runtime server, but its Run no longer runs here: nothing to attach.
    c = with(c, &["found"], State::Found);
    // Waited, and now fits: claimed, and remembered as having waited.
    assert!(c.wait(&run("now-fits").build(), "full"));
    let runs = vec![
        run("healed").pending().arc(),
        run("found").here().succeeded().arc(),
        run("now-fits").here().arc(),
    ];
    let p = plan_here(&runs, &mut c, admit(true));
    assert_eq!(names(&p.claims), ["now-fits"]);
    assert_eq!(c.state("uid-now-fits"), Some(&State::Claiming));
    assert!(
        c.get("uid-now-fits").unwrap().waited,
        "it gets an Admitted Event of its own"
    );
    assert_eq!(c.get("uid-healed"), None);
    assert_eq!(c.get("uid-found"), None);
    assert_eq!(c.cache().used().get(RUNS), 1, "only the claim holds room");
    c.check().unwrap();
}

#[test]
fn plan_never_claims_a_run_whose_last_write_still_holds_its_room() {
    // Preempted here and requeued; the scheduler placed it here again before the requeue's
    // write returned. Claiming it now would count its room twice, then free it with the
    // write: it waits for the write.
    let one = Resources::from_iter([(RUNS, 1)]);
    let mut c = records(&[(RUNS, 2)]);
    c.hold(
        &run("again").build(),
        &one,
        State::Writing { next_attempt: None },
    );
    let p = plan_here(&[run("again").here().arc()], &mut c, admit(true));
    assert!(p.claims.is_empty() && p.failures.is_empty(), "{p:?}");
    assert_eq!(c.cache().len(), 1);
    c.release("uid-again");
    c.observe(&[run("again").pending().arc()]);
    let p = plan_here(&[run("again").here().arc()], &mut c, admit(true));
    assert_eq!(names(&p.claims), ["again"]);
}
