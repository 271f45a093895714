//! The Runtime controller's plan, Pod and backoff, as pure functions.

use super::*;
use crate::api::LABEL_RUNTIME_POD;
use crate::api::resources::Resources;

#[test]
fn a_failing_creation_waits_as_long_as_it_has_failed_between_5_seconds_and_5_minutes() {
    let at = |secs: i64| Time(jiff::Timestamp::from_second(1_000_000 + secs).unwrap());
    assert_eq!(create_backoff(&at(0), &at(0)), MIN_CREATE_BACKOFF);
    assert_eq!(create_backoff(&at(0), &at(40)), Duration::from_secs(40));
    assert_eq!(create_backoff(&at(0), &at(4000)), MAX_CREATE_BACKOFF);
}
use crate::testing::{RuntimeBuilder, pod, runtime};

/// Runtime `python` in `team-a` at generation 3.
fn python(replicas: i32) -> RuntimeBuilder {
    runtime("python")
        .ns("team-a")
        .uid("rt-uid")
        .generation(3)
        .replicas(replicas)
}

fn now() -> Time {
    Time(jiff::Timestamp::from_second(100).unwrap())
}

#[test]
fn plan_creates_missing_pods_and_reports_status() {
    let rt = python(3).capacity(&[("runs", 4)]).build();
    let existing = pod("python-a").capacity(&[("runs", 4)]).build();
    let plan = plan(
        &rt,
        &[existing],
        &BTreeMap::new(),
        &BTreeSet::new(),
        None,
        &now(),
    );
    assert_eq!(plan.create, 2);
    assert!(plan.delete.is_empty() && plan.annotate.is_empty());
    assert_eq!((plan.status.replicas, plan.status.ready_replicas), (1, 1));
    assert_eq!(plan.status.observed_generation, Some(3));
    assert_eq!(plan.status.conditions[0].reason, reasons::NOT_READY);
}

#[test]
fn plan_projects_capacity_in_place_and_removes_undeclared_resources() {
    let rt = python(1).capacity(&[("runs", 8)]).build();
    let existing = pod("python-a")
        .capacity(&[("runs", 4), ("example.com/gpu", 1)])
        .annotation("unrelated", "x")
        .build();
    let plan = plan(
        &rt,
        &[existing],
        &BTreeMap::new(),
        &BTreeSet::new(),
        None,
        &now(),
    );
    assert_eq!(plan.create, 0);
    assert_eq!(
        plan.annotate,
        vec![(
            "python-a".to_string(),
            BTreeMap::from([
                ("kruntimes.io/capacity.example.com_gpu".to_string(), None),
                (
                    "kruntimes.io/capacity.runs".to_string(),
                    Some("8".to_string())
                ),
            ])
        )]
    );
    assert_eq!(plan.status.conditions[0].reason, reasons::ALL_READY);
}

#[test]
fn plan_with_malformed_capacity_touches_no_pod_and_says_why() {
    let rt = python(3)
        .capacity_strs(&[("example.com/gpu", "1.5")])
        .build();
    let plan = plan(
        &rt,
        &[pod("python-a").build()],
        &BTreeMap::new(),
        &BTreeSet::new(),
        None,
        &now(),
    );
    assert_eq!(
        (plan.create, plan.delete.len(), plan.annotate.len()),
        (0, 0, 0)
    );
    let message = plan.invalid_capacity.unwrap();
    assert!(
        message.contains("spec.capacity.resources[\"example.com/gpu\"]: \"1.5\""),
        "{message}"
    );
    assert_eq!(plan.status.conditions[0].reason, reasons::INVALID_CAPACITY);
    assert_eq!(plan.status.conditions[0].status, "False");
}

#[test]
fn plan_removes_surplus_pods_not_ready_first() {
    let rt = python(1).build();
    let pods = [
        pod("python-a").build(),
        pod("python-b").not_ready().build(),
        pod("python-c").build(),
    ];
    let plan = plan(&rt, &pods, &BTreeMap::new(), &BTreeSet::new(), None, &now());
    assert_eq!(plan.delete, ["python-b", "python-c"]);
}

