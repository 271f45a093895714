//! `install` against the real control plane: the CRDs, the user ClusterRoles and the admission
//! policy; apply, idempotence, `--print`, kubectl round trips with the printer columns, CEL
//! immutability, and clear failures.

use testkit as support;

use std::io::Write as _;
use std::process::{Command, Output};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruntimes::testing::run;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use support::world::{Create, TestNs};

/// Runs `cmd` to completion: its output, stdout and stderr.
fn output(cmd: &mut Command) -> (Output, String, String) {
    let out = cmd.output().expect("run the command");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

/// The built binary, without the test control plane's kubeconfig.
fn binary() -> Command {
    Command::new(support::binary())
}

async fn crd_versions(client: &kube::Client) -> Vec<String> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut out = Vec::new();
    for name in [
        "runtimes.kruntimes.io",
        "runs.kruntimes.io",
        "persistentworkspaces.kruntimes.io",
        "workflows.kruntimes.io",
        "workflowruns.kruntimes.io",
        "actions.kruntimes.io",
    ] {
        out.push(api.get(name).await.unwrap().resource_version().unwrap());
    }
    out
}

#[testkit::test]
async fn the_control_plane_is_the_real_kube_apiserver_1_36_3() {
    let cp = support::control_plane();
    assert_eq!(cp.version, "v1.36.3");
    let version = support::client().await.apiserver_version().await.unwrap();
    assert_eq!(version.git_version, "v1.36.3");
}

/// Held by the tests that write the CRDs with another field manager than install's: the
/// rerun test must see no write but its own between its two installs.
static CRD_WRITES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[testkit::test]
async fn install_creates_established_crds_and_rerunning_changes_nothing() {
    let _crds = CRD_WRITES.lock().await;
    let client = support::client().await;
    // The whole system, the scheduler's Deployment included; nothing runs Pods on this control
    // plane, so install does not wait for its rollout (the single-node cluster proves that).
    let full = ["install", "--yes", "--wait=false"];
    let (first, stdout, stderr) = output(support::kruntimes().args(full));
    assert!(first.status.success(), "install failed: {stderr}");
    assert!(
        stdout.contains("deployment.apps/kubectl-kruntimes-scheduler "),
        "{stdout}"
    );
    assert!(
        stdout.contains("kruntimes CRDs are established"),
        "{stdout}"
    );

    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in [
        "runtimes.kruntimes.io",
        "runs.kruntimes.io",
        "persistentworkspaces.kruntimes.io",
        "workflows.kruntimes.io",
        "workflowruns.kruntimes.io",
        "actions.kruntimes.io",
    ] {
        let crd = api.get(name).await.unwrap();
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        assert!(established, "{name} is not Established");
        assert_eq!(
            crd.metadata.managed_fields.unwrap()[0].manager.as_deref(),
            Some("kubectl-kruntimes")
        );
    }

    let before = crd_versions(&client).await;
    let (second, stdout, stderr) = output(support::kruntimes().args(full));
    assert!(second.status.success(), "second install failed: {stderr}");
    for object in [
        "customresourcedefinition.apiextensions.k8s.io/runtimes.kruntimes.io",
        "customresourcedefinition.apiextensions.k8s.io/runs.kruntimes.io",
        "customresourcedefinition.apiextensions.k8s.io/persistentworkspaces.kruntimes.io",
        "customresourcedefinition.apiextensions.k8s.io/workflows.kruntimes.io",
        "customresourcedefinition.apiextensions.k8s.io/workflowruns.kruntimes.io",
        "customresourcedefinition.apiextensions.k8s.io/actions.kruntimes.io",
        "clusterrole.rbac.authorization.k8s.io/kubectl-kruntimes-view",
        "clusterrole.rbac.authorization.k8s.io/kubectl-kruntimes-submit",
        "clusterrole.rbac.authorization.k8s.io/kubectl-kruntimes-runtime-admin",
        "clusterrole.rbac.authorization.k8s.io/kubectl-kruntimes-runtimed",
        "validatingadmissionpolicy.admissionregistration.k8s.io/kubectl-kruntimes-runtimed",
        "validatingadmissionpolicybinding.admissionregistration.k8s.io/kubectl-kruntimes-runtimed",
        "validatingadmissionpolicy.admissionregistration.k8s.io/kubectl-kruntimes-run",
        "validatingadmissionpolicybinding.admissionregistration.k8s.io/kubectl-kruntimes-run",
        "mutatingadmissionpolicy.admissionregistration.k8s.io/kubectl-kruntimes-submitter",
        "mutatingadmissionpolicybinding.admissionregistration.k8s.io/kubectl-kruntimes-submitter",
        "validatingadmissionpolicy.admissionregistration.k8s.io/kubectl-kruntimes-submitter",
        "validatingadmissionpolicybinding.admissionregistration.k8s.io/kubectl-kruntimes-submitter",
        "namespace/kubectl-kruntimes",
        "serviceaccount/kubectl-kruntimes-scheduler",
        "clusterrole.rbac.authorization.k8s.io/kubectl-kruntimes-scheduler",
        "clusterrolebinding.rbac.authorization.k8s.io/kubectl-kruntimes-scheduler",
        "role.rbac.authorization.k8s.io/kubectl-kruntimes-scheduler-leader-election",
        "rolebinding.rbac.authorization.k8s.io/kubectl-kruntimes-scheduler-leader-election",
        "deployment.apps/kubectl-kruntimes-scheduler",
        "poddisruptionbudget.policy/kubectl-kruntimes-scheduler",
        "service/kubectl-kruntimes-scheduler-metrics",
    ] {
        assert!(
            stdout.lines().any(|l| l == format!("{object} unchanged")),
            "{object}: {stdout}"
        );
    }
    assert_eq!(
        crd_versions(&client).await,
        before,
        "a second install wrote to the CRDs"
    );
}

