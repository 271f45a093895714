//! Real objects for scheduling tests: Runtime Pods marked Ready (there is no kubelet),
//! heartbeat Leases, Runs, the scheduler as the built binary, and a watcher that checks every
//! Run event for overcommit.

use std::collections::{BTreeMap, HashMap};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;

use kruntimes::api::resources::{capacity_annotation, parse_requests};
use kruntimes::api::{Run, RunPhase};

/// Creates a Runtime Pod of `runtime` with the given capacity annotations, marks it Ready and
/// gives it a fresh heartbeat Lease held by its UID. Returns the Pod.
pub async fn ready_pod(
    client: &Client,
    ns: &str,
    runtime: &str,
    name: &str,
    capacity: &[(&str, u64)],
) -> Pod {
    let pod = create_pod(client, ns, runtime, name, capacity, &[]).await;
    set_ready(client, ns, name, true).await;
    heartbeat(client, &pod, jiff::Timestamp::now(), 3600).await;
    pod
}

pub async fn create_pod(
    client: &Client,
    ns: &str,
    runtime: &str,
    name: &str,
    capacity: &[(&str, u64)],
    finalizers: &[&str],
) -> Pod {
    let annotations: BTreeMap<String, String> = capacity
        .iter()
        .map(|(r, v)| (capacity_annotation(r).unwrap(), v.to_string()))
        .collect();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {"kruntimes.io/runtime": runtime, "kruntimes.io/runtime-pod": name},
            "annotations": annotations,
            "finalizers": finalizers,
        },
        "spec": {"containers": [{"name": "runtimed", "image": "kruntimes.invalid/runtimed"}]}
    }))
    .unwrap();
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("create pod {name}: {e}"))
}

/// Sets the Pod's Ready condition, as a kubelet would.
pub async fn set_ready(client: &Client, ns: &str, name: &str, ready: bool) {
    let status = json!({"status": {"phase": "Running", "conditions": [{
        "type": "Ready", "status": if ready { "True" } else { "False" },
        "lastTransitionTime": jiff::Timestamp::now().to_string(),
    }]}});
    Api::<Pod>::namespaced(client.clone(), ns)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("mark pod {name} ready={ready}: {e}"));
}

/// Writes the Pod's heartbeat Lease as runtimed would: held by the Pod UID, renewed at
/// `renewed`, labelled with the Pod name.
pub async fn heartbeat(client: &Client, pod: &Pod, renewed: jiff::Timestamp, duration_secs: i32) {
    let ns = pod.namespace().unwrap();
    let name = pod.name_any();
    let lease: Lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {
            "name": name,
            "labels": {"kruntimes.io/runtime-pod": name},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": pod.uid().unwrap()}],
        },
        "spec": {
            "holderIdentity": pod.uid().unwrap(),
            "leaseDurationSeconds": duration_secs,
            "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        }
    }))
    .unwrap();
    Api::<Lease>::namespaced(client.clone(), &ns)
        .patch(
            &name,
            &PatchParams::apply("kruntimes-test").force(),
            &Patch::Apply(&lease),
        )
        .await
        .unwrap_or_else(|e| panic!("heartbeat lease {name}: {e}"));
}

/// A Run to create.
#[derive(Clone)]
pub struct RunBuilder {
    value: serde_json::Value,
}

pub fn run(name: &str, runtime: &str) -> RunBuilder {
    RunBuilder {
        value: json!({
            "apiVersion": "kruntimes.io/v1alpha1", "kind": "Run",
            "metadata": {"name": name, "labels": {}},
            "spec": {"runtime": runtime, "mode": {"task": {"args": ["sh", "-c", "true"]}}}
        }),
    }
}

impl RunBuilder {
    pub fn requests(mut self, requests: &[(&str, &str)]) -> Self {
        let map: BTreeMap<&str, &str> = requests.iter().copied().collect();
        self.value["spec"]["resources"] = json!({"requests": map});
        self
    }

    pub fn labels(mut self, labels: &[(&str, &str)]) -> Self {
        for (k, v) in labels {
            self.value["metadata"]["labels"][k] = json!(v);
        }
        self
    }

