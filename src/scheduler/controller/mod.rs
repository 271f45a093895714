//! kube wiring of the scheduler: watches feeding the pure core's cache, the scheduling loop,
//! Bind and status writes.
//!
//! Decisions are made only by the cache ([`SchedulerCache::schedule_next`], one pop of the
//! scheduling queue = one cycle) and mapped to writes by [`crate::scheduler::steps`]; this
//! module carries them out ([`scheduling`]), wakes the Pending Runs a heartbeat expiry
//! concerns ([`expiry`]) and writes a PersistentWorkspace's binding before the Bind of its
//! first Run ([`binding`], the VolumeBinding plugin's PreBind). Watches run on every replica
//! so a standby's caches stay warm; the loops run only on the leader. Losing the lease stops
//! scheduling at once (the process exits, like controller-runtime's managers), so a new
//! leader always starts with an empty assumed cache.
//!
//! It places Runs and nothing else: healing the Runs of lost Runtime Pods and the
//! PersistentWorkspace lifecycle are controllers of the manager's
//! ([`crate::manager::lifecycle`], [`crate::manager::workspaces`]), which read this
//! scheduler's cache and stores through [`Scheduler::cache`], [`Scheduler::heartbeat_sight`],
//! [`Scheduler::workspaces`] and [`Scheduler::synced`].

mod binding;
mod expiry;
mod preemption;
mod scheduling;

use std::future::Future;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::Client;
use kube::api::Api;
use kube::runtime::events::EventType;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use thiserror::Error;
use tokio::sync::{Notify, Semaphore};
use tracing::{info, warn};

use crate::api::lenient::Lenient;
use crate::api::{LABEL_RUNTIME, LABEL_RUNTIME_POD, PersistentWorkspace, Run, Runtime};
use crate::scheduler::framework::{
    self, Indexed, ObservedLease, ObservedPod, SchedulerCache, ScopeRef, SharedCache,
};
use crate::scheduler::metrics::{POD_AVAILABLE, POD_UNAVAILABLE, SchedulerMetrics};
use crate::scheduler::plugins::{self, runtime_pod_availability};
use crate::scheduler::watch::{IndexEvent, InitBuffer};
use crate::telemetry::events::RunEvents;

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
    #[error("the {0} task of the scheduler stopped; exiting so the process restarts cleanly")]
    TaskEnded(&'static str),
}

/// What `scheduler run` needs besides a client.
#[derive(Debug, Clone)]
pub struct Options {
    /// Pending and Failed status writes in flight (cycles are serial; Binds have their own
    /// slots).
    pub workers: u16,
    /// Watch one namespace instead of the whole cluster.
    pub namespace: Option<String>,
    /// How long a heartbeat may be stale before Runs on that Pod count as lost.
    pub pod_lost_grace: Duration,
    /// How long the oldest unfitting Pending Run may wait while later Runs are placed before
    /// a Pod is nominated for it.
    pub starvation_threshold: Duration,
    /// Fairness groups with series of their own in the fair-share gauges (the top N by
    /// Pending Runs).
    pub fair_share_metrics_groups: usize,
    /// Whether the routine Events (`Scheduled`) are published ([`crate::telemetry::events::ROUTINE`]).
    pub routine_events: bool,
    /// How long `Scheduled` waits to be published, for a Run not started by then
    /// ([`crate::telemetry::events::RunEvents::hold`]).
    pub event_fold_window: Duration,
    /// runtimed's `--claim-delay` in the Runtime Pods this scheduler makes: an unclaimed Run
    /// bound within its [`framework::claim_window`] may have started, so it is neither sent
    /// back from a terminating Pod nor preempted as unstarted until the window passes.
    pub claim_delay: Duration,
}

