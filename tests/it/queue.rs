//! Queue order and the bounded wait, on the real control plane with real runtimed processes:
//! a large Run behind a steady stream of small ones is placed once a Pod has been drained for
//! it (also across a scheduler failover), and Runs that fit one at a time run in creation
//! order. The large Run is nominated by the first placement of a later Run once it has waited
//! the starvation threshold, an urgent (priority 1000) one at once, and it then waits only for
//! the Runs its Pod held: nothing decided after its nomination starts there before it (how
//! long it waited is printed, not bounded). A new leader keeps the nomination. No overcommit
//! at any Run event.

use testkit as support;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use kube::ResourceExt;

use kruntimes::api::{Run, RunPhase};
use kruntimes::testing::{priority_class, run};
use support::pool::{HEARTBEAT, Pool};
use support::world::{Create, RunEvent, RunEvents, SchedulerProcess, TestNs, replay};

/// The scheduler's `--starvation-threshold` in these tests.
const THRESHOLD: Duration = Duration::from_secs(3);
/// How long each small Run of the stream sleeps.
const SMALL_SECONDS: f64 = 1.5;
/// Across a failover the small Runs live longer than the leader Lease takes to change hands,
/// so the Pods are still busy when the new leader starts and it must keep the room itself.
const SMALL_SECONDS_FAILOVER: f64 = 6.0;
/// The threshold when the large Run is urgent (priority 1000): longer than any scenario.
const URGENT_THRESHOLD: Duration = Duration::from_secs(600);

/// Creates small Runs of `request` that sleep `seconds`, one every `every`, until
/// stopped; returns how many it created.
struct Stream {
    stop: Arc<AtomicBool>,
    created: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Stream {
    fn start(
        ns: &TestNs,
        request: &'static [(&'static str, u64)],
        seconds: f64,
        every: Duration,
    ) -> Self {
        let (stop, created) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicUsize::new(0)),
        );
        let ns = ns.clone();
        let (stop2, created2) = (stop.clone(), Arc::clone(&created));
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            let mut i = 0;
            while !stop2.load(Ordering::Acquire) {
                tick.tick().await;
                let small = run(&format!("small-{i:04}"))
                    .runtime("pool")
                    .requests(request)
                    .task(&["sh", "-c", &format!("sleep {seconds}")]);
                small.create(&ns).await;
                i += 1;
                created2.store(i, Ordering::Release);
            }
        });
        Stream {
            stop,
            created,
            task,
        }
    }

    async fn stop(self) -> usize {
        self.stop.store(true, Ordering::Release);
        self.task.await.expect("the stream task");
        self.created.load(Ordering::Acquire)
    }
}

/// Each Run as first seen Scheduled (bound): its name, its Pod and the place of that event in
/// `events`, in event order.
fn binds(events: &[RunEvent]) -> Vec<(String, String, usize)> {
    let mut seen = HashMap::new();
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate().filter(|(_, e)| !e.deleted) {
        if let Some(pod) = e.run.active_pod()
            && seen.insert(e.run.name_any(), ()).is_none()
        {
            out.push((e.run.name_any(), pod.to_string(), i));
        }
    }
    out
}

/// The first version of `name` that names a nominated Pod: the Pod, and its place in `events`.
fn nomination(events: &[RunEvent], name: &str) -> Option<(String, usize)> {
    events.iter().enumerate().find_map(|(i, e)| {
        let pod = e.run.status.as_ref()?.nominated_pod_name.clone()?;
        (e.run.name_any() == name).then_some((pod, i))
    })
}

