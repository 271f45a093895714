//! Build-time facts and generated code:
//! - the runtime contract's gRPC code (`proto/executor/v1/runtime.proto`, package
//!   `executor.v1`) into OUT_DIR for `src/runtimed/proto.rs`: messages, the `Runtime` and
//!   `FunctionRuntime` clients and server traits. Pure Rust: protox parses the file, so no
//!   `protoc` is needed on the machine;
//! - what `kubectl kruntimes version` prints: the git commit and its date (from `git`, or
//!   `KRUNTIMES_GIT_COMMIT`/`SOURCE_DATE_EPOCH` in a build without a checkout, else
//!   `unknown`) and the Rust compiler's version.

use std::process::Command;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/executor/v1/runtime.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    build_facts();
    Ok(())
}

/// `cargo:rustc-env` for `src/api/build.rs`.
fn build_facts() {
    println!("cargo:rerun-if-env-changed=KRUNTIMES_GIT_COMMIT");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    // A new commit moves HEAD or the branch it names: build again then.
    if let Some(dir) = output(Command::new("git").args(["rev-parse", "--git-dir"])) {
        for path in ["HEAD", "refs/heads", "packed-refs"] {
            let path = std::path::Path::new(&dir).join(path);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    let commit = std::env::var("KRUNTIMES_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| output(Command::new("git").args(["rev-parse", "HEAD"])))
        .unwrap_or_else(|| "unknown".into());
    let date = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .and_then(|secs| jiff::Timestamp::from_second(secs).ok())
        .map(|t| t.strftime("%Y-%m-%d").to_string())
        .or_else(|| output(Command::new("git").args(["log", "-1", "--format=%cs"])))
        .unwrap_or_else(|| "unknown".into());
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rust = output(Command::new(rustc).arg("--version"))
        .and_then(|v| v.split_whitespace().nth(1).map(str::to_string))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=KRUNTIMES_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=KRUNTIMES_BUILD_DATE={date}");
    println!("cargo:rustc-env=KRUNTIMES_RUSTC_VERSION={rust}");
}

/// A command's trimmed stdout when it succeeds with some.
fn output(command: &mut Command) -> Option<String> {
    let out = command.output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}
