use super::*;
use crate::scheduler::framework::MissingClass;
use crate::scheduler::plugins::registry;
use crate::testing::*;

const GPU: &str = "example.com/gpu";

fn pool(pods: Vec<PodBuilder>, runs: Vec<RunBuilder>) -> Pool {
    Pool {
        namespace: Some("default".into()),
        runtime: None,
        objects: crate::cmd::replay::Objects {
            runtimes: vec![runtime("python").build()],
            pods: pods.iter().map(PodBuilder::build).collect(),
            leases: pods.iter().filter_map(PodBuilder::build_lease).collect(),
            runs: runs.iter().map(RunBuilder::build).collect(),
            workspaces: Vec::new(),
            workflow_runs: Vec::new(),
            classes: Vec::new(),
            scheduler_lease: Default::default(),
            now: at(0),
        },
    }
}

#[test]
fn pending_demand_counts_the_scheduler_verdicts_per_reason() {
    let p = pool(
        vec![
            pod("py-a").capacity(&[("runs", 4), (GPU, 1)]),
            pod("py-b").capacity(&[("runs", 4), (GPU, 1)]),
            pod("py-c").capacity(&[("runs", 4), (GPU, 1)]).stale(),
        ],
        vec![
            run("a").requests(&[(GPU, 1)]).on("py-a").running(),
            run("b").requests(&[(GPU, 1)]).on("py-b").running(),
            run("w1").requests(&[(GPU, 1)]).created(10),
            run("w2").requests(&[(GPU, 1)]).created(20),
            run("w3").requests(&[(GPU, 2)]).created(30),
            run("done").succeeded(),
        ],
    );
    let s = build(&p, &registry()).unwrap();
    assert_eq!(s.runtimes.len(), 1);
    let rt = &s.runtimes[0];
    assert_eq!((rt.pods.total, rt.pods.ready, rt.pods.available), (3, 3, 2));
    assert_eq!(
        rt.pods.unavailable,
        vec![ReasonCount {
            reason: "runtimed heartbeat stale".into(),
            count: 1
        }]
    );
    let gpu = rt.resources.iter().find(|r| r.name == GPU).unwrap();
    assert_eq!((gpu.used, gpu.capacity), (Some(2), 3));
    assert_eq!(
        (rt.runs.pending, rt.runs.running, rt.runs.succeeded),
        (3, 2, 1)
    );
    assert_eq!(rt.pending.runs, 3);
    let oldest = jiff::Timestamp::from_second(10).unwrap();
    assert_eq!(rt.pending.oldest_created, Some(oldest));
    assert_eq!(rt.pending.oldest_wait_seconds, Some(at(0).as_second() - 10));
    let reasons: Vec<(&str, usize)> = rt
        .pending
        .by_reason
        .iter()
        .map(|c| (c.reason.as_str(), c.count))
        .collect();
    assert_eq!(
        reasons,
        vec![
            ("Insufficient example.com/gpu", 3),
            ("runtimed heartbeat stale", 3)
        ]
    );
    let messages: Vec<(&str, usize)> = rt
        .pending
        .by_message
        .iter()
        .map(|c| (c.message.as_str(), c.runs))
        .collect();
    assert_eq!(
        messages,
        vec![(
            "0/3 Runtime Pods are available: 2 Insufficient example.com/gpu, 1 runtimed heartbeat stale.",
            3
        )]
    );
}

#[test]
fn a_named_runtime_filters_and_a_run_of_a_missing_runtime_says_so() {
    let mut p = pool(
        vec![pod("py-a")],
        vec![run("lost").runtime("nope"), run("fits")],
    );
    let s = build(&p, &registry()).unwrap();
    let names: Vec<&str> = s.runtimes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, vec!["nope", "python"]);
    assert_eq!(s.runtimes[0].pending.by_reason[0].reason, RUNTIME_NOT_FOUND);
    assert!(!s.runtimes[0].found);
    assert_eq!(s.runtimes[1].pending.by_reason[0].reason, FITS_NOW);
    p.runtime = Some("python".into());
    let s = build(&p, &registry()).unwrap();
    assert_eq!(s.runtimes.len(), 1);
}

