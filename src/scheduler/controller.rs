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

use futures::channel::mpsc::{UnboundedSender, unbounded};
use futures::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use thiserror::Error;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::{debug, info, warn};

use crate::api::lenient::Lenient;
use crate::api::status;
use crate::api::{LABEL_RUNTIME, LABEL_RUNTIME_POD, Run, Runtime};
use crate::events::{RunEvents, reasons as event_reasons};
use crate::metrics::{
    PENDING_BACKOFF, PENDING_QUEUED, PENDING_STATES, PENDING_UNSCHEDULABLE, POD_AVAILABLE,
    POD_UNAVAILABLE, STAGE_BIND, STAGE_RESERVE, SchedulerMetrics,
};
use crate::scheduler::framework::{
    Changes, Indexed, LostRun, PodLoss, QueueOrder, ScheduleOutcome, SchedulerCache, SharedCache,
};
use crate::scheduler::plugins::{self, runtime_pod_availability};
use crate::scheduler::status_patch;
use crate::scheduler::watch::{IndexEvent, InitBuffer};

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
    /// How long a heartbeat may be stale before Runs on that Pod count as lost.
    pub pod_lost_grace: Duration,
    /// How long the oldest unfitting Pending Run may wait while later Runs are placed before
    /// a Pod is nominated for it.
    pub starvation_threshold: Duration,
}

/// Shared between watch tasks, queue workers and the HTTP probes.
pub struct Scheduler {
    client: Client,
    cache: SharedCache,
    metrics: SchedulerMetrics,
    /// Publishes the Events on Runs (events.k8s.io/v1, deduplicated into series).
    events: RunEvents,
    options: Options,
    /// The queue's trigger channel while this replica leads; `None` on a standby.
    queue: Mutex<Option<UnboundedSender<ObjectRef<Run>>>>,
    /// When each queued key was first activated, for the queue-duration histogram.
    enqueued_at: Mutex<HashMap<ObjectRef<Run>, Instant>>,
    /// Consecutive failed reconciles per key, for exponential retry backoff.
    failures: Mutex<HashMap<ObjectRef<Run>, u32>>,
    /// The queue's Run store while this replica leads: a cycle may place an earlier Run than
    /// the one it was started for, and binds the store's version of it.
    store: Mutex<Option<Store<Run>>>,
    /// The binding stage's slots: binds in flight at most [`MAX_BINDS_IN_FLIGHT`].
    binds: Arc<Semaphore>,
    runs: WatchHealth,
    runtimes: WatchHealth,
    pods: WatchHealth,
    leases: WatchHealth,
}

impl Scheduler {
    pub fn new(client: Client, metrics: SchedulerMetrics, options: Options) -> Arc<Self> {
        Arc::new(Self {
            events: RunEvents::new(
                client.clone(),
                crate::events::SCHEDULER,
                std::env::var("POD_NAME").ok(),
            ),
            client,
            cache: SharedCache::with_cache(
                plugins::registry(),
                SchedulerCache::new().with_starvation_threshold(
                    jiff::SignedDuration::try_from(options.starvation_threshold)
                        .unwrap_or(jiff::SignedDuration::MAX),
                ),
            ),
            metrics,
            options,
            queue: Mutex::new(None),
            enqueued_at: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
            store: Mutex::new(None),
            binds: Arc::new(Semaphore::new(MAX_BINDS_IN_FLIGHT)),
            runs: WatchHealth::default(),
            runtimes: WatchHealth::default(),
            pods: WatchHealth::default(),
            leases: WatchHealth::default(),
        })
    }

    /// Ready once every watch has delivered its initial list.
    pub fn caches_synced(&self) -> bool {
        [&self.runs, &self.runtimes, &self.pods, &self.leases]
            .iter()
            .all(|w| w.synced.load(Ordering::Acquire))
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        crate::kubeclient::scoped_api(&self.client, self.options.namespace.as_deref())
    }

    /// Requests a cycle for `run` if this replica leads.
    ///
    /// An activation still on its way to its cycle (sent, its cycle not started) already
    /// covers this one, which the queue would coalesce anyway: it is not sent again, so a
    /// wakeup of many Pending Runs costs a lookup per Run rather than a message each.
    fn enqueue(&self, run: ObjectRef<Run>) {
        let queue = self.queue.lock().unwrap();
        if let Some(tx) = queue.as_ref() {
            let mut enqueued_at = self.enqueued_at.lock().unwrap();
            if enqueued_at.contains_key(&run) {
                return;
            }
            enqueued_at.insert(run.clone(), Instant::now());
            let _ = tx.unbounded_send(run);
        }
    }

