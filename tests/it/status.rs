//! `status` against the real control plane: the built binary reads real objects; its Pending
//! demand must be exactly what the running scheduler (the built binary too) writes on the Runs,
//! its table matches the golden file (colors off), its JSON follows the documented structure,
//! `--watch` draws a new frame when a Run finishes, redraws in place on a pseudo-terminal and
//! stops cleanly on Ctrl-C, `-A` stays fast with 10,000 Runs, and it names the scheduler that
//! leads (and its version), or says its Lease lapsed, or that it cannot be read.
//!
//! Each test has its own namespace; schedulers watch only that namespace.

use testkit as support;

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::process::{Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kube::ResourceExt as _;
use serde_json::Value;

use kruntimes::api::RunPhase;
use kruntimes::testing::{pod, run, runtime};
use kruntimes::util::process::{self, Signal};
use support::world::{Create, SchedulerProcess, TestNs, WAIT};

const GPU: &str = "example.com/gpu";

/// Runs `kubectl-kruntimes status <args> -n <ns>` (NO_COLOR set, stdout a pipe).
fn status(ns: &str, args: &[&str]) -> Output {
    support::kruntimes()
        .arg("status")
        .args(args)
        .args(["-n", ns])
        .output()
        .expect("run kubectl-kruntimes status")
}

fn status_json(ns: &str, args: &[&str]) -> Value {
    let out = status(ns, &[args, &["-o", "json"]].concat());
    assert!(
        out.status.success(),
        "status failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "status -o json is not JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Compares `actual` with `tests/golden/<name>`; `UPDATE_GOLDEN=1` rewrites the file.
fn golden(name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run with UPDATE_GOLDEN=1", path.display()));
    assert_eq!(
        actual, want,
        "{name} differs; run with UPDATE_GOLDEN=1 to accept"
    );
}

/// The status table with what changes from run to run (the namespace, the oldest wait, and
/// the scheduler line: its Lease may be another test's, found in any namespace) replaced by
/// placeholders.
fn normalized(ns: &str, table: &str) -> String {
    table
        .lines()
        .map(|line| {
            if line.starts_with("Scheduler: ") {
                return "Scheduler: <scheduler>".to_string();
            }
            let line = line.replace(ns, "<ns>");
            match line.split_once(", the oldest for ") {
                Some((head, _)) => format!("{head}, the oldest for <age>"),
                None => line,
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[testkit::test]
async fn a_pool_with_used_gpus_a_stale_heartbeat_and_two_pending_reasons() {
    let ns = TestNs::new("st-pool").await;
    // replicas 0: the Runtime controller leaves these hand-made Pods alone.
    runtime("python")
        .replicas(0)
        .capacity(&[("runs", 4), (GPU, 1)])
        .create(&ns)
        .await;
    let mut uids = BTreeMap::new();
    for name in ["py-a", "py-b"] {
        let created = pod(name)
            .capacity(&[("runs", 4), (GPU, 1)])
            .create(&ns)
            .await;
        uids.insert(name, created.uid().unwrap());
    }
    pod("py-c")
        .capacity(&[("runs", 4), (GPU, 1)])
        .stale()
        .create(&ns)
        .await;
    for (name, on) in [("train-a", "py-a"), ("train-b", "py-b")] {
        run(name)
            .requests(&[(GPU, 1)])
            .pod_uid(&uids[on])
            .on(on)
            .running()
            .create(&ns)
            .await;
    }
    run("done").on("py-a").succeeded().create(&ns).await;
    for name in ["gpu-1", "gpu-2"] {
        run(name).requests(&[(GPU, 1)]).create(&ns).await;
    }
    run("wide").requests(&[("runs", 5)]).create(&ns).await;

    let gpu_message = "0/3 Runtime Pods are available: 2 Insufficient example.com/gpu, 1 runtimed heartbeat stale.";
    let runs_message =
        "0/3 Runtime Pods are available: 2 Insufficient runs, 1 runtimed heartbeat stale.";
    // Before any scheduler: status replays the plugins itself.
    let before = status_json(&ns.name, &[]);
    let _scheduler = SchedulerProcess::start(&ns.name, 1, None, "st-pool").await;
    let written = ns
        .wait_runs(WAIT, "the scheduler's Pending messages", |runs| {
            let pending: Vec<_> = runs
                .iter()
                .filter(|r| r.phase() == RunPhase::Pending)
                .collect();
            let messages: Vec<String> = pending
                .iter()
                .filter_map(|r| r.status.as_ref()?.message.clone())
                .collect();
            (pending.len() == 3 && messages.len() == 3).then_some(messages)
        })
        .await;
    // The scheduler's messages, grouped, are status's byMessage, and the reasons in them its
    // byReason.
    let mut by_message: BTreeMap<String, u64> = BTreeMap::new();
    for m in &written {
        *by_message.entry(m.clone()).or_default() += 1;
    }
    assert_eq!(
        by_message,
        BTreeMap::from([(gpu_message.to_string(), 2), (runs_message.to_string(), 1)])
    );
    let asked = jiff::Timestamp::now();
    let json = status_json(&ns.name, &[]);
    let answered = jiff::Timestamp::now();
    for report in [&before, &json] {
        let rt = &report["runtimes"][0];
        let got: BTreeMap<String, u64> = rt["pending"]["byMessage"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["message"].as_str().unwrap().to_string(),
                    m["runs"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(got, by_message, "{report}");
    }
    let rt = &json["runtimes"][0];
    assert_eq!(json["schemaVersion"], 1);
    assert_eq!(json["namespace"], ns.name.as_str());
    assert_eq!(json["runtimes"].as_array().unwrap().len(), 1);
    assert_eq!(rt["name"], "python");
    assert_eq!(rt["found"], true);
    assert_eq!(rt["replicas"], 0);
    assert_eq!(rt["pods"]["total"], 3);
    assert_eq!(rt["pods"]["ready"], 3);
    assert_eq!(rt["pods"]["available"], 2);
    assert_eq!(
        rt["pods"]["unavailable"],
        serde_json::json!([{"reason": "runtimed heartbeat stale", "count": 1}])
    );
    assert_eq!(
        rt["resources"],
        serde_json::json!([
            {"name": GPU, "used": 2, "capacity": 3},
            {"name": "runs", "used": 2, "capacity": 12},
        ])
    );
    assert_eq!(
        rt["runs"],
        serde_json::json!({"pending": 3, "scheduled": 0, "running": 2, "ready": 0, "succeeded": 1,
                           "failed": 0, "timeout": 0, "cancelled": 0})
    );
    assert_eq!(rt["pending"]["runs"], 3);
    assert_eq!(
        rt["pending"]["byReason"],
        serde_json::json!([
            {"reason": "runtimed heartbeat stale", "count": 3},
            {"reason": "Insufficient example.com/gpu", "count": 2},
            {"reason": "Insufficient runs", "count": 1},
        ])
    );
    // The wait is the report's clock minus the oldest creation, read between the two instants
    // around the call (whole seconds, so one second of rounding either way).
    let oldest: jiff::Timestamp = rt["pending"]["oldestCreated"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let wait = rt["pending"]["oldestWaitSeconds"].as_i64().unwrap();
    let (least, most) = (
        asked.duration_since(oldest).as_secs() - 1,
        answered.duration_since(oldest).as_secs() + 1,
    );
    assert!(
        (least..=most).contains(&wait),
        "oldestWaitSeconds {wait} outside {least}..={most} (oldest created {oldest})"
    );
    // YAML is the same structure.
    // (How long the oldest Run has waited moves on between the two calls: compare the rest.)
    let mut yaml: Value = kruntimes::util::yaml::from_str(&String::from_utf8_lossy(
        &status(&ns.name, &["-o", "yaml"]).stdout,
    ))
    .unwrap();
    let mut same = json.clone();
    for report in [&mut yaml, &mut same] {
        report["runtimes"][0]["pending"]["oldestWaitSeconds"] = Value::Null;
    }
    assert_eq!(yaml["runtimes"], same["runtimes"]);
    // Scripts in Rust can read it back.
    let typed: kruntimes::cmd::status::Status = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(typed.runtimes[0].pending.runs, 3);

    let out = status(&ns.name, &[]);
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(!table.contains('\u{1b}'), "NO_COLOR and a pipe: no colors");
    golden("status-pool.txt", &normalized(&ns.name, &table));
    // Naming the Runtime shows the same block.
    let named = String::from_utf8(status(&ns.name, &["python"]).stdout).unwrap();
    assert_eq!(normalized(&ns.name, &named), normalized(&ns.name, &table));
    let colored = status(&ns.name, &["--color", "always"]);
    assert!(
        String::from_utf8(colored.stdout)
            .unwrap()
            .contains("\u{1b}[")
    );
}

#[testkit::test]
async fn errors_are_one_line_with_a_non_zero_exit() {
    let ns = TestNs::new("st-errors").await;
    pod("py-a").create(&ns).await;
    let out = status(&ns.name, &["nope"]);
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "error: runtime \"nope\" not found in namespace \"{ns}\"; list the Runtimes there with `kubectl get runtimes -n {ns}`\n"
        )
    );
    let out = status("st-no-such-namespace", &[]);
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "error: namespace \"st-no-such-namespace\" not found; pass an existing namespace with -n\n"
    );
    let empty = TestNs::new("st-empty").await;
    let out = status(&empty.name, &[]);
    assert!(out.status.success());
    let said = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        normalized(&empty.name, &said),
        "Scheduler: <scheduler>\n\nNo Runtimes, Runtime Pods or Runs in namespace <ns>.\n"
    );
}

/// `status -o json`'s `scheduler`, which must succeed.
fn scheduler_json(ns: &str) -> Value {
    status_json(ns, &[])["scheduler"].clone()
}

/// The first line of the `status` table.
fn scheduler_line(ns: &str) -> String {
    let out = status(ns, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string()
}

/// Who leads, from the scheduler's own Lease in the test namespace: status looks there (and in
/// the install's namespace) before it lists Leases anywhere, and a held Lease elsewhere could
/// only speak once this one is not held. So it is deterministic up to the lapse; after it, an
/// other test's scheduler leading in kubectl-kruntimes may rightly speak instead, and is let
/// be. "No Lease at all" is not tested here (any test's Lease in any namespace would answer
/// it): the unit tests of `replay::leader` are.
#[testkit::test]
async fn status_names_the_leading_scheduler_and_its_version_then_its_lapsed_lease() {
    let ns = TestNs::new("st-leader").await;
    pod("py-a").create(&ns).await;
    let identity = format!("{}-sched", ns.name);
    let mut scheduler = SchedulerProcess::start(&ns.name, 1, Some(&ns.name), &identity).await;
    let version = kruntimes::manager::leader::version_text(&kruntimes::api::build::info());
    let leading = support::world::eventually(WAIT, "status to name the leader", async || {
        let s = scheduler_json(&ns.name);
        // The version is written just after the election: wait for both.
        if s["state"] == "Leading" && s["holder"] == identity.as_str() && !s["version"].is_null() {
            Ok(s)
        } else {
            Err(s.to_string())
        }
    })
    .await;
    assert_eq!(leading["namespace"], ns.name.as_str());
    assert_eq!(leading["version"], version.as_str());
    for field in ["since", "renewed", "expires"] {
        assert!(leading[field].is_string(), "{field}: {leading}");
    }
    let message = leading["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("{identity} leads in {ns} for "))
            && message.ends_with(&format!(", version {version}")),
        "{message}"
    );
    let line = scheduler_line(&ns.name);
    assert!(
        line.starts_with(&format!("Scheduler: {identity} leads in {ns} for ")),
        "{line}"
    );

    // SIGKILL: nothing releases the Lease; it lapses after its 4 s.
    scheduler.kill();
    let after = support::world::eventually(WAIT, "the lease to lapse", async || {
        let s = scheduler_json(&ns.name);
        match (s["state"].as_str(), s["holder"] == identity.as_str()) {
            (Some("Expired"), true) => Ok(s),
            (Some("Leading"), false) => Ok(s),
            _ => Err(s.to_string()),
        }
    })
    .await;
    if after["state"] == "Leading" {
        eprintln!("another scheduler leads elsewhere: {after}");
        return;
    }
    assert_eq!(after["namespace"], ns.name.as_str());
    assert_eq!(after["version"], version.as_str());
    let message = after["message"].as_str().unwrap();
    let lease = format!("Lease {ns}/kruntimes-scheduler");
    assert!(
        message.starts_with(&format!("{lease} expired "))
            && message.ends_with(&format!(" ago, held by {identity}")),
        "{message}"
    );
    let line = scheduler_line(&ns.name);
    assert!(
        line.starts_with(&format!(
            "Scheduler: none leads, Pending Runs wait unless one runs without leader election — {lease} expired "
        )),
        "{line}"
    );
    // explain says the same, and that a Run that fits now is placed by nobody.
    run("fits").create(&ns).await;
    let out = support::kruntimes()
        .args(["explain", "run/fits", "-n", &ns.name])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let verdict = text.lines().next().unwrap();
    assert!(
        verdict.starts_with("Fits: would be placed on py-a (score ")
            && verdict
                .ends_with("), but no scheduler leads: unless one runs without leader election, nothing places it"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "\nScheduler: none leads, Pending Runs wait unless one runs without leader election — {lease} expired "
        )),
        "{text}"
    );
}

/// A user who may read the namespace's objects, but not the Lease in the install's namespace
/// nor Leases cluster-wide, gets the pool and `Unknown` with the API server's reason: not an
/// error of the command.
#[testkit::test]
async fn a_user_who_may_not_read_the_schedulers_lease_gets_unknown_and_the_reason() {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let ns = TestNs::new("st-nolease").await;
    pod("py-a").create(&ns).await;
    let user = format!("{}-viewer", ns.name);
    let role: Role = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "status-reader"},
        "rules": [
            {"apiGroups": ["kruntimes.io"], "resources": ["runs", "runtimes", "persistentworkspaces"],
             "verbs": ["get", "list"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list"]},
        ]
    }))
    .unwrap();
    support::world::create_in(&ns, role).await;
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "status-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "status-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
    }))
    .unwrap();
    support::world::create_in(&ns, binding).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = support::tokens::user_kubeconfig(dir.path(), &user, &ns.name);

    // The binding reaches the authorizer's cache soon after it is created.
    let json = support::world::eventually(WAIT, "status as the viewer", async || {
        let out = support::kruntimes()
            .env("KUBECONFIG", &kubeconfig)
            .args(["status", "-o", "json"])
            .output()
            .unwrap();
        if out.status.success() {
            Ok(serde_json::from_slice::<Value>(&out.stdout).unwrap())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).to_string())
        }
    })
    .await;
    assert_eq!(json["runtimes"][0]["pods"]["total"], 1);
    let scheduler = &json["scheduler"];
    assert_eq!(scheduler["state"], "Unknown", "{scheduler}");
    let message = scheduler["message"].as_str().unwrap();
    assert!(
        message.starts_with("cannot tell whether a scheduler runs: ")
            && message.contains(&format!("User \"{user}\" cannot get resource \"leases\""))
            && message.contains("kubectl-kruntimes"),
        "{message}"
    );
    let out = support::kruntimes()
        .env("KUBECONFIG", &kubeconfig)
        .args(["status"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.starts_with("Scheduler: unknown — cannot tell whether a scheduler runs: "),
        "{table}"
    );
}

