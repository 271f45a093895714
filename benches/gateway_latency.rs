//! `logs` and `invoke` through the gateway against the path they took before it, the API
//! server's Pod proxy, measured in one run on the project's control plane with a real runtimed
//! (and the test runtime server for the function Run).
//!
//! - **gateway**: `GET .../subresources.kruntimes.io/v1alpha1/namespaces/NS/runs/hello/log` and
//!   `POST .../runs/fn/invoke`: the API server authenticates and authorises the caller,
//!   proxies to the scheduler's gateway over the aggregation layer, and the gateway asks its
//!   SubjectAccessReview, reads the Run, the Runtime and the Pod, and calls runtimed with its
//!   own token for that Pod.
//! - **pod proxy** (the path before the gateway): `.../pods/https:made:PORT/proxy/logs/...`
//!   and `.../proxy/invoke/...`, the same requests runtimed received from the gateway, with
//!   the token in a header of its own, as the CLI once sent the caller's token in
//!   `X-Kruntimes-Authorization` (the API server strips `Authorization` before it proxies).
//!   runtimed then checked that token (a cached review), as it checks the gateway's now.
//! - **direct**: the same requests straight to the Pod, the floor both paths add to.
//! - **discovery** (with the logs): the gateway's discovery document through the API server,
//!   the aggregation layer's own hop, with no read and no runtimed behind it.
//!
//! All three go through the same spy in front of runtimed (it moves the header of the pod proxy
//! path into `Authorization`), so its hop is in each. The paths take turns, request by
//! request, so that drift of the machine falls on all of them alike.
//!
//! A measurement, not a test: it prints figures and asserts nothing about time. Run with
//! `cargo bench --bench gateway_latency [-- ROUNDS]` (default 300).

use testkit as support;

use std::time::{Duration, Instant};

use kruntimes::api::{RunPhase, runtimed_audience};
use kruntimes::testing::{percentile, run, runtime};
use kube::ResourceExt as _;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use support::gateway::{await_available, host_ip, register_gateway, runtime_pod, spy};
use support::world::{
    Create as _, RuntimeServerProcess, RuntimedProcess, SchedulerProcess, TestNs, create_in,
};

const SYSTEM_NS: &str = "kubectl-kruntimes";
const GATEWAY_SA: &str = "kubectl-kruntimes-scheduler";
const TOKEN_HEADER: &str = "x-bench-token";
const WAIT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Path {
    Gateway,
    PodProxy,
    Direct,
    /// The gateway's discovery document: the aggregation layer's hop alone, no read, no
    /// runtimed (measured with the logs).
    Discovery,
}

