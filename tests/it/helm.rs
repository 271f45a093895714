//! The Helm chart `charts/kubectl-kruntimes` with helm v4 built from Go modules
//! (`tests/helm/build.sh`): it lints; with default values it renders exactly what
//! `kubectl apply -k deploy/` and `deploy/submitter-mutation/` apply (in the release's
//! namespace, with Helm's labels; the mutating policy at the version the cluster serves), so the
//! two cannot drift; values reach the objects; and on the real API server a release installs
//! (the CRDs from `crds/`, which `kubectl kruntimes install` recognises as its own), upgrades,
//! and uninstalls without deleting the CRDs or a Run.

use testkit as support;

use std::path::Path;

use serde_json::Value;

use support::helm::{chart, helm};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Held by each test that writes the chart's cluster-scoped objects (ClusterRoles, the
/// ClusterRoleBinding, the admission policies): their names do not depend on the release, so a
/// dry run racing an install sees them appear between its read and its create.
static CLUSTER_SCOPED: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Awaits the API server admitting Runs in `ns`: right after the CRDs appear, the submitter's
/// mutating admission policy answers 503 until the API server has loaded the Run's schema for
/// it (what `kubectl kruntimes install` awaits too). A server-side dry run of `run` is tried
/// until it is answered otherwise.
fn await_runs_admitted(ns: &str, run: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let out = support::kubectl()
            .args(["create", "--dry-run=server", "-n", ns, "-f"])
            .arg(run)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.success() {
            return;
        }
        assert!(
            said.contains("ServiceUnavailable") && std::time::Instant::now() < deadline,
            "a dry run of a Run in {ns}: {said}"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

/// The objects of a multi-document YAML text.
fn objects(yaml: &str) -> Vec<Value> {
    kruntimes::util::yaml::documents(yaml)
        .unwrap()
        .into_iter()
        .filter(|d| d.is_object())
        .collect()
}

type Key = (String, String, String);

fn key(o: &Value) -> Key {
    let s = |p: &str| {
        o.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    (s("/kind"), s("/metadata/namespace"), s("/metadata/name"))
}

/// `v` with every run of whitespace in its strings made one space: kustomize and Helm emit the
/// policy's folded CEL (`>-` with more-indented lines) with different blank lines, which CEL
/// does not see, so the comparison does not either.
fn squeezed(v: Value) -> Value {
    match v {
        Value::String(s) => Value::String(s.split_whitespace().collect::<Vec<_>>().join(" ")),
        Value::Array(a) => Value::Array(a.into_iter().map(squeezed).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, squeezed(v))).collect()),
        other => other,
    }
}

/// `o` without the labels Helm adds (and the chart's `helm.sh/resource-policy: keep`).
fn without_helm_labels(mut o: Value) -> Value {
    if let Some(annotations) = o
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove("helm.sh/resource-policy");
        if annotations.is_empty() {
            o["metadata"].as_object_mut().unwrap().remove("annotations");
        }
    }
    if let Some(labels) = o
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        for l in [
            "helm.sh/chart",
            "app.kubernetes.io/managed-by",
            "app.kubernetes.io/instance",
            "app.kubernetes.io/version",
        ] {
            labels.remove(l);
        }
        if labels.is_empty() {
            o["metadata"].as_object_mut().unwrap().remove("labels");
        }
    }
    o
}

/// `helm template` of the release `r1`, without the `helm test` hooks (deploy/ has none).
fn template(extra: &[&str]) -> Vec<Value> {
    let chart = chart();
    let mut args = vec![
        "template",
        "r1",
        chart.to_str().unwrap(),
        "--namespace",
        "kubectl-kruntimes",
        "--skip-tests",
        // What Kubernetes 1.36 serves: the mutating policy at v1, as deploy/ has it.
        "--api-versions",
        "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
    ];
    args.extend(extra);
    objects(&helm(&args, None))
}

