//! `kubectl kruntimes runtimed` against the real control plane: the built binary runs as the
//! agent of a Pod object created here (there is no kubelet), and the test plays the scheduler
//! by writing `status.phase: Scheduled` with `podName`/`podUID` through the status subresource.
//!
//! Every Run event is recorded by a watch of the test's own, so admission is asserted on the
//! API server's history, not on timing.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kruntimes::api::status::{CONDITION_ADMITTED, reasons};
use kruntimes::api::{Run, RunPhase};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);
/// A prefixed resource: advertised as `kruntimes.io/capacity.example.com_gpu` (see
/// `api::resources::capacity_annotation`).
const GPU: &str = "example.com/gpu";

// ---------------------------------------------------------------------------------------------
// Fixture: a namespace, a Runtime Pod object, the runtimed process and a recording watch.

struct Fixture {
    client: Client,
    ns: String,
    pod: Pod,
    runs: Api<Run>,
    recorder: Recorder,
    dir: tempfile::TempDir,
}

impl Fixture {
    async fn new(prefix: &str, capacity: &[(&str, &str)]) -> Fixture {
        support::install_crds();
        let client = support::client().await;
        let ns = support::namespace(&client, prefix).await;
        let annotations: BTreeMap<String, String> = capacity
            .iter()
            .map(|(k, v)| {
                (
                    kruntimes::api::resources::capacity_annotation(k).unwrap(),
                    v.to_string(),
                )
            })
            .collect();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {
                "name": "rt-0",
                "labels": {"kruntimes.io/runtime": "rt", "kruntimes.io/runtime-pod": "rt-0"},
                "annotations": annotations,
            },
            "spec": {"containers": [{"name": "runtimed", "image": "example.invalid/kruntimes:test"}]}
        }))
        .unwrap();
        let pod = Api::<Pod>::namespaced(client.clone(), &ns)
            .create(&PostParams::default(), &pod)
            .await
            .unwrap_or_else(|e| panic!("create the Runtime Pod in {ns}: {e}"));
        let runs = Api::<Run>::namespaced(client.clone(), &ns);
        let recorder = Recorder::start(runs.clone()).await;
        Fixture {
            client,
            ns,
            pod,
            runs,
            recorder,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn pod_uid(&self) -> String {
        self.pod.uid().unwrap()
    }

    /// Starts `kubectl-kruntimes runtimed` as this Pod's agent.
    fn runtimed(&self, extra: &[&str]) -> Runtimed {
        let log = self
            .dir
            .path()
            .join(format!("runtimed-{}.log", extra.len()));
        let file = std::fs::File::create(&log).unwrap();
        let mut args = extra.to_vec();
        if !args.contains(&"--shutdown-grace") {
            args.extend(["--shutdown-grace", "1s"]);
        }
        let child = Command::new(support::binary())
            .args(["runtimed", "-v"])
            .args(&args)
            .env("KUBECONFIG", &support::control_plane().kubeconfig)
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG")
            .env("POD_NAME", "rt-0")
            .env("POD_NAMESPACE", &self.ns)
            .env("POD_UID", self.pod_uid())
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("start kubectl-kruntimes runtimed");
        Runtimed {
            child: Some(child),
            log,
        }
    }

    /// Creates a Run that executes `args` and requests `requests`.
    async fn create(&self, name: &str, args: &[&str], requests: &[(&str, &str)]) -> Run {
        self.create_with(name, json!({"task": {"args": args}}), requests)
            .await
    }

    async fn create_with(
        &self,
        name: &str,
        mode: serde_json::Value,
        requests: &[(&str, &str)],
    ) -> Run {
        let requests: BTreeMap<&str, &str> = requests.iter().copied().collect();
        let run: Run = serde_json::from_value(json!({
            "apiVersion": "kruntimes.io/v1alpha1",
            "kind": "Run",
            "metadata": {"name": name},
            "spec": {"runtime": "rt", "resources": {"requests": requests}, "mode": mode}
        }))
        .unwrap();
        self.runs
            .create(&PostParams::default(), &run)
            .await
            .unwrap_or_else(|e| panic!("create Run {name}: {e}"))
    }

    /// Plays the scheduler: binds `name` to `pod` (this fixture's Pod when `None`) with the
    /// given phase. Returns the resourceVersion of the write.
    async fn bind(&self, name: &str, phase: &str, pod: Option<(&str, &str)>) -> String {
        let uid = self.pod_uid();
        let (pod_name, pod_uid) = pod.unwrap_or(("rt-0", uid.as_str()));
        let patch = json!({"status": {"phase": phase, "podName": pod_name, "podUID": pod_uid}});
        let written = self
            .runs
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("bind Run {name}: {e}"));
        written.resource_version().unwrap()
    }

    async fn assign(&self, name: &str, args: &[&str], requests: &[(&str, &str)]) -> String {
        self.create(name, args, requests).await;
        self.bind(name, "Scheduled", None).await
    }

    async fn get(&self, name: &str) -> Run {
        self.runs
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("get Run {name}: {e}"))
    }

    /// Polls until `check` holds for the recorded state, or fails with `what` and the log.
    async fn wait_until(&self, rtd: &Runtimed, what: &str, check: impl Fn(&State) -> bool) {
        let deadline = Instant::now() + WAIT;
        loop {
            if check(&self.recorder.state()) {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "timed out after {WAIT:?} waiting for {what}\nlast phases: {:?}\n--- runtimed log ---\n{}",
                    self.recorder.state().phases(),
                    rtd.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The runtimed process; dropped ⇒ SIGTERM, then SIGKILL after a few seconds.
struct Runtimed {
    child: Option<Child>,
    log: PathBuf,
}

impl Runtimed {
    fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().unwrap().try_wait(), Ok(None))
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    fn sigterm(&self) {
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(self.pid(), libc::SIGTERM) };
    }

    /// Waits for the process to exit; returns its status.
    async fn wait(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                panic!(
                    "runtimed did not exit within {timeout:?}\n--- runtimed log ---\n{}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Runtimed {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Ok(None) = child.try_wait() {
            // SAFETY: plain kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Recorder: every Run event of the namespace, in the API server's order.

#[derive(Clone)]
struct Observed {
    run: Arc<Run>,
    deleted: bool,
}

struct Recorder {
    events: Arc<Mutex<Vec<Observed>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Recorder {
    async fn start(api: Api<Run>) -> Recorder {
        let events = Arc::new(Mutex::new(Vec::new()));
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let sink = events.clone();
        let task = tokio::spawn(async move {
            let mut ready = Some(ready_tx);
            let mut stream = watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = stream.next().await {
                let mut sink = sink.lock().unwrap();
                match event {
                    Ok(watcher::Event::Apply(run) | watcher::Event::InitApply(run)) => {
                        sink.push(Observed {
                            run: Arc::new(run),
                            deleted: false,
                        })
                    }
                    Ok(watcher::Event::Delete(run)) => sink.push(Observed {
                        run: Arc::new(run),
                        deleted: true,
                    }),
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = ready.take() {
                            let _ = tx.send(());
                        }
                    }
                    Ok(watcher::Event::Init) => {}
                    Err(e) => eprintln!("recorder watch error: {e}"),
                }
            }
        });
        tokio::time::timeout(WAIT, ready_rx)
            .await
            .expect("the recording watch did not start")
            .unwrap();
        Recorder { events, task }
    }

    fn state(&self) -> State {
        State(self.events.lock().unwrap().clone())
    }
}

/// The recorded history.
struct State(Vec<Observed>);

impl State {
    /// Latest version of every Run (deleted ones dropped).
    fn latest(&self) -> HashMap<String, Arc<Run>> {
        let mut out = HashMap::new();
        for e in &self.0 {
            if e.deleted {
                out.remove(&e.run.name_any());
            } else {
                out.insert(e.run.name_any(), e.run.clone());
            }
        }
        out
    }

    fn phase(&self, name: &str) -> Option<RunPhase> {
        self.latest().get(name).map(|r| r.phase())
    }

    fn phases(&self) -> BTreeMap<String, RunPhase> {
        self.latest()
            .into_iter()
            .map(|(k, v)| (k, v.phase()))
            .collect()
    }

    fn count(&self, phase: RunPhase) -> usize {
        self.latest()
            .values()
            .filter(|r| r.phase() == phase)
            .count()
    }

    fn all_terminal(&self, names: &[&str]) -> bool {
        names
            .iter()
            .all(|n| self.phase(n).is_some_and(RunPhase::is_terminal))
    }

    /// The Running Runs after every recorded event, in order.
    fn running_after_each_event(&self) -> Vec<Vec<String>> {
        let mut current: BTreeMap<String, RunPhase> = BTreeMap::new();
        let mut out = Vec::new();
        for e in &self.0 {
            if e.deleted {
                current.remove(&e.run.name_any());
            } else {
                current.insert(e.run.name_any(), e.run.phase());
            }
            out.push(
                current
                    .iter()
                    .filter(|(_, p)| **p == RunPhase::Running)
                    .map(|(n, _)| n.clone())
                    .collect(),
            );
        }
        out
    }

    /// The versions of one Run, in order.
    fn history(&self, name: &str) -> Vec<Arc<Run>> {
        self.0
            .iter()
            .filter(|e| !e.deleted && e.run.name_any() == name)
            .map(|e| e.run.clone())
            .collect()
    }
}

fn reason(run: &Run) -> Option<&str> {
    run.status.as_ref()?.reason.as_deref()
}

fn message(run: &Run) -> &str {
    run.status
        .as_ref()
        .and_then(|s| s.message.as_deref())
        .unwrap_or("")
}

fn admitted(run: &Run) -> bool {
    run.status
        .as_ref()
        .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == CONDITION_ADMITTED))
}

/// Asserts that after each Scheduled version of `name` the next version is the claim
/// (Running, Admitted), i.e. nothing wrote to the Run while it waited.
fn assert_untouched_until_claimed(state: &State, name: &str, scheduled_rv: &str) {
    let history = state.history(name);
    let at = history
        .iter()
        .position(|r| r.resource_version().as_deref() == Some(scheduled_rv))
        .unwrap_or_else(|| {
            panic!("Run {name}: the Scheduled write {scheduled_rv} was not observed")
        });
    let next = history
        .get(at + 1)
        .unwrap_or_else(|| panic!("Run {name} never changed after being Scheduled"));
    assert_eq!(
        next.phase(),
        RunPhase::Running,
        "Run {name}: the first change after Scheduled must be the claim, got {:?}",
        next.status
    );
    assert!(
        admitted(next),
        "Run {name}: the claim carries the Admitted condition"
    );
}

// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_assignments_beyond_capacity_wait_untouched_and_all_complete() {
    let fx = Fixture::new("rtd-stale", &[("runs", "2")]).await;
    let rtd = fx.runtimed(&[]);
    let names = ["s-1", "s-2", "s-3", "s-4", "s-5"];
    // A Run assigned to another Pod of the namespace is none of this agent's business.
    fx.create("elsewhere", &["true"], &[]).await;
    let elsewhere_rv = fx
        .bind("elsewhere", "Scheduled", Some(("rt-1", "uid-of-rt-1")))
        .await;

    let mut scheduled_rv = HashMap::new();
    for name in names {
        scheduled_rv.insert(name, fx.assign(name, &["sh", "-c", "sleep 0.3"], &[]).await);
    }
    fx.wait_until(&rtd, "all five Runs to end", |s| s.all_terminal(&names))
        .await;

    let state = fx.recorder.state();
    for (i, running) in state.running_after_each_event().iter().enumerate() {
        assert!(
            running.len() <= 2,
            "event {i}: {} Runs Running at once on runs: 2: {running:?}",
            running.len()
        );
    }
    assert!(
        state
            .running_after_each_event()
            .iter()
            .any(|r| r.len() == 2),
        "both slots were used at some point"
    );
    for name in names {
        let latest = &state.latest()[name];
        assert_eq!(
            latest.phase(),
            RunPhase::Succeeded,
            "Run {name}: {:?}",
            latest.status
        );
        assert_eq!(latest.status.as_ref().unwrap().exit_code, Some(0));
        assert_untouched_until_claimed(&state, name, &scheduled_rv[name]);
    }
    let waited = names
        .iter()
        .filter(|n| {
            // Waited: Scheduled at an event where both slots were taken by others.
            let mut current: BTreeMap<String, RunPhase> = BTreeMap::new();
            state.0.iter().any(|e| {
                current.insert(e.run.name_any(), e.run.phase());
                current.get(**n) == Some(&RunPhase::Scheduled)
                    && current
                        .values()
                        .filter(|p| **p == RunPhase::Running)
                        .count()
                        == 2
            })
        })
        .count();
    assert!(
        waited >= 1,
        "with 5 Runs on 2 slots some Run must have waited"
    );

    let other = fx.get("elsewhere").await;
    assert_eq!(other.phase(), RunPhase::Scheduled);
    assert_eq!(
        other.resource_version().as_deref(),
        Some(elsewhere_rv.as_str()),
        "a Run of another Pod was written to"
    );
    assert!(
        std::fs::read_to_string(&rtd.log)
            .unwrap()
            .contains("watching Runs with the field selector status.podName=rt-0"),
        "runtimed should watch with the server-side field selector\n{}",
        rtd.log_tail()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_sharing_one_gpu_run_one_after_the_other() {
    let fx = Fixture::new("rtd-gpu", &[("runs", "4"), (GPU, "1")]).await;
    let rtd = fx.runtimed(&[]);
    let a = fx
        .assign("gpu-a", &["sh", "-c", "sleep 0.5"], &[(GPU, "1")])
        .await;
    let b = fx
        .assign("gpu-b", &["sh", "-c", "sleep 0.5"], &[(GPU, "1")])
        .await;
    fx.wait_until(&rtd, "both GPU Runs to end", |s| {
        s.all_terminal(&["gpu-a", "gpu-b"])
    })
    .await;

    let state = fx.recorder.state();
    for running in state.running_after_each_event() {
        assert!(
            running.len() <= 1,
            "two Runs held the single GPU at once: {running:?}"
        );
    }
    for (name, rv) in [("gpu-a", &a), ("gpu-b", &b)] {
        assert_eq!(state.phase(name), Some(RunPhase::Succeeded));
        assert_untouched_until_claimed(&state, name, rv);
    }
    let admitted_msg = state
        .history("gpu-a")
        .iter()
        .find(|r| r.phase() == RunPhase::Running)
        .map(|r| {
            r.status
                .as_ref()
                .unwrap()
                .conditions
                .iter()
                .find(|c| c.type_ == CONDITION_ADMITTED)
                .unwrap()
                .message
                .clone()
        });
    assert_eq!(
        admitted_msg.as_deref(),
        Some("runtimed on Pod rt-0 reserved {example.com/gpu: 1, runs: 1}")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_exits_and_unstartable_programs_are_failed_and_release_capacity() {
    let fx = Fixture::new("rtd-fail", &[("runs", "1")]).await;
    let rtd = fx.runtimed(&[]);
    fx.assign("exit-3", &["sh", "-c", "echo about to fail; exit 3"], &[])
        .await;
    fx.assign(
        "missing",
        &["/nonexistent/kruntimes-no-such-program", "--flag"],
        &[],
    )
    .await;
    fx.assign("after", &["true"], &[]).await;
    let names = ["exit-3", "missing", "after"];
    fx.wait_until(&rtd, "the three Runs to end", |s| s.all_terminal(&names))
        .await;

    let state = fx.recorder.state();
    let latest = state.latest();
    let exit3 = latest["exit-3"].status.as_ref().unwrap();
    assert_eq!(exit3.phase, Some(RunPhase::Failed));
    assert_eq!(exit3.exit_code, Some(3));
    assert_eq!(exit3.reason.as_deref(), Some(reasons::EXIT_CODE));
    assert_eq!(
        exit3.message.as_deref(),
        Some("the process exited with code 3")
    );
    assert!(exit3.completion_time.is_some() && exit3.start_time.is_some());

    let missing = &latest["missing"];
    assert_eq!(missing.phase(), RunPhase::Failed);
    assert_eq!(reason(missing), Some(reasons::START_FAILED));
    assert!(
        message(missing).starts_with(
            "cannot start \"/nonexistent/kruntimes-no-such-program\": No such file or directory"
        ),
        "{}",
        message(missing)
    );

    assert_eq!(
        latest["after"].phase(),
        RunPhase::Succeeded,
        "capacity was not released"
    );
    for running in state.running_after_each_event() {
        assert!(running.len() <= 1, "{running:?}");
    }
    assert!(
        std::fs::read_to_string(&rtd.log)
            .unwrap()
            .contains("[exit-3] about to fail"),
        "child output is logged with the Run name\n{}",
        rtd.log_tail()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_that_cannot_be_run_as_written_fail_without_being_claimed() {
    let fx = Fixture::new("rtd-invalid", &[("runs", "1")]).await;
    let rtd = fx.runtimed(&[]);
    fx.create_with(
        "value-from",
        json!({"task": {"args": ["true"], "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}}),
        &[],
    )
    .await;
    fx.bind("value-from", "Scheduled", None).await;
    fx.create_with("no-task", json!({}), &[]).await;
    fx.bind("no-task", "Scheduled", None).await;
    fx.assign("after", &["true"], &[]).await;
    let names = ["value-from", "no-task", "after"];
    fx.wait_until(&rtd, "the three Runs to end", |s| s.all_terminal(&names))
        .await;

    let state = fx.recorder.state();
    let latest = state.latest();
    for (name, want) in [
        (
            "value-from",
            "spec.mode.task.env[\"NODE\"] uses valueFrom, which runtimed does not support; set a plain value instead",
        ),
        (
            "no-task",
            "spec.mode.task is not set; runtimed executes only Task Runs",
        ),
    ] {
        let run = &latest[name];
        assert_eq!(run.phase(), RunPhase::Failed, "{name}");
        assert_eq!(reason(run), Some(reasons::START_FAILED), "{name}");
        assert_eq!(message(run), want);
        assert!(
            state
                .history(name)
                .iter()
                .all(|r| r.phase() != RunPhase::Running && !admitted(r)),
            "{name} was claimed although it cannot run"
        );
    }
    assert_eq!(latest["after"].phase(), RunPhase::Succeeded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raising_the_capacity_annotation_raises_concurrency_without_a_restart() {
    let fx = Fixture::new("rtd-raise", &[("runs", "1")]).await;
    let mut rtd = fx.runtimed(&[]);
    let pid = rtd.pid();
    let names = ["r-1", "r-2", "r-3"];
    for name in names {
        fx.assign(name, &["sleep", "30"], &[]).await;
    }
    fx.wait_until(&rtd, "one Run Running", |s| s.count(RunPhase::Running) == 1)
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let state = fx.recorder.state();
    assert_eq!(
        state.count(RunPhase::Running),
        1,
        "runs: 1 admits one Run: {:?}",
        state.phases()
    );
    assert_eq!(state.count(RunPhase::Scheduled), 2, "{:?}", state.phases());

    let patch = json!({"metadata": {"annotations": {"kruntimes.io/capacity.runs": "3"}}});
    Api::<Pod>::namespaced(fx.client.clone(), &fx.ns)
        .patch("rt-0", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    fx.wait_until(&rtd, "three Runs Running after the raise", |s| {
        s.count(RunPhase::Running) == 3
    })
    .await;
    assert!(
        rtd.is_running(),
        "runtimed restarted or died\n{}",
        rtd.log_tail()
    );
    assert_eq!(rtd.pid(), pid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_is_renewed_and_sigterm_drains_kills_and_drops_it() {
    let fx = Fixture::new("rtd-lease", &[("runs", "2")]).await;
    let mut rtd = fx.runtimed(&[
        "--heartbeat-interval",
        "1s",
        "--heartbeat-duration",
        "5s",
        "--shutdown-grace",
        "4s",
    ]);
    let leases = Api::<Lease>::namespaced(fx.client.clone(), &fx.ns);

    let deadline = Instant::now() + WAIT;
    let first = loop {
        if let Some(lease) = leases.get_opt("rt-0").await.unwrap() {
            break lease;
        }
        assert!(
            Instant::now() < deadline,
            "no Lease rt-0 appeared\n{}",
            rtd.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let spec = first.spec.clone().unwrap();
    assert_eq!(
        spec.holder_identity,
        Some(fx.pod_uid()),
        "held by the Pod UID"
    );
    assert_eq!(spec.lease_duration_seconds, Some(5));
    let owner = &first.owner_references()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Pod", "rt-0"));
    assert_eq!(owner.uid, fx.pod_uid(), "owned by the Pod");
    assert_eq!(
        first
            .labels()
            .get("kruntimes.io/runtime-pod")
            .map(String::as_str),
        Some("rt-0")
    );
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let later = leases.get("rt-0").await.unwrap().spec.unwrap();
    assert!(
        later.renew_time.as_ref().unwrap().0 > spec.renew_time.as_ref().unwrap().0,
        "renewTime did not advance: {:?} then {:?}",
        spec.renew_time,
        later.renew_time
    );

    fx.assign("long", &["sleep", "60"], &[]).await;
    fx.assign("short", &["sleep", "2"], &[]).await;
    fx.wait_until(&rtd, "both Runs Running", |s| {
        s.count(RunPhase::Running) == 2
    })
    .await;
    let queued_rv = fx.assign("queued", &["true"], &[]).await;
    rtd.sigterm();
    let status = rtd.wait(Duration::from_secs(20)).await;
    assert!(
        status.success(),
        "runtimed exits 0 after SIGTERM: {status}\n{}",
        rtd.log_tail()
    );

    let long = fx.get("long").await;
    assert_eq!(long.phase(), RunPhase::Failed);
    assert_eq!(reason(&long), Some(reasons::RUNTIME_POD_TERMINATED));
    assert!(
        message(&long).contains("grace period"),
        "{}",
        message(&long)
    );
    let short = fx.get("short").await;
    assert_eq!(
        short.phase(),
        RunPhase::Succeeded,
        "a Run that ends within the grace period keeps its outcome"
    );
    let queued = fx.get("queued").await;
    assert_eq!(
        queued.phase(),
        RunPhase::Scheduled,
        "nothing is claimed after SIGTERM"
    );
    assert_eq!(
        queued.resource_version(),
        Some(queued_rv),
        "the queued Run was written to"
    );
    assert_eq!(fx.recorder.state().count(RunPhase::Running), 0);
    assert!(
        leases.get_opt("rt-0").await.unwrap().is_none(),
        "the Lease survived the shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_runs_left_by_an_earlier_runtimed_are_failed_on_start() {
    let fx = Fixture::new("rtd-restart", &[("runs", "1")]).await;
    fx.create("orphan", &["sleep", "60"], &[]).await;
    fx.bind("orphan", "Running", None).await;
    fx.assign("next", &["true"], &[]).await;
    let rtd = fx.runtimed(&[]);
    fx.wait_until(&rtd, "both Runs to end", |s| {
        s.all_terminal(&["orphan", "next"])
    })
    .await;
    let latest = fx.recorder.state().latest();
    assert_eq!(latest["orphan"].phase(), RunPhase::Failed);
    assert_eq!(reason(&latest["orphan"]), Some(reasons::RUNTIMED_RESTARTED));
    assert_eq!(
        latest["next"].phase(),
        RunPhase::Succeeded,
        "the orphan holds no capacity"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_running_run_kills_its_process_and_releases_capacity() {
    let fx = Fixture::new("rtd-delete", &[("runs", "1")]).await;
    let rtd = fx.runtimed(&[]);
    let pidfile = fx.dir.path().join("victim.pid");
    let script = format!("echo $$ > {} && exec sleep 60", pidfile.display());
    fx.assign("victim", &["sh", "-c", &script], &[]).await;
    fx.assign("next", &["true"], &[]).await;
    fx.wait_until(&rtd, "victim Running", |s| {
        s.phase("victim") == Some(RunPhase::Running)
    })
    .await;
    let deadline = Instant::now() + WAIT;
    let pid = loop {
        if let Ok(text) = std::fs::read_to_string(&pidfile)
            && let Ok(pid) = text.trim().parse::<u32>()
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the victim never wrote its pid");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // The recorder may not have seen next's bind yet: wait for it, it must stay Scheduled.
    fx.wait_until(&rtd, "next to be seen Scheduled behind the victim", |s| {
        s.phase("next") == Some(RunPhase::Scheduled)
    })
    .await;

    fx.runs
        .delete("victim", &DeleteParams::default())
        .await
        .unwrap();
    fx.wait_until(&rtd, "next to succeed after the delete", |s| {
        s.phase("next") == Some(RunPhase::Succeeded)
    })
    .await;
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while proc.exists() {
        assert!(
            Instant::now() < deadline,
            "the process of the deleted Run ({pid}) is still alive"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn runtimed_without_a_pod_identity_fails_with_one_clear_line() {
    let out = Command::new(support::binary())
        .arg("runtimed")
        .env_remove("POD_NAME")
        .env_remove("POD_NAMESPACE")
        .env_remove("POD_UID")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim(),
        "error: runtimed needs the identity of its Pod but POD_NAME, POD_NAMESPACE, POD_UID are not set; set them through the downward API (fieldRef metadata.name, metadata.namespace, metadata.uid) or pass --pod-name --pod-namespace --pod-uid"
    );
}
