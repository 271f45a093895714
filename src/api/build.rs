//! What this binary is: its release, the git commit it was built from and that commit's date,
//! the Rust compiler that built it, and the APIs and runtime contract it speaks. The facts
//! come from `build.rs`; the `version` command prints them, `/metrics` exports them. Pure.

use serde::Serialize;

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
