//! The scheduling loop (kube-scheduler's `scheduleOne`, one at a time) and the writes that
//! carry its cycles out in the background (its binding cycle): Bind, a Pending message, a
//! terminal failure.
//!
//! The loop pops and cycles under the cache lock, so cycles are serial and in queue order;
//! what each one decided is mapped to a write by [`step`], sent here, and the result fed back
//! to the cache (release, backoff). It must not decide anything itself.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;
use tracing::{debug, info, warn};

use super::binding::Binding;
use super::{Error, Scheduler};
use crate::api::{Run, RunStatus};
use crate::scheduler::framework::{ScheduleOutcome, Scheduled};
use crate::scheduler::metrics::{STAGE_BIND, STAGE_RESERVE};
use crate::scheduler::status_patch;
use crate::scheduler::steps::{Step, step, unstarted_note};
use crate::telemetry::events::reasons as event_reasons;

/// Cycles in a row before the loop lets the watch tasks and writers run.
const CYCLES_PER_YIELD: u32 = 32;

/// What became of a Pending or Failed status write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    Landed,
    /// The Run has a newer version (409).
    Conflict,
    /// Deleted, or failed otherwise (the Run backs off).
    Not,
}

/// How many times a conflicted Bind is sent again on a fresh read of an unchanged Run.
const REBASES: u32 = 3;

/// How long the loop sleeps at most without a wakeup (a safety net; every event wakes it).
const IDLE_WAIT: Duration = Duration::from_secs(1);

impl Scheduler {
    /// Pops and cycles Runs while the queue has work, each cycle with a free binding slot (a
    /// cycle that reserves always has a writer, and assumptions never pile up behind a slow
    /// API server); waits for a wakeup or the next backoff otherwise.
    ///
    /// `store` holds the newest version of every Run (the Run watch's reflector, fed before
    /// the cache): writes are made on it, since the cache keeps a Pending Run's first version
    /// through status churn.
    pub(super) async fn schedule_loop(self: Arc<Self>, store: Store<Run>) {
        let mut cycles = 0u32;
        loop {
            let slot = self
                .binds
                .clone()
                .acquire_owned()
                .await
                .expect("the binding semaphore is never closed");
            let now = jiff::Timestamp::now();
            let scheduled = {
                let timer = self.metrics.cycle_timer();
                let scheduled = self.cache.lock().schedule_next(self.cache.registry(), now);
                if scheduled.is_none() {
                    timer.discard();
                }
                scheduled
            };
            // Not `woke`: the loop must not wake itself, or it would spin while idle.
            self.count_wakeups();
            let Some(scheduled) = scheduled else {
                drop(slot);
                let next = self.cache.lock().next_due(now);
                let wait = next
                    .and_then(|at| Duration::try_from(at.duration_since(now)).ok())
                    .map_or(IDLE_WAIT, |d| d.min(IDLE_WAIT));
                tokio::select! {
                    () = self.work.notified() => {}
                    () = tokio::time::sleep(wait) => {}
                }
                continue;
            };
            self.metrics
                .queue_duration
                .observe(scheduled.waited.as_secs_f64().max(0.0));
            self.record_attempt(&scheduled.outcome);
            let scheduler = self.clone();
            let store = store.clone();
            tokio::spawn(async move { scheduler.carry_out(&store, scheduled, slot).await });
            cycles += 1;
            if cycles.is_multiple_of(CYCLES_PER_YIELD) {
                tokio::task::yield_now().await;
            }
        }
    }

