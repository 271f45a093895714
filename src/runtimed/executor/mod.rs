//! The executor: turns a Run's `mode.task` into a child process, streams its output to the
//! agent's log and reports how it ended.
//!
//! [`prepare()`] (its own file) and [`ExitStatus::terminal`] are pure (validation and the
//! outcome mapping); [`spawn`] is the only place that starts processes. This module never
//! talks to the API server and never decides whether a Run may start: admission is the
//! agent's job.

use std::os::unix::process::ExitStatusExt as _;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use thiserror::Error;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, BufReader};
use tokio::process::Command;
use tokio::sync::{mpsc, oneshot};

use super::runlog::SharedWriter;
use crate::api::status::{Outcome, reasons};

mod prepare;
pub use prepare::{
    Function, INLINE_SCRIPT, Prepared, SourceFile, TaskError, is_inside, prepare, prepare_function,
};

/// Longest output line logged as one record; longer lines are split.
const MAX_LINE: u64 = 16 * 1024;

/// Why a prepared task did not start.
#[derive(Debug, Error)]
pub enum SpawnError {
    #[error("cannot start {program:?}: {source}")]
    Start {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start {program:?} in working directory {dir:?}: {source}")]
    StartIn {
        program: String,
        dir: String,
        #[source]
        source: std::io::Error,
    },
}

/// How a child process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    Code(i32),
    Signal(i32),
}

impl From<std::process::ExitStatus> for ExitStatus {
    fn from(status: std::process::ExitStatus) -> Self {
        match (status.code(), status.signal()) {
            (Some(code), _) => ExitStatus::Code(code),
            (None, Some(signal)) => ExitStatus::Signal(signal),
            // Neither is only possible for stopped processes, which `wait` does not report.
            (None, None) => ExitStatus::Code(-1),
        }
    }
}

/// The terminal status a Run gets for its process's exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terminal {
    pub outcome: Outcome,
    pub reason: &'static str,
    pub message: String,
    pub exit_code: Option<i32>,
}

impl ExitStatus {
    /// Exit 0 is Succeeded; any other code, or a signal (reported as 128 + signal, like a
    /// container), is Failed with [`reasons::EXIT_CODE`].
    pub fn terminal(self) -> Terminal {
        match self {
            ExitStatus::Code(0) => Terminal {
                outcome: Outcome::Succeeded,
                reason: reasons::SUCCEEDED,
                message: crate::api::status::SUCCESS_MESSAGE.into(),
                exit_code: Some(0),
            },
            ExitStatus::Code(code) => Terminal {
                outcome: Outcome::Failed,
                reason: reasons::EXIT_CODE,
                message: format!("the process exited with code {code}"),
                exit_code: Some(code),
            },
            ExitStatus::Signal(signal) => Terminal {
                outcome: Outcome::Failed,
                reason: reasons::EXIT_CODE,
                message: format!("the process was terminated by signal {signal}"),
                exit_code: Some(128 + signal),
            },
        }
    }
}

/// How a Run's execution ended: its own process, or an execution on the Pod's runtime server
/// (already mapped to the Run's terminal status).
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    Process(ExitStatus),
    Server(Terminal),
}

/// Sent to the agent when a child is gone.
#[derive(Debug)]
pub struct ChildExit {
    pub uid: String,
    /// How it ended, or why following it failed.
    pub status: Result<Exit, String>,
    /// Whether the process ended because [`ChildHandle::kill`] was called.
    pub killed: bool,
}

impl ChildExit {
    /// Whether the execution succeeded (its outputs are then read).
    pub fn succeeded(&self) -> bool {
        match &self.status {
            Ok(Exit::Process(status)) => status.terminal().outcome == Outcome::Succeeded,
            Ok(Exit::Server(terminal)) => terminal.outcome == Outcome::Succeeded,
            Err(_) => false,
        }
    }
}

/// The agent's handle on a running child: a process of runtimed's, or an execution on the
/// runtime server (`pid` is `None`; stopping it is the server's `Cancel`).
#[derive(Debug)]
pub struct ChildHandle {
    pid: Option<u32>,
    kill: Option<oneshot::Sender<()>>,
    /// For an execution on the runtime server: asks its follower to `Cancel` it; for a child
    /// that fetches its source first: to stop the fetch, or what it started then.
    cancel: Option<mpsc::UnboundedSender<()>>,
    /// Whether the execution is the runtime server's (set once a staged child starts one).
    remote: Arc<AtomicBool>,
}

impl ChildHandle {
    /// Asks for the process and its process group to be killed (SIGKILL); its [`ChildExit`]
    /// follows. Idempotent.
    pub fn kill(&mut self) {
        if let Some(tx) = self.kill.take() {
            let _ = tx.send(());
        }
    }

