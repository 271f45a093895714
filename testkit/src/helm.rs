//! helm, built from helm.sh/helm/v4 by `tests/helm/build.sh`, run with a config and cache of
//! its own (never the user's): for the chart's tests on the current and the oldest
//! Kubernetes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The repository's chart.
pub fn chart() -> PathBuf {
    crate::repository().join(kruntimes::cmd::generate::CHART)
}

/// The helm binary.
pub fn bin() -> PathBuf {
    super::go_tools("tests/helm/build.sh").join("helm")
}

/// A helm command with this process's own config, cache and data directories.
pub fn command() -> Command {
    static HOME: OnceLock<tempfile::TempDir> = OnceLock::new();
    let home = HOME.get_or_init(|| tempfile::tempdir().unwrap()).path();
    let mut cmd = Command::new(bin());
    cmd.env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"));
    cmd
}

/// `helm ARGS` against the control plane of `kubeconfig` when given (none otherwise); its
/// stdout. Panics with helm's output when it fails.
pub fn helm(args: &[&str], kubeconfig: Option<&Path>) -> String {
    let mut cmd = command();
    cmd.args(args);
    match kubeconfig {
        Some(k) => cmd.env("KUBECONFIG", k),
        None => cmd.env_remove("KUBECONFIG"),
    };
    let out = cmd.output().expect("run helm");
    assert!(
        out.status.success(),
        "helm {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
