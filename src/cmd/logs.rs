//! `kubectl kruntimes logs run/NAME [-f] [--tail N]`: a Run's output as its runtimed keeps it
//! (`runtimed::runlog`), read through the gateway's aggregated API
//! (`subresources.kruntimes.io`, `runs/log`): whoever may `get` `runs/log` of the Run in that
//! group may read it; the API server checks, and no credential of the caller reaches the Pod.
//! An edge: the log itself is runtimed's.

use anyhow::{Context as _, anyhow, bail};
use futures::AsyncBufReadExt as _;

use crate::api::{Run, RunPhase};
use crate::cmd::cli::{GlobalArgs, LogsArgs};
use crate::cmd::explain::parse_target;

/// Runs the command: parse, check that the Run has run somewhere, stream its log to stdout.
pub async fn exec(global: &GlobalArgs, args: &LogsArgs) -> anyhow::Result<()> {
    let name =
        parse_target(&args.target, args.name.as_deref()).map_err(|e| anyhow!(e.said_by("logs")))?;
    if args.tail < -1 {
        bail!(
            "--tail {}: give a number of lines, or -1 for all of them",
            args.tail
        );
    }
    let target = crate::kubeclient::connect(global).await?;
    let run = target.get_run(&name).await?;
    pod_of(&run, &name)?;
    stream(&target, &name, args.follow, args.tail).await
}

/// Streams the log of Run `name` to stdout, line by line; with `follow`, until its execution
/// ends.
pub async fn stream(
    target: &crate::kubeclient::Target,
    name: &str,
    follow: bool,
    tail: i64,
) -> anyhow::Result<()> {
    let mut body = target
        .subresource_stream(
            name,
            &format!("log{}", query(follow, tail)),
            &format!("run/{name}: cannot read its log"),
        )
        .await?;
    // Line by line, so that a follower sees each line as it comes.
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = body
            .read_until(b'\n', &mut line)
            .await
            .with_context(|| format!("reading the log of run/{name}"))?;
        if n == 0 {
            return Ok(());
        }
        crate::output::write_stdout(&String::from_utf8_lossy(&line))
            .context("writing to stdout")?;
    }
}

/// The Pod whose runtimed keeps the Run's log, or why there is none yet.
pub fn pod_of(run: &Run, name: &str) -> anyhow::Result<String> {
    let phase = run.phase();
    let pod = run.status.as_ref().and_then(|s| s.assigned_pod.clone());
    match pod {
        Some(pod) if phase != RunPhase::Pending => Ok(pod),
        _ => bail!(
            "run/{name} is {} and has not run on a Runtime Pod yet, so it has no log (see kubectl kruntimes explain run/{name})",
            phase.as_str()
        ),
    }
}

/// The query of runtimed's `/logs/<run>` (the kubelet's names for the same options).
fn query(follow: bool, tail: i64) -> String {
    let mut parts = Vec::new();
    if follow {
        parts.push("follow=true".to_string());
    }
    if tail >= 0 {
        parts.push(format!("tailLines={tail}"));
    }
    match parts.is_empty() {
        true => String::new(),
        false => format!("?{}", parts.join("&")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run;

    #[test]
    fn the_query_carries_follow_and_tail() {
        assert_eq!(query(false, -1), "");
        assert_eq!(query(true, -1), "?follow=true");
        assert_eq!(query(true, 20), "?follow=true&tailLines=20");
        assert_eq!(query(false, 0), "?tailLines=0");
    }

    #[test]
    fn a_run_that_never_ran_has_no_log_and_says_why() {
        let pending = run("a").build();
        let err = pod_of(&pending, "a").unwrap_err().to_string();
        assert!(err.starts_with("run/a is Pending and has not run"), "{err}");
        let scheduled = run("b").on("pod-1").build();
        assert_eq!(pod_of(&scheduled, "b").unwrap(), "pod-1");
    }
}
