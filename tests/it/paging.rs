//! `status` and `explain` read lists in pages ([`PAGE`]), as `kubectl get` does (`--chunk-size`):
//! counted by the API server itself (`apiserver_request_total`), on a control plane of this
//! suite's own where nothing else lists Runs, so each count is exact.

use testkit as support;

use futures::{StreamExt as _, TryStreamExt as _};
use kube::Client;
use kube::api::PostParams;
use serde_json::Value;

use kruntimes::cmd::replay::load::PAGE;
use kruntimes::testing::{pod, run};
use support::world::{Create, TestNs};

/// LIST requests for Runs the API server has served, from its own metrics.
async fn run_lists(client: &Client) -> u64 {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let metrics = client.request_text(request).await.expect("GET /metrics");
    metrics
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| l.contains("resource=\"runs\"") && l.contains("verb=\"LIST\""))
        .filter(|l| l.contains("subresource=\"\""))
        .map(|l| {
            let value = l.rsplit(' ').next().unwrap();
            value.parse::<f64>().unwrap() as u64
        })
        .sum()
}

#[testkit::test]
async fn status_and_explain_read_a_page_of_runs_at_a_time() {
    let ns = TestNs::new("paging").await;
    pod("py-a").capacity(&[("runs", 1)]).create(&ns).await;
    // One page and one more Run.
    let runs = PAGE as usize + 1;
    let api = ns.runs();
    futures::stream::iter(0..runs)
        .map(|i| {
            let api = api.clone();
            let mut object = run(&format!("r-{i:04}")).build();
            object.metadata.namespace = Some(ns.name.clone());
            object.metadata.uid = None;
            async move { api.create(&PostParams::default(), &object).await }
        })
        .buffer_unordered(32)
        .try_for_each(|_| async { Ok(()) })
        .await
        .expect("create the Runs");

    let before = run_lists(&ns.client).await;
    let out = support::kruntimes()
        .args(["status", "-n", &ns.name, "-o", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["runtimes"][0]["pending"]["runs"], runs,
        "every Run is read"
    );
    assert_eq!(
        run_lists(&ns.client).await - before,
        2,
        "{runs} Runs are two pages of {PAGE}"
    );

    let before = run_lists(&ns.client).await;
    let out = support::kruntimes()
        .args(["explain", "run/r-0000", "-n", &ns.name, "-o", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        run_lists(&ns.client).await - before,
        2,
        "explain reads its Runtime's {runs} Runs in two pages of {PAGE}"
    );
    // Not a progress line: stderr is not a terminal.
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("objects ("),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
