//! Sizing a Runtime as a Deployment is sized, on the single-node cluster: `kubectl scale`
//! through the Runtime's `/scale` subresource, then a HorizontalPodAutoscaler of the real
//! kube-controller-manager, which reads and writes the same subresource. The HPA's floor
//! (`minReplicas: 3`) is above the Runtime's replicas, so the autoscaler raises it without
//! needing a metrics server; the Runtime controller makes the Pods, all Ready.

use std::time::Duration;

use kube::api::Api;

use super::harness::Cluster;
use super::objects::{
    busybox, create_runtime, delete_runtime, runtime_namespace, wait_runtime_ready,
};
use super::support::world::eventually;
use kruntimes::api::Runtime;

pub async fn kubectl_scale_and_an_hpa_size_a_runtime(cluster: &Cluster) {
    let ns = &runtime_namespace(cluster, "scale").await;
    create_runtime(ns, "sized", 1, busybox(), &[("runs", 1)]).await;
    wait_runtime_ready(ns, "sized", 1).await;

    let said = cluster.kubectl(&["scale", "-n", &ns.name, "runtime/sized", "--replicas", "2"]);
    assert!(said.contains("runtime.kruntimes.io/sized scaled"), "{said}");
    wait_runtime_ready(ns, "sized", 2).await;
    let selector = cluster.kubectl(&[
        "get",
        "--raw",
        &format!(
            "/apis/kruntimes.io/v1alpha1/namespaces/{}/runtimes/sized/scale",
            ns.name
        ),
    ]);
    assert!(
        selector.contains("kruntimes.io/runtime=sized"),
        "the scale's status names the Pods by their label selector: {selector}"
    );

    let hpa = format!(
        r#"{{"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {{"name": "sized", "namespace": "{ns}"}},
            "spec": {{"scaleTargetRef": {{"apiVersion": "kruntimes.io/v1alpha1", "kind": "Runtime", "name": "sized"}},
                      "minReplicas": 3, "maxReplicas": 4,
                      "metrics": [{{"type": "Resource", "resource": {{"name": "cpu",
                                    "target": {{"type": "Utilization", "averageUtilization": 80}}}}}}]}}}}"#,
        ns = ns.name
    );
    let path = std::env::temp_dir().join(format!("{}-hpa.json", ns.name));
    std::fs::write(&path, hpa).unwrap();
    cluster.kubectl(&["apply", "-f", path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);

    let runtimes: Api<Runtime> = ns.api();
    eventually(
        Duration::from_secs(120),
        "the HPA raises spec.replicas to its minReplicas",
        async || {
            let rt = runtimes.get("sized").await.map_err(|e| e.to_string())?;
            match rt.spec.replicas {
                3 => Ok(()),
                other => Err(format!("spec.replicas {other}")),
            }
        },
    )
    .await;
    let pods = wait_runtime_ready(ns, "sized", 3).await;
    let status = cluster.kubectl(&[
        "get",
        "hpa",
        "sized",
        "-n",
        &ns.name,
        "-o",
        "jsonpath={.status.desiredReplicas}",
    ]);
    assert_eq!(status.trim(), "3", "the HPA's own status");
    eprintln!(
        "scale: kubectl scale to 2, then an HPA to 3: {} Pods Ready",
        pods.len()
    );
    cluster.kubectl(&["delete", "hpa", "sized", "-n", &ns.name]);
    delete_runtime(ns, "sized").await;
}
