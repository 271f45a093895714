//! `spec.retryPolicy`: whether a failed attempt is tried again, and when. One pure decision,
//! [`Policy::decide`], used by runtimed (a failed attempt on its Pod), the scheduler's healing
//! (a Run whose Runtime Pod was lost) and `explain`; nothing here reads a clock or talks to the
//! API server.
//!
//! The rules are the kruntimes project's (`internal/retry`): `maxAttempts` counts every
//! attempt including the first (default 1: no retry); the pause before attempt `n` is
//! `backoff · 2^(n−2)` (default 1 s), at most [`MAX_BACKOFF`]; an empty `retryableReasons`
//! retries every reason except `Cancelled`; `Cancelled` and the reasons of
//! [`NEVER_RETRIED`] are never retried, whatever the list says. A reason in the list may be
//! ours or the name that project gives the same failure ([`UPSTREAM_NAMES`]).

use std::time::Duration;

use super::status::reasons;
use super::types::{RetryPolicy, Run};

/// The longest pause between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// The pause before the first retry when `backoff` is unset.
pub const DEFAULT_BACKOFF: Duration = Duration::from_secs(1);

/// Reasons that end a Run however its policy reads: a cancel is the user's decision, and the
/// others are the Run's own configuration or results, which another attempt cannot change.
pub const NEVER_RETRIED: &[&str] = &[
    reasons::CANCELLED,
    // A function Run released for want of invocations: its end, not a failure.
    reasons::IDLE_TIMEOUT,
    reasons::INVALID_RESOURCES,
    reasons::INVALID_AFFINITY,
    reasons::INVALID_WORKSPACE,
    reasons::WORKSPACE_LOST,
    reasons::OUTPUTS_INVALID,
    reasons::OUTPUTS_TOO_LARGE,
    reasons::ARTIFACT_INVALID,
];

/// The kruntimes project's names for failures we name otherwise, so that a `retryableReasons`
/// written for it means the same here: (its name, ours).
pub const UPSTREAM_NAMES: &[(&str, &str)] = &[
    ("RuntimeError", reasons::EXIT_CODE),
    ("RuntimeError", reasons::FAILED),
    ("RuntimeExecute", reasons::START_FAILED),
    ("PrepareSource", reasons::START_FAILED),
    ("ExecutionLost", reasons::RUNTIMED_RESTARTED),
    ("PodGone", reasons::RUNTIME_POD_LOST),
    ("PodTerminating", reasons::RUNTIME_POD_LOST),
    ("PodTerminating", reasons::RUNTIME_POD_TERMINATED),
    ("PodUnhealthy", reasons::RUNTIME_POD_LOST),
];

/// A Run's retry policy with its defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Attempts in all, the first included (1..=100).
    pub max_attempts: i32,
    /// The pause before the first retry.
    pub backoff: Duration,
    /// Empty: every reason except the never-retried ones.
    pub retryable_reasons: Vec<String>,
}

impl Default for Policy {
    /// No retry: one attempt.
    fn default() -> Self {
        Policy {
            max_attempts: 1,
            backoff: DEFAULT_BACKOFF,
            retryable_reasons: Vec::new(),
        }
    }
}

/// What follows a failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run attempt `attempt` after `after`.
    Retry { attempt: i32, after: Duration },
    /// The Run ends with this failure; `exhausted` when the reason was retryable but every
    /// allowed attempt has been made (and there was more than one).
    GiveUp { exhausted: bool },
}

impl Policy {
    /// `spec.retryPolicy` with defaults, or why it cannot be used (a field and what to do).
    pub fn of(spec: Option<&RetryPolicy>) -> Result<Policy, String> {
        let Some(spec) = spec else {
            return Ok(Policy::default());
        };
        let max_attempts = match spec.max_attempts {
            None | Some(..=0) => 1,
            Some(n @ 1..=100) => n,
            Some(n) => {
                return Err(format!(
                    "spec.retryPolicy.maxAttempts: {n} is more than 100; use 1 to 100"
                ));
            }
        };
        let backoff = match spec.backoff.as_deref().filter(|b| !b.is_empty()) {
            None => DEFAULT_BACKOFF,
            Some(text) => parse_go_duration(text).ok_or_else(|| {
                format!(
                    "spec.retryPolicy.backoff: {text:?} is not a duration; use a positive value such as 1s, 500ms or 2m"
                )
            })?,
        };
        let backoff = if backoff.is_zero() {
            DEFAULT_BACKOFF
        } else {
            backoff
        };
        Ok(Policy {
            max_attempts,
            backoff,
            retryable_reasons: spec.retryable_reasons.clone(),
        })
    }

