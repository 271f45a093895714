//! What an operator reads off any kruntimes process's `/metrics`, on the real control plane:
//! build information, the process's own resources, the API client's requests by method and
//! code, and which scheduler replica leads. Every series is bounded (no object or user in a
//! label), and after a workload the scheduler's and runtimed's `/metrics` pass Prometheus' own
//! naming linter (`promtool check metrics`).

use testkit as support;

use std::time::Duration;

use kruntimes::testing::run;
use support::pool::{HEARTBEAT, Pool};
use support::world::{Create, SchedulerProcess, TestNs, eventually, sample};

#[testkit::test]
async fn the_scheduler_reports_its_build_process_api_requests_and_leadership() {
    let ns = TestNs::new("opmetrics").await;
    let scheduler = SchedulerProcess::start(&ns.name, 2, None, "opmetrics").await;
    let body = eventually(
        Duration::from_secs(30),
        "the leader gauge at 1 and a counted list",
        async || {
            let body = scheduler.metrics().await;
            let leading = sample(&body, "kruntimes_scheduler_leader") == Some(1.0);
            let listed = sample(
                &body,
                "kruntimes_api_client_requests_total{code=\"200\",method=\"GET\"}",
            )
            .is_some_and(|n| n >= 1.0);
            if leading && listed {
                Ok(body)
            } else {
                Err(body
                    .lines()
                    .filter(|l| l.starts_with("kruntimes_"))
                    .collect::<Vec<_>>()
                    .join("\n"))
            }
        },
    )
    .await;
    let info = kruntimes::api::build::info();
    let build = format!(
        "kruntimes_build_info{{git_commit=\"{}\",rust_version=\"{}\",version=\"{}\"}}",
        info.git_commit, info.rust_version, info.version
    );
    assert_eq!(sample(&body, &build), Some(1.0), "{build} in\n{body}");
    // Whole CPU seconds: a young process may have used none yet.
    assert!(
        sample(&body, "process_cpu_seconds_total").is_some(),
        "{body}"
    );
    for series in [
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_start_time_seconds",
    ] {
        assert!(
            sample(&body, series).is_some_and(|v| v > 0.0),
            "{series} in\n{body}"
        );
    }
    assert!(
        body.contains("kruntimes_api_client_request_duration_seconds_bucket{method=\"GET\""),
        "{body}"
    );
    // Every label value is bounded: methods and codes only.
    for line in body
        .lines()
        .filter(|l| l.starts_with("kruntimes_api_client_requests_total{"))
    {
        assert!(!line.contains(&ns.name), "{line}");
    }
}

/// `promtool check metrics` on `body`: Prometheus' naming and type rules. Its complaints.
fn promtool_complaints(body: &str) -> String {
    use std::io::Write as _;
    let promtool = support::go_tools("tests/promtool/build.sh").join("promtool");
    let mut child = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match out.status.success() && said.trim().is_empty() {
        true => String::new(),
        false => format!("promtool check metrics ({}): {said}", out.status),
    }
}

