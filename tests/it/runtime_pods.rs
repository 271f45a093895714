//! The Runtime controller on the real control plane, when the API server refuses its Pods
//! (here: a ResourceQuota of no Pods): the Runtime says why (condition
//! `ReplicaFailure=True/FailedCreate` with the API server's message, as a Deployment's
//! ReplicaSet does, and a Warning Event `FailedCreate`), `kubectl kruntimes status` shows it,
//! and once the cause is gone the Pods are created and the condition goes. The same for a Pod
//! that was created but cannot run (its image cannot be pulled), with `explain` showing it too.
//! `kubectl scale` sizes a Runtime through its `/scale` subresource, and `kubectl get runs`
//! shows the Reason and Attempt columns and selects on `status.phase`.

use testkit as support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ResourceQuota, ResourceQuotaSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{DeleteParams, PostParams};

use kruntimes::api::{CONDITION_REPLICA_FAILURE, Runtime};
use kruntimes::testing::runtime;
use support::world::Create as _;
use support::world::{SchedulerProcess, TestNs, create_in, eventually};

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_whose_pods_are_refused_says_why_and_recovers() {
    let ns = TestNs::new("replicafail").await;
    let _scheduler = SchedulerProcess::start(&ns.name, 2, None, "replicafail").await;
    // The API server's ResourceQuota admission refuses every Pod of the namespace.
    let quota = ResourceQuota {
        metadata: kube::api::ObjectMeta {
            name: Some("no-pods".into()),
            ..Default::default()
        },
        spec: Some(ResourceQuotaSpec {
            hard: Some([("pods".to_string(), Quantity("0".into()))].into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let quotas = ns.api::<ResourceQuota>();
    quotas.create(&PostParams::default(), &quota).await.unwrap();
    // No kube-controller-manager here computes the quota's usage: set it, as its quota
    // controller would, and wait until the admission plugin enforces it.
    let status = serde_json::json!({"status": {"hard": {"pods": "0"}, "used": {"pods": "0"}}});
    quotas
        .patch_status(
            "no-pods",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&status),
        )
        .await
        .unwrap();
    let probe: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "quota-probe"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap();
    let pods = ns.api::<k8s_openapi::api::core::v1::Pod>();
    eventually(
        Duration::from_secs(30),
        "the quota to be enforced",
        async || match pods.create(&PostParams::default(), &probe).await {
            Err(kube::Error::Api(s)) if s.code == 403 => Ok(()),
            Ok(_) => {
                let _ = pods.delete("quota-probe", &DeleteParams::default()).await;
                Err("a Pod was admitted".to_string())
            }
            Err(e) => Err(e.to_string()),
        },
    )
    .await;
    let object = runtime("refused")
        .replicas(2)
        .capacity(&[("runs", 1)])
        .build();
    create_in(&ns, object).await;

    let runtimes = ns.api::<Runtime>();
    let failure = |r: &Runtime| {
        r.status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_REPLICA_FAILURE)
            .cloned()
    };
    let condition = eventually(
        Duration::from_secs(30),
        "the Runtime's ReplicaFailure condition",
        async || {
            let r = runtimes.get("refused").await.map_err(|e| e.to_string())?;
            failure(&r).ok_or_else(|| format!("{:?}", r.status))
        },
    )
    .await;
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("True", "FailedCreate")
    );
    let says_quota = |text: &str| text.contains("forbidden") && text.contains("no-pods");
    assert!(
        says_quota(&condition.message),
        "the API server's message: {}",
        condition.message
    );
    let events = ns.events_of("refused").await;
    assert!(
        events
            .iter()
            .any(|(reason, note, _)| reason == "FailedCreate" && says_quota(note)),
        "{events:?}"
    );
    let out = support::kruntimes()
        .args(["status", "refused", "-n", &ns.name])
        .output()
        .unwrap();
    let shown = support::ok(&out, "kubectl kruntimes status");
    assert!(
        shown.contains("Failing:") && shown.contains("0/2 Runtime Pods: ") && says_quota(&shown),
        "{shown}"
    );

    // The cause goes: the Pods come (within the backoff), and so does the condition.
    quotas
        .delete("no-pods", &DeleteParams::default())
        .await
        .unwrap();
    ns.runtime_pods("refused", 2).await;
    eventually(
        Duration::from_secs(30),
        "the ReplicaFailure condition to go",
        async || {
            let r = runtimes.get("refused").await.map_err(|e| e.to_string())?;
            match failure(&r) {
                None => Ok(()),
                Some(c) => Err(format!("{c:?}")),
            }
        },
    )
    .await;
}

/// A Runtime Pod that was created but cannot run (its image cannot be pulled, as the kubelet
/// reports it in the Pod's status; here written as the kubelet would, there is none) makes
/// the Runtime say so too: `ReplicaFailure=True` with the kubelet's reason and message, a
/// Warning Event, and `status` and `explain` show it; once the container runs, it goes.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_whose_pod_cannot_pull_its_image_says_why_and_recovers() {
    let ns = TestNs::new("stuckpod").await;
    let _scheduler = SchedulerProcess::start(&ns.name, 2, None, "stuckpod").await;
    let object = runtime("stuck")
        .replicas(1)
        .capacity(&[("runs", 1)])
        .build();
    create_in(&ns, object).await;
    let pod = ns.runtime_pods("stuck", 1).await.remove(0);
    let name = kube::ResourceExt::name_any(&pod);
    let container = pod.spec.as_ref().unwrap().containers[0].name.clone();
    let pods = ns.api::<k8s_openapi::api::core::v1::Pod>();
    let kubelet_says = |state: serde_json::Value| {
        serde_json::json!({"status": {"containerStatuses": [{
            "name": container, "image": "python:3.12", "imageID": "", "ready": false,
            "restartCount": 0, "state": state,
        }]}})
    };
    let back_off = kubelet_says(serde_json::json!({"waiting": {
        "reason": "ImagePullBackOff",
        "message": "Back-off pulling image \"python:3.12\"",
    }}));
    pods.patch_status(
        &name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&back_off),
    )
    .await
    .unwrap();
    let runtimes = ns.api::<Runtime>();
    let condition = eventually(
        Duration::from_secs(30),
        "the Runtime's ReplicaFailure condition",
        async || {
            let r = runtimes.get("stuck").await.map_err(|e| e.to_string())?;
            kruntimes::api::replica_failure(&r).ok_or_else(|| format!("{:?}", r.status))
        },
    )
    .await;
    assert_eq!(
        condition,
        format!(
            "pod {name}: container {container}: ImagePullBackOff: Back-off pulling image \"python:3.12\""
        )
    );
    let events = ns.events_of("stuck").await;
    assert!(
        events
            .iter()
            .any(|(reason, note, _)| reason == "ImagePullBackOff" && note.contains(&name)),
        "{events:?}"
    );
    let out = support::kruntimes()
        .args(["status", "stuck", "-n", &ns.name])
        .output()
        .unwrap();
    let shown = support::ok(&out, "kubectl kruntimes status");
    assert!(
        shown.contains("Failing:") && shown.contains("ImagePullBackOff"),
        "{shown}"
    );
    kruntimes::testing::run("waits")
        .runtime("stuck")
        .create(&ns)
        .await;
    let out = support::kruntimes()
        .args(["explain", "run/waits", "-n", &ns.name])
        .output()
        .unwrap();
    let explained = support::ok(&out, "kubectl kruntimes explain");
    assert!(
        explained.contains("Its Pods are failing: pod ") && explained.contains("ImagePullBackOff"),
        "{explained}"
    );

    let running =
        kubelet_says(serde_json::json!({"running": {"startedAt": "2026-12-05T00:00:00Z"}}));
    pods.patch_status(
        &name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&running),
    )
    .await
    .unwrap();
    eventually(
        Duration::from_secs(30),
        "the ReplicaFailure condition to go",
        async || {
            let r = runtimes.get("stuck").await.map_err(|e| e.to_string())?;
            match kruntimes::api::replica_failure(&r) {
                None => Ok(()),
                Some(m) => Err(m),
            }
        },
    )
    .await;
}

