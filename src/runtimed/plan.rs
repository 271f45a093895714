//! The agent's decisions, as a pure function of what it has observed: which assigned Runs to
//! claim (reserving them in the [`AdmissionCache`]), which to fail, which children to kill.
//!
//! No client, no async, no clock. The agent ([`super::agent`]) performs what [`plan`] returns;
//! this module never performs anything itself.

use std::collections::HashSet;
use std::sync::Arc;

use kube::ResourceExt as _;

use super::Identity;
use super::admission::AdmissionCache;
use super::executor;
use crate::api::retry;
use crate::api::status::{self, Outcome, reasons};
use crate::api::{QueueOrder, Resources, Run, RunPhase};

/// A Scheduled Run whose complete request has been reserved; the agent claims it next.
#[derive(Debug, Clone)]
pub struct Claim {
    pub run: Arc<Run>,
    pub request: Resources,
    pub task: executor::Prepared,
    /// `Some(attempt)`: not a first claim but the start of attempt `attempt` of a Run that
    /// waited out its backoff on this Pod, holding its reservation
    /// ([`status::set_retrying`]).
    pub retry: Option<i32>,
}

/// A Run left Running by an earlier runtimed whose execution the runtime server still holds:
/// its request is held again and the agent follows the execution instead of failing it.
#[derive(Debug, Clone)]
pub struct Attach {
    pub run: Arc<Run>,
    pub request: Resources,
}

/// A Run to end without running it (Failed, or Cancelled for a cancel request).
#[derive(Debug, Clone)]
pub struct Failure {
    pub run: Arc<Run>,
    pub outcome: Outcome,
    pub reason: &'static str,
    pub message: String,
}

/// What the agent should do now, in this order: kill, fail, claim.
#[derive(Debug, Default)]
pub struct Plan {
    /// UIDs of children whose Run is gone, reassigned or already terminal.
    pub kills: Vec<String>,
    /// UIDs of children whose Run the scheduler preempts (`DisruptionTarget`): stopped
    /// within the grace period, then sent back to Pending for their next attempt.
    pub stops: Vec<String>,
    /// UIDs of children whose Run has `cancelRequested`: stopped within the grace period,
    /// then ended Cancelled.
    pub cancels: Vec<String>,
    pub failures: Vec<Failure>,
    /// Runs to follow again on the runtime server; each already holds its reservation.
    pub attaches: Vec<Attach>,
    /// In the scheduler's order; each one already holds its reservation.
    pub claims: Vec<Claim>,
    /// Scheduled Runs left untouched because they do not fit now, with why.
    pub waiting: Vec<(String, String)>,
    /// UIDs of Runs between two attempts on this Pod (a failed attempt's backoff): each holds
    /// its reservation; its retry is in `claims` once the backoff has passed.
    pub backing_off: HashSet<String>,
    /// When the earliest backoff still running ends: plan again then.
    pub next_retry: Option<jiff::Timestamp>,
}

/// What the agent may admit now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admit {
    /// Claim Scheduled Runs (false while draining).
    pub claiming: bool,
    /// The Pod has a runtime server, so function Runs can be registered.
    pub functions: bool,
    /// The wall clock, against which backoffs recorded in the Runs' conditions end.
    pub now: jiff::Timestamp,
}

/// Whether `run` is assigned to this agent's Pod: `status.assignedPod` is the Pod and
/// `status.assignedPodUID`, when set, is this incarnation of it.
pub fn assigned_to(run: &Run, me: &Identity) -> bool {
    let Some(status) = &run.status else {
        return false;
    };
    status.assigned_pod.as_deref() == Some(me.pod_name.as_str())
        && status
            .assigned_pod_uid
            .as_deref()
            .is_none_or(|uid| uid == me.pod_uid)
}

