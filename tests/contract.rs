//! The Runtime Server call on the real control plane: runtimed with `--runtime-server` executes
//! task Runs through the tests' runtime server (`tests/runtime_server/server.rs`, written from
//! the contract's proto) instead of as its own processes. Exit codes and outputs reach the
//! Run's status; a `runs: 2` Pod never has more than 2 executions at the server at once; every
//! terminal execution is forgotten; a runtimed killed with SIGKILL and started again re-attaches
//! to the execution that still runs, and the Run succeeds without running twice.

mod support;

use std::time::Duration;

use kube::ResourceExt;

use kruntimes::api::status::reasons;
use kruntimes::api::{Resources, Run, RunPhase};
use kruntimes::testing::{run, runtime};
use support::world::{
    Create, OvercommitWatch, RuntimeServerProcess, RuntimedProcess, SchedulerProcess, TestNs,
    eventually,
};

/// A Runtime of one Pod with `runs: 2`, the tests' runtime server, and runtimed driving it.
struct Pool {
    ns: TestNs,
    pod: k8s_openapi::api::core::v1::Pod,
    server: RuntimeServerProcess,
    agent: RuntimedProcess,
    _scheduler: SchedulerProcess,
}

const HEARTBEAT: [&str; 4] = ["--heartbeat-interval", "1s", "--heartbeat-duration", "10s"];

impl Pool {
    async fn start(prefix: &str) -> Self {
        let ns = TestNs::new(prefix).await;
        let scheduler = SchedulerProcess::start(&ns.name, 4, None, prefix).await;
        runtime("pool")
            .replicas(1)
            .capacity(&[("runs", 2)])
            .create(&ns)
            .await;
        let pod = ns.runtime_pods("pool", 1).await.remove(0);
        ns.set_ready(&pod.name_any(), true).await;
        let server = RuntimeServerProcess::start().await;
        let agent = Self::agent(&pod, &server);
        Pool {
            ns,
            pod,
            server,
            agent,
            _scheduler: scheduler,
        }
    }

    fn agent(
        pod: &k8s_openapi::api::core::v1::Pod,
        server: &RuntimeServerProcess,
    ) -> RuntimedProcess {
        let mut args: Vec<&str> = HEARTBEAT.to_vec();
        args.extend(server.flag());
        RuntimedProcess::start(pod, &args)
    }

    fn capacity(&self) -> std::collections::HashMap<String, Resources> {
        std::collections::HashMap::from([(
            self.pod.name_any(),
            Resources::from_iter([("runs", 2)]),
        )])
    }

    /// Waits until every Run named in `names` is terminal; returns them.
    async fn terminal(&self, names: &[&str]) -> Vec<Run> {
        self.ns
            .wait_runs(Duration::from_secs(90), "the Runs to end", |runs| {
                let ended: Vec<Run> = runs
                    .iter()
                    .filter(|r| names.contains(&r.name_any().as_str()) && r.phase().is_terminal())
                    .cloned()
                    .collect();
                (ended.len() == names.len()).then_some(ended)
            })
            .await
    }
}

fn find<'a>(runs: &'a [Run], name: &str) -> &'a Run {
    runs.iter()
        .find(|r| r.name_any() == name)
        .unwrap_or_else(|| panic!("Run {name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_runs_execute_through_the_runtime_server_with_exit_codes_outputs_and_capacity() {
    let pool = Pool::start("contract-tasks").await;
    let ns = &pool.ns;
    let watch = OvercommitWatch::start(ns, pool.capacity()).await;

    run("hello")
        .runtime("pool")
        .task(&["echo", "hello"])
        .create(ns)
        .await;
    run("fails")
        .runtime("pool")
        .task(&["sh", "-c", "echo oops >&2; exit 3"])
        .create(ns)
        .await;
    let sleepers: Vec<String> = (0..6).map(|i| format!("sleep-{i}")).collect();
    for name in &sleepers {
        run(name)
            .runtime("pool")
            .task(&["sh", "-c", "sleep 0.5"])
            .create(ns)
            .await;
    }
    let mut names: Vec<&str> = vec!["hello", "fails"];
    names.extend(sleepers.iter().map(String::as_str));
    let ended = pool.terminal(&names).await;
    let checked = watch.finish().await;

    let hello = find(&ended, "hello");
    let status = hello.status.as_ref().unwrap();
    assert_eq!(hello.phase(), RunPhase::Succeeded, "{status:?}");
    assert_eq!(status.exit_code, Some(0));
    assert_eq!(
        status.outputs.get("stdout").map(String::as_str),
        Some("hello\n")
    );

    let fails = find(&ended, "fails");
    let status = fails.status.as_ref().unwrap();
    assert_eq!(fails.phase(), RunPhase::Failed, "{status:?}");
    assert_eq!(
        (status.exit_code, status.reason.as_deref()),
        (Some(3), Some(reasons::EXIT_CODE))
    );
    assert_eq!(
        status.outputs.get("stderr").map(String::as_str),
        Some("oops\n")
    );
    for name in &sleepers {
        assert_eq!(find(&ended, name).phase(), RunPhase::Succeeded);
    }

    // The server's own view: every Run executed there exactly once, never more than the
    // Pod's `runs: 2` at once, and each terminal execution was forgotten after its write.
    let counts = pool.server.counts().await.unwrap();
    assert_eq!(counts.started, names.len(), "{counts:?}");
    assert!(counts.most_at_once <= 2, "{counts:?}");
    assert!(
        counts.most_at_once == 2,
        "the sleepers never ran side by side: {counts:?}"
    );
    eventually(
        Duration::from_secs(30),
        "every execution to be forgotten",
        async || match pool.server.executions().await {
            Ok(ids) if ids.is_empty() => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    eprintln!("contract-tasks: {counts:?}; {checked} Run events checked for overcommit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtimed_killed_and_started_again_re_attaches_and_the_run_succeeds_once() {
    let mut pool = Pool::start("contract-restart").await;
    let ns = &pool.ns;
    run("long")
        .runtime("pool")
        .task(&["sh", "-c", "sleep 4; echo done"])
        .create(ns)
        .await;
    ns.wait_runs(Duration::from_secs(60), "the Run to be Running", |runs| {
        runs.iter()
            .find(|r| r.name_any() == "long" && r.phase() == RunPhase::Running)
            .map(|_| ())
    })
    .await;
    eventually(
        Duration::from_secs(30),
        "the execution to run at the server",
        async || match pool.server.counts().await {
            Ok(c) if c.running == 1 => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;

    // A crash: no shutdown, no status write; the execution goes on at the server.
    pool.agent.crash();
    pool.agent = Pool::agent(&pool.pod, &pool.server);

    let ended = pool.terminal(&["long"]).await;
    let long = find(&ended, "long");
    let status = long.status.as_ref().unwrap();
    assert_eq!(
        long.phase(),
        RunPhase::Succeeded,
        "the Run was not re-attached: {status:?}\n{}",
        pool.agent.log_tail()
    );
    assert_eq!(
        status.outputs.get("stdout").map(String::as_str),
        Some("done\n")
    );
    let counts = pool.server.counts().await.unwrap();
    assert_eq!(counts.started, 1, "the Run executed twice: {counts:?}");
    assert!(
        pool.agent.log().contains("re-attached to execution"),
        "{}",
        pool.agent.log_tail()
    );
}
