//! `kubectl kruntimes invoke run/NAME [--data @FILE|-|TEXT]`: one invocation of a Ready
//! function Run. It reads the Run, checks it is Ready, and posts the data to the Run's
//! `invoke` subresource in the gateway's aggregated API (`subresources.kruntimes.io`): whoever
//! may `create` `runs/invoke` of the Run in that group may invoke it, and nobody else; no
//! credential of the caller reaches the Pod. The handler's output goes to stdout as it came.
//! An edge: the invocation itself is runtimed's (`runtimed::invoke`).

use std::io::Read as _;

use anyhow::{Context as _, anyhow, bail};

use crate::api::{Run, RunPhase};
use crate::cmd::cli::{GlobalArgs, InvokeArgs};
use crate::cmd::explain::parse_target;
use crate::kubeclient::subresource_error;
use crate::runtimed::invoke::MAX_INPUT;

/// Runs the command: parse, check the Run, invoke, print.
pub async fn exec(global: &GlobalArgs, args: &InvokeArgs) -> anyhow::Result<()> {
    let name = parse_target(&args.target, args.name.as_deref())
        .map_err(|e| anyhow!(e.said_by("invoke")))?;
    let input = read_input(args.data.as_deref())?;
    let target = crate::kubeclient::connect(global).await?;
    let run = target.get_run(&name).await?;
    let pod = ready_pod(&run, &name)?;
    let path = target.subresource_path(&name, "invoke");
    let request = http::Request::post(path)
        .header(http::header::CONTENT_TYPE, &args.content_type)
        .body(input)
        .context("building the invocation request")?;
    let output = target.client.request_text(request).await.map_err(|e| {
        subresource_error(
            e,
            &format!("run/{name} on Pod {pod}: the invocation failed"),
        )
    })?;
    crate::output::write_stdout(&output).context("writing to stdout")
}

/// The Pod of a Ready function Run, or why it cannot be invoked.
fn ready_pod(run: &Run, name: &str) -> anyhow::Result<String> {
    if run.spec.mode.function.is_none() {
        bail!("run/{name} is a task Run: only function Runs (spec.mode.function) can be invoked");
    }
    let phase = run.phase();
    if phase != RunPhase::Ready {
        bail!(
            "run/{name} is {}, not Ready: a function Run can be invoked once its runtimed has registered it (see kubectl kruntimes explain run/{name})",
            phase.as_str()
        );
    }
    run.status
        .as_ref()
        .and_then(|s| s.assigned_pod.clone())
        .ok_or_else(|| anyhow!("run/{name} is Ready but names no Runtime Pod"))
}

/// `--data`: `@FILE`, `-` (stdin) or the text itself; at most [`MAX_INPUT`] bytes.
fn read_input(data: Option<&str>) -> anyhow::Result<Vec<u8>> {
    let bytes = match data {
        None => Vec::new(),
        Some("-") => {
            let mut buf = Vec::new();
            std::io::stdin()
                .take(MAX_INPUT as u64 + 1)
                .read_to_end(&mut buf)
                .context("reading --data from stdin")?;
            buf
        }
        Some(file) if file.starts_with('@') => {
            std::fs::read(&file[1..]).with_context(|| format!("reading --data {file}"))?
        }
        Some(text) => text.as_bytes().to_vec(),
    };
    if bytes.len() > MAX_INPUT {
        bail!("--data is more than {MAX_INPUT} bytes; invoke sends at most 1 MiB");
    }
    Ok(bytes)
}
