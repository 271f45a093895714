//! kruntimes on a real single-node cluster: kubelet, containerd, runc and a bridge network
//! (`tests/cluster/cluster.sh`), with the image built from this checkout as an OCI archive (no
//! registry). What the control-plane tests cannot show — the image, `deploy/`, Runtime Pods
//! of a plain image getting runtimed injected, the kubelet's readiness probes and its SIGTERM —
//! is proven here.
//!
//! One cluster per machine: this binary (`harness = false`) takes a machine-wide lock, brings
//! the cluster up, runs the scenarios one after another in order (later ones use the scheduler
//! the first one deploys) and tears the cluster down, also when a scenario fails. A run killed
//! half-way is cleaned up by the next one (`cluster.sh up` starts with `down`), or by hand with
//! `bash tests/cluster/cluster.sh down`. Needs root, Go and Python 3; nothing is skipped.
//!
//! `cargo test --test cluster [NAME…]` runs the scenarios whose name contains a NAME (the deploy
//! scenario always runs first: the others need it). `KRUNTIMES_CLUSTER_KEEP=1` leaves the
//! cluster up afterwards (its kubeconfig: /var/tmp/kruntimes-cluster/kubeconfig).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use serde_json::json;

use kruntimes::api::resources::{Resources, parse_requests};
use kruntimes::api::{LABEL_RUNTIME, Run, RunPhase, Runtime, pod_is_ready};

/// The scenarios, in the order they run.
const SCENARIOS: &[&str] = &[
    "deploy_runs_two_scheduler_replicas_with_one_leader_and_metrics_through_the_pod_proxy",
    "the_image_binary_is_static_and_uses_rustls",
    "a_busybox_runtime_gets_runtimed_injected_and_runs_a_gpu_pool_workload_without_overcommit",
    "deleting_a_runtime_pod_under_a_running_run_fails_it_as_terminated_and_replaces_the_pod",
    "deleting_the_leader_mid_burst_hands_over_and_every_run_succeeds",
    "runtimed_killed_for_its_memory_limit_does_not_leave_its_run_running",
    "a_lost_node_fails_the_running_run_as_runtime_pod_lost_and_releases_its_capacity",
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for name in SCENARIOS {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    // Name filters, as libtest takes them; flags (and the values of those that take one) are
    // not filters.
    let mut filters: Vec<&String> = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if [
            "--test-threads",
            "--skip",
            "--format",
            "--color",
            "--logfile",
            "-Z",
        ]
        .contains(&word.as_str())
        {
            words.next();
        } else if !word.starts_with('-') {
            filters.push(word);
        }
    }
    let chosen: Vec<&str> = SCENARIOS
        .iter()
        .enumerate()
        .filter(|(i, name)| {
            *i == 0 || filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()))
        })
        .map(|(_, name)| *name)
        .collect();
    if !filters.is_empty()
        && chosen.len() == 1
        && !filters.iter().any(|f| SCENARIOS[0].contains(f.as_str()))
    {
        println!("no cluster scenario matches {filters:?}");
        return ExitCode::SUCCESS;
    }

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
    for name in &chosen {
        let t = Instant::now();
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            runtime.block_on(run_scenario(&cluster, name))
        }));
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