    /// The queue dropped an activation without a cycle (its Run is not in the store): the
    /// next one must be sent.
    fn dropped(&self, run: &ObjectRef<kube::api::DynamicObject>) {
        let mut key = ObjectRef::<Run>::new(&run.name);
        key.namespace = run.namespace.clone();
        self.enqueued_at.lock().unwrap().remove(&key);
    }

    /// Publishes an Event on `run` in the background (see [`RunEvents`]).
    fn emit(&self, run: &Run, type_: EventType, reason: &str, action: &str, note: String) {
        self.events.emit(run, type_, reason, action, note);
    }

    /// Sets the gauges from the Run store and the cache at `now`: Pending Runs by state and
    /// Runtime Pods by availability (RuntimePodAvailability's own Pod checks).
    fn refresh_gauges(&self, store: &Store<Run>, now: jiff::Timestamp) {
        let mut pending = [0i64; 3];
        {
            let failures = self.failures.lock().unwrap();
            for run in store.state() {
                if !run.waits_for_placement() {
                    continue;
                }
                let reason = run.status.as_ref().and_then(|s| s.reason.as_deref());
                let state = if failures.contains_key(&ObjectRef::from_obj(run.as_ref())) {
                    PENDING_BACKOFF
                } else if matches!(
                    reason,
                    Some(status::reasons::UNSCHEDULABLE | status::reasons::NOMINATED)
                ) {
                    PENDING_UNSCHEDULABLE
                } else {
                    PENDING_QUEUED
                };
                let i = PENDING_STATES.iter().position(|s| *s == state).unwrap_or(0);
                pending[i] += 1;
            }
        }
        for (state, n) in PENDING_STATES.iter().zip(pending) {
            self.metrics.pending_runs.with_label_values(&[state]).set(n);
        }
        let (available, unavailable) = self.cache.with(|cache| {
            let (mut available, mut unavailable) = (0i64, 0i64);
            for (namespace, runtime) in cache.index().scopes() {
                for pod in cache.snapshot(namespace, runtime, now).pods() {
                    match runtime_pod_availability::unavailable(&pod, now) {
                        None => available += 1,
                        Some(_) => unavailable += 1,
                    }
                }
            }
            (available, unavailable)
        });
        self.metrics
            .runtime_pods
            .with_label_values(&[POD_AVAILABLE])
            .set(available);
        self.metrics
            .runtime_pods
            .with_label_values(&[POD_UNAVAILABLE])
            .set(unavailable);
    }

    /// Refreshes the gauges every [`GAUGE_PERIOD`], on standbys too (they watch the same).
    async fn gauges(self: Arc<Self>, store: Store<Run>) {
        loop {
            if self.caches_synced() {
                self.refresh_gauges(&store, jiff::Timestamp::now());
            }
            tokio::time::sleep(GAUGE_PERIOD).await;
        }
    }

    fn is_leading(&self) -> bool {
        self.queue.lock().unwrap().is_some()
    }

    /// Enqueues the Pending Runs that `changes` concern: the wakeups counted by source (for
    /// released capacity only the Runs that room could help, in queue order), the Runtimes
    /// whose affinity targets changed uncounted (not a capacity or Runtime Pod event); and the
    /// Runs whose nomination was made or dropped, so their status says so.
    fn wake(&self, changes: Changes) {
        if !self.is_leading() {
            return;
        }
        for (scope, name) in self.cache.take_nomination_changes() {
            self.enqueue(ObjectRef::new(&name).within(&scope.namespace));
            self.sweep(&scope.namespace, &scope.runtime);
        }
        if changes.is_empty() {
            return;
        }
        let now = jiff::Timestamp::now();
        for wakeup in changes.wakeups {
            let names = self.cache.woken_by(&wakeup, now);
            self.metrics
                .pending_run_wakeups
                .with_label_values(&[wakeup.source.as_str()])
                .inc_by(names.len() as u64);
            for name in names {
                self.enqueue(ObjectRef::new(&name).within(&wakeup.namespace));
            }
        }
        for scope in changes.rechecks {
            for name in self.cache.pending_runs(&scope.namespace, &scope.runtime) {
                self.enqueue(ObjectRef::new(&name).within(&scope.namespace));
            }
        }
        // Every bind changes the targets of its Pod: only Runs waiting for required affinity
        // are looked at again (waking every Pending Run here made a drain O(N²)).
        for scope in changes.retargets {
            for name in self.cache.retargeted(&scope.namespace, &scope.runtime) {
                self.enqueue(ObjectRef::new(&name).within(&scope.namespace));
            }
        }
    }

