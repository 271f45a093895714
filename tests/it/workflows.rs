//! Workflows on the real control plane, the Go kruntimes project's twelve Workflow end-to-end
//! tests ported with their assertions: `scheduler run` executes WorkflowRuns, each step a Run it
//! places on a Runtime `bash` whose Pod runs a real runtimed with the Go project's Bash runtime
//! server (built unchanged). What the port adds is in `workflows/beyond.rs`. What the CRDs
//! accept and refuse is `tests/it/upstream_api.rs`'s.

use testkit as support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use kruntimes::api::{
    Action, JobPhase, LABEL_WORKFLOW_RUN_UID, Run, RunPhase, StepPhase, Workflow, WorkflowPhase,
    WorkflowRun,
};
use support::pool::HEARTBEAT;
use support::world::{RuntimeServerProcess, SchedulerProcess, TestNs, eventually};

mod beyond;

/// How long a WorkflowRun of a few short steps may take on a loaded test machine.
const PATIENCE: Duration = Duration::from_secs(90);

/// A namespace with a scheduler and one Runtime `bash` (one Pod, four runs) served by the Go
/// project's Bash runtime server, as the Go project's e2e suite runs its Workflow tests.
struct Scenario {
    ns: TestNs,
    scheduler: SchedulerProcess,
    _server: RuntimeServerProcess,
    _pool: support::pool::Pool,
}

impl Scenario {
    async fn start(prefix: &str) -> Self {
        let ns = TestNs::new(prefix).await;
        let scheduler = SchedulerProcess::start(&ns.name, 4, None, prefix).await;
        let server = RuntimeServerProcess::start_bash().await;
        let mut args: Vec<&str> = HEARTBEAT.to_vec();
        args.extend(server.flag());
        let pool = support::pool::Pool::start(&ns, "bash", 1, &[("runs", 4)], &args).await;
        Scenario {
            ns,
            scheduler,
            _server: server,
            _pool: pool,
        }
    }

    /// Creates `object` (a Workflow, Action or WorkflowRun given as JSON) in the namespace.
    async fn create<K: Namespaced>(&self, object: serde_json::Value) -> K {
        make(&self.ns, object).await
    }

    /// Waits until WorkflowRun `name` is in `phase`; returns it.
    async fn until_phase(&self, name: &str, phase: WorkflowPhase) -> WorkflowRun {
        let api = self.ns.api::<WorkflowRun>();
        eventually(
            PATIENCE,
            &format!("workflowrun/{name} {phase:?}"),
            async || {
                let run = api.get(name).await.map_err(|e| e.to_string())?;
                match run.status.as_ref() {
                    Some(s) if s.phase == phase => Ok(run),
                    other => Err(format!(
                        "{:?}",
                        other.map(|s| (&s.phase, &s.message, &s.jobs))
                    )),
                }
            },
        )
        .await
    }

    /// Waits until `check` finds something in WorkflowRun `name`'s status; returns it.
    async fn until<T>(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&WorkflowRun) -> Option<T>,
    ) -> T {
        let api = self.ns.api::<WorkflowRun>();
        eventually(PATIENCE, what, async || {
            let run = api.get(name).await.map_err(|e| e.to_string())?;
            check(&run).ok_or_else(|| format!("{:?}", run.status))
        })
        .await
    }

    /// The name of the Run of Action step `action_step` of job `job`, once it has one.
    async fn action_child_run(&self, name: &str, job: &str, action_step: &str) -> String {
        self.until(
            name,
            &format!("the Run of Action step {action_step}"),
            |run| {
                let status = run.status.as_ref()?;
                let steps = &status.jobs.as_ref()?.get(job)?.steps;
                steps
                    .iter()
                    .flat_map(|s| &s.action_steps)
                    .find(|a| a.name == action_step && !a.run_name.is_empty())
                    .map(|a| a.run_name.clone())
            },
        )
        .await
    }

    /// Sets `spec.cancelRequested` of WorkflowRun `name`.
    async fn cancel(&self, name: &str) {
        self.ns
            .api::<WorkflowRun>()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"cancelRequested": true}})),
            )
            .await
            .expect("request the WorkflowRun's cancellation");
    }

    /// The Runs WorkflowRun `run` owns.
    async fn child_runs(&self, run: &WorkflowRun) -> Vec<Run> {
        let uid = run.uid().expect("a stored WorkflowRun");
        let selector = format!("{LABEL_WORKFLOW_RUN_UID}={uid}");
        self.ns
            .api::<Run>()
            .list(&kube::api::ListParams::default().labels(&selector))
            .await
            .expect("list child Runs")
            .items
    }
}

