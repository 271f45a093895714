//! The Runtime Pod lifecycle controller, as Kubernetes' node lifecycle controller runs in
//! kube-controller-manager beside kube-scheduler: it heals the Runs of lost Runtime Pods
//! (unclaimed ones go back to Pending to be placed again, running ones too for their next
//! attempt when `spec.retryPolicy` allows one, else they end Failed with `RuntimePodLost`).
//! Which Runs are lost is the scheduler's index's decision (read through its cache); this
//! module only writes it, guarded by the Run's resourceVersion. It must not place or bind a
//! Run; waking the Pending Runs a heartbeat expiry concerns is the scheduler's.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use tracing::{info, warn};

use crate::api::status;
use crate::api::{Run, retry};
use crate::scheduler::controller::HeartbeatSight;
use crate::scheduler::framework::{LostRun, PodLoss, SharedCache};
use crate::scheduler::status_patch;
use crate::telemetry::events::{RunEvents, reasons as event_reasons};

/// How often the controller looks for Runs of lost Runtime Pods.
const LIFECYCLE_PERIOD: Duration = Duration::from_secs(1);

/// The Runtime Pod lifecycle controller: its writes are the leader's.
pub struct PodLifecycle {
    client: kube::Client,
    /// The scheduler's cache, whose index says which Runs are lost.
    cache: Arc<SharedCache>,
    /// How far the scheduler's Pod and Lease watches can be trusted.
    sight: HeartbeatSight,
    /// The scheduler's Event publisher.
    events: RunEvents,
    /// How long a heartbeat may be stale before the Runs on that Pod count as lost.
    grace: Duration,
}

impl PodLifecycle {
    pub fn new(
        client: kube::Client,
        cache: Arc<SharedCache>,
        sight: HeartbeatSight,
        events: RunEvents,
        grace: Duration,
    ) -> Arc<Self> {
        Arc::new(PodLifecycle {
            client,
            cache,
            sight,
            events,
            grace,
        })
    }

    /// Heals the Runs of lost Runtime Pods every [`LIFECYCLE_PERIOD`], on the versions in
    /// `store` (the process's store of Runs), until the task is dropped. The caller starts it
    /// once the scheduler's caches have listed.
    pub async fn run(self: Arc<Self>, store: Store<Run>) {
        let grace = jiff::SignedDuration::try_from(self.grace).unwrap_or(jiff::SignedDuration::MAX);
        loop {
            let now = jiff::Timestamp::now();
            // Heartbeats count as stale only for as long as the scheduler could see them.
            let observed_since = self.sight.observed_since(now);
            let lost_runs = self.cache.lock().lost_runs(now, grace, observed_since);
            for lost in lost_runs {
                self.heal_one(&store, lost).await;
            }
            tokio::time::sleep(LIFECYCLE_PERIOD).await;
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
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now());
        // The attempt it is placed again for, and why, when its retry policy allows one.
        let retry = lost
            .admitted
            .then(|| retry_after_loss(&run))
            .flatten()
            .map(|attempt| {
                let message = retry_message(&lost, self.grace, &run, attempt);
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
                &lost_message(&lost, self.grace),
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
                    lost_message(&lost, self.grace)
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
