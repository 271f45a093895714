//! `explain run/NAME` against the real control plane: the built binary reads real objects and
//! its verdict must be exactly the message the running scheduler (`scheduler run`, the built
//! binary too) writes on the Run, with the per-Pod first rejections, the JSON structure and
//! the hints asserted for each scenario.
//!
//! Each test has its own namespace; schedulers watch only that namespace.

mod support;

use std::process::Output;
use std::time::Duration;

use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use kruntimes::api::{Run, RunPhase, Runtime};
use support::world::{self, SchedulerProcess, run, wait_runs};

async fn setup(prefix: &str) -> (Client, String) {
    let client = support::client().await;
    support::install_crds();
    let ns = support::namespace(&client, prefix).await;
    (client, ns)
}

/// Runs `kubectl-kruntimes explain <target> -n <ns> <extra>` and returns its output.
fn explain(ns: &str, target: &str, extra: &[&str]) -> Output {
    support::kruntimes()
        .args(["explain", target, "-n", ns])
        .args(extra)
        .output()
        .expect("run kubectl-kruntimes explain")
}

/// `explain run/<name> -o json`, which must succeed.
fn explain_json(ns: &str, name: &str) -> Value {
    let out = explain(ns, &format!("run/{name}"), &["-o", "json"]);
    assert!(
        out.status.success(),
        "explain run/{name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "explain -o json is not JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// (Pod, first-rejection text or "-") per Pod, in the JSON's order.
fn first_rejections(report: &Value) -> Vec<(String, String)> {
    report["pods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let reason = match &p["rejection"] {
                Value::Null => "-".to_string(),
                r => r["reason"].as_str().unwrap().to_string(),
            };
            (p["name"].as_str().unwrap().to_string(), reason)
        })
        .collect()
}

fn rejections(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(p, r)| (p.to_string(), r.to_string()))
        .collect()
}

