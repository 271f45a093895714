//! The real test control plane: etcd and kube-apiserver built from Go modules
//! (`tests/controlplane/build.sh`), started once per test binary on free loopback ports, with a
//! CA-signed serving certificate, token identities and RBAC on.
//!
//! There is no fake here: every test that crosses the API talks to this server. When Go or the
//! module proxy is unavailable the first test that asks for the control plane fails with that
//! message; nothing is skipped.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

pub mod roles;
pub mod tokens;
pub mod world;

use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// Bearer token of the admin identity (group `system:masters`).
pub const ADMIN_TOKEN: &str = "kruntimes-test-admin-token";
/// Bearer token of an identity with no RBAC grants at all.
pub const NOBODY_TOKEN: &str = "kruntimes-test-nobody-token";

/// A running etcd + kube-apiserver pair.
pub struct ControlPlane {
    pub dir: PathBuf,
    /// Where kube-apiserver, etcd and kubectl were built.
    pub bin_dir: PathBuf,
    pub server: String,
    pub kubeconfig: PathBuf,
    /// A kubeconfig whose user has no permissions (for Forbidden paths).
    pub nobody_kubeconfig: PathBuf,
    pub ca_pem: String,
    pub version: String,
}

struct Processes {
    children: Vec<Child>,
    dir: PathBuf,
}

static PROCESSES: Mutex<Option<Processes>> = Mutex::new(None);
static CONTROL_PLANE: OnceLock<Result<ControlPlane, String>> = OnceLock::new();

/// The control plane of this test binary, started on first use.
///
/// Panics with the reason when it cannot be built or started.
pub fn control_plane() -> &'static ControlPlane {
    let result = CONTROL_PLANE.get_or_init(|| {
        // Processes are spawned from a thread that lives as long as the test binary, because
        // PR_SET_PDEATHSIG fires when the spawning *thread* exits, and test threads do.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("control-plane".into())
            .spawn(move || {
                let _ = tx.send(start());
                loop {
                    std::thread::park();
                }
            })
            .expect("spawn the control-plane thread");
        rx.recv()
            .unwrap_or_else(|_| Err("the control-plane thread died".into()))
    });
    match result {
        Ok(cp) => cp,
        Err(e) => panic!("test control plane unavailable: {e}"),
    }
}

/// A client for the admin identity, bound to the calling test's runtime.
pub async fn client() -> Client {
    client_for(&control_plane().kubeconfig).await
}

pub async fn client_for(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).expect("read test kubeconfig");
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("test kubeconfig is usable");
    Client::try_from(config).expect("build client")
}

/// Creates a fresh namespace for one test and returns its name.
pub async fn namespace(client: &Client, prefix: &str) -> String {
    static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("{prefix}-{}-{n}", std::process::id());
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name}
    }))
    .unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
    name
}

/// Path of the built `kubectl-kruntimes` binary.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_kubectl-kruntimes")
}

/// A `kubectl-kruntimes` command pointed at the admin kubeconfig.
pub fn kruntimes() -> Command {
    let cp = control_plane();
    let mut cmd = Command::new(binary());
    cmd.env("KUBECONFIG", &cp.kubeconfig).env("NO_COLOR", "1");
    cmd
}

/// The real `kubectl` built with the control plane (same version), pointed at it.
pub fn kubectl() -> Command {
    let cp = control_plane();
    let mut cmd = Command::new(cp.bin_dir.join("kubectl"));
    cmd.env("KUBECONFIG", &cp.kubeconfig);
    cmd
}

/// Installs the CRDs with the real binary and waits until they are Established.
pub fn install_crds() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let out = kruntimes()
            .args(["install", "--yes", "--timeout", "60s"])
            .output()
            .expect("run kubectl-kruntimes install");
        assert!(
            out.status.success(),
            "install failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("find a free loopback port")
}

fn build() -> Result<PathBuf, String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/controlplane/build.sh");
    let out = Command::new("bash")
        .arg(script)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {script}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{script} failed (exit {}); it needs the Go toolchain and the Go module proxy, see its output above",
            out.status
        ));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

fn spawn(bin: &Path, args: &[String], log: &Path) -> Result<Child, String> {
    let log_file =
        std::fs::File::create(log).map_err(|e| format!("create {}: {e}", log.display()))?;
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().unwrap())
        .stderr(log_file);
    // SAFETY: prctl is async-signal-safe; it only asks the kernel to kill the child when this
    // (long-lived) thread dies, so a crashed or killed test binary leaves no orphans.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn()
        .map_err(|e| format!("start {}: {e}", bin.display()))
}

extern "C" fn stop_at_exit() {
    if let Ok(mut guard) = PROCESSES.lock()
        && let Some(mut procs) = guard.take()
    {
        // apiserver first, then etcd.
        for child in procs.children.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&procs.dir);
    }
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

