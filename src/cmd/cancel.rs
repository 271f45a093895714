//! `kubectl kruntimes cancel run/NAME…`: sets `spec.cancelRequested` on each Run (one way: the
//! API server refuses setting it back), and with `--wait` waits until each has ended. The
//! scheduler ends a Pending Run, runtimed a Scheduled or Running one (see
//! docs/concepts/retries.md, "Cancel and timeout"). An I/O edge: it decides nothing about how a
//! Run ends.

use std::time::Duration;

use anyhow::{anyhow, bail};
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, Patch};

use crate::api::wait::For;
use crate::api::{Run, patch_params};
use crate::cmd::cli::{CancelArgs, GlobalArgs};
use crate::kubeclient::Target;

/// What asking one Run to cancel found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Asked {
    /// The cancel request is written (or was already).
    Requested { already: bool },
    /// The Run had already ended: nothing to cancel.
    Ended(&'static str),
}

/// Runs the command: request each cancel, then wait for each end with `--wait`. Every Run is
/// tried; the command fails (after all of them) when any could not be cancelled or did not
/// end in time.
pub async fn exec(global: &GlobalArgs, args: &CancelArgs) -> anyhow::Result<()> {
    let target = crate::kubeclient::connect(global).await?;
    // (namespace, name) of each Run named or selected.
    let names: Vec<(String, String)> = match &args.selector {
        None => crate::cmd::explain::parse_targets("cancel", &args.targets)
            .map_err(|e| anyhow!(e))?
            .into_iter()
            .map(|name| (target.namespace.clone(), name))
            .collect(),
        Some(selector) => selected(&target, selector, args.all_namespaces).await?,
    };
    // With -A the namespace is part of what is said about each Run.
    let said = |ns: &str, name: &str| match args.all_namespaces {
        true => format!("{ns}/run.kruntimes.io/{name}"),
        false => format!("run.kruntimes.io/{name}"),
    };
    let mut failures = Vec::new();
    let mut requested = Vec::new();
    for (ns, name) in &names {
        let runs: Api<Run> = Api::namespaced(target.client.clone(), ns);
        match ask(&target, &runs, ns, name).await {
            Ok(Asked::Requested { already }) => {
                let note = if already { " (already)" } else { "" };
                println!("{} cancel requested{note}", said(ns, name));
                requested.push((ns.clone(), name.clone()));
            }
            Ok(Asked::Ended(phase)) => {
                println!(
                    "{} already ended {phase}; nothing to cancel",
                    said(ns, name)
                )
            }
            Err(e) => {
                eprintln!("error: {e:#}");
                failures.push(name.clone());
            }
        }
    }
    if args.wait {
        for (ns, name) in &requested {
            let runs: Api<Run> = Api::namespaced(target.client.clone(), ns);
            match wait_ended(&runs, name, args.timeout).await {
                Ok(phase) => println!("{} {phase}", said(ns, name)),
                Err(e) => {
                    eprintln!("error: {e:#}");
                    failures.push(name.clone());
                }
            }
        }
    }
    match failures.as_slice() {
        [] => Ok(()),
        _ => bail!(
            "{} of {} Run(s) not cancelled: {}",
            failures.len(),
            names.len(),
            failures.join(", ")
        ),
    }
}

/// The Runs `selector` selects, in the namespace or (`all`) every namespace, as (namespace,
/// name); none is an error that says where it looked, as kubectl's "No resources found".
async fn selected(
    target: &Target,
    selector: &str,
    all: bool,
) -> anyhow::Result<Vec<(String, String)>> {
    let runs: Api<Run> = match all {
        true => Api::all(target.client.clone()),
        false => Api::namespaced(target.client.clone(), &target.namespace),
    };
    let list = runs
        .list_metadata(&ListParams::default().labels(selector))
        .await
        .map_err(|e| target.explain_error(e, &format!("listing the Runs of -l {selector}")))?;
    let found: Vec<(String, String)> = list
        .items
        .iter()
        .map(|r| (r.namespace().unwrap_or_default(), r.name_any()))
        .collect();
    if found.is_empty() {
        let place = match all {
            true => "any namespace".to_string(),
            false => format!("namespace {}", target.namespace),
        };
        bail!("no Run in {place} matches -l {selector}; nothing to cancel");
    }
    Ok(found)
}

/// Sets `spec.cancelRequested` on `name` (of namespace `ns`, which `runs` is scoped to) unless
/// it has ended or asks already.
async fn ask(target: &Target, runs: &Api<Run>, ns: &str, name: &str) -> anyhow::Result<Asked> {
    let run = match runs.get_opt(name).await {
        Ok(Some(run)) => run,
        Ok(None) => bail!("run/{name} not found in namespace {ns}"),
        Err(e) => return Err(target.explain_error(e, &format!("reading run/{name}"))),
    };
    let phase = run.phase();
    if phase.is_terminal() {
        return Ok(Asked::Ended(phase.as_str()));
    }
    if run.spec.cancel_requested {
        return Ok(Asked::Requested { already: true });
    }
    let patch = serde_json::json!({"spec": {"cancelRequested": true}});
    runs.patch(name, &patch_params(), &Patch::Merge(&patch))
        .await
        .map_err(|e| {
            target.explain_error(e, &format!("setting spec.cancelRequested on run/{name}"))
        })?;
    Ok(Asked::Requested { already: false })
}

/// Waits (on a watch) until `name` has ended ([`crate::cmd::wait::until_decided`]); its end phase,
/// or `deleted`.
async fn wait_ended(runs: &Api<Run>, name: &str, timeout: Duration) -> anyhow::Result<String> {
    let (_, run) = crate::cmd::wait::until_decided(runs, name, &For::Ended, timeout).await?;
    Ok(run.map_or_else(|| "deleted".to_string(), |r| r.phase().as_str().to_string()))
}
