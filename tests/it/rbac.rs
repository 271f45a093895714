//! The shipped RBAC is enough: `scheduler run` with a real service-account token of
//! `kubectl-kruntimes-scheduler` (deploy/scheduler.yaml) elects itself leader, creates Runtime
//! Pods, schedules a Run, runs a WorkflowRun (an Action, a reusable call), and makes runtimed's service account for the Runtime (bound to the
//! ClusterRole of deploy/crds/runtimed-role.yaml); `runtimed` with a token of that account bound to
//! its Pod, as the kubelet mounts it, heartbeats, claims and completes it under the admission
//! policy that `install` applies; another Runtime's Pod cannot write that Run. And people: the user
//! ClusterRoles, aggregated into the built-in view and edit, let editors create Runs and
//! viewers explain them, and nobody but runtimed and the scheduler write their status.

use testkit as support;

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use kruntimes::api::{Run, RunPhase, RunStatus, Runtime};
use kruntimes::testing::{pod, run, runtime};
use support::policy::*;
use support::world::{self, Create, RuntimedProcess, SchedulerProcess, TestNs, create_in};
use support::{roles, tokens};

const GPU: &str = "example.com/gpu";

#[testkit::test]
async fn the_scheduler_and_runtimed_work_with_only_the_shipped_rbac() {
    let ns = TestNs::new("rbac").await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = tokens::scheduler_kubeconfig(dir.path()).await;

    // Nothing applied in the namespace and no account named: the scheduler makes runtimed's.
    let python = runtime("python").capacity(&[("runs", 2), (GPU, 1)]).build();
    create_in(&ns, python).await;

    let system = Some("kubectl-kruntimes");
    let _scheduler = SchedulerProcess::start_as(&kubeconfig, &ns.name, 2, system, "rbac").await;
    let pod = ns.runtime_pods("python", 1).await.remove(0);
    assert_eq!(
        pod.annotations()["kruntimes.io/capacity.example.com_gpu"],
        "1"
    );
    let account = tokens::account_of(&pod);
    assert_eq!(account, "kubectl-kruntimes-runtimed-python");
    let runtime_uid = ns.api::<Runtime>().get("python").await.unwrap().uid();
    let made = ns.api::<ServiceAccount>().get(&account).await.unwrap();
    assert_eq!(made.owner_references()[0].uid, runtime_uid.clone().unwrap());
    let binding = ns.api::<RoleBinding>().get(&account).await.unwrap();
    assert_eq!(binding.owner_references()[0].uid, runtime_uid.unwrap());
    assert_eq!(
        (
            binding.role_ref.kind.as_str(),
            binding.role_ref.name.as_str()
        ),
        ("ClusterRole", "kubectl-kruntimes-runtimed")
    );
    // Its NetworkPolicy: ingress to runtimed's probe and API ports only (the template declares
    // none).
    let policy = ns
        .api::<NetworkPolicy>()
        .get("kubectl-kruntimes-python")
        .await
        .unwrap();
    assert_eq!(policy.owner_references()[0].name, "python");
    let spec = policy.spec.unwrap();
    assert_eq!(
        spec.policy_types.as_deref(),
        Some(&["Ingress".to_string()][..])
    );
    let ingress = spec.ingress.unwrap();
    assert_eq!(ingress.len(), 1, "one rule: {ingress:?}");
    let ports: Vec<_> = ingress[0]
        .ports
        .iter()
        .flatten()
        .filter_map(|p| p.port.clone())
        .collect();
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    assert_eq!(
        ports,
        [
            IntOrString::Int(kruntimes::runtime::pod::PROBE_PORT),
            IntOrString::Int(kruntimes::runtime::pod::API_PORT)
        ]
    );
    ns.set_ready(&pod.name_any(), true).await;
    let token = tokens::pod_bound_token(&ns.client, &ns.name, &account, &pod).await;
    let runtimed_kubeconfig = tokens::token_kubeconfig(dir.path(), "runtimed", &token, &ns.name);
    // No heartbeat written by the test: runtimed's own Lease must make the Pod available.
    let api_port = support::free_port();
    let api_bind = format!("--api-bind-address=127.0.0.1:{api_port}");
    let flags = ["--heartbeat-interval", "1s", &api_bind];
    let runtimed = RuntimedProcess::start_as(&runtimed_kubeconfig, &pod, &flags);
    run("r").requests(&[(GPU, 1)]).create(&ns).await;
    let runs = ns
        .wait_runs(Duration::from_secs(30), "r succeeded", |runs| {
            (world::phase_of(runs, "r") == Some(RunPhase::Succeeded)).then(|| runs.to_vec())
        })
        .await;
    // Its API checks the gateway's token with a TokenReview, which the shipped RBAC grants
    // its account.
    let api = world::RuntimedApi {
        port: api_port,
        pod_uid: pod.uid().unwrap(),
    };
    let (code, body) = api.get("/logs/r").await;
    assert_eq!(code, 200, "{body}\n{}", runtimed.log_tail());
    workflows_run_with_only_the_shipped_rbac(&ns).await;
    drop(runtimed);

    // A second Runtime's Pod, with its own account, cannot write the first one's Run.
    let other = runtime("other").capacity(&[("runs", 1)]).build();
    create_in(&ns, other).await;
    let other_pod = ns.runtime_pods("other", 1).await.remove(0);
    let other_account = tokens::account_of(&other_pod);
    assert_eq!(other_account, "kubectl-kruntimes-runtimed-other");
    let other_token =
        tokens::pod_bound_token(&ns.client, &ns.name, &other_account, &other_pod).await;
    let as_other = support::client_for(&tokens::token_kubeconfig(
        dir.path(),
        "other",
        &other_token,
        &ns.name,
    ))
    .await;
    await_enforced(&ns.name, &[&as_other]).await;
    let mut rewritten = runs[0].clone();
    rewritten.status.as_mut().unwrap().phase = Some(RunPhase::Failed);
    assert_refused(
        Api::<Run>::namespaced(as_other, &ns.name)
            .replace_status("r", &PostParams::default(), &rewritten)
            .await,
        &format!(
            "may update only Runs assigned to its Pod: Run {}/r has status.assignedPod/assignedPodUID {}",
            ns.name,
            pod.name_any()
        ),
    );
    assert_eq!(
        world::phase_of(&[ns.get_run("r").await], "r"),
        Some(RunPhase::Succeeded)
    );
    let status = runs[0].status.as_ref().unwrap();
    assert_eq!(
        status.assigned_pod.as_deref(),
        Some(pod.name_any().as_str())
    );
    assert_eq!(status.exit_code, Some(0));
    let runtime = ns.api::<Runtime>().get("python").await.unwrap();
    let status = runtime.status.unwrap();
    assert_eq!((status.replicas, status.ready_replicas), (1, 1));
    // The start-up check of the admission policy is allowed, for that one object only.
    for (object, allowed) in [
        (
            "validatingadmissionpolicies/kubectl-kruntimes-runtimed",
            "yes",
        ),
        (
            "validatingadmissionpolicybindings/kubectl-kruntimes-runtimed",
            "yes",
        ),
        ("validatingadmissionpolicies/other", "no"),
    ] {
        let out = support::kubectl()
            .args(["auth", "can-i", "get", object, "--as"])
            .arg("system:serviceaccount:kubectl-kruntimes:kubectl-kruntimes-scheduler")
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            allowed,
            "get {object}"
        );
    }
}

