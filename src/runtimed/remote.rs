//! runtimed's runtime-server backend: a claimed Run's task becomes an execution on the Pod's
//! runtime server (the `runtime` container, `localhost:<Runtime.spec.port>`), followed until it
//! ends and reported to the agent exactly as a child process is ([`ChildExit`]), so admission,
//! preemption and the terminal write are the agent's, unchanged.
//!
//! Owns the calls of the `Runtime` service (Execute, Status, List, Cancel, Forget, Health) and
//! nothing else: it never talks to the API server and never decides whether a Run may start.
//! The wire mapping is [`crate::runtime_server`]'s.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

use super::executor::{ChildExit, ChildHandle, Exit, Terminal};
use crate::api::status::{Outcome, reasons};
use crate::runtime_server::proto::runtime_client::RuntimeClient;
use crate::runtime_server::proto::{
    CancelRequest, ExecuteRequest, ForgetRequest, HealthRequest, ListRequest, StatusRequest,
};
use crate::runtime_server::{self, Ended};

/// First and longest pause between two `Status` calls: short at first so quick Runs end
/// quickly, longer for Runs that run for minutes.
const POLL_FIRST: Duration = Duration::from_millis(25);
const POLL_MAX: Duration = Duration::from_millis(500);
/// How long `Execute` is retried while the server is unreachable (starting, restarting).
const EXECUTE_RETRY: Duration = Duration::from_secs(20);
/// Between two `Health` calls.
const HEALTH_EVERY: Duration = Duration::from_secs(2);
/// Each call's own deadline.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The Pod's runtime server, as runtimed reaches it.
#[derive(Clone, Debug)]
pub struct RuntimeServer {
    client: RuntimeClient<Channel>,
    address: String,
}

