//! A Run's artifacts on the real control plane, as the Go project's users write them: what a
//! successful execution leaves in `$KRUNTIME_ARTIFACTS_DIR` is stored in the Runtime's
//! filesystem artifact store (a directory as a `tar.gz`) and listed in `status.artifactRefs`
//! with `status.artifactStore`; an artifact that breaks a rule fails the Run `ArtifactInvalid`
//! without a retry and leaves nothing stored; a failed execution stores nothing; deleting a
//! Run removes its artifacts. On runtimed's own processes and on the Go project's Bash runtime
//! server. The Runtime controller gives the Pods of a Runtime with a filesystem store its claim.

mod support;

use std::time::Duration;

use kube::ResourceExt as _;
use kube::api::DeleteParams;

use kruntimes::api::status::reasons;
use kruntimes::api::{Run, RunPhase};
use kruntimes::testing::{run, runtime};
use support::pool::{HEARTBEAT, Pool};
use support::world::{Create, RuntimeServerProcess, SchedulerProcess, TestNs, create_in};

const CLAIM: &str = "artifacts";

async fn runs_end(ns: &TestNs, names: &[&str]) -> Vec<Run> {
    ns.wait_runs(Duration::from_secs(90), "the Runs to end", |runs| {
        let ended: Vec<Run> = names
            .iter()
            .filter_map(|n| runs.iter().find(|r| r.name_any() == *n))
            .filter(|r| r.phase().is_terminal())
            .cloned()
            .collect();
        (ended.len() == names.len()).then_some(ended)
    })
    .await
}

