//! What an operator reads off any kruntimes process's `/metrics`, on the real control plane:
//! build information, the process's own resources, the API client's requests by method and
//! code, and which scheduler replica leads. Every series is bounded (no object or user in a
//! label).

mod support;

use std::time::Duration;

use support::world::{SchedulerProcess, TestNs, eventually, sample};

#[tokio::test]
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
    let info = kruntimes::version::info();
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
