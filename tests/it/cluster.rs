//! kruntimes on a real single-node cluster: kubelet, containerd, runc and a bridge network
//! (`tests/cluster/cluster.sh`), with the image built from this checkout as an OCI archive (no
//! registry). What the control-plane tests cannot show — the image, `deploy/`, Runtime Pods
//! of a plain image getting runtimed injected, the kubelet's readiness probes and its SIGTERM —
//! is proven here.
//!
//! One cluster per machine: this suite runs itself (the harness gives it a process) and takes a
//! machine-wide lock, brings the cluster up, runs the scenarios one after another in order (later ones use the scheduler
//! the first one deploys) and tears the cluster down, also when a scenario fails. A run killed
//! half-way is cleaned up by the next one (`cluster.sh up` starts with `down`), or by hand with
//! `bash tests/cluster/cluster.sh down`. Needs root, Go and Python 3; nothing is skipped.
//!
//! `cargo test --test it cluster::NAME` runs the scenarios whose name contains `cluster::NAME`
//! (the deploy scenario always runs first: the others need it). `KRUNTIMES_CLUSTER_KEEP=1` leaves the
//! cluster up afterwards (its kubeconfig: /var/tmp/kruntimes-cluster/kubeconfig).

mod artifacts;
mod bash_runtime;
mod faults;
mod harness;
mod helm;
mod install;
mod objects;
mod restricted;
mod rollout;
mod scale;
mod spy;
use testkit as support;
mod workflows;

use std::collections::BTreeSet;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kube::ResourceExt as _;
use kube::api::{DeleteParams, ListParams};

use harness::{Cluster, machine_lock, repo};
use kruntimes::api::RunPhase;
use kruntimes::api::resources::Resources;
use kruntimes::testing::{run, workspace};
use objects::{
    SCHEDULER_PODS, assigned_pod, busybox, create_run, create_runtime, delete_runtime,
    one_long_run_on_two_pods, ready_pods, runtime_namespace, wait_failed, wait_phases,
    wait_runtime_ready,
};
use support::world::{Create, OvercommitWatch, TestNs, eventually};

/// A scenario: it panics when what it proves does not hold.
type Scenario = for<'a> fn(&'a Cluster) -> Pin<Box<dyn Future<Output = ()> + 'a>>;