    /// Enqueues the sweeper of a Runtime's queue (see [`SharedCache::sweeper`]): after a
    /// placement, or when room held for a nomination is given back, the next Runs that fit are
    /// placed in order without waiting for another wakeup.
    fn sweep(&self, namespace: &str, runtime: &str) {
        if let Some(name) = self.cache.sweeper(namespace, runtime) {
            self.enqueue(ObjectRef::new(&name).within(namespace));
        }
    }

    /// Releases a Run's reservation and wakes the Pending Runs that may use it.
    fn release(&self, namespace: &str, uid: &str) {
        if let Some(wakeup) = self.cache.release(namespace, uid) {
            self.wake(vec![wakeup].into());
        }
    }

    /// The queue side of a Run event, after the index has it: a Run that wants scheduling is
    /// enqueued; a deleted one is forgotten by the queue bookkeeping.
    fn on_run_event(&self, event: &IndexEvent<Run>) {
        match event {
            IndexEvent::Apply(run) if run.waits_for_placement() => {
                self.enqueue(ObjectRef::from_obj(run));
            }
            IndexEvent::Apply(_) => {}
            IndexEvent::Delete(run) => {
                let key = ObjectRef::from_obj(run);
                self.enqueued_at.lock().unwrap().remove(&key);
                self.failures.lock().unwrap().remove(&key);
            }
            IndexEvent::Reset(runs) => {
                let mut pending: Vec<&Run> =
                    runs.iter().filter(|r| r.waits_for_placement()).collect();
                pending.sort_by_cached_key(|r| QueueOrder::of(r));
                for run in pending {
                    self.enqueue(ObjectRef::from_obj(run));
                }
            }
        }
    }

