//! The local control plane: etcd and kube-apiserver v1.36.3 built from Go modules, their PKI,
//! kubeconfigs, start, readiness and stop. `kubectl kruntimes dev` and the integration-test
//! harness (`tests/support`) both use it.
//!
//! The build recipe is `tests/controlplane/` (a script and two Go modules). It is embedded in
//! the binary and written next to the binary cache before it runs, so an installed
//! `kubectl-kruntimes` can build the control plane without a source checkout. The binaries are
//! cached outside any repository, keyed by version (see [`cache_root`]); a cache hit starts
//! nothing but the processes.
//!
//! Processes are spawned with `PR_SET_PDEATHSIG` (Linux): the kernel kills them when the
//! *thread* that spawned them exits, so callers spawn from a thread that lives as long as the
//! control plane (the main thread, or a parked helper thread).

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The Kubernetes release the recipe builds (kube-apiserver and kubectl).
pub const K8S_VERSION: &str = "v1.36.3";
/// The etcd release the recipe builds.
pub const ETCD_VERSION: &str = "v3.6.16";

/// The build recipe, embedded: (path relative to the recipe root, contents).
const RECIPE: &[(&str, &str)] = &[
    (
        "build.sh",
        include_str!("../../tests/controlplane/build.sh"),
    ),
    (
        "apiserver/go.mod",
        include_str!("../../tests/controlplane/apiserver/go.mod"),
    ),
    (
        "apiserver/go.sum",
        include_str!("../../tests/controlplane/apiserver/go.sum"),
    ),
    (
        "apiserver/tools.go",
        include_str!("../../tests/controlplane/apiserver/tools.go"),
    ),
    (
        "etcd/go.mod",
        include_str!("../../tests/controlplane/etcd/go.mod"),
    ),
    (
        "etcd/go.sum",
        include_str!("../../tests/controlplane/etcd/go.sum"),
    ),
    (
        "etcd/tools.go",
        include_str!("../../tests/controlplane/etcd/tools.go"),
    ),
];

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why the control plane could not be built, started or reached.
#[derive(Debug, Error)]
pub enum Error {
    #[error(
        "Go is not installed (no `go` on PATH): kube-apiserver {K8S_VERSION} and etcd {ETCD_VERSION} are built from Go modules on first use; install Go 1.26 or newer (https://go.dev/dl) and run this again"
    )]
    GoMissing,
    #[error("building the control plane failed ({status}): {last}; full output in {}", log.display())]
    Build {
        status: ExitStatus,
        last: String,
        log: PathBuf,
    },
    #[error("{doing}: {source}")]
    Io {
        doing: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot generate the control plane's certificates: {0}")]
    Pki(#[from] rcgen::Error),
    #[error("{name} exited early ({status}); see {}: {last}", log.display())]
    Exited {
        name: &'static str,
        status: ExitStatus,
        log: PathBuf,
        last: String,
    },
    #[error("kube-apiserver did not become ready within {}s: {last}; see {}", timeout.as_secs(), log.display())]
    NotReady {
        timeout: Duration,
        last: String,
        log: PathBuf,
    },
    #[error("kubeconfig {}: {reason}", path.display())]
    Kubeconfig { path: PathBuf, reason: String },
    #[error("the control plane has no process {name:?}; its processes are etcd and kube-apiserver")]
    NoSuchProcess { name: String },
}

fn io(doing: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let doing = doing.into();
    move |source| Error::Io { doing, source }
}

/// Root of the binary cache: `$KRUNTIMES_CONTROLPLANE_CACHE`, else
/// `$XDG_CACHE_HOME/kruntimes/controlplane`, else `~/.cache/kruntimes/controlplane` (the
/// same rule as `build.sh`).
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("KRUNTIMES_CONTROLPLANE_CACHE").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".cache"));
    cache.join("kruntimes").join("controlplane")
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// Where the binaries of this version live once built.
pub fn bin_dir() -> PathBuf {
    cache_root().join(format!("k8s-{K8S_VERSION}-etcd-{ETCD_VERSION}"))
}

