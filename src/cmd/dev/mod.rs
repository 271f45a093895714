//! `kubectl kruntimes dev`: the whole system on one machine, in the foreground, with real
//! parts — etcd and kube-apiserver ([`controlplane`], the same code the integration tests
//! start), the CRDs, the scheduler, its gateway and the Runtime controller in this process
//! ([`crate::manager::run`]; the gateway registered at this host's address by [`gateway`]),
//! and a local Pod host ([`podhost`]) that runs a real runtimed for every Runtime Pod. `--demo` ([`demo`]) applies examples/ and follows it to
//! the end.
//!
//! Everything lives in one data directory ([`DevArgs::data_dir`]): etcd's data, the PKI,
//! the logs and `DIR/kubeconfig` (context `kruntimes-dev`), so stopping and starting again
//! keeps every Runtime and Run. A lock file ([`lock`]) refuses a second instance on the same
//! directory. SIGINT or SIGTERM stops the runtimed agents (while the API server still takes
//! their last status writes), then the scheduler, kube-apiserver and etcd.

pub mod controlplane;
pub mod demo;
pub mod gateway;
pub mod lock;
pub mod podhost;

use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow};
use tokio::sync::watch;

use crate::cmd::cli::{DevArgs, GlobalArgs, SchedulerRunArgs};
use crate::cmd::install;
use crate::kubeclient;
use controlplane::{ControlPlane, KubeconfigSpec, Layout, Ports, Spec, TokenUser};

/// The kubeconfig context (and cluster and user) `dev` writes.
pub const CONTEXT: &str = "kruntimes-dev";

/// runtimed's `--shutdown-grace` in dev: Ctrl-C should not take long.
const AGENT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// `$XDG_STATE_HOME/kruntimes/dev`, else `~/.local/state/kruntimes/dev`.
pub fn default_data_dir() -> PathBuf {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/".into()))
                .join(".local")
                .join("state")
        });
    state.join("kruntimes").join("dev")
}

