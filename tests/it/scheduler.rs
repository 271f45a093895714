//! `scheduler run` against the real control plane: placement, bursts without overcommit,
//! release and reactivation, affinity, bind conflicts, failover, availability and metrics.
//!
//! Each test has its own namespace and its own scheduler process (`--watch-namespace`).

use testkit as support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams, WatchEvent, WatchParams};
use serde_json::json;

use kruntimes::api::{Resources, Run, RunPhase, Runtime};
use kruntimes::manager::LEADER_LEASE;
use kruntimes::testing::{pod, pods, run, runtime};
use support::world::{
    self, Create, OvercommitWatch, SchedulerProcess, TestNs, WAIT, eventually, message_of, pod_of,
};

/// Leader election: failover, and a leader that loses its Lease.
mod leader;

const GPU: &str = "example.com/gpu";

#[testkit::test]
async fn multi_resource_placement_picks_the_least_loaded_pod_and_unadvertised_stays_pending() {
    let ns = TestNs::new("placement").await;
    let gpu = [("runs", 4), (GPU, 2)];
    pods(&["py-a", "py-b"], &gpu).create(&ns).await;
    // py-a already runs a GPU Run, so py-b is less loaded.
    let busy = run("busy").requests(&[(GPU, 1)]).on("py-a").running();
    busy.create(&ns).await;
    let _scheduler = SchedulerProcess::start(&ns.name, 4, None, "placement").await;

    run("train").requests(&[(GPU, 1)]).create(&ns).await;
    run("tpu")
        .requests(&[("example.com/tpu", 1)])
        .create(&ns)
        .await;

    let runs = ns
        .wait_runs(WAIT, "train scheduled and tpu pending", |runs| {
            (world::phase_of(runs, "train") == Some(RunPhase::Scheduled)
                && message_of(runs, "tpu").is_some())
            .then(|| runs.to_vec())
        })
        .await;
    assert_eq!(pod_of(&runs, "train").as_deref(), Some("py-b"));
    let tpu = runs.iter().find(|r| r.name_any() == "tpu").unwrap();
    assert_eq!(tpu.phase(), RunPhase::Pending);
    let status = tpu.status.clone().unwrap();
    assert_eq!(
        status.message.as_deref(),
        Some("0/2 Runtime Pods are available: 2 Insufficient example.com/tpu.")
    );
    assert_eq!(status.reason.as_deref(), Some("Unschedulable"));
    let cond = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Scheduled")
        .unwrap();
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("False", "Unschedulable")
    );
    let train = runs
        .iter()
        .find(|r| r.name_any() == "train")
        .unwrap()
        .status
        .clone()
        .unwrap();
    let pod: Pod = ns.api().get("py-b").await.unwrap();
    assert_eq!(train.assigned_pod_uid, pod.uid());
}

#[testkit::test]
async fn an_invalid_request_fails_the_run_with_invalid_resources_naming_field_and_value() {
    let ns = TestNs::new("invalid").await;
    pod("py-a").capacity(&[("runs", 4)]).create(&ns).await;
    let _scheduler = SchedulerProcess::start(&ns.name, 1, None, "invalid").await;
    run("bad").request_strs(&[(GPU, "1.5")]).create(&ns).await;
    let run = ns
        .wait_runs(WAIT, "bad failed", |runs| {
            runs.iter().find(|r| r.phase() == RunPhase::Failed).cloned()
        })
        .await;
    let status = run.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("InvalidResources"));
    let message = status.message.unwrap();
    assert!(
        message.contains("spec.resources.requests[\"example.com/gpu\"]"),
        "{message}"
    );
    assert!(message.contains("\"1.5\""), "{message}");
    assert!(status.completion_time.is_some());
    let completed = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Completed")
        .unwrap();
    assert_eq!(completed.reason, "InvalidResources");
}

