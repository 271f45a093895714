//! The Helm chart on the single-node cluster, after the kustomize install the other scenarios
//! use: that install removed with `kubectl delete -k deploy/` (a Run keeps running in its
//! Runtime's namespace), `helm install` runs Runs and passes `helm test`, `helm upgrade` to
//! a new image rolls the scheduler while Runs keep being created, finish and never overcommit,
//! and `helm uninstall` leaves the CRDs, the Runtime and every Run. After each uninstall a
//! Runtime Pod's own token still cannot write the status of a Run on another Pod: runtimed's
//! admission policy goes with runtimed's ClusterRole, never with the scheduler (fail closed).
//! The kustomize install is applied again at the end.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::ListParams;

use super::SYSTEM_NS;
use super::harness::{Cluster, repo};
use super::objects::{
    SCHEDULER_PODS, busybox, create_run, create_runtime, runtime_namespace, wait_phases,
    wait_runtime_ready,
};
use super::support::world::{OvercommitWatch, TestNs};
use kruntimes::api::RunPhase;
use kruntimes::api::resources::Resources;

const RELEASE: &str = "kruntimes";
const IMAGE: &str = "ghcr.io/kruntimes/kubectl-kruntimes:0.1.0";
/// The same image under a new tag: the release an upgrade moves to.
const NEXT_TAG: &str = "0.1.0-next";

pub async fn install_upgrade_uninstall(cluster: &Cluster) {
    let ns = &runtime_namespace(cluster, "helm").await;
    create_runtime(ns, "pool", 2, busybox(), &[("runs", 2)]).await;
    wait_runtime_ready(ns, "pool", 2).await;
    let watch =
        OvercommitWatch::start_for_runtime(ns, "pool", Resources::from_iter([("runs", 2)])).await;
    // Running across the move to Helm and the upgrade; its end is runtimed's to write.
    create_run(ns, "long", "pool", &[], "sleep 60").await;
    wait_phases(
        ns,
        &["long".into()],
        RunPhase::Running,
        Duration::from_secs(60),
    )
    .await;

    // Uninstalled as its README says; the Runtime's namespace, the Runtime and the Run stay.
    for dir in ["deploy/submitter-mutation", "deploy"] {
        cluster.kubectl(&[
            "delete",
            "-k",
            &repo().join(dir).to_string_lossy(),
            "--wait=true",
            "--timeout=180s",
        ]);
    }
    a_pod_token_stays_confined(cluster, ns, "long").await;
    let chart = repo().join("charts/kubectl-kruntimes");
    let chart = chart.to_string_lossy();
    cluster.helm(&[
        "install",
        RELEASE,
        &chart,
        "-n",
        SYSTEM_NS,
        "--create-namespace",
        "--wait",
        "--timeout",
        "3m",
    ]);
    // `helm test`: a Pod of the release's image, as a submitter, gets a Run admitted.
    let tested = cluster.helm(&["test", RELEASE, "-n", SYSTEM_NS, "--timeout", "2m"]);
    assert!(
        tested.contains("Phase:          Succeeded") || tested.contains("Succeeded"),
        "{tested}"
    );
    create_run(ns, "installed", "pool", &[], "true").await;
    wait_phases(
        ns,
        &["installed".into()],
        RunPhase::Succeeded,
        Duration::from_secs(60),
    )
    .await;

    // Runs created while the scheduler rolls to the new image: each is placed by one leader
    // or the next, none lost.
    cluster.fault(&[
        "tag-image",
        IMAGE,
        &format!("ghcr.io/kruntimes/kubectl-kruntimes:{NEXT_TAG}"),
    ]);
    let during: Vec<String> = (1..=6).map(|i| format!("during-{i}")).collect();
    for name in &during[..3] {
        create_run(ns, name, "pool", &[], "sleep 3").await;
    }
    cluster.helm(&[
        "upgrade",
        RELEASE,
        &chart,
        "-n",
        SYSTEM_NS,
        "--reuse-values",
        "--set",
        &format!("image.tag={NEXT_TAG}"),
        "--wait",
        "--timeout",
        "3m",
    ]);
    for name in &during[3..] {
        create_run(ns, name, "pool", &[], "sleep 3").await;
    }
    let system = TestNs::on(ns.client.clone(), SYSTEM_NS);
    let deployment = system
        .api::<Deployment>()
        .get("kubectl-kruntimes-scheduler")
        .await
        .unwrap();
    let images: Vec<String> = deployment
        .spec
        .and_then(|s| s.template.spec)
        .map(|s| s.containers.into_iter().filter_map(|c| c.image).collect())
        .unwrap_or_default();
    assert_eq!(
        images,
        [format!("ghcr.io/kruntimes/kubectl-kruntimes:{NEXT_TAG}")]
    );
    let pods = system
        .api::<Pod>()
        .list(&ListParams::default().labels(SCHEDULER_PODS))
        .await
        .unwrap()
        .items;
    for pod in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let image = pod.spec.as_ref().unwrap().containers[0].image.clone();
        assert_eq!(
            image.as_deref(),
            Some(format!("ghcr.io/kruntimes/kubectl-kruntimes:{NEXT_TAG}").as_str()),
            "scheduler Pod {} after the upgrade",
            pod.name_any()
        );
    }
    let mut all: Vec<String> = vec!["long".into(), "installed".into()];
    all.extend(during.iter().cloned());
    wait_phases(ns, &all, RunPhase::Succeeded, Duration::from_secs(120)).await;
    watch.finish().await;

    cluster.helm(&[
        "uninstall",
        RELEASE,
        "-n",
        SYSTEM_NS,
        "--wait",
        "--timeout",
        "3m",
    ]);
    for crd in ["runs.kruntimes.io", "runtimes.kruntimes.io"] {
        cluster.kubectl(&["get", "crd", crd]);
    }
    a_pod_token_stays_confined(cluster, ns, "long").await;
    let left: Vec<String> = ns
        .runs()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|r| r.phase() == RunPhase::Succeeded)
        .map(|r| r.name_any())
        .collect();
    assert_eq!(left.len(), all.len(), "every Run is kept: {left:?}");
    cluster.kubectl(&["-n", &ns.name, "get", "runtime", "pool"]);

    // Back to the kustomize install, as the other scenarios expect it.
    for dir in ["deploy", "deploy/submitter-mutation"] {
        cluster.kubectl(&["apply", "-k", &repo().join(dir).to_string_lossy()]);
    }
    cluster.scheduler_rolled_out();
}

