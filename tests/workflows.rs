//! Workflows on the real control plane, the Go kruntimes project's twelve Workflow end-to-end
//! tests ported with their assertions: `scheduler run` executes WorkflowRuns, each step a Run it
//! places on a Runtime `bash` whose Pod runs a real runtimed with the Go project's Bash runtime
//! server (built unchanged). Plus what the port adds: a fan-in of three jobs whose outputs flow,
//! a failed need skipping its dependents, and the definitions' Ready condition. What the CRDs
//! accept and refuse is `tests/upstream_api.rs`'s.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use kruntimes::api::{
    Action, JobPhase, LABEL_WORKFLOW_RUN_UID, Run, RunPhase, StepPhase, Workflow, WorkflowPhase,
    WorkflowRun,
};
use support::pool::HEARTBEAT;
use support::world::{RuntimeServerProcess, SchedulerProcess, TestNs, eventually};

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
    let object: K = serde_json::from_value(object).expect("a valid object");
    ns.api::<K>()
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create {}: {e}", object.name_any()))
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_reusable_workflows_execute() {
    let s = Scenario::start("wf-nested").await;
    let leaf = json!({
        "outputs": {"result": {"value": "${{ jobs.test.outputs.result }}"}},
        "jobs": {"test": {
            "runs-on": "bash",
            "outputs": {"result": "${{ steps.emit.outputs.result }}"},
            "steps": [{"name": "emit", "run": "printf 'result=nested-ok\\n' > \"$KRUNTIME_OUTPUTS\""}],
        }},
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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

/// Beyond the Go suite: three jobs with a fan-in, the outputs of two reaching the third.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_in_runs_after_both_its_needs_with_their_outputs() {
    let s = Scenario::start("wf-fan-in").await;
    let jobs = json!({
        "left": output_job("printf 'result=L\\n' > \"$KRUNTIME_OUTPUTS\""),
        "right": output_job("printf 'result=R\\n' > \"$KRUNTIME_OUTPUTS\""),
        "join": {
            "runs-on": "bash",
            "needs": ["left", "right"],
            "outputs": {"result": "${{ steps.emit.outputs.result }}"},
            "steps": [{
                "name": "emit",
                "run": "printf 'result=%s+%s\\n' \"$L\" \"$R\" > \"$KRUNTIME_OUTPUTS\"",
                "env": {"L": "${{ jobs.left.outputs.result }}", "R": "${{ jobs.right.outputs.result }}"},
            }],
        },
    });
    let _: WorkflowRun = s.create(workflow_run("fan-in", jobs)).await;

    let run = s.until_phase("fan-in", WorkflowPhase::Succeeded).await;
    assert_eq!(job(&run, "join").outputs["result"], "L+R");
    assert_eq!(job(&run, "join").pre, ["left", "right"]);
    // The join's Run was created only after both of its needs' Runs had ended.
    let runs = s.child_runs(&run).await;
    let of = |job: &str| {
        runs.iter()
            .find(|r| {
                r.labels()
                    .get("kruntimes.io/workflow-job")
                    .map(String::as_str)
                    == Some(job)
            })
            .unwrap_or_else(|| panic!("the Run of job {job}"))
    };
    let join_created = of("join").metadata.creation_timestamp.clone().unwrap();
    for need in ["left", "right"] {
        let ended = of(need)
            .status
            .as_ref()
            .and_then(|s| s.completion_time.clone())
            .unwrap();
        assert!(
            ended.0 <= join_created.0,
            "job {need} ended {ended:?}, join's Run created {join_created:?}"
        );
    }
    assert_eq!(runs.len(), 3, "one Run per step");
}

/// Beyond the Go suite: a failed job skips what needs it, and the WorkflowRun fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_need_skips_its_dependents() {
    let s = Scenario::start("wf-skip").await;
    let jobs = json!({
        "a": {"runs-on": "bash", "steps": [{"name": "fail", "run": "exit 3"}]},
        "b": {"runs-on": "bash", "needs": ["a"], "steps": [{"name": "never", "run": "true"}]},
        "c": {"runs-on": "bash", "needs": ["b"], "steps": [{"name": "never", "run": "true"}]},
        "d": {"runs-on": "bash", "steps": [{"name": "ok", "run": "true"}]},
    });
    let _: WorkflowRun = s.create(workflow_run("skip", jobs)).await;

    let run = s.until_phase("skip", WorkflowPhase::Failed).await;
    let phases: BTreeMap<String, JobPhase> = ["a", "b", "c", "d"]
        .into_iter()
        .map(|j| (j.to_string(), job(&run, j).phase))
        .collect();
    let want: BTreeMap<String, JobPhase> = [
        ("a", JobPhase::Failed),
        ("b", JobPhase::Skipped),
        ("c", JobPhase::Skipped),
        ("d", JobPhase::Succeeded),
    ]
    .into_iter()
    .map(|(j, p)| (j.to_string(), p))
    .collect();
    assert_eq!(phases, want);
    assert_eq!(
        s.child_runs(&run).await.len(),
        2,
        "no Run for a skipped job"
    );
    let events = s.ns.events_of("skip").await;
    let reasons: Vec<(&str, &str)> = events
        .iter()
        .map(|(r, n, _)| (r.as_str(), n.as_str()))
        .collect();
    assert_eq!(
        reasons,
        [("WorkflowRunFailed", "job(s) failed: a")],
        "one Warning, written once"
    );
    let metrics = s.scheduler.metrics().await;
    assert!(
        metrics.contains("kruntimes_workflow_runs_finished_total{phase=\"Failed\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("kruntimes_workflow_step_runs_created_total 2"),
        "{metrics}"
    );
}

/// Workflow and Action definitions report Ready for their generation, as the Go project's do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn definitions_report_ready_for_their_generation() {
    let s = Scenario::start("wf-ready").await;
    let _: Workflow = s
        .create(workflow("w", json!({"jobs": {"j": output_job("true")}})))
        .await;
    let _: Action = s
        .create(action(
            "a",
            json!({"steps": [{"name": "s", "run": "true"}]}),
        ))
        .await;
    let workflows: Api<Workflow> = s.ns.api();
    let actions: Api<Action> = s.ns.api();
    eventually(PATIENCE, "both Ready", async || {
        let w = workflows.get("w").await.map_err(|e| e.to_string())?;
        let a = actions.get("a").await.map_err(|e| e.to_string())?;
        let ready = kruntimes::workflow::definitions::is_ready(&w)
            && kruntimes::workflow::definitions::is_ready(&a);
        ready
            .then_some(())
            .ok_or(format!("{:?} {:?}", w.status, a.status))
    })
    .await;
}

/// A WorkflowRun the Go kruntimes controller accepted and started runs on here: its snapshot,
/// status and first Run below are what that controller (cmd/controller at cad3923) wrote for
/// this WorkflowRun, recorded on this control plane before our scheduler took over (the names
/// that depend on the UID are the only change). Ours takes the Run it finds, creates the rest,
/// and the outputs flow through the Action.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_run_the_go_controller_started_finishes_here() {
    let ns = TestNs::new("wf-crossover").await;
    let action = action(
        "two",
        json!({
            "outputs": {"o": {"value": "${{ steps.second.outputs.r }}"}},
            "steps": [
                {"name": "first", "run": "sleep 1"},
                {"name": "second", "run": "printf 'r=ok\\n' > \"$KRUNTIME_OUTPUTS\""},
            ],
        }),
    );
    let jobs = json!({
        "a": {"runs-on": "bash", "steps": [
            {"name": "call", "uses": "two"},
            {"name": "after", "run": "test \"$O\" = ok", "env": {"O": "${{ steps.call.outputs.o }}"}},
        ]},
        "b": {"runs-on": "bash", "needs": ["a"], "steps": [{"name": "s", "run": "true"}]},
    });
    let _: Action = make(&ns, action).await;
    let wfr: WorkflowRun = make(&ns, workflow_run("x", jobs.clone())).await;
    let uid = wfr.uid().unwrap();
    let owner = json!([{"apiVersion": "kruntimes.io/v1alpha1", "kind": "WorkflowRun", "name": "x", "uid": uid, "controller": true, "blockOwnerDeletion": true}]);
    // The Go controller's snapshot: the accepted spec and the Action frozen for job a's step call.
    let _: ControllerRevision = make(&ns, json!({
        "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "x-snapshot-go", "labels": {LABEL_WORKFLOW_RUN_UID: uid}, "ownerReferences": owner},
        "revision": 1,
        "data": {
            "actions": {"a\u{0}call": {"name": "two", "spec": {
                "outputs": {"o": {"value": "${{ steps.second.outputs.r }}"}},
                "steps": [{"name": "first", "run": "sleep 1"}, {"name": "second", "run": "printf 'r=ok\\n' > \"$KRUNTIME_OUTPUTS\""}],
            }}},
            "spec": {"jobs": jobs},
        },
    }))
    .await;
    // Its first Run, for the Action's first step, as it created it (it was never placed: the Go
    // scheduler had stopped).
    let _: Run = make(
        &ns,
        json!({
            "apiVersion": "kruntimes.io/v1alpha1", "kind": "Run",
            "metadata": {"name": "x-226bcacbf7", "ownerReferences": owner, "labels": {
                "kruntimes.io/workflow-action-step": "first", "kruntimes.io/workflow-job": "a",
                "kruntimes.io/workflow-step": "call", LABEL_WORKFLOW_RUN_UID: uid,
            }},
            "spec": {"runtime": "bash", "source": {"inline": "sleep 1"}, "mode": {"task": {}}},
        }),
    )
    .await;
    let status = json!({"status": {
        "phase": "Running",
        "snapshotName": "x-snapshot-go",
        "jobs": {
            "a": {"phase": "Running", "steps": [
                {"name": "call", "phase": "Running", "actionSteps": [
                    {"name": "first", "phase": "Running", "runName": "x-226bcacbf7"},
                    {"name": "second", "phase": "Pending"},
                ]},
                {"name": "after", "phase": "Pending"},
            ]},
            "b": {"phase": "Waiting", "pre": ["a"], "steps": [{"name": "s", "phase": "Pending"}]},
        },
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "WorkflowRun accepted and initialized", "observedGeneration": 1, "lastTransitionTime": "2026-12-07T05:45:51Z"}],
    }});
    let runs: Api<WorkflowRun> = ns.api();
    runs.patch_status("x", &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("write the Go controller's status");

    let scheduler = SchedulerProcess::start(&ns.name, 4, None, "wf-crossover").await;
    let server = RuntimeServerProcess::start_bash().await;
    let mut args: Vec<&str> = HEARTBEAT.to_vec();
    args.extend(server.flag());
    let pool = support::pool::Pool::start(&ns, "bash", 1, &[("runs", 4)], &args).await;
    let s = Scenario {
        ns,
        scheduler,
        _server: server,
        _pool: pool,
    };
    let run = s.until_phase("x", WorkflowPhase::Succeeded).await;
    let call = &job(&run, "a").steps[0];
    assert_eq!(
        call.action_steps[0].run_name, "x-226bcacbf7",
        "the Go controller's Run kept"
    );
    assert_eq!(call.outputs["o"], "ok");
    assert_eq!(job(&run, "b").phase, JobPhase::Succeeded);
    let names: BTreeSet<String> = s
        .child_runs(&run)
        .await
        .iter()
        .map(|r| r.name_any())
        .collect();
    assert_eq!(names.len(), 4, "one Run per step, none twice: {names:?}");
    assert!(names.contains("x-226bcacbf7"));
}