async fn artifacts_are_stored_listed_and_removed_with_their_run(prefix: &str, bash: bool) {
    let ns = TestNs::new(prefix).await;
    let _scheduler = SchedulerProcess::start(&ns.name, 2, None, prefix).await;
    let store = tempfile::tempdir().unwrap();
    let server = match bash {
        true => Some(RuntimeServerProcess::start_bash().await),
        false => None,
    };
    let root = store.path().display().to_string();
    let probe = support::free_port();
    let bind = format!("127.0.0.1:{probe}");
    let mut args: Vec<&str> = HEARTBEAT.to_vec();
    args.extend([
        "--health-probe-bind-address",
        bind.as_str(),
        "--artifact-root",
        root.as_str(),
        "--artifact-volume-claim",
        CLAIM,
        "--artifact-gc-interval",
        "1s",
    ]);
    if let Some(server) = &server {
        args.extend(server.flag());
    }
    let _pool = Pool::start(&ns, "pool", 1, &[("runs", 2)], &args).await;
    let dir = "\"$KRUNTIME_ARTIFACTS_DIR\"";
    for (name, script) in [
        (
            "stores",
            format!(
                "echo report > {dir}/report.txt\nmkdir -p {dir}/model/layers\necho w > {dir}/model/layers/1\n"
            ),
        ),
        ("kept", format!("echo kept > {dir}/kept.txt\n")),
        ("link", format!("ln -s /etc/passwd {dir}/passwd\n")),
        (
            "fails",
            format!("echo partial > {dir}/partial.txt\nexit 1\n"),
        ),
    ] {
        run(name)
            .runtime("pool")
            .inline(&script)
            .retry_policy(3, "1s")
            .create(&ns)
            .await;
    }
    let ended = runs_end(&ns, &["stores", "kept", "link", "fails"]).await;
    let by_name = |n: &str| ended.iter().find(|r| r.name_any() == n).unwrap();

    let stores = by_name("stores");
    let status = stores.status.as_ref().unwrap();
    assert_eq!(stores.phase(), RunPhase::Succeeded, "{status:?}");
    assert_eq!(
        status.artifact_store,
        Some(serde_json::json!({"driver": "filesystem", "filesystem": {"volumeClaimName": CLAIM}}))
    );
    let refs = &status.artifact_refs;
    let names: Vec<&str> = refs.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["model", "report.txt"]);
    let uid = stores.uid().unwrap();
    let report = &refs[1];
    let path = report["location"]["filesystem"]["path"].as_str().unwrap();
    assert_eq!(
        path,
        format!("namespaces/{}/runs/{uid}/report.txt", ns.name)
    );
    assert_eq!(report["location"]["filesystem"]["volumeClaimName"], CLAIM);
    let bytes = std::fs::read(store.path().join(path)).unwrap();
    assert_eq!(bytes, b"report\n");
    assert_eq!(
        (
            report["type"].as_str(),
            report["sizeBytes"].as_u64(),
            report["digest"].as_str()
        ),
        (
            Some("file"),
            Some(7),
            Some(kruntimes::digest::sha256(&bytes).as_str())
        )
    );
    assert_eq!(report["contentType"], "text/plain");
    assert_eq!(refs[0]["type"], "directory");
    assert_eq!(refs[0]["contentType"], "application/gzip");
    // runtimed serves the stored bytes (what `artifacts --download` reads through the Pod
    // proxy), and nothing outside the Run's directory.
    let served = support::world::http_get(probe, &format!("/artifacts/{uid}/report.txt"))
        .await
        .unwrap();
    assert_eq!(served, (200, "report\n".to_string()));
    let outside = support::world::http_get(probe, &format!("/artifacts/{uid}/..%2F..%2Fx"))
        .await
        .unwrap();
    assert_eq!(outside.0, 404, "{outside:?}");
    // `kubectl kruntimes artifacts` lists the refs.
    let out = support::kruntimes()
        .args(["artifacts", "run/stores", "-n", &ns.name])
        .output()
        .unwrap();
    let listed = support::ok(&out, "kubectl kruntimes artifacts");
    let rows: Vec<Vec<&str>> = listed
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["NAME", "TYPE", "SIZE", "CREATED"]);
    assert_eq!(rows[2][..3], ["report.txt", "file", "7"], "{listed}");
    let out = support::kruntimes()
        .args(["artifacts", "run/stores", "-n", &ns.name, "-o", "json"])
        .output()
        .unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&support::ok(&out, "artifacts -o json")).unwrap();
    assert_eq!(json, serde_json::Value::Array(refs.clone()));

    let link = by_name("link");
    let s = link.status.as_ref().unwrap();
    assert_eq!(
        (link.phase(), s.reason.as_deref(), link.attempt()),
        (RunPhase::Failed, Some(reasons::ARTIFACT_INVALID), 1),
        "{s:?}"
    );
    assert!(
        s.message
            .as_deref()
            .unwrap_or_default()
            .contains("symbolic links"),
        "{s:?}"
    );
    let fails = by_name("fails");
    assert_eq!(
        fails.attempt(),
        3,
        "a failed execution is retried as before"
    );
    for r in [link, fails] {
        assert!(r.status.as_ref().unwrap().artifact_refs.is_empty());
        let stored = store
            .path()
            .join(format!("namespaces/{}/runs/{}", ns.name, r.uid().unwrap()));
        assert!(!stored.exists(), "{} stored nothing", r.name_any());
    }

    // Deleting a Run removes its artifacts; another Run's stay.
    let kept_dir = store.path().join(format!(
        "namespaces/{}/runs/{}",
        ns.name,
        by_name("kept").uid().unwrap()
    ));
    assert!(kept_dir.join("kept.txt").is_file());
    ns.runs()
        .delete("stores", &DeleteParams::default())
        .await
        .unwrap();
    let stored = store
        .path()
        .join(format!("namespaces/{}/runs/{uid}", ns.name));
    support::world::gone(
        Duration::from_secs(30),
        "the deleted Run's artifacts to be removed",
        &[stored],
    )
    .await;
    assert!(
        kept_dir.join("kept.txt").is_file(),
        "the other Run's artifacts stay"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_are_stored_listed_and_removed_with_their_run_as_runtimeds_own_processes() {
    artifacts_are_stored_listed_and_removed_with_their_run("arts-child", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_are_stored_listed_and_removed_with_their_run_on_the_go_projects_bash_runtime_server()
 {
    artifacts_are_stored_listed_and_removed_with_their_run("arts-bash", true).await;
}

/// A store of a driver runtimed does not write: a Run that leaves artifacts fails saying so
/// (none is dropped silently), one that leaves none succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_for_a_store_runtimed_cannot_write_fail_the_run_saying_so() {
    let ns = TestNs::new("arts-s3").await;
    let _scheduler = SchedulerProcess::start(&ns.name, 2, None, "arts-s3").await;
    let mut args: Vec<&str> = HEARTBEAT.to_vec();
    args.extend(["--artifact-driver", "s3"]);
    let _pool = Pool::start(&ns, "pool", 1, &[("runs", 2)], &args).await;
    run("leaves")
        .runtime("pool")
        .inline("echo x > \"$KRUNTIME_ARTIFACTS_DIR/x\"")
        .create(&ns)
        .await;
    run("none").runtime("pool").inline("true").create(&ns).await;
    let ended = runs_end(&ns, &["leaves", "none"]).await;
    let leaves = ended.iter().find(|r| r.name_any() == "leaves").unwrap();
    let s = leaves.status.as_ref().unwrap();
    assert_eq!(
        s.reason.as_deref(),
        Some(reasons::ARTIFACT_INVALID),
        "{s:?}"
    );
    assert!(s.message.as_deref().unwrap().contains("\"s3\""), "{s:?}");
    let none = ended.iter().find(|r| r.name_any() == "none").unwrap();
    assert_eq!(none.phase(), RunPhase::Succeeded);
}

/// The Runtime controller gives the Pods of a Runtime with a filesystem artifact store its
/// claim, mounted where runtimed is told it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_controller_mounts_the_artifact_stores_claim_for_runtimed() {
    let ns = TestNs::new("arts-pod").await;
    let _scheduler = SchedulerProcess::start(&ns.name, 2, None, "arts-pod").await;
    let mut object = runtime("stored")
        .replicas(1)
        .capacity(&[("runs", 1)])
        .build();
    object.spec.artifact_store = Some(serde_json::json!({
        "driver": "filesystem",
        "filesystem": {"volumeClaimName": CLAIM},
    }));
    create_in(&ns, object).await;
    let pods = ns.runtime_pods("stored", 1).await;
    let spec = pods[0].spec.clone().unwrap();
    let volume = spec
        .volumes
        .unwrap_or_default()
        .into_iter()
        .find(|v| v.name == kruntimes::runtime::pod::ARTIFACT_VOLUME)
        .expect("the artifact volume");
    assert_eq!(volume.persistent_volume_claim.unwrap().claim_name, CLAIM);
    let main = &spec.containers[0];
    let mount = main
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == kruntimes::runtime::pod::ARTIFACT_VOLUME)
        .expect("mounted in runtimed's container");
    let env = |name: &str| {
        main.env
            .iter()
            .flatten()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
    };
    assert_eq!(
        env("KRUNTIMES_ARTIFACT_ROOT"),
        Some(mount.mount_path.clone())
    );
    assert_eq!(
        env("KRUNTIMES_ARTIFACT_VOLUME_CLAIM").as_deref(),
        Some(CLAIM)
    );
}
