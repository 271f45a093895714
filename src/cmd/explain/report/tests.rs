//! The report against the scheduler's own decisions, on test objects.

use super::*;
use crate::scheduler::framework::ScheduleOutcome;
use crate::testing::*;

use super::test_report as report;

#[test]
fn the_verdict_is_exactly_the_schedulers_pending_message() {
    let pods = [
        pod("p1").capacity(&[("runs", 4), ("example.com/gpu", 1)]),
        pod("p2").capacity(&[("runs", 4)]),
        pod("p3")
            .capacity(&[("runs", 4), ("example.com/gpu", 1)])
            .stale(),
    ];
    let busy = [run("x").requests(&[("example.com/gpu", 1)]).on("p1")];
    let r = run("a").requests(&[("example.com/gpu", 1)]);
    let report = report(&pods, &busy, &r);
    let world = World::new().pods(pods).runs(busy);
    let Decision::Unschedulable(u) = world
        .cache()
        .plan(&crate::scheduler::plugins::registry(), &r.build(), NOW)
        .unwrap()
    else {
        panic!("expected Unschedulable")
    };
    assert_eq!(report.verdict, u.message());
    assert_eq!(
        report.verdict,
        "0/3 Runtime Pods are available: 2 Insufficient example.com/gpu, 1 runtimed heartbeat stale."
    );
    assert_eq!(report.decision, DecisionKind::Unschedulable);
    assert_eq!(
        report
            .histogram
            .iter()
            .map(|h| (h.reason.as_str(), h.count))
            .collect::<Vec<_>>(),
        [
            ("Insufficient example.com/gpu", 2),
            ("runtimed heartbeat stale", 1)
        ]
    );
    let p1 = &report.pods[0];
    assert_eq!(
        p1.rejection.as_ref().map(|r| r.reason.as_str()),
        Some("Insufficient example.com/gpu")
    );
    let gpu = p1
        .resources
        .iter()
        .find(|r| r.name == "example.com/gpu")
        .unwrap();
    assert_eq!(
        (gpu.used, gpu.assumed, gpu.capacity, gpu.request),
        (Some(1), 0, Some(1), 1)
    );
    let p2_gpu = report.pods[1]
        .resources
        .iter()
        .find(|r| r.name == "example.com/gpu")
        .unwrap();
    assert_eq!(p2_gpu.capacity, None, "p2 does not advertise gpu");
    assert_eq!(report.pods[2].heartbeat.state, HeartbeatState::Stale);
}

#[test]
fn a_fitting_run_names_the_pod_and_total_the_scheduler_picks() {
    let pods = [
        pod("p1").capacity(&[("runs", 4)]),
        pod("p2").capacity(&[("runs", 4)]),
    ];
    let busy = [run("x").on("p1")];
    let r = run("a");
    let report = report(&pods, &busy, &r);
    // Against the scheduler's own cycle, Reserve included: not another reading of the
    // same evaluation.
    let (pod, total) = scheduled(World::new().pods(pods).runs(busy), &r);
    assert_eq!(pod, "p2");
    assert_names_the_pod(&report, &pod, total);
    let p2 = &report.pods[1];
    assert_eq!(
        p2.scores
            .iter()
            .map(|s| (s.plugin.as_str(), s.normalized))
            .collect::<Vec<_>>(),
        [("PreferredRunAffinity", 0), ("LeastLoaded", 75)]
    );
    assert_eq!(p2.total, Some(75));
    assert!(!report.replayed);
}

/// The report names `pod` (and only it) with `total`, everywhere it says which Pod.
fn assert_names_the_pod(report: &Report, pod: &str, total: i64) {
    assert_eq!(report.chosen.as_deref(), Some(pod));
    assert_eq!(report.score, Some(total));
    assert_eq!(
        report.verdict,
        format!("Fits: would be placed on {pod} (score {total})")
    );
    let chosen: Vec<_> = report
        .pods
        .iter()
        .filter(|p| p.chosen)
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(chosen, [pod]);
}