    /// Whether [`Self::kill`] has been called.
    pub fn kill_requested(&self) -> bool {
        self.kill.is_none()
    }

    /// Asks the process and its process group to stop (SIGTERM, what the kubelet sends
    /// first); [`Self::kill`] ends it if it does not within its grace.
    pub fn terminate(&self) {
        if let Some(pgid) = self.pid {
            let _ = crate::util::process::signal_group(pgid, crate::util::process::Signal::Term);
        }
        if let Some(cancel) = &self.cancel {
            let _ = cancel.send(());
        }
    }

    /// The handle of an execution on the runtime server, followed by a task that takes
    /// `kill` and `cancel` requests.
    pub fn remote(kill: oneshot::Sender<()>, cancel: mpsc::UnboundedSender<()>) -> Self {
        ChildHandle {
            pid: None,
            kill: Some(kill),
            cancel: Some(cancel),
            remote: Arc::new(AtomicBool::new(true)),
        }
    }

    /// Whether this child is an execution on the runtime server.
    pub fn is_remote(&self) -> bool {
        self.remote.load(Ordering::SeqCst)
    }
}

/// A child that must `fetch` its source before `start` makes the real one (a process, an
/// execution or a registration on the runtime server). Until then a terminate stops the
/// fetch and the child ends as a process that SIGTERM ended, a kill as one SIGKILL ended;
/// after, both reach the started child. A failed fetch or start ends it `StartFailed`.
pub fn staged(
    uid: &str,
    fetch: impl Future<Output = Result<(), String>> + Send + 'static,
    start: impl FnOnce() -> Result<ChildHandle, SpawnError> + Send + 'static,
    exits: mpsc::UnboundedSender<ChildExit>,
) -> ChildHandle {
    let (kill_tx, mut kill_rx) = oneshot::channel::<()>();
    let (cancel_tx, mut cancel_rx) = mpsc::unbounded_channel::<()>();
    let remote = Arc::new(AtomicBool::new(false));
    let shared = remote.clone();
    let uid = uid.to_string();
    tokio::spawn(async move {
        let ended = |status: Result<Exit, String>, killed: bool| ChildExit {
            uid: uid.clone(),
            status,
            killed,
        };
        let start_failed = |message: String| {
            Ok(Exit::Server(Terminal {
                outcome: Outcome::Failed,
                reason: reasons::START_FAILED,
                message,
                exit_code: None,
            }))
        };
        // Dropping the fetch (another branch won) interrupts it. A receiver is polled again
        // only while open: a oneshot must not be polled after it answered.
        let mut kill_open = true;
        let mut fetch = std::pin::pin!(fetch);
        let fetched = loop {
            tokio::select! {
                fetched = &mut fetch => break fetched,
                killed = &mut kill_rx, if kill_open => {
                    kill_open = false;
                    if killed.is_ok() {
                        let _ = exits.send(ended(Ok(Exit::Process(ExitStatus::Signal(libc::SIGKILL))), true));
                        return;
                    }
                }
                Some(()) = cancel_rx.recv() => {
                    let _ = exits.send(ended(Ok(Exit::Process(ExitStatus::Signal(libc::SIGTERM))), false));
                    return;
                }
            }
        };
        if let Err(message) = fetched {
            let _ = exits.send(ended(start_failed(message), false));
            return;
        }
        let mut child = match start() {
            Ok(child) => child,
            Err(e) => {
                let _ = exits.send(ended(start_failed(e.to_string()), false));
                return;
            }
        };
        shared.store(child.is_remote(), Ordering::SeqCst);
        // Until the agent drops this handle (the child ended, or was let go of).
        loop {
            tokio::select! {
                killed = &mut kill_rx, if kill_open => {
                    kill_open = false;
                    if killed.is_ok() {
                        child.kill();
                    }
                }
                cancel = cancel_rx.recv() => match cancel {
                    Some(()) => child.terminate(),
                    None => break,
                },
            }
        }
    });
    ChildHandle {
        pid: None,
        kill: Some(kill_tx),
        cancel: Some(cancel_tx),
        remote,
    }
}

