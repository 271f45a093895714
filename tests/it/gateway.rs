//! The gateway (`subresources.kruntimes.io`) on the real control plane with its aggregation
//! layer: the API server authenticates and authorises the caller, proxies to the scheduler's
//! gateway with its front-proxy certificate, and the gateway calls runtimed with a token of its
//! own for that Pod alone. A spy in front of runtimed (as a proxy in the Runtime Pod would be)
//! records every request it passes on for `logs`, `logs -f`, `kubectl get --raw`, `invoke` and
//! `artifacts --download`: no credential of the caller is ever among them.
//!
//! One control plane per suite, one APIService per control plane: the scenarios run in
//! one test, in order.

use testkit as support;

use std::time::Duration;

use k8s_openapi::api::core::v1::ServiceAccount;
use kruntimes::api::{Run, RunPhase, runtimed_audience};
use kruntimes::testing::{run, runtime};
use kube::ResourceExt as _;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use support::gateway::{await_available, register_gateway, runtime_pod};
use support::tokens::{audience_token, reviewed_user};
use support::world::{
    Create as _, RuntimeServerProcess, RuntimedProcess, SchedulerProcess, TestNs, create_in,
};

const SYSTEM_NS: &str = "kubectl-kruntimes";
const GATEWAY_SA: &str = "kubectl-kruntimes-scheduler";
const WAIT: Duration = Duration::from_secs(60);

