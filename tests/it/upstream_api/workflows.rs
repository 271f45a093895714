//! Workflows, WorkflowRuns and Actions as upstream's docs write them: accepted strictly and
//! stored unpruned; and what upstream's CRDs refuse, refused with upstream's messages.

use super::*;

#[testkit::test]
async fn every_documented_workflow_form_is_accepted_strictly_and_stored_unpruned() {
    let fields = [
        "inputs.image.type",
        "inputs.image.required",
        "inputs.channel.default",
        "outputs.image.value",
        "jobs.build.runs-on",
        "jobs.build.outputs",
        "jobs.build.steps[].name",
        "jobs.build.steps[].run",
        "jobs.deploy.needs",
        "jobs.prepare.steps[].uses",
        "jobs.prepare.steps[].with",
        "jobs.prepare.steps[].args",
        "jobs.prepare.steps[].env",
        "jobs.publish.uses",
        "jobs.publish.with",
    ];
    let forms: &[Form] = &[
        ("a required input", |s| has(s, "/inputs/image/required")),
        ("an input with a default", |s| {
            has(s, "/inputs/channel/default")
        }),
        ("a job calling a Workflow", |s| has(s, "/jobs/publish/uses")),
        ("a step calling an Action", |s| {
            has(s, "/jobs/prepare/steps/0/uses")
        }),
    ];
    accepted_and_stored_unpruned("workflows.yaml", "Workflow", &fields, forms).await;
}

#[testkit::test]
async fn every_documented_workflow_run_form_is_accepted_strictly_and_stored_unpruned() {
    let fields = [
        "cancelRequested",
        "jobs.test.runs-on",
        "jobs.test.steps[].name",
        "jobs.test.steps[].run",
        "jobs.deploy.needs",
        "jobs.deploy.uses",
        "jobs.deploy.with",
        "jobs.build.outputs",
        "jobs.build.steps[].uses",
        "jobs.build.steps[].with",
        "jobs.build.steps[].args",
        "jobs.build.steps[].env",
    ];
    let forms: &[Form] = &[
        ("only inline jobs", |s| {
            s.as_object().is_some_and(|s| s.len() == 1)
        }),
        ("a job calling a Workflow", |s| has(s, "/jobs/deploy/uses")),
    ];
    accepted_and_stored_unpruned("workflowruns.yaml", "WorkflowRun", &fields, forms).await;
}

#[testkit::test]
async fn every_documented_action_form_is_accepted_strictly_and_stored_unpruned() {
    let fields = [
        "inputs.version.type",
        "inputs.version.default",
        "inputs.source.required",
        "outputs.python-version.value",
        "steps[].name",
        "steps[].run",
        "steps[].args",
        "steps[].env",
    ];
    let forms: &[Form] = &[
        ("a typed input with a default", |s| {
            has(s, "/inputs/version/type")
        }),
        ("only steps", |s| {
            s.as_object().is_some_and(|s| s.len() == 1)
        }),
    ];
    accepted_and_stored_unpruned("actions.yaml", "Action", &fields, forms).await;
}

/// A manifest of `kind` named `name` with `spec` (YAML, indented by two).
fn manifest(kind: &str, name: &str, spec: &str) -> String {
    format!(
        "apiVersion: kruntimes.io/v1alpha1\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

#[testkit::test]
async fn what_upstreams_workflow_crds_refuse_is_refused_with_their_messages() {
    let ns = TestNs::new("upstream-workflow-rules").await;
    let cases = [
        (
            manifest(
                "WorkflowRun",
                "run-and-uses",
                "  jobs:\n    a:\n      runs-on: bash\n      steps:\n        - name: s\n          run: 'true'\n          uses: act\n",
            ),
            "exactly one of run or uses must be set",
        ),
        (
            manifest(
                "WorkflowRun",
                "steps-and-uses",
                "  jobs:\n    a:\n      uses: other\n      steps:\n        - name: s\n          run: 'true'\n",
            ),
            "exactly one of steps or uses must be set",
        ),
        (
            manifest(
                "WorkflowRun",
                "with-no-uses",
                "  jobs:\n    a:\n      runs-on: bash\n      with: {x: \"v\"}\n      steps:\n        - name: s\n          run: 'true'\n",
            ),
            "with can only be set when uses is set",
        ),
        (
            manifest(
                "WorkflowRun",
                "args-on-uses",
                "  jobs:\n    a:\n      runs-on: bash\n      steps:\n        - name: s\n          uses: act\n          args: [x]\n",
            ),
            "args and env can only be set on run steps",
        ),
        (
            manifest(
                "WorkflowRun",
                "unknown-need",
                "  jobs:\n    a:\n      runs-on: bash\n      needs: [b]\n      steps:\n        - name: s\n          run: 'true'\n",
            ),
            "each dependency must name another job in this WorkflowRun",
        ),
        (
            manifest(
                "Workflow",
                "self-need",
                "  jobs:\n    a:\n      runs-on: bash\n      needs: [a]\n      steps:\n        - name: s\n          run: 'true'\n",
            ),
            "each dependency must name another job in this workflow",
        ),
        (
            manifest(
                "Workflow",
                "bad-job-name",
                "  jobs:\n    'not a label':\n      runs-on: bash\n      steps:\n        - name: s\n          run: 'true'\n",
            ),
            "job names must be valid Kubernetes label values with at most 63 characters",
        ),
        (
            manifest(
                "Action",
                "nested-action",
                "  steps:\n    - name: s\n      uses: other\n",
            ),
            "Action steps must set run and may not use another Action",
        ),
        (
            manifest("WorkflowRun", "no-jobs", "  jobs: {}\n"),
            "should have at least 1 properties",
        ),
    ];
    let mut wrong = Vec::new();
    for (object, message) in &cases {
        let (out, stdout, stderr) = apply(&ns.name, "-", Some(object));
        if out.status.success() || !stderr.contains(message) {
            wrong.push(format!(
                "{object}\n  wanted refused with {message:?}, got: {stdout}{stderr}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[testkit::test]
async fn a_workflow_runs_jobs_are_immutable_and_its_cancel_is_one_way() {
    let ns = TestNs::new("upstream-workflow-immutable").await;
    let run = |script: &str, cancel: bool| {
        manifest(
            "WorkflowRun",
            "once",
            &format!(
                "  cancelRequested: {cancel}\n  jobs:\n    a:\n      runs-on: bash\n      steps:\n        - name: s\n          run: {script}\n"
            ),
        )
    };
    let (out, _, stderr) = apply(&ns.name, "-", Some(&run("'true'", false)));
    assert!(out.status.success(), "create: {stderr}");
    let (out, stdout, stderr) = apply(&ns.name, "-", Some(&run("'false'", false)));
    assert!(
        !out.status.success(),
        "a change of jobs was accepted: {stdout}"
    );
    assert!(
        stderr.contains("jobs are immutable after WorkflowRun creation"),
        "{stderr}"
    );
    let (out, _, stderr) = apply(&ns.name, "-", Some(&run("'true'", true)));
    assert!(out.status.success(), "false -> true was refused: {stderr}");
    let (out, stdout, stderr) = apply(&ns.name, "-", Some(&run("'true'", false)));
    assert!(
        !out.status.success(),
        "true -> false was accepted: {stdout}"
    );
    assert!(
        stderr.contains("cancelRequested may not transition from true to false"),
        "{stderr}"
    );
    assert_eq!(
        get(&ns.name, "WorkflowRun", "once")["spec"]["cancelRequested"],
        true
    );
}
