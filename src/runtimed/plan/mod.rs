//! The agent's decisions, as a pure function of what it has observed: which assigned Runs to
//! claim (reserving them in the [`AdmissionCache`]), which to fail, which children to kill.
//!
//! No client, no async, no clock: the wall clock a backoff is judged against comes in
//! [`Admit`]. The agent ([`super::agent`]) performs what [`plan`] returns; this module never
//! performs anything itself. A Run between two attempts on this Pod is [`between`]'s.

use std::collections::HashSet;
use std::sync::Arc;

use kube::ResourceExt as _;

use super::Identity;
use super::admission::AdmissionCache;
use super::executor;
use crate::api::status::{self, Outcome, reasons};
use crate::api::{QueueOrder, Resources, Run, RunPhase};
use between::between_attempts;

mod between;
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
