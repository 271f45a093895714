//! Object → record conversion: what the index keeps of a Pod, a Lease and a Run.
//!
//! Owns the parsing of watched objects into the small records the index stores (capacity
//! annotations, Lease expiry, a Run's counted request and affinity selectors). It must not
//! store anything or know the index layout.

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use crate::api::resources::parse_capacity_annotations;
use crate::api::{ANNOTATION_SCALE_DOWN, LABEL_RUNTIME, Resources, Run};
use crate::scheduler::framework::facts::{CountedRequest, RunFacts};

/// What the scheduler knows about a Runtime Pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRecord {
    pub uid: String,
    /// Value of the `kruntimes.io/runtime` label.
    pub runtime: String,
    /// Whether the `Ready` condition is True.
    pub ready: bool,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// The complete capacity from the annotations, or why they could not be read. A malformed
    /// annotation never breaks the watch: the Pod is kept and RuntimePodAvailability rejects
    /// it with a bounded reason.
    pub capacity: Result<Resources, String>,
}

impl PodRecord {
    /// The record of a Runtime Pod; `None` for a Pod without the `kruntimes.io/runtime` label.
    pub fn of(pod: &Pod) -> Option<Self> {
        let runtime = pod.labels().get(LABEL_RUNTIME)?.clone();
        let ready = crate::api::pod_is_ready(pod);
        Some(PodRecord {
            uid: pod.uid().unwrap_or_default(),
            runtime,
            ready,
            // Chosen for removal counts as terminating: nothing new is placed there.
            deleting: pod.metadata.deletion_timestamp.is_some()
                || pod.annotations().contains_key(ANNOTATION_SCALE_DOWN),
            capacity: parse_capacity_annotations(pod.annotations()).map_err(|e| e.to_string()),
        })
    }
}

/// A watched Pod as the scheduler keeps it from the moment it arrives: its namespace, name and
/// record (`None`: not a Runtime Pod). A (re)list holds every Pod until it is complete; as
/// these, not as Pods (2.4 KB each before their spec, labels and annotations), it costs a few
/// hundred bytes per Pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedPod {
    pub namespace: String,
    pub name: String,
    pub record: Option<PodRecord>,
}

impl ObservedPod {
    pub fn of(pod: &Pod) -> Self {
        ObservedPod {
            namespace: pod.namespace().unwrap_or_default(),
            name: pod.name_any(),
            record: PodRecord::of(pod),
        }
    }
}

/// A watched heartbeat Lease as the scheduler keeps it from the moment it arrives (as
/// [`ObservedPod`]): its namespace, name and what [`LeaseRecord::observe`] reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedLease {
    pub namespace: String,
    pub name: String,
    pub holder: Option<String>,
    pub renew_time: Option<Timestamp>,
    pub duration_seconds: Option<i32>,
}

impl ObservedLease {
    pub fn of(lease: &Lease) -> Self {
        let spec = lease.spec.as_ref();
        ObservedLease {
            namespace: lease.namespace().unwrap_or_default(),
            name: lease.name_any(),
            holder: spec.and_then(|s| s.holder_identity.clone()),
            renew_time: spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0),
            duration_seconds: spec.and_then(|s| s.lease_duration_seconds),
        }
    }
}

/// A runtimed heartbeat Lease (named after its Pod).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    pub holder: Option<String>,
    pub renew_time: Option<Timestamp>,
    pub duration_seconds: Option<i32>,
    /// `renew_time + duration_seconds` (a missing or negative duration counts as 0); computed
    /// once here so a cycle only compares timestamps.
    pub expires_at: Option<Timestamp>,
}

impl LeaseRecord {
    /// The record of `lease` as observed at `observed_at` (the scheduler's clock), given what
    /// was known before.
    ///
    /// Freshness is judged by the observer's clock, as Kubernetes' node lifecycle controller
    /// judges node leases, so clock skew between runtimed and the scheduler can neither hide
    /// a renewal nor stretch a dead one: a renewal seen now lasts `leaseDurationSeconds` from
    /// now; an unchanged Lease keeps the expiry it had; a Lease seen for the first time (a
    /// start or relist) counts from the earlier of its `renewTime` and now, so a long-dead
    /// agent is not taken for alive after a scheduler restart.
    pub fn observe(
        lease: &ObservedLease,
        observed_at: Timestamp,
        previous: Option<&LeaseRecord>,
    ) -> Self {
        let holder = lease.holder.clone();
        let (renew_time, duration_seconds) = (lease.renew_time, lease.duration_seconds);
        let duration = SignedDuration::from_secs(i64::from(duration_seconds.unwrap_or(0).max(0)));
        // An overflow means "beyond the representable future": never expires.
        let after = |t: Timestamp| t.checked_add(duration).unwrap_or(Timestamp::MAX);
        let expires_at = match (renew_time, previous) {
            (None, _) => None,
            (Some(renewed), Some(prev))
                if prev.renew_time == Some(renewed)
                    && prev.holder == holder
                    && prev.duration_seconds == duration_seconds =>
            {
                prev.expires_at
            }
            (Some(_), Some(prev)) if prev.renew_time.is_some() => Some(after(observed_at)),
            (Some(renewed), _) => Some(after(renewed.min(observed_at))),
        };
        LeaseRecord {
            holder,
            renew_time,
            duration_seconds,
            expires_at,
        }
    }
}