    /// The one watch→index loop: feeds every event of one watched kind into the cache, wakes
    /// the Pending Runs it concerns, then hands the event to `after` (the Run watch's queue
    /// side). Keeps `health`: synced after the first complete list, broken from a watch error
    /// until the next complete list.
    async fn watch_into_index<K>(
        self: Arc<Self>,
        events: impl Stream<Item = watcher::Result<watcher::Event<K>>>,
        what: &'static str,
        health: fn(&Self) -> &WatchHealth,
        after: fn(&Self, &IndexEvent<K>),
    ) where
        K: Indexed,
    {
        let mut buffer = InitBuffer::default();
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => buffer.feed(event),
                Err(e) => {
                    warn!("{what} watch: {e}");
                    health(&self).broken.store(true, Ordering::Release);
                    None
                }
            };
            let Some(event) = event else { continue };
            let now = jiff::Timestamp::now();
            let changes = match &event {
                IndexEvent::Apply(obj) => self.cache.apply(obj, now),
                IndexEvent::Delete(obj) => self.cache.delete(obj, now),
                IndexEvent::Reset(objs) => self.cache.reset(objs, now),
            };
            self.wake(changes);
            after(&self, &event);
            if matches!(event, IndexEvent::Reset(_)) {
                health(&self).listed(jiff::Timestamp::now());
            }
        }
    }

    /// Watches Runs into the store the queue reads and into the index.
    async fn watch_runs(self: Arc<Self>, writer: reflector::store::Writer<Run>) {
        // Leniently: one Run that does not decode (an object of another implementation's
        // schema) is reported and skipped instead of failing every list of the watch.
        let events =
            crate::kubeclient::lenient_watch(self.api::<Lenient<Run>>(), Default::default())
                .reflect(writer);
        self.watch_into_index(events, "run", |s| &s.runs, Self::on_run_event)
            .await;
    }

    async fn watch_pods(self: Arc<Self>) {
        let config = watcher::Config::default().labels(LABEL_RUNTIME);
        let events = watcher(self.api::<Pod>(), config).backoff(crate::kubeclient::watch_backoff());
        self.watch_into_index(events, "runtime pod", |s| &s.pods, |_, _| {})
            .await;
    }

    async fn watch_runtimes(self: Arc<Self>) {
        let events =
            crate::kubeclient::lenient_watch(self.api::<Lenient<Runtime>>(), Default::default());
        self.watch_into_index(events, "runtime", |s| &s.runtimes, |_, _| {})
            .await;
    }

    async fn watch_leases(self: Arc<Self>) {
        let config = watcher::Config::default().labels(LABEL_RUNTIME_POD);
        let events =
            watcher(self.api::<Lease>(), config).backoff(crate::kubeclient::watch_backoff());
        self.watch_into_index(events, "heartbeat lease", |s| &s.leases, |_, _| {})
            .await;
    }

    /// Runs the queue for as long as this task lives (it is aborted on shutdown). Call only
    /// while leading.
    async fn run_queue(self: Arc<Self>, store: Store<Run>) {
        let (tx, rx) = unbounded();
        *self.queue.lock().unwrap() = Some(tx);
        *self.store.lock().unwrap() = Some(store.clone());
        let _ = store.wait_until_ready().await;
        // A cycle on a partial view could write a wrong Pending message (e.g. 0/0 Pods):
        // start only once Pods and heartbeat Leases are listed too.
        while !self.caches_synced() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Rebuild the queue from Pending Runs, as a new leader must, oldest first: each key's
        // cycle then mostly places its own Run rather than an earlier one.
        let mut pending: Vec<Arc<Run>> = store
            .state()
            .into_iter()
            .filter(|r| r.waits_for_placement())
            .collect();
        pending.sort_by_cached_key(|r| QueueOrder::of(r));
        for run in pending {
            self.enqueue(ObjectRef::from_obj(run.as_ref()));
        }
        let workers = self.options.workers.max(1);
        let lifecycle = self.clone().heal(store.clone());
        let scheduler = self.clone();
        let queue = Controller::for_stream(futures::stream::pending(), store)
            .reconcile_on(rx)
            .with_config(kube::runtime::controller::Config::default().concurrency(workers))
            .run(reconcile, error_policy, self)
            .for_each(|result| {
                match result {
                    Err(kube::runtime::controller::Error::ObjectNotFound(run)) => {
                        scheduler.dropped(&run)
                    }
                    Err(e) => debug!("reconcile: {e}"),
                    Ok(_) => {}
                }
                std::future::ready(())
            });
        // Neither ends on its own; whichever does ends the leader's work.
        tokio::select! {
            () = queue => {}
            () = lifecycle => {}
        }
    }

    /// The leader's lifecycle loop, Kubernetes' node lifecycle controller for Runtime Pods:
    /// at every heartbeat expiry (a timer) it wakes the Pending Runs of that Runtime, and at
    /// least every [`LIFECYCLE_PERIOD`] it heals the Runs of lost Runtime Pods: unclaimed ones
    /// go back to Pending to be placed again, running ones end Failed with `RuntimePodLost`.
    async fn heal(self: Arc<Self>, store: Store<Run>) {
        let grace = jiff::SignedDuration::try_from(self.options.pod_lost_grace)
            .unwrap_or(jiff::SignedDuration::MAX);
        let mut last = jiff::Timestamp::now();
        loop {
            let now = jiff::Timestamp::now();
            let (expired, next) = self.cache.expiries(last, now);
            last = now;
            self.wake(expired.into());
            // Heartbeats count as stale only for as long as the scheduler could see them: not
            // while the Pod or Lease watch is broken (an API-server outage hides renewals),
            // and from their last complete list on.
            let observed_since = [&self.pods, &self.leases]
                .iter()
                .map(|w| w.observed_since(now))
                .max()
                .unwrap_or(now);
            for lost in self.cache.lost_runs(now, grace, observed_since) {
                self.heal_one(&store, lost).await;
            }
            let until_next = next
                .and_then(|at| Duration::try_from(at.duration_since(now)).ok())
                .map_or(LIFECYCLE_PERIOD, |d| d.min(LIFECYCLE_PERIOD));
            tokio::time::sleep(until_next.max(Duration::from_millis(10))).await;
        }
    }

    /// Writes what a lost Run becomes, on the version the store has; a conflict is retried at
    /// the next pass with the newer version.
    async fn heal_one(&self, store: &Store<Run>, lost: LostRun) {
        let key = ObjectRef::new(&lost.name).within(&lost.namespace);
        let Some(run) = store.get(&key) else { return };
        if run.uid().as_deref() != Some(lost.uid.as_str()) {
            return;
        }
        let mut healed = run.status.clone().unwrap_or_default();
        let now = now();
        let changed = if lost.admitted {
            status::set_terminal(
                &mut healed,
                status::Outcome::Failed,
                status::reasons::RUNTIME_POD_LOST,
                &lost_message(&lost, self.options.pod_lost_grace),
                None,
                &now,
            )
        } else {
            status::set_unbound(
                &mut healed,
                "its Runtime Pod was lost before runtimed admitted it; placing it again",
                &now,
            )
        };
        let patch = status_patch::status_patch(&run, &healed);
        let (true, Some(patch)) = (changed, patch) else {
            return;
        };
        match status_patch::send(&self.client, &lost.namespace, &lost.name, &patch).await {
            Ok(()) => {
                let note = if lost.admitted {
                    lost_message(&lost, self.options.pod_lost_grace)
                } else {
                    format!(
                        "Runtime Pod {} was lost before runtimed admitted the Run; placing it again",
                        lost.pod
                    )
                };
                self.events.emit_once(
                    &run,
                    EventType::Warning,
                    status::reasons::RUNTIME_POD_LOST,
                    "Heal",
                    note,
                );
                self.log_healed(&lost);
            }
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
            Err(e) => {
                warn!(run = %lost.name, namespace = %lost.namespace, "cannot heal the Run of a lost Runtime Pod: {e}; retrying")
            }
        }
    }

    fn log_healed(&self, lost: &LostRun) {
        match () {
            () if lost.admitted => {
                warn!(run = %lost.name, namespace = %lost.namespace, pod = %lost.pod, "failed: Runtime Pod lost ({:?})", lost.why)
            }
            () => {
                info!(run = %lost.name, namespace = %lost.namespace, pod = %lost.pod, "Runtime Pod lost ({:?}) before admission; placing the Run again", lost.why)
            }
        }
    }
}