/// The token of a Runtime Pod other than the one Run `run` ran on, bound to that Pod as its
/// kubelet projects it, cannot write the Run's status: runtimed's admission policy refuses it.
async fn a_pod_token_stays_confined(cluster: &Cluster, ns: &TestNs, run: &str) {
    use kube::api::Api;
    let ran_on = ns
        .get_run(run)
        .await
        .status
        .and_then(|s| s.assigned_pod)
        .unwrap_or_else(|| panic!("run/{run} names no Pod"));
    let pods: Api<Pod> = ns.api();
    let other = pods
        .list(&ListParams::default().labels("kruntimes.io/runtime=pool"))
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|p| p.name_any() != ran_on)
        .unwrap_or_else(|| panic!("no Runtime Pod of pool but {ran_on}"));
    let account = super::support::tokens::account_of(&other);
    let token =
        super::support::tokens::pod_bound_token(&ns.client, &ns.name, &account, &other).await;
    let kubeconfig = kube::config::Kubeconfig::read_from(&cluster.kubeconfig).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.into()),
        ..Default::default()
    };
    let as_other = kube::Client::try_from(config).unwrap();
    let runs: Api<kruntimes::api::Run> = Api::namespaced(as_other, &ns.name);
    // An update of the status, the one write runtimed's role grants (RBAC lets it through;
    // the policy must not).
    let mut written = ns.get_run(run).await;
    written.status.as_mut().unwrap().message = Some("written by another Pod".into());
    match runs
        .replace_status(run, &kube::api::PostParams::default(), &written)
        .await
    {
        Err(kube::Error::Api(s)) => assert!(
            s.code == 403
                && s.message
                    .contains("ValidatingAdmissionPolicy 'kubectl-kruntimes-runtimed'"),
            "Pod {}'s token was refused, but not by runtimed's policy: {}",
            other.name_any(),
            s.message
        ),
        other_result => panic!(
            "Pod {}'s token wrote run/{run}'s status (it ran on {ran_on}): {other_result:?}",
            other.name_any()
        ),
    }
}
