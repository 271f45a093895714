//! The release: `release/build.sh` builds a static binary's archive with its checksums, SBOM
//! and krew manifest (valid for krew's own validator); krew installs that archive so that
//! kubectl finds the plugin; and the release workflow builds every platform of the manifest
//! with that script, pointing at this project only.

use testkit as support;

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

/// Every image reference of kubectl-kruntimes in the repository (deploy/, the chart, examples/,
/// the docs and README, `install`'s default) is one the release workflow pushes: the
/// workflow's image name with a tag its metadata step makes of this version (`X.Y.Z`,
/// `vX.Y.Z`, `X.Y`), or an obvious placeholder (`REGISTRY/…`, `registry.example…`). The
/// workflow runs on GitHub runners that exist, builds the image from the release's binaries,
/// signs it and attests the archives and the image.
#[testkit::test]
fn every_image_reference_is_one_the_release_workflow_pushes() {
    let text = std::fs::read_to_string(repo().join(".github/workflows/release.yml")).unwrap();
    let workflow: serde_json::Value = kruntimes::util::yaml::from_str(&text).unwrap();
    let image = workflow["env"]["IMAGE"].as_str().unwrap();
    let version = env!("CARGO_PKG_VERSION");
    let minor = version.rsplit_once('.').unwrap().0;
    let tags = workflow["jobs"]["image"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "meta")
        .unwrap()["with"]["tags"]
        .as_str()
        .unwrap()
        .to_string();
    let mut pushed = Vec::new();
    for line in tags.lines().map(str::trim).filter(|l| !l.is_empty()) {
        pushed.push(match line {
            "type=semver,pattern={{version}}" => version.to_string(),
            "type=ref,event=tag" => format!("v{version}"),
            "type=semver,pattern={{major}}.{{minor}}" => minor.to_string(),
            other => panic!("a tag rule this test does not know: {other}"),
        });
    }
    assert!(pushed.contains(&version.to_string()), "{pushed:?}");

    // Runners GitHub hosts (macos-13 was retired in 2025).
    let hosted = [
        "ubuntu-24.04",
        "ubuntu-24.04-arm",
        "macos-15",
        "macos-15-intel",
        "macos-14",
    ];
    for (name, job) in workflow["jobs"].as_object().unwrap() {
        let runs_on = job["runs-on"].as_str().unwrap();
        let runners: Vec<String> = match runs_on {
            "${{ matrix.os }}" => job["strategy"]["matrix"]["include"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["os"].as_str().unwrap().to_string())
                .collect(),
            other => vec![other.to_string()],
        };
        for runner in runners {
            assert!(
                hosted.contains(&runner.as_str()),
                "job {name} runs on {runner}"
            );
        }
    }
    assert!(text.contains("file: release/Dockerfile") && text.contains("context: dist"));
    assert!(text.contains("cosign sign --yes"));
    assert_eq!(text.matches("actions/attest-build-provenance").count(), 2);
    assert!(text.contains("helm push \"dist/kubectl-kruntimes-${GITHUB_REF_NAME#v}.tgz\" oci://ghcr.io/kruntimes/charts"));

    let mut files = vec![
        repo().join("README.md"),
        repo().join("charts/kubectl-kruntimes/values.yaml"),
    ];
    let mut dirs = vec![
        repo().join("deploy"),
        repo().join("examples"),
        repo().join("docs"),
    ];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "md") {
                files.push(path);
            }
        }
    }
    let mut references: Vec<(String, String)> = vec![(
        "install's default".into(),
        kruntimes::cmd::cli::DEFAULT_IMAGE.to_string(),
    )];
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let at = file.strip_prefix(repo()).unwrap().display().to_string();
        let mut from = 0;
        while let Some(i) = text[from..].find("kubectl-kruntimes:") {
            let colon = from + i + "kubectl-kruntimes".len();
            let is_name = |c: char| c.is_ascii_alphanumeric() || "./_-".contains(c);
            let start = text[..colon]
                .rfind(|c: char| !is_name(c))
                .map_or(0, |j| j + 1);
            let end = text[colon + 1..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c)))
                .map_or(text.len(), |j| colon + 1 + j);
            // `system:serviceaccount:kubectl-kruntimes:NAME` and a word ending in a colon
            // name no image.
            let account = start > 0 && text[..start].ends_with(':');
            if !account && end > colon + 1 {
                references.push((at.clone(), text[start..end].to_string()));
            }
            from = end.max(colon + 1);
        }
    }
    let values =
        std::fs::read_to_string(repo().join("charts/kubectl-kruntimes/values.yaml")).unwrap();
    assert!(
        values.contains(&format!("repository: {image}\n")),
        "the chart's image.repository"
    );
    let chart =
        std::fs::read_to_string(repo().join("charts/kubectl-kruntimes/Chart.yaml")).unwrap();
    assert!(
        chart.contains(&format!("appVersion: \"{version}\"")),
        "the chart's default tag"
    );
    assert!(references.len() >= 5, "{references:?}");
    let bad: Vec<String> = references
        .iter()
        .filter(|(_, r)| {
            let tag = r.rsplit_once(':').map_or("", |(_, t)| t);
            let placeholder = r.starts_with("REGISTRY/")
                || r.starts_with("registry.example")
                || tag == "X.Y.Z"
                || tag == "TAG";
            let released = r
                .strip_prefix(&format!("{image}:"))
                .is_some_and(|tag| pushed.iter().any(|p| p == tag));
            !placeholder && !released
        })
        .map(|(at, r)| format!("{at}: {r}"))
        .collect();
    assert!(
        bad.is_empty(),
        "image references the release does not push (it pushes {image}:{pushed:?}):\n{}",
        bad.join("\n")
    );
}

/// The release workflow builds every platform of the krew manifest with `release/build.sh`
/// and collects them once; nothing in the release points at another project's repository.
#[testkit::test]
fn the_release_workflow_builds_every_platform_of_the_manifest_with_the_release_script() {
    let text = std::fs::read_to_string(repo().join(".github/workflows/release.yml")).unwrap();
    let workflow: serde_json::Value = kruntimes::util::yaml::from_str(&text).unwrap();
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

#[testkit::test]
fn krew_manifest_is_valid_and_carries_the_crate_version() {
    let manifest = repo().join("krew/kruntimes.yaml");
    validate_manifest(&manifest);
    let text = std::fs::read_to_string(&manifest).unwrap();
    let doc: serde_json::Value = kruntimes::util::yaml::from_str(&text).unwrap();
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
#[testkit::test]
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
    let doc: serde_json::Value = kruntimes::util::yaml::from_str(&text).unwrap();
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

    // One SBOM per archive, of that target's crates only.
    let arch = match std::env::consts::ARCH {
        "aarch64" => "arm64",
        _ => "amd64",
    };
    let sbom: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dist.join(format!("kubectl-kruntimes-linux-{arch}.spdx.json"))).unwrap(),
    )
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
    for other_platform in ["security-framework", "core-foundation", "windows-sys"] {
        assert!(
            !names.contains(other_platform),
            "the Linux SBOM lists {other_platform}, which only another platform links"
        );
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