fn messages(rt: &RuntimeStatus) -> Vec<(&str, usize)> {
    rt.pending
        .by_message
        .iter()
        .map(|c| (c.message.as_str(), c.runs))
        .collect()
}

#[test]
fn runs_of_one_shape_either_side_of_a_nominated_run_get_their_own_verdicts() {
    // py-a holds its one GPU for `nominated`: `early`, ahead of it in the queue, may still
    // take it; `late`, behind it, may not. All three ask for the same thing.
    let p = pool(
        vec![pod("py-a").capacity(&[("runs", 4), (GPU, 1)])],
        vec![
            run("early").requests(&[(GPU, 1)]).created(10),
            run("nominated")
                .requests(&[(GPU, 1)])
                .created(20)
                .nominated("py-a"),
            run("late").requests(&[(GPU, 1)]).created(30),
        ],
    );
    let s = build(&p, &registry()).unwrap();
    let rt = &s.runtimes[0];
    assert_eq!(
        messages(rt),
        vec![
            ("Fits: not yet placed.", 2),
            (
                "0/1 Runtime Pods are available: 1 reserved for an earlier Run.",
                1
            ),
        ]
    );
    let reasons: Vec<(&str, usize)> = rt
        .pending
        .by_reason
        .iter()
        .map(|c| (c.reason.as_str(), c.count))
        .collect();
    assert_eq!(
        reasons,
        vec![(FITS_NOW, 2), ("reserved for an earlier Run", 1)]
    );
}

#[test]
fn a_cancelled_run_and_a_recorded_priority_are_not_shared_with_their_shape() {
    let p = pool(
        vec![pod("py-a").capacity(&[("runs", 4)])],
        vec![
            run("waits").priority_class("gone"),
            // Its recorded priority stands although the class is gone: it is evaluated.
            run("recorded").priority_class("gone").priority(5),
            run("plain"),
            run("cancelled").cancel_requested(),
        ],
    );
    let s = build(&p, &registry()).unwrap();
    let mut got = messages(&s.runtimes[0]);
    got.sort();
    let missing = MissingClass("gone".into()).to_string();
    assert_eq!(
        got,
        vec![
            (
                "Cancelled: spec.cancelRequested: the Run was cancelled before it was placed",
                1
            ),
            ("Fits: not yet placed.", 2),
            (missing.as_str(), 1),
        ]
    );
    // Counted under the condition's reason, not as a Runtime without Pods.
    let reasons: Vec<(&str, usize)> = s.runtimes[0]
        .pending
        .by_reason
        .iter()
        .map(|c| (c.reason.as_str(), c.count))
        .collect();
    assert!(
        reasons.contains(&(crate::api::status::reasons::PRIORITY_CLASS_NOT_FOUND, 1)),
        "{reasons:?}"
    );
    assert!(!reasons.iter().any(|(r, _)| *r == NO_PODS), "{reasons:?}");
}

#[test]
fn pending_demand_by_priority_is_the_schedulers_resolved_priority_highest_first() {
    let mut p = pool(
        vec![pod("py-a").capacity(&[("runs", 1)])],
        vec![
            run("busy").on("py-a").running(),
            run("urgent").priority_class("urgent"),
            run("batch-1"),
            run("batch-2").priority_class("batch"),
            run("lost").priority_class("nope"),
        ],
    );
    p.objects.classes = vec![
        priority_class("urgent", 1000).build(),
        priority_class("batch", -5).build(),
        priority_class("standard", 10).global_default().build(),
    ];
    let s = build(&p, &registry()).unwrap();
    let levels: Vec<(i32, usize)> = s.runtimes[0]
        .pending
        .by_priority
        .iter()
        .map(|c| (c.priority, c.runs))
        .collect();
    // batch-1 names no class: the global default's 10; the missing class is not counted.
    assert_eq!(levels, vec![(1000, 1), (10, 1), (-5, 1)]);
    assert_eq!(s.runtimes[0].pending.runs, 4);
    let text = super::super::render::text(&s, &crate::output::Palette::plain());
    assert!(
        text.contains("  Priority:  1 at 1000, 1 at 10, 1 at -5 (served highest first)\n"),
        "{text}"
    );
}

