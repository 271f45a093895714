//! What the controller does with one cycle's outcome, decided purely: which status patch to
//! send (Bind, a Pending message, a terminal failure) and which Event to publish.
//!
//! Owns the mapping from [`ScheduleOutcome`] to writes and Events, so the controller only
//! sends what this returns and feeds the result back to the cache. It must not talk to the API
//! server or read a clock (`now` is an argument).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use crate::api::Run;
use crate::api::status;
use crate::scheduler::framework::ScheduleOutcome;
use crate::scheduler::status_patch::status_patch;

/// Appended to the Pending message of a Run a Runtime Pod is being drained for (the message
/// names no Pod; `status.nominatedPodName` does).
pub const NOMINATED_NOTE: &str =
    " A Runtime Pod is being drained for this Run (see status.nominatedPodName).";

/// The one thing to carry out for a cycle.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Bind: send `patch` (guarded by the observed resourceVersion), then hold `Scheduled`
    /// for [`unstarted_note`] to decide on. Any failed write releases the reservation.
    /// `status` is the status `patch` writes, for a patch rebased on a fresh read.
    Bind {
        pod: String,
        pod_uid: String,
        patch: Value,
        status: Box<crate::api::RunStatus>,
    },
    /// Record `Scheduled=False` with `message`; when `new_message`, publish
    /// `FailedScheduling` once the write lands.
    Pending {
        patch: Value,
        message: String,
        new_message: bool,
    },
    /// Fail the Run for good through the terminal helper, then publish `reason`.
    Fail {
        patch: Value,
        reason: &'static str,
        message: String,
    },
    /// Nothing to write: the status already says it, or the Run backs off (a reserve
    /// conflict or a failed Score plugin; counted and logged by the controller).
    Nothing,
}

/// The step for `outcome`, the cycle of `run` whose nomination is now `nominated`, at `now`.
/// `priority`, the Run's resolved priority (`None` while its class is missing), is recorded
/// in `status.priority` with the first write that has one to record, never in a write of its
/// own.
pub fn step(
    run: &Run,
    outcome: &ScheduleOutcome,
    nominated: Option<&str>,
    priority: Option<i32>,
    now: &Time,
) -> Step {
    let mut status = run.status.clone().unwrap_or_default();
    let recorded = status.priority.is_none() && priority.is_some();
    if recorded {
        status.priority = priority;
    }
    match outcome {
        ScheduleOutcome::Reserved { pod, pod_uid, .. } => {
            status::set_bound(&mut status, pod, pod_uid, now);
            match status_patch(run, &status) {
                Some(patch) => Step::Bind {
                    pod: pod.clone(),
                    pod_uid: pod_uid.clone(),
                    patch,
                    status: Box::new(status),
                },
                // Bound already as far as this version says: nothing would change.
                None => Step::Nothing,
            }
        }
        ScheduleOutcome::Unschedulable(unschedulable) => {
            let mut message = unschedulable.message();
            if nominated.is_some() {
                message.push_str(NOMINATED_NOTE);
            }
            let new_message = !matches!(
                status.reason.as_deref(),
                Some(
                    status::reasons::UNSCHEDULABLE
                        | status::reasons::NOMINATED
                        | status::reasons::PRIORITY_CLASS_NOT_FOUND
                )
            ) || status.message.as_deref() != Some(message.as_str());
            let reason = unschedulable.reason();
            if !status::set_waiting(&mut status, reason, &message, nominated, now) && !recorded {
                return Step::Nothing;
            }
            match status_patch(run, &status) {
                Some(patch) => Step::Pending {
                    patch,
                    message,
                    new_message,
                },
                None => Step::Nothing,
            }
        }
        ScheduleOutcome::Invalid { reason, message } => {
            if !status::set_invalid(&mut status, reason, message, now) {
                return Step::Nothing;
            }
            match status_patch(run, &status) {
                Some(patch) => Step::Fail {
                    patch,
                    reason,
                    message: message.clone(),
                },
                None => Step::Nothing,
            }
        }
        ScheduleOutcome::ReserveConflict { .. } | ScheduleOutcome::Error(_) => Step::Nothing,
    }
}