async fn run_scenario(cluster: &Cluster, name: &str) {
    match name {
        "deploy_runs_two_scheduler_replicas_with_one_leader_and_metrics_through_the_pod_proxy" => {
            deploy(cluster).await
        }
        "the_image_binary_is_static_and_uses_rustls" => image_binary_is_static(),
        "a_busybox_runtime_gets_runtimed_injected_and_runs_a_gpu_pool_workload_without_overcommit" => {
            gpu_pool(cluster).await
        }
        "deleting_a_runtime_pod_under_a_running_run_fails_it_as_terminated_and_replaces_the_pod" => {
            runtime_pod_deleted(cluster).await
        }
        "deleting_the_leader_mid_burst_hands_over_and_every_run_succeeds" => {
            leader_deleted_mid_burst(cluster).await
        }
        "runtimed_killed_for_its_memory_limit_does_not_leave_its_run_running" => {
            memory_limit(cluster).await
        }
        "a_lost_node_fails_the_running_run_as_runtime_pod_lost_and_releases_its_capacity" => {
            node_lost(cluster).await
        }
        other => panic!("unknown scenario {other}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Scenarios

const SYSTEM_NS: &str = "kubectl-kruntimes";
/// The Runtime namespace `deploy/` prepares (runtimed's service account and Role).
const EXAMPLE_NS: &str = "kubectl-kruntimes-example";
const BUSYBOX: &str = "kruntimes-test/busybox:1";
/// The cluster's only node (tests/cluster/cluster.sh).
const NODE: &str = "kruntimes-node";

/// `kubectl apply -k deploy/` with the image built from this checkout: both replicas run and
/// are ready, exactly one leads, and `/metrics` answers through the API server's pod proxy.
async fn deploy(cluster: &Cluster) {
    cluster.kubectl(&["apply", "-k", &repo().join("deploy").to_string_lossy()]);
    cluster.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/runtimes.kruntimes.io",
        "crd/runs.kruntimes.io",
        "--timeout=60s",
    ]);
    cluster.kubectl(&[
        "-n",
        SYSTEM_NS,
        "rollout",
        "status",
        "deployment/kubectl-kruntimes-scheduler",
        "--timeout=120s",
    ]);
    let client = cluster.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), SYSTEM_NS);
    let replicas = eventually(
        Duration::from_secs(60),
        "2 ready scheduler Pods",
        || async {
            let list = pods
                .list(
                    &ListParams::default()
                        .labels("app.kubernetes.io/name=kubectl-kruntimes-scheduler"),
                )
                .await
                .ok()?;
            let ready: Vec<Pod> = list
                .items
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none() && pod_is_ready(p))
                .collect();
            (ready.len() == 2).then_some(ready)
        },
    )
    .await;
    let names: Vec<String> = replicas.iter().map(|p| p.name_any()).collect();
    let leader = wait_leader(&client, &names, Duration::from_secs(60)).await;

    // Exactly one replica started its queue; the other waits.
    let leading_logs = eventually(Duration::from_secs(30), "one leader log line", || async {
        let leading: Vec<&String> = names
            .iter()
            .filter(|n| {
                cluster
                    .kubectl_raw(&["-n", SYSTEM_NS, "logs", n])
                    .contains("leading: starting the scheduling queue")
            })
            .collect();
        (leading.len() == 1).then(|| leading[0].clone())
    })
    .await;
    assert_eq!(
        leading_logs, leader,
        "the Lease holder is the one that leads"
    );

    for name in &names {
        let metrics = cluster.kubectl(&[
            "get",
            "--raw",
            &format!("/api/v1/namespaces/{SYSTEM_NS}/pods/{name}:8080/proxy/metrics"),
        ]);
        assert!(
            metrics.contains("kruntimes_scheduler_runtime_pods"),
            "/metrics of {name} through the pod proxy:\n{metrics}"
        );
    }
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
    let (me_interpreter, me_needed) = elf_dynamic_needs(&me);
    assert!(
        me_interpreter && me_needed > 0,
        "the ELF check sees this dynamic test binary"
    );
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let elf = std::fs::read(&path).unwrap();
    let (interpreter, needed) = elf_dynamic_needs(&elf);
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

