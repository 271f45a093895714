//! The agent's admission edge: what it tells a Scheduled Run of this Pod while it waits
//! (`Waiting`, once per reason) and when it was first seen, and how a Run gets its task
//! started (`Admitted`, `Started`, `Retrying`; a start that fails ends the Run `StartFailed`):
//! once its claim landed, or at once with its claim held back for `--claim-delay` (a task's
//! first claim), and that held claim's own write when its window passes first. The decisions
//! are [`plan::plan`]'s and the claims' ([`super::super::claims`]).

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt as _;
use kube::runtime::events::EventType;
use tokio::time::Instant;

use super::super::claims::{ClaimWritten, Claimed, Landed, NotLanded};
use super::super::metrics;
use super::super::plan::{self, Claim, State};
use super::super::status_writer::Started;
use super::Agent;
use crate::api::{Run, RunPhase};
use crate::telemetry::events::reasons as event_reasons;

impl Agent {
    /// Publishes `Waiting` for a Run that newly waits, or waits for another reason (its
    /// record says which: [`plan::Records::wait`]).
    pub(super) fn note_waiting(&mut self, waiting: &[plan::Waiting]) {
        for plan::Waiting { run, why, news } in waiting {
            let name = run.name_any();
            tracing::debug!(run = %name, "Run {name} stays Scheduled: {why}");
            if !news {
                continue;
            }
            self.metrics
                .admissions
                .with_label_values(&[metrics::WAITING])
                .inc();
            self.events.emit(
                run,
                EventType::Normal,
                event_reasons::WAITING,
                "Admission",
                format!(
                    "does not fit on Runtime Pod {} now: {why}",
                    self.me.pod_name
                ),
            );
        }
    }

    /// Remembers when each Scheduled Run of this Pod was first seen; forgets the Runs that
    /// are neither Scheduled nor being claimed any more.
    pub(super) fn note_scheduled(&mut self, state: &[Arc<Run>], now: Instant) {
        let scheduled: HashSet<String> = state
            .iter()
            .filter(|r| r.phase() == RunPhase::Scheduled && plan::assigned_to(r, &self.me))
            .filter_map(|r| r.uid())
            .collect();
        let records = &self.records;
        self.scheduled_seen.retain(|uid, _| {
            scheduled.contains(uid) || records.state(uid) == Some(&State::Claiming)
        });
        for uid in scheduled {
            self.scheduled_seen.entry(uid).or_insert(now);
        }
    }

    /// Starts the task of a Run whose claim write has returned. Returns whether the
    /// reservation is still held (false: it was or will be released, so others may fit).
    pub(super) fn start(&mut self, written: ClaimWritten) -> bool {
        match self.claims.written(written) {
            Claimed::Landed(landed) => {
                let Landed { claim, written, at } = *landed;
                self.spawn_claimed(claim, written, at)
            }
            Claimed::NotLanded(not_landed) => {
                let retry = not_landed.retry;
                self.claim_failed(not_landed);
                retry
            }
            Claimed::Uncertain => true,
        }
    }

    /// Whether `claim`'s write is held back and its task started at once: a task's first
    /// claim, when `--claim-delay` is not zero. A function Run's registration and a retry
    /// claim first, and so does a task an earlier runtimed started and died under before its
    /// claim was written: it runs again (at least once), but claimed, so that a task that
    /// kills runtimed (its memory, say) ends `RuntimedRestarted` at the next restart instead
    /// of holding its Pod in a crash loop.
    pub(super) fn holds_back(&self, claim: &Claim) -> bool {
        if claim.retry.is_some()
            || claim.task.function.is_some()
            || self.settings.claim_delay.is_zero()
        {
            return false;
        }
        if self.children.started_before(&claim.run) {
            let name = claim.run.name_any();
            tracing::warn!(run = %name, "Run {name} was started by an earlier runtimed that stopped before its claim was written; claiming it before it starts again");
            return false;
        }
        true
    }