    /// Carries one cycle out: the write [`step`] says, then what its result means for the
    /// queue. `slot` is held for a Bind; other writes take a `--workers` slot instead.
    async fn carry_out(
        self: Arc<Self>,
        store: &Store<Run>,
        scheduled: Scheduled,
        slot: OwnedSemaphorePermit,
    ) {
        let Scheduled {
            run: cycled,
            outcome,
            nominated,
            preemption,
            priority,
            ..
        } = scheduled;
        let (namespace, uid) = (
            cycled.namespace().unwrap_or_default(),
            cycled.uid().unwrap_or_default(),
        );
        let current = store
            .get(&ObjectRef::from_obj(cycled.as_ref()))
            .filter(|r| r.uid().as_deref() == Some(uid.as_str()) && r.waits_for_placement());
        let Some(run) = current else {
            // Deleted, replaced or placed since its cycle: nothing to write, nothing to hold.
            self.cache
                .lock()
                .release(&namespace, &uid, jiff::Timestamp::now());
            self.woke();
            return;
        };
        if !status_patch::plans_alike(&cycled, &run) {
            // Changed since its cycle in what the cycle read: its decision is stale, and a
            // write guarded by the newer version would land it. Cycled again on what it is now.
            self.cache
                .lock()
                .release(&namespace, &uid, jiff::Timestamp::now());
            self.woke();
            debug!(run = %run.name_any(), %namespace, "changed since its cycle; looking again");
            return;
        }
        match &outcome {
            ScheduleOutcome::ReserveConflict { error, .. } => {
                self.metrics
                    .reservation_conflicts
                    .with_label_values(&[STAGE_RESERVE])
                    .inc();
                debug!(run = %run.name_any(), "reserve conflict: {error}; backing off");
            }
            ScheduleOutcome::Error(e) => {
                warn!(run = %run.name_any(), namespace = %run.namespace().unwrap_or_default(), "scheduling cycle: {e}; retrying with backoff");
            }
            _ => {}
        }
        // A preempting Run fits nowhere now (its outcome is Pending, never a Bind): its victims'
        // writes go through the status-write slots, not a bind slot other Runs could use.
        let slot = match preemption {
            Some(preemption) => {
                drop(slot);
                let _write = self.writes.clone().acquire_owned().await;
                // The victims' room is already held for the Run by its nomination.
                self.clone()
                    .preempt(store, &run, priority.unwrap_or(0), preemption)
                    .await;
                None
            }
            None => Some(slot),
        };
        match step(
            &run,
            &outcome,
            nominated.as_deref(),
            priority,
            &super::now(),
        ) {
            Step::Bind {
                pod,
                pod_uid,
                patch,
                status,
            } => {
                let _slot = slot;
                self.bind(store, &run, &pod, &pod_uid, (&patch, &status))
                    .await;
            }
            Step::Pending {
                patch,
                message,
                new_message,
            } => {
                drop(slot);
                let _write = self.writes.clone().acquire_owned().await;
                let written = self.write(&run, &patch).await;
                if written == Written::Conflict {
                    // Unschedulable stands: the Run keeps its place in the queue and looks
                    // again on the version it met.
                    let observed = || {
                        store
                            .get(&ObjectRef::from_obj(run.as_ref()))
                            .is_some_and(|r| r.resource_version() != run.resource_version())
                    };
                    let now = jiff::Timestamp::now();
                    // `observed` is asked under the lock: a watch event for the newer
                    // version either came before it, or finds the Run marked.
                    let mut cache = self.cache.lock();
                    cache.write_conflicted(&namespace, &uid, observed(), now);
                    drop(cache);
                    self.woke();
                    debug!(run = %run.name_any(), %namespace, "waiting message met a newer version; looking again once it is seen");
                }
                if written == Written::Landed && new_message {
                    self.emit(
                        &run,
                        EventType::Warning,
                        event_reasons::FAILED_SCHEDULING,
                        "Scheduling",
                        message,
                    );
                }
            }
            Step::Fail {
                patch,
                reason,
                message,
            } => {
                drop(slot);
                let _write = self.writes.clone().acquire_owned().await;
                let written = self.write(&run, &patch).await;
                if written == Written::Conflict {
                    // The watch brings the newer version, which its next cycle decides on.
                    self.retry(&namespace, &uid, true);
                }
                if written == Written::Landed {
                    // A cancel request is the user's, not a failure.
                    if reason == crate::api::status::reasons::CANCELLED {
                        info!(run = %run.name_any(), namespace = %run.namespace().unwrap_or_default(), "cancelled before it was placed");
                        let cancelled = event_reasons::CANCELLED;
                        self.emit(&run, EventType::Normal, cancelled, "Scheduling", message);
                    } else {
                        info!(run = %run.name_any(), namespace = %run.namespace().unwrap_or_default(), "failed: {message}");
                        self.emit(&run, EventType::Warning, reason, "Scheduling", message);
                    }
                }
            }
            Step::Nothing => {}
        }
    }