/// Whether a 64-bit little-endian ELF file has a `PT_INTERP` program header, and how many
/// `DT_NEEDED` entries its dynamic section has (a static-pie has a dynamic section but none).
fn elf_dynamic_needs(elf: &[u8]) -> (bool, usize) {
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(
        (elf[4], elf[5]),
        (2, 1),
        "not a 64-bit little-endian ELF file"
    );
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap()) as usize;
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    let (mut interpreter, mut needed) = (false, 0);
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        let kind = u32::from_le_bytes(elf[ph..ph + 4].try_into().unwrap());
        match kind {
            3 => interpreter = true, // PT_INTERP
            2 => {
                // PT_DYNAMIC: (d_tag, d_val) pairs until DT_NULL; DT_NEEDED is 1.
                let (offset, size) = (u64_at(ph + 8), u64_at(ph + 32));
                for entry in (offset..offset + size).step_by(16) {
                    match u64_at(entry) {
                        0 => break,
                        1 => needed += 1,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    (interpreter, needed)
}

/// A Runtime of a plain busybox image (no kruntimes inside): the Runtime controller injects
/// runtimed, the kubelet marks 3 Pods Ready through runtimed's readiness probe, and a GPU-pool
/// workload (more GPU Runs than GPUs, plus CPU Runs) runs for real and ends all Succeeded,
/// never over capacity at any watch event, with the exact Pending message while it waits.
async fn gpu_pool(cluster: &Cluster) {
    let client = cluster.client().await;
    let ns = EXAMPLE_NS;
    create_runtime(
        &client,
        ns,
        "gpu",
        3,
        None,
        &[("runs", 4), ("example.com/gpu", 1)],
    )
    .await;
    let pods = wait_runtime_ready(&client, ns, "gpu", 3).await;
    let spec = pods[0].spec.clone().unwrap();
    assert_eq!(spec.containers[0].image.as_deref(), Some(BUSYBOX));
    assert_eq!(
        spec.init_containers.unwrap()[0].name,
        kruntimes::runtime_pod::INIT_CONTAINER
    );

    let capacity = Resources::from_iter([("runs", 4), ("example.com/gpu", 1)]);
    let watch = RunWatch::start(&client, ns, "gpu", capacity).await;
    let mut names = Vec::new();
    for i in 1..=6 {
        let name = format!("gpu-{i}");
        create_run(
            &client,
            ns,
            &name,
            "gpu",
            &[("example.com/gpu", 1)],
            "echo $((6*7)) on $POD_NAME; sleep 5",
        )
        .await;
        names.push(name);
    }
    for i in 1..=4 {
        let name = format!("cpu-{i}");
        create_run(&client, ns, &name, "gpu", &[], "sleep 1").await;
        names.push(name);
    }
    wait_phases(
        &client,
        ns,
        &names,
        RunPhase::Succeeded,
        Duration::from_secs(180),
    )
    .await;
    let seen = watch.finish().await;
    assert!(
        seen.pending_messages
            .contains("0/3 Runtime Pods are available: 3 Insufficient example.com/gpu."),
        "GPU Runs waited with the scheduler's exact message; seen: {:?}",
        seen.pending_messages
    );
    let runs: Api<Run> = Api::namespaced(client.clone(), ns);
    for name in &names {
        let run = runs.get(name).await.unwrap();
        assert_eq!(run.status.unwrap().exit_code, Some(0), "{name}");
    }
    let first = runs
        .get("gpu-1")
        .await
        .unwrap()
        .status
        .unwrap()
        .assigned_pod
        .unwrap();
    let log = cluster.kubectl_raw(&["-n", ns, "logs", &first, "-c", "main"]);
    assert!(log.contains(&format!("[gpu-1] 42 on {first}")), "{log}");
    delete_runtime(&client, ns, "gpu").await;
}

/// Deleting a Runtime Pod (termination grace 10 s, the template that once left Runs Running
/// forever) with a Running Run: the kubelet's SIGTERM reaches runtimed, which fails the Run as
/// RuntimePodTerminated before the SIGKILL; the Runtime controller replaces the Pod.
async fn runtime_pod_deleted(cluster: &Cluster) {
    let client = cluster.client().await;
    let ns = &runtime_namespace(cluster, &client, "term").await;
    create_runtime(&client, ns, "term", 2, Some(10), &[("runs", 1)]).await;
    wait_runtime_ready(&client, ns, "term", 2).await;
    create_run(&client, ns, "long", "term", &[], "sleep 600").await;
    wait_phases(
        &client,
        ns,
        &["long".into()],
        RunPhase::Running,
        Duration::from_secs(60),
    )
    .await;
    let runs: Api<Run> = Api::namespaced(client.clone(), ns);
    let victim = runs
        .get("long")
        .await
        .unwrap()
        .status
        .unwrap()
        .assigned_pod
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.delete(&victim, &DeleteParams::default())
        .await
        .unwrap();

    let status = eventually(Duration::from_secs(60), "Run long Failed", || async {
        let status = runs.get("long").await.ok()?.status?;
        (status.phase == Some(RunPhase::Failed)).then_some(status)
    })
    .await;
    assert_eq!(
        status.reason.as_deref(),
        Some("RuntimePodTerminated"),
        "{status:?}"
    );
    assert_eq!(status.assigned_pod.as_deref(), Some(victim.as_str()));

    let replaced = wait_runtime_ready(&client, ns, "term", 2).await;
    assert!(
        replaced.iter().all(|p| p.name_any() != victim),
        "the deleted Pod {victim} was replaced"
    );
    delete_runtime(&client, ns, "term").await;
}

/// 24 Runs on 12 slots; the leader's Pod is deleted while Runs are still Pending: the standby
/// takes the Lease and every Run ends Succeeded, without overcommit at any watch event.
async fn leader_deleted_mid_burst(cluster: &Cluster) {
    let client = cluster.client().await;
    let ns = &runtime_namespace(cluster, &client, "burst").await;
    create_runtime(&client, ns, "burst", 3, None, &[("runs", 4)]).await;
    wait_runtime_ready(&client, ns, "burst", 3).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), SYSTEM_NS);
    let schedulers: Vec<String> = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=kubectl-kruntimes-scheduler"))
        .await
        .unwrap()
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| p.name_any())
        .collect();
    let leader = wait_leader(&client, &schedulers, Duration::from_secs(60)).await;

    let watch = RunWatch::start(&client, ns, "burst", Resources::from_iter([("runs", 4)])).await;
    let names: Vec<String> = (1..=24).map(|i| format!("b-{i:02}")).collect();
    for name in &names {
        create_run(&client, ns, name, "burst", &[], "sleep 2").await;
    }
    let runs: Api<Run> = Api::namespaced(client.clone(), ns);
    eventually(
        Duration::from_secs(60),
        "some Runs running, some pending",
        || async {
            let list = runs.list(&ListParams::default()).await.ok()?.items;
            let phase = |p: RunPhase| {
                list.iter()
                    .filter(|r| r.status.as_ref().and_then(|s| s.phase) == Some(p))
                    .count()
            };
            (phase(RunPhase::Running) > 0
                && phase(RunPhase::Pending) + list.iter().filter(|r| r.status.is_none()).count()
                    > 0)
            .then_some(())
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
    let new_leader = wait_leader(
        &client,
        std::slice::from_ref(&standby),
        Duration::from_secs(60),
    )
    .await;
    cluster.kubectl(&["uncordon", NODE]);
    println!(
        "leader {leader} deleted mid-burst; the standby {new_leader} leads {:.1}s later",
        deleted.elapsed().as_secs_f64()
    );

    wait_phases(
        &client,
        ns,
        &names,
        RunPhase::Succeeded,
        Duration::from_secs(240),
    )
    .await;
    watch.finish().await;
    delete_runtime(&client, ns, "burst").await;
}

/// A Run whose task makes runtimed the OOM killer's choice (`oom_score_adj` 1000 on PID 1)
/// and then fills the container's memory limit: the kernel kills runtimed's container
/// (OOMKilled), the kubelet restarts it, and the new runtimed fails the Run it finds Running
/// as RuntimedRestarted.
async fn memory_limit(cluster: &Cluster) {
    let client = cluster.client().await;
    let ns = &runtime_namespace(cluster, &client, "oom").await;
    let template = json!({
        "serviceAccountName": "kubectl-kruntimes-runtimed",
        "containers": [{
            "name": "main",
            "image": BUSYBOX,
            "resources": {"limits": {"memory": "128Mi"}, "requests": {"memory": "128Mi"}},
        }],
    });
    create_runtime_from(&client, ns, "oom", 1, template, &[("runs", 1)]).await;
    let pod = wait_runtime_ready(&client, ns, "oom", 1).await.remove(0);
    create_run(
        &client,
        ns,
        "hog",
        "oom",
        &[],
        // Many small allocations, each held by a shell that sleeps: the memory cgroup runs
        // out, and runtimed (PID 1, now oom_score_adj 1000, ~30 MB) outscores every one of
        // them (995, 4 MB each; one big allocation would be chosen instead of runtimed).
        r#"echo 1000 > /proc/1/oom_score_adj && for i in $(seq 40); do sh -c 'x=$(head -c 4000000 /dev/zero | tr "\0" a); sleep 600; echo ${#x}' & done; wait"#,
    )
    .await;
    let runs: Api<Run> = Api::namespaced(client.clone(), ns);
    let status = eventually(Duration::from_secs(120), "Run hog Failed", || async {
        let status = runs.get("hog").await.ok()?.status?;
        (status.phase == Some(RunPhase::Failed)).then_some(status)
    })
    .await;
    assert_eq!(
        status.reason.as_deref(),
        Some("RuntimedRestarted"),
        "{status:?}"
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let now = pods.get(&pod.name_any()).await.unwrap();
    let container = &now.status.unwrap().container_statuses.unwrap()[0];
    assert!(container.restart_count >= 1, "{container:?}");
    let last = container
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref());
    assert_eq!(
        last.and_then(|t| t.reason.as_deref()),
        Some("OOMKilled"),
        "{container:?}"
    );
    wait_runtime_ready(&client, ns, "oom", 1).await;
    delete_runtime(&client, ns, "oom").await;
}

/// A lost node, for one Runtime Pod: the kubelet is killed and the Pod's processes are frozen
/// (cgroup freezer), so runtimed's heartbeat stops while the API server and the scheduler
/// live on. The Run Running there ends Failed as RuntimePodLost (the scheduler's
/// `--pod-lost-grace`, 40 s in deploy/). Once the kubelet is back and the Pod thaws, its
/// slot is free again: two Runs run side by side, one on each Pod.
async fn node_lost(cluster: &Cluster) {
    let client = cluster.client().await;
    let ns = &runtime_namespace(cluster, &client, "lost").await;
    // runtimed flags on a plain image: run the injected binary explicitly.
    let template = json!({
        "serviceAccountName": "kubectl-kruntimes-runtimed",
        "containers": [{
            "name": "main",
            "image": BUSYBOX,
            "command": ["/kruntimes/kubectl-kruntimes", "runtimed",
                        "--heartbeat-interval=2s", "--heartbeat-duration=6s"],
        }],
    });
    create_runtime_from(&client, ns, "lost", 2, template, &[("runs", 1)]).await;
    wait_runtime_ready(&client, ns, "lost", 2).await;
    create_run(&client, ns, "held", "lost", &[], "sleep 600").await;
    wait_phases(
        &client,
        ns,
        &["held".into()],
        RunPhase::Running,
        Duration::from_secs(60),
    )
    .await;
    let runs: Api<Run> = Api::namespaced(client.clone(), ns);
    let held = runs.get("held").await.unwrap().status.unwrap();
    let lost_pod = held.assigned_pod.clone().unwrap();
    let lost_uid = held.assigned_pod_uid.clone().unwrap();

    cluster.fault(&["kill-kubelet"]);
    cluster.fault(&["freeze-pod", &lost_uid]);
    let status = eventually(Duration::from_secs(180), "Run held Failed", || async {
        let status = runs.get("held").await.ok()?.status?;
        (status.phase == Some(RunPhase::Failed)).then_some(status)
    })
    .await;
    assert_eq!(
        status.reason.as_deref(),
        Some("RuntimePodLost"),
        "{status:?}"
    );

    cluster.fault(&["thaw-pod", &lost_uid]);
    cluster.fault(&["start-kubelet"]);
    cluster.kubectl(&[
        "wait",
        "--for=condition=Ready",
        &format!("node/{NODE}"),
        "--timeout=120s",
    ]);
    let pods = wait_runtime_ready(&client, ns, "lost", 2).await;
    assert!(pods.iter().any(|p| p.name_any() == lost_pod));
    let names: Vec<String> = vec!["after-1".into(), "after-2".into()];
    for name in &names {
        create_run(&client, ns, name, "lost", &[], "sleep 5").await;
    }
    wait_phases(
        &client,
        ns,
        &names,
        RunPhase::Succeeded,
        Duration::from_secs(120),
    )
    .await;
    let placed: BTreeSet<String> = {
        let mut placed = BTreeSet::new();
        for name in &names {
            placed.insert(
                runs.get(name)
                    .await
                    .unwrap()
                    .status
                    .unwrap()
                    .assigned_pod
                    .unwrap(),
            );
        }
        placed
    };
    assert_eq!(
        placed.len(),
        2,
        "one Run per Pod, so the lost Pod's slot was released: {placed:?}"
    );
    delete_runtime(&client, ns, "lost").await;
}

// ---------------------------------------------------------------------------------------------
// Objects

async fn runtime_namespace(cluster: &Cluster, client: &Client, prefix: &str) -> String {
    let name = format!("{prefix}-{}", std::process::id());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
    cluster.kubectl(&[
        "apply",
        "-n",
        &name,
        "-f",
        &repo().join("deploy/runtimed-rbac.yaml").to_string_lossy(),
    ]);
    name
}

async fn create_runtime(
    client: &Client,
    ns: &str,
    name: &str,
    replicas: i32,
    termination_grace: Option<i64>,
    capacity: &[(&str, u64)],
) {
    let mut template = json!({
        "serviceAccountName": "kubectl-kruntimes-runtimed",
        "containers": [{"name": "main", "image": BUSYBOX}],
    });
    if let Some(grace) = termination_grace {
        template["terminationGracePeriodSeconds"] = json!(grace);
    }
    create_runtime_from(client, ns, name, replicas, template, capacity).await
}

async fn create_runtime_from(
    client: &Client,
    ns: &str,
    name: &str,
    replicas: i32,
    template: serde_json::Value,
    capacity: &[(&str, u64)],
) {
    let capacity: BTreeMap<&str, String> =
        capacity.iter().map(|(r, n)| (*r, n.to_string())).collect();
    let runtime: Runtime = serde_json::from_value(json!({
        "apiVersion": "kruntimes.io/v1alpha1",
        "kind": "Runtime",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": replicas, "template": {"spec": template}, "capacity": {"resources": capacity}},
    }))
    .unwrap();
    Api::<Runtime>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &runtime)
        .await
        .unwrap_or_else(|e| panic!("create Runtime {ns}/{name}: {e}"));
}

async fn delete_runtime(client: &Client, ns: &str, name: &str) {
    let _ = Api::<Runtime>::namespaced(client.clone(), ns)
        .delete(name, &DeleteParams::default())
        .await;
}

async fn create_run(
    client: &Client,
    ns: &str,
    name: &str,
    runtime: &str,
    requests: &[(&str, u64)],
    script: &str,
) {
    let requests: BTreeMap<&str, String> =
        requests.iter().map(|(r, n)| (*r, n.to_string())).collect();
    let run: Run = serde_json::from_value(json!({
        "apiVersion": "kruntimes.io/v1alpha1",
        "kind": "Run",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "runtime": runtime,
            "resources": {"requests": requests},
            "mode": {"task": {"args": ["sh", "-c", script]}},
        },
    }))
    .unwrap();
    Api::<Run>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &run)
        .await
        .unwrap_or_else(|e| panic!("create Run {ns}/{name}: {e}"));
}