/// Decides what to do about `runs` (every Run the agent currently sees; others' are ignored).
///
/// - `owned`: UIDs of Runs whose process this agent runs; `finished`: UIDs it has already
///   written a terminal status for (the watch may still show them active).
/// - A child whose Run is missing, deleted, reassigned or terminal is killed.
/// - A Running Run on this Pod that no child owns was left by an earlier runtimed: when its
///   UID is `attachable` (the runtime server still holds its execution) its request is held
///   again, whatever the Pod's capacity now says, and it is attached; otherwise it is failed
///   with [`reasons::RUNTIMED_RESTARTED`]. These come before any claim, so a claim never
///   takes the room of a Run that still runs.
/// - A child whose Run the scheduler preempts is to be stopped (`stops`).
/// - When `claiming`, Scheduled Runs are taken in the scheduler's order (priority, creation,
///   UID; [`QueueOrder`]): an invalid request or task fails the Run; otherwise its complete request is
///   reserved and the Run is claimed, or, when it does not fit, left untouched. A Run that does not fit does not block
///   smaller Runs behind it.
pub fn plan(
    runs: &[Arc<Run>],
    me: &Identity,
    owned: &HashSet<String>,
    finished: &HashSet<String>,
    attachable: &HashSet<String>,
    cache: &mut AdmissionCache,
    admit: Admit,
) -> Plan {
    let Admit {
        claiming,
        functions,
        now: _,
    } = admit;
    let mut out = Plan::default();
    let mine: Vec<&Arc<Run>> = runs.iter().filter(|r| assigned_to(r, me)).collect();

    let live: HashSet<String> = mine
        .iter()
        .filter(|r| r.metadata.deletion_timestamp.is_none() && !r.phase().is_terminal())
        .filter_map(|r| r.uid())
        .collect();
    let mut kills: Vec<String> = owned
        .iter()
        .filter(|uid| !live.contains(*uid))
        .cloned()
        .collect();
    kills.sort();
    out.kills = kills;
    let mut stops: Vec<String> = mine
        .iter()
        .filter(|r| r.status.as_ref().is_some_and(status::disruption_requested))
        .filter_map(|r| r.uid())
        .filter(|uid| live.contains(uid) && owned.contains(uid))
        .collect();
    stops.sort();
    out.stops = stops;
    let mut cancels: Vec<String> = mine
        .iter()
        .filter(|r| r.spec.cancel_requested)
        .filter_map(|r| r.uid())
        .filter(|uid| live.contains(uid) && owned.contains(uid))
        .collect();
    cancels.sort();
    out.cancels = cancels;

    let mut candidates: Vec<&Arc<Run>> = mine
        .into_iter()
        .filter(|r| {
            r.uid()
                .is_some_and(|uid| !owned.contains(&uid) && !finished.contains(&uid))
        })
        .collect();
    // The scheduler's order (priority recorded with the Bind, creation, UID): the one
    // comparator both use, so a tie is broken the same way on both sides.
    candidates.sort_by_cached_key(|r| QueueOrder::recorded(r));

    for run in candidates
        .iter()
        .copied()
        .filter(|r| r.phase().is_admitted())
    {
        let uid = run.uid().unwrap_or_default();
        let request = run.request();
        if let (Some(_), Ok(request)) = (run.status.as_ref().and_then(status::in_backoff), &request)
        {
            between_attempts(run, request, me, cache, admit, &mut out);
            continue;
        }
        match request {
            Ok(request) if attachable.contains(&uid) => {
                cache.hold(&uid, &request);
                out.attaches.push(Attach {
                    run: run.clone(),
                    request,
                });
            }
            // A function Run's registration lived in the runtimed that is gone, too.
            _ => out.failures.push(Failure {
                run: run.clone(),
                outcome: Outcome::Failed,
                reason: reasons::RUNTIMED_RESTARTED,
                message: format!(
                    "runtimed on Pod {} restarted while this Run was running; its process is gone",
                    me.pod_name
                ),
            }),
        }
    }
    for run in candidates {
        match run.phase() {
            // Cancelled before it started: ended here, never claimed (also while draining).
            RunPhase::Scheduled
                if run.spec.cancel_requested && run.metadata.deletion_timestamp.is_none() =>
            {
                out.failures.push(Failure {
                    run: run.clone(),
                    outcome: Outcome::Cancelled,
                    reason: reasons::CANCELLED,
                    message: format!(
                        "cancelled (spec.cancelRequested) before runtimed on Pod {} started it",
                        me.pod_name
                    ),
                });
            }
            RunPhase::Scheduled if claiming && run.metadata.deletion_timestamp.is_none() => {
                let request = match run.request() {
                    Ok(request) => request,
                    Err(err) => {
                        out.failures.push(Failure {
                            run: run.clone(),
                            outcome: Outcome::Failed,
                            reason: reasons::INVALID_RESOURCES,
                            message: err.to_string(),
                        });
                        continue;
                    }
                };
                let task = match prepare(run, functions) {
                    Ok(task) => task,
                    Err(message) => {
                        out.failures.push(Failure {
                            run: run.clone(),
                            outcome: Outcome::Failed,
                            reason: reasons::START_FAILED,
                            message,
                        });
                        continue;
                    }
                };
                let uid = run.uid().unwrap_or_default();
                match cache.try_reserve(&uid, &request) {
                    Ok(()) => out.claims.push(Claim {
                        run: run.clone(),
                        request,
                        task,
                        retry: None,
                    }),
                    Err(why) => out.waiting.push((run.name_any(), why.to_string())),
                }
            }
            _ => {}
        }
    }
    out
}

