//! What [`super::plan`] does with a Run between two attempts on this Pod (a failed attempt's
//! backoff, recorded in its `Running=False` condition): hold its room, end it on a cancel,
//! and claim its next attempt once [`retry::retry_due`] has passed. Pure, as `plan` is; it
//! must not decide whether a failure is retried (runtimed's agent asks [`retry`] when an
//! attempt ends).

use std::sync::Arc;

use super::{Admit, Claim, Failure, Plan, Records, State, prepare};
use crate::api::retry;
use crate::api::status::{Outcome, reasons};
use crate::api::{Resources, Run};
use crate::runtimed::Identity;

/// A Run between two attempts on this Pod: it holds its reservation whatever the capacity
/// says now (its room was never given up); a cancel ends it at once; once its backoff has
/// passed ([`retry::retry_due`]), its next attempt is claimed (not while draining: the
/// scheduler places it again once this Pod is gone). Its record is
/// [`State::BetweenAttempts`] until its retry is claimed ([`State::Claiming`]).
pub(super) fn between_attempts(
    run: &Arc<Run>,
    request: &Resources,
    me: &Identity,
    records: &mut Records,
    admit: Admit,
    out: &mut Plan,
) {
    records.hold(run, request, State::BetweenAttempts);
    if run.metadata.deletion_timestamp.is_some() {
        return;
    }
    if run.spec.cancel_requested {
        out.failures.push(Failure {
            run: run.clone(),
            outcome: Outcome::Cancelled,
            reason: reasons::CANCELLED,
            message: format!(
                "cancelled (spec.cancelRequested) while waiting to retry on Pod {}",
                me.pod_name
            ),
        });
        return;
    }
    if !admit.claiming {
        return;
    }
    let attempt = run.attempt();
    let due = retry::retry_due(run).unwrap_or(admit.now);
    if due > admit.now {
        out.next_retry = Some(out.next_retry.map_or(due, |at| at.min(due)));
        return;
    }
    match prepare(run, admit.functions) {
        Ok(task) => {
            records.set(run, State::Claiming);
            out.claims.push(Claim {
                run: run.clone(),
                request: request.clone(),
                task,
                retry: Some(attempt),
            })
        }
        Err(message) => out.failures.push(Failure {
            run: run.clone(),
            outcome: Outcome::Failed,
            reason: reasons::START_FAILED,
            message,
        }),
    }
}

#[cfg(test)]
mod tests {
    use kube::ResourceExt as _;

    use super::super::tests::{OnThisPod, admit_at, names, plan_here, records};
    use super::*;
    use crate::api::resources::RUNS;
    use crate::testing::run;

    fn at(seconds: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(seconds).unwrap()
    }

    #[test]
    fn a_run_between_attempts_holds_its_room_and_is_retried_once_its_backoff_has_passed() {
        // Attempt 2 failed at t=100 (whole seconds: before t=101); attempt 3's backoff is 2 s
        // (1 s doubled once), so it is due at t=103.
        let waiting = run("retried")
            .here()
            .retry_policy(3, "1s")
            .between_attempts(3, at(100))
            .arc();
        let next = run("next").here().created(5).arc();
        let mut c = records(&[(RUNS, 1)]);
        let p = plan_here(
            &[waiting.clone(), next.clone()],
            &mut c,
            admit_at(at(101), true),
        );
        assert!(
            p.claims.is_empty(),
            "before its backoff, and no room for next"
        );
        assert_eq!(
            p.waiting[0].run.name_any(),
            "next",
            "the held room is not given away"
        );
        assert_eq!(p.next_retry, Some(at(103)));
        assert_eq!(c.state("uid-retried"), Some(&State::BetweenAttempts));
        assert_eq!(c.cache().used().get(RUNS), 1);

        let mut c = records(&[(RUNS, 1)]);
        let p = plan_here(&[waiting, next], &mut c, admit_at(at(103), true));
        assert_eq!(names(&p.claims), ["retried"]);
        assert_eq!(p.claims[0].retry, Some(3));
        assert_eq!(c.state("uid-retried"), Some(&State::Claiming));
        assert_eq!(p.next_retry, None);
        assert!(p.failures.is_empty(), "never failed as RuntimedRestarted");
    }

    #[test]
    fn a_run_between_attempts_is_cancelled_at_once_and_not_retried_while_draining() {
        let cancelled = run("cancelled")
            .here()
            .retry_policy(3, "1s")
            .between_attempts(2, at(100))
            .cancel_requested()
            .arc();
        let mut c = records(&[(RUNS, 2)]);
        let p = plan_here(&[cancelled], &mut c, admit_at(at(100), true));
        assert_eq!(p.failures.len(), 1);
        assert_eq!(p.failures[0].outcome, Outcome::Cancelled);
        assert!(p.claims.is_empty());

        let due = run("due")
            .here()
            .retry_policy(3, "1s")
            .between_attempts(2, at(100))
            .arc();
        let mut c = records(&[(RUNS, 2)]);
        let p = plan_here(&[due], &mut c, admit_at(at(200), false));
        assert!(p.claims.is_empty() && p.failures.is_empty());
        assert_eq!(c.cache().used().get(RUNS), 1, "still held while draining");
    }

    #[test]
    fn a_bad_retry_policy_fails_the_claim_naming_the_field() {
        let runs = vec![run("bad").here().retry_policy(3, "soon").arc()];
        let mut c = records(&[(RUNS, 1)]);
        let p = plan_here(&runs, &mut c, admit_at(at(0), true));
        assert_eq!(p.failures[0].reason, reasons::START_FAILED);
        assert!(
            p.failures[0]
                .message
                .starts_with("spec.retryPolicy.backoff")
        );
    }
}
