//! The agent loop: reflectors over the Runs assigned to this Pod and over the Pod itself,
//! the admission cache, the children, and every status write runtimed makes.
//!
//! Decisions come from the pure [`plan::plan`]; this module performs them: it claims a Run
//! with a status replace carrying the observed resourceVersion, spawns its task, writes the
//! terminal status through [`crate::api::status::set_terminal`] and releases the reservation.
//! No write is awaited inside the loop: claims and terminal writes run as tasks that report
//! back, so one Run's write never delays another Run's admission.
//! A Run that does not fit is never written to. This module never picks a Pod and never
//! un-assigns a Run.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt as _, StreamExt as _};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt as _};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::admission::AdmissionCache;
use super::contract::{execute_request, execution_id};
use super::executor::{self, ChildExit, ChildHandle, Exit, Terminal};
use super::heartbeat::LeaseRenewer;
use super::metrics::{self, RuntimedMetrics};
use super::plan::{self, Attach, Claim};
use super::remote::RuntimeServer;
use super::{Error, Identity, Result, Settings};
use crate::api::lenient::Lenient;
use crate::api::resources::parse_capacity_annotations;
use crate::api::status::{self, Outcome, reasons};
use crate::api::{Run, RunPhase, RunStatus, post_params};
use crate::events::{RunEvents, reasons as event_reasons};
use crate::runtime_server::proto::{FunctionRegistration, RegisterFunctionRequest};

/// Longest pause between two attempts of a status write or read across an API outage.
const MAX_WRITE_BACKOFF: Duration = Duration::from_secs(5);
/// How long to wait for killed children to be reaped before exiting anyway.
const REAP_TIMEOUT: Duration = Duration::from_secs(5);
/// Claim writes in flight at once.
const CLAIM_CONCURRENCY: usize = 16;
/// After a 409 or 404 on a claim the watch brings the newer version (or the deletion) at once;
/// this is only the fallback before the same observed version is tried again.
const CLAIM_RETRY_STALE: Duration = Duration::from_secs(5);
/// After any other failed claim (API error, transport), the same version is retried after this.
const CLAIM_RETRY_ERROR: Duration = Duration::from_secs(1);

/// Runs the agent: heartbeat, watches, admission and children, until `shutdown` resolves and
/// the children have finished or been killed. The Lease is deleted before returning.
pub async fn run(
    client: Client,
    settings: Settings,
    metrics: RuntimedMetrics,
    shutdown: impl Future<Output = &'static str> + Send,
) -> Result<()> {
    let me = settings.identity.clone();
    let heartbeat = LeaseRenewer::start(
        Api::<Lease>::namespaced(client.clone(), &me.namespace),
        me.clone(),
        settings.heartbeat,
    );
    let result = Agent::new(client, settings, metrics).run(shutdown).await;
    heartbeat.stop().await;
    result
}

/// A child and what the agent knows about it.
struct Child {
    name: String,
    handle: ChildHandle,
    /// The Run as last written by this agent (the claim), the first guess for the terminal
    /// write.
    last_written: Run,
    /// Killed because runtimed is shutting down: reported as RuntimePodTerminated.
    terminated_for_shutdown: bool,
    /// Killed because its Run is gone or no longer this Pod's: no status to write.
    abandoned: bool,
    /// Being stopped, and why: SIGTERM (or the server's Cancel) was sent and SIGKILL follows
    /// at `kill_at`; whatever the exit, the Run then goes back to Pending (preempted) or ends
    /// Cancelled or Timeout.
    stopping: Option<Stopping>,
    /// When `spec.timeout` runs out, counted from the Run's `startTime`.
    deadline: Option<Instant>,
    /// The runtime server's execution id, when the Run executes there.
    execution: Option<String>,
}

struct Agent {
    me: Identity,
    settings: Settings,
    runs_api: Api<Run>,
    pods_api: Api<Pod>,
    cache: AdmissionCache,
    children: HashMap<String, Child>,
    /// Runs this agent wrote a terminal status for, until the watch shows it.
    finished: HashSet<String>,
    exits_tx: mpsc::UnboundedSender<ChildExit>,
    exits_rx: mpsc::UnboundedReceiver<ChildExit>,
    /// UIDs whose terminal write has completed (or given up): their reservation is released.
    written_tx: mpsc::UnboundedSender<String>,
    written_rx: mpsc::UnboundedReceiver<String>,
    /// Terminal writes not completed yet.
    in_flight: usize,
    /// Claims whose write is in flight, by UID: each holds its reservation and counts as this
    /// agent's own (the watch may show it Running before the write returns).
    claiming: HashSet<String>,
    /// Claim write results, one per claim, in the order they return.
    claimed_tx: mpsc::UnboundedSender<ClaimWritten>,
    claimed_rx: mpsc::UnboundedReceiver<ClaimWritten>,
    /// Bounds the claim writes in flight at once.
    claim_slots: Arc<tokio::sync::Semaphore>,
    draining: bool,
    /// Runs whose claim write failed, by UID: the resourceVersion that failed and when to try
    /// that same version again. A newer version from the watch is tried at once; without this,
    /// a stale store would be claimed again and again in a tight loop.
    claim_failed: HashMap<String, (String, Instant)>,
    /// Claims whose write outcome is unknown (a transport error or timeout), by UID. The
    /// reservation stays held and the Run counts as this agent's own until a fresh read says
    /// whether the claim landed: never guessed, so a Run this agent did claim is never later
    /// failed as RuntimedRestarted.
    uncertain: HashMap<String, Claim>,
    resolved_tx: mpsc::UnboundedSender<(String, Option<Run>)>,
    resolved_rx: mpsc::UnboundedReceiver<(String, Option<Run>)>,
    /// Publishes Admitted, Started, Waiting, Completed and Failed on the Runs of this Pod.
    events: RunEvents,
    /// The Waiting note last published per Run name, while the Run waits: a Run is told once
    /// per distinct reason, not at every reconcile.
    waiting_noted: HashMap<String, String>,
    /// When each Scheduled Run of this Pod was first seen, by UID, until it is claimed or
    /// leaves Scheduled (the admission wait).
    scheduled_seen: HashMap<String, Instant>,
    metrics: RuntimedMetrics,
    /// The Pod's runtime server, when Runs execute there.
    server: Option<RuntimeServer>,
    /// The executions the runtime server held when this agent started (`None` until it
    /// answered `List`; no Run is planned before, so none is failed as gone while it still
    /// runs there). An id leaves once its Run is attached or ended.
    listed: Option<HashSet<String>>,
    listed_rx: Option<oneshot::Receiver<HashSet<String>>>,
    /// The runtime server's last `Health` answer (true without a server).
    server_healthy: Arc<std::sync::atomic::AtomicBool>,
    /// Executions to `Forget` once their Run's terminal write has landed, by Run UID.
    forget: HashMap<String, String>,
    /// Function registrations the runtime server reported ready, by Run UID.
    ready_tx: mpsc::UnboundedSender<(String, FunctionRegistration)>,
    ready_rx: mpsc::UnboundedReceiver<(String, FunctionRegistration)>,
    /// The registration of each Ready function Run of this Pod, by Run name (what `invoke`
    /// calls).
    registrations: Arc<std::sync::Mutex<HashMap<String, FunctionRegistration>>>,
}