pub async fn exec(global: &GlobalArgs, args: &DevArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let data_dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    if global.kubeconfig.is_some() || global.context.is_some() {
        return Err(anyhow!(
            "dev runs its own cluster and writes {}; --kubeconfig and --context do not apply to it",
            data_dir.join("kubeconfig").display()
        ));
    }
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("cannot create the data directory {}", data_dir.display()))?;
    let data_dir = data_dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", data_dir.display()))?;
    let _lock = lock::DataDirLock::acquire(&data_dir)?;
    // Listen before anything starts, so that an early Ctrl-C is a clean stop.
    let mut signals = Signals::new()?;
    let exe = std::env::current_exe().context("cannot find this program's own path")?;

    let bin_dir = tokio::select! {
        built = build_with_progress() => built?,
        sig = signals.recv() => {
            eprintln!("{sig}: stopped before the control plane was built");
            return Ok(());
        }
    };

    let examples = write_examples(&data_dir)?;
    let layout = Layout::new(&data_dir);
    controlplane::ensure_pki(&layout)?;
    let token = admin_token(&layout)?;
    controlplane::write_tokens(
        &layout,
        &[TokenUser {
            token: token.clone(),
            name: "kruntimes-dev-admin".into(),
            uid: "kruntimes-dev-admin".into(),
            groups: vec!["system:masters".into()],
        }],
    )?;
    let ports = Ports::reuse_or_pick(&layout)?;
    ports.save(&layout)?;
    // Spawned from the main thread, which outlives them (PR_SET_PDEATHSIG).
    let mut cp = ControlPlane::start(&Spec {
        layout: layout.clone(),
        bin_dir: bin_dir.clone(),
        ports,
        durable: true,
        feature_gates: Vec::new(),
    })?;
    let kubeconfig = data_dir.join("kubeconfig");
    controlplane::write_kubeconfig(
        &kubeconfig,
        &KubeconfigSpec {
            server: &cp.server,
            ca_pem: &cp.ca_pem,
            token: &token,
            name: CONTEXT,
            namespace: "default",
            impersonate: None,
        },
    )?;
    let client = controlplane::client_for(&kubeconfig).await?;
    let version = tokio::select! {
        ready = cp.wait_ready(&client, Duration::from_secs(120)) => ready?,
        sig = signals.recv() => {
            eprintln!("{sig}: stopping");
            cp.stop(Duration::from_secs(15));
            return Ok(());
        }
    };

    let target = kubeclient::connect(&GlobalArgs {
        kubeconfig: Some(kubeconfig.clone()),
        context: Some(CONTEXT.into()),
        verbose: global.verbose,
        ..Default::default()
    })
    .await?;
    install::apply(&target, false).await?;
    install::wait_established(&target, Duration::from_secs(60)).await?;

    let gateway_bind = serve_gateway(&target.client).await?;

    let (stop_tx, stop_rx) = watch::channel(false);
    let metrics_port = free_port()?;
    let mut scheduler = tokio::spawn(crate::manager::run(
        target.clone(),
        SchedulerRunArgs {
            workers: 4,
            watch_namespace: None,
            // Nothing competes here (the lock admits one `dev` per data directory), but the
            // Lease is what `status` and `explain` read to tell that a scheduler runs. A fixed
            // identity takes it back at once after a crash instead of waiting for it to lapse.
            // The system's namespace, as installed: the gateway keeps its Secret there too.
            leader_elect: true,
            leader_election_namespace: Some(install::system::NAMESPACE.into()),
            leader_election_identity: Some(CONTEXT.into()),
            leader_election_lease_duration: Duration::from_secs(15),
            metrics_bind_address: format!("127.0.0.1:{metrics_port}"),
            // Loopback only, on the developer's machine: plain HTTP, as its printout says.
            metrics_secure: false,
            metrics_cert_dir: None,
            health_probe_bind_address: "0".into(),
            gateway_bind_address: gateway_bind.clone().unwrap_or_else(|| "0".into()),
            gateway_cert_dir: None,
            // The account runtimed lets in by default (the scheduler itself runs as the dev
            // admin here, which is no ServiceAccount).
            gateway_service_account: Some(format!(
                "{}/{}",
                install::system::NAMESPACE,
                gateway::SERVICE_ACCOUNT
            )),
            pod_lost_grace: Duration::from_secs(40),
            starvation_threshold: Duration::from_secs(30),
            fair_share_metrics_groups: 10,
            runtime_image: crate::cmd::cli::DEFAULT_IMAGE.into(),
            routine_events: true,
            event_fold_window: crate::telemetry::events::FOLD_WINDOW,
            claim_delay: crate::api::default_claim_delay(),
            runtimed_requests: crate::runtime::pod::parse_resource_list(
                crate::runtime::pod::DEFAULT_REQUESTS,
            )
            .map_err(|e| anyhow::anyhow!(e))?,
            runtimed_limits: crate::runtime::pod::parse_resource_list(
                crate::runtime::pod::DEFAULT_LIMITS,
            )
            .map_err(|e| anyhow::anyhow!(e))?,
        },
        {
            let mut rx = stop_rx.clone();
            async move {
                let _ = rx.wait_for(|s| *s).await;
            }
        },
    ));
    let host = podhost::run(
        target.client.clone(),
        podhost::Settings {
            exe: exe.clone(),
            kubeconfig: kubeconfig.clone(),
            dir: data_dir.clone(),
            shutdown_grace: AGENT_SHUTDOWN_GRACE,
        },
        stop_rx.clone(),
    );
    tokio::pin!(host);

    print_banner(&Banner {
        version: &version,
        data_dir: &data_dir,
        kubeconfig: &kubeconfig,
        cp: &cp,
        metrics_port,
        gateway: gateway_bind.as_deref(),
        bin_dir: &bin_dir,
        exe: &exe,
        examples: &examples,
        demo: args.demo,
        up_in: started.elapsed(),
    });

    let demo = async {
        if args.demo {
            demo::run(demo::Context {
                client: target.client.clone(),
                kubeconfig: &kubeconfig,
                exe: exe.clone(),
                started,
                timeout: args.demo_timeout,
            })
            .await
        } else {
            std::future::pending::<demo::Result<()>>().await
        }
    };
    tokio::pin!(demo);

    let mut host_done = false;
    let outcome: anyhow::Result<()> = tokio::select! {
        sig = signals.recv() => {
            eprintln!("\n{sig}: stopping the runtimed agents, the scheduler, kube-apiserver and etcd");
            Ok(())
        }
        ended = &mut scheduler => Err(match ended {
            Ok(Ok(())) => anyhow!("the scheduler stopped unexpectedly"),
            Ok(Err(e)) => e.context("the scheduler stopped"),
            Err(e) => anyhow!("the scheduler task failed: {e}"),
        }),
        _ = &mut host => {
            host_done = true;
            Err(anyhow!("the Pod host stopped unexpectedly"))
        }
        finished = &mut demo => finished.map_err(anyhow::Error::new),
        exited = watch_processes(&mut cp) => Err(anyhow::Error::new(exited)),
    };

    let _ = stop_tx.send(true);
    if !host_done {
        // Agents get SIGTERM and are waited for (SIGKILL after their grace), while the API
        // server still takes their last status writes.
        if tokio::time::timeout(AGENT_SHUTDOWN_GRACE + Duration::from_secs(15), &mut host)
            .await
            .is_err()
        {
            eprintln!("warning: some runtimed agents did not stop in time");
        }
    }
    if !scheduler.is_finished() {
        let _ = tokio::time::timeout(Duration::from_secs(15), &mut scheduler).await;
    }
    scheduler.abort();
    cp.stop(Duration::from_secs(15));
    eprintln!(
        "stopped; the cluster's state is kept in {} for the next `kubectl kruntimes dev`",
        data_dir.display()
    );
    outcome
}

