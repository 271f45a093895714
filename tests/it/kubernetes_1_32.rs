//! kruntimes on the oldest Kubernetes it installs on: a control plane whose kube-apiserver is
//! v1.32.13 (`tests/controlplane/oldest.sh`), which serves no MutatingAdmissionPolicy. `deploy/`
//! applies and its mutating policy's kustomization is refused; `install` applies
//! everything else and says what the missing policy costs; a Runtime's Runs are placed,
//! executed and explained with no overcommit at any Run event; `uninstall` removes it all.
//! Before them the Helm chart installs, says the same, and uninstalls. Every other suite proves the same on v1.36.3.
//!
//! One test, in phases: each phase writes the cluster-scoped objects the next one reads.

use testkit as support;

use std::collections::HashMap;
use std::process::{Command, Output};
use std::time::Duration;

use kube::ResourceExt as _;
use kube::api::{Api, PostParams};

use kruntimes::api::{ANNOTATION_SUBMITTED_BY, Resources, Run, RunPhase};
use kruntimes::testing::{run, runtime};
use support::world::{Create, OvercommitWatch, RuntimedProcess, SchedulerProcess, TestNs};

fn output(cmd: &mut Command) -> (Output, String, String) {
    let out = cmd.output().expect("run the command");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

fn repo(path: &str) -> String {
    format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))
}

/// What `install` and `uninstall` print for the mutating policy and for its binding.
const MUTATING: &str = "mutatingadmissionpolicy";

#[testkit::test]
async fn kustomize_install_runs_uninstall_and_helm_on_kubernetes_1_32() {
    support::use_oldest_kubernetes();
    let cp = support::control_plane();
    assert_eq!(cp.version, support::OLDEST_KUBERNETES);

    // First the chart, which Helm uninstalls at once: `uninstall` deletes the scheduler's
    // objects in the foreground, which only a garbage collector (kube-controller-manager's,
    // not on this control plane) completes.
    helm().await;

    // kustomize: deploy/ applies; the mutating policy's own kustomization (for 1.36) is
    // refused by this server, by kind.
    for dir in ["deploy/crds", "deploy"] {
        let (out, _, stderr) = output(support::kubectl().args(["apply", "-k", &repo(dir)]));
        assert!(out.status.success(), "kubectl apply -k {dir}/: {stderr}");
    }
    let (out, _, stderr) =
        output(support::kubectl().args(["apply", "-k", &repo("deploy/submitter-mutation")]));
    assert!(
        !out.status.success() && stderr.contains("MutatingAdmissionPolicy"),
        "kubectl apply -k deploy/submitter-mutation/ on Kubernetes 1.32 was not refused for its kind: {stderr}"
    );

    // install applies everything else (over what kustomize applied) and says what is lost.
    let (out, stdout, stderr) = output(support::kruntimes().args([
        "install",
        "--yes",
        "--wait=false",
        "--timeout",
        "120s",
    ]));
    assert!(out.status.success(), "install on Kubernetes 1.32: {stderr}");
    for part in [
        "v1.32.13, which serves no MutatingAdmissionPolicy",
        "the mutating policy kubectl-kruntimes-submitter is left out",
        "kruntimes.io/fair-share-label",
    ] {
        assert!(stderr.contains(part), "{part}: {stderr}");
    }
    for object in [
        "validatingadmissionpolicy.admissionregistration.k8s.io/kubectl-kruntimes-submitter",
        "validatingadmissionpolicy.admissionregistration.k8s.io/kubectl-kruntimes-runtimed",
        "validatingadmissionpolicy.admissionregistration.k8s.io/kubectl-kruntimes-run",
        "deployment.apps/kubectl-kruntimes-scheduler",
    ] {
        assert!(stdout.contains(object), "{object}: {stdout}");
    }
    assert!(!stdout.contains(MUTATING), "{stdout}");

    smoke().await;

    let (out, stdout, stderr) = output(support::kruntimes().args([
        "uninstall",
        "--yes",
        "--delete-crds",
        "--timeout",
        "120s",
    ]));
    assert!(
        out.status.success(),
        "uninstall on Kubernetes 1.32: {stderr}"
    );
    assert!(
        stdout.contains("deployment.apps/kubectl-kruntimes-scheduler deleted")
            && stdout.contains(
                "validatingadmissionpolicy.admissionregistration.k8s.io/kubectl-kruntimes-submitter deleted"
            )
            && !stdout.contains(MUTATING),
        "{stdout}"
    );
}