    /// Required affinity (`anti == false`) or anti-affinity to Runs with `key=value`.
    pub fn requires(mut self, anti: bool, key: &str, value: &str) -> Self {
        let kind = if anti {
            "runAntiAffinity"
        } else {
            "runAffinity"
        };
        self.value["spec"]["affinity"][kind]["required"] = json!([{
            "labelSelector": {"matchLabels": {key: value}},
            "topologyKey": "kruntimes.io/runtime-pod"
        }]);
        self
    }

    pub fn build(&self) -> Run {
        serde_json::from_value(self.value.clone()).unwrap()
    }

    pub async fn create(&self, client: &Client, ns: &str) -> Run {
        let run = self.build();
        Api::<Run>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &run)
            .await
            .unwrap_or_else(|e| panic!("create run {}: {e}", run.name_any()))
    }
}

/// Sets a Run's status phase (and Pod), as a scheduler or runtimed would.
pub async fn set_phase(client: &Client, ns: &str, name: &str, phase: &str, pod: Option<&str>) {
    let mut status = json!({"phase": phase});
    if let Some(pod) = pod {
        status["podName"] = json!(pod);
    }
    Api::<Run>::namespaced(client.clone(), ns)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": status})),
        )
        .await
        .unwrap_or_else(|e| panic!("set phase of run {name}: {e}"));
}

