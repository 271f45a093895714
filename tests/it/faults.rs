//! Faults on purpose, on the real control plane with the built binaries: kube-apiserver and
//! etcd crashes, runtimed crashes and hangs, Runtime Pods deleted under their Runs, a Runtime
//! scaled down or deleted under load, the scheduler killed mid-burst. Each scenario ends with
//! every Run in the phase it should have, no Pod over capacity at any Run event (a watch that
//! records every event until it has caught up with the final state), and no capacity left
//! held: the scheduler places new work on every surviving Pod up to its full capacity.
//!
//! Scenarios that take the API server or etcd down hold this suite's control plane
//! exclusively; the others share it.

use testkit as support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::DeleteParams;
use tokio::sync::RwLock;

use kruntimes::api::{Run, RunPhase, Runtime};
use kruntimes::testing::{pod, run};
use kruntimes::util::process::Signal;
use support::Fault;
use support::pool::Pool;
use support::world::{Create, SchedulerProcess, TestNs, count, eventually};

/// Exclusive for scenarios that crash the control plane, shared for the others.
static CONTROL_PLANE: RwLock<()> = RwLock::const_new(());

/// How long a scenario may take to heal after its fault.
const HEAL: Duration = Duration::from_secs(120);
/// runtimed renews every second for 5 s, so a lost agent is noticed within seconds.
const RUNTIMED_ARGS: [&str; 4] = ["--heartbeat-interval", "1s", "--heartbeat-duration", "5s"];
/// The scheduler's `--pod-lost-grace` in these scenarios.
const GRACE: &str = "--pod-lost-grace=5s";

trait LastPod {
    fn active_pod_or_last(&self) -> &str;
}

impl LastPod for Run {
    fn active_pod_or_last(&self) -> &str {
        self.status
            .as_ref()
            .and_then(|s| s.assigned_pod.as_deref())
            .unwrap_or("-")
    }
}

fn reason(run: &Run) -> Option<&str> {
    run.status.as_ref()?.reason.as_deref()
}

fn phases(runs: &BTreeMap<String, Run>) -> BTreeMap<String, usize> {
    runs.values().fold(BTreeMap::new(), |mut m, r| {
        let key = match reason(r) {
            Some(reason) if r.phase() == RunPhase::Failed => format!("Failed/{reason}"),
            _ => r.phase().as_str().to_string(),
        };
        *m.entry(key).or_insert(0) += 1;
        m
    })
}

async fn scheduler(ns: &TestNs, identity: &str) -> SchedulerProcess {
    let kubeconfig = support::control_plane().kubeconfig.clone();
    SchedulerProcess::start_with(&kubeconfig, &ns.name, 4, None, identity, &[GRACE]).await
}

