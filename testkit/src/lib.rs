//! The harness of the integration tests (`tests/`) and the benches (`benches/`), compiled once
//! for all of them: each suite of the one test binary names it `support` (`use testkit as
//! support;`), and [`harness`] runs each suite in a process of its own.
//!
//! This module holds the real test control plane: etcd and kube-apiserver built from Go modules
//! (`tests/controlplane/build.sh`), started once per process (a suite's) on free loopback
//! ports, with a CA-signed serving certificate, token identities and RBAC on. Building, PKI,
//! start, readiness and kubeconfigs are the product's own (`kruntimes::cmd::dev::controlplane`,
//! which `kubectl kruntimes dev` uses too); this crate only holds one per process.
//!
//! There is no fake here: every test that crosses the API talks to this server. When Go or the
//! module proxy is unavailable the first test that asks for the control plane fails with that
//! message; nothing is skipped.

pub mod gates;
pub mod gateway;
pub mod git;
pub mod harness;
pub mod helm;
pub mod measure;
pub mod policy;
pub mod pool;
pub mod roles;
pub mod s3;
pub mod spy;
pub mod tokens;
pub mod world;

/// Registers a test of the one integration test binary: see [`harness`].
pub use testkit_macros::test;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, PostParams};

use kruntimes::cmd::dev::controlplane::{
    self as cp, KubeconfigSpec, Layout, Ports, Spec, TokenUser,
};

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

/// The processes, stopped when the suite's process exits.
static RUNNING: Mutex<Option<(cp::ControlPlane, PathBuf)>> = Mutex::new(None);
static CONTROL_PLANE: OnceLock<Result<ControlPlane, String>> = OnceLock::new();
/// Fault injection on the control-plane thread (see [`fault`]).
static FAULTS: OnceLock<Mutex<FaultSender>> = OnceLock::new();
type FaultSender = std::sync::mpsc::Sender<(Fault, std::sync::mpsc::Sender<Result<(), String>>)>;

