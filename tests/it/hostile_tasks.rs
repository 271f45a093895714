//! runtimed against the tasks it runs, on the real control plane: every task is untrusted,
//! and one that attacks what runtimed reads, writes or keeps gets nothing of it and stalls no
//! other Run. One test per attack: `$KRUNTIME_OUTPUTS` as a link to runtimed's own
//! environment, as a FIFO and as a 10 GiB sparse file; a log made huge; a log's `.done`
//! marker linked to a file of someone else's; the artifacts directory linked to another Run's
//! stored artifacts; a caller that never finishes its headers; a stranger probing unknown paths
//! and a flood of made-up tokens; a canary secret in runtimed's environment that must reach no
//! task, output or log; orphans left by 50 Runs, adopted and reaped; and a Pod whose runtime
//! server starts after runtimed, Ready as soon as the server answers.

use testkit as support;

use std::time::{Duration, Instant};

use kube::ResourceExt as _;

use kruntimes::api::status::reasons;
use kruntimes::api::{Run, RunPhase};
use kruntimes::testing::run;
use support::pool::{HEARTBEAT, Pool};
use support::world::{
    Create, RuntimeServerProcess, RuntimedApi, SchedulerProcess, TestNs, eventually, wait_ready,
};

/// The canary runtimed carries in its environment, where the Runtime controller puts the S3
/// store's keys.
const CANARY: &str = "canary-7f3e9a1c-do-not-leak";

/// A Runtime of one Pod with `runs: 2` whose runtimed runs tasks as its own processes, with
/// [`CANARY`] as `AWS_SECRET_ACCESS_KEY` in its environment, and the scheduler.
struct Hostile {
    pool: Pool,
    probe: u16,
    /// runtimed's API, as the gateway calls it.
    api: RuntimedApi,
    _scheduler: SchedulerProcess,
}

impl Hostile {
    async fn start(prefix: &str) -> Self {
        Self::start_with(prefix, &[]).await
    }

    /// [`Self::start`] with more runtimed flags.
    async fn start_with(prefix: &str, extra: &[&str]) -> Self {
        let ns = TestNs::new(prefix).await;
        let scheduler = SchedulerProcess::start(&ns.name, 2, None, prefix).await;
        let (probe, api_port) = (support::free_port(), support::free_port());
        let bind = format!("127.0.0.1:{probe}");
        let api_bind = format!("127.0.0.1:{api_port}");
        let mut args: Vec<&str> = HEARTBEAT.to_vec();
        args.extend(["--health-probe-bind-address", bind.as_str()]);
        args.extend(["--api-bind-address", api_bind.as_str()]);
        args.extend(extra);
        let env = [("AWS_SECRET_ACCESS_KEY".to_string(), CANARY.to_string())];
        let pool = Pool::start_with_env(&ns, "pool", 1, &[("runs", 2)], &args, &env).await;
        wait_ready(probe).await;
        let api = RuntimedApi::of(&pool.ns, pool.pod(), api_port).await;
        Hostile {
            pool,
            probe,
            api,
            _scheduler: scheduler,
        }
    }

    fn ns(&self) -> &TestNs {
        &self.pool.ns
    }

    /// Creates a Run of `script` (run by `sh -c`).
    async fn task(&self, name: &str, script: &str) {
        run(name)
            .runtime("pool")
            .task(&["sh", "-c", script])
            .create(self.ns())
            .await;
    }

    /// Waits until `name` is in `phase`.
    async fn phase(&self, name: &str, phase: RunPhase) -> Run {
        self.ns()
            .wait_phase(name, phase, Duration::from_secs(60))
            .await
    }

    /// runtimed is still running, and neither its log nor any Run's status holds the canary.
    async fn nothing_leaked(&mut self) {
        let agent = self.pool.agents.values_mut().next().expect("one runtimed");
        assert!(agent.is_running(), "runtimed died:\n{}", agent.log_tail());
        assert!(
            !agent.log().contains(CANARY),
            "runtimed logged its own secret"
        );
        let runs = self.ns().runs().list(&Default::default()).await.unwrap();
        for r in runs {
            let status = serde_json::to_string(&r.status).unwrap();
            assert!(!status.contains(CANARY), "{}: {status}", r.name_any());
        }
    }
}

