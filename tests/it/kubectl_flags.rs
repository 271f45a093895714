//! kubectl's habits on the real control plane, through the built binary: the connection and
//! identity flags (`--server`, `--token`, `--certificate-authority`,
//! `--insecure-skip-tls-verify`, `--as`, `--as-group`, `--cluster`, `--user`,
//! `--request-timeout`) honoured with and without a kubeconfig, a kubeconfig cluster's
//! `proxy-url`, `cancel` in every case it meets, and `version`. Every refusal is checked for its message and for nothing having
//! changed.

use testkit as support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use serde_json::json;

use kruntimes::api::RunPhase;
use kruntimes::testing::{run, runtime};
use support::ADMIN_TOKEN;
use support::world::{Create, SchedulerProcess, TestNs, create_in};

/// The binary with no kubeconfig anywhere: no `$KUBECONFIG`, a `$HOME` without `.kube`.
fn bare(home: &Path, args: &[&str]) -> Output {
    Command::new(support::binary())
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", home)
        .args(args)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `user` may read Runs in `ns`; with `write`, also patch them (cancel).
async fn grant(ns: &TestNs, user: &str, write: bool) {
    let mut verbs = vec!["get", "list", "watch"];
    if write {
        verbs.push("patch");
    }
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": format!("{user}-runs")},
        "rules": [{"apiGroups": ["kruntimes.io"], "resources": ["runs"], "verbs": verbs}]
    }))
    .unwrap();
    create_in(ns, role).await;
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": format!("{user}-runs")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("{user}-runs")},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
    }))
    .unwrap();
    create_in(ns, binding).await;
}

