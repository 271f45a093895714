//! The executor: turns a Run's `mode.task` into a child process, streams its output to the
//! agent's log and reports how it ended.
//!
//! [`prepare`] and [`ExitStatus::terminal`] are pure (validation and the outcome mapping);
//! [`spawn`] is the only place that starts processes. This module never talks to the API
//! server and never decides whether a Run may start: admission is the agent's job.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt as _;
use std::process::Stdio;

use k8s_openapi::api::core::v1::EnvVar;
use thiserror::Error;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, BufReader};
use tokio::process::Command;
use tokio::sync::{mpsc, oneshot};

use crate::api::status::{Outcome, reasons};
use crate::api::{CodeSource, TaskMode};

/// Longest output line logged as one record; longer lines are split.
const MAX_LINE: u64 = 16 * 1024;

/// Why a Run's task cannot be executed as written. Permanent: the Run is failed with
/// [`reasons::START_FAILED`] and this message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TaskError {
    #[error("spec.mode.task is not set; a Run needs a task (or a function on a runtime server)")]
    NoTask,
    #[error(
        "spec.mode.function: a function Run needs a Runtime whose Pods serve the runtime contract (a template whose first container is named runtime); this Pod's runtimed runs tasks as its own processes"
    )]
    FunctionWithoutServer,
    #[error("spec.mode.function.handler is not set; name the module.function to register")]
    NoHandler,
    #[error(
        "spec.mode.task has neither entrypoint nor args; one of them must name the program to run"
    )]
    EmptyArgs,
    #[error(
        "spec.source is set; without a runtime server runtimed runs only the task's entrypoint or args (source needs a Runtime whose Pods serve the runtime contract)"
    )]
    Source,
    #[error(
        "spec.env[{name:?}] uses valueFrom, which runtimed does not support; set a plain value instead"
    )]
    EnvValueFrom { name: String },
}

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

/// A validated task, ready to spawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub working_dir: Option<String>,
    /// The task's `entrypoint` as written (`program` is its path to execute): a runtime
    /// server gets the script's name, not a path.
    pub entrypoint: Option<String>,
    /// A function Run's handler (then `program` and `args` are empty): registered on the
    /// runtime server instead of executed.
    pub function: Option<Function>,
}

/// What a function Run registers on the runtime server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// `module.function`.
    pub handler: String,
    /// `idleTimeoutSeconds`: released after this long without an invocation.
    pub idle_timeout: Option<std::time::Duration>,
}

/// Validates `spec.mode.function` and `spec.env` for a registration on the runtime server.
pub fn prepare_function(
    function: &crate::api::FunctionMode,
    env: &[EnvVar],
) -> Result<Prepared, TaskError> {
    let handler = function
        .handler
        .clone()
        .filter(|h| !h.trim().is_empty())
        .ok_or(TaskError::NoHandler)?;
    let env = plain_env(env)?;
    Ok(Prepared {
        program: String::new(),
        args: Vec::new(),
        env,
        working_dir: None,
        entrypoint: None,
        function: Some(Function {
            handler,
            idle_timeout: function
                .idle_timeout_seconds
                .filter(|s| *s > 0)
                .map(|s| std::time::Duration::from_secs(s as u64)),
        }),
    })
}

/// Plain `name`/`value` environment variables (an absent value is the empty string).
fn plain_env(env: &[EnvVar]) -> Result<Vec<(String, String)>, TaskError> {
    env.iter()
        .map(
            |EnvVar {
                 name,
                 value,
                 value_from,
             }| match value_from {
                Some(_) => Err(TaskError::EnvValueFrom { name: name.clone() }),
                None => Ok((name.clone(), value.clone().unwrap_or_default())),
            },
        )
        .collect()
}

