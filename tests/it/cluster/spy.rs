//! A spy in a Runtime Pod on the real cluster, through the real aggregation layer: the Runtime's
//! author declares their own container's port as `kruntimes-api`, so the gateway's calls reach
//! a recording proxy (the test runtime server's `--spy`) before runtimed. For `logs`,
//! `logs -f` and `invoke`, each request it passes on carries the gateway's token for this Pod
//! alone, and nothing of the caller: not the admin's token, not who they are.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec};
use kube::ResourceExt as _;

use super::harness::Cluster;
use super::objects::{
    create_run, create_runtime, delete_runtime, runtime_namespace, wait_phases, wait_runtime_ready,
};
use super::support::spy::Seen;
use super::support::tokens::reviewed_user;
use super::support::world::Create as _;
use kruntimes::api::{RUNTIMED_API_PORT_NAME, RunPhase};
use kruntimes::testing::run;

/// Where the spy listens in the Pod.
const SPY_PORT: i32 = 9445;

pub async fn no_callers_credential_reaches_a_spy_in_the_pod(cluster: &Cluster) {
    let ns = &runtime_namespace(cluster, "spied").await;
    let template = PodSpec {
        containers: vec![Container {
            name: kruntimes::runtime::pod::RUNTIME_CONTAINER.into(),
            image: Some(super::RUNTIME_SERVER.into()),
            args: Some(vec![
                "--spy".into(),
                format!(
                    "0.0.0.0:{SPY_PORT}=https://127.0.0.1:{}",
                    kruntimes::runtime::pod::API_PORT
                ),
            ]),
            ports: Some(vec![ContainerPort {
                name: Some(RUNTIMED_API_PORT_NAME.into()),
                container_port: SPY_PORT,
                ..Default::default()
            }]),
            ..Default::default()
        }],
        ..Default::default()
    };
    create_runtime(ns, "spied", 1, template, &[("runs", 2)]).await;
    let pods = wait_runtime_ready(ns, "spied", 1).await;
    let (pod, uid) = (pods[0].name_any(), pods[0].uid().unwrap());
    create_run(ns, "hello", "spied", &[], "echo one; echo two").await;
    run("fn")
        .runtime("spied")
        .function("upper")
        .create(ns)
        .await;
    wait_phases(
        ns,
        &["hello".to_string()],
        RunPhase::Succeeded,
        Duration::from_secs(120),
    )
    .await;
    wait_phases(
        ns,
        &["fn".to_string()],
        RunPhase::Ready,
        Duration::from_secs(120),
    )
    .await;

    let said = |args: &[&str]| {
        let out = cluster.kruntimes(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(said(&["logs", "run/hello", "-n", &ns.name]), "one\ntwo\n");
    assert_eq!(
        said(&["logs", "run/hello", "-f", "--tail", "1", "-n", &ns.name]),
        "two\n"
    );
    assert_eq!(
        said(&["invoke", "run/fn", "-n", &ns.name, "--data", "hello"]),
        "HELLO"
    );

    // What the spy passed on, from its container's log.
    let log = cluster.kubectl_raw(&["-n", &ns.name, "logs", &pod, "-c", "runtime"]);
    let seen: Vec<Seen> = log
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert_eq!(
        seen.len(),
        3,
        "one request per call, all through the spy: {log}"
    );
    let kubeconfig = std::fs::read_to_string(&cluster.kubeconfig).unwrap();
    let admin_token = kubeconfig
        .split("token: \"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the cluster's kubeconfig holds the admin's token");
    let client = cluster.client().await;
    for request in &seen {
        let text = request.text();
        assert!(
            !text.contains(admin_token),
            "the caller's token reached the Pod: {text}"
        );
        for word in ["kruntimes-admin", "impersonate", "x-remote", "x-kruntimes"] {
            assert!(
                !text.to_lowercase().contains(word),
                "{word} reached the Pod: {text}"
            );
        }
        let token = request.bearer().expect("a bearer token");
        let audience = kruntimes::api::runtimed_audience(&uid);
        assert_eq!(
            reviewed_user(&client, token, &audience).await.as_deref(),
            Some(kruntimes::api::DEFAULT_GATEWAY_USER),
            "the gateway's account, for this Pod's audience alone: {text}"
        );
    }
    delete_runtime(ns, "spied").await;
}