#[test]
fn shares_per_group_show_who_holds_the_runtime_and_who_goes_next() {
    let mut p = pool(
        vec![pod("py-a").capacity(&[("runs", 4)])],
        vec![
            run("a1").submitted_by("alice").on("py-a").running(),
            run("a2").submitted_by("alice").on("py-a").running(),
            run("a3").submitted_by("alice").on("py-a").running(),
            run("a4").submitted_by("alice").on("py-a").running(),
            run("a5").submitted_by("alice").created(1),
            run("a6").submitted_by("alice").created(2),
            run("b1").submitted_by("bob").created(3),
        ],
    );
    p.objects.runtimes[0].metadata.annotations = Some(
        [(
            crate::api::ANNOTATION_FAIR_SHARE_WEIGHTS.to_string(),
            "alice=2".to_string(),
        )]
        .into(),
    );
    let s = build(&p, &registry()).unwrap();
    let groups: Vec<(&str, f64, f64, usize)> = s.runtimes[0]
        .pending
        .by_group
        .iter()
        .map(|g| (g.group.as_str(), g.share, g.weight, g.runs))
        .collect();
    assert_eq!(groups, vec![("bob", 0.0, 1.0, 1), ("alice", 1.0, 2.0, 2)]);
    let text = super::super::render::text(&s, &crate::output::Palette::plain());
    assert!(
        text.contains(
            "  Shares:    bob 0.00 (1 waiting), alice 1.00, weight 2 (2 waiting) (next first)\n"
        ),
        "{text}"
    );
    // One group waiting: nothing to share.
    p.objects
        .runs
        .retain(|r| r.metadata.name.as_deref() != Some("b1"));
    let s = build(&p, &registry()).unwrap();
    assert!(s.runtimes[0].pending.by_group.is_empty());
}

#[test]
fn active_workflow_runs_show_each_steps_run_and_the_replayed_verdict() {
    use crate::api::{
        LABEL_WORKFLOW_JOB, LABEL_WORKFLOW_RUN_UID, LABEL_WORKFLOW_STEP, WorkflowRun,
    };
    let step_run = [
        (LABEL_WORKFLOW_RUN_UID, "uid-wf"),
        (LABEL_WORKFLOW_JOB, "build"),
        (LABEL_WORKFLOW_STEP, "compile"),
    ];
    let mut p = pool(
        vec![pod("py-a").capacity(&[("runs", 4), (GPU, 1)])],
        vec![
            run("wf-build-compile")
                .requests(&[(GPU, 2)])
                .labels(&step_run),
        ],
    );
    let workflow_run = |name: &str, phase: &str| -> WorkflowRun {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kruntimes.io/v1alpha1", "kind": "WorkflowRun",
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {"jobs": {}},
            "status": {"phase": phase, "jobs": {
                "build": {"phase": "Running", "steps": [
                    {"name": "compile", "phase": "Running", "runName": format!("{name}-build-compile")},
                ]},
                "ship": {"phase": "Waiting", "pre": ["build"]},
            }},
        }))
        .unwrap()
    };
    p.objects.workflow_runs = vec![
        workflow_run("wf", "Running"),
        workflow_run("old", "Succeeded"),
    ];
    let s = build(&p, &registry()).unwrap();
    let names: Vec<&str> = s.workflow_runs.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["wf"],
        "only the WorkflowRuns that have not ended"
    );
    let rows = &s.workflow_runs[0].rows;
    let compile = &rows[0];
    assert_eq!(
        (
            compile.job.as_str(),
            compile.step.as_str(),
            compile.run.as_str(),
            compile.run_phase.as_str()
        ),
        ("build", "compile", "wf-build-compile", "Pending")
    );
    assert_eq!(
        compile.why,
        messages(&s.runtimes[0])[0].0,
        "the verdict the Runtime's Pending demand counts, not one of its own"
    );
    assert_eq!(rows[1].job, "ship");
    assert_eq!(rows[1].why, "needs build (Running)");
    let text = super::super::render::text(&s, &crate::output::Palette::new(false));
    assert!(text.contains("WorkflowRuns (1 not ended)"), "{text}");
    assert!(text.contains("wf-build-compile"), "{text}");

    p.runtime = Some("python".into());
    assert!(build(&p, &registry()).unwrap().workflow_runs.is_empty());
}
