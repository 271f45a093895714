//! `explain run/NAME` against the real control plane: the built binary reads real objects and
//! its verdict must be exactly the message the running scheduler (`scheduler run`, the built
//! binary too) writes on the Run, with the per-Pod first rejections, the JSON structure and
//! the hints asserted for each scenario.
//!
//! Each test has its own namespace; schedulers watch only that namespace.

use testkit as support;

use std::process::Output;

use kube::ResourceExt;
use serde_json::{Value, json};

use kruntimes::api::{Run, RunPhase};
use kruntimes::testing::{RunBuilder, pod, pods, run, runtime};
use support::world::{
    Create, SchedulerProcess, TestNs, WAIT, after_the_second_of, eventually, pod_of,
};

const GPU: &str = "example.com/gpu";

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

/// Asserts that the report lists exactly `pods`, each first rejected with `reason`.
fn assert_all_rejected(report: &Value, pods: &[&str], reason: &str) {
    let pairs: Vec<(&str, &str)> = pods.iter().map(|p| (*p, reason)).collect();
    assert_eq!(first_rejections(report), rejections(&pairs));
}

/// Asserts that the table output of `explain run/<name>` starts with `start`.
fn assert_table_starts_with(ns: &TestNs, name: &str, start: &str) {
    let out = explain(&ns.name, &format!("run/{name}"), &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with(start), "{text}");
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
async fn scheduler_message(ns: &TestNs, name: &str, expected: &str) {
    let what = format!("the scheduler to write explain's verdict {expected:?} on {name}");
    eventually(WAIT, &what, async || {
        let message = ns.get_run(name).await.status.and_then(|s| s.message);
        if message.as_deref() == Some(expected) {
            Ok(())
        } else {
            Err(format!("the scheduler wrote {message:?}"))
        }
    })
    .await
}

/// Asserts the verdict before the scheduler runs, then that the running scheduler writes
/// exactly that message, and that a second explain agrees with what it wrote.
async fn assert_scheduler_agrees(ns: &TestNs, name: &str, verdict: &str) {
    let before = explain_json(&ns.name, name);
    assert_eq!(before["verdict"], verdict);
    let _scheduler = SchedulerProcess::start(&ns.name, 1, None, name).await;
    scheduler_message(ns, name, verdict).await;
    let after = explain_json(&ns.name, name);
    assert_eq!(after["verdict"], verdict);
    assert_eq!(after["run"]["message"], verdict);
    assert_eq!(after["run"]["reason"], "Unschedulable");
}

/// A Run created and marked Running on `pod`, as runtimed would have it.
async fn running(ns: &TestNs, b: RunBuilder, pod: &str) {
    b.on(pod).running().create(ns).await;
}

#[testkit::test]
async fn insufficient_resource_on_some_pods_says_what_to_release() {
    let ns = TestNs::new("ex-insufficient").await;
    let gpu = [("runs", 4), (GPU, 1)];
    pods(&["py-a", "py-b"], &gpu).create(&ns).await;
    pod("py-c").capacity(&[("runs", 4)]).create(&ns).await;
    let one_gpu = [(GPU, 1)];
    running(&ns, run("busy-a").requests(&one_gpu), "py-a").await;
    running(&ns, run("busy-b").requests(&one_gpu), "py-b").await;
    run("train").requests(&one_gpu).create(&ns).await;

    let report = explain_json(&ns.name, "train");
    assert_eq!(report["schemaVersion"], 2);
    assert_eq!(report["namespace"], ns.name.as_str());
    assert_eq!(report["decision"], "Unschedulable");
    assert_eq!(report["replayed"], false);
    assert_eq!(report["request"], json!({"example.com/gpu": 1, "runs": 1}));
    assert_eq!(
        report["histogram"],
        json!([{"reason": "Insufficient example.com/gpu", "count": 3,
                "plugin": "RuntimePodAvailability", "resource": "example.com/gpu"}])
    );
    let reason = "Insufficient example.com/gpu";
    assert_all_rejected(&report, &["py-a", "py-b", "py-c"], reason);
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
    let verdict = "0/3 Runtime Pods are available: 3 Insufficient example.com/gpu.";
    assert_scheduler_agrees(&ns, "train", verdict).await;
}

#[testkit::test]
async fn an_unadvertised_resource_points_at_the_runtime_capacity() {
    let ns = TestNs::new("ex-unadvertised").await;
    // replicas: 0, so that the Runtime controller creates no Pods of its own.
    let python = runtime("python").replicas(0).capacity(&[("runs", 4)]);
    python.create(&ns).await;
    pods(&["py-a", "py-b"], &[("runs", 4)]).create(&ns).await;
    run("tpu")
        .requests(&[("example.com/tpu", 1)])
        .create(&ns)
        .await;

    let report = explain_json(&ns.name, "tpu");
    assert_eq!(report["runtime"]["found"], true);
    assert_eq!(report["runtime"]["capacity"], json!({"runs": "4"}));
    let reason = "Insufficient example.com/tpu";
    assert_all_rejected(&report, &["py-a", "py-b"], reason);
    let hint = "no Runtime Pod advertises example.com/tpu: add it to Runtime python's spec.capacity.resources";
    assert_eq!(hints(&report), [hint]);
    let verdict = "0/2 Runtime Pods are available: 2 Insufficient example.com/tpu.";
    assert_scheduler_agrees(&ns, "tpu", verdict).await;
}

#[testkit::test]
async fn a_stale_heartbeat_is_reported_with_where_the_run_would_fit() {
    let ns = TestNs::new("ex-stale").await;
    let stale = pod("py-a").capacity(&[("runs", 4)]).lease_renewed_ago(120);
    stale.create(&ns).await;
    pod("py-b").capacity(&[("runs", 1)]).create(&ns).await;
    running(&ns, run("busy"), "py-b").await;
    run("job").create(&ns).await;

    let report = explain_json(&ns.name, "job");
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
    let verdict =
        "0/2 Runtime Pods are available: 1 Insufficient runs, 1 runtimed heartbeat stale.";
    assert_scheduler_agrees(&ns, "job", verdict).await;
}

#[testkit::test]
async fn a_not_ready_pod_and_a_runtime_without_ready_pods() {
    let ns = TestNs::new("ex-notready").await;
    pod("py-a")
        .capacity(&[("runs", 4)])
        .not_ready()
        .create(&ns)
        .await;
    run("job").create(&ns).await;

    let report = explain_json(&ns.name, "job");
    assert_eq!(report["pods"][0]["ready"], false);
    assert_eq!(
        first_rejections(&report),
        rejections(&[("py-a", "Runtime Pod not ready")])
    );
    assert_eq!(hints(&report), ["Runtime python has 0 ready Pods (of 1)"]);
    let verdict = "0/1 Runtime Pods are available: 1 Runtime Pod not ready.";
    assert_scheduler_agrees(&ns, "job", verdict).await;
}

#[testkit::test]
async fn required_affinity_waits_for_a_matching_run_then_follows_it() {
    let ns = TestNs::new("ex-affinity").await;
    pods(&["py-a", "py-b"], &[("runs", 4)]).create(&ns).await;
    let follower = run("follower").labels(&[("app", "worker")]);
    follower.requires(&[("app", "leader")]).create(&ns).await;

    let report = explain_json(&ns.name, "follower");
    let reason = "waiting for required Run affinity";
    assert_all_rejected(&report, &["py-a", "py-b"], reason);
    assert_eq!(
        report["affinity"],
        json!([{"kind": "affinity", "field": "spec.affinity.runAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]",
                "selector": "app=leader", "matchesSelf": false, "targets": []}])
    );
    let hint = "needs a Run labelled app=leader to be placed first (required affinity spec.affinity.runAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]); this Run's own labels do not match it, so it cannot start the group";
    assert_eq!(hints(&report), [hint]);
    let verdict = "0/2 Runtime Pods are available: 2 waiting for required Run affinity.";
    let before = explain_json(&ns.name, "follower");
    assert_eq!(before["verdict"], verdict);
    let _scheduler = SchedulerProcess::start(&ns.name, 1, None, "affinity").await;
    scheduler_message(&ns, "follower", verdict).await;

    // The leader arrives; the follower joins it, and explain replays that placement.
    run("leader").labels(&[("app", "leader")]).create(&ns).await;
    let runs = ns
        .wait_runs(WAIT, "both scheduled", |runs| {
            runs.iter()
                .all(|r| r.phase() == RunPhase::Scheduled)
                .then(|| runs.to_vec())
        })
        .await;
    let leader_pod = pod_of(&runs, "leader").unwrap();
    assert_eq!(pod_of(&runs, "follower").unwrap(), leader_pod);
    let report = explain_json(&ns.name, "follower");
    assert_eq!(report["replayed"], true);
    assert_eq!(report["chosen"], leader_pod.as_str());
    assert_eq!(
        report["affinity"][0]["targets"],
        json!([{"pod": leader_pod, "runs": ["leader"]}])
    );
    let replay = format!(
        "Run follower is Scheduled on {leader_pod}; replaying the scheduler as if it were Pending:\nFits: would be placed on {leader_pod} (score "
    );
    assert_table_starts_with(&ns, "follower", &replay);
}

#[testkit::test]
async fn anti_affinity_conflicts_name_the_runs_in_the_way() {
    let ns = TestNs::new("ex-anti").await;
    pods(&["py-a", "py-b"], &[("runs", 4)]).create(&ns).await;
    let spread = [("spread", "x")];
    for (name, pod) in [("spread-0", "py-a"), ("spread-1", "py-b")] {
        running(&ns, run(name).labels(&spread), pod).await;
    }
    run("spread-2")
        .labels(&spread)
        .anti(&spread)
        .create(&ns)
        .await;

    let report = explain_json(&ns.name, "spread-2");
    let reason = "didn't match Run anti-affinity rules";
    assert_all_rejected(&report, &["py-a", "py-b"], reason);
    assert_eq!(
        report["pods"][0]["filters"],
        json!([
            {"plugin": "RuntimePodAvailability", "passed": true, "reason": null, "resource": null},
            {"plugin": "WorkspacePlacement", "passed": true, "reason": null, "resource": null},
            {"plugin": "RunAffinity", "passed": false,
             "reason": "didn't match Run anti-affinity rules", "resource": null},
        ])
    );
    let hint = "required anti-affinity spec.affinity.runAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0] (spread=x) excludes py-a and py-b, where spread-0 and spread-1 are placed: the Run fits there only once they end";
    assert_eq!(hints(&report), [hint]);
    let verdict = "0/2 Runtime Pods are available: 2 didn't match Run anti-affinity rules.";
    assert_scheduler_agrees(&ns, "spread-2", verdict).await;
}

#[testkit::test]
async fn a_fitting_run_names_the_pod_the_scheduler_then_picks() {
    let ns = TestNs::new("ex-fits").await;
    pods(&["py-a", "py-b", "py-c"], &[("runs", 4)])
        .create(&ns)
        .await;
    running(&ns, run("busy-a"), "py-a").await;
    running(&ns, run("busy-b"), "py-b").await;
    run("fit").create(&ns).await;

    let report = explain_json(&ns.name, "fit");
    assert_eq!(report["decision"], "Schedule");
    assert_eq!(
        report["verdict"],
        "Fits: would be placed on py-c (score 75)"
    );
    assert_eq!(report["chosen"], "py-c");
    assert_eq!(report["score"], 75);
    assert_eq!(report["histogram"], json!([]));
    let reason = "-";
    assert_all_rejected(&report, &["py-a", "py-b", "py-c"], reason);
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

    let _scheduler = SchedulerProcess::start(&ns.name, 1, None, "fits").await;
    let placed = ns
        .wait_runs(WAIT, "fit scheduled", |runs| {
            runs.iter()
                .find(|r| r.name_any() == "fit" && r.phase() == RunPhase::Scheduled)
                .and_then(|r| r.active_pod().map(str::to_string))
        })
        .await;
    assert_eq!(placed, "py-c", "explain predicted py-c");

    // Replayed after placement: its own Run must not count against py-c.
    let report = explain_json(&ns.name, "fit");
    assert_eq!(report["replayed"], true);
    assert_eq!(report["run"]["phase"], "Scheduled");
    assert_eq!(report["run"]["assignedPod"], "py-c");
    assert_eq!(
        report["verdict"],
        "Fits: would be placed on py-c (score 75)"
    );
    assert_eq!(report["pods"][2]["resources"][0]["used"], 0);
    assert_eq!(report["hints"], json!([]));
}

#[testkit::test]
async fn terminal_and_invalid_runs_are_replayed() {
    let ns = TestNs::new("ex-terminal").await;
    pod("py-a").capacity(&[("runs", 1)]).create(&ns).await;
    run("done").succeeded().create(&ns).await;
    let report = explain_json(&ns.name, "done");
    assert_eq!(report["replayed"], true);
    assert_eq!(report["run"]["phase"], "Succeeded");
    assert_eq!(report["verdict"], "Fits: would be placed on py-a (score 0)");
    let replay = "Run done is Succeeded; replaying the scheduler as if it were Pending:\nFits: would be placed on py-a (score 0)\n";
    assert_table_starts_with(&ns, "done", replay);

    // An invalid request: explain says why before the scheduler fails the Run, with the same
    // reason and message it then writes.
    run("bad").request_strs(&[(GPU, "1.5")]).create(&ns).await;
    let report = explain_json(&ns.name, "bad");
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
    let out = explain(&ns.name, "run/bad", &[]);
    assert!(
        out.status.success(),
        "an invalid Run is a verdict, not an error"
    );
    let _scheduler = SchedulerProcess::start(&ns.name, 1, None, "terminal").await;
    let failed: Run = ns
        .wait_runs(WAIT, "bad failed", |runs| {
            runs.iter()
                .find(|r| r.name_any() == "bad" && r.phase() == RunPhase::Failed)
                .cloned()
        })
        .await;
    let status = failed.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("InvalidResources"));
    assert_eq!(status.message.as_deref(), Some(message.as_str()));
    let report = explain_json(&ns.name, "bad");
    assert_eq!(report["replayed"], true);
    let replay = format!(
        "Run bad is Failed (InvalidResources); replaying the scheduler as if it were Pending:\nInvalidResources: {message}\n"
    );
    assert_table_starts_with(&ns, "bad", &replay);
}