#[testkit::test]
async fn connection_and_identity_flags_work_without_a_kubeconfig() {
    let ns = TestNs::new("flags").await;
    grant(&ns, "alice", true).await;
    grant(&ns, "bob", false).await;
    run("r").create(&ns).await;
    let cp = support::control_plane();
    let home = tempfile::tempdir().unwrap();
    let ca = home.path().join("ca.pem");
    std::fs::write(&ca, &cp.ca_pem).unwrap();
    let ca = ca.to_str().unwrap();
    let connect = [
        "-n",
        &ns.name,
        "--server",
        &cp.server,
        "--token",
        ADMIN_TOKEN,
    ];
    let with = |extra: &[&str], cmd: &[&str]| {
        let args: Vec<&str> = cmd.iter().chain(&connect).chain(extra).copied().collect();
        bare(home.path(), &args)
    };

    // Without a kubeconfig and without flags: one line that says what to pass.
    let out = bare(home.path(), &["cancel", "run/r"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out)
            .contains("pass --kubeconfig PATH or set KUBECONFIG, or --server URL with --token"),
        "{}",
        stderr(&out)
    );
    // The server's certificate is checked: without its CA the connection is refused.
    let out = with(&[], &["cancel", "run/r"]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(!ns.get_run("r").await.spec.cancel_requested);

    // --as bob (read only): the API server refuses the cancel as bob.
    let out = with(
        &["--certificate-authority", ca, "--as", "bob"],
        &["cancel", "run/r"],
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("bob") && err.contains("forbidden"), "{err}");
    assert!(!ns.get_run("r").await.spec.cancel_requested);
    // --as-group alone is refused before any request.
    let out = with(
        &["--insecure-skip-tls-verify", "--as-group", "g"],
        &["cancel", "run/r"],
    );
    assert!(
        stderr(&out).contains("--as-group needs --as USER"),
        "{}",
        stderr(&out)
    );
    // --server that is not a URL.
    let out = bare(
        home.path(),
        &["cancel", "run/r", "--server", "localhost", "--token", "t"],
    );
    assert!(
        stderr(&out).contains("--server \"localhost\" is not a URL"),
        "{}",
        stderr(&out)
    );

    // --as alice (may patch) with the CA: cancelled.
    let out = with(
        &[
            "--certificate-authority",
            ca,
            "--as",
            "alice",
            "--as-group",
            "team",
        ],
        &["cancel", "run/r"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "run.kruntimes.io/r cancel requested\n");
    assert!(ns.get_run("r").await.spec.cancel_requested);
    // --insecure-skip-tls-verify instead of the CA; a second cancel says so and changes nothing.
    let out = with(&["--insecure-skip-tls-verify"], &["cancel", "run", "r"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "run.kruntimes.io/r cancel requested (already)\n"
    );
}

#[testkit::test]
async fn request_timeout_bounds_a_request_to_a_server_that_never_answers() {
    // A server that takes connections and never says a word, not even TLS.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = format!("https://{}", silent.local_addr().unwrap());
    let home = tempfile::tempdir().unwrap();
    let cancel = |extra: &[&str]| {
        tokio::process::Command::new(support::binary())
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("HOME", home.path())
            .args(["cancel", "run/r", "--server", &server, "--token", "t"])
            .arg("--insecure-skip-tls-verify")
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    };
    // Patience that only fails the test: every step here takes a second or less.
    let patience = Duration::from_secs(60);
    let accept = async || {
        let (conn, _) = tokio::time::timeout(patience, silent.accept())
            .await
            .expect("the client never connected")
            .unwrap();
        conn.into_std().unwrap()
    };
    // The same request without the flag first, its connection held open by the silent
    // server: what --request-timeout must cut short.
    let mut unbounded = cancel(&[]);
    let mut waiting = accept().await;
    let started = Instant::now();
    let bounded = cancel(&["--request-timeout", "1s"]);
    let mut cut = accept().await;
    let out = tokio::time::timeout(patience, bounded.wait_with_output())
        .await
        .expect("--request-timeout 1s never ended the request")
        .unwrap();
    let took = started.elapsed();
    let said = stderr(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("run/r"), "{said}");
    // Ended by a timeout (not, say, a refused connection)…
    assert!(said.contains("deadline has elapsed"), "{said}");
    // …and by the flag's, not by some default limit: the request without the flag, started
    // earlier, still runs and still holds its connection, while the cut one closed its own.
    assert!(
        unbounded.try_wait().unwrap().is_none(),
        "the request without --request-timeout ended too"
    );
    assert!(
        !closed_by_peer(&mut waiting),
        "the request without --request-timeout dropped its connection"
    );
    assert!(
        closed_by_peer(&mut cut),
        "the request cut off by --request-timeout left its connection open"
    );
    unbounded.kill().await.unwrap();
    eprintln!(
        "--request-timeout 1s: the request ended after {:.1}s",
        took.as_secs_f64()
    );
}

/// Reads what the client sent on `conn` (non-blocking): whether the client has closed it.
fn closed_by_peer(conn: &mut std::net::TcpStream) -> bool {
    use std::io::{ErrorKind, Read as _};
    conn.set_nonblocking(true).unwrap();
    let mut buf = [0; 4096];
    loop {
        match conn.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return true,
            Err(e) => panic!("reading the client's connection: {e}"),
        }
    }
}

#[testkit::test]
async fn cluster_and_user_pick_kubeconfig_entries_and_unknown_ones_are_named() {
    let ns = TestNs::new("flags-kc").await;
    grant(&ns, "bob", false).await;
    run("r").create(&ns).await;
    let cp = support::control_plane();
    let dir = tempfile::tempdir().unwrap();
    // The control plane's kubeconfig plus a user `viewer` that acts as bob.
    let mut kubeconfig: serde_json::Value =
        kruntimes::util::yaml::from_str(&std::fs::read_to_string(&cp.kubeconfig).unwrap()).unwrap();
    let admin = kubeconfig["users"][0]["user"].clone();
    let mut viewer = admin.clone();
    viewer["as"] = json!("bob");
    kubeconfig["users"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "viewer", "user": viewer}));
    let path = dir.path().join("kubeconfig");
    std::fs::write(
        &path,
        kruntimes::util::yaml::to_string(&kubeconfig).unwrap(),
    )
    .unwrap();
    let run_with = |extra: &[&str]| {
        let mut args = vec![
            "cancel",
            "run/r",
            "-n",
            &ns.name,
            "--kubeconfig",
            path.to_str().unwrap(),
        ];
        args.extend(extra);
        Command::new(support::binary())
            .args(&args)
            .output()
            .unwrap()
    };
    let out = run_with(&["--user", "viewer"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("bob"), "{}", stderr(&out));
    assert!(!ns.get_run("r").await.spec.cancel_requested);
    let out = run_with(&["--user", "nope"]);
    assert!(
        stderr(&out).contains("user \"nope\" is not in the kubeconfig"),
        "{}",
        stderr(&out)
    );
    let out = run_with(&["--cluster", "nope"]);
    assert!(
        stderr(&out).contains("cluster \"nope\" is not in the kubeconfig"),
        "{}",
        stderr(&out)
    );
    let cluster = kubeconfig["clusters"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let out = run_with(&["--cluster", &cluster]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(ns.get_run("r").await.spec.cancel_requested);
}

#[testkit::test]
async fn cancel_waits_for_each_end_and_fails_for_a_run_it_cannot_cancel() {
    let ns = TestNs::new("cancel").await;
    // No Runtime Pods: `waits` stays Pending until the scheduler ends it Cancelled.
    runtime("python").replicas(0).create(&ns).await;
    let _scheduler = SchedulerProcess::start(&ns.name, 2, None, "cancel").await;
    run("waits").create(&ns).await;
    run("done").create(&ns).await;
    ns.set_phase("done", RunPhase::Succeeded, None).await;
    ns.wait_runs(Duration::from_secs(30), "waits Pending", |runs| {
        runs.iter()
            .find(|r| r.metadata.name.as_deref() == Some("waits"))
            .and_then(|r| (r.status.as_ref()?.message.is_some()).then_some(()))
    })
    .await;
    let kubeconfig = support::control_plane().kubeconfig.to_str().unwrap();
    let out = Command::new(support::binary())
        .args([
            "cancel",
            "run/waits",
            "run/done",
            "run/missing",
            "--wait",
            "--timeout",
            "60s",
            "-n",
            &ns.name,
            "--kubeconfig",
            kubeconfig,
        ])
        .output()
        .unwrap();
    assert!(!out.status.success(), "run/missing must fail the command");
    assert_eq!(
        stdout(&out),
        "run.kruntimes.io/waits cancel requested\n\
         run.kruntimes.io/done already ended Succeeded; nothing to cancel\n\
         run.kruntimes.io/waits Cancelled\n"
    );
    let err = stderr(&out);
    assert!(
        err.contains(&format!("run/missing not found in namespace {}", ns.name)),
        "{err}"
    );
    assert!(
        err.ends_with("error: 1 of 3 Run(s) not cancelled: missing\n"),
        "{err}"
    );
    assert_eq!(ns.get_run("waits").await.phase(), RunPhase::Cancelled);
    assert_eq!(ns.get_run("done").await.phase(), RunPhase::Succeeded);
}

/// `cancel -l` cancels the Runs a label selector picks, in the namespace or with `-A` in
/// every one, and leaves the others alone; a selector that picks none says so and fails.
#[testkit::test]
async fn cancel_by_selector_picks_runs_by_label_in_one_or_every_namespace() {
    let a = TestNs::new("cancel-sel-a").await;
    let b = TestNs::new("cancel-sel-b").await;
    let sweep = [("sweep", "lr-3")];
    run("one").labels(&sweep).create(&a).await;
    run("other").labels(&[("sweep", "lr-4")]).create(&a).await;
    run("two").labels(&sweep).create(&b).await;
    let cancel = |args: &[&str]| {
        support::kruntimes()
            .arg("cancel")
            .args(args)
            .output()
            .unwrap()
    };

    let out = cancel(&["-l", "sweep=lr-3", "-n", &a.name]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "run.kruntimes.io/one cancel requested\n");
    assert!(a.get_run("one").await.spec.cancel_requested);
    assert!(!a.get_run("other").await.spec.cancel_requested);
    assert!(!b.get_run("two").await.spec.cancel_requested);

    let out = cancel(&["-l", "sweep=lr-3", "-A"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stdout(&out);
    assert!(
        said.contains(&format!(
            "{}/run.kruntimes.io/one cancel requested (already)\n",
            a.name
        )) && said.contains(&format!(
            "{}/run.kruntimes.io/two cancel requested\n",
            b.name
        )),
        "{said}"
    );
    assert!(b.get_run("two").await.spec.cancel_requested);
    assert!(!a.get_run("other").await.spec.cancel_requested);

    let out = cancel(&["-l", "sweep=none", "-n", &a.name]);
    assert!(!out.status.success());
    assert_eq!(
        stderr(&out),
        format!(
            "error: no Run in namespace {} matches -l sweep=none; nothing to cancel\n",
            a.name
        )
    );
}

/// An HTTP CONNECT proxy on loopback; counts the tunnels it opened.
async fn connect_proxy() -> (String, Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let tunnels = Arc::new(AtomicUsize::new(0));
    let counted = tunnels.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    client.read_exact(&mut byte).await?;
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let target = head.split_whitespace().nth(1).unwrap_or_default();
                let mut upstream = tokio::net::TcpStream::connect(target).await?;
                client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await?;
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::io::copy_bidirectional(&mut client, &mut upstream)
                    .await
                    .map(|_| ())
            });
        }
    });
    (address, tunnels)
}