/// What the scheduler knows of one of its watches.
#[derive(Debug, Default)]
struct WatchHealth {
    /// The first complete list has been applied.
    synced: AtomicBool,
    /// The watch failed and has not completed a list since.
    broken: AtomicBool,
    /// When the last complete list was applied.
    listed_at: Mutex<Option<jiff::Timestamp>>,
}

impl WatchHealth {
    fn listed(&self, now: jiff::Timestamp) {
        *self.listed_at.lock().unwrap() = Some(now);
        self.broken.store(false, Ordering::Release);
        self.synced.store(true, Ordering::Release);
    }

    /// Since when what this watch shows can be trusted: its last complete list, or `now`
    /// while it is broken or has never listed.
    fn observed_since(&self, now: jiff::Timestamp) -> jiff::Timestamp {
        match *self.listed_at.lock().unwrap() {
            Some(at) if !self.broken.load(Ordering::Acquire) => at,
            _ => now,
        }
    }
}

/// How often the gauges are refreshed.
const GAUGE_PERIOD: Duration = Duration::from_secs(1);

/// How often the lifecycle loop looks for Runs of lost Runtime Pods at the least.
const LIFECYCLE_PERIOD: Duration = Duration::from_secs(1);

/// The Failed message of a Run whose Runtime Pod was lost while it ran.
fn lost_message(lost: &LostRun, grace: Duration) -> String {
    let pod = &lost.pod;
    match lost.why {
        PodLoss::Gone => format!("Runtime Pod {pod} was deleted while the Run was running"),
        PodLoss::Replaced => {
            format!("Runtime Pod {pod} was replaced by a new Pod while the Run was running")
        }
        PodLoss::Terminating | PodLoss::HeartbeatStale => format!(
            "the runtimed heartbeat of Runtime Pod {pod} has been stale for longer than {grace:?} while the Run was running (node or runtimed lost)"
        ),
    }
}

/// Appended to the Pending message of a Run a Runtime Pod is being drained for (the message
/// names no Pod; `status.nominatedPodName` does).
const NOMINATED_NOTE: &str =
    " A Runtime Pod is being drained for this Run (see status.nominatedPodName).";

/// How soon a Run that yielded to an earlier one in its Runtime's queue looks again.
const YIELD_RETRY: Duration = Duration::from_millis(100);

/// Binds in flight at most: enough to keep the API server busy while the queue plans, few
/// enough that a slow or failing server holds back planning instead of piling assumptions.
const MAX_BINDS_IN_FLIGHT: usize = 64;

/// How soon a Run is looked at again after a conflict (reserve or bind) or a changed Pod.
const RETRY_SOON: Duration = Duration::from_millis(50);

/// How long an Unschedulable Run waits for a wakeup before it is retried anyway.
const UNSCHEDULABLE_RETRY: Duration = Duration::from_secs(60);

fn now() -> Time {
    Time(jiff::Timestamp::now())
}

