//! The planner's tests: examples of each rule here, the property tests in [`properties`].

mod properties;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::ResourceExt as _;
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestError, TestRunner};

use super::plan::{
    self, Children, Plan, StepKey, StepRun, Target, accept, check_action, check_jobs, derive,
};
use super::snapshot::{FrozenAction, Snapshot, action_key};
use crate::api::{
    ActionSpec, InputSpec, JobPhase, JobSpec, OutputSpec, Run, RunPhase, RunStatus, StepPhase,
    StepSpec, WorkflowPhase, WorkflowRun, WorkflowRunSpec, WorkflowRunStatus,
};

fn now() -> Time {
    Time(jiff::Timestamp::UNIX_EPOCH)
}

fn step(name: &str, run: &str) -> StepSpec {
    StepSpec {
        name: name.into(),
        run: run.into(),
        ..StepSpec::default()
    }
}

fn job(steps: Vec<StepSpec>, needs: &[&str]) -> JobSpec {
    JobSpec {
        runs_on: "bash".into(),
        needs: needs.iter().map(|n| n.to_string()).collect(),
        steps,
        ..JobSpec::default()
    }
}

fn workflow_run(jobs: BTreeMap<String, JobSpec>) -> WorkflowRun {
    WorkflowRun {
        metadata: ObjectMeta {
            name: Some("wfr".into()),
            namespace: Some("ns".into()),
            uid: Some("uid-1".into()),
            generation: Some(1),
            ..ObjectMeta::default()
        },
        spec: WorkflowRunSpec {
            jobs,
            cancel_requested: false,
        },
        status: None,
    }
}

fn ended(run: &Run, phase: RunPhase, outputs: &[(&str, &str)]) -> Run {
    let mut run = run.clone();
    run.status = Some(RunStatus {
        phase: Some(phase),
        outputs: outputs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..RunStatus::default()
    });
    run
}

/// The WorkflowRun accepted with `snapshot`.
fn accepted(snapshot: &Snapshot) -> WorkflowRunStatus {
    let mut status = WorkflowRunStatus::default();
    accept(&mut status, snapshot, "wfr-snapshot", Some(1), &now());
    status
}

/// The WorkflowRun of `jobs`, its snapshot, and its status once accepted.
fn accepted_run(jobs: BTreeMap<String, JobSpec>) -> (WorkflowRun, Snapshot, WorkflowRunStatus) {
    let wfr = workflow_run(jobs);
    let snapshot = Snapshot {
        spec: wfr.spec.clone(),
        ..Snapshot::default()
    };
    let status = accepted(&snapshot);
    (wfr, snapshot, status)
}

#[test]
fn acceptance_makes_jobs_waiting_on_their_needs_and_lists_action_steps() {
    let action = ActionSpec {
        steps: vec![step("a1", "true"), step("a2", "true")],
        ..ActionSpec::default()
    };
    let calls = StepSpec {
        name: "setup".into(),
        uses: "tools".into(),
        ..StepSpec::default()
    };
    let snapshot = Snapshot {
        spec: WorkflowRunSpec {
            jobs: [
                ("a".to_string(), job(vec![calls], &[])),
                ("b".to_string(), job(vec![step("s", "true")], &["a"])),
            ]
            .into(),
            cancel_requested: false,
        },
        actions: [(
            action_key("a", "setup"),
            FrozenAction {
                name: "tools".into(),
                spec: action,
            },
        )]
        .into(),
    };
    let status = accepted(&snapshot);
    let jobs = status.jobs.as_ref().unwrap();
    assert_eq!(status.phase, WorkflowPhase::Pending);
    assert_eq!(jobs["a"].phase, JobPhase::Pending);
    assert_eq!(
        (jobs["b"].phase, jobs["b"].pre.clone()),
        (JobPhase::Waiting, vec!["a".into()])
    );
    let names: Vec<_> = jobs["a"].steps[0]
        .action_steps
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(names, ["a1", "a2"]);
    let accepted = &status.conditions[0];
    assert_eq!(
        (accepted.type_.as_str(), accepted.status.as_str()),
        ("Accepted", "True")
    );
    assert_eq!(accepted.observed_generation, Some(1));
}