/// Starts `task` for the Run `run_name` (UID `uid`) in its own process group (so a terminal's
/// Ctrl-C reaches only runtimed, which then applies the shutdown grace). Output lines are
/// logged prefixed with the Run name; the exit is sent on `exits`.
pub fn spawn(
    task: &Prepared,
    run_name: &str,
    uid: &str,
    log: Option<SharedWriter>,
    exits: mpsc::UnboundedSender<ChildExit>,
) -> Result<ChildHandle, SpawnError> {
    let mut cmd = Command::new(&task.program);
    // The container's environment (what the template declares for its tasks, the Pod's
    // identity), but nothing of runtimed's own (its credentials, its settings), then the Run's
    // and the contract's variables.
    cmd.env_clear()
        .envs(inherited(std::env::vars_os()))
        .envs(task.env.iter().map(|(k, v)| (k, v)))
        .args(&task.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(dir) = &task.working_dir {
        cmd.current_dir(dir);
    }
    let mut child =
        super::reaper::spawn_tracked(&mut cmd).map_err(|source| match &task.working_dir {
            Some(dir) => SpawnError::StartIn {
                program: task.program.clone(),
                dir: dir.clone(),
                source,
            },
            None => SpawnError::Start {
                program: task.program.clone(),
                source,
            },
        })?;
    let pid = child.id();
    // Both pipes were asked for (Stdio::piped above): the streams are there.
    let streams = [
        tokio::spawn(stream_lines(
            child.stdout.take().expect("a piped stdout"),
            run_name.to_string(),
            "stdout",
            log.clone(),
        )),
        tokio::spawn(stream_lines(
            child.stderr.take().expect("a piped stderr"),
            run_name.to_string(),
            "stderr",
            log.clone(),
        )),
    ];
    let (kill_tx, mut kill_rx) = oneshot::channel::<()>();
    let uid = uid.to_string();
    tokio::spawn(async move {
        let (status, killed) = tokio::select! {
            status = child.wait() => (status, false),
            // A dropped sender disables this branch instead of killing the child.
            Ok(()) = &mut kill_rx => {
                // The whole process group: a shell's own children must not outlive the Run.
                // The group is the child's own (see process_group(0) above), so it cannot
                // reach runtimed itself.
                if let Some(pgid) = pid {
                    let _ = crate::util::process::signal_group(pgid, crate::util::process::Signal::Kill);
                }
                let _ = child.start_kill();
                (child.wait().await, true)
            }
        };
        if let Some(pid) = pid {
            super::reaper::untrack(pid);
        }
        // The output written before the exit is in the log before the exit is reported (a
        // background process that keeps the pipes open is not waited for past a moment).
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(1),
            futures::future::join_all(streams),
        )
        .await;
        if let Some(log) = &log {
            log.lock().expect("run log").done();
        }
        let status = status
            .map(|s| Exit::Process(ExitStatus::from(s)))
            .map_err(|e| e.to_string());
        let _ = exits.send(ChildExit {
            uid,
            status,
            killed,
        });
    });
    Ok(ChildHandle {
        pid,
        kill: Some(kill_tx),
        cancel: None,
        remote: Arc::new(AtomicBool::new(false)),
    })
}

/// The prefixes of runtimed's own variables, which no task inherits: its settings
/// (`KRUNTIMES_*`, the artifact store's among them) and its credentials (`AWS_*`, where the
/// Runtime controller puts the store's Secret and the AWS credential chain reads them).
pub const RUNTIMEDS_OWN_PREFIXES: [&str; 2] = ["KRUNTIMES_", "AWS_"];
/// runtimed's own variables by name.
pub const RUNTIMEDS_OWN: [&str; 1] = ["KUBECONFIG"];

/// What a task inherits of the container's environment `vars`: all of it (the template's
/// variables for its tasks, the Pod's identity, PATH and HOME, as the Go project's runtime
/// servers pass theirs on) but runtimed's own variables, and a default PATH when there is none.
fn inherited(
    vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    let mut kept: Vec<_> = vars
        .filter(|(name, _)| {
            let name = name.to_string_lossy();
            !RUNTIMEDS_OWN.contains(&name.as_ref())
                && !RUNTIMEDS_OWN_PREFIXES.iter().any(|p| name.starts_with(p))
        })
        .collect();
    if !kept.iter().any(|(name, _)| name == "PATH") {
        kept.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    kept
}

/// Logs every line of `reader` as `[run] line` at info level, with the stream as a field, and
/// appends it to the Run's log.
async fn stream_lines(
    reader: impl AsyncRead + Unpin,
    run: String,
    stream: &'static str,
    log: Option<SharedWriter>,
) {
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match (&mut reader)
            .take(MAX_LINE)
            .read_until(b'\n', &mut buf)
            .await
        {
            Ok(0) => return,
            Ok(_) => {
                let line = String::from_utf8_lossy(&buf);
                let line = line.trim_end_matches(['\n', '\r']);
                tracing::info!(run = %run, stream, "[{run}] {line}");
                if let Some(log) = &log {
                    log.lock().expect("run log").line(line);
                }
            }
            Err(e) => {
                tracing::warn!(run = %run, stream, "[{run}] cannot read {stream}: {e}");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
