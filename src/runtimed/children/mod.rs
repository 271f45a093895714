//! runtimed's children: the task of every claimed Run — a process of runtimed's, an execution
//! on the runtime server, or a function registration there — with its stop, timeout and kill
//! deadlines; the runtime server's side ([`server`]: the executions it held at start, to
//! re-attach to) and what a child's end means ([`exit`], [`Children::on_exit`]).
//!
//! Ends reach the agent as [`ChildEvent::Exited`] and registrations as
//! [`ChildEvent::FunctionReady`] on a [`Report`]. This module must not talk to the
//! API server, write a status or release a reservation it did not refuse itself: it says what
//! an end calls for ([`AfterExit`]) and the agent does it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::ResourceExt as _;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::Settings;
use super::contract::{execute_request, execution_id};
use super::executor::{self, ChildExit, ChildHandle, SpawnError, Terminal};
use super::git;
use super::outputs::OutputsError;
use super::remote::RuntimeServer;
use super::report::Report;
use super::rundir::{self, Layout};
use super::runlog::RunLogs;
use crate::api::Run;
use crate::runtimed::proto::FunctionRegistration;

mod exit;
mod server;
use server::{list_executions, register_request};

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

/// Why a child is being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StopReason {
    Preempted,
    Cancelled,
    TimedOut,
}

#[derive(Debug, Clone, Copy)]
struct Stopping {
    why: StopReason,
    kill_at: Instant,
}

/// What a child's end calls for.
pub(super) enum AfterExit {
    /// Preempted: back to Pending over `first`.
    Requeue {
        name: String,
        uid: String,
        first: Run,
    },
    /// Ended: write `terminal` (and `outputs`) over `first`.
    Finish {
        name: String,
        uid: String,
        first: Run,
        terminal: Terminal,
        outputs: BTreeMap<String, String>,
    },
    /// Its Run is gone: no status to write; release the reservation now.
    Gone { uid: String },
}

pub(super) struct Children {
    children: HashMap<String, Child>,
    pod_name: String,
    shutdown_grace: Duration,
    workspace_root: std::path::PathBuf,
    /// How a Run's Git source is fetched.
    git: git::FetchOptions,
    /// Whether Runs get `$KRUNTIME_ARTIFACTS_DIR` (the Runtime has an artifact store).
    artifacts: bool,
    /// Each Run's stdout and stderr, kept on the workspace volume.
    logs: RunLogs,
    /// The Pod's runtime server, when Runs execute there.
    server: Option<RuntimeServer>,
    /// The executions the runtime server held when this agent started (`None` until it
    /// answered `List`; no Run is planned before, so none is failed as gone while it still
    /// runs there). An id leaves once its Run is attached or ended.
    listed: Option<HashSet<String>>,
    /// Executions to `Forget` once their Run's terminal write has landed, by Run UID.
    forget: HashMap<String, String>,
    /// The registration of each Ready function Run of this Pod, by Run name (what `invoke`
    /// calls).
    registrations: Arc<Mutex<HashMap<String, FunctionRegistration>>>,
    /// Given to every child: the executor and the runtime server report ends on a channel of
    /// their own type, forwarded onto the agent's one event channel.
    exits: mpsc::UnboundedSender<ChildExit>,
    ready: mpsc::UnboundedSender<(String, FunctionRegistration)>,
}

