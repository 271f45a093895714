//! The local Pod host of `dev`: stands in for the kubelets of the dev cluster.
//!
//! For every Runtime Pod (label `kruntimes.io/runtime`) it starts a real `runtimed` child
//! process with that Pod's identity (`POD_NAME`, `POD_NAMESPACE`, `POD_UID`) and the dev
//! kubeconfig, and marks the Pod Running and Ready through the status subresource, the way
//! kwok stands in for kubelets, except that the agent really runs. The Pod's image and
//! command are not used: every Pod runs this binary's `runtimed`. When the Pod is deleted or
//! starts terminating the agent gets SIGTERM; an agent that exits on its own is restarted
//! with a capped backoff (restartPolicy Always). On shutdown every agent gets SIGTERM and is
//! waited for. Each agent writes its log to `DIR/logs/pods/<namespace>_<pod>.log` and runs in
//! `DIR/pods/<namespace>_<pod>/`.
//!
//! Each Pod gets an IP of its own, as on a node: a loopback address (`127.B.x.y`, all of
//! 127/8 is this host's on Linux; `B` from the data directory, so two `dev`s apart rarely meet),
//! reported as its `podIP`. Its runtimed serves its API there on the Pod's own `kruntimes-api`
//! port, where the gateway calls it, so any number of Pods share this host without a port
//! each.
//!
//! [`decide`] and [`Addresses`] are the pure part (what one Pod event means, which address a
//! Pod has); [`run`] carries them out.

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher::watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{info, warn};

use crate::api::{LABEL_RUNTIME, pod_is_ready};

/// How the agents are started.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The `kubectl-kruntimes` binary to run as `runtimed`.
    pub exe: PathBuf,
    /// The kubeconfig the agents use.
    pub kubeconfig: PathBuf,
    /// The dev data directory (logs and working directories go below it).
    pub dir: PathBuf,
    /// runtimed's `--shutdown-grace`.
    pub shutdown_grace: Duration,
}

/// What a Pod event asks of the host.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// No agent runs for this Pod yet: start one (and report the Pod Running and Ready).
    Start,
    /// The agent runs but the Pod does not say Running and Ready: report it again.
    ReportReady,
    /// The Pod is terminating: stop its agent.
    Stop,
    Nothing,
}

/// What to do for `pod` given whether an agent runs for it. Pure.
pub fn decide(pod: &Pod, agent_running: bool) -> Decision {
    if pod.metadata.deletion_timestamp.is_some() {
        return if agent_running {
            Decision::Stop
        } else {
            Decision::Nothing
        };
    }
    if !agent_running {
        return Decision::Start;
    }
    let running = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Running");
    if running && pod_is_ready(pod) {
        Decision::Nothing
    } else {
        Decision::ReportReady
    }
}

/// The status a kubelet would report for a Pod at `ip` whose containers run and are ready.
pub fn running_status(
    pod: &Pod,
    ip: Ipv4Addr,
    restarts: u32,
    now: jiff::Timestamp,
) -> serde_json::Value {
    let now = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let containers: Vec<serde_json::Value> = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "image": c.image.clone().unwrap_or_default(),
                "imageID": "",
                "ready": true,
                "started": true,
                "restartCount": restarts,
                "state": {"running": {"startedAt": now}},
            })
        })
        .collect();
    let condition =
        |type_: &str| json!({"type": type_, "status": "True", "lastTransitionTime": now});
    json!({"status": {
        "phase": "Running",
        "startTime": now,
        "podIP": ip.to_string(),
        "podIPs": [{"ip": ip.to_string()}],
        "conditions": [
            condition("PodScheduled"),
            condition("Initialized"),
            condition("ContainersReady"),
            condition("Ready"),
        ],
        "containerStatuses": containers,
    }})
}

/// The Pods' addresses: one loopback address per Pod UID, kept while it has an agent. Pure.
#[derive(Debug)]
pub struct Addresses {
    /// The second octet, this data directory's.
    block: u8,
    next: u16,
    given: HashMap<String, Ipv4Addr>,
}

impl Addresses {
    /// Addresses in `127.<block>.0.0/16`, `block` derived from the data directory `dir`.
    pub fn for_dir(dir: &Path) -> Self {
        use std::hash::{Hash as _, Hasher as _};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        dir.hash(&mut h);
        // 127.64.0.0 to 127.191.255.255: clear of 127.0.0.1 and of what Debian gives
        // 127.0.1.1.
        Addresses {
            block: 64 + (h.finish() % 128) as u8,
            next: 0,
            given: HashMap::new(),
        }
    }