/// One reconcile is one scheduling cycle for one Run.
async fn reconcile(run: Arc<Run>, scheduler: Arc<Scheduler>) -> Result<Action, Error> {
    let key = ObjectRef::from_obj(run.as_ref());
    let result = schedule_one(&run, &scheduler, &key).await;
    match result {
        // The binding stage keeps the Run's failure count until its write is done.
        Ok(Cycle::Binding) => Ok(Action::await_change()),
        Ok(Cycle::Done(action)) => {
            scheduler.failures.lock().unwrap().remove(&key);
            Ok(action)
        }
        Err(e) => Err(e),
    }
}

/// How a cycle ended for the queue.
enum Cycle {
    /// Carried out; what the queue does with the key next.
    Done(Action),
    /// A Pod is reserved and the binding stage writes it; the queue waits for a change.
    Binding,
}

/// Plan (the pure cycle, under the cache lock), then carry the outcome out: Bind (handed to
/// the binding stage), a Pending message, or a terminal Failed for an invalid Run.
async fn schedule_one(
    run: &Arc<Run>,
    scheduler: &Arc<Scheduler>,
    key: &ObjectRef<Run>,
) -> Result<Cycle, Error> {
    if let Some(first) = scheduler.enqueued_at.lock().unwrap().remove(key) {
        scheduler
            .metrics
            .queue_duration
            .observe(first.elapsed().as_secs_f64());
    }
    if !run.waits_for_placement() {
        return Ok(Cycle::Done(Action::await_change()));
    }
    // A free binding slot first: a cycle that reserves always has a writer, and assumptions
    // never pile up behind a slow API server.
    let slot = scheduler
        .binds
        .clone()
        .acquire_owned()
        .await
        .expect("the binding semaphore is never closed");
    let outcome = {
        let _timer = scheduler.metrics.cycle_timer();
        scheduler.cache.schedule(run, jiff::Timestamp::now())
    };
    scheduler.record_attempt(&outcome);
    // Nominations made or dropped by this cycle: those Runs' status must say so.
    scheduler.wake(Changes::default());
    let namespace = run.namespace().unwrap_or_default();
    match outcome {
        ScheduleOutcome::Reserved { pod, pod_uid, .. } => {
            scheduler.sweep(&namespace, &run.spec.runtime);
            scheduler.start_binding(run.clone(), pod, pod_uid, slot);
            Ok(Cycle::Binding)
        }
        ScheduleOutcome::Unschedulable(unschedulable) => {
            let nominated = scheduler
                .cache
                .nominated_pod(&namespace, &run.uid().unwrap_or_default());
            let mut message = unschedulable.message();
            if nominated.is_some() {
                message.push_str(NOMINATED_NOTE);
            }
            if write_pending(&scheduler.client, run, &message, nominated.as_deref()).await? {
                scheduler.emit(
                    run,
                    EventType::Warning,
                    event_reasons::FAILED_SCHEDULING,
                    "Scheduling",
                    message,
                );
            }
            // Wakeups bring it back when something changes; the periodic retry is a safety
            // net for a lost wakeup (as kube-scheduler flushes its unschedulable queue).
            Ok(Cycle::Done(Action::requeue(UNSCHEDULABLE_RETRY)))
        }
        ScheduleOutcome::Invalid { reason, message } => {
            let action = fail_invalid(&scheduler.client, run, reason, &message).await?;
            if action == Action::await_change() {
                scheduler.emit(run, EventType::Warning, reason, "Scheduling", message);
            }
            Ok(Cycle::Done(action))
        }
        ScheduleOutcome::ReserveConflict { error, .. } => {
            scheduler
                .metrics
                .reservation_conflicts
                .with_label_values(&[STAGE_RESERVE])
                .inc();
            debug!(run = %run.name_any(), "reserve conflict: {error}");
            Ok(Cycle::Done(Action::requeue(RETRY_SOON)))
        }
        ScheduleOutcome::AlreadyPlaced { .. } => Ok(Cycle::Done(Action::await_change())),
        ScheduleOutcome::ReservedEarlier {
            run: earlier,
            uid,
            pod,
            pod_uid,
        } => {
            let key = ObjectRef::new(&earlier).within(&namespace);
            let current = scheduler
                .store
                .lock()
                .unwrap()
                .as_ref()
                .and_then(|s| s.get(&key))
                .filter(|r| r.uid().as_deref() == Some(uid.as_str()) && r.waits_for_placement());
            let Some(current) = current else {
                // Gone or changed since the cycle saw it: nothing to bind.
                scheduler.release(&namespace, &uid);
                return Ok(Cycle::Done(Action::requeue(Duration::ZERO)));
            };
            scheduler.sweep(&namespace, &run.spec.runtime);
            // The earlier Run's bind retries on its own key if it fails.
            scheduler.start_binding(current, pod, pod_uid, slot);
            // Its own cycle has not run yet: run it now.
            Ok(Cycle::Done(Action::requeue(Duration::ZERO)))
        }
        ScheduleOutcome::Yield { to } => {
            // An earlier Run fits now and goes first; this one looks again shortly (it may
            // still fit elsewhere, or wait for a wakeup then).
            scheduler.enqueue(ObjectRef::new(&to).within(&namespace));
            Ok(Cycle::Done(Action::requeue(YIELD_RETRY)))
        }
        ScheduleOutcome::Error(e) => Err(Error::Cycle {
            run: run.name_any(),
            message: e.to_string(),
        }),
    }
}

