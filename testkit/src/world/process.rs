//! The built binary as the scheduler and as runtimed: started against the test control plane,
//! killed and reaped on drop, so that a failing test leaves no process behind.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruntimes::util::process::{self, Signal};
use kube::ResourceExt as _;

use super::eventually;

/// The scheduler as the built binary; killed on drop.
pub struct SchedulerProcess {
    pub child: Child,
    pub metrics_port: u16,
    pub health_port: u16,
    pub identity: String,
}

impl SchedulerProcess {
    /// Starts `scheduler run` watching only `ns` and waits until `/readyz` answers 200.
    /// `leader_lease_ns`: `Some` enables leader election with its Lease there.
    pub async fn start(
        ns: &str,
        workers: u16,
        leader_lease_ns: Option<&str>,
        identity: &str,
    ) -> Self {
        let kubeconfig = crate::control_plane().kubeconfig.clone();
        Self::start_as(&kubeconfig, ns, workers, leader_lease_ns, identity).await
    }

    /// [`Self::start`] with the identity of another kubeconfig.
    pub async fn start_as(
        kubeconfig: &Path,
        ns: &str,
        workers: u16,
        leader_lease_ns: Option<&str>,
        identity: &str,
    ) -> Self {
        Self::start_with(kubeconfig, ns, workers, leader_lease_ns, identity, &[]).await
    }

    /// [`Self::start_as`] with more `scheduler run` flags (e.g. `--pod-lost-grace=5s`).
    pub async fn start_with(
        kubeconfig: &Path,
        ns: &str,
        workers: u16,
        leader_lease_ns: Option<&str>,
        identity: &str,
        extra: &[&str],
    ) -> Self {
        let metrics_port = crate::free_port();
        let health_port = crate::free_port();
        let mut cmd = Command::new(crate::binary());
        cmd.env("KUBECONFIG", kubeconfig)
            .env(
                "RUST_LOG",
                std::env::var("KRUNTIMES_TEST_SCHEDULER_LOG").unwrap_or("warn".into()),
            )
            .args(["scheduler", "run", "--watch-namespace", ns])
            .arg(format!("--workers={workers}"))
            .arg(format!("--metrics-bind-address=127.0.0.1:{metrics_port}"))
            .arg(format!(
                "--metrics-cert-dir={}",
                crate::serving_cert_dir().display()
            ))
            .arg(format!(
                "--health-probe-bind-address=127.0.0.1:{health_port}"
            ))
            .arg(format!("--leader-election-identity={identity}"))
            .args(extra)
            .stdin(Stdio::null());
        match leader_lease_ns {
            Some(lease_ns) => cmd.args([
                "--leader-elect=true",
                "--leader-election-namespace",
                lease_ns,
                "--leader-election-lease-duration=4s",
            ]),
            None => cmd.arg("--leader-elect=false"),
        };
        let child = cmd.spawn().expect("start the scheduler binary");
        let mut process = Self {
            child,
            metrics_port,
            health_port,
            identity: identity.to_string(),
        };
        let what = "the scheduler to answer /readyz with 200";
        eventually(Duration::from_secs(30), what, async || {
            if let Some(status) = process.child.try_wait().unwrap() {
                panic!("scheduler exited early: {status}");
            }
            match http_get(health_port, "/readyz").await {
                Ok((200, _)) => Ok(()),
                Ok((code, body)) => Err(format!("{code} {body}")),
                Err(e) => Err(e.to_string()),
            }
        })
        .await;
        process
    }

