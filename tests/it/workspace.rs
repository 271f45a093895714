//! Bound workspace placement on the real control plane with real runtimed processes: Runs
//! that share a PersistentWorkspace land on the Runtime Pod that holds it (a chain created
//! one after another, a burst on an unbound workspace, across a scheduler failover); a full
//! bound Pod makes the next Run wait and then take it; the Pod's loss makes the workspace
//! Lost and fails the Run that waits for it. Every Run event is recorded: no overcommit, and
//! no two Pods ever hold Runs of one workspace.

use testkit as support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use kube::api::DeleteParams;
use kube::runtime::watcher;

use kruntimes::api::{PersistentWorkspace, Run, RunPhase};
use kruntimes::testing::{run, runtime, workspace};
use support::pool::{HEARTBEAT, Pool};
use support::world::{Create, OvercommitWatch, RunEvent, SchedulerProcess, TestNs, eventually};

const RUNTIME: &str = "pool";

/// A Run of the pool using workspace `ws` that runs `script` with `sh -c`.
fn step(name: &str, ws: &str, script: &str) -> kruntimes::testing::RunBuilder {
    run(name)
        .runtime(RUNTIME)
        .workspace(ws)
        .task(&["sh", "-c", script])
}

/// The Pods that ever held a Run using `ws`, over every recorded event.
fn pods_of_workspace(events: &[RunEvent], ws: &str) -> BTreeSet<String> {
    events
        .iter()
        .filter(|e| e.run.workspace_name() == Some(ws))
        .filter_map(|e| e.run.active_pod().map(str::to_string))
        .collect()
}

async fn get_workspace(ns: &TestNs, name: &str) -> PersistentWorkspace {
    ns.api::<PersistentWorkspace>().get(name).await.unwrap()
}

/// Waits until the workspace's status satisfies `check`.
async fn wait_workspace(
    ns: &TestNs,
    name: &str,
    what: &str,
    check: impl Fn(&PersistentWorkspace) -> bool,
) -> PersistentWorkspace {
    let api = ns.api::<PersistentWorkspace>();
    eventually(Duration::from_secs(30), what, async || {
        let w = api.get(name).await.unwrap();
        if check(&w) {
            Ok(w)
        } else {
            Err(format!("{:?}", w.status))
        }
    })
    .await
}

/// Every version of a namespace's PersistentWorkspaces a watch of the test's own delivered,
/// in the API server's order: a deleted one's last version with them. Stopped on drop.
struct WorkspaceVersions {
    seen: Arc<Mutex<Vec<(PersistentWorkspace, bool)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WorkspaceVersions {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl WorkspaceVersions {
    /// Starts the watch and returns once its initial list is in.
    async fn start(ns: &TestNs) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (listed, is_listed) = tokio::sync::oneshot::channel();
        let sink = seen.clone();
        let api = ns.api::<PersistentWorkspace>();
        let task = tokio::spawn(async move {
            let mut listed = Some(listed);
            let mut stream = watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Apply(w) | watcher::Event::InitApply(w)) => {
                        sink.lock().unwrap().push((w, false))
                    }
                    Ok(watcher::Event::Delete(w)) => sink.lock().unwrap().push((w, true)),
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = listed.take() {
                            let _ = tx.send(());
                        }
                    }
                    Ok(watcher::Event::Init) | Err(_) => {}
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(30), is_listed)
            .await
            .expect("the PersistentWorkspace watch did not list within 30s")
            .expect("the PersistentWorkspace watch ended before it listed");
        WorkspaceVersions { seen, task }
    }

    /// The versions of `name` so far, each with whether it is the one its deletion carried.
    fn of(&self, name: &str) -> Vec<(PersistentWorkspace, bool)> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .filter(|(w, _)| w.name_any() == name)
            .cloned()
            .collect()
    }
}

/// The workspaces' `ttlSecondsAfterUnused` in the TTL test.
const TTL_SECONDS: i32 = 2;

fn ttl() -> SignedDuration {
    SignedDuration::from_secs(TTL_SECONDS.into())
}

/// When `w` was Released: its `Bound=False/Released` condition, stamped by the scheduler as it
/// wrote the release (whole seconds).
fn released_at(w: &PersistentWorkspace) -> Option<Timestamp> {
    w.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Bound" && c.status == "False" && c.reason == "Released")
        .map(|c| c.last_transition_time.0)
}