    /// The pause before attempt `attempt` (2 is the first retry): `backoff · 2^(attempt−2)`,
    /// at most [`MAX_BACKOFF`].
    pub fn backoff_before(&self, attempt: i32) -> Duration {
        let doublings = attempt.saturating_sub(2).clamp(0, 31) as u32;
        self.backoff
            .checked_mul(1u32 << doublings)
            .unwrap_or(MAX_BACKOFF)
            .min(MAX_BACKOFF)
    }

    /// Whether a failure with `reason` may be retried at all (attempts aside).
    pub fn retries(&self, reason: &str) -> bool {
        if NEVER_RETRIED.contains(&reason) {
            return false;
        }
        self.retryable_reasons.is_empty()
            || self.retryable_reasons.iter().any(|listed| {
                listed == reason
                    || UPSTREAM_NAMES
                        .iter()
                        .any(|(theirs, ours)| listed == theirs && *ours == reason)
            })
    }

    /// What follows attempt `attempt` (1-based) failing with `reason`.
    pub fn decide(&self, attempt: i32, reason: &str) -> Decision {
        let attempt = attempt.max(1);
        if !self.retries(reason) {
            return Decision::GiveUp { exhausted: false };
        }
        if attempt >= self.max_attempts {
            return Decision::GiveUp {
                exhausted: self.max_attempts > 1,
            };
        }
        let next = attempt + 1;
        Decision::Retry {
            attempt: next,
            after: self.backoff_before(next),
        }
    }
}

impl Run {
    /// `spec.retryPolicy` with its defaults, or why it cannot be used.
    pub fn retry_policy(&self) -> Result<Policy, String> {
        Policy::of(self.spec.retry_policy.as_ref())
    }

    /// The attempt this Run is on (`status.attempt`; 1 before the first claim records it).
    pub fn attempt(&self) -> i32 {
        self.status
            .as_ref()
            .and_then(|s| s.attempt)
            .unwrap_or(1)
            .max(1)
    }

    /// What follows this Run's current attempt failing with `reason`; a policy that cannot
    /// be used retries nothing (the claim has already refused such a Run).
    pub fn retry_decision(&self, reason: &str) -> Decision {
        self.retry_policy()
            .unwrap_or_default()
            .decide(self.attempt(), reason)
    }
}

/// When the next attempt of a Run between two attempts on its Pod may start
/// ([`super::status::in_backoff`]): the failed attempt's `Running=False` time plus the
/// backoff before the attempt it waits for. The condition's time has whole seconds, so the
/// backoff counts from the end of that second and is never shorter than the policy says.
/// `None` when the Run is not between attempts.
pub fn retry_due(run: &Run) -> Option<jiff::Timestamp> {
    let since = super::status::in_backoff(run.status.as_ref()?)?;
    let backoff = run
        .retry_policy()
        .unwrap_or_default()
        .backoff_before(run.attempt());
    let backoff = jiff::SignedDuration::try_from(backoff).unwrap_or(jiff::SignedDuration::MAX);
    Some(
        jiff::Timestamp::from_second(since.0.as_second().saturating_add(1))
            .ok()
            .and_then(|t| t.checked_add(backoff).ok())
            .unwrap_or(jiff::Timestamp::MAX),
    )
}