    /// Starts the task of `claim` on its reservation alone, its claim held back for
    /// `--claim-delay`: the task's end writes it if it comes first (one write), else it is
    /// written on its own ([`Self::write_held_claims`]).
    pub(super) fn start_held(&mut self, claim: Claim) {
        let now = Instant::now();
        let uid = claim.run.uid().unwrap_or_default();
        let started = Started {
            attempt: claim.run.attempt(),
            request: claim.request.clone(),
            at: Time(jiff::Timestamp::now()),
        };
        self.claims
            .hold(uid, started, now + self.settings.claim_delay);
        let scheduled = (*claim.run).clone();
        self.spawn_claimed(claim, scheduled, now);
    }

    /// Writes the held claims whose window has passed with their task still running.
    pub(super) fn write_held_claims(&mut self, now: Instant) {
        for (uid, started) in self.claims.take_due(now) {
            match self.children.last_written(&uid) {
                Some((name, first)) => self.writer.claim(name, uid, first, started),
                // Ended meanwhile: its end took the claim in.
                None => {
                    self.claims.settle(&uid);
                }
            }
        }
    }

    /// A claim did not land: a first claim's room is freed, and the same version is tried
    /// again at its time (a newer one at once).
    pub(super) fn claim_failed(&mut self, not_landed: NotLanded) {
        let NotLanded {
            uid,
            version,
            retry_at,
            retry,
        } = not_landed;
        self.records.claim_failed(&uid, version, retry_at, retry);
    }

    /// Spawns the task of a Run this agent has claimed (`written` is the claimed Run, its
    /// claim known to have landed `at`; or the Run as Scheduled, its claim held back from
    /// `at`). Returns whether the reservation is still held.
    pub(super) fn spawn_claimed(&mut self, claim: Claim, written: Run, at: Instant) -> bool {
        let Claim {
            run,
            request,
            task,
            retry,
        } = claim;
        let name = run.name_any();
        let uid = run.uid().unwrap_or_default();
        let task = match self.children.in_run_dir(&run, task) {
            Ok(task) => task,
            Err(message) => {
                tracing::warn!(run = %name, "Run {name} failed to start: {message}");
                self.fail_to_start(name, uid, written, message);
                return false;
            }
        };
        let pod = &self.me.pod_name;
        if let Some(attempt) = retry {
            let max = run.retry_policy().unwrap_or_default().max_attempts;
            tracing::info!(run = %name, "Run {name}: attempt {attempt} of {max} starts {:?}", task.program);
            self.events.emit(
                &written,
                EventType::Normal,
                event_reasons::RETRYING,
                "Retry",
                format!("attempt {attempt} of {max} starts on Runtime Pod {pod}"),
            );
            return match self.children.spawn(&name, &uid, &written, &task) {
                Ok(()) => {
                    self.records.set(&written, State::Running);
                    true
                }
                Err(e) => {
                    tracing::warn!(run = %name, "Run {name} failed to start: {e}");
                    self.fail_to_start(name, uid, written, e.to_string());
                    false
                }
            };
        }
        self.metrics
            .admissions
            .with_label_values(&[metrics::ADMITTED])
            .inc();
        if let Some(seen) = self.scheduled_seen.remove(&uid) {
            self.metrics
                .admission_wait
                .observe(at.saturating_duration_since(seen).as_secs_f64());
        }
        tracing::info!(run = %name, "claimed Run {name} with {request}; starting {:?}", task.program);
        // A Run that was told it waits is told it is admitted; for the others (admitted at
        // once) `Started` says both, and the API server is spared a write.
        let waited = self.records.get(&uid).is_some_and(|r| r.waited);
        if waited {
            self.events.emit(
                &written,
                EventType::Normal,
                event_reasons::ADMITTED,
                "Admission",
                format!("admitted on Runtime Pod {pod} with {request}"),
            );
        }
        match self.children.spawn(&name, &uid, &written, &task) {
            Ok(()) => {
                self.records.set(&written, State::Running);
                self.metrics.dispatch.observe(at.elapsed().as_secs_f64());
                let note = if waited {
                    format!("started the task on Runtime Pod {pod}")
                } else {
                    format!("admitted with {request} and started the task on Runtime Pod {pod}")
                };
                // A short task's end takes this note into its own Event (one write, not two).
                self.events
                    .hold(&written, event_reasons::STARTED, "Start", note, Some);
                true
            }
            Err(e) => {
                tracing::warn!(run = %name, "Run {name} failed to start: {e}");
                self.fail_to_start(name, uid, written, e.to_string());
                false
            }
        }
    }
}