/// A Runtime, Runs placed and executed with no overcommit at any Run event, one that cannot
/// fit explained by the scheduler's plugins, no submitter annotation written, and a forged one
/// refused.
async fn smoke() {
    let ns = TestNs::new("compat").await;
    runtime("sh")
        .replicas(1)
        .capacity(&[("runs", 2)])
        .create(&ns)
        .await;
    let _scheduler = SchedulerProcess::start(&ns.name, 2, None, "compat").await;
    let pod = ns.runtime_pods("sh", 1).await.remove(0);
    ns.set_ready(&pod.name_any(), true).await;
    let heartbeat = ["--heartbeat-interval", "1s", "--heartbeat-duration", "10s"];
    let _runtimed = RuntimedProcess::start(&pod, &heartbeat);
    let watch = OvercommitWatch::start(
        &ns,
        HashMap::from([(pod.name_any(), Resources::from_iter([("runs", 2)]))]),
    )
    .await;

    for i in 0..6 {
        run(&format!("task-{i}"))
            .runtime("sh")
            .task(&["sh", "-c", "echo hi"])
            .create(&ns)
            .await;
    }
    run("too-big")
        .runtime("sh")
        .requests(&[("runs", 3)])
        .task(&["true"])
        .create(&ns)
        .await;
    let runs = ns
        .wait_runs(Duration::from_secs(90), "six Runs Succeeded", |runs| {
            let ended = runs
                .iter()
                .filter(|r| r.name_any().starts_with("task-") && r.phase() == RunPhase::Succeeded)
                .count();
            (ended == 6).then(|| runs.to_vec())
        })
        .await;
    let events = watch.finish().await;
    for r in &runs {
        assert_eq!(
            r.annotations().get(ANNOTATION_SUBMITTED_BY),
            None,
            "{}: no mutating policy writes it on 1.32",
            r.name_any()
        );
    }
    let too_big = runs.iter().find(|r| r.name_any() == "too-big").unwrap();
    assert_eq!(too_big.phase(), RunPhase::Pending);

    let (out, stdout, stderr) =
        output(support::kruntimes().args(["explain", "run/too-big", "-n", &ns.name]));
    assert!(out.status.success(), "explain: {stderr}");
    assert!(
        stdout.contains("0/1 Runtime Pods are available: 1 Insufficient runs"),
        "{stdout}"
    );

    // The submitter's validating policy holds without the mutating one.
    let mut forged: Run = run("forged")
        .runtime("sh")
        .submitted_by("someone-else")
        .task(&["true"])
        .build();
    forged.metadata.namespace = Some(ns.name.clone());
    let refused = Api::<Run>::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &forged)
        .await
        .expect_err("a Run naming another submitter was admitted");
    assert!(
        refused.to_string().contains("kubectl-kruntimes-submitter"),
        "{refused}"
    );
    // Only the scheduler's own account names another submitter, on what a WorkflowRun
    // controls: the workflow controller's Runs carry their WorkflowRun's.
    let owned = |name: &str| {
        let mut owned = forged.clone();
        owned.metadata.name = Some(name.into());
        owned.metadata.owner_references = Some(vec![
            serde_json::from_value(serde_json::json!({
                "apiVersion": "kruntimes.io/v1alpha1", "kind": "WorkflowRun", "name": "wf",
                "uid": "00000000-0000-0000-0000-000000000001", "controller": true,
            }))
            .unwrap(),
        ]);
        owned
    };
    let refused = Api::<Run>::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &owned("owned-by-admin"))
        .await
        .expect_err("a person named another submitter on a WorkflowRun's Run");
    assert!(
        refused.to_string().contains("kubectl-kruntimes-submitter"),
        "{refused}"
    );
    let dir = tempfile::tempdir().unwrap();
    let scheduler =
        support::client_for(&support::tokens::scheduler_kubeconfig(dir.path()).await).await;
    let delegated = Api::<Run>::namespaced(scheduler.clone(), &ns.name)
        .create(&PostParams::default(), &owned("owned-by-scheduler"))
        .await
        .expect("the scheduler's account delegates a WorkflowRun's submitter");
    assert_eq!(
        delegated
            .annotations()
            .get(ANNOTATION_SUBMITTED_BY)
            .map(String::as_str),
        Some("someone-else")
    );
    // A scheduler the policy does not trust to delegate (this one runs as the admin): the
    // WorkflowRun's step Run is made without the submitter rather than refused for ever.
    let account = "system:serviceaccount:kubectl-kruntimes:kubectl-kruntimes-scheduler";
    let workflow_run: kruntimes::api::WorkflowRun = serde_json::from_value(serde_json::json!({
        "apiVersion": "kruntimes.io/v1alpha1", "kind": "WorkflowRun",
        "metadata": {"name": "wf", "annotations": {ANNOTATION_SUBMITTED_BY: account}},
        "spec": {"jobs": {"j": {"runs-on": "sh", "steps": [{"name": "s", "run": "true"}]}}},
    }))
    .unwrap();
    Api::<kruntimes::api::WorkflowRun>::namespaced(scheduler, &ns.name)
        .create(&PostParams::default(), &workflow_run)
        .await
        .expect("the scheduler's account makes a WorkflowRun it submits");
    let step = ns
        .wait_runs(
            Duration::from_secs(60),
            "the WorkflowRun's step Run",
            |runs| {
                runs.iter()
                    .find(|r| r.labels().contains_key(kruntimes::api::LABEL_WORKFLOW_STEP))
                    .cloned()
            },
        )
        .await;
    assert_eq!(step.annotations().get(ANNOTATION_SUBMITTED_BY), None);
    eprintln!("kubernetes 1.32: 6 Runs succeeded; {events} Run events checked for overcommit");
}