// People: the user ClusterRoles, aggregated into the built-in view and edit.

#[testkit::test]
async fn people_who_can_edit_create_runs_viewers_explain_and_nobody_writes_status() {
    let ns = TestNs::new("policy-people").await;
    // What kube-controller-manager would do (there is none here): fill view/edit/admin.
    roles::aggregate_cluster_roles(&ns.client).await;
    let dir = tempfile::tempdir().unwrap();
    for (user, role) in [("alice", "edit"), ("bob", "view")] {
        let binding: RoleBinding = serde_json::from_value(json!({
            "metadata": {"name": format!("{user}-{role}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
        }))
        .unwrap();
        create_in(&ns, binding).await;
    }
    let alice_kubeconfig = tokens::user_kubeconfig(dir.path(), "alice", &ns.name);
    let bob_kubeconfig = tokens::user_kubeconfig(dir.path(), "bob", &ns.name);
    let alice = support::client_for(&alice_kubeconfig).await;
    let bob = support::client_for(&bob_kubeconfig).await;
    for (who, client) in [("alice", &alice), ("bob", &bob)] {
        let runs: Api<Run> = Api::namespaced(client.clone(), &ns.name);
        await_allowed(&format!("{who} listing Runs"), async || {
            runs.list(&Default::default()).await
        })
        .await;
    }

    // alice (edit) creates a Runtime and a Run and reads them back.
    let python = runtime("python").replicas(0).capacity(&[("runs", 4)]);
    Api::<Runtime>::namespaced(alice.clone(), &ns.name)
        .create(&PostParams::default(), &body(python.build(), &ns))
        .await
        .unwrap();
    let train = Api::<Run>::namespaced(alice.clone(), &ns.name)
        .create(&PostParams::default(), &body(run("train").build(), &ns))
        .await
        .unwrap();
    Api::<Runtime>::namespaced(alice.clone(), &ns.name)
        .get("python")
        .await
        .unwrap();
    // A Runtime Pod with a heartbeat, as the scheduler and runtimed would make them.
    pod("python-0").capacity(&[("runs", 4)]).create(&ns).await;

    // Both can explain it.
    for (who, kubeconfig) in [("alice", &alice_kubeconfig), ("bob", &bob_kubeconfig)] {
        let out = Command::new(support::binary())
            .args(["explain", "run/train"])
            .env("KUBECONFIG", kubeconfig)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{who}: explain failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.starts_with("Fits: would be placed on python-0"),
            "{who}: {stdout}"
        );
    }

    // bob (view) cannot create a Run.
    let other = body(run("other").build(), &ns);
    assert_forbidden_by_rbac(
        Api::<Run>::namespaced(bob.clone(), &ns.name)
            .create(&PostParams::default(), &other)
            .await,
        "User \"bob\" cannot create resource \"runs\"",
    );
    // Neither writes runs/status: no placing or finishing a Run by hand.
    let before = ns.get_run("train").await;
    for (who, client) in [("alice", &alice), ("bob", &bob)] {
        let mut placed = train.clone();
        placed.metadata.resource_version = before.resource_version();
        placed.status = Some(RunStatus {
            phase: Some(RunPhase::Succeeded),
            ..Default::default()
        });
        assert_forbidden_by_rbac(
            Api::<Run>::namespaced(client.clone(), &ns.name)
                .replace_status("train", &PostParams::default(), &placed)
                .await,
            &format!("User \"{who}\" cannot update resource \"runs/status\""),
        );
        assert_forbidden_by_rbac(
            Api::<Run>::namespaced(client.clone(), &ns.name)
                .patch_status(
                    "train",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
                )
                .await,
            &format!("User \"{who}\" cannot patch resource \"runs/status\""),
        );
    }
    let after = ns.get_run("train").await;
    assert_eq!(after.resource_version(), before.resource_version());
}

/// How the API server words a refusal by the scheduler's own policy (deploy/scheduler.yaml).
const SCHEDULER_DENIED: &str = "ValidatingAdmissionPolicy 'kubectl-kruntimes-scheduler' with binding 'kubectl-kruntimes-scheduler' denied request: ";

fn assert_scheduler_refused<T: std::fmt::Debug>(result: kube::Result<T>, says: &str) {
    match result {
        Err(kube::Error::Api(s)) => {
            assert!(
                s.message.contains(SCHEDULER_DENIED),
                "not refused by the scheduler's policy: {}",
                s.message
            );
            assert!(
                s.message.contains(says),
                "the refusal does not say {says:?}: {}",
                s.message
            );
            assert_eq!(s.code, 403);
        }
        other => panic!("expected the scheduler's policy to refuse ({says:?}), got {other:?}"),
    }
}

/// A Pod as the Runtime controller makes it for Runtime `runtime` (controller reference, the
/// Runtime's label, a runtimed account), before `change` edits it.
fn runtime_pod(
    name: &str,
    runtime: &str,
    change: impl FnOnce(&mut serde_json::Value),
) -> k8s_openapi::api::core::v1::Pod {
    let mut pod = json!({
        "metadata": {
            "name": name,
            "labels": {"kruntimes.io/runtime": runtime, "team": "a"},
            "annotations": {"note": "kept"},
            "ownerReferences": [{
                "apiVersion": "kruntimes.io/v1alpha1", "kind": "Runtime", "name": runtime,
                "uid": "00000000-0000-0000-0000-000000000001", "controller": true
            }]
        },
        "spec": {
            "serviceAccountName": format!("kubectl-kruntimes-runtimed-{runtime}"),
            "containers": [{"name": "runtime", "image": "busybox:1"}]
        }
    });
    change(&mut pod);
    serde_json::from_value(pod).unwrap()
}

/// The scheduler's RBAC lets it create, patch and delete Pods in every namespace; its admission
/// policy holds its token to Runtime Pods: only Pods a Runtime controls, with that Runtime's
/// label and a runtimed account, outside the system namespaces; changes only to kruntimes.io/
/// labels and annotations; deletes only of Runtime Pods. The same Pods written by the admin are
/// not the policy's business.
#[testkit::test]
async fn the_schedulers_token_creates_changes_and_deletes_only_runtime_pods() {
    use k8s_openapi::api::core::v1::Pod;
    let ns = TestNs::new("rbac-sched-pods").await;
    let dir = tempfile::tempdir().unwrap();
    let scheduler = support::client_for(&tokens::scheduler_kubeconfig(dir.path()).await).await;
    let pods: Api<Pod> = Api::namespaced(scheduler.clone(), &ns.name);
    let params = PostParams::default();

    // The policy takes effect a moment after it is applied.
    let orphan = runtime_pod("orphan", "python", |p| {
        p["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("ownerReferences");
    });
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    world::eventually(
        WAIT,
        "the scheduler's policy to be enforced",
        async || match pods.create(&dry_run, &orphan).await {
            Err(kube::Error::Api(s)) if s.message.contains(SCHEDULER_DENIED) => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;

    // What the Runtime controller makes is allowed.
    pods.create(&params, &runtime_pod("good", "python", |_| {}))
        .await
        .unwrap();

    let controlled_by_runtime = "whose controller is a kruntimes.io Runtime";
    assert_scheduler_refused(pods.create(&params, &orphan).await, controlled_by_runtime);
    let by_deployment = runtime_pod("by-rs", "python", |p| {
        p["metadata"]["ownerReferences"][0]["apiVersion"] = json!("apps/v1");
        p["metadata"]["ownerReferences"][0]["kind"] = json!("ReplicaSet");
    });
    assert_scheduler_refused(
        pods.create(&params, &by_deployment).await,
        controlled_by_runtime,
    );
    let other_label = runtime_pod("mislabelled", "python", |p| {
        p["metadata"]["labels"]["kruntimes.io/runtime"] = json!("other");
    });
    assert_scheduler_refused(
        pods.create(&params, &other_label).await,
        "label kruntimes.io/runtime",
    );
    for account in ["default", "admin-sa"] {
        let as_account = runtime_pod("other-account", "python", |p| {
            p["spec"]["serviceAccountName"] = json!(account);
        });
        assert_scheduler_refused(
            pods.create(&params, &as_account).await,
            &format!(
                "runs as a runtimed account (kubectl-kruntimes-runtimed or kubectl-kruntimes-runtimed-<name>, which the runtimed admission policy confines), not {account}"
            ),
        );
    }
    let in_system: Api<Pod> = Api::namespaced(scheduler.clone(), "kube-system");
    assert_scheduler_refused(
        in_system
            .create(&params, &runtime_pod("good", "python", |_| {}))
            .await,
        "may not create, change or delete Pods in namespace kube-system",
    );

    // Changes: kruntimes.io/ labels and annotations only.
    let patch = |body: serde_json::Value| {
        let pods = pods.clone();
        async move {
            pods.patch("good", &PatchParams::default(), &Patch::Merge(&body))
                .await
        }
    };
    patch(json!({"metadata": {"annotations": {"kruntimes.io/scale-down": "true"}, "labels": {"kruntimes.io/x": "y"}}}))
        .await
        .unwrap();
    let only_ours = "may change only the kruntimes.io/ labels and annotations";
    assert_scheduler_refused(
        patch(json!({"metadata": {"labels": {"team": "b"}}})).await,
        only_ours,
    );
    assert_scheduler_refused(
        patch(json!({"metadata": {"annotations": {"note": null}}})).await,
        only_ours,
    );
    assert_scheduler_refused(
        patch(json!({"spec": {"containers": [{"name": "runtime", "image": "evil:1"}]}})).await,
        "not its spec, owners or finalizers",
    );
    assert_scheduler_refused(
        patch(json!({"metadata": {"finalizers": ["example.com/hold"]}})).await,
        "not its spec, owners or finalizers",
    );
    assert_scheduler_refused(
        patch(json!({"metadata": {"labels": {"kruntimes.io/runtime": "other"}}})).await,
        "may not change which Runtime a Pod belongs to",
    );
    // Nothing of the refused changes stuck; the allowed one did.
    let kept = pods.get("good").await.unwrap();
    assert_eq!(
        (
            kept.labels()["team"].as_str(),
            kept.labels()["kruntimes.io/runtime"].as_str(),
            kept.annotations()["note"].as_str(),
            kept.annotations()["kruntimes.io/scale-down"].as_str(),
        ),
        ("a", "python", "kept", "true")
    );
    assert_eq!(
        kept.spec.unwrap().containers[0].image.as_deref(),
        Some("busybox:1")
    );

    // Deletes: a Runtime's Pod, and no other.
    let admin_pods: Api<Pod> = Api::namespaced(ns.client.clone(), &ns.name);
    admin_pods.create(&params, &orphan).await.unwrap();
    assert_scheduler_refused(
        pods.delete("orphan", &Default::default()).await,
        controlled_by_runtime,
    );
    assert!(admin_pods.get_opt("orphan").await.unwrap().is_some());
    pods.delete("good", &Default::default()).await.unwrap();
}

/// A WorkflowRun whose step calls an Action and whose second job calls a reusable Workflow
/// succeeds under the scheduler's shipped role (snapshots, Runs and child WorkflowRuns created,
/// statuses written), and the definitions report Ready.
async fn workflows_run_with_only_the_shipped_rbac(ns: &TestNs) {
    use kruntimes::api::{
        ANNOTATION_SUBMITTED_BY, Action, LABEL_WORKFLOW_RUN_UID, Workflow, WorkflowPhase,
        WorkflowRun,
    };
    use serde_json::json;
    let action: Action = serde_json::from_value(json!({
        "apiVersion": "kruntimes.io/v1alpha1", "kind": "Action", "metadata": {"name": "say"},
        "spec": {"steps": [{"name": "say", "run": "echo said"}]},
    }))
    .unwrap();
    let workflow: Workflow = serde_json::from_value(json!({
        "apiVersion": "kruntimes.io/v1alpha1", "kind": "Workflow", "metadata": {"name": "reused"},
        "spec": {"jobs": {"inner": {"runs-on": "python", "steps": [{"name": "s", "run": "true"}]}}},
    }))
    .unwrap();
    let run: WorkflowRun = serde_json::from_value(json!({
        "apiVersion": "kruntimes.io/v1alpha1", "kind": "WorkflowRun", "metadata": {"name": "wf"},
        "spec": {"jobs": {
            "first": {"runs-on": "python", "steps": [{"name": "call", "uses": "say"}]},
            "second": {"needs": ["first"], "uses": "reused"},
        }},
    }))
    .unwrap();
    let post = kube::api::PostParams::default();
    ns.api::<Action>().create(&post, &action).await.unwrap();
    ns.api::<Workflow>().create(&post, &workflow).await.unwrap();
    ns.api::<WorkflowRun>().create(&post, &run).await.unwrap();
    let runs = ns.api::<WorkflowRun>();
    let workflows = ns.api::<Workflow>();
    world::eventually(
        Duration::from_secs(60),
        "the WorkflowRun Succeeded, the Workflow Ready",
        async || {
            let run = runs.get("wf").await.map_err(|e| e.to_string())?;
            let workflow = workflows.get("reused").await.map_err(|e| e.to_string())?;
            let phase = run.status.as_ref().map(|s| s.phase);
            let ready = kruntimes::workflow::definitions::is_ready(&workflow);
            (phase == Some(WorkflowPhase::Succeeded) && ready)
                .then_some(())
                .ok_or(format!("{:?}; Workflow ready: {ready}", run.status))
        },
    )
    .await;
    // Every Run and nested WorkflowRun it made is its submitter's (fair sharing's group), as
    // the admission policies let only this account say.
    let submitter = |annotations: &std::collections::BTreeMap<String, String>| {
        annotations.get(ANNOTATION_SUBMITTED_BY).cloned()
    };
    let triggered_by = submitter(runs.get("wf").await.unwrap().annotations());
    assert!(
        triggered_by.is_some(),
        "the WorkflowRun's submitter is recorded"
    );
    let made = kube::api::ListParams::default().labels(LABEL_WORKFLOW_RUN_UID);
    let children = ns.runs().list(&made).await.unwrap().items;
    let nested = runs.list(&made).await.unwrap().items;
    assert_eq!(
        (children.len(), nested.len()),
        (2, 1),
        "the Action's step, the call's step; the call"
    );
    for (kind, name, annotations) in children
        .iter()
        .map(|r| ("Run", r.name_any(), r.annotations()))
        .chain(
            nested
                .iter()
                .map(|w| ("WorkflowRun", w.name_any(), w.annotations())),
        )
    {
        assert_eq!(submitter(annotations), triggered_by, "{kind} {name}");
    }
}