#[testkit::test]
async fn a_missing_runtime_has_no_pods_and_says_so() {
    let ns = TestNs::new("ex-noruntime").await;
    run("lost").runtime("ghost").create(&ns).await;
    let report = explain_json(&ns.name, "lost");
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
    let missing =
        "Runtime \"ghost\" not found in this namespace; waiting for available runtime pods.";
    assert_eq!(report["verdict"], missing);
    let _scheduler = SchedulerProcess::start(&ns.name, 1, None, "lost").await;
    scheduler_message(&ns, "lost", missing).await;
    // The Runtime appears: the Run is woken and its message says what is missing now.
    runtime("ghost").replicas(0).create(&ns).await;
    let none = "0/0 Runtime Pods are available; waiting for available runtime pods.";
    scheduler_message(&ns, "lost", none).await;
    assert_eq!(explain_json(&ns.name, "lost")["verdict"], none);
}

#[testkit::test]
async fn errors_are_one_line_with_a_non_zero_exit() {
    let ns = TestNs::new("ex-errors").await;
    let one_line = |out: &Output| {
        assert!(!out.status.success(), "expected a failure");
        assert!(out.stdout.is_empty(), "nothing on stdout");
        String::from_utf8(out.stderr.clone()).unwrap()
    };

    let err = one_line(&explain(&ns.name, "run/nope", &[]));
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
    let err = one_line(&explain(&ns.name, "pod/nope", &[]));
    assert_eq!(
        err,
        "error: \"pod/nope\" is not a Run: explain supports NAME, run/NAME, rn/NAME or run NAME\n"
    );

    // An identity without RBAC grants is told who refused and what to do.
    let out = support::kruntimes()
        .env("KUBECONFIG", &support::control_plane().nobody_kubeconfig)
        .args(["explain", "run/nope", "-n", &ns.name])
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
    let port = support::free_port();
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
        .args(["explain", "run", "x", "-n", &ns.name])
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

#[testkit::test]
async fn table_yaml_and_color_outputs_agree_with_json() {
    let ns = TestNs::new("ex-outputs").await;
    pod("py-a")
        .capacity(&[("runs", 1), (GPU, 1)])
        .create(&ns)
        .await;
    running(&ns, run("busy"), "py-a").await;
    run("job").create(&ns).await;
    let verdict = "0/1 Runtime Pods are available: 1 Insufficient runs.";

    let table = explain(&ns.name, "run/job", &[]);
    assert!(table.status.success());
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(!text.contains('\u{1b}'), "NO_COLOR and a pipe: no colors");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], verdict);
    assert_eq!(
        lines[1],
        "Queue: 1st of 1 Pending Run of the Runtime (priority, then creation order)."
    );
    assert!(
        lines[4].starts_with("PICK   POD    READY   HEARTBEAT"),
        "{text}"
    );
    assert!(
        lines[4].contains("   runs   ") && !lines[4].contains("example.com/gpu"),
        "{text}"
    );
    assert!(
        lines[5].contains("1+0/1 (+1)")
            && lines[5].contains("RuntimePodAvailability: Insufficient runs"),
        "{text}"
    );
    assert!(
        text.ends_with(
            "\nWhat would change the verdict:\n  - fits once 1 runs is released on py-a\n"
        ),
        "{text}"
    );

    let wide = String::from_utf8(explain(&ns.name, "run/job", &["-o", "wide"]).stdout).unwrap();
    assert!(
        wide.contains("example.com/gpu") && wide.contains("0+0/1"),
        "{wide}"
    );

    let colored =
        String::from_utf8(explain(&ns.name, "run/job", &["--color", "always"]).stdout).unwrap();
    assert!(
        colored.contains("\u{1b}["),
        "--color always colors even with NO_COLOR set"
    );
    let never = support::kruntimes()
        .env_remove("NO_COLOR")
        .args(["explain", "run/job", "-n", &ns.name, "--color", "never"])
        .output()
        .unwrap();
    assert!(!String::from_utf8(never.stdout).unwrap().contains('\u{1b}'));

    let yaml = explain(&ns.name, "run/job", &["-o", "yaml"]);
    let yaml: Value =
        kruntimes::util::yaml::from_str(&String::from_utf8_lossy(&yaml.stdout)).unwrap();
    let json = explain_json(&ns.name, "job");
    for field in [
        "verdict",
        "decision",
        "histogram",
        "request",
        "hints",
        "affinity",
        "totalPods",
        "queue",
    ] {
        assert_eq!(yaml[field], json[field], "{field}");
    }
    assert_eq!(json["verdict"], verdict);
    assert_eq!(
        json["queue"],
        serde_json::json!({"position": 1, "pending": 1, "nominated": null})
    );
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
        "queue",
        "hints",
        "scheduler",
    ];
    let mut got = keys.clone();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);
    // Who leads depends on every test's schedulers (any namespace's Lease may answer): only
    // the shape is this test's (tests/it/status.rs asserts the states).
    let states = ["Leading", "Expired", "None", "Unknown"];
    assert!(
        states.contains(&json["scheduler"]["state"].as_str().unwrap()),
        "{}",
        json["scheduler"]
    );
    assert!(json["scheduler"]["message"].is_string());
    // And it is a Report: scripts in Rust can read it back.
    let typed: kruntimes::cmd::explain::Report = serde_json::from_value(json).unwrap();
    assert_eq!(typed.verdict, verdict);
}