/// Shared between watch tasks, the scheduling loop, the manager's controllers that read its
/// cache and stores, and the HTTP probes.
pub struct Scheduler {
    client: Client,
    cache: Arc<SharedCache>,
    metrics: SchedulerMetrics,
    /// Publishes the Events on Runs (events.k8s.io/v1, deduplicated into series).
    events: RunEvents,
    options: Options,
    /// This replica leads: its scheduling loop runs.
    leading: AtomicBool,
    /// Woken after every watch event: the scheduling loop may have work.
    work: Notify,
    /// The newest version of every PersistentWorkspace, from its watch.
    workspace_store: Store<PersistentWorkspace>,
    /// The writer of `workspace_store`, taken by the watch when it starts.
    workspace_writer: Mutex<Option<reflector::store::Writer<PersistentWorkspace>>>,
    /// Workspace UID -> the Pod its binding was written for by this replica: Binds of its
    /// Runs need not wait for the watch to show the status (see `workspaces::persist_binding`).
    bindings: Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<Option<String>>>>>,
    /// The binding stage's slots: binds in flight at most [`MAX_BINDS_IN_FLIGHT`].
    binds: Arc<Semaphore>,
    /// Pending and Failed status writes in flight at most `--workers`.
    writes: Arc<Semaphore>,
    runs: WatchHealth,
    runtimes: WatchHealth,
    pods: Arc<WatchHealth>,
    leases: Arc<WatchHealth>,
    workspaces: WatchHealth,
    classes: WatchHealth,
    /// Told each time a watch completes a list: the leader waits on it for every cache to be
    /// synced instead of polling.
    listed: tokio::sync::watch::Sender<()>,
}

impl Scheduler {
    pub fn new(client: Client, metrics: SchedulerMetrics, options: Options) -> Arc<Self> {
        let (workspace_store, workspace_writer) = reflector::store();
        Arc::new(Self {
            events: RunEvents::new(
                client.clone(),
                crate::telemetry::events::SCHEDULER,
                std::env::var("POD_NAME").ok(),
            )
            .with_routine(options.routine_events)
            .with_fold_window(options.event_fold_window),
            client,
            cache: Arc::new(SharedCache::with_cache(
                plugins::registry(),
                SchedulerCache::new()
                    .with_starvation_threshold(
                        jiff::SignedDuration::try_from(options.starvation_threshold)
                            .unwrap_or(jiff::SignedDuration::MAX),
                    )
                    .with_claim_window(framework::claim_window(options.claim_delay)),
            )),
            metrics,
            writes: Arc::new(Semaphore::new(usize::from(options.workers.max(1)))),
            options,
            leading: AtomicBool::new(false),
            work: Notify::new(),
            workspace_store,
            workspace_writer: Mutex::new(Some(workspace_writer)),
            bindings: Default::default(),
            binds: Arc::new(Semaphore::new(MAX_BINDS_IN_FLIGHT)),
            runs: WatchHealth::default(),
            runtimes: WatchHealth::default(),
            pods: Default::default(),
            leases: Default::default(),
            workspaces: WatchHealth::default(),
            classes: WatchHealth::default(),
            listed: tokio::sync::watch::Sender::new(()),
        })
    }

    /// Ready once every watch has delivered its initial list.
    pub fn caches_synced(&self) -> bool {
        [
            &self.runs,
            &self.runtimes,
            &self.pods,
            &self.leases,
            &self.workspaces,
            &self.classes,
        ]
        .iter()
        .all(|w| w.synced.load(Ordering::Acquire))
    }

    /// Resolves once every watch has delivered its initial list. It does not wait on the Run
    /// store's readiness: kube-runtime wakes only one waiter of that (see
    /// [`crate::manager::cleanup::Cleanup::run`]), and the scheduling loop is it.
    pub async fn synced(&self) {
        // Subscribed before the first check, so a list completed in between is not missed.
        let mut listed = self.listed.subscribe();
        let _ = listed.wait_for(|()| self.caches_synced()).await;
    }

    /// The scheduler's cache, for the controllers that read its decisions (which Runs a lost
    /// Runtime Pod held, which workspace steps are due).
    pub fn cache(&self) -> Arc<SharedCache> {
        self.cache.clone()
    }

    /// How far the Runtime Pod and heartbeat Lease watches can be trusted.
    pub fn heartbeat_sight(&self) -> HeartbeatSight {
        HeartbeatSight {
            pods: self.pods.clone(),
            leases: self.leases.clone(),
        }
    }

    /// The newest version of every PersistentWorkspace, from the scheduler's watch.
    pub fn workspaces(&self) -> Store<PersistentWorkspace> {
        self.workspace_store.clone()
    }