/// A fault injected into this process's control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL the process (`etcd` or `kube-apiserver`), as a crash would.
    Kill(&'static str),
    /// Start it again on the same data directory, ports and certificates.
    Restart(&'static str),
}

/// Injects `fault` and returns once it is done. The processes are (re)started on the
/// long-lived control-plane thread, so `PR_SET_PDEATHSIG` keeps them tied to this process.
pub fn fault(fault: Fault) {
    control_plane();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    FAULTS
        .get()
        .expect("the control-plane thread takes faults")
        .lock()
        .unwrap()
        .send((fault, done_tx))
        .expect("the control-plane thread is alive");
    let done = done_rx.recv().expect("the control-plane thread answers");
    if let Err(e) = done {
        panic!("fault {fault:?} failed: {e}");
    }
}

/// The control plane of this process (a suite's), started on first use.
///
/// Panics with the reason when it cannot be built or started.
pub fn control_plane() -> &'static ControlPlane {
    let result = CONTROL_PLANE.get_or_init(|| {
        // Processes are spawned from a thread that lives as long as the process, because
        // PR_SET_PDEATHSIG fires when the spawning *thread* exits, and test threads do.
        let (tx, rx) = std::sync::mpsc::channel();
        let (faults_tx, faults_rx) = std::sync::mpsc::channel();
        let _ = FAULTS.set(Mutex::new(faults_tx));
        std::thread::Builder::new()
            .name("control-plane".into())
            .spawn(move || {
                let _ = tx.send(start());
                for (fault, done) in faults_rx {
                    let mut running = RUNNING.lock().unwrap();
                    let result = match running.as_mut() {
                        Some((running, _)) => match fault {
                            Fault::Kill(name) => running.kill(name),
                            Fault::Restart(name) => running.restart(name),
                        }
                        .map_err(|e| e.to_string()),
                        None => Err("the control plane is not running".to_string()),
                    };
                    let _: Result<(), _> = done.send(result);
                }
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

/// A directory with `tls.crt` and `tls.key`: the control plane's serving certificate (for
/// `localhost` and 127.0.0.1, signed by its CA), for servers the tests start over TLS (the
/// scheduler's `/metrics`), so that clients check them against [`ControlPlane::ca_pem`].
pub fn serving_cert_dir() -> PathBuf {
    let cp = control_plane();
    let dir = cp.dir.join("serving-tls");
    static MADE: OnceLock<()> = OnceLock::new();
    MADE.get_or_init(|| {
        std::fs::create_dir_all(&dir).unwrap();
        for (from, to) in [("serving.crt", "tls.crt"), ("serving.key", "tls.key")] {
            std::fs::copy(cp.dir.join("pki").join(from), dir.join(to)).unwrap();
        }
    });
    dir
}

/// The process IDs of this process's etcd and kube-apiserver (in that order), for benches that
/// read their CPU time.
pub fn control_plane_pids() -> Vec<u32> {
    control_plane();
    RUNNING
        .lock()
        .unwrap()
        .as_ref()
        .map(|(running, _)| running.pids())
        .unwrap_or_default()
}

/// The directory holding kube-apiserver, etcd and kubectl, built on first use (without
/// starting a control plane).
pub fn bin_dir() -> PathBuf {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match DIR.get_or_init(build) {
        Ok(dir) => dir.clone(),
        Err(e) => panic!("test control plane binaries unavailable: {e}"),
    }
}

/// A client for the admin identity, bound to the calling test's runtime.
pub async fn client() -> Client {
    client_for(&control_plane().kubeconfig).await
}

pub async fn client_for(kubeconfig: &Path) -> Client {
    cp::client_for(kubeconfig)
        .await
        .unwrap_or_else(|e| panic!("test kubeconfig is unusable: {e}"))
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
    static BINARY: OnceLock<String> = OnceLock::new();
    BINARY.get_or_init(|| built("kubectl-kruntimes").display().to_string())
}

/// The kruntimes repository (the package whose tests and benches this harness serves).
pub fn repository() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the testkit crate lives in the repository")
}

/// A binary of the kruntimes package, as cargo built it for the running test or bench: cargo
/// builds a package's binaries before its integration tests and benches, into the profile's
/// directory, and runs those from its `deps/` (what `CARGO_BIN_EXE_<name>` names, which only
/// the test crate itself sees).
pub fn built(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the running test's own path");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("a test or bench runs from target/<profile>/deps");
    let path = profile.join(name);
    assert!(
        path.is_file(),
        "{} is not built: run the tests with `cargo test` (it builds the binaries first)",
        path.display()
    );
    path
}

/// A `kubectl-kruntimes` command pointed at the admin kubeconfig.
pub fn kruntimes() -> Command {
    let cp = control_plane();
    let mut cmd = Command::new(binary());
    cmd.env("KUBECONFIG", &cp.kubeconfig).env("NO_COLOR", "1");
    cmd
}

/// The directory of Go commands that `script` (`tests/krew/build.sh`, `tests/helm/build.sh`, a
/// wrapper of `tests/go-install.sh`) builds from their modules and caches; built once per test
/// binary. A build that fails fails the test: the commands are part of the test environment.
pub fn go_tools(script: &str) -> PathBuf {
    static DIRS: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let mut dirs = DIRS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, dir)) = dirs.iter().find(|(s, _)| s == script) {
        return dir.clone();
    }
    let out = Command::new("bash")
        .arg(crate::repository().join(script))
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
    assert!(
        out.status.success(),
        "{script} failed ({}); see its output above (Go tools need the Go module proxy, s3s-fs crates.io)",
        out.status
    );
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    dirs.push((script.to_string(), dir.clone()));
    dir
}

/// The real `kubectl` built with the control plane (same version), pointed at it.
/// Runs `cmd` with `input` on its stdin and returns its output.
pub fn output_with_stdin(cmd: &mut Command, input: &[u8]) -> Output {
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a command");
    child
        .stdin
        .take()
        .expect("its stdin")
        .write_all(input)
        .expect("write its stdin");
    child.wait_with_output().expect("wait for it")
}

pub fn kubectl() -> Command {
    let cp = control_plane();
    let mut cmd = Command::new(cp.bin_dir.join("kubectl"));
    cmd.env("KUBECONFIG", &cp.kubeconfig);
    cmd
}

/// `kubectl apply -f` of a manifest of this repository, in `ns` when given.
pub fn kubectl_apply(manifest: &str, ns: Option<&str>) {
    let path = crate::repository().join(manifest);
    let mut cmd = kubectl();
    cmd.arg("apply").arg("-f").arg(&path);
    if let Some(ns) = ns {
        cmd.args(["-n", ns]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "kubectl apply {manifest}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Installs the CRDs with the real binary and waits until they are Established.
pub fn install_crds() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| install_crds_with(Path::new(binary()), &control_plane().kubeconfig));
}

/// `install` of the `kubectl-kruntimes` at `binary` against `kubeconfig`, waiting until the
/// CRDs are Established (the side-by-side bench installs other builds on control planes of
/// their own).
pub fn install_crds_with(binary: &Path, kubeconfig: &Path) {
    let out = Command::new(binary)
        .args(["install", "--yes", "--crds-only", "--timeout", "60s"])
        .env("KUBECONFIG", kubeconfig)
        .env("NO_COLOR", "1")
        .output()
        .expect("run kubectl-kruntimes install");
    assert!(
        out.status.success(),
        "install failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The oldest Kubernetes kruntimes installs on, whose kube-apiserver
/// `tests/controlplane/oldest.sh` builds.
pub const OLDEST_KUBERNETES: &str = "v1.32.13";

/// Whether this process's control plane runs the [`OLDEST_KUBERNETES`] kube-apiserver
/// instead of the current one; see [`use_oldest_kubernetes`].
static OLDEST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// kube-apiserver feature gates of this process's control plane ([`with_feature_gates`]).
static FEATURE_GATES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Starts this process's control plane (and every one [`start_owned`] starts after) with
/// kube-apiserver's `--feature-gates` set to `gates` (`Name=true`). Call it before anything
/// uses the control plane: it panics when it already runs.
pub fn with_feature_gates(gates: &[&str]) {
    assert!(
        CONTROL_PLANE.get().is_none(),
        "this process's control plane started before with_feature_gates"
    );
    *FEATURE_GATES.lock().unwrap() = gates.iter().map(|g| g.to_string()).collect();
}

/// Makes this process's control plane run the [`OLDEST_KUBERNETES`] kube-apiserver (with
/// the current etcd and kubectl). Call it first in every test of a binary that wants it: it
/// panics when the control plane already runs another version.
pub fn use_oldest_kubernetes() {
    OLDEST.store(true, std::sync::atomic::Ordering::SeqCst);
    if let Some(Ok(running)) = CONTROL_PLANE.get() {
        assert_eq!(
            running.version, OLDEST_KUBERNETES,
            "this process's control plane started before use_oldest_kubernetes"
        );
    }
}

/// The directory of the oldest kube-apiserver (`tests/controlplane/oldest.sh`, which links the
/// current etcd and kubectl beside it).
fn oldest_bin_dir() -> Result<PathBuf, String> {
    let out = Command::new("bash")
        .arg(crate::repository().join("tests/controlplane/oldest.sh"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run tests/controlplane/oldest.sh: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "tests/controlplane/oldest.sh failed ({}); see its output above",
            out.status
        ));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

fn build() -> Result<PathBuf, String> {
    // Written straight to stderr: libtest captures only the print macros.
    cp::build(&mut |line| {
        let _ = writeln!(std::io::stderr(), "{line}");
    })
    .map_err(|e| e.to_string())
}

extern "C" fn stop_at_exit() {
    if let Ok(mut guard) = RUNNING.lock()
        && let Some((mut running, dir)) = guard.take()
    {
        // apiserver first, then etcd; no grace: the data dies with the process.
        running.stop(Duration::ZERO);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

fn start() -> Result<ControlPlane, String> {
    let (running, control_plane) = start_owned()?;
    *RUNNING.lock().unwrap() = Some((running, control_plane.dir.clone()));
    // SAFETY: registering a plain extern "C" function with no captured state.
    unsafe { libc::atexit(stop_at_exit) };
    Ok(control_plane)
}

/// Starts a fresh etcd + kube-apiserver pair of its own (a new data directory, PKI, free
/// ports, the admin and nobody tokens) and waits until it is ready. The caller owns the
/// processes (dropping them stops both; the directory stays); spawn from a thread that outlives
/// them. [`control_plane`] holds one of these per process (a suite's); the side-by-side benchmark
/// starts one per measured system.
pub fn start_owned() -> Result<(cp::ControlPlane, ControlPlane), String> {
    let started = Instant::now();
    let bin_dir = match OLDEST.load(std::sync::atomic::Ordering::SeqCst) {
        true => oldest_bin_dir()?,
        false => build()?,
    };
    let built = started.elapsed();
    let dir = tempfile::Builder::new()
        .prefix("kruntimes-cp-")
        .tempdir()
        .map_err(|e| format!("create temp dir: {e}"))?
        .keep();
    let layout = Layout::new(&dir);
    cp::ensure_pki(&layout).map_err(|e| e.to_string())?;
    cp::write_tokens(
        &layout,
        &[
            TokenUser {
                token: ADMIN_TOKEN.into(),
                name: "kruntimes-admin".into(),
                uid: "uid-admin".into(),
                groups: vec!["system:masters".into()],
            },
            TokenUser {
                token: NOBODY_TOKEN.into(),
                name: "nobody".into(),
                uid: "uid-nobody".into(),
                groups: vec![],
            },
        ],
    )
    .map_err(|e| e.to_string())?;
    let spec = Spec {
        layout: layout.clone(),
        bin_dir: bin_dir.clone(),
        ports: Ports::pick().map_err(|e| e.to_string())?,
        durable: false,
        feature_gates: FEATURE_GATES.lock().unwrap().clone(),
    };
    let mut running = cp::ControlPlane::start(&spec).map_err(|e| e.to_string())?;
    let server = running.server.clone();
    let ca_pem = running.ca_pem.clone();
    let kubeconfig = dir.join("kubeconfig");
    let nobody_kubeconfig = dir.join("kubeconfig-nobody");
    write_kubeconfig(&kubeconfig, &server, &ca_pem, ADMIN_TOKEN)?;
    write_kubeconfig(&nobody_kubeconfig, &server, &ca_pem, NOBODY_TOKEN)?;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let ready = rt.block_on(async {
        let client = cp::client_for(&kubeconfig).await?;
        running.wait_ready(&client, Duration::from_secs(90)).await
    });
    let version = ready.map_err(|e| {
        format!(
            "{e}\n--- kube-apiserver.log ---\n{}\n--- etcd.log ---\n{}",
            tail(&layout.logs().join("kube-apiserver.log")),
            tail(&layout.logs().join("etcd.log"))
        )
    })?;
    let _ = writeln!(
        std::io::stderr(),
        "test control plane: kube-apiserver {version} with etcd at {server} (binaries {} ready in {:.1}s, control plane up in {:.1}s)",
        bin_dir.display(),
        built.as_secs_f64(),
        (started.elapsed() - built).as_secs_f64(),
    );
    let control_plane = ControlPlane {
        dir,
        bin_dir,
        server,
        kubeconfig,
        nobody_kubeconfig,
        ca_pem,
        version,
    };
    Ok((running, control_plane))
}

/// Writes a kubeconfig for the server at `server` (CA `ca_pem`) that authenticates with
/// `token`, in namespace `default`; see [`Kubeconfig`] for the other knobs.
pub fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca_pem: &str,
    token: &str,
) -> Result<(), String> {
    Kubeconfig::new(server, ca_pem, token).write(path)
}

/// A kubeconfig of the test control planes: one cluster, user and context named `test`.
pub struct Kubeconfig<'a> {
    spec: KubeconfigSpec<'a>,
}

impl<'a> Kubeconfig<'a> {
    pub fn new(server: &'a str, ca_pem: &'a str, token: &'a str) -> Self {
        Kubeconfig {
            spec: KubeconfigSpec {
                server,
                ca_pem,
                token,
                name: "test",
                namespace: "default",
                impersonate: None,
            },
        }
    }

    /// For this process's control plane.
    pub fn of_control_plane(token: &'a str) -> Self {
        let cp = control_plane();
        Self::new(&cp.server, &cp.ca_pem, token)
    }

    pub fn namespace(mut self, ns: &'a str) -> Self {
        self.spec.namespace = ns;
        self
    }

    /// Every request is authorized as `user` (`as:`).
    pub fn impersonate(mut self, user: &'a str) -> Self {
        self.spec.impersonate = Some(user);
        self
    }

    pub fn write(&self, path: &Path) -> Result<(), String> {
        cp::write_kubeconfig(path, &self.spec).map_err(|e| e.to_string())
    }
}

/// A free loopback port (the scheduler's metrics and probe endpoints in tests).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    // Below Linux's ephemeral range (32768-60999): a port the kernel hands out for an
    // outgoing connection (to the API server, say) between this check and the process's own
    // bind would make that process exit "address in use". Each call takes the next port, from
    // a start that differs per process, and skips one something already listens on.
    const FIRST: u32 = 20_000;
    const COUNT: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(7919) % COUNT,
        Ordering::AcqRel,
        Ordering::Acquire,
    );
    for _ in 0..COUNT {
        let port = (FIRST + NEXT.fetch_add(1, Ordering::AcqRel) % COUNT) as u16;
        if std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {FIRST}..{}", FIRST + COUNT);
}

/// The stdout of a command that must have succeeded; otherwise fails naming `what`, its exit
/// status and both outputs.
pub fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether a 64-bit little-endian ELF file has a `PT_INTERP` program header, and how many
/// `DT_NEEDED` entries its dynamic section has (a static-pie has a dynamic section but none).
pub fn elf_dynamic_needs(elf: &[u8]) -> (bool, usize) {
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(
        (elf[4], elf[5]),
        (2, 1),
        "not a 64-bit little-endian ELF file"
    );
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap()) as usize;
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    let (mut interpreter, mut needed) = (false, 0);
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        let kind = u32::from_le_bytes(elf[ph..ph + 4].try_into().unwrap());
        match kind {
            3 => interpreter = true, // PT_INTERP
            2 => {
                // PT_DYNAMIC: (d_tag, d_val) pairs until DT_NULL; DT_NEEDED is 1.
                let (offset, size) = (u64_at(ph + 8), u64_at(ph + 32));
                for entry in (offset..offset + size).step_by(16) {
                    match u64_at(entry) {
                        0 => break,
                        1 => needed += 1,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    (interpreter, needed)
}