const PATHS: [Path; 3] = [Path::Gateway, Path::PodProxy, Path::Direct];

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(300);
    support::install_crds();
    let client = support::client().await;
    let gateway_port = support::free_port();
    register_gateway(&client, gateway_port).await;
    let ns = TestNs::new("gwbench").await;
    let python = create_in(&ns, runtime("python").replicas(0).build()).await;

    // The Pod is at this host's address: the API server proxies to no loopback address.
    let ip = host_ip().to_string();
    let api_port = support::free_port();
    let spy = spy(api_port, Some(TOKEN_HEADER)).await;
    let made = runtime_pod(&ns, "made", "python", &ip, spy.port, Some(&python)).await;
    let uid = made.uid().unwrap();
    let api_flag = format!("--api-bind-address=127.0.0.1:{api_port}");
    let server = RuntimeServerProcess::start().await;
    let mut args = vec!["--shutdown-grace", "1s", &api_flag];
    args.extend(server.flag());
    let _runtimed = RuntimedProcess::start(&made, &args);
    let _scheduler = SchedulerProcess::start_with(
        &support::control_plane().kubeconfig,
        "gwbench-elsewhere",
        1,
        None,
        "gwbench",
        &[
            &format!("--gateway-bind-address=0.0.0.0:{gateway_port}"),
            &format!("--gateway-service-account={SYSTEM_NS}/{GATEWAY_SA}"),
            &format!("--leader-election-namespace={SYSTEM_NS}"),
        ],
    )
    .await;

    // A finished task with a two-line log, and a function Run, both on that Pod.
    let bind =
        json!({"status": {"phase": "Scheduled", "assignedPod": "made", "assignedPodUID": uid}});
    run("hello")
        .runtime("python")
        .task(&["sh", "-c", "echo hello from the task; echo second line"])
        .create(&ns)
        .await;
    ns.runs()
        .patch_status("hello", &PatchParams::default(), &Patch::Merge(&bind))
        .await
        .unwrap();
    run("fn")
        .runtime("python")
        .function("upper")
        .create(&ns)
        .await;
    ns.runs()
        .patch_status("fn", &PatchParams::default(), &Patch::Merge(&bind))
        .await
        .unwrap();
    ns.wait_phase("hello", RunPhase::Succeeded, WAIT).await;
    ns.wait_phase("fn", RunPhase::Ready, WAIT).await;
    await_available(&client).await;

    // What runtimed receives from the gateway, replayed on the other paths.
    let subresources = format!(
        "/apis/subresources.kruntimes.io/v1alpha1/namespaces/{}/runs",
        ns.name
    );
    let log_via_gateway = format!("{subresources}/hello/log");
    let invoke_via_gateway = format!("{subresources}/fn/invoke");
    let first_log = get(&client, &log_via_gateway, None).await;
    assert_eq!(first_log, "hello from the task\nsecond line\n");
    assert_eq!(
        post(&client, &invoke_via_gateway, None, b"hello").await,
        "HELLO"
    );
    let seen = spy.seen();
    let log_target = seen[0].target.strip_prefix("GET ").unwrap().to_string();
    let invoke_target = seen[1].target.strip_prefix("POST ").unwrap().to_string();
    let pod_proxy = format!(
        "/api/v1/namespaces/{}/pods/https:made:{}/proxy",
        ns.name, spy.port
    );
    let gateway_token =
        support::tokens::audience_token(&client, SYSTEM_NS, GATEWAY_SA, &runtimed_audience(&uid))
            .await;
    let header = Some((TOKEN_HEADER, format!("Bearer {gateway_token}")));
    let direct = kruntimes::manager::gateway::upstream::http_client().unwrap();
    let direct_base = format!("https://127.0.0.1:{}", spy.port);

    let mut log_ms: Vec<(Path, f64)> = Vec::new();
    let mut invoke_ms: Vec<(Path, f64)> = Vec::new();
    eprintln!("{rounds} rounds of logs and invoke on three paths in turn");
    for round in 0..rounds {
        // Each path first, second and third equally often.
        let order: Vec<Path> = (0..3).map(|i| PATHS[(round + i) % 3]).collect();
        for path in order {
            let started = Instant::now();
            let log = match path {
                Path::Gateway => get(&client, &log_via_gateway, None).await,
                Path::PodProxy => {
                    get(&client, &format!("{pod_proxy}{log_target}"), header.clone()).await
                }
                Path::Direct => direct
                    .get(format!("{direct_base}{log_target}"))
                    .bearer_auth(&gateway_token)
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap(),
                Path::Discovery => unreachable!("not one of PATHS"),
            };
            log_ms.push((path, started.elapsed().as_secs_f64() * 1e3));
            assert_eq!(log, first_log, "{path:?}");
            if path == Path::Gateway {
                let started = Instant::now();
                let document = get(&client, "/apis/subresources.kruntimes.io/v1alpha1", None).await;
                log_ms.push((Path::Discovery, started.elapsed().as_secs_f64() * 1e3));
                assert!(document.contains("runs/log"), "{document}");
            }
            let started = Instant::now();
            let answer = match path {
                Path::Gateway => post(&client, &invoke_via_gateway, None, b"hello").await,
                Path::PodProxy => {
                    post(
                        &client,
                        &format!("{pod_proxy}{invoke_target}"),
                        header.clone(),
                        b"hello",
                    )
                    .await
                }
                Path::Direct => direct
                    .post(format!("{direct_base}{invoke_target}"))
                    .bearer_auth(&gateway_token)
                    .header(http::header::CONTENT_TYPE, "application/octet-stream")
                    .body(b"hello".to_vec())
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap(),
                Path::Discovery => unreachable!("not one of PATHS"),
            };
            invoke_ms.push((path, started.elapsed().as_secs_f64() * 1e3));
            assert_eq!(answer, "HELLO", "{path:?}");
        }
    }

    println!("| call | path | p50 ms | p95 ms | mean ms | p50 / pod proxy |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for (call, samples) in [("logs", &log_ms), ("invoke", &invoke_ms)] {
        let stats = |path: Path| {
            let mut ms: Vec<f64> = samples
                .iter()
                .filter(|(p, _)| *p == path)
                .map(|(_, ms)| *ms)
                .collect();
            ms.sort_by(f64::total_cmp);
            let mean = ms.iter().sum::<f64>() / ms.len() as f64;
            (percentile(&ms, 50.0), percentile(&ms, 95.0), mean)
        };
        let baseline = stats(Path::PodProxy).0;
        let shown: &[Path] = match call {
            "logs" => &[Path::Gateway, Path::PodProxy, Path::Direct, Path::Discovery],
            _ => &PATHS,
        };
        for &path in shown {
            let (p50, p95, mean) = stats(path);
            println!(
                "| {call} | {path:?} | {p50:.2} | {p95:.2} | {mean:.2} | {:.2}× |",
                p50 / baseline
            );
        }
    }
}

/// A GET through the API server, with `header` added; the body as text.
async fn get(client: &kube::Client, path: &str, header: Option<(&str, String)>) -> String {
    let mut request = http::Request::get(path);
    if let Some((name, value)) = header {
        request = request.header(name, value);
    }
    client
        .request_text(request.body(Vec::new()).unwrap())
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

/// A POST of `body` through the API server, with `header` added; the answer as text.
async fn post(
    client: &kube::Client,
    path: &str,
    header: Option<(&str, String)>,
    body: &[u8],
) -> String {
    let mut request =
        http::Request::post(path).header(http::header::CONTENT_TYPE, "application/octet-stream");
    if let Some((name, value)) = header {
        request = request.header(name, value);
    }
    client
        .request_text(request.body(body.to_vec()).unwrap())
        .await
        .unwrap_or_else(|e| panic!("POST {path}: {e}"))
}
