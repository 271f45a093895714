//! The agent shell driven turn by turn, as `Agent::run`'s loop drives it, with no API server:
//! a fake API behind the agent's `kube::Client` (a tower service that keeps the Runs by name,
//! gives every status write a new resourceVersion, answers a stale one with 409, fails the
//! writes a test queues, and takes Events), a reflector store that the test brings up to date
//! as the watch would, and the tasks as real child processes (`sh`). Each test turns the
//! loop by hand: the Runs it sees, a plan, then each event a part reports, and asserts what
//! was written and what the admission cache holds at the end.
//!
//! These are the shell's own tests (claim, run, fail, retry, lost writes, deletion); what
//! crosses a real API server is proven in `tests/`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser as _;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::watcher;

use super::*;
use crate::api::resources::RUNS;
use crate::testing::{NS, pod, run};
use server::FakeServer;

mod server;
mod window;

/// The fake API server's state.
#[derive(Default)]
struct Fake {
    /// The Runs, by name, as a GET answers them.
    runs: HashMap<String, Run>,
    /// The codes the next status writes fail with, in order (before anything is checked).
    fail_next: VecDeque<u16>,
    /// Every status write that landed, in order.
    written: Vec<Run>,
    /// The last resourceVersion given out.
    version: u64,
    /// Status writes answered 409 (a stale resourceVersion).
    conflicts: u32,
}

impl Fake {
    /// Stores `run` as created: a fresh resourceVersion.
    fn put(&mut self, mut run: Run) -> Run {
        self.version += 1;
        run.metadata.resource_version = Some(self.version.to_string());
        self.runs.insert(run.name_any(), run.clone());
        run
    }

    /// A `PUT .../runs/NAME/status` of `sent`.
    fn write_status(&mut self, name: &str, sent: Run) -> Result<Run, u16> {
        if let Some(code) = self.fail_next.pop_front() {
            return Err(code);
        }
        let current = self.runs.get(name).ok_or(404u16)?;
        if sent.resource_version() != current.resource_version() {
            self.conflicts += 1;
            return Err(409);
        }
        let mut stored = current.clone();
        stored.status = sent.status;
        let stored = self.put(stored);
        self.written.push(stored.clone());
        Ok(stored)
    }
}

/// A failure as the API server says it (`reason` is what clients such as `get_opt` read).
fn status_body(code: u16) -> Vec<u8> {
    let reason = match code {
        404 => "NotFound",
        409 => "Conflict",
        _ => "InternalError",
    };
    serde_json::to_vec(&serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
        "message": format!("the fake API answers {code}"), "code": code,
    }))
    .expect("json")
}

/// The agent's client: every request answered by `fake`.
fn client(fake: Arc<Mutex<Fake>>) -> kube::Client {
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let fake = fake.clone();
        async move {
            let (parts, body) = request.into_parts();
            let body = body.collect_bytes().await.unwrap_or_default();
            let runs = format!("/apis/kruntimes.io/v1alpha1/namespaces/{NS}/runs/");
            let path = parts.uri.path();
            let (code, answer) = match path.strip_prefix(&runs).map(|r| r.split_once('/')) {
                Some(Some((name, "status"))) if parts.method == http::Method::PUT => {
                    let sent: Run = serde_json::from_slice(&body).expect("a Run");
                    match fake.lock().unwrap().write_status(name, sent) {
                        Ok(stored) => (200, serde_json::to_vec(&stored).expect("json")),
                        Err(code) => (code, status_body(code)),
                    }
                }
                Some(None) if parts.method == http::Method::GET => {
                    let name = path.strip_prefix(&runs).unwrap_or_default();
                    match fake.lock().unwrap().runs.get(name) {
                        Some(run) => (200, serde_json::to_vec(run).expect("json")),
                        None => (404, status_body(404)),
                    }
                }
                // Events (and anything else written): taken as sent.
                _ if parts.method == http::Method::POST => (201, body.to_vec()),
                _ => (404, status_body(404)),
            };
            let response = http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(answer))
                .expect("a response");
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    kube::Client::new(service, NS)
}

