//! `kubectl kruntimes version`: what this binary is ([`crate::api::build`]: release, git
//! commit and its date, the Rust compiler that built it) and which API versions it speaks, as
//! text, JSON or YAML. Nothing here talks to a cluster.

use anyhow::Context as _;

use crate::api::build::{Info, info};
use crate::cmd::cli::VersionArgs;

/// The text form: the first line as before (`kubectl-kruntimes VERSION`) with the build,
/// then the APIs.
pub fn text(info: &Info) -> String {
    let commit: String = info.git_commit.chars().take(12).collect();
    format!(
        "kubectl-kruntimes {} (commit {commit}, {}, rustc {})\nAPIs: {} ({}); runtime contract {}\n",
        info.version,
        info.build_date,
        info.rust_version,
        info.api_versions.join(", "),
        info.kinds.join(", "),
        info.runtime_contract
    )
}

pub fn exec(args: &VersionArgs) -> anyhow::Result<()> {
    let info = info();
    let printed = crate::output::Printed {
        value: &info,
        names: Vec::new(),
        rows: "",
    };
    let out = match crate::output::render(&args.output, &printed)? {
        Some(machine) => machine,
        None => text(&info),
    };
    crate::output::write_stdout(&out).context("writing to stdout")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_starts_with_the_release_and_names_the_apis() {
        let text = text(&info());
        assert!(text.starts_with(&format!(
            "kubectl-kruntimes {} (commit ",
            env!("CARGO_PKG_VERSION")
        )));
        assert!(text.contains("rustc 1."), "{text}");
        assert!(text.contains("APIs: kruntimes.io/v1alpha1 (Run, Runtime, PersistentWorkspace)"));
    }
}
