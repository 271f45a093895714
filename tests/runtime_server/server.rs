//! `kruntimes-test-runtime-server`: a Runtime Server for the tests, written from the runtime
//! contract (`proto/executor/v1/runtime.proto`), not from runtimed: it is the other side of the
//! wire, the part a Runtime's `runtime` container plays (upstream's Bash and Python images).
//!
//! `Runtime`: an execution runs its `args` as a program (argv, no shell; with an `entrypoint`,
//! `sh ENTRYPOINT ARGS…` in `working_dir`), with `env`, in `working_dir`, in its own process
//! group; `timeout_seconds` ends it Failed; `Cancel` sends the group SIGTERM, then SIGKILL
//! after 5 s. Output is kept whole up to
//! 1 MiB per stream. `Health` reports `running N, most at once M, started K`, which the tests
//! read to prove runtimed never runs more than capacity allows.
//!
//! `FunctionRuntime`: a registration's handler is one of `echo` (returns the input),
//! `upper` (the input in upper case) or `fail-register` (registration fails); invocations count
//! as activity; `idle_timeout_seconds` is runtimed's to enforce, the server only reports
//! `last_activity_unix_nano`.
//!
//! Registrations and working directories are checked as strictly as the Go project's Bash
//! runtime server checks them (a working directory inside `--work-dir`, default `/workspace`).
//!
//! `--spy LISTEN=URL` also serves a spy ([`spy`]) on `LISTEN` in front of runtimed's API at
//! `URL`, printing each request it passes on as a JSON line: a Runtime author's proxy in the Pod,
//! for the single-node cluster's proof that no caller's credential reaches one.
//!
//! Run: `kruntimes-test-runtime-server --listen 127.0.0.1:9091 [--work-dir DIR]
//! [--spy LISTEN=URL]`. It exits on SIGTERM.

// The testkit's spy, taken alone (it depends on nothing of the test world); this server uses
// only its forwarding half.
#[path = "../../testkit/src/spy.rs"]
#[allow(dead_code)]
mod spy;

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::AsyncReadExt;
use tokio::process::Command;
use tonic::{Request, Response, Status};

use kruntimes::runtimed::proto::function_runtime_server::{FunctionRuntime, FunctionRuntimeServer};
use kruntimes::runtimed::proto::runtime_server::{Runtime, RuntimeServer};
use kruntimes::runtimed::proto::*;

/// Output kept per stream of an execution.
const OUTPUT_LIMIT: usize = 1 << 20;
/// Between Cancel's SIGTERM and SIGKILL.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Counts {
    running: usize,
    most: usize,
    started: usize,
}

struct Execution {
    status: StatusResponse,
    /// The process while it runs.
    pid: Option<i32>,
}

#[derive(Default)]
struct Registration {
    id: String,
    handler: String,
    last_activity: i64,
    attempt: i32,
    digest: String,
}

#[derive(Default, Clone)]
struct Server {
    /// `--work-dir`: every working directory lies inside it, as the real servers require.
    work_dir: std::path::PathBuf,
    executions: Arc<Mutex<HashMap<String, Execution>>>,
    counts: Arc<Mutex<Counts>>,
    functions: Arc<Mutex<HashMap<String, Registration>>>,
}

fn now_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

fn failed(id: &str, message: String) -> StatusResponse {
    StatusResponse {
        id: id.to_string(),
        state: ExecutionState::Failed as i32,
        exit_code: -1,
        error_message: message,
        ..Default::default()
    }
}