/// Reads `--watch` frames (each starts with its `Every` header) from a child's stdout.
struct Frames {
    rx: mpsc::Receiver<String>,
    pending: Option<String>,
}

impl Frames {
    fn new(stdout: std::process::ChildStdout) -> Self {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Frames { rx, pending: None }
    }

    /// The next complete frame (complete once the next header arrives), or `None` after
    /// `timeout`.
    fn next(&mut self, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        let mut frame = self.pending.take();
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let line = self.rx.recv_timeout(left).ok()?;
            if line.starts_with("Every ") {
                if let Some(done) = frame.take() {
                    self.pending = Some(format!("{line}\n"));
                    return Some(done);
                }
                frame = Some(String::new());
            }
            if let Some(f) = frame.as_mut() {
                f.push_str(&line);
                f.push('\n');
            }
        }
    }
}

#[testkit::test]
async fn watch_draws_a_new_frame_when_a_run_finishes_and_stops_on_ctrl_c() {
    let ns = TestNs::new("st-watch").await;
    pod("py-a").capacity(&[("runs", 1)]).create(&ns).await;
    run("busy").on("py-a").running().create(&ns).await;
    run("next").create(&ns).await;
    let mut child = support::kruntimes()
        .args(["status", "--watch", "--interval", "100ms", "-n", &ns.name])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut frames = Frames::new(child.stdout.take().unwrap());
    let first = frames.next(WAIT).expect("a first frame");
    assert!(
        first.starts_with("Every 100ms: kubectl kruntimes status   "),
        "{first}"
    );
    assert!(first.contains("1 Pending"), "{first}");
    assert!(first.contains("1 Running, 0 Succeeded"), "{first}");
    assert!(first.contains("Insufficient runs"), "{first}");

    ns.set_phase("busy", RunPhase::Succeeded, Some("py-a"))
        .await;
    let mut seen = 1;
    let changed = loop {
        let frame = frames
            .next(WAIT)
            .unwrap_or_else(|| panic!("no frame after {seen} frames"));
        seen += 1;
        if frame.contains("0 Running, 1 Succeeded") {
            break frame;
        }
    };
    assert!(changed.contains("fits now"), "{changed}");
    assert!(!changed.contains("Insufficient runs"), "{changed}");

    // Ctrl-C: a clean stop.
    process::signal(child.id(), Signal::Int).expect("SIGINT status --watch");
    let status = child.wait().unwrap();
    assert!(status.success(), "exit status {status:?} after SIGINT");
}

