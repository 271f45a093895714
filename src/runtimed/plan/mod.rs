//! The agent's decisions, as a pure function of the Runs it sees and its own [`Records`] of
//! them: which assigned Runs to claim (reserving their room), which to fail, which children
//! to kill.
//!
//! No client, no async, no clock: the wall clock a backoff is judged against comes in
//! [`Admit`]. The agent ([`super::agent`]) performs what [`plan`] returns; this module never
//! performs anything itself. A Run between two attempts on this Pod is [`between`]'s; where
//! each Run stands on this agent is [`record`]'s.

use std::collections::HashSet;
use std::sync::Arc;

use kube::ResourceExt as _;

use super::Identity;
use super::executor;
use crate::api::status::{self, Outcome, reasons};
use crate::api::{QueueOrder, Resources, Run, RunPhase};
use between::between_attempts;
pub use record::{LocalRun, Records, State};

mod between;
mod record;
#[cfg(test)]
mod tests;

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

/// A Run left by an earlier runtimed whose execution the runtime server still holds (Running,
/// or still Scheduled when that runtimed died inside its claim's window): its request is held
/// again and the agent follows the execution instead of failing it or starting it again.
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
    /// Scheduled Runs left untouched because they do not fit now, in their records as
    /// [`State::Waiting`].
    pub waiting: Vec<Waiting>,
    /// When the earliest backoff still running ends: plan again then.
    pub next_retry: Option<jiff::Timestamp>,
}

