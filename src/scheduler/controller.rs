//! kube wiring of the scheduler: watches feeding the pure core's index, the Run work queue
//! (`kube::runtime::Controller`), wakeups of Pending Runs, Bind, status writes and leader
//! election.
//!
//! Decisions are made only by [`SharedCache::schedule`]; this module carries them out. Watches
//! run on every replica so a standby's caches stay warm; the queue runs only on the leader.
//! Losing the lease stops scheduling at once (the process exits, like controller-runtime's
//! managers), so a new leader always starts with an empty assumed cache.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::channel::mpsc::{UnboundedSender, unbounded};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use thiserror::Error;
use tracing::{debug, info, warn};

use crate::api::status::{self, CONDITION_SCHEDULED, Outcome, reasons};
use crate::api::{LABEL_RUNTIME, LABEL_RUNTIME_POD, Run, RunPhase};
use crate::metrics::{STAGE_BIND, STAGE_RESERVE, SchedulerMetrics};
use crate::scheduler::framework::cache::{ScheduleOutcome, SharedCache};
use crate::scheduler::framework::index::{RunChange, Wakeup};

#[derive(Debug, Error)]
pub enum Error {
    #[error("binding Run {namespace}/{run}: {source}; retrying with backoff")]
    Bind {
        run: String,
        namespace: String,
        source: kube::Error,
    },
    #[error("writing the status of Run {run}: {source}; retrying with backoff")]
    Status { run: String, source: kube::Error },
    #[error("scheduling cycle for Run {run}: {message}; retrying with backoff")]
    Cycle { run: String, message: String },
    #[error("the {0} task of the scheduler stopped; exiting so the process restarts cleanly")]
    TaskEnded(&'static str),
}

/// What `scheduler run` needs besides a client.
#[derive(Debug, Clone)]
pub struct Options {
    pub workers: u16,
    /// Watch one namespace instead of the whole cluster.
    pub namespace: Option<String>,
}

/// Shared between watch tasks, queue workers and the HTTP probes.
pub struct Scheduler {
    client: Client,
    state: SharedCache,
    metrics: SchedulerMetrics,
    options: Options,
    /// The queue's trigger channel while this replica leads; `None` on a standby.
    queue: Mutex<Option<UnboundedSender<ObjectRef<Run>>>>,
    /// When each queued key was first activated, for the queue-duration histogram.
    enqueued_at: Mutex<HashMap<ObjectRef<Run>, Instant>>,
    /// Consecutive failed reconciles per key, for exponential retry backoff.
    failures: Mutex<HashMap<ObjectRef<Run>, u32>>,
    runs_synced: AtomicBool,
    pods_synced: AtomicBool,
    leases_synced: AtomicBool,
}

impl Scheduler {
    pub fn new(client: Client, metrics: SchedulerMetrics, options: Options) -> Arc<Self> {
        Arc::new(Self {
            client,
            state: SharedCache::new(crate::scheduler::plugins::registry()),
            metrics,
            options,
            queue: Mutex::new(None),
            enqueued_at: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
            runs_synced: AtomicBool::new(false),
            pods_synced: AtomicBool::new(false),
            leases_synced: AtomicBool::new(false),
        })
    }