    /// The scheduler's Event publisher (Events on Runs, flushed when the scheduler stops).
    pub fn events(&self) -> RunEvents {
        self.events.clone()
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        crate::kubeclient::scoped_api(&self.client, self.options.namespace.as_deref())
    }

    /// Publishes an Event on `run` in the background (see [`RunEvents`]).
    fn emit(&self, run: &Run, type_: EventType, reason: &str, action: &str, note: String) {
        self.events.emit(run, type_, reason, action, note);
    }

    /// Sets the gauges at `now`: Pending Runs by queue state and Runtime Pods by availability
    /// (RuntimePodAvailability's own Pod checks).
    fn refresh_gauges(&self, now: jiff::Timestamp) {
        let (pending, available, unavailable) = {
            let cache = self.cache.lock();
            let (mut available, mut unavailable) = (0i64, 0i64);
            for (namespace, runtime) in cache.index().scopes() {
                for pod in cache.snapshot(namespace, runtime, now).pods() {
                    match runtime_pod_availability::unavailable(&pod, now) {
                        None => available += 1,
                        Some(_) => unavailable += 1,
                    }
                }
            }
            (cache.queue().counts(), available, unavailable)
        };
        self.refresh_fair_share_gauges();
        for (state, n) in pending {
            self.metrics.pending_runs.with_label_values(&[state]).set(n);
        }
        self.metrics
            .runtime_pods
            .with_label_values(&[POD_AVAILABLE])
            .set(available);
        self.metrics
            .runtime_pods
            .with_label_values(&[POD_UNAVAILABLE])
            .set(unavailable);
    }

    /// The fair-share gauges: the share and Pending Runs of the `--fair-share-metrics-groups`
    /// groups with the most Pending Runs, over every Runtime; the rest have no series, so the
    /// label set stays bounded.
    fn refresh_fair_share_gauges(&self) {
        let top = self.options.fair_share_metrics_groups;
        if top == 0 {
            return;
        }
        let mut standings = {
            let cache = self.cache.lock();
            let scopes: Vec<ScopeRef> = cache
                .index()
                .scopes()
                .map(|(ns, rt)| ScopeRef::new(ns, rt))
                .collect();
            scopes
                .into_iter()
                .flat_map(|scope| {
                    cache
                        .standings(&scope)
                        .into_iter()
                        .map(move |s| (scope.clone(), s))
                })
                .collect::<Vec<_>>()
        };
        standings.sort_by_key(|(_, s)| std::cmp::Reverse(s.pending));
        standings.truncate(top);
        self.metrics.fair_share.reset();
        self.metrics.fair_share_pending_runs.reset();
        for (scope, s) in standings {
            let labels = [
                scope.namespace.as_str(),
                scope.runtime.as_str(),
                s.group.as_str(),
            ];
            self.metrics
                .fair_share
                .with_label_values(&labels)
                .set(s.share);
            self.metrics
                .fair_share_pending_runs
                .with_label_values(&labels)
                .set(i64::try_from(s.pending).unwrap_or(i64::MAX));
        }
    }

    /// Refreshes the gauges every [`GAUGE_PERIOD`], on standbys too (they watch the same).
    async fn gauges(self: Arc<Self>) {
        loop {
            if self.caches_synced() {
                self.refresh_gauges(jiff::Timestamp::now());
            }
            tokio::time::sleep(GAUGE_PERIOD).await;
        }
    }

    fn is_leading(&self) -> bool {
        self.leading.load(Ordering::Acquire)
    }

    /// Counts the Runs the cache moved back to the active queue since the last call, by
    /// source, and wakes the scheduling loop (from anywhere but the loop itself).
    fn woke(&self) {
        self.count_wakeups();
        if self.is_leading() {
            self.work.notify_one();
        }
    }

    /// Counts the Runs the cache moved back to the active queue since the last call.
    fn count_wakeups(&self) {
        let counts = {
            let mut cache = self.cache.lock();
            (cache.take_nomination_counts(), cache.take_wake_counts())
        };
        self.metrics.count_wakeups(counts.0, counts.1);
    }

