//! Artifacts on the single-node cluster: a Runtime whose `spec.artifactStore` names a real
//! PersistentVolumeClaim (a hostPath PersistentVolume bound by kube-controller-manager) gets it
//! mounted for runtimed; a Run's artifact lands on that volume, `kubectl kruntimes artifacts
//! --download` reads it back through the gateway's aggregated API, and deleting the Run removes
//! it from the volume. The same with an S3 store: the tests' S3 server on the node, the
//! credentials from a Secret.

use std::time::Duration;

use kube::ResourceExt as _;
use kube::api::DeleteParams;

use super::harness::Cluster;
use super::objects::{busybox, create_run, delete_runtime, runtime_namespace, wait_phases};
use super::support::s3::S3Server;
use super::support::world::{TestNs, create_in};
use kruntimes::api::RunPhase;
use kruntimes::testing::runtime;

/// The node's address on the cluster's bridge (`tests/cluster/cluster.sh`'s `NODE_IP`): what
/// a Pod reaches the host at.
pub const NODE_IP: &str = "10.244.0.1";

/// Runtime `arts` (one busybox Pod, runtimed injected, artifact GC every 2 s) with
/// `spec.artifactStore` `store`, and its Run `writes` that leaves `out.txt` (`data`) in
/// `$KRUNTIME_ARTIFACTS_DIR`, succeeded. Returns the Run's UID.
async fn runtime_with_a_run_that_stores(ns: &TestNs, store: serde_json::Value) -> String {
    let mut template = busybox();
    template.containers[0].command = Some(
        [
            "/kruntimes/kubectl-kruntimes",
            "runtimed",
            "--artifact-gc-interval=2s",
        ]
        .map(String::from)
        .to_vec(),
    );
    let mut object = runtime("arts").replicas(1).capacity(&[("runs", 2)]).build();
    object.spec.template.spec = Some(template);
    object.spec.artifact_store = Some(store);
    create_in(ns, object).await;
    super::objects::wait_runtime_ready(ns, "arts", 1).await;
    create_run(
        ns,
        "writes",
        "arts",
        &[],
        "echo data > \"$KRUNTIME_ARTIFACTS_DIR/out.txt\"",
    )
    .await;
    wait_phases(
        ns,
        &["writes".into()],
        RunPhase::Succeeded,
        Duration::from_secs(60),
    )
    .await;
    ns.runs().get("writes").await.unwrap().uid().unwrap()
}

/// `kubectl kruntimes artifacts run/writes --download DIR`: the artifact `name` as written there.
fn downloaded(cluster: &Cluster, ns: &TestNs, name: &str) -> String {
    let out_dir = tempfile::tempdir().unwrap();
    let out = cluster.kruntimes(&[
        "artifacts",
        "run/writes",
        "-n",
        &ns.name,
        "--download",
        &out_dir.path().to_string_lossy(),
    ]);
    assert!(
        out.status.success(),
        "artifacts --download: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(out_dir.path().join(name)).unwrap()
}

pub async fn stored_on_a_claim_downloaded_and_removed(cluster: &Cluster) {
    let ns = &runtime_namespace(cluster, "arts").await;
    let host = std::path::PathBuf::from(format!("/var/tmp/kruntimes-artifacts-{}", ns.name));
    std::fs::create_dir_all(&host).unwrap();
    let pv = format!("kruntimes-{}", ns.name);
    let manifest = format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {pv}}}\nspec:\n  capacity: {{storage: 1Gi}}\n  accessModes: [ReadWriteOnce]\n  persistentVolumeReclaimPolicy: Retain\n  storageClassName: \"\"\n  hostPath: {{path: {}, type: Directory}}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: arts, namespace: {}}}\nspec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: \"\"\n  volumeName: {pv}\n  resources: {{requests: {{storage: 1Gi}}}}\n",
        host.display(),
        ns.name
    );
    let file = std::env::temp_dir().join(format!("{pv}.yaml"));
    std::fs::write(&file, manifest).unwrap();
    cluster.kubectl(&["apply", "-f", &file.to_string_lossy()]);
    cluster.kubectl(&[
        "-n",
        &ns.name,
        "wait",
        "--for=jsonpath={.status.phase}=Bound",
        "pvc/arts",
        "--timeout=60s",
    ]);

    let uid = runtime_with_a_run_that_stores(
        ns,
        serde_json::json!({
            "driver": "filesystem",
            "filesystem": {"volumeClaimName": "arts"},
        }),
    )
    .await;
    let stored = host.join(format!("namespaces/{}/runs/{uid}/out.txt", ns.name));
    assert_eq!(
        std::fs::read_to_string(&stored).unwrap(),
        "data\n",
        "on the claim's volume"
    );

    assert_eq!(
        downloaded(cluster, ns, "out.txt"),
        "data\n",
        "read back through the gateway"
    );

    ns.runs()
        .delete("writes", &DeleteParams::default())
        .await
        .unwrap();
    super::support::world::gone(
        Duration::from_secs(60),
        "the deleted Run's artifact to leave the volume",
        &[stored],
    )
    .await;
    delete_runtime(ns, "arts").await;
    cluster.kubectl(&["-n", &ns.name, "delete", "pvc", "arts", "--wait=false"]);
    cluster.kubectl(&["delete", "pv", &pv, "--wait=false"]);
}

/// The Secret `s3-creds` in `ns` with `server`'s credentials as its keys.
pub fn apply_credentials_secret(cluster: &Cluster, ns: &TestNs, server: &S3Server) {
    let mut secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: s3-creds, namespace: {}}}\nstringData:\n",
        ns.name
    );
    for (key, value) in server.credentials() {
        secret.push_str(&format!("  {key}: {value}\n"));
    }
    let file = std::env::temp_dir().join(format!("kruntimes-{}-secret.yaml", ns.name));
    std::fs::write(&file, secret).unwrap();
    cluster.kubectl(&["apply", "-f", &file.to_string_lossy()]);
    let _ = std::fs::remove_file(&file);
}

/// A Runtime with an S3 artifact store on the real cluster: the Runtime controller hands
/// runtimed the store's fields and its credentials Secret (a volume the kubelet mounts in runtimed's container),
/// runtimed in the image uploads a Run's artifacts to the tests' S3 server on the node's bridge
/// address, `artifacts --download` reads them back through the gateway (runtimed reading the
/// bucket), and deleting the Run removes its objects.
pub async fn uploaded_to_s3_downloaded_and_removed(cluster: &Cluster) {
    let ns = &runtime_namespace(cluster, "arts-s3").await;
    let server = S3Server::start_on(NODE_IP, "runs").await;
    apply_credentials_secret(cluster, ns, &server);

    let store = serde_json::json!({
        "driver": "s3",
        "s3": {
            "bucket": server.bucket,
            "prefix": "cluster",
            "endpoint": server.endpoint(),
            "forcePathStyle": true,
            "credentialsSecretName": "s3-creds",
        },
    });
    let uid = runtime_with_a_run_that_stores(ns, store).await;
    let prefix = format!("cluster/namespaces/{}/runs/{uid}", ns.name);
    assert_eq!(
        server.get(&format!("{prefix}/out.txt")).await.as_deref(),
        Some(&b"data\n"[..]),
        "in the bucket"
    );

    assert_eq!(
        downloaded(cluster, ns, "out.txt"),
        "data\n",
        "read back from the bucket through the gateway"
    );

    ns.runs()
        .delete("writes", &DeleteParams::default())
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let left = server.keys(&prefix).await;
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the deleted Run's objects were not removed within 60 s: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    delete_runtime(ns, "arts").await;
}