/// The scenario of the issue: a steady stream of small Runs keeps both Pods busy, then one
/// Run asks for a whole Pod. Returns after every Run succeeded; `failover` kills the leader
/// once the large Run is nominated and lets a standby take over.
async fn large_run_behind_a_stream(
    prefix: &str,
    capacity: &'static [(&'static str, u64)],
    small: &'static [(&'static str, u64)],
    large: &'static [(&'static str, u64)],
    failover: bool,
    urgent: bool,
) {
    let ns = TestNs::new(prefix).await;
    // An urgent large Run is nominated for its priority, not for waiting: a threshold it never
    // reaches proves that.
    let threshold = if urgent { URGENT_THRESHOLD } else { THRESHOLD };
    let classes = if urgent {
        ns.priority_classes(&[priority_class("urgent", 1000)]).await
    } else {
        Vec::new()
    };
    let threshold = format!("--starvation-threshold={}s", threshold.as_secs());
    let kubeconfig = support::control_plane().kubeconfig.clone();
    let namespace = ns.name.clone();
    let start = async |identity: &str| {
        let lease_ns = failover.then_some(namespace.as_str());
        let extra = [threshold.as_str()];
        SchedulerProcess::start_with(&kubeconfig, &namespace, 4, lease_ns, identity, &extra).await
    };
    let mut leader = start("queue-a").await;
    let standby = if failover {
        ns.wait_leader("queue-a", Duration::from_secs(30)).await;
        Some(start("queue-b").await)
    } else {
        None
    };
    let pool = Pool::start(&ns, "pool", 2, capacity, &HEARTBEAT).await;
    let ns = &pool.ns;
    let watch = pool.overcommit_watch().await;
    let events = RunEvents::start(ns).await;

    // About 3.3 small Runs a second of 1.5 s each: both Pods always hold some (LeastLoaded
    // spreads them), so neither ever becomes empty on its own.
    // (Across a failover: one 6 s Run a second, still about 6 in flight.)
    let (small_seconds, every) = if failover {
        (SMALL_SECONDS_FAILOVER, Duration::from_secs(1))
    } else {
        (SMALL_SECONDS, Duration::from_millis(300))
    };
    let stream = Stream::start(ns, small, small_seconds, every);
    ns.wait_runs(
        Duration::from_secs(60),
        "the stream to run on both Pods",
        |runs| {
            let mut pods: Vec<&str> = runs
                .iter()
                .filter(|r| r.phase() == RunPhase::Running)
                .filter_map(|r| r.active_pod())
                .collect();
            pods.sort();
            pods.dedup();
            (pods.len() == 2).then_some(())
        },
    )
    .await;

    let large_run = run("large")
        .runtime("pool")
        .requests(large)
        .task(&["sh", "-c", "sleep 0.5"]);
    match urgent {
        true => large_run.priority_class(&ns.class("urgent")),
        false => large_run,
    }
    .create(ns)
    .await;
    if failover {
        let nominated = ns
            .wait_runs(
                Duration::from_secs(60),
                "the large Run to be nominated",
                |runs| {
                    runs.iter()
                        .find(|r| r.name_any() == "large")
                        .and_then(|r| r.status.as_ref()?.nominated_pod_name.clone())
                },
            )
            .await;
        eprintln!("{prefix}: large nominated {nominated}; killing the leader");
        leader.kill();
        ns.wait_leader("queue-b", Duration::from_secs(30)).await;
    }
    let placed = ns
        .wait_runs(
            Duration::from_secs(90),
            "the large Run to be placed",
            |runs| {
                runs.iter()
                    .find(|r| r.name_any() == "large")
                    .and_then(|r| r.active_pod().map(str::to_string))
            },
        )
        .await;
    let small_created = stream.stop().await;
    ns.wait_runs(Duration::from_secs(90), "every Run Succeeded", |runs| {
        (runs.len() == small_created + 1 && runs.iter().all(|r| r.phase() == RunPhase::Succeeded))
            .then_some(())
    })
    .await;
    events.catch_up().await;
    let history = events.events();
    let checked = watch.finish().await;
    drop(standby);
    ns.delete_priority_classes(&classes).await;

    // Nominated, then placed on the nominated Pod.
    let (nominated, nominated_index) =
        nomination(&history, "large").expect("the large Run was nominated a Pod");
    let nominated_at = history[nominated_index].at;
    assert_eq!(placed, nominated, "placed on the Pod drained for it");
    // The nomination held until the placement: every version of the large Run from the
    // nomination on names the same Pod while it waits (a scheduler, or a new leader, that had
    // not taken it over would write its Pending message without it).
    let waiting: Vec<Option<String>> = history
        .iter()
        .skip(nominated_index)
        .filter(|e| !e.deleted && e.run.name_any() == "large")
        .take_while(|e| e.run.active_pod().is_none())
        .map(|e| {
            e.run
                .status
                .as_ref()
                .and_then(|s| s.nominated_pod_name.clone())
        })
        .collect();
    assert!(
        waiting
            .iter()
            .all(|p| p.as_deref() == Some(nominated.as_str())),
        "the nomination was dropped or moved while the large Run waited: {waiting:?}"
    );
    // From the nomination on, no Run after the large one in the queue's order (created later;
    // for an urgent one: every small Run, all of lower priority) started on that Pod before
    // it: the room freed there was kept for it.
    let binds = binds(&history);
    let large_uid = history
        .iter()
        .find(|e| e.run.name_any() == "large")
        .and_then(|e| e.run.uid())
        .unwrap();
    let order = |r: &Run| (r.creation_timestamp(), r.uid());
    let large_order = history
        .iter()
        .find(|e| e.run.uid().as_deref() == Some(large_uid.as_str()))
        .map(|e| order(&e.run))
        .unwrap();
    // How long it waited: from its creation to its bind, both as the test's watch delivered
    // them, so neither the test's own create call nor its polling counts. A figure, printed.
    let created_at = history
        .iter()
        .find(|e| e.run.name_any() == "large")
        .map(|e| e.at)
        .unwrap();
    let bound_at = binds
        .iter()
        .find(|(name, _, _)| name == "large")
        .map(|(_, _, i)| history[*i].at)
        .expect("the large Run's bind was recorded");
    let waited = bound_at - created_at;
    // An urgent Run is nominated at once: the scheduler's first word on it (its first Pending
    // status) already names the Pod.
    if urgent {
        let first_said = history
            .iter()
            .filter(|e| !e.deleted && e.run.name_any() == "large")
            .find_map(|e| e.run.status.as_ref().filter(|s| s.reason.is_some()))
            .expect("the scheduler wrote the large Run's status");
        assert_eq!(
            first_said.nominated_pod_name.as_deref(),
            Some(nominated.as_str()),
            "the urgent Run was not nominated at its first cycle: {first_said:?}"
        );
    }
    // A bind the scheduler decided before the nomination may still be written after it (its
    // reservation was already counted), so it is exempt. Which Runs it may have decided
    // before is bounded by event order and by the API server's clock (the scheduler's is the
    // same host's), never by when the test saw a bind:
    // - a Run the watch showed only after the nomination was created after the nomination
    //   was written, so decided after it;
    // - the scheduler nominates at the first placement of a later Run once the large Run has
    //   waited the threshold since its creationTimestamp (an urgent one: at its own first
    //   cycle, which comes before that of any Run created after it, all of lower priority).
    //   A Run created at or after that instant was decided after the nomination.
    //   (creationTimestamps are whole seconds, so both sides are compared as such.)
    let created = |r: &Run| r.creation_timestamp().expect("a creationTimestamp").0;
    let large_created = history
        .iter()
        .find(|e| e.run.name_any() == "large")
        .map(|e| created(&e.run))
        .unwrap();
    let nominating_from = large_created
        + match urgent {
            true => jiff::SignedDuration::from_secs(1),
            false => jiff::SignedDuration::try_from(THRESHOLD).unwrap(),
        };
    let first_seen = |name: &str| {
        history
            .iter()
            .position(|e| e.run.name_any() == name)
            .map(|i| (i, created(&history[i].run)))
            .unwrap()
    };
    let later_on_nominated: Vec<&String> = binds
        .iter()
        .take_while(|(name, _, _)| name != "large")
        .filter(|(name, pod, _)| {
            let (seen, created) = first_seen(name);
            let decided_before = seen < nominated_index && created < nominating_from;
            *pod == nominated && !decided_before && {
                let r = history.iter().find(|e| e.run.name_any() == *name).unwrap();
                urgent || order(&r.run) > large_order
            }
        })
        .map(|(name, _, _)| name)
        .collect();
    assert!(
        later_on_nominated.is_empty(),
        "later Runs took the room held for the large Run on {nominated}: {later_on_nominated:?}"
    );
    // The stream kept flowing around it: later small Runs were placed while it waited.
    let around = binds
        .iter()
        .take_while(|(name, _, _)| name != "large")
        .filter(|(name, _, i)| name.starts_with("small-") && *i > nominated_index)
        .count();
    // (Across a failover the Pods may drain while no leader places anything.)
    assert!(
        failover || around > 0,
        "no small Run was placed while the large one waited"
    );
    eprintln!(
        "{prefix}: large Run placed on {placed} after {:.1}s: nominated after {:.1}s (threshold {}), then {:.1}s for its Pod to drain (small Runs of {small_seconds}s); {around} small Runs placed around it after its nomination; {small_created} small Runs; {checked} Run events checked for overcommit",
        waited.as_secs_f64(),
        (nominated_at - created_at).as_secs_f64(),
        match urgent {
            true => "none: urgent".to_string(),
            false => format!("{}s", THRESHOLD.as_secs()),
        },
        (bound_at - nominated_at).as_secs_f64(),
    );
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_run_behind_a_stream_of_small_ones_is_placed_within_the_bounded_wait() {
    large_run_behind_a_stream(
        "queue-runs",
        &[("runs", 4)],
        &[("runs", 1)],
        &[("runs", 4)],
        false,
        false,
    )
    .await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_four_gpu_run_behind_a_stream_of_one_gpu_runs_is_placed_within_the_bounded_wait() {
    large_run_behind_a_stream(
        "queue-gpu",
        &[("runs", 8), ("example.com/gpu", 4)],
        &[("example.com/gpu", 1)],
        &[("example.com/gpu", 4)],
        false,
        false,
    )
    .await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_honours_the_nomination_of_the_old_one() {
    large_run_behind_a_stream(
        "queue-failover",
        &[("runs", 4)],
        &[("runs", 1)],
        &[("runs", 4)],
        true,
        false,
    )
    .await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_urgent_large_run_behind_a_stream_is_nominated_at_once_and_placed_once_its_pod_drains() {
    large_run_behind_a_stream(
        "queue-urgent",
        &[("runs", 4)],
        &[("runs", 1)],
        &[("runs", 4)],
        false,
        true,
    )
    .await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_keeps_the_nomination_an_urgent_run_got_for_its_priority() {
    large_run_behind_a_stream(
        "queue-urgent-failover",
        &[("runs", 4)],
        &[("runs", 1)],
        &[("runs", 4)],
        true,
        true,
    )
    .await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_that_fit_one_at_a_time_run_in_creation_order() {
    let ns = TestNs::new("queue-order").await;
    let _scheduler = SchedulerProcess::start(&ns.name, 4, None, "queue-order").await;
    let pool = Pool::start(&ns, "one", 1, &[("runs", 1)], &HEARTBEAT).await;
    let watch = pool.overcommit_watch().await;
    let events = RunEvents::start(&ns).await;

    // A Run holding the slot until every other Run exists, so all of them wait in the queue
    // and none is placed only because it was alone.
    pool.held("hold").create(&ns).await;
    ns.wait_runs(Duration::from_secs(60), "the holding Run to run", |runs| {
        (runs.first()?.phase() == RunPhase::Running).then_some(())
    })
    .await;
    let n = 50;
    for i in 0..n {
        run(&format!("r-{i:02}"))
            .runtime("one")
            .task(&["true"])
            .create(&ns)
            .await;
    }
    pool.open("hold");
    ns.wait_runs(Duration::from_secs(180), "all 51 Runs Succeeded", |runs| {
        (runs.len() == n + 1 && runs.iter().all(|r| r.phase() == RunPhase::Succeeded)).then_some(())
    })
    .await;
    events.catch_up().await;
    let history = events.events();
    watch.finish().await;

    // The sequence of admissions, against the queue order: creation time, then UID. Admitted:
    // Running, or, for a task whose claim runtimed held and wrote with its end
    // (`--claim-delay`), Succeeded; on the Pod's one slot a Run starts only once the one
    // before it has ended.
    let mut running = Vec::new();
    let mut latest: HashMap<String, Arc<Run>> = HashMap::new();
    replay(&history, |runs| {
        for (name, r) in runs {
            let admitted = r.phase() == RunPhase::Running || r.phase().is_terminal();
            if admitted && !running.contains(name) {
                running.push(name.clone());
            }
            latest.insert(name.clone(), r.clone());
        }
    });
    running.retain(|name| name != "hold");
    let mut expected: Vec<&Arc<Run>> = latest.values().filter(|r| r.name_any() != "hold").collect();
    expected.sort_by_key(|r| (r.creation_timestamp(), r.uid()));
    let expected: Vec<String> = expected.iter().map(|r| r.name_any()).collect();
    assert_eq!(running.len(), n, "every Run was seen admitted");
    assert_eq!(running, expected, "Runs started out of queue order");
}