/// A Scheduled Run that does not fit now.
#[derive(Debug, Clone)]
pub struct Waiting {
    pub run: Arc<Run>,
    pub why: String,
    /// It did not wait before, or waited for another reason: tell it.
    pub news: bool,
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

/// Decides what to do about `runs` (every Run the agent currently sees; others' are ignored)
/// given where each stands on this agent (`records`, moved as it decides).
///
/// - A Run that a part of this agent acts on ([`LocalRun::is_owned`]) or whose ending write
///   is out ([`State::Writing`]) is left to it, never claimed again.
/// - A child whose Run is missing, deleted, reassigned or terminal is killed.
/// - A Running Run on this Pod that nothing of this agent owns was left by an earlier
///   runtimed: when its execution was [`State::Found`] on the runtime server its request is
///   held again, whatever the Pod's capacity now says, and it is attached; otherwise it is
///   failed with [`reasons::RUNTIMED_RESTARTED`]. A Scheduled Run whose execution was found
///   (started by a runtimed that died before its held claim was written) is attached the same
///   way; one whose execution was not found is claimed again, as if it never ran. These come
///   before any claim, so a claim never takes the room of a Run that still runs.
/// - A child whose Run the scheduler preempts is to be stopped (`stops`).
/// - When `claiming`, Scheduled Runs are taken in the scheduler's order (priority, creation,
///   UID; [`QueueOrder`]): an invalid request or task fails the Run; otherwise its complete
///   request is reserved and the Run is claimed ([`State::Claiming`]), or, when it does not
///   fit, left untouched ([`State::Waiting`]). A Run that does not fit does not block
///   smaller Runs behind it.
/// - A record this plan no longer finds a use for is let go with its room: a Run no longer
///   between attempts here, a found execution whose Run is not attached, a Run that no
///   longer waits.
pub fn plan(runs: &[Arc<Run>], me: &Identity, records: &mut Records, admit: Admit) -> Plan {
    let Admit {
        claiming,
        functions,
        now: _,
    } = admit;
    let mut out = Plan::default();
    let mine: Vec<&Arc<Run>> = runs.iter().filter(|r| assigned_to(r, me)).collect();
    let owned = |records: &Records, uid: &str| records.get(uid).is_some_and(LocalRun::is_owned);
    // The records that must earn their place again in this plan.
    let idle: Vec<String> = records
        .iter()
        .filter(|r| {
            matches!(
                r.state,
                State::BetweenAttempts | State::Found | State::Waiting { .. }
            )
        })
        .map(|r| r.uid.clone())
        .collect();
    let mut kept: HashSet<String> = HashSet::new();

    let live: HashSet<String> = mine
        .iter()
        .filter(|r| r.metadata.deletion_timestamp.is_none() && !r.phase().is_terminal())
        .filter_map(|r| r.uid())
        .collect();
    let mut kills: Vec<String> = records
        .iter()
        .filter(|r| r.is_owned() && !live.contains(&r.uid))
        .map(|r| r.uid.clone())
        .collect();
    kills.sort();
    out.kills = kills;
    let mut stops: Vec<String> = mine
        .iter()
        .filter(|r| r.status.as_ref().is_some_and(status::disruption_requested))
        .filter_map(|r| r.uid())
        .filter(|uid| live.contains(uid) && owned(records, uid))
        .collect();
    stops.sort();
    out.stops = stops;
    let mut cancels: Vec<String> = mine
        .iter()
        .filter(|r| r.spec.cancel_requested)
        .filter_map(|r| r.uid())
        .filter(|uid| live.contains(uid) && owned(records, uid))
        .collect();
    cancels.sort();
    out.cancels = cancels;

    let mut candidates: Vec<&Arc<Run>> = mine
        .into_iter()
        .filter(|r| {
            r.uid().is_some_and(|uid| {
                records
                    .get(&uid)
                    .is_none_or(|r| !r.is_owned() && !matches!(r.state, State::Writing { .. }))
            })
        })
        .collect();
    // The scheduler's order (priority recorded with the Bind, creation, UID): the one
    // comparator both use, so a tie is broken the same way on both sides.
    candidates.sort_by_cached_key(|r| QueueOrder::recorded(r));

    let found = |records: &Records, run: &Run| {
        run.uid()
            .is_some_and(|uid| records.state(&uid) == Some(&State::Found))
    };
    // Found while still Scheduled: followed again, never started a second time.
    let found_scheduled: Vec<&Arc<Run>> = candidates
        .iter()
        .copied()
        .filter(|r| r.phase() == RunPhase::Scheduled && found(records, r))
        .collect();
    for run in found_scheduled {
        if let Ok(request) = run.request() {
            records.hold(run, &request, State::Running);
            out.attaches.push(Attach {
                run: run.clone(),
                request,
            });
        }
    }
    for run in candidates
        .iter()
        .copied()
        .filter(|r| r.phase().is_admitted())
    {
        let uid = run.uid().unwrap_or_default();
        let request = run.request();
        if let (Some(_), Ok(request)) = (run.status.as_ref().and_then(status::in_backoff), &request)
        {
            kept.insert(uid);
            between_attempts(run, request, me, records, admit, &mut out);
            continue;
        }
        match request {
            Ok(request) if records.state(&uid) == Some(&State::Found) => {
                records.hold(run, &request, State::Running);
                out.attaches.push(Attach {
                    run: run.clone(),
                    request,
                });
            }
            // A function Run's registration lived in the runtimed that is gone, too.
            _ => {
                // Its room (if this agent held one) stays held until its end is written.
                kept.insert(uid);
                out.failures.push(Failure {
                    run: run.clone(),
                    outcome: Outcome::Failed,
                    reason: reasons::RUNTIMED_RESTARTED,
                    message: format!(
                        "runtimed on Pod {} restarted while this Run was running; its process is gone",
                        me.pod_name
                    ),
                })
            }
        }
    }
    for run in candidates {
        if owned(records, &run.uid().unwrap_or_default()) {
            // Attached above.
            continue;
        }
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
                match records.reserve(run, &request) {
                    Ok(()) => out.claims.push(Claim {
                        run: run.clone(),
                        request,
                        task,
                        retry: None,
                    }),
                    Err(why) => {
                        let why = why.to_string();
                        kept.insert(run.uid().unwrap_or_default());
                        let news = records.wait(run, &why);
                        out.waiting.push(Waiting {
                            run: run.clone(),
                            why,
                            news,
                        });
                    }
                }
            }
            _ => {}
        }
    }
    for uid in idle {
        let unchanged = records.get(&uid).is_some_and(|r| {
            matches!(
                r.state,
                State::BetweenAttempts | State::Found | State::Waiting { .. }
            )
        });
        if unchanged && !kept.contains(&uid) {
            records.remove(&uid);
        }
    }
    out
}

/// What runtimed executes for `run` (a task, or a function when the Pod has a runtime
/// server), or why it cannot (an invalid task, timeout or retry policy; the message names
/// the field).
pub(super) fn prepare(run: &Run, functions: bool) -> Result<executor::Prepared, String> {
    match &run.spec.mode.function {
        Some(function) if functions => {
            executor::prepare_function(function, &run.spec.env, run.spec.source.as_ref())
        }
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