impl Scheduler {
    /// Counts one more consecutive failure of `run` and logs it; returns the backoff delay
    /// before its next attempt.
    fn failed(&self, run: &Run, error: &Error) -> Duration {
        let mut failures = self.failures.lock().unwrap();
        let n = failures.entry(ObjectRef::from_obj(run)).or_insert(0);
        *n = n.saturating_add(1);
        let delay = retry_delay(*n);
        warn!(run = %run.name_any(), namespace = %run.namespace().unwrap_or_default(), retry_in = ?delay, "{error}");
        delay
    }

    /// The binding stage (kube-scheduler's binding cycle): writes the bind of `run` to `pod` in
    /// the background, holding `slot`, while the queue plans the next Run. The assumption the
    /// cycle made stands for the Run until the watch shows the write, or the write fails and
    /// releases it; a failed or conflicting bind looks at the Run again after a delay.
    fn start_binding(
        self: &Arc<Self>,
        run: Arc<Run>,
        pod: String,
        pod_uid: String,
        slot: OwnedSemaphorePermit,
    ) {
        let scheduler = self.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let key = ObjectRef::from_obj(run.as_ref());
            let retry = match bind(&scheduler, &run, &pod, &pod_uid).await {
                Ok(None) => {
                    scheduler.failures.lock().unwrap().remove(&key);
                    None
                }
                Ok(Some(delay)) => Some(delay),
                Err(error) => Some(scheduler.failed(&run, &error)),
            };
            if let Some(delay) = retry {
                scheduler.enqueue_after(key, delay);
            }
        });
    }

    /// Requests a cycle for `run` after `delay` (the binding stage's retries).
    fn enqueue_after(self: &Arc<Self>, run: ObjectRef<Run>, delay: Duration) {
        let scheduler = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            scheduler.enqueue(run);
        });
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

