//! runtimed's status writes once a task has started: a held claim whose window has passed
//! ([`Started`], [`status::claim_started`]), a Run's last write (its end through
//! [`status::set_terminal`], with a held claim taken in, or its requeue after a preemption) and
//! a function Run's Ready, each in a task of its own, retried across API outages with
//! [`api_backoff`].
//!
//! Owns how many of its writes are in flight; a last write reports back with
//! [`WriteEvent::LastWritten`] so the agent releases the reservation only then (the Run's record,
//! [`plan::State::Writing`], says it is being written meanwhile). It must not decide what to write
//! (the agent and [`super::plan`] do), never writes a Run that is no longer this Pod's, and never
//! releases a reservation itself.

use std::collections::BTreeMap;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable as _};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt as _;
use kube::api::Api;
use kube::runtime::events::EventType;

use super::Identity;
use super::executor::Terminal;
use super::metrics::{self, RuntimedMetrics};
use super::plan;
use super::report::Report;
use crate::api::retry;
use crate::api::status::{self, Outcome};
use crate::api::{Resources, Run, RunPhase, RunStatus, post_params};
use crate::telemetry::events::{RunEvents, reasons as event_reasons};

/// Longest pause between two attempts of a status write or read across an API outage.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The pause between two attempts of a read or write across an API outage: 100 ms, doubling,
/// each with jitter of up to as much again (so Pods that lost the API server together do not
/// come back in step), at most [`MAX_BACKOFF`] with the jitter; never giving up, since the
/// task that retries lives only as long as the process.
pub(super) fn api_backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(MAX_BACKOFF / 2)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
}

/// An event to publish once a write has landed: type, reason, action, note.
type Note = (EventType, &'static str, &'static str, String);

/// What a successful execution produced, written with its terminal status.
#[derive(Debug, Clone, Default)]
pub(super) struct Results {
    /// `$KRUNTIME_OUTPUTS`' pairs.
    pub outputs: BTreeMap<String, String>,
    /// The refs of its stored artifacts.
    pub artifact_refs: Vec<serde_json::Value>,
    /// The store they are in (the Runtime's `spec.artifactStore` as it was).
    pub artifact_store: Option<serde_json::Value>,
}

/// A task started before its claim was written (a held claim): what that claim writes.
#[derive(Debug, Clone)]
pub(super) struct Started {
    /// The attempt it runs.
    pub attempt: i32,
    /// What runtimed reserved for it.
    pub request: Resources,
    /// When the task started: the claim's `startTime`.
    pub at: Time,
}

impl Started {
    /// The claim, applied to `status` while the Run is still Scheduled at this attempt
    /// ([`status::claim_started`]); returns whether anything changed.
    fn claim(&self, status: &mut RunStatus, pod: &str) -> bool {
        status::claim_started(status, self.attempt, pod, &self.request, &self.at)
    }
}

/// What the status writer reports back to the agent.
pub(super) enum WriteEvent {
    /// A held claim's own write returned, by UID: the Run as written, when it was (not when
    /// the Run had been claimed, had moved on or was gone).
    Claimed(String, Option<Box<Run>>),
    /// A last write (terminal, or the requeue after a preemption) landed or was given up, by
    /// UID: its reservation is released.
    LastWritten(String),
    /// A failed attempt's write (the Run stays here for its retry) returned, by UID, and
    /// whether it landed; the reservation stays held either way.
    AttemptWritten(String, bool),
}

pub(super) struct StatusWriter {
    api: Api<Run>,
    me: Identity,
    events: RunEvents,
    metrics: RuntimedMetrics,
    /// Where a last write reports that it has landed (or been given up).
    done: Report<WriteEvent>,
    /// Last writes and failed attempts' writes not completed yet.
    in_flight: usize,
}

/// The attempt a failed one is retried as, and after how long (the retry policy's decision).
pub(super) struct NextAttempt {
    pub(super) next: i32,
    pub(super) after: Duration,
}

impl StatusWriter {
    pub(super) fn new(
        api: Api<Run>,
        me: Identity,
        events: RunEvents,
        metrics: RuntimedMetrics,
        done: Report<WriteEvent>,
    ) -> Self {
        StatusWriter {
            api,
            me,
            events,
            metrics,
            done,
            in_flight: 0,
        }
    }

    pub(super) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// A last write reported [`WriteEvent::LastWritten`].
    pub(super) fn landed(&mut self) {
        self.in_flight -= 1;
    }