/// The scenarios, in the order they run, each named once.
const SCENARIOS: &[(&str, Scenario)] = &[
    (
        "deploy_runs_two_scheduler_replicas_with_one_leader_and_metrics_for_authorised_scrapers",
        |c| Box::pin(deploy(c)),
    ),
    ("the_image_binary_is_static_and_uses_rustls", |_| {
        Box::pin(async { image_binary_is_static() })
    }),
    (
        "a_busybox_runtime_gets_runtimed_injected_and_runs_a_gpu_pool_workload_without_overcommit",
        |c| Box::pin(gpu_pool(c)),
    ),
    (
        "a_runtime_server_only_template_gets_the_runtimed_sidecar_runs_tasks_and_functions_and_heals_a_ready_run",
        |c| Box::pin(runtime_server_sidecar(c)),
    ),
    (
        "no_callers_credential_reaches_a_spy_in_a_runtime_pod_through_the_real_aggregation_layer",
        |c| Box::pin(spy::no_callers_credential_reaches_a_spy_in_the_pod(c)),
    ),
    (
        "a_task_on_the_go_projects_bash_runtime_image_cannot_reach_the_s3_keys_runtimed_holds_beside_it",
        |c| Box::pin(bash_runtime::a_task_cannot_reach_the_s3_keys(c)),
    ),
    (
        "a_runtime_server_that_listens_late_makes_its_pod_ready_once_it_listens",
        |c| Box::pin(bash_runtime::a_server_that_listens_late_makes_its_pod_ready(c)),
    ),
    (
        "runs_of_a_persistent_workspace_share_its_directory_on_one_real_pod",
        |c| Box::pin(workspace_on_a_real_pod(c)),
    ),
    (
        "a_three_job_workflow_with_a_fan_in_runs_on_real_runtime_pods_and_its_outputs_flow_through",
        |c| {
            Box::pin(workflows::a_fan_in_runs_on_real_pods_and_its_outputs_flow(
                c,
            ))
        },
    ),
    (
        "deleting_a_runtime_pod_under_a_running_run_fails_it_as_terminated_and_replaces_the_pod",
        |c| Box::pin(runtime_pod_deleted(c)),
    ),
    (
        "deleting_the_leader_mid_burst_hands_over_and_every_run_succeeds",
        |c| Box::pin(leader_deleted_mid_burst(c)),
    ),
    (
        "runtimed_killed_for_its_memory_limit_does_not_leave_its_run_running",
        |c| Box::pin(faults::memory_limit(c)),
    ),
    (
        "a_lost_node_fails_the_running_run_as_runtime_pod_lost_and_releases_its_capacity",
        |c| Box::pin(faults::node_lost(c)),
    ),
    (
        "a_runtimes_artifact_claim_holds_a_runs_artifacts_downloaded_through_the_gateway_until_the_run_is_deleted",
        |c| Box::pin(artifacts::stored_on_a_claim_downloaded_and_removed(c)),
    ),
    (
        "a_runtimes_s3_store_takes_a_runs_artifacts_with_the_secrets_credentials_until_the_run_is_deleted",
        |c| Box::pin(artifacts::uploaded_to_s3_downloaded_and_removed(c)),
    ),
    (
        "a_restricted_namespace_with_a_compute_quota_runs_a_runtime_with_nothing_applied_and_shows_the_quota_refusal",
        |c| Box::pin(restricted::restricted_namespace_and_quota(c)),
    ),
    (
        "a_changed_template_replaces_the_runtime_pods_one_at_a_time_while_runs_keep_succeeding",
        |c| Box::pin(rollout::template_change_rolls_one_pod_at_a_time(c)),
    ),
    (
        "kubectl_scale_and_a_horizontal_pod_autoscaler_size_a_runtime_through_its_scale_subresource",
        |c| Box::pin(scale::kubectl_scale_and_an_hpa_size_a_runtime(c)),
    ),
    (
        "helm_install_runs_runs_upgrade_rolls_the_scheduler_without_losing_one_and_uninstall_keeps_them",
        |c| Box::pin(helm::install_upgrade_uninstall(c)),
    ),
    (
        "install_alone_deploys_a_scheduler_that_runs_runs_and_uninstall_keeps_them_unless_told_to_delete_the_crds",
        |c| Box::pin(install::install_alone_runs_runs_and_uninstall_keeps_or_deletes_them(c)),
    ),
];

testkit::harness::inventory::submit! {
    testkit::harness::Suite {
        module: module_path!(),
        tests: || SCENARIOS.iter().map(|(name, _)| *name).collect(),
        main,
    }
}