    /// `/metrics` over TLS as the control plane's admin (whom the API server allows to get
    /// it).
    pub async fn metrics(&self) -> String {
        let (code, body) = https_get(self.metrics_port, "/metrics", Some(crate::ADMIN_TOKEN))
            .await
            .expect("scrape /metrics");
        assert_eq!(code, 200, "{body}");
        body
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for SchedulerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `kubectl-kruntimes runtimed` as the agent of one Pod, its output in a log file of its own.
/// Dropped: SIGTERM (so it stops the processes of its Runs), SIGKILL after 5 s, reaped.
pub struct RuntimedProcess {
    child: Child,
    log: PathBuf,
    dir: tempfile::TempDir,
}

impl RuntimedProcess {
    /// Starts `runtimed <args>` as the agent of `pod` with the admin identity.
    pub fn start(pod: &Pod, args: &[&str]) -> Self {
        Self::start_as(&crate::control_plane().kubeconfig, pod, args)
    }

    /// [`Self::start`] with the identity of another kubeconfig.
    pub fn start_as(kubeconfig: &Path, pod: &Pod, args: &[&str]) -> Self {
        Self::start_with_env(kubeconfig, pod, args, &[])
    }

    /// [`Self::start_as`] with more environment variables (credentials of an outside store).
    pub fn start_with_env(
        kubeconfig: &Path,
        pod: &Pod,
        args: &[&str],
        env: &[(String, String)],
    ) -> Self {
        let dir = tempfile::tempdir().expect("a log directory for runtimed");
        let log = dir.path().join("runtimed.log");
        let file = std::fs::File::create(&log).expect("create the runtimed log");
        let child = Command::new(crate::binary())
            .arg("runtimed")
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG")
            .env("POD_NAME", pod.name_any())
            .env("POD_NAMESPACE", pod.namespace().expect("a created Pod"))
            .env("POD_UID", pod.uid().expect("a created Pod"))
            .env("KRUNTIMES_WORKSPACE_ROOT", dir.path().join("workspace"))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("share the runtimed log"))
            .stderr(file)
            .spawn()
            .expect("start kubectl-kruntimes runtimed");
        Self { child, log, dir }
    }

    /// Its workspace volume (`KRUNTIMES_WORKSPACE_ROOT`), unless its args set another.
    pub fn workspace(&self) -> PathBuf {
        self.dir.path().join("workspace")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Everything runtimed logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last 40 lines of the log.
    pub fn log_tail(&self) -> String {
        let text = self.log();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    pub fn sigterm(&self) {
        self.signal(Signal::Term);
    }

    /// Sends `signal` (e.g. [`Signal::Stop`] to freeze the agent, as a hung node would,
    /// [`Signal::Cont`] to thaw it; [`Signal::Kill`] to crash it without reaping it).
    pub fn signal(&self, signal: Signal) {
        // Our own child, not reaped yet.
        process::signal(self.pid(), signal).expect("signal runtimed");
    }

    /// SIGKILLs the agent, as a crash would (its Runs' processes are orphaned, not told), and
    /// reaps it.
    pub fn crash(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the process to exit; returns its status.
    pub async fn wait(&mut self, timeout: Duration) -> ExitStatus {
        eventually(timeout, "runtimed to exit", async || {
            match self.child.try_wait().unwrap() {
                Some(status) => Ok(status),
                None => Err(format!(
                    "still running\n--- runtimed log ---\n{}",
                    self.log_tail()
                )),
            }
        })
        .await
    }
}

impl Drop for RuntimedProcess {
    fn drop(&mut self) {
        // Drop cannot await: the blocking graceful stop.
        process::stop_blocking(&mut self.child, Duration::from_secs(5));
        // A failing test shows what its agents did: their logs are gone with it otherwise.
        if std::thread::panicking() {
            eprintln!(
                "--- runtimed log {}:\n{}",
                self.log.display(),
                self.log_tail()
            );
        }
    }
}

/// The value of one sample line (`name{labels} value`) in a Prometheus text body.
pub fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Waits until runtimed's `/readyz` on the loopback `port` answers 200.
pub async fn wait_ready(port: u16) {
    eventually(
        Duration::from_secs(30),
        "runtimed to be ready",
        async || match http_get(port, "/readyz").await {
            Ok((200, _)) => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
}

/// A minimal HTTP/1.0 GET on loopback, enough for probes and metrics.
pub async fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    http(port, "GET", path, &[], None).await
}

/// runtimed's API (TLS on loopback) as the gateway calls it: with a token of the gateway's
/// account for this Pod alone (`kruntimes-runtimed:<pod uid>`).
#[derive(Debug, Clone)]
pub struct RuntimedApi {
    pub port: u16,
    pub pod_uid: String,
}

impl RuntimedApi {
    /// The API of the runtimed of Pod `pod` in `ns`, on `port`.
    pub async fn of(ns: &crate::world::TestNs, pod: &str, port: u16) -> Self {
        use kube::ResourceExt as _;
        let found: Pod = ns.api::<Pod>().get(pod).await.unwrap();
        RuntimedApi {
            port,
            pod_uid: found.uid().unwrap(),
        }
    }

    /// `method path` with `body` and `token` (none: no Authorization); the answer, or why
    /// none came (runtimed not listening).
    pub async fn try_send(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
        token: Option<&str>,
    ) -> Result<reqwest::Response, reqwest::Error> {
        let client = kruntimes::manager::gateway::upstream::http_client().unwrap();
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let url = format!("https://127.0.0.1:{}{path}", self.port);
        let mut request = client.request(method, url).body(body.to_vec());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send().await
    }

    /// [`Self::try_send`] to a runtimed that listens.
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
        token: Option<&str>,
    ) -> reqwest::Response {
        self.try_send(method, path, body, token).await.unwrap()
    }

    /// `method path` as the gateway; the status code and the body (code 0 and the error when
    /// runtimed does not answer, for polling across a restart).
    pub async fn call(&self, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        let token = crate::tokens::gateway_token(&self.pod_uid).await;
        match self.try_send(method, path, body, Some(&token)).await {
            Ok(answer) => {
                let code = answer.status().as_u16();
                (code, answer.text().await.unwrap_or_default())
            }
            Err(e) => (0, e.to_string()),
        }
    }

    pub async fn get(&self, path: &str) -> (u16, String) {
        self.call("GET", path, &[]).await
    }

    pub async fn post(&self, path: &str, body: &[u8]) -> (u16, String) {
        self.call("POST", path, body).await
    }
}

/// One HTTP/1.0 request on loopback with `authorization` (an `Authorization` header's value,
/// if any); the status code and the body of the answer.
pub async fn http(
    port: u16,
    method: &str,
    path: &str,
    body: &[u8],
    authorization: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    exchange(stream, method, path, body, authorization).await
}

/// `GET path` over TLS on loopback (the server's certificate checked against the control
/// plane's CA, for the name `localhost`), with `token` as bearer token if any; the status code
/// and the body.
pub async fn https_get(
    port: u16,
    path: &str,
    token: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let ca = crate::control_plane().ca_pem.clone();
    https_get_from("127.0.0.1", port, path, token, Some(&ca)).await
}

/// `GET path` over TLS from `host:port`, the certificate checked against `ca` (PEM) for the
/// name `localhost`, or, without `ca`, not checked at all (a self-signed certificate, as a
/// Prometheus scrape with `insecureSkipVerify`); `token` as bearer token if any.
pub async fn https_get_from(
    host: &str,
    port: u16,
    path: &str,
    token: Option<&str>,
    ca: Option<&str>,
) -> std::io::Result<(u16, String)> {
    use rustls::pki_types::pem::PemObject as _;
    use std::sync::Arc;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let config = match ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca.as_bytes()) {
                roots.add(cert.expect("a PEM CA")).unwrap();
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(
                kruntimes::manager::gateway::upstream::AnyServer(provider),
            ))
            .with_no_client_auth(),
    };
    let tcp = tokio::net::TcpStream::connect((host, port)).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await?;
    let authorization = token.map(|t| format!("Bearer {t}"));
    exchange(tls, "GET", path, &[], authorization.as_deref()).await
}

async fn exchange<S>(
    mut stream: S,
    method: &str,
    path: &str,
    body: &[u8],
    authorization: Option<&str>,
) -> std::io::Result<(u16, String)>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let length = match body {
        [] => String::new(),
        _ => format!("Content-Length: {}\r\n", body.len()),
    };
    let authorization = authorization
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    let head =
        format!("{method} {path} HTTP/1.0\r\nHost: localhost\r\n{length}{authorization}\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    let mut raw = Vec::new();
    match stream.read_to_end(&mut raw).await {
        Ok(_) => {}
        // A TLS peer that closes without close_notify after the whole answer.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(e) => return Err(e),
    }
    let buf = String::from_utf8_lossy(&raw);
    let code = buf
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = buf
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((code, body))
}

/// The tests' runtime server (`tests/runtime_server/server.rs`, the contract's other side) as
/// its built binary on a free loopback port; killed on drop.
pub struct RuntimeServerProcess {
    child: Child,
    pub address: String,
    /// The server's `--work-dir`, which is runtimed's `--workspace-root` too (in a Runtime
    /// Pod both containers mount the workspace volume at `/workspace`).
    workspace: tempfile::TempDir,
}

/// What the runtime server's `Health` message reports about its executions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerCounts {
    pub running: usize,
    pub most_at_once: usize,
    pub started: usize,
}

/// How runtimed executes a scenario's Runs: through a runtime server (which of them) or as
/// its own child processes. One vocabulary for the contract, execution and artifact suites.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The tests' runtime server (`kruntimes-test-runtime-server`), whose `Health` counts its
    /// executions.
    Ours,
    /// The Go project's Bash runtime server, built unchanged.
    Bash,
    /// The Go project's Python runtime server, run unchanged: it gives a task's args to Python.
    Python,
    /// runtimed's own child processes.
    Child,
}

