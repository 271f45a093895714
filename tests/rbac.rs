//! The shipped RBAC is enough: `scheduler run` with a real service-account token of
//! `kubectl-kruntimes-scheduler` (deploy/scheduler.yaml) elects itself leader, creates Runtime Pods and
//! schedules a Run; `runtimed` with a token of `kubectl-kruntimes-runtimed`
//! (deploy/runtimed-rbac.yaml) bound to its Pod, as the kubelet mounts it, heartbeats, claims
//! and completes it under the admission policy that `install` applies.

mod support;

use std::time::Duration;

use kube::ResourceExt;

use kruntimes::api::{RunPhase, Runtime};
use kruntimes::testing::{run, runtime};
use support::tokens;
use support::world::{self, Create, RuntimedProcess, SchedulerProcess, TestNs, create_in};

const GPU: &str = "example.com/gpu";

#[tokio::test]
async fn the_scheduler_and_runtimed_work_with_only_the_shipped_rbac() {
    let ns = TestNs::new("rbac").await;
    let dir = tempfile::tempdir().unwrap();
    support::kubectl_apply("deploy/scheduler.yaml", None);
    let kubeconfig =
        service_account_kubeconfig(&dir, "kubectl-kruntimes-scheduler", "kubectl-kruntimes");

    support::kubectl_apply("deploy/runtimed-rbac.yaml", Some(&ns.name));
    let mut python = runtime("python").capacity(&[("runs", 2), (GPU, 1)]).build();
    let template = python.spec.template.spec.as_mut().expect("a Pod template");
    template.service_account_name = Some("kubectl-kruntimes-runtimed".into());
    create_in(&ns, python).await;

    let system = Some("kubectl-kruntimes");
    let _scheduler = SchedulerProcess::start_as(&kubeconfig, &ns.name, 2, system, "rbac").await;
    let pod = ns.runtime_pods("python", 1).await.remove(0);
    assert_eq!(
        pod.annotations()["kruntimes.io/capacity.example.com_gpu"],
        "1"
    );
    ns.set_ready(&pod.name_any(), true).await;
    let token =
        tokens::pod_bound_token(&ns.client, &ns.name, "kubectl-kruntimes-runtimed", &pod).await;
    let runtimed_kubeconfig = tokens::token_kubeconfig(dir.path(), "runtimed", &token, &ns.name);
    // No heartbeat written by the test: runtimed's own Lease must make the Pod available.
    let heartbeat = ["--heartbeat-interval", "1s"];
    let runtimed = RuntimedProcess::start_as(&runtimed_kubeconfig, &pod, &heartbeat);
    run("r").requests(&[(GPU, 1)]).create(&ns).await;
    let runs = ns
        .wait_runs(Duration::from_secs(30), "r succeeded", |runs| {
            (world::phase_of(runs, "r") == Some(RunPhase::Succeeded)).then(|| runs.to_vec())
        })
        .await;
    drop(runtimed);
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

/// A kubeconfig holding a real token of the service account `sa` in `ns` (TokenRequest).
fn service_account_kubeconfig(dir: &tempfile::TempDir, sa: &str, ns: &str) -> std::path::PathBuf {
    let out = support::kubectl()
        .args(["create", "token", sa, "-n", ns, "--duration", "1h"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl create token {sa}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cp = support::control_plane();
    let path = dir.path().join(sa);
    let token = String::from_utf8(out.stdout).unwrap();
    support::write_kubeconfig(&path, &cp.server, &cp.ca_pem, token.trim()).unwrap();
    path
}
