//! The Go project's Bash runtime image (`tests/cluster/oci.py bash-runtime`: its server, built
//! unchanged, with bash, as user 65532) as a runtime-server template on the real cluster, with
//! runtimed injected as the sidecar: a hostile task there cannot reach the S3 store's keys
//! runtimed holds by any path it has, nor finds runtimed's own files on the workspace, and a
//! server that listens late still makes its Pod
//! Ready, as soon as it listens.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kube::ResourceExt as _;

use super::artifacts::{NODE_IP, apply_credentials_secret};
use super::harness::Cluster;
use super::objects::{
    create_run, delete_runtime, runtime_namespace, wait_phases, wait_runtime_ready,
};
use super::support::s3::{S3Server, SECRET_KEY};
use super::support::world::create_in;
use kruntimes::api::RunPhase;
use kruntimes::testing::runtime;

/// The image (`tests/cluster/cluster.sh`'s `BASH_RUNTIME_IMAGE`).
const BASH_RUNTIME: &str = "kruntimes-test/bash-runtime:1";

/// The template: the image as the `runtime` container, as the Go project's Bash Runtime is.
fn bash_runtime(command: Option<&[&str]>) -> PodSpec {
    PodSpec {
        containers: vec![Container {
            name: kruntimes::runtime::pod::RUNTIME_CONTAINER.into(),
            image: Some(BASH_RUNTIME.into()),
            command: command.map(|c| c.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Everything a task in the `runtime` container can read that might hold runtimed's keys:
/// every process's environment (the Pod shares one process namespace, so runtimed's own is
/// listed too), its own environment, runtimed's root and credentials mount through `/proc`,
/// the path the credentials are mounted at in runtimed's container, every `AWS_*` file on the
/// container's file system, and the shared workspace. Printed to the Run's log.
const SPY: &str = r#"
for p in /proc/[0-9]*; do
  echo "== $p $(cat $p/cmdline 2>/dev/null | tr '\0' ' ')"
  tr '\0' '\n' < $p/environ 2>&1
  cat $p/root/var/run/secrets/kruntimes.io/artifact-store/* 2>&1
done
env
cat /var/run/secrets/kruntimes.io/artifact-store/* 2>&1
find / -xdev -name 'AWS_*' -exec cat {} + 2>/dev/null
grep -rs '' /workspace 2>/dev/null | head -c 1000000
test -e /workspace/.kruntimes || echo no-runtimed-files-on-the-workspace
echo data > "$KRUNTIME_ARTIFACTS_DIR/out.txt"
echo spy-done
"#;

/// A Runtime of the Bash runtime image with an S3 store and its credentials Secret, in a Pod
/// that shares one process namespace (the hardest case: the task and runtimed are both user
/// 65532 and see each other's processes). A task runs [`SPY`]: the Run succeeds, its artifact
/// reaches the bucket (runtimed holds the keys), and neither its log nor its outputs hold the
/// secret key.
pub async fn a_task_cannot_reach_the_s3_keys(cluster: &Cluster) {
    let ns = &runtime_namespace(cluster, "bash-s3").await;
    let server = S3Server::start_on(NODE_IP, "runs").await;
    apply_credentials_secret(cluster, ns, &server);
    let mut template = bash_runtime(None);
    template.share_process_namespace = Some(true);
    let mut object = runtime("spy").replicas(1).capacity(&[("runs", 1)]).build();
    object.spec.template.spec = Some(template);
    object.spec.artifact_store = Some(serde_json::json!({
        "driver": "s3",
        "s3": {
            "bucket": server.bucket, "prefix": "spy", "endpoint": server.endpoint(),
            "forcePathStyle": true, "credentialsSecretName": "s3-creds",
        },
    }));
    create_in(ns, object).await;
    let pods = wait_runtime_ready(ns, "spy", 1).await;
    let containers: Vec<String> = pods[0]
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(containers, ["runtime", "runtimed"]);

    create_run(ns, "spy", "spy", &[], SPY).await;
    wait_phases(
        ns,
        &["spy".into()],
        RunPhase::Succeeded,
        Duration::from_secs(90),
    )
    .await;
    let run = ns.runs().get("spy").await.unwrap();
    let uid = run.uid().unwrap();
    assert_eq!(
        server
            .get(&format!("spy/namespaces/{}/runs/{uid}/out.txt", ns.name))
            .await
            .as_deref(),
        Some(&b"data\n"[..]),
        "runtimed uploaded the artifact with the Secret's keys"
    );
    let out = cluster.kruntimes(&["logs", "run/spy", "-n", &ns.name]);
    assert!(
        out.status.success(),
        "logs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(log.contains("spy-done"), "the spy ran to its end: {log}");
    assert!(
        log.contains("no-runtimed-files-on-the-workspace"),
        "runtimed's logs are on its own volume, not the workspace: {log}"
    );
    assert!(
        log.contains("kubectl-kruntimes runtimed"),
        "the spy saw runtimed's process: {log}"
    );
    assert!(
        !log.contains(SECRET_KEY),
        "the task read runtimed's secret key: {log}"
    );
    let outputs = serde_json::to_string(&run.status.unwrap().outputs).unwrap();
    assert!(!outputs.contains(SECRET_KEY), "{outputs}");
    // What the task got of runtimed's own process (its environment, its mounts by /proc).
    let of_runtimed: Vec<&str> = log
        .lines()
        .skip_while(|l| !(l.starts_with("== ") && l.contains("kubectl-kruntimes runtimed")))
        .take_while(|l| !l.starts_with("== /proc/") || l.contains("kubectl-kruntimes runtimed"))
        .take(12)
        .collect();
    eprintln!(
        "bash runtime spy: {} bytes of what the task could read, no key among them; of runtimed's process:\n  {}",
        log.len(),
        of_runtimed.join("\n  ")
    );
    delete_runtime(ns, "spy").await;
}

/// A Runtime of the Bash runtime image whose server starts listening 2 s after its container
/// starts (the Go project's Python server takes about a second): the Pod becomes Ready once
/// the server listens (runtimed's health watcher wakes its loop; before, `/readyz` answered
/// 503 until some Run or Pod event came, for minutes), and a Run placed there succeeds. The
/// delay from the server's first line to the Pod's Ready condition is reported.
pub async fn a_server_that_listens_late_makes_its_pod_ready(cluster: &Cluster) {
    let ns = &runtime_namespace(cluster, "bash-late").await;
    let template = bash_runtime(Some(&["sh", "-c", "sleep 2; exec /bash-runtime"]));
    super::objects::create_runtime(ns, "late", 1, template, &[("runs", 1)]).await;
    let pods: Vec<Pod> = wait_runtime_ready(ns, "late", 1).await;
    let pod = &pods[0];
    let ready_at = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| c.last_transition_time.clone())
        .expect("a Ready condition with its time")
        .0;
    let log = cluster.kubectl_raw(&[
        "-n",
        &ns.name,
        "logs",
        &pod.name_any(),
        "-c",
        "runtime",
        "--timestamps",
    ]);
    let listening = log
        .lines()
        .find(|l| l.contains("Bash runtime listening"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .unwrap_or_else(|| panic!("the server's listening line: {log}"));
    eprintln!(
        "late runtime server: Pod Ready {:.1} s after the server listened (the kubelet probes every 2 s; Ready's time is in whole seconds)",
        (ready_at.as_second() as f64) - (listening.as_millisecond() as f64 / 1000.0)
    );
    create_run(ns, "after", "late", &[], "echo ok").await;
    wait_phases(
        ns,
        &["after".into()],
        RunPhase::Succeeded,
        Duration::from_secs(60),
    )
    .await;
    delete_runtime(ns, "late").await;
}