/// Whether kube-apiserver, etcd and kubectl are all in [`bin_dir`].
pub fn is_built() -> bool {
    let dir = bin_dir();
    ["kube-apiserver", "etcd", "kubectl"]
        .iter()
        .all(|b| is_executable(&dir.join(b)))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Returns the directory holding kube-apiserver, etcd and kubectl, building them with Go
/// through the embedded recipe when they are missing. `progress` receives every line the
/// build prints. Only one process builds at a time (a lock file in the cache root); the
/// others wait for it and then reuse its binaries.
pub fn build(progress: &mut dyn FnMut(&str)) -> Result<PathBuf> {
    if is_built() {
        return Ok(bin_dir());
    }
    let root = cache_root();
    std::fs::create_dir_all(&root).map_err(io(format!("cannot create {}", root.display())))?;
    let lock_path = root.join(".build.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io(format!("cannot open {}", lock_path.display())))?;
    if !try_flock(&lock).map_err(io(format!("cannot lock {}", lock_path.display())))? {
        progress("waiting for another process that is building the control plane");
        flock(&lock).map_err(io(format!("cannot lock {}", lock_path.display())))?;
    }
    if is_built() {
        return Ok(bin_dir());
    }
    match Command::new("go").arg("version").output() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Error::GoMissing),
        Err(e) => return Err(io("cannot run `go version`")(e)),
        Ok(_) => {}
    }

    let recipe = root.join(format!("recipe-k8s-{K8S_VERSION}-etcd-{ETCD_VERSION}"));
    for (rel, body) in RECIPE {
        let path = recipe.join(rel);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(*body) {
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(io(format!("cannot create {}", parent.display())))?;
        }
        std::fs::write(&path, body).map_err(io(format!("cannot write {}", path.display())))?;
    }

    let log_path = root.join("build.log");
    let mut log = std::fs::File::create(&log_path)
        .map_err(io(format!("cannot create {}", log_path.display())))?;
    let mut child = Command::new("bash")
        .arg(recipe.join("build.sh"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io("cannot run bash for the control-plane build"))?;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let mut last = String::new();
    for line in BufReader::new(child.stderr.take().expect("piped stderr"))
        .lines()
        .map_while(|l| l.ok())
    {
        let _ = writeln!(log, "{line}");
        if !line.trim().is_empty() {
            last = line.trim().to_string();
            progress(&last);
        }
    }
    let status = child
        .wait()
        .map_err(io("cannot wait for the control-plane build"))?;
    let out = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(Error::Build {
            status,
            last,
            log: log_path,
        });
    }
    Ok(PathBuf::from(out.trim()))
}

/// Takes an exclusive `flock` on `file` without waiting; `Ok(false)` when another open file
/// description holds it. The lock lives as long as the file stays open.
pub fn try_flock(file: &std::fs::File) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd as _;
    // SAFETY: flock on a file descriptor we own; no memory is shared with the kernel.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(err)
    }
}

fn flock(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd as _;
    // SAFETY: as in `try_flock`.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Where a control plane keeps its state under one directory.
#[derive(Debug, Clone)]
pub struct Layout {
    pub root: PathBuf,
}

impl Layout {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Layout { root: root.into() }
    }
    pub fn etcd_data(&self) -> PathBuf {
        self.root.join("etcd")
    }
    pub fn pki(&self) -> PathBuf {
        self.root.join("pki")
    }
    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }
    pub fn ca_cert(&self) -> PathBuf {
        self.pki().join("ca.crt")
    }
    pub fn tokens(&self) -> PathBuf {
        self.pki().join("tokens.csv")
    }
    pub fn ports(&self) -> PathBuf {
        self.root.join("ports.json")
    }
}

/// An identity of the static token file (`--token-auth-file`).
#[derive(Debug, Clone)]
pub struct TokenUser {
    pub token: String,
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
}