    /// The one watch→cache loop: feeds every event of one watched kind into the cache (which
    /// queues, moves and forgets the Pending Runs it concerns) and wakes the scheduling loop.
    /// Keeps `health`: synced after the first complete list, broken from a watch error until
    /// the next complete list.
    async fn watch_into_index<K>(
        self: Arc<Self>,
        events: impl Stream<Item = watcher::Result<watcher::Event<K>>>,
        what: &'static str,
        health: fn(&Self) -> &WatchHealth,
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
            {
                let mut cache = self.cache.lock();
                match &event {
                    IndexEvent::Apply(obj) => cache.apply(obj, now),
                    IndexEvent::Delete(obj) => cache.delete(obj, now),
                    IndexEvent::Reset(objs) => cache.reset(objs, now),
                };
            }
            self.woke();
            if let IndexEvent::Reset(listed) = event {
                // A relist decoded, buffered and dropped every object of the kind at once:
                // give that back instead of keeping it as the allocator's free memory.
                drop(listed);
                crate::util::memory::give_back_freed();
                health(&self).listed(jiff::Timestamp::now());
                self.listed.send_replace(());
            }
        }
    }

    /// Watches Runs into the process's store of Runs (which the manager's controllers read too)
    /// and into the cache.
    async fn watch_runs(self: Arc<Self>, writer: reflector::store::Writer<Run>) {
        // Leniently: one Run that does not decode (an object of another implementation's
        // schema) is reported and skipped instead of failing every list of the watch.
        let events =
            crate::kubeclient::lenient_watch(self.api::<Lenient<Run>>(), Default::default())
                .reflect(writer);
        self.watch_into_index(events, "run", |s| &s.runs).await;
    }

    async fn watch_pods(self: Arc<Self>) {
        let config = watcher::Config::default().labels(LABEL_RUNTIME);
        // Each Pod becomes its record as it arrives: a relist buffers records, not Pods.
        let events = crate::kubeclient::kept_watch(self.api::<Pod>(), config, ObservedPod::of);
        self.watch_into_index(events, "runtime pod", |s| &s.pods)
            .await;
    }

    async fn watch_runtimes(self: Arc<Self>) {
        let events =
            crate::kubeclient::lenient_watch(self.api::<Lenient<Runtime>>(), Default::default());
        self.watch_into_index(events, "runtime", |s| &s.runtimes)
            .await;
    }

    async fn watch_leases(self: Arc<Self>) {
        let config = watcher::Config::default().labels(LABEL_RUNTIME_POD);
        let events = crate::kubeclient::kept_watch(self.api::<Lease>(), config, ObservedLease::of);
        self.watch_into_index(events, "heartbeat lease", |s| &s.leases)
            .await;
    }

    /// Watches the cluster's PriorityClasses (cluster-scoped, whatever `--namespace` says): they
    /// give Runs their priority.
    async fn watch_priority_classes(self: Arc<Self>) {
        let events = crate::kubeclient::slim_watch(
            Api::<PriorityClass>::all(self.client.clone()),
            watcher::Config::default(),
        );
        self.watch_into_index(events, "priorityclass", |s| &s.classes)
            .await;
    }

    /// Watches PersistentWorkspaces into the store the binding and the workspace lifecycle
    /// read and into the cache; forgets the bindings written for workspaces that are gone.
    async fn watch_workspaces(self: Arc<Self>) {
        let writer = self
            .workspace_writer
            .lock()
            .unwrap()
            .take()
            .expect("the PersistentWorkspace watch starts once");
        let store = writer.as_reader();
        let events = crate::kubeclient::lenient_watch(
            self.api::<Lenient<PersistentWorkspace>>(),
            Default::default(),
        )
        .reflect(writer)
        .inspect({
            let scheduler = self.clone();
            move |event| scheduler.forget_bindings(event, &store)
        });
        self.watch_into_index(events, "persistentworkspace", |s| &s.workspaces)
            .await;
    }

    /// The leader's work for as long as this task lives (it is aborted on shutdown): the
    /// scheduling loop and the heartbeat expiries, once every cache has listed.
    async fn lead(self: Arc<Self>, store: Store<Run>) {
        self.leading.store(true, Ordering::Release);
        let _ = store.wait_until_ready().await;
        // A cycle on a partial view could write a wrong Pending message (e.g. 0/0 Pods):
        // start only once Pods and heartbeat Leases are listed too.
        self.synced().await;
        // Neither ends on its own; whichever does ends the leader's work.
        tokio::select! {
            () = self.clone().schedule_loop(store) => {}
            () = self.clone().expire_heartbeats() => {}
        }
    }
}