#[testkit::test]
async fn install_dry_run_validates_without_persisting() {
    // A CRD the server has not seen: dry-run must not create it.
    let client = support::client().await;
    support::install_crds();
    let before = crd_versions(&client).await;
    let (out, stdout, stderr) = output(support::kruntimes().args(["install", "--dry-run"]));
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("(server dry run)"), "{stdout}");
    assert!(
        stdout.contains(
            "validatingadmissionpolicy.admissionregistration.k8s.io/kubectl-kruntimes-runtimed unchanged (server dry run)"
        ),
        "{stdout}"
    );
    assert_eq!(crd_versions(&client).await, before);
}

/// `install --print | head -1`, as kubectl's output is used: once `head` has its line and
/// closes the pipe, the command ends quietly by SIGPIPE (exit 141 in a shell), never a panic
/// (exit 101, a backtrace on stderr). Its output is larger than a pipe holds, so it does
/// write to the closed pipe.
#[testkit::test]
fn install_print_piped_into_head_ends_quietly() {
    use std::io::BufRead as _;
    use std::os::unix::process::ExitStatusExt as _;
    let mut child = binary()
        .args(["install", "--print"])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first, "---\n");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}: {stderr}",
        out.status
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `--dry-run` takes kubectl's modes: `client` prints what `--print` prints and touches no
/// cluster; a mode it does not know is refused, naming the ones it takes.
#[testkit::test]
fn install_dry_run_client_prints_without_a_cluster_and_an_unknown_mode_is_named() {
    let print = |args: &[&str]| {
        output(
            binary()
                .args(args)
                .env("KUBECONFIG", "/nonexistent/kubeconfig"),
        )
    };
    let (out, printed, stderr) = print(&["install", "--print"]);
    assert!(out.status.success(), "{stderr}");
    let (out, client, stderr) = print(&["install", "--dry-run=client"]);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(client, printed);
    let (out, _, stderr) = print(&["install", "--dry-run=maybe"]);
    assert!(!out.status.success());
    assert!(
        stderr.contains("invalid value 'maybe' for '--dry-run[=<MODE>]'")
            && stderr.contains("[possible values: none, client, server]"),
        "{stderr}"
    );
}