/// Creates the CA, the kube-apiserver serving certificate (signed by the CA, with the SANs
/// `localhost` and `127.0.0.1`, so rustls verifies it) and the service-account key pair,
/// unless they already exist: a control plane restarted on the same directory keeps its
/// identity, and kubeconfigs and service-account tokens issued earlier stay valid.
pub fn ensure_pki(layout: &Layout) -> Result<()> {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
        KeyUsagePurpose, SanType,
    };
    let dir = layout.pki();
    let files = ["ca.crt", "serving.crt", "serving.key", "sa.key", "sa.pub"];
    if files.iter().all(|f| dir.join(f).exists()) {
        return Ok(());
    }
    std::fs::create_dir_all(&dir).map_err(io(format!("cannot create {}", dir.display())))?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kruntimes-local-ca");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

    let serving_key = KeyPair::generate()?;
    let mut serving = CertificateParams::new(vec!["localhost".to_string()])?;
    serving
        .subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    serving
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let serving_cert = serving.signed_by(&serving_key, &ca)?;
    let sa_key = KeyPair::generate()?;

    write_private(&dir.join("serving.key"), &serving_key.serialize_pem())?;
    write_private(&dir.join("sa.key"), &sa_key.serialize_pem())?;
    write_private(&dir.join("sa.pub"), &sa_key.public_key_pem())?;
    write_private(&dir.join("serving.crt"), &serving_cert.pem())?;
    // Last: its presence marks the set complete.
    write_private(&dir.join("ca.crt"), &ca.pem())
}

/// Writes the static token file for kube-apiserver.
pub fn write_tokens(layout: &Layout, users: &[TokenUser]) -> Result<()> {
    let body: String = users
        .iter()
        .map(|u| {
            let mut line = format!("{},{},{}", u.token, u.name, u.uid);
            if !u.groups.is_empty() {
                line.push_str(&format!(",\"{}\"", u.groups.join(",")));
            }
            line + "\n"
        })
        .collect();
    write_private(&layout.tokens(), &body)
}

/// A random token: 32 hex digits from the operating system's generator.
pub fn random_token() -> Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(io("cannot read /dev/urandom"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes a file readable only by its owner (keys, tokens, kubeconfigs).
pub fn write_private(path: &Path, body: &str) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io(format!("cannot write {}", path.display())))?;
    file.write_all(body.as_bytes())
        .map_err(io(format!("cannot write {}", path.display())))
}

/// What a kubeconfig file names.
#[derive(Debug, Clone)]
pub struct KubeconfigSpec<'a> {
    pub server: &'a str,
    pub ca_pem: &'a str,
    pub token: &'a str,
    /// Used for the cluster, the user and the context.
    pub name: &'a str,
    pub namespace: &'a str,
}

/// Writes a kubeconfig with one cluster, user and context (the current one), mode 0600.
pub fn write_kubeconfig(path: &Path, spec: &KubeconfigSpec<'_>) -> Result<()> {
    use base64::Engine as _;
    let KubeconfigSpec {
        server,
        ca_pem,
        token,
        name,
        namespace,
    } = spec;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem.as_bytes());
    let body = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\ncontexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n    namespace: {namespace}\ncurrent-context: {name}\nusers:\n- name: {name}\n  user:\n    token: {token}\n",
    );
    write_private(path, &body)
}

/// A client for the current context of the kubeconfig at `path`.
pub async fn client_for(path: &Path) -> Result<Client> {
    let fail = |reason: String| Error::Kubeconfig {
        path: path.to_path_buf(),
        reason,
    };
    let kc = Kubeconfig::read_from(path).map_err(|e| fail(e.to_string()))?;
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| fail(e.to_string()))?;
    Client::try_from(config).map_err(|e| fail(e.to_string()))
}

/// The loopback ports of one control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ports {
    pub apiserver: u16,
    pub etcd_client: u16,
    pub etcd_peer: u16,
}