/// How far the scheduler's Runtime Pod and heartbeat Lease watches can be trusted: a
/// heartbeat counts as stale only for as long as the scheduler could have seen it renewed.
#[derive(Debug, Clone)]
pub struct HeartbeatSight {
    pods: Arc<WatchHealth>,
    leases: Arc<WatchHealth>,
}

impl HeartbeatSight {
    /// Since when both watches have shown what there is: the later of their last complete
    /// lists, or `now` while either is broken (an API-server outage hides renewals).
    pub fn observed_since(&self, now: jiff::Timestamp) -> jiff::Timestamp {
        self.pods
            .observed_since(now)
            .max(self.leases.observed_since(now))
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

/// The current time as a status timestamp.
fn now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now())
}

/// Binds in flight at most: enough to keep the API server busy while the loop plans, few
/// enough that a slow or failing server holds back planning instead of piling assumptions.
const MAX_BINDS_IN_FLIGHT: usize = 64;

/// Starts the watches now and the queue whenever `leading` resolves; runs until `shutdown`.
/// The Run watch fills `runs`, the process's one store of Runs, which the caller may read too.
/// Returns an error when any of its tasks stops on its own (a panic included): a scheduler
/// with a dead watch or queue must not keep holding the leader Lease.
pub async fn run(
    scheduler: Arc<Scheduler>,
    runs: reflector::store::Writer<Run>,
    leading: impl Future<Output = ()> + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let (reader, writer) = (runs.as_reader(), runs);
    let mut runs = tokio::spawn(scheduler.clone().watch_runs(writer));
    let mut workspaces = tokio::spawn(scheduler.clone().watch_workspaces());
    let mut runtimes = tokio::spawn(scheduler.clone().watch_runtimes());
    let mut pods = tokio::spawn(scheduler.clone().watch_pods());
    let mut leases = tokio::spawn(scheduler.clone().watch_leases());
    let mut classes = tokio::spawn(scheduler.clone().watch_priority_classes());
    let mut gauges = tokio::spawn(scheduler.clone().gauges());
    let mut queue = {
        let scheduler = scheduler.clone();
        tokio::spawn(async move {
            leading.await;
            info!("leading: starting the scheduling queue");
            scheduler.lead(reader).await;
        })
    };
    let result = tokio::select! {
        _ = shutdown => Ok(()),
        _ = &mut runs => Err(Error::TaskEnded("Run watch")),
        _ = &mut runtimes => Err(Error::TaskEnded("Runtime watch")),
        _ = &mut pods => Err(Error::TaskEnded("Runtime Pod watch")),
        _ = &mut leases => Err(Error::TaskEnded("heartbeat Lease watch")),
        _ = &mut workspaces => Err(Error::TaskEnded("PersistentWorkspace watch")),
        _ = &mut classes => Err(Error::TaskEnded("PriorityClass watch")),
        _ = &mut gauges => Err(Error::TaskEnded("gauges")),
        _ = &mut queue => Err(Error::TaskEnded("scheduling queue")),
    };
    for task in [
        queue, runs, runtimes, pods, leases, workspaces, classes, gauges,
    ] {
        task.abort();
    }
    // Binds still under way (their own tasks, which the queue's abort does not stop) hold
    // their `Scheduled` when they land: let them land first, then write what is held (a Run
    // still not started), so neither is dropped with the process.
    let all_binds = MAX_BINDS_IN_FLIGHT as u32;
    let landed = scheduler.binds.acquire_many(all_binds);
    let _ = tokio::time::timeout(crate::telemetry::events::FLUSH_AT_EXIT, landed).await;
    scheduler
        .events
        .flush(crate::telemetry::events::FLUSH_AT_EXIT)
        .await;
    result
}

#[cfg(test)]
mod tests {
    use crate::testing::run;

    #[test]
    fn only_pending_unassigned_live_runs_want_scheduling() {
        assert!(run("a").build().waits_for_placement());
        assert!(!run("a").on("p").build().waits_for_placement());
        assert!(!run("a").deleting().build().waits_for_placement());
    }
}