async fn read_bounded(reader: Option<impl AsyncReadExt + Unpin>) -> String {
    let Some(mut reader) = reader else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = OUTPUT_LIMIT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

impl Server {
    /// Refuses a working directory outside `--work-dir` (an empty one is the server's own
    /// choice, inside it).
    fn inside_work_dir(&self, dir: &str) -> Result<(), Status> {
        let path = std::path::Path::new(dir);
        let inside = path.starts_with(&self.work_dir)
            && !path
                .components()
                .any(|c| c == std::path::Component::ParentDir);
        match dir.is_empty() || inside {
            true => Ok(()),
            false => Err(Status::invalid_argument(format!(
                "working_dir {dir:?} is outside the server's work dir {}",
                self.work_dir.display()
            ))),
        }
    }

    fn finish(&self, id: &str, status: StatusResponse) {
        let mut executions = self.executions.lock().unwrap();
        if let Some(e) = executions.get_mut(id) {
            e.status = status;
            e.pid = None;
        }
        self.counts.lock().unwrap().running -= 1;
    }

    async fn run(self, req: ExecuteRequest) {
        let id = req.id.clone();
        let mut command = if req.entrypoint.is_empty() {
            let mut c = Command::new(&req.args[0]);
            c.args(&req.args[1..]);
            c
        } else {
            let mut c = Command::new("sh");
            c.arg(&req.entrypoint).args(&req.args);
            c
        };
        if !req.working_dir.is_empty() {
            command.current_dir(&req.working_dir);
        }
        command
            .envs(&req.env)
            // Its own process group, so that Cancel reaches a shell's children too.
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => {
                return self.finish(
                    &id,
                    failed(&id, format!("cannot start {:?}: {e}", req.args)),
                );
            }
        };
        {
            let mut executions = self.executions.lock().unwrap();
            if let Some(e) = executions.get_mut(&id) {
                e.pid = child.id().map(|p| p as i32);
                e.status.state = ExecutionState::Running as i32;
            }
        }
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let output =
            tokio::spawn(async move { tokio::join!(read_bounded(stdout), read_bounded(stderr)) });
        let timeout = match req.timeout_seconds {
            t if t > 0 => Duration::from_secs(t as u64),
            _ => Duration::MAX,
        };
        let waited = tokio::time::timeout(timeout, child.wait()).await;
        if waited.is_err()
            && let Some(pid) = child.id()
        {
            // SAFETY: kill(2) of the group of a child this server started and has not reaped.
            unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
            let _ = child.wait().await;
        }
        let (stdout, stderr) = output.await.unwrap_or_default();
        let status = match waited {
            Ok(Ok(exit)) => {
                use std::os::unix::process::ExitStatusExt;
                let code = exit
                    .code()
                    .unwrap_or_else(|| 128 + exit.signal().unwrap_or(0));
                StatusResponse {
                    id: id.clone(),
                    state: if exit.success() {
                        ExecutionState::Succeeded
                    } else {
                        ExecutionState::Failed
                    } as i32,
                    exit_code: code,
                    stdout,
                    stderr,
                    error_message: String::new(),
                }
            }
            Ok(Err(e)) => failed(&id, format!("wait: {e}")),
            Err(_) => StatusResponse {
                stdout,
                stderr,
                ..failed(&id, format!("timed out after {}s", req.timeout_seconds))
            },
        };
        self.finish(&id, status);
    }
}

#[tonic::async_trait]
impl Runtime for Server {
    async fn execute(
        &self,
        req: Request<ExecuteRequest>,
    ) -> Result<Response<ExecuteResponse>, Status> {
        let req = req.into_inner();
        if req.id.is_empty() {
            return Err(Status::invalid_argument("id is empty"));
        }
        if req.args.is_empty() && req.entrypoint.is_empty() {
            return Err(Status::invalid_argument("neither args nor entrypoint"));
        }
        self.inside_work_dir(&req.working_dir)?;
        {
            let mut executions = self.executions.lock().unwrap();
            if executions.contains_key(&req.id) {
                // Idempotent: the execution already exists.
                return Ok(Response::new(ExecuteResponse { id: req.id }));
            }
            executions.insert(
                req.id.clone(),
                Execution {
                    status: StatusResponse {
                        id: req.id.clone(),
                        state: ExecutionState::Pending as i32,
                        ..Default::default()
                    },
                    pid: None,
                },
            );
            let mut counts = self.counts.lock().unwrap();
            counts.running += 1;
            counts.started += 1;
            counts.most = counts.most.max(counts.running);
        }
        let id = req.id.clone();
        tokio::spawn(self.clone().run(req));
        Ok(Response::new(ExecuteResponse { id }))
    }

    async fn status(
        &self,
        req: Request<StatusRequest>,
    ) -> Result<Response<StatusResponse>, Status> {
        let id = req.into_inner().id;
        let executions = self.executions.lock().unwrap();
        match executions.get(&id) {
            Some(e) => Ok(Response::new(e.status.clone())),
            None => Err(Status::not_found(format!("execution {id} not found"))),
        }
    }