/// Where the scheduler's cycle reserves `r` in `world`, and the total it scored there.
fn scheduled(world: World, r: &RunBuilder) -> (String, i64) {
    let outcome = schedule_one(&mut world.cache(), r);
    match outcome {
        ScheduleOutcome::Reserved { pod, total, .. } => (pod, total),
        other => panic!("expected Reserved, got {other:?}"),
    }
}

#[test]
fn explain_shows_the_runs_fairness_group_its_share_and_its_turn() {
    let pods = [pod("p1").capacity(&[("runs", 2)])];
    let r = run("a3").submitted_by("alice").created(3);
    let runs = [
        run("a1").submitted_by("alice").on("p1"),
        run("a2").submitted_by("alice").on("p1"),
        r.clone(),
        run("b1").submitted_by("bob").created(4),
    ];
    let report = report(&pods, &runs, &r);
    let fair = report.queue.clone().expect("Pending").fair_share;
    assert_eq!(
        fair,
        Some(FairShareReport {
            group: "alice".into(),
            share: 1.0,
            weight: 1.0,
            rank: 2,
            groups: 2,
        })
    );
    let text = crate::cmd::explain::render::text(&report, false, &crate::output::Palette::plain());
    assert!(
        text.contains(
            "Fair share: group alice holds 1.00 of the Runtime (weight 1), 2nd of 2 groups waiting."
        ),
        "{text}"
    );
    // Alone in the queue, nothing is said of fairness.
    let report = super::test_report(&pods, &runs[..3], &r);
    assert_eq!(report.queue.expect("Pending").fair_share, None);
}

#[test]
fn explain_shows_the_priority_and_the_scheduler_s_preemption_as_a_dry_run() {
    let pods = [pod("p1").capacity(&[("runs", 1)])];
    let r = run("urgent").priority(1000);
    let runs = [run("low").on("p1").priority(0), r.clone()];
    let report = report(&pods, &runs, &r);
    let queue = report.queue.clone().expect("Pending");
    assert_eq!(queue.priority, 1000);
    let preemption = queue.preemption.clone().expect("a preemption");
    assert_eq!(preemption.pod, "p1");
    assert_eq!(
        preemption.victims,
        [VictimReport {
            name: "low".into(),
            priority: 0,
            level: "scheduled".into()
        }]
    );
    let text = crate::cmd::explain::render::text(&report, false, &crate::output::Palette::plain());
    assert!(
        text.contains(
            "Priority 1000. Its next cycle preempts on Runtime Pod p1: low (priority 0, scheduled)."
        ),
        "{text}"
    );
}

#[test]
fn a_nominated_run_is_explained_on_its_nominated_pod_not_the_emptier_one() {
    // LeastLoaded prefers the empty p2, but the scheduler held p1 for this Run: it goes
    // there, and explain must name p1 too.
    let pods = [
        pod("p1").capacity(&[("runs", 4)]),
        pod("p2").capacity(&[("runs", 4)]),
    ];
    let busy = [run("x").on("p1")];
    let r = run("a").nominated("p1");
    let mut with_me = busy.to_vec();
    with_me.push(r.clone());
    let report = report(&pods, &with_me, &r);
    let (pod, total) = scheduled(World::new().pods(pods).runs(busy), &r);
    assert_eq!(pod, "p1", "the scheduler binds the nominated Pod");
    assert_names_the_pod(&report, "p1", total);
    assert_eq!(
        report
            .queue
            .as_ref()
            .and_then(|q| q.nominated.as_ref())
            .map(|n| n.pod.as_str()),
        Some("p1")
    );
}

#[test]
fn a_placed_run_is_replayed_without_its_own_usage() {
    let pods = [pod("p1").capacity(&[("runs", 1)])];
    let me = run("a").on("p1");
    let report = report(&pods, std::slice::from_ref(&me), &me);
    assert!(report.replayed);
    assert_eq!(
        report.verdict, "Fits: would be placed on p1 (score 0)",
        "its own run must not count against p1 (it would not fit at all)"
    );
    assert_eq!(report.pods[0].resources[0].used, Some(0));
    assert_eq!(
        report.run.replay_line().unwrap(),
        "Run a is Scheduled on p1; replaying the scheduler as if it were Pending:"
    );
}