/// Brings the cluster up, runs the chosen scenarios in order (the deploy scenario first,
/// always: the others need it) and takes the cluster down.
fn main() -> ExitCode {
    let chosen: Vec<&(&str, Scenario)> = SCENARIOS
        .iter()
        .enumerate()
        .filter(|(i, (name, _))| *i == 0 || testkit::harness::is_chosen(module_path!(), name))
        .map(|(_, scenario)| scenario)
        .collect();

    let _lock = machine_lock();
    let started = Instant::now();
    let cluster = match Cluster::up() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: the single-node cluster did not come up: {e}");
            Cluster::down();
            return ExitCode::FAILURE;
        }
    };
    println!(
        "single-node cluster up in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut failed = Vec::new();
    for (name, scenario) in &chosen {
        let t = Instant::now();
        let result =
            std::panic::catch_unwind(AssertUnwindSafe(|| runtime.block_on(scenario(&cluster))));
        match result {
            Ok(()) => println!("test {name} ... ok ({:.1}s)", t.elapsed().as_secs_f64()),
            Err(_) => {
                println!("test {name} ... FAILED ({:.1}s)", t.elapsed().as_secs_f64());
                cluster.diagnose();
                failed.push(*name);
            }
        }
    }
    drop(runtime);
    if std::env::var_os("KRUNTIMES_CLUSTER_KEEP").is_none() {
        Cluster::down();
    }
    println!(
        "\ntest result: {}. {} passed; {} failed; cluster suite {:.1}s",
        if failed.is_empty() { "ok" } else { "FAILED" },
        chosen.len() - failed.len(),
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

// ---------------------------------------------------------------------------------------------
// Scenarios

const SYSTEM_NS: &str = "kubectl-kruntimes";
const BUSYBOX: &str = "kruntimes-test/busybox:1";
/// busybox plus the tests' runtime server (tests/runtime_server), serving the contract on
/// 127.0.0.1:9091 (tests/cluster/oci.py runtime-server).
pub const RUNTIME_SERVER: &str = "kruntimes-test/runtime-server:1";
/// The cluster's only node (tests/cluster/cluster.sh).
const NODE: &str = "kruntimes-node";

/// `kubectl apply -k deploy/crds/`, `kubectl apply -k deploy/` and `deploy/submitter-mutation/` with the image built from this checkout: both replicas run and
/// are ready, exactly one leads, and `/metrics` answers over TLS to a token allowed to read it.
async fn deploy(cluster: &Cluster) {
    cluster.kubectl(&["apply", "-k", &repo().join("deploy/crds").to_string_lossy()]);
    cluster.kubectl(&["apply", "-k", &repo().join("deploy").to_string_lossy()]);
    // Kubernetes 1.36: the submitter's mutating policy too.
    cluster.kubectl(&[
        "apply",
        "-k",
        &repo().join("deploy/submitter-mutation").to_string_lossy(),
    ]);
    cluster.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/runtimes.kruntimes.io",
        "crd/runs.kruntimes.io",
        "--timeout=60s",
    ]);
    cluster.scheduler_rolled_out();
    let client = cluster.client().await;
    let system = TestNs::on(client.clone(), SYSTEM_NS);
    let replicas = ready_pods(&system, SCHEDULER_PODS, 2, Duration::from_secs(60)).await;
    let names: Vec<String> = replicas.iter().map(|p| p.name_any()).collect();
    let leader = system
        .wait_leader_among(&names, Duration::from_secs(60))
        .await;

    // Exactly one replica started its queue; the other waits.
    let leading_logs = eventually(Duration::from_secs(30), "one leader log line", async || {
        let leading: Vec<&String> = names
            .iter()
            .filter(|n| {
                cluster
                    .kubectl_raw(&["-n", SYSTEM_NS, "logs", n])
                    .contains("leading: starting the scheduling queue")
            })
            .collect();
        match leading.as_slice() {
            [one] => Ok((*one).clone()),
            more => Err(format!("{} replicas say they lead", more.len())),
        }
    })
    .await;
    assert_eq!(
        leading_logs, leader,
        "the Lease holder is the one that leads"
    );

    // /metrics is HTTPS for callers allowed to get it: the API server's Pod proxy forwards no
    // credential, so it gets 401; Prometheus's account, bound to the shipped
    // kubectl-kruntimes-metrics-reader, reads it from the Pod's address with its token.
    let (served, through_proxy) = cluster.kubectl_said(&[
        "get",
        "--raw",
        &format!(
            "/api/v1/namespaces/{SYSTEM_NS}/pods/https:{}:8080/proxy/metrics",
            names[0]
        ),
    ]);
    assert!(
        // kubectl's words for the 401 the scheduler answered.
        !served
            && through_proxy.contains("the server has asked for the client to provide credentials"),
        "/metrics through the Pod proxy, with no token: {through_proxy}"
    );
    let scraper = format!("metrics-scraper-{}", std::process::id());
    cluster.kubectl(&["-n", SYSTEM_NS, "create", "serviceaccount", &scraper]);
    cluster.kubectl(&[
        "create",
        "clusterrolebinding",
        &scraper,
        "--clusterrole=kubectl-kruntimes-metrics-reader",
        &format!("--serviceaccount={SYSTEM_NS}:{scraper}"),
    ]);
    let token = cluster.kubectl(&["-n", SYSTEM_NS, "create", "token", &scraper]);
    for pod in &replicas {
        let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap();
        let metrics = eventually(
            Duration::from_secs(30),
            "a scrape with the reader's token",
            async || match support::world::https_get_from(
                &ip,
                8080,
                "/metrics",
                Some(token.trim()),
                None,
            )
            .await
            {
                Ok((200, body)) => Ok(body),
                other => Err(format!("{other:?}")),
            },
        )
        .await;
        assert!(
            metrics.contains("kruntimes_scheduler_runtime_pods"),
            "/metrics of {} at {ip}:\n{metrics}",
            pod.name_any()
        );
    }
    cluster.kubectl(&["delete", "clusterrolebinding", &scraper]);
    cluster.kubectl(&["-n", SYSTEM_NS, "delete", "serviceaccount", &scraper]);
}