fn hints(report: &Value) -> Vec<String> {
    report["hints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap().to_string())
        .collect()
}

/// Waits until the scheduler's Pending message on `name` is `expected`; panics with the last
/// message it wrote otherwise.
///
/// Waiting (rather than taking the first message) is deliberate: a scheduler whose Pod or
/// Lease watch has not delivered its first list yet can write a message from a partial view,
/// and corrects it once the watch catches up.
async fn scheduler_message(client: &Client, ns: &str, name: &str, expected: &str) {
    let api: Api<Run> = Api::namespaced(client.clone(), ns);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut last = None;
    while std::time::Instant::now() < deadline {
        let run = api.get(name).await.unwrap();
        last = run.status.and_then(|s| s.message);
        if last.as_deref() == Some(expected) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the scheduler wrote {last:?} on {name}, explain said {expected:?}");
}

/// Asserts the verdict before the scheduler runs, then that the running scheduler writes
/// exactly that message, and that a second explain agrees with what it wrote.
async fn assert_scheduler_agrees(client: &Client, ns: &str, name: &str, verdict: &str) {
    let before = explain_json(ns, name);
    assert_eq!(before["verdict"], verdict);
    let _scheduler = SchedulerProcess::start(ns, 1, None, name).await;
    scheduler_message(client, ns, name, verdict).await;
    let after = explain_json(ns, name);
    assert_eq!(after["verdict"], verdict);
    assert_eq!(after["run"]["message"], verdict);
    assert_eq!(after["run"]["reason"], "Unschedulable");
}

/// A Runtime object with `replicas: 0` (so the controller creates no Pods of its own) and the
/// given declared capacity; the tests create the Runtime Pods themselves.
async fn runtime(client: &Client, ns: &str, name: &str, capacity: &[(&str, &str)]) {
    let resources: serde_json::Map<String, Value> = capacity
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let rt: Runtime = serde_json::from_value(json!({
        "apiVersion": "kruntimes.io/v1alpha1", "kind": "Runtime",
        "metadata": {"name": name},
        "spec": {"replicas": 0, "capacity": {"resources": resources},
                 "template": {"spec": {"containers": [{"name": "runtimed", "image": "kruntimes.invalid/runtimed"}]}}}
    }))
    .unwrap();
    Api::<Runtime>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &rt)
        .await
        .unwrap_or_else(|e| panic!("create runtime {name}: {e}"));
}

/// A Run created and immediately marked Running on `pod`, as runtimed would have it.
async fn running(client: &Client, ns: &str, b: world::RunBuilder, pod: &str) {
    let name = b.build().name_any();
    b.create(client, ns).await;
    world::set_phase(client, ns, &name, "Running", Some(pod)).await;
}

#[tokio::test]
async fn insufficient_resource_on_some_pods_says_what_to_release() {
    let (client, ns) = setup("ex-insufficient").await;
    let gpu = [("runs", 4), ("example.com/gpu", 1)];
    world::ready_pod(&client, &ns, "python", "py-a", &gpu).await;
    world::ready_pod(&client, &ns, "python", "py-b", &gpu).await;
    world::ready_pod(&client, &ns, "python", "py-c", &[("runs", 4)]).await;
    let one_gpu = [("example.com/gpu", "1")];
    running(
        &client,
        &ns,
        run("busy-a", "python").requests(&one_gpu),
        "py-a",
    )
    .await;
    running(
        &client,
        &ns,
        run("busy-b", "python").requests(&one_gpu),
        "py-b",
    )
    .await;
    run("train", "python")
        .requests(&one_gpu)
        .create(&client, &ns)
        .await;

    let report = explain_json(&ns, "train");
    assert_eq!(report["schemaVersion"], 1);
    assert_eq!(report["namespace"], ns.as_str());
    assert_eq!(report["decision"], "Unschedulable");
    assert_eq!(report["replayed"], false);
    assert_eq!(report["request"], json!({"example.com/gpu": 1, "runs": 1}));
    assert_eq!(
        report["histogram"],
        json!([{"reason": "Insufficient example.com/gpu", "count": 3,
                "plugin": "RuntimePodAvailability", "resource": "example.com/gpu"}])
    );
    assert_eq!(
        first_rejections(&report),
        rejections(&[
            ("py-a", "Insufficient example.com/gpu"),
            ("py-b", "Insufficient example.com/gpu"),
            ("py-c", "Insufficient example.com/gpu"),
        ])
    );
    let py_a = &report["pods"][0];
    assert_eq!(
        py_a["resources"][0],
        json!({"name": "example.com/gpu", "used": 1, "assumed": 0, "capacity": 1, "request": 1})
    );
    assert_eq!(
        report["pods"][2]["resources"][0]["capacity"],
        Value::Null,
        "py-c does not advertise the GPU"
    );
    assert_eq!(py_a["heartbeat"]["state"], "fresh");
    assert_eq!(
        hints(&report),
        ["fits once 1 example.com/gpu is released on any of 2 Pods (py-a and py-b)"]
    );
    assert_scheduler_agrees(
        &client,
        &ns,
        "train",
        "0/3 Runtime Pods are available: 3 Insufficient example.com/gpu.",
    )
    .await;
}

#[tokio::test]
async fn an_unadvertised_resource_points_at_the_runtime_capacity() {
    let (client, ns) = setup("ex-unadvertised").await;
    runtime(&client, &ns, "python", &[("runs", "4")]).await;
    world::ready_pod(&client, &ns, "python", "py-a", &[("runs", 4)]).await;
    world::ready_pod(&client, &ns, "python", "py-b", &[("runs", 4)]).await;
    run("tpu", "python")
        .requests(&[("example.com/tpu", "1")])
        .create(&client, &ns)
        .await;

    let report = explain_json(&ns, "tpu");
    assert_eq!(report["runtime"]["found"], true);
    assert_eq!(report["runtime"]["capacity"], json!({"runs": "4"}));
    assert_eq!(
        first_rejections(&report),
        rejections(&[
            ("py-a", "Insufficient example.com/tpu"),
            ("py-b", "Insufficient example.com/tpu"),
        ])
    );
    assert_eq!(
        hints(&report),
        [
            "no Runtime Pod advertises example.com/tpu: add it to Runtime python's spec.capacity.resources"
        ]
    );
    assert_scheduler_agrees(
        &client,
        &ns,
        "tpu",
        "0/2 Runtime Pods are available: 2 Insufficient example.com/tpu.",
    )
    .await;
}

#[tokio::test]
async fn a_stale_heartbeat_is_reported_with_where_the_run_would_fit() {
    let (client, ns) = setup("ex-stale").await;
    let stale = world::create_pod(&client, &ns, "python", "py-a", &[("runs", 4)], &[]).await;
    world::set_ready(&client, &ns, "py-a", true).await;
    let renewed = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(120);
    world::heartbeat(&client, &stale, renewed, 40).await;
    world::ready_pod(&client, &ns, "python", "py-b", &[("runs", 1)]).await;
    running(&client, &ns, run("busy", "python"), "py-b").await;
    run("job", "python").create(&client, &ns).await;

    let report = explain_json(&ns, "job");
    assert_eq!(
        first_rejections(&report),
        rejections(&[
            ("py-a", "runtimed heartbeat stale"),
            ("py-b", "Insufficient runs")
        ])
    );
    assert_eq!(report["pods"][0]["heartbeat"]["state"], "stale");
    assert_eq!(report["pods"][0]["heartbeat"]["durationSeconds"], 40);
    assert_eq!(
        hints(&report),
        [
            "fits once 1 runs is released on py-b",
            "runtimed heartbeat stale on py-a: check that runtimed runs there and can renew its Lease; the Run would fit on py-a once available",
        ]
    );
    assert_scheduler_agrees(
        &client,
        &ns,
        "job",
        "0/2 Runtime Pods are available: 1 Insufficient runs, 1 runtimed heartbeat stale.",
    )
    .await;
}

#[tokio::test]
async fn a_not_ready_pod_and_a_runtime_without_ready_pods() {
    let (client, ns) = setup("ex-notready").await;
    world::ready_pod(&client, &ns, "python", "py-a", &[("runs", 4)]).await;
    world::set_ready(&client, &ns, "py-a", false).await;
    run("job", "python").create(&client, &ns).await;

    let report = explain_json(&ns, "job");
    assert_eq!(report["pods"][0]["ready"], false);
    assert_eq!(
        first_rejections(&report),
        rejections(&[("py-a", "Runtime Pod not ready")])
    );
    assert_eq!(hints(&report), ["Runtime python has 0 ready Pods (of 1)"]);
    assert_scheduler_agrees(
        &client,
        &ns,
        "job",
        "0/1 Runtime Pods are available: 1 Runtime Pod not ready.",
    )
    .await;
}

#[tokio::test]
async fn required_affinity_waits_for_a_matching_run_then_follows_it() {
    let (client, ns) = setup("ex-affinity").await;
    world::ready_pod(&client, &ns, "python", "py-a", &[("runs", 4)]).await;
    world::ready_pod(&client, &ns, "python", "py-b", &[("runs", 4)]).await;
    run("follower", "python")
        .labels(&[("app", "worker")])
        .requires(false, "app", "leader")
        .create(&client, &ns)
        .await;

    let report = explain_json(&ns, "follower");
    assert_eq!(
        first_rejections(&report),
        rejections(&[
            ("py-a", "waiting for required Run affinity"),
            ("py-b", "waiting for required Run affinity"),
        ])
    );
    assert_eq!(
        report["affinity"],
        json!([{"kind": "affinity", "field": "spec.affinity.runAffinity.required[0]",
                "selector": "app=leader", "matchesSelf": false, "targets": []}])
    );
    assert_eq!(
        hints(&report),
        [
            "needs a Run labelled app=leader to be placed first (required affinity spec.affinity.runAffinity.required[0]); this Run's own labels do not match it, so it cannot start the group"
        ]
    );
    let verdict = "0/2 Runtime Pods are available: 2 waiting for required Run affinity.";
    let before = explain_json(&ns, "follower");
    assert_eq!(before["verdict"], verdict);
    let _scheduler = SchedulerProcess::start(&ns, 1, None, "affinity").await;
    scheduler_message(&client, &ns, "follower", verdict).await;

    // The leader arrives; the follower joins it, and explain replays that placement.
    run("leader", "python")
        .labels(&[("app", "leader")])
        .create(&client, &ns)
        .await;
    let runs = wait_runs(
        &client,
        &ns,
        Duration::from_secs(20),
        "both scheduled",
        |runs| {
            runs.iter()
                .all(|r| r.phase() == RunPhase::Scheduled)
                .then(|| runs.to_vec())
        },
    )
    .await;
    let pod_of = |name: &str| {
        runs.iter()
            .find(|r| r.name_any() == name)
            .and_then(|r| r.active_pod().map(str::to_string))
            .unwrap()
    };
    let leader_pod = pod_of("leader");
    assert_eq!(pod_of("follower"), leader_pod);
    let report = explain_json(&ns, "follower");
    assert_eq!(report["replayed"], true);
    assert_eq!(report["chosen"], leader_pod.as_str());
    assert_eq!(
        report["affinity"][0]["targets"],
        json!([{"pod": leader_pod, "runs": ["leader"]}])
    );
    let table = explain(&ns, "run/follower", &[]);
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(
        text.starts_with(&format!(
            "Run follower is Scheduled on {leader_pod}; replaying the scheduler as if it were Pending:\nFits: would be placed on {leader_pod} (score "
        )),
        "{text}"
    );
}

#[tokio::test]
async fn anti_affinity_conflicts_name_the_runs_in_the_way() {
    let (client, ns) = setup("ex-anti").await;
    world::ready_pod(&client, &ns, "python", "py-a", &[("runs", 4)]).await;
    world::ready_pod(&client, &ns, "python", "py-b", &[("runs", 4)]).await;
    for (name, pod) in [("spread-0", "py-a"), ("spread-1", "py-b")] {
        running(
            &client,
            &ns,
            run(name, "python").labels(&[("spread", "x")]),
            pod,
        )
        .await;
    }
    run("spread-2", "python")
        .labels(&[("spread", "x")])
        .requires(true, "spread", "x")
        .create(&client, &ns)
        .await;

    let report = explain_json(&ns, "spread-2");
    assert_eq!(
        first_rejections(&report),
        rejections(&[
            ("py-a", "didn't match Run anti-affinity rules"),
            ("py-b", "didn't match Run anti-affinity rules"),
        ])
    );
    assert_eq!(
        report["pods"][0]["filters"],
        json!([
            {"plugin": "RuntimePodAvailability", "passed": true, "reason": null, "resource": null},
            {"plugin": "RunAffinity", "passed": false,
             "reason": "didn't match Run anti-affinity rules", "resource": null},
        ])
    );
    assert_eq!(
        hints(&report),
        [
            "required anti-affinity spec.affinity.runAntiAffinity.required[0] (spread=x) excludes py-a and py-b, where spread-0 and spread-1 are placed: the Run fits there only once they end"
        ]
    );
    assert_scheduler_agrees(
        &client,
        &ns,
        "spread-2",
        "0/2 Runtime Pods are available: 2 didn't match Run anti-affinity rules.",
    )
    .await;
}

#[tokio::test]
async fn a_fitting_run_names_the_pod_the_scheduler_then_picks() {
    let (client, ns) = setup("ex-fits").await;
    world::ready_pod(&client, &ns, "python", "py-a", &[("runs", 4)]).await;
    world::ready_pod(&client, &ns, "python", "py-b", &[("runs", 4)]).await;
    world::ready_pod(&client, &ns, "python", "py-c", &[("runs", 4)]).await;
    running(&client, &ns, run("busy-a", "python"), "py-a").await;
    running(&client, &ns, run("busy-b", "python"), "py-b").await;
    run("fit", "python").create(&client, &ns).await;

    let report = explain_json(&ns, "fit");
    assert_eq!(report["decision"], "Schedule");
    assert_eq!(
        report["verdict"],
        "Fits: would be placed on py-c (score 75)"
    );
    assert_eq!(report["chosen"], "py-c");
    assert_eq!(report["score"], 75);
    assert_eq!(report["histogram"], json!([]));
    assert_eq!(
        first_rejections(&report),
        rejections(&[("py-a", "-"), ("py-b", "-"), ("py-c", "-")])
    );
    let py_c = &report["pods"][2];
    assert_eq!(py_c["chosen"], true);
    assert_eq!(
        py_c["scores"],
        json!([
            {"plugin": "PreferredRunAffinity", "weight": 1, "raw": 0, "normalized": 0, "weighted": 0},
            {"plugin": "LeastLoaded", "weight": 1, "raw": py_c["scores"][1]["raw"], "normalized": 75, "weighted": 75},
        ])
    );
    assert_eq!(
        hints(&report),
        [format!(
            "the Run fits now: if it stays Pending, check that the scheduler (kubectl kruntimes scheduler run) is running and watches namespace {ns}"
        )]
    );

    let _scheduler = SchedulerProcess::start(&ns, 1, None, "fits").await;
    let placed = wait_runs(
        &client,
        &ns,
        Duration::from_secs(20),
        "fit scheduled",
        |runs| {
            runs.iter()
                .find(|r| r.name_any() == "fit" && r.phase() == RunPhase::Scheduled)
                .and_then(|r| r.active_pod().map(str::to_string))
        },
    )
    .await;
    assert_eq!(placed, "py-c", "explain predicted py-c");

    // Replayed after placement: its own Run must not count against py-c.
    let report = explain_json(&ns, "fit");
    assert_eq!(report["replayed"], true);
    assert_eq!(report["run"]["phase"], "Scheduled");
    assert_eq!(report["run"]["podName"], "py-c");
    assert_eq!(
        report["verdict"],
        "Fits: would be placed on py-c (score 75)"
    );
    assert_eq!(report["pods"][2]["resources"][0]["used"], 0);
    assert_eq!(report["hints"], json!([]));
}

#[tokio::test]
async fn terminal_and_invalid_runs_are_replayed() {
    let (client, ns) = setup("ex-terminal").await;
    world::ready_pod(&client, &ns, "python", "py-a", &[("runs", 1)]).await;
    run("done", "python").create(&client, &ns).await;
    world::set_phase(&client, &ns, "done", "Succeeded", None).await;
    let report = explain_json(&ns, "done");
    assert_eq!(report["replayed"], true);
    assert_eq!(report["run"]["phase"], "Succeeded");
    assert_eq!(report["verdict"], "Fits: would be placed on py-a (score 0)");
    let text = String::from_utf8(explain(&ns, "run/done", &[]).stdout).unwrap();
    assert!(
        text.starts_with(
            "Run done is Succeeded; replaying the scheduler as if it were Pending:\nFits: would be placed on py-a (score 0)\n"
        ),
        "{text}"
    );

    // An invalid request: explain says why before the scheduler fails the Run, with the same
    // reason and message it then writes.
    run("bad", "python")
        .requests(&[("example.com/gpu", "1.5")])
        .create(&client, &ns)
        .await;
    let report = explain_json(&ns, "bad");
    assert_eq!(report["decision"], "Invalid");
    assert_eq!(report["invalid"]["reason"], "InvalidResources");
    let message = report["invalid"]["message"].as_str().unwrap().to_string();
    assert!(
        message.starts_with(
            "spec.resources.requests[\"example.com/gpu\"]: \"1.5\" is not a valid quantity"
        ),
        "{message}"
    );
    assert_eq!(report["verdict"], format!("InvalidResources: {message}"));
    assert_eq!(report["pods"], json!([]));
    let out = explain(&ns, "run/bad", &[]);
    assert!(
        out.status.success(),
        "an invalid Run is a verdict, not an error"
    );
    let _scheduler = SchedulerProcess::start(&ns, 1, None, "terminal").await;
    let failed: Run = wait_runs(
        &client,
        &ns,
        Duration::from_secs(20),
        "bad failed",
        |runs| {
            runs.iter()
                .find(|r| r.name_any() == "bad" && r.phase() == RunPhase::Failed)
                .cloned()
        },
    )
    .await;
    let status = failed.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("InvalidResources"));
    assert_eq!(status.message.as_deref(), Some(message.as_str()));
    let report = explain_json(&ns, "bad");
    assert_eq!(report["replayed"], true);
    let text = String::from_utf8(explain(&ns, "run/bad", &[]).stdout).unwrap();
    assert!(
        text.starts_with(&format!(
            "Run bad is Failed (InvalidResources); replaying the scheduler as if it were Pending:\nInvalidResources: {message}\n"
        )),
        "{text}"
    );
}