    async fn list(&self, _: Request<ListRequest>) -> Result<Response<ListResponse>, Status> {
        let executions = self.executions.lock().unwrap();
        let mut entries: Vec<StatusResponse> =
            executions.values().map(|e| e.status.clone()).collect();
        entries.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(Response::new(ListResponse { entries }))
    }

    async fn cancel(
        &self,
        req: Request<CancelRequest>,
    ) -> Result<Response<CancelResponse>, Status> {
        let id = req.into_inner().id;
        let pid = {
            let executions = self.executions.lock().unwrap();
            match executions.get(&id) {
                Some(e) => e.pid,
                None => return Err(Status::not_found(format!("execution {id} not found"))),
            }
        };
        if let Some(pid) = pid {
            // SAFETY: kill(2) of the process group of a child this server started (its own
            // group, led by the child) and has not reaped.
            unsafe { libc::kill(-pid, libc::SIGTERM) };
            let executions = Arc::clone(&self.executions);
            tokio::spawn(async move {
                tokio::time::sleep(CANCEL_GRACE).await;
                let still = executions.lock().unwrap().get(&id).and_then(|e| e.pid);
                if still == Some(pid) {
                    // SAFETY: as above; the execution still runs under this group.
                    unsafe { libc::kill(-pid, libc::SIGKILL) };
                }
            });
        }
        Ok(Response::new(CancelResponse {}))
    }

    async fn forget(
        &self,
        req: Request<ForgetRequest>,
    ) -> Result<Response<ForgetResponse>, Status> {
        let id = req.into_inner().id;
        let mut executions = self.executions.lock().unwrap();
        match executions.get(&id) {
            None => Ok(Response::new(ForgetResponse {})),
            Some(e) if e.pid.is_some() || e.status.state == ExecutionState::Pending as i32 => Err(
                Status::failed_precondition(format!("execution {id} is running: cancel it first")),
            ),
            Some(_) => {
                executions.remove(&id);
                Ok(Response::new(ForgetResponse {}))
            }
        }
    }

    async fn health(&self, _: Request<HealthRequest>) -> Result<Response<HealthResponse>, Status> {
        let counts = self.counts.lock().unwrap();
        Ok(Response::new(HealthResponse {
            healthy: true,
            message: format!(
                "running {}, most at once {}, started {}",
                counts.running, counts.most, counts.started
            ),
        }))
    }
}

fn registration(run_uid: &str, id: &str) -> Option<FunctionRegistration> {
    Some(FunctionRegistration {
        run_uid: run_uid.to_string(),
        registration_id: id.to_string(),
    })
}

impl Server {
    /// The registration `r` names, or NOT_FOUND.
    fn with_registration<T>(
        &self,
        r: Option<&FunctionRegistration>,
        f: impl FnOnce(&mut Registration) -> T,
    ) -> Result<T, Status> {
        let r = r.ok_or_else(|| Status::invalid_argument("registration is missing"))?;
        let mut functions = self.functions.lock().unwrap();
        match functions.get_mut(&r.run_uid) {
            Some(reg) if reg.id == r.registration_id => Ok(f(reg)),
            _ => Err(Status::not_found(format!(
                "registration {}/{} not found",
                r.run_uid, r.registration_id
            ))),
        }
    }
}

#[tonic::async_trait]
impl FunctionRuntime for Server {
    async fn register_function(
        &self,
        req: Request<RegisterFunctionRequest>,
    ) -> Result<Response<RegisterFunctionResponse>, Status> {
        let req = req.into_inner();
        // As strict as the Go project's Bash runtime server: a registration names its Run,
        // a positive attempt and the digest of what defines it.
        if req.run_uid.is_empty()
            || req.registration_attempt < 1
            || req.registration_digest.is_empty()
            || req.registration_digest.len() > 128
        {
            return Err(Status::invalid_argument(
                "run uid, positive registration attempt, and registration digest (at most 128 bytes) are required",
            ));
        }
        self.inside_work_dir(&req.working_dir)?;
        if !["echo", "upper"].contains(&req.handler.as_str()) {
            return Err(Status::failed_precondition(format!(
                "handler {:?} cannot be loaded (this server knows echo and upper)",
                req.handler
            )));
        }
        let id = format!("{}-{}", req.run_uid, req.registration_attempt);
        let mut functions = self.functions.lock().unwrap();
        let reg = functions.entry(req.run_uid.clone()).or_default();
        // Idempotent per Run UID, attempt and digest: the same attempt resumes the
        // registration; an older attempt is stale; the same attempt defined otherwise is
        // another registration.
        if reg.attempt > req.registration_attempt {
            return Err(Status::failed_precondition("registration attempt is stale"));
        }
        if reg.attempt == req.registration_attempt && reg.digest != req.registration_digest {
            return Err(Status::already_exists(
                "this registration attempt exists with another digest",
            ));
        }
        if reg.id != id {
            *reg = Registration {
                id: id.clone(),
                handler: req.handler,
                last_activity: now_nanos(),
                attempt: req.registration_attempt,
                digest: req.registration_digest,
            };
        }
        Ok(Response::new(RegisterFunctionResponse {
            registration: registration(&req.run_uid, &id),
            state: FunctionRegistrationState::Ready as i32,
        }))
    }