/// A Run between two attempts on this Pod: it holds its reservation whatever the capacity
/// says now (its room was never given up); a cancel ends it at once; once its backoff has
/// passed ([`retry::retry_due`]), its next attempt is claimed (not while draining: the
/// scheduler places it again once this Pod is gone).
fn between_attempts(
    run: &Arc<Run>,
    request: &Resources,
    me: &Identity,
    cache: &mut AdmissionCache,
    admit: Admit,
    out: &mut Plan,
) {
    let uid = run.uid().unwrap_or_default();
    cache.hold(&uid, request);
    out.backing_off.insert(uid);
    if run.metadata.deletion_timestamp.is_some() {
        return;
    }
    if run.spec.cancel_requested {
        out.failures.push(Failure {
            run: run.clone(),
            outcome: Outcome::Cancelled,
            reason: reasons::CANCELLED,
            message: format!(
                "cancelled (spec.cancelRequested) while waiting to retry on Pod {}",
                me.pod_name
            ),
        });
        return;
    }
    if !admit.claiming {
        return;
    }
    let attempt = run.attempt();
    let due = retry::retry_due(run).unwrap_or(admit.now);
    if due > admit.now {
        out.next_retry = Some(out.next_retry.map_or(due, |at| at.min(due)));
        return;
    }
    match prepare(run, admit.functions) {
        Ok(task) => out.claims.push(Claim {
            run: run.clone(),
            request: request.clone(),
            task,
            retry: Some(attempt),
        }),
        Err(message) => out.failures.push(Failure {
            run: run.clone(),
            outcome: Outcome::Failed,
            reason: reasons::START_FAILED,
            message,
        }),
    }
}