#[testkit::test]
async fn all_namespaces_stays_fast_with_ten_thousand_runs() {
    let ns = TestNs::new("st-10k").await;
    pod("py-a")
        .capacity(&[("runs", 4), (GPU, 1)])
        .create(&ns)
        .await;
    let started = Instant::now();
    let runs = (0..10_000).map(|i| {
        let r = run(&format!("r-{i:05}"));
        if i % 2 == 0 {
            r.requests(&[(GPU, 2)])
        } else {
            r
        }
    });
    support::world::create_many(&ns, runs, 64).await;
    eprintln!("created 10,000 Runs in {:?}", started.elapsed());

    let started = Instant::now();
    let out = support::kruntimes()
        .args(["status", "-A", "-o", "json"])
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("status -A with 10,000 Runs in one namespace: {took:?}");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["namespace"], Value::Null);
    let rt = json["runtimes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["namespace"] == ns.name.as_str())
        .unwrap();
    assert_eq!(rt["pending"]["runs"], 10_000);
    assert_eq!(
        rt["pending"]["byReason"],
        serde_json::json!([
            {"reason": "Insufficient example.com/gpu", "count": 5000},
            {"reason": "fits now", "count": 5000},
        ])
    );
    let table_started = Instant::now();
    let table = support::kruntimes()
        .args(["status", "-A"])
        .output()
        .unwrap();
    assert!(table.status.success());
    // Speed is a figure to report, not a wall-clock assert (it would only measure the
    // machine): the time goes to the output, the test checks the answer.
    eprintln!(
        "status -A with 10,000 Runs: {took:?} (json), {:?} (table)",
        table_started.elapsed()
    );
}