/// A kind the tests create in their namespace.
trait Namespaced:
    kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
    + Clone
    + serde::Serialize
    + serde::de::DeserializeOwned
    + std::fmt::Debug
{
}

impl<K> Namespaced for K where
    K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug
{
}

/// Creates `object` (JSON of kind `K`) in `ns`.
async fn make<K: Namespaced>(ns: &TestNs, object: serde_json::Value) -> K {
    support::world::create_in(ns, serde_json::from_value(object).expect("a valid object")).await
}

/// A job of one step `emit` on `bash` that runs `script` and exposes `result` from its output.
fn output_job(script: &str) -> serde_json::Value {
    json!({
        "runs-on": "bash",
        "outputs": {"result": "${{ steps.emit.outputs.result }}"},
        "steps": [{"name": "emit", "run": script}],
    })
}

fn workflow(name: &str, spec: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "kruntimes.io/v1alpha1", "kind": "Workflow", "metadata": {"name": name}, "spec": spec})
}

fn action(name: &str, spec: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "kruntimes.io/v1alpha1", "kind": "Action", "metadata": {"name": name}, "spec": spec})
}

fn workflow_run(name: &str, jobs: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "kruntimes.io/v1alpha1", "kind": "WorkflowRun", "metadata": {"name": name}, "spec": {"jobs": jobs}})
}

/// Job `name`'s status, once the WorkflowRun was accepted.
fn job_of(run: &WorkflowRun, name: &str) -> Option<kruntimes::api::JobStatus> {
    run.status.as_ref()?.jobs.as_ref()?.get(name).cloned()
}