/// A changed template reaches the Runtime's Pods: they are replaced one at a time, each
/// drained first (the idle one before the busy one), and a Pod still running a Run is not
/// deleted until that Run has ended; the Run succeeds, and the Runtime counts its updated Pods.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_template_replaces_the_pods_one_at_a_time_after_their_runs() {
    use k8s_openapi::api::core::v1::Pod;
    use kruntimes::api::{ANNOTATION_SCALE_DOWN, RunPhase};
    use kruntimes::runtime::rollout::ANNOTATION_REVISION;
    use kube::ResourceExt as _;

    let ns = TestNs::new("rollout").await;
    let _scheduler = SchedulerProcess::start(&ns.name, 2, None, "rollout").await;
    let mut pool =
        support::pool::Pool::start(&ns, "roll", 2, &[("runs", 1)], &support::pool::HEARTBEAT).await;
    pool.held("long").create(&ns).await;
    let busy = ns
        .wait_runs(Duration::from_secs(60), "the held Run to run", |runs| {
            runs.iter()
                .find(|r| r.phase() == RunPhase::Running)
                .and_then(|r| r.status.as_ref()?.assigned_pod.clone())
        })
        .await;
    let pods = ns.api::<Pod>();
    // When the busy Pod's deletion is first seen, by a watch that runs from now on.
    let deleted_at: std::sync::Arc<std::sync::Mutex<Option<std::time::Instant>>> =
        Default::default();
    let watch = {
        use futures::StreamExt as _;
        let (pods, deleted_at) = (pods.clone(), deleted_at.clone());
        let config =
            kube::runtime::watcher::Config::default().fields(&format!("metadata.name={busy}"));
        tokio::spawn(async move {
            let mut events = kube::runtime::watcher(pods, config).boxed();
            while let Some(event) = events.next().await {
                let gone = match event {
                    Ok(kube::runtime::watcher::Event::Delete(_)) => true,
                    Ok(kube::runtime::watcher::Event::Apply(p))
                    | Ok(kube::runtime::watcher::Event::InitApply(p)) => {
                        p.metadata.deletion_timestamp.is_some()
                    }
                    _ => false,
                };
                if gone {
                    deleted_at
                        .lock()
                        .unwrap()
                        .get_or_insert_with(std::time::Instant::now);
                }
            }
        })
    };
    let revision = |p: &Pod| p.annotations().get(ANNOTATION_REVISION).cloned();
    let old: Vec<Pod> = ns.runtime_pods("roll", 2).await;
    let old_revision = revision(&old[0]);
    assert!(old_revision.is_some() && old.iter().all(|p| revision(p) == old_revision));

    // The template changes.
    let patch =
        serde_json::json!({"spec": {"template": {"metadata": {"labels": {"tier": "gold"}}}}});
    ns.api::<Runtime>()
        .patch(
            "roll",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    // The idle Pod goes first and is replaced; the busy one is drained, not deleted.
    let fresh = eventually(
        Duration::from_secs(30),
        "a Pod of the new template",
        async || {
            let listed = pods
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            listed
                .items
                .into_iter()
                .find(|p| {
                    revision(p).is_some()
                        && revision(p) != old_revision
                        && p.metadata.deletion_timestamp.is_none()
                })
                .ok_or_else(|| "none yet".to_string())
        },
    )
    .await;
    assert_eq!(fresh.labels().get("tier").map(String::as_str), Some("gold"));
    pool.host(&fresh).await;
    let drained = eventually(
        Duration::from_secs(30),
        "the busy Pod to be drained",
        async || {
            let p = pods.get(&busy).await.map_err(|e| e.to_string())?;
            p.annotations()
                .contains_key(ANNOTATION_SCALE_DOWN)
                .then_some(p)
                .ok_or_else(|| "not drained yet".to_string())
        },
    )
    .await;
    assert!(
        drained.metadata.deletion_timestamp.is_none(),
        "deleted under its Run"
    );
    let run = ns.runs().get("long").await.unwrap();
    assert_eq!(run.phase(), RunPhase::Running, "{:?}", run.status);

    // Two looks of the controller at the busy Pod before its Run ends, so that deleting it
    // under the Run would be seen. Nothing it does to a Pod it keeps is observable, so each
    // look is made so: a change of the Runtime's spec that no Pod's template depends on (one
    // more advertised resource) bumps its generation, and its status says it saw that
    // generation (observedGeneration) only at the end of a whole pass over its Pods, after
    // any deletion that pass made.
    for look in 1..=2 {
        let patch = serde_json::json!({"spec": {"capacity": {"resources": {
            "example.com/look": look.to_string()
        }}}});
        let generation = ns
            .api::<Runtime>()
            .patch(
                "roll",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .unwrap()
            .metadata
            .generation;
        let what = format!("the Runtime controller's look {look}");
        eventually(Duration::from_secs(30), &what, async || {
            let r = ns
                .api::<Runtime>()
                .get("roll")
                .await
                .map_err(|e| e.to_string())?;
            match r.status.and_then(|s| s.observed_generation) {
                seen if seen == generation => Ok(()),
                seen => Err(format!(
                    "observedGeneration {seen:?}, generation {generation:?}"
                )),
            }
        })
        .await;
        let kept = pods.get_opt(&busy).await.unwrap();
        assert!(
            kept.is_some_and(|p| p.metadata.deletion_timestamp.is_none()),
            "the busy Pod was deleted under its Run at look {look}"
        );
    }
    let run = ns.runs().get("long").await.unwrap();
    assert_eq!(run.phase(), RunPhase::Running, "{:?}", run.status);
    // Its Run ends: then it goes, and its replacement comes.
    let opened = std::time::Instant::now();
    pool.open("long");
    let runs = ns
        .wait_runs(Duration::from_secs(60), "the held Run to succeed", |runs| {
            runs.iter()
                .find(|r| r.phase().is_terminal())
                .map(|r| r.phase())
        })
        .await;
    assert_eq!(runs, RunPhase::Succeeded);
    let replacement = eventually(
        Duration::from_secs(60),
        "the second Pod of the new template",
        async || {
            let listed = pods
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let new: Vec<Pod> = listed
                .items
                .into_iter()
                .filter(|p| {
                    revision(p) == revision(&fresh) && p.metadata.deletion_timestamp.is_none()
                })
                .collect();
            (new.len() == 2)
                .then(|| {
                    new.into_iter()
                        .find(|p| p.name_any() != fresh.name_any())
                        .unwrap()
                })
                .ok_or_else(|| "not yet".to_string())
        },
    )
    .await;
    pool.host(&replacement).await;
    let deleted = deleted_at
        .lock()
        .unwrap()
        .expect("the busy Pod was deleted");
    watch.abort();
    assert!(
        deleted > opened,
        "the busy Pod was deleted {:?} before its Run could end",
        opened - deleted
    );
    eventually(Duration::from_secs(30), "updatedReplicas 2", async || {
        let r = ns
            .api::<Runtime>()
            .get("roll")
            .await
            .map_err(|e| e.to_string())?;
        let status = r.status.unwrap_or_default();
        match (
            status.updated_replicas,
            status.observed_generation,
            r.metadata.generation,
        ) {
            (Some(2), Some(seen), Some(generation)) if seen == generation => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

/// A Runtime is sized as a Deployment is: `kubectl scale runtime/sized --replicas 3` goes
/// through its `/scale` subresource (what an HPA and KEDA use), the Runtime controller makes
/// three Pods, and the scale's status names them by its label selector. A Run's row in
/// `kubectl get runs` has its Reason and Attempt (more under `-o wide`), and
/// `--field-selector status.phase=…` selects on the API server.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_scales_a_runtime_and_reads_runs_by_phase_with_reason_and_attempt() {
    let ns = TestNs::new("scale").await;
    let _scheduler = SchedulerProcess::start(&ns.name, 2, None, "scale").await;
    create_in(
        &ns,
        runtime("sized")
            .replicas(1)
            .capacity(&[("runs", 1)])
            .build(),
    )
    .await;
    let kubectl = |args: &[&str]| {
        let out = support::kubectl()
            .args(["-n", &ns.name])
            .args(args)
            .output()
            .unwrap();
        support::ok(&out, &format!("kubectl {args:?}"))
    };
    let scaled = kubectl(&["scale", "runtime/sized", "--replicas", "3"]);
    assert!(
        scaled.contains("runtime.kruntimes.io/sized scaled"),
        "{scaled}"
    );
    let selector = format!("{}=sized", kruntimes::api::LABEL_RUNTIME);
    eventually(
        Duration::from_secs(60),
        "three Pods of Runtime sized, and its scale saying so",
        async || {
            let pods = ns
                .api::<k8s_openapi::api::core::v1::Pod>()
                .list(&kube::api::ListParams::default().labels(&selector))
                .await
                .map_err(|e| e.to_string())?;
            let scale = kubectl(&[
                "get",
                "--raw",
                &format!(
                    "/apis/kruntimes.io/v1alpha1/namespaces/{}/runtimes/sized/scale",
                    ns.name
                ),
            ]);
            let scale: serde_json::Value = serde_json::from_str(&scale).unwrap();
            match (pods.items.len(), &scale["status"]) {
                (3, status) if status["replicas"] == 3 && status["selector"] == selector => Ok(()),
                (n, status) => Err(format!("{n} Pods; scale status {status}")),
            }
        },
    )
    .await;

    // A Runtime whose Pod has a runtimed, for a Run that ends.
    let pool =
        support::pool::Pool::start(&ns, "pool", 1, &[("runs", 1)], &support::pool::HEARTBEAT).await;
    pool.run("failed")
        .task(&["sh", "-c", "exit 3"])
        .create(&ns)
        .await;
    ns.wait_phase(
        "failed",
        kruntimes::api::RunPhase::Failed,
        Duration::from_secs(60),
    )
    .await;
    let table = kubectl(&["get", "runs", "--field-selector", "status.phase=Failed"]);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        [
            "NAME", "PHASE", "ASSIGNED", "POD", "RUNTIME", "REASON", "ATTEMPT", "AGE"
        ],
        "{table}"
    );
    assert_eq!(rows.len(), 2, "only the Failed Run: {table}");
    assert_eq!(rows[1][..2], ["failed", "Failed"], "{table}");
    assert_eq!(rows[1][4..6], ["NonZeroExitCode", "1"], "{table}");
    let none = support::kubectl()
        .args([
            "-n",
            &ns.name,
            "get",
            "runs",
            "--field-selector",
            "status.phase=Running",
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&none.stderr).contains("No resources found"),
        "{none:?}"
    );
    let wide = kubectl(&["get", "runs", "-o", "wide"]);
    let header: Vec<&str> = wide.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header[header.len() - 4..],
        ["PRIORITY", "NOMINATED", "POD", "MESSAGE"],
        "{wide}"
    );
}
