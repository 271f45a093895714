//! runtimed's runtime-server backend: a claimed Run's task becomes an execution on the Pod's
//! runtime server (the `runtime` container, `localhost:<Runtime.spec.port>`), followed until it
//! ends and reported to the agent exactly as a child process is ([`ChildExit`]), so admission,
//! preemption and the terminal write are the agent's, unchanged.
//!
//! Owns the calls of the `Runtime` service (Execute, Status, List, Cancel, Forget, Health) and
//! nothing else: it never talks to the API server and never decides whether a Run may start.
//! The generated code is [`super::proto`]; how a Run maps onto it is [`super::contract`]'s.

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

use super::contract;
use super::executor::{ChildExit, ChildHandle, Exit, Terminal};
use super::runlog::SharedWriter;
use crate::api::status::{Outcome, reasons};
use crate::runtimed::proto::function_runtime_client::FunctionRuntimeClient;
use crate::runtimed::proto::runtime_client::RuntimeClient;
use crate::runtimed::proto::{
    CancelRequest, ExecuteRequest, ForgetRequest, FunctionRegistration, FunctionRegistrationState,
    FunctionStatusRequest, HealthRequest, InvokeFunctionRequest, InvokeFunctionResponse,
    ListRequest, RegisterFunctionRequest, StatusRequest, UnregisterFunctionRequest,
};

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
    functions: FunctionRuntimeClient<Channel>,
    address: String,
}

/// Between two `FunctionStatus` calls of a Ready function Run (its idle timeout is checked
/// at this resolution).
const FUNCTION_STATUS_EVERY: Duration = Duration::from_secs(1);