#[test]
fn a_step_run_resolves_what_it_reads_and_carries_its_identity() {
    let mut consume = step("use", "echo ${{ steps.make.outputs.v }}");
    consume.env = [("J".to_string(), "${{ jobs.first.outputs.x }}".to_string())].into();
    let jobs: BTreeMap<_, _> = [
        ("first".to_string(), job(vec![step("only", "true")], &[])),
        (
            "second".to_string(),
            job(vec![step("make", "true"), consume], &["first"]),
        ),
    ]
    .into();
    let mut wfr = workflow_run(jobs.clone());
    wfr.metadata.labels = Some(
        [("team", "a"), ("kruntimes.io/other", "x")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into(),
    );
    wfr.metadata.annotations = Some(
        [
            ("kruntimes.io/submitted-by", "alice"),
            ("example.com/note", "n"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into(),
    );
    let snapshot = Snapshot {
        spec: wfr.spec.clone(),
        ..Snapshot::default()
    };
    let mut status = accepted(&snapshot);
    {
        let all = status.jobs.as_mut().unwrap();
        let first = all.get_mut("first").unwrap();
        first.phase = JobPhase::Succeeded;
        first.outputs = [("x".to_string(), "X".to_string())].into();
        let second = all.get_mut("second").unwrap();
        second.phase = JobPhase::Running;
        second.steps[0].phase = StepPhase::Succeeded;
        second.steps[0].outputs = [("v".to_string(), "V".to_string())].into();
    }
    let made = plan::step_run(
        &wfr,
        &status,
        &snapshot,
        &Children::default(),
        "second",
        1,
        None,
    );
    let Ok(StepRun::Create(run)) = made else {
        panic!("a Run to create: {made:?}");
    };
    assert_eq!(
        run.spec.source.as_ref().unwrap().inline.as_deref(),
        Some("echo V")
    );
    assert_eq!(run.spec.env[0].value.as_deref(), Some("X"));
    assert_eq!(run.spec.runtime, "bash");
    let labels = run.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["kruntimes.io/workflowrun-uid"], "uid-1");
    assert_eq!(labels["kruntimes.io/workflow-job"], "second");
    assert_eq!(labels["kruntimes.io/workflow-step"], "use");
    assert!(
        !labels.contains_key("kruntimes.io/other"),
        "not a kruntimes.io/ label of its own"
    );
    assert_eq!(labels["team"], "a", "the WorkflowRun's own labels");
    assert_eq!(
        run.metadata.annotations,
        Some([("kruntimes.io/submitted-by".to_string(), "alice".to_string())].into()),
        "its submitter (fair sharing's group), and no other annotation"
    );
    let owner = &run.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("WorkflowRun", Some(true))
    );

    // A reference to what does not exist is the step's failure, named.
    let missing = {
        let mut s = status.clone();
        s.jobs.as_mut().unwrap().get_mut("second").unwrap().steps[0]
            .outputs
            .clear();
        plan::step_run(&wfr, &s, &snapshot, &Children::default(), "second", 1, None).unwrap_err()
    };
    assert_eq!(missing, "run: no outputs for make");
}

#[test]
fn an_action_call_ends_with_its_steps_and_exposes_the_actions_outputs() {
    let action = ActionSpec {
        inputs: [("who".to_string(), InputSpec::default())].into(),
        outputs: [(
            "greeting".to_string(),
            OutputSpec {
                value: "${{ inputs.who }}:${{ steps.emit.outputs.g }}".into(),
            },
        )]
        .into(),
        steps: vec![step("emit", "true")],
    };
    let mut calls = StepSpec {
        name: "hello".into(),
        uses: "greet".into(),
        ..StepSpec::default()
    };
    calls.with = [("who".to_string(), "world".to_string())].into();
    let wfr = workflow_run([("j".to_string(), job(vec![calls], &[]))].into());
    let snapshot = Snapshot {
        spec: wfr.spec.clone(),
        actions: [(
            action_key("j", "hello"),
            FrozenAction {
                name: "greet".into(),
                spec: action,
            },
        )]
        .into(),
    };
    let mut status = accepted(&snapshot);
    let Plan::Start(targets) =
        plan::plan(&wfr.spec, &status, Some(&snapshot), &Children::default())
    else {
        panic!("the Action's first step starts");
    };
    assert_eq!(
        targets,
        [Target::Step {
            job: "j".into(),
            step: 0,
            action_step: Some(0)
        }]
    );
    let Ok(StepRun::Create(run)) = plan::step_run(
        &wfr,
        &status,
        &snapshot,
        &Children::default(),
        "j",
        0,
        Some(0),
    ) else {
        panic!("a Run for the Action's step");
    };
    assert_eq!(
        run.metadata.labels.as_ref().unwrap()["kruntimes.io/workflow-action-step"],
        "emit"
    );
    plan::started_step(
        &mut status,
        "j",
        0,
        Some(0),
        &run.metadata.name.clone().unwrap(),
    );
    let done = ended(&run, RunPhase::Succeeded, &[("g", "hi")]);
    let children = Children::new([&done], vec![]);
    derive(&wfr.spec, &mut status, Some(&snapshot), &children);
    let step = &status.jobs.as_ref().unwrap()["j"].steps[0];
    assert_eq!(step.phase, StepPhase::Succeeded);
    assert_eq!(step.outputs["greeting"], "world:hi");
    assert_eq!(status.phase, WorkflowPhase::Succeeded);
}

#[test]
fn a_call_ends_with_its_child_and_its_frozen_output_expressions() {
    let call = JobSpec {
        uses: "deploy".into(),
        ..JobSpec::default()
    };
    let (mut wfr, snapshot, mut status) = accepted_run([("d".to_string(), call)].into());
    wfr.annotations_mut()
        .insert("kruntimes.io/submitted-by".into(), "alice".into());
    assert_eq!(
        plan::plan(&wfr.spec, &status, Some(&snapshot), &Children::default()),
        Plan::Start(vec![Target::Call { job: "d".into() }])
    );
    let workflow = crate::api::WorkflowSpec {
        outputs: [(
            "url".to_string(),
            OutputSpec {
                value: "${{ jobs.apply.outputs.url }}".into(),
            },
        )]
        .into(),
        jobs: [("apply".to_string(), job(vec![step("s", "true")], &[]))].into(),
        ..crate::api::WorkflowSpec::default()
    };
    let mut child = plan::call_run(&wfr, &status, "d", &wfr.spec.jobs["d"], &workflow).unwrap();
    assert_eq!(
        child.metadata.annotations.as_ref().unwrap()["kruntimes.io/workflow-output.url"],
        "${{ jobs.apply.outputs.url }}"
    );
    assert_eq!(
        child.annotations()["kruntimes.io/submitted-by"],
        "alice",
        "a nested WorkflowRun's Runs share its caller's group"
    );
    let name = child.metadata.name.clone().unwrap();
    plan::started_call(&mut status, "d", &name);
    let mut child_status = WorkflowRunStatus {
        phase: WorkflowPhase::Succeeded,
        ..WorkflowRunStatus::default()
    };
    let apply = crate::api::JobStatus {
        phase: JobPhase::Succeeded,
        outputs: [("url".to_string(), "https://x".to_string())].into(),
        ..crate::api::JobStatus::default()
    };
    child_status.jobs = Some([("apply".to_string(), apply)].into());
    child.status = Some(child_status);
    let children = Children::new([], vec![&child]);
    derive(&wfr.spec, &mut status, Some(&snapshot), &children);
    let d = &status.jobs.as_ref().unwrap()["d"];
    assert_eq!(
        (d.phase, d.outputs["url"].as_str()),
        (JobPhase::Succeeded, "https://x")
    );
    assert_eq!(status.phase, WorkflowPhase::Succeeded);
}

#[test]
fn a_cancel_asks_active_children_then_ends_cancelled_once_they_have() {
    let (mut wfr, snapshot, mut status) =
        accepted_run([("j".to_string(), job(vec![step("s", "sleep 9")], &[]))].into());
    let Ok(StepRun::Create(run)) =
        plan::step_run(&wfr, &status, &snapshot, &Children::default(), "j", 0, None)
    else {
        panic!("a Run");
    };
    plan::started_step(
        &mut status,
        "j",
        0,
        None,
        &run.metadata.name.clone().unwrap(),
    );
    wfr.spec.cancel_requested = true;
    let children = Children::new([run.as_ref()], vec![]);
    derive(&wfr.spec, &mut status, Some(&snapshot), &children);
    assert_eq!(status.phase, WorkflowPhase::Running);
    assert_eq!(
        plan::plan(&wfr.spec, &status, Some(&snapshot), &children),
        Plan::CancelChildren
    );

    let cancelled = ended(&run, RunPhase::Cancelled, &[]);
    let children = Children::new([&cancelled], vec![]);
    derive(&wfr.spec, &mut status, Some(&snapshot), &children);
    assert_eq!(status.phase, WorkflowPhase::Cancelled);
    assert_eq!(
        plan::plan(&wfr.spec, &status, Some(&snapshot), &children),
        Plan::Wait
    );
}

#[test]
fn a_cancel_before_acceptance_ends_cancelled_without_accepting() {
    let mut wfr = workflow_run([("j".to_string(), job(vec![step("s", "true")], &[]))].into());
    wfr.spec.cancel_requested = true;
    let mut status = WorkflowRunStatus::default();
    derive(&wfr.spec, &mut status, None, &Children::default());
    assert_eq!(status.phase, WorkflowPhase::Cancelled);
    assert_eq!(
        plan::plan(&wfr.spec, &status, None, &Children::default()),
        Plan::Wait
    );
}

#[test]
fn jobs_and_actions_are_checked_with_messages_that_name_the_field() {
    let jobs: BTreeMap<_, _> = [
        ("a".to_string(), job(vec![step("s", "true")], &["c"])),
        ("b".to_string(), job(vec![step("s", "true")], &["a"])),
        ("c".to_string(), job(vec![step("s", "true")], &["b"])),
    ]
    .into();
    assert_eq!(
        check_jobs(&jobs).unwrap_err(),
        "the jobs' needs form a cycle: a -> c -> b -> a"
    );
    let no_runtime = [(
        "x".to_string(),
        JobSpec {
            steps: vec![step("s", "true")],
            ..JobSpec::default()
        },
    )]
    .into();
    assert!(
        check_jobs(&no_runtime)
            .unwrap_err()
            .contains("must set runs-on")
    );
    let twice = ActionSpec {
        steps: vec![step("s", "true"), step("s", "true")],
        ..ActionSpec::default()
    };
    assert_eq!(
        check_action(&twice).unwrap_err(),
        "Action step name \"s\" is used twice"
    );
}

#[test]
fn a_step_whose_run_is_gone_before_it_ended_fails_its_job() {
    let (wfr, snapshot, mut status) =
        accepted_run([("j".to_string(), job(vec![step("s", "sleep 9")], &[]))].into());
    plan::started_step(&mut status, "j", 0, None, "wfr-gone");
    let mut children = Children::default();
    assert_eq!(
        children.unseen(&status),
        ["wfr-gone"],
        "the controller asks the API"
    );
    // Not yet known to be gone (a store that lags its create): nothing changes.
    derive(&wfr.spec, &mut status, Some(&snapshot), &children);
    assert_eq!(status.phase, WorkflowPhase::Running);
    children.gone.insert("wfr-gone".into());
    derive(&wfr.spec, &mut status, Some(&snapshot), &children);
    assert_eq!(status.phase, WorkflowPhase::Failed);
    assert_eq!(
        status.message,
        "the Run wfr-gone of step \"s\" in job \"j\" was deleted before it ended"
    );
}

#[test]
fn a_call_whose_child_is_gone_fails_its_job() {
    let call = JobSpec {
        uses: "deploy".into(),
        ..JobSpec::default()
    };
    let (wfr, snapshot, mut status) = accepted_run([("d".to_string(), call)].into());
    plan::started_call(&mut status, "d", "wfr-child");
    derive(
        &wfr.spec,
        &mut status,
        Some(&snapshot),
        &Children::default(),
    );
    assert_eq!(status.jobs.as_ref().unwrap()["d"].phase, JobPhase::Failed);
    assert_eq!(status.phase, WorkflowPhase::Failed);
    assert!(
        status
            .message
            .contains("wfr-child of job \"d\" was deleted"),
        "{}",
        status.message
    );
}