/// `explain workflowrun/NAME` shows each job and the Run each step is, with the scheduler's
/// own verdict for a step whose Run waits (the same as `explain run/NAME` gives) and the needs
/// a waiting job waits for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_shows_each_steps_run_and_why_it_waits() {
    let s = Scenario::start("wf-explain").await;
    let jobs = json!({
        "build": {"runs-on": "gpu", "steps": [{"name": "compile", "run": "true"}]},
        "ship": {"runs-on": "bash", "needs": ["build"], "steps": [{"name": "push", "run": "true"}]},
    });
    let _: WorkflowRun = s.create(workflow_run("explained", jobs)).await;
    let run = s
        .until("explained", "the build step's Run", |run| {
            let name = job_of(run, "build")?.steps[0].run_name.clone();
            (!name.is_empty()).then_some(name)
        })
        .await;

    let explain = |args: &[&str]| {
        let out = support::kruntimes()
            .arg("explain")
            .args(args)
            .args(["-n", &s.ns.name, "-o", "json"])
            .output()
            .expect("run explain");
        serde_json::from_str::<serde_json::Value>(&support::ok(&out, "explain")).unwrap()
    };
    let report = explain(&["workflowrun/explained"]);
    let verdict = explain(&[&format!("run/{run}")])["verdict"].clone();
    let rows = report["rows"].as_array().unwrap();
    let build = rows.iter().find(|r| r["job"] == "build").unwrap();
    assert_eq!(build["run"], run.as_str());
    assert_eq!(build["runPhase"], "Pending");
    assert_eq!(build["why"], verdict, "the scheduler's own verdict");
    let ship = rows.iter().find(|r| r["job"] == "ship").unwrap();
    assert_eq!(ship["jobPhase"], "Waiting");
    assert_eq!(ship["why"], "needs build (Running)");

    let out = support::kruntimes()
        .args(["explain", "wfr", "explained", "-n", &s.ns.name])
        .output()
        .expect("run explain");
    let table = support::ok(&out, "explain");
    assert!(
        table.starts_with(&format!("WorkflowRun {}/explained: Running", s.ns.name)),
        "{table}"
    );
    assert!(table.contains("needs build (Running)"), "{table}");
}