    /// A failed attempt's write returned ([`WriteEvent::AttemptWritten`]).
    pub(super) fn attempt_written(&mut self) {
        self.in_flight -= 1;
    }

    /// A held claim's write returned ([`WriteEvent::Claimed`]).
    pub(super) fn claim_written(&mut self) {
        self.in_flight -= 1;
    }

    /// Writes a held claim whose window has passed while its task runs, in the background:
    /// phase Running with the task's start ([`status::claim_started`]) over `first` (the Run
    /// as Scheduled) and, after a conflict, over the Run as read again; nothing once the Run
    /// is claimed, has moved on or is no longer this Pod's. Reports [`WriteEvent::Claimed`].
    pub(super) fn claim(&mut self, name: String, uid: String, first: Run, started: Started) {
        self.in_flight += 1;
        let (api, me, done) = (self.api.clone(), self.me.clone(), self.done.clone());
        let retries = self
            .metrics
            .status_write_retries
            .with_label_values(&[metrics::WRITE_CLAIM]);
        tokio::spawn(async move {
            let pod = me.pod_name.clone();
            let apply = move |status: &mut RunStatus, _: &Time| started.claim(status, &pod);
            let written = write_status(&api, &me, &name, &uid, Some(first), apply, &retries).await;
            done.send(WriteEvent::Claimed(uid, written.map(Box::new)));
        });
    }

    /// Writes `terminal` (and the execution's `outputs` in `status.outputs`, its stored
    /// artifacts in `status.artifactRefs` with the store in `status.artifactStore`) in the
    /// background, with the claim `held` back for it, if any (one write for the claim and the
    /// end); the reservation of `uid` is released once the write has landed (or been given
    /// up), never before.
    pub(super) fn finish(
        &mut self,
        name: String,
        uid: String,
        first: Run,
        held: Option<Started>,
        terminal: Terminal,
        results: Results,
    ) {
        let Results {
            outputs,
            artifact_refs,
            artifact_store,
        } = results;
        let attempt = first.attempt();
        let exhausted = matches!(terminal.outcome, Outcome::Failed | Outcome::Timeout)
            && first.retry_decision(terminal.reason)
                == (retry::Decision::GiveUp { exhausted: true });
        let (type_, reason) = match terminal.outcome {
            Outcome::Succeeded if attempt > 1 => (EventType::Normal, event_reasons::RUN_SUCCEEDED),
            Outcome::Succeeded => (EventType::Normal, event_reasons::COMPLETED),
            _ if exhausted => (EventType::Warning, event_reasons::RETRIES_EXHAUSTED),
            Outcome::Failed => (EventType::Warning, event_reasons::FAILED),
            Outcome::Cancelled => (EventType::Normal, event_reasons::CANCELLED),
            Outcome::Timeout => (EventType::Warning, event_reasons::TIMED_OUT),
        };
        let mut note = match terminal.exit_code {
            Some(code) => format!("{} (exit code {code})", terminal.message),
            None => format!("{}: {}", terminal.reason, terminal.message),
        };
        if attempt > 1 || exhausted {
            note = format!("attempt {attempt}: {note}");
        }
        let apply = move |status: &mut RunStatus, now: &Time| {
            if !status.phase.is_some_and(RunPhase::is_terminal) {
                status.outputs.extend(outputs.clone());
                if !artifact_refs.is_empty() {
                    status.artifact_refs = artifact_refs.clone();
                    status.artifact_store = artifact_store.clone();
                }
            }
            status::set_terminal(
                status,
                terminal.outcome,
                terminal.reason,
                &terminal.message,
                terminal.exit_code,
                now,
            )
        };
        self.write_last(name, uid, first, held, apply, (type_, reason, "End", note));
    }

