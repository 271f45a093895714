//! kruntimes in a cluster that already runs another implementation of the kruntimes.io API
//! (the Go kruntimes project), on the real control plane: `install` over CRDs of the same
//! names keeps every stored object decodable and unpruned and says what it found, the
//! scheduler syncs past a Run that does not decode and counts the active Runs the other
//! implementation left (a `Ready` function Run included), and it places nothing while the
//! other scheduler holds its leader Lease.
//!
//! This suite's control plane first gets the foreign CRDs (`tests/fixtures/foreign-crds.yaml`),
//! so every test awaits [`installed_over_foreign`] before it starts.

use testkit as support;

use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use kruntimes::api::lenient::{self, Lenient};
use kruntimes::api::{Run, RunPhase};
use kruntimes::manager::foreign::{FOREIGN_CONTROLLER_LEASE, FOREIGN_LEASE};
use kruntimes::testing::{pods, run};
use support::world::{
    Create, RunEvents, SchedulerProcess, TestNs, WAIT, eventually, message_of, phase_of,
};

/// What `install --yes` printed when it ran over the foreign CRDs, and the namespace holding
/// the objects stored before it.
struct Installed {
    stdout: String,
    stderr: String,
    ns: String,
    /// `explain run/retried` before the install: (succeeded, stdout, stderr).
    explained: (bool, String, String),
}

fn kubectl(args: &[&str], stdin: Option<&str>) -> String {
    let mut cmd = support::kubectl();
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run kubectl");
    if let Some(input) = stdin {
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The foreign CRDs, Runs stored under them with the Go project's status shapes (and one that
/// no version of the API allows), then kruntimes' `install --yes` over them. Once per process.
async fn installed_over_foreign() -> &'static Installed {
    static ONCE: OnceCell<Installed> = OnceCell::const_new();
    ONCE.get_or_init(|| async {
        let fixtures = format!("{}/tests/fixtures/foreign-crds.yaml", env!("CARGO_MANIFEST_DIR"));
        kubectl(&["apply", "--server-side", "--field-manager=helm", "-f", &fixtures], None);
        kubectl(
            &["wait", "--for=condition=Established", "--timeout=60s", "crd/runs.kruntimes.io", "crd/runtimes.kruntimes.io"],
            None,
        );
        let client = support::client().await;
        let ns = support::namespace(&client, "foreign").await;
        let pod = pods(&["python-0"], &[("runs", 4)]);
        let created = pod.create(&TestNs { client: client.clone(), name: ns.clone() }).await;
        let pod_uid = created[0].uid().unwrap();

        // The Go project's shapes: a function Run that is Ready on python-0 (active), a retried
        // Running one with outputs, two that ended as Timeout and Cancelled, and one with a
        // phase no version of the API has.
        let stored = [
            ("fn-ready", json!({"function": {"handler": "main.handle", "idleTimeoutSeconds": 60}}),
             json!({"phase": "Ready", "assignedPod": "python-0", "assignedPodUID": pod_uid, "attempt": 1})),
            ("retried", json!({"task": {"entrypoint": "train.py", "args": ["--epochs", "3"]}}),
             json!({"phase": "Running", "assignedPod": "python-0", "assignedPodUID": pod_uid, "attempt": 2, "outputs": {"loss": "0.1"}})),
            ("timed-out", json!({"task": {"args": ["sleep 600"]}}),
             json!({"phase": "Timeout", "message": "exceeded spec.timeout", "completionTime": "2026-01-01T00:00:00Z"})),
            ("cancelled", json!({"task": {"args": ["sleep 600"]}}), json!({"phase": "Cancelled"})),
            ("odd", json!({"task": {"args": ["true"]}}), json!({"phase": "Paused"})),
        ];
        for (name, mode, status) in &stored {
            let manifest = json!({
                "apiVersion": "kruntimes.io/v1alpha1", "kind": "Run",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"runtime": "python", "mode": mode, "env": [{"name": "A", "value": "1"}],
                         "timeout": "10m", "affinity": {"runAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                             {"weight": 10, "runAffinityTerm": {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kruntimes.io/runtime-pod"}}]}}}
            });
            kubectl(&["apply", "--server-side", "--field-manager=helm", "-f", "-"], Some(&manifest.to_string()));
            kubectl(
                &["patch", "run", name, "-n", &ns, "--subresource=status", "--type=merge", "-p", &json!({"status": status}).to_string()],
                None,
            );
        }

        // Under the Go project's CRDs, which select no field: explain lists its Runtime's Runs.
        let explained = support::kruntimes().args(["explain", "run/retried", "-n", &ns]).output().unwrap();
        let explained = (
            explained.status.success(),
            String::from_utf8_lossy(&explained.stdout).into_owned(),
            String::from_utf8_lossy(&explained.stderr).into_owned(),
        );

        let out = support::kruntimes().args(["install", "--yes", "--crds-only"]).output().unwrap();
        Installed {
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            ns,
            explained,
        }
        .checked(out.status.success())
    })
    .await
}

