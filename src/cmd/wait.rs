//! `kubectl kruntimes wait run/NAME… [--for=phase=P|condition=C[=S]|delete] [--timeout D]`:
//! waits on a watch until each Run meets what `--for` asks (by default, that it Succeeded),
//! as `kubectl wait` does, but gives up on a Run at once when it has ended without meeting
//! it: a failed end exits non-zero with its reason, it never waits out the timeout. Reads only.
//!
//! [`judge`] (in `api::wait`) is the one place a Run is judged; `run --wait` uses
//! [`until_decided`] too. An I/O edge: it decides nothing about how a Run ends.

use std::time::Duration;

use anyhow::{anyhow, bail};
use kube::api::Api;
use kube::runtime::wait::await_condition;

use crate::api::Run;
use crate::api::wait::{For, Verdict, judge};
use crate::cmd::cli::{GlobalArgs, WaitArgs};

/// Waits on a watch until `name` meets `wanted` or never can; the Run as it was then (`None`
/// when deleted). Fails when neither happens within `timeout`.
pub async fn until_decided(
    runs: &Api<Run>,
    name: &str,
    wanted: &For,
    timeout: Duration,
) -> anyhow::Result<(Verdict, Option<Run>)> {
    let decided = |run: Option<&Run>| judge(run, wanted) != Verdict::Waiting;
    let waited = tokio::time::timeout(timeout, await_condition(runs.clone(), name, decided)).await;
    match waited {
        Err(_) => bail!(
            "run/{name} has not {} within {timeout:?}; see kubectl kruntimes explain run/{name}, or wait longer with --timeout",
            wanted.said()
        ),
        Ok(Err(e)) => bail!("watching run/{name}: {e}"),
        Ok(Ok(run)) => Ok((judge(run.as_ref(), wanted), run)),
    }
}

/// Runs the command: waits for every Run at once, prints `run.kruntimes.io/NAME condition met`
/// for each that meets `--for`, and fails (after all of them) naming those that did not.
pub async fn exec(global: &GlobalArgs, args: &WaitArgs) -> anyhow::Result<()> {
    let names =
        crate::cmd::explain::parse_targets("wait", &args.targets).map_err(|e| anyhow!(e))?;
    let target = crate::kubeclient::connect(global).await?;
    let runs: Api<Run> = Api::namespaced(target.client.clone(), &target.namespace);
    if args.wanted != For::Delete {
        // A name that does not exist is an error at once, as kubectl wait's.
        for name in &names {
            target.get_run(name).await?;
        }
    }
    let waits = names
        .iter()
        .map(|name| until_decided(&runs, name, &args.wanted, args.timeout));
    let results = futures::future::join_all(waits).await;
    let mut failed = Vec::new();
    for (name, result) in names.iter().zip(results) {
        match result {
            Ok((Verdict::Met, _)) => {
                let met = match args.wanted {
                    For::Delete => "deleted",
                    _ => "condition met",
                };
                crate::output::write_stdout(&format!("run.kruntimes.io/{name} {met}\n"))?;
            }
            Ok((Verdict::Never(why), _)) => {
                eprintln!("error: run/{name} will never meet --for: {why}");
                failed.push(name.clone());
            }
            Ok((Verdict::Waiting, _)) => unreachable!("until_decided returns a decision"),
            Err(e) => {
                eprintln!("error: {e:#}");
                failed.push(name.clone());
            }
        }
    }
    match failed.as_slice() {
        [] => Ok(()),
        _ => bail!(
            "{} of {} Run(s) did not meet --for: {}",
            failed.len(),
            names.len(),
            failed.join(", ")
        ),
    }
}