/// The image's binary (tests/cluster/static.sh, the build the Dockerfile makes) has no
/// interpreter and needs no shared library, and TLS is rustls: no OpenSSL in the build. (That it
/// runs on an empty base is what the deploy scenario shows.)
fn image_binary_is_static() {
    let out = Command::new("bash")
        .arg(repo().join("tests/cluster/static.sh"))
        .output()
        .expect("run tests/cluster/static.sh");
    assert!(
        out.status.success(),
        "static build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The check itself tells a dynamic executable apart: this test binary is one.
    let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    let (me_interpreter, me_needed) = support::elf_dynamic_needs(&me);
    assert!(
        me_interpreter && me_needed > 0,
        "the ELF check sees this dynamic test binary"
    );
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let elf = std::fs::read(&path).unwrap();
    let (interpreter, needed) = support::elf_dynamic_needs(&elf);
    assert!(
        !interpreter,
        "{} has a program interpreter: it is dynamically linked",
        path.display()
    );
    assert_eq!(
        needed,
        0,
        "{} needs {needed} shared libraries",
        path.display()
    );

    let lock = std::fs::read_to_string(repo().join("Cargo.lock")).unwrap();
    for crate_name in ["openssl-sys", "native-tls"] {
        assert!(
            !lock.contains(&format!("name = \"{crate_name}\"")),
            "Cargo.lock has {crate_name}: TLS must be rustls"
        );
    }
    assert!(lock.contains("name = \"rustls\""));
}

/// A Runtime of a plain busybox image (no kruntimes inside): the Runtime controller injects
/// runtimed, the kubelet marks 3 Pods Ready through runtimed's readiness probe, and a GPU-pool
/// workload (more GPU Runs than GPUs, plus CPU Runs) runs for real and ends all Succeeded,
/// never over capacity at any watch event, with the exact Pending message while it waits.
async fn gpu_pool(cluster: &Cluster) {
    let ns = &runtime_namespace(cluster, "gpu").await;
    let capacity = [("runs", 4), ("example.com/gpu", 1)];
    create_runtime(ns, "gpu", 3, busybox(), &capacity).await;
    let pods = wait_runtime_ready(ns, "gpu", 3).await;
    let spec = pods[0].spec.clone().unwrap();
    assert_eq!(spec.containers[0].image.as_deref(), Some(BUSYBOX));
    assert_eq!(
        spec.init_containers.unwrap()[0].name,
        kruntimes::runtime::pod::INIT_CONTAINER
    );

    let watch = OvercommitWatch::start_for_runtime(ns, "gpu", Resources::from_iter(capacity)).await;
    let mut names = Vec::new();
    for i in 1..=6 {
        let name = format!("gpu-{i}");
        let script = "echo $((6*7)) on $POD_NAME; sleep 5";
        create_run(ns, &name, "gpu", &[("example.com/gpu", 1)], script).await;
        names.push(name);
    }
    for i in 1..=4 {
        let name = format!("cpu-{i}");
        create_run(ns, &name, "gpu", &[], "sleep 1").await;
        names.push(name);
    }
    wait_phases(ns, &names, RunPhase::Succeeded, Duration::from_secs(180)).await;
    let pending_messages: BTreeSet<String> = watch
        .finish_recorded()
        .await
        .iter()
        .filter_map(|e| {
            let status = e.run.status.as_ref()?;
            (status.phase == Some(RunPhase::Pending)).then(|| status.message.clone())?
        })
        .collect();
    assert!(
        pending_messages
            .contains("0/3 Runtime Pods are available: 3 Insufficient example.com/gpu."),
        "GPU Runs waited with the scheduler's exact message; seen: {pending_messages:?}"
    );
    let runs = ns.runs();
    for name in &names {
        let run = runs.get(name).await.unwrap();
        assert_eq!(run.status.unwrap().exit_code, Some(0), "{name}");
    }
    let first = assigned_pod(ns, "gpu-1").await;
    let log = cluster.kubectl_raw(&["-n", &ns.name, "logs", &first, "-c", "main"]);
    assert!(log.contains(&format!("[gpu-1] 42 on {first}")), "{log}");
    delete_runtime(ns, "gpu").await;
}

/// Two Runs on one PersistentWorkspace, the second created after the first finished: the
/// first writes a file in the workspace directory runtimed creates in the real container, the
/// second reads it there, on the Pod the workspace is bound to.
async fn runtime_server_sidecar(cluster: &Cluster) {
    let ns = &runtime_namespace(cluster, "server").await;
    let template = PodSpec {
        containers: vec![Container {
            name: kruntimes::runtime::pod::RUNTIME_CONTAINER.into(),
            image: Some(RUNTIME_SERVER.into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let capacity = [("runs", 2)];
    create_runtime(ns, "server", 1, template, &capacity).await;
    // Ready means runtimed's /readyz, which includes the runtime server's Health.
    let pods = wait_runtime_ready(ns, "server", 1).await;
    let pod = pods[0].name_any();
    let spec = pods[0].spec.clone().unwrap();
    let containers: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(containers, ["runtime", "runtimed"]);
    assert_eq!(spec.containers[0].image.as_deref(), Some(RUNTIME_SERVER));
    assert!(spec.init_containers.unwrap_or_default().is_empty());

    let watch =
        OvercommitWatch::start_for_runtime(ns, "server", Resources::from_iter(capacity)).await;
    create_run(
        ns,
        "hello",
        "server",
        &[],
        "echo $((6*7)) on $POD_NAME; echo \"answer=$((6*7)) on $POD_NAME\" >> \"$KRUNTIME_OUTPUTS\"",
    )
    .await;
    create_run(ns, "fails", "server", &[], "echo oops >&2; exit 3").await;
    let mut sleepers = Vec::new();
    for i in 1..=4 {
        let name = format!("sleep-{i}");
        create_run(ns, &name, "server", &[], "sleep 2").await;
        sleepers.push(name);
    }
    wait_phases(ns, &sleepers, RunPhase::Succeeded, Duration::from_secs(120)).await;
    let names = ["hello".to_string()];
    wait_phases(ns, &names, RunPhase::Succeeded, Duration::from_secs(60)).await;
    let names = ["fails".to_string()];
    wait_phases(ns, &names, RunPhase::Failed, Duration::from_secs(60)).await;
    let checked = watch.finish().await;

    let runs = ns.runs();
    let hello = runs.get("hello").await.unwrap().status.unwrap();
    assert_eq!(hello.exit_code, Some(0));
    assert_eq!(
        hello.outputs.get("answer").map(String::as_str),
        Some(format!("42 on {pod}").as_str()),
        "executed in the runtime container, with the Pod's identity, its $KRUNTIME_OUTPUTS read by runtimed on the shared workspace volume: {hello:?}"
    );
    assert_eq!(hello.outputs.len(), 1, "stdout is not an output: {hello:?}");
    let fails = runs.get("fails").await.unwrap().status.unwrap();
    assert_eq!(fails.exit_code, Some(3));
    assert!(fails.outputs.is_empty(), "{fails:?}");
    let log = cluster.kubectl_raw(&["-n", &ns.name, "logs", &pod, "-c", "runtimed"]);
    assert!(
        log.contains("[hello] 42 on"),
        "runtimed logs the execution's output: {log}"
    );
    // The Run's own log, through the aggregated API and the gateway.
    let out = cluster.kruntimes(&["logs", "run/hello", "-n", &ns.name]);
    assert!(
        out.status.success(),
        "logs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("42 on {pod}\n")
    );
    // `run --wait` streams the task's log as it runs and exits with its exit code.
    let out = cluster.kruntimes(&[
        "-n",
        &ns.name,
        "run",
        "streamed",
        "-r",
        "server",
        "--wait",
        "--",
        "sh",
        "-c",
        "echo first; sleep 1; echo second; exit 4",
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(4), "{stdout}{stderr}");
    assert_eq!(
        stdout, "run.kruntimes.io/streamed created\nfirst\nsecond\n",
        "{stderr}"
    );
    eprintln!("runtime server sidecar: {checked} Run events checked for overcommit");

    // A function Run: Ready, invoked through the gateway, then its Pod is
    // deleted under it: it heals as a Running Run does (RuntimePodLost), never left Ready.
    run("fn")
        .runtime("server")
        .requests(&[("runs", 2)])
        .function("upper")
        .create(ns)
        .await;
    let names = ["fn".to_string()];
    wait_phases(ns, &names, RunPhase::Ready, Duration::from_secs(60)).await;
    let out = cluster.kruntimes(&["invoke", "run/fn", "-n", &ns.name, "--data", "hello"]);
    assert!(
        out.status.success(),
        "invoke: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "HELLO");
    let fn_pod = assigned_pod(ns, "fn").await;
    // Anyone else who calls that runtimed directly, past the gateway, is refused: no token
    // (401), an account's token for the API server (401), and another namespace's account
    // with a token for this very Pod's audience (403: it is not the gateway's).
    let found = ns.api::<Pod>().get(&fn_pod).await.unwrap();
    let ip = found.status.unwrap().pod_ip.unwrap();
    let uid = found.metadata.uid.unwrap();
    let outsider = &runtime_namespace(cluster, "outsider").await;
    let intruder: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "intruder"}})).unwrap();
    support::world::create_in(outsider, intruder).await;
    let (oc, on) = (&outsider.client, outsider.name.as_str());
    let for_api =
        support::tokens::audience_token(oc, on, "intruder", "https://kubernetes.default.svc").await;
    let audience = kruntimes::api::runtimed_audience(&uid);
    let for_pod = support::tokens::audience_token(oc, on, "intruder", &audience).await;
    let api = support::world::RuntimedApi {
        port: kruntimes::runtime::pod::API_PORT as u16,
        pod_uid: uid.clone(),
    };
    let direct = async |token: Option<&str>| {
        let client = kruntimes::manager::gateway::upstream::http_client().unwrap();
        let mut request = client
            .post(format!("https://{ip}:{}/invoke/fn", api.port))
            .body("x");
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send().await.unwrap().status().as_u16()
    };
    assert_eq!(direct(None).await, 401, "no token");
    assert_eq!(
        direct(Some(&for_api)).await,
        401,
        "a token for the API server"
    );
    assert_eq!(
        direct(Some(&for_pod)).await,
        403,
        "another account's token for this Pod"
    );
    ns.api::<Pod>()
        .delete(&fn_pod, &DeleteParams::default())
        .await
        .unwrap();
    let lost = wait_failed(ns, "fn", Duration::from_secs(120)).await;
    assert_eq!(
        lost.reason.as_deref(),
        Some(kruntimes::api::status::reasons::RUNTIME_POD_LOST),
        "{lost:?}"
    );
    delete_runtime(ns, "server").await;
}

async fn workspace_on_a_real_pod(cluster: &Cluster) {
    let ns = &runtime_namespace(cluster, "ws").await;
    create_runtime(ns, "ws", 2, busybox(), &[("runs", 2)]).await;
    wait_runtime_ready(ns, "ws", 2).await;
    workspace("data").runtime("ws").create(ns).await;
    let step = |name: &str, script: &str| {
        run(name)
            .runtime("ws")
            .workspace("data")
            .task(&["sh", "-c", script])
    };
    // One after the other: the reader is created once the writer has Succeeded.
    let steps = [
        (
            "write",
            "echo hello > greeting && test \"$PWD\" = /workspace/persistent/data",
        ),
        ("read", "test \"$(cat greeting)\" = hello"),
    ];
    for (name, script) in steps {
        step(name, script).create(ns).await;
        let names = [name.to_string()];
        wait_phases(ns, &names, RunPhase::Succeeded, Duration::from_secs(60)).await;
    }
    let (first, second) = (
        assigned_pod(ns, "write").await,
        assigned_pod(ns, "read").await,
    );
    assert_eq!(first, second, "the Runs of one workspace ran on two Pods");
    let bound = ns
        .api::<kruntimes::api::PersistentWorkspace>()
        .get("data")
        .await
        .unwrap();
    assert_eq!(bound.bound_pod(), Some(first.as_str()));
    // The data is on the Pod's workspace volume, not in the container's own filesystem: it
    // outlives a restart of the container.
    let pod = ns.api::<Pod>().get(&first).await.unwrap();
    let spec = pod.spec.unwrap();
    let volume = spec
        .volumes
        .unwrap_or_default()
        .into_iter()
        .find(|v| v.name == kruntimes::runtime::pod::WORKSPACE_VOLUME)
        .expect("the workspace volume");
    assert!(volume.empty_dir.is_some(), "{volume:?}");
    delete_runtime(ns, "ws").await;
}

/// Deleting a Runtime Pod (termination grace 10 s, the template that once left Runs Running
/// forever) with a Running Run: the kubelet's SIGTERM reaches runtimed, which fails the Run as
/// RuntimePodTerminated before the SIGKILL; the Runtime controller replaces the Pod.
async fn runtime_pod_deleted(cluster: &Cluster) {
    let ns = &runtime_namespace(cluster, "term").await;
    let mut template = busybox();
    template.termination_grace_period_seconds = Some(10);
    let long = one_long_run_on_two_pods(ns, "term", template, "long").await;
    let victim = long.assigned_pod.unwrap();
    ns.api::<Pod>()
        .delete(&victim, &DeleteParams::default())
        .await
        .unwrap();

    let status = wait_failed(ns, "long", Duration::from_secs(60)).await;
    assert_eq!(
        status.reason.as_deref(),
        Some("RuntimePodTerminated"),
        "{status:?}"
    );
    assert_eq!(status.assigned_pod.as_deref(), Some(victim.as_str()));

    let replaced = wait_runtime_ready(ns, "term", 2).await;
    assert!(
        replaced.iter().all(|p| p.name_any() != victim),
        "the deleted Pod {victim} was replaced"
    );
    delete_runtime(ns, "term").await;
}

/// 24 Runs on 12 slots; the leader's Pod is deleted while Runs are still Pending: the standby
/// takes the Lease and every Run ends Succeeded, without overcommit at any watch event.
async fn leader_deleted_mid_burst(cluster: &Cluster) {
    let ns = &runtime_namespace(cluster, "burst").await;
    create_runtime(ns, "burst", 3, busybox(), &[("runs", 4)]).await;
    wait_runtime_ready(ns, "burst", 3).await;
    let system = TestNs::on(ns.client.clone(), SYSTEM_NS);
    let pods = system.api::<Pod>();
    let schedulers: Vec<String> = pods
        .list(&ListParams::default().labels(SCHEDULER_PODS))
        .await
        .unwrap()
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| p.name_any())
        .collect();
    let leader = system
        .wait_leader_among(&schedulers, Duration::from_secs(60))
        .await;

    let capacity = Resources::from_iter([("runs", 4)]);
    let watch = OvercommitWatch::start_for_runtime(ns, "burst", capacity).await;
    let names: Vec<String> = (1..=24).map(|i| format!("b-{i:02}")).collect();
    for name in &names {
        create_run(ns, name, "burst", &[], "sleep 2").await;
    }
    ns.wait_runs(
        Duration::from_secs(60),
        "some Runs running, some pending",
        |runs| {
            let count = |p| runs.iter().filter(|r| r.phase() == p).count();
            (count(RunPhase::Running) > 0 && count(RunPhase::Pending) > 0).then_some(())
        },
    )
    .await;
    // The node is cordoned first, so the Pod the ReplicaSet starts in the old leader's place
    // stays Pending: the standby has to take over.
    let standby = schedulers
        .iter()
        .find(|n| **n != leader)
        .expect("a standby")
        .clone();
    cluster.kubectl(&["cordon", NODE]);
    let deleted = Instant::now();
    pods.delete(&leader, &DeleteParams::default())
        .await
        .unwrap();
    let new_leader = system
        .wait_leader_among(std::slice::from_ref(&standby), Duration::from_secs(60))
        .await;
    cluster.kubectl(&["uncordon", NODE]);
    println!(
        "leader {leader} deleted mid-burst; the standby {new_leader} leads {:.1}s later",
        deleted.elapsed().as_secs_f64()
    );

    wait_phases(ns, &names, RunPhase::Succeeded, Duration::from_secs(240)).await;
    watch.finish().await;
    delete_runtime(ns, "burst").await;
}