fn start() -> Result<ControlPlane, String> {
    let started = Instant::now();
    let bin_dir = build()?;
    let built = started.elapsed();
    let dir = tempfile::Builder::new()
        .prefix("kruntimes-cp-")
        .tempdir()
        .map_err(|e| format!("create temp dir: {e}"))?
        .keep();
    write_pki(&dir)?;

    let etcd_port = free_port();
    let peer_port = free_port();
    let api_port = free_port();
    let etcd_url = format!("http://127.0.0.1:{etcd_port}");
    let etcd = spawn(
        &bin_dir.join("etcd"),
        &[
            format!("--data-dir={}", dir.join("etcd").display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-cluster=default=http://127.0.0.1:{peer_port}"),
            "--unsafe-no-fsync=true".into(),
            "--log-level=warn".into(),
        ],
        &dir.join("etcd.log"),
    )?;
    *PROCESSES.lock().unwrap() = Some(Processes {
        children: vec![etcd],
        dir: dir.clone(),
    });
    // SAFETY: registering a plain extern "C" function with no captured state.
    unsafe { libc::atexit(stop_at_exit) };

    let p = |f: &str| dir.join(f).display().to_string();
    let apiserver = spawn(
        &bin_dir.join("kube-apiserver"),
        &[
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={api_port}"),
            format!("--cert-dir={}", p("certs")),
            format!("--tls-cert-file={}", p("serving.crt")),
            format!("--tls-private-key-file={}", p("serving.key")),
            format!("--client-ca-file={}", p("ca.crt")),
            format!("--token-auth-file={}", p("tokens.csv")),
            "--authorization-mode=RBAC".into(),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--allow-privileged=true".into(),
            "--disable-admission-plugins=ServiceAccount".into(),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            format!("--service-account-key-file={}", p("sa.pub")),
            format!("--service-account-signing-key-file={}", p("sa.key")),
            "--enable-priority-and-fairness=false".into(),
            "--v=0".into(),
        ],
        &dir.join("kube-apiserver.log"),
    )?;
    PROCESSES
        .lock()
        .unwrap()
        .as_mut()
        .unwrap()
        .children
        .push(apiserver);

    let server = format!("https://127.0.0.1:{api_port}");
    let ca_pem = std::fs::read_to_string(dir.join("ca.crt")).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let nobody_kubeconfig = dir.join("kubeconfig-nobody");
    write_kubeconfig(&kubeconfig, &server, &ca_pem, ADMIN_TOKEN)?;
    write_kubeconfig(&nobody_kubeconfig, &server, &ca_pem, NOBODY_TOKEN)?;

    let version = wait_ready(&kubeconfig, Duration::from_secs(90)).map_err(|e| {
        format!(
            "{e}\n--- kube-apiserver.log ---\n{}\n--- etcd.log ---\n{}",
            tail(&dir.join("kube-apiserver.log")),
            tail(&dir.join("etcd.log"))
        )
    })?;
    // Written straight to stderr: libtest captures only the print macros.
    let _ = writeln!(
        std::io::stderr(),
        "test control plane: kube-apiserver {version} with etcd at {server} (binaries {} ready in {:.1}s, control plane up in {:.1}s)",
        bin_dir.display(),
        built.as_secs_f64(),
        (started.elapsed() - built).as_secs_f64(),
    );
    Ok(ControlPlane {
        dir,
        bin_dir,
        server,
        kubeconfig,
        nobody_kubeconfig,
        ca_pem,
        version,
    })
}

fn wait_ready(kubeconfig: &Path, timeout: Duration) -> Result<String, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let client = client_for(kubeconfig).await;
        let deadline = Instant::now() + timeout;
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Some(exited) = exited_process() {
                return Err(exited);
            }
            let req = http::Request::get("/readyz").body(Vec::new()).unwrap();
            match client.request_text(req).await {
                Ok(body) if body.trim() == "ok" => {
                    let version = client
                        .apiserver_version()
                        .await
                        .map_err(|e| e.to_string())?;
                    return Ok(version.git_version);
                }
                Ok(body) => last = body,
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(format!(
            "kube-apiserver did not become ready within {}s: {last}",
            timeout.as_secs()
        ))
    })
}

/// Describes a control-plane process that has already exited, if any.
fn exited_process() -> Option<String> {
    let mut guard = PROCESSES.lock().ok()?;
    let procs = guard.as_mut()?;
    procs
        .children
        .iter_mut()
        .enumerate()
        .find_map(|(i, child)| {
            let name = if i == 0 { "etcd" } else { "kube-apiserver" };
            match child.try_wait() {
                Ok(Some(status)) => Some(format!("{name} exited early ({status})")),
                _ => None,
            }
        })
}

fn write_pki(dir: &Path) -> Result<(), String> {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
        KeyUsagePurpose, SanType,
    };
    let err = |e: rcgen::Error| format!("generate test PKI: {e}");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kruntimes-test-ca");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca =
        CertifiedIssuer::self_signed(ca_params, KeyPair::generate().map_err(err)?).map_err(err)?;

    let serving_key = KeyPair::generate().map_err(err)?;
    let mut serving = CertificateParams::new(vec!["localhost".to_string()]).map_err(err)?;
    serving
        .subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    serving
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let serving_cert = serving.signed_by(&serving_key, &ca).map_err(err)?;
    let sa_key = KeyPair::generate().map_err(err)?;

    let write = |name: &str, body: String| {
        std::fs::write(dir.join(name), body).map_err(|e| format!("write {name}: {e}"))
    };
    write("ca.crt", ca.pem())?;
    write("serving.crt", serving_cert.pem())?;
    write("serving.key", serving_key.serialize_pem())?;
    write("sa.key", sa_key.serialize_pem())?;
    write("sa.pub", sa_key.public_key_pem())?;
    write(
        "tokens.csv",
        format!(
            "{ADMIN_TOKEN},kruntimes-admin,uid-admin,\"system:masters\"\n{NOBODY_TOKEN},nobody,uid-nobody\n"
        ),
    )
}

pub fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca_pem: &str,
    token: &str,
) -> Result<(), String> {
    use base64::Engine as _;
    let body = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n    namespace: default\ncurrent-context: test\nusers:\n- name: test\n  user:\n    token: {token}\n",
        base64::engine::general_purpose::STANDARD.encode(ca_pem.as_bytes())
    );
    std::fs::write(path, body).map_err(|e| format!("write {}: {e}", path.display()))
}