    /// Bind: the status patch guarded by the observed resourceVersion (see [`status_patch`]),
    /// sent again on a fresh read while the Run moved in nothing the plan read
    /// ([`Self::send_bind`]). The reservation stays until the watch shows the Run active on the
    /// Pod; any failed write releases it and backs the Run off.
    async fn bind(
        &self,
        store: &Store<Run>,
        run: &Run,
        pod: &str,
        pod_uid: &str,
        write: (&Value, &RunStatus),
    ) {
        let (name, namespace) = (run.name_any(), run.namespace().unwrap_or_default());
        let uid = run.uid().unwrap_or_default();
        // A stale Pod observation discards the reservation, like a conflict (the spec's Bind
        // rule): never bind to a Pod that is gone, replaced or terminating.
        let pod_current = self
            .cache
            .lock()
            .index()
            .pod(&namespace, pod)
            .is_some_and(|p| p.uid == pod_uid && !p.deleting);
        let now = jiff::Timestamp::now;
        if !pod_current {
            // Queued again at once: the next cycle sees the Pod as it is now.
            self.cache.lock().release(&namespace, &uid, now());
            self.woke();
            debug!(run = %name, %namespace, "chosen Runtime Pod changed before Bind; queued again");
            return;
        }
        // The workspace's binding first: durable before any Run of it can run.
        if let Some(workspace) = run.workspace_name() {
            match self.persist_binding(&namespace, workspace, pod).await {
                Binding::Written => {}
                Binding::Changed => {
                    debug!(run = %name, %namespace, %workspace, "workspace bound elsewhere or changed; looking again");
                    self.release_and_retry(&namespace, &uid, true);
                    return;
                }
                Binding::Failed(e) => {
                    warn!(run = %name, %namespace, %workspace, "cannot write the PersistentWorkspace binding: {e}; retrying with backoff");
                    self.release_and_retry(&namespace, &uid, false);
                    return;
                }
            }
        }
        match self.send_bind(run, write).await {
            Ok(bound_from) => {
                self.cache.lock().bound(&namespace, &uid);
                debug!(run = %name, %namespace, %pod, "scheduled");
                if let Some(created) = &run.metadata.creation_timestamp {
                    let waited = jiff::Timestamp::now().duration_since(created.0);
                    self.metrics
                        .run_queue_duration
                        .observe(waited.as_secs_f64().max(0.0));
                }
                // runtimed's Events name the Pod once it starts the Run: `Scheduled` earns its
                // write only for a Run still not started there (one that waits there hears
                // runtimed's `Waiting` first).
                let (store, key) = (store.clone(), ObjectRef::from_obj(run));
                let (uid, pod) = (uid.clone(), pod.to_string());
                self.events.hold(
                    run,
                    event_reasons::SCHEDULED,
                    "Binding",
                    format!("Assigned to Runtime Pod {pod}"),
                    move |note| {
                        let current = store.get(&key);
                        let from = bound_from.as_deref();
                        unstarted_note(current.as_deref(), &uid, &pod, from, note)
                    },
                );
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // The Run moved in something the plan read (or kept moving): the watch has a
                // newer version on its way; look again once it is there.
                debug!(run = %name, %namespace, "bind conflict; looking again");
                self.release_and_retry(&namespace, &uid, true);
            }
            Err(source) => {
                // A failed transport may hide a write that landed: keep the assumption when
                // the Run now says it is bound to this Pod, as the watch will too.
                let api: Api<Run> = Api::namespaced(self.client.clone(), &namespace);
                let landed = matches!(
                    api.get_opt(&name).await,
                    Ok(Some(current)) if current.active_pod() == Some(pod)
                );
                let error = Error::Bind {
                    run: name.clone(),
                    namespace: namespace.clone(),
                    source,
                };
                if landed {
                    debug!(run = %name, %namespace, "{error}, but the Bind landed");
                } else {
                    warn!(run = %name, %namespace, "{error}");
                    self.release_and_retry(&namespace, &uid, false);
                }
            }
        }
    }