impl Backend {
    /// The backend's runtime server, started; none for [`Backend::Child`].
    pub async fn server(self) -> Option<RuntimeServerProcess> {
        match self {
            Backend::Ours => Some(RuntimeServerProcess::start().await),
            Backend::Bash => Some(RuntimeServerProcess::start_bash().await),
            Backend::Python => Some(RuntimeServerProcess::start_python().await),
            Backend::Child => None,
        }
    }

    /// The args of a task that runs `script` in the shell: `sh -c`, or on the Python server
    /// Python replacing itself with that shell (so the server's process is the shell's, and
    /// its cancel and timeout reach the script).
    pub fn shell(self, script: &str) -> Vec<String> {
        match self {
            Backend::Python => vec![
                "-c".into(),
                format!(
                    "import os; os.execvp('sh', ['sh', '-c', {}])",
                    serde_json::to_string(script).expect("a string")
                ),
            ],
            Backend::Ours | Backend::Bash | Backend::Child => {
                vec!["sh".into(), "-c".into(), script.into()]
            }
        }
    }
}

impl RuntimeServerProcess {
    /// Starts the tests' server and waits until it answers `Health`.
    pub async fn start() -> Self {
        let port = crate::free_port();
        let workspace = tempfile::tempdir().expect("a workspace for the runtime server");
        Self::start_on(port, workspace).await
    }