#[testkit::test]
async fn a_nominated_run_and_a_run_behind_it_say_which_pod_is_drained() {
    let ns = TestNs::new("ex-nominated").await;
    pods(&["py-a", "py-b"], &[("runs", 2)]).create(&ns).await;
    running(&ns, run("busy-a"), "py-a").await;
    running(&ns, run("busy-b"), "py-b").await;
    // The scheduler nominated py-b for the large Run (what a leader records in status).
    run("large")
        .requests(&[("runs", 2)])
        .nominated("py-b")
        .create(&ns)
        .await;
    // Queue order is creation time (to the second), then UID: the later Runs must be created
    // in a later second than the large one to come after it.
    after_the_second_of(&ns.get_run("large").await).await;
    run("later").create(&ns).await;

    let large = explain_json(&ns.name, "large");
    assert_eq!(large["queue"]["position"], 1);
    assert_eq!(large["queue"]["pending"], 2);
    assert_eq!(large["queue"]["nominated"]["pod"], "py-b");
    assert_eq!(
        large["queue"]["nominated"]["resources"],
        json!([{"name": "runs", "used": 1, "assumed": 0, "capacity": 2, "request": 2}])
    );
    let text = String::from_utf8(explain(&ns.name, "run/large", &[]).stdout).unwrap();
    assert!(
        text.lines().nth(1).unwrap().ends_with(
            "Runtime Pod py-b is being drained for this Run: runs 1/2 in use; later Runs leave room for it there."
        ),
        "{text}"
    );

    // The later Run fits only on py-a: py-b's free slot is held for the large Run.
    let later = explain_json(&ns.name, "later");
    assert_eq!(later["queue"]["position"], 2);
    assert_eq!(later["chosen"], "py-a");
    assert_eq!(
        first_rejections(&later),
        rejections(&[("py-a", "-"), ("py-b", "reserved for an earlier Run")])
    );
    run("last").create(&ns).await;
    running(&ns, run("busy-a2"), "py-a").await;
    let last = explain_json(&ns.name, "last");
    assert_eq!(
        last["verdict"],
        "0/2 Runtime Pods are available: 1 Insufficient runs, 1 reserved for an earlier Run."
    );
    assert!(
        hints(&last)
            .iter()
            .any(|h| h.starts_with("py-b is being drained for an earlier Run")),
        "{:?}",
        hints(&last)
    );
}