#[test]
fn plan_removes_idle_pods_first_then_those_with_the_fewest_runs() {
    let rt = python(1).build();
    let pods = [
        pod("python-a").build(),
        pod("python-b").not_ready().build(),
        pod("python-c").build(),
        pod("python-d").build(),
    ];
    let active = BTreeMap::from([
        ("python-a".to_string(), 3),
        ("python-b".to_string(), 2),
        ("python-d".to_string(), 1),
    ]);
    let plan = plan(&rt, &pods, &active, &BTreeSet::new(), None, &now());
    assert_eq!(
        plan.delete,
        ["python-c", "python-d", "python-b"],
        "idle c, then d with 1 Run, then b with 2; a with 3 stays"
    );
}

#[test]
fn plan_never_removes_a_pod_a_workspace_is_bound_to() {
    let rt = python(1).build();
    let pods = [
        pod("python-a").build(),
        pod("python-b").build(),
        pod("python-c").build(),
    ];
    let active = BTreeMap::from([("python-a".to_string(), 3)]);
    let bound = BTreeSet::from(["python-b".to_string(), "python-c".to_string()]);
    let first = plan(&rt, &pods, &active, &bound, None, &now());
    assert_eq!(
        first.delete,
        ["python-a"],
        "the idle b and c hold workspaces; only a may go, busy as it is"
    );
    let all = BTreeSet::from(["python-a", "python-b", "python-c"].map(String::from));
    let held = plan(&rt, &pods, &active, &all, None, &now());
    assert!(held.delete.is_empty(), "the scale-down waits");
}

#[test]
fn new_pods_carry_labels_owner_annotations_and_downward_api_identity() {
    let rt = python(1).capacity(&[("runs", 2)]).build();
    let ann = capacity_annotations(&Resources::from_iter([("runs", 2)]));
    let injection = Injection::with_default_resources("kubectl-kruntimes:0.1.0");
    let p = new_pod(&rt, "python-bcdfg", &ann, &injection);
    assert_eq!(p.labels()[LABEL_RUNTIME], "python");
    assert_eq!(p.labels()[LABEL_RUNTIME_POD], "python-bcdfg");
    assert_eq!(p.annotations()["kruntimes.io/capacity.runs"], "2");
    assert_eq!(p.owner_references()[0].uid, "rt-uid");
    let env = p.spec.unwrap().containers[0].env.clone().unwrap();
    let names: Vec<_> = env.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names[..3], ["POD_NAME", "POD_NAMESPACE", "POD_UID"]);
    assert_eq!(
        env[2]
            .value_from
            .as_ref()
            .unwrap()
            .field_ref
            .as_ref()
            .unwrap()
            .field_path,
        "metadata.uid"
    );
}

#[test]
fn new_pods_are_completed_for_runtimed_unless_the_template_opts_out() {
    let injection = Injection::with_default_resources("kubectl-kruntimes:0.1.0");
    let ann = capacity_annotations(&Resources::from_iter([("runs", 2)]));
    // The template runs runtimed from its own image: completed, it gets the readiness
    // probe on runtimed's /readyz; kept as written, none.
    let probed = |rt: &Runtime| {
        new_pod(rt, "python-bcdfg", &ann, &injection)
            .spec
            .unwrap()
            .containers[0]
            .readiness_probe
            .is_some()
    };
    let mut rt = python(1).capacity(&[("runs", 2)]).build();
    assert!(probed(&rt), "completed by default");
    let annotations = rt
        .spec
        .template
        .metadata
        .get_or_insert_with(Default::default)
        .annotations
        .get_or_insert_with(BTreeMap::new);
    annotations.insert(pod::ANNOTATION_INJECT.into(), "true".into());
    assert!(probed(&rt), "only \"false\" opts out");
    let annotations = rt
        .spec
        .template
        .metadata
        .as_mut()
        .unwrap()
        .annotations
        .as_mut()
        .unwrap();
    annotations.insert(pod::ANNOTATION_INJECT.into(), "false".into());
    assert!(!probed(&rt), "opted out");
}

#[test]
fn generated_pod_names_are_valid_and_distinct() {
    let a = pod_name("python");
    let b = pod_name("python");
    assert!(a.starts_with("python-") && a.len() == 12, "{a}");
    assert_ne!(a, b);
}