#[test]
fn every_filter_gives_its_own_verdict_even_after_the_first_rejection() {
    let pods = [pod("p1").capacity(&[("runs", 4)]).not_ready()];
    let others = [run("x").labels(&[("app", "db")]).on("p1")];
    let r = run("a").anti(&[("app", "db")]);
    let report = report(&pods, &others, &r);
    let p1 = &report.pods[0];
    assert_eq!(
        p1.rejection.as_ref().unwrap().reason,
        "Runtime Pod not ready"
    );
    assert_eq!(
        p1.filters
            .iter()
            .map(|f| (f.plugin.as_str(), f.reason.as_deref()))
            .collect::<Vec<_>>(),
        [
            ("RuntimePodAvailability", Some("Runtime Pod not ready")),
            ("WorkspacePlacement", None),
            ("RunAffinity", Some("didn't match Run anti-affinity rules"))
        ]
    );
    assert_eq!(
        report.affinity,
        [TermReport {
            kind: TermKind::AntiAffinity,
            field:
                "spec.affinity.runAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
                    .into(),
            selector: "app=db".into(),
            matches_self: false,
            labels_only: true,
            targets: vec![TargetReport {
                pod: "p1".into(),
                runs: vec!["x".into()]
            }],
        }]
    );
}

#[test]
fn an_invalid_run_reports_the_prefilter_reason_naming_field_and_value() {
    let pods = [pod("p1")];
    let r = run("a").request_strs(&[("example.com/gpu", "1.5")]);
    let report = report(&pods, &[], &r);
    assert_eq!(report.decision, DecisionKind::Invalid);
    let invalid = report.invalid.as_ref().unwrap();
    assert_eq!(invalid.reason, "InvalidResources");
    assert!(
        report
            .verdict
            .starts_with("InvalidResources: spec.resources.requests[\"example.com/gpu\"]: \"1.5\""),
        "{}",
        report.verdict
    );
    assert!(report.pods.is_empty());
}

#[test]
fn heartbeat_states_agree_with_the_availability_filter() {
    let pods = [
        pod("p1").foreign_lease(),
        pod("p2").no_lease(),
        pod("p3").stale(),
        pod("p4"),
    ];
    let report = report(&pods, &[], &run("a"));
    let got: Vec<_> = report
        .pods
        .iter()
        .map(|p| {
            (
                p.heartbeat.state,
                p.rejection.as_ref().map(|r| r.reason.as_str()),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                HeartbeatState::HeldByOther,
                Some("runtimed heartbeat not held by the Pod")
            ),
            (HeartbeatState::Missing, Some("runtimed heartbeat missing")),
            (HeartbeatState::Stale, Some("runtimed heartbeat stale")),
            (HeartbeatState::Fresh, None),
        ]
    );
}

#[test]
fn a_run_between_attempts_says_which_attempt_waits_and_for_how_long() {
    let since = crate::testing::NOW - jiff::SignedDuration::from_secs(1);
    let waiting = run("flaky")
        .on("p1")
        .retry_policy(3, "4s")
        .between_attempts(2, since);
    let pods = [pod("p1").capacity(&[("runs", 1)])];
    let report = test_report(&pods, std::slice::from_ref(&waiting), &waiting);
    let attempts = report.run.attempts.clone().expect("attempts");
    assert_eq!((attempts.attempt, attempts.max_attempts), (2, 3));
    let line = attempts.line(report.now, Some("p1"));
    // Failed within the second before NOW: due at the end of that second plus 4 s.
    assert!(
        line.starts_with("Attempt 2 of 3; it starts in 4s on p1")
            || line.starts_with("Attempt 2 of 3; it starts in 5s on p1"),
        "{line}"
    );
    // Without a policy there is nothing to say.
    let plain = test_report(&pods, &[], &run("plain"));
    assert_eq!(plain.run.attempts, None);
}