/// A nominated Run whose nominated Pod is fuller than another feasible one: the scheduler binds
/// the nominated Pod (its room was held for the Run), and explain names that Pod beforehand,
/// not the emptier one its plugins' scores prefer.
#[testkit::test]
async fn a_nominated_run_that_fits_is_explained_on_the_pod_the_scheduler_binds() {
    let ns = TestNs::new("ex-nominated-fits").await;
    pods(&["py-a", "py-b"], &[("runs", 4)]).create(&ns).await;
    running(&ns, run("busy-b"), "py-b").await;
    // What a leader records when it nominates py-b for this Run.
    run("held").nominated("py-b").create(&ns).await;

    let report = explain_json(&ns.name, "held");
    assert_eq!(report["decision"], "Schedule");
    assert_eq!(report["chosen"], "py-b", "{report:#}");
    assert_eq!(report["queue"]["nominated"]["pod"], "py-b");
    let chosen: Vec<&Value> = report["pods"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["chosen"] == true)
        .map(|p| &p["name"])
        .collect();
    assert_eq!(chosen, [&json!("py-b")]);

    let _scheduler = SchedulerProcess::start(&ns.name, 1, None, "nominated-fits").await;
    let placed = ns
        .wait_runs(WAIT, "held scheduled", |runs| {
            runs.iter()
                .find(|r| r.name_any() == "held" && r.phase() == RunPhase::Scheduled)
                .and_then(|r| r.active_pod().map(str::to_string))
        })
        .await;
    assert_eq!(
        placed, "py-b",
        "explain named py-b, the scheduler must bind it"
    );
}