/// Held by every test that runs a scheduler: the foreign Lease of one test would stand the
/// scheduler of another by (or stop it), since the gate looks in every namespace.
static ONE_SCHEDULER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

impl Installed {
    fn checked(self, ok: bool) -> Self {
        assert!(
            ok,
            "install over the foreign CRDs failed:\n{}\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

#[testkit::test]
async fn install_over_another_implementations_crds_says_so_and_every_stored_run_survives() {
    let installed = installed_over_foreign().await;
    assert!(
        installed.stderr.contains(
            "note: CRD runs.kruntimes.io is already installed and managed by helm (another kruntimes installation?)"
        ),
        "{}",
        installed.stderr
    );
    assert!(
        installed
            .stdout
            .contains("customresourcedefinition.apiextensions.k8s.io/runs.kruntimes.io configured"),
        "{}",
        installed.stdout
    );

    // Nothing pruned: every status field the other implementation wrote reads back as written.
    let ns = &installed.ns;
    let read = |name: &str| -> Value {
        serde_json::from_str(&kubectl(
            &["get", "run", name, "-n", ns, "-o", "json"],
            None,
        ))
        .unwrap()
    };
    let ready = read("fn-ready");
    assert_eq!(ready["status"]["phase"], "Ready");
    assert_eq!(ready["status"]["assignedPod"], "python-0");
    assert_eq!(ready["spec"]["mode"]["function"]["idleTimeoutSeconds"], 60);
    assert_eq!(ready["spec"]["timeout"], "10m");
    assert_eq!(ready["spec"]["env"], json!([{"name": "A", "value": "1"}]));
    let retried = read("retried");
    assert_eq!(
        (&retried["status"]["attempt"], &retried["status"]["outputs"]),
        (&json!(2), &json!({"loss": "0.1"}))
    );
    assert_eq!(
        retried["spec"]["affinity"]["runAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
            [0]["weight"],
        10
    );
    assert_eq!(
        read("timed-out")["status"]["message"],
        "exceeded spec.timeout"
    );
    assert_eq!(read("cancelled")["status"]["phase"], "Cancelled");

    // Every object decodes as kruntimes' types but the one no API version allows, which is
    // named instead of failing the list.
    let client = support::client().await;
    let listed = Api::<Lenient<Run>>::namespaced(client, ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    let mut decoded: Vec<(String, RunPhase)> = Vec::new();
    let mut undecodable = Vec::new();
    for item in listed.items {
        match item.into_result() {
            Ok(run) => decoded.push((run.name_any(), run.phase())),
            Err(u) => undecodable.push(u.describe()),
        }
    }
    decoded.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        decoded,
        [
            ("cancelled".to_string(), RunPhase::Cancelled),
            ("fn-ready".to_string(), RunPhase::Ready),
            ("retried".to_string(), RunPhase::Running),
            ("timed-out".to_string(), RunPhase::Timeout),
        ]
    );
    assert_eq!(undecodable, [format!("{ns}/odd")]);
}

/// `explain` narrows its list of Runs to the Run's Runtime with a field selector; the Go
/// project's CRDs declare no selectable field and refuse it, and explain reads every Run of
/// the namespace instead, as it did before.
#[testkit::test]
async fn explain_under_the_go_projects_crds_reads_the_runtimes_runs_without_a_field_selector() {
    let installed = installed_over_foreign().await;
    let (ok, stdout, stderr) = &installed.explained;
    assert!(ok, "explain under the foreign CRDs failed: {stderr}");
    assert!(stdout.contains("python-0"), "{stdout}");
}

#[testkit::test]
async fn the_scheduler_syncs_past_an_undecodable_run_and_counts_the_foreign_active_runs() {
    let installed = installed_over_foreign().await;
    let _alone = ONE_SCHEDULER.lock().await;
    let ns = TestNs {
        client: support::client().await,
        name: installed.ns.clone(),
    };
    // Synced (`/readyz`) although one stored Run does not decode.
    let _scheduler = SchedulerProcess::start(&ns.name, 2, None, "coexist").await;
    // python-0 has runs: 4, of which the Ready function Run and the Running one hold 2.
    run("needs-3").requests(&[("runs", 3)]).create(&ns).await;
    run("needs-2").requests(&[("runs", 2)]).create(&ns).await;
    // Listed leniently, as the scheduler does: a typed list fails on the odd Run.
    let api: Api<Lenient<Run>> = ns.api();
    let runs = eventually(WAIT, "needs-2 Scheduled and needs-3 waiting", async || {
        let runs = lenient::decoded_items(
            api.list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?
                .items,
        );
        (phase_of(&runs, "needs-2") == Some(RunPhase::Scheduled)
            && message_of(&runs, "needs-3").is_some())
        .then(|| runs.clone())
        .ok_or_else(|| {
            format!(
                "{:?}",
                runs.iter()
                    .map(|r| (r.name_any(), r.phase()))
                    .collect::<Vec<_>>()
            )
        })
    })
    .await;
    assert_eq!(
        message_of(&runs, "needs-3").as_deref(),
        Some("0/1 Runtime Pods are available: 1 Insufficient runs.")
    );
}

#[testkit::test]
async fn the_scheduler_places_nothing_while_the_go_scheduler_holds_its_lease_and_stops_when_one_is_taken()
 {
    installed_over_foreign().await;
    let _alone = ONE_SCHEDULER.lock().await;
    let ns = TestNs::new("foreign-lease").await;
    let leases: Api<Lease> = ns.api();
    let foreign = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some(FOREIGN_LEASE.into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("kruntimes-scheduler-7d9f_0c1e".into()),
            lease_duration_seconds: Some(3600),
            renew_time: Some(MicroTime(jiff::Timestamp::now())),
            ..Default::default()
        }),
    };
    leases.create(&Default::default(), &foreign).await.unwrap();
    pods(&["py-a"], &[("runs", 2)]).create(&ns).await;
    let events = RunEvents::start(&ns).await;
    run("waits").create(&ns).await;

    let log_dir = tempfile::tempdir().unwrap();
    let log = log_dir.path().join("scheduler.log");
    let file = std::fs::File::create(&log).unwrap();
    let health_port = support::free_port();
    let mut scheduler = Command::new(support::binary())
        .env("KUBECONFIG", &support::control_plane().kubeconfig)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .args([
            "scheduler",
            "run",
            "--watch-namespace",
            &ns.name,
            "--leader-elect=false",
        ])
        .arg("--metrics-bind-address=0")
        .arg(format!(
            "--health-probe-bind-address=127.0.0.1:{health_port}"
        ))
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    let standby = format!(
        "another kruntimes scheduler holds the Lease {ns}/{FOREIGN_LEASE} (holder kruntimes-scheduler-7d9f_0c1e); waiting as a standby and placing no Run until it is released"
    );
    eventually(
        Duration::from_secs(30),
        "the scheduler to say it waits as a standby",
        async || {
            let exited = scheduler.try_wait().unwrap();
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(status) = exited {
                panic!("the scheduler exited: {status}\n{text}");
            }
            text.contains(&standby).then_some(()).ok_or(text)
        },
    )
    .await;

    // A mark in the Run's own event stream, then the release: the Run may be placed only after
    // the mark.
    ns.merge::<Run>(
        "waits",
        json!({"metadata": {"labels": {"mark": "released"}}}),
    )
    .await;
    leases
        .delete(FOREIGN_LEASE, &DeleteParams::default())
        .await
        .unwrap();
    ns.wait_runs(WAIT, "waits Scheduled after the release", |runs| {
        (phase_of(runs, "waits") == Some(RunPhase::Scheduled)).then_some(())
    })
    .await;
    events.catch_up().await;
    let seen = events.events();
    let mark = seen
        .iter()
        .position(|e| e.run.labels().get("mark").is_some())
        .expect("the mark was recorded");
    for event in &seen[..mark] {
        assert!(
            event
                .run
                .status
                .as_ref()
                .is_none_or(|s| s.assigned_pod.is_none()),
            "placed while the foreign Lease was held: {:?}",
            event.run.status
        );
    }

    // Active now: the Go controller taking its Lease stops this scheduler at once, naming it.
    let controller = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some(FOREIGN_CONTROLLER_LEASE.into()),
            ..Default::default()
        },
        spec: foreign.spec.clone(),
    };
    leases
        .create(&Default::default(), &controller)
        .await
        .unwrap();
    let stopping = format!(
        "another kruntimes scheduler holds the Lease {ns}/{FOREIGN_CONTROLLER_LEASE} (holder kruntimes-scheduler-7d9f_0c1e): stopping so that two schedulers never place Runs at once"
    );
    let status = eventually(
        Duration::from_secs(30),
        "the scheduler to stop",
        async || {
            // Whether it exited first, then its log: a line written just before it exits is
            // then always read.
            let exited = scheduler.try_wait().unwrap();
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            match exited {
                Some(status) if text.contains(&stopping) => Ok(status),
                Some(status) => {
                    panic!("the scheduler exited ({status}) without saying why:\n{text}")
                }
                None => Err(text),
            }
        },
    )
    .await;
    assert!(!status.success(), "{status}");
    // The other tests of this suite run schedulers too.
    leases
        .delete(FOREIGN_CONTROLLER_LEASE, &DeleteParams::default())
        .await
        .unwrap();
}
