//! What a child's end calls for ([`AfterExit`]): the Run's terminal status and outputs, its
//! requeue after a preemption, the end of a stop (cancel, timeout, shutdown), or nothing when
//! its Run is gone. Decides only; the agent writes.

use std::collections::BTreeMap;

use kube::ResourceExt as _;
use kube::runtime::reflector::Store;

use super::super::executor::{ChildExit, Exit, Terminal};
use super::{AfterExit, Children, Outputs, StopReason};
use crate::api::Run;
use crate::api::status::{Outcome, reasons};

impl Children {
    /// A child ended: what its Run's status becomes (`None` when it was no child). `runs` is
    /// the watch's view, preferred over the claim when it has caught up past it.
    /// `outputs` is what [`forward_exits`] read of a successful execution's
    /// `$KRUNTIME_OUTPUTS` off the loop.
    pub(in crate::runtimed) fn on_exit(
        &mut self,
        exit: ChildExit,
        outputs: Outputs,
        runs: &Store<Run>,
    ) -> Option<AfterExit> {
        let child = self.children.remove(&exit.uid)?;
        self.registrations
            .lock()
            .expect("registrations")
            .remove(&child.name);
        if let Some(id) = &child.execution {
            if let Some(listed) = self.listed.as_mut() {
                listed.remove(id);
            }
            // Forgotten once the Run's status records it (after the write that follows), or
            // at once when no write follows.
            self.forget.insert(exit.uid.clone(), id.clone());
        }
        // The watch's copy when it has caught up past the claim.
        let observed = |uid: &str| {
            runs.state()
                .into_iter()
                .find(|r| r.uid().as_deref() == Some(uid) && r.phase().is_admitted())
                .map(|r| (*r).clone())
        };
        let stopped = child.stopping.map(|s| s.why).filter(|_| !child.abandoned);
        if stopped == Some(StopReason::Preempted) {
            tracing::info!(run = %child.name, "Run {} stopped for a preemption; back to Pending", child.name);
            let first = observed(&exit.uid).unwrap_or(child.last_written);
            let (name, uid) = (child.name, exit.uid);
            return Some(AfterExit::Requeue { name, uid, first });
        }
        let read = outputs;
        let mut outputs = BTreeMap::new();
        let terminal = if let Some(why) = stopped {
            Some(stopped_terminal(why, &child.last_written))
        } else if child.terminated_for_shutdown && exit.killed {
            Some(Terminal {
                outcome: Outcome::Failed,
                reason: reasons::RUNTIME_POD_TERMINATED,
                message: format!(
                    "runtimed on Pod {} was shutting down and killed the process after the {:?} grace period",
                    self.pod_name, self.shutdown_grace
                ),
                exit_code: None,
            })
        } else if child.abandoned {
            // A function Run deleted while Ready waits on its cleanup finalizer for this end:
            // it is unregistered now.
            runs.state()
                .into_iter()
                .find(|r| r.uid().as_deref() == Some(exit.uid.as_str()))
                .filter(|r| {
                    r.metadata.deletion_timestamp.is_some()
                        && r.phase().is_admitted()
                        && r.finalizers()
                            .iter()
                            .any(|f| f == crate::api::FINALIZER_FUNCTION_CLEANUP)
                })
                .map(|_| Terminal {
                    outcome: Outcome::Cancelled,
                    reason: reasons::CANCELLED,
                    message: "deleted; runtimed unregistered the function".to_string(),
                    exit_code: None,
                })
        } else {
            Some(match exit.status {
                Ok(Exit::Process(status)) => status.terminal(),
                Ok(Exit::Server(terminal)) => terminal,
                Err(e) => Terminal {
                    outcome: Outcome::Failed,
                    reason: reasons::FAILED,
                    message: format!("runtimed lost track of the process: {e}"),
                    exit_code: None,
                },
            })
        };
        let Some(mut terminal) = terminal else {
            tracing::info!(run = %child.name, "process of Run {} is gone", child.name);
            return Some(AfterExit::Gone { uid: exit.uid });
        };
        // A successful execution's outputs are what it left in `$KRUNTIME_OUTPUTS`.
        if terminal.outcome == Outcome::Succeeded {
            match read {
                Ok(written) => outputs = written,
                Err(e) => {
                    terminal = Terminal {
                        outcome: Outcome::Failed,
                        reason: e.reason(),
                        message: e.to_string(),
                        exit_code: terminal.exit_code,
                    }
                }
            }
        }
        tracing::info!(run = %child.name, "Run {} ended: {}", child.name, terminal.message);
        let first = observed(&exit.uid).unwrap_or(child.last_written);
        Some(AfterExit::Finish {
            name: child.name,
            uid: exit.uid,
            first,
            terminal,
            outputs,
        })
    }
}

/// How a child stopped by runtimed (cancelled or timed out) ends, whatever its exit.
fn stopped_terminal(why: StopReason, run: &Run) -> Terminal {
    let (outcome, reason, message) = match why {
        StopReason::Cancelled => (
            Outcome::Cancelled,
            reasons::CANCELLED,
            "cancelled (spec.cancelRequested); runtimed stopped the task".to_string(),
        ),
        _ => (
            Outcome::Timeout,
            reasons::TIMEOUT,
            format!(
                "ran longer than spec.timeout {}; runtimed stopped the task",
                run.spec.timeout.as_deref().unwrap_or_default()
            ),
        ),
    };
    Terminal {
        outcome,
        reason,
        message,
        exit_code: None,
    }
}