/// values.schema.json refuses a bad value with the field's name, and changes nothing it
/// accepts; the PodDisruptionBudget goes with two replicas or more, and the `helm test` Pod
/// runs the release's image as a submitter.
#[testkit::test]
fn the_schema_refuses_bad_values_and_the_pdb_and_test_follow_the_values() {
    let chart = chart();
    let chart = chart.to_str().unwrap();
    for (set, field) in [
        ("scheduler.replicas=two", "replicas"),
        ("scheduler.replicas=0", "replicas"),
        ("image.pullPolicy=Sometimes", "pullPolicy"),
        ("scheduler.replicass=2", "replicass"),
    ] {
        let out = support::helm::command()
            .args(["template", "r1", chart, "--set", set])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "--set {set} rendered");
        assert!(
            err.contains("values don't meet the specifications of the schema")
                && err.contains(field),
            "--set {set}: {err}"
        );
    }
    // The floor: Kubernetes 1.32, where everything the chart applies is GA but the mutating
    // policy, which goes at the version the cluster serves (tests/it/kubernetes_1_32.rs installs
    // the chart on one that serves none).
    let older = support::helm::command()
        .args(["template", "r1", chart, "--kube-version", "1.31.9"])
        .output()
        .unwrap();
    assert!(
        !older.status.success(),
        "the chart rendered for Kubernetes 1.31"
    );
    assert!(
        String::from_utf8_lossy(&older.stderr).contains(">=1.32.0-0"),
        "{}",
        String::from_utf8_lossy(&older.stderr)
    );
    helm(&["template", "r1", chart, "--kube-version", "1.32.0"], None);
    let mutating = |served: &str| -> Vec<(String, String)> {
        let rendered = objects(&helm(
            &[
                "template",
                "r1",
                chart,
                "--skip-tests",
                "--api-versions",
                served,
            ],
            None,
        ));
        rendered
            .iter()
            .filter(|o| o["kind"].as_str().unwrap().starts_with("Mutating"))
            .map(|o| {
                (
                    o["kind"].as_str().unwrap().into(),
                    o["apiVersion"].as_str().unwrap().into(),
                )
            })
            .collect()
    };
    for version in ["v1", "v1beta1"] {
        let api_version = format!("admissionregistration.k8s.io/{version}");
        assert_eq!(
            mutating(&format!("{api_version}/MutatingAdmissionPolicy")),
            [
                ("MutatingAdmissionPolicy".to_string(), api_version.clone()),
                (
                    "MutatingAdmissionPolicyBinding".to_string(),
                    api_version.clone()
                ),
            ],
            "the mutating policy where the cluster serves it at {version}"
        );
    }
    let kinds = |objects: &[Value]| -> Vec<String> {
        objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap().to_string())
            .collect()
    };
    let pdb = template(&[]);
    let pdb = pdb
        .iter()
        .find(|o| o["kind"] == "PodDisruptionBudget")
        .unwrap();
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(pdb["metadata"]["namespace"], "kubectl-kruntimes");
    assert!(
        !kinds(&template(&["--set", "scheduler.replicas=1"]))
            .contains(&"PodDisruptionBudget".to_string())
    );
    assert!(
        !kinds(&template(&[
            "--set",
            "scheduler.podDisruptionBudget.enabled=false"
        ]))
        .contains(&"PodDisruptionBudget".to_string())
    );

    let with_tests = objects(&helm(
        &["template", "r1", chart, "--namespace", "ns1"],
        None,
    ));
    let pod = with_tests.iter().find(|o| o["kind"] == "Pod").unwrap();
    assert_eq!(pod["metadata"]["annotations"]["helm.sh/hook"], "test");
    let container = &pod["spec"]["containers"][0];
    assert_eq!(
        container["image"],
        format!(
            "ghcr.io/kruntimes/kubectl-kruntimes:{}",
            env!("CARGO_PKG_VERSION")
        )
    );
    assert!(
        container["args"]
            .as_array()
            .unwrap()
            .contains(&Value::from("--dry-run=server"))
    );
    let without = objects(&helm(
        &["template", "r1", chart, "--set", "tests.enabled=false"],
        None,
    ));
    assert!(!kinds(&without).contains(&"Pod".to_string()));
}