#[testkit::test]
async fn watch_on_a_terminal_redraws_in_place() {
    use std::io::Read as _;
    use std::os::fd::{FromRawFd as _, OwnedFd};

    let ns = TestNs::new("st-tty").await;
    pod("py-a").create(&ns).await;
    let (mut master, mut slave) = (0, 0);
    let opened = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(opened, 0, "openpty: {}", std::io::Error::last_os_error());
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut child = support::kruntimes()
        .args(["status", "--watch", "--interval", "100ms", "-n", &ns.name])
        .stdout(Stdio::from(slave))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut master = std::fs::File::from(master);
        let mut buf = [0u8; 4096];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    // Three frames, each homing the cursor and clearing the screen before it is drawn.
    const CLEAR: &str = "\u{1b}[H\u{1b}[2J";
    let mut seen = String::new();
    let deadline = Instant::now() + WAIT;
    while seen.matches(CLEAR).count() < 3 {
        let left = deadline
            .checked_duration_since(Instant::now())
            .unwrap_or_else(|| panic!("three redraws on the terminal; got {seen:?}"));
        let chunk = rx.recv_timeout(left).unwrap_or_else(|_| panic!("{seen:?}"));
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    for frame in seen.split(CLEAR).skip(1).take(2) {
        assert!(
            frame.starts_with("Every 100ms: kubectl kruntimes status"),
            "{frame:?}"
        );
        assert!(frame.contains("Runtime python in namespace"), "{frame:?}");
    }
    process::signal(child.id(), Signal::Int).expect("SIGINT status --watch");
    let status = child.wait().unwrap();
    assert!(status.success(), "exit status {status:?} after SIGINT");
}