/// Validates `spec.mode.task` and `spec.env`: a program (the `entrypoint` with `args` as its
/// arguments, else the first of `args`), plain `name`/`value` environment variables (an
/// absent value is the empty string, as in a Pod) and an optional working directory.
pub fn prepare(
    task: Option<&TaskMode>,
    env: &[EnvVar],
    source: Option<&CodeSource>,
) -> Result<Prepared, TaskError> {
    let task = task.ok_or(TaskError::NoTask)?;
    if source.is_some() {
        return Err(TaskError::Source);
    }
    let (program, args) = match task.entrypoint.as_deref().filter(|e| !e.is_empty()) {
        // A relative script file (the API refuses absolute ones) in the working directory,
        // never a program looked up on PATH.
        Some(entrypoint) => (
            if entrypoint.contains('/') {
                entrypoint.to_string()
            } else {
                format!("./{entrypoint}")
            },
            task.args.as_slice(),
        ),
        None => task
            .args
            .split_first()
            .map(|(program, args)| (program.clone(), args))
            .ok_or(TaskError::EmptyArgs)?,
    };
    let env = plain_env(env)?;
    Ok(Prepared {
        program,
        args: args.to_vec(),
        env,
        working_dir: task.working_dir.clone().filter(|d| !d.is_empty()),
        entrypoint: task.entrypoint.clone().filter(|e| !e.is_empty()),
        function: None,
    })
}

/// The environment variable that names the Run's workspace directory.
pub const ENV_WORKSPACE: &str = "KRUNTIMES_WORKSPACE";

/// Where the PersistentWorkspace `name` lives under the Pod's workspace volume `root`
/// (`/workspace/persistent/<name>` with the default root, as its `status.path` says).
pub fn workspace_dir(root: &std::path::Path, name: &str) -> std::path::PathBuf {
    root.join("persistent").join(name)
}

impl Prepared {
    /// The task run in the workspace directory `dir`: its working directory is `dir` (a
    /// relative `workingDir` is taken below it) and `KRUNTIMES_WORKSPACE` names `dir` unless
    /// the Run sets it.
    pub fn in_workspace(mut self, dir: &std::path::Path) -> Self {
        let working_dir = match self.working_dir.as_deref() {
            Some(d) if std::path::Path::new(d).is_absolute() => d.to_string(),
            Some(d) => dir.join(d).display().to_string(),
            None => dir.display().to_string(),
        };
        self.working_dir = Some(working_dir);
        if !self.env.iter().any(|(k, _)| k == ENV_WORKSPACE) {
            self.env
                .push((ENV_WORKSPACE.to_string(), dir.display().to_string()));
        }
        self
    }
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
                message: "the process exited with code 0".into(),
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

/// How an execution on the runtime server ended: the Run's terminal status and its outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    pub terminal: Terminal,
    /// `stdout` and `stderr` within `contract::OUTPUT_LIMIT` together (cut at a character boundary,
    /// with `outputsTruncated: "true"` when cut), for `status.outputs`.
    pub outputs: BTreeMap<String, String>,
}

/// How a Run's execution ended: its own process, or an execution on the Pod's runtime server
/// (already mapped to the Run's terminal status, with its outputs).
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    Process(ExitStatus),
    Server(Ended),
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

/// The agent's handle on a running child: a process of runtimed's, or an execution on the
/// runtime server (`pid` is `None`; stopping it is the server's `Cancel`).
#[derive(Debug)]
pub struct ChildHandle {
    pub pid: Option<u32>,
    kill: Option<oneshot::Sender<()>>,
    /// For an execution on the runtime server: asks its follower to `Cancel` it.
    cancel: Option<mpsc::UnboundedSender<()>>,
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
            let _ = crate::process::signal_group(pgid, crate::process::Signal::Term);
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
        }
    }

    /// Whether this child is an execution on the runtime server.
    pub fn is_remote(&self) -> bool {
        self.cancel.is_some()
    }
}

/// Starts `task` for the Run `run_name` (UID `uid`) in its own process group (so a terminal's
/// Ctrl-C reaches only runtimed, which then applies the shutdown grace). Output lines are
/// logged prefixed with the Run name; the exit is sent on `exits`.
pub fn spawn(
    task: &Prepared,
    run_name: &str,
    uid: &str,
    exits: mpsc::UnboundedSender<ChildExit>,
) -> Result<ChildHandle, SpawnError> {
    let mut cmd = Command::new(&task.program);
    cmd.args(&task.args)
        .envs(task.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(dir) = &task.working_dir {
        cmd.current_dir(dir);
    }
    let mut child = cmd.spawn().map_err(|source| match &task.working_dir {
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
    if let Some(out) = child.stdout.take() {
        tokio::spawn(stream_lines(out, run_name.to_string(), "stdout"));
    }
    if let Some(err) = child.stderr.take() {
        tokio::spawn(stream_lines(err, run_name.to_string(), "stderr"));
    }
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
                    let _ = crate::process::signal_group(pgid, crate::process::Signal::Kill);
                }
                let _ = child.start_kill();
                (child.wait().await, true)
            }
        };
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
    })
}

