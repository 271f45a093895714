//! Every Run event of a namespace, in the API server's order, recorded by a watch of the
//! test's own; and the overcommit check replayed over them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use kube::ResourceExt as _;
use kube::runtime::{WatchStreamExt as _, watcher};

use kruntimes::api::resources::parse_requests;
use kruntimes::api::{Resources, Run};

use super::TestNs;

/// One observed version of a Run.
#[derive(Clone)]
pub struct RunEvent {
    pub run: Arc<Run>,
    pub deleted: bool,
    /// When the watch delivered it.
    pub at: Instant,
    /// The first event of a complete (re)list: every Run seen before is replaced by the list
    /// (after a watch expiry or an API-server restart, Runs deleted meanwhile are gone). An
    /// empty list is one such event with `deleted` set and a nameless Run.
    pub reset: bool,
}

#[derive(Default)]
struct Recorded {
    events: Vec<RunEvent>,
    errors: Vec<String>,
}

/// A watch of a namespace's Runs that records every event; stopped on drop.
pub struct RunEvents {
    recorded: Arc<Mutex<Recorded>>,
    task: tokio::task::JoinHandle<()>,
    ns: kube::Api<Run>,
    /// The field selector of the watch, if any; the catch-up list uses the same.
    fields: Option<String>,
}

impl Drop for RunEvents {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RunEvents {
    /// Starts the watch and returns once its initial list is recorded.
    pub async fn start(ns: &TestNs) -> Self {
        Self::start_selected(ns, None).await
    }