#[testkit::test]
fn the_chart_lints_and_renders_exactly_deploy_with_default_values() {
    helm(&["lint", "--strict", chart().to_str().unwrap()], None);
    let rendered = template(&[]);
    for o in &rendered {
        let labels = &o["metadata"]["labels"];
        assert_eq!(labels["app.kubernetes.io/managed-by"], "Helm", "{o}");
    }
    let mut rendered: Vec<(Key, Value)> = rendered
        .into_iter()
        .map(|o| (key(&o), without_helm_labels(o)))
        .collect();
    rendered.sort_by(|a, b| a.0.cmp(&b.0));
    let kustomize = |dir: &str| {
        let out = support::kubectl()
            .args(["kustomize", repo().join(dir).to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success());
        objects(&String::from_utf8_lossy(&out.stdout))
    };
    // The namespace is `helm install --create-namespace`'s, not the chart's; the CRDs are in
    // the chart's crds/, runtimed's ClusterRole (deploy/crds/ too) in its templates.
    let mut deployed: Vec<(Key, Value)> = kustomize("deploy")
        .into_iter()
        .chain(kustomize("deploy/crds"))
        .chain(kustomize("deploy/submitter-mutation"))
        .filter(|o| o["kind"] != "Namespace" && o["kind"] != "CustomResourceDefinition")
        .map(|o| (key(&o), o))
        .collect();
    deployed.sort_by(|a, b| a.0.cmp(&b.0));
    let names = |v: &[(Key, Value)]| v.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(names(&rendered), names(&deployed));
    for ((k, chart), (_, deploy)) in rendered.iter().zip(&deployed) {
        assert_eq!(
            squeezed(chart.clone()),
            squeezed(deploy.clone()),
            "{k:?} differs from deploy/"
        );
    }
}

/// The submitter policies trust the scheduler's own account to delegate (a WorkflowRun's Runs
/// carry its submitter): in a release of another namespace, that namespace's account, and
/// never an account of deploy/'s namespace, where anyone may make one of that name.
#[testkit::test]
fn the_submitter_policies_trust_the_scheduler_account_of_the_releases_namespace() {
    let rendered = objects(&helm(
        &[
            "template",
            "r1",
            chart().to_str().unwrap(),
            "--namespace",
            "platform",
            "--skip-tests",
            "--api-versions",
            "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
        ],
        None,
    ));
    let policies: Vec<String> = rendered
        .iter()
        .filter(|o| {
            o["kind"]
                .as_str()
                .unwrap_or_default()
                .ends_with("AdmissionPolicy")
                && o["metadata"]["name"] == "kubectl-kruntimes-submitter"
        })
        .map(|o| o.to_string())
        .collect();
    assert_eq!(policies.len(), 2, "the validating and the mutating policy");
    for policy in &policies {
        assert!(
            policy.contains("'system:serviceaccount:platform:kubectl-kruntimes-scheduler'"),
            "{policy}"
        );
        assert!(
            !policy.contains("system:serviceaccount:kubectl-kruntimes:"),
            "{policy}"
        );
    }
}

#[testkit::test]
fn values_reach_the_scheduler_the_monitor_and_the_example_runtime() {
    let rendered = template(&[
        "--set",
        "scheduler.replicas=3,image.repository=registry.example/kruntimes,image.tag=v9",
        "--set",
        "scheduler.nodeSelector.disk=ssd,scheduler.leaderElection=false,scheduler.priorityClassName=system-cluster-critical",
        "--set",
        "metrics.serviceMonitor.enabled=true,runtime.enabled=true,image.pullSecrets[0].name=regcred",
    ]);
    let find = |kind: &str| {
        rendered
            .iter()
            .find(|o| o["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} rendered"))
    };
    let deploy = find("Deployment");
    assert_eq!(deploy["spec"]["replicas"], 3);
    let pod = &deploy["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(c["image"], "registry.example/kruntimes:v9");
    assert!(
        c["env"].as_array().unwrap().iter().any(
            |e| e["name"] == "KRUNTIMES_IMAGE" && e["value"] == "registry.example/kruntimes:v9"
        ),
        "{c}"
    );
    assert_eq!(
        c["args"].as_array().unwrap().last().unwrap(),
        "--leader-elect=false"
    );
    assert_eq!(pod["nodeSelector"]["disk"], "ssd");
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(pod["imagePullSecrets"][0]["name"], "regcred");
    // Unset values keep deploy/'s.
    assert_eq!(c["resources"]["limits"]["memory"], "512Mi");
    let monitor = find("ServiceMonitor");
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
    let runtime = find("Runtime");
    assert_eq!(
        runtime["spec"]["template"]["spec"]["containers"][0]["name"],
        "runtime"
    );
    assert_eq!(runtime["spec"]["capacity"]["resources"]["runs"], "4");
}

/// `gateway.certManager.enabled`: cert-manager issues the gateway's certificate (a self-signed
/// Issuer of the release, or the issuer named), the scheduler mounts it and serves it
/// (`--gateway-cert-dir`), and the APIService asks cert-manager's CA injector for its caBundle.
/// Off by default: none of it is rendered.
#[testkit::test]
fn cert_manager_can_issue_the_gateways_certificate() {
    let kinds = |rendered: &[serde_json::Value]| -> Vec<String> {
        rendered
            .iter()
            .map(|o| o["kind"].as_str().unwrap().to_string())
            .collect()
    };
    let plain = template(&[]);
    assert!(
        !kinds(&plain)
            .iter()
            .any(|k| k == "Certificate" || k == "Issuer")
    );
    let rendered = template(&["--set", "gateway.certManager.enabled=true"]);
    let find = |kind: &str| {
        rendered
            .iter()
            .find(|o| o["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} rendered"))
    };
    let certificate = find("Certificate");
    let ns = certificate["metadata"]["namespace"].as_str().unwrap();
    assert_eq!(
        certificate["spec"]["secretName"],
        "kubectl-kruntimes-gateway-cert"
    );
    assert_eq!(
        certificate["spec"]["dnsNames"][0],
        format!("kubectl-kruntimes-gateway.{ns}.svc")
    );
    assert_eq!(
        certificate["spec"]["issuerRef"]["name"],
        "kubectl-kruntimes-gateway"
    );
    assert_eq!(find("Issuer")["spec"]["selfSigned"], serde_json::json!({}));
    assert_eq!(
        find("APIService")["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        format!("{ns}/kubectl-kruntimes-gateway")
    );
    let pod = &find("Deployment")["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert!(
        c["args"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--gateway-cert-dir=/etc/kruntimes/gateway-tls"),
        "{c}"
    );
    assert!(
        c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "gateway-tls" && m["mountPath"] == "/etc/kruntimes/gateway-tls"),
        "{c}"
    );
    assert!(
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["name"] == "gateway-tls"
                && v["secret"]["secretName"] == "kubectl-kruntimes-gateway-cert"),
        "{pod}"
    );
    // An issuer of the cluster's instead: no Issuer of the release.
    let named = template(&[
        "--set",
        "gateway.certManager.enabled=true,gateway.certManager.issuerRef.name=corp-ca,gateway.certManager.issuerRef.kind=ClusterIssuer",
    ]);
    assert!(!kinds(&named).iter().any(|k| k == "Issuer"));
    let certificate = named.iter().find(|o| o["kind"] == "Certificate").unwrap();
    assert_eq!(certificate["spec"]["issuerRef"]["name"], "corp-ca");
    assert_eq!(certificate["spec"]["issuerRef"]["kind"], "ClusterIssuer");
}

/// The real API server: install (CRDs from crds/), a Run, upgrade, uninstall: the Run and the
/// CRDs stay.
#[testkit::test]
async fn install_upgrade_uninstall_keeps_the_crds_and_every_run() {
    let _cluster_scoped = CLUSTER_SCOPED.lock().await;
    let cp = support::control_plane();
    let kubeconfig = cp.kubeconfig.as_path();
    let ns = format!("helm-{}", std::process::id());
    let chart = chart();
    let chart = chart.to_str().unwrap();
    helm(
        &[
            "install",
            "r1",
            chart,
            "--namespace",
            &ns,
            "--create-namespace",
        ],
        Some(kubeconfig),
    );
    let kubectl = |args: &[&str]| {
        let out = support::kubectl().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/runs.kruntimes.io",
        "--timeout=60s",
    ]);
    // Established is not yet discoverable: kubectl maps the kind through the API server's
    // discovery, which takes the new group in a moment later (and the release's APIService,
    // whose gateway does not run here, is rediscovered beside it).
    let discovered = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !support::kubectl()
        .args(["get", "runs.kruntimes.io", "-n", &ns])
        .output()
        .unwrap()
        .status
        .success()
    {
        assert!(
            std::time::Instant::now() < discovered,
            "kubectl never discovered runs.kruntimes.io"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // `install` takes the chart's CRDs for its own (their label says so), not for another
    // kruntimes installation's; beside the chart's scheduler it updates the cluster-wide part
    // only, and refuses to deploy a second scheduler.
    let full = support::kruntimes()
        .args(["install", "--dry-run"])
        .output()
        .unwrap();
    let refused = String::from_utf8_lossy(&full.stderr);
    assert!(!full.status.success());
    assert!(
        refused.contains(&format!(
            "the kruntimes scheduler was installed by Helm (deployment {ns}/kubectl-kruntimes-scheduler)"
        )) && refused.contains("install --crds-only"),
        "{refused}"
    );
    // Nor does uninstall remove what Helm installed.
    let uninstall = support::kruntimes()
        .args(["uninstall", "--yes"])
        .output()
        .unwrap();
    let refused = String::from_utf8_lossy(&uninstall.stderr);
    assert!(!uninstall.status.success());
    assert!(
        refused.contains("helm uninstall") && refused.contains("nothing was changed"),
        "{refused}"
    );
    kubectl(&["get", "deploy", "kubectl-kruntimes-scheduler", "-n", &ns]);
    let dry = support::kruntimes()
        .args(["install", "--crds-only", "--dry-run"])
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&dry.stdout).into_owned() + &String::from_utf8_lossy(&dry.stderr);
    assert!(dry.status.success(), "install --dry-run: {said}");
    assert!(!said.contains("another kruntimes installation"), "{said}");
    let deployment = |field: &str| {
        kubectl(&[
            "get",
            "deploy",
            "kubectl-kruntimes-scheduler",
            "-n",
            &ns,
            "-o",
            &format!("jsonpath={field}"),
        ])
    };
    assert_eq!(deployment("{.spec.replicas}"), "2");
    kubectl(&["get", "clusterrole", "kubectl-kruntimes-runtimed"]);
    kubectl(&[
        "get",
        "validatingadmissionpolicy",
        "kubectl-kruntimes-runtimed",
    ]);
    let run = "apiVersion: kruntimes.io/v1alpha1\nkind: Run\nmetadata: {name: kept}\nspec:\n  runtime: bash\n  source: {inline: echo hi}\n";
    let path = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(path.path(), run).unwrap();
    await_runs_admitted(&ns, path.path());
    kubectl(&["apply", "-n", &ns, "-f", path.path().to_str().unwrap()]);

    helm(
        &[
            "upgrade",
            "r1",
            chart,
            "--namespace",
            &ns,
            "--set",
            "scheduler.replicas=3,image.tag=v2",
        ],
        Some(kubeconfig),
    );
    assert_eq!(deployment("{.spec.replicas}"), "3");
    assert_eq!(
        deployment("{.spec.template.spec.containers[0].image}"),
        "ghcr.io/kruntimes/kubectl-kruntimes:v2"
    );

    // A release whose CRDs gained a field: Helm never updates crds/, so the upgrade leaves the
    // API server on the old schema; the documented step (docs/operations/upgrade.md),
    // `kubectl kruntimes install --crds-only`, brings the field. The old schema is made by
    // removing a field the new one has (Run's spec.priorityClassName).
    let field = "{.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.priorityClassName.type}";
    let remove = r#"[{"op": "remove", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/priorityClassName"}]"#;
    kubectl(&[
        "patch",
        "crd",
        "runs.kruntimes.io",
        "--type=json",
        "-p",
        remove,
    ]);
    assert_eq!(
        kubectl(&[
            "get",
            "crd",
            "runs.kruntimes.io",
            "-o",
            &format!("jsonpath={field}")
        ]),
        ""
    );
    helm(
        &["upgrade", "r1", chart, "--namespace", &ns, "--reuse-values"],
        Some(kubeconfig),
    );
    assert_eq!(
        kubectl(&[
            "get",
            "crd",
            "runs.kruntimes.io",
            "-o",
            &format!("jsonpath={field}")
        ]),
        "",
        "helm upgrade does not touch crds/"
    );
    let out = support::kruntimes()
        .args(["install", "--crds-only", "--yes"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        kubectl(&[
            "get",
            "crd",
            "runs.kruntimes.io",
            "-o",
            &format!("jsonpath={field}")
        ]),
        "string",
        "install --crds-only brings the new field"
    );

    helm(&["uninstall", "r1", "--namespace", &ns], Some(kubeconfig));
    let gone = support::kubectl()
        .args(["get", "deploy", "kubectl-kruntimes-scheduler", "-n", &ns])
        .output()
        .unwrap();
    assert!(!gone.status.success(), "the scheduler outlived the release");
    kubectl(&["get", "crd", "runs.kruntimes.io", "runtimes.kruntimes.io"]);
    // runtimed's ClusterRole is kept with the CRDs: running Runtime Pods are bound to it; so is
    // the policy that confines their tokens (fail closed).
    kubectl(&["get", "clusterrole", "kubectl-kruntimes-runtimed"]);
    kubectl(&[
        "get",
        "validatingadmissionpolicy,validatingadmissionpolicybinding",
        "kubectl-kruntimes-runtimed",
    ]);
    assert_eq!(
        kubectl(&[
            "get",
            "run",
            "kept",
            "-n",
            &ns,
            "-o",
            "jsonpath={.metadata.name}"
        ]),
        "kept"
    );
}

/// `helm template` with the optional objects on (the example Runtime, more replicas, no leader election, pull secrets, a priority class) is
/// what the real API server accepts: `kubectl apply --dry-run=server` runs its validation,
/// the CRDs' schemas and rules and the admission chain on every object.
#[testkit::test]
fn the_rendered_chart_passes_the_api_servers_validation_with_the_optional_objects_on() {
    let _cluster_scoped = CLUSTER_SCOPED.blocking_lock();
    support::control_plane();
    let ns = format!("helm-dry-{}", std::process::id());
    let out = support::kubectl()
        .args(["create", "namespace", &ns])
        .output()
        .unwrap();
    support::ok(&out, "kubectl create namespace");
    let chart = chart();
    let rendered = helm(
        &[
            "template",
            "r2",
            chart.to_str().unwrap(),
            "--namespace",
            &ns,
            "--set",
            "runtime.enabled=true,scheduler.replicas=3,scheduler.leaderElection=false",
            "--set",
            "image.pullSecrets[0].name=regcred,scheduler.priorityClassName=system-cluster-critical",
        ],
        None,
    );
    let kinds: Vec<String> = objects(&rendered)
        .iter()
        .map(|o| o["kind"].as_str().unwrap().to_string())
        .collect();
    for kind in [
        "Deployment",
        "Runtime",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
    }
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &rendered).unwrap();
    let out = support::kubectl()
        // Every namespaced object names its namespace (the release's, and kube-system for the
        // RoleBinding that reads the front-proxy settings), so no `-n`: kubectl refuses an
        // object of another namespace than the one given.
        .args(["apply", "--dry-run=server", "-f"])
        .arg(file.path())
        .output()
        .unwrap();
    let said = support::ok(&out, "kubectl apply --dry-run=server of the rendered chart");
    assert_eq!(
        said.lines().count(),
        kinds.len(),
        "one line per object, each accepted:\n{said}"
    );
    assert!(
        said.lines().all(|l| l.ends_with("(server dry run)")),
        "{said}"
    );
}