/// Waits until the Runtime has `n` live Pods, all Ready by the kubelet, and returns them.
async fn wait_runtime_ready(client: &Client, ns: &str, runtime: &str, n: usize) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    eventually(
        Duration::from_secs(120),
        &format!("{n} ready Pods of Runtime {ns}/{runtime}"),
        || async {
            let list = pods
                .list(&ListParams::default().labels(&format!("{LABEL_RUNTIME}={runtime}")))
                .await
                .ok()?
                .items;
            let ok = list.len() == n
                && list
                    .iter()
                    .all(|p| p.metadata.deletion_timestamp.is_none() && pod_is_ready(p));
            ok.then_some(list)
        },
    )
    .await
}

async fn wait_phases(
    client: &Client,
    ns: &str,
    names: &[String],
    phase: RunPhase,
    timeout: Duration,
) {
    let runs: Api<Run> = Api::namespaced(client.clone(), ns);
    let wanted: BTreeSet<&String> = names.iter().collect();
    eventually(
        timeout,
        &format!("{} Runs {phase:?}", names.len()),
        || async {
            let list = runs.list(&ListParams::default()).await.ok()?.items;
            let done = list
                .iter()
                .filter(|r| wanted.contains(&r.name_any()))
                .filter(|r| r.status.as_ref().and_then(|s| s.phase) == Some(phase))
                .count();
            (done == names.len()).then_some(())
        },
    )
    .await
}

