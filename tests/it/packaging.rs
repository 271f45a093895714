//! Packaging as a kubectl plugin: the committed generated files (completions, the kubectl
//! completion hook, man pages, the CRDs) match what the code generates; the completion hook
//! answers through the real kubectl, with the namespace's Runs for `explain run/<TAB>`; and
//! `deploy/` renders what it should; `src/` has no import cycle ([`layering`]); and every
//! integration test is in the one test binary and runs ([`one_binary`]). The release
//! and krew are `tests/it/release.rs`'.

use testkit as support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use kube::api::{Api, PostParams};
use serde_json::json;

use kruntimes::api::Run;
use support::ok;

/// The import check of `src/`.
mod layering;
/// The integration tests are one binary, and every test of it runs.
mod one_binary;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Files under `dir`, relative to it.
fn files_under(dir: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out
}

#[testkit::test]
fn committed_completions_man_pages_and_crds_match_what_the_code_generates() {
    let tmp = tempfile::tempdir().unwrap();
    ok(
        &Command::new(support::binary())
            .args(["gen", "--out"])
            .arg(tmp.path())
            .output()
            .unwrap(),
        "kubectl-kruntimes gen",
    );
    let generated = files_under(tmp.path());
    assert!(generated.contains(Path::new("deploy/crds/crds.yaml")));
    for dir in ["completions", "man"] {
        let committed: BTreeSet<PathBuf> = files_under(&repo().join(dir))
            .into_iter()
            .map(|p| Path::new(dir).join(p))
            .collect();
        let fresh: BTreeSet<PathBuf> = generated
            .iter()
            .filter(|p| p.starts_with(dir))
            .cloned()
            .collect();
        assert_eq!(
            committed, fresh,
            "{dir}/ holds other files than the code generates; run `cargo xtask gen` and commit"
        );
    }
    for rel in &generated {
        let fresh = std::fs::read(tmp.path().join(rel)).unwrap();
        let committed = std::fs::read(repo().join(rel)).unwrap_or_default();
        assert!(
            fresh == committed,
            "{} differs from what the code generates; run `cargo xtask gen` and commit the result",
            rel.display()
        );
    }
    use std::os::unix::fs::PermissionsExt as _;
    let hook = repo().join("completions/kubectl_complete-kruntimes");
    assert!(
        hook.metadata().unwrap().permissions().mode() & 0o111 != 0,
        "the kubectl completion hook must be executable"
    );
}

#[testkit::test]
fn install_print_is_the_committed_deploy_files() {
    let print = |args: &[&str]| {
        ok(
            &Command::new(support::binary())
                .args(["install", "--print"])
                .args(args)
                .output()
                .unwrap(),
            "install --print",
        )
    };
    let printed = print(&["--crds-only"]);
    let file = |name: &str| std::fs::read_to_string(repo().join("deploy").join(name)).unwrap();
    let committed = format!(
        "{}---\n{}---\n{}---\n{}---\n{}---\n{}---\n{}",
        file("crds/crds.yaml"),
        file("user-roles.yaml"),
        file("crds/runtimed-role.yaml"),
        file("crds/runtimed-policy.yaml"),
        file("run-policy.yaml"),
        file("submitter-policy.yaml"),
        file("submitter-mutation/submitter-mutation.yaml")
    );
    assert_eq!(
        printed, committed,
        "install --print --crds-only differs from deploy/crds/crds.yaml + user-roles.yaml + crds/runtimed-role.yaml + crds/runtimed-policy.yaml + run-policy.yaml + submitter-policy.yaml + submitter-mutation/submitter-mutation.yaml; run `cargo xtask gen`"
    );
    // The whole system: the same, then the scheduler with the release's image.
    let scheduler = file("scheduler.yaml");
    assert_eq!(print(&[]), format!("{committed}---\n{scheduler}"));
    let elsewhere = print(&["--image", "registry.example/k:1"]);
    assert_eq!(
        elsewhere,
        format!(
            "{committed}---\n{}",
            scheduler.replace(kruntimes::cmd::cli::DEFAULT_IMAGE, "registry.example/k:1")
        )
    );
    assert_eq!(elsewhere.matches("registry.example/k:1").count(), 2);
}