/// The chart on a server without MutatingAdmissionPolicy: installs, leaves the mutating policy
/// out with the note, and admits Runs.
async fn helm() {
    let cp = support::control_plane();
    let chart = support::helm::chart();
    let notes = support::helm::helm(
        &[
            "install",
            "r1",
            chart.to_str().unwrap(),
            "--namespace",
            "kruntimes-helm",
            "--create-namespace",
        ],
        Some(&cp.kubeconfig),
    );
    assert!(
        notes.contains("serves no MutatingAdmissionPolicy")
            && notes.contains("kruntimes.io/fair-share-label"),
        "{notes}"
    );
    let manifest = support::helm::helm(
        &["get", "manifest", "r1", "--namespace", "kruntimes-helm"],
        Some(&cp.kubeconfig),
    );
    assert!(
        !manifest.contains("kind: MutatingAdmissionPolicy"),
        "{manifest}"
    );
    assert!(
        manifest.contains("kind: ValidatingAdmissionPolicy"),
        "{manifest}"
    );

    // The chart's CRDs (crds/) are served: a Run is admitted.
    let ns = support::namespace(&support::client().await, "compat-helm").await;
    let (out, _, stderr) = output(
        support::kubectl()
            .args(["create", "--dry-run=server", "-n", &ns, "-f"])
            .arg(repo("tests/fixtures/run.yaml")),
    );
    assert!(out.status.success(), "a Run under the chart: {stderr}");
    support::helm::helm(
        &["uninstall", "r1", "--namespace", "kruntimes-helm"],
        Some(&cp.kubeconfig),
    );
}
