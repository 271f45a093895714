//! Events on Runs (events.k8s.io/v1) through kube-runtime's [`Recorder`], shared by the
//! scheduler and runtimed, so `kubectl describe run NAME` tells a Run's story.
//!
//! Owns the one way to publish: fire-and-forget (an Event is never worth delaying or failing a
//! cycle, a claim or a terminal write; a failed write is only logged), regarding the Run
//! without its resourceVersion (the recorder compares references whole when it folds repeats
//! into a series), and one series per distinct note.
//!
//! At most [`IN_FLIGHT`] writes per reporter are under way: a drain emits an Event per bind
//! faster than they are written, and every write beyond the idle connections opens a new one
//! (HTTP/1.1 carries one request at a time), a TLS handshake for us and for the API server.
//! An Event that happens once per Run ([`RunEvents::emit_once`], e.g. `Scheduled`) skips the
//! recorder's cache: that cache is walked whole on every publish, so remembering thousands of
//! Events that never repeat made each publish cost O(Events of the last minutes).
//!
//! A routine Event that usually stops mattering within a moment is held for the fold window
//! ([`FOLD_WINDOW`] by default; [`RunEvents::hold`]): runtimed's `Started`, which the end of
//! a short task follows, and the scheduler's `Scheduled`, which runtimed's own Events make
//! redundant once it starts the Run. The next Event of that Run from the same reporter takes
//! the held note after its own, so `kubectl describe` still tells the whole story in one write
//! instead of two. When the window ends first, the held Event is published if it still tells
//! something then (the scheduler's asks whether the Run is still not started).
//!
//! The Events of one Run are written in the order they were emitted (each write waits for the
//! one before it; the API server stamps none, the recorder stamps `eventTime` as it writes),
//! so `Admitted` never appears after `Started`; a held Event counts as emitted when its window
//! ends. Different Runs' Events are written in parallel.
//!
//! On the way out, [`RunEvents::flush`] publishes what is still held (if it still tells
//! something) and awaits the writes under way, for a bounded time: a task runtimed leaves
//! running on the runtime server at shutdown keeps its `Started`, a task killed at the end of
//! the grace period its `Failed`. An Event emitted after the flush, or whose write takes longer
//! than its limit, is still lost with the process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource as _, ResourceExt as _};
use tokio::sync::{Semaphore, oneshot};
use tokio_util::task::TaskTracker;
use tracing::warn;

use crate::api::Run;

/// Event reasons (CamelCase, bounded).
pub mod reasons {
    /// Scheduler: no Runtime Pod fits; the note is the Pending message.
    pub const FAILED_SCHEDULING: &str = "FailedScheduling";
    /// Scheduler: bound to a Runtime Pod.
    pub const SCHEDULED: &str = "Scheduled";
    /// runtimed: the Run fits locally and is claimed, after it was told `Waiting` (a Run
    /// admitted at once hears it in `Started`).
    pub const ADMITTED: &str = "Admitted";
    /// runtimed: its task process started (and, unless it waited, it was admitted).
    pub const STARTED: &str = "Started";
    /// runtimed: the Run is Scheduled here but does not fit locally (yet).
    pub const WAITING: &str = "Waiting";
    /// runtimed: the Run succeeded.
    pub const COMPLETED: &str = "Completed";
    /// runtimed: the Run failed.
    pub const FAILED: &str = "Failed";
    /// Scheduler: sent back to Pending (or asked to stop) for a higher-priority Run.
    pub const PREEMPTED: &str = "Preempted";
    /// Scheduler or runtimed: `spec.cancelRequested` ended the Run (and stopped its task).
    pub const CANCELLED: &str = "Cancelled";
    /// runtimed: `spec.timeout` ran out; the task was stopped.
    pub const TIMED_OUT: &str = "TimedOut";
    /// An attempt failed and `spec.retryPolicy` runs another after its backoff (the
    /// kruntimes project's name).
    pub const FAILED_RETRYING: &str = "RunFailedRetrying";
    /// The next attempt starts after a failed one.
    pub const RETRYING: &str = "RunRetrying";
    /// The last attempt `spec.retryPolicy` allows failed.
    pub const RETRIES_EXHAUSTED: &str = "RunRetriesExhausted";
    /// The Run succeeded after more than one attempt.
    pub const RUN_SUCCEEDED: &str = "RunSucceeded";
    /// The scheduler sent a Run whose Runtime Pod was lost back to Pending for another
    /// attempt (the kruntimes project's name).
    pub const STALE_RUN_RETRYING: &str = "StaleRunRetrying";
}