/// `kubectl kustomize DIR` with the real kubectl (its built-in kustomize), parsed.
fn kustomize(dir: &Path) -> Vec<serde_json::Value> {
    let out = Command::new(support::bin_dir().join("kubectl"))
        .args(["kustomize"])
        .arg(dir)
        .output()
        .unwrap();
    let rendered = ok(&out, &format!("kubectl kustomize {}", dir.display()));
    kruntimes::util::yaml::documents(&rendered).unwrap()
}

/// Kind, namespace ("" when cluster-scoped) and name of each object.
fn kinds_and_names(objects: &[serde_json::Value]) -> BTreeSet<(String, String, String)> {
    objects
        .iter()
        .map(|o| {
            (
                o["kind"].as_str().unwrap().to_string(),
                o["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                o["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `kubectl kustomize deploy/` (the real kubectl's kustomize) renders everything `install`
/// applies but the CRDs (`deploy/crds/`, rendered here too) plus the scheduler, and no namespace
/// for Runtimes (the example, `deploy/example/`, is its own kustomization), and the
/// scheduler's `KRUNTIMES_IMAGE` (the image Runtime Pods get the binary from) is the image it
/// runs from. `tests/it/cluster.rs` applies it to a real cluster.
#[testkit::test]
fn deploy_kustomization_renders_everything_and_names_one_image() {
    let objects = kustomize(&repo().join("deploy"));
    let ids: BTreeSet<String> = kinds_and_names(&objects)
        .into_iter()
        .map(|(kind, namespace, name)| format!("{kind} {namespace}/{name}"))
        .collect();
    // The CRDs are a kustomization of their own: `kubectl delete -k deploy/` never deletes
    // them (and with them every Run).
    assert!(
        !ids.iter()
            .any(|id| id.starts_with("CustomResourceDefinition ")),
        "kubectl kustomize deploy/ holds CRDs: {ids:?}"
    );
    let crds: BTreeSet<String> = kinds_and_names(&kustomize(&repo().join("deploy/crds")))
        .into_iter()
        .map(|(kind, namespace, name)| format!("{kind} {namespace}/{name}"))
        .collect();
    assert_eq!(
        crds,
        BTreeSet::from([
            "CustomResourceDefinition /actions.kruntimes.io".to_string(),
            "CustomResourceDefinition /persistentworkspaces.kruntimes.io".to_string(),
            "CustomResourceDefinition /runs.kruntimes.io".to_string(),
            "CustomResourceDefinition /runtimes.kruntimes.io".to_string(),
            "CustomResourceDefinition /workflowruns.kruntimes.io".to_string(),
            "CustomResourceDefinition /workflows.kruntimes.io".to_string(),
            "ClusterRole /kubectl-kruntimes-runtimed".to_string(),
            "ClusterRole /kubectl-kruntimes-runtimed-tokenreview".to_string(),
            "ClusterRoleBinding /kubectl-kruntimes-runtimed-tokenreview".to_string(),
            "ValidatingAdmissionPolicy /kubectl-kruntimes-runtimed".to_string(),
            "ValidatingAdmissionPolicyBinding /kubectl-kruntimes-runtimed".to_string(),
        ])
    );
    // runtimed's policy goes with runtimed's ClusterRole, never with the scheduler: `kubectl
    // delete -k deploy/` leaves running Runtime Pods confined (fail closed).
    assert!(
        !ids.iter()
            .any(|id| id.ends_with("/kubectl-kruntimes-runtimed")),
        "kubectl kustomize deploy/ holds runtimed's role or policy: {ids:?}"
    );
    for id in [
        "ClusterRole /kubectl-kruntimes-view",
        "ClusterRole /kubectl-kruntimes-submit",
        "ClusterRole /kubectl-kruntimes-runtime-admin",
        "ValidatingAdmissionPolicy /kubectl-kruntimes-scheduler",
        "ValidatingAdmissionPolicyBinding /kubectl-kruntimes-scheduler",
        "ValidatingAdmissionPolicy /kubectl-kruntimes-run",
        "ValidatingAdmissionPolicyBinding /kubectl-kruntimes-run",
        "Namespace /kubectl-kruntimes",
        "Deployment kubectl-kruntimes/kubectl-kruntimes-scheduler",
        "ClusterRoleBinding /kubectl-kruntimes-scheduler",
    ] {
        assert!(
            ids.contains(id),
            "kubectl kustomize deploy/ lacks {id}: {ids:?}"
        );
    }
    // deploy/ applies on Kubernetes 1.32: the submitter's MutatingAdmissionPolicy (1.36) is a
    // kustomization of its own, next to its ValidatingAdmissionPolicy in deploy/.
    assert!(
        ids.contains("ValidatingAdmissionPolicy /kubectl-kruntimes-submitter")
            && !ids.iter().any(|id| id.starts_with("Mutating")),
        "kubectl kustomize deploy/: {ids:?}"
    );
    let mutation: BTreeSet<String> =
        kinds_and_names(&kustomize(&repo().join("deploy/submitter-mutation")))
            .into_iter()
            .map(|(kind, namespace, name)| format!("{kind} {namespace}/{name}"))
            .collect();
    assert_eq!(
        mutation,
        BTreeSet::from([
            "MutatingAdmissionPolicy /kubectl-kruntimes-submitter".to_string(),
            "MutatingAdmissionPolicyBinding /kubectl-kruntimes-submitter".to_string(),
        ])
    );
    // `kubectl delete -k deploy/` deletes no namespace that holds Runtimes (the scheduler's
    // is its own): the example is a kustomization of its own.
    let namespaces: Vec<&String> = ids
        .iter()
        .filter(|id| id.starts_with("Namespace "))
        .collect();
    assert_eq!(namespaces, ["Namespace /kubectl-kruntimes"]);
    let example: BTreeSet<String> = kinds_and_names(&kustomize(&repo().join("deploy/example")))
        .into_iter()
        .map(|(kind, namespace, name)| format!("{kind} {namespace}/{name}"))
        .collect();
    assert_eq!(
        example,
        BTreeSet::from([
            "Namespace /kubectl-kruntimes-example".to_string(),
            "Runtime kubectl-kruntimes-example/python".to_string(),
        ])
    );
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let env_image = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "KRUNTIMES_IMAGE")
        .map(|e| e["value"].clone());
    assert_eq!(env_image, Some(container["image"].clone()));
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(
        image_references(&objects),
        [
            "ghcr.io/kruntimes/kubectl-kruntimes:0.1.0",
            "ghcr.io/kruntimes/kubectl-kruntimes:0.1.0"
        ]
    );
}

/// Every image reference in `objects`: the `image` of each container, init container and
/// ephemeral container (of a Pod or a Pod template, at any depth) and the value of each
/// `KRUNTIMES_IMAGE` env.
fn image_references(objects: &[serde_json::Value]) -> Vec<String> {
    fn walk(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for key in ["containers", "initContainers", "ephemeralContainers"] {
                    for c in map
                        .get(key)
                        .and_then(|v| v.as_array())
                        .into_iter()
                        .flatten()
                    {
                        out.extend(c["image"].as_str().map(String::from));
                        for env in c["env"].as_array().into_iter().flatten() {
                            if env["name"] == "KRUNTIMES_IMAGE" {
                                out.push(env["value"].as_str().unwrap_or("<none>").to_string());
                            }
                        }
                    }
                }
                map.values().for_each(|v| walk(v, out));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    objects.iter().for_each(|o| walk(o, &mut out));
    out
}

/// Every string in `objects` that names the shipped image with a tag or digest.
fn strings_naming_the_shipped_image(objects: &[serde_json::Value]) -> Vec<String> {
    fn walk(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::String(s)
                if s.starts_with("ghcr.io/kruntimes/kubectl-kruntimes:")
                    || s.starts_with("ghcr.io/kruntimes/kubectl-kruntimes@") =>
            {
                out.push(s.clone());
            }
            serde_json::Value::Object(map) => map.values().for_each(|v| walk(v, out)),
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    objects.iter().for_each(|o| walk(o, &mut out));
    out
}

/// Copies `deploy/` (with its subdirectories) to `to`.
fn copy_deploy(to: &Path) {
    let from = repo().join("deploy");
    for rel in files_under(&from) {
        let dest = to.join(&rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(from.join(&rel), dest).unwrap();
    }
}

/// One `images:` override with `name: ghcr.io/kruntimes/kubectl-kruntimes` moves every image reference of the
/// render, the scheduler's container and its `KRUNTIMES_IMAGE` (which Runtime Pods' init
/// container runs) alike: in an overlay that has `deploy/` as a resource, and in `deploy/`'s
/// own kustomization (what `kustomize edit set image` writes), both rendered by the real
/// kubectl.
#[testkit::test]
fn one_images_override_moves_the_scheduler_and_kruntimes_image_alike() {
    const IMAGES: &str = "images:\n  - name: ghcr.io/kruntimes/kubectl-kruntimes\n    newName: registry.example.com/team/kubectl-kruntimes\n    newTag: v9\n";
    const NEW: &str = "registry.example.com/team/kubectl-kruntimes:v9";

    let overlay = tempfile::tempdir().unwrap();
    copy_deploy(&overlay.path().join("base"));
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        format!("resources:\n  - base\n{IMAGES}"),
    )
    .unwrap();

    let in_place = tempfile::tempdir().unwrap();
    copy_deploy(in_place.path());
    let kustomization = in_place.path().join("kustomization.yaml");
    let own = std::fs::read_to_string(&kustomization).unwrap();
    assert!(
        !own.contains("\nimages:"),
        "deploy/ already overrides an image"
    );
    std::fs::write(&kustomization, format!("{own}{IMAGES}")).unwrap();

    for (layout, dir) in [
        ("an overlay", overlay.path()),
        ("deploy/ itself", in_place.path()),
    ] {
        let objects = kustomize(dir);
        let images = image_references(&objects);
        assert_eq!(
            images,
            [NEW, NEW],
            "with images: in {layout}, the scheduler's image and KRUNTIMES_IMAGE must both be {NEW}"
        );
        let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
        let env = &deployment["spec"]["template"]["spec"]["containers"][0]["env"];
        assert!(
            env.as_array()
                .unwrap()
                .iter()
                .any(|e| e["name"] == "KRUNTIMES_IMAGE" && e["value"] == NEW),
            "with images: in {layout}: {env}"
        );
        assert_eq!(
            strings_naming_the_shipped_image(&objects),
            Vec::<String>::new(),
            "with images: in {layout}, the render still names the shipped image"
        );
    }
}

/// What the Go project kruntimes creates, by (kind, namespace, name): github.com/kruntimes/kruntimes
/// at commit cad3923 as its README installs it, i.e. charts/kruntimes/templates/ as Helm release
/// `kruntimes` in namespace `kruntimes-system` (created with `--create-namespace`; the chart's
/// names are then `kruntimes-…`, templates/_helpers.tpl), the leader-election Leases of
/// cmd/scheduler/main.go and cmd/controller/main.go, and what internal/controller/ creates in
/// every namespace with Runtimes (runtime_controller.go, artifact_cleanup_controller.go),
/// written "*" for any namespace.
const GO_KRUNTIMES_OBJECTS: &[(&str, &str, &str)] = &[
    ("Namespace", "", "kruntimes-system"),
    ("ServiceAccount", "kruntimes-system", "kruntimes-scheduler"),
    ("ServiceAccount", "kruntimes-system", "kruntimes-controller"),
    ("ClusterRole", "", "kruntimes-scheduler"),
    ("ClusterRole", "", "kruntimes-controller"),
    ("ClusterRoleBinding", "", "kruntimes-scheduler"),
    ("ClusterRoleBinding", "", "kruntimes-controller"),
    ("Deployment", "kruntimes-system", "kruntimes-scheduler"),
    ("Deployment", "kruntimes-system", "kruntimes-controller"),
    ("Service", "kruntimes-system", "kruntimes-scheduler-metrics"),
    (
        "Service",
        "kruntimes-system",
        "kruntimes-controller-metrics",
    ),
    ("ServiceMonitor", "kruntimes-system", "kruntimes-metrics"),
    (
        "Lease",
        "kruntimes-system",
        "kruntimes-scheduler.kruntimes.com",
    ),
    (
        "Lease",
        "kruntimes-system",
        "kruntimes-controller.kruntimes.com",
    ),
    ("ServiceAccount", "*", "kruntimes-runtimed"),
    ("Role", "*", "kruntimes-runtimed"),
    ("RoleBinding", "*", "kruntimes-runtimed-kruntimes-runtimed"),
    ("ServiceAccount", "*", "kruntimes-runtime-maintainer"),
    ("Role", "*", "kruntimes-runtime-maintainer"),
    ("RoleBinding", "*", "kruntimes-runtime-maintainer"),
];

/// The Go project's CRDs (charts/kruntimes/crds/ at the same commit). Both projects serve the
/// API group kruntimes.io, so these names are shared on purpose: the one overlap allowed.
const GO_KRUNTIMES_CRDS: &[&str] = &[
    "actions.kruntimes.io",
    "persistentworkspaces.kruntimes.io",
    "runs.kruntimes.io",
    "runtimes.kruntimes.io",
    "workflowruns.kruntimes.io",
    "workflows.kruntimes.io",
];

/// Nothing `kubectl apply -k deploy/` (nor `-k deploy/crds/`) creates is an object the Go project kruntimes creates
/// (it would overwrite it, or its ServiceAccount would fall under our admission policy), except
/// the CRDs of the shared API; and the admission policy matches only our runtimed service
/// account, not the Go project's `kruntimes-runtimed`.
#[testkit::test]
fn deploy_creates_no_object_of_the_go_kruntimes_release() {
    let objects: Vec<_> = kustomize(&repo().join("deploy"))
        .into_iter()
        .chain(kustomize(&repo().join("deploy/crds")))
        .collect();
    let ours = kinds_and_names(&objects);
    let shared: Vec<&(String, String, String)> = ours
        .iter()
        .filter(|(kind, namespace, name)| {
            GO_KRUNTIMES_OBJECTS
                .iter()
                .any(|&(k, ns, n)| k == kind && (ns == "*" || ns == namespace) && n == name)
        })
        .collect();
    assert!(
        shared.is_empty(),
        "deploy/ creates objects of the Go kruntimes release: {shared:?}"
    );
    for (kind, _, name) in &ours {
        // Kubernetes names these two for their group: `<plural>.<group>`, `<version>.<group>`.
        if kind == "CustomResourceDefinition" || kind == "APIService" {
            assert!(name.ends_with(".kruntimes.io"), "{name}");
        } else {
            assert!(
                name.starts_with("kubectl-kruntimes"),
                "{kind} {name}: every name of deploy/ but the CRDs' starts with kubectl-kruntimes"
            );
        }
    }
    let crds: Vec<&String> = ours
        .iter()
        .filter(|(kind, _, _)| kind == "CustomResourceDefinition")
        .map(|(_, _, name)| name)
        .collect();
    assert!(
        crds.iter()
            .all(|name| GO_KRUNTIMES_CRDS.contains(&name.as_str())),
        "a CRD of deploy/ that the Go project does not have: {crds:?}"
    );

    let policy = objects
        .iter()
        .find(|o| {
            o["kind"] == "ValidatingAdmissionPolicy"
                && o["metadata"]["name"] == kruntimes::policy::runtimed::NAME
        })
        .unwrap();
    let conditions = policy["spec"]["matchConditions"].as_array().unwrap();
    assert_eq!(conditions.len(), 1, "{conditions:?}");
    let expression = conditions[0]["expression"].as_str().unwrap();
    assert!(
        expression.contains("== 'kubectl-kruntimes-runtimed'")
            && expression.contains("startsWith('kubectl-kruntimes-runtimed-')")
            && !expression.contains("'kruntimes-runtimed"),
        "the policy must match only the service accounts kubectl-kruntimes-runtimed[-*]: {expression}"
    );
}

#[testkit::test]
fn completion_kubectl_prints_the_hook_and_says_where_to_put_it() {
    let out = Command::new(support::binary())
        .args(["completion", "kubectl"])
        .output()
        .unwrap();
    let script = ok(&out, "completion kubectl");
    assert_eq!(
        script,
        std::fs::read_to_string(repo().join("completions/kubectl_complete-kruntimes")).unwrap()
    );
    let how = String::from_utf8_lossy(&out.stderr);
    assert!(
        how.contains("executable named kubectl_complete-kruntimes in a directory on your PATH"),
        "{how}"
    );
}

/// A PATH directory holding the plugin and its completion hook, as a user installs them.
fn plugin_path() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("kruntimes-plugin-path-")
            .tempdir()
            .unwrap()
            .keep();
        std::os::unix::fs::symlink(support::binary(), dir.join("kubectl-kruntimes")).unwrap();
        std::fs::copy(
            repo().join("completions/kubectl_complete-kruntimes"),
            dir.join("kubectl_complete-kruntimes"),
        )
        .unwrap();
        dir
    })
}

/// `kubectl __complete kruntimes WORDS…`: what kubectl's shell completion asks for when the
/// user presses TAB after `kubectl kruntimes WORDS…`. Returns the candidates (values only)
/// and the directive.
fn kubectl_complete(kubeconfig: &Path, words: &[&str]) -> (Vec<String>, String) {
    let path = format!(
        "{}:{}",
        plugin_path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let started = Instant::now();
    let out = support::kubectl()
        .env("KUBECONFIG", kubeconfig)
        .env("PATH", path)
        .arg("__complete")
        .arg("kruntimes")
        .args(words)
        .output()
        .unwrap();
    let stdout = ok(&out, "kubectl __complete");
    // A figure, not a bound: how long the TAB took on this machine.
    eprintln!(
        "kubectl __complete kruntimes {}: {:.2}s",
        words.join(" "),
        started.elapsed().as_secs_f64()
    );
    let mut lines: Vec<&str> = stdout.lines().collect();
    let directive = lines.pop().unwrap_or_default().to_string();
    let values = lines
        .iter()
        .filter(|l| !l.starts_with("Completion ended"))
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect();
    (values, directive)
}

#[testkit::test]
async fn kubectl_completion_hook_completes_subcommands_flags_and_the_namespaces_runs() {
    let client = support::client().await;
    support::install_crds();
    let ns = support::namespace(&client, "complete").await;
    let other = support::namespace(&client, "complete-other").await;
    for (namespace, name) in [
        (&ns, "train-1"),
        (&ns, "train-2"),
        (&ns, "prep-1"),
        (&other, "elsewhere"),
    ] {
        let run: Run = serde_json::from_value(json!({
            "apiVersion": "kruntimes.io/v1alpha1", "kind": "Run",
            "metadata": {"name": name},
            "spec": {"runtime": "python", "mode": {"task": {"args": ["true"]}}}
        }))
        .unwrap();
        Api::<Run>::namespaced(client.clone(), namespace)
            .create(&PostParams::default(), &run)
            .await
            .unwrap();
    }
    let kubeconfig = support::control_plane().kubeconfig.clone();

    let (subs, _) = kubectl_complete(&kubeconfig, &[""]);
    for sub in [
        "dev",
        "explain",
        "install",
        "scheduler",
        "completion",
        "version",
    ] {
        assert!(subs.contains(&sub.to_string()), "{sub} missing: {subs:?}");
    }
    let (flags, _) = kubectl_complete(&kubeconfig, &["dev", "--"]);
    assert!(flags.contains(&"--demo".to_string()), "{flags:?}");

    let (runs, directive) = kubectl_complete(&kubeconfig, &["explain", "-n", &ns, "run/"]);
    assert_eq!(runs, ["run/prep-1", "run/train-1", "run/train-2"]);
    assert_eq!(directive, ":4");
    let (runs, _) = kubectl_complete(&kubeconfig, &["explain", "-n", &ns, "run/tr"]);
    assert_eq!(runs, ["run/train-1", "run/train-2"]);

    // Runtime names, for `status RUNTIME` and `run -r RUNTIME`.
    for name in ["python", "pytorch", "bash"] {
        let runtime = kruntimes::testing::runtime(name).build();
        let mut runtime = serde_json::to_value(runtime).unwrap();
        runtime["metadata"]["namespace"] = json!(ns);
        Api::<kruntimes::api::Runtime>::namespaced(client.clone(), &ns)
            .create(
                &PostParams::default(),
                &serde_json::from_value(runtime).unwrap(),
            )
            .await
            .unwrap();
    }
    let (runtimes, _) = kubectl_complete(&kubeconfig, &["status", "-n", &ns, "py"]);
    assert_eq!(runtimes, ["python", "pytorch"]);
    let (runtimes, _) = kubectl_complete(&kubeconfig, &["run", "-n", &ns, "-r", ""]);
    assert_eq!(runtimes, ["bash", "python", "pytorch"]);

    // No cluster: no candidates and no error (how long it took is printed, not bounded).
    let dir = tempfile::tempdir().unwrap();
    let unreachable = dir.path().join("kubeconfig");
    support::write_kubeconfig(
        &unreachable,
        "https://127.0.0.1:1",
        &support::control_plane().ca_pem,
        support::ADMIN_TOKEN,
    )
    .unwrap();
    let (runs, directive) = kubectl_complete(&unreachable, &["explain", "run/"]);
    assert!(runs.is_empty(), "{runs:?}");
    assert_eq!(directive, ":4");
}
