//! The leader's lifecycle loop, Kubernetes' node lifecycle controller for Runtime Pods: at
//! every heartbeat expiry the cache learns the Pod is unavailable, and the Runs of lost
//! Runtime Pods are healed (unclaimed ones go back to Pending to be placed again, running
//! ones too for their next attempt when `spec.retryPolicy` allows one, else they end Failed
//! with `RuntimePodLost`). Which Runs are lost is the index's decision; this
//! module only writes it.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use tracing::{info, warn};

use super::{Scheduler, now};
use crate::api::status;
use crate::api::{Run, retry};
use crate::scheduler::framework::{LostRun, PodLoss};
use crate::scheduler::status_patch;
use crate::telemetry::events::reasons as event_reasons;

/// How often the lifecycle loop looks for Runs of lost Runtime Pods at the least.
const LIFECYCLE_PERIOD: Duration = Duration::from_secs(1);

impl Scheduler {
    /// The leader's lifecycle loop, Kubernetes' node lifecycle controller for Runtime Pods:
    /// at every heartbeat expiry (a timer) it wakes the Pending Runs of that Runtime, and at
    /// least every [`LIFECYCLE_PERIOD`] it heals the Runs of lost Runtime Pods: unclaimed ones
    /// go back to Pending to be placed again, running ones end Failed with `RuntimePodLost`.
    pub(super) async fn heal(self: Arc<Self>, store: Store<Run>) {
        let grace = jiff::SignedDuration::try_from(self.options.pod_lost_grace)
            .unwrap_or(jiff::SignedDuration::MAX);
        let mut last = jiff::Timestamp::now();
        loop {
            let now = jiff::Timestamp::now();
            let next = self.cache.expire(last, now);
            last = now;
            self.woke();
            // Heartbeats count as stale only for as long as the scheduler could see them: not
            // while the Pod or Lease watch is broken (an API-server outage hides renewals),
            // and from their last complete list on.
            let observed_since = [&self.pods, &self.leases]
                .iter()
                .map(|w| w.observed_since(now))
                .max()
                .unwrap_or(now);
            for lost in self.cache.lost_runs(now, grace, observed_since) {
                self.heal_one(&store, lost).await;
            }
            let until_next = next
                .and_then(|at| Duration::try_from(at.duration_since(now)).ok())
                .map_or(LIFECYCLE_PERIOD, |d| d.min(LIFECYCLE_PERIOD));
            tokio::time::sleep(until_next.max(Duration::from_millis(10))).await;
        }
    }

    /// Writes what a lost Run becomes, on the version the store has; a conflict is retried at
    /// the next pass with the newer version.
    async fn heal_one(&self, store: &Store<Run>, lost: LostRun) {
        let key = ObjectRef::new(&lost.name).within(&lost.namespace);
        let Some(run) = store.get(&key) else { return };
        if run.uid().as_deref() != Some(lost.uid.as_str()) {
            return;
        }
        let mut healed = run.status.clone().unwrap_or_default();
        let now = now();
        // The attempt it is placed again for, and why, when its retry policy allows one.
        let retry = lost
            .admitted
            .then(|| retry_after_loss(&run))
            .flatten()
            .map(|attempt| {
                let message = retry_message(&lost, self.options.pod_lost_grace, &run, attempt);
                (attempt, message)
            });
        let changed = if let Some((attempt, message)) = &retry {
            status::set_lost_retry(
                &mut healed,
                *attempt,
                status::reasons::RUNTIME_POD_LOST,
                message,
                &now,
            )
        } else if lost.admitted {
            status::set_terminal(
                &mut healed,
                status::Outcome::Failed,
                status::reasons::RUNTIME_POD_LOST,
                &lost_message(&lost, self.options.pod_lost_grace),
                None,
                &now,
            )
        } else {
            status::set_unbound(
                &mut healed,
                "its Runtime Pod was lost before runtimed admitted it; placing it again",
                &now,
            )
        };
        let patch = status_patch::status_patch(&run, &healed);
        let (true, Some(patch)) = (changed, patch) else {
            return;
        };
        match status_patch::send(&self.client, &lost.namespace, &lost.name, &patch).await {
            Ok(()) => {
                if let Some((attempt, message)) = retry {
                    self.events.emit_once(
                        &run,
                        EventType::Warning,
                        event_reasons::STALE_RUN_RETRYING,
                        "Heal",
                        message,
                    );
                    info!(run = %lost.name, namespace = %lost.namespace, pod = %lost.pod, "Runtime Pod lost ({:?}) while the Run was running; attempt {attempt} is placed again", lost.why);
                    return;
                }
                let note = if lost.admitted {
                    lost_message(&lost, self.options.pod_lost_grace)
                } else {
                    format!(
                        "Runtime Pod {} was lost before runtimed admitted the Run; placing it again",
                        lost.pod
                    )
                };
                self.events.emit_once(
                    &run,
                    EventType::Warning,
                    status::reasons::RUNTIME_POD_LOST,
                    "Heal",
                    note,
                );
                self.log_healed(&lost);
            }
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
            Err(e) => {
                warn!(run = %lost.name, namespace = %lost.namespace, "cannot heal the Run of a lost Runtime Pod: {e}; retrying")
            }
        }
    }