fn job(run: &WorkflowRun, name: &str) -> kruntimes::api::JobStatus {
    job_of(run, name).unwrap_or_else(|| panic!("job {name} in {:?}", run.status))
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_materializes_the_workflows_inputs_and_executes_it() {
    let s = Scenario::start("wf-trigger").await;
    let spec = json!({
        "inputs": {"message": {"required": true}},
        "jobs": {"build": {"runs-on": "bash", "steps": [{
            "name": "render",
            "run": "test \"$MESSAGE\" = \"${{ inputs.message }}\"",
            "env": {"MESSAGE": "${{ inputs.message }}"},
        }]}},
    });
    let _: Workflow = s.create(workflow("template", spec)).await;

    let out = support::kruntimes()
        .args(["wf", "trigger", "template", "--name", "triggered"])
        .args(["--set", "message=rendered-by-e2e", "-n", &s.ns.name])
        .output()
        .expect("run workflow trigger");
    let stdout = support::ok(&out, "workflow trigger");
    assert!(stdout.contains("triggered"), "trigger output {stdout:?}");

    let run = s.ns.api::<WorkflowRun>().get("triggered").await.unwrap();
    let step = &run.spec.jobs["build"].steps[0];
    assert_eq!(step.run, "test \"$MESSAGE\" = \"rendered-by-e2e\"");
    assert_eq!(step.env["MESSAGE"], "rendered-by-e2e");

    let run = s.until_phase("triggered", WorkflowPhase::Succeeded).await;
    assert_eq!(job(&run, "build").phase, JobPhase::Succeeded);
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_executes_and_its_outputs_reach_the_next_step() {
    let s = Scenario::start("wf-action").await;
    let spec = json!({
        "inputs": {"message": {"required": true}},
        "outputs": {"endpoint": {"value": "${{ steps.emit.outputs.endpoint }}"}},
        "steps": [
            {"name": "validate", "run": "test \"$MESSAGE\" = \"action-input\"", "env": {"MESSAGE": "${{ inputs.message }}"}},
            {"name": "emit", "run": "printf 'endpoint=https://action.e2e.example.com\\n' > \"$KRUNTIME_OUTPUTS\""},
        ],
    });
    let _: Action = s.create(action("setup-action", spec)).await;
    let jobs = json!({"build": {"runs-on": "bash", "steps": [
        {"name": "setup", "uses": "setup-action", "with": {"message": "action-input"}},
        {"name": "consume", "run": "test \"$ENDPOINT\" = \"https://action.e2e.example.com\"", "env": {"ENDPOINT": "${{ steps.setup.outputs.endpoint }}"}},
    ]}});
    let _: WorkflowRun = s.create(workflow_run("action-run", jobs)).await;

    let run = s.until_phase("action-run", WorkflowPhase::Succeeded).await;
    let build = job(&run, "build");
    let setup = &build.steps[0];
    assert_eq!(setup.phase, StepPhase::Succeeded);
    assert_eq!(setup.outputs["endpoint"], "https://action.e2e.example.com");
    assert_eq!(setup.action_steps.len(), 2, "{setup:?}");
    assert!(
        setup
            .action_steps
            .iter()
            .all(|a| a.phase == StepPhase::Succeeded),
        "{setup:?}"
    );
    assert_eq!(build.steps[1].phase, StepPhase::Succeeded, "{build:?}");
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_actions_run_fails_the_workflow_run() {
    let s = Scenario::start("wf-action-fail").await;
    let _: Action = s
        .create(action(
            "fail",
            json!({"steps": [{"name": "fail", "run": "exit 17"}]}),
        ))
        .await;
    let jobs = json!({"build": {"runs-on": "bash", "steps": [{"name": "setup", "uses": "fail"}]}});
    let _: WorkflowRun = s.create(workflow_run("fail-run", jobs)).await;

    let run = s.until_phase("fail-run", WorkflowPhase::Failed).await;
    let step = &job(&run, "build").steps[0];
    assert_eq!(step.phase, StepPhase::Failed);
    assert_eq!(step.action_steps.len(), 1);
    assert_eq!(step.action_steps[0].phase, StepPhase::Failed);
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_reaches_an_actions_running_child_run() {
    let s = Scenario::start("wf-action-cancel").await;
    let _: Action = s
        .create(action(
            "wait",
            json!({"steps": [{"name": "wait", "run": "sleep 30"}]}),
        ))
        .await;
    let jobs = json!({"build": {"runs-on": "bash", "steps": [{"name": "setup", "uses": "wait"}]}});
    let _: WorkflowRun = s.create(workflow_run("cancel-run", jobs)).await;

    let child = s.action_child_run("cancel-run", "build", "wait").await;
    s.cancel("cancel-run").await;
    let runs = s.ns.api::<Run>();
    let cancelled = eventually(PATIENCE, "the Action's Run Cancelled", async || {
        let run = runs.get(&child).await.map_err(|e| e.to_string())?;
        let phase = run.status.as_ref().and_then(|s| s.phase);
        (phase == Some(RunPhase::Cancelled))
            .then_some(run)
            .ok_or(format!("{phase:?}"))
    })
    .await;
    assert!(
        cancelled.spec.cancel_requested,
        "run/{child} cancelRequested"
    );
    s.until_phase("cancel-run", WorkflowPhase::Cancelled).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_action_is_refused_without_a_child_run() {
    let s = Scenario::start("wf-action-missing").await;
    let jobs = json!({"build": {"runs-on": "bash", "steps": [{"name": "setup", "uses": "does-not-exist"}]}});
    let _: WorkflowRun = s.create(workflow_run("missing-run", jobs)).await;

    let run = s.until_phase("missing-run", WorkflowPhase::Failed).await;
    let status = run.status.clone().unwrap();
    assert!(
        status.message.contains("does not exist"),
        "{:?}",
        status.message
    );
    assert!(
        status.message.contains("does-not-exist"),
        "names the Action: {:?}",
        status.message
    );
    let accepted = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Accepted")
        .expect("Accepted");
    assert_eq!(
        (accepted.status.as_str(), accepted.reason.as_str()),
        ("False", "WorkflowValidationFailed")
    );
    assert!(
        s.child_runs(&run).await.is_empty(),
        "no child Run for a refused WorkflowRun"
    );
    let events = s.ns.events_of("missing-run").await;
    assert_eq!(events.len(), 1, "one Warning: {events:?}");
    assert_eq!(events[0].0, "WorkflowValidationFailed");
    assert!(events[0].1.contains("does not exist"), "{events:?}");
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_recovers_after_the_controller_restarts() {
    let mut s = Scenario::start("wf-action-restart").await;
    let spec =
        json!({"steps": [{"name": "first", "run": "sleep 5"}, {"name": "second", "run": "true"}]});
    let _: Action = s.create(action("recovery", spec)).await;
    let jobs =
        json!({"build": {"runs-on": "bash", "steps": [{"name": "setup", "uses": "recovery"}]}});
    let _: WorkflowRun = s.create(workflow_run("recovery-run", jobs)).await;

    let first = s.action_child_run("recovery-run", "build", "first").await;
    s.scheduler.kill();
    s.scheduler = SchedulerProcess::start(&s.ns.name, 4, None, "wf-action-restart-2").await;

    let run = s
        .until_phase("recovery-run", WorkflowPhase::Succeeded)
        .await;
    let setup = &job(&run, "build").steps[0];
    assert_eq!(setup.action_steps.len(), 2, "{setup:?}");
    assert_eq!(
        setup.action_steps[0].run_name, first,
        "the first Action step kept its Run"
    );
    assert!(
        setup
            .action_steps
            .iter()
            .all(|a| a.phase == StepPhase::Succeeded),
        "{setup:?}"
    );
    assert_eq!(
        s.child_runs(&run).await.len(),
        2,
        "one Run per Action step, none twice"
    );
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reusable_workflow_executes_and_its_outputs_reach_the_caller() {
    let s = Scenario::start("wf-reuse").await;
    let spec = json!({
        "outputs": {"endpoint": {"value": "${{ jobs.apply.outputs.endpoint }}"}},
        "jobs": {"apply": {
            "runs-on": "bash",
            "outputs": {"endpoint": "${{ steps.deploy.outputs.endpoint }}"},
            "steps": [{"name": "deploy", "run": "printf 'endpoint=https://e2e.example.com\\n' > \"$KRUNTIME_OUTPUTS\""}],
        }},
    });
    let _: Workflow = s.create(workflow("deploy", spec)).await;
    let _: WorkflowRun = s
        .create(workflow_run("reuse", json!({"deploy": {"uses": "deploy"}})))
        .await;

    let run = s.until_phase("reuse", WorkflowPhase::Succeeded).await;
    let deploy = job(&run, "deploy");
    assert!(!deploy.workflow_run_name.is_empty(), "{deploy:?}");
    assert_eq!(deploy.phase, JobPhase::Succeeded);
    assert_eq!(deploy.outputs["endpoint"], "https://e2e.example.com");
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_reusable_workflows_execute() {
    let s = Scenario::start("wf-nested").await;
    let leaf = json!({
        "outputs": {"result": {"value": "${{ jobs.test.outputs.result }}"}},
        "jobs": {"test": output_job("printf 'result=nested-ok\\n' > \"$KRUNTIME_OUTPUTS\"")},
    });
    let middle = json!({
        "outputs": {"result": {"value": "${{ jobs.call-leaf.outputs.result }}"}},
        "jobs": {"call-leaf": {"uses": "leaf"}},
    });
    let _: Workflow = s.create(workflow("leaf", leaf)).await;
    let _: Workflow = s.create(workflow("middle", middle)).await;
    let _: WorkflowRun = s
        .create(workflow_run(
            "nested",
            json!({"call-middle": {"uses": "middle"}}),
        ))
        .await;

    let run = s.until_phase("nested", WorkflowPhase::Succeeded).await;
    let call = job(&run, "call-middle");
    assert!(!call.workflow_run_name.is_empty(), "{call:?}");
    assert_eq!(call.phase, JobPhase::Succeeded);
    assert_eq!(call.outputs["result"], "nested-ok");
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_reaches_a_reusable_workflows_child() {
    let s = Scenario::start("wf-reuse-cancel").await;
    let spec = json!({"jobs": {"apply": {"runs-on": "bash", "steps": [{"name": "wait", "run": "sleep 300"}]}}});
    let _: Workflow = s.create(workflow("slow", spec)).await;
    let _: WorkflowRun = s
        .create(workflow_run(
            "reuse-cancel",
            json!({"deploy": {"uses": "slow"}}),
        ))
        .await;

    let child = s
        .until("reuse-cancel", "the reusable call to start", |run| {
            let name = job_of(run, "deploy")?.workflow_run_name;
            (!name.is_empty()).then_some(name)
        })
        .await;
    s.cancel("reuse-cancel").await;
    s.until_phase("reuse-cancel", WorkflowPhase::Cancelled)
        .await;
    let child = s.ns.api::<WorkflowRun>().get(&child).await.unwrap();
    assert!(
        child.spec.cancel_requested,
        "the child WorkflowRun was asked to cancel"
    );
    assert_eq!(child.status.unwrap().phase, WorkflowPhase::Cancelled);
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reusable_workflow_cycle_is_refused() {
    let s = Scenario::start("wf-cycle").await;
    let _: Workflow = s
        .create(workflow(
            "cycle-a",
            json!({"jobs": {"call-b": {"uses": "cycle-b"}}}),
        ))
        .await;
    let _: Workflow = s
        .create(workflow(
            "cycle-b",
            json!({"jobs": {"call-a": {"uses": "cycle-a"}}}),
        ))
        .await;
    let _: WorkflowRun = s
        .create(workflow_run(
            "cycle-run",
            json!({"call-a": {"uses": "cycle-a"}}),
        ))
        .await;

    let run = s.until_phase("cycle-run", WorkflowPhase::Failed).await;
    let call = job(&run, "call-a");
    assert_eq!(call.phase, JobPhase::Failed);
    assert!(
        call.workflow_run_name.is_empty(),
        "no child WorkflowRun: {call:?}"
    );
    let message = run.status.unwrap().message;
    assert!(message.contains("workflow call cycle:"), "{message:?}");
    assert!(
        message.contains("cycle-a -> cycle-b -> cycle-a"),
        "{message:?}"
    );
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reusable_template_is_frozen_once_its_child_exists() {
    let s = Scenario::start("wf-freeze").await;
    let spec = json!({
        "outputs": {"result": {"value": "${{ jobs.apply.outputs.result }}"}},
        "jobs": {"apply": output_job("sleep 2; printf 'result=original\\n' > \"$KRUNTIME_OUTPUTS\"")},
    });
    let _: Workflow = s.create(workflow("freeze", spec)).await;
    let _: WorkflowRun = s
        .create(workflow_run(
            "freeze-run",
            json!({"call": {"uses": "freeze"}}),
        ))
        .await;

    s.until("freeze-run", "the reusable call's child", |run| {
        (!job_of(run, "call")?.workflow_run_name.is_empty()).then_some(())
    })
    .await;
    let changed = json!({"spec": {"outputs": {"result": {"value": "changed"}}}});
    s.ns.api::<Workflow>()
        .patch("freeze", &PatchParams::default(), &Patch::Merge(changed))
        .await
        .expect("change the Workflow after the call started");

    let run = s.until_phase("freeze-run", WorkflowPhase::Succeeded).await;
    assert_eq!(job(&run, "call").outputs["result"], "original");
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reusable_template_is_bound_when_its_call_becomes_ready() {
    let s = Scenario::start("wf-late-bind").await;
    let spec = json!({
        "outputs": {"result": {"value": "${{ jobs.apply.outputs.result }}"}},
        "jobs": {"apply": output_job("printf 'result=original\\n' > \"$KRUNTIME_OUTPUTS\"")},
    });
    let _: Workflow = s.create(workflow("late", spec)).await;
    let jobs = json!({
        "gate": {"runs-on": "bash", "steps": [{"name": "wait", "run": "sleep 2"}]},
        "call": {"needs": ["gate"], "uses": "late"},
    });
    let _: WorkflowRun = s.create(workflow_run("late-run", jobs)).await;
    let updated = json!({"spec": {"jobs": {"apply": output_job("printf 'result=updated\\n' > \"$KRUNTIME_OUTPUTS\"")}}});
    s.ns.api::<Workflow>()
        .patch("late", &PatchParams::default(), &Patch::Merge(updated))
        .await
        .expect("update the Workflow before the call is ready");

    let run = s.until_phase("late-run", WorkflowPhase::Succeeded).await;
    assert_eq!(job(&run, "call").outputs["result"], "updated");
}