    /// The address of Pod `uid`: the one it has, else the next free one for which `free`
    /// holds (another program may hold an address's port).
    pub fn of(&mut self, uid: &str, free: impl Fn(Ipv4Addr) -> bool) -> Ipv4Addr {
        if let Some(ip) = self.given.get(uid) {
            return *ip;
        }
        let taken: HashSet<Ipv4Addr> = self.given.values().copied().collect();
        // Every address of the block once (no `.0` and `.255` hosts), then give up on `free`.
        let mut fallback = None;
        for _ in 0..(256 * 254) {
            self.next = self.next.wrapping_add(1);
            let (hi, lo) = ((self.next / 254) as u8, (self.next % 254) as u8 + 1);
            let ip = Ipv4Addr::new(127, self.block, hi, lo);
            if taken.contains(&ip) {
                continue;
            }
            fallback.get_or_insert(ip);
            if free(ip) {
                fallback = Some(ip);
                break;
            }
        }
        let ip = fallback.unwrap_or(Ipv4Addr::new(127, self.block, 255, 254));
        self.given.insert(uid.to_string(), ip);
        ip
    }

    /// Pod `uid` has no agent any more: its address may go to another.
    pub fn release(&mut self, uid: &str) {
        self.given.remove(uid);
    }
}

/// Why an agent exited.
struct Exit {
    uid: String,
    generation: u64,
    status: String,
}

struct Agent {
    pod: Pod,
    ip: Ipv4Addr,
    generation: u64,
    /// Sends SIGTERM to the agent when fired (or dropped).
    stop: Option<oneshot::Sender<()>>,
    restarts: u32,
    /// The agent should run (false once the Pod is gone or terminating).
    wanted: bool,
    /// The agent process has not exited yet.
    alive: bool,
}

/// Runs the Pod host until `shutdown` turns true, then stops every agent and returns. It
/// returns an error only when it cannot start at all; watch errors are retried.
///
/// Poll this future on a thread that outlives the agents (the main thread): agents die with
/// the thread that spawned them (`PR_SET_PDEATHSIG`).
pub async fn run(client: Client, settings: Settings, mut shutdown: watch::Receiver<bool>) {
    let pods: Api<Pod> = Api::all(client.clone());
    let mut events = watcher(pods, watcher::Config::default().labels(LABEL_RUNTIME))
        .backoff(crate::kubeclient::watch_backoff())
        .boxed();
    let (exit_tx, mut exit_rx) = mpsc::unbounded_channel::<Exit>();
    let (restart_tx, mut restart_rx) = mpsc::unbounded_channel::<(String, u64)>();
    let mut agents: HashMap<String, Agent> = HashMap::new();
    let mut seen_in_relist: Option<HashSet<String>> = None;
    let mut next_generation = 0u64;
    let mut host = Host {
        addresses: Addresses::for_dir(&settings.dir),
        client,
        settings,
        exit_tx,
    };

    loop {
        tokio::select! {
            _ = shutdown.wait_for(|s| *s) => break,
            event = events.next() => match event {
                Some(Ok(Event::Apply(pod) | Event::InitApply(pod))) => {
                    let uid = pod.uid().unwrap_or_default();
                    if let Some(seen) = seen_in_relist.as_mut() {
                        seen.insert(uid.clone());
                    }
                    let running = agents.get(&uid).is_some_and(|a| a.wanted);
                    match decide(&pod, running) {
                        Decision::Start => {
                            next_generation += 1;
                            let restarts = agents.get(&uid).map_or(0, |a| a.restarts);
                            let agent = host.start(pod, next_generation, restarts).await;
                            agents.insert(uid, agent);
                        }
                        Decision::ReportReady => {
                            if let Some(a) = agents.get_mut(&uid) {
                                a.pod = pod;
                                host.report_ready(&a.pod, a.ip, a.restarts).await;
                            }
                        }
                        Decision::Stop => {
                            if let Some(a) = agents.get_mut(&uid) {
                                info!(pod = %pod.name_any(), namespace = %pod.namespace().unwrap_or_default(), "Pod is terminating; stopping its runtimed");
                                a.wanted = false;
                                a.stop.take();
                            }
                        }
                        Decision::Nothing => {
                            if let Some(a) = agents.get_mut(&uid) {
                                a.pod = pod;
                            }
                        }
                    }
                }
                Some(Ok(Event::Delete(pod))) => {
                    if let Some(a) = agents.get_mut(&pod.uid().unwrap_or_default()) {
                        info!(pod = %pod.name_any(), namespace = %pod.namespace().unwrap_or_default(), "Pod deleted; stopping its runtimed");
                        a.wanted = false;
                        a.stop.take();
                    }
                }
                Some(Ok(Event::Init)) => seen_in_relist = Some(HashSet::new()),
                Some(Ok(Event::InitDone)) => {
                    // Pods deleted while the watch was down.
                    if let Some(seen) = seen_in_relist.take() {
                        for (uid, a) in agents.iter_mut() {
                            if !seen.contains(uid) && a.wanted {
                                a.wanted = false;
                                a.stop.take();
                            }
                        }
                    }
                }
                Some(Err(e)) => warn!("watching Runtime Pods: {e}; retrying"),
                None => break,
            },
            Some(exit) = exit_rx.recv() => {
                let Some(a) = agents.get_mut(&exit.uid) else { continue };
                if a.generation != exit.generation {
                    continue;
                }
                a.stop = None;
                a.alive = false;
                if a.wanted {
                    a.restarts += 1;
                    let delay = Duration::from_secs(1 << a.restarts.min(5));
                    warn!(pod = %a.pod.name_any(), namespace = %a.pod.namespace().unwrap_or_default(), "runtimed exited ({}); restarting in {}s", exit.status, delay.as_secs());
                    let tx = restart_tx.clone();
                    let (uid, generation) = (exit.uid.clone(), exit.generation);
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        let _ = tx.send((uid, generation));
                    });
                } else {
                    agents.remove(&exit.uid);
                    host.addresses.release(&exit.uid);
                }
            }
            Some((uid, generation)) = restart_rx.recv() => {
                let Some(a) = agents.get(&uid) else { continue };
                if !a.wanted || a.generation != generation {
                    continue;
                }
                next_generation += 1;
                let (pod, restarts) = (a.pod.clone(), a.restarts);
                let agent = host.start(pod, next_generation, restarts).await;
                agents.insert(uid, agent);
            }
        }
    }

    // Shutdown: SIGTERM every agent, then wait for each to exit (each waiter escalates to
    // SIGKILL after the grace period).
    let mut pending: HashSet<(String, u64)> = HashSet::new();
    for (uid, a) in agents.iter_mut() {
        a.stop.take();
        if a.alive {
            pending.insert((uid.clone(), a.generation));
        }
    }
    drop(host);
    while !pending.is_empty() {
        match exit_rx.recv().await {
            Some(exit) => {
                pending.remove(&(exit.uid, exit.generation));
            }
            None => break,
        }
    }
}