#[tokio::test]
async fn a_missing_runtime_has_no_pods_and_says_so() {
    let (client, ns) = setup("ex-noruntime").await;
    run("lost", "ghost").create(&client, &ns).await;
    let report = explain_json(&ns, "lost");
    assert_eq!(
        report["runtime"],
        json!({"name": "ghost", "found": false, "replicas": null, "capacity": {}})
    );
    assert_eq!(report["totalPods"], 0);
    assert_eq!(
        hints(&report),
        [format!(
            "Runtime ghost not found in namespace {ns}: create it, or point spec.runtime of Run lost at an existing Runtime"
        )]
    );
    let missing = "Runtime \"ghost\" not found in this namespace.";
    assert_eq!(report["verdict"], missing);
    let _scheduler = SchedulerProcess::start(&ns, 1, None, "lost").await;
    scheduler_message(&client, &ns, "lost", missing).await;
    // The Runtime appears: the Run is woken and its message says what is missing now.
    runtime(&client, &ns, "ghost", &[("runs", "1")]).await;
    scheduler_message(&client, &ns, "lost", "0/0 Runtime Pods are available.").await;
    assert_eq!(
        explain_json(&ns, "lost")["verdict"],
        "0/0 Runtime Pods are available."
    );
}

#[tokio::test]
async fn errors_are_one_line_with_a_non_zero_exit() {
    let (_client, ns) = setup("ex-errors").await;
    let one_line = |out: &Output| {
        assert!(!out.status.success(), "expected a failure");
        assert!(out.stdout.is_empty(), "nothing on stdout");
        String::from_utf8(out.stderr.clone()).unwrap()
    };

    let err = one_line(&explain(&ns, "run/nope", &[]));
    assert_eq!(
        err,
        format!(
            "error: run \"nope\" not found in namespace \"{ns}\"; list the Runs there with `kubectl get runs -n {ns}`\n"
        )
    );
    let err = one_line(&explain("no-such-namespace", "run/nope", &["-o", "json"]));
    assert_eq!(
        err,
        "error: namespace \"no-such-namespace\" not found; pass an existing namespace with -n\n"
    );
    let err = one_line(&explain(&ns, "pod/nope", &[]));
    assert_eq!(
        err,
        "error: \"pod/nope\" is not a Run: explain supports run/NAME, runs/NAME or run NAME\n"
    );

    // An identity without RBAC grants is told who refused and what to do.
    let out = support::kruntimes()
        .env("KUBECONFIG", &support::control_plane().nobody_kubeconfig)
        .args(["explain", "run/nope", "-n", &ns])
        .output()
        .unwrap();
    let err = one_line(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "error: reading run nope in namespace {ns}: the API server of context test"
        )),
        "{err}"
    );
    assert!(
        err.contains("forbidden") && err.contains("ask a cluster admin"),
        "{err}"
    );

    // No cluster: a kubeconfig pointing at a closed port.
    let dir = tempfile::tempdir().unwrap();
    let port = world::free_port();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: gone\n  context:\n    cluster: gone\n    user: u\ncurrent-context: gone\nusers:\n- name: u\n  user:\n    token: t\n"
        ),
    )
    .unwrap();
    let out = support::kruntimes()
        .env("KUBECONFIG", &kubeconfig)
        .args(["explain", "run", "x", "-n", &ns])
        .output()
        .unwrap();
    let err = one_line(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "error: reading run x in namespace {ns}: cannot reach the API server of context gone (server https://127.0.0.1:{port})"
        )),
        "{err}"
    );
}

