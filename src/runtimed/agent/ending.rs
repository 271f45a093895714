//! How the agent ends a Run's attempt: the retry decision of a failed attempt, the Run's end
//! (its metrics and terminal write), a task that could not start, a child's exit and, for a
//! success on a Runtime with an artifact store, the collection of its artifacts before that
//! write. The writes themselves are [`super::super::status_writer`]'s; the decision is
//! [`crate::api::retry`]'s.

use kube::runtime::reflector::Store;

use super::super::children::{AfterExit, Outputs};
use super::super::collector::{self, Collected, Pending};
use super::super::executor::{ChildExit, Terminal};
use super::super::metrics;
use super::super::plan::State;
use super::super::status_writer::{NextAttempt, Results};
use super::Agent;
use crate::api::retry;
use crate::api::status::{Outcome, reasons};
use crate::api::{Run, RunPhase};

/// An attempt's end waiting for its held claim's own write to return
/// ([`Agent::ends_after_claim`]).
pub(super) struct Ended {
    pub(super) name: String,
    pub(super) first: Run,
    pub(super) terminal: Terminal,
    pub(super) results: Results,
}

impl Agent {
    /// An attempt of `first` (as last seen) ended with `terminal`: a failed or timed-out task,
    /// or a function Run whose registration failed, whose retry policy allows another attempt
    /// waits here for it ([`retry::Decision`]);
    /// anything else is the Run's end. A Run refused before its first claim made no attempt
    /// and is never retried.
    pub(super) fn end(
        &mut self,
        name: String,
        uid: String,
        first: Run,
        terminal: Terminal,
        results: Results,
    ) {
        if self.claims.writing(&uid) {
            // Written once the claim has returned, over what it wrote.
            let ended = Ended {
                name,
                first,
                terminal,
                results,
            };
            self.ends_after_claim.insert(uid, Box::new(ended));
            return;
        }
        // The claim held back for this attempt, if any: taken in by the write that follows.
        let held = self.claims.settle(&uid);
        // Running: a task, or a function Run whose registration is not ready (a Ready
        // function's end is its release, never a failed attempt); or a task started with its
        // claim held back.
        let attempted = first.phase() == RunPhase::Running || held.is_some();
        if attempted
            && matches!(terminal.outcome, Outcome::Failed | Outcome::Timeout)
            && let retry::Decision::Retry { attempt, after } = first.retry_decision(terminal.reason)
        {
            tracing::info!(run = %name, "attempt {} of Run {name} failed ({}: {}); attempt {attempt} in {after:?}", first.attempt(), terminal.reason, terminal.message);
            self.metrics
                .run_retries
                .with_label_values(&[terminal.reason])
                .inc();
            let next_attempt = Some(attempt);
            self.records.set(&first, State::Writing { next_attempt });
            let next = NextAttempt {
                next: attempt,
                after,
            };
            self.writer
                .fail_attempt(name, uid, first, held, terminal, next);
            return;
        }
        // Reasons are the API's constants: a bounded label.
        let result = metrics::result_of(terminal.outcome);
        self.metrics.runs.with_label_values(&[result]).inc();
        if terminal.outcome != Outcome::Succeeded {
            self.metrics
                .run_failures
                .with_label_values(&[result, terminal.reason])
                .inc();
        }
        let started = first.status.as_ref().and_then(|s| s.start_time.as_ref());
        if let Some(started) = held.as_ref().map(|h| &h.at).or(started) {
            let ran = jiff::Timestamp::now().duration_since(started.0);
            self.metrics
                .run_duration
                .observe(ran.as_secs_f64().max(0.0));
        }
        self.records
            .set(&first, State::Writing { next_attempt: None });
        self.writer
            .finish(name, uid, first, held, terminal, results);
    }

    /// A claimed Run whose task could not start: the attempt failed with StartFailed.
    pub(super) fn fail_to_start(
        &mut self,
        name: String,
        uid: String,
        written: Run,
        message: String,
    ) {
        let terminal = Terminal {
            outcome: Outcome::Failed,
            reason: reasons::START_FAILED,
            message,
            exit_code: None,
        };
        self.end(name, uid, written, terminal, Default::default());
    }

    /// A child ended: write its terminal status (or its requeue) unless its Run is gone, then
    /// release.
    pub(super) fn on_exit(&mut self, exit: ChildExit, outputs: Outputs, runs: &Store<Run>) {
        match self.children.on_exit(exit, outputs, runs) {
            None => {}
            Some(AfterExit::Requeue { name, uid, first }) => {
                // Preempted this way only once the scheduler saw it Running: claimed.
                self.claims.settle(&uid);
                self.records
                    .set(&first, State::Writing { next_attempt: None });
                self.writer.requeue(name, uid, first);
            }
            Some(AfterExit::Finish {
                name,
                uid,
                first,
                terminal,
                outputs,
            }) => {
                // A success's artifacts are stored before its terminal write.
                if terminal.outcome == Outcome::Succeeded && self.settings.artifacts.any() {
                    self.records.set(&first, State::Collecting);
                    let staging = self.children.layout(&first).staging();
                    let pending = Pending {
                        name,
                        uid,
                        first,
                        terminal,
                        outputs,
                    };
                    let (store, namespace) =
                        (self.settings.artifacts.clone(), self.me.namespace.clone());
                    collector::spawn(store, staging, namespace, pending, self.collections.clone());
                    return;
                }
                let results = Results {
                    outputs,
                    ..Default::default()
                };
                self.end(name, uid, first, terminal, results);
            }
            Some(AfterExit::Gone { uid }) => {
                self.claims.settle(&uid);
                self.records.remove(&uid);
                self.children.forget(&uid);
            }
        }
    }

    /// A success's artifacts were stored (or break a rule): its terminal write goes out.
    pub(super) fn on_collected(&mut self, collected: Collected) {
        let Collected { pending, stored } = collected;
        let Pending {
            name,
            uid,
            first,
            terminal,
            outputs,
        } = pending;
        match stored {
            Ok(results) => self.end(name, uid, first, terminal, Results { outputs, ..results }),
            Err(why) => {
                tracing::warn!(run = %name, "Run {name}'s artifacts are not stored: {why}");
                let terminal = Terminal {
                    outcome: Outcome::Failed,
                    reason: reasons::ARTIFACT_INVALID,
                    message: why,
                    exit_code: terminal.exit_code,
                };
                self.end(name, uid, first, terminal, Results::default());
            }
        }
    }
}