    /// Sends the Bind patch; on each conflict (counted) reads the Run and, while it moved in
    /// nothing the plan read, sends the patch of the same status again, from and guarded by
    /// the version read ([`status_patch::rebase`]), at most [`REBASES`] times. The
    /// reservation holds meanwhile: the plan it was made for still stands. The last answer is
    /// returned: on success, the resourceVersion the landed write was guarded by (the version
    /// just before the Bind).
    async fn send_bind(
        &self,
        run: &Run,
        (patch, bound): (&Value, &RunStatus),
    ) -> Result<Option<String>, kube::Error> {
        let (name, namespace) = (run.name_any(), run.namespace().unwrap_or_default());
        let api: Api<Run> = Api::namespaced(self.client.clone(), &namespace);
        let mut patch = std::borrow::Cow::Borrowed(patch);
        let mut rebases = 0;
        loop {
            let sent = status_patch::send(&self.client, &namespace, &name, &patch).await;
            let status = match sent {
                Ok(()) => {
                    let guard = patch["metadata"]["resourceVersion"].as_str();
                    return Ok(guard.map(str::to_string));
                }
                Err(kube::Error::Api(status)) if status.code == 409 => status,
                Err(e) => return Err(e),
            };
            self.metrics
                .reservation_conflicts
                .with_label_values(&[STAGE_BIND])
                .inc();
            let conflict = || Err(kube::Error::Api(status.clone()));
            if rebases == REBASES {
                return conflict();
            }
            rebases += 1;
            let Ok(Some(fresh)) = api.get_opt(&name).await else {
                return conflict();
            };
            match status_patch::rebase(run, &fresh, bound) {
                Some(rebased) => patch = std::borrow::Cow::Owned(rebased),
                None => return conflict(),
            }
        }
    }

    /// Sends a Pending or Failed status patch. A conflict is the caller's to handle; after
    /// any other failure the Run backs off.
    async fn write(&self, run: &Run, patch: &Value) -> Written {
        let (name, namespace) = (run.name_any(), run.namespace().unwrap_or_default());
        let uid = run.uid().unwrap_or_default();
        match status_patch::send(&self.client, &namespace, &name, patch).await {
            Ok(()) => Written::Landed,
            // Deleted: nothing left to tell.
            Err(kube::Error::Api(s)) if s.code == 404 => Written::Not,
            Err(kube::Error::Api(s)) if s.code == 409 => Written::Conflict,
            Err(source) => {
                let error = Error::Status { run: name, source };
                warn!(%namespace, "{error}");
                self.retry(&namespace, &uid, false);
                Written::Not
            }
        }
    }

    fn release_and_retry(&self, namespace: &str, uid: &str, conflict: bool) {
        self.cache
            .lock()
            .release(namespace, uid, jiff::Timestamp::now());
        self.retry(namespace, uid, conflict);
    }

    /// Backs the Run off (`conflict`: briefly; see [`crate::scheduler::framework::SchedulerCache::retry`]).
    pub(super) fn retry(&self, namespace: &str, uid: &str, conflict: bool) {
        let now = jiff::Timestamp::now();
        let delay = self.cache.lock().retry(namespace, uid, conflict, now);
        if let Some(delay) = delay {
            debug!(%namespace, %uid, retry_in = ?delay, "backing off");
        }
        self.woke();
    }

    /// Counts one attempt and its filter rejections.
    fn record_attempt(&self, outcome: &ScheduleOutcome) {
        self.metrics
            .schedule_attempts
            .with_label_values(&[outcome.result()])
            .inc();
        for rejection in outcome.rejections() {
            self.metrics
                .filter_rejections
                .with_label_values(&[rejection.plugin, rejection.reason])
                .inc_by(rejection.count as u64);
        }
    }
}
