//! Packaging as a kubectl plugin: the committed generated files (completions, the kubectl
//! completion hook, man pages, the CRDs) match what the code generates, and the completion
//! hook answers through the real kubectl, with the namespace's Runs for `explain run/<TAB>`.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kube::api::{Api, PostParams};
use serde_json::json;

use kruntimes::api::Run;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
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

#[test]
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
    assert!(generated.contains(Path::new("deploy/crds.yaml")));
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

#[test]
fn install_print_is_the_committed_crds_file() {
    let printed = ok(
        &Command::new(support::binary())
            .args(["install", "--print"])
            .output()
            .unwrap(),
        "install --print",
    );
    assert_eq!(
        printed,
        std::fs::read_to_string(repo().join("deploy/crds.yaml")).unwrap(),
        "deploy/crds.yaml differs from `install --print`; run `cargo xtask gen`"
    );
}

#[test]
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
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "completion took {:?}",
        started.elapsed()
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

#[tokio::test]
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

    // No cluster: no candidates, no error, and quickly.
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