    /// [`RunEvents::start`] for the Runs that match a field selector (e.g.
    /// `spec.runtime=gpu`).
    pub async fn start_selected(ns: &TestNs, fields: Option<&str>) -> Self {
        let mut config = watcher::Config::default();
        if let Some(fields) = fields {
            config = config.fields(fields);
        }
        let recorded = Arc::new(Mutex::new(Recorded::default()));
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let sink = recorded.clone();
        let api = ns.runs();
        let task = tokio::spawn(async move {
            let mut ready = Some(ready_tx);
            let mut listing: Vec<Run> = Vec::new();
            // With the product's backoff: a watch that fails at once (the client's worker gone
            // while the runtime shuts down) must pause, or this loop never yields, its task is
            // never cancelled and the test's runtime cannot stop (ci3 of stop 66 hung so, in
            // `priority`, at 100 % CPU and 9 GB of recorded errors).
            let mut stream = watcher(api, config)
                .backoff(kruntimes::kubeclient::watch_backoff())
                .boxed();
            while let Some(event) = stream.next().await {
                let mut sink = sink.lock().unwrap();
                let mut record = |run, deleted, reset| {
                    let at = Instant::now();
                    let run = Arc::new(run);
                    sink.events.push(RunEvent {
                        run,
                        deleted,
                        at,
                        reset,
                    });
                };
                match event {
                    Ok(watcher::Event::Apply(run)) => record(run, false, false),
                    Ok(watcher::Event::Delete(run)) => record(run, true, false),
                    Ok(watcher::Event::Init) => listing.clear(),
                    Ok(watcher::Event::InitApply(run)) => listing.push(run),
                    Ok(watcher::Event::InitDone) => {
                        if listing.is_empty() {
                            record(Run::new("", Default::default()), true, true);
                        }
                        for (i, run) in listing.drain(..).enumerate() {
                            record(run, false, i == 0);
                        }
                        if let Some(tx) = ready.take() {
                            let _ = tx.send(());
                        }
                    }
                    Err(e) => sink.errors.push(format!("watch error: {e}")),
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(30), ready_rx)
            .await
            .expect("the Run watch did not list the Runs within 30s")
            .expect("the Run watch ended before listing the Runs");
        Self {
            recorded,
            task,
            ns: ns.runs(),
            fields: fields.map(str::to_string),
        }
    }

    /// Every event so far.
    pub fn events(&self) -> Vec<RunEvent> {
        self.recorded.lock().unwrap().events.clone()
    }

    /// How many events so far.
    pub fn len(&self) -> usize {
        self.recorded.lock().unwrap().events.len()
    }

    /// No event yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Errors the watch reported.
    pub fn errors(&self) -> Vec<String> {
        self.recorded.lock().unwrap().errors.clone()
    }

    /// When each Run was first seen in a version for which `matches` holds.
    pub fn first_seen(&self, matches: impl Fn(&Run) -> bool) -> HashMap<String, Instant> {
        let mut first = HashMap::new();
        for e in self.recorded.lock().unwrap().events.iter() {
            if !e.deleted && matches(&e.run) {
                first.entry(e.run.name_any()).or_insert(e.at);
            }
        }
        first
    }

    /// Waits until the recorded events have reached the API server's current state: a fresh
    /// list of the namespace's Runs, every one at the resourceVersion the events end with, and
    /// no other. Every event up to that list is then recorded; nothing is sampled. The list is
    /// taken again at every poll: a write that lands after one list (the leader dropping a
    /// finished function Run's finalizer, say) moves the watch past it, and a single list
    /// would then never match.
    pub async fn catch_up(&self) {
        let params = kube::api::ListParams::default().fields(self.fields.as_deref().unwrap_or(""));
        super::eventually(
            Duration::from_secs(30),
            "the Run watch to catch up",
            async || {
                let listed = self
                    .ns
                    .list(&params)
                    .await
                    .map_err(|e| format!("list the Runs to catch up with: {e}"))?;
                let want = versions(listed.items.iter());
                let seen = versions(replay(&self.events(), |_| {}).values().map(|r| &**r));
                if seen == want {
                    Ok(())
                } else {
                    let behind: Vec<&String> = want
                        .iter()
                        .filter(|(name, rv)| seen.get(*name) != Some(rv))
                        .map(|(name, _)| name)
                        .collect();
                    Err(format!(
                        "{} Runs seen, {} listed; not yet at the listed version: {behind:?}",
                        seen.len(),
                        want.len()
                    ))
                }
            },
        )
        .await;
    }
}

/// Each Run's resourceVersion, by name.
fn versions<'a>(runs: impl Iterator<Item = &'a Run>) -> BTreeMap<String, String> {
    runs.map(|r| (r.name_any(), r.resource_version().unwrap_or_default()))
        .collect()
}

/// Replays `events` in order, calling `f` with the Runs present after each one (by name);
/// returns the Runs present at the end.
pub fn replay(
    events: &[RunEvent],
    mut f: impl FnMut(&BTreeMap<String, Arc<Run>>),
) -> BTreeMap<String, Arc<Run>> {
    let mut present = BTreeMap::new();
    for e in events {
        if e.reset {
            present.clear();
        }
        if e.deleted {
            present.remove(&e.run.name_any());
        } else {
            present.insert(e.run.name_any(), e.run.clone());
        }
        f(&present);
    }
    present
}

/// Checks, at every Run event of a namespace, that no Pod's active usage exceeds its capacity
/// for any resource, and that no attempt of a Run runs on two Pods.
pub struct OvercommitWatch {
    events: RunEvents,
    capacity: PodCapacity,
}

/// The capacity the watch holds the Pods to.
enum PodCapacity {
    /// Each Pod's own, by name (a Pod or resource not listed has none).
    PerPod(HashMap<String, Resources>),
    /// The same for every Pod (a Runtime's, whose Pod names are generated).
    Every(Resources),
}

impl PodCapacity {
    fn of(&self, pod: &str) -> Option<&Resources> {
        match self {
            PodCapacity::PerPod(by_pod) => by_pod.get(pod),
            PodCapacity::Every(capacity) => Some(capacity),
        }
    }
}

impl OvercommitWatch {
    /// `capacity`: each Pod's capacity (a resource it does not list has none).
    pub async fn start(ns: &TestNs, capacity: HashMap<String, Resources>) -> Self {
        let events = RunEvents::start(ns).await;
        let capacity = PodCapacity::PerPod(capacity);
        Self { events, capacity }
    }

    /// The Runs of one Runtime whose every Pod has `capacity`.
    pub async fn start_for_runtime(ns: &TestNs, runtime: &str, capacity: Resources) -> Self {
        let selector = format!("spec.runtime={runtime}");
        let events = RunEvents::start_selected(ns, Some(&selector)).await;
        let capacity = PodCapacity::Every(capacity);
        Self { events, capacity }
    }

    /// Waits until the watch has recorded every event up to the namespace's current state,
    /// stops it, and panics if any event showed overcommit or the watch failed. Returns the
    /// number of events checked.
    pub async fn finish(self) -> usize {
        self.finish_checking(true).await.len()
    }

    /// As [`OvercommitWatch::finish`], returning every event checked.
    pub async fn finish_recorded(self) -> Vec<RunEvent> {
        self.finish_checking(true).await
    }

    /// As [`OvercommitWatch::finish`], for a scenario that takes the API server or etcd down
    /// on purpose: the watch's errors during the outage are expected (it relists after it),
    /// overcommit still is not.
    pub async fn finish_across_outages(self) -> usize {
        self.finish_checking(false).await.len()
    }

    async fn finish_checking(self, watch_errors_fail: bool) -> Vec<RunEvent> {
        self.events.catch_up().await;
        let events = self.events.events();
        let mut violations = if watch_errors_fail {
            self.events.errors()
        } else {
            Vec::new()
        };
        drop(self.events);
        replay(&events, |runs| {
            violations.extend(overcommitted(runs.values(), &self.capacity));
        });
        violations.extend(attempts_on_two_pods(&events));
        assert!(
            violations.is_empty(),
            "overcommit observed:\n{}",
            violations.join("\n")
        );
        events
    }
}

/// One active attempt per Run: every attempt of a Run runs on one Pod only (an attempt seen
/// running, admitted and not between attempts, on two Pods is a violation), and a Run's
/// attempt never goes back.
fn attempts_on_two_pods(events: &[RunEvent]) -> Vec<String> {
    let mut ran_on: HashMap<(String, i32), String> = HashMap::new();
    let mut last: HashMap<String, i32> = HashMap::new();
    let mut out = Vec::new();
    for e in events.iter().filter(|e| !e.deleted) {
        let (Some(uid), Some(status)) = (e.run.uid(), e.run.status.as_ref()) else {
            continue;
        };
        let (name, attempt) = (e.run.name_any(), e.run.attempt());
        if let Some(before) = last.insert(uid.clone(), attempt)
            && attempt < before
        {
            out.push(format!("{name}: attempt {before}, then {attempt}"));
        }
        let running =
            e.run.phase().is_admitted() && kruntimes::api::status::in_backoff(status).is_none();
        if let (true, Some(pod)) = (running, e.run.active_pod()) {
            let first = ran_on
                .entry((uid, attempt))
                .or_insert_with(|| pod.to_string());
            if first != pod {
                out.push(format!(
                    "{name}: attempt {attempt} ran on {first} and on {pod}"
                ));
            }
        }
    }
    out
}

/// Each (Pod, resource) whose usage by the active `runs` exceeds `capacity`.
fn overcommitted<'a>(
    runs: impl Iterator<Item = &'a Arc<Run>>,
    capacity: &PodCapacity,
) -> Vec<String> {
    let mut usage: HashMap<&str, Resources> = HashMap::new();
    for run in runs {
        if let Some(pod) = run.active_pod() {
            let request = parse_requests(run.spec.resources.as_ref().map(|r| &r.requests));
            usage.entry(pod).or_default().add(&request.unwrap());
        }
    }
    let mut out = Vec::new();
    for (pod, used) in usage {
        for (resource, amount) in used.iter() {
            let cap = capacity.of(pod).map_or(0, |c| c.get(resource));
            if amount > cap {
                out.push(format!("{pod}: {resource} {amount} > capacity {cap}"));
            }
        }
    }
    out
}