fn reason_and_message(run: &Run) -> (String, String) {
    let status = run.status.as_ref().expect("an ended Run has a status");
    (
        status.reason.clone().unwrap_or_default(),
        status.message.clone().unwrap_or_default(),
    )
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_linked_to_runtimeds_own_environment_fail_the_run_and_read_nothing() {
    let mut h = Hostile::start("hostile-link").await;
    h.task(
        "link",
        r#"ln -s /proc/self/environ "$KRUNTIME_OUTPUTS"; exit 0"#,
    )
    .await;
    let ended = h.phase("link", RunPhase::Failed).await;
    let (reason, message) = reason_and_message(&ended);
    assert_eq!(reason, reasons::OUTPUTS_INVALID, "{message}");
    assert!(message.contains("symbolic link"), "{message}");
    assert!(ended.status.as_ref().unwrap().outputs.is_empty());
    h.nothing_leaked().await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_as_outputs_fails_its_run_and_stalls_no_other() {
    let mut h = Hostile::start("hostile-fifo").await;
    // A blocking open of this FIFO never returns: no writer ever comes.
    h.task("fifo", r#"mkfifo "$KRUNTIME_OUTPUTS"; exit 0"#)
        .await;
    h.task("long", "sleep 300").await;
    let ended = h.phase("fifo", RunPhase::Failed).await;
    let (reason, message) = reason_and_message(&ended);
    assert_eq!(reason, reasons::OUTPUTS_INVALID, "{message}");
    assert!(message.contains("FIFO"), "{message}");
    // The agent still acts on every other Run of the Pod: a cancel, then a new Run.
    h.phase("long", RunPhase::Running).await;
    let asked = Instant::now();
    h.ns().cancel("long").await;
    h.phase("long", RunPhase::Cancelled).await;
    eprintln!(
        "a Run cancelled next to a FIFO outputs: Cancelled {:?} after the request",
        asked.elapsed()
    );
    h.task("after", "echo ok=1 > \"$KRUNTIME_OUTPUTS\"").await;
    let after = h.phase("after", RunPhase::Succeeded).await;
    let outputs = after.status.unwrap().outputs;
    assert_eq!(outputs.get("ok").map(String::as_str), Some("1"));
    h.nothing_leaked().await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_gib_sparse_outputs_file_is_too_large_without_being_read() {
    let mut h = Hostile::start("hostile-sparse").await;
    h.task("sparse", r#"truncate -s 10G "$KRUNTIME_OUTPUTS"; exit 0"#)
        .await;
    let ended = h.phase("sparse", RunPhase::Failed).await;
    let (reason, message) = reason_and_message(&ended);
    assert_eq!(reason, reasons::OUTPUTS_TOO_LARGE, "{message}");
    assert!(message.contains("10737418240 bytes"), "{message}");
    h.nothing_leaked().await;
}

/// Where a task finds the logs of its Pod: runtimed's log directory on the workspace volume
/// (`$KRUNTIME_OUTPUTS` is `<root>/<uid>/outputs`).
const LOGS: &str =
    r#"root=$(dirname "$(dirname "$KRUNTIME_OUTPUTS")"); logs=$root/.kruntimes/logs"#;

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_made_huge_is_served_from_its_end_and_a_linked_done_marker_writes_nothing() {
    let mut h = Hostile::start("hostile-logs").await;
    // A file of someone else's on the same volume, that a `.done` link would truncate.
    let victim = h.pool.agent().workspace().join("victim");
    std::fs::create_dir_all(victim.parent().unwrap()).unwrap();
    std::fs::write(&victim, "another Run's artifact\n").unwrap();
    let script = format!(
        r#"{LOGS}; echo before; for f in "$logs"/huge_*.log; do truncate -s 100G "$f"; ln -s "$root/victim" "${{f%.log}}.done"; done; exit 0"#
    );
    h.task("huge", &script).await;
    h.phase("huge", RunPhase::Succeeded).await;
    let (code, body) = h.api.get("/logs/huge").await;
    assert_eq!(code, 200);
    // At most what a Run keeps (two parts of 1 MiB and a line), read from the end.
    assert!(
        body.len() as u64 <= kruntimes::runtimed::runlog::MAX_SERVED,
        "{} bytes served",
        body.len()
    );
    // From the end: the first line, 100 GiB before it, is not in it.
    assert!(!body.contains("before"), "served from the start");
    let (code, _) = h.api.get("/logs/huge?tailLines=5").await;
    assert_eq!(code, 200);
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "another Run's artifact\n",
        "the .done marker was written through the task's link"
    );
    h.nothing_leaked().await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtimeds_secret_reaches_no_tasks_environment_log_or_outputs() {
    let mut h = Hostile::start("hostile-env").await;
    // Every variable the task sees whose name is runtimed's kind, as an output; and two that
    // must be there (the contract's, and PATH).
    h.task(
        "spy",
        r#"env; { env | grep -E '^(AWS_|KRUNTIMES_|KUBECONFIG=)' | sed 's/=.*/=seen/'; echo "contract=${KRUNTIME_OUTPUTS:+yes}"; echo "path=${PATH:+yes}"; } > "$KRUNTIME_OUTPUTS""#,
    )
    .await;
    let ended = h.phase("spy", RunPhase::Succeeded).await;
    let outputs = ended.status.unwrap().outputs;
    let seen: std::collections::BTreeMap<String, String> = [
        ("contract".to_string(), "yes".to_string()),
        ("path".to_string(), "yes".to_string()),
    ]
    .into();
    assert_eq!(outputs, seen, "the task inherited runtimed's own variables");
    let (code, log) = h.api.get("/logs/spy").await;
    assert_eq!(code, 200);
    assert!(log.contains("KRUNTIME_OUTPUTS="), "{log}");
    assert!(!log.contains(CANARY), "{log}");
    h.nothing_leaked().await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_artifacts_directory_linked_to_another_runs_stored_artifacts_stores_nothing() {
    let store = tempfile::tempdir().unwrap();
    let root = store.path().display().to_string();
    let args = [
        "--artifact-root",
        &root,
        "--artifact-volume-claim",
        "artifacts",
    ];
    let mut h = Hostile::start_with("hostile-artifacts", &args).await;
    // Another Run's stored artifact, in the store only runtimed writes.
    let theirs = store
        .path()
        .join(format!("namespaces/{}/runs/someone-else", h.ns().name));
    std::fs::create_dir_all(&theirs).unwrap();
    std::fs::write(theirs.join("model.bin"), "someone else's model").unwrap();
    let script = format!(
        r#"rm -rf "$KRUNTIME_ARTIFACTS_DIR"; ln -s {} "$KRUNTIME_ARTIFACTS_DIR"; exit 0"#,
        theirs.display()
    );
    h.task("thief", &script).await;
    let ended = h.phase("thief", RunPhase::Failed).await;
    let (reason, message) = reason_and_message(&ended);
    assert_eq!(reason, reasons::ARTIFACT_INVALID, "{message}");
    assert!(message.contains("$KRUNTIME_ARTIFACTS_DIR"), "{message}");
    assert!(ended.status.as_ref().unwrap().artifact_refs.is_empty());
    let uid = ended.uid().unwrap();
    let stored = store
        .path()
        .join(format!("namespaces/{}/runs/{uid}", h.ns().name));
    assert!(
        !stored.join("model.bin").exists(),
        "stored as the thief's own"
    );
    assert_eq!(
        std::fs::read_to_string(theirs.join("model.bin")).unwrap(),
        "someone else's model"
    );
    h.nothing_leaked().await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_never_finishes_its_headers_is_cut_off_and_the_probes_still_answer() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut h = Hostile::start("hostile-slowloris").await;
    let mut slow = tokio::net::TcpStream::connect(("127.0.0.1", h.probe))
        .await
        .unwrap();
    slow.write_all(b"GET /readyz HTTP/1.1\r\nHost: runtimed\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    // runtimed closes it (at its header read timeout): the read ends, with or without a
    // response; without a bound it would wait forever.
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(60), slow.read_to_end(&mut rest)).await;
    assert!(
        read.is_ok(),
        "runtimed kept a connection whose headers never came"
    );
    eprintln!(
        "a connection that never finished its headers was closed after {:?}",
        started.elapsed()
    );
    wait_ready(h.probe).await;
    h.nothing_leaked().await;
}

/// runtimed's API fails closed: it answers the gateway only. No token, a made-up one or a
/// user's (even the cluster admin's) is 401 on every path, served or not, and an unknown path
/// is 404 only to the gateway; a flood of made-up tokens is refused one by one while the
/// gateway is still served, and the probes stay open on their own port.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_gateway_is_answered_and_made_up_tokens_are_refused() {
    use support::world::http;
    let h = Hostile::start("hostile-paths").await;
    for path in ["/debug/pprof", "/", "/invoke/x", "/logs/nobody"] {
        let code = |r: reqwest::Response| r.status().as_u16();
        let none = code(h.api.send("GET", path, b"", None).await);
        assert_eq!(none, 401, "{path} without a token");
        let made_up = h.api.send("GET", path, b"", Some("made-up")).await;
        assert_eq!(made_up.status().as_u16(), 401, "{path}");
        let body = made_up.text().await.unwrap();
        assert!(body.contains("does not vouch for this token"), "{body}");
        let admin = code(
            h.api
                .send("GET", path, b"", Some(support::ADMIN_TOKEN))
                .await,
        );
        assert_eq!(
            admin, 401,
            "{path}: the cluster admin's own token is no gateway's"
        );
    }
    let (code, body) = h.api.get("/debug/pprof").await;
    assert_eq!(code, 404, "{body}");
    assert!(body.starts_with("runtimed serves no such path"), "{body}");
    let flood = (0..200).map(|n| {
        let api = h.api.clone();
        async move {
            let token = format!("made-up-{n}");
            api.send("GET", "/logs/someone", b"", Some(&token))
                .await
                .status()
                .as_u16()
        }
    });
    let codes = futures::future::join_all(flood).await;
    assert!(codes.iter().all(|c| *c == 401), "{codes:?}");
    let (code, body) = h.api.get("/logs/nobody").await;
    assert_eq!(code, 404, "the gateway reaches the handler: {body}");
    assert!(body.starts_with("Run nobody has no log"), "{body}");
    for probe in ["/readyz", "/healthz"] {
        let (code, body) = http(h.probe, "GET", probe, b"", None).await.unwrap();
        assert_eq!(code, 200, "{probe}: {body}");
    }
}

/// The processes whose parent is `parent`, with their state and command, from `/proc`.
fn children_of(parent: u32) -> Vec<(u32, char, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (open, close) = (stat.find('(')?, stat.rfind(')')?);
            let comm = stat[open + 1..close].to_string();
            let mut rest = stat[close + 1..].split_whitespace();
            let state = rest.next()?.chars().next()?;
            let ppid: u32 = rest.next()?.parse().ok()?;
            (ppid == parent).then_some((pid, state, comm))
        })
        .collect()
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_of_fifty_runs_are_adopted_by_runtimed_and_reaped() {
    let mut h = Hostile::start("hostile-orphans").await;
    let runtimed = h.pool.agent().pid();
    // Watches runtimed's children while the Runs go: an orphaned `sleep` among them shows
    // that runtimed adopted it (it is the subreaper of its tasks).
    let adopted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (adopted, stop) = (adopted.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut seen = std::collections::HashSet::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                for (pid, _, comm) in children_of(runtimed) {
                    if comm == "sleep" && seen.insert(pid) {
                        adopted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let names = h.pool.runs("orphan", 50, "sleep 1 & exit 0").await;
    let ended = h.pool.all_done(&names).await;
    assert!(
        ended.values().all(|r| r.phase() == RunPhase::Succeeded),
        "{:?}",
        ended
            .values()
            .map(|r| (r.name_any(), r.phase()))
            .collect::<Vec<_>>()
    );
    // Every orphan has ended by now or will within its second; none stays a zombie.
    eventually(
        Duration::from_secs(30),
        "no zombie child of runtimed",
        async || {
            let zombies: Vec<_> = children_of(runtimed)
                .into_iter()
                .filter(|(_, state, _)| *state == 'Z')
                .collect();
            match zombies.is_empty() && children_of(runtimed).is_empty() {
                true => Ok(()),
                false => Err(format!("{zombies:?}")),
            }
        },
    )
    .await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    watcher.join().unwrap();
    let adopted = adopted.load(std::sync::atomic::Ordering::SeqCst);
    eprintln!("runtimed adopted {adopted} orphaned sleep(s) of 50 Runs and reaped them");
    assert!(adopted > 0, "no orphan was re-parented to runtimed");
    h.pool.assert_no_leaked_capacity("orphan").await;
    h.nothing_leaked().await;
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_is_ready_as_soon_as_its_late_runtime_server_answers() {
    let ns = TestNs::new("hostile-late").await;
    let _scheduler = SchedulerProcess::start(&ns.name, 2, None, "hostile-late").await;
    let port = support::free_port();
    let workspace = tempfile::tempdir().unwrap();
    let probe = support::free_port();
    let bind = format!("127.0.0.1:{probe}");
    let address = format!("127.0.0.1:{port}");
    let root = workspace.path().to_str().unwrap().to_string();
    let mut args: Vec<&str> = HEARTBEAT.to_vec();
    args.extend(["--health-probe-bind-address", bind.as_str()]);
    args.extend(["--runtime-server", &address, "--workspace-root", &root]);
    let _pool = Pool::start(&ns, "late", 1, &[("runs", 2)], &args).await;
    // runtimed watches its Runs and its Pod, and says that only the server is missing.
    eventually(
        Duration::from_secs(30),
        "runtimed to wait for its runtime server alone",
        async || match support::world::http_get(probe, "/readyz").await {
            Ok((503, body))
                if body == "not ready: the runtime server does not answer Health as healthy" =>
            {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    let server = RuntimeServerProcess::start_on(port, workspace).await;
    let answered = Instant::now();
    // Nothing else happens on the Pod or its Runs: only the server's health can wake it.
    wait_ready(probe).await;
    eprintln!(
        "Ready {:?} after the runtime server first answered Health",
        answered.elapsed()
    );
    drop(server);
}