/// Bind: a status patch guarded by the observed resourceVersion (see [`status_patch`]). The
/// reservation stays until the watch shows the Run active on the Pod; any failed write
/// releases it. Returns after how long to look at the Run again, if it must be.
async fn bind(
    scheduler: &Scheduler,
    run: &Run,
    pod: &str,
    pod_uid: &str,
) -> Result<Option<Duration>, Error> {
    let (name, namespace) = (run.name_any(), run.namespace().unwrap_or_default());
    let uid = run.uid().unwrap_or_default();
    // A stale Pod observation discards the reservation, like a conflict (the spec's Bind
    // rule): never bind to a Pod that is gone, replaced or terminating.
    let pod_current = scheduler.cache.with(|s| {
        s.index()
            .pod(&namespace, pod)
            .is_some_and(|p| p.uid == pod_uid && !p.deleting)
    });
    let mut status = run.status.clone().unwrap_or_default();
    status::set_bound(&mut status, pod, pod_uid, &now());
    let patch = status_patch::status_patch(run, &status);
    let (true, Some(patch)) = (pod_current, patch) else {
        scheduler.release(&namespace, &uid);
        debug!(run = %name, %namespace, "chosen Runtime Pod changed before Bind; requeued");
        return Ok(Some(RETRY_SOON));
    };
    match status_patch::send(&scheduler.client, &namespace, &name, &patch).await {
        Ok(()) => {
            debug!(run = %name, %namespace, %pod, "scheduled");
            scheduler.events.emit_once(
                run,
                EventType::Normal,
                event_reasons::SCHEDULED,
                "Binding",
                format!("Assigned to Runtime Pod {pod}"),
            );
            Ok(None)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => {
            scheduler.release(&namespace, &uid);
            scheduler
                .metrics
                .reservation_conflicts
                .with_label_values(&[STAGE_BIND])
                .inc();
            // The cycle that saw the newer version may have found the assumption still held;
            // look again once the watch has delivered it.
            debug!(run = %name, %namespace, "bind conflict; looking again");
            Ok(Some(RETRY_SOON))
        }
        Err(source) => {
            // A failed transport may hide a write that landed: keep the assumption when the
            // Run now says it is bound to this Pod, as the watch will too.
            let api: Api<Run> = Api::namespaced(scheduler.client.clone(), &namespace);
            let landed = matches!(
                api.get_opt(&name).await,
                Ok(Some(current)) if current.active_pod() == Some(pod)
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

/// Fails an invalid Run for good through the terminal helper.
async fn fail_invalid(
    client: &Client,
    run: &Run,
    reason: &'static str,
    message: &str,
) -> Result<Action, Error> {
    let (name, namespace) = (run.name_any(), run.namespace().unwrap_or_default());
    let mut status = run.status.clone().unwrap_or_default();
    if !status::set_invalid(&mut status, reason, message, &now()) {
        return Ok(Action::await_change());
    }
    let Some(patch) = status_patch::status_patch(run, &status) else {
        return Ok(Action::await_change());
    };
    match status_patch::send(client, &namespace, &name, &patch).await {
        Ok(()) => {
            info!(run = %name, %namespace, "failed: {message}");
            Ok(Action::await_change())
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(Action::requeue(RETRY_SOON)),
        Err(source) => Err(Error::Status { run: name, source }),
    }
}

/// Records `Scheduled=False/Unschedulable` with the bounded message, writing only when it
/// differs from what the Run already says. Returns whether the message it wrote is new (not
/// the one the Run already had): the scheduler then says so in a `FailedScheduling` Event.
async fn write_pending(
    client: &Client,
    run: &Run,
    message: &str,
    nominated: Option<&str>,
) -> Result<bool, Error> {
    let mut status = run.status.clone().unwrap_or_default();
    let new_message = !matches!(
        status.reason.as_deref(),
        Some(status::reasons::UNSCHEDULABLE | status::reasons::NOMINATED)
    ) || status.message.as_deref() != Some(message);
    if !status::set_pending(&mut status, message, nominated, &now()) {
        return Ok(false);
    }
    let Some(patch) = status_patch::status_patch(run, &status) else {
        return Ok(false);
    };
    let (name, namespace) = (run.name_any(), run.namespace().unwrap_or_default());
    match status_patch::send(client, &namespace, &name, &patch).await {
        Ok(()) => Ok(new_message),
        // A newer version exists; its watch event brings the Run back to the queue.
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Ok(false),
        Err(source) => Err(Error::Status { run: name, source }),
    }
}

/// Retries a failed cycle with exponential backoff per Run: 200ms, 400ms, … up to 10s
/// (kube-scheduler's longest Pod backoff), so after an API-server outage every Run is retried
/// within 10 s of its return.
fn error_policy(run: Arc<Run>, error: &Error, scheduler: Arc<Scheduler>) -> Action {
    Action::requeue(scheduler.failed(&run, error))
}

fn retry_delay(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(8);
    Duration::from_millis(200 << exp).min(Duration::from_secs(10))
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
    let mut runtimes = tokio::spawn(scheduler.clone().watch_runtimes());
    let mut pods = tokio::spawn(scheduler.clone().watch_pods());
    let mut leases = tokio::spawn(scheduler.clone().watch_leases());
    let mut gauges = tokio::spawn(scheduler.clone().gauges(reader.clone()));
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
        _ = &mut runtimes => Err(Error::TaskEnded("Runtime watch")),
        _ = &mut pods => Err(Error::TaskEnded("Runtime Pod watch")),
        _ = &mut leases => Err(Error::TaskEnded("heartbeat Lease watch")),
        _ = &mut gauges => Err(Error::TaskEnded("gauges")),
        _ = &mut queue => Err(Error::TaskEnded("scheduling queue")),
    };
    for task in [queue, runs, runtimes, pods, leases, gauges] {
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
        assert_eq!(retry_delay(100), Duration::from_secs(10));
    }

    #[test]
    fn only_pending_unassigned_live_runs_want_scheduling() {
        assert!(run("a").build().waits_for_placement());
        assert!(!run("a").on("p").build().waits_for_placement());
        assert!(!run("a").deleting().build().waits_for_placement());
    }
}