    fn log_healed(&self, lost: &LostRun) {
        match () {
            () if lost.admitted => {
                warn!(run = %lost.name, namespace = %lost.namespace, pod = %lost.pod, "failed: Runtime Pod lost ({:?})", lost.why)
            }
            () => {
                info!(run = %lost.name, namespace = %lost.namespace, pod = %lost.pod, "Runtime Pod lost ({:?}) before admission; placing the Run again", lost.why)
            }
        }
    }
}

/// The attempt a Run whose Runtime Pod was lost while it ran is placed again for, when its
/// retry policy allows one: the next, or, for a Run lost between two attempts, the one
/// already granted (it never started, so it costs nothing).
fn retry_after_loss(run: &Run) -> Option<i32> {
    if run.status.as_ref().and_then(status::in_backoff).is_some() {
        return Some(run.attempt());
    }
    match run.retry_decision(status::reasons::RUNTIME_POD_LOST) {
        retry::Decision::Retry { attempt, .. } => Some(attempt),
        retry::Decision::GiveUp { .. } => None,
    }
}

/// The message of a Run sent back to Pending for `attempt` after its Runtime Pod was lost.
fn retry_message(lost: &LostRun, grace: Duration, run: &Run, attempt: i32) -> String {
    let max = run.retry_policy().unwrap_or_default().max_attempts;
    format!(
        "{}; attempt {attempt} of {max} is placed again",
        lost_message(lost, grace)
    )
}

/// The Failed message of a Run whose Runtime Pod was lost while it ran.
fn lost_message(lost: &LostRun, grace: Duration) -> String {
    let pod = &lost.pod;
    match lost.why {
        PodLoss::Gone => format!("Runtime Pod {pod} was deleted while the Run was running"),
        PodLoss::Replaced => {
            format!("Runtime Pod {pod} was replaced by a new Pod while the Run was running")
        }
        PodLoss::Terminating | PodLoss::HeartbeatStale => format!(
            "the runtimed heartbeat of Runtime Pod {pod} has been stale for longer than {grace:?} while the Run was running (node or runtimed lost)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::RunPhase;
    use crate::testing::{NOW, run};

    #[test]
    fn a_lost_run_is_retried_as_its_policy_allows_and_a_granted_attempt_costs_nothing() {
        // A Ready function Run lost with attempts left: placed again for attempt 2.
        let mut ready = run("fn")
            .function("main.handler")
            .on("p1")
            .retry_policy(2, "1s")
            .build();
        ready.status.as_mut().unwrap().phase = Some(RunPhase::Ready);
        assert_eq!(retry_after_loss(&ready), Some(2));
        // Its last attempt: failed.
        ready.status.as_mut().unwrap().attempt = Some(2);
        assert_eq!(retry_after_loss(&ready), None);
        // No policy: failed.
        assert_eq!(
            retry_after_loss(&run("plain").on("p1").running().build()),
            None
        );
        // Lost between attempts: the attempt it waited for, even the last one.
        let waiting = run("w")
            .on("p1")
            .retry_policy(2, "1s")
            .between_attempts(2, NOW)
            .build();
        assert_eq!(retry_after_loss(&waiting), Some(2));
    }
}