/// After Runs have been scheduled, admitted and ended (one retried, then failed), runtimed
/// counts them under the Go project's series names, and every series the scheduler and runtimed
/// export (histograms, counters, gauges, with their HELP and TYPE) passes `promtool check
/// metrics`; the linter itself refuses a counter without `_total`.
#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_series_passes_prometheus_naming_linter_after_a_workload() {
    let broken =
        "# HELP kruntimes_things Things.\n# TYPE kruntimes_things counter\nkruntimes_things 1\n";
    assert!(
        !promtool_complaints(broken).is_empty(),
        "the linter sees a counter without _total"
    );
    let ns = TestNs::new("promtool").await;
    let scheduler = SchedulerProcess::start(&ns.name, 2, None, "promtool").await;
    let port = support::free_port();
    let bind = format!("127.0.0.1:{port}");
    let mut args: Vec<&str> = HEARTBEAT.to_vec();
    args.extend(["--metrics-bind-address", bind.as_str()]);
    let _pool = Pool::start(&ns, "pool", 1, &[("runs", 2)], &args).await;
    for i in 0..3 {
        run(&format!("r{i}")).runtime("pool").create(&ns).await;
    }
    // Two attempts, both failing: one retry, then a failed end.
    run("fails")
        .runtime("pool")
        .task(&["sh", "-c", "exit 3"])
        .retry_policy(2, "1s")
        .create(&ns)
        .await;
    ns.wait_runs(Duration::from_secs(60), "the Runs to end", |runs| {
        (runs.len() == 4 && runs.iter().all(|r| r.phase().is_terminal())).then_some(())
    })
    .await;
    let runtimed = support::world::http_get(port, "/metrics")
        .await
        .expect("runtimed's /metrics");
    assert_eq!(runtimed.0, 200);
    // The Go project's runtimed series, under its names.
    let exit = kruntimes::api::status::reasons::EXIT_CODE;
    for (series, value) in [
        ("kruntimes_runtimed_runs_total{result=\"succeeded\"}", 3.0),
        ("kruntimes_runtimed_runs_total{result=\"failed\"}", 1.0),
        ("kruntimes_runtimed_run_duration_seconds_count", 4.0),
        (
            &format!("kruntimes_runtimed_run_retries_total{{reason=\"{exit}\"}}"),
            1.0,
        ),
        (
            &format!("kruntimes_runtimed_run_failures_total{{phase=\"failed\",reason=\"{exit}\"}}"),
            1.0,
        ),
    ] {
        assert_eq!(
            sample(&runtimed.1, series),
            Some(value),
            "{series} in\n{}",
            runtimed.1
        );
    }
    let scheduler_body = scheduler.metrics().await;
    assert_eq!(
        sample(
            &scheduler_body,
            "kruntimes_scheduler_run_queue_duration_seconds_count"
        ),
        Some(4.0),
        "creation → assignment of each Run, once (a retry stays on its Pod)"
    );
    for (who, body) in [("the scheduler", scheduler_body), ("runtimed", runtimed.1)] {
        assert!(body.contains("kruntimes_"), "{who}: {body}");
        assert_eq!(promtool_complaints(&body), "", "{who}'s /metrics");
    }
}

/// `/metrics` is served over TLS and only to callers the API server authorises to get it, as
/// controller-runtime's secure metrics: no token is 401, an authenticated user without the
/// right is 403 (naming them and the role to grant), a service account bound to the shipped
/// `kubectl-kruntimes-metrics-reader` reads it, and plain HTTP gets no answer.
#[testkit::test]
async fn metrics_are_served_over_tls_to_authorised_callers_only() {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    use kube::api::{Api, Patch, PatchParams};
    let ns = support::world::TestNs::new("secure-metrics").await;
    let scheduler = support::world::SchedulerProcess::start(&ns.name, 1, None, "secure").await;
    let port = scheduler.metrics_port;
    let get = |token: Option<&'static str>| support::world::https_get(port, "/metrics", token);

    let (code, body) = get(None).await.unwrap();
    assert_eq!(code, 401, "{body}");
    let (code, body) = get(Some("made-up")).await.unwrap();
    assert_eq!(code, 401, "{body}");
    let (code, body) = get(Some(support::NOBODY_TOKEN)).await.unwrap();
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains("nobody may not get /metrics")
            && body.contains("kubectl-kruntimes-metrics-reader"),
        "{body}"
    );
    // Plain HTTP on the TLS port gets no HTTP answer at all.
    if let Ok((code, body)) = support::world::http_get(port, "/metrics").await {
        assert_eq!(code, 0, "plain HTTP was answered: {body}");
    }

    // The shipped reader role, bound to a service account, is enough.
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/scheduler.yaml"
    ))
    .unwrap();
    let reader: ClusterRole = kruntimes::util::yaml::documents(&shipped)
        .unwrap()
        .into_iter()
        .find(|d| {
            d["kind"] == "ClusterRole"
                && d["metadata"]["name"] == "kubectl-kruntimes-metrics-reader"
        })
        .map(|d| serde_json::from_value(d).unwrap())
        .unwrap();
    let params = PatchParams::apply("test").force();
    Api::<ClusterRole>::all(ns.client.clone())
        .patch(
            "kubectl-kruntimes-metrics-reader",
            &params,
            &Patch::Apply(&reader),
        )
        .await
        .unwrap();
    let account: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "prometheus"}})).unwrap();
    support::world::create_in(&ns, account).await;
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("metrics-reader-{}", ns.name)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kubectl-kruntimes-metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": ns.name}]
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(ns.client.clone())
        .create(&Default::default(), &binding)
        .await
        .unwrap();
    let token = support::tokens::unbound_token(&ns.client, &ns.name, "prometheus").await;
    let token: &'static str = Box::leak(token.into_boxed_str());
    let body = support::world::eventually(
        std::time::Duration::from_secs(30),
        "the reader's binding to take effect",
        async || match get(Some(token)).await {
            Ok((200, body)) => Ok(body),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    assert!(body.contains("kruntimes_scheduler_leader"), "{body}");
}