#[testkit::test]
fn install_print_writes_what_install_applies_and_touches_no_cluster() {
    let (out, stdout, stderr) = output(
        binary()
            .args(["install", "--print"])
            .env("KUBECONFIG", "/nonexistent/kubeconfig"),
    );
    assert!(out.status.success(), "{stderr}");
    let docs: Vec<(String, String)> = kruntimes::util::yaml::documents(&stdout)
        .unwrap()
        .into_iter()
        .map(|v| {
            (
                v["kind"].as_str().unwrap().to_string(),
                v["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected = [
        ("CustomResourceDefinition", "runtimes.kruntimes.io"),
        ("CustomResourceDefinition", "runs.kruntimes.io"),
        (
            "CustomResourceDefinition",
            "persistentworkspaces.kruntimes.io",
        ),
        ("CustomResourceDefinition", "workflows.kruntimes.io"),
        ("CustomResourceDefinition", "workflowruns.kruntimes.io"),
        ("CustomResourceDefinition", "actions.kruntimes.io"),
        ("ClusterRole", "kubectl-kruntimes-view"),
        ("ClusterRole", "kubectl-kruntimes-submit"),
        ("ClusterRole", "kubectl-kruntimes-runtime-admin"),
        ("ClusterRole", "kubectl-kruntimes-runtimed"),
        ("ClusterRole", "kubectl-kruntimes-runtimed-tokenreview"),
        (
            "ClusterRoleBinding",
            "kubectl-kruntimes-runtimed-tokenreview",
        ),
        ("ValidatingAdmissionPolicy", "kubectl-kruntimes-runtimed"),
        (
            "ValidatingAdmissionPolicyBinding",
            "kubectl-kruntimes-runtimed",
        ),
        ("ValidatingAdmissionPolicy", "kubectl-kruntimes-run"),
        ("ValidatingAdmissionPolicyBinding", "kubectl-kruntimes-run"),
        ("ValidatingAdmissionPolicy", "kubectl-kruntimes-submitter"),
        (
            "ValidatingAdmissionPolicyBinding",
            "kubectl-kruntimes-submitter",
        ),
        // deploy/submitter-mutation/, which install applies where the server serves it.
        ("MutatingAdmissionPolicy", "kubectl-kruntimes-submitter"),
        (
            "MutatingAdmissionPolicyBinding",
            "kubectl-kruntimes-submitter",
        ),
        // Then the scheduler (deploy/scheduler.yaml).
        ("Namespace", "kubectl-kruntimes"),
        ("ServiceAccount", "kubectl-kruntimes-scheduler"),
        ("ValidatingAdmissionPolicy", "kubectl-kruntimes-scheduler"),
        (
            "ValidatingAdmissionPolicyBinding",
            "kubectl-kruntimes-scheduler",
        ),
        ("ClusterRole", "kubectl-kruntimes-scheduler"),
        ("ClusterRoleBinding", "kubectl-kruntimes-scheduler"),
        (
            "ClusterRoleBinding",
            "kubectl-kruntimes-scheduler-auth-delegator",
        ),
        ("ClusterRole", "kubectl-kruntimes-metrics-reader"),
        ("Role", "kubectl-kruntimes-scheduler-leader-election"),
        ("RoleBinding", "kubectl-kruntimes-scheduler-leader-election"),
        ("Role", "kubectl-kruntimes-gateway"),
        ("RoleBinding", "kubectl-kruntimes-gateway"),
        (
            "RoleBinding",
            "kubectl-kruntimes-scheduler-authentication-reader",
        ),
        ("Deployment", "kubectl-kruntimes-scheduler"),
        ("PodDisruptionBudget", "kubectl-kruntimes-scheduler"),
        ("Service", "kubectl-kruntimes-scheduler-metrics"),
        // The gateway's Service and APIService (subresources.kruntimes.io).
        ("Service", "kubectl-kruntimes-gateway"),
        ("APIService", "v1alpha1.subresources.kruntimes.io"),
    ]
    .map(|(k, n)| (k.to_string(), n.to_string()));
    assert_eq!(docs, expected);
    // The shipped files are printed verbatim, so deploy/ and --print cannot drift.
    for file in [
        "deploy/user-roles.yaml",
        "deploy/crds/runtimed-role.yaml",
        "deploy/crds/runtimed-policy.yaml",
        "deploy/run-policy.yaml",
        "deploy/submitter-policy.yaml",
        "deploy/submitter-mutation/submitter-mutation.yaml",
        "deploy/scheduler.yaml",
    ] {
        let shipped =
            std::fs::read_to_string(format!("{}/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        assert!(stdout.contains(&shipped), "--print does not hold {file}");
    }
}

#[testkit::test]
async fn install_print_piped_to_kubectl_apply_is_accepted_by_the_server() {
    support::control_plane();
    let (printed, _, stderr) = output(binary().args(["install", "--print"]));
    assert!(printed.status.success(), "{stderr}");
    let mut kubectl = support::kubectl()
        .args([
            "apply",
            "--server-side",
            "--dry-run=server",
            "--force-conflicts",
            "-f",
            "-",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    kubectl
        .stdin
        .take()
        .unwrap()
        .write_all(&printed.stdout)
        .unwrap();
    let out = kubectl.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.lines().count(), 38, "{stdout}");
}

/// Our own CRDs applied by another tool (`kubectl apply -k deploy/crds/` is client-side apply,
/// manager `kubectl-client-side-apply`) are ours: install says nothing of "another
/// installation".
#[testkit::test]
async fn install_over_deploy_applied_with_kubectl_knows_the_crds_as_its_own() {
    support::control_plane();
    let _crds = CRD_WRITES.lock().await;
    let crds = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crds/crds.yaml");
    support::ok(
        &support::kubectl()
            .args(["apply", "-f"])
            .arg(&crds)
            .output()
            .unwrap(),
        "kubectl apply -f deploy/crds/crds.yaml",
    );
    let (installed, _, stderr) =
        output(support::kruntimes().args(["install", "--yes", "--crds-only"]));
    assert!(installed.status.success(), "{stderr}");
    assert!(
        !stderr.contains("another kruntimes installation"),
        "{stderr}"
    );
}

#[testkit::test]
fn install_without_a_terminal_and_without_yes_refuses_and_says_to_pass_yes() {
    support::control_plane();
    let (out, _, stderr) = output(
        support::kruntimes()
            .arg("install")
            .stdin(std::process::Stdio::null()),
    );
    assert!(!out.status.success());
    assert!(stderr.contains("pass --yes"), "{stderr}");
    assert!(
        stderr.contains("context test (server https://127.0.0.1:"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[testkit::test]
fn install_against_an_unreachable_server_fails_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("config");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster:\n    server: https://127.0.0.1:1\n    insecure-skip-tls-verify: true\ncontexts:\n- name: gone\n  context: {cluster: gone, user: u}\ncurrent-context: gone\nusers:\n- name: u\n  user: {token: t}\n",
    )
    .unwrap();
    let (out, _, stderr) = output(
        binary()
            .args(["install", "--yes", "--kubeconfig"])
            .arg(&kubeconfig),
    );
    assert!(!out.status.success());
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("cannot reach the API server of context gone (server https://127.0.0.1:1)"),
        "{stderr}"
    );
}

#[testkit::test]
fn install_with_a_missing_kubeconfig_fails_with_one_line() {
    let (out, _, stderr) =
        output(binary().args(["install", "--yes", "--kubeconfig", "/nonexistent/config"]));
    assert!(!out.status.success());
    assert_eq!(
        stderr.trim(),
        "error: kubeconfig /nonexistent/config does not exist; pass --kubeconfig with an existing file or set KUBECONFIG"
    );
}

#[testkit::test]
fn install_when_forbidden_fails_with_one_line_naming_the_server() {
    let cp = support::control_plane();
    let (out, _, stderr) = output(
        binary()
            .args(["install", "--yes", "--kubeconfig"])
            .arg(&cp.nobody_kubeconfig),
    );
    assert!(!out.status.success());
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("refused"), "{stderr}");
    assert!(stderr.contains("forbidden"), "{stderr}");
    assert!(stderr.contains(&cp.server), "{stderr}");
}

#[testkit::test]
async fn kubectl_applies_fixtures_and_get_runs_shows_the_printer_columns() {
    let ns = TestNs::new("fixtures").await;
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    for file in ["runtime.yaml", "run.yaml"] {
        let apply = ["apply", "-n", &ns.name, "-f", &format!("{fixtures}/{file}")];
        let (out, stdout, stderr) = output(support::kubectl().args(apply));
        assert!(out.status.success(), "kubectl apply {file}: {stderr}");
        assert!(stdout.contains("created"), "{stdout}");
    }
    let (out, stdout, stderr) = output(support::kubectl().args(["get", "runs", "-n", &ns.name]));
    assert!(out.status.success(), "{stderr}");
    let header: Vec<&str> = stdout.lines().next().unwrap().split_whitespace().collect();
    // The upstream API's columns, with Reason and Attempt before Age (what a user looks for
    // first when a Run failed or was retried).
    assert_eq!(
        header,
        [
            "NAME", "PHASE", "ASSIGNED", "POD", "RUNTIME", "REASON", "ATTEMPT", "AGE"
        ]
    );
    assert!(
        stdout.lines().nth(1).unwrap().starts_with("train-1"),
        "{stdout}"
    );

    let (_, stdout, _) = output(support::kubectl().args(["get", "runtimes", "-n", &ns.name]));
    let header: Vec<&str> = stdout.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "IMAGE", "REPLICAS", "READY", "AGE"]);

    let selected = [
        "get",
        "runs",
        "-n",
        &ns.name,
        "--field-selector",
        "spec.runtime=python",
    ];
    let (out, stdout, stderr) = output(support::kubectl().args(selected).args(["-o", "name"]));
    assert!(
        out.status.success(),
        "field selector on spec.runtime: {stderr}"
    );
    assert_eq!(stdout.trim(), "run.kruntimes.io/train-1");
}

#[testkit::test]
async fn changing_execution_inputs_or_undoing_a_cancel_is_rejected_by_the_api_server() {
    let ns = TestNs::new("immutable").await;
    let runs = ns.runs();
    run("r").requests(&[("runs", 1)]).create(&ns).await;

    let change = serde_json::json!({"spec": {"resources": {"requests": {"runs": "2"}}}});
    let err = runs
        .patch("r", &PatchParams::default(), &Patch::Merge(&change))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("expected an API error, got {err}")
    };
    assert_eq!(status.code, 422);
    assert!(
        status
            .message
            .contains("runtime, source, mode, env, timeout, retryPolicy, and resources are immutable after Run creation"),
        "{}",
        status.message
    );

    let remove = serde_json::json!({"spec": {"resources": null}});
    let err = runs
        .patch("r", &PatchParams::default(), &Patch::Merge(&remove))
        .await
        .unwrap_err();
    let immutable = "runtime, source, mode, env, timeout, retryPolicy, and resources are immutable after Run creation";
    assert!(err.to_string().contains(immutable), "{err}");
    // As in the upstream API, the Runtime is an execution input too.
    let move_it = serde_json::json!({"spec": {"runtime": "other"}});
    let err = runs
        .patch("r", &PatchParams::default(), &Patch::Merge(&move_it))
        .await
        .unwrap_err();
    assert!(err.to_string().contains(immutable), "{err}");

    // What is not an execution input stays mutable; cancelRequested only one way.
    let later =
        serde_json::json!({"spec": {"ttlSecondsAfterFinished": 60, "cancelRequested": true}});
    runs.patch("r", &PatchParams::default(), &Patch::Merge(&later))
        .await
        .unwrap();
    let undo = serde_json::json!({"spec": {"cancelRequested": false}});
    let err = runs
        .patch("r", &PatchParams::default(), &Patch::Merge(&undo))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("cancelRequested may not transition from true to false"),
        "{err}"
    );

    // kruntimes' own placement inputs: one rule, whose message names the field changed.
    run("placed")
        .priority_class("urgent")
        .workspace("ws")
        .create(&ns)
        .await;
    for (change, field) in [
        (
            json!({"spec": {"priorityClassName": "batch"}}),
            "priorityClassName",
        ),
        (
            json!({"spec": {"priorityClassName": null}}),
            "priorityClassName",
        ),
        (
            json!({"spec": {"workspace": {"name": "other"}}}),
            "workspace",
        ),
        (
            json!({"spec": {"affinity": {"runAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "kruntimes.io/runtime-pod"}
            ]}}}}),
            "affinity",
        ),
    ] {
        let err = runs
            .patch("placed", &PatchParams::default(), &Patch::Merge(&change))
            .await
            .expect_err("an immutable field changed");
        let expected = format!("{field} is immutable after Run creation");
        assert!(err.to_string().contains(&expected), "{change}: {err}");
    }
    let add = json!({"spec": {"priorityClassName": "urgent"}});
    let err = runs
        .patch("r", &PatchParams::default(), &Patch::Merge(&add))
        .await
        .expect_err("a class added after creation");
    assert!(
        err.to_string()
            .contains("priorityClassName is immutable after Run creation"),
        "{err}"
    );
    let stored = ns.get_run("placed").await;
    assert_eq!(stored.spec.priority_class_name.as_deref(), Some("urgent"));
}