#[testkit::test]
async fn a_burst_of_500_runs_on_20_pods_never_overcommits_and_schedules_every_run_that_fits() {
    let ns = TestNs::new("burst").await;
    let mut capacity = HashMap::new();
    for i in 0..20u64 {
        let name = format!("py-{i:02}");
        let runs = 10 + (i % 4) * 5; // 10, 15, 20, 25
        let mut cap = vec![("runs", runs)];
        if i % 2 == 0 {
            cap.push((GPU, 2));
        }
        pod(&name).capacity(&cap).create(&ns).await;
        capacity.insert(name, Resources::from_iter(cap));
    }
    // Capacity: 350 runs, 20 GPUs. Demand: 500 runs, 100 of them asking for a GPU.
    let watch = OvercommitWatch::start(&ns, capacity.clone()).await;
    let scheduler = SchedulerProcess::start(&ns.name, 4, None, "burst").await;

    let started = Instant::now();
    let ns = &ns;
    futures::stream::iter(0..500)
        .for_each_concurrent(16, |i| async move {
            let b = run(&format!("r-{i:03}"));
            let b = if i % 5 == 0 {
                b.requests(&[(GPU, 1)])
            } else {
                b
            };
            b.create(ns).await;
        })
        .await;

    // Quiescent: every Run is Scheduled or carries a Pending message.
    let is_decided = |r: &Run| r.phase() == RunPhase::Scheduled || world::has_message(r);
    let runs = ns
        .wait_runs(Duration::from_secs(120), "all 500 Runs decided", |runs| {
            let decided = runs.iter().filter(|r| is_decided(r)).count();
            (runs.len() == 500 && decided == 500).then(|| runs.to_vec())
        })
        .await;
    let elapsed = started.elapsed();
    let events = watch.finish().await;

    let mut used: HashMap<String, HashMap<String, u64>> = HashMap::new();
    for r in &runs {
        if let Some(pod) = r.active_pod() {
            let slot = used.entry(pod.to_string()).or_default();
            *slot.entry("runs".into()).or_default() += 1;
            if r.spec.resources.is_some() {
                *slot.entry(GPU.into()).or_default() += 1;
            }
        }
    }
    let scheduled = world::count(&runs, RunPhase::Scheduled);
    let pending: Vec<&Run> = runs
        .iter()
        .filter(|r| r.phase() == RunPhase::Pending)
        .collect();
    assert_eq!(scheduled + pending.len(), 500);
    for r in &pending {
        let gpu = r.spec.resources.is_some();
        let fits_somewhere = capacity.iter().any(|(pod, cap)| {
            let u = used.get(pod).cloned().unwrap_or_default();
            let runs_ok = u.get("runs").copied().unwrap_or(0) < cap.get("runs");
            let gpu_ok =
                !gpu || cap.contains(GPU) && u.get(GPU).copied().unwrap_or(0) < cap.get(GPU);
            runs_ok && gpu_ok
        });
        assert!(!fits_somewhere, "{} is Pending but fits", r.name_any());
        let message = r.status.as_ref().unwrap().message.clone().unwrap();
        assert!(
            message.starts_with("0/20 Runtime Pods are available: "),
            "{message}"
        );
        assert!(
            !message.contains("py-") && !message.contains("r-"),
            "names leaked: {message}"
        );
    }
    assert_eq!(scheduled, 350, "all run capacity should be used");
    eprintln!(
        "burst: 500 Runs, {scheduled} scheduled in {:.2}s, {events} Run events checked",
        elapsed.as_secs_f64()
    );
    let metrics = scheduler.metrics().await;
    assert_eq!(
        world::sample(
            &metrics,
            "kruntimes_scheduler_schedule_attempts_total{result=\"scheduled\"}"
        ),
        Some(350.0)
    );
}