/// An active Run as seen from its Pod: its facts (what it consumes and offers to affinity)
/// and how far it has got there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveRun {
    pub facts: Arc<RunFacts>,
    /// `status.assignedPodUID`: the Pod incarnation it was bound to (`None` from a writer that left it
    /// out; such a Run is judged by the Pod name alone).
    pub pod_uid: Option<String>,
    /// runtimed claimed it (phase Running, or Ready for a registered function); otherwise it
    /// is Scheduled and unclaimed.
    pub admitted: bool,
    /// Its resolved priority: only a Run of strictly higher priority may preempt it.
    pub priority: i32,
    /// `spec.priorityClassName`: whether its class lets a Running Run be preempted.
    pub class: Option<String>,
    /// `status.startTime`: the latest started victim loses the least work.
    pub started: Option<Timestamp>,
    /// The scheduler asked runtimed to stop it for a preemption (`DisruptionTarget`): its
    /// room is already on its way to the preemptor.
    pub disrupting: bool,
    /// When it was bound (its `Scheduled=True` condition's time), while runtimed has not
    /// claimed it: runtimed may have started its task within [`claim_window`] of then.
    pub bound: Option<Timestamp>,
}

impl ActiveRun {
    pub(super) fn of(run: &Run, facts: Arc<RunFacts>, priority: i32) -> Self {
        let status = run.status.as_ref();
        ActiveRun {
            facts,
            priority,
            class: run.spec.priority_class_name.clone(),
            started: status.and_then(|s| s.start_time.as_ref()).map(|t| t.0),
            disrupting: status.is_some_and(crate::api::status::disruption_requested),
            pod_uid: status.and_then(|s| s.assigned_pod_uid.clone()),
            admitted: run.phase().is_admitted(),
            bound: (!run.phase().is_admitted())
                .then(|| status.and_then(scheduled_at))
                .flatten(),
        }
    }

    /// What it consumes on its Pod.
    pub fn request(&self) -> &CountedRequest {
        &self.facts.counted
    }

    /// Whether runtimed may have started it by `now`: it claimed it, or it was bound less than
    /// `window` ago (runtimed starts a task before its held claim is written). Such a Run is
    /// never taken for unstarted: neither sent back to Pending from a terminating Pod nor
    /// preempted as a Run that has not started.
    pub fn may_have_started(&self, now: Timestamp, window: SignedDuration) -> bool {
        self.admitted || self.unclaimed_until(window).is_some_and(|end| now < end)
    }

    /// When an unclaimed Run's [`claim_window`] ends: from then on it is taken for unstarted.
    pub fn unclaimed_until(&self, window: SignedDuration) -> Option<Timestamp> {
        match (self.admitted, window.is_zero()) {
            (false, false) => self.bound.and_then(|at| at.checked_add(window).ok()),
            _ => None,
        }
    }

    pub(super) fn same_targets(&self, other: &ActiveRun) -> bool {
        self.facts.labels == other.facts.labels
            && self.facts.anti_affinity == other.facts.anti_affinity
    }
}

/// How long after its Bind an unclaimed Run may have started, for runtimed's `--claim-delay`
/// of `delay`: runtimed starts a task on its local reservation and writes the claim `delay`
/// later (or with the end). Zero without a delay. Otherwise the delay plus
/// [`CLAIM_WINDOW_MARGIN`]: the Bind's time is recorded to the second, and the watch and the
/// claim's write take their time too.
pub fn claim_window(delay: std::time::Duration) -> SignedDuration {
    if delay.is_zero() {
        return SignedDuration::ZERO;
    }
    SignedDuration::try_from(delay)
        .unwrap_or(SignedDuration::MAX)
        .saturating_add(CLAIM_WINDOW_MARGIN)
}

/// See [`claim_window`]: one second for the condition's truncated time, one for the watch
/// and the write.
pub const CLAIM_WINDOW_MARGIN: SignedDuration = SignedDuration::from_secs(2);

/// The time of a Run's `Scheduled=True` condition: when it was bound.
fn scheduled_at(status: &crate::api::RunStatus) -> Option<Timestamp> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == crate::api::status::CONDITION_SCHEDULED && c.status == "True")
        .map(|c| c.last_transition_time.0)
}