/// An agent of Pod `pod-1` (capacity `runs`) over the fake API, with the stores its watches
/// would fill.
struct Shell {
    agent: Agent,
    fake: Arc<Mutex<Fake>>,
    runs: Store<Run>,
    watch: Writer<Run>,
    /// The Pod's capacity in `runs`, and runtimed's flags beyond its identity.
    capacity: u64,
    flags: Vec<String>,
    _workspace: tempfile::TempDir,
}

impl Shell {
    /// runtimed's own child processes run the tasks; every claim is written before its task
    /// starts (`--claim-delay 0s`).
    fn new(capacity: u64) -> Shell {
        Self::with(capacity, &[])
    }

    /// With more runtimed `flags` (a runtime server's address); every claim is written before
    /// its task starts.
    fn with(capacity: u64, flags: &[&str]) -> Shell {
        let flags: Vec<&str> = ["--claim-delay", "0s"]
            .into_iter()
            .chain(flags.iter().copied())
            .collect();
        Self::started(capacity, &flags)
    }

    /// A task's first claim held back for `delay` (`--claim-delay`), with more `flags`.
    fn holding(capacity: u64, delay: &str, flags: &[&str]) -> Shell {
        let flags: Vec<&str> = ["--claim-delay", delay]
            .into_iter()
            .chain(flags.iter().copied())
            .collect();
        Self::started(capacity, &flags)
    }

    fn started(capacity: u64, flags: &[&str]) -> Shell {
        let workspace = tempfile::tempdir().expect("a workspace");
        let mut flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
        flags.extend([
            "--workspace-root".into(),
            workspace.path().display().to_string(),
        ]);
        let fake = Arc::new(Mutex::new(Fake::default()));
        let agent = agent(&fake, capacity, &flags);
        let (runs, watch) = reflector::store::<Run>();
        Shell {
            agent,
            fake,
            runs,
            watch,
            capacity,
            flags,
            _workspace: workspace,
        }
    }

    /// runtimed crashes (no shutdown, no write) and a new one starts over the same API,
    /// workspace and runtime server.
    fn restart(&mut self) {
        self.agent = agent(&self.fake, self.capacity, &self.flags);
    }

    /// Creates `run` in the fake API; the watch shows it.
    fn create(&mut self, run: Run) {
        let stored = self.fake.lock().unwrap().put(run);
        self.watch
            .apply_watcher_event(&watcher::Event::Apply(stored));
    }

    /// Deletes Run `name`; the watch shows it gone.
    fn delete(&mut self, name: &str) {
        let gone = self.fake.lock().unwrap().runs.remove(name);
        if let Some(gone) = gone {
            self.watch
                .apply_watcher_event(&watcher::Event::Delete(gone));
        }
    }

    /// The watch catches up with every Run the fake API holds.
    fn catch_up(&mut self) {
        let runs: Vec<Run> = self.fake.lock().unwrap().runs.values().cloned().collect();
        for run in runs {
            self.watch.apply_watcher_event(&watcher::Event::Apply(run));
        }
    }

    /// Plans, as the loop does after a change.
    fn plan(&mut self) {
        self.agent.reconcile(&self.runs);
    }