/// Logs every line of `reader` as `[run] line` at info level, with the stream as a field.
async fn stream_lines(reader: impl AsyncRead + Unpin, run: String, stream: &'static str) {
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
            }
            Err(e) => {
                tracing::warn!(run = %run, stream, "[{run}] cannot read {stream}: {e}");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EnvVarSource, ObjectFieldSelector};

    fn task(args: &[&str]) -> TaskMode {
        TaskMode {
            args: args.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn prepare_splits_program_and_args_and_keeps_plain_env() {
        let mut t = task(&["sh", "-c", "exit 3"]);
        let env = vec![
            EnvVar {
                name: "A".into(),
                value: Some("1".into()),
                value_from: None,
            },
            EnvVar {
                name: "EMPTY".into(),
                value: None,
                value_from: None,
            },
        ];
        t.working_dir = Some("/tmp".into());
        let p = prepare(Some(&t), &env, None).unwrap();
        assert_eq!(p.program, "sh");
        assert_eq!(p.args, ["-c", "exit 3"]);
        assert_eq!(
            p.env,
            [
                ("A".to_string(), "1".to_string()),
                ("EMPTY".to_string(), String::new())
            ]
        );
        assert_eq!(p.working_dir.as_deref(), Some("/tmp"));
    }

    #[test]
    fn prepare_runs_the_entrypoint_with_every_arg() {
        let mut t = task(&["--epochs", "3"]);
        t.entrypoint = Some("train.sh".into());
        let p = prepare(Some(&t), &[], None).unwrap();
        assert_eq!(
            (p.program.as_str(), p.args),
            ("./train.sh", vec!["--epochs".to_string(), "3".to_string()])
        );
        let source = CodeSource {
            inline: Some("echo hi".into()),
            ..Default::default()
        };
        assert_eq!(
            prepare(Some(&t), &[], Some(&source)),
            Err(TaskError::Source)
        );
    }

    #[test]
    fn prepare_refuses_missing_tasks_empty_args_and_value_from() {
        assert_eq!(prepare(None, &[], None), Err(TaskError::NoTask));
        assert_eq!(
            prepare(Some(&task(&[])), &[], None),
            Err(TaskError::EmptyArgs)
        );
        let t = task(&["true"]);
        let env = vec![EnvVar {
            name: "NODE".into(),
            value: None,
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "spec.nodeName".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        }];
        let err = prepare(Some(&t), &env, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.env[\"NODE\"] uses valueFrom, which runtimed does not support; set a plain value instead"
        );
    }

    #[test]
    fn a_workspace_task_runs_in_its_directory_with_the_variable_set() {
        let root = std::path::Path::new("/w");
        let dir = workspace_dir(root, "ws");
        assert_eq!(dir, std::path::Path::new("/w/persistent/ws"));
        let p = prepare(Some(&task(&["make"])), &[], None).unwrap();
        let p = p.in_workspace(&dir);
        assert_eq!(p.working_dir.as_deref(), Some("/w/persistent/ws"));
        assert_eq!(
            p.env,
            [(
                "KRUNTIMES_WORKSPACE".to_string(),
                "/w/persistent/ws".to_string()
            )]
        );
        let mut t = task(&["make"]);
        t.working_dir = Some("src".into());
        let p = prepare(Some(&t), &[], None).unwrap().in_workspace(&dir);
        assert_eq!(p.working_dir.as_deref(), Some("/w/persistent/ws/src"));
        t.working_dir = Some("/elsewhere".into());
        let p = prepare(Some(&t), &[], None).unwrap().in_workspace(&dir);
        assert_eq!(p.working_dir.as_deref(), Some("/elsewhere"));
    }

    #[test]
    fn exits_map_to_terminal_statuses() {
        let ok = ExitStatus::Code(0).terminal();
        assert_eq!(
            (ok.outcome, ok.reason, ok.exit_code),
            (Outcome::Succeeded, reasons::SUCCEEDED, Some(0))
        );
        let three = ExitStatus::Code(3).terminal();
        assert_eq!(
            (three.outcome, three.reason, three.exit_code),
            (Outcome::Failed, reasons::EXIT_CODE, Some(3))
        );
        assert_eq!(three.message, "the process exited with code 3");
        let killed = ExitStatus::Signal(9).terminal();
        assert_eq!(
            (killed.outcome, killed.exit_code),
            (Outcome::Failed, Some(137))
        );
        assert_eq!(killed.message, "the process was terminated by signal 9");
    }

    async fn run_to_exit(t: &TaskMode, env: &[EnvVar]) -> ChildExit {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let _handle = spawn(&prepare(Some(t), env, None).unwrap(), "r", "uid-1", tx).unwrap();
        rx.recv().await.unwrap()
    }

    #[tokio::test]
    async fn spawn_reports_the_exit_code_with_env_and_working_dir_applied() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = task(&[
            "sh",
            "-c",
            "test \"$KR_X\" = hello && test \"$(pwd -P)\" = \"$KR_DIR\" && exit 3",
        ]);
        let real = dir.path().canonicalize().unwrap().display().to_string();
        let env = vec![
            EnvVar {
                name: "KR_X".into(),
                value: Some("hello".into()),
                value_from: None,
            },
            EnvVar {
                name: "KR_DIR".into(),
                value: Some(real.clone()),
                value_from: None,
            },
        ];
        t.working_dir = Some(real);
        let exit = run_to_exit(&t, &env).await;
        assert_eq!(exit.uid, "uid-1");
        assert_eq!(
            exit.status,
            Ok(Exit::Process(ExitStatus::Code(3))),
            "env or workingDir were not applied"
        );
        assert!(!exit.killed);
    }

    #[tokio::test]
    async fn an_entrypoint_is_the_script_in_the_working_directory_not_a_program_on_path() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("step.sh");
        std::fs::write(&script, "#!/bin/sh\nexit $1\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut t = task(&["5"]);
        t.entrypoint = Some("step.sh".into());
        t.working_dir = Some(dir.path().display().to_string());
        let exit = run_to_exit(&t, &[]).await;
        assert_eq!(exit.status, Ok(Exit::Process(ExitStatus::Code(5))));
    }

    #[tokio::test]
    async fn a_missing_executable_is_a_start_error_naming_it() {
        let (tx, _rx) = mpsc::unbounded_channel();
        let t = prepare(
            Some(&task(&["/nonexistent/kruntimes-no-such-program"])),
            &[],
            None,
        )
        .unwrap();
        let err = spawn(&t, "r", "u", tx).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "cannot start \"/nonexistent/kruntimes-no-such-program\": No such file"
            ),
            "{err}"
        );
    }

    #[tokio::test]
    async fn kill_ends_the_child_and_says_so() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut handle = spawn(
            &prepare(Some(&task(&["sleep", "30"])), &[], None).unwrap(),
            "r",
            "u",
            tx,
        )
        .unwrap();
        assert!(!handle.kill_requested());
        handle.kill();
        handle.kill();
        let exit = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert!(exit.killed);
        assert_eq!(exit.status, Ok(Exit::Process(ExitStatus::Signal(9))));
    }

    #[tokio::test]
    async fn dropping_the_handle_does_not_kill_the_child() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let handle = spawn(
            &prepare(Some(&task(&["sh", "-c", "sleep 0.2; exit 4"])), &[], None).unwrap(),
            "r",
            "u",
            tx,
        )
        .unwrap();
        drop(handle);
        let exit = rx.recv().await.unwrap();
        assert_eq!(exit.status, Ok(Exit::Process(ExitStatus::Code(4))));
        assert!(!exit.killed);
    }
}