/// Polls `check` over the namespace's Runs until it returns `Some`, or panics with `what` and
/// the last state after `timeout`.
pub async fn wait_runs<T>(
    client: &Client,
    ns: &str,
    timeout: Duration,
    what: &str,
    mut check: impl FnMut(&[Run]) -> Option<T>,
) -> T {
    let api: Api<Run> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + timeout;
    loop {
        let runs = api.list(&Default::default()).await.unwrap().items;
        if let Some(t) = check(&runs) {
            return t;
        }
        if Instant::now() > deadline {
            let summary: Vec<String> = runs
                .iter()
                .map(|r| {
                    let s = r.status.clone().unwrap_or_default();
                    format!(
                        "{}: {:?} pod={:?} msg={:?}",
                        r.name_any(),
                        s.phase,
                        s.pod_name,
                        s.message
                    )
                })
                .collect();
            panic!(
                "timed out after {timeout:?} waiting for {what}; runs:\n{}",
                summary.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn get_run(client: &Client, ns: &str, name: &str) -> Run {
    Api::<Run>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap()
}

/// Waits until the leader-election Lease `kruntimes-scheduler` in `ns` names `identity`.
pub async fn wait_leader(client: &Client, ns: &str, identity: &str, timeout: Duration) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + timeout;
    loop {
        let lease = leases.get_opt("kruntimes-scheduler").await.unwrap();
        if lease.and_then(|l| l.spec?.holder_identity).as_deref() == Some(identity) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{identity} did not lead within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How many of `runs` are in `phase`.
pub fn count(runs: &[Run], phase: RunPhase) -> usize {
    runs.iter().filter(|r| r.phase() == phase).count()
}

/// How many of `runs` are Pending with a message from the scheduler (decided, not placed).
pub fn waiting(runs: &[Run]) -> usize {
    runs.iter()
        .filter(|r| {
            r.phase() == RunPhase::Pending
                && r.status.as_ref().and_then(|s| s.message.as_ref()).is_some()
        })
        .count()
}

/// Waits until exactly `n` live Pods of `runtime` exist (made by the Runtime controller).
pub async fn runtime_pods(client: &Client, ns: &str, runtime: &str, n: usize) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let params =
        kube::api::ListParams::default().labels(&format!("kruntimes.io/runtime={runtime}"));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let pods: Vec<Pod> = api
            .list(&params)
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        if pods.len() == n {
            return pods;
        }
        assert!(
            Instant::now() < deadline,
            "expected {n} Pods of Runtime {runtime}, have {}",
            pods.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn phase_of(runs: &[Run], name: &str) -> Option<RunPhase> {
    runs.iter()
        .find(|r| r.name_any() == name)
        .map(|r| r.phase())
}

/// Watches every Run event of a namespace and checks, at each one, that no Pod's active usage
/// exceeds its capacity for any resource.
pub struct OvercommitWatch {
    violations: Arc<Mutex<Vec<String>>>,
    events: Arc<Mutex<usize>>,
    task: tokio::task::JoinHandle<()>,
}

impl OvercommitWatch {
    /// `capacity`: Pod name to its capacity per resource.
    pub async fn start(
        client: &Client,
        ns: &str,
        capacity: HashMap<String, HashMap<String, u64>>,
    ) -> Self {
        let violations = Arc::new(Mutex::new(Vec::new()));
        let events = Arc::new(Mutex::new(0));
        let api: Api<Run> = Api::namespaced(client.clone(), ns);
        let (v, e) = (violations.clone(), events.clone());
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut ready_tx = Some(ready_tx);
            let mut runs: HashMap<String, Run> = HashMap::new();
            let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()));
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Apply(run)) | Ok(watcher::Event::InitApply(run)) => {
                        runs.insert(run.uid().unwrap(), run);
                    }
                    Ok(watcher::Event::Delete(run)) => {
                        runs.remove(&run.uid().unwrap());
                    }
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = ready_tx.take() {
                            let _ = tx.send(());
                        }
                    }
                    Ok(watcher::Event::Init) => {}
                    Err(err) => v.lock().unwrap().push(format!("watch error: {err}")),
                }
                *e.lock().unwrap() += 1;
                let mut usage: HashMap<&str, HashMap<String, u64>> = HashMap::new();
                for run in runs.values() {
                    if let Some(pod) = run.active_pod() {
                        let request =
                            parse_requests(run.spec.resources.as_ref().map(|r| &r.requests))
                                .unwrap();
                        let slot = usage.entry(pod).or_default();
                        for (name, amount) in request.iter() {
                            *slot.entry(name.to_string()).or_default() += amount;
                        }
                    }
                }
                for (pod, used) in usage {
                    for (resource, amount) in used {
                        let cap = capacity
                            .get(pod)
                            .and_then(|c| c.get(&resource))
                            .copied()
                            .unwrap_or(0);
                        if amount > cap {
                            v.lock()
                                .unwrap()
                                .push(format!("{pod}: {resource} {amount} > capacity {cap}"));
                        }
                    }
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(10), ready_rx)
            .await
            .expect("the overcommit watch did not list the Runs within 10s")
            .expect("the overcommit watch ended before listing the Runs");
        Self {
            violations,
            events,
            task,
        }
    }

    /// Lets the watch drain (no event for 300ms), stops it, and panics if any event showed
    /// overcommit. Returns the number of events checked.
    pub async fn finish(self) -> usize {
        loop {
            let seen = *self.events.lock().unwrap();
            tokio::time::sleep(Duration::from_millis(300)).await;
            if *self.events.lock().unwrap() == seen {
                break;
            }
        }
        self.task.abort();
        let violations = self.violations.lock().unwrap().clone();
        assert!(
            violations.is_empty(),
            "overcommit observed:\n{}",
            violations.join("\n")
        );
        *self.events.lock().unwrap()
    }
}

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
        let kubeconfig = super::control_plane().kubeconfig.clone();
        Self::start_as(&kubeconfig, ns, workers, leader_lease_ns, identity).await
    }

    /// [`Self::start`] with the identity of another kubeconfig.
    pub async fn start_as(
        kubeconfig: &std::path::Path,
        ns: &str,
        workers: u16,
        leader_lease_ns: Option<&str>,
        identity: &str,
    ) -> Self {
        let metrics_port = free_port();
        let health_port = free_port();
        let mut cmd = Command::new(super::binary());
        cmd.env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "warn")
            .args(["scheduler", "run", "--watch-namespace", ns])
            .arg(format!("--workers={workers}"))
            .arg(format!("--metrics-bind-address=127.0.0.1:{metrics_port}"))
            .arg(format!(
                "--health-probe-bind-address=127.0.0.1:{health_port}"
            ))
            .arg(format!("--leader-election-identity={identity}"))
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
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = process.child.try_wait() {
                panic!("scheduler exited early: {status}");
            }
            if let Ok((200, _)) = http_get(health_port, "/readyz").await {
                break;
            }
            assert!(Instant::now() < deadline, "scheduler never became ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        process
    }

    pub async fn metrics(&self) -> String {
        let (code, body) = http_get(self.metrics_port, "/metrics")
            .await
            .expect("scrape /metrics");
        assert_eq!(code, 200);
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

/// The value of one sample line (`name{labels} value`) in a Prometheus text body.
pub fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A minimal HTTP/1.0 GET on loopback, enough for probes and metrics.
pub async fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await?;
    let mut buf = String::new();
    stream.read_to_string(&mut buf).await?;
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
