//! The children's side of the runtime server: the executions it held when this agent started
//! (listed once, before anything is planned), which Runs can be followed again from them, the
//! following itself ([`Children::attach`]), a function Run's registration, and, once a Run's
//! last write has landed, its directory removed and its execution `Forget`-ten. Like its
//! parent it never talks to the API server.

use std::collections::HashSet;
use std::sync::Arc;

use backon::Retryable as _;
use kube::ResourceExt as _;

use super::super::contract::execution_id;
use super::super::executor;
use super::super::plan::Attach;
use super::super::remote::RuntimeServer;
use super::super::report::Report;
use super::super::rundir;
use super::super::status_writer::api_backoff;
use super::{ChildEvent, Children, deadline_of};
use crate::api::Run;
use crate::runtimed::proto::{FunctionRegistration, RegisterFunctionRequest};

impl Children {
    /// Whether the runtime server's executions are known (always, without a server).
    pub(in crate::runtimed) fn is_listed(&self) -> bool {
        self.listed.is_some()
    }

    pub(in crate::runtimed) fn on_listed(&mut self, ids: HashSet<String>) {
        self.listed = Some(ids);
    }

    /// Running Runs of this Pod whose execution (of their current attempt) the runtime server
    /// held at start, Scheduled ones too (an earlier runtimed started them and died before
    /// their held claim was written), and, with a server, every admitted function Run:
    /// registering is idempotent per Run UID and attempt, so registering again resumes the
    /// registration it has. Only once listed.
    pub(in crate::runtimed) fn attachable(&self, state: &[Arc<Run>]) -> HashSet<String> {
        let listed = self.listed.as_ref().expect("planned only once listed");
        let functions = self.server.is_some();
        state
            .iter()
            .filter_map(|r| {
                let uid = r.uid()?;
                let function = r.spec.mode.function.is_some();
                let executing = !function && listed.contains(&execution_id(&uid, r.attempt()));
                let attachable = match r.phase() {
                    phase if phase.is_admitted() => executing || (functions && function),
                    crate::api::RunPhase::Scheduled => executing,
                    _ => false,
                };
                attachable.then_some(uid)
            })
            .collect()
    }

    /// Follows again the execution of a Run an earlier runtimed started on the runtime
    /// server (its request is already held again). Returns whether it is followed (false:
    /// its room is to be released).
    pub(in crate::runtimed) fn attach(&mut self, attach: Attach) -> bool {
        let Some(server) = &self.server else {
            return false;
        };
        let Attach { run, request } = attach;
        let (name, uid) = (run.name_any(), run.uid().unwrap_or_default());
        let id = execution_id(&uid, run.attempt());
        if let Some(listed) = self.listed.as_mut() {
            listed.remove(&id);
        }
        let function = run
            .spec
            .mode
            .function
            .as_ref()
            .map(|f| executor::prepare_function(f, &run.spec.env, run.spec.source.as_ref()))
            .map(|task| task.map(|task| self.layout(&run).apply(task)));
        let registered = function.is_some();
        let handle = match function {
            None => {
                tracing::info!(run = %name, "re-attached to execution {id} of Run {name} on the runtime server, holding {request}");
                server.follow(
                    None,
                    id.clone(),
                    uid.clone(),
                    name.clone(),
                    Some(self.logs.writer(&name, &uid)),
                    self.exits.clone(),
                )
            }
            Some(Ok(task)) => {
                tracing::info!(run = %name, "registering function Run {name} again on the runtime server (same attempt: it resumes), holding {request}");
                let idle = task.function.as_ref().and_then(|f| f.idle_timeout);
                server.serve_function(
                    register_request(&uid, run.attempt(), &task),
                    idle,
                    uid.clone(),
                    self.ready.clone(),
                    self.exits.clone(),
                )
            }
            // It was valid when it was claimed, and the spec is immutable.
            Some(Err(e)) => {
                tracing::warn!(run = %name, "function Run {name} cannot be registered again: {e}");
                return false;
            }
        };
        let deadline = deadline_of(&run);
        let execution = (!registered).then_some(id);
        self.insert(uid, name, handle, (*run).clone(), deadline, execution);
        true
    }

    /// A function Run's registration is ready: `invoke` may reach it from now on. Returns its
    /// name and the Run as last written, for the Ready write; `None` when it is no child.
    pub(in crate::runtimed) fn on_function_ready(
        &mut self,
        uid: &str,
        registration: FunctionRegistration,
    ) -> Option<(String, Run)> {
        let child = self.children.get(uid)?;
        let name = child.name.clone();
        tracing::info!(run = %name, "function of Run {name} registered ({}); Ready", registration.registration_id);
        self.registrations
            .lock()
            .expect("registrations")
            .insert(name.clone(), registration);
        Some((name, child.last_written.clone()))
    }

    /// `Forget`s the execution of `uid`'s Run, if one waits for it, and removes its directory:
    /// its last write has landed (or none follows).
    pub(in crate::runtimed) fn forget(&mut self, uid: &str) {
        rundir::remove(&self.workspace_root, uid);
        if let (Some(id), Some(server)) = (self.forget.remove(uid), &self.server) {
            let server = server.clone();
            tokio::spawn(async move { server.forget(&id).await });
        }
    }
}

/// Lists the runtime server's executions in the background, retried with [`api_backoff`]
/// until it answers (no Run is planned before), and reports them as [`ChildEvent::Listed`].
pub(super) fn list_executions(server: RuntimeServer, events: Report<ChildEvent>) {
    tokio::spawn(async move {
        let list = || server.list();
        let listed = list
            .retry(api_backoff())
            .notify(|e, _| {
                tracing::warn!(
                    "listing the executions of runtime server {}: {}; retrying (no Run is admitted until it answers)",
                    server.address(),
                    e.message()
                );
            })
            .await;
        // The attempts never run out: an error never comes back.
        if let Ok(ids) = listed {
            tracing::info!(
                "runtime server {} holds {} execution(s)",
                server.address(),
                ids.len()
            );
            events.send(ChildEvent::Listed(ids));
        }
    });
}

/// The `RegisterFunction` call of a function Run's attempt.
pub(super) fn register_request(
    uid: &str,
    attempt: i32,
    task: &executor::Prepared,
) -> RegisterFunctionRequest {
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
        registration_digest: function.map(|f| f.digest.clone()).unwrap_or_default(),
    }
}
