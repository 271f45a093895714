//! Beyond the Go project's suite: a fan-in of three jobs whose outputs flow, a failed need
//! skipping its dependents (one Warning, the metrics), the definitions' Ready condition, a
//! WorkflowRun the Go controller started finishing here, `explain workflowrun/NAME`, and
//! `workflow trigger --wait`.

use super::*;

/// Beyond the Go suite: three jobs with a fan-in, the outputs of two reaching the third.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
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
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
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
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
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
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
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
/// a waiting job waits for; `status` shows the same view of it.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
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

    // `status` shows the same view of every WorkflowRun that has not ended.
    let out = support::kruntimes()
        .args(["status", "-n", &s.ns.name, "-o", "json"])
        .output()
        .expect("run status");
    let status: serde_json::Value = serde_json::from_str(&support::ok(&out, "status")).unwrap();
    assert_eq!(
        status["workflowRuns"].as_array().unwrap().len(),
        1,
        "{status}"
    );
    assert_eq!(status["workflowRuns"][0], report, "explain's view");
    let out = support::kruntimes()
        .args(["status", "-n", &s.ns.name])
        .output()
        .expect("run status");
    let table = support::ok(&out, "status");
    assert!(table.contains("WorkflowRuns (1 not ended)"), "{table}");
    assert!(table.contains(run.as_str()), "{table}");
}

/// `workflow trigger --wait` follows the jobs and exits with the outcome: 0 when the
/// WorkflowRun Succeeded, non-zero naming the phase and the message when it did not; a missing
/// input is refused before anything is created.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
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

/// `workflow cancel NAME --wait` asks a running WorkflowRun to cancel, its running step's Run
/// is cancelled, and it returns once the WorkflowRun ended Cancelled; asked again, it says the
/// run has ended; a name that does not exist fails naming it, and the others are still asked.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_cancel_cancels_a_running_workflow_run_and_waits_for_its_end() {
    let s = Scenario::start("wf-cancel-cli").await;
    let jobs = json!({"j": {"runs-on": "bash", "steps": [{"name": "long", "run": "sleep 60"}]}});
    let _: WorkflowRun = s.create(workflow_run("stopped", jobs)).await;
    let run = s
        .until("stopped", "the step's Run", |run| {
            let name = job_of(run, "j")?.steps[0].run_name.clone();
            (!name.is_empty()).then_some(name)
        })
        .await;
    let cancel = |names: &[&str]| {
        support::kruntimes()
            .args(["workflow", "cancel"])
            .args(names)
            .args(["--wait", "--timeout", "60s", "-n", &s.ns.name])
            .output()
            .expect("run workflow cancel")
    };
    let out = cancel(&["workflowrun/stopped"]);
    let stdout = support::ok(&out, "workflow cancel");
    assert_eq!(
        stdout,
        "workflowrun.kruntimes.io/stopped cancel requested\nworkflowrun.kruntimes.io/stopped Cancelled\n"
    );
    let step = s.ns.api::<Run>().get(&run).await.unwrap();
    assert!(step.spec.cancel_requested, "run/{run} asked to cancel");
    assert_eq!(
        s.ns.api::<WorkflowRun>()
            .get("stopped")
            .await
            .unwrap()
            .status
            .unwrap()
            .phase,
        WorkflowPhase::Cancelled
    );

    let again = cancel(&["nowhere", "stopped"]);
    let stdout = String::from_utf8_lossy(&again.stdout);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        !again.status.success(),
        "a missing WorkflowRun fails the command"
    );
    assert!(
        stderr.contains(&format!(
            "workflowrun/nowhere not found in namespace {}",
            s.ns.name
        )),
        "{stderr}"
    );
    assert!(
        stdout.contains(
            "workflowrun.kruntimes.io/stopped already ended Cancelled; nothing to cancel"
        ),
        "{stdout}"
    );
}

/// A step's Run deleted while it runs fails its step and the WorkflowRun, with why, instead of
/// leaving it Running for good.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steps_run_deleted_while_it_runs_fails_the_workflow_run() {
    let s = Scenario::start("wf-run-deleted").await;
    let jobs = json!({"j": {"runs-on": "bash", "steps": [{"name": "long", "run": "sleep 60"}]}});
    let _: WorkflowRun = s.create(workflow_run("deleted", jobs)).await;
    let run = s
        .until("deleted", "the step's Run", |run| {
            let name = job_of(run, "j")?.steps[0].run_name.clone();
            (!name.is_empty()).then_some(name)
        })
        .await;
    s.ns.api::<Run>()
        .delete(&run, &Default::default())
        .await
        .expect("delete the step's Run");

    let ended = s.until_phase("deleted", WorkflowPhase::Failed).await;
    assert_eq!(job(&ended, "j").steps[0].phase, StepPhase::Failed);
    let message = ended.status.unwrap().message;
    assert!(
        message.contains(&format!("the Run {run} of step \"long\"")),
        "{message}"
    );
    assert!(message.contains("was deleted before it ended"), "{message}");
}