/// Waits until the scheduler's Lease is held by one of `candidates` (a holder identity is the
/// Pod name plus `-<pid>`) and returns that Pod's name.
async fn wait_leader(client: &Client, candidates: &[String], timeout: Duration) -> String {
    let leases: Api<Lease> = Api::namespaced(client.clone(), SYSTEM_NS);
    eventually(
        timeout,
        &format!("a leader among {candidates:?}"),
        || async {
            let holder = leases
                .get("kruntimes-scheduler")
                .await
                .ok()?
                .spec?
                .holder_identity?;
            candidates
                .iter()
                .find(|c| holder.starts_with(&format!("{c}-")))
                .cloned()
        },
    )
    .await
}

// ---------------------------------------------------------------------------------------------
// Observation

/// Records every Run event of one Runtime and checks each against the Pods' capacity.
struct RunWatch {
    api: Api<Run>,
    config: watcher::Config,
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default, Debug, Clone)]
struct Seen {
    events: usize,
    violations: Vec<String>,
    pending_messages: BTreeSet<String>,
    /// The resourceVersion of every Run the watch holds, by UID: `finish` waits until it
    /// matches a fresh list, so the last events are checked too.
    versions: BTreeMap<String, String>,
}

impl RunWatch {
    async fn start(client: &Client, ns: &str, runtime: &str, capacity: Resources) -> Self {
        let api: Api<Run> = Api::namespaced(client.clone(), ns);
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let config = watcher::Config::default().fields(&format!("spec.runtime={runtime}"));
        let task = {
            let (seen, api, config) = (seen.clone(), api.clone(), config.clone());
            tokio::spawn(async move {
                let mut ready_tx = Some(ready_tx);
                let mut runs: HashMap<String, Run> = HashMap::new();
                let mut stream = watcher(api, config).boxed();
                while let Some(event) = stream.next().await {
                    let event = match event {
                        Ok(e) => e,
                        Err(e) => {
                            seen.lock()
                                .unwrap()
                                .violations
                                .push(format!("watch error: {e}"));
                            continue;
                        }
                    };
                    match event {
                        watcher::Event::Apply(r) | watcher::Event::InitApply(r) => {
                            runs.insert(r.uid().unwrap_or_default(), r);
                        }
                        watcher::Event::Delete(r) => {
                            runs.remove(&r.uid().unwrap_or_default());
                        }
                        watcher::Event::Init => runs.clear(),
                        watcher::Event::InitDone => {
                            if let Some(tx) = ready_tx.take() {
                                let _ = tx.send(());
                            }
                        }
                    }
                    let mut seen = seen.lock().unwrap();
                    seen.events += 1;
                    seen.versions = runs
                        .iter()
                        .map(|(uid, r)| (uid.clone(), r.resource_version().unwrap_or_default()))
                        .collect();
                    let mut usage: HashMap<&str, Resources> = HashMap::new();
                    for run in runs.values() {
                        if let Some(pod) = run.active_pod() {
                            let request =
                                parse_requests(run.spec.resources.as_ref().map(|r| &r.requests))
                                    .unwrap();
                            usage.entry(pod).or_default().add(&request);
                        }
                        let status = run.status.as_ref();
                        if status.and_then(|s| s.phase) == Some(RunPhase::Pending)
                            && let Some(m) = status.and_then(|s| s.message.clone())
                        {
                            seen.pending_messages.insert(m);
                        }
                    }
                    for (pod, used) in usage {
                        for (resource, amount) in used.iter() {
                            if amount > capacity.get(resource) {
                                let cap = capacity.get(resource);
                                seen.violations
                                    .push(format!("{pod}: {resource} {amount} > capacity {cap}"));
                            }
                        }
                    }
                }
            })
        };
        let _ = ready_rx.await;
        Self {
            api,
            config,
            seen,
            task,
        }
    }