/// `reportingController` of the scheduler's Events.
pub const SCHEDULER: &str = "kruntimes-scheduler";
/// `reportingController` of runtimed's Events (the admission policy allows runtimed only
/// Events it reports under this name, as its own Pod).
pub const RUNTIMED: &str = "kruntimes-runtimed";

/// How long [`RunEvents::hold`] keeps an Event for the Run's next one to take in, unless
/// `--event-fold-window` says otherwise.
pub const FOLD_WINDOW: std::time::Duration = std::time::Duration::from_secs(1);

/// How long [`RunEvents::flush`] waits for Event writes at exit: they take milliseconds
/// unless the API server is unreachable, and an exit must not wait on that for long.
pub const FLUSH_AT_EXIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Event writes under way at once, per reporter.
pub const IN_FLIGHT: usize = 16;
/// The most distinct notes whose series a reporter remembers (see `RunEvents::recorders`).
pub const MAX_RECORDERS: usize = 1024;

/// The latest Event of a Run still being written: its generation and its "written" signal.
type Queued = (u64, oneshot::Receiver<()>);

/// Decides, when a held Event's window ends, whether it is published and with which note.
type Wanted = Box<dyn FnOnce(String) -> Option<String> + Send>;

/// An Event [`RunEvents::hold`] keeps, and what publishing it alone needs.
struct Held {
    generation: u64,
    note: String,
    run: Run,
    reason: &'static str,
    action: &'static str,
    wanted: Wanted,
}

/// Held Events by Run UID. Its lock orders a Run's Events (see [`RunEvents::enqueue`]).
type HeldEvents = HashMap<String, Held>;

/// Publishes Events on Runs for one reporter.
#[derive(Clone)]
pub struct RunEvents {
    client: Client,
    reporter: Reporter,
    /// Remember what they published, to fold repeats into a series: one recorder per note
    /// (by its digest), since a recorder keys a series on (type, reason, action, reporter,
    /// regarding) and not on the note, so one recorder would count a different note into an
    /// older series and show it with that series' note. This keeps `action` what it says
    /// (`Scheduling`, `End`) for exporters that group by it. At most [`MAX_RECORDERS`].
    recorders: Arc<Mutex<HashMap<u32, Recorder>>>,
    in_flight: Arc<Semaphore>,
    /// Per Run UID: the generation and the "written" signal of its latest Event still being
    /// written, which the next one of that Run waits for. Removed by the last one.
    queued: Arc<Mutex<HashMap<String, Queued>>>,
    generation: Arc<std::sync::atomic::AtomicU64>,
    /// Whether the [`ROUTINE`] Events are published (`--routine-events`).
    routine: bool,
    /// Per Run UID: the Event [`RunEvents::hold`] keeps for the Run's next Event to take in.
    held: Arc<Mutex<HeldEvents>>,
    /// Every Event write under way, for [`RunEvents::flush`] to await.
    writes: TaskTracker,
    /// How long [`RunEvents::hold`] keeps an Event (`--event-fold-window`); zero: not at all.
    fold_window: std::time::Duration,
}

/// The Events of a Run's ordinary life, which every Run that goes well gets: `Scheduled`,
/// `Admitted`, `Started`, `Completed`, `RunSucceeded`. Published only with `--routine-events`
/// (off by default: one API write per Run saved, and the Go project writes none); every other
/// Event, and every Warning, is always published.
pub const ROUTINE: &[&str] = &[
    reasons::SCHEDULED,
    reasons::ADMITTED,
    reasons::STARTED,
    reasons::COMPLETED,
    reasons::RUN_SUCCEEDED,
];

/// Whether an Event of this type and reason is one of [`ROUTINE`] (never a Warning).
pub fn is_routine(type_: &EventType, reason: &str) -> bool {
    matches!(type_, EventType::Normal) && ROUTINE.contains(&reason)
}

impl RunEvents {
    /// `controller` is the `reportingController`, `instance` the `reportingInstance` (a Pod
    /// name; the controller's name when `None`).
    pub fn new(client: Client, controller: &str, instance: Option<String>) -> Self {
        let reporter = Reporter {
            controller: controller.to_string(),
            instance,
        };
        RunEvents {
            recorders: Default::default(),
            client,
            reporter,
            in_flight: Arc::new(Semaphore::new(IN_FLIGHT)),
            queued: Default::default(),
            generation: Default::default(),
            routine: true,
            held: Default::default(),
            writes: TaskTracker::new(),
            fold_window: FOLD_WINDOW,
        }
    }