    /// Writes a failed attempt that the Run's retry policy retries
    /// ([`status::set_attempt_failed`]) in the background: the Run stays Running on this Pod
    /// and keeps its reservation (this is not a last write); from the watch's next view of it
    /// [`plan::plan`] holds it between attempts and claims attempt `next` after `after`. A
    /// claim `held` back for the attempt is written first, on its own: only a Running Run's
    /// attempt fails (the admission policy's rule), and retries are rare.
    pub(super) fn fail_attempt(
        &mut self,
        name: String,
        uid: String,
        first: Run,
        held: Option<Started>,
        terminal: Terminal,
        NextAttempt { next, after }: NextAttempt,
    ) {
        let failed = first.attempt();
        let max = first.retry_policy().unwrap_or_default().max_attempts;
        self.in_flight += 1;
        let note = format!(
            "attempt {failed} of {max} failed ({}: {}); attempt {next} starts in {after:?} on Pod {}",
            terminal.reason, terminal.message, self.me.pod_name
        );
        let (api, me, events, done) = (
            self.api.clone(),
            self.me.clone(),
            self.events.clone(),
            self.done.clone(),
        );
        let retries = self
            .metrics
            .status_write_retries
            .with_label_values(&[metrics::WRITE_TERMINAL]);
        tokio::spawn(async move {
            let apply = move |status: &mut RunStatus, now: &Time| {
                status::set_attempt_failed(
                    status,
                    failed,
                    next,
                    terminal.reason,
                    &terminal.message,
                    terminal.exit_code,
                    now,
                )
            };
            let first = match held {
                None => Some(first),
                // Claimed now, or (by the held claim's own write, or never) before: the
                // attempt's write then reads the Run again.
                Some(started) => {
                    let pod = me.pod_name.clone();
                    let claim = move |status: &mut RunStatus, _: &Time| started.claim(status, &pod);
                    write_status(&api, &me, &name, &uid, Some(first), claim, &retries).await
                }
            };
            let written = write_status(&api, &me, &name, &uid, first, apply, &retries).await;
            if let Some(written) = &written {
                events.emit(
                    written,
                    EventType::Warning,
                    event_reasons::FAILED_RETRYING,
                    "Retry",
                    note,
                );
            }
            done.send(WriteEvent::AttemptWritten(uid, written.is_some()));
        });
    }

    /// Sends a preempted Run back to Pending for its next attempt ([`status::set_requeued`])
    /// in the background; its reservation is released once the write has landed (or been
    /// given up), never before, so the scheduler never sees its room free while it runs.
    pub(super) fn requeue(&mut self, name: String, uid: String, first: Run) {
        let message = format!(
            "stopped by runtimed on Pod {} for a higher-priority Run; it runs again later",
            self.me.pod_name
        );
        let note = message.clone();
        let apply =
            move |status: &mut RunStatus, now: &Time| status::set_requeued(status, &message, now);
        let event = (
            EventType::Warning,
            event_reasons::PREEMPTED,
            "Preemption",
            note,
        );
        // Only a Run the scheduler saw Running is preempted this way: claimed.
        self.write_last(name, uid, first, None, apply, event);
    }

    /// A function Run's registration is ready: the Run becomes Ready (still active, holding
    /// its request) in the background. Not a last write: nothing reports back.
    pub(super) fn function_ready(&self, name: String, uid: String, first: Run) {
        let (api, me, events) = (self.api.clone(), self.me.clone(), self.events.clone());
        let message = format!(
            "the function is registered on Pod {}'s runtime server and serves invocations",
            self.me.pod_name
        );
        let retries = self
            .metrics
            .status_write_retries
            .with_label_values(&[metrics::WRITE_READY]);
        tokio::spawn(async move {
            let apply = move |status: &mut RunStatus, _: &Time| {
                status::set_function_ready(status, &message)
            };
            if let Some(written) =
                write_status(&api, &me, &name, &uid, Some(first), apply, &retries).await
            {
                events.emit(
                    &written,
                    EventType::Normal,
                    event_reasons::STARTED,
                    "Start",
                    "the function is Ready".to_string(),
                );
            }
        });
    }

    /// This agent's last write of a Run (its end, or its requeue after a preemption), in the
    /// background through [`write_status`], with the claim `held` back for it, if any: the
    /// agent is told once the write has landed (or been given up), and `event` is published
    /// when this call wrote it.
    fn write_last(
        &mut self,
        name: String,
        uid: String,
        first: Run,
        held: Option<Started>,
        apply: impl Fn(&mut RunStatus, &Time) -> bool + Send + Sync + 'static,
        event: Note,
    ) {
        self.in_flight += 1;
        // The fence: only the attempt this write is about, never a later one (a retry placed
        // here again after this agent lost track of the Run).
        let attempt = first.attempt();
        let pod = self.me.pod_name.clone();
        let apply = move |status: &mut RunStatus, now: &Time| {
            if status.attempt.unwrap_or(1).max(1) != attempt {
                return false;
            }
            // Still Scheduled: the claim goes in the same write (a no-op once it landed).
            if let Some(started) = &held {
                started.claim(status, &pod);
            }
            apply(status, now)
        };
        let (api, me, done, events) = (
            self.api.clone(),
            self.me.clone(),
            self.done.clone(),
            self.events.clone(),
        );
        let retries = self
            .metrics
            .status_write_retries
            .with_label_values(&[metrics::WRITE_TERMINAL]);
        tokio::spawn(async move {
            if let Some(written) =
                write_status(&api, &me, &name, &uid, Some(first), apply, &retries).await
            {
                let (type_, reason, action, note) = event;
                events.emit(&written, type_, reason, action, note);
            }
            done.send(WriteEvent::LastWritten(uid));
        });
    }
}