/// Registers the gateway at this host's address and a free port, and returns the address it
/// should listen on; `None` (said on stderr) on a host with no address but loopback, where the
/// aggregation layer cannot reach it.
async fn serve_gateway(client: &kube::Client) -> anyhow::Result<Option<String>> {
    let Some(ip) = gateway::host_ip() else {
        eprintln!(
            "warning: this host has no IPv4 address but loopback, and the API server cannot route to a loopback address: `logs`, `invoke` and `artifacts` will not work under this dev"
        );
        return Ok(None);
    };
    let port = std::net::TcpListener::bind((ip, 0))
        .and_then(|l| l.local_addr())
        .with_context(|| format!("cannot find a free port on {ip} for the gateway"))?
        .port();
    gateway::register(client, ip, port).await?;
    Ok(Some(format!("{ip}:{port}")))
}

/// Writes the embedded examples/ to `DIR/examples/` (so the printed `kubectl apply -f` works
/// without a checkout) and returns that directory.
fn write_examples(data_dir: &Path) -> anyhow::Result<PathBuf> {
    let dir = data_dir.join("examples");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (file, body) in demo::EXAMPLES {
        let name = Path::new(file).file_name().unwrap_or_default();
        let path = dir.join(name);
        std::fs::write(&path, body).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(dir)
}

/// The admin bearer token of this data directory, created once.
fn admin_token(layout: &Layout) -> anyhow::Result<String> {
    let path = layout.pki().join("admin.token");
    if let Ok(token) = std::fs::read_to_string(&path)
        && !token.trim().is_empty()
    {
        return Ok(token.trim().to_string());
    }
    let token = controlplane::random_token()?;
    controlplane::write_private(&path, &format!("{token}\n"))?;
    Ok(token)
}

fn free_port() -> anyhow::Result<u16> {
    Ok(
        std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .context("cannot find a free loopback port")?
            .port(),
    )
}

/// Builds (or finds) the control-plane binaries, with a spinner on a terminal and the build's
/// lines on stderr otherwise.
async fn build_with_progress() -> anyhow::Result<PathBuf> {
    if controlplane::is_built() {
        return Ok(controlplane::bin_dir());
    }
    let tty = std::io::stderr().is_terminal();
    let spinner = if tty {
        let s = indicatif::ProgressBar::new_spinner();
        s.set_style(
            indicatif::ProgressStyle::with_template("{spinner} [{elapsed}] {msg}")
                .expect("a valid template"),
        );
        s.enable_steady_tick(Duration::from_millis(120));
        s
    } else {
        indicatif::ProgressBar::hidden()
    };
    eprintln!(
        "Building kube-apiserver {}, kubectl and etcd {} from Go modules into {} (once; a cold build takes several minutes).",
        controlplane::K8S_VERSION,
        controlplane::ETCD_VERSION,
        controlplane::bin_dir().display()
    );
    let started = Instant::now();
    let s = spinner.clone();
    let built = tokio::task::spawn_blocking(move || {
        controlplane::build(&mut |line| {
            if tty {
                s.set_message(line.chars().take(100).collect::<String>());
            } else {
                eprintln!("  {line}");
            }
        })
    })
    .await
    .context("the control-plane build task failed")?;
    spinner.finish_and_clear();
    let dir = built?;
    eprintln!(
        "Built the control plane in {:.0}s.",
        started.elapsed().as_secs_f64()
    );
    Ok(dir)
}

/// Resolves with a description as soon as etcd or kube-apiserver exits.
async fn watch_processes(cp: &mut ControlPlane) -> controlplane::Error {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        if let Some(exited) = cp.exited() {
            return exited;
        }
    }
}