/// What runtimed executes for `run` (a task, or a function when the Pod has a runtime
/// server), or why it cannot (an invalid task, timeout or retry policy; the message names
/// the field).
fn prepare(run: &Run, functions: bool) -> Result<executor::Prepared, String> {
    match &run.spec.mode.function {
        Some(function) if functions => executor::prepare_function(function, &run.spec.env),
        Some(_) => Err(executor::TaskError::FunctionWithoutServer),
        None => executor::prepare(
            run.spec.mode.task.as_ref(),
            &run.spec.env,
            run.spec.source.as_ref(),
        ),
    }
    .map_err(|e| e.to_string())
    .and_then(|task| run.timeout().map(|_| task))
    .and_then(|task| run.retry_policy().map(|_| task))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::resources::RUNS;
    use crate::testing::{NS, RunBuilder, run};

    const GPU: &str = "example.com/gpu";
    const T0: jiff::Timestamp = jiff::Timestamp::UNIX_EPOCH;

    fn me() -> Identity {
        Identity {
            pod_name: "pod-1".into(),
            namespace: NS.into(),
            pod_uid: "pod-uid-1".into(),
        }
    }

    /// The vocabulary of this agent's Pod on top of the shared builders.
    trait OnThisPod {
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

    fn cache(capacity: &[(&str, u64)]) -> AdmissionCache {
        let mut c = AdmissionCache::new();
        c.set_capacity(Some(capacity.iter().map(|&(k, v)| (k, v)).collect()));
        c
    }

    fn names(claims: &[Claim]) -> Vec<String> {
        claims.iter().map(|c| c.run.name_any()).collect()
    }

    fn none() -> HashSet<String> {
        HashSet::new()
    }

    #[test]
    fn plan_claims_in_creation_order_up_to_capacity_and_leaves_the_rest_waiting() {
        let runs = vec![
            run("c").here().created(3).arc(),
            run("a").here().created(1).arc(),
            run("b").here().created(2).arc(),
        ];
        let mut c = cache(&[(RUNS, 2)]);
        let p = plan(
            &runs,
            &me(),
            &none(),
            &none(),
            &none(),
            &mut c,
            Admit {
                claiming: true,
                functions: false,
                now: T0,
            },
        );
        assert_eq!(names(&p.claims), ["a", "b"]);
        assert_eq!(
            p.waiting,
            [(
                "c".to_string(),
                "insufficient runs: requested 1, 2 of 2 in use".to_string()
            )]
        );
        assert!(p.failures.is_empty() && p.kills.is_empty());
        assert_eq!(c.used().get(RUNS), 2, "claims hold their reservations");
    }

    #[test]
    fn plan_breaks_a_creation_tie_by_uid_as_the_scheduler_places() {
        // Same priority and creation second: the scheduler's QueueOrder puts the smaller UID
        // first, whatever the names; a claim by name would take "a" first here.
        let runs = vec![
            run("a").uid("uid-2").here().created(1).arc(),
            run("b").uid("uid-1").here().created(1).arc(),
        ];
        let mut c = cache(&[(RUNS, 1)]);
        let p = plan(
            &runs,
            &me(),
            &none(),
            &none(),
            &none(),
            &mut c,
            Admit {
                claiming: true,
                functions: false,
                now: T0,
            },
        );
        assert_eq!(names(&p.claims), ["b"]);
    }

    #[test]
    fn plan_does_not_let_a_big_run_block_a_smaller_one() {
        let runs = vec![
            run("big").here().created(1).requests(&[(GPU, 2)]).arc(),
            run("small").here().created(2).requests(&[(GPU, 1)]).arc(),
        ];
        let mut c = cache(&[(RUNS, 4), (GPU, 1)]);
        let p = plan(
            &runs,
            &me(),
            &none(),
            &none(),
            &none(),
            &mut c,
            Admit {
                claiming: true,
                functions: false,
                now: T0,
            },
        );
        assert_eq!(names(&p.claims), ["small"]);
        assert_eq!(p.waiting[0].0, "big");
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
        let owned = HashSet::from(["uid-owned".to_string()]);
        let finished = HashSet::from(["uid-finished".to_string()]);
        let mut c = cache(&[(RUNS, 10)]);
        let p = plan(
            &runs,
            &me(),
            &owned,
            &finished,
            &none(),
            &mut c,
            Admit {
                claiming: true,
                functions: false,
                now: T0,
            },
        );
        assert_eq!(names(&p.claims), ["no-uid-yet"]);
        assert!(p.failures.is_empty(), "{:?}", p.failures);
        assert!(p.kills.is_empty());
    }

    #[test]
    fn plan_claims_nothing_while_draining_or_before_capacity_is_known() {
        let runs = vec![run("a").here().arc()];
        let mut c = cache(&[(RUNS, 1)]);
        assert!(
            plan(
                &runs,
                &me(),
                &none(),
                &none(),
                &none(),
                &mut c,
                Admit {
                    claiming: false,
                    functions: false,
                    now: T0,
                },
            )
            .claims
            .is_empty()
        );
        assert!(c.is_empty());
        let mut unknown = AdmissionCache::new();
        let p = plan(
            &runs,
            &me(),
            &none(),
            &none(),
            &none(),
            &mut unknown,
            Admit {
                claiming: true,
                functions: false,
                now: T0,
            },
        );
        assert!(p.claims.is_empty());
        assert_eq!(
            p.waiting[0].1,
            "the capacity of the Runtime Pod is not known yet"
        );
    }

    #[test]
    fn plan_fails_invalid_requests_and_tasks_without_reserving() {
        let runs = vec![
            run("frac").here().request_strs(&[(GPU, "1.5")]).arc(),
            run("no-task").here().function("main.handler").arc(),
        ];
        let mut c = cache(&[(RUNS, 4), (GPU, 4)]);
        let p = plan(
            &runs,
            &me(),
            &none(),
            &none(),
            &none(),
            &mut c,
            Admit {
                claiming: true,
                functions: false,
                now: T0,
            },
        );
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
        assert!(
            p.failures[1]
                .message
                .starts_with("spec.mode.function: a function Run needs a Runtime whose Pods serve the runtime contract")
        );
        assert!(c.is_empty());
    }

    #[test]
    fn plan_fails_running_runs_that_no_child_owns() {
        let runs = vec![
            run("left-over").here().running().arc(),
            run("mine").here().running().arc(),
        ];
        let owned = HashSet::from(["uid-mine".to_string()]);
        let mut c = cache(&[(RUNS, 4)]);
        let p = plan(
            &runs,
            &me(),
            &owned,
            &none(),
            &none(),
            &mut c,
            Admit {
                claiming: false,
                functions: false,
                now: T0,
            },
        );
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
        let attachable = HashSet::from(["uid-still-runs".to_string()]);
        let mut c = cache(&[(RUNS, 1)]);
        let p = plan(
            &runs,
            &me(),
            &none(),
            &none(),
            &attachable,
            &mut c,
            Admit {
                claiming: true,
                functions: false,
                now: T0,
            },
        );
        let attached: Vec<String> = p.attaches.iter().map(|a| a.run.name_any()).collect();
        assert_eq!(attached, ["still-runs"]);
        assert_eq!(
            c.held("uid-still-runs"),
            Some(&Resources::from_iter([(RUNS, 1)]))
        );
        assert_eq!(p.failures.len(), 1);
        assert_eq!(
            (p.failures[0].run.name_any().as_str(), p.failures[0].reason),
            ("gone", reasons::RUNTIMED_RESTARTED)
        );
        assert!(p.claims.is_empty(), "the attached Run's room was taken");
        assert_eq!(p.waiting.len(), 1);

        // Held even when the Pod's capacity no longer has room for it.
        let mut full = cache(&[(RUNS, 0)]);
        let p = plan(
            &runs,
            &me(),
            &none(),
            &none(),
            &attachable,
            &mut full,
            Admit {
                claiming: false,
                functions: false,
                now: T0,
            },
        );
        assert_eq!(p.attaches.len(), 1);
        assert_eq!(full.used(), &Resources::from_iter([(RUNS, 1)]));
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
        let owned = HashSet::from(["uid-cancelled-running".to_string()]);
        let mut c = cache(&[(RUNS, 4)]);
        // Also while draining: a cancel is not a claim.
        let p = plan(
            &runs,
            &me(),
            &owned,
            &none(),
            &none(),
            &mut c,
            Admit {
                claiming: false,
                functions: false,
                now: T0,
            },
        );
        assert_eq!(p.failures.len(), 1);
        let f = &p.failures[0];
        assert_eq!(
            (f.run.name_any().as_str(), f.outcome, f.reason),
            ("cancelled-early", Outcome::Cancelled, reasons::CANCELLED)
        );
        assert_eq!(p.cancels, ["uid-cancelled-running"]);
        assert!(p.claims.is_empty());
        assert_eq!(c.held("uid-cancelled-early"), None);

        // An invalid spec.timeout fails the claim with the field and the value.
        let p = plan(
            &runs,
            &me(),
            &owned,
            &none(),
            &none(),
            &mut c,
            Admit {
                claiming: true,
                functions: false,
                now: T0,
            },
        );
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
        let owned: HashSet<String> = ["alive", "deleting", "moved", "done", "gone"]
            .iter()
            .map(|n| format!("uid-{n}"))
            .collect();
        let mut c = cache(&[(RUNS, 4)]);
        let p = plan(
            &runs,
            &me(),
            &owned,
            &none(),
            &none(),
            &mut c,
            Admit {
                claiming: true,
                functions: false,
                now: T0,
            },
        );
        assert_eq!(
            p.kills,
            ["uid-deleting", "uid-done", "uid-gone", "uid-moved"]
        );
    }

    #[test]
    fn plan_never_claims_a_run_being_deleted() {
        let runs = vec![run("a").here().deleting().arc()];
        let mut c = cache(&[(RUNS, 1)]);
        let p = plan(
            &runs,
            &me(),
            &none(),
            &none(),
            &none(),
            &mut c,
            Admit {
                claiming: true,
                functions: false,
                now: T0,
            },
        );
        assert!(p.claims.is_empty() && p.failures.is_empty());
    }

    fn admit_at(now: jiff::Timestamp, claiming: bool) -> Admit {
        Admit {
            claiming,
            functions: false,
            now,
        }
    }

    fn at(seconds: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(seconds).unwrap()
    }

    #[test]
    fn a_run_between_attempts_holds_its_room_and_is_retried_once_its_backoff_has_passed() {
        // Attempt 2 failed at t=100 (whole seconds: before t=101); attempt 3's backoff is 2 s
        // (1 s doubled once), so it is due at t=103.
        let waiting = run("retried")
            .here()
            .retry_policy(3, "1s")
            .between_attempts(3, at(100))
            .arc();
        let next = run("next").here().created(5).arc();
        let mut c = cache(&[(RUNS, 1)]);
        let p = plan(
            &[waiting.clone(), next.clone()],
            &me(),
            &none(),
            &none(),
            &none(),
            &mut c,
            admit_at(at(101), true),
        );
        assert!(
            p.claims.is_empty(),
            "before its backoff, and no room for next"
        );
        assert_eq!(p.waiting[0].0, "next", "the held room is not given away");
        assert_eq!(p.next_retry, Some(at(103)));
        assert_eq!(p.backing_off, HashSet::from(["uid-retried".to_string()]));
        assert_eq!(c.used().get(RUNS), 1);

        let mut c = cache(&[(RUNS, 1)]);
        let p = plan(
            &[waiting, next],
            &me(),
            &none(),
            &none(),
            &none(),
            &mut c,
            admit_at(at(103), true),
        );
        assert_eq!(names(&p.claims), ["retried"]);
        assert_eq!(p.claims[0].retry, Some(3));
        assert_eq!(p.next_retry, None);
        assert!(p.failures.is_empty(), "never failed as RuntimedRestarted");
    }

    #[test]
    fn a_run_between_attempts_is_cancelled_at_once_and_not_retried_while_draining() {
        let cancelled = run("cancelled")
            .here()
            .retry_policy(3, "1s")
            .between_attempts(2, at(100))
            .cancel_requested()
            .arc();
        let mut c = cache(&[(RUNS, 2)]);
        let p = plan(
            &[cancelled],
            &me(),
            &none(),
            &none(),
            &none(),
            &mut c,
            admit_at(at(100), true),
        );
        assert_eq!(p.failures.len(), 1);
        assert_eq!(p.failures[0].outcome, Outcome::Cancelled);
        assert!(p.claims.is_empty());

        let due = run("due")
            .here()
            .retry_policy(3, "1s")
            .between_attempts(2, at(100))
            .arc();
        let mut c = cache(&[(RUNS, 2)]);
        let p = plan(
            &[due],
            &me(),
            &none(),
            &none(),
            &none(),
            &mut c,
            admit_at(at(200), false),
        );
        assert!(p.claims.is_empty() && p.failures.is_empty());
        assert_eq!(c.used().get(RUNS), 1, "still held while draining");
    }

    #[test]
    fn a_bad_retry_policy_fails_the_claim_naming_the_field() {
        let runs = vec![run("bad").here().retry_policy(3, "soon").arc()];
        let mut c = cache(&[(RUNS, 1)]);
        let p = plan(
            &runs,
            &me(),
            &none(),
            &none(),
            &none(),
            &mut c,
            admit_at(at(0), true),
        );
        assert_eq!(p.failures[0].reason, reasons::START_FAILED);
        assert!(
            p.failures[0]
                .message
                .starts_with("spec.retryPolicy.backoff")
        );
    }
}