struct Host {
    client: Client,
    settings: Settings,
    exit_tx: mpsc::UnboundedSender<Exit>,
    addresses: Addresses,
}

impl Host {
    /// Starts an agent for `pod` and reports the Pod Running and Ready. A failed start counts
    /// as an exit (and is retried like one).
    async fn start(&mut self, pod: Pod, generation: u64, restarts: u32) -> Agent {
        let uid = pod.uid().unwrap_or_default();
        let port = crate::manager::gateway::upstream::api_port(&pod);
        let ip = self
            .addresses
            .of(&uid, |ip| std::net::TcpListener::bind((ip, port)).is_ok());
        let (stop_tx, stop_rx) = oneshot::channel();
        match self.spawn(&pod, ip, port) {
            Ok(child) => {
                info!(pod = %pod.name_any(), namespace = %pod.namespace().unwrap_or_default(), pid = child.id().unwrap_or_default(), "started runtimed");
                let grace = self.settings.shutdown_grace + Duration::from_secs(5);
                tokio::spawn(supervise(
                    child,
                    stop_rx,
                    grace,
                    self.exit_tx.clone(),
                    uid.clone(),
                    generation,
                ));
                self.report_ready(&pod, ip, restarts).await;
            }
            Err(e) => {
                warn!(pod = %pod.name_any(), "cannot start runtimed: {e}");
                let _ = self.exit_tx.send(Exit {
                    uid,
                    generation,
                    status: format!("start failed: {e}"),
                });
            }
        }
        Agent {
            pod,
            ip,
            generation,
            stop: Some(stop_tx),
            restarts,
            wanted: true,
            alive: true,
        }
    }

    fn spawn(&self, pod: &Pod, ip: Ipv4Addr, port: u16) -> std::io::Result<tokio::process::Child> {
        let (ns, name, uid) = (
            pod.namespace().unwrap_or_default(),
            pod.name_any(),
            pod.uid().unwrap_or_default(),
        );
        let logs = self.settings.dir.join("logs").join("pods");
        let work = self.settings.dir.join("pods").join(format!("{ns}_{name}"));
        std::fs::create_dir_all(&logs)?;
        std::fs::create_dir_all(&work)?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(logs.join(format!("{ns}_{name}.log")))?;
        let mut cmd = std::process::Command::new(&self.settings.exe);
        cmd.arg("runtimed")
            .arg("--shutdown-grace")
            .arg(format!("{}s", self.settings.shutdown_grace.as_secs()))
            .arg("--api-bind-address")
            .arg(format!("{ip}:{port}"))
            .env("POD_NAME", &name)
            .env("POD_NAMESPACE", &ns)
            .env("POD_UID", &uid)
            .env("KRUNTIMES_WORKSPACE_ROOT", work.join("workspace"))
            .env("KUBECONFIG", &self.settings.kubeconfig)
            .env("NO_COLOR", "1")
            .current_dir(&work)
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        crate::util::process::own_process_group(&mut cmd);
        crate::util::process::kill_with_parent_thread(&mut cmd);
        tokio::process::Command::from(cmd).spawn()
    }