#[testkit::test]
async fn released_capacity_and_raised_runtime_capacity_wake_pending_runs() {
    let ns = TestNs::new("release").await;
    pods(&["py-a", "py-b"], &[("runs", 1)]).create(&ns).await;
    let scheduler = SchedulerProcess::start(&ns.name, 2, None, "release").await;
    for name in ["a", "b", "c", "d"] {
        run(name).create(&ns).await;
    }
    let first: Vec<String> = ns
        .wait_runs(WAIT, "two scheduled, two pending", |runs| {
            let scheduled: Vec<String> = runs
                .iter()
                .filter(|r| r.phase() == RunPhase::Scheduled)
                .map(|r| r.name_any())
                .collect();
            let waiting = runs.iter().filter(|r| world::has_message(r)).count();
            (scheduled.len() == 2 && waiting == 2).then_some(scheduled)
        })
        .await;
    for name in &first {
        ns.set_phase(name, RunPhase::Succeeded, None).await;
    }
    ns.wait_runs(WAIT, "the other two scheduled", |runs| {
        let others = runs.iter().filter(|r| !first.contains(&r.name_any()));
        others
            .clone()
            .all(|r| r.phase() == RunPhase::Scheduled)
            .then_some(())
    })
    .await;
    let metrics = scheduler.metrics().await;
    let released = world::sample(
        &metrics,
        "kruntimes_scheduler_pending_run_wakeups_total{source=\"capacity_released\"}",
    );
    assert!(released.unwrap_or(0.0) >= 1.0, "{metrics}");

    // Raising a Runtime's capacity reaches the Pods through the projected annotations.
    runtime("grow").capacity(&[("runs", 1)]).create(&ns).await;
    let pod = ns.runtime_pods("grow", 1).await.remove(0);
    assert_eq!(
        pod.annotations()
            .get("kruntimes.io/capacity.runs")
            .map(String::as_str),
        Some("1")
    );
    ns.set_ready(&pod.name_any(), true).await;
    ns.heartbeat(&pod).await;
    run("g1").runtime("grow").create(&ns).await;
    run("g2").runtime("grow").create(&ns).await;
    let grow = |runs: &[Run]| -> Vec<Run> {
        let grow = runs.iter().filter(|r| r.spec.runtime == "grow");
        grow.cloned().collect()
    };
    ns.wait_runs(WAIT, "g1/g2: one scheduled, one pending", |runs| {
        let g = grow(runs);
        (world::count(&g, RunPhase::Scheduled) == 1 && world::waiting(&g) == 1).then_some(())
    })
    .await;
    let raise = json!({"spec": {"capacity": {"resources": {"runs": "2"}}}});
    let _: Runtime = ns.merge("grow", raise).await;
    ns.wait_runs(
        WAIT,
        "g1 and g2 scheduled after the capacity raise",
        |runs| {
            let g = grow(runs);
            (world::count(&g, RunPhase::Scheduled) == g.len()).then_some(())
        },
    )
    .await;
    let same_pod = ns.api::<Pod>().get(&pod.name_any()).await.unwrap();
    assert_eq!(
        same_pod.uid(),
        pod.uid(),
        "the Pod was recreated instead of annotated"
    );
    assert_eq!(same_pod.annotations()["kruntimes.io/capacity.runs"], "2");
    let rt = ns.api::<Runtime>().get("grow").await.unwrap();
    assert_eq!(rt.status.unwrap().replicas, 1);
}