    /// With `routine == false`, the [`ROUTINE`] Events are not published.
    pub fn with_routine(mut self, routine: bool) -> Self {
        self.routine = routine;
        self
    }

    /// [`RunEvents::hold`] keeps an Event for `window` (zero: publishes it at once).
    pub fn with_fold_window(mut self, window: std::time::Duration) -> Self {
        self.fold_window = window;
        self
    }

    /// Publishes in the background, folding a repeat of an earlier Event (same Run, type,
    /// reason, action and note, in the last minutes) into its series; returns at once.
    pub fn emit(&self, run: &Run, type_: EventType, reason: &str, action: &str, note: String) {
        self.publish(true, run, type_, reason, action, note);
    }

    /// [`RunEvents::emit`] for an Event that happens once per Run (or once per placement):
    /// published without being remembered for a series.
    pub fn emit_once(&self, run: &Run, type_: EventType, reason: &str, action: &str, note: String) {
        self.publish(false, run, type_, reason, action, note);
    }

    /// A recorder that remembers nothing: for an Event that never repeats.
    fn forgetful(&self) -> Recorder {
        Recorder::new(self.client.clone(), self.reporter.clone())
    }

    /// The recorder that folds the repeats of `note` into its series. When [`MAX_RECORDERS`]
    /// notes are remembered, they are all forgotten first: a repeat after that starts a new
    /// Event instead of counting into its series.
    fn recorder_for(&self, note: &str) -> Recorder {
        let key = digest(note);
        let mut recorders = self.recorders.lock().unwrap();
        if recorders.len() >= MAX_RECORDERS && !recorders.contains_key(&key) {
            recorders.clear();
        }
        recorders
            .entry(key)
            .or_insert_with(|| self.forgetful())
            .clone()
    }

