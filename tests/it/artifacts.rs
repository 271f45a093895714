//! A Run's artifacts on the real control plane, as the Go project's users write them: what a
//! successful execution leaves in `$KRUNTIME_ARTIFACTS_DIR` is stored in the Runtime's
//! artifact store (a directory as a `tar.gz`), on its filesystem claim or uploaded to an S3
//! bucket of the tests' S3 server (in parts when large), and listed in `status.artifactRefs`
//! with `status.artifactStore`; an artifact that breaks a rule fails the Run `ArtifactInvalid`
//! without a retry and leaves nothing stored; a failed execution stores nothing; deleting a
//! Run removes its artifacts. On runtimed's own processes and on the Go project's Bash runtime
//! server. A driver runtimed does not write fails a Run that leaves artifacts. The Runtime
//! controller gives the Pods of a Runtime with a filesystem store its claim. An artifact a
//! task keeps swapping while it is collected is stored as it was hashed.

use testkit as support;

use std::time::Duration;

use kube::ResourceExt as _;
use kube::api::DeleteParams;

use kruntimes::api::RunPhase;
use kruntimes::api::status::reasons;
use kruntimes::testing::{run, runtime};
use support::pool::{HEARTBEAT, Pool};
use support::s3::S3Server;
use support::world::{Backend, Create, SchedulerProcess, TestNs, create_in};

const CLAIM: &str = "artifacts";

/// The store a test's runtimed writes to, and how the test reads it back.
enum Store {
    Filesystem(tempfile::TempDir),
    S3(S3Server),
}

impl Store {
    async fn of(s3: bool) -> Self {
        match s3 {
            false => Store::Filesystem(tempfile::tempdir().unwrap()),
            true => Store::S3(S3Server::start("arts").await),
        }
    }

    /// runtimed's flags for it (multipart above 5 MiB, two parts at once, for S3).
    fn args(&self) -> Vec<String> {
        let strings = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        match self {
            Store::Filesystem(dir) => strings(&[
                "--artifact-root",
                &dir.path().display().to_string(),
                "--artifact-volume-claim",
                CLAIM,
            ]),
            Store::S3(server) => strings(&[
                "--artifact-s3-bucket",
                &server.bucket,
                "--artifact-s3-prefix",
                "/team-a/",
                "--artifact-s3-endpoint",
                &server.endpoint(),
                "--artifact-s3-force-path-style",
                "--artifact-s3-upload-concurrency",
                "2",
                // As the Runtime controller mounts the credentials Secret: files, no
                // environment (the S3 server refuses an unsigned request).
                "--artifact-s3-credentials-dir",
                &server.credentials_dir().display().to_string(),
            ]),
        }
    }

    fn snapshot(&self) -> serde_json::Value {
        match self {
            Store::Filesystem(_) => {
                serde_json::json!({"driver": "filesystem", "filesystem": {"volumeClaimName": CLAIM}})
            }
            Store::S3(server) => serde_json::json!({"driver": "s3", "s3": {
                "bucket": server.bucket, "prefix": "team-a", "endpoint": server.endpoint(),
                "forcePathStyle": true, "uploadConcurrency": 2,
            }}),
        }
    }

    /// Where the Run `uid`'s artifact `name` is, as its ref must say.
    fn location(&self, ns: &str, uid: &str, name: &str) -> serde_json::Value {
        let path = format!("namespaces/{ns}/runs/{uid}/{name}");
        match self {
            Store::Filesystem(_) => {
                serde_json::json!({"filesystem": {"path": path, "volumeClaimName": CLAIM}})
            }
            Store::S3(server) => {
                serde_json::json!({"s3": {"bucket": server.bucket, "key": format!("team-a/{path}")}})
            }
        }
    }

    /// The stored bytes at a ref's location, read from the store itself.
    async fn read(&self, location: &serde_json::Value) -> Option<Vec<u8>> {
        match self {
            Store::Filesystem(dir) => {
                let path = location["filesystem"]["path"].as_str().unwrap();
                std::fs::read(dir.path().join(path)).ok()
            }
            Store::S3(server) => server.get(location["s3"]["key"].as_str().unwrap()).await,
        }
    }

    /// What the store holds for the Run `uid`.
    async fn stored(&self, ns: &str, uid: &str) -> Vec<String> {
        let path = format!("namespaces/{ns}/runs/{uid}");
        match self {
            Store::Filesystem(dir) => match std::fs::read_dir(dir.path().join(&path)) {
                Ok(entries) => entries
                    .map(|e| e.unwrap().file_name().into_string().unwrap())
                    .collect(),
                Err(_) => Vec::new(),
            },
            Store::S3(server) => server.keys(&format!("team-a/{path}")).await,
        }
    }