/// Why a child is being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    Preempted,
    Cancelled,
    TimedOut,
}

#[derive(Debug, Clone, Copy)]
struct Stopping {
    why: StopReason,
    kill_at: Instant,
}

/// A claim write that has returned.
struct ClaimWritten {
    claim: Claim,
    result: kube::Result<Run>,
    /// When it returned: the start of the dispatch latency.
    at: Instant,
}

impl Agent {
    fn new(client: Client, settings: Settings, metrics: RuntimedMetrics) -> Self {
        let me = settings.identity.clone();
        let (exits_tx, exits_rx) = mpsc::unbounded_channel();
        let (written_tx, written_rx) = mpsc::unbounded_channel();
        let (resolved_tx, resolved_rx) = mpsc::unbounded_channel();
        let (claimed_tx, claimed_rx) = mpsc::unbounded_channel();
        let (ready_tx, ready_rx) = mpsc::unbounded_channel();
        Agent {
            ready_tx,
            ready_rx,
            registrations: settings.registrations.clone(),
            metrics,
            scheduled_seen: HashMap::new(),
            claiming: HashSet::new(),
            claimed_tx,
            claimed_rx,
            claim_slots: Arc::new(tokio::sync::Semaphore::new(CLAIM_CONCURRENCY)),
            events: RunEvents::new(
                client.clone(),
                crate::events::RUNTIMED,
                Some(me.pod_name.clone()),
            ),
            waiting_noted: HashMap::new(),
            uncertain: HashMap::new(),
            resolved_tx,
            resolved_rx,
            runs_api: Api::namespaced(client.clone(), &me.namespace),
            pods_api: Api::namespaced(client, &me.namespace),
            me,
            settings,
            cache: AdmissionCache::new(),
            children: HashMap::new(),
            claim_failed: HashMap::new(),
            finished: HashSet::new(),
            exits_tx,
            exits_rx,
            written_tx,
            written_rx,
            in_flight: 0,
            draining: false,
            server: None,
            listed: None,
            listed_rx: None,
            server_healthy: Arc::new(std::sync::atomic::AtomicBool::new(true)),
            forget: HashMap::new(),
        }
        .with_server()
    }