    /// Holds a routine Event (published once, like [`RunEvents::emit_once`]) for the fold
    /// window ([`FOLD_WINDOW`] by default): the next Event of the Run from this reporter takes
    /// its note after its own. Otherwise it is published when the window ends, if `wanted`
    /// says it still tells something then (its note may be rewritten for the later moment).
    /// `wanted` runs under this reporter's ordering lock: it must only read.
    pub fn hold(
        &self,
        run: &Run,
        reason: &'static str,
        action: &'static str,
        note: String,
        wanted: impl FnOnce(String) -> Option<String> + Send + 'static,
    ) {
        if !self.routine && is_routine(&EventType::Normal, reason) {
            return;
        }
        if self.fold_window.is_zero() {
            return self.emit_once(run, EventType::Normal, reason, action, note);
        }
        let uid = run.uid().unwrap_or_default();
        let generation = self
            .generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let held = Held {
            generation,
            note,
            run: run.clone(),
            reason,
            action,
            wanted: Box::new(wanted),
        };
        self.held.lock().unwrap().insert(uid.clone(), held);
        let events = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(events.fold_window).await;
            // Taken out and queued under one lock: an Event of this Run published meanwhile
            // either took the note in already or is queued after this one.
            let mut held = events.held.lock().unwrap();
            if held.get(&uid).is_some_and(|h| h.generation == generation) {
                let kept = held.remove(&uid).expect("just seen");
                events.publish_held(&held, kept);
            }
        });
    }

    /// Publishes every held Event that still tells something, then waits until every Event
    /// write under way has ended, for at most `limit`: what a process does last, so that its
    /// exit loses no Event emitted before it. (An Event emitted afterwards is held or written
    /// as usual; the process must live long enough for it.)
    pub async fn flush(&self, limit: std::time::Duration) {
        {
            let mut held = self.held.lock().unwrap();
            let all: Vec<Held> = held.drain().map(|(_, h)| h).collect();
            for kept in all {
                self.publish_held(&held, kept);
            }
        }
        self.writes.close();
        let waited = tokio::time::timeout(limit, self.writes.wait()).await;
        self.writes.reopen();
        if waited.is_err() {
            warn!(
                "{} Event write(s) did not finish within {limit:?}; exiting without them",
                self.writes.len()
            );
        }
    }

    /// Publishes a held Event alone, if its `wanted` says it still tells something. `order`
    /// is the held-Events lock (see [`RunEvents::enqueue`]).
    fn publish_held(&self, order: &HeldEvents, kept: Held) {
        if let Some(note) = (kept.wanted)(kept.note) {
            let event = event(EventType::Normal, kept.reason, kept.action, note);
            self.enqueue(order, self.forgetful(), &kept.run, event);
        }
    }

    /// Publishes, folding repeats of the same note into a series when `remembered`.
    fn publish(
        &self,
        remembered: bool,
        run: &Run,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        if !self.routine && is_routine(&type_, reason) {
            return;
        }
        let uid = run.uid().unwrap_or_default();
        let mut held = self.held.lock().unwrap();
        let note = match held.remove(&uid) {
            Some(earlier) => fold(&earlier.note, &note),
            None => note,
        };
        let recorder = match remembered {
            true => self.recorder_for(&note),
            false => self.forgetful(),
        };
        self.enqueue(&held, recorder, run, event(type_, reason, action, note));
    }

    /// Queues the write behind the Run's Events queued before. `_order` is the held-Events
    /// lock, which every caller holds, so taking a held note and queueing are one step.
    fn enqueue(&self, _order: &HeldEvents, recorder: Recorder, run: &Run, event: Event) {
        let uid = run.uid().unwrap_or_default();
        let regarding = regarding(run);
        let in_flight = self.in_flight.clone();
        let name = run.name_any();
        // Taken in emit order, under the lock: this Event waits for the one emitted before.
        let (written, signal) = oneshot::channel();
        let generation = self
            .generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let before = self
            .queued
            .lock()
            .unwrap()
            .insert(uid.clone(), (generation, signal));
        let queued = self.queued.clone();
        self.writes.spawn(async move {
            if let Some((_, before)) = before {
                // An error is an earlier write that ended without a signal: it is over too.
                let _ = before.await;
            }
            {
                // Never closed: the permit always comes.
                let _permit = in_flight.acquire_owned().await;
                if let Err(e) = recorder.publish(&event, &regarding).await {
                    warn!(run = %name, namespace = ?regarding.namespace, "cannot publish the {} event: {e}", event.reason);
                }
            }
            let _ = written.send(());
            let mut queued = queued.lock().unwrap();
            if queued.get(&uid).is_some_and(|(g, _)| *g == generation) {
                queued.remove(&uid);
            }
        });
    }
}

/// The Event as written: the note bounded.
fn event(type_: EventType, reason: &str, action: &str, note: String) -> Event {
    Event {
        type_,
        reason: reason.to_string(),
        action: action.to_string(),
        note: Some(note.chars().take(1000).collect()),
        secondary: None,
    }
}

/// The note of an Event that took in a held one: its own first (a note that starts as it
/// always does), then what happened before it.
fn fold(held: &str, note: &str) -> String {
    format!("{note}; before that: {held}")
}

/// The Run as an Event's `regarding`, without its resourceVersion: the recorder folds repeats
/// into a series by comparing references whole, and every status write changes the version.
fn regarding(run: &Run) -> ObjectReference {
    let mut reference = run.object_ref(&());
    reference.resource_version = None;
    reference
}

/// FNV-1a: a stable digest (no per-process seed, unlike `DefaultHasher`).
fn digest(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn routine_events_are_the_normal_ones_of_an_ordinary_life_never_a_warning() {
        for reason in ROUTINE {
            assert!(is_routine(&EventType::Normal, reason), "{reason}");
            assert!(!is_routine(&EventType::Warning, reason), "{reason}");
        }
        for kept in [
            reasons::WAITING,
            reasons::FAILED_SCHEDULING,
            "Cancelled",
            "RunRetrying",
        ] {
            assert!(!is_routine(&EventType::Normal, kept), "{kept}");
        }
    }

    use super::*;
    use crate::testing::run;

    #[test]
    fn events_regard_the_run_without_its_version_and_keep_their_action_as_given() {
        let r = regarding(&run("a").resource_version("7").build());
        assert_eq!(r.kind.as_deref(), Some("Run"));
        assert_eq!(r.name.as_deref(), Some("a"));
        assert_eq!(r.resource_version, None);
        let e = event(EventType::Normal, "Scheduled", "Scheduling", "on p1".into());
        assert_eq!(e.action, "Scheduling", "no digest: exporters group by it");
    }
}