/// SIGINT and SIGTERM.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> anyhow::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            int: signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?,
            term: signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?,
        })
    }

    async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.int.recv() => "interrupted",
            _ = self.term.recv() => "SIGTERM",
        }
    }
}

struct Banner<'a> {
    version: &'a str,
    data_dir: &'a Path,
    kubeconfig: &'a Path,
    cp: &'a ControlPlane,
    metrics_port: u16,
    /// Where the gateway listens, if it runs.
    gateway: Option<&'a str>,
    bin_dir: &'a Path,
    exe: &'a Path,
    examples: &'a Path,
    demo: bool,
    up_in: Duration,
}

/// What runs where, and what to type next.
fn print_banner(b: &Banner<'_>) {
    let kubectl = if on_path("kubectl") {
        "kubectl".to_string()
    } else {
        b.bin_dir.join("kubectl").display().to_string()
    };
    let kruntimes = if on_path("kubectl-kruntimes") && on_path("kubectl") {
        "kubectl kruntimes".to_string()
    } else {
        b.exe.display().to_string()
    };
    let ports = b.cp.ports;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "kruntimes dev cluster is up in {:.1}s: kube-apiserver {} and etcd {}, state in {}\n\
         \n  API server   {}  (etcd 127.0.0.1:{}, peer 127.0.0.1:{})\
         \n  kubeconfig   {}  (context {CONTEXT})\
         \n  scheduler    in this process, metrics at http://127.0.0.1:{}/metrics\
         \n  gateway      {}\
         \n  Pod host     a runtimed per Runtime Pod, each on an address of its own; logs in {}\n",
        b.up_in.as_secs_f64(),
        b.version,
        controlplane::ETCD_VERSION,
        b.data_dir.display(),
        b.cp.server,
        ports.etcd_client,
        ports.etcd_peer,
        b.kubeconfig.display(),
        b.metrics_port,
        match b.gateway {
            Some(at) => format!("in this process at {at}: logs, invoke and artifacts"),
            None => "off: this host has no address the API server can route to".into(),
        },
        b.data_dir.join("logs").display(),
    );
    if b.demo {
        let _ = writeln!(
            out,
            "Running the demo: examples/ in namespace {}.\n",
            demo::NAMESPACE
        );
    } else {
        let _ = writeln!(
            out,
            "Next, in another terminal:\n\
             \n  export KUBECONFIG={}\
             \n  {kubectl} apply -f {}\
             \n  {kubectl} get runs -n {ns} -w\
             \n  {kruntimes} explain run/train-6 -n {ns}\n\
             \nCtrl-C stops everything; the next `dev` on {} continues where this one stopped.",
            b.kubeconfig.display(),
            b.examples.display(),
            b.data_dir.display(),
            ns = demo::NAMESPACE,
        );
    }
    let _ = out.flush();
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            use std::os::unix::fs::PermissionsExt as _;
            dir.join(program)
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}