    /// The next event a part reports, acted on as the loop does (the watch caught up first,
    /// and a plan after it when it asks for one).
    async fn turn(&mut self) -> &'static str {
        let event = tokio::time::timeout(Duration::from_secs(20), self.agent.inbox.next())
            .await
            .expect("a part reports within 20 s")
            .expect("the channel stays open");
        let what = match &event {
            AgentEvent::Child(ChildEvent::Exited(..)) => "exited",
            AgentEvent::Child(_) => "child",
            AgentEvent::Claim(_) => "claimed",
            AgentEvent::Write(WriteEvent::AttemptWritten(..)) => "attempt written",
            AgentEvent::Write(WriteEvent::Claimed(..)) => "claim written",
            AgentEvent::Write(WriteEvent::LastWritten(_)) => "last written",
            AgentEvent::Collected(_) => "collected",
            AgentEvent::ServerHealth(_) => "health",
        };
        self.catch_up();
        if self.agent.on_event(event, &self.runs) {
            self.plan();
        }
        what
    }

    /// Turns until a part reports `what`.
    async fn until(&mut self, what: &str) {
        let mut seen = Vec::new();
        while seen.len() < 50 {
            let next = self.turn().await;
            seen.push(next);
            if next == what {
                return;
            }
        }
        panic!("no {what:?} among {seen:?}");
    }

    /// Plans as the loop's timers would (every 100 ms) until a claim goes out: a backoff or a
    /// claim's retry time has passed.
    async fn until_claimed(&mut self) {
        for _ in 0..50 {
            self.catch_up();
            self.plan();
            if self.agent.records.claiming() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no claim went out within 5 s");
    }

    /// Waits for the earliest held claim's window to pass and writes what is due, as the
    /// loop's timer.
    async fn at_the_claim_delay(&mut self) {
        let at = self.agent.claims.next_due().expect("a held claim");
        tokio::time::sleep_until(at).await;
        self.agent.write_held_claims(tokio::time::Instant::now());
    }

    /// Waits for the earliest task deadline and stops what is past it, as the loop's timer.
    async fn at_the_timeout(&mut self) {
        let at = self
            .agent
            .children
            .next_timeout()
            .expect("a task with a deadline");
        tokio::time::sleep_until(at).await;
        self.agent.children.stop_timed_out();
    }

    /// Changes the stored Run `name` as a user would (a new resourceVersion); the watch
    /// shows it.
    fn edit(&mut self, name: &str, change: impl FnOnce(&mut Run)) {
        let mut fake = self.fake.lock().unwrap();
        let mut run = fake.runs.get(name).cloned().expect("the Run");
        change(&mut run);
        let stored = fake.put(run);
        drop(fake);
        self.watch
            .apply_watcher_event(&watcher::Event::Apply(stored));
    }

    /// Asserts that the stored Run `name` ended in `phase` at `attempt` and that no room is
    /// held any more, once its terminal write has landed; and, once the watch shows that end,
    /// that no record of it is left.
    async fn ends(&mut self, name: &str, phase: RunPhase, attempt: i32) {
        self.until("last written").await;
        let ended = self.stored(name).expect("the Run");
        assert_eq!(
            (ended.phase(), ended.attempt()),
            (phase, attempt),
            "{:?}",
            ended.status
        );
        assert!(
            self.agent.records.cache().is_empty(),
            "room still held: {:?}",
            self.agent.records.cache().used()
        );
        self.catch_up();
        self.plan();
        let uid = ended.uid().unwrap_or_default();
        assert_eq!(
            self.agent.records.get(&uid),
            None,
            "a record outlives its Run's end"
        );
    }

    /// Cancels the Running Run `name` as a user would, and asserts it ends Cancelled, its
    /// claim and its end written.
    async fn cancels_running(&mut self, name: &str) {
        self.edit(name, |r| r.spec.cancel_requested = true);
        self.plan();
        self.ends(name, RunPhase::Cancelled, 1).await;
        assert_eq!(
            self.phases_written(name),
            [RunPhase::Running, RunPhase::Cancelled]
        );
    }

    fn stored(&self, name: &str) -> Option<Run> {
        self.fake.lock().unwrap().runs.get(name).cloned()
    }

    /// The phases written for `name`, in order.
    fn phases_written(&self, name: &str) -> Vec<RunPhase> {
        let fake = self.fake.lock().unwrap();
        fake.written
            .iter()
            .filter(|r| r.name_any() == name)
            .map(|r| r.phase())
            .collect()
    }
}