    async fn report_ready(&self, pod: &Pod, ip: Ipv4Addr, restarts: u32) {
        let api: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        let status = running_status(pod, ip, restarts, jiff::Timestamp::now());
        if let Err(e) = api
            .patch_status(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&status),
            )
            .await
        {
            // The next event of the Pod retries (decide says ReportReady).
            warn!(pod = %pod.name_any(), "cannot mark the Pod Running and Ready: {e}");
        }
    }
}

/// Waits for the agent to exit; on a stop request sends SIGTERM, and SIGKILL after `grace`.
async fn supervise(
    mut child: tokio::process::Child,
    stop: oneshot::Receiver<()>,
    grace: Duration,
    exits: mpsc::UnboundedSender<Exit>,
    uid: String,
    generation: u64,
) {
    let status = tokio::select! {
        status = child.wait() => status,
        _ = stop => crate::util::process::stop(&mut child, grace).await,
    };
    let status = match status {
        Ok(s) => s.to_string(),
        Err(e) => format!("cannot wait: {e}"),
    };
    let _ = exits.send(Exit {
        uid,
        generation,
        status,
    });
}

/// The log file of a Pod's agent.
pub fn log_path(dir: &Path, namespace: &str, pod: &str) -> PathBuf {
    dir.join("logs")
        .join("pods")
        .join(format!("{namespace}_{pod}.log"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(phase: Option<&str>, ready: bool, deleting: bool) -> Pod {
        let mut value = json!({
            "metadata": {"name": "py-a", "namespace": "ns", "uid": "u1"},
            "spec": {"containers": [{"name": "runtimed", "image": "img"}]},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        });
        if let Some(p) = phase {
            value["status"]["phase"] = json!(p);
        }
        if deleting {
            value["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_new_pod_gets_an_agent_and_a_terminating_one_loses_it() {
        assert_eq!(decide(&pod(None, false, false), false), Decision::Start);
        assert_eq!(
            decide(&pod(Some("Running"), true, true), true),
            Decision::Stop
        );
        assert_eq!(
            decide(&pod(Some("Running"), true, true), false),
            Decision::Nothing
        );
    }

    #[test]
    fn a_pod_whose_status_lost_ready_is_reported_again() {
        assert_eq!(
            decide(&pod(Some("Running"), false, false), true),
            Decision::ReportReady
        );
        assert_eq!(
            decide(&pod(Some("Pending"), true, false), true),
            Decision::ReportReady
        );
        assert_eq!(
            decide(&pod(Some("Running"), true, false), true),
            Decision::Nothing
        );
    }

    #[test]
    fn running_status_is_ready_with_one_status_per_container() {
        let p = pod(None, false, false);
        let ip = Ipv4Addr::new(127, 64, 0, 1);
        let status = running_status(&p, ip, 2, jiff::Timestamp::from_second(0).unwrap());
        let mut patched = p.clone();
        patched.status = serde_json::from_value(status["status"].clone()).unwrap();
        assert!(pod_is_ready(&patched));
        let cs = &status["status"]["containerStatuses"];
        assert_eq!(cs[0]["name"], "runtimed");
        assert_eq!(cs[0]["restartCount"], 2);
        assert_eq!(status["status"]["phase"], "Running");
        assert_eq!(
            patched.status.unwrap().pod_ip.as_deref(),
            Some("127.64.0.1")
        );
    }

    #[test]
    fn each_pod_keeps_an_address_of_its_own_until_released() {
        let mut a = Addresses::for_dir(Path::new("/tmp/dev"));
        let block = a.block;
        assert!((64..192).contains(&block));
        let first = a.of("u1", |_| true);
        assert_eq!(first, Ipv4Addr::new(127, block, 0, 2));
        assert_eq!(
            a.of("u1", |_| true),
            first,
            "a restarted agent keeps its Pod's IP"
        );
        let held = Ipv4Addr::new(127, block, 0, 3);
        let second = a.of("u2", |ip| ip != held);
        assert_eq!(
            second,
            Ipv4Addr::new(127, block, 0, 4),
            "an address in use is skipped"
        );
        a.release("u1");
        let third = a.of("u3", |_| true);
        assert_ne!(third, second);
        assert_eq!(
            Addresses::for_dir(Path::new("/tmp/dev")).block,
            block,
            "the same directory, the same block"
        );
    }
}
