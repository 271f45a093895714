//! Run status transitions: the one terminal-status helper and condition upserts.
//!
//! Every terminal transition (scheduler, runtimed) goes through [`set_terminal`] so that the
//! phase, the `Completed` condition and `completionTime` stay normalized. Time is passed in.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::types::{RunPhase, RunStatus};

pub const CONDITION_SCHEDULED: &str = "Scheduled";
pub const CONDITION_ADMITTED: &str = "Admitted";
pub const CONDITION_COMPLETED: &str = "Completed";

/// Bounded CamelCase reasons written to `status.reason` and conditions.
pub mod reasons {
    pub const UNSCHEDULABLE: &str = "Unschedulable";
    pub const SCHEDULED: &str = "Scheduled";
    pub const INVALID_RESOURCES: &str = "InvalidResources";
    pub const ADMITTED: &str = "Admitted";
    pub const SUCCEEDED: &str = "Succeeded";
    pub const FAILED: &str = "Failed";
    pub const EXIT_CODE: &str = "NonZeroExitCode";
    pub const START_FAILED: &str = "StartFailed";
    pub const RUNTIMED_RESTARTED: &str = "RuntimedRestarted";
    pub const RUNTIME_POD_TERMINATED: &str = "RuntimePodTerminated";
}

/// How a Run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    Failed,
}

/// Sets or replaces the condition of `type_`. `lastTransitionTime` only moves when the
/// condition's status changes. Returns whether anything changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: &Time,
) -> bool {
    let status = if status { "True" } else { "False" };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == status && c.reason == reason && c.message == message => false,
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now.clone();
            }
            c.status = status.to_string();
            c.reason = reason.to_string();
            c.message = message.to_string();
            true
        }
        None => {
            conditions.push(Condition {
                type_: type_.to_string(),
                status: status.to_string(),
                reason: reason.to_string(),
                message: message.to_string(),
                last_transition_time: now.clone(),
                observed_generation: None,
            });
            true
        }
    }
}

/// The single terminal transition: phase, reason, message, the `Completed` condition,
/// `exitCode` and `completionTime`, all at once and exactly once. A Run that is already
/// terminal is left unchanged and `false` is returned.
pub fn set_terminal(
    status: &mut RunStatus,
    outcome: Outcome,
    reason: &str,
    message: &str,
    exit_code: Option<i32>,
    now: &Time,
) -> bool {
    if status.phase.is_some_and(RunPhase::is_terminal) {
        return false;
    }
    status.phase = Some(match outcome {
        Outcome::Succeeded => RunPhase::Succeeded,
        Outcome::Failed => RunPhase::Failed,
    });
    status.reason = Some(reason.to_string());
    status.message = Some(message.to_string());
    status.exit_code = exit_code;
    set_condition(
        &mut status.conditions,
        CONDITION_COMPLETED,
        true,
        reason,
        message,
        now,
    );
    if status.completion_time.is_none() {
        status.completion_time = Some(now.clone());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Time {
        Time(jiff::Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn set_terminal_sets_phase_condition_and_completion_time_once() {
        let mut status = RunStatus {
            phase: Some(RunPhase::Running),
            ..Default::default()
        };
        assert!(set_terminal(
            &mut status,
            Outcome::Failed,
            reasons::EXIT_CODE,
            "exited with code 3",
            Some(3),
            &at(10)
        ));
        assert_eq!(status.phase, Some(RunPhase::Failed));
        assert_eq!(status.exit_code, Some(3));
        assert_eq!(status.completion_time, Some(at(10)));
        let completed: Vec<_> = status
            .conditions
            .iter()
            .filter(|c| c.type_ == CONDITION_COMPLETED)
            .collect();
        assert_eq!(completed.len(), 1);
        assert_eq!(completed[0].status, "True");
        assert_eq!(completed[0].reason, reasons::EXIT_CODE);

        let before = status.clone();
        assert!(!set_terminal(
            &mut status,
            Outcome::Succeeded,
            reasons::SUCCEEDED,
            "",
            Some(0),
            &at(20)
        ));
        assert_eq!(status, before, "a terminal Run never changes again");
    }

    #[test]
    fn set_condition_moves_transition_time_only_on_status_change() {
        let mut conds = Vec::new();
        assert!(set_condition(
            &mut conds,
            CONDITION_SCHEDULED,
            false,
            "Unschedulable",
            "m1",
            &at(1)
        ));
        assert!(!set_condition(
            &mut conds,
            CONDITION_SCHEDULED,
            false,
            "Unschedulable",
            "m1",
            &at(2)
        ));
        assert!(set_condition(
            &mut conds,
            CONDITION_SCHEDULED,
            false,
            "Unschedulable",
            "m2",
            &at(3)
        ));
        assert_eq!(conds[0].last_transition_time, at(1));
        assert!(set_condition(
            &mut conds,
            CONDITION_SCHEDULED,
            true,
            "Scheduled",
            "",
            &at(4)
        ));
        assert_eq!(conds[0].last_transition_time, at(4));
        assert_eq!(conds.len(), 1);
    }
}
