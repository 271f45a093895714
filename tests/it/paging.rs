//! `status` and `explain` read lists in pages ([`PAGE`]), as `kubectl get` does (`--chunk-size`):
//! counted by the API server itself (`apiserver_request_total`), on a control plane of this
//! suite's own where nothing else lists Runs, so each count is exact.

use testkit as support;

use serde_json::Value;

use kruntimes::cmd::replay::load::PAGE;
use kruntimes::testing::{pod, run};
use support::measure::api_requests;
use support::world::{Create, TestNs, create_many};

/// LIST requests for Runs the API server has served, from its own metrics.
fn run_lists() -> f64 {
    api_requests(support::control_plane())
        .get("LIST runs/")
        .copied()
        .unwrap_or(0.0)
}

#[testkit::test]
async fn status_and_explain_read_a_page_of_runs_at_a_time() {
    let ns = TestNs::new("paging").await;
    pod("py-a").capacity(&[("runs", 1)]).create(&ns).await;
    // One page and one more Run.
    let runs = PAGE as usize + 1;
    create_many(&ns, (0..runs).map(|i| run(&format!("r-{i:04}"))), 32).await;

    let before = run_lists();
    let out = support::kruntimes()
        .args(["status", "-n", &ns.name, "-o", "json"])
        .output()
        .unwrap();
    let json: Value = serde_json::from_str(&support::ok(&out, "status")).unwrap();
    assert_eq!(
        json["runtimes"][0]["pending"]["runs"], runs,
        "every Run is read"
    );
    assert_eq!(
        run_lists() - before,
        2.0,
        "{runs} Runs are two pages of {PAGE}"
    );

    let before = run_lists();
    let out = support::kruntimes()
        .args(["explain", "run/r-0000", "-n", &ns.name, "-o", "json"])
        .output()
        .unwrap();
    support::ok(&out, "explain");
    assert_eq!(
        run_lists() - before,
        2.0,
        "explain reads its Runtime's {runs} Runs in two pages of {PAGE}"
    );
    // Not a progress line: stderr is not a terminal.
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("objects ("),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
