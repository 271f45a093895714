//! The agent loop: reflectors over the Runs assigned to this Pod and over the Pod itself,
//! the admission cache, and the wiring of the parts that act: [`super::claims`] (the claim
//! writes), [`super::children`] (the tasks and their deadlines) and [`super::status_writer`]
//! (every status write after the claim).
//!
//! Where each Run stands is its one record ([`plan::Records`]), which this loop moves as the parts
//! report. Decisions come from the pure [`plan::plan`]; the parts perform them. The loop is an
//! event loop: besides the two watches, the shutdown future and its timers, everything comes back
//! to it as one [`AgentEvent`] on one channel ([`inbox`]): each part reports its own events through
//! a [`Report`] that maps them there, so no part imports this module. No write is awaited inside
//! the loop, so one Run's write never delays another Run's admission. A Run that does not fit is
//! never written to. This module never picks a Pod and never un-assigns a Run. How a claimed Run
//! starts, and what a waiting one is told, is [`admission`]'s; how an attempt ends (retry, end,
//! artifacts first) is [`ending`]'s.

use std::pin::pin;
use std::time::Duration;

use futures::{FutureExt as _, StreamExt as _};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt as _};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::children::{ChildEvent, Children, StopReason};
use super::claims::{ClaimEvent, Claims};
use super::collector::{self, Collected};
use super::executor::Terminal;
use super::heartbeat::LeaseRenewer;
use super::metrics::{self, RuntimedMetrics};
use super::plan::{self, Records};
use super::readiness::Readiness;
use super::report::Report;
use super::status_writer::{Started, StatusWriter, WriteEvent};
use super::{Error, Identity, Result, Settings};

mod admission;
mod ending;
mod inbox;
#[cfg(test)]
mod tests;
mod watches;
use crate::api::lenient::Lenient;
use crate::api::{Run, RunPhase};
use crate::telemetry::events::RunEvents;
use inbox::{AgentEvent, Inbox, report};

/// How long to wait for killed children to be reaped before exiting anyway.
const REAP_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs the agent: heartbeat, watches, admission and children, until `shutdown` resolves and
/// the children have finished or been killed. Its Events are written and the Lease is deleted
/// before returning.
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
    let agent = Agent::new(client, settings, metrics);
    let events = agent.events.clone();
    let result = agent.run(shutdown).await;
    // Before the Lease goes: a held `Started` (of a task left running on the runtime server)
    // and the Events of the last ends are written, not dropped with the process.
    events.flush(crate::telemetry::events::FLUSH_AT_EXIT).await;
    heartbeat.stop().await;
    result
}

struct Agent {
    me: Identity,
    settings: Settings,
    runs_api: Api<Run>,
    pods_api: Api<Pod>,
    /// Every Run this agent holds room for or acts on, and the admission cache of that room.
    records: Records,
    children: Children,
    claims: Claims,
    writer: StatusWriter,
    inbox: Inbox,
    draining: bool,
    /// Publishes Waiting, Admitted (after a Waiting only) and Started on the Runs of this Pod
    /// (the writer publishes the ends).
    events: RunEvents,
    /// When each Scheduled Run of this Pod was first seen, by UID, until it is claimed or
    /// leaves Scheduled (the admission wait).
    scheduled_seen: std::collections::HashMap<String, Instant>,
    metrics: RuntimedMetrics,
    /// What `/readyz` is made of; published when it changes.
    readiness: Readiness,
    /// When the earliest backoff ends: plan again then.
    next_retry: Option<Instant>,
    /// Where the artifact collections report.
    collections: Report<Box<Collected>>,
    /// Attempts that ended while their held claim was being written, by UID: each one's end is
    /// written once the claim has returned, over the claimed version.
    ends_after_claim: std::collections::HashMap<String, Box<ending::Ended>>,
}

impl Agent {
    fn new(client: Client, settings: Settings, metrics: RuntimedMetrics) -> Self {
        let me = settings.identity.clone();
        let (tx, rx) = mpsc::unbounded_channel();
        let events = RunEvents::new(
            client.clone(),
            crate::telemetry::events::RUNTIMED,
            Some(me.pod_name.clone()),
        )
        .with_routine(settings.routine_events)
        .with_fold_window(settings.event_fold_window);
        let runs_api: Api<Run> = Api::namespaced(client.clone(), &me.namespace);
        // With a runtime server, its Health feeds readiness: each change wakes the loop.
        if let Some(server) = &settings.runtime_server {
            let tx = tx.clone();
            server.watch_health(move |healthy| {
                let _ = tx.send(AgentEvent::ServerHealth(healthy));
            });
        }
        let readiness = Readiness::new(settings.runtime_server.is_some());
        Agent {
            children: Children::new(&settings, &report(&tx, AgentEvent::Child)),
            claims: Claims::new(
                runs_api.clone(),
                me.clone(),
                metrics.clone(),
                report(&tx, AgentEvent::Claim),
            ),
            writer: StatusWriter::new(
                runs_api.clone(),
                me.clone(),
                events.clone(),
                metrics.clone(),
                report(&tx, AgentEvent::Write),
            ),
            collections: report(&tx, AgentEvent::Collected),
            inbox: Inbox::new(rx),
            metrics,
            scheduled_seen: Default::default(),
            events,
            runs_api,
            pods_api: Api::namespaced(client, &me.namespace),
            me,
            settings,
            records: Records::new(),
            draining: false,
            readiness,
            next_retry: None,
            ends_after_claim: Default::default(),
        }
    }

