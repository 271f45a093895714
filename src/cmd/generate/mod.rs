//! The files generated from the code and committed to the repository: shell completions and
//! the kubectl completion hook (completions/), man pages (man/), the CLI and metrics
//! references (docs/reference/, [`reference`]) and the CRDs as
//! `install --print` writes them (deploy/crds/crds.yaml), and the Helm chart's copies of the CRDs
//! and of the deploy/ files it renders. The hidden `gen` subcommand (`cargo
//! xtask gen`) writes them; a test regenerates them into a temporary directory and fails when
//! the committed files differ. Output is deterministic: no dates, no paths, no hash order.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::CommandFactory as _;

use crate::cmd::cli::{Cli, GenArgs};

mod reference;

/// Directories whose whole content is generated (stale files in them are removed).
pub const GENERATED_DIRS: &[&str] = &["completions", "man"];

/// The kubectl plugin completion hook. kubectl (1.26 and newer) runs an executable named
/// `kubectl_complete-<plugin>` found on PATH, with the words typed after the plugin name.
pub const KUBECTL_HOOK_NAME: &str = "kubectl_complete-kruntimes";

/// The hook's content: hands the words to the plugin's hidden `__complete`.
pub fn kubectl_hook() -> String {
    format!(
        "#!/bin/sh\n\
         # {KUBECTL_HOOK_NAME}: kubectl (1.26 and newer) runs this to complete `kubectl kruntimes <TAB>`.\n\
         # Put it, executable, in a directory on PATH next to kubectl-kruntimes\n\
         # (`kubectl kruntimes completion kubectl` prints it and says where).\n\
         exec kubectl-kruntimes __complete \"$@\"\n"
    )
}

/// Every generated file: path relative to the repository root, content, executable.
pub fn files() -> anyhow::Result<Vec<(PathBuf, Vec<u8>, bool)>> {
    let mut out = Vec::new();
    for (shell, file) in [
        (clap_complete::Shell::Bash, "kubectl-kruntimes.bash"),
        (clap_complete::Shell::Zsh, "_kubectl-kruntimes"),
        (clap_complete::Shell::Fish, "kubectl-kruntimes.fish"),
    ] {
        out.push((
            Path::new("completions").join(file),
            crate::cmd::cli::completion_script(shell).into_bytes(),
            false,
        ));
    }
    out.push((
        Path::new("completions").join(KUBECTL_HOOK_NAME),
        kubectl_hook().into_bytes(),
        true,
    ));
    for (name, page) in man_pages()? {
        out.push((Path::new("man").join(name), page, false));
    }
    out.push((
        PathBuf::from("docs/reference/cli.md"),
        reference::cli().into_bytes(),
        false,
    ));
    out.push((
        PathBuf::from("docs/reference/metrics.md"),
        reference::metrics()?.into_bytes(),
        false,
    ));
    let crds = crate::cmd::install::crds_yaml()?;
    out.push((
        PathBuf::from("deploy/crds/crds.yaml"),
        crds.clone().into_bytes(),
        false,
    ));
    // The Helm chart renders deploy/ itself: its CRDs and files/ are copies, so the chart and
    // the kustomization cannot drift.
    let chart = Path::new(CHART);
    out.push((chart.join("crds/crds.yaml"), crds.into_bytes(), false));
    for (name, text) in CHART_FILES {
        out.push((
            chart.join("files").join(name),
            text.as_bytes().to_vec(),
            false,
        ));
    }
    Ok(out)
}

/// The Helm chart's directory.
pub const CHART: &str = "charts/kubectl-kruntimes";

/// The deploy/ files the chart renders, copied into its files/.
const CHART_FILES: &[(&str, &str)] = &[
    (
        "scheduler.yaml",
        include_str!("../../../deploy/scheduler.yaml"),
    ),
    ("user-roles.yaml", crate::cmd::install::USER_ROLES),
    ("runtimed-policy.yaml", crate::policy::runtimed::MANIFEST),
    ("run-policy.yaml", crate::policy::run::MANIFEST),
    ("submitter-policy.yaml", crate::policy::submitter::MANIFEST),
    (
        "submitter-mutation.yaml",
        crate::policy::submitter::MUTATION_MANIFEST,
    ),
    (
        "runtimed-role.yaml",
        crate::runtime::identity::CLUSTER_ROLE_MANIFEST,
    ),
];

/// One page per (visible) command: `kubectl-kruntimes.1`, `kubectl-kruntimes-install.1`, …
fn man_pages() -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    fn walk(cmd: &clap::Command, out: &mut Vec<(String, Vec<u8>)>) -> anyhow::Result<()> {
        let man = clap_mangen::Man::new(cmd.clone());
        let mut page = Vec::new();
        man.render(&mut page).context("cannot render a man page")?;
        out.push((man.get_filename(), page));
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub, out)?;
        }
        Ok(())
    }
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut out = Vec::new();
    walk(&cmd, &mut out)?;
    Ok(out)
}

/// `gen`: writes every generated file under `args.out` and removes stale ones.
pub fn exec(args: &GenArgs) -> anyhow::Result<()> {
    let files = files()?;
    for dir in GENERATED_DIRS {
        let dir = args.out.join(dir);
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                let rel = Path::new(dir.file_name().unwrap_or_default()).join(entry.file_name());
                if !files.iter().any(|(p, _, _)| *p == rel) {
                    std::fs::remove_file(entry.path())
                        .with_context(|| format!("cannot remove {}", entry.path().display()))?;
                    println!("removed {}", rel.display());
                }
            }
        }
    }
    for (rel, body, executable) in &files {
        let path = args.out.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        if std::fs::read(&path).ok().as_deref() != Some(body.as_slice()) {
            std::fs::write(&path, body)
                .with_context(|| format!("cannot write {}", path.display()))?;
            println!("wrote {}", rel.display());
        }
        use std::os::unix::fs::PermissionsExt as _;
        let mode = if *executable { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("cannot set the mode of {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_and_covers_every_visible_command() {
        let a = files().unwrap();
        let b = files().unwrap();
        assert_eq!(a, b);
        let names: Vec<String> = a.iter().map(|(p, _, _)| p.display().to_string()).collect();
        for page in [
            "man/kubectl-kruntimes.1",
            "man/kubectl-kruntimes-install.1",
            "man/kubectl-kruntimes-dev.1",
            "man/kubectl-kruntimes-explain.1",
            "man/kubectl-kruntimes-runtimed.1",
            "man/kubectl-kruntimes-scheduler.1",
            "man/kubectl-kruntimes-scheduler-run.1",
            "man/kubectl-kruntimes-completion.1",
            "man/kubectl-kruntimes-version.1",
            "completions/kubectl_complete-kruntimes",
            "deploy/crds/crds.yaml",
        ] {
            assert!(
                names.contains(&page.to_string()),
                "{page} missing: {names:?}"
            );
        }
        assert!(
            !names
                .iter()
                .any(|n| n.contains("gen") || n.contains("__complete"))
        );
    }
}