    /// Waits until the watch has seen every Run as a fresh list has it (so every event up to
    /// the end of the scenario is checked), stops it, and panics on any overcommit or watch
    /// error.
    async fn finish(self) -> Seen {
        let list =
            ListParams::default().fields(self.config.field_selector.as_deref().unwrap_or(""));
        let listed: BTreeMap<String, String> = self
            .api
            .list(&list)
            .await
            .expect("list the Runs to catch up with")
            .items
            .iter()
            .map(|r| {
                (
                    r.uid().unwrap_or_default(),
                    r.resource_version().unwrap_or_default(),
                )
            })
            .collect();
        eventually(
            Duration::from_secs(30),
            "the Run watch to catch up with a fresh list",
            || {
                let caught_up = self.seen.lock().unwrap().versions == listed;
                async move { caught_up.then_some(()) }
            },
        )
        .await;
        self.task.abort();
        let seen = self.seen.lock().unwrap().clone();
        assert!(seen.events > 0, "the Run watch saw no event");
        assert!(
            seen.violations.is_empty(),
            "over capacity (or the watch failed) at some event:\n{}",
            seen.violations.join("\n")
        );
        seen
    }
}

/// Polls `f` until it returns `Some`, or panics naming what it waited for.
async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// The cluster

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn script() -> PathBuf {
    repo().join("tests/cluster/cluster.sh")
}

