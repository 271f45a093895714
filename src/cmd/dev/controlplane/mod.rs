//! The local control plane: etcd and kube-apiserver v1.36.3 built from Go modules, their PKI,
//! kubeconfigs, start, readiness and stop. `kubectl kruntimes dev` and the integration-test
//! harness (`testkit/`) both use it.
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
//!
//! Split by concern: [`build`] (the recipe and the binary cache), [`pki`] (the state
//! directory's layout, certificates, tokens and private files), [`kubeconfig`], [`ports`], and
//! this module, which starts, watches and stops the processes (signals and graceful stops are
//! [`crate::util::process`]'s).

mod build;
mod kubeconfig;
mod pki;
mod ports;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use kube::Client;
use thiserror::Error;

pub use build::{ETCD_VERSION, K8S_VERSION, bin_dir, build, cache_root, is_built};
pub use kubeconfig::{KubeconfigSpec, client_for, write_kubeconfig};
pub use pki::{
    FRONT_PROXY_CLIENT, Layout, TokenUser, ensure_front_proxy, ensure_pki, random_token,
    write_private, write_tokens,
};
pub use ports::Ports;

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

/// How to start one control plane.
#[derive(Debug, Clone)]
pub struct Spec {
    pub layout: Layout,
    pub bin_dir: PathBuf,
    pub ports: Ports,
    /// fsync etcd's writes. Tests turn it off (`--unsafe-no-fsync`) for speed; `dev` keeps
    /// it so a machine crash does not corrupt its data.
    pub durable: bool,
    /// kube-apiserver's `--feature-gates` (`Name=true`), none by default; the API cost
    /// benchmark turns alpha serving features on with it.
    pub feature_gates: Vec<String>,
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
    /// have run; the front-proxy certificates are made here when missing. Spawn from a thread that outlives the processes (see the module docs).
    pub fn start(spec: &Spec) -> Result<Self> {
        let layout = spec.layout.clone();
        ensure_front_proxy(&layout)?;
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
        let mut apiserver_args = vec![
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
            // The aggregation layer, for aggregated API servers such as kruntimes' own: the
            // front-proxy client certificate it presents to them and the CA they check it
            // with (published in kube-system/extension-apiserver-authentication). No
            // kube-proxy runs, so it dials an APIService's endpoints directly.
            format!(
                "--requestheader-client-ca-file={}",
                pki("front-proxy-ca.crt")
            ),
            format!("--requestheader-allowed-names={FRONT_PROXY_CLIENT}"),
            "--requestheader-username-headers=X-Remote-User".into(),
            "--requestheader-group-headers=X-Remote-Group".into(),
            "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
            format!("--proxy-client-cert-file={}", pki("front-proxy-client.crt")),
            format!("--proxy-client-key-file={}", pki("front-proxy-client.key")),
            "--enable-aggregator-routing=true".into(),
            "--v=0".into(),
        ];
        if !spec.feature_gates.is_empty() {
            apiserver_args.push(format!("--feature-gates={}", spec.feature_gates.join(",")));
        }
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
        crate::util::process::own_process_group(&mut cmd);
        crate::util::process::kill_with_parent_thread(&mut cmd);
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
    /// thread that started the control plane (see [`crate::util::process::kill_with_parent_thread`]).
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
            crate::util::process::stop_blocking(&mut p.child, grace);
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(10));
    }
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