    async fn run(mut self, shutdown: impl Future<Output = &'static str> + Send) -> Result<()> {
        let runs_config = self.runs_watch_config().await?;
        if let super::Artifacts::Store(store) = &self.settings.artifacts {
            collector::spawn_gc(
                self.runs_api.clone(),
                self.me.namespace.clone(),
                store.clone(),
                self.settings.artifact_gc_interval,
            );
        }
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
        let mut kill_at: Option<Instant> = None;
        let mut reap_deadline: Option<Instant> = None;

        loop {
            let mut dirty = false;
            let claim_retry = self.records.next_claim_retry();
            let claim_due = self.claims.next_due();
            let stop_kill = self.children.next_stop_kill();
            let timeout = self.children.next_timeout();
            let next_retry = self.next_retry;
            tokio::select! {
                event = run_events.next() => {
                    // Take every event that is already there before planning once.
                    let mut event = Some(event);
                    while let Some(current) = event.take() {
                        match current {
                            Some(Ok(watcher::Event::InitDone)) => {
                                if !self.readiness.runs_watched {
                                    tracing::info!("initial list of Runs assigned to Pod {} done", self.me.pod_name);
                                    // Runs deleted while no runtimed watched leave directories
                                    // no end will remove.
                                    self.children.remove_stale_dirs(&runs.state());
                                }
                                self.readiness.runs_watched = true;
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
                            self.readiness.pod_watched = true;
                            self.refresh_capacity(&pods);
                            dirty = true;
                        }
                        Some(Err(e)) => tracing::warn!("watching Pod {}: {e}; retrying", self.me.pod_name),
                        None => return Err(Error::WatchEnded("the Runtime Pod")),
                    }
                }
                Some(event) = self.inbox.next() => {
                    dirty |= self.on_event(event, &runs);
                }
                signal = &mut shutdown, if !self.draining => {
                    self.draining = true;
                    // What still runs is claimed now: a task left on the runtime server keeps
                    // its Run Running for the next runtimed.
                    self.claims.all_due(Instant::now());
                    self.children.leave_remote(signal);
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
                    self.children.kill_for_shutdown();
                }
                _ = sleep_until(claim_retry) => {
                    dirty = true;
                }
                _ = sleep_until(claim_due) => self.write_held_claims(Instant::now()),
                _ = sleep_until(next_retry) => {
                    self.next_retry = None;
                    dirty = true;
                }
                _ = sleep_until(stop_kill) => self.children.kill_overdue_stops(),
                _ = sleep_until(timeout) => self.children.stop_timed_out(),
                _ = sleep_until(reap_deadline) => {
                    tracing::error!(
                        "{} killed process(es) and {} status write(s) did not finish within {REAP_TIMEOUT:?}; exiting anyway",
                        self.children.len(),
                        self.writer.in_flight()
                    );
                    return Ok(());
                }
            }
            if self.draining
                && self.children.is_empty()
                && !self.records.collecting()
                && self.writer.in_flight() == 0
                && !self.records.claiming()
            {
                tracing::info!("no Run is running any more; runtimed exits");
                return Ok(());
            }
            self.readiness.draining = self.draining;
            self.publish_readiness();
            let watched = self.readiness.runs_watched && self.readiness.pod_watched;
            if dirty && watched && self.children.is_listed() {
                self.reconcile(&runs);
            }
            if dirty {
                // Every reservation, release and capacity change comes with `dirty`.
                let cache = self.records.cache();
                self.metrics
                    .set_holdings(cache.len(), cache.used(), cache.capacity());
            }
        }
    }

    /// Acts on one event; returns whether to plan again.
    fn on_event(&mut self, event: AgentEvent, runs: &Store<Run>) -> bool {
        match event {
            AgentEvent::Child(ChildEvent::Exited(exit, outputs)) => {
                self.on_exit(exit, outputs, runs);
                true
            }
            AgentEvent::Child(ChildEvent::FunctionReady(uid, registration)) => {
                if let Some((name, first)) = self.children.on_function_ready(&uid, registration) {
                    self.writer.function_ready(name, uid, first);
                }
                false
            }
            AgentEvent::Child(ChildEvent::Listed(ids)) => {
                self.children.on_listed(ids);
                true
            }
            AgentEvent::Claim(ClaimEvent::Written(first)) => {
                // Take every claim result that is already there before planning once; only a
                // claim that did not land frees room for others.
                let mut dirty = false;
                let mut next = Some(*first);
                while let Some(written) = next.take() {
                    dirty |= !self.start(written);
                    next = self.inbox.next_claim_written();
                }
                dirty
            }
            AgentEvent::Claim(ClaimEvent::Resolved(uid, landed)) => {
                match self.claims.resolved(&uid, landed.map(|r| *r)) {
                    Some(Ok((claim, written))) => {
                        self.spawn_claimed(claim, written, Instant::now());
                    }
                    Some(Err(not_landed)) => self.claim_failed(not_landed),
                    None => {}
                }
                true
            }
            AgentEvent::Write(WriteEvent::Claimed(uid, written)) => {
                self.writer.claim_written();
                self.claims.settle(&uid);
                if let Some(ended) = self.ends_after_claim.remove(&uid) {
                    let ending::Ended {
                        name,
                        first,
                        terminal,
                        results,
                    } = *ended;
                    let first = written.map_or(first, |w| *w);
                    self.end(name, uid, first, terminal, results);
                } else if let Some(written) = written {
                    self.children.claimed(&uid, *written);
                }
                false
            }
            AgentEvent::Write(WriteEvent::AttemptWritten(uid, landed)) => {
                self.writer.attempt_written();
                if !landed {
                    self.records.attempt_given_up(&uid);
                }
                true
            }
            AgentEvent::Collected(collected) => {
                self.on_collected(*collected);
                true
            }
            AgentEvent::ServerHealth(healthy) => {
                self.readiness.server_healthy = Some(healthy);
                false
            }
            AgentEvent::Write(WriteEvent::LastWritten(uid)) => {
                self.writer.landed();
                self.records.release(&uid);
                self.children.forget(&uid);
                true
            }
        }
    }

    /// Publishes what `/readyz` says, when it changed.
    fn publish_readiness(&mut self) {
        let missing = self.readiness.missing();
        let mut published = self.settings.ready.lock().expect("readiness");
        if *published != missing {
            *published = missing;
        }
    }

    /// Plans once and acts on it without waiting for any write: claims go out in the
    /// background and their results come back as events, so a Run that arrives meanwhile is
    /// planned at once instead of after the whole batch. A claim that does not land frees its
    /// reservation and plans again from there.
    fn reconcile(&mut self, runs: &Store<Run>) {
        let now = Instant::now();
        let all = runs.state();
        // Forgets what the watch shows done with (and the room of Runs deleted meanwhile).
        self.records.observe(&all);
        let state = self.records.claimable(all, now);
        self.note_scheduled(&state, now);
        // Executions the runtime server held when this agent started, of Runs it has no record
        // of: the plan attaches them.
        let attachable = self.children.attachable(&state);
        self.records.found(&state, &attachable);
        // A child of an attempt the Run has moved past (it left this Pod and came back for a
        // later attempt while this agent lost track of it) must not report for that attempt.
        for uid in self.children.outdated(&state) {
            self.children.abandon(&uid);
        }
        let plan = plan::plan(
            &state,
            &self.me,
            &mut self.records,
            plan::Admit {
                claiming: !self.draining,
                functions: self.children.has_server(),
                now: jiff::Timestamp::now(),
            },
        );
        debug_assert_eq!(self.records.check(), Ok(()));
        self.next_retry = plan.next_retry.map(|at| {
            let wait = at.duration_since(jiff::Timestamp::now());
            now + Duration::try_from(wait).unwrap_or(Duration::ZERO)
        });
        for attach in plan.attaches {
            let uid = attach.run.uid().unwrap_or_default();
            // Found before its claim was written: the claim is held from now on, as for a
            // task started now (its first start died with the runtimed that made it).
            let unclaimed = (attach.run.phase() == RunPhase::Scheduled).then(|| Started {
                attempt: attach.run.attempt(),
                request: attach.request.clone(),
                at: Time(jiff::Timestamp::now()),
            });
            if !self.children.attach(attach) {
                self.records.remove(&uid);
            } else if let Some(started) = unclaimed {
                let due = now + self.settings.claim_delay;
                self.claims.hold(uid, started, due);
            }
        }
        self.note_waiting(&plan.waiting);
        for uid in &plan.kills {
            self.children.abandon(uid);
        }
        for uid in &plan.stops {
            self.children.stop(uid, StopReason::Preempted);
        }
        for uid in &plan.cancels {
            self.children.stop(uid, StopReason::Cancelled);
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
            tracing::warn!(run = %name, "ending Run {name}: {}", failure.message);
            let terminal = Terminal {
                outcome: failure.outcome,
                reason: failure.reason,
                message: failure.message,
                exit_code: None,
            };
            self.end(
                name,
                uid,
                (*failure.run).clone(),
                terminal,
                Default::default(),
            );
        }
        // Each claim already holds its reservation. A task's first claim is held back and the
        // task starts now; any other claim's write goes out in creation order as a slot frees
        // up, concurrently with the others and with this loop, and its task starts once it
        // has landed.
        for claim in plan.claims {
            if self.holds_back(&claim) {
                self.start_held(claim);
            } else {
                self.claims.send(claim);
            }
        }
    }
}

/// Sleeps until `at`, or forever when there is no deadline.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
