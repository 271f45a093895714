//! `kubectl kruntimes version`: what this binary is (release, git commit and its date, the
//! Rust compiler that built it) and which API versions it speaks, as text, JSON or YAML.
//! The build facts come from `build.rs`; nothing here talks to a cluster.

use anyhow::Context as _;
use serde::Serialize;

use crate::cli::{VersionArgs, VersionFormat};

/// The facts `version` prints.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Info {
    pub version: &'static str,
    /// `git rev-parse HEAD` at build time (`unknown` outside a checkout).
    pub git_commit: &'static str,
    /// The commit's date (`SOURCE_DATE_EPOCH` when set): reproducible, unlike the wall clock.
    pub build_date: &'static str,
    pub rust_version: &'static str,
    /// The custom resources' group/versions this binary reads and writes.
    pub api_versions: Vec<&'static str>,
    /// The kinds of those APIs.
    pub kinds: Vec<&'static str>,
    /// The runtime contract (gRPC package) runtimed speaks to a Pod's runtime server.
    pub runtime_contract: &'static str,
}

/// This binary's facts.
pub fn info() -> Info {
    Info {
        version: env!("CARGO_PKG_VERSION"),
        git_commit: env!("KRUNTIMES_GIT_COMMIT"),
        build_date: env!("KRUNTIMES_BUILD_DATE"),
        rust_version: env!("KRUNTIMES_RUSTC_VERSION"),
        api_versions: vec!["kruntimes.io/v1alpha1"],
        kinds: vec!["Run", "Runtime", "PersistentWorkspace"],
        runtime_contract: "executor.v1",
    }
}

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
    let out = match args.output {
        VersionFormat::Text => text(&info),
        VersionFormat::Json => crate::output::to_json(&info)?,
        VersionFormat::Yaml => crate::output::to_yaml(&info)?,
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