#[testkit::test]
async fn required_affinity_cohorts_colocate_anti_affinity_spreads_and_mutual_dependencies_wait() {
    let ns = TestNs::new("affinity").await;
    let four = ["py-a", "py-b", "py-c", "py-d"];
    pods(&four, &[("runs", 8)]).create(&ns).await;
    let _scheduler = SchedulerProcess::start(&ns.name, 4, None, "affinity").await;
    // Created concurrently: the first member seeds, the rest follow its assumed placement.
    let cohort: Vec<_> = (0..4)
        .map(|i| {
            let cohort = [("cohort", "a")];
            run(&format!("cohort-{i}"))
                .labels(&cohort)
                .requires(&cohort)
        })
        .collect();
    futures::future::join_all(cohort.iter().map(|b| b.create(&ns))).await;
    for i in 0..3 {
        let spread = [("spread", "x")];
        let b = run(&format!("spread-{i}")).labels(&spread).anti(&spread);
        b.create(&ns).await;
    }
    let needs_b = run("needs-b").labels(&[("app", "a")]);
    needs_b.requires(&[("app", "b")]).create(&ns).await;
    let needs_a = run("needs-a").labels(&[("app", "b")]);
    needs_a.requires(&[("app", "a")]).create(&ns).await;

    let what = "cohort and spread placed, mutual pending";
    let runs = ns
        .wait_runs(Duration::from_secs(30), what, |runs| {
            let placed = world::count(runs, RunPhase::Scheduled);
            let waiting = ["needs-a", "needs-b"]
                .iter()
                .all(|n| message_of(runs, n).is_some());
            (placed == 7 && waiting).then(|| runs.to_vec())
        })
        .await;
    let cohort: Vec<String> = (0..4)
        .map(|i| pod_of(&runs, &format!("cohort-{i}")).unwrap())
        .collect();
    assert!(
        cohort.iter().all(|p| *p == cohort[0]),
        "cohort split: {cohort:?}"
    );
    let mut spread: Vec<String> = (0..3)
        .map(|i| pod_of(&runs, &format!("spread-{i}")).unwrap())
        .collect();
    spread.sort();
    spread.dedup();
    assert_eq!(spread.len(), 3, "anti-affinity did not spread: {spread:?}");
    for name in ["needs-a", "needs-b"] {
        assert_eq!(world::phase_of(&runs, name), Some(RunPhase::Pending));
        assert_eq!(
            message_of(&runs, name).unwrap(),
            "0/4 Runtime Pods are available: 4 waiting for required Run affinity."
        );
    }
}