/// An agent of Pod `pod-1` with `runs` of capacity, over `fake`, its watches done.
fn agent(fake: &Arc<Mutex<Fake>>, runs: u64, flags: &[String]) -> Agent {
    let identity = [
        "--pod-name",
        "pod-1",
        "--pod-namespace",
        NS,
        "--pod-uid",
        "pod-uid-1",
        "--shutdown-grace",
        "2s",
    ];
    let words = ["k", "runtimed"]
        .into_iter()
        .chain(identity)
        .chain(flags.iter().map(String::as_str));
    let crate::cmd::cli::Command::Runtimed(args) = crate::cmd::cli::Cli::try_parse_from(words)
        .expect("runtimed's flags")
        .command
    else {
        unreachable!("runtimed parses as runtimed")
    };
    let settings = Settings::from_args(&args).expect("settings");
    let metrics = RuntimedMetrics::register(&prometheus::Registry::new()).expect("metrics");
    let mut agent = Agent::new(client(fake.clone()), settings, metrics);
    let (pods, mut pods_watch) = reflector::store::<Pod>();
    let this = pod("pod-1").uid("pod-uid-1").capacity(&[(RUNS, runs)]);
    pods_watch.apply_watcher_event(&watcher::Event::Apply(this.build()));
    agent.refresh_capacity(&pods);
    agent.readiness.runs_watched = true;
    agent.readiness.pod_watched = true;
    agent
}

/// A Run Scheduled on `pod-1` whose task is `sh -c script`.
fn scheduled(name: &str, script: &str) -> crate::testing::RunBuilder {
    run(name)
        .on("pod-1")
        .pod_uid("pod-uid-1")
        .requests(&[(RUNS, 1)])
        .task(&["sh", "-c", script])
}

/// Run `flaky`, whose first attempt fails and second succeeds (counted in `dir`), with two
/// attempts 1 s apart.
fn fails_once(dir: &std::path::Path) -> Run {
    let counter = dir.join("n").display().to_string();
    let script = format!(
        "n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; [ $n -ge 2 ]"
    );
    scheduled("flaky", &script).retry_policy(2, "1s").build()
}

#[tokio::test]
async fn a_claimed_run_runs_and_ends_with_one_claim_and_one_terminal_write() {
    let mut shell = Shell::new(1);
    shell.create(scheduled("ok", "exit 0").build());
    shell.plan();
    shell.until("last written").await;
    assert_eq!(
        shell.phases_written("ok"),
        [RunPhase::Running, RunPhase::Succeeded]
    );
    assert!(
        shell.agent.records.cache().is_empty(),
        "the room is released"
    );
}

#[tokio::test]
async fn a_run_that_does_not_fit_waits_unwritten_until_the_room_is_free() {
    let mut shell = Shell::new(1);
    shell.create(scheduled("first", "exit 0").build());
    shell.create(scheduled("second", "exit 0").build());
    shell.plan();
    // One claim only: the second does not fit while the first holds the room.
    assert_eq!(shell.agent.records.cache().len(), 1);
    shell.until("last written").await;
    shell.until("last written").await;
    assert_eq!(
        shell.phases_written("first"),
        [RunPhase::Running, RunPhase::Succeeded]
    );
    assert_eq!(
        shell.phases_written("second"),
        [RunPhase::Running, RunPhase::Succeeded]
    );
    assert!(shell.agent.records.cache().is_empty());
}

#[tokio::test]
async fn a_lost_claim_write_releases_its_room_and_is_claimed_again_from_the_watch() {
    let mut shell = Shell::new(1);
    shell.fake.lock().unwrap().fail_next.push_back(500);
    shell.create(scheduled("flaky", "exit 0").build());
    shell.plan();
    shell.until("claimed").await;
    assert!(
        shell.agent.records.cache().is_empty(),
        "a claim that did not land holds no room"
    );
    assert!(shell.phases_written("flaky").is_empty());
    // Tried again once its retry time has come (the loop's claim timer).
    shell.until_claimed().await;
    shell.until("last written").await;
    assert_eq!(
        shell.phases_written("flaky"),
        [RunPhase::Running, RunPhase::Succeeded]
    );
    assert!(shell.agent.records.cache().is_empty());
}

#[tokio::test]
async fn a_failed_attempt_keeps_its_room_between_attempts_and_the_retry_succeeds() {
    let mut shell = Shell::new(1);
    let dir = tempfile::tempdir().unwrap();
    shell.create(fails_once(dir.path()));
    shell.plan();
    shell.until("attempt written").await;
    let between = shell.stored("flaky").unwrap();
    assert_eq!((between.phase(), between.attempt()), (RunPhase::Running, 2));
    assert_eq!(
        shell.agent.records.cache().len(),
        1,
        "the room is held between attempts"
    );
    // The backoff passes (the loop's retry timer), and attempt 2 is claimed and succeeds.
    shell.until_claimed().await;
    shell.ends("flaky", RunPhase::Succeeded, 2).await;
}