/// A Go duration as `metav1.Duration` spells it (`1s`, `500ms`, `1m30s`, `1.5s`), or plain
/// seconds; `None` when it is not one or is negative.
fn parse_go_duration(text: &str) -> Option<Duration> {
    if let Ok(secs) = text.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let parsed: jiff::SignedDuration = text.parse().ok()?;
    Duration::try_from(parsed).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn policy(max: i32, backoff: &str, reasons: &[&str]) -> Policy {
        Policy::of(Some(&RetryPolicy {
            max_attempts: Some(max),
            backoff: Some(backoff.into()),
            retryable_reasons: reasons.iter().map(|r| r.to_string()).collect(),
        }))
        .unwrap()
    }

    #[test]
    fn no_policy_is_one_attempt() {
        let p = Policy::of(None).unwrap();
        assert_eq!(p, Policy::default());
        assert_eq!(
            p.decide(1, reasons::EXIT_CODE),
            Decision::GiveUp { exhausted: false }
        );
    }

    #[test]
    fn backoff_doubles_from_the_first_retry_and_is_capped() {
        let p = policy(100, "1s", &[]);
        let secs: Vec<u64> = (2..=9).map(|a| p.backoff_before(a).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(p.backoff_before(100), MAX_BACKOFF);
        let p = policy(3, "5s", &[]);
        assert_eq!(p.backoff_before(2), Duration::from_secs(5));
        assert_eq!(p.backoff_before(3), Duration::from_secs(10));
        assert_eq!(
            policy(3, "500ms", &[]).backoff_before(3),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn attempts_run_out_at_max_attempts() {
        let p = policy(3, "1s", &[]);
        assert_eq!(
            p.decide(1, reasons::EXIT_CODE),
            Decision::Retry {
                attempt: 2,
                after: Duration::from_secs(1)
            }
        );
        assert_eq!(
            p.decide(2, reasons::EXIT_CODE),
            Decision::Retry {
                attempt: 3,
                after: Duration::from_secs(2)
            }
        );
        assert_eq!(
            p.decide(3, reasons::EXIT_CODE),
            Decision::GiveUp { exhausted: true }
        );
    }

    #[test]
    fn cancelled_and_the_runs_own_errors_are_never_retried_even_when_listed() {
        let p = policy(5, "1s", &["Cancelled", "OutputsInvalid", "NonZeroExitCode"]);
        for reason in NEVER_RETRIED {
            assert_eq!(
                p.decide(1, reason),
                Decision::GiveUp { exhausted: false },
                "{reason}"
            );
        }
        // Timeout is retryable by default, as upstream.
        assert!(matches!(
            policy(2, "1s", &[]).decide(1, reasons::TIMEOUT),
            Decision::Retry { .. }
        ));
    }

    #[test]
    fn retryable_reasons_accept_our_names_and_upstreams() {
        let p = policy(3, "1s", &["PodGone", "Timeout"]);
        assert!(p.retries(reasons::RUNTIME_POD_LOST));
        assert!(p.retries(reasons::TIMEOUT));
        assert!(!p.retries(reasons::EXIT_CODE));
        let p = policy(3, "1s", &["RuntimeError"]);
        assert!(p.retries(reasons::EXIT_CODE));
        assert!(!p.retries(reasons::RUNTIME_POD_LOST));
    }

    #[test]
    fn a_bad_policy_names_the_field() {
        let bad = |backoff: &str, max: i32| {
            Policy::of(Some(&RetryPolicy {
                max_attempts: Some(max),
                backoff: Some(backoff.into()),
                retryable_reasons: vec![],
            }))
            .unwrap_err()
        };
        assert!(bad("soon", 2).starts_with("spec.retryPolicy.backoff: \"soon\""));
        assert!(bad("-1s", 2).starts_with("spec.retryPolicy.backoff"));
        assert!(bad("1s", 101).starts_with("spec.retryPolicy.maxAttempts: 101"));
    }

    /// The model of a Run that fails with `reason` at every attempt, checked against a
    /// decision function: it is attempted exactly `maxAttempts` times when the reason is
    /// retryable (once otherwise), every pause is the base doubled per earlier retry and
    /// capped, and the last decision says the attempts ran out exactly when there was more
    /// than one. Returns what differs.
    fn check_model(
        p: &Policy,
        reason: &str,
        decide: impl Fn(&Policy, i32, &str) -> Decision,
    ) -> Result<(), String> {
        let mut attempt = 1;
        let mut pauses = Vec::new();
        let exhausted = loop {
            match decide(p, attempt, reason) {
                Decision::Retry {
                    attempt: next,
                    after,
                } => {
                    if next != attempt + 1 {
                        return Err(format!("attempt {attempt} is followed by {next}"));
                    }
                    pauses.push(after);
                    attempt = next;
                }
                Decision::GiveUp { exhausted } => break exhausted,
            }
            if attempt > 101 {
                return Err("more than 100 attempts".into());
            }
        };
        let retryable = !NEVER_RETRIED.contains(&reason);
        let expected = if retryable { p.max_attempts } else { 1 };
        if attempt != expected {
            return Err(format!("{attempt} attempts, expected {expected}"));
        }
        if exhausted != (retryable && p.max_attempts > 1) {
            return Err(format!("exhausted = {exhausted}"));
        }
        for (i, pause) in pauses.iter().enumerate() {
            let model = p.backoff.saturating_mul(1 << i.min(31)).min(MAX_BACKOFF);
            if *pause != model {
                return Err(format!("pause {i} is {pause:?}, the model says {model:?}"));
            }
        }
        Ok(())
    }

    fn any_reason() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            reasons::EXIT_CODE,
            reasons::TIMEOUT,
            reasons::RUNTIME_POD_LOST,
            reasons::START_FAILED,
            reasons::RUNTIMED_RESTARTED,
            reasons::CANCELLED,
            "OutputsInvalid",
        ])
    }

    proptest! {
        #[test]
        fn a_run_that_always_fails_is_attempted_as_the_policy_says(
            max in 1i32..=100,
            base_ms in 1u64..=90_000,
            reason in any_reason(),
        ) {
            let p = policy(max, &format!("{base_ms}ms"), &[]);
            prop_assert_eq!(check_model(&p, reason, Policy::decide), Ok(()));
        }

        /// A reason outside a non-empty list ends the Run at its first failure.
        #[test]
        fn unlisted_reasons_end_the_run_at_the_first_failure(max in 2i32..=100, attempt in 1i32..=99) {
            let p = policy(max, "1s", &["Timeout"]);
            prop_assert_eq!(p.decide(attempt, reasons::EXIT_CODE), Decision::GiveUp { exhausted: false });
        }
    }

    /// The model fails for decisions that are wrong in the ways a change could make them.
    #[test]
    fn the_model_catches_mutants() {
        let p = policy(3, "1s", &[]);
        let retry = |attempt: i32, after: Duration| Decision::Retry { attempt, after };
        // One attempt too many.
        let too_many = |p: &Policy, a: i32, r: &str| match p.decide(a, r) {
            Decision::GiveUp { exhausted: true } if a == p.max_attempts => {
                retry(a + 1, p.backoff_before(a + 1))
            }
            d => d,
        };
        assert!(check_model(&p, reasons::EXIT_CODE, too_many).is_err());
        // No doubling.
        let flat = |p: &Policy, a: i32, r: &str| match p.decide(a, r) {
            Decision::Retry { attempt, .. } => retry(attempt, p.backoff),
            d => d,
        };
        assert!(check_model(&p, reasons::EXIT_CODE, flat).is_err());
        // No cap.
        let uncapped = |p: &Policy, a: i32, r: &str| match p.decide(a, r) {
            Decision::Retry { attempt, .. } => retry(attempt, p.backoff * (1 << (attempt - 2))),
            d => d,
        };
        assert!(check_model(&policy(9, "1s", &[]), reasons::EXIT_CODE, uncapped).is_err());
        // Cancelled retried.
        let cancel_retried = |p: &Policy, a: i32, _: &str| p.decide(a, reasons::EXIT_CODE);
        assert!(check_model(&p, reasons::CANCELLED, cancel_retried).is_err());
        // The policy itself passes.
        assert_eq!(check_model(&p, reasons::EXIT_CODE, Policy::decide), Ok(()));
    }
}