/// The held `Scheduled` Event's note once its window has passed, or `None` when it tells
/// nothing runtimed's Events do not (the Run, the one with `uid`, started or ended on `pod`,
/// or is gone or elsewhere): it earns its write only for a Run still not started where it was
/// bound. `current` is the newest version of the Run the scheduler has seen; when that is
/// still `bound_from`, the version the Bind was written on (a watch running behind), nothing
/// since has been seen, so the Run is not known to have started either.
pub fn unstarted_note(
    current: Option<&Run>,
    uid: &str,
    pod: &str,
    bound_from: Option<&str>,
    note: String,
) -> Option<String> {
    let current = current?;
    let same_run = current.metadata.uid.as_deref() == Some(uid);
    let behind = bound_from.is_some() && current.metadata.resource_version.as_deref() == bound_from;
    let unstarted =
        current.phase() == crate::api::RunPhase::Scheduled && current.active_pod() == Some(pod);
    (same_run && (behind || unstarted)).then(|| format!("{note}; not started there yet"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::framework::{CycleError, ReserveError, ScoreError};
    use crate::testing::*;

    fn now() -> Time {
        Time(NOW)
    }

    #[test]
    fn scheduled_is_published_only_for_a_run_not_started_where_it_was_bound() {
        let note = || "Assigned to Runtime Pod p".to_string();
        let scheduled = run("a").uid("u").on("p").resource_version("8").build();
        let unstarted = Some("Assigned to Runtime Pod p; not started there yet");
        assert_eq!(
            unstarted_note(Some(&scheduled), "u", "p", Some("7"), note()).as_deref(),
            unstarted
        );
        // A watch still showing the version the Bind was written on has seen nothing since.
        let behind = run("a").uid("u").resource_version("7").build();
        assert_eq!(
            unstarted_note(Some(&behind), "u", "p", Some("7"), note()).as_deref(),
            unstarted
        );
        let running = run("a").uid("u").on("p").running().build();
        let done = run("a").uid("u").on("p").succeeded().build();
        let elsewhere = run("a").uid("u").on("q").build();
        let replaced = run("a").uid("v").on("p").build();
        let pending = run("a").uid("u").build();
        for told in [&running, &done, &elsewhere, &replaced, &pending] {
            assert_eq!(
                unstarted_note(Some(told), "u", "p", Some("7"), note()),
                None,
                "{told:?}"
            );
        }
        assert_eq!(unstarted_note(None, "u", "p", Some("7"), note()), None);
    }

    fn unschedulable_outcome(world: &World, r: &RunBuilder) -> ScheduleOutcome {
        let mut cache = world.cache();
        cache.apply(&r.build(), NOW);
        cache
            .schedule_next(&crate::scheduler::plugins::registry(), NOW)
            .unwrap()
            .outcome
    }

    fn full() -> World {
        World::new()
            .pods([pod("p1").capacity(&[("runs", 1)])])
            .runs([run("x").on("p1")])
    }

    #[test]
    fn a_cancelled_pending_run_ends_cancelled_and_is_never_placed() {
        let world = World::new().pods([pod("p1").capacity(&[("runs", 4)])]);
        let cancelled = run("c").cancel_requested().resource_version("3");
        let outcome = unschedulable_outcome(&world, &cancelled);
        let ScheduleOutcome::Invalid { reason, .. } = &outcome else {
            panic!("a cancelled Run is refused at PreFilter, not placed: {outcome:?}");
        };
        assert_eq!(*reason, status::reasons::CANCELLED);
        let Step::Fail { patch, reason, .. } =
            step(&cancelled.build(), &outcome, None, None, &now())
        else {
            panic!("a terminal write");
        };
        assert_eq!(reason, status::reasons::CANCELLED);
        assert_eq!(patch["status"]["phase"], "Cancelled");
        assert_eq!(patch["status"]["reason"], "Cancelled");
        assert!(patch["status"]["assignedPod"].is_null());
    }

    #[test]
    fn a_reservation_is_bound_with_the_pod_and_its_uid() {
        let outcome = ScheduleOutcome::Reserved {
            pod: "p1".into(),
            pod_uid: "uid-p1".into(),
            total: 0,
            scores: vec![],
            rejections: vec![],
        };
        let observed = run("a").resource_version("7").build();
        let Step::Bind {
            pod,
            pod_uid,
            patch,
            ..
        } = step(&observed, &outcome, None, None, &now())
        else {
            panic!("a bind");
        };
        assert_eq!((pod.as_str(), pod_uid.as_str()), ("p1", "uid-p1"));
        assert_eq!(patch["status"]["assignedPod"], "p1");
        assert_eq!(patch["status"]["phase"], "Scheduled");
        assert_eq!(
            patch["metadata"]["resourceVersion"], "7",
            "guarded by the observed version"
        );
    }

    #[test]
    fn an_unschedulable_run_is_told_why_once_and_the_event_only_for_a_new_message() {
        let r = run("a");
        let outcome = unschedulable_outcome(&full(), &r);
        let Step::Pending {
            patch,
            message,
            new_message,
        } = step(&r.build(), &outcome, None, None, &now())
        else {
            panic!("a Pending write");
        };
        assert_eq!(
            message,
            "0/1 Runtime Pods are available: 1 Insufficient runs."
        );
        assert!(new_message);
        assert_eq!(patch["status"]["message"], message.as_str());
        // The Run now says so: the same outcome writes nothing again.
        let mut written = r.build();
        let mut status = written.status.clone().unwrap_or_default();
        status::set_pending(&mut status, &message, None, &now());
        written.status = Some(status);
        assert_eq!(step(&written, &outcome, None, None, &now()), Step::Nothing);
    }

    #[test]
    fn a_nominated_run_names_its_pod_and_says_it_is_being_drained() {
        let r = run("a");
        let outcome = unschedulable_outcome(&full(), &r);
        let Step::Pending { patch, message, .. } =
            step(&r.build(), &outcome, Some("p1"), None, &now())
        else {
            panic!("a Pending write");
        };
        assert!(message.ends_with(NOMINATED_NOTE), "{message}");
        assert_eq!(patch["status"]["nominatedPodName"], "p1");
        assert_eq!(patch["status"]["reason"], status::reasons::NOMINATED);
    }

    #[test]
    fn an_invalid_run_fails_for_good() {
        let outcome = ScheduleOutcome::Invalid {
            reason: "InvalidResources",
            message: "spec.resources.requests[runs]: \"-1\" is negative".into(),
        };
        let Step::Fail { patch, reason, .. } =
            step(&run("a").build(), &outcome, None, None, &now())
        else {
            panic!("a failure");
        };
        assert_eq!(reason, "InvalidResources");
        assert_eq!(patch["status"]["phase"], "Failed");
    }

    #[test]
    fn conflicts_and_plugin_errors_write_nothing() {
        let conflict = ScheduleOutcome::ReserveConflict {
            error: ReserveError::PodGone { pod: "p1".into() },
            rejections: vec![],
        };
        let error = ScheduleOutcome::Error(CycleError::Score(ScoreError {
            plugin: "LeastLoaded",
            message: "boom".into(),
        }));
        for outcome in [conflict, error] {
            assert_eq!(
                step(&run("a").build(), &outcome, None, None, &now()),
                Step::Nothing
            );
        }
    }

    #[test]
    fn the_resolved_priority_rides_on_the_first_write_and_is_never_written_alone() {
        let r = run("a");
        let outcome = unschedulable_outcome(&full(), &r);
        let Step::Pending { patch, .. } = step(&r.build(), &outcome, None, Some(1000), &now())
        else {
            panic!("a Pending write");
        };
        assert_eq!(patch["status"]["priority"], 1000);
        let mut written = r.build();
        let mut status = written.status.clone().unwrap_or_default();
        status::set_pending(&mut status, &outcome_message(&outcome), None, &now());
        status.priority = Some(1000);
        written.status = Some(status);
        assert_eq!(
            step(&written, &outcome, None, Some(1000), &now()),
            Step::Nothing,
            "recorded: nothing to write"
        );
    }

    #[test]
    fn a_run_of_a_missing_priority_class_waits_with_its_own_reason_naming_the_class() {
        let r = run("a").priority_class("urgent");
        let outcome = unschedulable_outcome(&full(), &r);
        let Step::Pending { patch, message, .. } = step(&r.build(), &outcome, None, None, &now())
        else {
            panic!("a Pending write");
        };
        assert_eq!(
            patch["status"]["reason"],
            status::reasons::PRIORITY_CLASS_NOT_FOUND
        );
        assert!(
            message.contains("PriorityClass \"urgent\" not found"),
            "{message}"
        );
        assert!(patch["status"].get("priority").is_none());
    }

    fn outcome_message(outcome: &ScheduleOutcome) -> String {
        match outcome {
            ScheduleOutcome::Unschedulable(u) => u.message(),
            other => panic!("not unschedulable: {other:?}"),
        }
    }
}