#[testkit::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeconfig_clusters_proxy_url_is_used() {
    let ns = TestNs::new("flags-proxy").await;
    run("r").create(&ns).await;
    let (proxy, tunnels) = connect_proxy().await;
    let cp = support::control_plane();
    let mut kubeconfig: serde_json::Value =
        kruntimes::util::yaml::from_str(&std::fs::read_to_string(&cp.kubeconfig).unwrap()).unwrap();
    kubeconfig["clusters"][0]["cluster"]["proxy-url"] = json!(proxy);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    std::fs::write(
        &path,
        kruntimes::util::yaml::to_string(&kubeconfig).unwrap(),
    )
    .unwrap();
    let out = tokio::process::Command::new(support::binary())
        .args(["cancel", "run/r", "-n", &ns.name, "--kubeconfig"])
        .arg(&path)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(ns.get_run("r").await.spec.cancel_requested);
    assert!(
        tunnels.load(Ordering::SeqCst) >= 1,
        "the request did not go through the proxy"
    );
}

#[testkit::test]
fn version_says_the_commit_the_compiler_and_the_apis() {
    let out = Command::new(support::binary())
        .args(["version", "-o", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"));
    let commit = info["gitCommit"].as_str().unwrap();
    assert!(
        commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit()),
        "built from a checkout: {commit}"
    );
    assert!(info["rustVersion"].as_str().unwrap().starts_with("1."));
    assert_eq!(info["apiVersions"], json!(["kruntimes.io/v1alpha1"]));
    let text = Command::new(support::binary())
        .arg("version")
        .output()
        .unwrap();
    let text = stdout(&text);
    assert!(
        text.starts_with(&format!(
            "kubectl-kruntimes {} (commit {}",
            env!("CARGO_PKG_VERSION"),
            &commit[..12]
        )),
        "{text}"
    );
}

/// Every command that prints and ends, its output piped into a reader that has already gone
/// (as `| head -1` leaves it): each ends quietly, by SIGPIPE or by an error of its own, and
/// none panics (exit 101 with a backtrace). The list names every such command, so a new one
/// is added here.
#[testkit::test]
async fn every_command_piped_into_a_closed_reader_ends_without_a_panic() {
    use std::os::unix::process::ExitStatusExt as _;
    let ns = TestNs::new("pipe").await;
    run("a").create(&ns).await;
    let n = ns.name.as_str();
    let lines: &[&[&str]] = &[
        &["version"],
        &["version", "-o", "json"],
        &["completion", "bash"],
        &["completion", "zsh"],
        &["completion", "kubectl"],
        &["install", "--print"],
        &["explain", "run/a", "-n", n],
        &["explain", "a", "-n", n, "-o", "yaml"],
        &["status", "-n", n],
        &["status", "-A", "-o", "json"],
        &[
            "run",
            "-r",
            "x",
            "--dry-run=client",
            "-o",
            "yaml",
            "--",
            "true",
        ],
        &["wait", "run/a", "--for=phase=Pending", "-n", n],
        &["artifacts", "run/a", "-n", n, "-o", "yaml"],
        &["logs", "run/a", "-n", n],
        &["invoke", "run/a", "-n", n],
        &["__complete", "explain", "run/"],
        &["cancel", "run/a", "-n", n],
        &["run", "b", "-r", "x", "-n", n, "--", "true"],
    ];
    for line in lines {
        let mut child = support::kruntimes()
            .args(*line)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The reader is gone before anything is written.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = stderr(&out);
        assert!(
            !err.contains("panicked") && out.status.code() != Some(101),
            "{line:?}: {:?}: {err}",
            out.status
        );
        assert!(
            out.status.signal().is_none_or(|s| s == libc::SIGPIPE),
            "{line:?}: {:?}: {err}",
            out.status
        );
    }
}

/// `-o` takes kubectl's formats wherever it exists, each rendered from the same result as
/// `-o json`: `name`, `jsonpath=…`, `custom-columns=…`; `status -l` selects Runtimes by label
/// (the API server parses the selector); a bad format or selector is refused by name.
#[testkit::test]
async fn output_formats_and_selectors_work_as_kubectls() {
    let ns = TestNs::new("formats").await;
    let n = ns.name.as_str();
    runtime("python").capacity(&[("runs", 1)]).create(&ns).await;
    runtime("other").capacity(&[("runs", 1)]).create(&ns).await;
    run("a").create(&ns).await;
    let kubectl = |args: &[&str]| {
        let out = support::kubectl().args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    };
    kubectl(&["label", "-n", n, "runtime/python", "team=a"]);
    kubectl(&["label", "-n", n, "runtime/other", "team=b"]);
    let ours = |args: &[&str]| {
        support::kruntimes()
            .args(["-n", n])
            .args(args)
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    let said = |args: &[&str]| {
        let out = ours(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        stdout(&out)
    };

    assert_eq!(
        said(&["status", "-o", "name"]),
        "runtime.kruntimes.io/other\nruntime.kruntimes.io/python\n"
    );
    assert_eq!(
        said(&["status", "-l", "team=a", "-o", "name"]),
        "runtime.kruntimes.io/python\n"
    );
    assert_eq!(
        said(&[
            "status",
            "-l",
            "team in (a,b)",
            "-o",
            "jsonpath={.runtimes[*].name}"
        ]),
        "other python"
    );
    assert_eq!(
        said(&[
            "status",
            "-l",
            "team=a",
            "-o",
            "custom-columns=RUNTIME:.name,WAITING:.pending.runs"
        ]),
        "RUNTIME   WAITING\npython    1\n"
    );
    let none = said(&["status", "-l", "team=c"]);
    assert!(
        none.contains(&format!("No Runtime in namespace {n} matches -l team=c.")),
        "{none}"
    );
    let table = said(&["status", "-l", "team=b"]);
    assert!(
        table.contains("other") && !table.contains("python"),
        "{table}"
    );
    assert_eq!(
        said(&[
            "explain",
            "run/a",
            "-o",
            "jsonpath={.run.name} {.run.phase} {.runtime.name}"
        ]),
        "a Pending python"
    );
    assert_eq!(
        said(&["explain", "rn/a", "-o", "name"]),
        "run.kruntimes.io/a\n"
    );
    assert_eq!(said(&["artifacts", "a", "-o", "name"]), "");
    assert_eq!(said(&["artifacts", "a", "-o", "jsonpath={.}"]), "[]");
    assert_eq!(
        said(&[
            "run",
            "-r",
            "python",
            "--dry-run=client",
            "-o",
            "jsonpath={.spec.runtime}",
            "--",
            "true"
        ]),
        "python"
    );

    let out = ours(&["status", "-o", "xml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown output format \"xml\""),
        "{}",
        stderr(&out)
    );
    let out = ours(&["explain", "a", "-o", "jsonpath={.run"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unclosed action"), "{}", stderr(&out));
    let out = ours(&["run", "-r", "python", "-o", "wide", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("for listing commands"),
        "{}",
        stderr(&out)
    );
    let out = ours(&["status", "-l", "team in (", "-o", "name"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("-l \"team in (\""),
        "{}",
        stderr(&out)
    );
    // Nothing was created by the refused `run`.
    assert_eq!(
        ns.runs()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}
