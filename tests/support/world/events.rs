//! Every Run event of a namespace, in the API server's order, recorded by a watch of the
//! test's own; and the overcommit check replayed over them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use kube::ResourceExt as _;
use kube::runtime::watcher;

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
}

impl Drop for RunEvents {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RunEvents {
    /// Starts the watch and returns once its initial list is recorded.
    pub async fn start(ns: &TestNs) -> Self {
        let recorded = Arc::new(Mutex::new(Recorded::default()));
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let sink = recorded.clone();
        let api = ns.runs();
        let task = tokio::spawn(async move {
            let mut ready = Some(ready_tx);
            let mut stream = watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = stream.next().await {
                let mut sink = sink.lock().unwrap();
                let mut record = |run, deleted| {
                    let at = Instant::now();
                    let run = Arc::new(run);
                    sink.events.push(RunEvent { run, deleted, at });
                };
                match event {
                    Ok(watcher::Event::Apply(run) | watcher::Event::InitApply(run)) => {
                        record(run, false)
                    }
                    Ok(watcher::Event::Delete(run)) => record(run, true),
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = ready.take() {
                            let _ = tx.send(());
                        }
                    }
                    Ok(watcher::Event::Init) => {}
                    Err(e) => sink.errors.push(format!("watch error: {e}")),
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(30), ready_rx)
            .await
            .expect("the Run watch did not list the Runs within 30s")
            .expect("the Run watch ended before listing the Runs");
        Self { recorded, task }
    }

    /// Every event so far.
    pub fn events(&self) -> Vec<RunEvent> {
        self.recorded.lock().unwrap().events.clone()
    }

    pub fn len(&self) -> usize {
        self.recorded.lock().unwrap().events.len()
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

    /// Waits until no event arrived for 300 ms.
    pub async fn quiesce(&self) {
        loop {
            let seen = self.len();
            tokio::time::sleep(Duration::from_millis(300)).await;
            if self.len() == seen {
                return;
            }
        }
    }
}

/// Replays `events` in order, calling `f` with the Runs present after each one (by name);
/// returns the Runs present at the end.
pub fn replay(
    events: &[RunEvent],
    mut f: impl FnMut(&BTreeMap<String, Arc<Run>>),
) -> BTreeMap<String, Arc<Run>> {
    let mut present = BTreeMap::new();
    for e in events {
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
/// for any resource.
pub struct OvercommitWatch {
    events: RunEvents,
    capacity: HashMap<String, Resources>,
}

impl OvercommitWatch {
    /// `capacity`: each Pod's capacity (a resource it does not list has none).
    pub async fn start(ns: &TestNs, capacity: HashMap<String, Resources>) -> Self {
        let events = RunEvents::start(ns).await;
        Self { events, capacity }
    }

    /// Lets the watch drain (no event for 300 ms), stops it, and panics if any event showed
    /// overcommit. Returns the number of events checked.
    pub async fn finish(self) -> usize {
        self.events.quiesce().await;
        let (events, mut violations) = (self.events.events(), self.events.errors());
        drop(self.events);
        replay(&events, |runs| {
            violations.extend(overcommitted(runs.values(), &self.capacity));
        });
        assert!(
            violations.is_empty(),
            "overcommit observed:\n{}",
            violations.join("\n")
        );
        events.len()
    }
}

/// Each (Pod, resource) whose usage by the active `runs` exceeds `capacity`.
fn overcommitted<'a>(
    runs: impl Iterator<Item = &'a Arc<Run>>,
    capacity: &HashMap<String, Resources>,
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
            let cap = capacity.get(pod).map_or(0, |c| c.get(resource));
            if amount > cap {
                out.push(format!("{pod}: {resource} {amount} > capacity {cap}"));
            }
        }
    }
    out
}