#[testkit::test]
async fn a_fractional_quantity_is_stored_verbatim_and_refused_by_request_validation() {
    // The API server accepts any int-or-string quantity; the scheduler's PreFilter refuses it
    // (and fails the Run with InvalidResources). The stored value must reach it unchanged.
    let ns = TestNs::new("badquantity").await;
    let bad = run("bad").request_strs(&[("example.com/gpu", "1.5")]);
    bad.create(&ns).await;
    let stored = ns.get_run("bad").await;
    let requests = stored.spec.resources.as_ref().map(|r| &r.requests);
    let err = kruntimes::api::resources::parse_requests(requests).unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.resources.requests[\"example.com/gpu\"]: \"1.5\" is not a valid quantity: it is not a whole number; logical resources are counted in whole units (use \"1\" or \"2\")"
    );
}

/// The Run spec's rules, which the admission policy `kubectl-kruntimes-run` holds (not the
/// CRD, whose rules every status write paid for): each invalid spec is refused on create with
/// the rule's message, and a valid one is admitted. (That status writes never meet it is its
/// match, `runs` only, checked in `src/policy/run.rs`: an existing Run always has a valid
/// spec, so no status write here could tell.)
#[testkit::test]
async fn the_run_policy_refuses_each_invalid_spec_with_its_message() {
    let ns = TestNs::new("run-policy").await;
    let runs = ns.runs();
    let dry_run = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    let with = |spec: serde_json::Value| -> kruntimes::api::Run {
        // A mode unless the case names one (the typed client sends an empty one otherwise).
        let mut full = json!({"runtime": "py", "mode": {"task": {}}});
        full.as_object_mut()
            .unwrap()
            .extend(spec.as_object().unwrap().clone());
        serde_json::from_value(json!({
            "apiVersion": "kruntimes.io/v1alpha1", "kind": "Run",
            "metadata": {"name": "r", "namespace": ns.name}, "spec": full,
        }))
        .unwrap()
    };
    let selector = |s: serde_json::Value| {
        json!({"affinity": {"runAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": s, "topologyKey": "kruntimes.io/runtime-pod"}]}}})
    };
    for (spec, message) in [
        (
            json!({"mode": {"task": {}, "function": {"handler": "m.f"}}}),
            "exactly one of task or function must be set",
        ),
        (
            json!({"mode": {"task": {"entrypoint": "../x.sh"}}}),
            "mode.task.entrypoint must be a relative path that does not contain '..'",
        ),
        (
            json!({"source": {"inline": "x", "inlinePath": "h.sh"}}),
            "source.inlinePath is only valid for function mode with inline source",
        ),
        (
            json!({"mode": {"function": {"handler": "m.f"}}, "source": {"inline": "x"}}),
            "function mode inline source requires source.inlinePath",
        ),
        (
            json!({"source": {"inline": "x", "repoURL": "https://example.com/r.git"}}),
            "inline and repoURL are mutually exclusive",
        ),
        (
            json!({"source": {"commitSHA": "0123456789abcdef0123456789abcdef01234567"}}),
            "commitSHA requires repoURL",
        ),
        (
            json!({"mode": {"function": {"handler": "m.f"}}, "source": {"inline": "x", "inlinePath": "a//b.sh"}}),
            "inlinePath must be a relative file path without empty, '.' or '..' segments",
        ),
        (selector(json!({})), "labelSelector must not be empty"),
    ] {
        let refused = runs.create(&dry_run, &with(spec.clone())).await;
        let Err(kube::Error::Api(status)) = refused else {
            panic!("{spec} was admitted: {refused:?}")
        };
        assert!(
            status.message.contains(kruntimes::policy::run::NAME)
                && status.message.contains(message),
            "{spec}: {}",
            status.message
        );
    }
    runs.create(
        &dry_run,
        &with(selector(json!({"matchLabels": {"app": "x"}}))),
    )
    .await
    .unwrap();
}