/// Why one attempt of [`write_status`] did not settle it.
enum Unsettled {
    /// The Run could not be read, at this attempt.
    Read(u64, kube::Error),
    /// The write failed (neither a 404 nor a 409), at this attempt.
    Write(u64, kube::Error),
    /// The write met a newer version: read the Run again and apply the change again, at once.
    Conflict,
}

/// Writes the status `apply` makes of the Run's (a terminal one through
/// [`status::set_terminal`], the requeue after a preemption, or Ready) with the Run's
/// resourceVersion, for as long as this process lives: API errors and outages are retried
/// with [`api_backoff`], and a conflict re-reads the Run and applies the same change again
/// without waiting. Nothing is written when the Run is gone, recreated, no longer on this Pod,
/// or `apply` finds nothing to change (terminal already, whoever wrote that). Returns the Run
/// as written, when this call wrote it. `retries` counts every attempt after the first.
async fn write_status(
    api: &Api<Run>,
    me: &Identity,
    name: &str,
    uid: &str,
    first: Option<Run>,
    apply: impl Fn(&mut RunStatus, &Time) -> bool,
    retries: &prometheus::IntCounter,
) -> Option<Run> {
    // The first attempt writes over `first`; every later one reads the Run again.
    let mut first = first;
    let mut attempt = 0u64;
    let apply = &apply;
    let once = || {
        attempt += 1;
        if attempt > 1 {
            retries.inc();
        }
        let (run, attempt) = (first.take(), attempt);
        async move { write_once(api, me, name, uid, run, apply, attempt).await }
    };
    once.retry(api_backoff())
        .adjust(|e, delay| match e {
            Unsettled::Conflict => Some(Duration::ZERO),
            _ => delay,
        })
        .notify(|e, delay| match e {
            Unsettled::Read(attempt, e) => tracing::warn!(run = %name, "cannot read Run {name} (attempt {attempt}): {e}; retrying in {delay:?}"),
            Unsettled::Write(attempt, e) => tracing::warn!(run = %name, "cannot write the status of Run {name} (attempt {attempt}): {e}; retrying in {delay:?}"),
            Unsettled::Conflict => {}
        })
        .await
        // The attempts never run out: an error never comes back.
        .unwrap_or(None)
}

/// One attempt of [`write_status`], over `run` when given, else over the Run as read now.
async fn write_once(
    api: &Api<Run>,
    me: &Identity,
    name: &str,
    uid: &str,
    run: Option<Run>,
    apply: &impl Fn(&mut RunStatus, &Time) -> bool,
    attempt: u64,
) -> Result<Option<Run>, Unsettled> {
    let run = match run {
        Some(run) => run,
        None => match api.get_opt(name).await {
            Ok(Some(run)) => run,
            Ok(None) => return Ok(None),
            Err(e) => return Err(Unsettled::Read(attempt, e)),
        },
    };
    if run.uid().as_deref() != Some(uid) || !plan::assigned_to(&run, me) {
        return Ok(None);
    }
    let mut updated = run;
    let generation = updated.metadata.generation;
    let status = updated.status.get_or_insert_with(Default::default);
    let before = status.conditions.clone();
    let now = Time(jiff::Timestamp::now());
    if !apply(status, &now) {
        return Ok(None);
    }
    status::observe_generation(&before, status, generation);
    match api.replace_status(name, &post_params(), &updated).await {
        Ok(written) => Ok(Some(written)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(kube::Error::Api(s)) if s.code == 409 => Err(Unsettled::Conflict),
        Err(e) => Err(Unsettled::Write(attempt, e)),
    }
}