    /// With a runtime server: its Health feeds readiness, and its executions are listed
    /// (retried until it answers) before anything is planned.
    fn with_server(mut self) -> Self {
        let Some(server) = self.settings.runtime_server.clone() else {
            self.listed = Some(HashSet::new());
            return self;
        };
        self.server_healthy
            .store(false, std::sync::atomic::Ordering::Relaxed);
        server.watch_health(self.server_healthy.clone());
        let (tx, rx) = oneshot::channel();
        let lister = server.clone();
        tokio::spawn(async move {
            let mut pause = Duration::from_millis(100);
            loop {
                match lister.list().await {
                    Ok(ids) => {
                        tracing::info!(
                            "runtime server {} holds {} execution(s)",
                            lister.address(),
                            ids.len()
                        );
                        let _ = tx.send(ids);
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(
                            "listing the executions of runtime server {}: {}; retrying (no Run is admitted until it answers)",
                            lister.address(),
                            e.message()
                        );
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_secs(5));
                    }
                }
            }
        });
        self.listed_rx = Some(rx);
        self.server = Some(server);
        self
    }

    /// Picks the Run watch: `status.assignedPod=<pod>` on the server, or — when the API server
    /// refuses that field selector — the whole namespace, filtered here by [`plan`].
    async fn runs_watch_config(&self) -> Result<watcher::Config> {
        let selector = format!("status.assignedPod={}", self.me.pod_name);
        let probe = ListParams::default().fields(&selector).limit(1);
        // Leniently: a Run that does not decode must not fail the probe (and runtimed's start).
        let lenient: Api<Lenient<Run>> =
            Api::namespaced(self.runs_api.clone().into_client(), &self.me.namespace);
        match lenient.list(&probe).await {
            Ok(_) => {
                tracing::info!("watching Runs with the field selector {selector}");
                Ok(watcher::Config::default().fields(&selector))
            }
            Err(kube::Error::Api(s)) if s.code == 400 => {
                tracing::warn!(
                    "the API server refused the field selector {selector} ({}); watching every Run in namespace {} and filtering by status.assignedPod here",
                    s.message,
                    self.me.namespace
                );
                Ok(watcher::Config::default())
            }
            Err(source) => Err(Error::Kube {
                doing: format!("listing the Runs of namespace {}", self.me.namespace),
                source,
            }),
        }
    }

    async fn run(mut self, shutdown: impl Future<Output = &'static str> + Send) -> Result<()> {
        let runs_config = self.runs_watch_config().await?;
        let (runs, runs_writer) = reflector::store::<Run>();
        // Leniently: a Run on this Pod that does not decode is reported and skipped, it never
        // stops the watch of the others.
        let lenient_runs: Api<Lenient<Run>> =
            Api::namespaced(self.runs_api.clone().into_client(), &self.me.namespace);
        let run_events =
            crate::kubeclient::lenient_watch(lenient_runs, runs_config).reflect(runs_writer);
        let (pods, pods_writer) = reflector::store::<Pod>();
        let pod_events = watcher(
            self.pods_api.clone(),
            watcher::Config::default().fields(&format!("metadata.name={}", self.me.pod_name)),
        )
        .backoff(crate::kubeclient::watch_backoff())
        .reflect(pods_writer);
        let mut run_events = pin!(run_events);
        let mut pod_events = pin!(pod_events);
        let mut shutdown = pin!(shutdown);
        let mut runs_ready = false;
        let mut pod_ready = false;
        let mut kill_at: Option<Instant> = None;
        let mut reap_deadline: Option<Instant> = None;

        loop {
            let mut dirty = false;
            let claim_retry = self.next_claim_retry();
            let stop_kill = self
                .children
                .values()
                .filter(|c| !c.handle.kill_requested())
                .filter_map(|c| c.stopping.map(|s| s.kill_at))
                .min();
            let timeout = self
                .children
                .values()
                .filter(|c| c.stopping.is_none())
                .filter_map(|c| c.deadline)
                .min();
            tokio::select! {
                event = run_events.next() => {
                    // Take every event that is already there before planning once.
                    let mut event = Some(event);
                    while let Some(current) = event.take() {
                        match current {
                            Some(Ok(watcher::Event::InitDone)) => {
                                if !runs_ready {
                                    tracing::info!("initial list of Runs assigned to Pod {} done", self.me.pod_name);
                                }
                                runs_ready = true;
                                dirty = true;
                            }
                            Some(Ok(watcher::Event::Init | watcher::Event::InitApply(_))) => {}
                            Some(Ok(_)) => dirty = true,
                            Some(Err(e)) => tracing::warn!("watching Runs: {e}; retrying"),
                            None => return Err(Error::WatchEnded("Runs")),
                        }
                        event = run_events.next().now_or_never();
                    }
                }
                event = pod_events.next() => {
                    match event {
                        Some(Ok(watcher::Event::Init | watcher::Event::InitApply(_))) => {}
                        Some(Ok(_)) => {
                            pod_ready = true;
                            self.refresh_capacity(&pods);
                            dirty = true;
                        }
                        Some(Err(e)) => tracing::warn!("watching Pod {}: {e}; retrying", self.me.pod_name),
                        None => return Err(Error::WatchEnded("the Runtime Pod")),
                    }
                }
                Some(exit) = self.exits_rx.recv() => {
                    self.on_exit(exit, &runs);
                    dirty = true;
                }
                Some((uid, registration)) = self.ready_rx.recv() => {
                    self.on_function_ready(uid, registration);
                }
                Ok(ids) = async { self.listed_rx.as_mut().expect("guarded").await }, if self.listed_rx.is_some() => {
                    self.listed_rx = None;
                    self.listed = Some(ids);
                    dirty = true;
                }
                Some(first) = self.claimed_rx.recv() => {
                    // Take every result that is already there before planning once.
                    let mut next = Some(first);
                    while let Some(written) = next.take() {
                        self.claiming.remove(&written.claim.run.uid().unwrap_or_default());
                        dirty |= !self.start(written);
                        next = self.claimed_rx.try_recv().ok();
                    }
                }
                Some((uid, landed)) = self.resolved_rx.recv() => {
                    self.on_resolved(uid, landed);
                    dirty = true;
                }
                Some(uid) = self.written_rx.recv() => {
                    self.in_flight -= 1;
                    self.cache.release(&uid);
                    if let (Some(id), Some(server)) = (self.forget.remove(&uid), &self.server) {
                        let server = server.clone();
                        tokio::spawn(async move { server.forget(&id).await });
                    }
                    dirty = true;
                }
                signal = &mut shutdown, if !self.draining => {
                    self.draining = true;
                    // Executions on the runtime server are the server's: they go on without
                    // runtimed (a restarted one re-attaches; a Pod that goes away takes them
                    // along, and the scheduler heals their Runs).
                    let remote: Vec<String> = self
                        .children
                        .iter()
                        .filter(|(_, c)| c.handle.is_remote())
                        .map(|(uid, _)| uid.clone())
                        .collect();
                    if !remote.is_empty() {
                        tracing::info!(
                            "{signal} received: leaving {} execution(s) to the runtime server",
                            remote.len()
                        );
                    }
                    for uid in remote {
                        self.children.remove(&uid);
                    }
                    let grace = self.settings.shutdown_grace;
                    tracing::warn!(
                        "{signal} received: claiming no more Runs; {} running Run(s) get {grace:?} to finish",
                        self.children.len()
                    );
                    kill_at = Some(Instant::now() + grace);
                }
                _ = sleep_until(kill_at) => {
                    kill_at = None;
                    reap_deadline = Some(Instant::now() + REAP_TIMEOUT);
                    for (uid, child) in &mut self.children {
                        tracing::warn!(run = %child.name, "shutdown grace period over: killing the process of Run {} ({uid})", child.name);
                        child.terminated_for_shutdown = true;
                        child.handle.kill();
                    }
                }
                _ = sleep_until(claim_retry) => {
                    dirty = true;
                }
                _ = sleep_until(stop_kill) => {
                    let now = Instant::now();
                    for (uid, child) in &mut self.children {
                        if child.stopping.is_some_and(|s| s.kill_at <= now) && !child.handle.kill_requested() {
                            tracing::warn!(run = %child.name, "stop grace period over: killing Run {} ({uid})", child.name);
                            child.handle.kill();
                        }
                    }
                }
                _ = sleep_until(timeout) => {
                    let now = Instant::now();
                    let due: Vec<String> = self
                        .children
                        .iter()
                        .filter(|(_, c)| c.stopping.is_none() && c.deadline.is_some_and(|d| d <= now))
                        .map(|(uid, _)| uid.clone())
                        .collect();
                    for uid in due {
                        self.stop(&uid, StopReason::TimedOut);
                    }
                }
                _ = sleep_until(reap_deadline) => {
                    tracing::error!(
                        "{} killed process(es) and {} status write(s) did not finish within {REAP_TIMEOUT:?}; exiting anyway",
                        self.children.len(),
                        self.in_flight
                    );
                    return Ok(());
                }
            }
            if self.draining
                && self.children.is_empty()
                && self.in_flight == 0
                && self.uncertain.is_empty()
                && self.claiming.is_empty()
            {
                tracing::info!("no Run is running any more; runtimed exits");
                return Ok(());
            }
            let server_healthy = self
                .server_healthy
                .load(std::sync::atomic::Ordering::Relaxed);
            self.settings.ready.store(
                runs_ready && pod_ready && !self.draining && server_healthy,
                std::sync::atomic::Ordering::Relaxed,
            );
            if dirty && runs_ready && pod_ready && self.listed.is_some() {
                self.reconcile(&runs);
            }
            if dirty {
                // Every reservation, release and capacity change comes with `dirty`.
                self.metrics.set_holdings(
                    self.cache.len(),
                    self.cache.used(),
                    self.cache.capacity(),
                );
            }
        }
    }

    /// Re-reads the Pod's capacity annotations into the cache.
    fn refresh_capacity(&mut self, pods: &Store<Pod>) {
        let pod = pods
            .state()
            .into_iter()
            .find(|p| p.name_any() == self.me.pod_name);
        let capacity = match pod {
            None => {
                tracing::warn!(
                    "Pod {}/{} does not exist; admitting no Run until it does",
                    self.me.namespace,
                    self.me.pod_name
                );
                None
            }
            Some(pod) if pod.uid().as_deref() != Some(self.me.pod_uid.as_str()) => {
                tracing::warn!(
                    "Pod {}/{} has UID {}, not this agent's {}; admitting no Run",
                    self.me.namespace,
                    self.me.pod_name,
                    pod.uid().unwrap_or_default(),
                    self.me.pod_uid
                );
                None
            }
            Some(pod) => match parse_capacity_annotations(pod.annotations()) {
                Ok(capacity) => Some(capacity),
                Err(e) => {
                    tracing::warn!(
                        "Pod {}/{} has an invalid capacity ({e}); admitting no Run until it is fixed",
                        self.me.namespace,
                        self.me.pod_name
                    );
                    None
                }
            },
        };
        if self.cache.set_capacity(capacity) {
            match self.cache.capacity() {
                Some(c) => tracing::info!("capacity of Pod {} is {c}", self.me.pod_name),
                None => tracing::info!("capacity of Pod {} is unknown", self.me.pod_name),
            }
        }
    }

    /// When a Run whose claim failed may be tried again, if any.
    fn next_claim_retry(&self) -> Option<Instant> {
        self.claim_failed.values().map(|(_, at)| *at).min()
    }

    /// Plans once and acts on it without waiting for any write: claims go out in the
    /// background and their results come back through `claimed_rx`, so a Run that arrives
    /// meanwhile is planned at once instead of after the whole batch. A claim that does not
    /// land frees its reservation and plans again from there.
    fn reconcile(&mut self, runs: &Store<Run>) {
        let now = Instant::now();
        let state = claimable(&mut self.claim_failed, runs.state(), now);
        self.forget_observed_finishes(&state);
        self.note_scheduled(&state, now);
        let owned: HashSet<String> = self
            .children
            .keys()
            .chain(self.uncertain.keys())
            .chain(&self.claiming)
            .cloned()
            .collect();
        // Running Runs of this Pod whose execution (of their current attempt) the runtime
        // server held at start.
        let listed = self.listed.as_ref().expect("planned only once listed");
        // A function Run is always attachable with a server: registering is idempotent per
        // Run UID and attempt, so registering again resumes the registration it has.
        let functions = self.server.is_some();
        let attachable: HashSet<String> = state
            .iter()
            .filter(|r| r.phase().is_admitted())
            .filter_map(|r| {
                let uid = r.uid()?;
                let function = functions && r.spec.mode.function.is_some();
                (function || listed.contains(&execution_id(&uid, attempt_of(r)))).then_some(uid)
            })
            .collect();
        let plan = plan::plan(
            &state,
            &self.me,
            &owned,
            &self.finished,
            &attachable,
            &mut self.cache,
            plan::Admit {
                claiming: !self.draining,
                functions: self.server.is_some(),
            },
        );
        for attach in plan.attaches {
            self.attach(attach);
        }
        for (name, why) in &plan.waiting {
            tracing::debug!(run = %name, "Run {name} stays Scheduled: {why}");
        }
        self.note_waiting(&state, &plan.waiting);
        for uid in &plan.kills {
            if let Some(child) = self.children.get_mut(uid)
                && !child.handle.kill_requested()
            {
                tracing::warn!(run = %child.name, "Run {} was deleted or is no longer assigned to this Pod: killing its process", child.name);
                child.abandoned = true;
                child.handle.kill();
            }
        }
        for uid in &plan.stops {
            self.stop(uid, StopReason::Preempted);
        }
        for uid in &plan.cancels {
            self.stop(uid, StopReason::Cancelled);
        }
        for failure in plan.failures {
            if failure.run.phase() == RunPhase::Scheduled {
                self.metrics
                    .admissions
                    .with_label_values(&[metrics::REJECTED])
                    .inc();
            }
            let name = failure.run.name_any();
            let uid = failure.run.uid().unwrap_or_default();
            tracing::warn!(run = %name, "failing Run {name}: {}", failure.message);
            let terminal = Terminal {
                outcome: failure.outcome,
                reason: failure.reason,
                message: failure.message,
                exit_code: None,
            };
            self.finish(name, uid, (*failure.run).clone(), terminal);
        }
        // Each claim already holds its reservation; its write goes out in creation order
        // as a slot frees up, concurrently with the others and with this loop.
        for claim in plan.claims {
            self.claiming.insert(claim.run.uid().unwrap_or_default());
            let (api, pod, slots, done) = (
                self.runs_api.clone(),
                self.me.pod_name.clone(),
                self.claim_slots.clone(),
                self.claimed_tx.clone(),
            );
            tokio::spawn(async move {
                // Never closed: the permit always comes.
                let _slot = slots.acquire_owned().await;
                let result = write_claim(&api, &pod, &claim).await;
                let at = Instant::now();
                let _ = done.send(ClaimWritten { claim, result, at });
            });
        }
    }

    /// Stops the child of `uid` for `why` (SIGTERM, or the runtime server's Cancel; SIGKILL
    /// after the grace period), unless it is being stopped already.
    fn stop(&mut self, uid: &str, why: StopReason) {
        let grace = self.settings.shutdown_grace;
        let Some(child) = self.children.get_mut(uid) else {
            return;
        };
        if child.stopping.is_some() || child.handle.kill_requested() {
            return;
        }
        let what = match why {
            StopReason::Preempted => "is preempted",
            StopReason::Cancelled => "is cancelled",
            StopReason::TimedOut => "ran out of its spec.timeout",
        };
        tracing::warn!(run = %child.name, "Run {} {what}: stopping it (SIGTERM or Cancel, SIGKILL after {grace:?})", child.name);
        child.stopping = Some(Stopping {
            why,
            kill_at: Instant::now() + grace,
        });
        child.handle.terminate();
    }

    /// Publishes `Waiting` for a Run that newly waits, or waits for another reason.
    fn note_waiting(&mut self, state: &[Arc<Run>], waiting: &[(String, String)]) {
        self.waiting_noted
            .retain(|name, _| waiting.iter().any(|(n, _)| n == name));
        for (name, why) in waiting {
            if self.waiting_noted.get(name) == Some(why) {
                continue;
            }
            let Some(run) = state.iter().find(|r| &r.name_any() == name) else {
                continue;
            };
            self.waiting_noted.insert(name.clone(), why.clone());
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
    fn note_scheduled(&mut self, state: &[Arc<Run>], now: Instant) {
        let scheduled: HashSet<String> = state
            .iter()
            .filter(|r| r.phase() == RunPhase::Scheduled && plan::assigned_to(r, &self.me))
            .filter_map(|r| r.uid())
            .collect();
        self.scheduled_seen
            .retain(|uid, _| scheduled.contains(uid) || self.claiming.contains(uid));
        for uid in scheduled {
            self.scheduled_seen.entry(uid).or_insert(now);
        }
    }

    /// Drops finished UIDs once the watch shows them terminal or gone.
    fn forget_observed_finishes(&mut self, state: &[Arc<Run>]) {
        if self.finished.is_empty() {
            return;
        }
        // A Run the watch shows terminal, or back in Pending after a preemption (it may be
        // placed here again), is done with.
        let still_active: HashSet<String> = state
            .iter()
            .filter(|r| !r.phase().is_terminal() && r.phase() != RunPhase::Pending)
            .filter_map(|r| r.uid())
            .collect();
        self.finished.retain(|uid| still_active.contains(uid));
    }

    /// Starts the task of a Run whose claim write has returned. Returns whether the
    /// reservation is still held (false: it was or will be released, so others may fit).
    fn start(&mut self, written: ClaimWritten) -> bool {
        let ClaimWritten { claim, result, at } = written;
        let name = claim.run.name_any();
        let uid = claim.run.uid().unwrap_or_default();
        // (admission result, when the same version may be tried again, whether it will be:
        // a deleted Run is not)
        let (admission, retry_in, retried) = match result {
            Ok(written) => return self.spawn_claimed(claim, written, at),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                tracing::info!(run = %name, "Run {name} changed since it was observed; releasing and re-reading it from the watch");
                (metrics::CONFLICT, CLAIM_RETRY_STALE, true)
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                tracing::info!(run = %name, "Run {name} was deleted before it could be claimed");
                (metrics::CONFLICT, CLAIM_RETRY_STALE, false)
            }
            Err(kube::Error::Api(s)) => {
                tracing::warn!(run = %name, "cannot claim Run {name}: {}; releasing it and retrying in {CLAIM_RETRY_ERROR:?}", s.message);
                (metrics::ERROR, CLAIM_RETRY_ERROR, true)
            }
            Err(e) => {
                self.metrics
                    .admissions
                    .with_label_values(&[metrics::ERROR])
                    .inc();
                // The write may have landed: find out by reading, holding the reservation.
                tracing::warn!(run = %name, "the claim of Run {name} has an unknown outcome ({e}); reading it back");
                let (api, me, done) = (
                    self.runs_api.clone(),
                    self.me.clone(),
                    self.resolved_tx.clone(),
                );
                tokio::spawn(async move {
                    let landed = read_back_claim(&api, &me, &name, &uid).await;
                    let _ = done.send((uid, landed));
                });
                let key = claim.run.uid().unwrap_or_default();
                self.uncertain.insert(key, claim);
                return true;
            }
        };
        self.metrics
            .admissions
            .with_label_values(&[admission])
            .inc();
        if retried {
            self.count_claim_retry();
        }
        self.claim_not_landed(&claim, retry_in);
        false
    }

    fn count_claim_retry(&self) {
        self.metrics
            .status_write_retries
            .with_label_values(&[metrics::WRITE_CLAIM])
            .inc();
    }

    /// Releases a claim that did not land; the same version is tried again after `retry_in`.
    fn claim_not_landed(&mut self, claim: &Claim, retry_in: Duration) {
        let uid = claim.run.uid().unwrap_or_default();
        self.cache.release(&uid);
        let rv = claim.run.resource_version().unwrap_or_default();
        self.claim_failed
            .insert(uid, (rv, Instant::now() + retry_in));
    }

    /// A claim of unknown outcome has been read back: it landed (the Run as read), or not.
    fn on_resolved(&mut self, uid: String, landed: Option<Run>) {
        let Some(claim) = self.uncertain.remove(&uid) else {
            return;
        };
        match landed {
            Some(written) => {
                self.spawn_claimed(claim, written, Instant::now());
            }
            None => {
                tracing::info!(run = %claim.run.name_any(), "the claim of Run {} did not land; retrying it", claim.run.name_any());
                self.count_claim_retry();
                self.claim_not_landed(&claim, CLAIM_RETRY_ERROR);
            }
        }
    }

    /// Spawns the task of a Run this agent has claimed (`written` is the claimed Run, its
    /// claim known to have landed `at`). Returns whether the reservation is still held.
    fn spawn_claimed(&mut self, claim: Claim, written: Run, at: Instant) -> bool {
        let Claim { run, request, task } = claim;
        let name = run.name_any();
        let uid = run.uid().unwrap_or_default();
        let task = match run.workspace_name() {
            None => Ok(task),
            Some(workspace) => {
                let dir = executor::workspace_dir(&self.settings.workspace_root, workspace);
                std::fs::create_dir_all(&dir)
                    .map(|()| task.in_workspace(&dir))
                    .map_err(|e| {
                        format!(
                            "cannot create the directory {} of PersistentWorkspace {workspace}: {e} (is the Pod's workspace volume mounted at --workspace-root?)",
                            dir.display()
                        )
                    })
            }
        };
        let task = match task {
            Ok(task) => task,
            Err(message) => {
                tracing::warn!(run = %name, "Run {name} failed to start: {message}");
                let terminal = Terminal {
                    outcome: Outcome::Failed,
                    reason: reasons::START_FAILED,
                    message,
                    exit_code: None,
                };
                self.finish(name, uid, written, terminal);
                return false;
            }
        };
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
        let pod = &self.me.pod_name;
        self.events.emit(
            &written,
            EventType::Normal,
            event_reasons::ADMITTED,
            "Admission",
            format!("admitted on Runtime Pod {pod} with {request}"),
        );
        let execution = self
            .server
            .as_ref()
            .map(|_| execution_id(&uid, attempt_of(&written)));
        let spawned = match (&self.server, &execution) {
            (Some(server), Some(_)) if task.function.is_some() => {
                let function = task.function.clone().expect("checked");
                Ok(server.serve_function(
                    register_request(&uid, attempt_of(&written), &task),
                    function.idle_timeout,
                    uid.clone(),
                    self.ready_tx.clone(),
                    self.exits_tx.clone(),
                ))
            }
            (Some(server), Some(id)) => Ok(server.follow(
                Some(execute_request(id, &task, 0)),
                id.clone(),
                uid.clone(),
                name.clone(),
                self.exits_tx.clone(),
            )),
            _ => executor::spawn(&task, &name, &uid, self.exits_tx.clone()),
        };
        match spawned {
            Ok(handle) => {
                self.metrics.dispatch.observe(at.elapsed().as_secs_f64());
                self.events.emit(
                    &written,
                    EventType::Normal,
                    event_reasons::STARTED,
                    "Start",
                    format!("started the task on Runtime Pod {pod}"),
                );
                let deadline = deadline_of(&written);
                self.children.insert(
                    uid,
                    Child {
                        name,
                        handle,
                        last_written: written,
                        terminated_for_shutdown: false,
                        abandoned: false,
                        stopping: None,
                        deadline,
                        execution,
                    },
                );
                true
            }
            Err(e) => {
                tracing::warn!(run = %name, "Run {name} failed to start: {e}");
                let terminal = Terminal {
                    outcome: Outcome::Failed,
                    reason: reasons::START_FAILED,
                    message: e.to_string(),
                    exit_code: None,
                };
                self.finish(name, uid, written, terminal);
                false
            }
        }
    }

    /// A function Run's registration is ready: the Run becomes Ready (still active, holding
    /// its request) in the background, and `invoke` may reach it.
    fn on_function_ready(&mut self, uid: String, registration: FunctionRegistration) {
        let Some(child) = self.children.get(&uid) else {
            return;
        };
        let name = child.name.clone();
        tracing::info!(run = %name, "function of Run {name} registered ({}); Ready", registration.registration_id);
        self.registrations
            .lock()
            .expect("registrations")
            .insert(name.clone(), registration);
        let (api, me, events) = (self.runs_api.clone(), self.me.clone(), self.events.clone());
        let first = child.last_written.clone();
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

    /// Follows again the execution of a Run an earlier runtimed started on the runtime
    /// server (its request is already held again).
    fn attach(&mut self, attach: Attach) {
        let Some(server) = &self.server else {
            return;
        };
        let Attach { run, request } = attach;
        let (name, uid) = (run.name_any(), run.uid().unwrap_or_default());
        let id = execution_id(&uid, attempt_of(&run));
        if let Some(listed) = self.listed.as_mut() {
            listed.remove(&id);
        }
        let function = run
            .spec
            .mode
            .function
            .as_ref()
            .map(|f| executor::prepare_function(f, &run.spec.env));
        let handle = match function {
            None => {
                tracing::info!(run = %name, "re-attached to execution {id} of Run {name} on the runtime server, holding {request}");
                server.follow(
                    None,
                    id.clone(),
                    uid.clone(),
                    name.clone(),
                    self.exits_tx.clone(),
                )
            }
            Some(Ok(task)) => {
                tracing::info!(run = %name, "registering function Run {name} again on the runtime server (same attempt: it resumes), holding {request}");
                let idle = task.function.as_ref().and_then(|f| f.idle_timeout);
                server.serve_function(
                    register_request(&uid, attempt_of(&run), &task),
                    idle,
                    uid.clone(),
                    self.ready_tx.clone(),
                    self.exits_tx.clone(),
                )
            }
            // It was valid when it was claimed, and the spec is immutable.
            Some(Err(e)) => {
                tracing::warn!(run = %name, "function Run {name} cannot be registered again: {e}");
                self.cache.release(&uid);
                return;
            }
        };
        self.children.insert(
            uid,
            Child {
                name,
                handle,
                last_written: (*run).clone(),
                terminated_for_shutdown: false,
                abandoned: false,
                stopping: None,
                deadline: deadline_of(&run),
                execution: Some(id),
            },
        );
    }

    /// Writes `terminal` in the background; the reservation of `uid` is released once the
    /// write has landed (or been given up), never before.
    fn finish(&mut self, name: String, uid: String, first: Run, terminal: Terminal) {
        self.finish_with_outputs(name, uid, first, terminal, BTreeMap::new());
    }

    /// [`Self::finish`] that also records `outputs` in `status.outputs`.
    fn finish_with_outputs(
        &mut self,
        name: String,
        uid: String,
        first: Run,
        terminal: Terminal,
        outputs: BTreeMap<String, String>,
    ) {
        let (type_, reason) = match terminal.outcome {
            Outcome::Succeeded => (EventType::Normal, event_reasons::COMPLETED),
            Outcome::Failed => (EventType::Warning, event_reasons::FAILED),
            Outcome::Cancelled => (EventType::Normal, event_reasons::CANCELLED),
            Outcome::Timeout => (EventType::Warning, event_reasons::TIMED_OUT),
        };
        let note = match terminal.exit_code {
            Some(code) => format!("{} (exit code {code})", terminal.message),
            None => format!("{}: {}", terminal.reason, terminal.message),
        };
        let apply = move |status: &mut RunStatus, now: &Time| {
            if !status.phase.is_some_and(RunPhase::is_terminal) {
                status.outputs.extend(outputs.clone());
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
        self.write_last(name, uid, first, apply, (type_, reason, "End", note));
    }

    /// Sends a preempted Run back to Pending for its next attempt ([`status::set_requeued`])
    /// in the background; its reservation is released once the write has landed (or been
    /// given up), never before, so the scheduler never sees its room free while it runs.
    fn requeue(&mut self, name: String, uid: String, first: Run) {
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
        self.write_last(name, uid, first, apply, event);
    }

    /// This agent's last write of a Run (its end, or its requeue after a preemption), in the
    /// background through [`write_status`]: the Run counts as finished here from now on, its
    /// reservation is released once the write has landed (or been given up), and `event`
    /// (type, reason, action, note) is published when this call wrote it.
    fn write_last(
        &mut self,
        name: String,
        uid: String,
        first: Run,
        apply: impl Fn(&mut RunStatus, &Time) -> bool + Send + 'static,
        event: (EventType, &'static str, &'static str, String),
    ) {
        self.finished.insert(uid.clone());
        self.in_flight += 1;
        let (api, me, done, events) = (
            self.runs_api.clone(),
            self.me.clone(),
            self.written_tx.clone(),
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
            let _ = done.send(uid);
        });
    }

    /// A child ended: write its terminal status (unless its Run is gone), then release.
    fn on_exit(&mut self, exit: ChildExit, runs: &Store<Run>) {
        let Some(child) = self.children.remove(&exit.uid) else {
            return;
        };
        self.registrations
            .lock()
            .expect("registrations")
            .remove(&child.name);
        if let Some(id) = &child.execution {
            if let Some(listed) = self.listed.as_mut() {
                listed.remove(id);
            }
            // Forgotten once the Run's status records it (after the write below), or at
            // once when no write follows.
            self.forget.insert(exit.uid.clone(), id.clone());
        }
        let stopped = child.stopping.map(|s| s.why).filter(|_| !child.abandoned);
        if stopped == Some(StopReason::Preempted) {
            tracing::info!(run = %child.name, "Run {} stopped for a preemption; back to Pending", child.name);
            let observed = runs
                .state()
                .into_iter()
                .find(|r| r.uid().as_deref() == Some(exit.uid.as_str()) && r.phase().is_admitted())
                .map(|r| (*r).clone());
            let first = observed.unwrap_or(child.last_written);
            self.requeue(child.name, exit.uid, first);
            return;
        }
        let mut outputs = BTreeMap::new();
        let terminal = if let Some(why) = stopped {
            let (outcome, reason, message) = match why {
                StopReason::Cancelled => (
                    Outcome::Cancelled,
                    reasons::CANCELLED,
                    "cancelled (spec.cancelRequested); runtimed stopped the task".to_string(),
                ),
                _ => (
                    Outcome::Timeout,
                    reasons::TIMEOUT,
                    format!(
                        "ran longer than spec.timeout {}; runtimed stopped the task",
                        child
                            .last_written
                            .spec
                            .timeout
                            .as_deref()
                            .unwrap_or_default()
                    ),
                ),
            };
            Some(Terminal {
                outcome,
                reason,
                message,
                exit_code: None,
            })
        } else if child.terminated_for_shutdown && exit.killed {
            Some(Terminal {
                outcome: Outcome::Failed,
                reason: reasons::RUNTIME_POD_TERMINATED,
                message: format!(
                    "runtimed on Pod {} was shutting down and killed the process after the {:?} grace period",
                    self.me.pod_name, self.settings.shutdown_grace
                ),
                exit_code: None,
            })
        } else if child.abandoned {
            // A function Run deleted while Ready waits on its cleanup finalizer for this end:
            // it is unregistered now.
            runs.state()
                .into_iter()
                .find(|r| r.uid().as_deref() == Some(exit.uid.as_str()))
                .filter(|r| {
                    r.metadata.deletion_timestamp.is_some()
                        && r.phase().is_admitted()
                        && r.finalizers()
                            .iter()
                            .any(|f| f == crate::api::FINALIZER_FUNCTION_CLEANUP)
                })
                .map(|_| Terminal {
                    outcome: Outcome::Cancelled,
                    reason: reasons::CANCELLED,
                    message: "deleted; runtimed unregistered the function".to_string(),
                    exit_code: None,
                })
        } else {
            Some(match exit.status {
                Ok(Exit::Process(status)) => status.terminal(),
                Ok(Exit::Server(ended)) => {
                    outputs = ended.outputs;
                    ended.terminal
                }
                Err(e) => Terminal {
                    outcome: Outcome::Failed,
                    reason: reasons::FAILED,
                    message: format!("runtimed lost track of the process: {e}"),
                    exit_code: None,
                },
            })
        };
        if let Some(terminal) = terminal {
            tracing::info!(run = %child.name, "Run {} ended: {}", child.name, terminal.message);
            // Prefer the watch's copy when it has caught up past the claim.
            let observed = runs
                .state()
                .into_iter()
                .find(|r| r.uid().as_deref() == Some(exit.uid.as_str()) && r.phase().is_admitted())
                .map(|r| (*r).clone());
            let first = observed.unwrap_or(child.last_written);
            self.finish_with_outputs(child.name, exit.uid, first, terminal, outputs);
        } else {
            tracing::info!(run = %child.name, "process of Run {} is gone", child.name);
            self.cache.release(&exit.uid);
            if let (Some(id), Some(server)) = (self.forget.remove(&exit.uid), &self.server) {
                let server = server.clone();
                tokio::spawn(async move { server.forget(&id).await });
            }
        }
    }
}

/// When `spec.timeout` of `run` runs out, counted from its `startTime` (an invalid timeout
/// never gets this far: the claim refuses it).
fn deadline_of(run: &Run) -> Option<Instant> {
    let timeout = run.timeout().ok()??;
    let started = run.status.as_ref()?.start_time.as_ref()?.0;
    let ran = jiff::Timestamp::now().duration_since(started);
    let ran = Duration::try_from(ran).unwrap_or(Duration::ZERO);
    Some(Instant::now() + timeout.saturating_sub(ran))
}

/// The `RegisterFunction` call of a function Run's attempt.
fn register_request(uid: &str, attempt: i32, task: &executor::Prepared) -> RegisterFunctionRequest {
    let function = task.function.as_ref();
    RegisterFunctionRequest {
        run_uid: uid.to_string(),
        registration_attempt: attempt,
        working_dir: task.working_dir.clone().unwrap_or_default(),
        handler: function.map(|f| f.handler.clone()).unwrap_or_default(),
        env: task.env.iter().cloned().collect(),
        idle_timeout_seconds: function
            .and_then(|f| f.idle_timeout)
            .map_or(0, |d| d.as_secs() as i64),
        registration_digest: String::new(),
    }
}

/// The attempt a Run is on (`status.attempt`; 1 before the first claim records it).
fn attempt_of(run: &Run) -> i32 {
    run.status.as_ref().and_then(|s| s.attempt).unwrap_or(1)
}

/// The claim: phase Running, `startTime`, Admitted=True, written with the resourceVersion the
/// decision was made on, so any change since then is a 409, never a blind overwrite.
async fn write_claim(api: &Api<Run>, pod: &str, claim: &Claim) -> kube::Result<Run> {
    let mut claimed = (*claim.run).clone();
    status::set_admitted(
        claimed.status.get_or_insert_with(Default::default),
        pod,
        &claim.request,
        &Time(jiff::Timestamp::now()),
    );
    api.replace_status(&claim.run.name_any(), &post_params(), &claimed)
        .await
}

/// Reads back a Run whose claim had an unknown outcome, retrying reads with capped backoff
/// until the API server answers: the Run as read when it is Running on this Pod (the claim
/// landed), `None` when it is not (still Scheduled, changed by someone else, or gone).
async fn read_back_claim(api: &Api<Run>, me: &Identity, name: &str, uid: &str) -> Option<Run> {
    let mut delay = Duration::from_millis(100);
    loop {
        match api.get_opt(name).await {
            Ok(Some(run)) => {
                let ours = run.uid().as_deref() == Some(uid)
                    && run.phase() == RunPhase::Running
                    && plan::assigned_to(&run, me);
                return ours.then_some(run);
            }
            Ok(None) => return None,
            Err(e) => {
                tracing::warn!(run = %name, "cannot read Run {name} back: {e}; retrying in {delay:?}");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(MAX_WRITE_BACKOFF);
            }
        }
    }
}

/// Writes the status `apply` makes of the Run's (a terminal one through
/// [`status::set_terminal`], or the requeue after a preemption) with the Run's
/// resourceVersion, for as long as this process lives: API errors and outages are retried
/// with capped exponential backoff, and a conflict re-reads the Run and applies the same
/// change again. Nothing is written when the Run is gone, recreated, no longer on this Pod, or
/// `apply` finds nothing to change (terminal already, whoever wrote that). Returns the Run as
/// written, when this call wrote it.
async fn write_status(
    api: &Api<Run>,
    me: &Identity,
    name: &str,
    uid: &str,
    first: Option<Run>,
    apply: impl Fn(&mut RunStatus, &Time) -> bool,
    retries: &prometheus::IntCounter,
) -> Option<Run> {
    let mut current = first;
    let mut delay = Duration::from_millis(100);
    for attempt in 1u64.. {
        if attempt > 1 {
            retries.inc();
        }
        let run = match current.take() {
            Some(run) => run,
            None => match api.get_opt(name).await {
                Ok(Some(run)) => run,
                Ok(None) => return None,
                Err(e) => {
                    tracing::warn!(run = %name, "cannot read Run {name} (attempt {attempt}): {e}; retrying in {delay:?}");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(MAX_WRITE_BACKOFF);
                    continue;
                }
            },
        };
        if run.uid().as_deref() != Some(uid) || !plan::assigned_to(&run, me) {
            return None;
        }
        let mut updated = run;
        let status = updated.status.get_or_insert_with(Default::default);
        let now = Time(jiff::Timestamp::now());
        if !apply(status, &now) {
            return None;
        }
        match api.replace_status(name, &post_params(), &updated).await {
            Ok(written) => return Some(written),
            Err(kube::Error::Api(s)) if s.code == 404 => return None,
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => {
                tracing::warn!(run = %name, "cannot write the status of Run {name} (attempt {attempt}): {e}; retrying in {delay:?}");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(MAX_WRITE_BACKOFF);
            }
        }
    }
    // The attempts never run out: the loop only ends by returning.
    None
}

/// Sleeps until `at`, or forever when there is no deadline.
/// The observed Runs minus those whose claim failed at this very resourceVersion and whose
/// retry time has not come; forgets failures the watch has moved past.
fn claimable(
    failed: &mut HashMap<String, (String, Instant)>,
    state: Vec<Arc<Run>>,
    now: Instant,
) -> Vec<Arc<Run>> {
    let current: HashMap<String, String> = state
        .iter()
        .filter_map(|r| Some((r.uid()?, r.resource_version()?)))
        .collect();
    failed.retain(|uid, (rv, at)| *at > now && current.get(uid) == Some(rv));
    state
        .into_iter()
        .filter(|r| r.uid().is_none_or(|uid| !failed.contains_key(&uid)))
        .collect()
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run;

    /// Run `uid` (named after its UID) at resourceVersion `rv`.
    fn run_at(uid: &str, rv: &str) -> Arc<Run> {
        Arc::new(run(uid).uid(uid).resource_version(rv).build())
    }

    #[test]
    fn a_failed_claim_is_not_retried_at_the_same_version_until_its_retry_time() {
        let now = Instant::now();
        let mut failed = HashMap::from([(
            "a".to_string(),
            ("1".to_string(), now + Duration::from_secs(5)),
        )]);
        let names = |v: Vec<Arc<Run>>| v.iter().map(|r| r.name_any()).collect::<Vec<_>>();
        // Same version, before the retry time: skipped; others are still claimable.
        assert_eq!(
            names(claimable(
                &mut failed,
                vec![run_at("a", "1"), run_at("b", "1")],
                now
            )),
            ["b"]
        );
        // The watch brought a newer version: claimable at once, the failure is forgotten.
        assert_eq!(
            names(claimable(&mut failed, vec![run_at("a", "2")], now)),
            ["a"]
        );
        assert!(failed.is_empty());
        // Same version again, but after the retry time: claimable.
        failed.insert("a".into(), ("1".into(), now + Duration::from_secs(1)));
        assert_eq!(
            names(claimable(
                &mut failed,
                vec![run_at("a", "1")],
                now + Duration::from_secs(2)
            )),
            ["a"]
        );
    }
}