#[tokio::test]
async fn table_yaml_and_color_outputs_agree_with_json() {
    let (client, ns) = setup("ex-outputs").await;
    world::ready_pod(
        &client,
        &ns,
        "python",
        "py-a",
        &[("runs", 1), ("example.com/gpu", 1)],
    )
    .await;
    running(&client, &ns, run("busy", "python"), "py-a").await;
    run("job", "python").create(&client, &ns).await;
    let verdict = "0/1 Runtime Pods are available: 1 Insufficient runs.";

    let table = explain(&ns, "run/job", &[]);
    assert!(table.status.success());
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(!text.contains('\u{1b}'), "NO_COLOR and a pipe: no colors");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], verdict);
    assert!(
        lines[3].starts_with("PICK   POD    READY   HEARTBEAT"),
        "{text}"
    );
    assert!(
        lines[3].contains("   runs   ") && !lines[3].contains("example.com/gpu"),
        "{text}"
    );
    assert!(
        lines[4].contains("1+0/1 (+1)")
            && lines[4].contains("RuntimePodAvailability: Insufficient runs"),
        "{text}"
    );
    assert!(
        text.ends_with(
            "\nWhat would change the verdict:\n  - fits once 1 runs is released on py-a\n"
        ),
        "{text}"
    );

    let wide = String::from_utf8(explain(&ns, "run/job", &["-o", "wide"]).stdout).unwrap();
    assert!(
        wide.contains("example.com/gpu") && wide.contains("0+0/1"),
        "{wide}"
    );

    let colored =
        String::from_utf8(explain(&ns, "run/job", &["--color", "always"]).stdout).unwrap();
    assert!(
        colored.contains("\u{1b}["),
        "--color always colors even with NO_COLOR set"
    );
    let never = support::kruntimes()
        .env_remove("NO_COLOR")
        .args(["explain", "run/job", "-n", &ns, "--color", "never"])
        .output()
        .unwrap();
    assert!(!String::from_utf8(never.stdout).unwrap().contains('\u{1b}'));

    let yaml = explain(&ns, "run/job", &["-o", "yaml"]);
    let yaml: Value = serde_yaml::from_slice(&yaml.stdout).unwrap();
    let json = explain_json(&ns, "job");
    for field in [
        "verdict",
        "decision",
        "histogram",
        "request",
        "hints",
        "affinity",
        "totalPods",
    ] {
        assert_eq!(yaml[field], json[field], "{field}");
    }
    assert_eq!(json["verdict"], verdict);
    // Every documented top-level field is present.
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut want = vec![
        "schemaVersion",
        "namespace",
        "now",
        "run",
        "runtime",
        "replayed",
        "request",
        "decision",
        "verdict",
        "invalid",
        "chosen",
        "score",
        "totalPods",
        "histogram",
        "filterPlugins",
        "scorePlugins",
        "pods",
        "affinity",
        "repelledBy",
        "hints",
    ];
    let mut got = keys.clone();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);
    // And it is a Report: scripts in Rust can read it back.
    let typed: kruntimes::explain::Report = serde_json::from_value(json).unwrap();
    assert_eq!(typed.verdict, verdict);
}