    /// Ready once every watch has delivered its initial list.
    pub fn caches_synced(&self) -> bool {
        self.runs_synced.load(Ordering::Acquire)
            && self.pods_synced.load(Ordering::Acquire)
            && self.leases_synced.load(Ordering::Acquire)
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        match &self.options.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    /// Requests a cycle for `run` if this replica leads.
    fn enqueue(&self, run: ObjectRef<Run>) {
        let queue = self.queue.lock().unwrap();
        if let Some(tx) = queue.as_ref() {
            self.enqueued_at
                .lock()
                .unwrap()
                .entry(run.clone())
                .or_insert_with(Instant::now);
            let _ = tx.unbounded_send(run);
        }
    }

    fn is_leading(&self) -> bool {
        self.queue.lock().unwrap().is_some()
    }

    /// Wakes the Pending Runs of each (namespace, runtime), counting the keys by source.
    fn wake(&self, wakeups: Vec<Wakeup>) {
        if wakeups.is_empty() || !self.is_leading() {
            return;
        }
        for wakeup in wakeups {
            let names = self.state.pending_runs(&wakeup.namespace, &wakeup.runtime);
            self.metrics
                .pending_run_wakeups
                .with_label_values(&[wakeup.source.as_str()])
                .inc_by(names.len() as u64);
            for name in names {
                self.enqueue(ObjectRef::new(&name).within(&wakeup.namespace));
            }
        }
    }

    /// Affinity targets changed on a Pod: Pending Runs of that Runtime may now satisfy a
    /// required term. Not a capacity or Runtime Pod event, so not counted as a wakeup.
    fn wake_for_targets(&self, change: &RunChange) {
        if let Some(pod) = &change.targets_changed {
            for name in self.state.pending_runs(&pod.namespace, &pod.runtime) {
                self.enqueue(ObjectRef::new(&name).within(&pod.namespace));
            }
        }
    }

    /// Releases a Run's reservation and wakes the Pending Runs that may use it.
    fn release(&self, namespace: &str, uid: &str) {
        if let Some(wakeup) = self.state.release(namespace, uid) {
            self.wake(vec![wakeup]);
        }
    }

    fn on_run_change(&self, change: RunChange) {
        self.wake_for_targets(&change);
        self.wake(change.wakeups());
    }

    /// Watches Runs into the store the queue reads and into the index.
    async fn watch_runs(self: Arc<Self>, writer: reflector::store::Writer<Run>) {
        let mut initial = Vec::new();
        let stream = watcher(self.api::<Run>(), watcher::Config::default())
            .default_backoff()
            .reflect(writer);
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Apply(run)) => {
                    let change = self.state.apply_run(&run);
                    self.on_run_change(change);
                    if wants_scheduling(&run) {
                        self.enqueue(ObjectRef::from_obj(&run));
                    }
                }
                Ok(watcher::Event::Delete(run)) => {
                    let key = ObjectRef::from_obj(&run);
                    self.enqueued_at.lock().unwrap().remove(&key);
                    self.failures.lock().unwrap().remove(&key);
                    let change = self.state.delete_run(
                        &run.namespace().unwrap_or_default(),
                        &run.uid().unwrap_or_default(),
                    );
                    self.on_run_change(change);
                }
                Ok(watcher::Event::Init) => initial.clear(),
                Ok(watcher::Event::InitApply(run)) => initial.push(run),
                Ok(watcher::Event::InitDone) => {
                    for change in self.state.reset_runs(&initial) {
                        self.on_run_change(change);
                    }
                    for run in initial.drain(..) {
                        if wants_scheduling(&run) {
                            self.enqueue(ObjectRef::from_obj(&run));
                        }
                    }
                    self.runs_synced.store(true, Ordering::Release);
                }
                Err(e) => warn!("run watch: {e}"),
            }
        }
    }

    async fn watch_pods(self: Arc<Self>) {
        let config = watcher::Config::default().labels(LABEL_RUNTIME);
        let api = self.api::<Pod>();
        self.watch_into_index(
            api,
            config,
            "runtime pod",
            |s| &s.pods_synced,
            SharedCache::apply_pod,
            SharedCache::delete_pod,
            SharedCache::reset_pods,
        )
        .await;
    }

    async fn watch_leases(self: Arc<Self>) {
        let config = watcher::Config::default().labels(LABEL_RUNTIME_POD);
        let api = self.api::<Lease>();
        self.watch_into_index(
            api,
            config,
            "heartbeat lease",
            |s| &s.leases_synced,
            SharedCache::apply_lease,
            SharedCache::delete_lease,
            SharedCache::reset_leases,
        )
        .await;
    }

    /// Feeds one watched kind into the index and wakes the Pending Runs its events concern;
    /// marks `synced` after the first complete list.
    #[allow(clippy::too_many_arguments)]
    async fn watch_into_index<K>(
        self: Arc<Self>,
        api: Api<K>,
        config: watcher::Config,
        what: &'static str,
        synced: fn(&Self) -> &AtomicBool,
        apply: fn(&SharedCache, &K) -> Vec<Wakeup>,
        delete: fn(&SharedCache, &str, &str) -> Vec<Wakeup>,
        reset: fn(&SharedCache, &[K]) -> Vec<Wakeup>,
    ) where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    {
        let mut initial = Vec::new();
        let mut stream = std::pin::pin!(watcher(api, config).default_backoff());
        while let Some(event) = stream.next().await {
            let wakeups = match event {
                Ok(watcher::Event::Apply(obj)) => apply(&self.state, &obj),
                Ok(watcher::Event::Delete(obj)) => delete(
                    &self.state,
                    &obj.namespace().unwrap_or_default(),
                    &obj.name_any(),
                ),
                Ok(watcher::Event::Init) => {
                    initial.clear();
                    Vec::new()
                }
                Ok(watcher::Event::InitApply(obj)) => {
                    initial.push(obj);
                    Vec::new()
                }
                Ok(watcher::Event::InitDone) => {
                    let wakeups = reset(&self.state, &std::mem::take(&mut initial));
                    synced(&self).store(true, Ordering::Release);
                    wakeups
                }
                Err(e) => {
                    warn!("{what} watch: {e}");
                    Vec::new()
                }
            };
            self.wake(wakeups);
        }
    }

    /// Runs the queue for as long as this task lives (it is aborted on shutdown). Call only
    /// while leading.
    async fn run_queue(self: Arc<Self>, store: Store<Run>) {
        let (tx, rx) = unbounded();
        *self.queue.lock().unwrap() = Some(tx);
        let _ = store.wait_until_ready().await;
        // A cycle on a partial view could write a wrong Pending message (e.g. 0/0 Pods):
        // start only once Pods and heartbeat Leases are listed too.
        while !self.caches_synced() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Rebuild the queue from Pending Runs, as a new leader must.
        for run in store.state() {
            if wants_scheduling(&run) {
                self.enqueue(ObjectRef::from_obj(run.as_ref()));
            }
        }
        let workers = self.options.workers.max(1);
        Controller::for_stream(futures::stream::pending(), store)
            .reconcile_on(rx)
            .with_config(kube::runtime::controller::Config::default().concurrency(workers))
            .run(reconcile, error_policy, self)
            .for_each(|result| async move {
                if let Err(e) = result {
                    debug!("reconcile: {e}");
                }
            })
            .await;
    }
}