/// `workflow trigger --wait` follows the jobs and exits with the outcome: 0 when the
/// WorkflowRun Succeeded, non-zero naming the phase and the message when it did not; a missing
/// input is refused before anything is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_wait_exits_with_the_workflow_runs_outcome() {
    let s = Scenario::start("wf-trigger-wait").await;
    let spec = json!({
        "inputs": {"code": {"required": true}},
        "jobs": {
            "first": {"runs-on": "bash", "steps": [{"name": "s", "run": "true"}]},
            "second": {"runs-on": "bash", "needs": ["first"], "steps": [{"name": "s", "run": "exit ${{ inputs.code }}"}]},
        },
    });
    let _: Workflow = s.create(workflow("exits", spec)).await;
    let trigger = |name: &str, args: &[&str]| {
        support::kruntimes()
            .args([
                "workflow", "trigger", "exits", "--name", name, "--wait", "-n", &s.ns.name,
            ])
            .args(args)
            .output()
            .expect("run workflow trigger")
    };

    let ok = trigger("passes", &["--set", "code=0"]);
    let stderr = String::from_utf8_lossy(&ok.stderr);
    assert!(ok.status.success(), "{stderr}");
    assert!(
        stderr.contains("job second: Succeeded"),
        "progress on stderr: {stderr}"
    );

    let failed = trigger("fails", &["--set", "code=3"]);
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(
        !failed.status.success(),
        "a failed WorkflowRun exits non-zero"
    );
    assert!(
        stderr.contains("workflowrun/fails ended Failed"),
        "{stderr}"
    );

    let missing = trigger("never", &[]);
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success());
    assert!(
        stderr.contains("missing required input \"code\""),
        "{stderr}"
    );
    let created = s.ns.api::<WorkflowRun>().get_opt("never").await.unwrap();
    assert!(created.is_none(), "nothing created for a refused trigger");
}