/// One cluster per machine: held for the whole run of this binary.
fn machine_lock() -> std::fs::File {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/var/tmp/kruntimes-cluster.lock")
        .expect("open /var/tmp/kruntimes-cluster.lock");
    kruntimes::dev::lock::flock(&file).expect("flock /var/tmp/kruntimes-cluster.lock");
    file
}

struct Cluster {
    kubeconfig: PathBuf,
    kubectl: PathBuf,
}

impl Cluster {
    fn up() -> Result<Self, String> {
        let out = Command::new("bash")
            .arg(script())
            .arg("up")
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script().display()))?;
        if !out.status.success() {
            return Err(format!("{} up failed ({})", script().display(), out.status));
        }
        let kubeconfig = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let bin = Command::new("bash")
            .arg(repo().join("tests/cluster/build.sh"))
            .output()
            .map_err(|e| e.to_string())?;
        let kubectl = PathBuf::from(String::from_utf8_lossy(&bin.stdout).trim()).join("kubectl");
        Ok(Self {
            kubeconfig,
            kubectl,
        })
    }

    fn down() {
        let status = Command::new("bash").arg(script()).arg("down").status();
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!("warning: {} down failed: {status:?}", script().display());
        }
    }

    async fn client(&self) -> Client {
        kruntimes::dev::controlplane::client_for(&self.kubeconfig)
            .await
            .unwrap_or_else(|e| panic!("cluster kubeconfig unusable: {e}"))
    }

    /// Runs kubectl and returns its stdout; panics with its stderr when it fails.
    fn kubectl(&self, args: &[&str]) -> String {
        let out = Command::new(&self.kubectl)
            .env("KUBECONFIG", &self.kubeconfig)
            .args(args)
            .output()
            .expect("run kubectl");
        assert!(
            out.status.success(),
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// kubectl's stdout, or empty when it fails (for polling).
    fn kubectl_raw(&self, args: &[&str]) -> String {
        Command::new(&self.kubectl)
            .env("KUBECONFIG", &self.kubeconfig)
            .args(args)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// `cluster.sh ARGS` (kill-kubelet, start-kubelet, freeze-pod UID, thaw-pod UID).
    fn fault(&self, args: &[&str]) {
        let out = Command::new("bash")
            .arg(script())
            .args(args)
            .output()
            .expect("run cluster.sh");
        assert!(
            out.status.success(),
            "cluster.sh {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// What a failed scenario left: Pods, Runs, and the scheduler's last log lines.
    fn diagnose(&self) {
        println!(
            "{}",
            self.kubectl_raw(&["get", "pods,runs,runtimes", "-A", "-o", "wide"])
        );
        for pod in self
            .kubectl_raw(&["-n", SYSTEM_NS, "get", "pods", "-o", "name"])
            .lines()
        {
            let log = self.kubectl_raw(&["-n", SYSTEM_NS, "logs", pod, "--tail=30"]);
            println!("--- {pod}\n{log}");
        }
    }
}