    async fn function_status(
        &self,
        req: Request<FunctionStatusRequest>,
    ) -> Result<Response<FunctionStatusResponse>, Status> {
        let req = req.into_inner();
        let last = self.with_registration(req.registration.as_ref(), |r| r.last_activity)?;
        Ok(Response::new(FunctionStatusResponse {
            registration: req.registration,
            state: FunctionRegistrationState::Ready as i32,
            in_flight: 0,
            last_activity_unix_nano: last,
            fatal_error: String::new(),
        }))
    }

    async fn invoke_function(
        &self,
        req: Request<InvokeFunctionRequest>,
    ) -> Result<Response<InvokeFunctionResponse>, Status> {
        let req = req.into_inner();
        let handler = self.with_registration(req.registration.as_ref(), |r| {
            r.last_activity = now_nanos();
            r.handler.clone()
        })?;
        let output = match handler.as_str() {
            "upper" => req.input.to_ascii_uppercase(),
            _ => req.input.clone(),
        };
        Ok(Response::new(InvokeFunctionResponse {
            registration: req.registration,
            invocation_id: req.invocation_id,
            output,
            content_type: req.content_type,
            outputs: HashMap::from([("handler".to_string(), handler)]),
        }))
    }

    async fn unregister_function(
        &self,
        req: Request<UnregisterFunctionRequest>,
    ) -> Result<Response<UnregisterFunctionResponse>, Status> {
        let req = req.into_inner();
        if let Some(r) = &req.registration {
            let mut functions = self.functions.lock().unwrap();
            if functions
                .get(&r.run_uid)
                .is_some_and(|f| f.id == r.registration_id)
            {
                functions.remove(&r.run_uid);
            }
        }
        Ok(Response::new(UnregisterFunctionResponse {
            registration: req.registration,
        }))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let mut listen = "127.0.0.1:9091".to_string();
    let mut work_dir = std::path::PathBuf::from("/workspace");
    let mut spy = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => listen = args.next().expect("--listen ADDRESS:PORT"),
            "--spy" => spy = Some(args.next().expect("--spy LISTEN=URL")),
            "--work-dir" => work_dir = args.next().expect("--work-dir DIR").into(),
            other => {
                eprintln!(
                    "error: unknown argument {other}; usage: kruntimes-test-runtime-server --listen ADDRESS:PORT [--work-dir DIR] [--spy LISTEN=URL]"
                );
                std::process::exit(2);
            }
        }
    }
    let address = listen
        .parse()
        .unwrap_or_else(|e| panic!("--listen {listen}: {e}"));
    if let Some(spy) = spy {
        let (at, to) = spy.split_once('=').expect("--spy LISTEN=URL");
        let listen = at.parse().unwrap_or_else(|e| panic!("--spy {at}: {e}"));
        spy::Spy::start(spy::Options {
            listen,
            to: to.to_string(),
            token_header: None,
            print: true,
        })
        .await;
        eprintln!("spying on {at}, in front of {to}");
    }
    let server = Server {
        work_dir,
        ..Server::default()
    };
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler");
    eprintln!("kruntimes-test-runtime-server listening on {listen}");
    tonic::transport::Server::builder()
        .add_service(RuntimeServer::new(server.clone()))
        .add_service(FunctionRuntimeServer::new(server))
        .serve_with_shutdown(address, async move {
            term.recv().await;
        })
        .await
        .expect("serve");
}