/// A Run that eight other clients keep writing (their own annotations) is bound while they
/// write: each Bind conflict is counted, and the Bind is sent again on a fresh read, as the Run
/// moved in nothing the plan read (until this, the watched version was always too old and the
/// Run could wait for ever). The one slot holds exactly that Run afterwards. Releasing the
/// reservation when the Run did move in what the plan read is `status_patch::rebase`'s unit
/// test's.
#[testkit::test]
async fn a_bind_conflict_is_counted_and_the_run_bound_while_others_keep_writing_it() {
    let ns = TestNs::new("conflict").await;
    pod("py-a").capacity(&[("runs", 1)]).create(&ns).await;
    // A bind conflict is a race: eight other clients keep writing the Run (the scheduler binds
    // the newest version it has seen, so one writer rarely wins), so the scheduler's observed
    // resourceVersion is usually stale by the time it binds. Usually, not always: an attempt
    // that provoked none is undone (the scheduler stopped, the Run deleted, its slot free for a
    // scheduler that starts afresh) and made again, at most five times.
    let mut provoked = None;
    for attempt in 1..=5 {
        let name = format!("contended-{attempt}");
        let created = run(&name).create(&ns).await;
        assert!(created.status.is_none());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let written = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let writers: Vec<_> = (0..8)
            .map(|w| {
                let (api, stop, written, name) =
                    (ns.runs(), stop.clone(), written.clone(), name.clone());
                tokio::spawn(async move {
                    let mut i = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        i += 1;
                        let body = json!({"metadata": {"annotations": {format!("writer-{w}"): i.to_string()}}});
                        if api.patch(&name, &PatchParams::default(), &Patch::Merge(&body)).await.is_ok() {
                            written.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        eventually(WAIT, "the writers to be writing", async || {
            let n = written.load(std::sync::atomic::Ordering::Relaxed);
            if n >= 10 {
                Ok(())
            } else {
                Err(format!("{n} writes"))
            }
        })
        .await;
        let mut scheduler = SchedulerProcess::start(&ns.name, 1, None, "conflict").await;
        // Bound while the writers still write.
        ns.wait_runs(Duration::from_secs(60), "contended scheduled", |runs| {
            (world::phase_of(runs, &name) == Some(RunPhase::Scheduled)).then_some(())
        })
        .await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for w in writers {
            let _ = w.await;
        }
        let metrics = scheduler.metrics().await;
        let conflicts = world::sample(
            &metrics,
            "kruntimes_scheduler_reservation_conflicts_total{stage=\"bind\"}",
        )
        .unwrap();
        if conflicts >= 1.0 {
            provoked = Some((name, scheduler));
            break;
        }
        eprintln!("attempt {attempt}: the scheduler bound {name} without a conflict; again");
        scheduler.kill();
        ns.runs().delete(&name, &Default::default()).await.unwrap();
        eventually(WAIT, "the unprovoked Run to go", async || {
            match ns.runs().get_opt(&name).await {
                Ok(None) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    }
    let Some((contended, _scheduler)) = provoked else {
        panic!("no bind conflict was provoked in 5 attempts")
    };
    // No reservation leaked: the one slot holds exactly the bound Run.
    run("second").create(&ns).await;
    let runs = ns
        .wait_runs(WAIT, "second pending", |runs| {
            message_of(runs, "second").map(|_| runs.to_vec())
        })
        .await;
    assert_eq!(pod_of(&runs, &contended).as_deref(), Some("py-a"));
    assert_eq!(
        message_of(&runs, "second").unwrap(),
        "0/1 Runtime Pods are available: 1 Insufficient runs."
    );
}

#[testkit::test]
async fn stale_heartbeat_not_ready_and_deleted_pods_are_removed_from_placement() {
    let ns = TestNs::new("availability").await;
    let four = [("runs", 4)];
    pod("py-stale")
        .capacity(&four)
        .lease_renewed_ago(120)
        .create(&ns)
        .await;
    pod("py-notready")
        .capacity(&four)
        .not_ready()
        .create(&ns)
        .await;
    pod("py-deleting")
        .capacity(&four)
        .deleting()
        .create(&ns)
        .await;
    pod("py-ok").capacity(&[("runs", 1)]).create(&ns).await;
    let pods = ns.api::<Pod>();

    let _scheduler = SchedulerProcess::start(&ns.name, 2, None, "availability").await;
    run("first").create(&ns).await;
    run("second").create(&ns).await;
    let runs = ns
        .wait_runs(WAIT, "one placed on py-ok, one pending", |runs| {
            let placed = world::count(runs, RunPhase::Scheduled);
            let waiting = runs
                .iter()
                .filter_map(|r| r.status.as_ref()?.message.clone())
                .next();
            (placed == 1)
                .then_some(())
                .and(waiting)
                .map(|m| (runs.to_vec(), m))
        })
        .await;
    let (runs, message) = runs;
    let placed = runs
        .iter()
        .find(|r| r.phase() == RunPhase::Scheduled)
        .unwrap();
    assert_eq!(placed.active_pod(), Some("py-ok"));
    assert_eq!(
        message,
        "0/4 Runtime Pods are available: 1 Insufficient runs, 1 Runtime Pod not ready, 1 Runtime Pod terminating, 1 runtimed heartbeat stale."
    );

    // Deleting the only usable Pod takes it out of placement too.
    let waiting = runs
        .iter()
        .find(|r| r.phase() == RunPhase::Pending)
        .unwrap()
        .name_any();
    pods.delete("py-ok", &DeleteParams::default())
        .await
        .unwrap();
    ns.set_phase(&placed.name_any(), RunPhase::Succeeded, None)
        .await;
    ns.wait_runs(WAIT, "message without py-ok", |runs| {
        let m = message_of(runs, &waiting)?;
        (m == "0/3 Runtime Pods are available: 1 Runtime Pod not ready, 1 Runtime Pod terminating, 1 runtimed heartbeat stale.").then_some(())
    })
    .await;
    // Let the held Pod go.
    let release = json!({"metadata": {"finalizers": null}});
    let _: Pod = ns.merge("py-deleting", release).await;
}

#[testkit::test]
async fn metrics_expose_every_named_metric_with_only_bounded_labels() {
    let ns = TestNs::new("metrics").await;
    pod("py-a").capacity(&[("runs", 1)]).create(&ns).await;
    let scheduler = SchedulerProcess::start(&ns.name, 2, None, "metrics").await;
    run("m1").create(&ns).await;
    run("m2").create(&ns).await;
    run("m3")
        .requests(&[("example.com/tpu", 1)])
        .create(&ns)
        .await;
    ns.wait_runs(WAIT, "one scheduled, two pending", |runs| {
        let waiting = runs.iter().filter(|r| world::has_message(r)).count();
        let placed = world::count(runs, RunPhase::Scheduled);
        (placed == 1 && waiting == 2).then_some(())
    })
    .await;
    let body = scheduler.metrics().await;
    for name in [
        "kruntimes_scheduler_filter_rejections_total",
        "kruntimes_scheduler_reservation_conflicts_total",
        "kruntimes_scheduler_pending_run_wakeups_total",
        "kruntimes_scheduler_scheduling_cycle_duration_seconds",
        "kruntimes_scheduler_queue_duration_seconds",
        "kruntimes_scheduler_schedule_attempts_total",
        "kruntimes_scheduler_pending_runs",
        "kruntimes_scheduler_runtime_pods",
    ] {
        assert!(
            body.contains(&format!("# TYPE {name} ")),
            "{name} missing:\n{body}"
        );
    }
    let plugins = [
        "RuntimePodAvailability",
        "WorkspacePlacement",
        "RunAffinity",
    ];
    let reasons: Vec<&str> = kruntimes::scheduler::plugins::runtime_pod_availability::REASONS
        .iter()
        .chain(kruntimes::scheduler::plugins::workspace_placement::REASONS)
        .chain(kruntimes::scheduler::plugins::run_affinity::REASONS)
        .copied()
        .collect();
    for line in body.lines().filter(|l| l.starts_with("kruntimes_")) {
        assert!(
            !line.contains(&ns.name)
                && !line.contains("py-a")
                && !line.contains("m1")
                && !line.contains("tpu"),
            "user value in {line}"
        );
        if let Some(labels) = line
            .split_once('{')
            .map(|(_, rest)| rest.split_once('}').unwrap().0)
        {
            for pair in labels.split("\",").filter(|p| !p.is_empty()) {
                let (key, value) = pair.split_once("=\"").unwrap();
                let value = value.trim_end_matches('"');
                let ok = match key {
                    "plugin" => plugins.contains(&value),
                    "reason" => reasons.contains(&value),
                    "stage" => ["reserve", "bind"].contains(&value),
                    "source" => ["runtime_pod", "capacity_released"].contains(&value),
                    "result" if line.starts_with("kruntimes_scheduler_preemptions_total{") => [
                        kruntimes::scheduler::metrics::PREEMPTION_SUCCEEDED,
                        kruntimes::scheduler::metrics::PREEMPTION_CONFLICT,
                        kruntimes::scheduler::metrics::PREEMPTION_ERROR,
                    ]
                    .contains(&value),
                    "result" => [
                        "scheduled",
                        "unschedulable",
                        "invalid",
                        "reserve_conflict",
                        "already_placed",
                        "error",
                    ]
                    .contains(&value),
                    "level" => kruntimes::scheduler::metrics::PREEMPTION_LEVELS.contains(&value),
                    "cause" => kruntimes::scheduler::metrics::NOMINATION_CAUSES.contains(&value),
                    "state" if line.starts_with("kruntimes_scheduler_pending_runs{") => {
                        kruntimes::scheduler::metrics::PENDING_STATES.contains(&value)
                    }
                    "state" => ["available", "unavailable"].contains(&value),
                    "le" => true,
                    "method" => kruntimes::telemetry::metrics::METHODS.contains(&value),
                    // HTTP status codes, or "error": no response.
                    "code" => {
                        value == "error"
                            || (value.len() == 3 && value.chars().all(|c| c.is_ascii_digit()))
                    }
                    // One series: this binary's own build.
                    "version" | "git_commit" | "rust_version"
                        if line.starts_with("kruntimes_build_info{") =>
                    {
                        let info = kruntimes::api::build::info();
                        [info.version, info.git_commit, info.rust_version].contains(&value)
                    }
                    other => panic!("unexpected label {other} in {line}"),
                };
                assert!(ok, "unbounded label value {key}={value} in {line}");
            }
        }
    }
    assert!(
        world::sample(&body, "kruntimes_scheduler_filter_rejections_total{plugin=\"RuntimePodAvailability\",reason=\"Insufficient resource\"}").unwrap_or(0.0) >= 2.0,
        "{body}"
    );
    let (code, _) = world::http_get(scheduler.health_port, "/healthz")
        .await
        .unwrap();
    assert_eq!(code, 200);
}

#[testkit::test]
async fn the_runtime_controller_keeps_replicas_and_reports_a_malformed_capacity_without_touching_pods()
 {
    let ns = TestNs::new("runtimectl").await;
    let _scheduler = SchedulerProcess::start(&ns.name, 1, None, "runtimectl").await;
    let python = runtime("python").replicas(3).capacity(&[("runs", 4)]);
    python.template_labels(&[("team", "a")]).create(&ns).await;
    let three = ns.runtime_pods("python", 3).await;
    for pod in &three {
        assert_eq!(pod.labels()["team"], "a");
        assert_eq!(pod.labels()["kruntimes.io/runtime-pod"], pod.name_any());
        assert_eq!(pod.annotations()["kruntimes.io/capacity.runs"], "4");
        assert_eq!(pod.owner_references()[0].kind, "Runtime");
    }
    let _: Runtime = ns.merge("python", json!({"spec": {"replicas": 1}})).await;
    let one = ns.runtime_pods("python", 1).await;

    // A malformed capacity: reported on the status and in an Event; the Pod is left alone.
    let before = one[0].resource_version();
    let malformed = json!({"spec": {"capacity": {"resources": {"runs": "1.5"}}}});
    let _: Runtime = ns.merge("python", malformed).await;
    let runtimes = ns.api::<Runtime>();
    let condition = eventually(WAIT, "an InvalidCapacity condition", async || {
        let rt = runtimes.get("python").await.unwrap();
        let ready = rt
            .status
            .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "Ready"));
        match ready {
            Some(c) if c.reason == "InvalidCapacity" => Ok(c),
            other => Err(format!("Ready condition {other:?}")),
        }
    })
    .await;
    assert_eq!(condition.status, "False");
    assert!(
        condition
            .message
            .contains("spec.capacity.resources[\"runs\"]: \"1.5\""),
        "{}",
        condition.message
    );
    let events = ns.api::<k8s_openapi::api::events::v1::Event>();
    eventually(WAIT, "an InvalidCapacity event", async || {
        let reasons: Vec<Option<String>> = events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("python"))
            .map(|e| e.reason)
            .collect();
        if reasons
            .iter()
            .any(|r| r.as_deref() == Some("InvalidCapacity"))
        {
            Ok(())
        } else {
            Err(format!("events of python: {reasons:?}"))
        }
    })
    .await;
    let pod = ns.api::<Pod>().get(&one[0].name_any()).await.unwrap();
    assert_eq!(
        pod.resource_version(),
        before,
        "a Pod was touched despite the malformed capacity"
    );
    assert_eq!(pod.annotations()["kruntimes.io/capacity.runs"], "4");
}