    /// [`Self::start`] on `port`, in `workspace` (a runtimed may be pointed there before).
    pub async fn start_on(port: u16, workspace: tempfile::TempDir) -> Self {
        let mut command = Command::new(crate::built("kruntimes-test-runtime-server"));
        command
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .arg("--work-dir")
            .arg(workspace.path());
        Self::spawn(command, port, workspace).await
    }

    /// Starts the Go project's Bash runtime server (`../shared/runtimes/kruntimes-bash-runtime`,
    /// built unchanged; it needs `bash`) and waits until it answers `Health`. A missing binary
    /// fails the test: it is part of the test environment.
    pub async fn start_bash() -> Self {
        let binary = crate::repository().join("../shared/runtimes/kruntimes-bash-runtime");
        assert!(
            binary.is_file(),
            "{} is missing: the Go project's Bash runtime server is part of the test environment (../shared/runtimes)",
            binary.display()
        );
        let port = crate::free_port();
        let workspace = tempfile::tempdir().expect("a workspace for the runtime server");
        let mut command = Command::new(binary);
        command
            .arg(format!("--port={port}"))
            .arg(format!("--work-dir={}", workspace.path().display()));
        Self::spawn(command, port, workspace).await
    }

    /// Starts the Go project's Python runtime server
    /// (`../shared/runtimes/kruntimes-python-runtime`, unchanged) with the virtual environment
    /// of `tests/runtime_server/python.sh` (grpcio and protobuf, cached by version) and waits
    /// until it answers `Health`. A missing copy fails the test: it is part of the test
    /// environment.
    pub async fn start_python() -> Self {
        let run = crate::repository().join("../shared/runtimes/kruntimes-python-runtime/run");
        assert!(
            run.is_file(),
            "{} is missing: the Go project's Python runtime server is part of the test environment (../shared/runtimes)",
            run.display()
        );
        let venv = crate::go_tools("tests/runtime_server/python.sh");
        let port = crate::free_port();
        let workspace = tempfile::tempdir().expect("a workspace for the runtime server");
        let mut command = Command::new("sh");
        command
            .arg(run)
            .arg(format!("--port={port}"))
            .arg(format!("--work-dir={}", workspace.path().display()))
            .env("PYTHON", venv.join("bin/python"));
        Self::spawn(command, port, workspace).await
    }