/// Waits until kube-apiserver answers again after a restart.
async fn wait_api(ns: &TestNs) {
    let api = ns.runs();
    eventually(HEAL, "kube-apiserver to answer again", async || {
        api.list(&Default::default())
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
}

/// A burst of 40 short Runs on 2 Pods of `runs: 2` under the schedulers `start` returns;
/// `fault` strikes once 8 have succeeded. Every Run must succeed, with no overcommit at any
/// event and no capacity left held.
async fn burst_survives(
    prefix: &str,
    start: impl AsyncFnOnce(&TestNs) -> Vec<SchedulerProcess>,
    fault: impl AsyncFnOnce(&TestNs, &mut Vec<SchedulerProcess>),
) {
    let ns = TestNs::new(prefix).await;
    let mut schedulers = start(&ns).await;
    let pool = Pool::start(&ns, "sh", 2, &[("runs", 2)], &RUNTIMED_ARGS)
        .await
        .patience(HEAL);
    let watch = pool.overcommit_watch().await;
    let started = Instant::now();
    let names = pool.runs("r", 40, "sleep 0.3").await;
    pool.until("8 Runs succeeded", |runs| {
        (count(runs, RunPhase::Succeeded) >= 8).then_some(())
    })
    .await;
    fault(&pool.ns, &mut schedulers).await;
    let healed = Instant::now();
    let done = pool.all_done(&names).await;
    let events = watch.finish_across_outages().await;
    eprintln!(
        "{prefix}: 40 Runs created; ended {:?}; healed {:.1}s after the fault, {:.1}s in all; {events} Run events checked",
        phases(&done),
        healed.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    for (name, r) in &done {
        assert_eq!(
            r.phase(),
            RunPhase::Succeeded,
            "{name} ended {:?}: no result may be lost",
            r.status
        );
        assert_eq!(r.status.as_ref().unwrap().exit_code, Some(0), "{name}");
    }
    pool.assert_no_leaked_capacity("probe").await;
}

/// One scheduler without leader election.
async fn one_scheduler(ns: &TestNs) -> Vec<SchedulerProcess> {
    vec![scheduler(ns, "only").await]
}

#[testkit::test]
async fn kube_apiserver_killed_and_restarted_mid_burst_loses_no_result() {
    let _exclusive = CONTROL_PLANE.write().await;
    burst_survives("apiserver", one_scheduler, async |ns, _| {
        support::fault(Fault::Kill("kube-apiserver"));
        // The outage itself: long enough for terminal writes and heartbeats to fail.
        tokio::time::sleep(Duration::from_secs(8)).await;
        support::fault(Fault::Restart("kube-apiserver"));
        wait_api(ns).await;
    })
    .await;
}

#[testkit::test]
async fn etcd_restarted_mid_burst_loses_no_result() {
    let _exclusive = CONTROL_PLANE.write().await;
    burst_survives("etcd", one_scheduler, async |ns, _| {
        support::fault(Fault::Kill("etcd"));
        tokio::time::sleep(Duration::from_secs(4)).await;
        support::fault(Fault::Restart("etcd"));
        wait_api(ns).await;
    })
    .await;
}

#[testkit::test]
async fn the_scheduler_killed_mid_burst_and_restarted_places_every_run() {
    let _shared = CONTROL_PLANE.read().await;
    burst_survives("schedkill", one_scheduler, async |ns, schedulers| {
        schedulers[0].kill();
        schedulers[0] = scheduler(ns, "restarted").await;
    })
    .await;
}

#[testkit::test]
async fn leader_failover_mid_burst_with_two_replicas_places_every_run() {
    let _shared = CONTROL_PLANE.read().await;
    let elected = async |ns: &TestNs, identity: &str| {
        let kubeconfig = support::control_plane().kubeconfig.clone();
        let lease_ns = Some(ns.name.as_str());
        SchedulerProcess::start_with(&kubeconfig, &ns.name, 4, lease_ns, identity, &[GRACE]).await
    };
    let start = async |ns: &TestNs| {
        let leader = elected(ns, "one").await;
        ns.wait_leader("one", Duration::from_secs(20)).await;
        vec![leader, elected(ns, "two").await]
    };
    burst_survives("failover", start, async |ns, schedulers| {
        schedulers[0].kill();
        ns.wait_leader("two", Duration::from_secs(20)).await;
    })
    .await;
}

#[testkit::test]
async fn runtimed_killed_while_runs_run_then_restarted_fails_them_and_frees_the_pod() {
    let _shared = CONTROL_PLANE.read().await;
    let ns = TestNs::new("rtdkill").await;
    let _scheduler = scheduler(&ns, "rtdkill").await;
    let mut pool = Pool::start(&ns, "sh", 1, &[("runs", 2)], &RUNTIMED_ARGS)
        .await
        .patience(HEAL);
    let watch = pool.overcommit_watch().await;
    let names = pool.runs("long", 2, "sleep 300").await;
    pool.until("both Running", |runs| {
        (count(runs, RunPhase::Running) == 2).then_some(())
    })
    .await;
    let pod_name = pool.agents.keys().next().unwrap().clone();
    pool.agents.get_mut(&pod_name).unwrap().crash();
    let healed = Instant::now();
    // The same Pod's agent comes back (the kubelet restarts the container).
    let pod = pool.ns.api::<Pod>().get(&pod_name).await.unwrap();
    pool.agents.remove(&pod_name);
    pool.host(&pod).await;
    let done = pool.all_done(&names).await;
    eprintln!(
        "runtimed SIGKILL + restart: 2 Runs; ended {:?}; healed {:.1}s after the restart",
        phases(&done),
        healed.elapsed().as_secs_f64()
    );
    for r in done.values() {
        assert_eq!(r.phase(), RunPhase::Failed);
        assert_eq!(reason(r), Some("RuntimedRestarted"));
    }
    watch.finish().await;
    pool.assert_no_leaked_capacity("probe").await;
}

#[testkit::test]
async fn a_pod_force_deleted_with_an_unclaimed_run_gets_it_placed_again() {
    let _shared = CONTROL_PLANE.read().await;
    let ns = TestNs::new("lostsched").await;
    // py-a has a heartbeat but no runtimed: a Run placed there stays Scheduled, unclaimed.
    let py_a = pod("py-a")
        .runtime("sh")
        .capacity(&[("runs", 1)])
        .create(&ns)
        .await;
    let _scheduler = scheduler(&ns, "lostsched").await;
    run("w")
        .runtime("sh")
        .task(&["sh", "-c", "true"])
        .create(&ns)
        .await;
    ns.wait_runs(HEAL, "w scheduled on py-a", |runs| {
        runs.iter()
            .find(|r| r.phase() == RunPhase::Scheduled)
            .and_then(|r| (r.active_pod() == Some("py-a")).then_some(()))
    })
    .await;
    let mut pool = Pool::empty(&ns, "sh", &RUNTIMED_ARGS).patience(HEAL);
    pool.count(&py_a);
    let py_b = pod("py-b")
        .runtime("sh")
        .capacity(&[("runs", 1)])
        .create(&pool.ns)
        .await;
    pool.host(&py_b).await;
    let watch = pool.overcommit_watch().await;
    pool.ns
        .api::<Pod>()
        .delete("py-a", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let healed = Instant::now();
    let done = pool.all_done(&["w".to_string()]).await;
    let w = &done["w"];
    eprintln!(
        "Pod deleted under a Scheduled Run: ended {:?} on {}; healed {:.1}s after the deletion",
        phases(&done),
        w.active_pod_or_last(),
        healed.elapsed().as_secs_f64()
    );
    assert_eq!(w.phase(), RunPhase::Succeeded, "{:?}", w.status);
    assert_eq!(
        w.active_pod_or_last(),
        "py-b",
        "placed again on the live Pod"
    );
    watch.finish().await;
    pool.capacity.remove("py-a");
    pool.assert_no_leaked_capacity("probe").await;
}

#[testkit::test]
async fn a_pod_lost_with_a_running_run_fails_it_and_frees_its_capacity() {
    let _shared = CONTROL_PLANE.read().await;
    let ns = TestNs::new("lostrun").await;
    let _scheduler = scheduler(&ns, "lostrun").await;
    let mut pool = Pool::start(&ns, "sh", 2, &[("runs", 1)], &RUNTIMED_ARGS)
        .await
        .patience(HEAL);
    let watch = pool.overcommit_watch().await;
    let long = pool.runs("long", 2, "sleep 300").await;
    pool.until("both Running", |runs| {
        (count(runs, RunPhase::Running) == 2).then_some(())
    })
    .await;
    let waiting = pool.runs("next", 1, "sleep 0.2").await;
    // A node failure: runtimed dies without a word and the Pod is force-deleted.
    let victim = pool.agents.keys().next().unwrap().clone();
    pool.agents.get_mut(&victim).unwrap().crash();
    pool.agents.remove(&victim);
    pool.ns
        .api::<Pod>()
        .delete(&victim, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let healed = Instant::now();
    let lost = pool
        .until("the Run on the lost Pod to fail", |runs| {
            runs.iter()
                .find(|r| long.contains(&r.name_any()) && r.phase() == RunPhase::Failed)
                .cloned()
        })
        .await;
    eprintln!(
        "Pod lost under a Running Run: failed {:?} after {:.1}s",
        reason(&lost),
        healed.elapsed().as_secs_f64()
    );
    assert_eq!(reason(&lost), Some("RuntimePodLost"));
    assert_eq!(lost.active_pod_or_last(), victim);
    // The survivor's long Run is untouched; stop it so the waiting Run can go there.
    let survivor = long
        .iter()
        .find(|n| **n != lost.name_any())
        .unwrap()
        .clone();
    pool.ns
        .runs()
        .delete(&survivor, &Default::default())
        .await
        .unwrap();
    let done = pool.all_done(&waiting).await;
    assert_eq!(done["next-00"].phase(), RunPhase::Succeeded);
    watch.finish().await;
    pool.capacity.remove(&victim);
    pool.assert_no_leaked_capacity("probe").await;
}

#[testkit::test]
async fn a_heartbeat_that_lapses_fails_running_runs_after_the_grace_and_the_pod_comes_back() {
    let _shared = CONTROL_PLANE.read().await;
    let ns = TestNs::new("lapse").await;
    let _scheduler = scheduler(&ns, "lapse").await;
    let pool = Pool::start(&ns, "sh", 1, &[("runs", 1)], &RUNTIMED_ARGS)
        .await
        .patience(HEAL);
    let watch = pool.overcommit_watch().await;
    let names = pool.runs("long", 1, "sleep 300").await;
    pool.until("Running", |runs| {
        (count(runs, RunPhase::Running) == 1).then_some(())
    })
    .await;
    // A hung node: the agent stops renewing (and doing anything else).
    let agent = pool.agents.values().next().unwrap();
    agent.signal(Signal::Stop);
    let lapsed = Instant::now();
    let done = pool.all_done(&names).await;
    let failed_after = lapsed.elapsed();
    agent.signal(Signal::Cont);
    let r = &done["long-00"];
    eprintln!(
        "heartbeat lapse: ended {:?} {:.1}s after the agent froze (lease 5 s + grace 5 s)",
        phases(&done),
        failed_after.as_secs_f64()
    );
    assert_eq!(reason(r), Some("RuntimePodLost"), "{:?}", r.status);
    // The agent comes back: it kills the process of the Run failed under it, leaves the
    // status as the scheduler wrote it, renews its heartbeat, and the Pod takes work again.
    watch.finish().await;
    pool.assert_no_leaked_capacity("probe").await;
    let after = pool.ns.get_run("long-00").await;
    assert_eq!(reason(&after), Some("RuntimePodLost"), "never overwritten");
}

#[testkit::test]
async fn scaling_a_runtime_down_under_load_removes_idle_pods_first() {
    let _shared = CONTROL_PLANE.read().await;
    let ns = TestNs::new("scaledown").await;
    let _scheduler = scheduler(&ns, "scaledown").await;
    let mut pool = Pool::start(&ns, "sh", 3, &[("runs", 2)], &RUNTIMED_ARGS)
        .await
        .patience(HEAL);
    let watch = pool.overcommit_watch().await;
    // One long Run, held until the scale-down is seen: it lands on one Pod, the other two stay
    // idle.
    pool.held("busy-00").create(&pool.ns).await;
    let busy = vec!["busy-00".to_string()];
    let busy_pod = pool
        .until("busy Running", |runs| {
            runs.iter()
                .find(|r| r.phase() == RunPhase::Running)
                .and_then(|r| r.active_pod().map(str::to_string))
        })
        .await;
    let _: Runtime = pool
        .ns
        .merge("sh", serde_json::json!({"spec": {"replicas": 1}}))
        .await;
    let remaining = pool.ns.runtime_pods("sh", 1).await;
    assert_eq!(remaining[0].name_any(), busy_pod, "the busy Pod stays");
    // The kubelet of the removed Pods stops their agents.
    let removed: Vec<String> = pool
        .agents
        .keys()
        .filter(|p| **p != busy_pod)
        .cloned()
        .collect();
    for p in &removed {
        pool.agents.remove(p);
        pool.capacity.remove(p);
    }
    pool.open("busy-00");
    let done = pool.all_done(&busy).await;
    assert_eq!(done["busy-00"].phase(), RunPhase::Succeeded);
    eprintln!(
        "scale 3 -> 1: the busy Pod {busy_pod} stayed, the 2 idle ones went; busy Run ended {:?}",
        phases(&done)
    );
    watch.finish().await;
    pool.assert_no_leaked_capacity("probe").await;
}

#[testkit::test]
async fn a_runtime_deleted_with_pending_and_running_runs_strands_none() {
    let _shared = CONTROL_PLANE.read().await;
    let ns = TestNs::new("rtdelete").await;
    let _scheduler = scheduler(&ns, "rtdelete").await;
    let mut pool = Pool::start(&ns, "sh", 1, &[("runs", 1)], &RUNTIMED_ARGS)
        .await
        .patience(HEAL);
    let running = pool.runs("long", 1, "sleep 300").await;
    pool.until("Running", |runs| {
        (count(runs, RunPhase::Running) == 1).then_some(())
    })
    .await;
    let pending = pool.runs("wait", 1, "true").await;
    pool.ns
        .api::<Runtime>()
        .delete("sh", &Default::default())
        .await
        .unwrap();
    // No kube-controller-manager here: play the garbage collector (the Pods are owned by the
    // Runtime) and the kubelet (the agents stop).
    let pods: Vec<String> = pool.agents.keys().cloned().collect();
    for p in &pods {
        pool.agents.remove(p);
        pool.ns
            .api::<Pod>()
            .delete(p, &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
    }
    let healed = Instant::now();
    let done = pool.all_done(&running).await;
    let r = &done["long-00"];
    assert_eq!(r.phase(), RunPhase::Failed);
    assert!(
        matches!(reason(r), Some("RuntimePodLost" | "RuntimePodTerminated")),
        "{:?}",
        r.status
    );
    let message = "Runtime \"sh\" not found in this namespace; waiting for available runtime pods.";
    pool.until("the Pending Run to say its Runtime is gone", |runs| {
        runs.iter()
            .find(|r| pending.contains(&r.name_any()))
            .and_then(|r| r.status.as_ref()?.message.as_deref().map(str::to_string))
            .filter(|m| m == message)
    })
    .await;
    eprintln!(
        "Runtime deleted: Running ended {:?}, Pending says {message:?} ({:.1}s)",
        phases(&done),
        healed.elapsed().as_secs_f64()
    );
}
