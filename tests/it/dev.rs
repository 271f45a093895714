//! `kubectl kruntimes dev` end to end: the built binary starts its own etcd and
//! kube-apiserver, serves a kubeconfig that the real kubectl uses, runs the demo to
//! completion, keeps state across a restart on the same data dir, refuses a second instance,
//! stops a Pod's runtimed when the Pod is deleted, and leaves no process behind after SIGTERM
//! (checked in /proc).

use testkit as support;

use kruntimes::util::process::{self, Signal};
use std::collections::HashSet;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const NS: &str = "kruntimes-demo";

/// A `dev` process whose stdout is read line by line.
struct Dev {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    stderr: PathBuf,
}

impl Dev {
    fn start(data_dir: &Path, logs: &Path, extra: &[&str]) -> Dev {
        let stderr = logs.join(format!(
            "dev-{}.stderr",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let mut child = Command::new(support::binary())
            .arg("dev")
            .arg("--data-dir")
            .arg(data_dir)
            .args(extra)
            .env("NO_COLOR", "1")
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("start kubectl-kruntimes dev");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Dev {
            child,
            lines: rx,
            seen: Vec::new(),
            stderr,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for a stdout line containing `needle`.
    fn wait_line(&mut self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "dev did not print {needle:?} within {}s\n--- stdout ---\n{}\n--- stderr ---\n{}",
                    timeout.as_secs(),
                    self.seen.join("\n"),
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                ),
            }
        }
    }

    /// Waits for the process to exit; returns its success and everything it printed.
    fn wait_exit(&mut self, timeout: Duration) -> (bool, String, String) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(1)) {
                    self.seen.push(line);
                }
                return (
                    status.success(),
                    self.seen.join("\n"),
                    std::fs::read_to_string(&self.stderr).unwrap_or_default(),
                );
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "dev did not exit within {}s\n--- stdout ---\n{}\n--- stderr ---\n{}",
                    timeout.as_secs(),
                    self.seen.join("\n"),
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                );
            }
            while let Ok(line) = self.lines.try_recv() {
                self.seen.push(line);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn sigterm(&self) {
        process::signal(self.pid(), Signal::Term).expect("SIGTERM dev");
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        // Only on a failed test: SIGKILL, and PR_SET_PDEATHSIG takes its children down.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The real kubectl (the control plane's release), pointed at the dev kubeconfig, with this
/// build of the plugin first on its PATH.
fn kubectl(data_dir: &Path, args: &[&str]) -> Output {
    let plugin_dir = Path::new(support::binary()).parent().unwrap().to_path_buf();
    let path = std::env::join_paths(std::iter::once(plugin_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    Command::new(support::bin_dir().join("kubectl"))
        .env("KUBECONFIG", data_dir.join("kubeconfig"))
        .env("PATH", path)
        .args(args)
        .output()
        .expect("run kubectl")
}

fn kubectl_ok(data_dir: &Path, args: &[&str]) -> String {
    let out = kubectl(data_dir, args);
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn kubectl_apply(data_dir: &Path, yaml: &str) {
    kubectl_apply_with(data_dir, &["apply", "-f", "-"], yaml);
}

/// `kubectl ARGS` with `input` on stdin, against dev's kubeconfig; panics when it fails.
fn kubectl_apply_with(data_dir: &Path, args: &[&str], input: &str) {
    let out = support::output_with_stdin(
        Command::new(support::bin_dir().join("kubectl"))
            .env("KUBECONFIG", data_dir.join("kubeconfig"))
            .args(args),
        input.as_bytes(),
    );
    assert!(
        out.status.success(),
        "kubectl apply failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Polls `kubectl get …` output until `check` holds.
fn wait_kubectl(data_dir: &Path, args: &[&str], what: &str, check: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut last = String::new();
    while Instant::now() < deadline {
        let out = kubectl(data_dir, args);
        last = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() && check(&last) {
            return;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!("timed out waiting for {what}; last `kubectl {args:?}`: {last}");
}

/// The README quickstart's second block, as a reader types it: the `kubectl apply … <<'EOF'`
/// line's words and its heredoc, then the `kubectl get run hello …` line's words and the output
/// the README shows under it (its `# ` comment).
struct ReadmeHello {
    apply: Vec<String>,
    manifest: String,
    get: Vec<String>,
    shown: String,
    /// `kruntimes logs run/hello …` and the log the README shows under it.
    logs: Vec<String>,
    log: String,
}

fn readme_hello() -> ReadmeHello {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let mut lines = readme.lines();
    let words = |line: &str| -> Vec<String> {
        let words = shlex::split(line).unwrap_or_else(|| panic!("cannot split {line:?}"));
        assert_eq!(words[0], "kubectl", "{line}");
        words[1..].to_vec()
    };
    let apply_line = lines
        .by_ref()
        .find(|l| l.starts_with("kubectl apply") && l.contains("<<'EOF'"))
        .expect("the README's quickstart applies a Run from a heredoc");
    let apply = words(apply_line.split("<<").next().unwrap());
    let manifest: String = lines
        .by_ref()
        .take_while(|l| *l != "EOF")
        .map(|l| format!("{l}\n"))
        .collect();
    // The next line starting with `prefix`, and the output the README shows under it.
    let mut shown_under = |prefix: &str| {
        let line = lines
            .by_ref()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("the README's quickstart has no line {prefix:?}"));
        let shown = lines
            .next()
            .and_then(|l| l.strip_prefix("# "))
            .unwrap_or_else(|| panic!("the README shows no output under {line:?}"));
        (line, shown.to_string())
    };
    let (get_line, shown) = shown_under("kubectl get run hello");
    let (logs_line, log) = shown_under("kubectl kruntimes logs run/hello");
    ReadmeHello {
        apply,
        manifest,
        get: words(get_line.split(" #").next().unwrap()),
        shown,
        logs: words(logs_line),
        log,
    }
}

fn run_yaml(name: &str, script: &str) -> String {
    format!(
        "apiVersion: kruntimes.io/v1alpha1\nkind: Run\nmetadata: {{name: {name}, namespace: {NS}}}\nspec:\n  runtime: python\n  mode: {{task: {{args: [sh, -c, {script:?}]}}}}\n"
    )
}

/// A file of the copy of examples/ that dev writes into its data dir (the path its banner
/// prints), checked against the repository's.
fn examples(data_dir: &Path, file: &str) -> String {
    let copy = data_dir.join("examples").join(file);
    let original = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(file);
    assert_eq!(
        std::fs::read_to_string(&copy).unwrap(),
        std::fs::read_to_string(original).unwrap()
    );
    copy.display().to_string()
}

/// (pid, start time) of every process on the machine, with its parent.
fn processes() -> Vec<(u32, u32, u64)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the command name, which is in parentheses and may contain spaces.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split(' ').collect();
        let (Some(ppid), Some(start)) = (fields.get(1), fields.get(19)) else {
            continue;
        };
        out.push((pid, ppid.parse().unwrap_or(0), start.parse().unwrap_or(0)));
    }
    out
}

/// Every descendant of `root`, as (pid, start time).
fn descendants(root: u32) -> HashSet<(u32, u64)> {
    let all = processes();
    let mut found: HashSet<(u32, u64)> = HashSet::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for (pid, ppid, start) in &all {
            if *ppid == parent && found.insert((*pid, *start)) {
                frontier.push(*pid);
            }
        }
    }
    found
}

/// Which of `procs` still run, after giving processes that are exiting right now a moment.
/// A zombie has exited (it only waits for init to reap it after its parent left) and does not
/// count.
fn still_alive(procs: &HashSet<(u32, u64)>) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now: HashSet<(u32, u64)> = processes()
            .into_iter()
            .map(|(pid, _, start)| (pid, start))
            .collect();
        let alive: Vec<String> = procs
            .iter()
            .filter(|p| now.contains(p) && !is_zombie(p.0))
            .map(|(pid, _)| {
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                format!(
                    "{pid}: {}",
                    String::from_utf8_lossy(&cmd).replace('\0', " ")
                )
            })
            .collect();
        if alive.is_empty() || Instant::now() > deadline {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rfind(')').map(|i| s[i + 2..].starts_with('Z')))
        .unwrap_or(true)
}

/// Processes whose command line or environment names `dir` (etcd's data dir, the agents'
/// KUBECONFIG).
fn mentioning(dir: &Path) -> Vec<String> {
    let needle = dir.display().to_string();
    processes()
        .into_iter()
        .filter(|(pid, _, _)| *pid != std::process::id())
        .filter_map(|(pid, _, _)| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let text = String::from_utf8_lossy(&[cmd.clone(), env].concat()).into_owned();
            text.contains(&needle).then(|| {
                format!(
                    "{pid}: {}",
                    String::from_utf8_lossy(&cmd).replace('\0', " ")
                )
            })
        })
        .collect()
}

fn environ(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

/// runtimed agents among `procs`: (pid, POD_NAME, POD_UID).
fn agents(procs: &HashSet<(u32, u64)>) -> Vec<(u32, String, String)> {
    procs
        .iter()
        .filter_map(|(pid, _)| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if !cmd.contains(" runtimed") {
                return None;
            }
            let env = environ(*pid);
            let get = |k: &str| {
                env.iter()
                    .find_map(|v| v.strip_prefix(&format!("{k}=")).map(str::to_string))
                    .unwrap_or_default()
            };
            Some((*pid, get("POD_NAME"), get("POD_UID")))
        })
        .collect()
}

#[testkit::test]
fn dev_demo_runs_the_examples_to_completion_explains_a_run_that_waited_and_runs_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut dev = Dev::start(&data, dir.path(), &["--demo"]);
    let (ok, stdout, stderr) = dev.wait_exit(Duration::from_secs(300));
    assert!(ok, "dev --demo failed\n{stdout}\n--- stderr ---\n{stderr}");
    for expected in [
        "kruntimes dev cluster is up",
        "(context kruntimes-dev)",
        "Applied examples/ (1 Namespace, 13 Runs, 1 Runtime) in namespace kruntimes-demo.",
        "13/13 Runs finished",
        "All 13 Runs finished",
        "(13 Succeeded, 0 Failed)",
        "Runs that had to wait: ",
        "-n kruntimes-demo` said:",
        "Runtime python in namespace kruntimes-demo: 3 Runtime Pods",
    ] {
        assert!(
            stdout.contains(expected),
            "{expected:?} missing from\n{stdout}"
        );
    }
    // The demo's GPU Runs outnumber the GPUs: at least one of them waited.
    let waited = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Runs that had to wait: "))
        .unwrap();
    assert!(waited.contains("train-"), "{waited}");
    assert!(
        stderr.contains("stopped; the cluster's state is kept in"),
        "{stderr}"
    );
    let left = mentioning(&data.canonicalize().unwrap());
    assert!(left.is_empty(), "processes left behind: {left:?}");

    // Again on the same data dir: the Runs of the first demo are still there, and replaced.
    let mut dev = Dev::start(&data, dir.path(), &["--demo"]);
    let (ok, stdout, stderr) = dev.wait_exit(Duration::from_secs(300));
    assert!(
        ok,
        "second dev --demo failed\n{stdout}\n--- stderr ---\n{stderr}"
    );
    assert!(
        stdout.contains("Deleting the 13 Runs an earlier demo left in namespace kruntimes-demo."),
        "{stdout}"
    );
    assert!(stdout.contains("(13 Succeeded, 0 Failed)"), "{stdout}");
    let left = mentioning(&data.canonicalize().unwrap());
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

#[testkit::test]
fn dev_serves_kubectl_keeps_state_across_restarts_refuses_a_second_instance_and_leaves_nothing_behind()
 {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let up = Duration::from_secs(300);

    let mut dev = Dev::start(&data, dir.path(), &[]);
    let server = dev.wait_line("API server", up);
    dev.wait_line("export KUBECONFIG=", Duration::from_secs(5));
    let apply = dev.wait_line(" apply -f ", Duration::from_secs(5));
    assert!(
        apply.trim_end().ends_with(&format!(
            "{}",
            data.canonicalize().unwrap().join("examples").display()
        )),
        "{apply}"
    );
    assert!(server.contains("https://127.0.0.1:"), "{server}");

    // The real kubectl uses the kubeconfig dev wrote.
    assert_eq!(
        kubectl_ok(&data, &["config", "current-context"]).trim(),
        "kruntimes-dev"
    );
    kubectl_ok(
        &data,
        &[
            "apply",
            "-f",
            &examples(&data, "00-namespace.yaml"),
            "-f",
            &examples(&data, "10-runtime.yaml"),
        ],
    );
    // The Pod host marks the Runtime Pods Running and Ready.
    wait_three_pods_ready(&data, "3 Runtime Pods Running and Ready");
    kubectl_apply(&data, &run_yaml("quick", "echo hello from quick"));
    kubectl_apply(&data, &run_yaml("long", "sleep 600"));
    // The README's quickstart, typed as it is written, prints what the README says it prints.
    let hello = readme_hello();
    let apply: Vec<&str> = hello.apply.iter().map(String::as_str).collect();
    kubectl_apply_with(&data, &apply, &hello.manifest);
    let get: Vec<&str> = hello.get.iter().map(String::as_str).collect();
    wait_kubectl(&data, &get, "the README's hello Run", |out| {
        out == hello.shown
    });
    // Its log, through the API server's aggregation layer and dev's gateway, as the README
    // types it (kubectl finds this build of the plugin on PATH).
    let logs: Vec<&str> = hello.logs.iter().map(String::as_str).collect();
    assert_eq!(kubectl_ok(&data, &logs).trim_end(), hello.log);
    wait_kubectl(
        &data,
        &[
            "get",
            "run",
            "quick",
            "-n",
            NS,
            "-o",
            "jsonpath={.status.phase}",
        ],
        "Run quick Succeeded",
        |out| out == "Succeeded",
    );
    wait_kubectl(
        &data,
        &[
            "get",
            "run",
            "long",
            "-n",
            NS,
            "-o",
            "jsonpath={.status.phase}",
        ],
        "Run long Running",
        |out| out == "Running",
    );

    // A real runtimed runs per Pod, with that Pod's identity.
    let pods = kubectl_ok(
        &data,
        &[
            "get",
            "pods",
            "-n",
            NS,
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name} {.metadata.uid}{"\n"}{end}"#,
        ],
    );
    let pods: HashSet<(String, String)> = pods
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(n, u)| (n.to_string(), u.to_string()))
        .collect();
    let running = agents(&descendants(dev.pid()));
    let identities: HashSet<(String, String)> = running
        .iter()
        .map(|(_, n, u)| (n.clone(), u.clone()))
        .collect();
    assert_eq!(identities, pods, "one runtimed per Pod, with its identity");
    // Each Pod has an address of its own, where its runtimed serves the gateway.
    let ips = kubectl_ok(
        &data,
        &[
            "get",
            "pods",
            "-n",
            NS,
            "-o",
            r#"jsonpath={range .items[*]}{.status.podIP}{"\n"}{end}"#,
        ],
    );
    let ips: Vec<std::net::Ipv4Addr> = ips.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(ips.len(), pods.len(), "{ips:?}");
    assert_eq!(
        ips.iter().collect::<HashSet<_>>().len(),
        ips.len(),
        "{ips:?}"
    );
    assert!(
        ips.iter()
            .all(|ip| ip.is_loopback() && *ip != std::net::Ipv4Addr::LOCALHOST),
        "{ips:?}"
    );

    // A second dev on the same data dir is refused, naming the first.
    let second = Command::new(support::binary())
        .args(["dev", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(!second.status.success());
    let refused = String::from_utf8_lossy(&second.stderr);
    assert!(
        refused.contains(&format!(
            "another `kubectl kruntimes dev` (pid {}) is already running on {}",
            dev.pid(),
            data.canonicalize().unwrap().display()
        )),
        "{refused}"
    );

    // Deleting a Pod stops its runtimed with SIGTERM; the Runtime controller replaces it.
    let long_pod = kubectl_ok(
        &data,
        &[
            "get",
            "run",
            "long",
            "-n",
            NS,
            "-o",
            "jsonpath={.status.assignedPod}",
        ],
    );
    let (victim_pid, victim, _) = running
        .iter()
        .find(|(_, name, _)| *name != long_pod)
        .cloned()
        .unwrap();
    kubectl_ok(&data, &["delete", "pod", &victim, "-n", NS, "--wait=false"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !is_zombie(victim_pid) {
        assert!(
            Instant::now() < deadline,
            "runtimed of deleted Pod {victim} still runs"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = std::fs::read_to_string(
        data.canonicalize()
            .unwrap()
            .join(format!("logs/pods/{NS}_{victim}.log")),
    )
    .unwrap();
    assert!(log.contains("SIGTERM received"), "{log}");
    wait_three_pods_ready(&data, "a replacement Pod, Running and Ready");

    // An agent that dies is restarted for the same Pod, and the Pod counts the restart. (One
    // without a running Run: a killed agent's task would outlive it.)
    let (crashed_pid, crashed_pod, crashed_uid) = agents(&descendants(dev.pid()))
        .into_iter()
        .find(|(_, name, _)| *name != long_pod)
        .unwrap();
    // A grandchild whose pid was just read from /proc.
    process::signal(crashed_pid, Signal::Kill).expect("SIGKILL the agent");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let again = agents(&descendants(dev.pid()));
        if again
            .iter()
            .any(|(pid, _, uid)| *uid == crashed_uid && *pid != crashed_pid)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the agent of {crashed_pod} was not restarted"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    wait_kubectl(
        &data,
        &[
            "get",
            "pod",
            &crashed_pod,
            "-n",
            NS,
            "-o",
            "jsonpath={.status.containerStatuses[0].restartCount}",
        ],
        "the Pod to count the agent's restart",
        |out| out == "1",
    );

    // SIGTERM stops everything and leaves no process behind.
    let before = descendants(dev.pid());
    assert!(
        before.len() >= 5,
        "etcd, kube-apiserver, 3 agents: {before:?}"
    );
    stop_leaving_nothing(&mut dev, &data);

    // Started again on the same data dir: every Runtime and Run is still there, the Run
    // that was killed at shutdown says so, and new Runs still run.
    let mut dev = Dev::start(&data, dir.path(), &[]);
    dev.wait_line("export KUBECONFIG=", up);
    let runs = kubectl_ok(
        &data,
        &[
            "get",
            "runs",
            "-n",
            NS,
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name}={.status.phase}/{.status.reason}{"\n"}{end}"#,
        ],
    );
    assert!(runs.contains("quick=Succeeded/"), "{runs}");
    assert!(runs.contains("long=Failed/RuntimePodTerminated"), "{runs}");
    kubectl_ok(&data, &["get", "runtime", "python", "-n", NS]);
    kubectl_apply(&data, &run_yaml("after-restart", "true"));
    wait_kubectl(
        &data,
        &[
            "get",
            "run",
            "after-restart",
            "-n",
            NS,
            "-o",
            "jsonpath={.status.phase}",
        ],
        "Run after-restart Succeeded",
        |out| out == "Succeeded",
    );
    stop_leaving_nothing(&mut dev, &data);
}

/// SIGTERM stops `dev` cleanly and leaves no process behind: none of its descendants, and
/// nothing that mentions its data directory.
fn stop_leaving_nothing(dev: &mut Dev, data: &Path) {
    let before = descendants(dev.pid());
    dev.sigterm();
    let (ok, _, stderr) = dev.wait_exit(Duration::from_secs(60));
    assert!(ok, "dev did not stop cleanly: {stderr}");
    let left = still_alive(&before);
    assert!(left.is_empty(), "processes left behind: {left:?}");
    let left = mentioning(&data.canonicalize().unwrap());
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

/// Waits until the demo Runtime's 3 Pods are Running and Ready (the Pod host marks them so).
fn wait_three_pods_ready(data: &Path, what: &str) {
    wait_kubectl(
        data,
        &[
            "get",
            "pods",
            "-n",
            NS,
            "-o",
            r#"jsonpath={range .items[*]}{.status.phase}/{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}"#,
        ],
        what,
        |out| out.lines().filter(|l| *l == "Running/True").count() == 3,
    );
}

/// The control plane `dev` and the tests run has the aggregation layer on, as a cluster made
/// by kubeadm has: kube-apiserver publishes its front-proxy CA and the client name aggregated
/// API servers must accept, in kube-system/extension-apiserver-authentication.
#[testkit::test]
async fn the_control_plane_runs_the_aggregation_layer() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let client = support::client().await;
    let config = support::world::eventually(
        std::time::Duration::from_secs(30),
        "kube-apiserver to publish extension-apiserver-authentication",
        async || {
            kube::Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
                .get("extension-apiserver-authentication")
                .await
                .map_err(|e| e.to_string())
        },
    )
    .await;
    let data = config.data.unwrap_or_default();
    let ca = data
        .get("requestheader-client-ca-file")
        .cloned()
        .unwrap_or_default();
    assert!(ca.contains("BEGIN CERTIFICATE"), "{data:?}");
    assert_eq!(
        data.get("requestheader-allowed-names").map(String::as_str),
        Some("[\"front-proxy-client\"]")
    );
    assert_eq!(
        data.get("requestheader-username-headers")
            .map(String::as_str),
        Some("[\"X-Remote-User\"]")
    );
}