/// How long an Unschedulable Run waits for a wakeup before it is retried anyway.
const UNSCHEDULABLE_RETRY: Duration = Duration::from_secs(60);

/// A Run the scheduler should place: Pending (or without status), not being deleted.
fn wants_scheduling(run: &Run) -> bool {
    run.metadata.deletion_timestamp.is_none()
        && run.phase() == RunPhase::Pending
        && run
            .status
            .as_ref()
            .and_then(|s| s.pod_name.as_ref())
            .is_none()
}

fn now() -> Time {
    Time(jiff::Timestamp::now())
}

/// One reconcile is one scheduling cycle for one Run.
async fn reconcile(run: Arc<Run>, scheduler: Arc<Scheduler>) -> Result<Action, Error> {
    let key = ObjectRef::from_obj(run.as_ref());
    let result = schedule_one(&run, &scheduler, &key).await;
    if result.is_ok() {
        scheduler.failures.lock().unwrap().remove(&key);
    }
    result
}

async fn schedule_one(
    run: &Arc<Run>,
    scheduler: &Scheduler,
    key: &ObjectRef<Run>,
) -> Result<Action, Error> {
    if let Some(first) = scheduler.enqueued_at.lock().unwrap().remove(key) {
        scheduler
            .metrics
            .queue_duration
            .observe(first.elapsed().as_secs_f64());
    }
    if !wants_scheduling(run) {
        return Ok(Action::await_change());
    }
    let name = run.name_any();
    let namespace = run.namespace().unwrap_or_default();
    let outcome = {
        let _timer = scheduler.metrics.cycle_timer();
        scheduler.state.schedule(run, jiff::Timestamp::now())
    };
    scheduler
        .metrics
        .schedule_attempts
        .with_label_values(&[outcome.result()])
        .inc();
    for rejection in outcome.rejections() {
        scheduler
            .metrics
            .filter_rejections
            .with_label_values(&[rejection.plugin, rejection.reason])
            .inc_by(rejection.count as u64);
    }
    let api: Api<Run> = Api::namespaced(scheduler.client.clone(), &namespace);
    match outcome {
        ScheduleOutcome::Reserved { pod, pod_uid, .. } => {
            let uid = run.uid().unwrap_or_default();
            // A stale Pod observation discards the reservation, like a conflict (the spec's
            // Bind rule): never bind to a Pod that is gone, replaced or terminating.
            let pod_current = scheduler.state.with(|s| {
                s.index()
                    .pod(&namespace, &pod)
                    .is_some_and(|p| p.uid == pod_uid && !p.deleting)
            });
            if !pod_current {
                scheduler.release(&namespace, &uid);
                debug!(run = %name, %namespace, "chosen Runtime Pod changed before Bind; requeued");
                return Ok(Action::requeue(Duration::from_millis(50)));
            }
            let mut bound = Run::clone(run);
            let status = bound.status.get_or_insert_with(Default::default);
            let now = now();
            status.phase = Some(RunPhase::Scheduled);
            status.pod_name = Some(pod.clone());
            status.pod_uid = Some(pod_uid);
            status.reason = Some(reasons::SCHEDULED.into());
            status.message = None;
            status::set_condition(
                &mut status.conditions,
                CONDITION_SCHEDULED,
                true,
                reasons::SCHEDULED,
                "placed by the kruntimes scheduler",
                &now,
            );
            match api
                .replace_status(&name, &PostParams::default(), &bound)
                .await
            {
                // The assumption stays until the watch shows the Run active on the Pod.
                Ok(_) => {
                    info!(run = %name, %namespace, %pod, "scheduled");
                    Ok(Action::await_change())
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    scheduler.release(&namespace, &uid);
                    scheduler
                        .metrics
                        .reservation_conflicts
                        .with_label_values(&[STAGE_BIND])
                        .inc();
                    // The newer version's watch event brings the key back to the queue.
                    debug!(run = %name, %namespace, "bind conflict; waiting for the newer version");
                    Ok(Action::await_change())
                }
                Err(source) => {
                    // A failed transport may hide a write that landed: keep the assumption
                    // when the Run now says it is bound to this Pod, as the watch will too.
                    let landed = matches!(
                        api.get_opt(&name).await,
                        Ok(Some(current)) if current.active_pod() == Some(pod.as_str())
                    );
                    if !landed {
                        scheduler.release(&namespace, &uid);
                    }
                    Err(Error::Bind {
                        run: name,
                        namespace,
                        source,
                    })
                }
            }
        }
        ScheduleOutcome::Unschedulable(unschedulable) => {
            let message = unschedulable.message();
            write_pending(&api, run, &message).await?;
            // Wakeups bring it back when something changes; the periodic retry is a safety
            // net for a lost wakeup (as kube-scheduler flushes its unschedulable queue).
            Ok(Action::requeue(UNSCHEDULABLE_RETRY))
        }
        ScheduleOutcome::Invalid { reason, message } => {
            let mut failed = Run::clone(run);
            let status = failed.status.get_or_insert_with(Default::default);
            let now = now();
            status::set_condition(
                &mut status.conditions,
                CONDITION_SCHEDULED,
                false,
                reason,
                &message,
                &now,
            );
            status::set_terminal(status, Outcome::Failed, reason, &message, None, &now);
            match api
                .replace_status(&name, &PostParams::default(), &failed)
                .await
            {
                Ok(_) => {
                    info!(run = %name, %namespace, "failed: {message}");
                    Ok(Action::await_change())
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    Ok(Action::requeue(Duration::from_millis(50)))
                }
                Err(source) => Err(Error::Status { run: name, source }),
            }
        }
        ScheduleOutcome::ReserveConflict { error, .. } => {
            scheduler
                .metrics
                .reservation_conflicts
                .with_label_values(&[STAGE_RESERVE])
                .inc();
            debug!(run = %name, %namespace, "reserve conflict: {error}");
            Ok(Action::requeue(Duration::from_millis(50)))
        }
        ScheduleOutcome::AlreadyPlaced { .. } => Ok(Action::await_change()),
        ScheduleOutcome::Error(e) => Err(Error::Cycle {
            run: name,
            message: e.to_string(),
        }),
    }
}