    /// Waits until the store holds nothing for the Run `uid`.
    async fn emptied(&self, ns: &str, uid: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let left = self.stored(ns, uid).await;
            if left.is_empty() {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the deleted Run's artifacts were not removed within 30 s: {left:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

async fn artifacts_are_stored_listed_and_removed_with_their_run(
    prefix: &str,
    bash: bool,
    s3: bool,
) {
    let ns = TestNs::new(prefix).await;
    let _scheduler = SchedulerProcess::start(&ns.name, 2, None, prefix).await;
    let store = Store::of(s3).await;
    let backend = if bash { Backend::Bash } else { Backend::Child };
    let server = backend.server().await;
    let (probe, api_port) = (support::free_port(), support::free_port());
    let bind = format!("127.0.0.1:{probe}");
    let api_bind = format!("127.0.0.1:{api_port}");
    let store_args = store.args();
    let mut args: Vec<&str> = HEARTBEAT.to_vec();
    args.extend(["--health-probe-bind-address", bind.as_str()]);
    args.extend(["--api-bind-address", api_bind.as_str()]);
    args.extend(store_args.iter().map(String::as_str));
    args.extend(["--artifact-gc-interval", "1s"]);
    if let Some(server) = &server {
        args.extend(server.flag());
    }
    let _pool = Pool::start(&ns, "pool", 1, &[("runs", 2)], &args).await;
    let dir = "\"$KRUNTIME_ARTIFACTS_DIR\"";
    let mut runs = vec![
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
    ];
    if s3 {
        // 12 MiB: three parts of 5 MiB or less, two at once.
        runs.push((
            "large",
            format!("head -c 12582912 /dev/urandom > {dir}/weights.bin\n"),
        ));
    }
    for (name, script) in &runs {
        run(name)
            .runtime("pool")
            .inline(script)
            .retry_policy(3, "1s")
            .create(&ns)
            .await;
    }
    let names: Vec<&str> = runs.iter().map(|(n, _)| *n).collect();
    let ended = ns.runs_ended(Duration::from_secs(90), &names).await;
    let by_name = |n: &str| &ended[n];

    let stores = by_name("stores");
    let status = stores.status.as_ref().unwrap();
    assert_eq!(stores.phase(), RunPhase::Succeeded, "{status:?}");
    assert_eq!(status.artifact_store, Some(store.snapshot()));
    let refs = &status.artifact_refs;
    let names: Vec<&str> = refs.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["model", "report.txt"]);
    let uid = stores.uid().unwrap();
    let report = &refs[1];
    assert_eq!(
        report["location"],
        store.location(&ns.name, &uid, "report.txt")
    );
    assert_eq!(report["driver"], if s3 { "s3" } else { "filesystem" });
    let bytes = store.read(&report["location"]).await.unwrap();
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
            Some(kruntimes::util::digest::sha256(&bytes).as_str())
        )
    );
    assert_eq!(report["contentType"], "text/plain");
    assert_eq!(refs[0]["type"], "directory");
    assert_eq!(refs[0]["contentType"], "application/gzip");
    // runtimed serves the stored bytes to the gateway (what `artifacts --download` reads
    // through the aggregated API), and nothing outside the Run's directory.
    let api = support::world::RuntimedApi::of(&_pool.ns, _pool.pod(), api_port).await;
    let get = async |path: String| api.get(&path).await;
    let served = get(format!("/artifacts/stores/{uid}/report.txt")).await;
    assert_eq!(served, (200, "report\n".to_string()));
    let outside = get(format!("/artifacts/stores/{uid}/..%2F..%2Fx")).await;
    assert_eq!(outside.0, 404, "{outside:?}");
    // A caller is allowed the artifacts of a Run by name; the UID must be that Run's, or
    // being allowed one Run would read every other's.
    let other = get(format!("/artifacts/kept/{uid}/report.txt")).await;
    assert_eq!(other.0, 404, "another Run's artifact served: {other:?}");
    assert!(other.1.starts_with("Run kept (UID"), "{other:?}");
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
        let stored = store.stored(&ns.name, &r.uid().unwrap()).await;
        assert!(stored.is_empty(), "{} stored {stored:?}", r.name_any());
    }
    if s3 {
        let large = by_name("large");
        let r = &large.status.as_ref().unwrap().artifact_refs[0];
        let bytes = store.read(&r["location"]).await.unwrap();
        assert_eq!(
            (r["sizeBytes"].as_u64(), r["digest"].as_str()),
            (
                Some(12582912),
                Some(kruntimes::util::digest::sha256(&bytes).as_str())
            ),
            "the multipart upload stored every byte in order"
        );
    }

    // Deleting a Run removes its artifacts; another Run's stay.
    let kept_uid = by_name("kept").uid().unwrap();
    assert_eq!(store.stored(&ns.name, &kept_uid).await.len(), 1);
    ns.runs()
        .delete("stores", &DeleteParams::default())
        .await
        .unwrap();
    store.emptied(&ns.name, &uid).await;
    assert_eq!(
        store.stored(&ns.name, &kept_uid).await.len(),
        1,
        "the other Run's artifacts stay"
    );
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_are_stored_listed_and_removed_with_their_run_as_runtimeds_own_processes() {
    artifacts_are_stored_listed_and_removed_with_their_run("arts-child", false, false).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_are_stored_listed_and_removed_with_their_run_on_the_go_projects_bash_runtime_server()
 {
    artifacts_are_stored_listed_and_removed_with_their_run("arts-bash", true, false).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_are_uploaded_to_an_s3_store_listed_and_removed_with_their_run() {
    artifacts_are_stored_listed_and_removed_with_their_run("arts-s3", false, true).await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_are_uploaded_to_an_s3_store_from_the_go_projects_bash_runtime_server() {
    artifacts_are_stored_listed_and_removed_with_their_run("arts-s3-bash", true, true).await;
}

/// A store of a driver runtimed does not write: a Run that leaves artifacts fails saying so
/// (none is dropped silently), one that leaves none succeeds.
/// A task that leaves a process behind (in a session of its own, out of its group's reach)
/// which keeps renaming a new 12 MiB file of random bytes over its artifact while runtimed
/// stages, hashes and uploads it in parts: the S3 object holds exactly the bytes its ref's
/// digest and size name (runtimed hashes and uploads the same staged copy, read from one
/// descriptor; reading the file again by its name for the upload would send another version).
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_artifact_swapped_while_it_is_collected_is_stored_as_it_was_hashed() {
    let ns = TestNs::new("arts-swap").await;
    let _scheduler = SchedulerProcess::start(&ns.name, 2, None, "arts-swap").await;
    let store = Store::of(true).await;
    let store_args = store.args();
    let mut args: Vec<&str> = HEARTBEAT.to_vec();
    args.extend(store_args.iter().map(String::as_str));
    let _pool = Pool::start(&ns, "pool", 1, &[("runs", 2)], &args).await;
    let seen = tempfile::tempdir().unwrap();
    let swaps = seen.path().join("swaps");
    // The swapper stops once the Run's directory is gone (after its terminal write), or
    // after a minute.
    let script = format!(
        r#"run=$(dirname "$KRUNTIME_ARTIFACTS_DIR")
head -c 12582912 /dev/urandom > "$KRUNTIME_ARTIFACTS_DIR/weights.bin"
setsid sh -c 'n=0; end=$(($(date +%s) + 60)); while [ -d "$1" ] && [ "$(date +%s)" -lt $end ]; do head -c 12582912 /dev/urandom > "$1/t" 2>/dev/null && mv "$1/t" "$2/weights.bin" 2>/dev/null && n=$((n + 1)) && echo $n > "$3"; done' swapper "$run" "$KRUNTIME_ARTIFACTS_DIR" {swaps} </dev/null >/dev/null 2>&1 &
while [ ! -s {swaps} ]; do sleep 0.05; done
"#,
        swaps = swaps.display()
    );
    run("swapped")
        .runtime("pool")
        .inline(&script)
        .create(&ns)
        .await;
    let ended = ns.runs_ended(Duration::from_secs(90), &["swapped"]).await;
    let swapped = &ended["swapped"];
    let status = swapped.status.as_ref().unwrap();
    assert_eq!(swapped.phase(), RunPhase::Succeeded, "{status:?}");
    let swaps_by_then = std::fs::read_to_string(&swaps).unwrap_or_default();
    let weights = &status.artifact_refs[0];
    let bytes = store.read(&weights["location"]).await.unwrap();
    assert_eq!(weights["sizeBytes"].as_u64(), Some(bytes.len() as u64));
    let digest = kruntimes::util::digest::sha256(&bytes);
    assert_eq!(
        weights["digest"].as_str(),
        Some(digest.as_str()),
        "the stored bytes are not the bytes hashed"
    );
    eprintln!(
        "swapped artifact: {} new versions renamed over it by the Run's end, stored as hashed",
        swaps_by_then.trim()
    );
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_for_a_store_runtimed_cannot_write_fail_the_run_saying_so() {
    let ns = TestNs::new("arts-gcs").await;
    let _scheduler = SchedulerProcess::start(&ns.name, 2, None, "arts-gcs").await;
    let mut args: Vec<&str> = HEARTBEAT.to_vec();
    args.extend(["--artifact-driver", "gcs"]);
    let _pool = Pool::start(&ns, "pool", 1, &[("runs", 2)], &args).await;
    run("leaves")
        .runtime("pool")
        .inline("echo x > \"$KRUNTIME_ARTIFACTS_DIR/x\"")
        .create(&ns)
        .await;
    run("none").runtime("pool").inline("true").create(&ns).await;
    let ended = ns
        .runs_ended(Duration::from_secs(90), &["leaves", "none"])
        .await;
    let leaves = &ended["leaves"];
    let s = leaves.status.as_ref().unwrap();
    assert_eq!(
        s.reason.as_deref(),
        Some(reasons::ARTIFACT_INVALID),
        "{s:?}"
    );
    assert!(s.message.as_deref().unwrap().contains("\"gcs\""), "{s:?}");
    let none = &ended["none"];
    assert_eq!(none.phase(), RunPhase::Succeeded);
}

/// The Runtime controller gives the Pods of a Runtime with a filesystem artifact store its
/// claim, mounted where runtimed is told it is.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
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