impl Ports {
    /// Three distinct free loopback ports.
    pub fn pick() -> Result<Self> {
        let listeners = (0..3)
            .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(io("cannot find a free loopback port"))?;
        let port = |i: usize| -> Result<u16> {
            Ok(listeners[i]
                .local_addr()
                .map_err(io("cannot find a free loopback port"))?
                .port())
        };
        Ok(Ports {
            apiserver: port(0)?,
            etcd_client: port(1)?,
            etcd_peer: port(2)?,
        })
    }

    /// The ports used last time in this layout when they are all still free (so the server
    /// address in kubeconfigs handed out earlier keeps working), else new free ones.
    pub fn reuse_or_pick(layout: &Layout) -> Result<Self> {
        let previous: Option<Ports> = std::fs::read_to_string(layout.ports())
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok());
        if let Some(p) = previous {
            let all = [p.apiserver, p.etcd_client, p.etcd_peer];
            let bound: Vec<_> = all
                .iter()
                .map_while(|port| TcpListener::bind((Ipv4Addr::LOCALHOST, *port)).ok())
                .collect();
            if bound.len() == all.len() {
                return Ok(p);
            }
        }
        Self::pick()
    }

    /// Records the ports in the layout for [`Ports::reuse_or_pick`].
    pub fn save(&self, layout: &Layout) -> Result<()> {
        let body = serde_json::to_string_pretty(self).expect("ports serialize");
        std::fs::write(layout.ports(), body + "\n")
            .map_err(io(format!("cannot write {}", layout.ports().display())))
    }
}

/// How to start one control plane.
#[derive(Debug, Clone)]
pub struct Spec {
    pub layout: Layout,
    pub bin_dir: PathBuf,
    pub ports: Ports,
    /// fsync etcd's writes. Tests turn it off (`--unsafe-no-fsync`) for speed; `dev` keeps
    /// it so a machine crash does not corrupt its data.
    pub durable: bool,
}

struct Process {
    name: &'static str,
    child: Child,
    log: PathBuf,
    /// What it was started with, so it can be started again on the same data and ports.
    args: Vec<String>,
}

