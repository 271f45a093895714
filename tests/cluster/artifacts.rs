//! Artifacts on the single-node cluster: a Runtime whose `spec.artifactStore` names a real
//! PersistentVolumeClaim (a hostPath PersistentVolume bound by kube-controller-manager) gets it
//! mounted for runtimed; a Run's artifact lands on that volume, `kubectl kruntimes artifacts
//! --download` reads it back through the API server's Pod proxy, and deleting the Run removes
//! it from the volume.

use std::time::Duration;

use kube::ResourceExt as _;
use kube::api::DeleteParams;

use crate::harness::Cluster;
use crate::objects::{busybox, create_run, delete_runtime, runtime_namespace, wait_phases};
use crate::support::world::create_in;
use kruntimes::api::RunPhase;
use kruntimes::testing::runtime;

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
    object.spec.artifact_store = Some(serde_json::json!({
        "driver": "filesystem",
        "filesystem": {"volumeClaimName": "arts"},
    }));
    create_in(ns, object).await;
    crate::objects::wait_runtime_ready(ns, "arts", 1).await;
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
    let uid = ns.runs().get("writes").await.unwrap().uid().unwrap();
    let stored = host.join(format!("namespaces/{}/runs/{uid}/out.txt", ns.name));
    assert_eq!(
        std::fs::read_to_string(&stored).unwrap(),
        "data\n",
        "on the claim's volume"
    );

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
    assert_eq!(
        std::fs::read_to_string(out_dir.path().join("out.txt")).unwrap(),
        "data\n",
        "read back through the Pod proxy"
    );

    ns.runs()
        .delete("writes", &DeleteParams::default())
        .await
        .unwrap();
    crate::support::world::gone(
        Duration::from_secs(60),
        "the deleted Run's artifact to leave the volume",
        &[stored],
    )
    .await;
    delete_runtime(ns, "arts").await;
    cluster.kubectl(&["-n", &ns.name, "delete", "pvc", "arts", "--wait=false"]);
    cluster.kubectl(&["delete", "pv", &pv, "--wait=false"]);
}