/// `status.lastUsedTime` of `w`.
fn last_used(w: &PersistentWorkspace) -> Timestamp {
    w.status
        .as_ref()
        .and_then(|s| s.last_used_time.as_ref())
        .unwrap_or_else(|| panic!("{} has no lastUsedTime: {:?}", w.name_any(), w.status))
        .0
}

async fn wait_phase(ns: &TestNs, name: &str, phase: RunPhase) -> Run {
    ns.wait_runs(
        Duration::from_secs(60),
        &format!("Run {name} {}", phase.as_str()),
        |runs| {
            runs.iter()
                .find(|r| r.name_any() == name && r.phase() == phase)
                .cloned()
        },
    )
    .await
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_runs_each_created_after_the_last_finished_stays_on_the_workspaces_pod() {
    let ns = TestNs::new("ws-chain").await;
    let _scheduler = SchedulerProcess::start(&ns.name, 4, None, "ws-chain").await;
    let pool = Pool::start(&ns, RUNTIME, 3, &[("runs", 4)], &HEARTBEAT).await;
    let watch = pool.overcommit_watch().await;
    workspace("build").runtime(RUNTIME).create(&ns).await;

    // Each step appends a line to a file in the workspace and succeeds only when it finds
    // every earlier step's line there: the steps share one directory on one Pod.
    let mut pods = Vec::new();
    for i in 1..=5 {
        let name = format!("step-{i}");
        step(
            &name,
            "build",
            &format!("echo {i} >> steps && test \"$(wc -l < steps)\" -eq {i}"),
        )
        .create(&ns)
        .await;
        let done = wait_phase(&ns, &name, RunPhase::Succeeded).await;
        pods.push(done.status.unwrap().assigned_pod.unwrap());
        if i == 1 {
            // A long Run on the workspace makes its Pod the fullest: the later steps must
            // still go there, not to the two emptier Pods.
            step("holder", "build", "sleep 600").create(&ns).await;
            wait_phase(&ns, "holder", RunPhase::Running).await;
        }
    }
    let first = pods[0].clone();
    assert!(
        pods.iter().all(|p| *p == first),
        "the steps ran on several Pods: {pods:?}"
    );
    let bound = wait_workspace(&ns, "build", "the workspace Bound to the steps' Pod", |w| {
        w.bound_pod() == Some(first.as_str())
    })
    .await;
    let status = bound.status.unwrap();
    assert_eq!(status.path.as_deref(), Some("/workspace/persistent/build"));
    assert!(status.last_used_time.is_some());
    ns.runs()
        .delete("holder", &DeleteParams::default())
        .await
        .unwrap();
    let events = watch.finish_recorded().await;
    assert_eq!(pods_of_workspace(&events, "build"), BTreeSet::from([first]));
    drop(pool.agents);
}

/// Creates 20 short Runs on the unbound workspace `ws` at once and waits until all succeeded;
/// `midway` runs once the first of them is bound. Returns the recorded events.
async fn burst(ns: &TestNs, ws: &str, watch: OvercommitWatch, midway: impl AsyncFnOnce()) {
    workspace(ws).runtime(RUNTIME).create(ns).await;
    let runs: Vec<_> = (0..20)
        .map(|i| step(&format!("{ws}-{i:02}"), ws, "sleep 0.3"))
        .collect();
    runs.create(ns).await;
    ns.wait_runs(Duration::from_secs(60), "a first Run bound", |runs| {
        runs.iter().find_map(|r| r.active_pod().map(str::to_string))
    })
    .await;
    midway().await;
    ns.wait_runs(Duration::from_secs(120), "all 20 Succeeded", |runs| {
        (runs.len() == 20 && runs.iter().all(|r| r.phase() == RunPhase::Succeeded)).then_some(())
    })
    .await;
    let events = watch.finish_recorded().await;
    let pods = pods_of_workspace(&events, ws);
    assert_eq!(
        pods.len(),
        1,
        "Runs of one workspace on several Pods: {pods:?}"
    );
    let w = get_workspace(ns, ws).await;
    assert_eq!(w.bound_pod(), pods.iter().next().map(String::as_str));
    eprintln!(
        "{ws}: 20 Runs on {pods:?}; {} Run events checked",
        events.len()
    );
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_twenty_runs_on_an_unbound_workspace_all_land_on_one_pod() {
    let ns = TestNs::new("ws-burst").await;
    let _scheduler = SchedulerProcess::start(&ns.name, 4, None, "ws-burst").await;
    let pool = Pool::start(&ns, RUNTIME, 3, &[("runs", 4)], &HEARTBEAT).await;
    let watch = pool.overcommit_watch().await;
    burst(&ns, "burst", watch, async || {}).await;
    drop(pool.agents);
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_in_the_middle_of_a_burst_keeps_the_workspace_on_one_pod() {
    let ns = TestNs::new("ws-failover").await;
    let mut leader = SchedulerProcess::start(&ns.name, 4, Some(&ns.name), "ws-a").await;
    ns.wait_leader("ws-a", Duration::from_secs(30)).await;
    let _standby = SchedulerProcess::start(&ns.name, 4, Some(&ns.name), "ws-b").await;
    let pool = Pool::start(&ns, RUNTIME, 3, &[("runs", 2)], &HEARTBEAT).await;
    let watch = pool.overcommit_watch().await;
    burst(&ns, "fo", watch, async || {
        leader.kill();
        ns.wait_leader("ws-b", Duration::from_secs(30)).await;
    })
    .await;
    drop(pool.agents);
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_bound_pod_makes_the_run_wait_and_its_loss_fails_it() {
    let ns = TestNs::new("ws-full").await;
    let _scheduler = SchedulerProcess::start_with(
        &support::control_plane().kubeconfig,
        &ns.name,
        4,
        None,
        "ws-full",
        &["--pod-lost-grace=5s"],
    )
    .await;
    let pool = Pool::start(&ns, RUNTIME, 2, &[("runs", 1)], &HEARTBEAT).await;
    let watch = pool.overcommit_watch().await;
    workspace("notebook").runtime(RUNTIME).create(&ns).await;

    // The bound Pod is full: the next Run waits there with both reasons, and takes the room
    // when it frees, although the other Pod is empty all along.
    // kernel runs until the test has seen cell wait.
    step("kernel", "notebook", &pool.gates.hold("kernel"))
        .create(&ns)
        .await;
    let kernel = wait_phase(&ns, "kernel", RunPhase::Running).await;
    let pod = kernel.active_pod().unwrap().to_string();
    step("cell", "notebook", "true").create(&ns).await;
    let message = ns
        .wait_runs(
            Duration::from_secs(30),
            "cell waits for the bound Pod",
            |runs| {
                runs.iter()
                    .find(|r| r.name_any() == "cell")
                    .and_then(|r| r.status.as_ref()?.message.clone())
            },
        )
        .await;
    assert_eq!(
        message,
        "0/2 Runtime Pods are available: 1 Insufficient runs, 1 bound to another Runtime Pod."
    );
    pool.gates.open("kernel");
    let cell = wait_phase(&ns, "cell", RunPhase::Succeeded).await;
    assert_eq!(
        cell.status.unwrap().assigned_pod.as_deref(),
        Some(pod.as_str())
    );

    // Full again, then the Pod goes: the workspace is Lost and the Run waiting for it fails
    // with the reason, never placed on the other Pod.
    step("long", "notebook", "sleep 600").create(&ns).await;
    wait_phase(&ns, "long", RunPhase::Running).await;
    step("orphan", "notebook", "true").create(&ns).await;
    ns.wait_runs(Duration::from_secs(30), "orphan waits", |runs| {
        runs.iter()
            .find(|r| r.name_any() == "orphan")
            .and_then(|r| r.status.as_ref()?.message.clone())
    })
    .await;
    ns.api::<k8s_openapi::api::core::v1::Pod>()
        .delete(&pod, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let lost = wait_workspace(&ns, "notebook", "the workspace Lost", |w| {
        w.phase() == kruntimes::api::WorkspacePhase::Lost
    })
    .await;
    assert_eq!(
        lost.status.unwrap().bound_pod.as_deref(),
        Some(pod.as_str())
    );
    let orphan = wait_phase(&ns, "orphan", RunPhase::Failed).await;
    let status = orphan.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("WorkspaceLost"));
    assert!(status.assigned_pod.is_none(), "{status:?}");
    let message = status.message.unwrap_or_default();
    assert!(
        message.starts_with("spec.workspace.name: PersistentWorkspace \"notebook\" is Lost"),
        "{message}"
    );
    let events = watch.finish_recorded().await;
    assert_eq!(
        pods_of_workspace(&events, "notebook"),
        BTreeSet::from([pod])
    );
    drop(pool.agents);
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unused_workspace_is_released_after_its_ttl_and_deleted_unless_retained() {
    let ns = TestNs::new("ws-ttl").await;
    let _scheduler = SchedulerProcess::start(&ns.name, 4, None, "ws-ttl").await;
    let pool = Pool::start(&ns, RUNTIME, 1, &[("runs", 2)], &HEARTBEAT).await;
    let versions = WorkspaceVersions::start(&ns).await;
    workspace("scratch")
        .runtime(RUNTIME)
        .ttl(TTL_SECONDS)
        .create(&ns)
        .await;
    workspace("kept")
        .runtime(RUNTIME)
        .ttl(TTL_SECONDS)
        .cleanup_policy("Retain")
        .create(&ns)
        .await;
    step("use-scratch", "scratch", &pool.gates.hold("use-scratch"))
        .create(&ns)
        .await;
    step("use-kept", "kept", &pool.gates.hold("use-kept"))
        .create(&ns)
        .await;
    // In use for longer than the TTL: neither is released while its Run runs. Both are Bound
    // by their Runs, the binding stamping lastUsedTime, from which an unused TTL would count.
    wait_phase(&ns, "use-scratch", RunPhase::Running).await;
    wait_phase(&ns, "use-kept", RunPhase::Running).await;
    let mut bound_at = Vec::new();
    for name in ["scratch", "kept"] {
        let w = get_workspace(&ns, name).await;
        assert_eq!(w.phase(), kruntimes::api::WorkspacePhase::Bound, "{name}");
        bound_at.push((name, last_used(&w)));
    }
    // The absence is awaited, not slept on: the scheduler's own word that it looked after
    // their TTLs ran out. A third workspace with the same TTL that nothing uses, created now
    // (after both bindings), is Released by a lifecycle pass at least a TTL after its
    // creation. Every pass weighs every workspace at one `now`, so that pass would have
    // released the two in use too, had their use not kept them. (It may write them after
    // idle: the release times checked below, from the workspaces' own conditions, catch a
    // release while in use whatever the order.)
    workspace("idle")
        .runtime(RUNTIME)
        .ttl(TTL_SECONDS)
        .cleanup_policy("Retain")
        .create(&ns)
        .await;
    let idle = wait_workspace(&ns, "idle", "idle Released after its TTL", |w| {
        w.phase() == kruntimes::api::WorkspacePhase::Released
    })
    .await;
    let idle_created = idle.creation_timestamp().unwrap().0;
    let pass = released_at(&idle).expect("idle's Released condition");
    assert!(
        pass >= idle_created + ttl(),
        "idle was released at {pass}, before its TTL from its creation at {idle_created}"
    );
    for (name, used) in &bound_at {
        assert!(
            pass >= *used + ttl(),
            "the pass that released idle ({pass}) came before {name}'s TTL from its binding ({used}) ran out"
        );
    }
    for name in ["scratch", "kept"] {
        let w = get_workspace(&ns, name).await;
        assert_eq!(
            w.phase(),
            kruntimes::api::WorkspacePhase::Bound,
            "{name} while its Run runs past its TTL: {:?}",
            w.status
        );
    }
    pool.gates.open("all");
    // Each was in use past its TTL (from its binding to its Run's end, as stamped), and was
    // released only once its TTL had passed from the end of that use (lastUsedTime), never
    // while the Run ran (that Released would be stamped before the Run's end).
    let done = wait_phase(&ns, "use-kept", RunPhase::Succeeded).await;
    let finished = done.status.unwrap().completion_time.unwrap().0;
    let kept = wait_workspace(&ns, "kept", "kept Released after its TTL", |w| {
        w.phase() == kruntimes::api::WorkspacePhase::Released
    })
    .await;
    let status = kept.status.clone().unwrap();
    let last_used_time = status.last_used_time.unwrap().0;
    assert_eq!(
        last_used_time, finished,
        "lastUsedTime is the end of its last use"
    );
    let api = ns.api::<PersistentWorkspace>();
    eventually(
        Duration::from_secs(30),
        "scratch deleted after its TTL",
        async || match api.get_opt("scratch").await.unwrap() {
            None => Ok(()),
            Some(w) => Err(format!("{:?}", w.status)),
        },
    )
    .await;
    // scratch is gone: its Released version as the watch delivered it.
    let scratch = eventually(
        Duration::from_secs(30),
        "the watch to deliver scratch's deletion",
        async || {
            let seen = versions.of("scratch");
            match seen.iter().any(|(_, deleted)| *deleted) {
                true => Ok(seen),
                false => Err(format!("{} versions, none deleted", seen.len())),
            }
        },
    )
    .await;
    let scratch = scratch
        .into_iter()
        .map(|(w, _)| w)
        .find(|w| w.phase() == kruntimes::api::WorkspacePhase::Released)
        .expect("a Released version of scratch before its deletion");
    let scratch_done = ns.get_run("use-scratch").await;
    assert_eq!(scratch_done.phase(), RunPhase::Succeeded);
    let scratch_finished = scratch_done.status.unwrap().completion_time.unwrap().0;
    assert_eq!(
        last_used(&scratch),
        scratch_finished,
        "scratch's lastUsedTime is the end of its last use"
    );
    for (ws, finished, released) in [
        (&kept, finished, released_at(&kept)),
        (&scratch, scratch_finished, released_at(&scratch)),
    ] {
        let name = ws.name_any();
        let used = bound_at.iter().find(|(n, _)| *n == name).unwrap().1;
        let released =
            released.unwrap_or_else(|| panic!("{name}'s Released condition: {:?}", ws.status));
        assert!(
            finished >= used + ttl(),
            "{name} was in use {:#} from its binding, not past its TTL ({TTL_SECONDS}s)",
            finished.duration_since(used)
        );
        assert!(
            released >= finished + ttl(),
            "{name} was released at {released}, less than its TTL ({TTL_SECONDS}s) after its last use ended at {finished}"
        );
        eprintln!(
            "{name}: in use {:#} from its binding (TTL {TTL_SECONDS}s) and not released; released {:#} after its last use ended",
            finished.duration_since(used),
            released.duration_since(finished)
        );
    }
    // A Run naming the Released workspace fails with the reason and what to do.
    step("late", "kept", "true").create(&ns).await;
    let late = wait_phase(&ns, "late", RunPhase::Failed).await;
    assert_eq!(
        late.status.unwrap().reason.as_deref(),
        Some("InvalidWorkspace")
    );
    drop(pool.agents);
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_down_spares_the_pod_a_workspace_is_bound_to() {
    let ns = TestNs::new("ws-scale").await;
    let _scheduler = SchedulerProcess::start(&ns.name, 4, None, "ws-scale").await;
    runtime(RUNTIME).replicas(2).create(&ns).await;
    let mut names: Vec<String> = ns
        .runtime_pods(RUNTIME, 2)
        .await
        .iter()
        .map(|p| p.name_any())
        .collect();
    names.sort();
    // Both idle and not ready: without the workspace the newest name would go first.
    let bound = names[1].clone();
    workspace("data")
        .runtime(RUNTIME)
        .bound(&bound)
        .create(&ns)
        .await;
    ns.merge::<kruntimes::api::Runtime>(RUNTIME, serde_json::json!({"spec": {"replicas": 1}}))
        .await;
    let left = ns.runtime_pods(RUNTIME, 1).await;
    assert_eq!(left[0].name_any(), bound, "the bound Pod was removed");
    assert_eq!(
        get_workspace(&ns, "data").await.bound_pod(),
        Some(bound.as_str())
    );
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_places_the_next_step_where_the_finished_first_one_bound_the_workspace() {
    let ns = TestNs::new("ws-relead").await;
    let mut leader = SchedulerProcess::start(&ns.name, 4, Some(&ns.name), "ws-relead-a").await;
    ns.wait_leader("ws-relead-a", Duration::from_secs(30)).await;
    let _standby = SchedulerProcess::start(&ns.name, 4, Some(&ns.name), "ws-relead-b").await;
    let pool = Pool::start(&ns, RUNTIME, 3, &[("runs", 4)], &HEARTBEAT).await;
    workspace("steps").runtime(RUNTIME).create(&ns).await;

    // The first step ends before the leader goes: no Run of the workspace is active when the
    // new leader starts, so only the binding written before the first Bind can say where.
    step("first", "steps", "echo 1 > out").create(&ns).await;
    let first = wait_phase(&ns, "first", RunPhase::Succeeded).await;
    let pod = first.status.unwrap().assigned_pod.unwrap();
    // Its Pod made the fullest (a Run bound there, not using the workspace), so the new
    // leader's LeastLoaded alone would pick another.
    run("filler")
        .runtime(RUNTIME)
        .requests(&[("runs", 2)])
        .task(&["sleep", "600"])
        .on(&pod)
        .create(&ns)
        .await;
    leader.kill();
    ns.wait_leader("ws-relead-b", Duration::from_secs(30)).await;
    step("second", "steps", "test \"$(cat out)\" = 1")
        .create(&ns)
        .await;
    let second = wait_phase(&ns, "second", RunPhase::Succeeded).await;
    assert_eq!(
        second.status.unwrap().assigned_pod.as_deref(),
        Some(pod.as_str())
    );
    drop(pool.agents);
}