/// A running etcd + kube-apiserver pair. Dropping it stops both.
pub struct ControlPlane {
    pub layout: Layout,
    pub bin_dir: PathBuf,
    pub ports: Ports,
    /// `https://127.0.0.1:<port>`.
    pub server: String,
    pub ca_pem: String,
    /// etcd, then kube-apiserver.
    processes: Vec<Process>,
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver (RBAC authorization, the layout's token file for
    /// authentication, the CA-signed serving certificate) and returns without waiting for
    /// readiness: see [`ControlPlane::wait_ready`]. [`ensure_pki`] and [`write_tokens`] must
    /// have run. Spawn from a thread that outlives the processes (see the module docs).
    pub fn start(spec: &Spec) -> Result<Self> {
        let layout = spec.layout.clone();
        let logs = layout.logs();
        std::fs::create_dir_all(&logs).map_err(io(format!("cannot create {}", logs.display())))?;
        let ca_pem = std::fs::read_to_string(layout.ca_cert())
            .map_err(io(format!("cannot read {}", layout.ca_cert().display())))?;
        let Ports {
            apiserver,
            etcd_client,
            etcd_peer,
        } = spec.ports;
        let mut cp = ControlPlane {
            layout: layout.clone(),
            bin_dir: spec.bin_dir.clone(),
            ports: spec.ports,
            server: format!("https://127.0.0.1:{apiserver}"),
            ca_pem,
            processes: Vec::new(),
        };

        let etcd_url = format!("http://127.0.0.1:{etcd_client}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer}");
        let mut etcd_args = vec![
            format!("--data-dir={}", layout.etcd_data().display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=default={peer_url}"),
            "--log-level=warn".into(),
        ];
        if !spec.durable {
            etcd_args.push("--unsafe-no-fsync=true".into());
        }
        cp.spawn("etcd", &etcd_args)?;

        let pki = |f: &str| layout.pki().join(f).display().to_string();
        let apiserver_args = [
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={apiserver}"),
            format!("--cert-dir={}", layout.root.join("certs").display()),
            format!("--tls-cert-file={}", pki("serving.crt")),
            format!("--tls-private-key-file={}", pki("serving.key")),
            format!("--client-ca-file={}", pki("ca.crt")),
            format!("--token-auth-file={}", pki("tokens.csv")),
            "--authorization-mode=RBAC".into(),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--allow-privileged=true".into(),
            // No kube-controller-manager creates default service accounts.
            "--disable-admission-plugins=ServiceAccount".into(),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            format!("--service-account-key-file={}", pki("sa.pub")),
            format!("--service-account-signing-key-file={}", pki("sa.key")),
            "--enable-priority-and-fairness=false".into(),
            "--v=0".into(),
        ];
        cp.spawn("kube-apiserver", &apiserver_args)?;
        Ok(cp)
    }

    fn spawn(&mut self, name: &'static str, args: &[String]) -> Result<()> {
        let bin = self.bin_dir.join(name);
        let log = self.layout.logs().join(format!("{name}.log"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(io(format!("cannot create {}", log.display())))?;
        let err = file
            .try_clone()
            .map_err(io(format!("cannot open {}", log.display())))?;
        let mut cmd = Command::new(&bin);
        cmd.args(args).stdin(Stdio::null()).stdout(file).stderr(err);
        own_process_group(&mut cmd);
        kill_with_parent_thread(&mut cmd);
        let child = cmd
            .spawn()
            .map_err(io(format!("cannot start {}", bin.display())))?;
        self.processes.push(Process {
            name,
            child,
            log,
            args: args.to_vec(),
        });
        Ok(())
    }

    /// SIGKILLs `name` (`etcd` or `kube-apiserver`), as a crash would, and reaps it. Its data,
    /// certificates and ports stay: [`ControlPlane::restart`] starts it again on them.
    pub fn kill(&mut self, name: &str) -> Result<()> {
        let process = self.process(name)?;
        let _ = process.child.kill();
        let _ = process.child.wait();
        Ok(())
    }

    /// Starts `name` again with the arguments it was first started with (same data
    /// directory, ports and certificates), killing it first if it still runs. Call from the
    /// thread that started the control plane (see [`kill_with_parent_thread`]).
    pub fn restart(&mut self, name: &str) -> Result<()> {
        self.kill(name)?;
        let i = self.position(name)?;
        let old = self.processes.remove(i);
        self.spawn(old.name, &old.args)?;
        // Keep the order: etcd, then kube-apiserver, so `stop` stops the server first.
        let new = self.processes.pop().expect("just spawned");
        self.processes.insert(i, new);
        Ok(())
    }

    fn position(&self, name: &str) -> Result<usize> {
        self.processes
            .iter()
            .position(|p| p.name == name)
            .ok_or_else(|| Error::NoSuchProcess {
                name: name.to_string(),
            })
    }

    fn process(&mut self, name: &str) -> Result<&mut Process> {
        let i = self.position(name)?;
        Ok(&mut self.processes[i])
    }

    /// Process ids of etcd and kube-apiserver.
    pub fn pids(&self) -> Vec<u32> {
        self.processes.iter().map(|p| p.child.id()).collect()
    }

    /// Describes a process of this control plane that has exited, if any.
    pub fn exited(&mut self) -> Option<Error> {
        self.processes.iter_mut().find_map(|p| {
            let status = p.child.try_wait().ok()??;
            Some(Error::Exited {
                name: p.name,
                status,
                last: last_line(&p.log),
                log: p.log.clone(),
            })
        })
    }

    /// Waits until kube-apiserver answers `/readyz` with `ok` and returns its version; fails
    /// at once when etcd or kube-apiserver exits.
    pub async fn wait_ready(&mut self, client: &Client, timeout: Duration) -> Result<String> {
        let deadline = Instant::now() + timeout;
        let mut last = String::from("no answer yet");
        while Instant::now() < deadline {
            if let Some(exited) = self.exited() {
                return Err(exited);
            }
            let req = http::Request::get("/readyz")
                .body(Vec::new())
                .expect("a static request");
            match client.request_text(req).await {
                Ok(body) if body.trim() == "ok" => match client.apiserver_version().await {
                    Ok(v) => return Ok(v.git_version),
                    Err(e) => last = e.to_string(),
                },
                Ok(body) => last = body.trim().to_string(),
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(Error::NotReady {
            timeout,
            last,
            log: self.layout.logs().join("kube-apiserver.log"),
        })
    }

    /// Stops kube-apiserver, then etcd: SIGTERM, up to `grace` to exit, then SIGKILL.
    /// Idempotent.
    pub fn stop(&mut self, grace: Duration) {
        while let Some(mut p) = self.processes.pop() {
            terminate(&mut p.child, grace);
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(10));
    }
}

/// SIGTERM, wait up to `grace`, then SIGKILL; always reaps the child.
pub fn terminate(child: &mut Child, grace: Duration) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    // SAFETY: kill(2) on our own child's pid, which is not reaped yet, so it cannot be reused.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Puts the child in a process group of its own, so a Ctrl-C on the terminal reaches only
/// the parent, which then stops its children in order.
pub fn own_process_group(cmd: &mut Command) {
    use std::os::unix::process::CommandExt as _;
    cmd.process_group(0);
}

/// Asks the kernel to SIGKILL the child when the spawning thread exits (Linux), so a crashed
/// or killed parent leaves no orphans.
pub fn kill_with_parent_thread(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

fn last_line(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(empty log)")
        .chars()
        .take(400)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_recipe_is_the_checked_in_one() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/controlplane");
        for (rel, body) in RECIPE {
            let on_disk = std::fs::read_to_string(root.join(rel)).unwrap();
            assert_eq!(&on_disk, body, "{rel}");
        }
        let script = RECIPE[0].1;
        assert!(script.contains(&format!("K8S_VERSION={K8S_VERSION}")));
        assert!(script.contains(&format!("ETCD_VERSION={ETCD_VERSION}")));
    }

    #[test]
    fn pki_is_generated_once_and_reused() {
        let dir = std::env::temp_dir().join(format!("kruntimes-pki-{}", std::process::id()));
        let layout = Layout::new(&dir);
        ensure_pki(&layout).unwrap();
        let first = std::fs::read_to_string(layout.ca_cert()).unwrap();
        ensure_pki(&layout).unwrap();
        assert_eq!(std::fs::read_to_string(layout.ca_cert()).unwrap(), first);
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(layout.pki().join("serving.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn token_file_lines_carry_groups_quoted() {
        let dir = std::env::temp_dir().join(format!("kruntimes-tokens-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("pki")).unwrap();
        let layout = Layout::new(&dir);
        write_tokens(
            &layout,
            &[
                TokenUser {
                    token: "t1".into(),
                    name: "admin".into(),
                    uid: "u1".into(),
                    groups: vec!["system:masters".into()],
                },
                TokenUser {
                    token: "t2".into(),
                    name: "nobody".into(),
                    uid: "u2".into(),
                    groups: vec![],
                },
            ],
        )
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(layout.tokens()).unwrap(),
            "t1,admin,u1,\"system:masters\"\nt2,nobody,u2\n"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn picked_ports_are_distinct_and_reused_when_free() {
        let dir = std::env::temp_dir().join(format!("kruntimes-ports-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let layout = Layout::new(&dir);
        let ports = Ports::pick().unwrap();
        let all = [ports.apiserver, ports.etcd_client, ports.etcd_peer];
        assert!(all[0] != all[1] && all[1] != all[2] && all[0] != all[2]);
        ports.save(&layout).unwrap();
        assert_eq!(Ports::reuse_or_pick(&layout).unwrap(), ports);
        let _busy = TcpListener::bind((Ipv4Addr::LOCALHOST, ports.apiserver)).unwrap();
        assert_ne!(
            Ports::reuse_or_pick(&layout).unwrap().apiserver,
            ports.apiserver
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
