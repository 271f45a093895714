//! The release: `release/build.sh` builds a static binary's archive with its checksums, SBOM
//! and krew manifest (valid for krew's own validator); krew installs that archive so that
//! kubectl finds the plugin; and the release workflow builds every platform of the manifest
//! with that script, pointing at this project only.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::ok;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// krew and validate-krew-manifest, built from sigs.k8s.io/krew by tests/krew/build.sh.
fn krew_bin_dir() -> PathBuf {
    support::go_tools("tests/krew/build.sh")
}

fn validate_manifest(manifest: &Path) {
    let out = Command::new(krew_bin_dir().join("validate-krew-manifest"))
        .arg("-manifest")
        .arg(manifest)
        .arg("-skip-install")
        .output()
        .unwrap();
    ok(
        &out,
        &format!("validate-krew-manifest {}", manifest.display()),
    );
}

/// The release workflow builds every platform of the krew manifest with `release/build.sh`
/// and collects them once; nothing in the release points at another project's repository.
#[test]
fn the_release_workflow_builds_every_platform_of_the_manifest_with_the_release_script() {
    let text = std::fs::read_to_string(repo().join(".github/workflows/release.yml")).unwrap();
    let workflow: serde_json::Value = kruntimes::yaml::from_str(&text).unwrap();
    let targets: Vec<&str> = workflow["jobs"]["binaries"]["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["target"].as_str().unwrap())
        .collect();
    assert_eq!(
        targets,
        [
            "x86_64-unknown-linux-gnu",
            "aarch64-unknown-linux-gnu",
            "x86_64-apple-darwin",
            "aarch64-apple-darwin"
        ],
        "the manifest's platforms, in its order"
    );
    assert!(text.contains("bash release/build.sh -o dist --target ${{ matrix.target }}"));
    assert!(text.contains("bash release/build.sh -o dist --collect"));
    assert!(text.contains("platforms: linux/amd64,linux/arm64"));
    for file in [
        "krew/kruntimes.yaml",
        "Dockerfile",
        "tests/cluster/oci.py",
        "charts/kubectl-kruntimes/Chart.yaml",
        "release/build.sh",
    ] {
        let text = std::fs::read_to_string(repo().join(file)).unwrap();
        assert!(
            !text.contains("github.com/kruntimes/kruntimes/")
                && !text.contains("github.com/kruntimes/kruntimes\""),
            "{file} points at the Go project's repository"
        );
    }
    let krew = std::fs::read_to_string(repo().join("krew/kruntimes.yaml")).unwrap();
    assert!(krew.contains(env!("CARGO_PKG_REPOSITORY")));
}

#[test]
fn krew_manifest_is_valid_and_carries_the_crate_version() {
    let manifest = repo().join("krew/kruntimes.yaml");
    validate_manifest(&manifest);
    let text = std::fs::read_to_string(&manifest).unwrap();
    let doc: serde_json::Value = kruntimes::yaml::from_str(&text).unwrap();
    assert_eq!(
        doc["spec"]["version"],
        format!("v{}", env!("CARGO_PKG_VERSION"))
    );
    let platforms: Vec<String> = doc["spec"]["platforms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let l = &p["selector"]["matchLabels"];
            format!(
                "{}/{}",
                l["os"].as_str().unwrap(),
                l["arch"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        platforms,
        ["linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"]
    );
    assert!(
        doc["spec"]["caveats"]
            .as_str()
            .unwrap()
            .contains("kubectl_complete-kruntimes")
    );
    assert!(repo().join("LICENSE").exists());
}

/// `release/build.sh` for this machine's Linux target (the dev profile, shared with the cluster
/// suite's static build): a static binary in the archive, `SHA256SUMS` of it, the SBOM of the
/// crates it links and a krew manifest pointing at this project's release; krew installs that
/// archive and kubectl runs the plugin from it.
#[test]
fn krew_installs_the_release_archive_and_kubectl_runs_the_plugin() {
    let tmp = tempfile::tempdir().unwrap();
    let dist = tmp.path().join("dist");
    let out = Command::new("bash")
        .arg(repo().join("release/build.sh"))
        .arg("-o")
        .arg(&dist)
        .args(["--target", "x86_64-unknown-linux-gnu", "--profile", "dev"])
        .output()
        .unwrap();
    ok(&out, "release/build.sh");
    let manifest = dist.join("kruntimes.yaml");
    validate_manifest(&manifest);
    let archive = dist.join("kubectl-kruntimes-linux-amd64.tar.gz");
    assert!(
        archive.is_file(),
        "release/build.sh built {}",
        archive.display()
    );

    let sums = std::fs::read_to_string(dist.join("SHA256SUMS")).unwrap();
    let out = Command::new("sha256sum")
        .arg("kubectl-kruntimes-linux-amd64.tar.gz")
        .current_dir(&dist)
        .output()
        .unwrap();
    assert_eq!(
        sums,
        ok(&out, "sha256sum"),
        "SHA256SUMS holds the archive's sum"
    );
    let text = std::fs::read_to_string(&manifest).unwrap();
    let doc: serde_json::Value = kruntimes::yaml::from_str(&text).unwrap();
    let home = env!("CARGO_PKG_REPOSITORY");
    assert_eq!(doc["spec"]["homepage"], home);
    let linux = &doc["spec"]["platforms"][0];
    assert_eq!(
        linux["uri"],
        format!(
            "{home}/releases/download/v{}/kubectl-kruntimes-linux-amd64.tar.gz",
            env!("CARGO_PKG_VERSION")
        )
    );
    assert_eq!(linux["sha256"], sums.split_whitespace().next().unwrap());

    let sbom: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dist.join("kubectl-kruntimes.spdx.json")).unwrap())
            .unwrap();
    assert_eq!(sbom["spdxVersion"], "SPDX-2.3");
    let names: BTreeSet<&str> = sbom["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for linked in ["kubectl-kruntimes", "kube", "tokio", "rustls", "gix"] {
        assert!(names.contains(linked), "the SBOM lists {linked}");
    }
    for not_linked in ["criterion", "proptest", "protox"] {
        assert!(
            !names.contains(not_linked),
            "the SBOM lists {not_linked}, which only tests or the build use"
        );
    }

    let unpacked = tmp.path().join("unpacked");
    std::fs::create_dir_all(&unpacked).unwrap();
    let out = Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(&unpacked)
        .output()
        .unwrap();
    ok(&out, "tar -xzf");
    let elf = std::fs::read(unpacked.join("kubectl-kruntimes")).unwrap();
    assert_eq!(
        support::elf_dynamic_needs(&elf),
        (false, 0),
        "the released Linux binary has no interpreter and needs no shared library"
    );

    // The manifest carries the archive's sha256 (krew refuses the install otherwise).
    let root = tmp.path().join("krew-root");
    let out = Command::new(krew_bin_dir().join("krew"))
        .arg("install")
        .arg(format!("--manifest={}", manifest.display()))
        .arg(format!("--archive={}", archive.display()))
        .env("KREW_ROOT", &root)
        .env("KREW_NO_UPGRADE_CHECK", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    ok(&out, "krew install");
    let installed = String::from_utf8_lossy(&out.stderr);
    assert!(
        installed.contains("Installed plugin: kruntimes"),
        "{installed}"
    );
    let store = root
        .join("store/kruntimes")
        .join(format!("v{}", env!("CARGO_PKG_VERSION")));
    for file in ["kubectl-kruntimes", "kubectl_complete-kruntimes", "LICENSE"] {
        assert!(
            store.join(file).exists(),
            "{file} not installed in {}",
            store.display()
        );
    }

    // kubectl finds the plugin through krew's bin directory on PATH.
    let out = Command::new(support::bin_dir().join("kubectl"))
        .args(["kruntimes", "version"])
        .env("PATH", root.join("bin"))
        .output()
        .unwrap();
    let version = ok(&out, "kubectl kruntimes version");
    assert!(
        version.starts_with(&format!(
            "kubectl-kruntimes {} (commit ",
            env!("CARGO_PKG_VERSION")
        )),
        "{version}"
    );
}