#[tokio::test]
async fn a_cancelled_running_run_is_stopped_and_ends_cancelled_freeing_its_room() {
    let mut shell = Shell::new(1);
    shell.create(scheduled("long", "sleep 30").build());
    shell.plan();
    shell.until("claimed").await;
    assert_eq!(shell.agent.children.len(), 1, "its task runs");
    shell.cancels_running("long").await;
}

#[tokio::test]
async fn a_running_run_past_its_timeout_is_stopped_and_ends_timeout_freeing_its_room() {
    let mut shell = Shell::new(1);
    shell.create(scheduled("long", "sleep 30").timeout("1s").build());
    shell.plan();
    shell.until("claimed").await;
    shell.at_the_timeout().await;
    shell.ends("long", RunPhase::Timeout, 1).await;
}

/// A Run between attempts whose retry claim does not land keeps the room it holds while
/// the claim waits to be tried again (the watch hides it from the plan meanwhile), and its
/// next attempt then runs.
#[tokio::test]
async fn a_retry_whose_claim_fails_keeps_its_room_until_it_is_claimed_again() {
    let mut shell = Shell::new(1);
    let dir = tempfile::tempdir().unwrap();
    shell.create(fails_once(dir.path()));
    shell.plan();
    shell.until("attempt written").await;
    shell.until_claimed().await;
    shell.fake.lock().unwrap().fail_next.push_back(500);
    shell.until("claimed").await;
    assert_eq!(
        shell.agent.records.cache().len(),
        1,
        "the retry gave up the room it held between attempts"
    );
    shell.until_claimed().await;
    shell.ends("flaky", RunPhase::Succeeded, 2).await;
}

/// The leak `tests/it/retry.rs` proves on a real API server, here turn by turn: the failed
/// attempt's write is refused until the Run is deleted; once the watch shows it gone, its
/// room is released.
#[tokio::test]
async fn a_run_deleted_while_its_failed_attempt_is_written_frees_its_room() {
    let mut shell = Shell::new(1);
    shell.create(scheduled("doomed", "exit 1").retry_policy(3, "1s").build());
    // The claim lands; the failed attempt's write meets a 500, and is retried.
    shell.plan();
    shell.until("exited").await;
    shell.fake.lock().unwrap().fail_next.push_back(500);
    shell.delete("doomed");
    shell.plan();
    shell.until("attempt written").await;
    shell.plan();
    assert!(
        shell.agent.records.cache().is_empty(),
        "the room of a deleted Run is still held: {:?}",
        shell.agent.records.cache().held("uid-doomed")
    );
}

/// A runtimed that crashes while its Run executes on the runtime server: the next one lists
/// the server's executions before it plans, holds the Run's room again and follows the same
/// execution (never a second one, never `RuntimedRestarted`), and writes its end once.
#[tokio::test]
async fn a_restarted_runtimed_re_attaches_to_the_execution_and_ends_the_run_once() {
    let (server, address) = FakeServer::start().await;
    let mut shell = Shell::with(1, &["--runtime-server", &address]);
    shell.until("child").await; // the server's executions, listed
    shell.create(scheduled("long", "sleep 30").build());
    shell.plan();
    shell.until("claimed").await;
    // The Execute call goes out from the child's own task.
    for _ in 0..100 {
        if !server.ids().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(server.ids(), ["uid-long-1"], "executing on the server");

    shell.restart();
    shell.until("child").await;
    assert_eq!(
        shell.agent.records.cache().len(),
        1,
        "the room is held again"
    );
    server.finish("uid-long-1", 0);
    shell.ends("long", RunPhase::Succeeded, 1).await;
    assert_eq!(
        shell.phases_written("long"),
        [RunPhase::Running, RunPhase::Succeeded]
    );
    assert_eq!(server.executed(), 1, "executed once");
}
