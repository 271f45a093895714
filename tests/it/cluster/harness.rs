//! The single-node cluster's bring-up for `tests/it/cluster.rs`: the machine-wide lock,
//! `cluster.sh up`/`down`, kubectl and faults on it, and what a failed scenario leaves for
//! diagnosis. The scenarios themselves are in `tests/it/cluster.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;

use kube::Client;

use super::SYSTEM_NS;

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn script() -> PathBuf {
    repo().join("tests/cluster/cluster.sh")
}

/// One cluster per machine: held for the whole run of this binary.
pub fn machine_lock() -> std::fs::File {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/var/tmp/kruntimes-cluster.lock")
        .expect("open /var/tmp/kruntimes-cluster.lock");
    kruntimes::cmd::dev::lock::flock(&file).expect("flock /var/tmp/kruntimes-cluster.lock");
    file
}

pub struct Cluster {
    pub kubeconfig: PathBuf,
    kubectl: PathBuf,
}

impl Cluster {
    pub fn up() -> Result<Self, String> {
        let out = Command::new("bash")
            .arg(script())
            .arg("up")
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script().display()))?;
        if !out.status.success() {
            return Err(format!("{} up failed ({})", script().display(), out.status));
        }
        let kubeconfig = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        // Cached by version: it only prints where the binaries are.
        let build = repo().join("tests/cluster/build.sh");
        let bin = Command::new("bash")
            .arg(&build)
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", build.display()))?;
        if !bin.status.success() {
            return Err(format!("{} failed ({})", build.display(), bin.status));
        }
        let kubectl = PathBuf::from(String::from_utf8_lossy(&bin.stdout).trim()).join("kubectl");
        Ok(Self {
            kubeconfig,
            kubectl,
        })
    }

    pub fn down() {
        let status = Command::new("bash").arg(script()).arg("down").status();
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!("warning: {} down failed: {status:?}", script().display());
        }
    }

    pub async fn client(&self) -> Client {
        kruntimes::cmd::dev::controlplane::client_for(&self.kubeconfig)
            .await
            .unwrap_or_else(|e| panic!("cluster kubeconfig unusable: {e}"))
    }

    /// Runs kubectl and returns its stdout; panics with its stderr when it fails.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let mut cmd = Command::new(&self.kubectl);
        cmd.env("KUBECONFIG", &self.kubeconfig).args(args);
        succeeded(cmd, "kubectl", args)
    }

    /// helm (tests/helm/build.sh) against the cluster: its stdout; panics with its stderr when
    /// it fails.
    pub fn helm(&self, args: &[&str]) -> String {
        let helm = super::support::go_tools("tests/helm/build.sh").join("helm");
        let mut cmd = Command::new(helm);
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .env(
                "HELM_CACHE_HOME",
                std::env::temp_dir().join("kruntimes-helm/cache"),
            )
            .env(
                "HELM_CONFIG_HOME",
                std::env::temp_dir().join("kruntimes-helm/config"),
            )
            .env(
                "HELM_DATA_HOME",
                std::env::temp_dir().join("kruntimes-helm/data"),
            )
            .args(args);
        succeeded(cmd, "helm", args)
    }

    /// Waits until the scheduler Deployment has rolled out and the API server reaches its
    /// gateway (the APIService is Available), 2 minutes at most each.
    pub fn scheduler_rolled_out(&self) {
        self.kubectl(&[
            "-n",
            super::SYSTEM_NS,
            "rollout",
            "status",
            "deployment/kubectl-kruntimes-scheduler",
            "--timeout=120s",
        ]);
        self.kubectl(&[
            "wait",
            "--for=condition=Available",
            "apiservice/v1alpha1.subresources.kruntimes.io",
            "--timeout=120s",
        ]);
    }

    /// `kubectl-kruntimes ARGS` (this build) against the cluster: its output.
    pub fn kruntimes(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_kubectl-kruntimes"))
            .env("KUBECONFIG", &self.kubeconfig)
            .env("NO_COLOR", "1")
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run kubectl-kruntimes {args:?}: {e}"))
    }

    /// kubectl's stdout, or empty when it fails (for polling).
    pub fn kubectl_raw(&self, args: &[&str]) -> String {
        Command::new(&self.kubectl)
            .env("KUBECONFIG", &self.kubeconfig)
            .args(args)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// Runs kubectl, failing or not: whether it succeeded, and its stdout and stderr.
    pub fn kubectl_said(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new(&self.kubectl)
            .env("KUBECONFIG", &self.kubeconfig)
            .args(args)
            .output()
            .expect("run kubectl");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    }

    /// `cluster.sh ARGS` (kill-kubelet, start-kubelet, freeze-pod UID, thaw-pod UID).
    pub fn fault(&self, args: &[&str]) {
        let mut cmd = Command::new("bash");
        cmd.arg(script()).args(args);
        succeeded(cmd, "cluster.sh", args);
    }

    /// What a failed scenario left: Pods, Runs, and the scheduler's last log lines.
    pub fn diagnose(&self) {
        println!(
            "{}",
            self.kubectl_raw(&["get", "pods,runs,runtimes", "-A", "-o", "wide"])
        );
        for pod in self
            .kubectl_raw(&["-n", SYSTEM_NS, "get", "pods", "-o", "name"])
            .lines()
        {
            let log = self.kubectl_raw(&["-n", SYSTEM_NS, "logs", pod, "--tail=30"]);
            println!("--- {pod}\n{log}");
        }
    }
}

/// Runs `cmd` (`what ARGS`) and returns its stdout; panics with its stderr when it fails.
fn succeeded(mut cmd: Command, what: &str, args: &[&str]) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