impl RuntimeServer {
    /// A lazily connected client of `address` (`host:port`, plain HTTP/2 on the Pod's
    /// loopback); the first call connects.
    pub fn new(address: &str) -> Result<Self, String> {
        let endpoint = Endpoint::from_shared(format!("http://{address}"))
            .map_err(|e| format!("--runtime-server {address:?} is not HOST:PORT: {e}"))?
            .connect_timeout(Duration::from_secs(2))
            .timeout(CALL_TIMEOUT);
        Ok(RuntimeServer {
            client: RuntimeClient::new(endpoint.connect_lazy()),
            address: address.to_string(),
        })
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    /// The ids of every execution the server holds (running or terminal).
    pub async fn list(&self) -> Result<HashSet<String>, Status> {
        let listed = self.client.clone().list(ListRequest {}).await?.into_inner();
        Ok(listed.entries.into_iter().map(|e| e.id).collect())
    }

    /// Drops a terminal execution the Run's status now records.
    pub async fn forget(&self, id: &str) {
        let request = ForgetRequest { id: id.to_string() };
        if let Err(e) = self.client.clone().forget(request).await {
            tracing::warn!("Forget of execution {id} on the runtime server: {e}");
        }
    }

    /// Keeps `healthy` at the server's `Health` answer (false while it cannot be reached),
    /// until the process ends. runtimed's readiness includes it.
    pub fn watch_health(&self, healthy: Arc<AtomicBool>) {
        let server = self.clone();
        tokio::spawn(async move {
            let mut last: Option<Result<(), String>> = None;
            loop {
                let now = match server.client.clone().health(HealthRequest {}).await {
                    Ok(r) if r.get_ref().healthy => Ok(()),
                    Ok(r) => Err(format!("unhealthy: {}", r.get_ref().message)),
                    Err(e) => Err(format!("unreachable: {}", e.message())),
                };
                healthy.store(now.is_ok(), Ordering::Relaxed);
                if last.as_ref() != Some(&now) {
                    match &now {
                        Ok(()) => tracing::info!("runtime server {} is healthy", server.address),
                        Err(why) => tracing::warn!(
                            "runtime server {} is {why}; runtimed reports not ready",
                            server.address
                        ),
                    }
                }
                last = Some(now);
                tokio::time::sleep(HEALTH_EVERY).await;
            }
        });
    }

    /// Starts (`execute` given) or re-attaches to (`None`) the execution `id` of the Run
    /// `uid` and follows it in the background; its end comes on `exits`. `kill` on the handle
    /// cancels it and reports it killed; `terminate` cancels it (the server applies its own
    /// grace).
    pub fn follow(
        &self,
        execute: Option<ExecuteRequest>,
        id: String,
        uid: String,
        run_name: String,
        exits: mpsc::UnboundedSender<ChildExit>,
    ) -> ChildHandle {
        let (kill_tx, kill_rx) = oneshot::channel();
        let (cancel_tx, cancel_rx) = mpsc::unbounded_channel();
        let server = self.clone();
        tokio::spawn(async move {
            let (status, killed) = server
                .run(execute, &id, &run_name, kill_rx, cancel_rx)
                .await;
            let _ = exits.send(ChildExit {
                uid,
                status,
                killed,
            });
        });
        ChildHandle::remote(kill_tx, cancel_tx)
    }

    async fn run(
        &self,
        execute: Option<ExecuteRequest>,
        id: &str,
        run_name: &str,
        mut kill: oneshot::Receiver<()>,
        mut cancel: mpsc::UnboundedReceiver<()>,
    ) -> (Result<Exit, String>, bool) {
        if let Some(request) = execute
            && let Err(e) = self.execute(request).await
        {
            let terminal = Terminal {
                outcome: Outcome::Failed,
                reason: reasons::START_FAILED,
                message: format!(
                    "the runtime server {} refused to execute the task: {}",
                    self.address,
                    bounded_message(&e)
                ),
                exit_code: None,
            };
            return (
                Ok(Exit::Server(Ended {
                    terminal,
                    outputs: Default::default(),
                })),
                false,
            );
        }
        let mut client = self.client.clone();
        let mut pause = POLL_FIRST;
        let mut killed = false;
        let mut warned = false;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                Ok(()) = &mut kill, if !killed => {
                    killed = true;
                    self.cancel(id).await;
                    continue;
                }
                Some(()) = cancel.recv() => {
                    self.cancel(id).await;
                    continue;
                }
            }
            pause = (pause * 2).min(POLL_MAX);
            match client.status(StatusRequest { id: id.to_string() }).await {
                Ok(status) => {
                    let status = status.into_inner();
                    if let Some(ended) = runtime_server::ended(&status) {
                        log_output(run_name, "stdout", &status.stdout);
                        log_output(run_name, "stderr", &status.stderr);
                        return (Ok(Exit::Server(ended)), killed);
                    }
                    warned = false;
                }
                Err(e) if e.code() == Code::NotFound => {
                    return (
                        Err(format!(
                            "the runtime server {} no longer knows execution {id}",
                            self.address
                        )),
                        killed,
                    );
                }
                // Unreachable or failing for now (restarting): keep asking; the Pod's
                // readiness already says so.
                Err(e) => {
                    if !warned {
                        tracing::warn!(run = %run_name, "Status of execution {id} on the runtime server: {}; retrying", e.message());
                        warned = true;
                    }
                }
            }
        }
    }

    /// `Execute`, retried while the server cannot be reached (it may still be starting);
    /// any other refusal is final. An id the server already holds is not started twice.
    async fn execute(&self, request: ExecuteRequest) -> Result<(), Status> {
        let deadline = tokio::time::Instant::now() + EXECUTE_RETRY;
        let mut pause = Duration::from_millis(100);
        loop {
            match self.client.clone().execute(request.clone()).await {
                Ok(_) => return Ok(()),
                Err(e)
                    if matches!(e.code(), Code::Unavailable | Code::DeadlineExceeded)
                        && tokio::time::Instant::now() + pause < deadline =>
                {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn cancel(&self, id: &str) {
        let request = CancelRequest { id: id.to_string() };
        if let Err(e) = self.client.clone().cancel(request).await {
            tracing::warn!(
                "Cancel of execution {id} on the runtime server: {}",
                e.message()
            );
        }
    }
}

/// A server's refusal, bounded for a status message.
fn bounded_message(e: &Status) -> String {
    let message: String = e.message().chars().take(300).collect();
    format!("{:?}: {message}", e.code())
}

/// The whole output of an execution goes to runtimed's log, line by line, as a child's does
/// (`status.outputs` keeps only a bounded part).
fn log_output(run: &str, stream: &'static str, text: &str) {
    for line in text.lines() {
        tracing::info!(run = %run, stream, "[{run}] {line}");
    }
}
