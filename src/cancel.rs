//! `kubectl kruntimes cancel run/NAME…`: sets `spec.cancelRequested` on each Run (one way: the
//! API server refuses setting it back), and with `--wait` waits until each has ended. The
//! scheduler ends a Pending Run, runtimed a Scheduled or Running one (see the README's Cancel
//! and timeout). An I/O edge: it decides nothing about how a Run ends.

use std::time::Duration;

use anyhow::{anyhow, bail};
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, Patch};
use kube::runtime::wait::await_condition;

use crate::api::{Run, patch_params};
use crate::cli::{CancelArgs, GlobalArgs};
use crate::kubeclient::Target;

/// What asking one Run to cancel found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Asked {
    /// The cancel request is written (or was already).
    Requested { already: bool },
    /// The Run had already ended: nothing to cancel.
    Ended(&'static str),
}

/// The Run names of `cancel`'s arguments: `run/A rn/B C…`, or `run A B…` (as `kubectl delete`
/// takes them), or why they are not Runs.
pub fn parse_targets(args: &[String]) -> Result<Vec<String>, String> {
    let is_kind = crate::explain::is_run_kind;
    let valid = crate::api::is_object_name;
    match args {
        [] => Err("cancel needs at least one Run: use run/NAME… or run NAME…".into()),
        [kind, names @ ..] if is_kind(kind) => {
            if names.is_empty() {
                return Err(format!("{kind} needs at least one NAME after it"));
            }
            names
                .iter()
                .map(|n| {
                    valid(n)
                        .then(|| n.clone())
                        .ok_or_else(|| format!("{n:?} is not a Run name"))
                })
                .collect()
        }
        _ => args
            .iter()
            .map(|a| match a.split_once('/') {
                Some((kind, n)) if is_kind(kind) && valid(n) => Ok(n.to_string()),
                None if valid(a) => Ok(a.clone()),
                _ => Err(format!(
                    "{a:?} is not a Run: cancel takes NAME, run/NAME or rn/NAME (or run NAME…)"
                )),
            })
            .collect(),
    }
}

/// Runs the command: request each cancel, then wait for each end with `--wait`. Every Run is
/// tried; the command fails (after all of them) when any could not be cancelled or did not
/// end in time.
pub async fn exec(global: &GlobalArgs, args: &CancelArgs) -> anyhow::Result<()> {
    let target = crate::kubeclient::connect(global).await?;
    // (namespace, name) of each Run named or selected.
    let names: Vec<(String, String)> = match &args.selector {
        None => parse_targets(&args.targets)
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

/// Waits (on a watch) until `name` has ended; its end phase.
async fn wait_ended(runs: &Api<Run>, name: &str, timeout: Duration) -> anyhow::Result<String> {
    let ended = |run: Option<&Run>| run.is_none_or(|r| r.phase().is_terminal());
    let waited = tokio::time::timeout(timeout, await_condition(runs.clone(), name, ended)).await;
    match waited {
        Err(_) => bail!(
            "run/{name} has not ended within {timeout:?}; see kubectl kruntimes explain run/{name}, or wait longer with --timeout"
        ),
        Ok(Err(e)) => bail!("watching run/{name}: {e}"),
        Ok(Ok(None)) => Ok("deleted".to_string()),
        Ok(Ok(Some(run))) => Ok(run.phase().as_str().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn targets_are_run_slash_names_or_a_kind_then_names() {
        assert_eq!(
            parse_targets(&args(&["run/a", "runs/b"])),
            Ok(args(&["a", "b"]))
        );
        assert_eq!(
            parse_targets(&args(&["run", "a", "b"])),
            Ok(args(&["a", "b"]))
        );
        assert!(parse_targets(&[]).unwrap_err().contains("at least one Run"));
        assert!(parse_targets(&args(&["run"])).unwrap_err().contains("NAME"));
        assert_eq!(
            parse_targets(&args(&["pod/a"])).unwrap_err(),
            "\"pod/a\" is not a Run: cancel takes NAME, run/NAME or rn/NAME (or run NAME…)"
        );
        assert_eq!(
            parse_targets(&args(&["a", "rn/b", "run.kruntimes.io/c"])),
            Ok(args(&["a", "b", "c"]))
        );
        assert!(parse_targets(&args(&["Not_A_Name"])).is_err());
        assert!(parse_targets(&args(&["run", "a/b"])).is_err());
    }
}