impl RuntimeServer {
    /// A lazily connected client of `address` (`host:port`, plain HTTP/2 on the Pod's
    /// loopback); the first call connects.
    pub fn new(address: &str) -> Result<Self, String> {
        let endpoint = Endpoint::from_shared(format!("http://{address}"))
            .map_err(|e| format!("--runtime-server {address:?} is not HOST:PORT: {e}"))?
            .connect_timeout(Duration::from_secs(2))
            .timeout(CALL_TIMEOUT);
        let channel = endpoint.connect_lazy();
        Ok(RuntimeServer {
            client: RuntimeClient::new(channel.clone()),
            functions: FunctionRuntimeClient::new(channel),
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

    /// Asks the server for its `Health` every [`HEALTH_EVERY`] until the process ends and
    /// calls `changed` with each new answer (false while it cannot be reached), the first
    /// one included. runtimed's readiness includes it.
    pub fn watch_health(&self, changed: impl Fn(bool) + Send + 'static) {
        let server = self.clone();
        tokio::spawn(async move {
            let mut last: Option<Result<(), String>> = None;
            loop {
                let now = match server.client.clone().health(HealthRequest {}).await {
                    Ok(r) if r.get_ref().healthy => Ok(()),
                    Ok(r) => Err(format!("unhealthy: {}", r.get_ref().message)),
                    Err(e) => Err(format!("unreachable: {}", e.message())),
                };
                if last.as_ref().map(Result::is_ok) != Some(now.is_ok()) {
                    changed(now.is_ok());
                }
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
        log: Option<SharedWriter>,
        exits: mpsc::UnboundedSender<ChildExit>,
    ) -> ChildHandle {
        let (kill_tx, kill_rx) = oneshot::channel();
        let (cancel_tx, cancel_rx) = mpsc::unbounded_channel();
        let server = self.clone();
        tokio::spawn(async move {
            let (status, killed) = server
                .run(execute, &id, &run_name, log.as_ref(), kill_rx, cancel_rx)
                .await;
            if let Some(log) = &log {
                log.lock().expect("run log").done();
            }
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
        log: Option<&SharedWriter>,
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
            return (Ok(Exit::Server(terminal)), false);
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
                    if let Some(ended) = contract::ended(&status) {
                        log_output(run_name, "stdout", &status.stdout);
                        log_output(run_name, "stderr", &status.stderr);
                        // The server gives the output at the end: the Run's log gets it then.
                        if let Some(log) = log {
                            let mut log = log.lock().expect("run log");
                            log.text(&status.stdout);
                            log.text(&status.stderr);
                        }
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
        while_unreachable(|| {
            let (mut client, request) = (self.client.clone(), request.clone());
            async move { client.execute(request).await }
        })
        .await
        .map(|_| ())
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

impl RuntimeServer {
    /// Registers a function Run (`RegisterFunction`, idempotent per Run UID and attempt), tells
    /// `ready` (with the registration) once the server reports it ready, then watches it with
    /// `FunctionStatus` until it is released: its idle timeout ends it `Timeout`/`IdleTimeout`,
    /// a fatal error on the server ends it Failed; `terminate` (cancel, timeout, preemption)
    /// or `kill` (deleted) unregisters it. Its end comes on `exits`, as a child's does.
    pub fn serve_function(
        &self,
        request: RegisterFunctionRequest,
        idle: Option<Duration>,
        uid: String,
        ready: mpsc::UnboundedSender<(String, FunctionRegistration)>,
        exits: mpsc::UnboundedSender<ChildExit>,
    ) -> ChildHandle {
        let (kill_tx, kill_rx) = oneshot::channel();
        let (cancel_tx, cancel_rx) = mpsc::unbounded_channel();
        let server = self.clone();
        tokio::spawn(async move {
            let (status, killed) = server
                .function(request, idle, &uid, ready, kill_rx, cancel_rx)
                .await;
            let _ = exits.send(ChildExit {
                uid,
                status,
                killed,
            });
        });
        ChildHandle::remote(kill_tx, cancel_tx)
    }

    async fn function(
        &self,
        request: RegisterFunctionRequest,
        idle: Option<Duration>,
        uid: &str,
        ready: mpsc::UnboundedSender<(String, FunctionRegistration)>,
        mut kill: oneshot::Receiver<()>,
        mut cancel: mpsc::UnboundedReceiver<()>,
    ) -> (Result<Exit, String>, bool) {
        let end = |outcome, reason, message: String| {
            Ok(Exit::Server(Terminal {
                outcome,
                reason,
                message,
                exit_code: None,
            }))
        };
        let registered = match self.register(request).await {
            Ok(r) => r,
            Err(e) => {
                let message = format!(
                    "the runtime server {} could not register the function: {}",
                    self.address,
                    bounded_message(&e)
                );
                return (end(Outcome::Failed, reasons::START_FAILED, message), false);
            }
        };
        let Some(registration) = registered.registration else {
            let message = format!(
                "the runtime server {} registered the function without a registration id",
                self.address
            );
            return (end(Outcome::Failed, reasons::START_FAILED, message), false);
        };
        if registered.state == FunctionRegistrationState::Failed as i32 {
            let message = format!(
                "the runtime server {} failed the registration",
                self.address
            );
            return (end(Outcome::Failed, reasons::START_FAILED, message), false);
        }
        let _ = ready.send((uid.to_string(), registration.clone()));
        let mut functions = self.functions.clone();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(FUNCTION_STATUS_EVERY) => {}
                Ok(()) = &mut kill => {
                    self.unregister(&registration).await;
                    let message = "unregistered: the Run is gone".to_string();
                    return (end(Outcome::Failed, reasons::FAILED, message), true);
                }
                Some(()) = cancel.recv() => {
                    self.unregister(&registration).await;
                    let message = "unregistered".to_string();
                    return (end(Outcome::Succeeded, reasons::SUCCEEDED, message), false);
                }
            }
            let status = functions
                .function_status(FunctionStatusRequest {
                    registration: Some(registration.clone()),
                })
                .await;
            match status {
                Ok(s) => {
                    let s = s.into_inner();
                    if s.state == FunctionRegistrationState::Failed as i32
                        || !s.fatal_error.is_empty()
                    {
                        self.unregister(&registration).await;
                        let fatal: String = s.fatal_error.chars().take(300).collect();
                        let message = format!("the function failed on the runtime server: {fatal}");
                        return (end(Outcome::Failed, reasons::FAILED, message), false);
                    }
                    if let Some(idle) = idle {
                        let last = UNIX_EPOCH
                            + Duration::from_nanos(s.last_activity_unix_nano.max(0) as u64);
                        let quiet = SystemTime::now().duration_since(last).unwrap_or_default();
                        if s.in_flight == 0 && quiet >= idle {
                            self.unregister(&registration).await;
                            let message = format!(
                                "no invocation for {}s (spec.mode.function.idleTimeoutSeconds); unregistered",
                                idle.as_secs()
                            );
                            return (end(Outcome::Timeout, reasons::IDLE_TIMEOUT, message), false);
                        }
                    }
                }
                Err(e) if e.code() == Code::NotFound => {
                    return (
                        Err(format!(
                            "the runtime server {} no longer knows the function's registration",
                            self.address
                        )),
                        false,
                    );
                }
                Err(e) => {
                    tracing::warn!(
                        "FunctionStatus of Run {uid} on the runtime server: {}; retrying",
                        e.message()
                    );
                }
            }
        }
    }

    /// `RegisterFunction`, retried while the server cannot be reached.
    async fn register(
        &self,
        request: RegisterFunctionRequest,
    ) -> Result<crate::runtimed::proto::RegisterFunctionResponse, Status> {
        while_unreachable(|| {
            let (mut functions, request) = (self.functions.clone(), request.clone());
            async move { functions.register_function(request).await }
        })
        .await
        .map(tonic::Response::into_inner)
    }

    async fn unregister(&self, registration: &FunctionRegistration) {
        let request = UnregisterFunctionRequest {
            registration: Some(registration.clone()),
            cancel_in_flight: true,
            drain_timeout_millis: 0,
        };
        if let Err(e) = self.functions.clone().unregister_function(request).await {
            tracing::warn!(
                "UnregisterFunction of Run {} on the runtime server: {}",
                registration.run_uid,
                e.message()
            );
        }
    }

    /// One invocation of a Ready function Run's registration.
    pub async fn invoke(
        &self,
        registration: &FunctionRegistration,
        input: Vec<u8>,
        content_type: &str,
        timeout: Duration,
    ) -> Result<InvokeFunctionResponse, Status> {
        let request = InvokeFunctionRequest {
            registration: Some(registration.clone()),
            invocation_id: format!(
                "{}-{}",
                registration.run_uid,
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_nanos()
            ),
            input,
            content_type: content_type.to_string(),
            timeout_millis: i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX),
        };
        Ok(self
            .functions
            .clone()
            .invoke_function(request)
            .await?
            .into_inner())
    }
}

/// `call`, retried while the server cannot be reached (it may be starting or restarting):
/// 100 ms doubling to 2 s, with jitter (runtimeds restarted together do not retry in step),
/// for at most [`EXECUTE_RETRY`] in all. Any other answer is final.
async fn while_unreachable<T, Fut>(call: impl FnMut() -> Fut) -> Result<T, Status>
where
    Fut: std::future::Future<Output = Result<T, Status>>,
{
    use backon::Retryable as _;
    let backoff = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(2))
        .with_factor(2.0)
        .with_jitter()
        .with_total_delay(Some(EXECUTE_RETRY))
        .without_max_times();
    call.retry(backoff)
        .when(|e: &Status| matches!(e.code(), Code::Unavailable | Code::DeadlineExceeded))
        .await
}

/// A server's refusal, bounded for a status message.
fn bounded_message(e: &Status) -> String {
    let message: String = e.message().chars().take(300).collect();
    format!("{:?}: {message}", e.code())
}

/// The whole output of an execution goes to runtimed's log, line by line, as a child's does.
fn log_output(run: &str, stream: &'static str, text: &str) {
    for line in text.lines() {
        tracing::info!(run = %run, stream, "[{run}] {line}");
    }
}