/// `kubectl-kruntimes ARGS -n NS --as USER`: (success, stdout, stderr).
fn kruntimes_as(user: &str, ns: &str, args: &[&str]) -> (bool, String, String) {
    let out = support::kruntimes()
        .args(args)
        .args(["-n", ns, "--as", user])
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `kubectl apply -f -` of `object` in `ns`.
fn apply(object: &serde_json::Value, ns: &str) {
    let mut cmd = support::kubectl();
    cmd.args(["apply", "-n", ns, "-f", "-"]);
    let out = support::output_with_stdin(&mut cmd, object.to_string().as_bytes());
    support::ok(&out, "kubectl apply");
}

/// runtimed's answer to a direct call with `token`.
async fn direct(port: u16, path: &str, token: Option<&str>) -> u16 {
    let client = kruntimes::manager::gateway::upstream::http_client().unwrap();
    let mut request = client.get(format!("https://127.0.0.1:{port}{path}"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap().status().as_u16()
}

// Several threads: the spies serve while the test waits on a kubectl-kruntimes process.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_go_through_the_aggregated_api_and_no_callers_credential_reaches_the_pod() {
    support::install_crds();
    let client = support::client().await;
    let gateway_port = support::free_port();
    register_gateway(&client, gateway_port).await;
    let ns = TestNs::new("gateway").await;
    let python = create_in(&ns, runtime("python").replicas(0).build()).await;

    // RBAC: alice may read the log of the Run, bob may read the Run only.
    let role = json!({
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
    "metadata": {"name": "log-reader"},
    "rules": [
        {"apiGroups": ["kruntimes.io"], "resources": ["runs"], "verbs": ["get"]},
        {"apiGroups": ["subresources.kruntimes.io"], "resources": ["runs/log", "runs/artifacts"], "verbs": ["get"]},
        {"apiGroups": ["subresources.kruntimes.io"], "resources": ["runs/invoke"], "verbs": ["create"]},
    ]});
    apply(&role, &ns.name);
    let run_reader = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "run-reader"},
        "rules": [{"apiGroups": ["kruntimes.io"], "resources": ["runs"], "verbs": ["get"]}]});
    apply(&run_reader, &ns.name);
    let reader = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "alice"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "log-reader"},
         "subjects": [{"kind": "User", "name": "alice"}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "bob"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "run-reader"},
         "subjects": [{"kind": "User", "name": "bob"}]},
    ]});
    apply(&reader, &ns.name);

    // runtimed of a Pod the controller made, behind the spy.
    let api_port = support::free_port();
    let spy = support::gateway::spy(api_port, None).await;
    let made = runtime_pod(&ns, "made", "python", "127.0.0.1", spy.port, Some(&python)).await;
    let api_flag = format!("--api-bind-address=127.0.0.1:{api_port}");
    let server = RuntimeServerProcess::start().await;
    let store = tempfile::tempdir().unwrap();
    let store_root = store.path().display().to_string();
    let mut args = vec!["-v", "--shutdown-grace", "1s", &api_flag];
    args.extend([
        "--artifact-root",
        &store_root,
        "--artifact-volume-claim",
        "artifacts",
    ]);
    args.extend(server.flag());
    let _runtimed = RuntimedProcess::start(&made, &args);
    // It watches another namespace: here the test plays the scheduler and the Runtime
    // controller, and only its gateway serves.
    let _scheduler = SchedulerProcess::start_with(
        &support::control_plane().kubeconfig,
        "gateway-elsewhere",
        1,
        None,
        "gateway",
        &[
            &format!("--gateway-bind-address=0.0.0.0:{gateway_port}"),
            &format!("--gateway-service-account={SYSTEM_NS}/{GATEWAY_SA}"),
            &format!("--leader-election-namespace={SYSTEM_NS}"),
        ],
    )
    .await;

    // A Run that prints, on that Pod.
    run("hello")
        .runtime("python")
        .task(&["sh", "-c", "echo hello from the task; echo second line"])
        .create(&ns)
        .await;
    let uid = made.uid().unwrap();
    let bind =
        json!({"status": {"phase": "Scheduled", "assignedPod": "made", "assignedPodUID": uid}});
    ns.runs()
        .patch_status("hello", &PatchParams::default(), &Patch::Merge(&bind))
        .await
        .unwrap();
    ns.wait_phase("hello", RunPhase::Succeeded, WAIT).await;

    // The APIService turns Available once the API server reaches the gateway.
    await_available(&client).await;

    // alice reads it, with and without --follow, and through kubectl get --raw.
    let (ok, out, err) = kruntimes_as("alice", &ns.name, &["logs", "run/hello"]);
    assert!(ok, "alice: {err}");
    assert_eq!(out, "hello from the task\nsecond line\n");
    let (ok, out, err) = kruntimes_as(
        "alice",
        &ns.name,
        &["logs", "run/hello", "-f", "--tail", "1"],
    );
    assert!(ok, "alice -f: {err}");
    assert_eq!(out, "second line\n");
    let raw = support::kubectl()
        .args([
            "get",
            "--raw",
            &format!(
                "/apis/subresources.kruntimes.io/v1alpha1/namespaces/{}/runs/hello/log",
                ns.name
            ),
            "--as",
            "alice",
        ])
        .output()
        .unwrap();
    assert!(
        raw.status.success(),
        "{}",
        String::from_utf8_lossy(&raw.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&raw.stdout),
        "hello from the task\nsecond line\n"
    );
    assert_eq!(
        spy.seen().len(),
        3,
        "one request per read: {:#?}",
        spy.seen()
    );

    // alice invokes a function Run and downloads a Run's artifact.
    run("fn")
        .runtime("python")
        .function("upper")
        .create(&ns)
        .await;
    let bind =
        json!({"status": {"phase": "Scheduled", "assignedPod": "made", "assignedPodUID": uid}});
    ns.runs()
        .patch_status("fn", &PatchParams::default(), &Patch::Merge(&bind))
        .await
        .unwrap();
    ns.wait_phase("fn", RunPhase::Ready, WAIT).await;
    let (ok, out, err) = kruntimes_as("alice", &ns.name, &["invoke", "run/fn", "--data", "hello"]);
    assert!(ok, "alice invokes: {err}");
    assert_eq!(out, "HELLO");
    run("art")
        .runtime("python")
        .inline("echo model > \"$KRUNTIME_ARTIFACTS_DIR/model.txt\"\n")
        .create(&ns)
        .await;
    ns.runs()
        .patch_status("art", &PatchParams::default(), &Patch::Merge(&bind))
        .await
        .unwrap();
    ns.wait_phase("art", RunPhase::Succeeded, WAIT).await;
    let downloads = tempfile::tempdir().unwrap();
    let into = downloads.path().display().to_string();
    let (ok, _, err) = kruntimes_as(
        "alice",
        &ns.name,
        &["artifacts", "run/art", "--download", &into],
    );
    assert!(ok, "alice downloads: {err}");
    assert_eq!(
        std::fs::read_to_string(downloads.path().join("model.txt")).unwrap(),
        "model\n"
    );
    let passed = spy.seen().len();
    assert_eq!(passed, 5, "one request per call: {:#?}", spy.seen());

    // bob is refused by the API server itself: the gateway never hears of him.
    let (ok, _, err) = kruntimes_as("bob", &ns.name, &["logs", "run/hello"]);
    assert!(!ok);
    assert!(err.contains("(403)") && err.contains("User \"bob\" cannot get resource \"runs/log\" in API group \"subresources.kruntimes.io\""), "{err}");
    assert!(
        !err.contains("the gateway"),
        "refused by the API server, not the gateway: {err}"
    );
    assert_eq!(spy.seen().len(), passed);

    // What crossed into the Pod: the gateway's own token, never the caller's.
    for seen in spy.seen() {
        let text = seen.text();
        assert!(
            !text.contains(support::ADMIN_TOKEN),
            "the caller's token reached the Pod: {text}"
        );
        for word in ["alice", "impersonate", "x-remote", "x-kruntimes"] {
            assert!(
                !text.to_lowercase().contains(word),
                "{word} reached the Pod: {text}"
            );
        }
        let token = seen.bearer().expect("a bearer token").to_string();
        let audience = kruntimes::api::runtimed_audience(&uid);
        assert_eq!(
            reviewed_user(&client, &token, &audience).await.as_deref(),
            Some(format!("system:serviceaccount:{SYSTEM_NS}:{GATEWAY_SA}").as_str()),
            "the gateway's account, for this Pod's audience"
        );
    }

    // runtimed itself refuses anyone but the gateway for its own Pod.
    let path = "/logs/hello";
    assert_eq!(direct(api_port, path, None).await, 401, "no token");
    assert_eq!(
        direct(api_port, path, Some(support::ADMIN_TOKEN)).await,
        401,
        "a user's token"
    );
    let elsewhere = audience_token(
        &client,
        SYSTEM_NS,
        GATEWAY_SA,
        &runtimed_audience("another-pod"),
    )
    .await;
    assert_eq!(
        direct(api_port, path, Some(&elsewhere)).await,
        401,
        "the gateway's token for another Pod"
    );
    let api_audience = audience_token(
        &client,
        SYSTEM_NS,
        GATEWAY_SA,
        "https://kubernetes.default.svc",
    )
    .await;
    assert_eq!(
        direct(api_port, path, Some(&api_audience)).await,
        401,
        "the gateway's token for the API server"
    );
    create_in(
        &ns,
        ServiceAccount {
            metadata: kube::api::ObjectMeta {
                name: Some("intruder".into()),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await;
    let intruder = audience_token(&client, &ns.name, "intruder", &runtimed_audience(&uid)).await;
    assert_eq!(
        direct(api_port, path, Some(&intruder)).await,
        403,
        "another account's token for this Pod"
    );
    let ours = audience_token(&client, SYSTEM_NS, GATEWAY_SA, &runtimed_audience(&uid)).await;
    assert_eq!(
        direct(api_port, path, Some(&ours)).await,
        200,
        "the gateway's token for this Pod"
    );

    // A Pod labelled as the Runtime's but not made by its controller receives nothing.
    let rogue_spy = support::gateway::spy(api_port, None).await;
    runtime_pod(&ns, "rogue", "python", "127.0.0.1", rogue_spy.port, None).await;
    run("lured")
        .runtime("python")
        .task(&["true"])
        .create(&ns)
        .await;
    let lure = json!({"status": {"phase": "Running", "assignedPod": "rogue"}});
    ns.runs()
        .patch_status("lured", &PatchParams::default(), &Patch::Merge(&lure))
        .await
        .unwrap();
    let (ok, _, err) = kruntimes_as("alice", &ns.name, &["logs", "run/lured"]);
    assert!(!ok);
    assert!(err.contains("Pod rogue, which run/lured names, was not made by the Runtime controller for Runtime python"), "{err}");
    assert!(rogue_spy.seen().is_empty(), "{:#?}", rogue_spy.seen());
    let _: Run = ns.get_run("lured").await;
}
