//! Liveness of Runtime Pods as the index sees it: which active Runs sit on a lost Pod, and
//! when heartbeats expire.
//!
//! Owns `Index::lost_runs` (gone, replaced, terminating or heartbeat-stale Pods) and the
//! heartbeat-expiry queries the controller's expiry timer uses. It must not act on a lost
//! Run: failing or placing it again is the scheduler controller's.

use std::collections::BTreeSet;

use jiff::{SignedDuration, Timestamp};

use super::{Index, WakeSource, Wakeup};
use crate::scheduler::framework::types::Heartbeat;

/// Why a Runtime Pod counts as lost for a Run on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodLoss {
    /// No Pod of that name any more.
    Gone,
    /// A Pod of that name with another UID: the Run's Pod is gone.
    Replaced,
    /// The Pod is being deleted.
    Terminating,
    /// runtimed's heartbeat has been stale or missing for longer than the grace period.
    HeartbeatStale,
}

/// An active Run on a lost Runtime Pod (see [`Index::lost_runs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostRun {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub pod: String,
    /// runtimed had claimed it (Running or Ready): it is failed; otherwise it is placed again.
    pub admitted: bool,
    pub why: PodLoss,
}

impl Index {
    /// The active Runs whose Runtime Pod is lost at `now`, with why (see [`PodLoss`]):
    /// - the Pod is gone, or replaced by another of the same name (other UID): every Run;
    /// - the Pod is terminating: unclaimed Runs (runtimed stops claiming on SIGTERM) once
    ///   their `claim_window` has passed, since runtimed writes the claims it held back for
    ///   tasks it started when it is told to stop; claimed ones only once its heartbeat has
    ///   been stale for longer than `grace`, since runtimed reports those itself while it
    ///   lives;
    /// - the Pod's heartbeat has been stale, or its Lease missing, for longer than `grace` (a
    ///   lost node): every Run.
    ///
    /// How long a Pod has been without a Lease is counted from when this index first saw it
    /// without one, so the call records that instant; otherwise it changes nothing. Staleness
    /// counts only from `observed_since` on: the instant from which the caller's watches of
    /// Pods and Leases could be trusted (an API-server outage hides renewals; a Pod gone or
    /// replaced is a definite event and does not wait).
    pub fn lost_runs(
        &mut self,
        now: Timestamp,
        grace: SignedDuration,
        claim_window: SignedDuration,
        observed_since: Timestamp,
    ) -> Vec<LostRun> {
        let mut lost = Vec::new();
        for (namespace, ns) in &mut self.namespaces {
            for slot in ns.slots.iter_mut().flatten() {
                if slot.active.is_empty() {
                    continue;
                }
                let stale_since = match slot.lease.as_ref().and_then(|l| l.expires_at) {
                    Some(at) => at,
                    None => *slot.lease_gone_at.get_or_insert(now),
                }
                .max(observed_since);
                let stale_too_long = stale_since
                    .checked_add(grace)
                    .is_ok_and(|deadline| deadline <= now);
                for (uid, run) in &slot.active {
                    let why = match &slot.pod {
                        None => Some(PodLoss::Gone),
                        Some(pod) if run.pod_uid.as_ref().is_some_and(|u| *u != pod.uid) => {
                            Some(PodLoss::Replaced)
                        }
                        Some(pod)
                            if pod.deleting
                                && (!run.may_have_started(now, claim_window) || stale_too_long) =>
                        {
                            Some(PodLoss::Terminating)
                        }
                        Some(_) if stale_too_long => Some(PodLoss::HeartbeatStale),
                        Some(_) => None,
                    };
                    if let Some(why) = why {
                        lost.push(LostRun {
                            namespace: namespace.clone(),
                            name: run.facts.name.clone(),
                            uid: uid.clone(),
                            pod: slot.name.clone(),
                            admitted: run.admitted,
                            why,
                        });
                    }
                }
            }
        }
        lost.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        lost
    }

    /// Runtimes whose Pods' heartbeats expired in `(after, until]`: their Pending Runs are
    /// woken at the expiry instant, not at the next safety requeue.
    pub fn expired_between(&self, after: Timestamp, until: Timestamp) -> Vec<Wakeup> {
        let mut wakeups = BTreeSet::new();
        for (namespace, ns) in &self.namespaces {
            for slot in ns.slots.iter().flatten() {
                if let (Some(pod), Heartbeat::Expires(at)) = (&slot.pod, slot.hot.heartbeat)
                    && after < at
                    && at <= until
                {
                    wakeups.insert(Wakeup {
                        namespace: namespace.clone(),
                        runtime: pod.runtime.clone(),
                        source: WakeSource::RuntimePod,
                        pod: None,
                    });
                }
            }
        }
        wakeups.into_iter().collect()
    }

    /// The earliest heartbeat expiry after `now`, for the expiry timer.
    pub fn next_expiry_after(&self, now: Timestamp) -> Option<Timestamp> {
        self.namespaces
            .values()
            .flat_map(|ns| ns.slots.iter().flatten())
            .filter(|slot| slot.pod.is_some())
            .filter_map(|slot| match slot.hot.heartbeat {
                Heartbeat::Expires(at) if at > now => Some(at),
                _ => None,
            })
            .min()
    }
}