    async fn spawn(mut command: Command, port: u16, workspace: tempfile::TempDir) -> Self {
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the runtime server");
        let server = RuntimeServerProcess {
            child,
            address: format!("127.0.0.1:{port}"),
            workspace,
        };
        eventually(
            Duration::from_secs(30),
            "the runtime server to answer Health",
            async || {
                let mut client = server.client().await?;
                client
                    .health(kruntimes::runtimed::proto::HealthRequest {})
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            },
        )
        .await;
        server
    }

    /// `--runtime-server ADDRESS --workspace-root DIR` for runtimed: the server, and the
    /// workspace both see.
    pub fn flag(&self) -> [&str; 4] {
        [
            "--runtime-server",
            self.address.as_str(),
            "--workspace-root",
            self.workspace
                .path()
                .to_str()
                .expect("a UTF-8 temporary path"),
        ]
    }

    /// The workspace volume both the server and runtimed see.
    pub fn workspace(&self) -> &Path {
        self.workspace.path()
    }

    async fn client(
        &self,
    ) -> Result<
        kruntimes::runtimed::proto::runtime_client::RuntimeClient<tonic::transport::Channel>,
        String,
    > {
        kruntimes::runtimed::proto::runtime_client::RuntimeClient::connect(format!(
            "http://{}",
            self.address
        ))
        .await
        .map_err(|e| e.to_string())
    }

    /// The server's own counts, from its `Health` message.
    pub async fn counts(&self) -> Result<ServerCounts, String> {
        let mut client = self.client().await?;
        let health = client
            .health(kruntimes::runtimed::proto::HealthRequest {})
            .await
            .map_err(|e| e.to_string())?
            .into_inner();
        let numbers: Vec<usize> = health
            .message
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse().ok())
            .collect();
        match numbers[..] {
            [running, most_at_once, started] => Ok(ServerCounts {
                running,
                most_at_once,
                started,
            }),
            _ => Err(format!("unexpected Health message {:?}", health.message)),
        }
    }

    /// The ids of the executions the server holds.
    pub async fn executions(&self) -> Result<Vec<String>, String> {
        let mut client = self.client().await?;
        let listed = client
            .list(kruntimes::runtimed::proto::ListRequest {})
            .await
            .map_err(|e| e.to_string())?
            .into_inner();
        Ok(listed.entries.into_iter().map(|e| e.id).collect())
    }
}

impl Drop for RuntimeServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