/// Records `Scheduled=False/Unschedulable` with the bounded message, writing only when it
/// differs from what the Run already says.
async fn write_pending(api: &Api<Run>, run: &Run, message: &str) -> Result<(), Error> {
    let mut pending = run.clone();
    let status = pending.status.get_or_insert_with(Default::default);
    let now = now();
    let mut changed = status::set_condition(
        &mut status.conditions,
        CONDITION_SCHEDULED,
        false,
        reasons::UNSCHEDULABLE,
        message,
        &now,
    );
    for (field, value) in [
        (&mut status.reason, reasons::UNSCHEDULABLE),
        (&mut status.message, message),
    ] {
        if field.as_deref() != Some(value) {
            *field = Some(value.to_string());
            changed = true;
        }
    }
    if status.phase.is_none() {
        status.phase = Some(RunPhase::Pending);
        changed = true;
    }
    if !changed {
        return Ok(());
    }
    match api
        .replace_status(&run.name_any(), &PostParams::default(), &pending)
        .await
    {
        Ok(_) => Ok(()),
        // A newer version exists; its watch event brings the Run back to the queue.
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Ok(()),
        Err(source) => Err(Error::Status {
            run: run.name_any(),
            source,
        }),
    }
}

/// Retries a failed cycle with exponential backoff per Run: 200ms, 400ms, … up to 30s.
fn error_policy(run: Arc<Run>, error: &Error, scheduler: Arc<Scheduler>) -> Action {
    let mut failures = scheduler.failures.lock().unwrap();
    let n = failures
        .entry(ObjectRef::from_obj(run.as_ref()))
        .or_insert(0);
    *n = n.saturating_add(1);
    let delay = retry_delay(*n);
    warn!(run = %run.name_any(), namespace = %run.namespace().unwrap_or_default(), retry_in = ?delay, "{error}");
    Action::requeue(delay)
}