impl Children {
    /// No child yet. With a runtime server, its executions are listed (retried until it
    /// answers, reported as [`ChildEvent::Listed`]) before anything is planned.
    pub(super) fn new(settings: &Settings, events: &Report<ChildEvent>) -> Self {
        let (exits, exits_rx) = mpsc::unbounded_channel();
        tokio::spawn(forward_exits(
            exits_rx,
            events.clone(),
            settings.workspace_root.clone(),
        ));
        let (ready, ready_rx) = mpsc::unbounded_channel();
        tokio::spawn(forward(ready_rx, events.clone(), |(uid, registration)| {
            ChildEvent::FunctionReady(uid, registration)
        }));
        let server = settings.runtime_server.clone();
        if let Some(server) = &server {
            list_executions(server.clone(), events.clone());
        }
        Children {
            children: HashMap::new(),
            pod_name: settings.identity.pod_name.clone(),
            shutdown_grace: settings.shutdown_grace,
            workspace_root: settings.workspace_root.clone(),
            git: settings.git.clone(),
            artifacts: settings.artifacts.any(),
            logs: RunLogs::new(&settings.state_dir),
            listed: server.is_none().then(HashSet::new),
            server,
            forget: HashMap::new(),
            registrations: settings.registrations.clone(),
            exits,
            ready,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.children.len()
    }

    /// Whether Runs execute on a runtime server (function Runs can only there).
    pub(super) fn has_server(&self) -> bool {
        self.server.is_some()
    }

    /// The children whose Run the watch shows at another attempt than theirs: the Run was
    /// sent back to Pending (healed, preempted) and, perhaps, placed here again; the child's
    /// result belongs to an attempt that is over.
    pub(super) fn outdated(&self, state: &[Arc<Run>]) -> Vec<String> {
        state
            .iter()
            .filter_map(|r| {
                let uid = r.uid()?;
                let child = self.children.get(&uid)?;
                (child.stopping.is_none() && r.attempt() > child.last_written.attempt())
                    .then_some(uid)
            })
            .collect()
    }

    /// The files of `run`'s execution ([`rundir`]).
    pub(super) fn layout(&self, run: &Run) -> Layout {
        Layout::of(
            &self.workspace_root,
            &run.uid().unwrap_or_default(),
            run.workspace_name(),
        )
        .with_artifacts(self.artifacts)
    }

    /// Removes the directories of Runs that are no longer this Pod's (deleted while no
    /// runtimed watched): every `<uid>` directory of the workspace volume but `runs`'.
    pub(super) fn remove_stale_dirs(&self, runs: &[Arc<Run>]) {
        let live: HashSet<String> = runs.iter().filter_map(|r| r.uid()).collect();
        rundir::remove_set_aside(&self.workspace_root);
        for uid in rundir::stale(&self.workspace_root, &live) {
            tracing::info!("removing the directory of Run {uid}, which is no longer this Pod's");
            rundir::remove(&self.workspace_root, &uid);
        }
    }

    /// The task of a claimed Run in its directory, made for this attempt (its source written,
    /// the last attempt's outputs removed), or why that directory cannot be made.
    pub(super) fn in_run_dir(
        &self,
        run: &Run,
        task: executor::Prepared,
    ) -> Result<executor::Prepared, String> {
        let layout = self.layout(run);
        let task = layout.apply(task);
        layout.create(&task).map(|()| task)
    }

    /// Starts `task` for the claimed Run `written` (`name`, `uid`): a function registration or
    /// an execution on the runtime server when there is one, else a process.
    pub(super) fn spawn(
        &mut self,
        name: &str,
        uid: &str,
        written: &Run,
        task: &executor::Prepared,
    ) -> Result<(), SpawnError> {
        let attempt = written.attempt();
        // A function Run is a registration, not an execution: nothing to `Forget` at its end.
        let execution =
            (self.server.is_some() && task.function.is_none()).then(|| execution_id(uid, attempt));
        let start = {
            let (server, exits, ready) =
                (self.server.clone(), self.exits.clone(), self.ready.clone());
            let log = self.logs.writer(name, uid);
            let (name, uid, task, execution) = (
                name.to_string(),
                uid.to_string(),
                task.clone(),
                execution.clone(),
            );
            move || -> Result<ChildHandle, SpawnError> {
                Ok(match (&server, &execution) {
                    (Some(server), None) if task.function.is_some() => {
                        let function = task.function.clone().expect("checked");
                        server.serve_function(
                            register_request(&uid, attempt, &task),
                            function.idle_timeout,
                            uid,
                            ready,
                            exits,
                        )
                    }
                    (Some(server), Some(id)) => server.follow(
                        Some(execute_request(id, &task, 0)),
                        id.clone(),
                        uid,
                        name,
                        Some(log),
                        exits,
                    ),
                    _ => executor::spawn(&task, &name, &uid, Some(log), exits)?,
                })
            }
        };
        // A Git source is fetched by the child itself, first: the agent goes on meanwhile,
        // and stopping the Run stops the fetch.
        let handle = match &task.git {
            None => start()?,
            Some(source) => {
                let fetch = git::fetch(
                    source.clone(),
                    self.layout(written).checkout_dir(),
                    self.git.clone(),
                );
                let fetch = async move { fetch.await.map_err(|e| e.to_string()) };
                executor::staged(uid, fetch, start, self.exits.clone())
            }
        };
        let deadline = deadline_of(written);
        let (uid, name) = (uid.to_string(), name.to_string());
        self.insert(uid, name, handle, written.clone(), deadline, execution);
        Ok(())
    }

    fn insert(
        &mut self,
        uid: String,
        name: String,
        handle: ChildHandle,
        last_written: Run,
        deadline: Option<Instant>,
        execution: Option<String>,
    ) {
        let child = Child {
            name,
            handle,
            last_written,
            terminated_for_shutdown: false,
            abandoned: false,
            stopping: None,
            deadline,
            execution,
        };
        self.children.insert(uid, child);
    }

    /// Kills the child of a Run that is deleted or no longer this Pod's: no status follows.
    pub(super) fn abandon(&mut self, uid: &str) {
        if let Some(child) = self.children.get_mut(uid)
            && !child.handle.kill_requested()
        {
            tracing::warn!(run = %child.name, "Run {} was deleted or is no longer assigned to this Pod: killing its process", child.name);
            child.abandoned = true;
            child.handle.kill();
        }
    }

    /// Stops the child of `uid` for `why` (SIGTERM, or the runtime server's Cancel; SIGKILL
    /// after the grace period), unless it is being stopped already.
    pub(super) fn stop(&mut self, uid: &str, why: StopReason) {
        let grace = self.shutdown_grace;
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

    /// Shutdown: executions on the runtime server are the server's, they go on without
    /// runtimed (a restarted one re-attaches; a Pod that goes away takes them along, and the
    /// scheduler heals their Runs), so they are let go of here.
    pub(super) fn leave_remote(&mut self, signal: &str) {
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
    }

    /// The shutdown grace period is over: every child is killed.
    pub(super) fn kill_for_shutdown(&mut self) {
        for (uid, child) in &mut self.children {
            tracing::warn!(run = %child.name, "shutdown grace period over: killing the process of Run {} ({uid})", child.name);
            child.terminated_for_shutdown = true;
            child.handle.kill();
        }
    }

    /// When the next stopped child is due to be killed.
    pub(super) fn next_stop_kill(&self) -> Option<Instant> {
        self.children
            .values()
            .filter(|c| !c.handle.kill_requested())
            .filter_map(|c| c.stopping.map(|s| s.kill_at))
            .min()
    }

    /// Kills the stopped children whose grace period is over.
    pub(super) fn kill_overdue_stops(&mut self) {
        let now = Instant::now();
        for (uid, child) in &mut self.children {
            if child.stopping.is_some_and(|s| s.kill_at <= now) && !child.handle.kill_requested() {
                tracing::warn!(run = %child.name, "stop grace period over: killing Run {} ({uid})", child.name);
                child.handle.kill();
            }
        }
    }

    /// When the next running child's `spec.timeout` runs out.
    pub(super) fn next_timeout(&self) -> Option<Instant> {
        self.children
            .values()
            .filter(|c| c.stopping.is_none())
            .filter_map(|c| c.deadline)
            .min()
    }

    /// Stops the children whose `spec.timeout` has run out.
    pub(super) fn stop_timed_out(&mut self) {
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

    /// Whether an earlier runtimed started `run` here: its directory exists though nothing of
    /// this agent runs it (it is removed once a Run's last write has landed, or the Run left
    /// this Pod). A Scheduled Run found so died with that runtimed before its held claim was
    /// written.
    pub(super) fn started_before(&self, run: &Run) -> bool {
        let uid = run.uid().unwrap_or_default();
        !self.children.contains_key(&uid) && self.layout(run).run_dir.exists()
    }

    /// The name of `uid`'s child and its Run as last written by this agent (as Scheduled,
    /// while its claim is held back).
    pub(super) fn last_written(&self, uid: &str) -> Option<(String, Run)> {
        let child = self.children.get(uid)?;
        Some((child.name.clone(), child.last_written.clone()))
    }

    /// The held claim of `uid`'s child landed: `written` is the first guess of its next write.
    pub(super) fn claimed(&mut self, uid: &str, written: Run) {
        if let Some(child) = self.children.get_mut(uid)
            && written.attempt() == child.last_written.attempt()
        {
            child.last_written = written;
        }
    }
}

/// What the children report back to the agent.
pub(super) enum ChildEvent {
    /// A child (process, execution or function registration) ended, with what a successful
    /// one left in `$KRUNTIME_OUTPUTS`.
    Exited(ChildExit, Outputs),
    /// The runtime server reports a function Run's registration ready, by Run UID.
    FunctionReady(String, FunctionRegistration),
    /// The executions the runtime server held at start, once it answered `List`.
    Listed(HashSet<String>),
}

/// What an execution left in `$KRUNTIME_OUTPUTS` (read only for a successful one).
pub(super) type Outputs = Result<BTreeMap<String, String>, OutputsError>;

/// Reports each child's end with the outputs of a successful execution, read below the
/// workspace volume `root` off the loop and within a deadline (a task that left a FIFO, a link
/// or a huge file there delays only its own end). Until every sender is gone.
async fn forward_exits(
    mut from: mpsc::UnboundedReceiver<ChildExit>,
    to: Report<ChildEvent>,
    root: std::path::PathBuf,
) {
    while let Some(exit) = from.recv().await {
        let (to, root) = (to.clone(), root.clone());
        tokio::spawn(async move {
            let outputs = match exit.succeeded() {
                true => rundir::read_outputs(&root, &exit.uid).await,
                false => Ok(BTreeMap::new()),
            };
            to.send(ChildEvent::Exited(exit, outputs));
        });
    }
}

/// Forwards what the executor or the runtime server reports on a channel of its own type as
/// this module's events, in order, until every sender or the agent is gone.
async fn forward<T>(
    mut from: mpsc::UnboundedReceiver<T>,
    to: Report<ChildEvent>,
    wrap: fn(T) -> ChildEvent,
) {
    while let Some(item) = from.recv().await {
        if !to.send(wrap(item)) {
            return;
        }
    }
}

/// When `spec.timeout` of `run` runs out, counted from its `startTime`, or from now for a
/// task that starts (or is followed again) before its claim is written (an invalid timeout
/// never gets this far: the claim refuses it).
fn deadline_of(run: &Run) -> Option<Instant> {
    let timeout = run.timeout().ok()??;
    let now = jiff::Timestamp::now();
    let started = run
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map_or(now, |t| t.0);
    let ran = now.duration_since(started);
    let ran = Duration::try_from(ran).unwrap_or(Duration::ZERO);
    Some(Instant::now() + timeout.saturating_sub(ran))
}
