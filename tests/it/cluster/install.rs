//! `install` and `uninstall` alone on the single-node cluster, after the chart's scenario (the
//! kustomize install is in place): `uninstall` removes that scheduler and keeps the CRDs, the
//! Runtime, every Run and runtimed's policy; `install` by itself (no foreground process, no
//! kubectl apply) deploys a scheduler that places and runs the Run created while none ran, and
//! new ones; `uninstall --delete-crds` leaves nothing of kruntimes: no CRD, no Runtime Pod, no
//! namespace `kubectl-kruntimes`, no policy. Last of the scenarios: it removes what they use.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;

use super::SYSTEM_NS;
use super::harness::Cluster;
use super::objects::{
    busybox, create_run, create_runtime, runtime_namespace, wait_phases, wait_runtime_ready,
};
use super::support::world::eventually;
use kruntimes::api::{LABEL_RUNTIME, RunPhase};

fn said(out: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub async fn install_alone_runs_runs_and_uninstall_keeps_or_deletes_them(cluster: &Cluster) {
    let ns = &runtime_namespace(cluster, "install").await;
    create_runtime(ns, "pool", 1, busybox(), &[("runs", 1)]).await;
    wait_runtime_ready(ns, "pool", 1).await;
    create_run(ns, "before", "pool", &[], "echo before").await;
    wait_phases(
        ns,
        &["before".into()],
        RunPhase::Succeeded,
        Duration::from_secs(90),
    )
    .await;

    let out = cluster.kruntimes(&["uninstall", "--yes"]);
    let (stdout, stderr) = said(&out);
    assert!(out.status.success(), "uninstall: {stderr}");
    for line in [
        "deployment.apps/kubectl-kruntimes-scheduler deleted",
        "namespace/kubectl-kruntimes deleted",
        "clusterrole.rbac.authorization.k8s.io/kubectl-kruntimes-submit deleted",
        "clusterrole.rbac.authorization.k8s.io/kubectl-kruntimes-runtime-admin deleted",
    ] {
        assert!(stdout.contains(line), "{line}: {stdout}");
    }
    cluster.kubectl(&[
        "wait",
        "--for=delete",
        &format!("namespace/{SYSTEM_NS}"),
        "--timeout=180s",
    ]);
    // Kept: the CRDs, the Runtime, the Run, runtimed's role and policy.
    cluster.kubectl(&["get", "crd", "runs.kruntimes.io", "runtimes.kruntimes.io"]);
    cluster.kubectl(&["-n", &ns.name, "get", "runtime/pool", "run/before"]);
    cluster.kubectl(&["get", "clusterrole", "kubectl-kruntimes-runtimed"]);
    cluster.kubectl(&[
        "get",
        "validatingadmissionpolicy,validatingadmissionpolicybinding",
        "kubectl-kruntimes-runtimed",
    ]);
    // No scheduler now, and status says so (no Lease: it went with the namespace).
    create_run(ns, "during", "pool", &[], "echo during").await;
    let out = cluster.kruntimes(&[
        "status",
        "-n",
        &ns.name,
        "-o",
        "jsonpath={.scheduler.state}",
    ]);
    let (state, stderr) = said(&out);
    assert!(out.status.success(), "status: {stderr}");
    assert!(state == "None" || state == "Expired", "status says {state}");

    let out = cluster.kruntimes(&["install", "--yes", "--timeout", "3m"]);
    let (stdout, stderr) = said(&out);
    assert!(out.status.success(), "install: {stdout}\n{stderr}");
    assert!(
        stdout.contains("deployment.apps/kubectl-kruntimes-scheduler created"),
        "{stdout}"
    );
    assert!(
        stdout.contains("the kruntimes scheduler is running"),
        "{stdout}"
    );
    create_run(ns, "after", "pool", &[], "echo after").await;
    wait_phases(
        ns,
        &["during".into(), "after".into()],
        RunPhase::Succeeded,
        Duration::from_secs(120),
    )
    .await;

    let out = cluster.kruntimes(&["uninstall", "--delete-crds", "--yes", "--timeout", "4m"]);
    let (stdout, stderr) = said(&out);
    assert!(
        out.status.success(),
        "uninstall --delete-crds: {stdout}\n{stderr}"
    );
    for crd in [
        "runs.kruntimes.io",
        "runtimes.kruntimes.io",
        "persistentworkspaces.kruntimes.io",
    ] {
        let gone = cluster.kubectl_raw(&["get", "crd", crd, "--ignore-not-found", "-o", "name"]);
        assert_eq!(gone.trim(), "", "{crd} is still there");
    }
    for (kind, name) in [
        ("validatingadmissionpolicy", "kubectl-kruntimes-runtimed"),
        ("validatingadmissionpolicy", "kubectl-kruntimes-run"),
        ("mutatingadmissionpolicy", "kubectl-kruntimes-submitter"),
        ("clusterrole", "kubectl-kruntimes-runtimed"),
        ("clusterrole", "kubectl-kruntimes-scheduler"),
    ] {
        let gone = cluster.kubectl_raw(&["get", kind, name, "--ignore-not-found", "-o", "name"]);
        assert_eq!(gone.trim(), "", "{kind} {name} is still there");
    }
    cluster.kubectl(&[
        "wait",
        "--for=delete",
        &format!("namespace/{SYSTEM_NS}"),
        "--timeout=180s",
    ]);
    // The Runtime went with its CRD, and its Pods with it (the garbage collector).
    let pods: kube::Api<Pod> = ns.api();
    eventually(
        Duration::from_secs(120),
        "the Runtime's Pods are gone",
        async || {
            let left = pods
                .list(&ListParams::default().labels(&format!("{LABEL_RUNTIME}=pool")))
                .await
                .map_err(|e| e.to_string())?;
            match left.items.len() {
                0 => Ok(()),
                n => Err(format!("{n} Pods left")),
            }
        },
    )
    .await;
    eprintln!(
        "install: uninstall kept the Runs; install alone ran 2 more; --delete-crds left nothing"
    );
}