fn retry_delay(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(8);
    Duration::from_millis(200 << exp).min(Duration::from_secs(30))
}

/// Starts the watches now and the queue whenever `leading` resolves; runs until `shutdown`.
/// Returns an error when any of its tasks stops on its own (a panic included): a scheduler
/// with a dead watch or queue must not keep holding the leader Lease.
pub async fn run(
    scheduler: Arc<Scheduler>,
    leading: impl Future<Output = ()> + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let (reader, writer) = reflector::store();
    let mut runs = tokio::spawn(scheduler.clone().watch_runs(writer));
    let mut pods = tokio::spawn(scheduler.clone().watch_pods());
    let mut leases = tokio::spawn(scheduler.clone().watch_leases());
    let mut queue = {
        let scheduler = scheduler.clone();
        tokio::spawn(async move {
            leading.await;
            info!("leading: starting the scheduling queue");
            scheduler.run_queue(reader).await;
        })
    };
    let result = tokio::select! {
        _ = shutdown => Ok(()),
        _ = &mut runs => Err(Error::TaskEnded("Run watch")),
        _ = &mut pods => Err(Error::TaskEnded("Runtime Pod watch")),
        _ = &mut leases => Err(Error::TaskEnded("heartbeat Lease watch")),
        _ = &mut queue => Err(Error::TaskEnded("scheduling queue")),
    };
    for task in [queue, runs, pods, leases] {
        task.abort();
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run;

    #[test]
    fn retry_delay_doubles_from_200ms_and_is_capped() {
        assert_eq!(retry_delay(1), Duration::from_millis(200));
        assert_eq!(retry_delay(2), Duration::from_millis(400));
        assert_eq!(retry_delay(5), Duration::from_millis(3200));
        assert_eq!(retry_delay(100), Duration::from_secs(30));
    }

    #[test]
    fn only_pending_unassigned_live_runs_want_scheduling() {
        assert!(wants_scheduling(&run("a").build()));
        assert!(!wants_scheduling(&run("a").on("p").build()));
        assert!(!wants_scheduling(&run("a").deleting().build()));
    }
}
