//! What the benches and tests measure about processes: CPU time from `/proc`, and
//! kube-apiserver's request counts and open long-running requests (its own metrics). Shared by
//! `benches/side_by_side.rs`, `benches/start_latency.rs` and the suites that count requests
//! (`tests/it/paging.rs`, `tests/it/standby.rs`).

use std::process::Command;

/// utime + stime of `pid` in seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    // utime and stime are fields 14 and 15 of stat(5); `rest` starts at field 3.
    (ticks(11) + ticks(12)) as f64 / hz
}

/// kube-apiserver's `apiserver_request_total`, summed by "verb resource/subresource".
pub fn api_requests(cp: &super::ControlPlane) -> std::collections::BTreeMap<String, f64> {
    api_metric(cp, "apiserver_request_total")
}

/// kube-apiserver's long-running requests open now (`apiserver_longrunning_requests`: watches
/// and the like), summed by "verb resource/subresource".
pub fn api_open_requests(cp: &super::ControlPlane) -> std::collections::BTreeMap<String, f64> {
    api_metric(cp, "apiserver_longrunning_requests")
}

/// One of kube-apiserver's metrics labelled by verb, resource and subresource, summed by
/// "verb resource/subresource".
fn api_metric(cp: &super::ControlPlane, metric: &str) -> std::collections::BTreeMap<String, f64> {
    let out = Command::new(cp.bin_dir.join("kubectl"))
        .env("KUBECONFIG", &cp.kubeconfig)
        .args(["get", "--raw", "/metrics"])
        .output()
        .expect("kubectl get --raw /metrics");
    assert!(out.status.success(), "kubectl get --raw /metrics failed");
    let mut totals = std::collections::BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(rest) = line
            .strip_prefix(metric)
            .and_then(|rest| rest.strip_prefix('{'))
        else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split("\",")
                .find_map(|l| {
                    l.trim_start_matches(',')
                        .strip_prefix(&format!("{name}=\""))
                })
                .map(|v| v.trim_end_matches('"').to_string())
                .unwrap_or_default()
        };
        let key = format!(
            "{} {}/{}",
            label("verb"),
            label("resource"),
            label("subresource")
        );
        *totals.entry(key).or_insert(0.0) += value.parse::<f64>().unwrap_or(0.0);
    }
    totals
}