/// Without `--yes` and without a terminal to ask on, `install` and `uninstall` refuse, say how
/// to confirm, and change nothing.
#[testkit::test]
async fn install_and_uninstall_without_a_terminal_refuse_and_say_how_to_confirm() {
    let client = support::client().await;
    support::install_crds();
    let before = crd_versions(&client).await;
    for (args, doing) in [
        (&["install"][..], "refusing to install into"),
        (
            &["uninstall", "--delete-crds"][..],
            "refusing to uninstall from",
        ),
    ] {
        let (out, _, stderr) = output(
            support::kruntimes()
                .args(args)
                .stdin(std::process::Stdio::null()),
        );
        assert!(
            !out.status.success(),
            "{args:?} went on without confirmation"
        );
        assert!(
            stderr.contains(doing) && stderr.contains("pass --yes to confirm"),
            "{args:?}: {stderr}"
        );
    }
    assert_eq!(crd_versions(&client).await, before);
}

/// `kubectl-kruntimes-edit` (earlier releases: Runs and Runtimes in one role) is split into
/// `kubectl-kruntimes-submit` and `kubectl-kruntimes-runtime-admin`; install deletes the old
/// role when it is kruntimes' (labelled so) and leaves a role of that name that is not.
#[testkit::test]
async fn install_retires_the_old_edit_role_only_when_it_is_kruntimes() {
    use k8s_openapi::api::rbac::v1::ClusterRole;
    let client = support::client().await;
    let _crds = CRD_WRITES.lock().await;
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let role = |labels: serde_json::Value| -> ClusterRole {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "kubectl-kruntimes-edit", "labels": labels},
            "rules": [{"apiGroups": ["kruntimes.io"], "resources": ["runtimes"], "verbs": ["create"]}]
        }))
        .unwrap()
    };
    let install = || {
        output(support::kruntimes().args(["install", "--yes", "--crds-only", "--timeout", "60s"]))
    };
    let said = "clusterrole.rbac.authorization.k8s.io/kubectl-kruntimes-edit deleted";

    roles
        .create(
            &Default::default(),
            &role(serde_json::json!({"team": "theirs"})),
        )
        .await
        .unwrap();
    let (out, stdout, stderr) = install();
    assert!(out.status.success(), "{stderr}");
    assert!(!stdout.contains(said), "{stdout}");
    assert!(
        roles
            .get_opt("kubectl-kruntimes-edit")
            .await
            .unwrap()
            .is_some()
    );

    roles
        .patch(
            "kubectl-kruntimes-edit",
            &Default::default(),
            &kube::api::Patch::Merge(serde_json::json!({"metadata": {"labels": {"app.kubernetes.io/part-of": "kruntimes"}}})),
        )
        .await
        .unwrap();
    let (out, stdout, stderr) = install();
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains(said), "{stdout}");
    assert!(
        roles
            .get_opt("kubectl-kruntimes-edit")
            .await
            .unwrap()
            .is_none()
    );
}
